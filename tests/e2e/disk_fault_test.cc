// A full disk and a read-only data directory, with the real parityd: writes fail with ENOSPC or
// EROFS through an LD_PRELOAD shim (tests/e2e/fault_fs.cc) switched on and off by a file. Checks that
// new work is refused with the operating system's reason, the daemon stays up and answers
// queries, an upload hit mid-way loses none of the items it had acknowledged (they are all
// there after a SIGKILL and restart, with PRAGMA integrity_check ok), and work resumes once the
// disk is writable again.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "common/base/file_util.h"
#include "common/base/json.h"
#include "gtest/gtest.h"
#include "server/storage/store.h"
#include "tests/test_util.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

class DiskFaultTest : public testing::ScratchTest,
                      public ::testing::WithParamInterface<const char*> {
 protected:
  // Switches the fault on ("ENOSPC", "EROFS") or off (nullptr).
  void Fault(const char* kind) {
    if (kind == nullptr) {
      fs::remove(dir_ / "fault");
    } else {
      ASSERT_TRUE(WriteStringToFile((dir_ / "fault").string(), kind).ok());
    }
  }

  void StartDaemon(testing::Daemon& d) {
    d.SetEnv("LD_PRELOAD", testing::kBin + "/tests/libparity_fault_fs.so");
    d.SetEnv("PARITY_FAULT_FILE", (dir_ / "fault").string());
    // A sanitizer runtime wants to come first among the loaded libraries; the shim only wraps
    // libc calls, so the order does not matter here.
    const char* asan = std::getenv("ASAN_OPTIONS");
    d.SetEnv("ASAN_OPTIONS", std::string(asan != nullptr ? asan : "") + ":verify_asan_link_order=0");
    d.Start();
  }

  testing::Output Agent(const std::string& args) { return testing::RunAgent(args); }

  // The runs the daemon lists, by run_id: (item_count, complete).
  std::map<std::string, std::pair<int64_t, bool>> Runs(const testing::Daemon& d) {
    testing::Output runs = testing::Run("client/parity", "runs --json --server " + d.Address(), "", false);
    EXPECT_EQ(runs.code, 0) << runs.text << "\nparityd's log:\n" << d.Log();
    std::map<std::string, std::pair<int64_t, bool>> out;
    absl::StatusOr<Json> j = ParseJson(runs.text);
    if (!j.ok()) return out;
    for (const Json& r : j->as_array()) {
      out[r.Find("run_id")->as_string()] = {r.Find("item_count")->as_int(), r.Find("complete")->as_bool()};
    }
    return out;
  }
};

TEST_P(DiskFaultTest, RefusesWorkWithTheReasonAndLosesNothingAcknowledged) {
  const std::string kind = GetParam();
  const std::string reason = kind == "ENOSPC" ? "No space left on device" : "Read-only file system";
  testing::Daemon d(dir_ / "daemon");
  StartDaemon(d);
  testing::WriteNpyDump(dir_ / "golden", -1);
  testing::WriteNpyDump(dir_ / "target", 7, 1);
  testing::WriteNpyDump(dir_ / "target2", 7, 2);
  testing::Output g = Agent("upload " + (dir_ / "golden").string() + " --server " + d.Address() +
                            " --project disk --role golden --run-id-file " + (dir_ / "g").string());
  ASSERT_EQ(g.code, 0) << g.text;
  const std::string golden = testing::ReadFirstWord(dir_ / "g");

  // 1. Faulty before the upload starts: refused with the reason; the daemon stays up.
  Fault(kind.c_str());
  testing::Output refused = Agent("upload " + (dir_ / "target").string() + " --server " + d.Address() +
                                  " --project disk --role target --against " + golden + " --retry-seconds 0");
  EXPECT_EQ(refused.code, 2) << refused.text;
  EXPECT_NE(refused.text.find(reason), std::string::npos) << refused.text;
  EXPECT_EQ(Runs(d).size(), 1u);  // queries go on; nothing half-made is listed
  Fault(nullptr);

  // 2. The fault hits in the middle of an upload: items acknowledged before it stay, items hit
  // are rejected with the reason, the upload goes on. It is placed by counting the daemon's file
  // writes from the moment it is armed (the shim's skip/fail), not by time: the upload starts
  // with the daemon idle, its first writes go through, a run of them fails, the rest go through.
  // Throttled (about 2.6 s), so that the store commits a few items at a time.
  // At 60 the run exists and items are being stored (about 3 writes an item); 20 failing writes
  // reject about 10 items (measured: skip 60-150 with fail 40 rejected 20 of 40, in every run).
  Fault((kind + " skip=60 fail=20").c_str());
  testing::Output mid = Agent("upload " + (dir_ / "target").string() + " --server " + d.Address() +
                              " --project disk --role target --against " + golden +
                              " --no-dedup --max-bytes-per-second 1000000 --retry-seconds 0 --json");
  Fault(nullptr);
  EXPECT_EQ(mid.code, 2) << mid.text;
  EXPECT_NE(mid.text.find(reason), std::string::npos) << mid.text;
  const size_t brace = mid.text.find("{\n");
  ASSERT_NE(brace, std::string::npos) << mid.text;
  absl::StatusOr<Json> mj = ParseJson(mid.text.substr(brace));
  ASSERT_TRUE(mj.ok()) << mid.text;
  const std::string run = mj->Find("run_id")->as_string();
  const int64_t acked = mj->Find("items_acknowledged")->as_int();
  const int64_t rejected = mj->Find("items_rejected")->as_int();
  EXPECT_GT(acked, 0) << mid.text;
  EXPECT_GT(rejected, 0) << mid.text;
  EXPECT_EQ(acked + rejected, 40) << mid.text;

  // 3. Writable again: a new upload completes with its verdicts.
  testing::Output after = Agent("upload " + (dir_ / "target2").string() + " --server " + d.Address() +
                                " --project disk --role target --against " + golden + " --json");
  EXPECT_EQ(after.code, 1) << after.text;  // tensor 7 differs: a precision failure, not an error
  EXPECT_NE(after.text.find("\"items_acknowledged\": 40"), std::string::npos) << after.text;

  // 4. Nothing acknowledged is lost across a SIGKILL; the database is intact.
  EXPECT_EQ(d.Kill(SIGKILL), -SIGKILL);
  StartDaemon(d);
  std::map<std::string, std::pair<int64_t, bool>> runs = Runs(d);
  EXPECT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[golden], std::make_pair(int64_t{40}, true));
  EXPECT_EQ(runs[run].first, acked) << "the run hit mid-way holds exactly its acknowledged items";
  EXPECT_EQ(d.Kill(SIGTERM), 0);
  StoreOptions so;
  so.path = (dir_ / "daemon" / "data" / "parity.db").string();
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(so);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE((*store)->IntegrityCheck().ok());
  const std::string log = d.Log();
  EXPECT_NE(log.find("level=warning component=ingest msg=\"item rejected\""), std::string::npos) << log;
  EXPECT_NE(log.find("level=warning component=ingest msg=\"upload ended with an error\""), std::string::npos) << log;
  EXPECT_NE(log.find(reason), std::string::npos) << "the daemon's log names the failure:\n" << log;
}

INSTANTIATE_TEST_SUITE_P(Faults, DiskFaultTest, ::testing::Values("ENOSPC", "EROFS"));

}  // namespace
}  // namespace parity
