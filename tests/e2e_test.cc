// End to end with the real binaries: parityd on loopback with a real SQLite file, parity-agent
// uploading the bundled sample dumps, daemon restarts (graceful and SIGKILL), and the results
// queried back over gRPC.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "parity/v1/parity.grpc.pb.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
const std::string kBin = PARITY_BINARY_DIR;
const std::string kSample = std::string(PARITY_SOURCE_DIR) + "/tests/data/sample";

class Daemon {
 public:
  explicit Daemon(const fs::path& dir) : dir_(dir) {}
  ~Daemon() { Kill(SIGKILL); }

  void Start() {
    const std::string port_file = (dir_ / "port").string();
    fs::remove(port_file);
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string log = (dir_ / "parityd.log").string();
      FILE* f = std::fopen(log.c_str(), "a");
      if (f) ::dup2(::fileno(f), 2);
      const std::string data = "--data_dir=" + (dir_ / "data").string();
      const std::string pf = "--port_file=" + port_file;
      const std::string bin = kBin + "/server/parityd";
      ::execl(bin.c_str(), bin.c_str(), data.c_str(), "--listen=127.0.0.1:0", pf.c_str(),
              "--shutdown_grace_seconds=5", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 200 && !fs::exists(port_file); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::ifstream in(port_file);
    in >> port_;
    ASSERT_GT(port_, 0) << "parityd did not start; log:\n" << Log();
  }

  // Sends `sig` and waits; returns the exit status (or -signal).
  int Kill(int sig) {
    if (pid_ <= 0) return 0;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }

  std::string Address() const { return absl::StrCat("127.0.0.1:", port_); }
  std::string Log() const {
    std::ifstream f(dir_ / "parityd.log");
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

 private:
  fs::path dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

struct Output {
  int code;
  std::string text;
};

Output Agent(const std::string& args) {
  const std::string cmd = kBin + "/client/parity-agent " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  Output o{-1, ""};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) o.text.append(buf.data(), n);
  const int status = ::pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

std::string ReadId(const fs::path& p) {
  std::ifstream f(p);
  std::string id;
  f >> id;
  return id;
}

class E2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("parity_e2e_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(E2eTest, SampleCulpritSurvivesRestart) {
  Daemon d(dir_);
  d.Start();
  Output g = Agent("upload " + kSample + "/golden --server " + d.Address() +
                   " --project demo --role golden --label build=7 --run-id-file " + (dir_ / "g").string());
  ASSERT_EQ(g.code, 0) << g.text << d.Log();
  // The target compares against the newest golden run labelled build=7 while it uploads.
  Output t = Agent("upload " + kSample + "/target --server " + d.Address() +
                   " --project demo --role target --against-label build=7 --run-id-file " + (dir_ / "t").string());
  EXPECT_EQ(t.code, 1) << t.text;
  EXPECT_NE(t.text.find("FAIL      Functional.linear.1.forward.output.0"), std::string::npos) << t.text;
  EXPECT_NE(t.text.find("JOB_STATE_DONE: 12 PASS, 0 WARN, 5 FAIL"), std::string::npos) << t.text;
  EXPECT_NE(t.text.find("First culprit: Functional.linear.1.forward"), std::string::npos) << t.text;
  EXPECT_EQ(d.Kill(SIGTERM), 0) << d.Log();
  EXPECT_NE(d.Log().find("msg=\"stopped\""), std::string::npos);

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

TEST_F(E2eTest, AcknowledgedResultsSurviveSigkill) {
  Daemon d(dir_);
  d.Start();
  Output g = Agent("upload " + kSample + "/golden --server " + d.Address() +
                   " --project demo --role golden --run-id-file " + (dir_ / "g").string());
  ASSERT_EQ(g.code, 0) << g.text;
  Output t = Agent("upload " + kSample + "/target --server " + d.Address() +
                   " --project demo --role target --against " + ReadId(dir_ / "g"));
  ASSERT_EQ(t.code, 1) << t.text;
  EXPECT_EQ(d.Kill(SIGKILL), -SIGKILL);
  d.Start();
  auto channel = grpc::CreateChannel(d.Address(), grpc::InsecureChannelCredentials());
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
  EXPECT_EQ(d.Kill(SIGTERM), 0);
}

TEST_F(E2eTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Agent("").code, 2);
  EXPECT_EQ(Agent("upload " + kSample + "/golden --project demo").code, 2);
  Output o = Agent("upload " + kSample + "/golden --project demo --role golden --server 127.0.0.1:1");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.text.find("refused the upload"), std::string::npos) << o.text;
  EXPECT_EQ(Agent("--help").code, 0);
}

}  // namespace
}  // namespace parity
