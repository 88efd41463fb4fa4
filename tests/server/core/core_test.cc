// Core (parityd's logic, no gRPC) on a real SQLite file and spool: jobs over stored runs.
#include "server/core/core.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/core/upload_session.h"
#include "server/storage/sqlite.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

constexpr int kFloats = 16;

// Item `name` at dump position `index`, 16 float32 values derived from `seed` (negated when
// `negate`), output of operator "<name>.forward".
struct Spec {
  std::string name;
  int64_t index;
  int seed;
  bool negate = false;
  int floats = 0;                 // values in the item; 0: UploadHow::floats
  DType dtype = DType::kFloat32;  // another: the first bytes of the float32 values, read as it
};

std::string Values(int seed, bool negate, int floats = kFloats, float scale = 1.0f) {
  std::vector<float> v(static_cast<size_t>(floats));
  for (int k = 0; k < floats; ++k) {
    // A pattern of its own per seed, and without a period a chunk boundary could line up with.
    v[static_cast<size_t>(k)] = (1.0f + static_cast<float>((k + 1) * (2 * (seed % 89) + 1) % 997)) *
                                (negate ? -1.0f : 1.0f) * scale;
  }
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// How UploadRun sends its items.
struct UploadHow {
  std::string against;  // a golden run: the upload starts a job against it
  int floats = kFloats;  // per item
  size_t chunk_bytes = 0;  // 0: one chunk per item
  float scale = 1.0f;      // every value multiplied by it (1: the bytes, and CRCs, of Values)
  std::string format;      // the run's dump_format
  // Spec name -> the Spec name of the item of its run it is compared with (in_run_golden).
  std::map<std::string, std::string> in_run_golden;
};

// Uploads and completes one run; returns its id once its summary arrived (and the job's id in
// *job_id when `how.against` started one).
std::string UploadRun(Core* core, Side side, const std::vector<Spec>& items, const UploadHow& how = {},
                      std::string* job_id = nullptr) {
  // On the heap, shared with the session's callback: the store writer delivers events, and absl
  // may evaluate this thread's wait condition in the thread that unlocks.
  struct Seen {
    absl::Mutex mu;
    bool done = false;
    std::string run_id, job_id;
    int rejected = 0;
  };
  auto seen = std::make_shared<Seen>();
  UploadSession s(core, [seen](UploadEvent e) {
    absl::MutexLock l(&seen->mu);
    if (e.kind == UploadEvent::Kind::kAccepted) {
      seen->run_id = e.run_id;
      seen->job_id = e.job_id;
    }
    if (e.kind == UploadEvent::Kind::kSummary) seen->done = true;
    if (e.kind == UploadEvent::Kind::kRejected) ++seen->rejected;
  });
  UploadStartRequest start;
  RunRecord run;
  run.project = "core";
  run.side = side;
  run.dump_format = how.format;
  start.new_run = run;
  start.against_run_id = how.against;
  EXPECT_TRUE(s.Start(start).ok());
  for (const Spec& sp : items) {
    ItemRecord it;
    it.name = sp.name + ".forward.output.0";
    it.api = sp.name + ".forward";
    it.op_type = "op";
    it.phase = Phase::kForward;
    it.role = Role::kOutput;
    it.index = sp.index;
    if (auto r = how.in_run_golden.find(sp.name); r != how.in_run_golden.end()) {
      it.in_run_golden = r->second + ".forward.output.0";
    }
    const int floats = sp.floats ? sp.floats : how.floats;
    it.dtype = sp.dtype;
    it.shape = {floats};
    it.data_mode = DataMode::kData;
    it.byte_length = DTypeSize(sp.dtype) * static_cast<uint64_t>(floats);
    EXPECT_TRUE(s.Header(it).ok());
    const std::string bytes =
        Values(sp.seed, sp.negate, floats, how.scale).substr(0, it.byte_length);
    const size_t chunk = how.chunk_bytes ? how.chunk_bytes : bytes.size();
    for (size_t off = 0; off < bytes.size(); off += chunk) {
      EXPECT_TRUE(s.Chunk(off, bytes.substr(off, chunk)).ok());
    }
  }
  EXPECT_TRUE(s.End().ok());
  absl::MutexLock l(&seen->mu);
  seen->mu.Await(absl::Condition(&seen->done));
  EXPECT_EQ(seen->rejected, 0);
  if (job_id != nullptr) *job_id = seen->job_id;
  return seen->run_id;
}

class CoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("parity_core_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    Open({});
  }
  // A Core on a fresh data directory, with these options changed from the defaults.
  void Open(const std::function<void(CoreOptions*)>& change) {
    if (core_) core_->Shutdown();
    core_.reset();
    fs::remove_all(dir_);
    CoreOptions o;
    o.data_dir = dir_.string();
    o.fsync = false;
    o.min_free_disk_bytes = 0;
    if (change) change(&o);
    absl::StatusOr<std::unique_ptr<Core>> c = Core::Open(o);
    ASSERT_TRUE(c.ok()) << c.status();
    core_ = std::move(*c);
  }
  // Waits for a job started elsewhere (an upload against a golden run) to finish.
  JobRecord AwaitJob(const std::string& job_id) {
    absl::StatusOr<JobRecord> end = core_->GetJob(job_id);
    for (int i = 0; i < 6000 && end.ok() && !IsFinal(end->state); ++i) {
      absl::SleepFor(absl::Milliseconds(5));
      end = core_->GetJob(job_id);
    }
    EXPECT_TRUE(end.ok()) << end.status();
    return end.ok() ? *end : JobRecord{};
  }
  void TearDown() override {
    if (core_) core_->Shutdown();
    core_.reset();
    fs::remove_all(dir_);
  }

  JobRecord RunJob(const std::string& golden, const std::string& target) {
    absl::StatusOr<JobRecord> job = core_->SubmitJob(golden, target, /*POLICY_MSPROBE*/ 1,
                                                     /*MATCH_MODE_EXACT*/ 1, "");
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return {};
    return AwaitJob(job->job_id);
  }

  fs::path dir_;
  std::unique_ptr<Core> core_;
};

