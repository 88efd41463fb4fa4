// Several parityd on one PostgreSQL store and one S3 bucket (tests/postgres.sh and tests/s3.sh,
// real servers, never mocks), with the real binaries: a golden run uploaded to one daemon and its
// target to another give the verdicts and the exported table of a single daemon, and every daemon
// answers queries the same.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/json.h"
#include "gtest/gtest.h"
#include "server/storage/s3.h"
#include "tests/test_postgres.h"
#include "tests/test_s3.h"
#include "tests/test_util.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using testing::Daemon;
using testing::kSample;

class ClusterTest : public testing::ScratchTest {
 protected:
  void SetUp() override {
    ScratchTest::SetUp();
    ASSERT_FALSE(testing::S3Endpoint().empty()) << "no test S3 server";
    absl::StatusOr<std::string> uri = testing::NewPostgresDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status();
    store_ = *uri;
    blobs_ = absl::StrCat("s3://parity/", prefix_, "?endpoint=", testing::S3Endpoint());
  }
  // A daemon of the deployment, in its own data directory. Tensors always go to blobs (none
  // inline in the rows), so that every pair's bytes cross the bucket.
  std::unique_ptr<Daemon> Member(const std::string& name, std::vector<std::string> extra = {}) {
    extra.insert(extra.end(), {"--store=" + store_, "--blobs=" + blobs_, "--inline-max-bytes=0"});
    auto d = std::make_unique<Daemon>(dir_ / name, extra);
    d->SetEnv("AWS_ACCESS_KEY_ID", "S3RVER");
    d->SetEnv("AWS_SECRET_ACCESS_KEY", "S3RVER");
    return d;
  }
  static std::string Csv(const Daemon& d, const std::string& job_id) {
    testing::Output csv = testing::Run("client/parity", "export " + job_id + " --format csv --server " + d.Address(),
                                       "", /*stderr_too=*/false);
    EXPECT_EQ(csv.code, 0) << csv.text;
    return csv.text;
  }
  static std::string OnlyJobId(const Daemon& d) {
    testing::Output jobs = testing::Run("client/parity", "jobs --server " + d.Address() + " --project demo --json", "",
                                        /*stderr_too=*/false);
    absl::StatusOr<Json> list = ParseJson(jobs.text);
    if (!list.ok() || !list->is_array() || list->as_array().size() != 1) {
      ADD_FAILURE() << jobs.text;
      return "";
    }
    const Json* id = list->as_array()[0].Find("job_id");
    return id != nullptr && id->is_string() ? id->as_string() : "";
  }
  // The reference: the sample's job on one daemon on its embedded store, exported.
  std::string SingleDaemonCsv() {
    Daemon single(dir_ / "single", {"--inline-max-bytes=0"});
    single.Start();
    const std::string to_single = " --server " + single.Address() + " --project demo";
    EXPECT_EQ(testing::RunAgent("upload " + kSample + "/golden" + to_single + " --role golden --label build=7").code, 0);
    testing::RunAgent("upload " + kSample + "/target" + to_single + " --role target --against-label build=7");
    return Csv(single, OnlyJobId(single));
  }
  const std::string prefix_ = absl::StrCat(
      "t", ::getpid(), "-", ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::string store_, blobs_;
};

TEST_F(ClusterTest, AGoldenOnOneDaemonAndItsTargetOnAnotherGiveOneDaemonsAnswers) {
  const std::string want = SingleDaemonCsv();
  ASSERT_NE(want.find("Functional.linear.1.forward.output.0"), std::string::npos) << want;

  std::unique_ptr<Daemon> a = Member("a"), b = Member("b");
  a->Start();
  b->Start();
  testing::Output g = testing::RunAgent("upload " + kSample + "/golden --server " + a->Address() +
                                        " --project demo --role golden --label build=7");
  ASSERT_EQ(g.code, 0) << g.text << a->Log();
  // The target goes to the other daemon, whose job reads the golden tensors from the bucket.
  testing::Output t = testing::RunAgent("upload " + kSample + "/target --server " + b->Address() +
                                        " --project demo --role target --against-label build=7");
  EXPECT_EQ(t.code, 1) << t.text << b->Log();
  EXPECT_NE(t.text.find("done: 12 pass, 0 warn, 5 fail"), std::string::npos) << t.text << b->Log();
  EXPECT_NE(t.text.find("First culprit: Functional.linear.1.forward"), std::string::npos) << t.text;
  const std::string job = OnlyJobId(*b);
  ASSERT_FALSE(job.empty());
  EXPECT_EQ(OnlyJobId(*a), job);
  EXPECT_EQ(Csv(*a, job), want);
  EXPECT_EQ(Csv(*b, job), want);
  // Every tensor's bytes are in the bucket; b holds copies of a's.
  absl::StatusOr<std::unique_ptr<S3Client>> s3 = S3Client::Open(testing::TestS3Options(prefix_ + "/"));
  ASSERT_TRUE(s3.ok());
  absl::StatusOr<std::vector<std::string>> objects = (*s3)->List("");
  ASSERT_TRUE(objects.ok()) << objects.status();
  size_t b_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "b" / "data" / "spool")) {
    if (e.is_regular_file() && e.path().parent_path().filename() != "tmp") ++b_files;
  }
  EXPECT_GE(objects->size(), 20u);
  EXPECT_EQ(b_files, objects->size()) << "b uploaded the target's blobs and fetched the golden's";
}

