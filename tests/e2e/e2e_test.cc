// End to end with the real binaries: parityd on loopback with a real SQLite file, parity-agent
// uploading the bundled sample dumps, daemon restarts (graceful and SIGKILL), and the results
// queried back over gRPC.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <map>
#include <cctype>
#include <tuple>
#include <chrono>
#include <filesystem>
#include <set>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "common/base/file_util.h"
#include "common/base/json.h"
#include "common/formats/npy.h"
#include "common/formats/safetensors.h"
#include "server/storage/sqlite.h"
#include <cmath>
#include <cstring>
#include "parity/v1/parity.grpc.pb.h"
#include "tests/grpc_test_util.h"
#include "tests/test_util.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using testing::Daemon;
using testing::kSample;

testing::Output Agent(const std::string& args) { return testing::RunAgent(args); }
std::string ReadId(const fs::path& p) { return testing::ReadFirstWord(p); }

class E2eTest : public testing::ScratchTest {};

TEST_F(E2eTest, SampleCulpritSurvivesRestart) {
  Daemon d(dir_);
  d.Start();
  testing::Output g = Agent("upload " + kSample + "/golden --server " + d.Address() +
                   " --project demo --role golden --label build=7 --run-id-file " + (dir_ / "g").string());
  ASSERT_EQ(g.code, 0) << g.text << d.Log();
  // The target compares against the newest golden run labelled build=7 while it uploads.
  testing::Output t = Agent("upload " + kSample + "/target --server " + d.Address() +
                   " --project demo --role target --against-label build=7 --run-id-file " + (dir_ / "t").string());
  EXPECT_EQ(t.code, 1) << t.text;
  EXPECT_NE(t.text.find("FAIL        Functional.linear.1.forward.output.0"), std::string::npos) << t.text;
  EXPECT_NE(t.text.find("done: 12 pass, 0 warn, 5 fail"), std::string::npos) << t.text;
  EXPECT_NE(t.text.find("First culprit: Functional.linear.1.forward"), std::string::npos) << t.text;
  EXPECT_EQ(d.Kill(SIGTERM), 0) << d.Log();
  EXPECT_NE(d.Log().find("msg=\"stopped\""), std::string::npos);
  // The build links parityd with jemalloc where it is installed (not under sanitizers), and the
  // daemon says which malloc it runs with.
#ifdef PARITY_EXPECT_JEMALLOC
  EXPECT_NE(d.Log().find(" allocator=jemalloc-"), std::string::npos) << d.Log();
#else
  EXPECT_NE(d.Log().find(" allocator=glibc"), std::string::npos) << d.Log();
#endif

  d.Start();
  auto channel = grpc::CreateChannel(d.Address(), grpc::InsecureChannelCredentials());
  auto jobs = v1::Jobs::NewStub(channel);
  auto query = v1::Query::NewStub(channel);
  grpc::ClientContext c1;
  v1::ListRunsRequest lr;
  lr.set_project("demo");
  v1::ListRunsResponse runs;
  ASSERT_TRUE(query->ListRuns(&c1, lr, &runs).ok());
  ASSERT_EQ(runs.runs_size(), 2);
  EXPECT_EQ(runs.runs(0).run_id(), ReadId(dir_ / "t"));  // newest first
  grpc::ClientContext c2;
  v1::ListJobsRequest lj;
  lj.set_project("demo");
  v1::ListJobsResponse js;
  ASSERT_TRUE(jobs->List(&c2, lj, &js).ok());
  ASSERT_EQ(js.jobs_size(), 1);
  EXPECT_EQ(js.jobs(0).golden_run_id(), ReadId(dir_ / "g"));
  grpc::ClientContext c3;
  v1::GetJobSummaryRequest sr;
  sr.set_job_id(js.jobs(0).job_id());
  v1::JobSummary s;
  ASSERT_TRUE(query->GetJobSummary(&c3, sr, &s).ok());
  EXPECT_EQ(s.first_culprit(), "Functional.linear.1.forward");
  EXPECT_EQ(s.counts().fail(), 5);
  // Every failing item after the culprit belongs to a propagated operator.
  grpc::ClientContext c4;
  v1::ListOpResultsRequest rr;
  rr.set_job_id(js.jobs(0).job_id());
  rr.add_verdicts(v1::VERDICT_FAIL);
  v1::ListOpResultsResponse fails;
  ASSERT_TRUE(query->ListOpResults(&c4, rr, &fails).ok());
  ASSERT_EQ(fails.results_size(), 5);
  EXPECT_EQ(fails.results(0).key().api(), "Functional.linear.1.forward");
  EXPECT_EQ(fails.results(0).culprit(), v1::CULPRIT_STATUS_CULPRIT);
  for (int i = 1; i < 5; ++i) {
    EXPECT_EQ(fails.results(i).culprit(), v1::CULPRIT_STATUS_PROPAGATED) << fails.results(i).key().name();
    EXPECT_NE(fails.results(i).key().api(), "Functional.linear.1.forward");
  }
}

// A SIGKILL after an upload and its job have finished loses nothing: the job, its culprit and
// all 17 results are there after the restart. (Killed with acknowledgements in flight:
// disk_fault_test and the mid-upload restart tests.)
TEST_F(E2eTest, AFinishedJobSurvivesSigkill) {
  Daemon d(dir_);
  d.Start();
  testing::Output g = Agent("upload " + kSample + "/golden --server " + d.Address() +
                   " --project demo --role golden --run-id-file " + (dir_ / "g").string());
  ASSERT_EQ(g.code, 0) << g.text;
  testing::Output t = Agent("upload " + kSample + "/target --server " + d.Address() +
                   " --project demo --role target --against " + ReadId(dir_ / "g"));
  ASSERT_EQ(t.code, 1) << t.text;
  EXPECT_EQ(d.Kill(SIGKILL), -SIGKILL);
  d.Start();
  {  // the channel and its calls are gone before the shutdown: it would wait out its grace
    auto channel = testing::PrivateChannel(d.Address());
    auto query = v1::Query::NewStub(channel);
    auto jobs = v1::Jobs::NewStub(channel);
    grpc::ClientContext c1;
    v1::ListJobsRequest lj;
    v1::ListJobsResponse js;
    ASSERT_TRUE(jobs->List(&c1, lj, &js).ok());
    ASSERT_EQ(js.jobs_size(), 1);
    EXPECT_EQ(js.jobs(0).state(), v1::JOB_STATE_DONE);
    EXPECT_EQ(js.jobs(0).first_culprit(), "Functional.linear.1.forward");
    grpc::ClientContext c2;
    v1::ListOpResultsRequest rr;
    rr.set_job_id(js.jobs(0).job_id());
    v1::ListOpResultsResponse all;
    ASSERT_TRUE(query->ListOpResults(&c2, rr, &all).ok());
    EXPECT_EQ(all.total(), 17);
  }
  EXPECT_EQ(d.Kill(SIGTERM), 0);
}

// Every item acknowledged before a SIGKILL is held after the restart, though the kill lands
// while items are being written and acknowledgements are on their way: an agent that resumes
// sends again only what was not acknowledged, so an acknowledged item must never be lost.
TEST_F(E2eTest, EveryItemAcknowledgedBeforeASigkillIsHeldAfterIt) {
  Daemon d(dir_);
  d.Start();
  constexpr int kItems = 20000, kKillAfter = 500;
  std::set<std::string> acked;
  std::string run_id;
  {
    auto ingest = v1::Ingest::NewStub(testing::PrivateChannel(d.Address()));
    testing::RawStream up(ingest.get(), "");
    ASSERT_TRUE(up.Start(testing::StartOf("demo", v1::SIDE_GOLDEN))) << up.status.error_message();
    run_id = up.accepted.run_id();
    std::thread writer([&] {
      for (int i = 0; i < kItems; ++i) {
        if (!up.stream->Write(testing::ValueItem(i, "v"))) break;  // fails once the daemon is gone
      }
    });
    v1::UploadResponse r;
    while (up.stream->Read(&r)) {
      if (r.has_ack()) acked.insert(r.ack().name());
      if (acked.size() == kKillAfter) ::kill(d.pid(), SIGKILL);
    }
    writer.join();
    up.stream->Finish().IgnoreError();
  }
  EXPECT_EQ(d.Kill(SIGKILL), -SIGKILL);
  ASSERT_GE(acked.size(), static_cast<size_t>(kKillAfter));
  ASSERT_LT(acked.size(), static_cast<size_t>(kItems)) << "the kill came after the upload";
  d.Start();
  std::set<std::string> held;
  {
    auto ingest = v1::Ingest::NewStub(testing::PrivateChannel(d.Address()));
    testing::RawStream resume(ingest.get(), "");
    v1::UploadRequest start;
    start.mutable_start()->set_attach_run_id(run_id);
    ASSERT_TRUE(resume.Start(start)) << resume.status.error_message();
    held.insert(resume.accepted.held_item_names().begin(), resume.accepted.held_item_names().end());
    resume.ctx.TryCancel();
  }
  size_t lost = 0;
  for (const std::string& name : acked) lost += held.count(name) == 0;
  EXPECT_EQ(lost, 0u) << "of " << acked.size() << " acknowledged items; " << held.size() << " held";
  EXPECT_EQ(d.Kill(SIGTERM), 0) << d.Log();
}