// A job over runs already stored loads and pairs them batch by batch (Core::kLoadBatch) while
// comparisons run. Here the target's dump order is the golden's reversed, so a golden batch
// pairs with the target's last batch; a few items on each side have no counterpart, and one
// operator diverges. Every item must be judged exactly once (dropping a batch's remainder, or
// pairing an item twice, changes the counts and rows).
TEST_F(CoreTest, AJobOverStoredRunsLargerThanALoadBatchJudgesEveryItemOnce) {
  const int n = static_cast<int>(Core::kLoadBatch) * 2 + 500;
  const int culprit = n / 3;
  std::vector<Spec> golden, target;
  for (int i = 0; i < n; ++i) golden.push_back({"Functional.op." + std::to_string(i), i, i});
  golden.push_back({"Functional.golden_only.0", n, 1});
  golden.push_back({"Functional.golden_only.1", n + 1, 2});
  for (int i = n - 1; i >= 0; --i) {
    target.push_back({"Functional.op." + std::to_string(i), static_cast<int64_t>(target.size()), i, i == culprit});
  }
  target.push_back({"Functional.target_only.0", n, 3});
  const std::string g = UploadRun(core_.get(), Side::kGolden, golden);
  const std::string t = UploadRun(core_.get(), Side::kTarget, target);
  ASSERT_FALSE(g.empty());
  ASSERT_FALSE(t.empty());

  for (int round = 0; round < 2; ++round) {  // a second job over the same runs: same answer
    const JobRecord job = RunJob(g, t);
    EXPECT_EQ(job.state, JobState::kDone) << job.error;
    EXPECT_EQ(job.pairs_done, n + 3);
    EXPECT_EQ(job.counts[static_cast<size_t>(Verdict::kPass)], n - 1);
    EXPECT_EQ(job.counts[static_cast<size_t>(Verdict::kFail)], 1);
    EXPECT_EQ(job.counts[static_cast<size_t>(Verdict::kUnmatched)], 3);
    EXPECT_EQ(job.first_culprit, "Functional.op." + std::to_string(culprit) + ".forward");

    // One stored row per item, each under its own name.
    int64_t total = 0;
    absl::StatusOr<std::vector<OpResultRecord>> rows =
        core_->store().ListOpResults(job.job_id, OpResultFilter(), 0, INT64_MAX, &total);
    ASSERT_TRUE(rows.ok()) << rows.status();
    EXPECT_EQ(total, n + 3);
    std::map<std::string, int> seen;
    for (const OpResultRecord& r : *rows) ++seen[r.name];
    EXPECT_EQ(seen.size(), static_cast<size_t>(n + 3));
    for (const auto& [name, times] : seen) EXPECT_EQ(times, 1) << name;
    EXPECT_EQ(seen.count("Functional.op.0.forward.output.0"), 1u);
    EXPECT_EQ(seen.count(absl::StrCat("Functional.op.", n - 1, ".forward.output.0")), 1u);
  }
}

