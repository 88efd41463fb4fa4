// A hostile caller against a real parityd over the wire: watches and idle upload streams must
// neither hold the daemon's threads nor take every slot, and a Flush is not progress.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/json.h"
#include "gtest/gtest.h"
#include "parity/v1/parity.grpc.pb.h"
#include "server/convert.h"
#include "tests/grpc_test_util.h"
#include "tests/test_util.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using testing::Daemon;
using testing::kSample;

class HostileTest : public testing::ScratchTest {};

using testing::PrivateChannel;
using testing::RawStream;
using testing::StartOf;
using testing::ValueItem;

// The daemon's thread count, from /proc.
int ThreadsOf(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

// The tests below end the daemon with streams they hold open on purpose (or an idle connection,
// which gRPC's shutdown also waits for): one second of grace for them, not five.
const char* const kShortGrace = "--shutdown-grace-seconds=1";


// Many Jobs.Watch calls driven by one completion queue: each is started and reads until its
// first message (or its end); then, on request, until its end.
class WatchCrowd {
 public:
  WatchCrowd(const std::vector<std::shared_ptr<grpc::Channel>>& channels, const std::string& job, int n)
      : calls_(n) {
    for (int i = 0; i < n; ++i) {
      Call& c = calls_[i];
      c.stub = v1::Jobs::NewStub(channels[i % channels.size()]);
      v1::WatchJobRequest req;
      req.set_job_id(job);
      c.reader = c.stub->AsyncWatch(&c.ctx, req, &cq_, Tag(i, kStarted));
    }
  }
  ~WatchCrowd() {
    for (Call& c : calls_) c.ctx.TryCancel();
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }
  // Runs the queue until every call has its first message or has ended (false on timeout).
  bool UntilFirst(std::chrono::seconds limit) {
    return Pump(limit, [this] {
      for (const Call& c : calls_) {
        if (c.messages == 0 && !c.ended) return false;
      }
      return true;
    });
  }
  // Keeps every call reading until each has ended (false on timeout).
  bool UntilEnd(std::chrono::seconds limit) {
    keep_reading_ = true;
    for (size_t i = 0; i < calls_.size(); ++i) {
      Call& c = calls_[i];
      if (!c.ended && !c.reading && !c.finishing) Read(static_cast<int>(i));
    }
    return Pump(limit, [this] {
      for (const Call& c : calls_) {
        if (!c.ended) return false;
      }
      return true;
    });
  }
  int Count(const std::function<bool(int messages, bool ended, const grpc::Status&)>& pred) const {
    int n = 0;
    for (const Call& c : calls_) n += pred(c.messages, c.ended, c.status) ? 1 : 0;
    return n;
  }
  const grpc::Status* AnyStatus(grpc::StatusCode code) const {
    for (const Call& c : calls_) {
      if (c.ended && c.status.error_code() == code) return &c.status;
    }
    return nullptr;
  }

 private:
  enum Op { kStarted = 0, kRead = 1, kFinished = 2 };
  struct Call {
    std::unique_ptr<v1::Jobs::Stub> stub;
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientAsyncReader<v1::JobProgress>> reader;
    v1::JobProgress message;
    int messages = 0;
    bool reading = false, finishing = false, ended = false;
    grpc::Status status;
  };
  static void* Tag(int i, Op op) { return reinterpret_cast<void*>(static_cast<intptr_t>(i) * 4 + op); }
  void Read(int i) {
    calls_[i].reading = true;
    calls_[i].reader->Read(&calls_[i].message, Tag(i, kRead));
  }
  bool Pump(std::chrono::seconds limit, const std::function<bool()>& done) {
    const auto deadline = std::chrono::system_clock::now() + limit;
    while (!done()) {
      void* tag;
      bool ok;
      if (cq_.AsyncNext(&tag, &ok, deadline) != grpc::CompletionQueue::GOT_EVENT) return false;
      const intptr_t t = reinterpret_cast<intptr_t>(tag);
      const int i = static_cast<int>(t / 4);
      Call& c = calls_[i];
      switch (static_cast<Op>(t % 4)) {
        case kStarted:
        case kRead:
          c.reading = false;
          if (static_cast<Op>(t % 4) == kRead && ok) ++c.messages;
          if (ok && (c.messages == 0 || keep_reading_)) {
            Read(i);
          } else if (!ok) {
            c.finishing = true;
            c.reader->Finish(&c.status, Tag(i, kFinished));
          }
          break;
        case kFinished:
          c.ended = true;
          break;
      }
    }
    return true;
  }
  grpc::CompletionQueue cq_;
  std::vector<Call> calls_;
  bool keep_reading_ = false;
};

// 500 watches of one unfinished job (an upload that never ends): the daemon holds no thread per
// watch, refuses those beyond --max-watches with the limit's name, and keeps answering status
// requests and uploads; when the job ends every watch gets its final state.
TEST_F(HostileTest, WatchesOfAnUnfinishedJobHoldNoThreadAndAreBounded) {
  Daemon d(dir_ / "daemon", {kShortGrace, "--max-watches=400", "--max-watches-per-project=400"});
  d.Start();
  testing::Output g = testing::RunAgent("upload " + kSample + "/golden --server " + d.Address() +
                                        " --project demo --role golden --run-id-file " + (dir_ / "g").string());
  ASSERT_EQ(g.code, 0) << g.text << d.Log();
  auto channel = PrivateChannel(d.Address());
  auto ingest = v1::Ingest::NewStub(channel);
  RawStream target(ingest.get(), "");
  ASSERT_TRUE(target.Start(StartOf("demo", v1::SIDE_TARGET, testing::ReadFirstWord(dir_ / "g"))))
      << target.status.error_message();
  const std::string job = target.accepted.job_id();
  ASSERT_FALSE(job.empty());
  const int threads_before = ThreadsOf(d.pid());

  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < 4; ++i) channels.push_back(PrivateChannel(d.Address()));  // at most 256 streams each
  WatchCrowd crowd(channels, job, 500);
  ASSERT_TRUE(crowd.UntilFirst(std::chrono::seconds(60))) << d.Log();
  EXPECT_EQ(crowd.Count([](int m, bool, const grpc::Status&) { return m > 0; }), 400);
  EXPECT_EQ(crowd.Count([](int, bool ended, const grpc::Status& s) {
              return ended && s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
            }),
            100);
  const grpc::Status* refused = crowd.AnyStatus(grpc::StatusCode::RESOURCE_EXHAUSTED);
  ASSERT_NE(refused, nullptr);
  EXPECT_NE(refused->error_message().find("(parityd --max-watches=400)"), std::string::npos)
      << refused->error_message();
  // No thread per watch (a thread each made about 280 for 250 watches).
  const int threads_during = ThreadsOf(d.pid());
  EXPECT_LT(threads_during, threads_before + 40) << threads_before << " before the watches";

  // The daemon still answers, and counts the watches against their limit.
  auto query = v1::Query::NewStub(channel);
  grpc::ClientContext sc;
  sc.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ServerStatus status;
  ASSERT_TRUE(query->GetServerStatus(&sc, v1::GetServerStatusRequest(), &status).ok());
  bool found = false;
  for (const v1::Gauge& gauge : status.gauges()) {
    if (gauge.name() != "job_watches") continue;
    found = true;
    EXPECT_EQ(gauge.value(), 400u);
    EXPECT_EQ(gauge.limit(), 400u);
    EXPECT_EQ(gauge.flag(), "max-watches");
  }
  EXPECT_TRUE(found);
  testing::Output again = testing::RunAgent("upload " + kSample + "/golden --server " + d.Address() +
                                            " --project other --role golden");
  EXPECT_EQ(again.code, 0) << again.text;

  // The upload ends: the job becomes final and every watch ends with it, cleanly.
  v1::UploadRequest end;
  end.mutable_end();
  ASSERT_TRUE(target.stream->Write(end));
  target.stream->WritesDone();
  v1::UploadResponse r;
  while (target.stream->Read(&r)) {
  }
  EXPECT_TRUE(target.stream->Finish().ok());
  ASSERT_TRUE(crowd.UntilEnd(std::chrono::seconds(60)));
  EXPECT_EQ(crowd.Count([](int m, bool ended, const grpc::Status& s) { return m > 0 && ended && s.ok(); }), 400);
  EXPECT_EQ(d.Kill(SIGTERM), 0) << d.Log();
}

