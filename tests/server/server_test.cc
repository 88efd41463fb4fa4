// parityd in-process on a real loopback port and a real SQLite file: uploads, verdict streams,
// jobs, queries, malformed input, and restart.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/agent.h"
#include "common/base/crc32.h"
#include "common/base/json.h"
#include "common/formats/npy.h"
#include "common/formats/safetensors.h"
#include "common/checks/stats.h"
#include "parity/v1/parity.grpc.pb.h"
#include "server/core/upload_session.h"
#include "server/server.h"
#include "tests/test_util.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
const std::string kSample = std::string(PARITY_SOURCE_DIR) + "/tests/data/sample";

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("parity_server_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    StartServer();
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  // Uploads the sample pair (golden, then target against it), checks its verdicts, restarts the
  // server and checks them again from a resubmitted job; `blobs_past_stage_budget`, if given,
  // gets the spool's count before the restart.
  // Uploads the sample pair, checks its verdicts, restarts and checks a new job's. The spool's
  // counters before the restart go to the non-null pointers.
  void ExpectSampleVerdictsBeforeAndAfterRestart(uint64_t* blobs_past_stage_budget = nullptr,
                                                 uint64_t* stages_high_water = nullptr);
  void StartServer() {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.core.data_dir = (dir_ / "data").string();
    o.core.fsync = fsync_;
    o.core.spool_direct_min_bytes = direct_min_bytes_;
    o.core.spool_stage_bytes = spool_stage_bytes_;
    o.core.inline_max_bytes = inline_max_bytes_;
    o.core.max_chunk_bytes = max_chunk_bytes_;
    o.core.max_tensor_bytes = max_tensor_bytes_;
    o.core.max_items_per_run = 100;
    o.ingest.upload_idle_timeout_seconds = idle_timeout_seconds_;
    o.ingest.max_stream_buffer_bytes = stream_buffer_bytes_;
    o.ingest.max_buffered_bytes = buffered_bytes_;
    o.ingest.end_after_ack_for_test = end_after_ack_;
    o.ingest_workers = ingest_workers_;
    auto s = ParityServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    addr_ = absl::StrCat("127.0.0.1:", server_->port());
    channel_ = grpc::CreateChannel(addr_, grpc::InsecureChannelCredentials());
    ingest_ = v1::Ingest::NewStub(channel_);
    jobs_ = v1::Jobs::NewStub(channel_);
    query_ = v1::Query::NewStub(channel_);
  }
  bool fsync_ = false;
  uint64_t max_chunk_bytes_ = 4096;
  uint64_t max_tensor_bytes_ = 1 << 20;
  uint64_t direct_min_bytes_ = 1 << 20;
  uint64_t spool_stage_bytes_ = CoreOptions().spool_stage_bytes;
  uint64_t inline_max_bytes_ = CoreOptions().inline_max_bytes;
  int64_t idle_timeout_seconds_ = 900;
  uint64_t stream_buffer_bytes_ = 4u << 20;
  uint64_t buffered_bytes_ = 256u << 20;
  int ingest_workers_ = ServerOptions().ingest_workers;
  std::function<IngestOptions::TestStreamEnd(int64_t, bool)> end_after_ack_;

  void Restart() {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_.reset();
    StartServer();
  }

  // Uploads with the real agent code; returns (exit code, stdout, run id).
  std::tuple<int, std::string, std::string> Upload(const std::string& path, const std::string& role,
                                                   const std::string& against = "", bool dedup = true) {
    UploadOptions o;
    o.dedup = dedup;
    o.path = path;
    o.server = addr_;
    o.project = "demo";
    o.role = role;
    o.labels = {{"build", "1"}};
    o.against_run_id = against;
    o.run_id_file = (dir_ / "run_id").string();
    o.retry_seconds = 5;
    std::ostringstream out, err;
    const int rc = RunUpload(o, out, err);
    std::ifstream f(o.run_id_file);
    std::string id;
    f >> id;
    return {rc, out.str() + err.str(), id};
  }

  // The items stored for `run`, read from the server's SQLite file on a connection of its own;
  // empty (and a test failure) when it cannot be read.
  std::vector<ItemRecord> StoredItems(const std::string& run) {
    StoreOptions so;
    so.path = (dir_ / "data" / "parity.db").string();
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(so);
    EXPECT_TRUE(store.ok()) << store.status();
    if (!store.ok()) return {};
    absl::StatusOr<std::vector<ItemRecord>> items = (*store)->ListItems(run);
    EXPECT_TRUE(items.ok()) << items.status();
    return items.ok() ? *std::move(items) : std::vector<ItemRecord>{};
  }

  // Submits the job and polls it until done (at most about 4 s); the last state seen.
  v1::Job SubmitAndWait(const v1::SubmitJobRequest& r) {
    grpc::ClientContext c;
    v1::Job job;
    const grpc::Status s = jobs_->Submit(&c, r, &job);
    EXPECT_TRUE(s.ok()) << s.error_message();
    for (int i = 0; s.ok() && i < 200 && job.state() != v1::JOB_STATE_DONE; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      grpc::ClientContext g;
      v1::GetJobRequest gr;
      gr.set_job_id(job.job_id());
      EXPECT_TRUE(jobs_->Get(&g, gr, &job).ok());
    }
    return job;
  }

  // Query.GetOpResult; an empty result (and a test failure) when the call fails.
  v1::OpResult GetResult(const std::string& job_id, const std::string& name) {
    grpc::ClientContext q;
    v1::GetOpResultRequest gr;
    gr.set_job_id(job_id);
    gr.set_name(name);
    v1::OpResult res;
    const grpc::Status s = query_->GetOpResult(&q, gr, &res);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return res;
  }

  fs::path dir_;
  std::unique_ptr<ParityServer> server_;
  std::string addr_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ingest::Stub> ingest_;
  std::unique_ptr<v1::Jobs::Stub> jobs_;
  std::unique_ptr<v1::Query::Stub> query_;
};

// grpc.health.v1.Health/Check through a generic call (Debian ships no health stubs): returns
// the serialized response (field 1 = status; SERVING = 1 encodes as "\x08\x01").
std::string HealthCheck(const std::shared_ptr<grpc::Channel>& channel, grpc::Status* status) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  grpc::ByteBuffer request, response;
  grpc::Slice empty("");
  request = grpc::ByteBuffer(&empty, 1);
  absl::Mutex mu;
  bool done = false;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) {
                   absl::MutexLock l(&mu);
                   *status = s;
                   done = true;
                 });
  absl::MutexLock l(&mu);
  mu.Await(absl::Condition(&done));
  std::vector<grpc::Slice> slices;
  std::string out;
  if (status->ok() && response.Dump(&slices).ok()) {
    for (const auto& sl : slices) out.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  }
  return out;
}

