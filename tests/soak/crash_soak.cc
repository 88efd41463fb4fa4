// Opt-in crash soak (not in ctest; run build/tests/crash_soak). Rounds of: several agents
// uploading target runs concurrently (throttled so the uploads overlap the kill), parityd killed
// with SIGKILL at a random moment, restarted on the same port, agents reconnecting and resuming.
// Checks after every round: each agent ends with the results of an uninterrupted run (40 items,
// 39 PASS, 1 FAIL), every run holds exactly its 40 items. At the end: PRAGMA integrity_check is
// ok and, after a restart's collection, every spool file is referenced by some item.
//   PARITY_SOAK_ROUNDS (default 5), PARITY_SOAK_AGENTS (default 4), PARITY_SOAK_SEED (default 1)
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "common/base/file_util.h"
#include "common/base/json.h"
#include "common/formats/npy.h"
#include "gtest/gtest.h"
#include "server/storage/store.h"
#include "tests/test_util.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v ? std::atoi(v) : fallback;
}

TEST(CrashSoak, AcknowledgedWorkSurvivesSigkillDuringConcurrentUploads) {
  const int rounds = EnvInt("PARITY_SOAK_ROUNDS", 5), agents = EnvInt("PARITY_SOAK_AGENTS", 4);
  std::mt19937 rng(EnvInt("PARITY_SOAK_SEED", 1));
  const fs::path dir = fs::temp_directory_path() / ("parity_soak_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  testing::Daemon d(dir / "daemon");
  d.Start();
  testing::WriteNpyDump(dir / "golden", -1);
  testing::Output g = testing::Run("client/parity-agent", "upload " + (dir / "golden").string() +
                                                             " --server " + d.Address() +
                                                             " --project soak --role golden --run-id-file " +
                                                             (dir / "g").string());
  ASSERT_EQ(g.code, 0) << g.text;
  const std::string golden = testing::ReadFirstWord(dir / "g");
  int kills = 0, total_resumed = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<testing::Output> outs(agents);
    const std::string address = d.Address();  // read before the restart rewrites it
    std::vector<std::thread> threads;
    for (int a = 0; a < agents; ++a) {
      const fs::path dump = dir / ("target_" + std::to_string(round) + "_" + std::to_string(a));
      testing::WriteNpyDump(dump, 7 + a, 1 + round * agents + a);
      threads.emplace_back([&, a, dump] {
        outs[a] = testing::Run("client/parity-agent",
                               "upload " + dump.string() + " --server " + address +
                                   " --project soak --role target --against " + golden +
                                   " --no-dedup --max-bytes-per-second 1500000 --retry-seconds 120");
      });
    }
    std::uniform_int_distribution<int> when(100, 1600);
    const int ms = when(rng);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    EXPECT_EQ(d.Kill(SIGKILL), -SIGKILL);
    ++kills;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    d.Start();
    for (std::thread& t : threads) t.join();
    int resumed = 0;
    for (int a = 0; a < agents; ++a) {
      resumed += outs[a].text.find(": resuming, the server holds ") != std::string::npos;
      EXPECT_EQ(outs[a].code, 1) << "round " << round << " agent " << a << " (kill after " << ms << " ms)\n"
                                 << outs[a].text;
      EXPECT_NE(outs[a].text.find("done: 39 pass, 0 warn, 1 fail, 0 error, 0 unmatched"),
                std::string::npos)
          << "round " << round << " agent " << a << "\n" << outs[a].text;
    }
    std::printf("round %d: SIGKILL after %d ms; %d agents finished, %d of them resumed an upload\n", round,
                ms, agents, resumed);
    total_resumed += resumed;
  }
  // Every run holds exactly its 40 items, complete.
  testing::Output runs = testing::Run("client/parity", "runs --json --limit 1000 --server " + d.Address(), "", false);
  absl::StatusOr<Json> rj = ParseJson(runs.text);
  ASSERT_TRUE(rj.ok()) << runs.text;
  EXPECT_EQ(rj->as_array().size(), static_cast<size_t>(1 + rounds * agents));
  for (const Json& r : rj->as_array()) {
    EXPECT_EQ(r.Find("item_count")->as_int(), 40) << r.Dump();
    EXPECT_TRUE(r.Find("complete")->as_bool()) << r.Dump();
  }
  // A last restart collects orphans; then integrity and spool references are checked offline.
  EXPECT_EQ(d.Kill(SIGKILL), -SIGKILL);
  d.Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(d.Kill(SIGTERM), 0);
  StoreOptions so;
  so.path = (dir / "daemon" / "data" / "parity.db").string();
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(so);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE((*store)->IntegrityCheck().ok());
  absl::StatusOr<std::vector<std::string>> referenced = (*store)->ReferencedBlobs();
  ASSERT_TRUE(referenced.ok());
  const std::set<std::string> keep(referenced->begin(), referenced->end());
  int files = 0, orphans = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir / "daemon" / "data" / "spool")) {
    if (!e.is_regular_file()) continue;
    ++files;
    if (!keep.count(e.path().filename().string())) {
      ++orphans;
      ADD_FAILURE() << "orphaned spool file " << e.path();
    }
  }
  std::printf("%d rounds, %d SIGKILLs, %d agents each, %d resumed uploads; %d spool files, %d orphans; "
              "integrity ok\n", rounds, kills, agents, total_resumed, files, orphans);
  EXPECT_GT(total_resumed, 0);  // the kills landed during uploads
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace parity