std::string CreateToken(const Daemon& d, const std::string& admin, const std::string& project) {
  testing::Output o = testing::Run("client/parity", "token create --json --project " + project +
                                                        " --role agent --server " + d.Address() + " --token " + admin,
                                   "", /*stderr_too=*/false);
  absl::StatusOr<Json> j = ParseJson(o.text);
  return j.ok() && j->Find("token") != nullptr ? j->Find("token")->as_string() : "";
}

// One project's 64 idle uploads (UploadStart, then nothing) take at most their project's and
// tokens' shares of --max-streams: another project still uploads.
TEST_F(HostileTest, OneProjectsIdleStreamsLeaveAnotherProjectUploading) {
  Daemon d(dir_ / "daemon", {kShortGrace, "--auth=tokens", "--admin-token-file=" + (dir_ / "admin").string()});
  d.Start();
  const std::string admin = testing::ReadFirstWord(dir_ / "admin");
  std::vector<std::string> hostile;
  for (int i = 0; i < 4; ++i) hostile.push_back(CreateToken(d, admin, "A"));
  const std::string friendly = CreateToken(d, admin, "B");
  ASSERT_FALSE(friendly.empty()) << d.Log();
  auto channel = PrivateChannel(d.Address());
  auto ingest = v1::Ingest::NewStub(channel);
  std::vector<std::unique_ptr<RawStream>> idle;
  int accepted = 0, refused_project = 0;
  for (int i = 0; i < 64; ++i) {
    idle.push_back(std::make_unique<RawStream>(ingest.get(), hostile[i / 16]));
    if (idle.back()->Start(StartOf("A", v1::SIDE_GOLDEN))) {
      ++accepted;
      continue;
    }
    EXPECT_EQ(idle.back()->status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    const std::string& m = idle.back()->status.error_message();
    EXPECT_NE(m.find("in project 'A' (parityd --max-streams-per-project=32)"), std::string::npos) << m;
    ++refused_project;
  }
  EXPECT_EQ(accepted, 32);
  EXPECT_EQ(refused_project, 32);
  // One token holds at most its own share (here checked before the project's).
  RawStream more(ingest.get(), hostile[0]);
  EXPECT_FALSE(more.Start(StartOf("A", v1::SIDE_GOLDEN)));
  EXPECT_NE(more.status.error_message().find("(parityd --max-streams-per-token=16)"), std::string::npos)
      << more.status.error_message();

  testing::Output b = testing::RunAgent("upload " + kSample + "/golden --server " + d.Address() +
                                        " --project B --role golden --retry-seconds 0 --token " + friendly);
  EXPECT_EQ(b.code, 0) << b.text << d.Log();
  for (auto& s : idle) s->ctx.TryCancel();
  EXPECT_EQ(d.Kill(SIGTERM), 0) << d.Log();
}

// Without tokens a stream is no project's until its UploadStart: the project's share is taken
// then, before its run exists, so a refused start leaves no run behind.
TEST_F(HostileTest, AProjectsShareIsCountedAtUploadStartWithoutTokens) {
  Daemon d(dir_ / "daemon", {kShortGrace, "--max-streams-per-project=2"});
  d.Start();
  auto channel = PrivateChannel(d.Address());
  auto ingest = v1::Ingest::NewStub(channel);
  RawStream a1(ingest.get(), ""), a2(ingest.get(), ""), a3(ingest.get(), "");
  ASSERT_TRUE(a1.Start(StartOf("A", v1::SIDE_GOLDEN))) << a1.status.error_message();
  ASSERT_TRUE(a2.Start(StartOf("A", v1::SIDE_GOLDEN))) << a2.status.error_message();
  ASSERT_FALSE(a3.Start(StartOf("A", v1::SIDE_GOLDEN)));
  EXPECT_EQ(a3.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(a3.status.error_message().find("in project 'A' (parityd --max-streams-per-project=2)"),
            std::string::npos)
      << a3.status.error_message();
  testing::Output b = testing::RunAgent("upload " + kSample + "/golden --server " + d.Address() +
                                        " --project B --role golden --retry-seconds 0");
  EXPECT_EQ(b.code, 0) << b.text << d.Log();
  auto query = v1::Query::NewStub(channel);
  grpc::ClientContext lc;
  v1::ListRunsRequest lr;
  lr.set_project("A");
  v1::ListRunsResponse runs;
  ASSERT_TRUE(query->ListRuns(&lc, lr, &runs).ok());
  EXPECT_EQ(runs.runs_size(), 2);
  a1.ctx.TryCancel();
  a2.ctx.TryCancel();
  EXPECT_EQ(d.Kill(SIGTERM), 0) << d.Log();
}

// A graceful shutdown lets the upload in flight finish and refuses new ones, and a client that
// merely keeps a connection open does not hold it for the grace (gRPC's own shutdown would wait
// until that connection closed).
TEST_F(HostileTest, ShutdownFinishesUploadsInFlightAndWaitsForNoIdleConnection) {
  Daemon d(dir_ / "daemon", {"--shutdown-grace-seconds=60"});
  d.Start();
  auto idle = PrivateChannel(d.Address());  // open, and idle, until the end of the test
  auto query = v1::Query::NewStub(idle);
  {
    grpc::ClientContext c;
    v1::ListRunsResponse runs;
    ASSERT_TRUE(query->ListRuns(&c, v1::ListRunsRequest(), &runs).ok());
  }
  auto ingest = v1::Ingest::NewStub(PrivateChannel(d.Address()));
  RawStream up(ingest.get(), "");
  ASSERT_TRUE(up.Start(StartOf("demo", v1::SIDE_GOLDEN))) << up.status.error_message();
  auto item = [](int i) { return ValueItem(i, std::to_string(i)); };
  ASSERT_TRUE(up.stream->Write(item(0)));
  const auto stop_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(d.pid(), SIGTERM), 0);
  // The daemon is shutting down once it refuses a new upload.
  grpc::Status refused;
  for (int attempt = 0; attempt < 200; ++attempt) {
    RawStream next(ingest.get(), "");
    if (!next.Start(StartOf("demo", v1::SIDE_GOLDEN))) {
      refused = next.status;
      break;
    }
    next.ctx.TryCancel();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_NE(refused.error_message().find("parityd is shutting down"), std::string::npos) << refused.error_message();
  // The upload in flight goes on to its end.
  ASSERT_TRUE(up.stream->Write(item(1)));
  v1::UploadRequest end;
  end.mutable_end();
  ASSERT_TRUE(up.stream->Write(end));
  up.stream->WritesDone();
  int acked = 0;
  bool summary = false;
  v1::UploadResponse r;
  while (up.stream->Read(&r)) {
    acked += r.has_ack();
    summary |= r.has_summary();
  }
  EXPECT_TRUE(up.stream->Finish().ok());
  EXPECT_EQ(acked, 2);
  EXPECT_TRUE(summary);
  EXPECT_EQ(d.Kill(SIGTERM), 0) << d.Log();  // waits for the exit
  // Without the wait for uploads alone, gRPC's shutdown takes the whole 60 s grace here.
  EXPECT_LT(std::chrono::steady_clock::now() - stop_at, std::chrono::seconds(30));
}

// Reads `s` until it ends, sending a Flush every 200 ms meanwhile; its status.
grpc::Status FlushUntilEnded(RawStream& s) {
  std::atomic<bool> stop{false};
  std::thread flusher([&] {
    v1::UploadRequest flush;
    flush.mutable_flush();
    while (!stop.load() && s.stream->Write(flush)) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  v1::UploadResponse r;
  while (s.stream->Read(&r)) {
  }
  stop = true;
  flusher.join();
  return s.stream->Finish();
}

// Only progress resets the idle clock: a stream that sends nothing but Flush messages is ended
// like a silent one; a stream that never sends its UploadStart is ended sooner.
TEST_F(HostileTest, FlushesAreNotProgressAndAStartIsDue) {
  Daemon d(dir_ / "daemon", {kShortGrace, "--upload-idle-timeout-seconds=2", "--upload-start-timeout-seconds=1"});
  d.Start();
  auto channel = PrivateChannel(d.Address());
  auto ingest = v1::Ingest::NewStub(channel);
  RawStream flushing(ingest.get(), "");
  flushing.ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  ASSERT_TRUE(flushing.Start(StartOf("demo", v1::SIDE_GOLDEN))) << flushing.status.error_message();
  const grpc::Status flushed = FlushUntilEnded(flushing);
  EXPECT_EQ(flushed.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(flushed.error_message().find("(parityd --upload-idle-timeout-seconds=2; a Flush is not progress)"),
            std::string::npos)
      << flushed.error_message();

  RawStream silent(ingest.get(), "");
  silent.ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::UploadResponse r;
  while (silent.stream->Read(&r)) {
  }
  const grpc::Status never_started = silent.stream->Finish();
  EXPECT_EQ(never_started.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(never_started.error_message().find("(parityd --upload-start-timeout-seconds=1)"), std::string::npos)
      << never_started.error_message();
  EXPECT_EQ(d.Kill(SIGTERM), 0) << d.Log();
}

// An agent does not read a data file that is a link leading outside its dump's directory: the
// item goes as an ERROR row naming the link; --allow-outside-links reads it.
TEST_F(HostileTest, TheAgentReadsNoLinkOutsideItsDump) {
  Daemon d(dir_ / "daemon");
  d.Start();
  testing::WriteNpyDump(dir_ / "g", -1, 0, 2, 16);
  testing::WriteNpyDump(dir_ / "t", -1, 0, 2, 16);
  testing::WriteNpyDump(dir_ / "outside", -1, 0, 1, 16);
  fs::create_symlink("../outside/t00.npy", dir_ / "g" / "leak.npy");
  fs::copy_file(dir_ / "outside" / "t00.npy", dir_ / "t" / "leak.npy");
  const std::string pair = "upload-pair " + (dir_ / "g").string() + " " + (dir_ / "t").string() + " --server " +
                           d.Address() + " --project demo --no-color";
  testing::Output refused = testing::RunAgent(pair);
  EXPECT_EQ(refused.code, 2) << refused.text;
  EXPECT_NE(refused.text.find("ERROR       leak "), std::string::npos) << refused.text;
  EXPECT_NE(refused.text.find((dir_ / "g" / "leak.npy").string() + " leads outside the dump directory"),
            std::string::npos)
      << refused.text;
  EXPECT_NE(refused.text.find("2 pass, 0 warn, 0 fail, 1 error"), std::string::npos) << refused.text;
  testing::Output allowed = testing::RunAgent(pair + " --allow-outside-links");
  EXPECT_EQ(allowed.code, 0) << allowed.text;
  EXPECT_NE(allowed.text.find("3 pass, 0 warn, 0 fail, 0 error"), std::string::npos) << allowed.text;
  // A rank directory of a step*/rank* tree that is itself a link out of the tree: that rank is
  // not read (its own files would all lie inside it); the other ranks are uploaded.
  fs::create_directories(dir_ / "tree");
  fs::copy(kSample + "/golden", dir_ / "tree" / "rank0", fs::copy_options::recursive);
  fs::copy(kSample + "/golden", dir_ / "elsewhere", fs::copy_options::recursive);
  fs::create_directory_symlink("../elsewhere", dir_ / "tree" / "rank1");
  const std::string tree = "upload " + (dir_ / "tree").string() + " --server " + d.Address() +
                           " --project demo --role golden --no-color";
  testing::Output ranks = testing::RunAgent(tree);
  EXPECT_EQ(ranks.code, 2) << ranks.text;
  EXPECT_NE(ranks.text.find((dir_ / "tree" / "rank1").string() + " leads outside the dump directory"),
            std::string::npos)
      << ranks.text;
  EXPECT_NE(ranks.text.find("17 items acknowledged"), std::string::npos) << ranks.text;  // rank0
  testing::Output both = testing::RunAgent(tree + " --allow-outside-links");
  EXPECT_EQ(both.code, 0) << both.text;
}

// Every field of a query, job or token request is bounded and free of control characters, by
// one rule that names the field; the daemon answers them without touching the store.
TEST_F(HostileTest, EveryRequestFieldIsBoundedByName) {
  Daemon d(dir_ / "daemon");
  d.Start();
  auto channel = PrivateChannel(d.Address());
  auto jobs = v1::Jobs::NewStub(channel);
  auto query = v1::Query::NewStub(channel);
  auto expect = [](const grpc::Status& s, const std::string& needle) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find(needle), std::string::npos) << s.error_message();
  };
  {
    v1::ListRunsRequest req;
    for (int i = 0; i < 100; ++i) (*req.mutable_labels())[absl::StrCat("k", i)] = "v";
    grpc::ClientContext c;
    v1::ListRunsResponse out;
    expect(query->ListRuns(&c, req, &out), "ListRunsRequest.labels: 100 entries, the limit is 64");
  }
  {
    v1::GetJobRequest req;
    req.set_job_id(std::string(2000, 'j'));
    grpc::ClientContext c;
    v1::Job out;
    expect(jobs->Get(&c, req, &out), "GetJobRequest.job_id: 2000 bytes, the limit is 1024");
  }
  {
    v1::ListOpResultsRequest req;
    req.set_job_id("job-0000000000000000");
    req.set_op_glob("\x1b]0;OWNED\x07*");
    grpc::ClientContext c;
    v1::ListOpResultsResponse out;
    expect(query->ListOpResults(&c, req, &out), "ListOpResultsRequest.op_glob: control character 0x1b");
  }
  {
    v1::SubmitJobRequest req;
    req.set_golden_run_id("run-0000000000000000");
    req.set_target_run_id("run-0000000000000001");
    req.mutable_config()->set_config_json(std::string(70000, ' '));
    grpc::ClientContext c;
    v1::Job out;
    expect(jobs->Submit(&c, req, &out), "SubmitJobRequest.config.config_json: 70000 bytes, the limit is 65536");
  }
  {
    v1::WatchJobRequest req;
    req.set_job_id(std::string(1025, 'j'));
    grpc::ClientContext c;
    auto reader = jobs->Watch(&c, req);
    v1::JobProgress p;
    EXPECT_FALSE(reader->Read(&p));
    expect(reader->Finish(), "WatchJobRequest.job_id: 1025 bytes, the limit is 1024");
  }
  jobs.reset();
  query.reset();
  channel.reset();  // gRPC's shutdown waits out its grace for an open connection
  EXPECT_EQ(d.Kill(SIGTERM), 0) << d.Log();
}

// Metadata has a quota as tensor data has: once parity.db (and its log) reach
// --database-quota-bytes, items are refused naming the flag, and so is the next upload.
TEST_F(HostileTest, MetadataCountsAgainstTheDatabaseQuota) {
  constexpr uint64_t kQuota = 16u << 20;  // above SQLite's write-ahead log's usual 4 MiB
  Daemon d(dir_ / "daemon", {"--database-quota-bytes=" + std::to_string(kQuota)});
  d.Start();
  auto channel = PrivateChannel(d.Address());
  auto ingest = v1::Ingest::NewStub(channel);
  RawStream up(ingest.get(), "");
  ASSERT_TRUE(up.Start(StartOf("demo", v1::SIDE_GOLDEN))) << up.status.error_message();
  constexpr int kItems = 500;  // 500 values of 60 KiB: 30 MB of metadata offered
  for (int i = 0; i < kItems; ++i) {
    ASSERT_TRUE(up.stream->Write(ValueItem(i, std::string(60 << 10, static_cast<char>('a' + i % 26)))));
  }
  v1::UploadRequest end;
  end.mutable_end();
  up.stream->Write(end);
  up.stream->WritesDone();
  int acked = 0, refused = 0;
  std::string message;
  v1::UploadResponse r;
  while (up.stream->Read(&r)) {
    if (r.has_ack()) ++acked;
    if (r.has_rejected()) {
      ++refused;
      message = r.rejected().message();
    }
  }
  EXPECT_TRUE(up.stream->Finish().ok());
  EXPECT_GT(acked, 0);
  EXPECT_GT(refused, 0);
  EXPECT_EQ(acked + refused, kItems);
  EXPECT_NE(message.find("at parityd --database-quota-bytes=16777216"), std::string::npos) << message;
  EXPECT_EQ(d.Kill(SIGTERM), 0) << d.Log();
  // While the daemon runs, SQLite's log counts too (pages it holds twice until a checkpoint);
  // closed, the store is one file. Rows on their way to the store count against the quota, and
  // the files are measured after every MiB of rows, so what passes the quota is at most that MiB
  // and the estimate's error. Without the quota all 30 MB would be stored.
  uint64_t db = 0;
  for (const char* f : {"parity.db", "parity.db-wal"}) {
    std::error_code ec;
    const uintmax_t n = fs::file_size(dir_ / "daemon" / "data" / f, ec);
    if (!ec) db += n;
  }
  EXPECT_LT(db, kQuota + (3u << 20));
  EXPECT_GT(db, kQuota / 2);  // and the quota did not refuse far below itself
  // A database already past the quota refuses the next upload at its start (before any run).
  Daemon small(dir_ / "daemon", {"--database-quota-bytes=1048576"});
  small.Start();
  auto channel2 = PrivateChannel(small.Address());
  auto ingest2 = v1::Ingest::NewStub(channel2);
  RawStream next(ingest2.get(), "");
  EXPECT_FALSE(next.Start(StartOf("demo", v1::SIDE_GOLDEN)));
  EXPECT_EQ(next.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(next.status.error_message().find("at parityd --database-quota-bytes=1048576"), std::string::npos)
      << next.status.error_message();
  EXPECT_EQ(small.Kill(SIGTERM), 0) << small.Log();
}

// An internal error reaches the caller with its code and an incident id, never with the database's
// text or a path of the data directory (those go to the log).
TEST(EdgeStatus, InternalDetailsStayInTheLog) {
  const grpc::Status s = ToGrpcStatus(absl::InternalError(
      "prepare 'SELECT run_id FROM runs WHERE labels': Expression tree is too large (maximum depth 1000)"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(s.error_message().find("SELECT"), std::string::npos) << s.error_message();
  EXPECT_EQ(s.error_message().find("Expression"), std::string::npos) << s.error_message();
  EXPECT_EQ(s.error_message().rfind("internal error in parityd (incident ", 0), 0u) << s.error_message();
  const grpc::Status other = ToGrpcStatus(absl::ResourceExhaustedError("too many concurrent uploads"));
  EXPECT_EQ(other.error_message(), "too many concurrent uploads");  // the caller's to act on
}

}  // namespace
}  // namespace parity