// Items paired by name are compared only when they can be: a shape that differs, or dtypes that
// msprobe's gate refuses (float32 against int32), leave both items unmatched with the reason;
// the same dtype and shape pair, and so do float32 and bfloat16-class dtypes of one shape.
TEST_F(CoreTest, PairsOnlyItemsOfComparableShapeAndDtypeAndSaysWhyNot) {
  std::vector<Spec> golden = {{"Functional.same.0", 0, 1},
                              {"Functional.shape.0", 1, 2},
                              {"Functional.gate.0", 2, 3},
                              {"Functional.float_class.0", 3, 4}};
  std::vector<Spec> target = golden;
  target[1].floats = kFloats / 2;
  target[2].dtype = DType::kInt32;
  target[3].dtype = DType::kFloat16;
  const std::string g = UploadRun(core_.get(), Side::kGolden, golden);
  const std::string t = UploadRun(core_.get(), Side::kTarget, target);
  const JobRecord job = RunJob(g, t);
  EXPECT_EQ(job.state, JobState::kDone) << job.error;
  int64_t total = 0;
  absl::StatusOr<std::vector<OpResultRecord>> rows =
      core_->store().ListOpResults(job.job_id, OpResultFilter(), 0, INT64_MAX, &total);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::map<std::string, std::vector<const OpResultRecord*>> by_name;
  for (const OpResultRecord& r : *rows) by_name[r.name].push_back(&r);
  auto only = [&](const std::string& op) -> const OpResultRecord& {
    static const OpResultRecord kNone;
    const auto& v = by_name[op + ".forward.output.0"];
    EXPECT_FALSE(v.empty()) << op;
    return v.empty() ? kNone : *v.front();
  };
  EXPECT_EQ(only("Functional.same.0").result.verdict, Verdict::kPass);
  EXPECT_EQ(only("Functional.float_class.0").result.policy, "msprobe");
  EXPECT_NE(only("Functional.float_class.0").result.verdict, Verdict::kUnmatched);
  const OpResultRecord& shape = only("Functional.shape.0");
  EXPECT_EQ(shape.result.verdict, Verdict::kUnmatched);
  EXPECT_NE(shape.result.message.find("shapes differ: golden [16], target [8]"), std::string::npos)
      << shape.result.message;
  const OpResultRecord& gate = only("Functional.gate.0");
  EXPECT_EQ(gate.result.verdict, Verdict::kUnmatched);
  EXPECT_NE(gate.result.message.find("msprobe dtype gate): golden torch.float32, target torch.int32"),
            std::string::npos)
      << gate.result.message;
  // The two refused target items and their golden counterparts: one unmatched row each.
  EXPECT_EQ(job.counts[static_cast<size_t>(Verdict::kUnmatched)], 4);
  EXPECT_EQ(total, 6);
}