// Uploads the sample's golden run, stops `d`, adds `triggers` to its database (to inject store
// failures), restarts it and uploads the sample's target against the golden run into *t.
void UploadTargetWithTriggers(Daemon& d, const fs::path& dir, const std::string& triggers,
                              testing::Output* t) {
  d.Start();
  testing::Output g = Agent("upload " + kSample + "/golden --server " + d.Address() +
                            " --project demo --role golden --run-id-file " + (dir / "g").string());
  ASSERT_EQ(g.code, 0) << g.text << d.Log();
  ASSERT_EQ(d.Kill(SIGTERM), 0) << d.Log();
  {
    absl::StatusOr<Database> db = OpenSqlite((dir / "data" / "parity.db").string());
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE(db->Exec(triggers).ok()) << triggers;
  }
  d.Start();
  *t = Agent("upload " + kSample + "/target --server " + d.Address() +
             " --project demo --role target --against " + ReadId(dir / "g"));
}

// A job whose results cannot be stored ends FAILED with the reason, the agent says so and
// exits 2 (a system error, not a verdict), and parityd still stops cleanly. The failure is
// injected with a trigger that refuses every result row. The failed job's record is written
// from the control pool, not from the store's writer thread that reports the failure.
TEST_F(E2eTest, ResultStoreFailureFailsTheJobWithTheReason) {
  Daemon d(dir_);
  testing::Output t;
  ASSERT_NO_FATAL_FAILURE(UploadTargetWithTriggers(
      d, dir_, "CREATE TRIGGER refuse_results BEFORE INSERT ON op_results "
         "BEGIN SELECT RAISE(ABORT, 'injected: results refused'); END;", &t));
  EXPECT_EQ(t.code, 2) << t.text << d.Log();
  EXPECT_NE(t.text.find(" failed: "), std::string::npos) << t.text;
  EXPECT_NE(t.text.find("job error: cannot store the result of "), std::string::npos) << t.text;
  EXPECT_NE(t.text.find("injected: results refused"), std::string::npos) << t.text;
  // The stored record says the same.
  testing::Output jobs = testing::Run("client/parity", "jobs --server " + d.Address() + " --project demo --json");
  EXPECT_NE(jobs.text.find("\"state\": \"failed\""), std::string::npos) << jobs.text;
  EXPECT_NE(jobs.text.find("injected: results refused"), std::string::npos) << jobs.text;
  EXPECT_EQ(d.Kill(SIGTERM), 0) << d.Log();
}

// The same when the store cannot record the job's failure either (a full disk refuses every
// write): the upload still ends with the failed job's summary instead of waiting for a state
// change that will never be stored (parityd keeps recently finished jobs' records in memory).
TEST_F(E2eTest, UploadEndsWhenTheJobFailureCannotBeStored) {
  Daemon d(dir_);
  testing::Output t;
  ASSERT_NO_FATAL_FAILURE(UploadTargetWithTriggers(
      d, dir_, "CREATE TRIGGER refuse_results BEFORE INSERT ON op_results "
         "BEGIN SELECT RAISE(ABORT, 'injected: results refused'); END;"
         "CREATE TRIGGER refuse_job_updates BEFORE UPDATE ON jobs "
         "BEGIN SELECT RAISE(ABORT, 'injected: job updates refused'); END;", &t));
  EXPECT_EQ(t.code, 2) << t.text << d.Log();
  EXPECT_NE(t.text.find(" failed: "), std::string::npos) << t.text;
  EXPECT_NE(t.text.find("injected: results refused"), std::string::npos) << t.text;
  EXPECT_EQ(d.Kill(SIGTERM), 0) << d.Log();
}

// The culprit marks and the finished job's record are stored in one transaction: when the
// record cannot be stored, neither are the marks, and the job ends FAILED with the reason
// (stored too), instead of a job finished in memory but running on disk.
TEST_F(E2eTest, FinishedRecordFailureFailsTheJobWithoutItsCulpritMarks) {
  Daemon d(dir_);
  testing::Output t;
  ASSERT_NO_FATAL_FAILURE(UploadTargetWithTriggers(
      d, dir_, "CREATE TRIGGER refuse_done BEFORE UPDATE OF state ON jobs WHEN NEW.state = 3 "
         "BEGIN SELECT RAISE(ABORT, 'injected: finished record refused'); END;", &t));
  EXPECT_EQ(t.code, 2) << t.text << d.Log();
  EXPECT_NE(t.text.find(" failed: "), std::string::npos) << t.text;
  EXPECT_NE(t.text.find("injected: finished record refused"), std::string::npos) << t.text;
  testing::Output jobs = testing::Run("client/parity", "jobs --server " + d.Address() + " --project demo --json");
  EXPECT_NE(jobs.text.find("\"state\": \"failed\""), std::string::npos) << jobs.text;
  EXPECT_NE(jobs.text.find("injected: finished record refused"), std::string::npos) << jobs.text;
  ASSERT_EQ(d.Kill(SIGTERM), 0) << d.Log();
  absl::StatusOr<Database> db = OpenSqlite((dir_ / "data" / "parity.db").string(), true);
  ASSERT_TRUE(db.ok()) << db.status();
  absl::StatusOr<Statement> q = db->Prepare("SELECT count(*), sum(IFNULL(culprit, 0) != 0) FROM op_results");
  ASSERT_TRUE(q.ok()) << q.status();
  absl::StatusOr<bool> row = q->Step();
  ASSERT_TRUE(row.ok() && *row);
  EXPECT_EQ(q->ColumnInt(0), 17);  // every result row is stored
  EXPECT_EQ(q->ColumnInt(1), 0);   // but no culprit mark
  absl::StatusOr<Statement> index = db->Prepare("SELECT count(*) FROM job_index");
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_TRUE(*index->Step());
  EXPECT_EQ(index->ColumnInt(0), 0);  // nor the job's index
}

TEST_F(E2eTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Agent("").code, 2);
  EXPECT_EQ(Agent("upload " + kSample + "/golden --project demo").code, 2);
  testing::Output o = Agent("upload " + kSample + "/golden --project demo --role golden --server 127.0.0.1:1 "
                            "--retry-seconds 0");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.text.find("upload failed"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("attempt 1"), std::string::npos) << o.text;
  // With a retry budget, the agent backs off and tries again before giving up.
  testing::Output r = Agent("upload " + kSample + "/golden --project demo --role golden --server 127.0.0.1:1 "
                            "--retry-seconds 2");
  EXPECT_EQ(r.code, 2);
  // The first wait is the 500 ms backoff, jittered to 250-500 ms.
  const size_t at = r.text.find("reconnecting in ");
  ASSERT_NE(at, std::string::npos) << r.text;
  const int waited_ms = std::atoi(r.text.c_str() + at + 16);
  EXPECT_GE(waited_ms, 250) << r.text;
  EXPECT_LE(waited_ms, 500) << r.text;
  EXPECT_EQ(r.text.compare(r.text.find(" ms", at), 15, " ms (attempt 2)"), 0) << r.text;
  testing::Output port = Agent("upload " + kSample + "/golden --project demo --role golden --server 127.0.0.1:");
  EXPECT_EQ(port.code, 2);
  EXPECT_NE(port.text.find("server address '127.0.0.1:': the port must be a number from 1 to 65535"),
            std::string::npos) << port.text;
  EXPECT_EQ(Agent("--help").code, 0);
  testing::Output no_role = Agent("upload " + kSample + "/golden --project demo");
  EXPECT_EQ(no_role.code, 2);
  EXPECT_NE(no_role.text.find("--project and --role golden|target are required"), std::string::npos)
      << no_role.text;
  testing::Output bad_role = Agent("upload " + kSample + "/golden --project demo --role gold");
  EXPECT_EQ(bad_role.code, 2);
  EXPECT_NE(bad_role.text.find("--role must be golden or target, got 'gold'"), std::string::npos)
      << bad_role.text;
  // upload-pair: two paths, no role or against, no auto escalation, one run per side.
  const std::string pair = "upload-pair " + kSample + "/golden " + kSample + "/target --project demo ";
  struct Case {
    std::string args, says;
  } cases[] = {
      {"upload-pair " + kSample + "/golden --project demo", "expected GOLDEN_PATH and TARGET_PATH"},
      {pair + "--role target", "--role does not apply"},
      {pair + "--against run-1", "--against does not apply"},
      {pair + "--mode auto", "needs a complete golden run"},
      {pair + "--follow", "--follow does not apply"},
      {"upload-pair " + kSample + " " + kSample + "/target --project demo", ""},
  };
  fs::create_directories(dir_ / "tree" / "rank0");
  fs::create_directories(dir_ / "tree" / "rank1");
  fs::copy(kSample + "/golden", dir_ / "tree" / "rank0", fs::copy_options::recursive);
  fs::copy(kSample + "/golden", dir_ / "tree" / "rank1", fs::copy_options::recursive);
  cases[5] = {"upload-pair " + (dir_ / "tree").string() + " " + kSample + "/target --project demo",
              "holds 2 rank dumps; upload-pair takes one run per side"};
  for (const Case& c : cases) {
    testing::Output u = Agent(c.args + " --server 127.0.0.1:1 --retry-seconds 0");
    EXPECT_EQ(u.code, 2) << c.args << "\n" << u.text;
    EXPECT_NE(u.text.find(c.says), std::string::npos) << c.args << "\n" << u.text;
  }
  EXPECT_EQ(Agent("upload-pair --help").code, 0);
}