TEST_F(ClusterTest, ADaemonKilledMidJobIsReplacedAndTheJobEndsAsIfUninterrupted) {
  const std::string want = SingleDaemonCsv();

  const std::vector<std::string> fast_leases = {"--job-lease-seconds=2", "--job-takeover-wait-seconds=30"};
  std::unique_ptr<Daemon> a = Member("a", fast_leases), b = Member("b", fast_leases), c = Member("c", fast_leases);
  a->Start();
  b->Start();
  c->Start();
  ASSERT_EQ(testing::RunAgent("upload " + kSample + "/golden --server " + a->Address() +
                              " --project demo --role golden --label build=7").code, 0);
  // The target reaches b first (gRPC's pick_first over the two addresses), slowly enough to be
  // cut in the middle; its agent reconnects to the next address, c, and resumes there.
  testing::Output t;
  std::thread agent([&] {
    t = testing::RunAgent("upload " + kSample + "/target --server ipv4:" + b->Address() + "," + c->Address() +
                          " --project demo --role target --against-label build=7 --retry-seconds 60"
                          " --max-bytes-per-second 1000");
  });
  // Killed once some results of the job are stored (b's live record says how many).
  std::string job;
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    testing::Output jobs = testing::Run("client/parity", "jobs --server " + b->Address() + " --project demo --json", "",
                                        /*stderr_too=*/false);
    absl::StatusOr<Json> list = ParseJson(jobs.text);
    if (!list.ok() || !list->is_array() || list->as_array().empty()) continue;
    const Json* done = list->as_array()[0].Find("pairs_done");
    const Json* state = list->as_array()[0].Find("state");
    if (done != nullptr && done->is_number() && done->as_double() >= 3 && state != nullptr &&
        state->is_string() && state->as_string() == "running") {
      job = list->as_array()[0].Find("job_id")->as_string();
      break;
    }
  }
  if (job.empty()) {
    agent.join();
    FAIL() << "the job never stored 3 results while running\n" << b->Log();
  }
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_EQ(b->Kill(SIGKILL), -SIGKILL);
  auto since_kill = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count(); };
  double taken_s = -1;
  for (int i = 0; i < 600 && taken_s < 0; ++i) {
    if (c->Log().find("job taken over") != std::string::npos) taken_s = since_kill();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  agent.join();
  // Figures for docs/performance.md (not asserted: speed is measured, not tested).
  std::printf("job taken over %.2f s and finished %.2f s after its daemon was killed (lease 2 s)\n", taken_s,
              since_kill());
  EXPECT_EQ(t.code, 1) << t.text << c->Log();
  EXPECT_NE(t.text.find("done: 12 pass, 0 warn, 5 fail"), std::string::npos) << t.text << c->Log();
  EXPECT_NE(c->Log().find("job taken over"), std::string::npos) << c->Log();
  // Every daemon answers the same, and as the uninterrupted single daemon did.
  EXPECT_EQ(Csv(*a, job), want);
  EXPECT_EQ(Csv(*c, job), want);
  b->Start();
  EXPECT_EQ(Csv(*b, job), want);
  EXPECT_EQ(OnlyJobId(*b), job);
}