// Runs with no name in common: every item is an unmatched row, stored by Finalize (in writes of
// Core::kFinalRowsPerWrite rows), each exactly once.
TEST_F(CoreTest, UnmatchedRowsAreAllStoredOnce) {
  const int n = static_cast<int>(Core::kFinalRowsPerWrite) + 904;  // two writes per side
  std::vector<Spec> golden, target;
  for (int i = 0; i < n; ++i) {
    golden.push_back({"Functional.g." + std::to_string(i), i, i});
    target.push_back({"Functional.t." + std::to_string(i), i, i});
  }
  const std::string g = UploadRun(core_.get(), Side::kGolden, golden);
  const std::string t = UploadRun(core_.get(), Side::kTarget, target);
  const absl::Time start = absl::Now();
  const JobRecord job = RunJob(g, t);
  std::printf("job with %d unmatched rows: %.0f ms\n", 2 * n, absl::ToDoubleMilliseconds(absl::Now() - start));
  EXPECT_EQ(job.state, JobState::kDone) << job.error;
  EXPECT_EQ(job.pairs_done, 2 * n);
  EXPECT_EQ(job.counts[static_cast<size_t>(Verdict::kUnmatched)], 2 * n);
  int64_t total = 0;
  absl::StatusOr<std::vector<OpResultRecord>> rows =
      core_->store().ListOpResults(job.job_id, OpResultFilter(), 0, INT64_MAX, &total);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(total, 2 * n);
  std::map<std::string, int> seen;
  for (const OpResultRecord& r : *rows) ++seen[r.name];
  EXPECT_EQ(seen.size(), static_cast<size_t>(2 * n));
}

// A GE target against an FX golden run (TorchAir): an item naming another item of its run as its
// in-run golden (an inserted Cast's output, its input) is compared with it, whichever of the two
// arrives first, live or over stored runs; the named item has no row of its own, and a query
// finds its statistics in the target run. Against another GE run the names pair as they are.
TEST_F(CoreTest, InRunGoldensAreComparedWithTheirItemAgainstAnFxRun) {
  const std::vector<Spec> golden = {{"a", 0, 1}, {"b", 1, 2}};
  const std::vector<Spec> target = {{"a", 0, 1},
                                    {"Cast", 1, 3},  // before its golden
                                    {"CastIn", 2, 3},
                                    {"TdIn", 3, 4},
                                    {"Td", 4, 4, true},  // after it, negated
                                    {"b", 5, 2}};
  UploadHow fx, ge;
  fx.format = "torchair-fx";
  ge.format = "torchair-ge";
  ge.in_run_golden = {{"Cast", "CastIn"}, {"Td", "TdIn"}};
  const std::string g = UploadRun(core_.get(), Side::kGolden, golden, fx);
  auto check = [&](const JobRecord& job) {
    EXPECT_EQ(job.state, JobState::kDone) << job.error;
    EXPECT_EQ(job.pairs_done, 4);
    EXPECT_EQ(job.counts[static_cast<size_t>(Verdict::kPass)], 3);
    EXPECT_EQ(job.counts[static_cast<size_t>(Verdict::kFail)], 1);
    EXPECT_EQ(job.counts[static_cast<size_t>(Verdict::kUnmatched)], 0);
    int64_t total = 0;
    absl::StatusOr<std::vector<OpResultRecord>> rows =
        core_->store().ListOpResults(job.job_id, OpResultFilter(), 0, INT64_MAX, &total);
    ASSERT_TRUE(rows.ok()) << rows.status();
    std::map<std::string, std::pair<std::string, Verdict>> by_name;
    for (const OpResultRecord& r : *rows) by_name[r.name] = {r.golden_name, r.result.verdict};
    ASSERT_EQ(by_name.size(), 4u);
    EXPECT_EQ(by_name["Cast.forward.output.0"], std::make_pair(std::string("CastIn.forward.output.0"), Verdict::kPass));
    EXPECT_EQ(by_name["Td.forward.output.0"], std::make_pair(std::string("TdIn.forward.output.0"), Verdict::kFail));
    EXPECT_EQ(by_name["b.forward.output.0"].second, Verdict::kPass);
    absl::StatusOr<ItemRecord> cast = core_->store().GetItem(job.target_run_id, "Cast.forward.output.0");
    ASSERT_TRUE(cast.ok()) << cast.status();
    EXPECT_EQ(cast->in_run_golden, "CastIn.forward.output.0");  // stored with the item
  };
  UploadHow live = ge;
  live.against = g;
  std::string live_job;
  const std::string t = UploadRun(core_.get(), Side::kTarget, target, live, &live_job);
  ASSERT_FALSE(live_job.empty());
  check(AwaitJob(live_job));
  check(RunJob(g, t));
  // Against a GE golden run the names pair as they are: the inputs and outputs have no golden.
  const std::string ge_golden = UploadRun(core_.get(), Side::kGolden, golden, ge);
  const JobRecord by_name = RunJob(ge_golden, t);
  EXPECT_EQ(by_name.counts[static_cast<size_t>(Verdict::kUnmatched)], 4);
  EXPECT_EQ(by_name.pairs_done, 6);
}