// upload-pair from the command line: one JSON document on stdout (the target's summary naming
// the golden run), the golden run's lines on stderr.
TEST_F(E2eTest, UploadPairPrintsOneJsonSummary) {
  Daemon d(dir_);
  d.Start();
  testing::Output p = testing::Run("client/parity-agent",
                                   "upload-pair " + kSample + "/golden " + kSample + "/target --server " +
                                       d.Address() + " --project demo --json --run-id-file " + (dir_ / "ids").string(),
                                   "", /*stderr_too=*/false);
  EXPECT_EQ(p.code, 1) << p.text << d.Log();
  absl::StatusOr<Json> j = ParseJson(p.text);
  ASSERT_TRUE(j.ok()) << p.text;
  EXPECT_EQ(j->Find("job")->Find("state")->as_string(), "done");
  EXPECT_EQ(j->Find("job")->Find("counts")->Find("PASS")->as_int(), 12);
  EXPECT_EQ(j->Find("job")->Find("counts")->Find("FAIL")->as_int(), 5);
  EXPECT_EQ(j->Find("job")->Find("first_culprit")->as_string(), "Functional.linear.1.forward");
  EXPECT_EQ(j->Find("golden_run_id")->as_string(), ReadId(dir_ / "ids.golden"));
  EXPECT_EQ(j->Find("run_id")->as_string(), ReadId(dir_ / "ids.target"));
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

TEST_F(E2eTest, UploadModesAndAutoEscalation) {
  Daemon d(dir_);
  d.Start();
  testing::Output g = Agent("upload " + kSample + "/golden --server " + d.Address() +
                            " --project demo --role golden --run-id-file " + (dir_ / "g").string());
  ASSERT_EQ(g.code, 0) << g.text;
  const std::string golden = ReadId(dir_ / "g");
  // --json: stdout holds exactly one JSON document (the banner goes to stderr).
  auto upload = [&](const std::string& mode) {
    return testing::RunAgent("upload " + kSample + "/target --server " + d.Address() +
                                 " --project demo --role target --against " + golden + " --mode " + mode +
                                 " --json",
                             "", /*stderr_too=*/false);
  };
  std::map<std::string, Json> results;
  for (const char* mode : {"full", "auto", "stats", "crc"}) {
    testing::Output o = upload(mode);
    absl::StatusOr<Json> j = ParseJson(o.text);
    ASSERT_TRUE(j.ok()) << mode << ": " << o.text;
    ASSERT_NE(j->Find("job")->Find("counts"), nullptr) << o.text;
    results[mode] = *j;
  }
  const Json& full = results["full"];
  const Json& autoj = results["auto"];
  // auto: the same verdicts and culprit as full, with only the disagreeing items' data sent.
  EXPECT_EQ(full.Find("job")->Find("counts")->Dump(), autoj.Find("job")->Find("counts")->Dump());
  EXPECT_EQ(autoj.Find("job")->Find("first_culprit")->as_string(), "Functional.linear.1.forward");
  // Items, not acknowledgements: the items auto sent twice (statistics, then data) count once.
  EXPECT_EQ(autoj.Find("items_acknowledged")->as_int(), 17) << autoj.Dump();
  EXPECT_EQ(full.Find("items_acknowledged")->as_int(), 17) << full.Dump();
  EXPECT_EQ(full.Find("data_bytes_sent")->as_int(), full.Find("data_bytes_in_dump")->as_int());
  EXPECT_GT(autoj.Find("data_bytes_sent")->as_int(), 0);
  EXPECT_LT(autoj.Find("data_bytes_sent")->as_int(), full.Find("data_bytes_sent")->as_int());
  // stats and crc send no tensor data at all.
  const Json& stats = results["stats"];
  const Json& crc = results["crc"];
  EXPECT_EQ(stats.Find("data_bytes_sent")->as_int(), 0);
  EXPECT_EQ(crc.Find("data_bytes_sent")->as_int(), 0);
  EXPECT_EQ(crc.Find("job")->Find("counts")->Find("FAIL")->as_int(), 9);  // every item touched by device noise differs bitwise
  EXPECT_EQ(stats.Find("job")->Find("counts")->Find("FAIL")->as_int(), 0);
  EXPECT_GT(stats.Find("job")->Find("counts")->Find("WARN")->as_int(), 0);
  EXPECT_EQ(Agent("upload " + kSample + "/target --mode turbo --project demo --role target").code, 2);
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

TEST_F(E2eTest, MultiRankTreesUploadOneRunPerRankAndPairByRank) {
  // golden: step0/rank0 and step0/rank1 (the golden sample); target: rank0 = the defective
  // target sample, rank1 = the golden numbers.
  for (const auto& [side, rank, src] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"golden", "rank0", "golden"}, {"golden", "rank1", "golden"},
           {"target", "rank0", "target"}, {"target", "rank1", "golden"}}) {
    fs::create_directories(dir_ / side / "step0");
    fs::copy(kSample + "/" + src, dir_ / side / "step0" / rank, fs::copy_options::recursive);
  }
  Daemon d(dir_);
  d.Start();
  testing::Output g = Agent("upload " + (dir_ / "golden").string() + " --server " + d.Address() +
                            " --project demo --role golden --label build=9 --run-id-file " + (dir_ / "g").string());
  ASSERT_EQ(g.code, 0) << g.text;
  EXPECT_TRUE(fs::exists(dir_ / "g.step0.rank0"));
  EXPECT_TRUE(fs::exists(dir_ / "g.step0.rank1"));
  testing::Output t = Agent("upload " + (dir_ / "target").string() + " --server " + d.Address() +
                            " --project demo --role target --against-label build=9");
  EXPECT_EQ(t.code, 1) << t.text;  // the worst rank decides
  const size_t r0 = t.text.find("done: 12 pass, 0 warn, 5 fail");
  const size_t r1 = t.text.find("done: 17 pass, 0 warn, 0 fail");
  EXPECT_NE(r0, std::string::npos) << t.text;
  EXPECT_NE(r1, std::string::npos) << t.text;
  EXPECT_LT(r0, r1);  // rank0 first
  testing::Output against = Agent("upload " + (dir_ / "target").string() + " --server " + d.Address() +
                                  " --project demo --role target --against run-x");
  EXPECT_EQ(against.code, 2);
  EXPECT_NE(against.text.find("use --against-label"), std::string::npos);
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

using testing::WriteNpyDump;

// SIGKILLs `d` `after_ms` after the agent wrote `run_id_file` (it does when the daemon accepts
// its run) and starts it again on the same port 300 ms later. Timed from the acceptance: a fixed
// delay from the agent's start killed a slow (sanitizer) build's daemon before the agent had
// learnt the run id.
void KillAndRestartOnceAccepted(Daemon& d, const fs::path& run_id_file, int after_ms) {
  for (int waited = 0; !fs::exists(run_id_file) && waited < 60000; waited += 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(fs::exists(run_id_file)) << "the daemon never accepted the run";
  std::this_thread::sleep_for(std::chrono::milliseconds(after_ms));
  EXPECT_EQ(d.Kill(SIGKILL), -SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  d.Start();
}

TEST_F(E2eTest, ConnectionCutMidUploadResumesWithNothingLostOrDoubled) {
  WriteNpyDump(dir_ / "golden", -1);
  WriteNpyDump(dir_ / "target", 30);
  Daemon d(dir_);
  d.Start();
  testing::Output g = Agent("upload " + (dir_ / "golden").string() + " --server " + d.Address() +
                            " --project demo --role golden --run-id-file " + (dir_ / "g").string());
  ASSERT_EQ(g.code, 0) << g.text;
  // ~2.6 MB at 1 MB/s: the daemon is killed and restarted while the target is uploading
  // (--no-dedup: 39 of the target's tensors equal the golden ones and would not travel).
  testing::Output t;
  const std::string address = d.Address();  // the restart below rewrites the port (same value)
  std::thread agent([&] {
    t = Agent("upload " + (dir_ / "target").string() + " --server " + address +
              " --project demo --role target --against " + ReadId(dir_ / "g") +
              " --max-bytes-per-second 1000000 --retry-seconds 60 --no-dedup --run-id-file " +
              (dir_ / "t").string());
  });
  KillAndRestartOnceAccepted(d, dir_ / "t", 400);
  agent.join();
  EXPECT_EQ(t.code, 1) << t.text << d.Log();
  EXPECT_NE(t.text.find("reconnecting in"), std::string::npos) << t.text;
  EXPECT_NE(t.text.find(": resuming, the server holds "), std::string::npos) << t.text;
  EXPECT_NE(t.text.find("done: 39 pass, 0 warn, 1 fail, 0 error, 0 unmatched"), std::string::npos)
      << t.text;
  // Exactly 40 items in the run and 40 results: nothing doubled, nothing missing.
  testing::Output runs = testing::Run("client/parity", "runs --json --server " + d.Address(), "", false);
  auto rj = ParseJson(runs.text);
  ASSERT_TRUE(rj.ok()) << runs.text;
  for (const Json& r : rj->as_array()) {
    EXPECT_EQ(r.Find("item_count")->as_int(), 40) << r.Dump();
    EXPECT_TRUE(r.Find("complete")->as_bool());
  }
  testing::Output jobs = testing::Run("client/parity", "jobs --json --server " + d.Address(), "", false);
  auto jj = ParseJson(jobs.text);
  ASSERT_TRUE(jj.ok()) << jobs.text;
  ASSERT_EQ(jj->as_array().size(), 1u);
  EXPECT_EQ(jj->as_array()[0].Find("pairs_done")->as_int(), 40);
}

// `parity watch` follows a job across a parityd restart: the daemon is SIGKILLed while the
// target uploads (throttled), the agent resumes the upload, and the watch, opened again, ends
// with the job's final counts and exit code 1.
TEST_F(E2eTest, WatchReconnectsAcrossARestart) {
  WriteNpyDump(dir_ / "golden", -1);
  WriteNpyDump(dir_ / "target", 30);
  Daemon d(dir_);
  d.Start();
  const std::string address = d.Address();
  testing::Output g = Agent("upload " + (dir_ / "golden").string() + " --server " + address +
                            " --project demo --role golden --run-id-file " + (dir_ / "g").string());
  ASSERT_EQ(g.code, 0) << g.text;
  testing::Output t, w;
  std::thread agent([&] {
    t = Agent("upload " + (dir_ / "target").string() + " --server " + address +
              " --project demo --role target --against " + ReadId(dir_ / "g") +
              " --max-bytes-per-second 1000000 --retry-seconds 60 --no-dedup --run-id-file " +
              (dir_ / "t").string());
  });
  for (int waited = 0; !fs::exists(dir_ / "t") && waited < 60000; waited += 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  testing::Output jobs = testing::Run("client/parity", "jobs --json --server " + address, "", false);
  auto jj = ParseJson(jobs.text);
  ASSERT_TRUE(jj.ok()) << jobs.text;
  ASSERT_EQ(jj->as_array().size(), 1u) << jobs.text;
  const std::string job = jj->as_array()[0].Find("job_id")->as_string();
  std::thread watcher([&] { w = testing::Run("client/parity", "watch " + job + " --server " + address); });
  // The daemon is killed once the watch is open (its job_watches gauge says so), not after a delay.
  auto query = v1::Query::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  auto watching = [&] {
    grpc::ClientContext c;
    v1::ServerStatus st;
    if (!query->GetServerStatus(&c, v1::GetServerStatusRequest(), &st).ok()) return false;
    for (const v1::Gauge& gauge : st.gauges()) {
      if (gauge.name() == "job_watches") return gauge.value() == 1;
    }
    return false;
  };
  for (int waited = 0; !watching() && waited < 60000; waited += 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(watching()) << "parity watch never subscribed";  // not ASSERT: threads are running
  KillAndRestartOnceAccepted(d, dir_ / "t", 0);
  agent.join();
  watcher.join();
  EXPECT_EQ(t.code, 1) << t.text << d.Log();
  EXPECT_EQ(w.code, 1) << w.text << d.Log();
  EXPECT_NE(w.text.find("parity: watch of " + job + " lost ("), std::string::npos) << w.text;
  EXPECT_NE(w.text.find("job " + job + " done: 39 pass, 0 warn, 1 fail, 0 error, 0 unmatched"), std::string::npos)
      << w.text;
  EXPECT_NE(w.text.find("First culprit: t30"), std::string::npos) << w.text;
}

// --retry-seconds counts from the lost connection, not from the upload's start: an upload
// throttled to last about 10 s loses its daemon 6 s in, past a 5 s window, and still resumes.
TEST_F(E2eTest, RetryWindowCountsFromTheLostConnection) {
  WriteNpyDump(dir_ / "golden", -1);
  Daemon d(dir_);
  d.Start();
  testing::Output g;
  const std::string address = d.Address();
  std::thread agent([&] {
    g = Agent("upload " + (dir_ / "golden").string() + " --server " + address +
              " --project demo --role golden --max-bytes-per-second 250000 --retry-seconds 5 --no-dedup"
              " --run-id-file " + (dir_ / "g").string());
  });
  KillAndRestartOnceAccepted(d, dir_ / "g", 6000);
  agent.join();
  EXPECT_EQ(g.code, 0) << g.text << d.Log();
  EXPECT_NE(g.text.find("reconnecting in"), std::string::npos) << g.text;
  EXPECT_NE(g.text.find(": resuming, the server holds "), std::string::npos) << g.text;
  testing::Output runs = testing::Run("client/parity", "runs --json --server " + d.Address(), "", false);
  auto rj = ParseJson(runs.text);
  ASSERT_TRUE(rj.ok()) << runs.text;
  ASSERT_EQ(rj->as_array().size(), 1u) << runs.text;
  EXPECT_EQ(rj->as_array()[0].Find("item_count")->as_int(), 40);
  EXPECT_TRUE(rj->as_array()[0].Find("complete")->as_bool());
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

// Twice: with the 64 KiB tensors' blobs keyed by their content (the SHA-256 an agent offers), and
// keyed by unique names (--spool-unique-key-min-bytes=1, as large blobs are by default), whose
// hash parityd takes from disk when a probe first matches them.
TEST_F(E2eTest, SecondUploadOfTheSameDataIsSentByReference) {
  WriteNpyDump(dir_ / "golden", -1);
  WriteNpyDump(dir_ / "target", 12);
  for (const std::string keys : {"content", "unique"}) {
  SCOPED_TRACE(keys);
  Daemon d(dir_ / ("daemon-" + keys), {"--spool-unique-key-min-bytes=" + std::string(keys == "unique" ? "1" : "0")});
  d.Start();
  auto upload = [&](const std::string& what, const std::string& extra, const std::string& project = "demo") {
    testing::Output o = testing::RunAgent("upload " + (dir_ / what).string() + " --server " + d.Address() +
                                              " --project " + project + " --json " + extra,
                                          "", /*stderr_too=*/false);
    absl::StatusOr<Json> j = ParseJson(o.text);
    EXPECT_TRUE(j.ok()) << o.text;
    return j.ok() ? *j : Json::MakeObject();
  };
  // The first upload's probes (length and CRC-32) all miss: nothing is hashed.
  const Json first = upload("golden", "--role golden");
  EXPECT_EQ(first.Find("data_bytes_sent")->as_int(), 40 * 65536);
  EXPECT_EQ(first.Find("data_bytes_deduplicated")->as_int(), 0);
  EXPECT_EQ(first.Find("dedup_probes")->as_int(), 40);
  EXPECT_EQ(first.Find("dedup_hashes")->as_int(), 0);
  const Json again = upload("golden", "--role golden");
  EXPECT_EQ(again.Find("data_bytes_sent")->as_int(), 0);
  EXPECT_EQ(again.Find("data_bytes_deduplicated")->as_int(), 40 * 65536);
  EXPECT_EQ(again.Find("items_acknowledged")->as_int(), 40);
  EXPECT_EQ(again.Find("dedup_hashes")->as_int(), 40);
  // The same without read-ahead (each offer made just before its item is sent).
  const Json unbuffered = upload("golden", "--role golden --read-ahead 0");
  EXPECT_EQ(unbuffered.Find("data_bytes_sent")->as_int(), 0);
  EXPECT_EQ(unbuffered.Find("data_bytes_deduplicated")->as_int(), 40 * 65536);
  EXPECT_EQ(unbuffered.Find("dedup_hashes")->as_int(), 40);
  const Json forced = upload("golden", "--role golden --no-dedup");
  EXPECT_EQ(forced.Find("data_bytes_sent")->as_int(), 40 * 65536);
  EXPECT_EQ(forced.Find("data_bytes_deduplicated")->as_int(), 0);
  // The target shares 39 of 40 tensors with the golden run: only the perturbed one travels, and
  // the comparison against the deduplicated golden run finds exactly that one.
  const Json target = upload("target", "--role target --against " + again.Find("run_id")->as_string());
  EXPECT_EQ(target.Find("data_bytes_sent")->as_int(), 65536);
  EXPECT_EQ(target.Find("data_bytes_deduplicated")->as_int(), 39 * 65536);
  EXPECT_EQ(target.Find("dedup_hashes")->as_int(), 39);  // the perturbed tensor's probe missed
  EXPECT_EQ(target.Find("job")->Find("counts")->Find("FAIL")->as_int(), 1);
  EXPECT_EQ(target.Find("job")->Find("counts")->Find("PASS")->as_int(), 39);
  // Another project holds none of it: every byte travels (dedup neither reveals nor lends
  // another project's data).
  const Json other = upload("golden", "--role golden", "other");
  EXPECT_EQ(other.Find("data_bytes_sent")->as_int(), 40 * 65536);
  EXPECT_EQ(other.Find("data_bytes_deduplicated")->as_int(), 0);
  EXPECT_EQ(other.Find("items_acknowledged")->as_int(), 40);
  EXPECT_EQ(other.Find("dedup_hashes")->as_int(), 0);  // nor do its probes answer yes
  if (keys == "unique") {
    // Blobs of the same content are not merged: the first and the forced upload's, the
    // target's own and the other project's are files of their own.
    size_t blobs = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir_ / ("daemon-" + keys) / "data")) {
      blobs += e.is_regular_file() && e.path().filename().string().size() == 64;
    }
    EXPECT_EQ(blobs, 40u + 40u + 1u + 40u);
  }
  }
}

TEST_F(E2eTest, FollowUploadsFilesAsTheyAreCompletedAndStopsAtTheMarker) {
  WriteNpyDump(dir_ / "golden", -1);
  WriteNpyDump(dir_ / "staging", 7);  // what the "model" will write, file by file
  // And one tensor of 5 MiB, sent from its file in pieces once it is complete (since session
  // 38; it was read whole).
  {
    std::vector<float> v(5 << 18);
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(std::sin(0.0003 * static_cast<double>(k)));
    const std::string big = EncodeNpy(*Tensor::Make(DType::kFloat32, {static_cast<int64_t>(v.size())},
                                                    testing::EncodeFloats(v, DType::kFloat32)));
    ASSERT_TRUE(WriteStringToFile((dir_ / "golden" / "t40.npy").string(), big).ok());
    ASSERT_TRUE(WriteStringToFile((dir_ / "staging" / "t40.npy").string(), big).ok());
  }
  fs::create_directories(dir_ / "live");
  Daemon d(dir_);
  d.Start();
  testing::Output g = Agent("upload " + (dir_ / "golden").string() + " --server " + d.Address() +
                            " --project demo --role golden --run-id-file " + (dir_ / "g").string());
  ASSERT_EQ(g.code, 0) << g.text;
  testing::Output t;
  std::thread agent([&] {
    t = testing::RunAgent("upload " + (dir_ / "live").string() + " --follow --idle-timeout 30 --server " +
                              d.Address() + " --project demo --role target --json --against " + ReadId(dir_ / "g"),
                          "", /*stderr_too=*/false);
  });
  // Write the files one at a time; each first appears truncated (half its bytes), then whole.
  for (int i = 0; i < 41; ++i) {
    char name[24];  // "t" + any int + ".npy"
    std::snprintf(name, sizeof(name), "t%02d.npy", i);
    const std::string whole = *ReadFileToString((dir_ / "staging" / name).string());
    ASSERT_TRUE(WriteStringToFile((dir_ / "live" / name).string(), whole.substr(0, whole.size() / 2)).ok());
    if (i % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(250));
    ASSERT_TRUE(WriteStringToFile((dir_ / "live" / name).string(), whole).ok());
  }
  ASSERT_TRUE(WriteStringToFile((dir_ / "live" / "parity.done").string(), "").ok());
  agent.join();
  EXPECT_EQ(t.code, 1) << t.text;
  absl::StatusOr<Json> j = ParseJson(t.text);
  ASSERT_TRUE(j.ok()) << t.text;
  EXPECT_EQ(j->Find("items_acknowledged")->as_int(), 41) << t.text;
  EXPECT_EQ(j->Find("items_rejected")->as_int(), 0) << t.text;
  EXPECT_EQ(j->Find("job")->Find("state")->as_string(), "done") << t.text;
  EXPECT_EQ(j->Find("job")->Find("counts")->Find("PASS")->as_int(), 40) << t.text;
  EXPECT_EQ(j->Find("job")->Find("counts")->Find("FAIL")->as_int(), 1) << t.text;
  EXPECT_EQ(j->Find("job")->Find("counts")->Find("ERROR")->as_int(), 0) << t.text;
  EXPECT_EQ(j->Find("tensors_read_in_pieces")->as_int(), 1) << t.text;
  // --idle-timeout ends a follow that never sees the marker.
  fs::create_directories(dir_ / "quiet");
  testing::Output q = Agent("upload " + (dir_ / "quiet").string() + " --follow --idle-timeout 1 --server " +
                            d.Address() + " --project demo --role golden");
  EXPECT_EQ(q.code, 0) << q.text;
  EXPECT_NE(q.text.find("no new complete item for 1 s"), std::string::npos) << q.text;
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

// A tensor file the agent cannot read is uploaded as its read error: the job reports it as an
// ERROR row naming the file, as `parity compare` does, the other items are compared, and a
// later job over the stored runs (after a restart) reports it again.
TEST_F(E2eTest, AnUnreadableTensorFileIsAnErrorRowNotALostItem) {
  Daemon d(dir_);
  d.Start();
  auto npy = [](std::vector<float> v) {
    std::string b(v.size() * 4, '\0');
    std::memcpy(b.data(), v.data(), b.size());
    return EncodeNpy(*parity::Tensor::Make(DType::kFloat32, {static_cast<int64_t>(v.size())}, b));
  };
  fs::create_directories(dir_ / "g");
  fs::create_directories(dir_ / "t");
  for (const char* n : {"a", "b", "c"}) {
    ASSERT_TRUE(WriteStringToFile((dir_ / "g" / (std::string(n) + ".npy")).string(), npy({1, 2, 3})).ok());
  }
  ASSERT_TRUE(WriteStringToFile((dir_ / "t" / "a.npy").string(), npy({1, 2, 3})).ok());
  ASSERT_TRUE(WriteStringToFile((dir_ / "t" / "b.npy").string(), "garbage").ok());
  ASSERT_TRUE(WriteStringToFile((dir_ / "t" / "c.npy").string(), npy({1, 2, -3})).ok());
  const std::string server = " --server " + d.Address() + " --project demo";
  ASSERT_EQ(Agent("upload " + (dir_ / "g").string() + server + " --role golden --run-id-file " +
                  (dir_ / "g.id").string()).code, 0);
  testing::Output t = Agent("upload " + (dir_ / "t").string() + server + " --role target --against " +
                            ReadId(dir_ / "g.id") + " --run-id-file " + (dir_ / "t.id").string());
  EXPECT_EQ(t.code, 2) << t.text;  // the agent could not read everything it was given
  EXPECT_NE(t.text.find("3 items acknowledged, 0 rejected"), std::string::npos) << t.text;
  EXPECT_NE(t.text.find("1 pass, 0 warn, 1 fail, 1 error, 0 unmatched"), std::string::npos) << t.text;
  EXPECT_NE(t.text.find("1 tensors could not be read"), std::string::npos) << t.text;

  auto error_row = [&](const std::string& job) {
    testing::Output r = testing::Run("client/parity", "results " + job + " --verdict error --json --server " +
                                                          d.Address());
    absl::StatusOr<Json> j = ParseJson(r.text);
    EXPECT_TRUE(j.ok()) << r.text;
    if (!j.ok()) return std::string();
    const Json* rows = j->Find("items");
    EXPECT_TRUE(rows != nullptr && rows->is_array() && rows->as_array().size() == 1) << r.text;
    if (rows == nullptr || !rows->is_array() || rows->as_array().size() != 1) return std::string();
    const Json& row = rows->as_array()[0];
    const Json* name = row.Find("name");
    const Json* message = row.Find("message");
    EXPECT_TRUE(name != nullptr && message != nullptr) << r.text;
    if (name == nullptr || message == nullptr) return std::string();
    return name->as_string() + ": " + message->as_string();
  };
  testing::Output jobs = testing::Run("client/parity", "jobs --json" + server);
  absl::StatusOr<Json> jj = ParseJson(jobs.text);
  ASSERT_TRUE(jj.ok()) << jobs.text;
  ASSERT_TRUE(jj->is_array() && jj->as_array().size() == 1) << jobs.text;
  const Json* job_id = jj->as_array()[0].Find("job_id");
  ASSERT_TRUE(job_id != nullptr) << jobs.text;
  const std::string job = job_id->as_string();
  const std::string expected = "b: Dump file: b not found or read failed. (" + (dir_ / "t" / "b.npy").string() +
                               ": truncated .npy file (7 bytes))";
  EXPECT_EQ(error_row(job), expected);

  // Stored with the run: a new job after a restart reports it the same way.
  EXPECT_EQ(d.Kill(SIGTERM), 0) << d.Log();
  d.Start();
  testing::Output again = testing::Run("client/parity", "submit --golden " + ReadId(dir_ / "g.id") + " --target " +
                                                           ReadId(dir_ / "t.id") + " --watch --json --server " +
                                                           d.Address());
  EXPECT_EQ(again.code, 1) << again.text;
  absl::StatusOr<Json> sj = ParseJson(again.text);
  ASSERT_TRUE(sj.ok()) << again.text;
  const Json* id = sj->Find("job_id");
  ASSERT_TRUE(id != nullptr) << again.text;
  EXPECT_EQ(error_row(id->as_string()), expected);
}

TEST_F(E2eTest, EveryDumpLayoutUploads) {
  Daemon d(dir_);
  d.Start();
  const std::string data = std::string(PARITY_SOURCE_DIR) + "/tests/data";
  struct Layout {
    std::string golden, target, culprit;
  };
  std::vector<Layout> layouts = {
      {data + "/ge/golden", data + "/ge/target", "add_1.0"},                          // GE dumps
      {data + "/pt/msprobe_dump/golden", data + "/pt/msprobe_dump/target", "Functional.add.0.forward"},  // .pt
  };
  // .safetensors files: one tensor of the target is off.
  auto st = [&](const std::string& name, float w1) {
    const float w[3] = {1.0f, w1, 3.0f}, b[2] = {0.5f, -0.5f};
    std::string wb(12, '\0'), bb(8, '\0');
    std::memcpy(wb.data(), w, 12);
    std::memcpy(bb.data(), b, 8);
    const std::string path = (dir_ / name).string();
    EXPECT_TRUE(WriteStringToFile(path, EncodeSafetensors({{"layer.weight", *parity::Tensor::Make(DType::kFloat32, {3}, wb)},
                                                           {"layer.bias", *parity::Tensor::Make(DType::kFloat32, {2}, bb)}}))
                    .ok());
    return path;
  };
  layouts.push_back({st("g.safetensors", 2.0f), st("t.safetensors", 2.5f), "layer.weight"});
  int n = 0;
  for (const Layout& l : layouts) {
    const std::string id_file = (dir_ / ("g" + std::to_string(n++))).string();
    testing::Output g = Agent("upload " + l.golden + " --server " + d.Address() +
                              " --project demo --role golden --run-id-file " + id_file);
    ASSERT_EQ(g.code, 0) << g.text;
    testing::Output t = Agent("upload " + l.target + " --server " + d.Address() +
                              " --project demo --role target --policy torch --against " + ReadId(id_file));
    EXPECT_EQ(t.code, 1) << t.text;
    EXPECT_NE(t.text.find("First culprit: " + l.culprit), std::string::npos) << t.text;
  }
  // msprobe statistics and md5 task dumps (no tensor data): compared as msprobe's SUMMARY / MD5.
  const std::string conf = std::string(PARITY_SOURCE_DIR) + "/tests/conformance";
  struct StatCase {
    std::string dir, expect;
    int code;
  } stat_cases[] = {
      {conf + "/msprobe_crc/case_002_fp32_one_ulp", "0 pass, 0 warn, 1 fail", 1},
      {conf + "/msprobe_stats/case_002_large_diff_warning", "0 pass, 1 warn, 0 fail", 0},
  };
  for (const StatCase& c : stat_cases) {
    const std::string id_file = (dir_ / ("s" + std::to_string(n++))).string();
    ASSERT_EQ(Agent("upload " + c.dir + "/bench_dump.json --server " + d.Address() +
                    " --project demo --role golden --run-id-file " + id_file).code, 0);
    testing::Output t = Agent("upload " + c.dir + "/npu_dump.json --server " + d.Address() +
                              " --project demo --role target --against " + ReadId(id_file));
    EXPECT_EQ(t.code, c.code) << t.text;
    EXPECT_NE(t.text.find(c.expect), std::string::npos) << t.text;
    // A statistics dump is compared from statistics alone, and the summary says what that misses.
    EXPECT_EQ(t.text.find("Statistics only:") != std::string::npos, c.dir.find("msprobe_stats") != std::string::npos)
        << t.text;
  }
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

// deploy/make-certs.sh's certificates; parityd with mutual TLS; only a client with the CA and a
// client certificate gets in.
TEST_F(E2eTest, MutualTlsLetsInOnlyClientsWithACertificate) {
  const fs::path certs = dir_ / "certs";
  const std::string make = std::string(PARITY_SOURCE_DIR) + "/deploy/make-certs.sh " + certs.string() +
                           " > /dev/null";
  ASSERT_EQ(std::system(make.c_str()), 0);
  const std::string c = certs.string();
  Daemon d(dir_ / "daemon", {"--tls-cert=" + c + "/server.pem", "--tls-key=" + c + "/server.key",
                             "--tls-client-ca=" + c + "/ca.pem"});
  d.Start();
  EXPECT_NE(d.Log().find("TLS on, client certificates required"), std::string::npos) << d.Log();
  const std::string upload = "upload " + kSample + "/golden --server " + d.Address() +
                             " --project demo --role golden --retry-seconds 0 ";
  const std::string mtls = "--tls-ca " + c + "/ca.pem --tls-cert " + c + "/client.pem --tls-key " +
                           c + "/client.key";
  testing::Output ok = Agent(upload + mtls);
  EXPECT_EQ(ok.code, 0) << ok.text << d.Log();
  // Plaintext against a TLS port, and TLS without a client certificate: refused.
  // Each says what is expected, not only gRPC's "Socket closed".
  testing::Output plain = Agent(upload);
  EXPECT_EQ(plain.code, 2) << plain.text;
  EXPECT_NE(plain.text.find("a server with TLS closes plaintext connections this way: pass --tls-ca"),
            std::string::npos)
      << plain.text;
  testing::Output no_cert = Agent(upload + "--tls-ca " + c + "/ca.pem");
  EXPECT_EQ(no_cert.code, 2) << no_cert.text;
  EXPECT_NE(no_cert.text.find("needs a client certificate: --tls-cert and --tls-key"), std::string::npos)
      << no_cert.text;
  testing::Output cli_plain = testing::Run("client/parity", "runs --server " + d.Address());
  EXPECT_EQ(cli_plain.code, 2) << cli_plain.text;
  EXPECT_NE(cli_plain.text.find("pass --tls-ca CA.pem or set PARITY_TLS_CA"), std::string::npos) << cli_plain.text;
  // A client certificate without the CA, and a missing file: usage errors naming the problem.
  testing::Output half = Agent(upload + "--tls-cert " + c + "/client.pem --tls-key " + c + "/client.key");
  EXPECT_EQ(half.code, 2);
  EXPECT_NE(half.text.find("need --tls-ca"), std::string::npos) << half.text;
  testing::Output missing = Agent(upload + "--tls-ca " + c + "/nope.pem");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.text.find("nope.pem"), std::string::npos) << missing.text;
  // The CLI over mutual TLS (environment variables this time) sees the one run.
  testing::Output runs = testing::Run("client/parity", "runs --json --server " + d.Address(),
                                      "PARITY_TLS_CA=" + c + "/ca.pem PARITY_TLS_CERT=" + c +
                                          "/client.pem PARITY_TLS_KEY=" + c + "/client.key",
                                      /*stderr_too=*/false);
  EXPECT_EQ(runs.code, 0) << runs.text;
  absl::StatusOr<Json> rj = ParseJson(runs.text);
  ASSERT_TRUE(rj.ok()) << runs.text;
  EXPECT_EQ(rj->as_array().size(), 1u);
}

// The stream window flag: out of range refused at start; the fixed window (default) and gRPC's
// automatic one (0) both carry an upload of 40 tensors of 64 KiB (more than a 64 KiB window,
// so the window has to be reopened many times).
TEST_F(E2eTest, StreamWindowFlagIsCheckedAndBothWindowsCarryUploads) {
  testing::Output bad = testing::Run("server/parityd", "--data-dir " + (dir_ / "bad").string() +
                                                           " --listen 127.0.0.1:0 --stream-window-bytes 1000");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.text.find("--stream-window-bytes must be 0 or between 65536"), std::string::npos) << bad.text;
  WriteNpyDump(dir_ / "golden", -1);
  for (const std::string window : {"4194304", "65536", "0"}) {
    SCOPED_TRACE(window);
    Daemon d(dir_ / ("w" + window), {"--stream-window-bytes=" + window});
    d.Start();
    testing::Output o = testing::RunAgent("upload " + (dir_ / "golden").string() + " --server " + d.Address() +
                                              " --project demo --role golden --no-dedup --json",
                                          "", /*stderr_too=*/false);
    ASSERT_EQ(o.code, 0) << o.text;
    absl::StatusOr<Json> j = ParseJson(o.text);
    ASSERT_TRUE(j.ok()) << o.text;
    EXPECT_EQ(j->Find("data_bytes_sent")->as_int(), 40 * 65536);
    EXPECT_EQ(j->Find("items_acknowledged")->as_int(), 40);
  }
}

// gRPC's memory quota (--grpc-memory-bytes): out of range refused at start. At the smallest
// quota, 4 MiB, the automatic windows of a pair's two streams let in more than it holds, so gRPC
// may cancel streams (RESOURCE_EXHAUSTED without parityd's trailer; whether it does depends on
// timing) and the agent resumes them: the upload ends with every verdict, each run holding its
// 64 items once. That a stream ended so is resumed is pinned without timing by
// ServerTest.AStreamEndedAsByTheGrpcMemoryQuotaIsResumed.
TEST_F(E2eTest, UnderTheGrpcMemoryQuotaEveryUploadCompletes) {
  testing::Output bad = testing::Run("server/parityd", "--data-dir " + (dir_ / "bad").string() +
                                                           " --listen 127.0.0.1:0 --grpc-memory-bytes 1000");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.text.find("--grpc-memory-bytes must be 0 or at least 4194304"), std::string::npos) << bad.text;
  WriteNpyDump(dir_ / "golden", -1, 0, 64, 65536);
  WriteNpyDump(dir_ / "target", 3, 0, 64, 65536);
  Daemon d(dir_ / "d", {"--stream-window-bytes=0", "--grpc-memory-bytes=4194304"});
  d.Start();
  testing::Output o = Agent("upload-pair " + (dir_ / "golden").string() + " " + (dir_ / "target").string() +
                            " --server " + d.Address() + " --project p --no-dedup --retry-seconds 60");
  EXPECT_EQ(o.code, 1) << o.text << d.Log();
  EXPECT_NE(o.text.find("done: 63 pass, 0 warn, 1 fail, 0 error, 0 unmatched"), std::string::npos) << o.text;
  testing::Output runs = testing::Run("client/parity", "runs --json --server " + d.Address(), "", false);
  auto rj = ParseJson(runs.text);
  ASSERT_TRUE(rj.ok()) << runs.text;
  ASSERT_EQ(rj->as_array().size(), 2u) << runs.text;
  for (const Json& r : rj->as_array()) {
    EXPECT_EQ(r.Find("item_count")->as_int(), 64) << r.Dump();
    EXPECT_TRUE(r.Find("complete")->as_bool()) << r.Dump();
  }
}

TEST_F(E2eTest, TlsFlagsAreCheckedAndPlaintextStaysOnLoopback) {
  auto parityd = [&](const std::string& flags) {
    return testing::Run("server/parityd", "--data-dir " + (dir_ / "d").string() + " " + flags);
  };
  testing::Output any = parityd("--listen 0.0.0.0:0");
  EXPECT_EQ(any.code, 2);
  EXPECT_NE(any.text.find("without TLS"), std::string::npos) << any.text;
  testing::Output half = parityd("--listen 127.0.0.1:0 --tls-cert /nonexistent.pem");
  EXPECT_EQ(half.code, 2);
  EXPECT_NE(half.text.find("--tls-cert and --tls-key go together"), std::string::npos) << half.text;
  testing::Output missing = parityd("--listen 127.0.0.1:0 --tls-cert /nonexistent.pem --tls-key /nonexistent.key");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.text.find("/nonexistent.pem"), std::string::npos) << missing.text;
}

// A daemon that cannot start says why and exits 2: before the store opens, after it (tokens
// required with no admin token), and with a database it cannot use. Each crashed (exit 139,
// nothing said) while the half-built server shut down.
// One daemon per port and per data directory. A second parityd on a port in use, or on a data
// directory another parityd holds, refuses to start (exit 2), naming the address or the holder's
// pid, and the first goes on serving alone (gRPC's SO_REUSEPORT let a second daemon share the
// port, and callers reached either at random). A killed holder leaves no stale lock.
TEST_F(E2eTest, ASecondParitydOnTheSamePortOrDataDirectoryRefusesToStart) {
  Daemon first(dir_ / "first");
  first.Start();
  ASSERT_EQ(testing::Run("client/parity-agent", "upload " + testing::kSample + "/golden --project p --role golden --server " + first.Address()).code, 0);

  testing::Output same_port = testing::Run(
      "server/parityd", "--data-dir " + (dir_ / "other").string() + " --listen " + first.Address(), "timeout 20");
  EXPECT_EQ(same_port.code, 2) << same_port.text;
  EXPECT_NE(same_port.text.find("cannot listen on " + first.Address() + ": the port is in use"), std::string::npos)
      << same_port.text;

  testing::Output same_dir = testing::Run(
      "server/parityd", "--data-dir " + (dir_ / "first" / "data").string() + " --listen 127.0.0.1:0", "timeout 20");
  EXPECT_EQ(same_dir.code, 2) << same_dir.text;
  EXPECT_NE(same_dir.text.find("is in use by another parityd (pid " + std::to_string(first.pid()) + ")"),
            std::string::npos)
      << same_dir.text;

  // Every call reaches the first daemon, which holds the one run.
  for (int i = 0; i < 5; ++i) {
    testing::Output runs = testing::Run("client/parity", "runs --json --server " + first.Address());
    ASSERT_EQ(runs.code, 0) << runs.text;
    EXPECT_NE(runs.text.find("\"golden\""), std::string::npos) << runs.text;
  }

  // SIGKILL releases the lock with the process: the directory opens again, with its run.
  ASSERT_EQ(first.Kill(SIGKILL), -SIGKILL);
  Daemon again(dir_ / "first");
  again.Start();
  testing::Output runs = testing::Run("client/parity", "runs --json --server " + again.Address());
  EXPECT_EQ(runs.code, 0) << runs.text;
  EXPECT_NE(runs.text.find("\"golden\""), std::string::npos) << runs.text;
}

// parityd speaks the flag style of parity and parity-agent: dashes, --help grouped by topic
// without build paths, --version, and the nearest flag for a misspelt one.
TEST_F(E2eTest, ParitydCommandLineIsTheCliStyle) {
  testing::Output help = testing::Run("server/parityd", "--help");
  EXPECT_EQ(help.code, 0) << help.text;
  for (const char* want : {"usage: parityd", "serving (", "storage (", "uploads (", "comparison (",
                           "--data-dir DIR", "--max-streams N", "--insecure-listen-any",
                           "(default 127.0.0.1:50051)"}) {
    EXPECT_NE(help.text.find(want), std::string::npos) << want << "\n" << help.text;
  }
  // No flag spelled with an underscore ("--data_dir").
  for (size_t at = help.text.find("--"); at != std::string::npos; at = help.text.find("--", at + 2)) {
    size_t end = at + 2;
    while (end < help.text.size() && (std::islower(static_cast<unsigned char>(help.text[end])) || help.text[end] == '-')) {
      ++end;
    }
    EXPECT_FALSE(end < help.text.size() && help.text[end] == '_') << help.text.substr(at, end - at + 8);
  }
  EXPECT_EQ(help.text.find(".cc"), std::string::npos) << help.text;

  testing::Output version = testing::Run("server/parityd", "--version");
  EXPECT_EQ(version.code, 0);
  EXPECT_EQ(version.text, "parityd 0.1.0\n");

  testing::Output old_style = testing::Run("server/parityd", "--data_dir " + (dir_ / "d").string(), "timeout 20");
  EXPECT_EQ(old_style.code, 2) << old_style.text;
  EXPECT_NE(old_style.text.find("unknown option '--data_dir'; did you mean --data-dir?"), std::string::npos)
      << old_style.text;
  EXPECT_FALSE(fs::exists(dir_ / "d"));

  testing::Output bad_bool = testing::Run("server/parityd", "--fsync=maybe", "timeout 20");
  EXPECT_EQ(bad_bool.code, 2) << bad_bool.text;
  EXPECT_NE(bad_bool.text.find("--fsync takes no value (or =true, =false), got 'maybe'"), std::string::npos)
      << bad_bool.text;
  testing::Output not_a_number = testing::Run("server/parityd", "--max-streams=lots", "timeout 20");
  EXPECT_EQ(not_a_number.code, 2) << not_a_number.text;
  EXPECT_NE(not_a_number.text.find("--max-streams takes an integer, got 'lots'"), std::string::npos)
      << not_a_number.text;
  testing::Output positional = testing::Run("server/parityd", "serve", "timeout 20");
  EXPECT_EQ(positional.code, 2) << positional.text;
  EXPECT_NE(positional.text.find("unexpected argument 'serve'"), std::string::npos) << positional.text;
}

TEST_F(E2eTest, ParitydThatCannotStartSaysWhyAndExitsTwo) {
  auto parityd = [&](const fs::path& data_dir, const std::string& flags) {
    return testing::Run("server/parityd", "--data-dir " + data_dir.string() + " --listen 127.0.0.1:0 " + flags);
  };
  const fs::path file = dir_ / "a-file";
  std::ofstream(file) << "not a directory";
  testing::Output not_dir = parityd(file, "");
  EXPECT_EQ(not_dir.code, 2) << not_dir.text;
  EXPECT_NE(not_dir.text.find("cannot start"), std::string::npos) << not_dir.text;
  EXPECT_NE(not_dir.text.find(file.string()), std::string::npos) << not_dir.text;

  // Limits that would refuse every upload, stall for good (--max-pending-writes=0 hung at start)
  // or leave a queue unbounded are refused, naming the flag.
  for (const char* flags :
       {"--max-streams=0", "--compare-workers=0", "--ingest-workers=-1", "--compare-queue=0",
        "--max-pending-writes=0", "--max-buffered-bytes=0", "--max-stream-buffer-bytes=0",
        "--max-outgoing-messages=0", "--max-items-per-run=0", "--max-tensor-bytes=0",
        "--compare-workers=5000"}) {
    // Under timeout: a daemon that accepted the flag would run (or hang) instead of exiting.
    testing::Output o =
        testing::Run("server/parityd",
                     "--data-dir " + (dir_ / "limits").string() + " --listen 127.0.0.1:0 " + flags,
                     "timeout 20");
    EXPECT_EQ(o.code, 2) << flags << "\n" << o.text;
    const std::string flag = std::string(flags).substr(0, std::string(flags).find('='));
    EXPECT_NE(o.text.find(flag + " must be"), std::string::npos) << flags << "\n" << o.text;
  }

  testing::Output no_admin = parityd(dir_ / "tokens", "--auth=tokens");
  EXPECT_EQ(no_admin.code, 2) << no_admin.text;
  EXPECT_NE(no_admin.text.find("no admin token exists"), std::string::npos) << no_admin.text;

  // An index the store names made unusable by hand: the store opens, its first query fails.
  Daemon d(dir_ / "db");
  d.Start();
  ASSERT_EQ(d.Kill(SIGTERM), 0);
  {
    absl::StatusOr<Database> db = OpenSqlite((dir_ / "db" / "data" / "parity.db").string());
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE(db->Exec("DROP INDEX items_by_blob_prefix; CREATE INDEX items_by_blob_prefix ON items(blob) WHERE 0").ok());
  }
  testing::Output bad_db = parityd(dir_ / "db" / "data", "");
  EXPECT_EQ(bad_db.code, 2) << bad_db.text;
  EXPECT_NE(bad_db.text.find("cannot start"), std::string::npos) << bad_db.text;
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

std::string SlurpFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// --auth=tokens: roles and projects on every RPC, tokens kept only as salted hashes.
TEST_F(E2eTest, TokensLimitEachCallerToItsRoleAndProject) {
  Daemon d(dir_ / "daemon", {"--auth=tokens", "--admin-token-file=" + (dir_ / "admin").string()});
  d.Start();
  const std::string admin = testing::ReadFirstWord(dir_ / "admin");
  ASSERT_EQ(admin.rfind("parity_", 0), 0u) << d.Log();
  auto cli = [&](const std::string& args, const std::string& token) {
    return testing::Run("client/parity", args + " --server " + d.Address() +
                                             (token.empty() ? "" : " --token " + token));
  };
  auto create = [&](const std::string& project, const std::string& role) {
    testing::Output o = testing::Run("client/parity", "token create --json --project " + project + " --role " +
                                                          role + " --server " + d.Address() + " --token " + admin,
                                     "", /*stderr_too=*/false);
    absl::StatusOr<Json> j = ParseJson(o.text);
    EXPECT_TRUE(j.ok()) << o.text;
    return j.ok() ? j->Find("token")->as_string() : std::string();
  };
  const std::string agent_a = create("A", "agent"), viewer_a = create("A", "viewer"), agent_b = create("B", "agent");
  ASSERT_FALSE(agent_a.empty());
  // A token's project follows the rules of a run's; its note is bounded and printable.
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"--project '../x' --role agent", "1-64 characters of [A-Za-z0-9_.-]"},
           {"--project A --role agent --note " + std::string(2000, 'n'), "2000 bytes, the limit is 1024"},
           {"--project A --role agent --note \"$(printf '\\033]0;OWNED\\007')\"", "control character 0x1b"}}) {
    testing::Output o = cli("token create " + args, admin);
    EXPECT_EQ(o.code, 2) << args << ": " << o.text;
    EXPECT_NE(o.text.find(needle), std::string::npos) << args << ": " << o.text;
  }
  const std::string golden = "upload " + kSample + "/golden --server " + d.Address() +
                             " --project A --role golden --retry-seconds 0 --run-id-file " + (dir_ / "g").string();
  testing::Output none = Agent(golden);
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.text.find("no token"), std::string::npos) << none.text;
  testing::Output viewer = Agent(golden + " --token " + viewer_a);
  EXPECT_EQ(viewer.code, 2);
  EXPECT_NE(viewer.text.find("uploading needs agent"), std::string::npos) << viewer.text;
  testing::Output other = Agent(golden + " --token " + agent_b);
  EXPECT_EQ(other.code, 2);
  EXPECT_NE(other.text.find("belongs to project 'B'"), std::string::npos) << other.text;
  testing::Output ok = Agent(golden + " --token " + agent_a);
  ASSERT_EQ(ok.code, 0) << ok.text << d.Log();
  testing::Output target = Agent("upload " + kSample + "/target --server " + d.Address() +
                                 " --project A --role target --against " + ReadId(dir_ / "g") +
                                 " --retry-seconds 0 --json --token " + agent_a);
  ASSERT_EQ(target.code, 1) << target.text;
  const std::string job = ParseJson(target.text.substr(target.text.find('{')))->Find("job_id")->as_string();

  // Reading: the viewer of A sees A; B's agent sees nothing of A and cannot ask for it.
  auto runs_of = [&](const std::string& token) {
    testing::Output o = testing::Run("client/parity", "runs --json --server " + d.Address() + " --token " + token,
                                     "", false);
    absl::StatusOr<Json> j = ParseJson(o.text);
    return j.ok() ? static_cast<int>(j->as_array().size()) : -1;
  };
  EXPECT_EQ(runs_of(viewer_a), 2);
  EXPECT_EQ(runs_of(agent_b), 0);
  EXPECT_EQ(runs_of(admin), 2);
  // ... not even whether it exists: A's job is, to B, what a made-up id is.
  testing::Output b_reads_a = cli("results " + job, agent_b);
  EXPECT_EQ(b_reads_a.code, 2);
  EXPECT_NE(b_reads_a.text.find("job '" + job + "' not found"), std::string::npos) << b_reads_a.text;
  EXPECT_EQ(b_reads_a.text.find("'A'"), std::string::npos) << b_reads_a.text;
  const std::string made_up = "job-00000000000000aa";
  testing::Output b_reads_none = cli("results " + made_up, agent_b);
  EXPECT_EQ(b_reads_none.code, 2);
  std::string expected = b_reads_none.text;
  for (size_t at; (at = expected.find(made_up)) != std::string::npos;) expected.replace(at, made_up.size(), job);
  EXPECT_EQ(b_reads_a.text, expected);
  // The same for runs: B cannot submit a job over A's runs, and is told they do not exist (and
  // with no token at all, that it has none, before any id is looked up).
  testing::Output b_submits = cli("submit --golden " + ReadId(dir_ / "g") + " --target " + ReadId(dir_ / "g"), agent_b);
  EXPECT_EQ(b_submits.code, 2);
  EXPECT_NE(b_submits.text.find("run '" + ReadId(dir_ / "g") + "' not found"), std::string::npos) << b_submits.text;
  testing::Output anon_submits = cli("submit --golden run-00000000000000aa --target run-00000000000000ab", "");
  EXPECT_EQ(anon_submits.code, 2);
  EXPECT_NE(anon_submits.text.find("no token"), std::string::npos) << anon_submits.text;
  EXPECT_EQ(cli("runs --project A", agent_b).code, 2);
  testing::Output a_reads = cli("results " + job, viewer_a);
  EXPECT_EQ(a_reads.code, 1) << a_reads.text;  // readable; the sample has failures
  // The server's status (aggregate figures only): any valid token, none without one.
  testing::Output status_none = cli("status", "");
  EXPECT_EQ(status_none.code, 2);
  EXPECT_NE(status_none.text.find("no token"), std::string::npos) << status_none.text;
  testing::Output status_b = cli("status", agent_b);
  EXPECT_EQ(status_b.code, 0) << status_b.text;
  EXPECT_NE(status_b.text.find("upload_streams"), std::string::npos) << status_b.text;

  // Managing tokens needs admin; the list shows ids and roles, never secrets.
  testing::Output not_admin = cli("token list", agent_a);
  EXPECT_EQ(not_admin.code, 2);
  EXPECT_NE(not_admin.text.find("needs admin"), std::string::npos) << not_admin.text;
  testing::Output list = testing::Run("client/parity", "token list --json --server " + d.Address() + " --token " + admin,
                                      "", false);
  absl::StatusOr<Json> lj = ParseJson(list.text);
  ASSERT_TRUE(lj.ok()) << list.text;
  EXPECT_EQ(lj->as_array().size(), 4u);
  const std::string viewer_secret = viewer_a.substr(viewer_a.rfind('_') + 1);
  EXPECT_EQ(list.text.find(viewer_secret), std::string::npos);
  const std::string viewer_id = viewer_a.substr(7, 12);
  EXPECT_EQ(cli("token revoke " + viewer_id, admin).code, 0);
  testing::Output revoked = cli("runs", viewer_a);
  EXPECT_EQ(revoked.code, 2);
  EXPECT_NE(revoked.text.find("was revoked"), std::string::npos) << revoked.text;
  testing::Output wrong = cli("runs", viewer_a.substr(0, viewer_a.size() - 1) + "0");
  EXPECT_EQ(wrong.code, 2);

  // Only salted hashes are stored: no secret appears in the database files.
  d.Kill(SIGTERM);
  const fs::path data = dir_ / "daemon" / "data";
  const std::string db = SlurpFile(data / "parity.db") + SlurpFile(data / "parity.db-wal");
  ASSERT_FALSE(db.empty());
  for (const std::string& t : {admin, agent_a, viewer_a, agent_b}) {
    EXPECT_EQ(db.find(t.substr(t.rfind('_') + 1)), std::string::npos);
  }
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