TEST_F(ClusterTest, AGoldenStillUploadingToOneDaemonPairsLiveWithATargetOnAnother) {
  const std::string want = SingleDaemonCsv();
  std::unique_ptr<Daemon> a = Member("a"), b = Member("b");
  a->Start();
  b->Start();
  // The golden run trickles into a while its target goes to b at full speed: b's job pairs the
  // golden items as a stores them.
  testing::Output g;
  std::atomic<bool> golden_returned{false};
  std::thread golden([&] {
    g = testing::RunAgent("upload " + kSample + "/golden --server " + a->Address() +
                          " --project demo --role golden --label build=7 --max-bytes-per-second 1000");
    golden_returned = true;
  });
  // The golden run as b sees it in the shared store (labels select only complete runs: its id).
  std::string golden_id;
  for (int i = 0; i < 200 && golden_id.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    testing::Output runs = testing::Run("client/parity", "runs --server " + b->Address() + " --project demo --json", "",
                                        /*stderr_too=*/false);
    absl::StatusOr<Json> list = ParseJson(runs.text);
    if (list.ok() && list->is_array() && !list->as_array().empty()) {
      const Json* id = list->as_array()[0].Find("run_id");
      const Json* complete = list->as_array()[0].Find("complete");
      EXPECT_TRUE(complete != nullptr && complete->is_bool() && !complete->as_bool()) << runs.text;
      if (id != nullptr && id->is_string()) golden_id = id->as_string();
    }
  }
  if (golden_id.empty()) {
    golden.join();
    FAIL() << "the golden run never showed on b";
  }
  testing::Output t = testing::RunAgent("upload " + kSample + "/target --server " + b->Address() +
                                        " --project demo --role target --against " + golden_id);
  // The target is in; its job cannot finish before its golden run does (the agent says so).
  EXPECT_EQ(t.code, 3) << t.text << b->Log();
  EXPECT_NE(t.text.find("incomplete"), std::string::npos) << t.text;
  // While the golden run is still arriving at a, b's job compares the pairs whose golden item a
  // has stored; once a completes the run, b's job finishes.
  auto job_on = [&](const Daemon& d, std::string* state) {
    testing::Output jobs = testing::Run("client/parity", "jobs --server " + d.Address() + " --project demo --json", "",
                                        /*stderr_too=*/false);
    absl::StatusOr<Json> list = ParseJson(jobs.text);
    if (!list.ok() || !list->is_array() || list->as_array().empty()) return -1.0;
    *state = list->as_array()[0].Find("state")->as_string();
    return list->as_array()[0].Find("pairs_done")->as_double();
  };
  double live_pairs = 0;
  std::string state;
  while (!golden_returned) {
    const double done = job_on(*b, &state);
    if (state == "running") live_pairs = std::max(live_pairs, done);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (live_pairs > 0) break;
  }
  // The daemon that does not compare the job shows its progress too (written every renewal).
  double seen_on_a = 0;
  std::string state_on_a;
  for (int i = 0; i < 100 && seen_on_a == 0 && !golden_returned; ++i) {
    const double done = job_on(*a, &state_on_a);
    if (state_on_a == "running") seen_on_a = done;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  golden.join();
  EXPECT_GT(live_pairs, 0) << "no pair compared while the golden run was arriving at the other daemon";
  EXPECT_GT(seen_on_a, 0) << "the other daemon never showed the running job's progress";
  EXPECT_EQ(g.code, 0) << g.text << a->Log();
  for (int i = 0; i < 100 && state != "done"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    job_on(*b, &state);
  }
  EXPECT_EQ(state, "done") << b->Log();
  const std::string job = OnlyJobId(*b);
  EXPECT_EQ(Csv(*a, job), want);
  EXPECT_EQ(Csv(*b, job), want);
}

// A team's embedded store moved to the shared backends: the daemon stopped, `parity admin
// migrate-store` copies and verifies; daemons on the shared store then answer as the old one did,
// and a new job over the moved runs (its tensors fetched from the bucket) gives the same table.
TEST_F(ClusterTest, AnEmbeddedStoreMigratesToTheSharedBackendsAndAnswersAlike) {
  // Small tensors in the rows, larger ones in the spool: both kinds must move.
  Daemon old_daemon(dir_ / "old", {"--inline-max-bytes=256"});
  old_daemon.Start();
  const std::string to_old = " --server " + old_daemon.Address() + " --project demo";
  ASSERT_EQ(testing::RunAgent("upload " + kSample + "/golden" + to_old + " --role golden --label build=7").code, 0);
  testing::RunAgent("upload " + kSample + "/target" + to_old + " --role target --against-label build=7");
  const std::string job = OnlyJobId(old_daemon);
  const std::string want = Csv(old_daemon, job);
  ASSERT_NE(want.find("Functional.linear.1.forward.output.0"), std::string::npos) << want;
  const std::string from = " --from sqlite:" + (dir_ / "old" / "data").string();
  const std::string to = " --to " + store_;
  const std::string blobs = " --blobs '" + blobs_ + "'";
  const std::string creds = "AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER";
  // Not while the daemon holds the directory.
  testing::Output busy = testing::Run("client/parity", "admin migrate-store" + from + to + blobs, creds);
  EXPECT_EQ(busy.code, 2) << busy.text;
  EXPECT_NE(busy.text.find("in use by another parityd"), std::string::npos) << busy.text;
  ASSERT_EQ(old_daemon.Kill(SIGTERM), 0);

  testing::Output m = testing::Run("client/parity", "admin migrate-store" + from + to + blobs + " --json", creds,
                                   /*stderr_too=*/false);
  ASSERT_EQ(m.code, 0) << m.text;
  absl::StatusOr<Json> report = ParseJson(m.text);
  ASSERT_TRUE(report.ok()) << m.text;
  EXPECT_EQ(report->Find("tables")->Find("runs")->as_int(), 2) << m.text;
  EXPECT_EQ(report->Find("tables")->Find("jobs")->as_int(), 1) << m.text;
  EXPECT_EQ(report->Find("tables")->Find("op_results")->as_int(), 17) << m.text;
  EXPECT_GT(report->Find("blobs")->as_int(), 0) << m.text;
  EXPECT_GE(report->Find("queries_checked")->as_int(), 3 + 2 + 3) << m.text;
  // Into a database that already holds data: refused, nothing changed.
  testing::Output again = testing::Run("client/parity", "admin migrate-store" + from + to + blobs, creds);
  EXPECT_EQ(again.code, 2) << again.text;
  EXPECT_NE(again.text.find("already holds"), std::string::npos) << again.text;

  // A daemon of the shared deployment, on a new data directory: the old answers, and a new job
  // over the moved runs compares tensors it can only have from the bucket.
  std::unique_ptr<Daemon> a = Member("a");
  a->Start();
  EXPECT_EQ(Csv(*a, job), want);
  testing::Output runs = testing::Run("client/parity", "runs --server " + a->Address() + " --project demo --json", "",
                                      /*stderr_too=*/false);
  absl::StatusOr<Json> list = ParseJson(runs.text);
  ASSERT_TRUE(list.ok() && list->is_array() && list->as_array().size() == 2) << runs.text;
  std::string golden, target;
  for (const Json& r : list->as_array()) {
    (r.Find("side")->as_string() == "golden" ? golden : target) = r.Find("run_id")->as_string();
  }
  testing::Output sub = testing::Run("client/parity", "submit --golden " + golden + " --target " + target +
                                     " --watch --json --server " + a->Address(), "", /*stderr_too=*/false);
  EXPECT_EQ(sub.code, 1) << sub.text << a->Log();
  absl::StatusOr<Json> submitted = ParseJson(sub.text.substr(sub.text.rfind("\n{") == std::string::npos ? 0 : sub.text.rfind("\n{") + 1));
  ASSERT_TRUE(submitted.ok()) << sub.text;
  const std::string again_job = submitted->Find("job_id")->as_string();
  EXPECT_EQ(Csv(*a, again_job), want) << a->Log();
  EXPECT_EQ(a->Log().find("cannot fetch a shared blob"), std::string::npos) << a->Log();
}

// Dedup across daemons: tensors another daemon already put in the bucket are not sent again,
// and the run that took them by reference compares as one that sent them.
TEST_F(ClusterTest, TensorsAnotherDaemonStoredAreTakenByReference) {
  testing::WriteNpyDump(dir_ / "golden", /*bad=*/-1, 0, /*count=*/8, /*elements=*/32768);  // 128 KiB tensors
  testing::WriteNpyDump(dir_ / "target", /*bad=*/3, 0, 8, 32768);
  std::unique_ptr<Daemon> a = Member("a"), b = Member("b");
  a->Start();
  b->Start();
  auto upload = [&](const Daemon& d, const std::string& dir, const std::string& role) {
    testing::Output o = testing::RunAgent("upload " + (dir_ / dir).string() + " --server " + d.Address() +
                                              " --project demo --role " + role + " --json",
                                          "", /*stderr_too=*/false);
    absl::StatusOr<Json> j = ParseJson(o.text);
    EXPECT_TRUE(j.ok()) << o.text;
    return j.ok() ? *j : Json();
  };
  const Json first = upload(*a, "golden", "golden");
  const Json second = upload(*b, "golden", "golden");  // the same tensors, to the other daemon
  ASSERT_TRUE(first.is_object() && second.is_object());
  EXPECT_EQ(first.Find("data_bytes_deduplicated")->as_int(), 0);
  EXPECT_EQ(second.Find("data_bytes_deduplicated")->as_int(), 8 * 32768 * 4) << second.Dump() << b->Log();
  EXPECT_EQ(second.Find("data_bytes_sent")->as_int(), 0) << second.Dump();
  // The run that took them by reference is a golden run like any other, on either daemon.
  testing::Output t = testing::RunAgent("upload " + (dir_ / "target").string() + " --server " + a->Address() +
                                        " --project demo --role target --against " +
                                        second.Find("run_id")->as_string());
  EXPECT_EQ(t.code, 1) << t.text << a->Log();
  EXPECT_NE(t.text.find("done: 7 pass, 0 warn, 1 fail"), std::string::npos) << t.text << a->Log();
}

// What a daemon of the deployment cannot be started with is refused at start, saying why.
TEST_F(ClusterTest, FlagsABucketCannotServeAreRefusedAtStart) {
  const std::string base = "--data-dir=" + (dir_ / "d").string() + " --listen=127.0.0.1:0 --store=" + store_;
  const std::string creds = "AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {creds + " |--blobs='" + blobs_ + "' --max-tensor-bytes=6442450944", "at most 5368709120 with --blobs"},
      {"|--blobs='" + blobs_ + "'", "AWS_SECRET_ACCESS_KEY"},
      {creds + " |--blobs=s3://parity", "endpoint="},
      {creds + " |--blobs='s3://no-such-bucket?endpoint=" + testing::S3Endpoint() + "'", "NoSuchBucket"},
  };
  for (const auto& [env_and_flag, why] : cases) {
    const size_t bar = env_and_flag.find('|');
    testing::Output o = testing::Run("server/parityd", base + " " + env_and_flag.substr(bar + 1),
                                     "env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY " + env_and_flag.substr(0, bar));
    EXPECT_EQ(o.code, 2) << env_and_flag << "\n" << o.text;
    EXPECT_NE(o.text.find(why), std::string::npos) << env_and_flag << "\n" << o.text;
  }
}

}  // namespace
}  // namespace parity