// A finished job keeps an index of its results with its final record (Store::BuildJobIndex):
// its rows and each metric its results have, which its sorted listings are read from.
TEST_F(CoreTest, AFinishedJobKeepsAnIndexOfItsResults) {
  std::vector<Spec> golden, target;
  for (int i = 0; i < 12; ++i) {
    golden.push_back({"Functional.op." + std::to_string(i), i, i});
    target.push_back({"Functional.op." + std::to_string(i), i, i, /*negate=*/i == 7});
  }
  const std::string g = UploadRun(core_.get(), Side::kGolden, golden);
  const std::string t = UploadRun(core_.get(), Side::kTarget, target);
  const JobRecord job = RunJob(g, t);
  ASSERT_EQ(job.state, JobState::kDone) << job.error;
  absl::StatusOr<Database> db = OpenSqlite((dir_ / "parity.db").string(), /*read_only=*/true);
  ASSERT_TRUE(db.ok()) << db.status();
  absl::StatusOr<Statement> q = db->Prepare("SELECT col, length(data) FROM job_index WHERE job_id=? ORDER BY col");
  ASSERT_TRUE(q.ok()) << q.status();
  q->Bind(1, job.job_id);
  std::map<int64_t, int64_t> parts;
  while (*q->Step()) parts[q->ColumnInt(0)] = q->ColumnInt(1);
  EXPECT_EQ(parts[kIndexRowsPart], 12 * 8);
  EXPECT_EQ(parts[SortableMetricColumn("Cosine")], 12 * 8);
  EXPECT_EQ(parts[SortableMetricColumn("MaxAbsErr")], 12 * 8);
  OpResultFilter f;
  f.sort_metric = "Cosine";
  int64_t total = 0;
  absl::StatusOr<std::vector<OpResultRecord>> worst = core_->store().ListOpResults(job.job_id, f, 0, 1, &total);
  ASSERT_TRUE(worst.ok()) << worst.status();
  ASSERT_EQ(worst->size(), 1u);
  EXPECT_EQ((*worst)[0].name, "Functional.op.7.forward.output.0");
  EXPECT_EQ(total, 12);
}