// A (nearly) full disk: uploads are refused with the numbers, queries go on, nothing breaks.
TEST_F(E2eTest, LowDiskSpaceRefusesNewUploadsCleanly) {
  Daemon d(dir_ / "daemon", {"--min-free-disk-bytes=1000000000000000000"});
  d.Start();
  testing::Output up = Agent("upload " + kSample + "/golden --server " + d.Address() +
                             " --project demo --role golden --retry-seconds 0");
  EXPECT_EQ(up.code, 2);
  EXPECT_NE(up.text.find("below parityd --min-free-disk-bytes=1000000000000000000"), std::string::npos) << up.text;
  testing::Output runs = testing::Run("client/parity", "runs --json --server " + d.Address(), "", false);
  EXPECT_EQ(runs.code, 0) << runs.text;
  EXPECT_EQ(runs.text, "[]\n");
  EXPECT_EQ(d.Kill(SIGTERM), 0);  // still up, and shuts down cleanly
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

// What parityd creates is its user's alone: the data directory 0700, the database, its journal
// and the admin token file 0600. The token file is created new, never over an existing file
// nor through a symlink (parityd refuses to start, and makes no token nobody could read).
TEST_F(E2eTest, TheDataDirectoryAndTokenFileAreTheUsersAlone) {
  auto mode = [](const fs::path& p) {
    struct stat st;
    return ::lstat(p.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 0777) : -1;
  };
  {
    Daemon d(dir_ / "a", {"--auth=tokens", "--admin-token-file=" + (dir_ / "admin").string()});
    d.Start();
    EXPECT_EQ(mode(dir_ / "a" / "data"), 0700);
    EXPECT_EQ(mode(dir_ / "a" / "data" / "parity.db"), 0600);
    EXPECT_EQ(mode(dir_ / "a" / "data" / "spool"), 0700);
    EXPECT_EQ(mode(dir_ / "admin"), 0600);
    EXPECT_EQ(d.Kill(SIGTERM), 0);
  }
  // A link where the token file should go (pointing at a file the attacker wants overwritten),
  // and a file that exists: both refused, naming the file.
  std::ofstream(dir_ / "victim") << "keep me\n";
  fs::create_symlink(dir_ / "victim", dir_ / "link");
  for (const fs::path& file : {dir_ / "link", dir_ / "victim"}) {
    testing::Output o = testing::Run("server/parityd", "--data-dir " + (dir_ / ("b" + file.filename().string())).string() +
                                                           " --listen 127.0.0.1:0 --auth=tokens --admin-token-file " +
                                                           file.string(),
                                     "timeout 20");
    EXPECT_EQ(o.code, 2) << o.text;
    EXPECT_NE(o.text.find("cannot create --admin-token-file " + file.string()), std::string::npos) << o.text;
  }
  EXPECT_EQ(SlurpFile(dir_ / "victim"), "keep me\n");
}

}  // namespace
}  // namespace parity