// The loopback rule looks at the addresses a listen address stands for, not at its text:
// "127.0.0.1.invalid" starts like loopback but names nothing (RFC 6761's .invalid never
// resolves), so it is no loopback address.
TEST(Listen, OnlyAddressesThatAreLoopbackCountAsLoopback) {
  for (const char* a : {"127.0.0.1:0", "127.9.8.7:50051", "[::1]:50051", "localhost:0", "ipv4:127.0.0.1:1"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a : {"127.0.0.1.invalid:0", "0.0.0.0:50051", "[::]:50051", "10.1.2.3:1", "[::ffff:10.0.0.1]:1",
                        ":50051", "", "[::1"}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

// With fsync on (parityd's default), blobs are made durable by the store's group sync before
// the items referencing them commit. What this test sees of that: an acknowledged upload has
// synced the spool at least once. (The order itself is disk_fault_test's: a crash between the
// two loses no acknowledged item.)
TEST_F(ServerTest, AnAcknowledgedUploadHasSyncedTheSpool) {
  server_.reset();
  fsync_ = true;
  StartServer();
  testing::WriteNpyDump(dir_ / "d", -1);
  auto [rc, out, run] = Upload((dir_ / "d").string(), "golden");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("40 items acknowledged"), std::string::npos) << out;
  EXPECT_GE(server_->core().spool().syncs(), 1u);
}

// With every blob written (and read back for comparison) past the page cache, the sample job's
// verdicts are the same as through it, and so after a restart.
TEST_F(ServerTest, DirectIoSpoolGivesTheSameVerdicts) {
  server_.reset();
  fsync_ = true;
  direct_min_bytes_ = 1;
  inline_max_bytes_ = 0;  // the sample's tensors are small
  StartServer();
  uint64_t stages = 0;
  ExpectSampleVerdictsBeforeAndAfterRestart(nullptr, &stages);
  // O_DIRECT writes go through aligned staging buffers: some were used, where the file system
  // does O_DIRECT (tmpfs does not, and there no blob is written so).
  if (testing::DirectIoWorksIn(dir_)) {
    EXPECT_GT(stages, 0u);
  } else {
    EXPECT_EQ(stages, 0u);
  }
}

// Blobs meant for O_DIRECT that find no staging buffer in the budget (none at all here) are
// written through the page cache instead, and read back past it for comparison: the same
// verdicts, and so after a restart.
TEST_F(ServerTest, BlobsPastTheStageBudgetGiveTheSameVerdicts) {
  server_.reset();
  fsync_ = true;
  direct_min_bytes_ = 1;
  inline_max_bytes_ = 0;
  spool_stage_bytes_ = 0;
  StartServer();
  uint64_t past_budget = 0;
  ExpectSampleVerdictsBeforeAndAfterRestart(&past_budget);
  // The golden side's blobs (no job compares them yet, so none is held in memory); the target's
  // are held for its job and written from memory, without stages. Where the file system does
  // not do O_DIRECT (tmpfs) no blob wants a stage.
  if (testing::DirectIoWorksIn(dir_)) {
    EXPECT_GT(past_budget, 0u);
  } else {
    EXPECT_EQ(past_budget, 0u);
  }
}

void ServerTest::ExpectSampleVerdictsBeforeAndAfterRestart(uint64_t* blobs_past_stage_budget,
                                                           uint64_t* stages_high_water) {
  auto [grc, gout, golden] = Upload(kSample + "/golden", "golden");
  ASSERT_EQ(grc, 0) << gout;
  auto [trc, tout, target] = Upload(kSample + "/target", "target", golden);
  EXPECT_EQ(trc, 1) << tout;
  EXPECT_NE(tout.find("First culprit: Functional.linear.1.forward"), std::string::npos) << tout;
  EXPECT_NE(tout.find("12 pass"), std::string::npos) << tout;
  if (blobs_past_stage_budget != nullptr) {
    *blobs_past_stage_budget = server_->core().spool().blobs_past_stage_budget();
  }
  if (stages_high_water != nullptr) *stages_high_water = server_->core().spool().stages_high_water();
  Restart();
  v1::SubmitJobRequest req;
  req.set_golden_run_id(golden);
  req.set_target_run_id(target);
  grpc::ClientContext c1;
  v1::Job sub;
  ASSERT_TRUE(jobs_->Submit(&c1, req, &sub).ok());
  v1::JobSummary summary;
  for (int i = 0; i < 200; ++i) {
    grpc::ClientContext c2;
    v1::GetJobSummaryRequest sr;
    sr.set_job_id(sub.job_id());
    ASSERT_TRUE(query_->GetJobSummary(&c2, sr, &summary).ok());
    if (summary.job().state() == v1::JOB_STATE_DONE) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(summary.job().state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(summary.counts().pass(), 12);
  EXPECT_EQ(summary.counts().fail(), 5);
  EXPECT_EQ(summary.first_culprit(), "Functional.linear.1.forward");
}

// A stream ended as gRPC's memory quota ends one (RESOURCE_EXHAUSTED without parityd's trailer)
// is resumed by the agent from what the server holds: each upload's first stream ends right
// after its 5th acknowledgement (a named point, not a timer), and both runs end complete, each
// item stored once, with the job's verdicts.
TEST_F(ServerTest, AStreamEndedAsByTheGrpcMemoryQuotaIsResumed) {
  std::atomic<int> ended{0};
  // Every upload's first stream ends at its 5th acknowledgement; a resumed one never does.
  end_after_ack_ = [&ended](int64_t acks, bool resumed) {
    if (acks != 5 || resumed) return IngestOptions::TestStreamEnd::kNone;
    ++ended;
    return IngestOptions::TestStreamEnd::kLikeGrpcQuota;
  };
  Restart();
  testing::WriteNpyDump(dir_ / "g", -1, 0, 20, 1024);
  testing::WriteNpyDump(dir_ / "t", 7, 1, 20, 1024);
  auto [grc, gout, golden] = Upload((dir_ / "g").string(), "golden");
  ASSERT_EQ(grc, 0) << gout;
  auto [trc, tout, target] = Upload((dir_ / "t").string(), "target", golden);
  EXPECT_EQ(trc, 1) << tout;
  EXPECT_EQ(ended.load(), 2);
  for (const std::string* out : {&gout, &tout}) {
    EXPECT_NE(out->find("stream cancelled by the server's gRPC memory quota (ended after an acknowledgement "
                        "(test)); reconnecting"),
              std::string::npos)
        << *out;
    EXPECT_NE(out->find(": resuming, the server holds "), std::string::npos) << *out;
  }
  EXPECT_NE(tout.find("19 pass, 0 warn, 1 fail, 0 error, 0 unmatched"), std::string::npos) << tout;
  EXPECT_NE(tout.find("First culprit: t07"), std::string::npos) << tout;
  EXPECT_EQ(StoredItems(golden).size(), 20u);
  EXPECT_EQ(StoredItems(target).size(), 20u);
}

// The same end chosen by parityd (its trailer present) is final: the agent stops with the
// server's own status and message, and does not reconnect.
TEST_F(ServerTest, AStreamParitydEndsIsNotResumed) {
  end_after_ack_ = [](int64_t acks, bool) {
    return acks == 5 ? IngestOptions::TestStreamEnd::kByParityd : IngestOptions::TestStreamEnd::kNone;
  };
  Restart();
  testing::WriteNpyDump(dir_ / "g", -1, 0, 20, 1024);
  auto [rc, out, run] = Upload((dir_ / "g").string(), "golden");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("parity-agent: upload failed: ended after an acknowledgement (test) (code 8, "),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("reconnecting"), std::string::npos) << out;
}

TEST_F(ServerTest, LiveVerdictsCulpritAndQueries) {
  auto [grc, gout, golden] = Upload(kSample + "/golden", "golden");
  ASSERT_EQ(grc, 0) << gout;
  auto [trc, tout, target] = Upload(kSample + "/target", "target", golden);
  EXPECT_EQ(trc, 1) << tout;
  EXPECT_NE(tout.find("FAIL        Functional.linear.1.forward.output.0"), std::string::npos) << tout;
  EXPECT_NE(tout.find("First culprit: Functional.linear.1.forward"), std::string::npos) << tout;

  grpc::ClientContext c1;
  v1::ListJobsRequest lj;
  lj.set_run_id(target);
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(jobs_->List(&c1, lj, &jobs).ok());
  ASSERT_EQ(jobs.jobs_size(), 1);
  const std::string job = jobs.jobs(0).job_id();
  EXPECT_EQ(jobs.jobs(0).state(), v1::JOB_STATE_DONE);

  grpc::ClientContext c2;
  v1::GetJobSummaryRequest sr;
  sr.set_job_id(job);
  v1::JobSummary summary;
  ASSERT_TRUE(query_->GetJobSummary(&c2, sr, &summary).ok());
  EXPECT_EQ(summary.first_culprit(), "Functional.linear.1.forward");
  ASSERT_EQ(summary.culprits_size(), 1);
  EXPECT_EQ(summary.counts().fail(), 5);
  EXPECT_EQ(summary.counts().pass(), 12);
  ASSERT_GT(summary.worst_size(), 0);
  EXPECT_EQ(summary.worst(0).metric(), "Cosine");
  EXPECT_LT(summary.worst(0).value(), 0.99);

  // Failing results, paged; the operators after the culprit are marked propagated.
  grpc::ClientContext c3;
  v1::ListOpResultsRequest lr;
  lr.set_job_id(job);
  lr.add_verdicts(v1::VERDICT_FAIL);
  lr.set_page_size(3);
  v1::ListOpResultsResponse page1;
  ASSERT_TRUE(query_->ListOpResults(&c3, lr, &page1).ok());
  EXPECT_EQ(page1.total(), 5);
  ASSERT_EQ(page1.results_size(), 3);
  EXPECT_EQ(page1.results(0).key().name(), "Functional.linear.1.forward.output.0");
  EXPECT_EQ(page1.results(0).culprit(), v1::CULPRIT_STATUS_CULPRIT);
  EXPECT_EQ(page1.results(1).culprit(), v1::CULPRIT_STATUS_PROPAGATED);
  ASSERT_FALSE(page1.next_page_token().empty());
  grpc::ClientContext c4;
  lr.set_page_token(page1.next_page_token());
  v1::ListOpResultsResponse page2;
  ASSERT_TRUE(query_->ListOpResults(&c4, lr, &page2).ok());
  EXPECT_EQ(page2.results_size(), 2);
  EXPECT_TRUE(page2.next_page_token().empty());
  for (const auto& r : page2.results()) EXPECT_EQ(r.culprit(), v1::CULPRIT_STATUS_PROPAGATED);

  grpc::ClientContext c5;
  v1::ListOpResultsRequest by_cos;
  by_cos.set_job_id(job);
  by_cos.set_sort_metric("Cosine");
  by_cos.set_op_glob("Functional.softmax.*");
  v1::ListOpResultsResponse sorted;
  ASSERT_TRUE(query_->ListOpResults(&c5, by_cos, &sorted).ok());
  ASSERT_EQ(sorted.results_size(), 3);
  EXPECT_LE(sorted.results(0).metrics(0).number(), sorted.results(1).metrics(0).number());
  // The non-tensor "dim" has no cosine: listed last, not dropped.
  for (const auto& m : sorted.results(2).metrics()) {
    if (m.name() == "Cosine") {
      EXPECT_FALSE(m.has_number()) << sorted.results(2).key().name();
    }
  }
  EXPECT_TRUE(sorted.results(1).metrics(0).has_number());

  grpc::ClientContext c6;
  v1::GetOpResultRequest gr;
  gr.set_job_id(job);
  gr.set_name("Functional.linear.1.forward.output.0");
  v1::OpResult one;
  ASSERT_TRUE(query_->GetOpResult(&c6, gr, &one).ok());
  EXPECT_EQ(one.peer_verdict(), "No");
  EXPECT_EQ(one.metrics(0).name(), "Cosine");
  EXPECT_EQ(one.target_shape_size(), 2);

  grpc::ClientContext c7;
  gr.set_name("no.such.item");
  EXPECT_EQ(query_->GetOpResult(&c7, gr, &one).error_code(), grpc::StatusCode::NOT_FOUND);

  grpc::ClientContext c8;
  v1::ListRunsRequest runs_req;
  runs_req.set_project("demo");
  (*runs_req.mutable_labels())["build"] = "1";
  v1::ListRunsResponse runs;
  ASSERT_TRUE(query_->ListRuns(&c8, runs_req, &runs).ok());
  ASSERT_EQ(runs.runs_size(), 2);
  EXPECT_TRUE(runs.runs(0).complete());
  EXPECT_EQ(runs.runs(0).structure_hash(), runs.runs(1).structure_hash());  // same model
  EXPECT_NE(runs.runs(0).fingerprint(), runs.runs(1).fingerprint());       // different numbers
  EXPECT_EQ(runs.runs(0).op_type_counts().at("linear"), 2);
}

TEST_F(ServerTest, SubmitWatchDiffAndCancel) {
  auto [grc, gout, golden] = Upload(kSample + "/golden", "golden");
  ASSERT_EQ(grc, 0) << gout;
  auto [arc, aout, good_target] = Upload(kSample + "/golden", "target");  // identical numbers
  ASSERT_EQ(arc, 0) << aout;
  auto [brc, bout, bad_target] = Upload(kSample + "/target", "target");
  ASSERT_EQ(brc, 0) << bout;

  // `golden` copied: a C++17 lambda cannot capture a structured binding (GCC allows it).
  auto submit = [&, golden = golden](const std::string& t) {
    grpc::ClientContext c;
    v1::SubmitJobRequest r;
    r.set_golden_run_id(golden);
    r.set_target_run_id(t);
    v1::Job job;
    grpc::Status s = jobs_->Submit(&c, r, &job);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return job.job_id();
  };
  auto watch_until_done = [&](const std::string& id) {
    grpc::ClientContext c;
    v1::WatchJobRequest w;
    w.set_job_id(id);
    auto reader = jobs_->Watch(&c, w);
    v1::JobProgress p, last;
    int updates = 0;
    while (reader->Read(&p)) {
      last = p;
      ++updates;
    }
    EXPECT_TRUE(reader->Finish().ok());
    EXPECT_GE(updates, 1);
    return last.job();
  };
  const std::string base = submit(good_target);
  const std::string cur = submit(bad_target);
  v1::Job b = watch_until_done(base);
  EXPECT_EQ(b.state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(b.counts().pass(), 17);
  EXPECT_EQ(b.first_culprit(), "");
  v1::Job c = watch_until_done(cur);
  EXPECT_EQ(c.counts().fail(), 5);
  EXPECT_EQ(c.pairs_done(), c.pairs_total());

  grpc::ClientContext dc;
  v1::DiffJobsRequest dr;
  dr.set_base_job_id(base);
  dr.set_job_id(cur);
  v1::DiffJobsResponse diff;
  ASSERT_TRUE(query_->DiffJobs(&dc, dr, &diff).ok());
  ASSERT_EQ(diff.regressions_size(), 5);
  EXPECT_EQ(diff.regressions(0).reason(), "verdict PASS -> FAIL");

  grpc::ClientContext cc;
  v1::CancelJobRequest cr;
  cr.set_job_id(base);
  v1::Job cancelled;
  EXPECT_EQ(jobs_->Cancel(&cc, cr, &cancelled).error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  grpc::ClientContext e1;
  v1::SubmitJobRequest bad;
  bad.set_golden_run_id("run-missing");
  bad.set_target_run_id(bad_target);
  v1::Job j;
  EXPECT_EQ(jobs_->Submit(&e1, bad, &j).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext e2;
  bad.set_golden_run_id(bad_target);  // a target run as golden
  grpc::Status s = jobs_->Submit(&e2, bad, &j);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("is not a golden run"), std::string::npos);
  grpc::ClientContext e3;
  v1::ListJobsRequest lj;
  lj.set_page_token("garbage");
  v1::ListJobsResponse lr;
  EXPECT_EQ(jobs_->List(&e3, lj, &lr).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// A raw upload stream for protocol tests.
struct RawUpload {
  explicit RawUpload(v1::Ingest::Stub* stub) : stream(stub->Upload(&ctx)) {}
  bool Send(const v1::UploadRequest& r) { return stream->Write(r); }
  std::vector<v1::UploadResponse> Drain(grpc::Status* status) {
    stream->WritesDone();
    std::vector<v1::UploadResponse> out;
    v1::UploadResponse r;
    while (stream->Read(&r)) out.push_back(r);
    *status = stream->Finish();
    return out;
  }
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::UploadRequest, v1::UploadResponse>> stream;
};

v1::UploadRequest Start(const std::string& project = "demo", v1::Side side = v1::SIDE_GOLDEN) {
  v1::UploadRequest r;
  r.mutable_start()->mutable_new_run()->set_project(project);
  r.mutable_start()->mutable_new_run()->set_side(side);
  return r;
}

v1::UploadRequest Header(const std::string& name, int64_t index, std::vector<int64_t> shape,
                         uint64_t bytes, v1::DType dtype = v1::DTYPE_FLOAT32) {
  v1::UploadRequest r;
  v1::TensorHeader* h = r.mutable_header();
  h->mutable_key()->set_name(name);
  h->mutable_key()->set_index(index);
  h->set_dtype(dtype);
  for (int64_t d : shape) h->add_shape(d);
  h->set_data_mode(v1::DATA_MODE_DATA);
  h->set_byte_length(bytes);
  return r;
}

v1::UploadRequest Chunk(uint64_t offset, const std::string& data) {
  v1::UploadRequest r;
  r.mutable_chunk()->set_offset(offset);
  r.mutable_chunk()->set_data(data);
  return r;
}

v1::UploadRequest End() {
  v1::UploadRequest r;
  r.mutable_end();
  return r;
}

// Sends a float32 output item holding `data`, in 4 KiB chunks.
void SendOutput(RawUpload& up, const std::string& name, int64_t index, const std::string& data) {
  v1::UploadRequest h = Header(name, index, {static_cast<int64_t>(data.size() / 4)}, data.size());
  h.mutable_header()->mutable_key()->set_role(v1::ROLE_OUTPUT);
  EXPECT_TRUE(up.Send(h));
  for (size_t off = 0; off < data.size(); off += 4096) EXPECT_TRUE(up.Send(Chunk(off, data.substr(off, 4096))));
}

// A new run of project "demo" holding float32 outputs (name, little-endian bytes) in this order;
// returns its id. Every item must be accepted.
std::string UploadOutputs(v1::Ingest::Stub* ingest, v1::Side side,
                          const std::vector<std::pair<std::string, std::string>>& outputs) {
  RawUpload up(ingest);
  up.Send(Start("demo", side));
  v1::UploadResponse r;
  EXPECT_TRUE(up.stream->Read(&r));
  const std::string id = r.accepted().run_id();
  int64_t i = 0;
  for (const auto& [name, data] : outputs) {
    v1::UploadRequest h = Header(name, i++, {static_cast<int64_t>(data.size() / 4)}, data.size());
    h.mutable_header()->mutable_key()->set_role(v1::ROLE_OUTPUT);
    up.Send(h);
    if (!data.empty()) up.Send(Chunk(0, data));  // an empty tensor is complete with its header
  }
  up.Send(End());
  grpc::Status st;
  for (const v1::UploadResponse& resp : up.Drain(&st)) EXPECT_FALSE(resp.has_rejected()) << resp.DebugString();
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(up.ctx.GetServerTrailingMetadata().count(kUploadEndedByParitydKey), 1u);
  return id;
}

// A large blob's last writes go on while the next tensors arrive (UploadSession::FinishPending):
// still, an item is acknowledged without waiting for another message, a second header for its
// name is a duplicate (and its index a reused one) even while its writes are in flight behind
// later blobs', more blobs in a row than may be pending are all stored, and every item is stored
// once.
TEST_F(ServerTest, LargeBlobsAreAcknowledgedWithoutTheNextMessage) {
  server_.reset();
  fsync_ = true;
  direct_min_bytes_ = 4096;  // written with O_DIRECT where the file system allows
  StartServer();
  const std::string data(64 << 10, '\x3c');
  auto send_item = [&](RawUpload& up, const std::string& name, int64_t index) { SendOutput(up, name, index, data); };
  RawUpload up(ingest_.get());
  ASSERT_TRUE(up.Send(Start()));
  v1::UploadResponse r;
  ASSERT_TRUE(up.stream->Read(&r));
  ASSERT_TRUE(r.has_accepted());
  const std::string run = r.accepted().run_id();
  send_item(up, "a.forward.output.0", 0);
  // Nothing more is sent until the ack arrives; a daemon waiting for the next message would
  // keep it pending, and the alarm below ends the wait as a failure instead of a hang.
  std::atomic<bool> acked{false};
  std::thread alarm([&] {
    for (int i = 0; i < 300 && !acked; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!acked) up.ctx.TryCancel();
  });
  ASSERT_TRUE(up.stream->Read(&r));
  acked = true;
  alarm.join();
  ASSERT_TRUE(r.has_ack()) << r.DebugString();
  EXPECT_EQ(r.ack().name(), "a.forward.output.0");
  // b, then at once b again and c reusing b's index, then d, e and f, then b again and g
  // reusing b's index (b may still be pending, three blobs back): only the duplicates are
  // rejected. Then more blobs than may be pending at once.
  send_item(up, "b.forward.output.0", 1);
  send_item(up, "b.forward.output.0", 2);
  send_item(up, "c.forward.output.0", 1);
  send_item(up, "d.forward.output.0", 3);
  send_item(up, "e.forward.output.0", 4);
  send_item(up, "f.forward.output.0", 5);
  send_item(up, "b.forward.output.0", 6);
  send_item(up, "g.forward.output.0", 1);
  const int kMore = static_cast<int>(UploadSession::kMaxPending) + 4;
  for (int i = 0; i < kMore; ++i) send_item(up, absl::StrCat("h", i, ".forward.output.0"), 7 + i);
  ASSERT_TRUE(up.Send(End()));
  grpc::Status st;
  std::map<std::string, std::vector<std::string>> events;
  for (const v1::UploadResponse& resp : up.Drain(&st)) {
    if (resp.has_ack()) events[resp.ack().name()].push_back("ack");
    if (resp.has_rejected()) events[resp.rejected().name()].push_back(resp.rejected().message());
  }
  EXPECT_TRUE(st.ok()) << st.error_message();
  // b's ack comes once its record is durable, in either order with the duplicate's rejection.
  std::vector<std::string>& b = events["b.forward.output.0"];
  std::sort(b.begin(), b.end());
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], "ack");
  EXPECT_NE(b[1].find("already uploaded"), std::string::npos) << b[1];
  EXPECT_NE(b[2].find("already uploaded"), std::string::npos) << b[2];
  for (const char* reused : {"c.forward.output.0", "g.forward.output.0"}) {
    ASSERT_EQ(events[reused].size(), 1u) << reused;
    EXPECT_NE(events[reused][0].find("index 1"), std::string::npos) << events[reused][0];
  }
  for (const char* name : {"d.forward.output.0", "e.forward.output.0", "f.forward.output.0"}) {
    EXPECT_EQ(events[name], std::vector<std::string>{"ack"}) << name;
  }
  for (int i = 0; i < kMore; ++i) {
    EXPECT_EQ(events[absl::StrCat("h", i, ".forward.output.0")], std::vector<std::string>{"ack"}) << i;
  }
  grpc::ClientContext c;
  v1::ListRunsRequest lr;
  v1::ListRunsResponse runs;
  ASSERT_TRUE(query_->ListRuns(&c, lr, &runs).ok());
  ASSERT_EQ(runs.runs_size(), 1);
  EXPECT_EQ(runs.runs(0).run_id(), run);
  EXPECT_EQ(runs.runs(0).item_count(), 5 + kMore);  // a, b, d, e, f and the h
  EXPECT_TRUE(runs.runs(0).complete());
}

// A target uploaded while its golden run is still arriving (parity-agent upload-pair): without
// summary_waits_for_job its UploadEnd is answered at once with the progress so far; with it, the
// summary waits until the golden run is complete and the job done, then reports every pair.
TEST_F(ServerTest, ASummaryWaitsForTheJobWhenAsked) {
  const std::string data(8192, '\x11');
  auto send_item = [&](RawUpload& up, const std::string& name, int64_t index) { SendOutput(up, name, index, data); };
  RawUpload golden(ingest_.get());
  ASSERT_TRUE(golden.Send(Start()));
  v1::UploadResponse r;
  ASSERT_TRUE(golden.stream->Read(&r));
  const std::string golden_id = r.accepted().run_id();
  send_item(golden, "a.forward.output.0", 0);
  ASSERT_TRUE(golden.stream->Read(&r));  // a is durable
  ASSERT_TRUE(r.has_ack()) << r.DebugString();
  // The target's upload: a and b; the golden side has only a so far.
  auto target_upload = [&](RawUpload& up, bool wait) {
    v1::UploadRequest start = Start("demo", v1::SIDE_TARGET);
    start.mutable_start()->set_against_run_id(golden_id);
    start.mutable_start()->set_summary_waits_for_job(wait);
    EXPECT_TRUE(up.Send(start));
    send_item(up, "a.forward.output.0", 0);
    send_item(up, "b.forward.output.0", 1);
    EXPECT_TRUE(up.Send(End()));
    up.stream->WritesDone();
  };
  RawUpload early(ingest_.get());
  target_upload(early, false);
  std::optional<v1::UploadSummary> early_summary;
  while (early.stream->Read(&r)) {
    if (r.has_summary()) early_summary = r.summary();
  }
  EXPECT_TRUE(early.stream->Finish().ok());
  ASSERT_TRUE(early_summary.has_value());
  EXPECT_NE(early_summary->job().state(), v1::JOB_STATE_DONE) << early_summary->DebugString();

  RawUpload waiting(ingest_.get());
  target_upload(waiting, true);
  absl::Mutex mu;
  std::vector<v1::UploadResponse> seen;  // guarded by mu
  std::thread reader([&] {
    v1::UploadResponse resp;
    while (waiting.stream->Read(&resp)) {
      absl::MutexLock l(&mu);
      seen.push_back(resp);
    }
  });
  auto summaries = [&] {
    absl::MutexLock l(&mu);
    return std::count_if(seen.begin(), seen.end(), [](const v1::UploadResponse& x) { return x.has_summary(); });
  };
  // a's verdict arrives (both halves are there), though nothing is written after it for now
  // (a response last in the queue is flushed, not held for the next); the summary does not
  // arrive while b's golden half is missing.
  auto verdict_seen = [&] {
    absl::MutexLock l(&mu);
    return std::any_of(seen.begin(), seen.end(), [](const v1::UploadResponse& x) { return x.has_verdict(); });
  };
  for (int i = 0; i < 500 && !verdict_seen(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(verdict_seen()) << "a's verdict did not arrive within 5 s";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(summaries(), 0);
  send_item(golden, "b.forward.output.0", 1);
  ASSERT_TRUE(golden.Send(End()));
  grpc::Status gs;
  golden.Drain(&gs);
  EXPECT_TRUE(gs.ok()) << gs.error_message();
  reader.join();  // the stream ends after the summary
  EXPECT_TRUE(waiting.stream->Finish().ok());
  ASSERT_EQ(summaries(), 1);
  absl::MutexLock l(&mu);
  const v1::UploadSummary& sum = seen.back().summary();
  ASSERT_TRUE(seen.back().has_summary());
  EXPECT_EQ(sum.job().state(), v1::JOB_STATE_DONE) << sum.DebugString();
  EXPECT_EQ(sum.job().counts().pass(), 2) << sum.DebugString();
}

// upload-pair with the real agent code: both runs uploaded at once, the target compared against
// the golden run while both arrive, the job's final summary printed; a golden side that cannot
// start stops the pair before any run exists.
TEST_F(ServerTest, UploadPairComparesBothSidesAtOnce) {
  UploadOptions o;
  o.server = addr_;
  o.project = "demo";
  o.labels = {{"build", "3"}};
  o.run_id_file = (dir_ / "pair").string();
  o.retry_seconds = 5;
  std::ostringstream out, err;
  EXPECT_EQ(RunUploadPair(o, kSample + "/golden", kSample + "/target", out, err), 1) << out.str() << err.str();
  EXPECT_NE(out.str().find("done: 12 pass, 0 warn, 5 fail, 0 error"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("First culprit: Functional.linear.1.forward"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("FAIL        Functional.linear.1.forward.output.0"), std::string::npos) << out.str();
  std::string golden_id, target_id;
  std::ifstream(o.run_id_file + ".golden") >> golden_id;
  std::ifstream(o.run_id_file + ".target") >> target_id;
  grpc::ClientContext c;
  v1::ListRunsRequest lr;
  v1::ListRunsResponse runs;
  ASSERT_TRUE(query_->ListRuns(&c, lr, &runs).ok());
  ASSERT_EQ(runs.runs_size(), 2);
  for (const v1::Run& run : runs.runs()) {
    EXPECT_TRUE(run.complete()) << run.DebugString();
    EXPECT_EQ(run.metadata().labels().at("build"), "3");
    EXPECT_EQ(run.run_id(), run.metadata().side() == v1::SIDE_GOLDEN ? golden_id : target_id);
  }
  grpc::ClientContext jc;
  v1::ListJobsRequest lj;
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(jobs_->List(&jc, lj, &jobs).ok());
  ASSERT_EQ(jobs.jobs_size(), 1);
  EXPECT_EQ(jobs.jobs(0).golden_run_id(), golden_id);
  EXPECT_EQ(jobs.jobs(0).target_run_id(), target_id);

  std::ostringstream out2, err2;
  EXPECT_EQ(RunUploadPair(o, (dir_ / "no such dump").string(), kSample + "/target", out2, err2), 2);
  EXPECT_NE(err2.str().find("no such dump"), std::string::npos) << err2.str();
  grpc::ClientContext c2;
  ASSERT_TRUE(query_->ListRuns(&c2, lr, &runs).ok());
  EXPECT_EQ(runs.runs_size(), 2) << "the target side must not start without its golden run";
}

// The golden side runs at most pair_lead_bytes ahead of the target side; when the target side
// has sent everything it has (here 3 of the golden side's 40 tensors), the golden side goes on
// alone instead of waiting for ever.
TEST_F(ServerTest, UploadPairGoldenSideGoesOnWhenTheTargetHasNoMore) {
  testing::WriteNpyDump(dir_ / "g", -1);
  fs::create_directories(dir_ / "t");
  for (const char* f : {"t00.npy", "t01.npy", "t02.npy"}) fs::copy_file(dir_ / "g" / f, dir_ / "t" / f);
  UploadOptions o;
  o.server = addr_;
  o.project = "demo";
  o.retry_seconds = 5;
  o.pair_lead_bytes = 1;
  std::ostringstream out, err;
  RunUploadPair(o, (dir_ / "g").string(), (dir_ / "t").string(), out, err);
  EXPECT_NE(out.str().find("done: 3 pass"), std::string::npos) << out.str() << err.str();
  EXPECT_NE(out.str().find("37 unmatched"), std::string::npos) << out.str() << err.str();
  grpc::ClientContext c;
  v1::ListRunsRequest lr;
  v1::ListRunsResponse runs;
  ASSERT_TRUE(query_->ListRuns(&c, lr, &runs).ok());
  ASSERT_EQ(runs.runs_size(), 2);
  for (const v1::Run& run : runs.runs()) EXPECT_TRUE(run.complete()) << run.DebugString();
}

// Both sides' streams carry the job's verdicts while they are open; upload-pair prints each
// verdict once (the target side's), in text and in JSON mode alike (where none go to stdout).
TEST_F(ServerTest, UploadPairPrintsEachVerdictOnce) {
  testing::WriteNpyDump(dir_ / "g", -1);
  testing::WriteNpyDump(dir_ / "t", 7);
  UploadOptions o;
  o.server = addr_;
  o.project = "demo";
  o.retry_seconds = 5;
  o.pair_lead_bytes = 1;  // the sides in step: the golden stream is open while pairs complete
  std::ostringstream out, err;
  EXPECT_EQ(RunUploadPair(o, (dir_ / "g").string(), (dir_ / "t").string(), out, err), 1) << err.str();
  EXPECT_NE(out.str().find("done: 39 pass, 0 warn, 1 fail"), std::string::npos) << out.str();
  std::map<std::string, int> printed;  // item -> verdict lines naming it
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("PASS ", 0) == 0 || line.rfind("FAIL ", 0) == 0) {
      std::istringstream words(line);
      std::string verdict, name;
      words >> verdict >> name;
      ++printed[name];
    }
  }
  EXPECT_EQ(printed.size(), 40u) << out.str();
  for (const auto& [name, n] : printed) EXPECT_EQ(n, 1) << name << "\n" << out.str();
}

TEST(UploadPacer, TheLeaderWaitsForTheFollowerUntilReleased) {
  UploadPacer pacer(100);
  pacer.WaitToLead(100);  // not ahead by more than 100: no wait
  std::atomic<int> stage{0};
  std::thread leader([&] {
    pacer.WaitToLead(250);  // 250 > 0 + 100
    stage = 1;
    pacer.WaitToLead(1000);
    stage = 2;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(stage.load(), 0);
  pacer.Followed(149);  // still 101 behind
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(stage.load(), 0);
  pacer.Followed(150);
  while (stage.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(stage.load(), 1);  // 1000 is far ahead of 150
  pacer.Release();
  leader.join();
  EXPECT_EQ(stage.load(), 2);
}

TEST(UploadPacer, WouldLeadTellsWhetherTheLeaderWouldWait) {
  UploadPacer pacer(100);
  EXPECT_TRUE(pacer.WouldLead(100));
  EXPECT_FALSE(pacer.WouldLead(101));
  pacer.Followed(50);
  EXPECT_TRUE(pacer.WouldLead(150));
  EXPECT_FALSE(pacer.WouldLead(151));
  pacer.Release();
  EXPECT_TRUE(pacer.WouldLead(1 << 30));
}

// UploadCanceller (upload-pair's golden side failed): the upload's stream ends at once and it
// returns 2 without reconnecting, although its retry window is long.
TEST_F(ServerTest, ACancelledUploadStopsWithoutReconnecting) {
  UploadOptions o;
  o.path = kSample + "/golden";
  o.server = addr_;
  o.project = "demo";
  o.role = "golden";
  o.retry_seconds = 600;
  o.max_bytes_per_second = 1000;  // ~23 s for the sample: still running when cancelled
  UploadCanceller cancel;
  absl::Notification accepted;
  UploadHooks hooks;
  hooks.canceller = &cancel;
  hooks.on_run_id = [&](const std::string&) { accepted.Notify(); };
  bool completed = true;
  hooks.completed = &completed;
  std::ostringstream out, err;
  int rc = -1;
  std::thread upload([&] { rc = RunUpload(o, out, err, hooks); });
  accepted.WaitForNotification();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  cancel.Cancel();
  upload.join();
  EXPECT_EQ(rc, 2);
  EXPECT_FALSE(completed);
  EXPECT_NE(err.str().find("stopped"), std::string::npos) << err.str();
  EXPECT_EQ(err.str().find("reconnecting"), std::string::npos) << err.str();
  grpc::ClientContext c;
  v1::ListRunsRequest lr;
  v1::ListRunsResponse runs;
  ASSERT_TRUE(query_->ListRuns(&c, lr, &runs).ok());
  ASSERT_EQ(runs.runs_size(), 1);
  EXPECT_FALSE(runs.runs(0).complete());
}

TEST_F(ServerTest, BadItemsAreRejectedAloneWithPreciseCodes) {
  // A second upload opened first and finished last: it must complete untouched by the bad one.
  RawUpload other(ingest_.get());
  ASSERT_TRUE(other.Send(Start("other")));
  ASSERT_TRUE(other.Send(Header("other.0", 0, {2}, 8)));
  ASSERT_TRUE(other.Send(Chunk(0, std::string(8, '\2'))));
  RawUpload up(ingest_.get());
  ASSERT_TRUE(up.Send(Start()));
  int64_t idx = 0;
  auto good = [&](const std::string& name) {
    up.Send(Header(name, idx++, {2}, 8));
    up.Send(Chunk(0, std::string(8, '\1')));
  };
  struct Bad {
    std::string name;
    grpc::StatusCode code;
    std::string needle;
  };
  std::vector<Bad> expect;
  good("ok.0");
  // Byte count disagrees with shape x dtype.
  up.Send(Header("bad.bytes", idx++, {2, 3}, 20));
  expect.push_back({"bad.bytes", grpc::StatusCode::INVALID_ARGUMENT, "byte_length 20"});
  // Unknown dtype enum.
  up.Send(Header("bad.dtype", idx++, {1}, 4, static_cast<v1::DType>(99)));
  expect.push_back({"bad.dtype", grpc::StatusCode::INVALID_ARGUMENT, "header.dtype 99"});
  // Huge dims.
  up.Send(Header("bad.huge", idx++, {1ll << 40, 1ll << 40}, 0));
  expect.push_back({"bad.huge", grpc::StatusCode::INVALID_ARGUMENT, "overflows"});
  // Too large for max_tensor_bytes.
  up.Send(Header("bad.large", idx++, {1 << 20}, 4u << 20));
  expect.push_back({"bad.large", grpc::StatusCode::RESOURCE_EXHAUSTED, "parityd --max-tensor-bytes=1048576"});
  // The dump's own dtype text and data file name are bounded like names.
  {
    v1::UploadRequest h = Header("bad.dtype_text", idx++, {1}, 4);
    h.mutable_header()->set_dtype_text(std::string(2000, 'x'));
    up.Send(h);
    expect.push_back({"bad.dtype_text", grpc::StatusCode::INVALID_ARGUMENT, "dtype_text, data_name, shape_text"});
  }
  {
    v1::UploadRequest h = Header("bad.in_run_golden", idx++, {1}, 4);
    h.mutable_header()->set_in_run_golden(std::string(2000, 'x'));
    up.Send(h);
    expect.push_back({"bad.in_run_golden", grpc::StatusCode::INVALID_ARGUMENT, "in_run_golden of 'bad.in_run_golden'"});
  }
  // Negative dim, negative index, empty name, path separator.
  up.Send(Header("bad.neg", idx++, {-1}, 0));
  expect.push_back({"bad.neg", grpc::StatusCode::INVALID_ARGUMENT, "negative"});
  up.Send(Header("bad.index", -5, {1}, 4));
  expect.push_back({"bad.index", grpc::StatusCode::INVALID_ARGUMENT, "index is negative (-5)"});
  up.Send(Header("bad.index1", -1, {1}, 4));  // the boundary: -1 is no "none" marker
  expect.push_back({"bad.index1", grpc::StatusCode::INVALID_ARGUMENT, "index is negative (-1)"});
  up.Send(Header("", idx++, {1}, 4));
  expect.push_back({"", grpc::StatusCode::INVALID_ARGUMENT, "name is empty"});
  up.Send(Header("../etc/passwd", idx++, {1}, 4));
  expect.push_back({"../etc/passwd", grpc::StatusCode::INVALID_ARGUMENT, "path separator"});
  // By reference: a malformed hash, a hash the server does not hold, a non-DATA mode.
  {
    v1::UploadRequest r = Header("bad.ref.hash", idx++, {2}, 8);
    r.mutable_header()->set_by_reference(true);
    r.mutable_header()->set_content_sha256("../../../../etc/passwd");
    up.Send(r);
    expect.push_back({"bad.ref.hash", grpc::StatusCode::INVALID_ARGUMENT, "not a lowercase hex SHA-256"});
    r = Header("bad.ref.missing", idx++, {2}, 8);
    r.mutable_header()->set_by_reference(true);
    r.mutable_header()->set_content_sha256(std::string(64, 'a'));
    up.Send(r);
    expect.push_back({"bad.ref.missing", grpc::StatusCode::FAILED_PRECONDITION, "send the data"});
    r = Header("bad.ref.mode", idx++, {2}, 0);
    r.mutable_header()->set_data_mode(v1::DATA_MODE_STATS);
    r.mutable_header()->set_by_reference(true);
    r.mutable_header()->set_content_sha256(std::string(64, 'a'));
    up.Send(r);
    expect.push_back({"bad.ref.mode", grpc::StatusCode::INVALID_ARGUMENT, "by_reference needs DATA_MODE_DATA"});
  }
  // Control character, over-long name, over-long api, rank above 8, byte counts that contradict
  // the data mode or the missing dtype.
  up.Send(Header("bad\x01name", idx++, {1}, 4));
  expect.push_back({"bad\x01name", grpc::StatusCode::INVALID_ARGUMENT, "control character 0x1"});
  // Every text field that describes the item takes no control characters either (a terminal
  // would run them): an escape in api, a C1 CSI (U+009B) in op_type, a bell in the dtype text.
  {
    v1::UploadRequest r = Header("bad.api.esc", idx++, {1}, 4);
    r.mutable_header()->mutable_key()->set_api("Functional.x\x1b]0;OWNED\x07");
    up.Send(r);
    expect.push_back({"bad.api.esc", grpc::StatusCode::INVALID_ARGUMENT, "header.key.api of item"});
    r = Header("bad.optype.c1", idx++, {1}, 4);
    r.mutable_header()->mutable_key()->set_op_type("relu\xc2\x9b" "2J");
    up.Send(r);
    expect.push_back({"bad.optype.c1", grpc::StatusCode::INVALID_ARGUMENT, "header.key.op_type of item"});
    r = Header("bad.dtype_text.bel", idx++, {1}, 4);
    r.mutable_header()->set_dtype_text("torch.float32\x07");
    up.Send(r);
    expect.push_back({"bad.dtype_text.bel", grpc::StatusCode::INVALID_ARGUMENT, "control character 0x7"});
    // A non-tensor value is bounded (it is stored in the item's row).
    r = Header("bad.scalar.long", idx++, {}, 0, v1::DTYPE_UNSPECIFIED);
    r.mutable_header()->set_data_mode(v1::DATA_MODE_STATS);
    r.mutable_header()->set_scalar_type("str");
    r.mutable_header()->set_scalar_value(std::string(100000, 's'));
    up.Send(r);
    expect.push_back({"bad.scalar.long", grpc::StatusCode::INVALID_ARGUMENT, "100000 bytes, the limit is 65536"});
    // Enums take their declared values only.
    r = Header("bad.phase", idx++, {1}, 4);
    r.mutable_header()->mutable_key()->set_phase(static_cast<v1::Phase>(-3));
    up.Send(r);
    expect.push_back({"bad.phase", grpc::StatusCode::INVALID_ARGUMENT, "key.phase -3"});
    r = Header("bad.role", idx++, {1}, 4);
    r.mutable_header()->mutable_key()->set_role(static_cast<v1::Role>(1000));
    up.Send(r);
    expect.push_back({"bad.role", grpc::StatusCode::INVALID_ARGUMENT, "key.role 1000"});
  }
  up.Send(Header(std::string(2000, 'n'), idx++, {1}, 4));
  expect.push_back({std::string(2000, 'n'), grpc::StatusCode::INVALID_ARGUMENT, "2000 bytes, the limit is 1024"});
  {
    v1::UploadRequest r = Header("bad.api", idx++, {1}, 4);
    r.mutable_header()->mutable_key()->set_api(std::string(1500, 'a'));
    up.Send(r);
    expect.push_back({"bad.api", grpc::StatusCode::INVALID_ARGUMENT, "longer than 1024 bytes"});
    up.Send(Header("bad.rank", idx++, {1, 1, 1, 1, 1, 1, 1, 1, 1}, 4));
    expect.push_back({"bad.rank", grpc::StatusCode::INVALID_ARGUMENT, "rank"});
    r = Header("bad.stats.bytes", idx++, {1}, 4);
    r.mutable_header()->set_data_mode(v1::DATA_MODE_STATS);
    up.Send(r);
    expect.push_back({"bad.stats.bytes", grpc::StatusCode::INVALID_ARGUMENT, "must be 0 when no data is sent"});
    r = Header("bad.nodtype", idx++, {1}, 4, v1::DTYPE_UNSPECIFIED);
    up.Send(r);
    expect.push_back({"bad.nodtype", grpc::StatusCode::INVALID_ARGUMENT, "header.dtype is unspecified"});
    // A read error stands for the data: none may follow, nor a scalar, nor 4 KiB of text.
    r = Header("bad.readerr.data", idx++, {1}, 4);
    r.mutable_header()->set_read_error("x.npy: truncated");
    up.Send(r);
    expect.push_back({"bad.readerr.data", grpc::StatusCode::INVALID_ARGUMENT, "has a read_error and so no data"});
    r = Header("bad.readerr.scalar", idx++, {}, 0, v1::DTYPE_UNSPECIFIED);
    r.mutable_header()->set_scalar_value("3");
    r.mutable_header()->set_read_error("x.npy: truncated");
    up.Send(r);
    expect.push_back({"bad.readerr.scalar", grpc::StatusCode::INVALID_ARGUMENT, "is for tensors"});
    r = Header("bad.readerr.long", idx++, {}, 0, v1::DTYPE_UNSPECIFIED);
    r.mutable_header()->set_read_error(std::string(5000, 'e'));
    up.Send(r);
    expect.push_back({"bad.readerr.long", grpc::StatusCode::INVALID_ARGUMENT, "5000 bytes, the limit is 4096"});
    // Well formed: no dtype, no data mode, only the error; stored, acknowledged.
    r = Header("ok.readerr", idx++, {}, 0, v1::DTYPE_UNSPECIFIED);
    r.mutable_header()->clear_data_mode();
    r.mutable_header()->set_read_error("x.npy: truncated .npy file (7 bytes)");
    up.Send(r);
  }
  // Duplicate item.
  up.Send(Header("ok.0", idx++, {2}, 8));
  expect.push_back({"ok.0", grpc::StatusCode::ALREADY_EXISTS, "already uploaded"});
  // Chunk overrun, wrong offset, chunk above max_chunk_bytes, chunk without header.
  up.Send(Header("bad.overrun", idx++, {2}, 8));
  up.Send(Chunk(0, std::string(12, '\0')));
  expect.push_back({"bad.overrun", grpc::StatusCode::INVALID_ARGUMENT, "overruns"});
  up.Send(Header("bad.offset", idx++, {2}, 8));
  up.Send(Chunk(4, std::string(4, '\0')));
  expect.push_back({"bad.offset", grpc::StatusCode::INVALID_ARGUMENT, "offset 4"});
  up.Send(Header("bad.chunk", idx++, {2048}, 8192));
  up.Send(Chunk(0, std::string(8192, '\0')));
  expect.push_back({"bad.chunk", grpc::StatusCode::RESOURCE_EXHAUSTED, "parityd --max-chunk-bytes=4096"});
  // Wrong CRC.
  v1::UploadRequest crc = Header("bad.crc", idx++, {1}, 4);
  crc.mutable_header()->set_crc32(1234);
  up.Send(crc);
  up.Send(Chunk(0, "abcd"));
  expect.push_back({"bad.crc", grpc::StatusCode::DATA_LOSS, "CRC-32"});
  // Truncated item (the next header arrives early).
  up.Send(Header("bad.truncated", idx++, {4}, 16));
  up.Send(Chunk(0, std::string(8, '\0')));
  good("ok.1");
  expect.push_back({"bad.truncated", grpc::StatusCode::DATA_LOSS, "ended after 8 of 16 bytes"});
  // A stray chunk: no current item.
  up.Send(Chunk(0, "x"));
  expect.push_back({"", grpc::StatusCode::FAILED_PRECONDITION, "without a header"});
  up.Send(End());
  grpc::Status status;
  std::vector<v1::UploadResponse> resp = up.Drain(&status);
  EXPECT_TRUE(status.ok()) << status.error_message();
  std::vector<std::string> acked;
  std::vector<v1::ItemRejected> rejected;
  bool summary = false;
  for (const auto& r : resp) {
    if (r.has_ack()) acked.push_back(r.ack().name());
    if (r.has_rejected()) rejected.push_back(r.rejected());
    if (r.has_summary()) summary = true;
  }
  EXPECT_EQ(acked, (std::vector<std::string>{"ok.0", "ok.readerr", "ok.1"}));
  EXPECT_TRUE(summary);
  ASSERT_EQ(rejected.size(), expect.size());
  for (size_t i = 0; i < expect.size(); ++i) {
    // Rejections come in order, except the truncated one (reported when the next header came).
    auto it = std::find_if(rejected.begin(), rejected.end(), [&](const v1::ItemRejected& r) {
      return r.name() == expect[i].name && r.message().find(expect[i].needle) != std::string::npos;
    });
    ASSERT_NE(it, rejected.end()) << expect[i].name << " / " << expect[i].needle;
    EXPECT_EQ(it->code(), static_cast<int>(expect[i].code)) << expect[i].name << ": " << it->message();
  }
  EXPECT_GE(expect.size(), 24u);  // with the 8 stream-level violations below: more than 30 cases
  // The other upload, still open through all of that, completes.
  ASSERT_TRUE(other.Send(Header("other.1", 1, {1}, 4)));
  ASSERT_TRUE(other.Send(Chunk(0, "wxyz")));
  ASSERT_TRUE(other.Send(End()));
  grpc::Status other_status;
  std::vector<v1::UploadResponse> other_resp = other.Drain(&other_status);
  EXPECT_TRUE(other_status.ok()) << other_status.error_message();
  int other_acks = 0;
  for (const auto& r : other_resp) other_acks += r.has_ack();
  EXPECT_EQ(other_acks, 2);
}

// An agent that sends a large file as it reads it puts the item's CRC-32 and statistics on its
// last chunk (TensorChunk.crc32, .stats), and ends an item it can no longer read with a
// read_error chunk: the CRC is verified as the header's would be, the statistics stored as the
// header's, the aborted item stored as a read error (no data), and every misuse refused alone.
TEST_F(ServerTest, ItemsMayEndWithTheirCrcStatisticsOrReadError) {
  RawUpload up(ingest_.get());
  ASSERT_TRUE(up.Send(Start()));
  v1::UploadResponse r;
  ASSERT_TRUE(up.stream->Read(&r));
  const std::string run_id = r.accepted().run_id();
  const std::string data("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8);  // float32 1, -2
  const uint32_t crc = Crc32(0, data.data(), data.size());
  auto last = [&](std::optional<uint32_t> c, bool stats) {
    v1::UploadRequest q = Chunk(4, data.substr(4));
    if (c) q.mutable_chunk()->set_crc32(*c);
    if (stats) {
      q.mutable_chunk()->mutable_stats()->set_max(1);
      q.mutable_chunk()->mutable_stats()->set_min(-2);
      q.mutable_chunk()->mutable_stats()->set_mean(-0.5);
      q.mutable_chunk()->mutable_stats()->set_norm(2.25);
    }
    return q;
  };
  int64_t idx = 0;
  up.Send(Header("ok.trailer", idx++, {2}, 8));
  up.Send(Chunk(0, data.substr(0, 4)));
  up.Send(last(crc, true));
  up.Send(Header("bad.trailer.crc", idx++, {2}, 8));
  up.Send(Chunk(0, data.substr(0, 4)));
  up.Send(last(crc ^ 1, false));
  v1::UploadRequest h = Header("bad.trailer.disagrees", idx++, {2}, 8);
  h.mutable_header()->set_crc32(crc ^ 1);
  up.Send(h);
  up.Send(Chunk(0, data.substr(0, 4)));
  up.Send(last(crc, false));
  h = Header("bad.stats.twice", idx++, {2}, 8);
  h.mutable_header()->mutable_stats()->set_max(1);
  up.Send(h);
  up.Send(Chunk(0, data.substr(0, 4)));
  up.Send(last(std::nullopt, true));
  up.Send(Header("bad.stats.early", idx++, {2}, 8));
  v1::UploadRequest early = Chunk(0, data.substr(0, 4));
  early.mutable_chunk()->mutable_stats()->set_max(1);
  up.Send(early);
  up.Send(Header("ok.aborted", idx++, {2}, 8));
  up.Send(Chunk(0, data.substr(0, 4)));
  v1::UploadRequest abort;
  abort.mutable_chunk()->set_read_error("/dumps/x.npy: file ended at byte 132");
  up.Send(abort);
  up.Send(abort);  // no item now
  up.Send(End());
  grpc::Status status;
  std::vector<std::string> acked;
  std::map<std::string, v1::ItemRejected> rejected;
  for (const v1::UploadResponse& resp : up.Drain(&status)) {
    if (resp.has_ack()) acked.push_back(resp.ack().name());
    if (resp.has_rejected()) rejected[resp.rejected().name()] = resp.rejected();
  }
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(acked, (std::vector<std::string>{"ok.trailer", "ok.aborted"}));
  const std::map<std::string, std::pair<grpc::StatusCode, std::string>> expect = {
      {"bad.trailer.crc", {grpc::StatusCode::DATA_LOSS, "its chunk says"}},
      {"bad.trailer.disagrees", {grpc::StatusCode::DATA_LOSS, "chunk.crc32 of 'bad.trailer.disagrees'"}},
      {"bad.stats.twice", {grpc::StatusCode::INVALID_ARGUMENT, "its header has statistics already"}},
      {"bad.stats.early", {grpc::StatusCode::INVALID_ARGUMENT, "not its last"}},
      {"", {grpc::StatusCode::FAILED_PRECONDITION, "read_error arrived without a header"}},
  };
  EXPECT_EQ(rejected.size(), expect.size());
  for (const auto& [name, want] : expect) {
    auto it = rejected.find(name);
    ASSERT_NE(it, rejected.end()) << name;
    EXPECT_EQ(it->second.code(), static_cast<int>(want.first)) << name << ": " << it->second.message();
    EXPECT_NE(it->second.message().find(want.second), std::string::npos) << name << ": " << it->second.message();
  }
  const std::vector<ItemRecord> items = StoredItems(run_id);
  ASSERT_EQ(items.size(), 2u);
  for (const ItemRecord& it : items) {
    if (it.name == "ok.trailer") {
      EXPECT_EQ(it.crc32, crc);
      EXPECT_EQ(it.max, 1.0);
      EXPECT_EQ(it.min, -2.0);
      EXPECT_EQ(it.mean, -0.5);
      EXPECT_EQ(it.norm, 2.25);
      EXPECT_FALSE(it.blob.empty());
      EXPECT_TRUE(it.read_error.empty());
    } else {
      EXPECT_EQ(it.name, "ok.aborted");
      EXPECT_EQ(it.read_error, "/dumps/x.npy: file ended at byte 132");
      EXPECT_TRUE(it.blob.empty());
      EXPECT_EQ(it.data_mode, DataMode::kStats);
      EXPECT_EQ(it.dtype, DType::kFloat32);  // what the header said is kept
    }
  }
}

// Tensors of 4 MiB or more are sent from their files in pieces (the agent's memory does not
// grow with them), their CRC-32 and statistics computed as they are read: what is stored is
// what a whole read would have sent (the same CRC, the statistics' bits), with and without the
// dedup offer (which reads the file once more for its CRC), on the vectorised float32 path and
// the element-by-element int64 one, whole pieces and a ragged end; a second upload of the same
// files sends them by reference; the job compares them as usual.
// With the dedup offer, a tensor sent from its file goes with the CRC-32 of a first read in its
// header. When the file changes before its pieces are read, the agent ends that item with a
// read error naming the file (an ERROR row), and the rest of the upload is stored (the server
// does not refuse the item's data for its CRC with DATA_LOSS).
TEST_F(ServerTest, AFileChangedDuringTheUploadBecomesAReadError) {
  server_.reset();
  max_chunk_bytes_ = 64 << 10;
  StartServer();
  const int64_t n = 64 << 10;  // 256 KiB of float32: offered for dedup and sent in pieces
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k)] = static_cast<float>(std::cos(0.001 * static_cast<double>(k)));
  const Tensor a = *Tensor::Make(DType::kFloat32, {n}, testing::EncodeFloats(v, DType::kFloat32));
  for (float& x : v) x += 1;
  const Tensor b = *Tensor::Make(DType::kFloat32, {n}, testing::EncodeFloats(v, DType::kFloat32));
  const fs::path dir = dir_ / "changing";
  fs::create_directories(dir);
  const std::string changed = (dir / "Functional.a.0.forward.output.0.npy").string();
  ASSERT_TRUE(WriteStringToFile(changed, EncodeNpy(a)).ok());
  ASSERT_TRUE(WriteStringToFile((dir / "Functional.b.0.forward.output.0.npy").string(), EncodeNpy(b)).ok());
  UploadOptions o;
  o.server = addr_;
  o.project = "demo";
  o.role = "golden";
  o.path = dir.string();
  o.stream_min_bytes = 64 << 10;
  o.retry_seconds = 5;
  o.run_id_file = (dir_ / "run_id").string();
  UploadHooks hooks;
  int rewritten = 0;
  hooks.after_offer_read = [&](const std::string& path) {
    if (path != changed) return;
    ++rewritten;
    // The same size, other values: a file rewritten while the agent reads it.
    ASSERT_TRUE(WriteStringToFile(changed, EncodeNpy(b)).ok());
  };
  std::ostringstream out, err;
  EXPECT_EQ(RunUpload(o, out, err, hooks), 2) << out.str() << err.str();
  EXPECT_EQ(rewritten, 1);
  EXPECT_NE(err.str().find("1 tensors could not be read"), std::string::npos) << err.str();
  EXPECT_NE(out.str().find("2 items acknowledged, 0 rejected"), std::string::npos) << out.str() << err.str();
  std::string run;
  std::ifstream(o.run_id_file) >> run;
  const std::vector<ItemRecord> items = StoredItems(run);
  ASSERT_EQ(items.size(), 2u);
  for (const ItemRecord& it : items) {
    SCOPED_TRACE(it.name);
    if (it.name == "Functional.a.0.forward.output.0") {
      EXPECT_NE(it.read_error.find(changed + ": the file changed while it was uploaded (the tensor's CRC-32 was " +
                                   absl::StrFormat("%08x", Crc32(0, a.data(), a.bytes().size())) + " when first read, " +
                                   absl::StrFormat("%08x", Crc32(0, b.data(), b.bytes().size())) + " when sent)"),
                std::string::npos)
          << it.read_error;
      EXPECT_TRUE(it.blob.empty());
    } else {
      EXPECT_TRUE(it.read_error.empty()) << it.read_error;
      EXPECT_EQ(it.crc32, Crc32(0, b.data(), b.bytes().size()));
    }
  }
}

// Small tensors go with gRPC's buffer hint while the next one is read already (one flush for
// several); one whose successor is not read yet goes out at once. Here the read-ahead waits
// before items 10 and 20 until the server has acknowledged the item before: an agent that left
// that item in gRPC's buffer would wait for ever (10 s here) and the upload would stall.
TEST_F(ServerTest, ASmallItemGoesOutBeforeTheAgentWaitsToReadTheNext) {
  const fs::path dir = dir_ / "small";
  fs::create_directories(dir);
  for (int i = 0; i < 30; ++i) {
    std::vector<float> v(256);
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(std::sin(0.01 * static_cast<double>(k + 31 * i)));
    const Tensor t = *Tensor::Make(DType::kFloat32, {256}, testing::EncodeFloats(v, DType::kFloat32));
    ASSERT_TRUE(WriteStringToFile((dir / absl::StrFormat("Functional.op.%d.forward.output.0.npy", i)).string(),
                                  EncodeNpy(t))
                    .ok());
  }
  UploadOptions o;
  o.server = addr_;
  o.project = "demo";
  o.role = "golden";
  o.path = dir.string();
  o.retry_seconds = 5;
  absl::Mutex mu;
  std::vector<std::string> read_order;  // as the read-ahead came to them
  std::set<std::string> acked;
  int stalls = 0;
  UploadHooks hooks;
  hooks.before_read_ahead = [&](const std::string& name) {
    absl::MutexLock l(&mu);
    read_order.push_back(name);
    if (read_order.size() != 11 && read_order.size() != 21) return;
    const std::string previous = read_order[read_order.size() - 2];
    auto acked_previous = [&] { return acked.count(previous) > 0; };
    if (!mu.AwaitWithTimeout(absl::Condition(&acked_previous), absl::Seconds(10))) ++stalls;
  };
  hooks.on_ack = [&](const std::string& name) {
    absl::MutexLock l(&mu);
    acked.insert(name);
  };
  std::ostringstream out, err;
  EXPECT_EQ(RunUpload(o, out, err, hooks), 0) << out.str() << err.str();
  absl::MutexLock l(&mu);
  EXPECT_EQ(stalls, 0) << "an item waited in gRPC's buffer while the agent waited to read the next";
  EXPECT_EQ(read_order.size(), 30u);
  EXPECT_EQ(acked.size(), 30u);
  EXPECT_NE(out.str().find("30 items acknowledged, 0 rejected"), std::string::npos) << out.str() << err.str();
}

TEST_F(ServerTest, LargeTensorsAreSentFromTheirFilesInPieces) {
  server_.reset();
  max_chunk_bytes_ = 1 << 20;  // the agent's pieces are at most a chunk
  max_tensor_bytes_ = 64 << 20;
  StartServer();
  const int64_t nf = (5 << 18) + 3, ni = (3 << 17) + 5;  // 5 MiB + 12 B of float32, 6 MiB + 40 B of int64
  std::vector<float> f(static_cast<size_t>(nf));
  for (int64_t k = 0; k < nf; ++k) f[static_cast<size_t>(k)] = static_cast<float>(std::sin(0.0007 * static_cast<double>(k)) * 3);
  std::string ib(static_cast<size_t>(ni) * 8, '\0');
  for (int64_t k = 0; k < ni; ++k) {
    const int64_t v = (k * 2654435761LL) % 100003 - 50000;
    std::memcpy(&ib[static_cast<size_t>(k) * 8], &v, 8);
  }
  const Tensor big_f = *Tensor::Make(DType::kFloat32, {nf}, testing::EncodeFloats(f, DType::kFloat32));
  const Tensor big_i = *Tensor::Make(DType::kInt64, {ni}, ib);
  for (float& v : f) v = -v;
  const Tensor big_f_neg = *Tensor::Make(DType::kFloat32, {nf}, testing::EncodeFloats(f, DType::kFloat32));
  const Tensor small = *Tensor::Make(DType::kFloat32, {4}, testing::EncodeFloats({1, 2, 3, 4}, DType::kFloat32));
  auto write = [&](const fs::path& dir, const Tensor& f32) {
    fs::create_directories(dir);
    ASSERT_TRUE(WriteStringToFile((dir / "Functional.big.0.forward.output.0.npy").string(), EncodeNpy(f32)).ok());
    ASSERT_TRUE(WriteStringToFile((dir / "Functional.ints.0.forward.output.0.npy").string(), EncodeNpy(big_i)).ok());
    ASSERT_TRUE(WriteStringToFile((dir / "Functional.small.0.forward.output.0.npy").string(), EncodeNpy(small)).ok());
  };
  write(dir_ / "g", big_f);
  write(dir_ / "t", big_f_neg);

  auto [grc, gout, golden] = Upload((dir_ / "g").string(), "golden");  // with the dedup offer
  ASSERT_EQ(grc, 0) << gout;
  auto [trc, tout, target] = Upload((dir_ / "t").string(), "target", golden, /*dedup=*/false);
  EXPECT_EQ(trc, 1) << tout;
  EXPECT_NE(tout.find("3 items acknowledged, 0 rejected"), std::string::npos) << tout;

  auto bits = [](std::optional<double> d) {
    uint64_t u = 0;
    if (d) std::memcpy(&u, &*d, 8);
    return u;
  };
  for (const auto& [run, neg] : {std::pair{golden, false}, std::pair{target, true}}) {
    const std::vector<ItemRecord> items = StoredItems(run);
    ASSERT_EQ(items.size(), 3u);
    for (const ItemRecord& it : items) {
      const Tensor& t = it.name == "Functional.ints.0.forward.output.0" ? big_i
                        : it.name == "Functional.big.0.forward.output.0" ? (neg ? big_f_neg : big_f)
                                                                         : small;
      SCOPED_TRACE(it.name);
      EXPECT_EQ(it.byte_length, t.bytes().size());
      EXPECT_EQ(it.crc32, Crc32(0, t.data(), t.bytes().size()));
      const TensorStats want = ComputeStats(t);
      EXPECT_EQ(bits(it.max), bits(want.max));
      EXPECT_EQ(bits(it.min), bits(want.min));
      EXPECT_EQ(bits(it.mean), bits(want.mean));
      EXPECT_EQ(bits(it.norm), bits(want.norm));
      EXPECT_TRUE(it.read_error.empty()) << it.read_error;
    }
  }
  grpc::ClientContext c;
  v1::ListJobsRequest lj;
  lj.set_run_id(target);
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(jobs_->List(&c, lj, &jobs).ok());
  ASSERT_EQ(jobs.jobs_size(), 1);
  EXPECT_EQ(GetResult(jobs.jobs(0).job_id(), "Functional.big.0.forward.output.0").verdict(), v1::VERDICT_FAIL);
  EXPECT_EQ(GetResult(jobs.jobs(0).job_id(), "Functional.ints.0.forward.output.0").verdict(), v1::VERDICT_PASS);

  // The same files again: the large ones go by reference.
  auto [arc, aout, again] = Upload((dir_ / "g").string(), "golden");
  ASSERT_EQ(arc, 0) << aout;
  EXPECT_NE(aout.find(absl::StrCat(big_f.bytes().size() + big_i.bytes().size(), " already held, sent by reference")),
            std::string::npos) << aout;

  // --mode auto: the disagreeing large tensor's data goes in its second pass, from its file in
  // pieces too, with the same verdicts.
  UploadOptions o;
  o.path = (dir_ / "t").string();
  o.server = addr_;
  o.project = "demo";
  o.role = "target";
  o.against_run_id = golden;
  o.mode = "auto";
  o.json = true;
  o.dedup = false;
  o.retry_seconds = 5;
  std::ostringstream out, err;
  EXPECT_EQ(RunUpload(o, out, err), 1) << out.str() << err.str();
  absl::StatusOr<Json> j = ParseJson(out.str());
  ASSERT_TRUE(j.ok()) << out.str();
  EXPECT_EQ(j->Find("job")->Find("counts")->Find("FAIL")->as_int(), 1) << out.str();
  EXPECT_EQ(j->Find("job")->Find("counts")->Find("PASS")->as_int(), 2) << out.str();
  EXPECT_EQ(j->Find("job")->Find("first_culprit")->as_string(), "Functional.big.0.forward.output.0") << out.str();
  EXPECT_EQ(j->Find("data_bytes_sent")->as_int(), static_cast<int64_t>(big_f_neg.bytes().size())) << out.str();
  // The float32 tensor (the int64 one is below the 4 MiB default): its CRC from its file in the
  // first pass, its data in the second.
  EXPECT_EQ(j->Find("tensors_read_in_pieces")->as_int(), 2) << out.str();
}

// Whatever the layout (.npy files without statistics, a .safetensors file, an msprobe dump of
// .pt files with them) and the mode (data, CRC and statistics, statistics only), an upload that
// reads every tensor in pieces (stream_min_bytes 1), with read-ahead or without (--read-ahead 0:
// the pieces are read as they are sent), stores what one that reads them
// whole stores: the same CRC-32s, statistics' bits and verdict-relevant fields.
TEST_F(ServerTest, PiecesOrWholeStoreTheSame) {
  server_.reset();
  max_chunk_bytes_ = 1 << 20;  // pieces are whole blocks of 1024 elements, at most a chunk
  StartServer();
  testing::WriteNpyDump(dir_ / "npy", 3);  // files above the 64 KiB a listing keeps in memory
  {
    std::vector<float> v(30000);
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(std::cos(0.01 * static_cast<double>(k)));
    std::string ints(8 * 5000, '\0');
    for (size_t k = 0; k < 5000; ++k) ints[k * 8] = static_cast<char>(k);
    fs::create_directories(dir_ / "st");
    ASSERT_TRUE(WriteStringToFile(
                    (dir_ / "st" / "model.safetensors").string(),
                    EncodeSafetensors({{"layer.weight", *Tensor::Make(DType::kFloat32, {100, 300}, testing::EncodeFloats(v, DType::kFloat32))},
                                       {"layer.bias", *Tensor::Make(DType::kBFloat16, {30000}, testing::EncodeFloats(v, DType::kBFloat16))},
                                       {"steps", *Tensor::Make(DType::kInt64, {5000}, ints)}}))
                    .ok());
  }
  for (const std::string& dump : {(dir_ / "npy").string(), (dir_ / "st").string(),
                                  std::string(PARITY_SOURCE_DIR) + "/tests/data/pt/msprobe_dump/target"})
  for (const char* mode : {"full", "crc", "stats"}) {
    SCOPED_TRACE(::testing::Message() << dump << " --mode " << mode);
    std::vector<std::vector<ItemRecord>> stored;  // whole, in pieces read ahead, in pieces as sent
    for (const auto& [min, read_ahead] : {std::pair<uint64_t, int>{0, 4}, {1, 4}, {1, 0}}) {
      SCOPED_TRACE(::testing::Message() << "stream_min_bytes " << min << " read_ahead " << read_ahead);
      UploadOptions o;
      o.path = dump;
      o.server = addr_;
      o.project = "demo";
      o.role = "golden";
      o.json = true;
      o.dedup = false;
      o.stream_min_bytes = min;
      o.read_ahead = read_ahead;
      o.mode = mode;
      o.run_id_file = (dir_ / "run_id").string();
      std::ostringstream out, err;
      ASSERT_EQ(RunUpload(o, out, err), 0) << out.str() << err.str();
      const size_t at = out.str().find("\"tensors_read_in_pieces\": ");
      ASSERT_NE(at, std::string::npos) << out.str();
      const int pieces = std::atoi(out.str().c_str() + at + 26);
      if (min == 0) {
        EXPECT_EQ(pieces, 0);
      } else {
        EXPECT_GT(pieces, 0) << out.str();
      }
      std::string id;
      std::ifstream(o.run_id_file) >> id;
      stored.push_back(StoredItems(id));
    }
    const std::vector<ItemRecord>& whole = stored[0];
    for (size_t variant = 1; variant < stored.size(); ++variant) {
    SCOPED_TRACE(::testing::Message() << "variant " << variant);
    const std::vector<ItemRecord>& pieces = stored[variant];
    ASSERT_EQ(whole.size(), pieces.size());
    auto bits = [](std::optional<double> d) {
      uint64_t u = 0;
      if (d) std::memcpy(&u, &*d, 8);
      return std::pair<bool, uint64_t>(d.has_value(), u);
    };
    for (size_t i = 0; i < whole.size(); ++i) {
      SCOPED_TRACE(whole[i].name);
      EXPECT_EQ(pieces[i].name, whole[i].name);
      EXPECT_EQ(pieces[i].dtype, whole[i].dtype);
      EXPECT_EQ(pieces[i].shape, whole[i].shape);
      EXPECT_EQ(pieces[i].byte_length, whole[i].byte_length);
      EXPECT_EQ(pieces[i].crc32, whole[i].crc32);
      EXPECT_EQ(pieces[i].data_mode, whole[i].data_mode);
      EXPECT_EQ(bits(pieces[i].max), bits(whole[i].max));
      EXPECT_EQ(bits(pieces[i].min), bits(whole[i].min));
      EXPECT_EQ(bits(pieces[i].mean), bits(whole[i].mean));
      EXPECT_EQ(bits(pieces[i].norm), bits(whole[i].norm));
      EXPECT_EQ(pieces[i].read_error, whole[i].read_error);
    }
    }
  }
}

// Dedup is scoped to the project: HaveBlobs answers "held" only for blobs the project's own
// items reference, and a by-reference header naming another project's blob is refused with the
// same answer as for a blob nobody holds.
TEST_F(ServerTest, DedupNeverCrossesProjects) {
  server_.reset();
  inline_max_bytes_ = 0;  // the sample's tensors are small: into the spool with them
  StartServer();
  auto [rc, out, golden] = Upload(kSample + "/golden", "golden");
  ASSERT_EQ(rc, 0) << out;
  // A float32 tensor of project "demo" as stored (its spool key, shape and size).
  ItemRecord stored;
  for (const ItemRecord& it : StoredItems(golden)) {
    if (!it.blob.empty() && it.dtype == DType::kFloat32) {
      stored = it;
      break;
    }
  }
  const std::string key = stored.blob;
  ASSERT_FALSE(key.empty());
  auto have = [&](const std::string& project, grpc::Status* st) {
    grpc::ClientContext ctx;
    v1::HaveBlobsRequest req;
    req.add_sha256(key);
    req.add_sha256(std::string(64, 'b'));
    req.set_project(project);
    v1::HaveBlobsResponse resp;
    *st = ingest_->HaveBlobs(&ctx, req, &resp);
    return std::vector<bool>(resp.held().begin(), resp.held().end());
  };
  grpc::Status st;
  EXPECT_EQ(have("demo", &st), (std::vector<bool>{true, false}));
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(have("other", &st), (std::vector<bool>{false, false}));
  EXPECT_TRUE(st.ok()) << st.error_message();
  have("", &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("project is empty"), std::string::npos) << st.error_message();

  // Probes by length and CRC-32 (no hash): the stored tensor's may be held in "demo" only; a
  // CRC or a length off by one is not.
  ASSERT_TRUE(stored.crc32.has_value());
  auto probe = [&](const std::string& project, size_t extra, grpc::Status* st) {
    grpc::ClientContext ctx;
    v1::HaveBlobsRequest req;
    req.set_project(project);
    const std::vector<std::pair<uint64_t, uint32_t>> probes = {
        {stored.byte_length, *stored.crc32},
        {stored.byte_length, *stored.crc32 ^ 1u},
        {stored.byte_length + 1, *stored.crc32}};
    for (const auto& [length, crc] : probes) {
      v1::ContentProbe* p = req.add_probes();
      p->set_byte_length(length);
      p->set_crc32(crc);
    }
    for (size_t i = 0; i < extra; ++i) req.add_probes();
    v1::HaveBlobsResponse resp;
    *st = ingest_->HaveBlobs(&ctx, req, &resp);
    EXPECT_EQ(resp.held_size(), 0);
    return std::vector<bool>(resp.maybe_held().begin(), resp.maybe_held().end());
  };
  EXPECT_EQ(probe("demo", 0, &st), (std::vector<bool>{true, false, false}));
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(probe("other", 0, &st), (std::vector<bool>{false, false, false}));
  EXPECT_TRUE(st.ok()) << st.error_message();
  probe("demo", 4094, &st);  // 4,097 entries
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("the limit is 4096"), std::string::npos) << st.error_message();

  // By reference from project "other": refused like a blob nobody holds; from "demo": accepted.
  for (const std::string project : {"other", "demo"}) {
    SCOPED_TRACE(project);
    grpc::ClientContext ctx;
    auto stream = ingest_->Upload(&ctx);
    v1::UploadRequest start;
    start.mutable_start()->mutable_new_run()->set_project(project);
    start.mutable_start()->mutable_new_run()->set_side(v1::SIDE_GOLDEN);
    ASSERT_TRUE(stream->Write(start));
    v1::UploadResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
    ASSERT_TRUE(resp.has_accepted()) << resp.DebugString();
    v1::UploadRequest h = Header("ref", 0, {stored.shape.begin(), stored.shape.end()}, stored.byte_length);
    h.mutable_header()->set_by_reference(true);
    h.mutable_header()->set_content_sha256(key);
    ASSERT_TRUE(stream->Write(h));
    ASSERT_TRUE(stream->Read(&resp));
    if (project == "other") {
      ASSERT_TRUE(resp.has_rejected()) << resp.DebugString();
      EXPECT_EQ(resp.rejected().code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
      EXPECT_NE(resp.rejected().message().find("is not held for project 'other'; send the data"),
                std::string::npos) << resp.rejected().message();
    } else {
      EXPECT_TRUE(resp.has_ack()) << resp.DebugString();
    }
    stream->WritesDone();
    ctx.TryCancel();
  }
}

TEST_F(ServerTest, ProtocolViolationsEndTheStreamWithTheRightCode) {
  struct Case {
    std::vector<v1::UploadRequest> msgs;
    grpc::StatusCode code;
    std::string needle;
  };
  v1::UploadRequest attach;
  attach.mutable_start()->set_attach_run_id("run-unknown");
  v1::UploadRequest against = Start("demo", v1::SIDE_TARGET);
  against.mutable_start()->set_against_run_id("run-unknown");
  v1::UploadRequest bad_config = Start("demo", v1::SIDE_TARGET);
  bad_config.mutable_start()->mutable_against_label()->set_key("build");
  bad_config.mutable_start()->mutable_against_label()->set_value("none");
  v1::UploadRequest empty;
  // Run metadata a terminal would run (a title, a screen clear) and an unknown enum.
  v1::UploadRequest esc_name = Start();
  esc_name.mutable_start()->mutable_new_run()->set_name("llama\x1b]0;OWNED\x07\x1b[2J");
  v1::UploadRequest esc_label = Start();
  (*esc_label.mutable_start()->mutable_new_run()->mutable_labels())["build"] = "1\r\x1b[1A";
  v1::UploadRequest c1_model = Start();
  c1_model.mutable_start()->mutable_new_run()->set_model("resnet\xc2\x9b" "2J");
  v1::UploadRequest bad_mode = Start();
  bad_mode.mutable_start()->mutable_new_run()->set_dump_mode(static_cast<v1::DumpMode>(7));
  std::vector<Case> cases = {
      {{esc_name}, grpc::StatusCode::INVALID_ARGUMENT, "run.name contains control character 0x1b"},
      {{esc_label}, grpc::StatusCode::INVALID_ARGUMENT, "run.labels: a key or value contains control character 0xd"},
      {{c1_model}, grpc::StatusCode::INVALID_ARGUMENT, "run.model contains control character 0x9b"},
      {{bad_mode}, grpc::StatusCode::INVALID_ARGUMENT, "dump_mode 7"},
      {{Header("x", 0, {1}, 4)}, grpc::StatusCode::FAILED_PRECONDITION, "must be UploadStart"},
      {{Start("bad project!")}, grpc::StatusCode::INVALID_ARGUMENT, "run.project"},
      {{Start("demo", v1::SIDE_UNSPECIFIED)}, grpc::StatusCode::INVALID_ARGUMENT, "run.side"},
      {{attach}, grpc::StatusCode::NOT_FOUND, "run-unknown"},
      {{against}, grpc::StatusCode::NOT_FOUND, "run-unknown"},
      {{bad_config}, grpc::StatusCode::NOT_FOUND, "label build=none"},
      {{Start(), Start()}, grpc::StatusCode::FAILED_PRECONDITION, "sent twice"},
      {{Start(), empty}, grpc::StatusCode::INVALID_ARGUMENT, "no message set"},
  };
  for (const Case& c : cases) {
    RawUpload up(ingest_.get());
    for (const auto& m : c.msgs) up.Send(m);
    grpc::Status status;
    up.Drain(&status);
    EXPECT_EQ(status.error_code(), c.code) << c.needle << ": " << status.error_message();
    EXPECT_NE(status.error_message().find(c.needle), std::string::npos) << status.error_message();
    // parityd's own end of a stream, as the agent tells it from gRPC's (not resumed).
    EXPECT_EQ(up.ctx.GetServerTrailingMetadata().count(kUploadEndedByParitydKey), 1u) << c.needle;
  }
  // The daemon is still healthy and other uploads work.
  auto [rc, out, id] = Upload(kSample + "/golden", "golden");
  EXPECT_EQ(rc, 0) << out;
  grpc::Status hs;
  EXPECT_EQ(HealthCheck(channel_, &hs), std::string("\x08\x01", 2));
  EXPECT_TRUE(hs.ok()) << hs.error_message();
}

// A start that is refused creates nothing: a target against a run that does not exist (or that
// the caller cannot see), against too many labels (20,000 of them once reached SQLite's
// expression limit), or a golden run with "against" at all, leaves no empty run behind.
TEST_F(ServerTest, ARefusedStartLeavesNoRunBehind) {
  v1::UploadRequest unknown = Start("demo", v1::SIDE_TARGET);
  unknown.mutable_start()->set_against_run_id("run-00000000000000aa");
  v1::UploadRequest labels = Start("demo", v1::SIDE_TARGET);
  labels.mutable_start()->mutable_against_label()->set_key("k");
  labels.mutable_start()->mutable_against_label()->set_value("v");
  for (int i = 0; i < 20000; ++i) {
    v1::LabelSelector* l = labels.mutable_start()->add_against_extra_labels();
    l->set_key("k" + std::to_string(i));
    l->set_value("v");
  }
  v1::UploadRequest golden_against = Start("demo", v1::SIDE_GOLDEN);
  golden_against.mutable_start()->set_against_run_id("run-00000000000000aa");
  const std::vector<std::tuple<v1::UploadRequest, grpc::StatusCode, std::string>> cases = {
      {unknown, grpc::StatusCode::NOT_FOUND, "run 'run-00000000000000aa' not found"},
      {labels, grpc::StatusCode::INVALID_ARGUMENT, "labels, the limit is 64"},
      {golden_against, grpc::StatusCode::FAILED_PRECONDITION, "only allowed when uploading a target run"},
  };
  for (const auto& [msg, code, needle] : cases) {
    RawUpload up(ingest_.get());
    up.Send(msg);
    grpc::Status status;
    up.Drain(&status);
    EXPECT_EQ(status.error_code(), code) << needle << ": " << status.error_message();
    EXPECT_NE(status.error_message().find(needle), std::string::npos) << status.error_message();
    EXPECT_EQ(status.error_message().find("SELECT"), std::string::npos) << status.error_message();
  }
  grpc::ClientContext c;
  v1::ListRunsRequest lr;
  v1::ListRunsResponse runs;
  ASSERT_TRUE(query_->ListRuns(&c, lr, &runs).ok());
  EXPECT_EQ(runs.runs_size(), 0) << runs.DebugString();
}

// A start naming its new run's id (UploadStart.new_run_id) creates the run under that id; the
// same start again, as an agent retries one whose UploadAccepted it never got, resumes that run
// (its items held, its job kept) instead of leaving an empty one; the id in another project or
// side is ALREADY_EXISTS, a malformed one INVALID_ARGUMENT.
TEST_F(ServerTest, ARetriedStartWithItsRunIdResumesThatRun) {
  const std::string golden = UploadOutputs(ingest_.get(), v1::SIDE_GOLDEN, {{"out", std::string(16, '\0')}});
  const std::string id = "run-00112233445566ff";
  v1::UploadRequest start = Start("demo", v1::SIDE_TARGET);
  start.mutable_start()->set_new_run_id(id);
  start.mutable_start()->set_against_run_id(golden);
  std::string job;
  {
    RawUpload up(ingest_.get());
    ASSERT_TRUE(up.Send(start));
    v1::UploadResponse r;
    ASSERT_TRUE(up.stream->Read(&r));
    ASSERT_TRUE(r.has_accepted()) << r.DebugString();
    EXPECT_EQ(r.accepted().run_id(), id);
    job = r.accepted().job_id();
    EXPECT_FALSE(job.empty());
    v1::UploadRequest h = Header("out", 0, {4}, 16);
    h.mutable_header()->mutable_key()->set_role(v1::ROLE_OUTPUT);
    ASSERT_TRUE(up.Send(h));
    ASSERT_TRUE(up.Send(Chunk(0, std::string(16, '\0'))));
    ASSERT_TRUE(up.stream->Read(&r));
    EXPECT_TRUE(r.has_ack()) << r.DebugString();
    up.ctx.TryCancel();  // the connection is lost before UploadEnd
    up.stream->Finish().IgnoreError();
  }
  {
    RawUpload again(ingest_.get());
    ASSERT_TRUE(again.Send(start));
    ASSERT_TRUE(again.Send(End()));
    grpc::Status st;
    std::vector<v1::UploadResponse> out = again.Drain(&st);
    EXPECT_TRUE(st.ok()) << st.error_message();
    ASSERT_FALSE(out.empty());
    ASSERT_TRUE(out[0].has_accepted()) << out[0].DebugString();
    EXPECT_EQ(out[0].accepted().run_id(), id);
    EXPECT_EQ(out[0].accepted().job_id(), job);
    ASSERT_EQ(out[0].accepted().held_item_names_size(), 1);
    EXPECT_EQ(out[0].accepted().held_item_names(0), "out");
    ASSERT_TRUE(out.back().has_summary()) << out.back().DebugString();
    EXPECT_EQ(out.back().summary().job().counts().pass(), 1) << out.back().DebugString();
  }
  grpc::ClientContext ctx;
  v1::ListRunsRequest lr;
  lr.set_project("demo");
  v1::ListRunsResponse runs;
  ASSERT_TRUE(query_->ListRuns(&ctx, lr, &runs).ok());
  EXPECT_EQ(runs.runs_size(), 2);  // the golden run and `id`, once
  struct Case {
    std::string project, id;
    v1::Side side;
    grpc::StatusCode code;
    std::string needle;
  };
  for (const Case& c : std::vector<Case>{
           {"demo", id, v1::SIDE_GOLDEN, grpc::StatusCode::ALREADY_EXISTS, "another project or side"},
           {"other", id, v1::SIDE_TARGET, grpc::StatusCode::ALREADY_EXISTS, "another project or side"},
           {"demo", "run-XYZ", v1::SIDE_TARGET, grpc::StatusCode::INVALID_ARGUMENT, "16 lowercase hex"},
           {"demo", "job-00112233445566ff", v1::SIDE_TARGET, grpc::StatusCode::INVALID_ARGUMENT, "16 lowercase hex"}}) {
    RawUpload up(ingest_.get());
    v1::UploadRequest s = Start(c.project, c.side);
    s.mutable_start()->set_new_run_id(c.id);
    up.Send(s);
    grpc::Status st;
    up.Drain(&st);
    EXPECT_EQ(st.error_code(), c.code) << c.project << " " << c.id << ": " << st.error_message();
    EXPECT_NE(st.error_message().find(c.needle), std::string::npos) << st.error_message();
  }
}

TEST_F(ServerTest, SilentUploadsEndAfterTheIdleTimeoutAndCanBeResumed) {
  idle_timeout_seconds_ = 1;
  Restart();
  // Timed from before the stream exists: the daemon's idle clock starts at its last input (the
  // start message, or its handling), which is after this; the acceptance reaches the test later
  // still, by up to a few hundred ms under TSan, so timing from it undercounted the wait.
  const auto t0 = std::chrono::steady_clock::now();
  RawUpload up(ingest_.get());
  ASSERT_TRUE(up.Send(Start()));
  v1::UploadResponse r;
  ASSERT_TRUE(up.stream->Read(&r));
  ASSERT_TRUE(r.has_accepted());
  const std::string run = r.accepted().run_id();
  while (up.stream->Read(&r)) {
  }
  const grpc::Status st = up.stream->Finish();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  EXPECT_NE(st.error_message().find("parityd --upload-idle-timeout-seconds=1"), std::string::npos) << st.error_message();
  EXPECT_GE(waited, 0.9);
  // The run stays incomplete and the upload resumes on a new stream.
  RawUpload again(ingest_.get());
  v1::UploadRequest attach;
  attach.mutable_start()->set_attach_run_id(run);
  ASSERT_TRUE(again.Send(attach));
  v1::UploadRequest end;
  end.mutable_end();
  ASSERT_TRUE(again.Send(end));
  grpc::Status done;
  std::vector<v1::UploadResponse> out = again.Drain(&done);
  EXPECT_TRUE(done.ok()) << done.error_message();
  ASSERT_FALSE(out.empty());
  EXPECT_TRUE(out.back().has_summary());
}

TEST_F(ServerTest, BufferLimitsPauseReadingAndEveryUploadStillCompletes) {
  // Limits of one byte: after every message a stream waits until handling made room, the
  // per-stream and the global way (other streams' handling wakes it).
  stream_buffer_bytes_ = 1;
  buffered_bytes_ = 1;
  Restart();
  constexpr int kUploads = 3;
  for (int i = 0; i < kUploads; ++i) testing::WriteNpyDump(dir_ / ("dump" + std::to_string(i)), -1, i + 1);
  std::vector<int> codes(kUploads, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kUploads; ++i) {
    threads.emplace_back([&, i] {
      codes[i] = std::get<0>(Upload((dir_ / ("dump" + std::to_string(i))).string(), "golden"));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kUploads; ++i) EXPECT_EQ(codes[i], 0) << i;
  const uint64_t high = server_->ingest().buffered_high_water();
  EXPECT_GT(high, 0u);
  // At most one message (a 4 KiB chunk plus its framing) per stream beyond the limit.
  EXPECT_LE(high, 1u + kUploads * (4096u + 64u)) << high;
  v1::ListRunsRequest req;
  v1::ListRunsResponse runs;
  grpc::ClientContext ctx;
  ASSERT_TRUE(query_->ListRuns(&ctx, req, &runs).ok());
  ASSERT_EQ(runs.runs_size(), kUploads);
  for (const v1::Run& r : runs.runs()) EXPECT_EQ(r.item_count(), 40);
}

TEST_F(ServerTest, AStreamPausedByItsOwnInboxResumesWhenOnlyTheGlobalLimitIsLeft) {
  // A stream pauses when its own inbox is full (here four chunk messages, by bytes) while all
  // streams together are still under max_buffered_bytes; by the time its worker has emptied
  // that inbox the other streams may hold the global limit. Its read must then be resumed by
  // the next room made anywhere, not wait for a Drain of its own that will never come (else
  // such a stream stalls for good, and its agent with it: 32 concurrent pairs with
  // --max-buffered-bytes=33554432 hung within seconds).
  // One worker: inboxes fill (reads are quicker than handling), the first streams pause on
  // their own inboxes while there is global room, and the rest then fill the global limit.
  ingest_workers_ = 1;
  stream_buffer_bytes_ = 16u << 10;  // full after four of the dump's 4 KiB chunk messages
  buffered_bytes_ = 10u * 4200u;     // ten of them, over 8 streams
  Restart();
  constexpr int kUploads = 8;
  for (int i = 0; i < kUploads; ++i) testing::WriteNpyDump(dir_ / ("dump" + std::to_string(i)), -1, i + 1);
  std::vector<int> codes(kUploads, -1);
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kUploads; ++i) {
    threads.emplace_back([&, i] {
      codes[i] = std::get<0>(Upload((dir_ / ("dump" + std::to_string(i))).string(), "golden", "", /*dedup=*/false));
      ++done;
    });
  }
  // A stall shows as uploads that never end: fail, and end them by stopping the server.
  for (int waited_ms = 0; done.load() < kUploads && waited_ms < 60000; waited_ms += 20) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(done.load(), kUploads) << "uploads stalled";
  if (done.load() < kUploads) server_->Shutdown(std::chrono::system_clock::now());
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kUploads; ++i) EXPECT_EQ(codes[i], 0) << i;
  EXPECT_LE(server_->ingest().buffered_high_water(), buffered_bytes_ + kUploads * (4096u + 1024u));
}

TEST_F(ServerTest, RestartKeepsResultsAndResumesAnInterruptedUpload) {
  auto [grc, gout, golden] = Upload(kSample + "/golden", "golden");
  ASSERT_EQ(grc, 0) << gout;
  // A target upload cut after two items (no UploadEnd): the run stays incomplete.
  std::string run_id, job_id;
  {
    RawUpload up(ingest_.get());
    v1::UploadRequest s = Start("demo", v1::SIDE_TARGET);
    s.mutable_start()->set_against_run_id(golden);
    up.Send(s);
    v1::UploadResponse r;
    ASSERT_TRUE(up.stream->Read(&r));
    run_id = r.accepted().run_id();
    job_id = r.accepted().job_id();
    up.Send(Header("Functional.linear.0.forward.input.1", 1, {32, 16}, 32 * 16 * 4));
    // A constant 48.56 (bytes 0x42) instead of the golden weights: a precision failure.
    up.Send(Chunk(0, std::string(2048, '\x42')));
    up.Send(Chunk(2048, std::string(32 * 16 * 4 - 2048, '\x42')));
    int acks = 0;
    while (acks < 1 && up.stream->Read(&r)) acks += r.has_ack();
    EXPECT_EQ(acks, 1);
    up.ctx.TryCancel();
    grpc::Status st;
    up.Drain(&st);
  }
  Restart();
  grpc::ClientContext gc;
  v1::GetJobRequest gj;
  gj.set_job_id(job_id);
  v1::Job job;
  ASSERT_TRUE(jobs_->Get(&gc, gj, &job).ok());
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING);  // resumed, waiting for the target
  EXPECT_EQ(job.pairs_done(), 1);                   // the acknowledged item was compared
  // Resume: the server lists what it holds.
  RawUpload up(ingest_.get());
  v1::UploadRequest attach;
  attach.mutable_start()->set_attach_run_id(run_id);
  up.Send(attach);
  v1::UploadResponse r;
  ASSERT_TRUE(up.stream->Read(&r));
  ASSERT_TRUE(r.has_accepted());
  EXPECT_EQ(r.accepted().job_id(), job_id);
  ASSERT_EQ(r.accepted().held_item_names_size(), 1);
  EXPECT_EQ(r.accepted().held_item_names(0), "Functional.linear.0.forward.input.1");
  up.Send(End());
  grpc::Status st;
  std::vector<v1::UploadResponse> rest = up.Drain(&st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_FALSE(rest.empty());
  ASSERT_TRUE(rest.back().has_summary());
  const v1::Job& done = rest.back().summary().job();
  EXPECT_EQ(done.state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(done.counts().fail(), 1);       // the constant against the golden weights
  EXPECT_EQ(done.counts().unmatched(), 16);  // the golden items never uploaded as target
  Restart();
  grpc::ClientContext c2;
  ASSERT_TRUE(jobs_->Get(&c2, gj, &job).ok());
  EXPECT_EQ(job.state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(job.counts().unmatched(), 16);
  EXPECT_TRUE(server_->core().store().IntegrityCheck().ok());
  // The connection broke after UploadEnd was handled but before the summary reached the agent
  // (found by the crash soak): attaching again is accepted, new items are refused, and End
  // reports the same job again.
  RawUpload again(ingest_.get());
  again.Send(attach);
  ASSERT_TRUE(again.stream->Read(&r));
  ASSERT_TRUE(r.has_accepted());
  EXPECT_EQ(r.accepted().job_id(), job_id);
  again.Send(Header("late.item", 99, {1}, 4));
  again.Send(Chunk(0, "abcd"));
  again.Send(End());
  std::vector<v1::UploadResponse> tail = again.Drain(&st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  bool late_refused = false;
  for (const auto& t : tail) {
    if (t.has_rejected() && t.rejected().name() == "late.item") {
      late_refused = t.rejected().code() == static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION);
    }
  }
  EXPECT_TRUE(late_refused);
  ASSERT_FALSE(tail.empty());
  ASSERT_TRUE(tail.back().has_summary());
  EXPECT_EQ(tail.back().summary().job().state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(tail.back().summary().job().counts().fail(), 1);
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

// Both places data is kept: the spool (inline_max_bytes 0) and the items' rows (the sample's
// tensors are all small).
class RetentionTest : public ServerTest, public ::testing::WithParamInterface<bool> {};

TEST_P(RetentionTest, RetentionDropsOldDataAndLaterJobsFallBackToStatistics) {
  const bool inline_data = GetParam();
  server_.reset();
  inline_max_bytes_ = inline_data ? 4096 : 0;
  StartServer();
  auto [grc, gout, golden] = Upload(kSample + "/golden", "golden");
  ASSERT_EQ(grc, 0) << gout;
  auto [trc, tout, target] = Upload(kSample + "/target", "target", golden);
  ASSERT_EQ(trc, 1) << tout;  // real data compared: FAIL
  Core& core = server_->core();
  if (inline_data) {
    EXPECT_EQ(core.spool().used_bytes(), 0u);
    absl::StatusOr<std::vector<ItemRecord>> items = core.store().ListItems(golden);
    ASSERT_TRUE(items.ok()) << items.status();
    int held = 0;
    for (const ItemRecord& it : *items) held += it.inline_data != nullptr;
    EXPECT_GT(held, 0);
  } else {
    EXPECT_GT(core.spool().used_bytes(), 0u);
  }
  // Nothing is old enough yet.
  auto none = core.ApplyRetention(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch()).count());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, 0);
  const int64_t later = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count() +
                        8LL * 24 * 3600 * 1000;
  auto dropped = core.ApplyRetention(later);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(*dropped, 2);
  EXPECT_TRUE(core.CollectSpool(0).ok());
  EXPECT_EQ(core.spool().used_bytes(), 0u);
  // The runs, their statistics and the old results stay; a new job compares statistics.
  v1::SubmitJobRequest r;
  r.set_golden_run_id(golden);
  r.set_target_run_id(target);
  const v1::Job job = SubmitAndWait(r);
  ASSERT_EQ(job.state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(job.counts().error(), 0);
  const v1::OpResult res = GetResult(job.job_id(), "Functional.linear.1.forward.output.0");
  ASSERT_GT(res.metrics_size(), 0);
  EXPECT_EQ(res.metrics(0).name(), "Max diff");

  // A new target uploaded with its data against the golden run: the golden side has no data
  // any more, in the store or in memory (the first job kept the golden run's items, with their
  // blob keys, for later jobs), so statistics are compared, without errors.
  auto [t2rc, t2out, target2] = Upload(kSample + "/target", "target", golden);
  ASSERT_EQ(t2rc, 0) << t2out;  // statistics: PASS and WARN only
  JobFilter f;
  f.run_id = target2;
  absl::StatusOr<std::vector<JobRecord>> jobs2 = core.store().ListJobs(f, 0, 10);
  ASSERT_TRUE(jobs2.ok()) << jobs2.status();
  ASSERT_EQ(jobs2->size(), 1u);
  EXPECT_EQ(jobs2->front().counts[static_cast<size_t>(Verdict::kError)], 0);
  absl::StatusOr<OpResultRecord> row =
      core.store().GetOpResult(jobs2->front().job_id, "Functional.linear.1.forward.output.0");
  ASSERT_TRUE(row.ok()) << row.status();
  ASSERT_FALSE(row->result.metrics.empty());
  EXPECT_EQ(row->result.metrics.front().name, "Max diff");
  absl::StatusOr<std::vector<ItemRecord>> items = core.store().ListItems(golden);
  ASSERT_TRUE(items.ok()) << items.status();
  for (const ItemRecord& it : *items) EXPECT_EQ(it.inline_data, nullptr) << it.name;
}

INSTANTIATE_TEST_SUITE_P(DataIn, RetentionTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Rows" : "Spool"; });

}  // namespace
}  // namespace parity

namespace parity {
namespace {

TEST_F(ServerTest, MappingAndFuzzyMatchingInJobs) {
  // Golden items "F.relu.0.forward.output.0" and "gpu.only"; target items with another call
  // count and a mapped name.
  auto upload = [&](v1::Side side, const std::vector<std::string>& names) {
    const float v[2] = {1.0f, 2.0f};
    std::vector<std::pair<std::string, std::string>> outputs;
    for (const std::string& n : names) outputs.emplace_back(n, std::string(reinterpret_cast<const char*>(v), 8));
    return UploadOutputs(ingest_.get(), side, outputs);
  };
  const std::string golden = upload(v1::SIDE_GOLDEN, {"F.relu.0.forward.output.0", "gpu.name", "lonely"});
  const std::string target = upload(v1::SIDE_TARGET, {"F.relu.3.forward.output.0", "npu.name"});
  v1::SubmitJobRequest r;
  r.set_golden_run_id(golden);
  r.set_target_run_id(target);
  r.mutable_config()->set_match_mode(v1::MATCH_MODE_FUZZY);
  r.mutable_config()->set_config_json(R"({"match": {"mapping": {"npu.name": "gpu.name"}}})");
  v1::Job job = SubmitAndWait(r);
  ASSERT_EQ(job.state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(job.counts().pass(), 2);
  EXPECT_EQ(job.counts().unmatched(), 1);  // "lonely" has no target
  grpc::ClientContext q;
  v1::GetOpResultRequest gr;
  gr.set_job_id(job.job_id());
  gr.set_name("F.relu.3.forward.output.0");
  v1::OpResult fuzzy;
  ASSERT_TRUE(query_->GetOpResult(&q, gr, &fuzzy).ok());
  EXPECT_EQ(fuzzy.golden_name(), "F.relu.0.forward.output.0");
  EXPECT_NE(fuzzy.message().find("Fuzzy matching data"), std::string::npos);
  grpc::ClientContext q2;
  gr.set_name("npu.name");
  v1::OpResult mapped;
  ASSERT_TRUE(query_->GetOpResult(&q2, gr, &mapped).ok());
  EXPECT_EQ(mapped.golden_name(), "gpu.name");
  EXPECT_EQ(mapped.verdict(), v1::VERDICT_PASS);
  // A bad config is refused with the key named.
  grpc::ClientContext c2;
  r.mutable_config()->set_config_json(R"({"polcy": "x"})");
  grpc::Status s = jobs_->Submit(&c2, r, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("polcy"), std::string::npos);
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

// Tensors of at most inline_max_bytes keep their data in their items' rows: no spool file for
// them, their data is compared (not their statistics), and so after a restart.
TEST_F(ServerTest, SmallTensorsAreComparedFromTheirRowsAcrossARestart) {
  server_.reset();
  fsync_ = true;
  inline_max_bytes_ = 64;
  StartServer();
  auto bytes = [](int n, bool reversed) {
    std::vector<float> v(n);
    for (int i = 0; i < n; ++i) v[i] = static_cast<float>(reversed ? n - i : i + 1);
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  };
  // 16 floats are 64 bytes (in the row), 17 are 68 (the spool). "rev" items of the target hold
  // the golden values reversed: the same statistics, other data.
  auto upload = [&](v1::Side side) {
    std::vector<std::pair<std::string, std::string>> outputs;
    for (int n : {16, 17}) {
      for (const char* kind : {"same", "rev"}) {
        outputs.emplace_back(absl::StrCat("F.op.", outputs.size(), ".forward.output.", kind, n),
                             bytes(n, side == v1::SIDE_TARGET && kind == std::string("rev")));
      }
    }
    return UploadOutputs(ingest_.get(), side, outputs);
  };
  const std::string golden = upload(v1::SIDE_GOLDEN);
  const std::string target = upload(v1::SIDE_TARGET);
  // Spool: the golden 17 floats (the target's equal ones share the file) and the reversed 17.
  EXPECT_EQ(server_->core().spool().used_bytes(), 2u * 68);
  absl::StatusOr<std::vector<ItemRecord>> items = server_->core().store().ListItems(target);
  ASSERT_TRUE(items.ok()) << items.status();
  for (const ItemRecord& it : *items) {
    EXPECT_EQ(it.inline_data != nullptr, it.byte_length == 64) << it.name;
    EXPECT_EQ(it.blob.size(), 64u) << it.name;
  }

  auto run_job = [&]() {
    v1::SubmitJobRequest r;
    r.set_golden_run_id(golden);
    r.set_target_run_id(target);
    const v1::Job job = SubmitAndWait(r);
    EXPECT_EQ(job.state(), v1::JOB_STATE_DONE);
    EXPECT_EQ(job.counts().pass(), 2);
    EXPECT_EQ(job.counts().fail(), 2);
    EXPECT_EQ(job.counts().error(), 0);
    const v1::OpResult res = GetResult(job.job_id(), "F.op.1.forward.output.rev16");
    EXPECT_EQ(res.verdict(), v1::VERDICT_FAIL);
    ASSERT_GT(res.metrics_size(), 0);
    EXPECT_EQ(res.metrics(0).name(), "Cosine") << "a real-data comparison";
  };
  {
    SCOPED_TRACE("first job");
    run_job();
  }
  Restart();
  {
    SCOPED_TRACE("after a restart");
    run_job();
  }
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

// --inline-max-bytes 0: every tensor's data goes to the spool, one of no bytes included.
TEST_F(ServerTest, InlineOffKeepsEveryTensorInTheSpool) {
  server_.reset();
  inline_max_bytes_ = 0;
  StartServer();
  const std::string run = UploadOutputs(ingest_.get(), v1::SIDE_GOLDEN,
                                        {{"F.empty.0.forward.output.0", ""}, {"F.one.0.forward.output.0", "abcd"}});
  absl::StatusOr<std::vector<ItemRecord>> items = server_->core().store().ListItems(run);
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->size(), 2u);
  for (const ItemRecord& it : *items) {
    EXPECT_EQ(it.inline_data, nullptr) << it.name;
    EXPECT_TRUE(server_->core().spool().Contains(it.blob)) << it.name;
  }
  EXPECT_EQ(server_->core().spool().used_bytes(), 4u);
}

// GetServerStatus: every gauge with the flag that bounds it; an open upload stream and the bytes
// it stored are counted while they last, the peaks kept after.
TEST_F(ServerTest, ServerStatusCountsOpenUploadsAndStoredBytes) {
  auto status = [&](v1::ServerStatus* st) {
    grpc::ClientContext c;
    const grpc::Status s = query_->GetServerStatus(&c, v1::GetServerStatusRequest(), st);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::map<std::string, v1::Gauge> m;
    for (const v1::Gauge& g : st->gauges()) {
      EXPECT_TRUE(m.emplace(g.name(), g).second) << "twice: " << g.name();
    }
    return m;
  };
  v1::ServerStatus st;
  std::map<std::string, v1::Gauge> g = status(&st);
  EXPECT_EQ(st.version(), "parityd 0.1.0");
  EXPECT_GE(st.uptime_ms(), 0);
  EXPECT_GT(st.started_at_ms(), 1700000000000);  // 2023-11, in milliseconds
  for (const char* name :
       {"upload_streams", "upload_buffered_bytes", "jobs_running", "compare_queue",
        "store_pending_writes", "held_blob_bytes", "spool_stage_bytes", "run_cache_items",
        "spool_bytes", "disk_free_bytes", "resident_bytes"}) {
    EXPECT_EQ(g.count(name), 1u) << name;
  }
  EXPECT_EQ(g["upload_streams"].value(), 0u);
  EXPECT_EQ(g["upload_streams"].peak(), 0u);
  EXPECT_EQ(g["upload_streams"].limit(), static_cast<uint64_t>(IngestOptions().max_streams));
  EXPECT_EQ(g["upload_streams"].flag(), "max-streams");
  EXPECT_EQ(g["upload_buffered_bytes"].limit(), buffered_bytes_);
  EXPECT_TRUE(g["upload_buffered_bytes"].bytes());
  EXPECT_EQ(g["spool_bytes"].value(), 0u);
  EXPECT_EQ(g["spool_bytes"].limit(), CoreOptions().spool_quota_bytes);
  EXPECT_EQ(g["spool_stage_bytes"].limit(), spool_stage_bytes_);
  EXPECT_TRUE(g["disk_free_bytes"].limit_is_floor());
  EXPECT_GT(g["disk_free_bytes"].value(), 0u);
  EXPECT_EQ(g["disk_free_bytes"].flag(), "min-free-disk-bytes");
  EXPECT_GT(g["resident_bytes"].value(), 0u);
  EXPECT_GE(g["resident_bytes"].peak(), g["resident_bytes"].value());
  EXPECT_EQ(g["resident_bytes"].flag(), "");

  RawUpload up(ingest_.get());
  ASSERT_TRUE(up.Send(Start()));
  v1::UploadResponse r;
  ASSERT_TRUE(up.stream->Read(&r));
  ASSERT_TRUE(r.has_accepted());
  const std::string data(64 << 10, '\x3c');  // above inline_max_bytes: a spool blob
  SendOutput(up, "a.forward.output.0", 0, data);
  ASSERT_TRUE(up.stream->Read(&r));
  ASSERT_TRUE(r.has_ack()) << r.DebugString();
  g = status(&st);
  EXPECT_EQ(g["upload_streams"].value(), 1u);
  EXPECT_EQ(g["upload_streams"].peak(), 1u);
  EXPECT_EQ(g["spool_bytes"].value(), data.size());
  EXPECT_GE(g["upload_buffered_bytes"].peak(), 4096u);  // chunks were held
  EXPECT_GE(g["store_pending_writes"].peak(), 1u);      // the run and the item were written

  grpc::Status end;
  ASSERT_TRUE(up.Send(End()));
  up.Drain(&end);
  EXPECT_TRUE(end.ok()) << end.error_message();
  // The stream is counted until parityd's side of it is done, just after the client's.
  for (int i = 0; i < 250 && g["upload_streams"].value() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    g = status(&st);
  }
  EXPECT_EQ(g["upload_streams"].value(), 0u);
  EXPECT_EQ(g["upload_streams"].peak(), 1u);
  EXPECT_EQ(g["spool_bytes"].value(), data.size());
}

// parity runs / jobs page past parityd's 1000 rows per response: --limit is what they print.
TEST_F(ServerTest, ListingCommandsPagePastOneResponse) {
  for (int i = 0; i < 1005; ++i) {
    RunRecord r;
    r.project = "demo";
    r.side = Side::kGolden;
    ASSERT_TRUE(server_->core().CreateRun(r).ok());
  }
  auto runs = [&](const std::string& flags) {
    testing::Output o = testing::Run("client/parity", "runs --json --server " + addr_ + flags, "",
                                     /*stderr_too=*/false);
    EXPECT_EQ(o.code, 0) << o.text.substr(0, 500);
    absl::StatusOr<Json> j = ParseJson(o.text);
    std::set<std::string> ids;
    if (!j.ok()) {
      ADD_FAILURE() << o.text.substr(0, 500);
      return ids;
    }
    for (const Json& r : j->as_array()) {
      EXPECT_TRUE(ids.insert(r.Find("run_id")->as_string()).second) << "listed twice";
    }
    return ids;
  };
  EXPECT_EQ(runs("").size(), 50u);  // the default
  EXPECT_EQ(runs(" --limit 1003").size(), 1003u);
  EXPECT_EQ(runs(" --limit 5000").size(), 1005u);
  testing::Output jobs =
      testing::Run("client/parity", "jobs --json --limit 2000 --server " + addr_);
  EXPECT_EQ(jobs.code, 0) << jobs.text;
  EXPECT_EQ(ParseJson(jobs.text)->as_array().size(), 0u);
}

// parity cancel: a running job stops and says so; a finished one is refused.
TEST_F(ServerTest, CancelStopsARunningJobAndRefusesAFinishedOne) {
  RunRecord g, t;
  g.project = t.project = "demo";
  g.side = Side::kGolden;
  t.side = Side::kTarget;
  absl::StatusOr<RunRecord> golden = server_->core().CreateRun(g);
  absl::StatusOr<RunRecord> target = server_->core().CreateRun(t);
  ASSERT_TRUE(golden.ok() && target.ok());
  // Neither run is complete: the job runs until cancelled.
  absl::StatusOr<JobRecord> job =
      server_->core().SubmitJob(golden->run_id, target->run_id, 0, 0, "");
  ASSERT_TRUE(job.ok()) << job.status();
  testing::Output c = testing::Run("client/parity", "cancel " + job->job_id + " --server " + addr_);
  EXPECT_EQ(c.code, 0) << c.text;
  EXPECT_NE(c.text.find("job " + job->job_id + " cancelled after 0 pair(s)"), std::string::npos)
      << c.text;
  absl::StatusOr<JobRecord> after = server_->core().GetJob(job->job_id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, JobState::kCancelled);
  // A cancelled job compared nothing it was asked to: incomplete, never a pass.
  testing::Output summary = testing::Run("client/parity", "summary " + job->job_id + " --server " + addr_);
  EXPECT_EQ(summary.code, 3) << summary.text;
  EXPECT_NE(summary.text.find("incomplete: the job did not finish"), std::string::npos) << summary.text;
  EXPECT_EQ(testing::Run("client/parity", "watch " + job->job_id + " --server " + addr_).code, 3);
  EXPECT_EQ(testing::Run("client/parity", "results " + job->job_id + " --server " + addr_).code, 3);
  testing::Output again =
      testing::Run("client/parity", "cancel " + job->job_id + " --server " + addr_);
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.text.find("is already finished"), std::string::npos) << again.text;
  EXPECT_EQ(testing::Run("client/parity", "cancel job-0123456789abcdef --server " + addr_).code, 2);
}

}  // namespace
}  // namespace parity