// An upload against a golden run: its large blobs (at least spool_direct_min_bytes) are held in
// memory and compared from there, not read back from the spool. Items arrive in several chunks
// and differ slightly from the golden ones (data is compared, not CRCs), so a chunk copied to
// the wrong place in the held copy changes the verdicts; the held copies
// are all taken and none is left behind. With too little room, nothing is held and the same
// verdicts come from the spool.
TEST_F(CoreTest, LargeTargetBlobsAreComparedFromMemory) {
  const int n = 8, floats = 16384;  // 64 KiB each
  std::vector<Spec> golden, target;
  for (int i = 0; i < n; ++i) {
    golden.push_back({"Functional.op." + std::to_string(i), i, i});
    target.push_back({"Functional.op." + std::to_string(i), i, i, i == 5});
  }
  for (const uint64_t room : {uint64_t{4} << 20, uint64_t{64} << 10}) {
    Open([room](CoreOptions* o) {
      o->spool_direct_min_bytes = 4096;
      o->held_blob_bytes = room;
    });
    UploadHow how;
    how.floats = floats;
    how.chunk_bytes = 5000;  // not a multiple of anything: the last chunk is short
    const std::string g = UploadRun(core_.get(), Side::kGolden, golden, how);
    ASSERT_FALSE(g.empty());
    EXPECT_EQ(core_->held_blobs().counters().held, 0u) << "no job compares the golden run";
    how.against = g;
    how.scale = 1.0001f;  // close, not equal: equal CRCs would pass without reading the data
    std::string job_id;
    const std::string t = UploadRun(core_.get(), Side::kTarget, target, how, &job_id);
    ASSERT_FALSE(job_id.empty());
    const JobRecord job = AwaitJob(job_id);
    EXPECT_EQ(job.state, JobState::kDone) << job.error;
    EXPECT_EQ(job.counts[static_cast<size_t>(Verdict::kPass)], n - 1) << "room " << room;
    EXPECT_EQ(job.counts[static_cast<size_t>(Verdict::kFail)], 1) << "room " << room;
    EXPECT_EQ(job.first_culprit, "Functional.op.5.forward");
    const HeldBlobs::Counters c = core_->held_blobs().counters();
    if (room > 2 * 4 * static_cast<uint64_t>(floats)) {
      EXPECT_EQ(c.held, static_cast<uint64_t>(n));
      EXPECT_EQ(c.taken, static_cast<uint64_t>(n));
    } else {
      EXPECT_EQ(c.held, 0u);  // a blob may take at most half the room
    }
    EXPECT_EQ(c.held_bytes, 0u);
    EXPECT_EQ(c.reserved_bytes, 0u);
    // The spool wrote the held blobs from the held copies: a job over the stored runs reads
    // them back from disk and comes to the same verdicts.
    const JobRecord again = RunJob(g, t);
    EXPECT_EQ(again.state, JobState::kDone) << again.error;
    EXPECT_EQ(again.counts[static_cast<size_t>(Verdict::kPass)], n - 1) << "room " << room;
    EXPECT_EQ(again.counts[static_cast<size_t>(Verdict::kFail)], 1) << "room " << room;
    EXPECT_EQ(again.first_culprit, "Functional.op.5.forward");
    EXPECT_EQ(core_->held_blobs().counters().taken, c.taken) << "nothing held is left to take";
  }
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

// A run's stack.json and construct.json arrive in parts and are stored once complete and valid;
// any other name, a part out of order, a file over the limit and one that does not parse are
// each refused (one ItemRejected naming the file) while the upload goes on.
TEST_F(CoreTest, RunFilesAreStoredWhenCompleteAndValidAndRefusedOtherwise) {
  Open([](CoreOptions* o) { o->max_run_file_bytes = 64; });
  struct Seen {
    absl::Mutex mu;
    bool done = false;
    std::string run_id;
    std::vector<std::string> rejected;
  };
  auto seen = std::make_shared<Seen>();
  UploadSession s(core_.get(), [seen](UploadEvent e) {
    absl::MutexLock l(&seen->mu);
    if (e.kind == UploadEvent::Kind::kAccepted) seen->run_id = e.run_id;
    if (e.kind == UploadEvent::Kind::kSummary) seen->done = true;
    if (e.kind == UploadEvent::Kind::kRejected) seen->rejected.push_back(e.name + ": " + std::string(e.status.message()));
  });
  UploadStartRequest start;
  RunRecord run;
  run.project = "core";
  run.side = Side::kTarget;
  start.new_run = run;
  ASSERT_TRUE(s.Start(start).ok());
  EXPECT_TRUE(s.RunFile("evil.sh", 0, "x", true).ok());
  EXPECT_TRUE(s.RunFile("stack.json", 0, R"({"0": [["a"], )", false).ok());
  EXPECT_TRUE(s.RunFile("stack.json", 99, "x", false).ok());        // out of order: refused
  EXPECT_TRUE(s.RunFile("stack.json", 100, "]}", true).ok());       // dropped with it
  EXPECT_TRUE(s.RunFile("construct.json", 0, std::string(65, ' '), true).ok());  // over 64 bytes
  EXPECT_TRUE(s.RunFile("construct.json", 0, R"({"a": 1.5e0, "b": {}})", true).ok());
  EXPECT_TRUE(s.RunFile("stack.json", 0, R"({"0": [["a"], )", false).ok());
  EXPECT_TRUE(s.RunFile("stack.json", 14, R"("stack of a"]})", true).ok());
  EXPECT_TRUE(s.End().ok());
  absl::MutexLock l(&seen->mu);
  seen->mu.Await(absl::Condition(&seen->done));
  ASSERT_EQ(seen->rejected.size(), 4u);
  EXPECT_EQ(seen->rejected[0], "evil.sh: run file 'evil.sh' is not one a run carries (stack.json, construct.json)");
  EXPECT_EQ(seen->rejected[1], "stack.json: run file 'stack.json': part at offset 99, expected offset 14");
  EXPECT_EQ(seen->rejected[2], "construct.json: run file 'construct.json' is larger than --max-run-file-bytes (64)");
  EXPECT_EQ(seen->rejected[3], "construct.json: construct.json: the parent of \"b\" is neither a name nor null");
  // stack.json is kept as its index (an empty marker row says the run has one).
  absl::StatusOr<std::optional<std::string>> marker = core_->store().GetRunFile(seen->run_id, "stack.json");
  ASSERT_TRUE(marker.ok()) << marker.status();
  EXPECT_EQ(marker->value_or("absent"), "");
  absl::StatusOr<absl::flat_hash_map<std::string, std::string>> stacks =
      core_->store().GetStacks(seen->run_id, {"a", "b"});
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  EXPECT_EQ(stacks->size(), 1u);
  EXPECT_EQ(stacks->at("a"), "stack of a");
  EXPECT_FALSE(core_->store().GetRunFile(seen->run_id, "construct.json")->has_value());
  EXPECT_FALSE(RunModuleTree(core_->store(), seen->run_id).has_value());
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

// Run files being received hold at most --max-run-file-memory-bytes across uploads: a part
// beyond it is refused, and what an upload held is given back when its file completes or the
// upload ends.
TEST_F(CoreTest, RunFilesOfAllUploadsShareOneMemoryLimit) {
  Open([](CoreOptions* o) {
    o->max_run_file_bytes = 64;
    o->max_run_file_memory_bytes = 80;
  });
  struct Seen {
    absl::Mutex mu;
    std::vector<std::string> rejected;
  };
  auto seen = std::make_shared<Seen>();
  auto session = [&]() {
    auto s = std::make_unique<UploadSession>(core_.get(), [seen](UploadEvent e) {
      absl::MutexLock l(&seen->mu);
      if (e.kind == UploadEvent::Kind::kRejected) seen->rejected.push_back(std::string(e.status.message()));
    });
    UploadStartRequest start;
    RunRecord run;
    run.project = "core";
    run.side = Side::kTarget;
    start.new_run = run;
    EXPECT_TRUE(s->Start(start).ok());
    return s;
  };
  auto a = session();
  auto b = session();
  EXPECT_TRUE(a->RunFile("stack.json", 0, std::string(50, ' '), false).ok());   // 50 held
  EXPECT_TRUE(b->RunFile("stack.json", 0, std::string(40, ' '), false).ok());   // 90 > 80: refused
  {
    absl::MutexLock l(&seen->mu);
    ASSERT_EQ(seen->rejected.size(), 1u);
    EXPECT_NE(seen->rejected[0].find("would exceed --max-run-file-memory-bytes (80)"), std::string::npos)
        << seen->rejected[0];
  }
  a.reset();  // an upload that ends gives back what it held
  auto c = session();
  EXPECT_TRUE(c->RunFile("construct.json", 0, R"({"m": null})", true).ok());
  EXPECT_TRUE(c->RunFile("stack.json", 0, std::string(60, ' '), false).ok());
  absl::MutexLock l(&seen->mu);
  EXPECT_EQ(seen->rejected.size(), 1u);
}

}  // namespace
}  // namespace parity
