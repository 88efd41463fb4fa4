// The SQLite store and the spool, on real files.
#include "server/storage/store.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "common/base/file_util.h"
#include "common/base/glob.h"
#include "common/base/thread_name.h"
#include "server/storage/migrate_store.h"
#include "server/storage/spool.h"
#include "server/storage/postgres.h"
#include "server/storage/sqlite.h"
#include "tests/test_postgres.h"
#include "tests/test_util.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

}  // namespace

void PrintTo(SqlDialect d, std::ostream* os) { *os << (d == SqlDialect::kSqlite ? "sqlite" : "postgres"); }

namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("parity_store_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "p.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::unique_ptr<Store> Open(int sort_cache_entries = StoreOptions().sort_cache_entries) {
    StoreOptions o;
    o.path = path_;
    o.sort_cache_entries = sort_cache_entries;
    auto s = Store::Open(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  // A connection of its own to the store's database, for what the store's API does not do.
  absl::StatusOr<Database> RawDb() { return IsPostgresStore(path_) ? OpenPostgres(path_) : OpenSqlite(path_); }
  fs::path dir_;
  std::string path_;  // StoreOptions::path
};

// The same tests on each backend: an SQLite file, and a database of its own on the PostgreSQL
// server started for the tests (tests/postgres.sh).
class StoreOnBothTest : public StoreTest, public ::testing::WithParamInterface<SqlDialect> {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (GetParam() == SqlDialect::kPostgres) {
      absl::StatusOr<std::string> uri = testing::NewPostgresDatabase();
      ASSERT_TRUE(uri.ok()) << uri.status();
      path_ = *uri;
    }
  }
};

RunRecord MakeRun(const std::string& id, Side side, const std::string& project = "p") {
  RunRecord r;
  r.run_id = id;
  r.project = project;
  r.side = side;
  r.name = id;
  r.created_at_ms = 1000;
  r.labels = {{"build", "7"}};
  return r;
}

OpResultRecord Result(const std::string& job, const std::string& name, int64_t idx, Verdict v, double cos) {
  OpResultRecord r;
  r.job_id = job;
  r.name = name;
  r.api = "F." + name;
  r.index = idx;
  r.role = Role::kOutput;
  r.phase = Phase::kForward;
  r.result.verdict = v;
  r.result.policy = "msprobe";
  r.result.Add("Cosine", MetricValue::Number(cos));
  r.result.Add("MaxRelativeErr", MetricValue::Text("Nan"));
  r.result.Add("Mismatched elements", MetricValue::Integer(idx));
  return r;
}

TEST_P(StoreOnBothTest, PersistsAcrossReopenAndAnswersQueries) {
  {
    auto s = Open();
    ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("g", Side::kGolden))).ok());
    ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget))).ok());
    ItemRecord it;
    it.run_id = "t";
    it.name = "x";
    it.api = "F.x";
    it.dtype = DType::kFloat16;
    it.shape = {2, 3};
    it.max = NAN;
    it.min = -INFINITY;
    it.crc32 = 0xdeadbeef;
    it.blob = "abc";
    ASSERT_TRUE(s->WriteSync(Store::InsertItem(it)).ok());
    // A duplicate name is refused without failing the rest of the batch.
    EXPECT_EQ(s->WriteSync(Store::InsertItem(it)).code(), absl::StatusCode::kAlreadyExists);
    ItemRecord unreadable;
    unreadable.run_id = "t";
    unreadable.name = "y";
    unreadable.index = 1;
    unreadable.data_mode = DataMode::kStats;
    unreadable.read_error = "t/y.npy: truncated .npy file (7 bytes)";
    ASSERT_TRUE(s->WriteSync(Store::InsertItem(unreadable)).ok());
    JobRecord j;
    j.job_id = "j";
    j.project = "p";
    j.golden_run_id = "g";
    j.target_run_id = "t";
    j.state = JobState::kRunning;
    ASSERT_TRUE(s->WriteSync(Store::InsertJob(j)).ok());
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(s->WriteSync(Store::UpsertOpResult(Result("j", "op" + std::to_string(i), i,
                                                            i % 3 ? Verdict::kPass : Verdict::kFail,
                                                            1.0 - i * 0.01))).ok());
    }
    ASSERT_TRUE(s->WriteSync(Store::SetCulprits("j", {{3, CulpritStatus::kCulprit}})).ok());
    j.state = JobState::kDone;
    j.counts = {6, 0, 4, 0, 0, 0};
    j.first_culprit = "F.op3";
    ASSERT_TRUE(s->WriteSync(Store::UpdateJob(j)).ok());
  }
  auto s = Open();
  auto run = s->GetRun("t");
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->labels.at("build"), "7");
  auto items = s->ListItems("t");
  ASSERT_TRUE(items.ok());
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ((*items)[0].read_error, "");
  EXPECT_EQ((*items)[1].read_error, "t/y.npy: truncated .npy file (7 bytes)");
  EXPECT_FALSE((*items)[1].dtype.has_value());
  EXPECT_EQ((*items)[1].data_mode, DataMode::kStats);
  EXPECT_TRUE(std::isnan(*(*items)[0].max));
  EXPECT_EQ(*(*items)[0].min, -INFINITY);
  EXPECT_EQ((*items)[0].shape, (Shape{2, 3}));
  EXPECT_EQ(*(*items)[0].crc32, 0xdeadbeefu);
  auto job = s->GetJob("j");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kDone);
  EXPECT_EQ(job->counts[2], 4);
  EXPECT_EQ(s->GetJob("nope").status().code(), absl::StatusCode::kNotFound);

  OpResultFilter fail;
  fail.verdicts = {static_cast<int>(Verdict::kFail)};
  int64_t total = 0;
  auto rows = s->ListOpResults("j", fail, 0, 2, &total);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(total, 4);
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].name, "op0");
  EXPECT_EQ((*rows)[1].name, "op3");
  EXPECT_EQ((*rows)[1].culprit, CulpritStatus::kCulprit);
  EXPECT_EQ((*rows)[0].result.Find("MaxRelativeErr")->text(), "Nan");
  EXPECT_TRUE((*rows)[0].result.Find("Mismatched elements")->is_integer());

  OpResultFilter worst;
  worst.sort_metric = "Cosine";
  rows = s->ListOpResults("j", worst, 0, 3, &total);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0].name, "op9");  // lowest cosine first
  OpResultFilter glob;
  glob.glob = "F.op[12]";
  rows = s->ListOpResults("j", glob, 0, 10, &total);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(total, 2);
  auto culprits = s->ListCulpritApis("j");
  ASSERT_TRUE(culprits.ok());
  EXPECT_EQ(*culprits, std::vector<std::string>{"F.op3"});
  RunFilter rf;
  rf.labels = {{"build", "7"}};
  rf.side = static_cast<int>(Side::kGolden);
  auto runs = s->ListRuns(rf, 0, 10);
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].run_id, "g");
  EXPECT_TRUE(s->IntegrityCheck().ok());
}

JobRecord MakeJob(const std::string& id, JobState state = JobState::kRunning) {
  JobRecord j;
  j.job_id = id;
  j.project = "p";
  j.golden_run_id = "g";
  j.target_run_id = "t";
  j.state = state;
  return j;
}

// Runs and jobs are listed newest first (ties by id, descending), a page at a time.
TEST_P(StoreOnBothTest, RunsAndJobsAreListedNewestFirstInPages) {
  auto s = Open();
  for (int i = 0; i < 5; ++i) {
    RunRecord r = MakeRun(absl::StrCat("r", i), i % 2 ? Side::kTarget : Side::kGolden);
    r.created_at_ms = 1000 + 10 * (i % 3);  // r0 r3 | r1 r4 | r2
    ASSERT_TRUE(s->WriteSync(Store::InsertRun(r)).ok());
  }
  for (int i = 0; i < 5; ++i) {
    JobRecord j = MakeJob(absl::StrCat("j", i));
    j.golden_run_id = "r0";
    j.target_run_id = "r1";
    j.created_at_ms = 2000 + 10 * i;
    ASSERT_TRUE(s->WriteSync(Store::InsertJob(j)).ok());
  }
  auto ids = [](const auto& records, auto id) {
    std::vector<std::string> out;
    for (const auto& r : records) out.push_back(r.*id);
    return out;
  };
  std::vector<std::string> runs;
  for (int64_t offset = 0; offset < 6; offset += 2) {
    auto page = s->ListRuns(RunFilter(), offset, 2);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const std::string& id : ids(*page, &RunRecord::run_id)) runs.push_back(id);
  }
  EXPECT_EQ(runs, (std::vector<std::string>{"r2", "r4", "r1", "r3", "r0"}));
  std::vector<std::string> jobs;
  for (int64_t offset = 0; offset < 6; offset += 2) {
    auto page = s->ListJobs(JobFilter(), offset, 2);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_LE(page->size(), 2u);
    for (const std::string& id : ids(*page, &JobRecord::job_id)) jobs.push_back(id);
  }
  EXPECT_EQ(jobs, (std::vector<std::string>{"j4", "j3", "j2", "j1", "j0"}));
}

// A finished job's glob-filtered pages come from the in-memory order of the glob's rows: the
// same rows, order and totals as the SQL path (cache off), for globs matching names or APIs,
// with sorting, verdict filters and offsets, and after another glob filled the cache.
TEST_P(StoreOnBothTest, GlobPagesOfAFinishedJobMatchTheSqlPath) {
  {
    auto s = Open();
    ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("g", Side::kGolden))).ok());
    ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget))).ok());
    ASSERT_TRUE(s->WriteSync(Store::InsertJob(MakeJob("j"))).ok());
    for (int i = 0; i < 300; ++i) {
      OpResultRecord r = Result("j", "op" + std::to_string(i), i, i % 4 ? Verdict::kPass : Verdict::kFail,
                                1.0 - (i * 37 % 101) * 0.001);
      if (i % 10 == 3) r.api = "Torch.conv" + std::to_string(i);
      ASSERT_TRUE(s->WriteSync(Store::UpsertOpResult(r)).ok());
    }
    JobRecord j = MakeJob("j", JobState::kDone);
    ASSERT_TRUE(s->WriteSync(Store::UpdateJob(j)).ok());
  }
  auto cached = Open();
  auto sql = Open(/*sort_cache_entries=*/0);
  struct Case {
    std::string glob, sort;
    bool descending;
    std::vector<int> verdicts;
    int64_t offset;
  };
  const std::vector<Case> cases = {
      {"op1*", "", false, {}, 0},          {"op1*", "Cosine", true, {}, 5},
      {"op2?", "Cosine", false, {2}, 0},    {"Torch.conv*", "", false, {}, 0},
      {"Torch.conv*", "Cosine", true, {0}, 2}, {"op1*", "", false, {}, 0},  // again, from the cache
      {"nothing*", "Cosine", false, {}, 0}, {"*", "Cosine", false, {}, 290}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.glob + " " + c.sort);
    OpResultFilter f;
    f.glob = c.glob;
    f.sort_metric = c.sort;
    f.descending = c.descending;
    f.verdicts = c.verdicts;
    int64_t total_cached = -1, total_sql = -2;
    auto a = cached->ListOpResults("j", f, c.offset, 7, &total_cached);
    auto b = sql->ListOpResults("j", f, c.offset, 7, &total_sql);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(total_cached, total_sql);
    ASSERT_EQ(a->size(), b->size());
    for (size_t i = 0; i < a->size(); ++i) {
      EXPECT_EQ((*a)[i].name, (*b)[i].name) << i;
      EXPECT_TRUE(GlobMatch(c.glob, (*a)[i].name) || GlobMatch(c.glob, (*a)[i].api)) << (*a)[i].name;
    }
  }
  // Hand-counted: op1, op10-op19, op100-op199 (111 names); 30 APIs Torch.conv<i>.
  OpResultFilter f;
  f.glob = "op1*";
  int64_t total = 0;
  ASSERT_TRUE(cached->ListOpResults("j", f, 0, 1, &total).ok());
  EXPECT_EQ(total, 111);
  f.glob = "Torch.conv*";
  ASSERT_TRUE(cached->ListOpResults("j", f, 0, 1, &total).ok());
  EXPECT_EQ(total, 30);
}

// A finished job's stored index gives exactly the listings and series its rows give: every
// sort (ties, rows without a number, integers, a metric no row has), both directions, verdict,
// culprit, phase and role filters, pages, golden-only rows, and the culprit marks written with
// it. A damaged index is a DATA_LOSS error, not a wrong answer.
TEST_P(StoreOnBothTest, AFinishedJobsIndexListsAndPlotsExactlyWhatItsRowsDo) {
  const std::vector<std::pair<int64_t, CulpritStatus>> marks = {
      {42, CulpritStatus::kCulprit}, {45, CulpritStatus::kPropagated}, {kGoldenOnlyIndexBase + 2, CulpritStatus::kCulprit}};
  {
    auto s = Open();
    ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("g", Side::kGolden))).ok());
    ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget))).ok());
    for (const char* job : {"indexed", "plain"}) {
      ASSERT_TRUE(s->WriteSync(Store::InsertJob(MakeJob(job))).ok());
      for (int i = 0; i < 240; ++i) {
        const int64_t index = i < 200 ? i * 3 : kGoldenOnlyIndexBase + (i - 200);
        const Verdict v = static_cast<Verdict>(i % 7 == 0 ? 2 : i % 5 == 0 ? 1 : i % 11 == 0 ? 3 : 0);
        OpResultRecord r = Result(job, "op" + std::to_string(i), index, v, 1.0 - (i * 37 % 23) * 0.01);  // ties
        if (i % 9 == 4) r.result.metrics[0].value = MetricValue::Text("unsupported");
        // Zeros of both signs (equal: ordered by dump order), negatives and infinities.
        if (i % 17 == 6) r.result.metrics[0].value = MetricValue::Number(i % 2 ? -0.0 : 0.0);
        if (i % 19 == 3) r.result.metrics[0].value = MetricValue::Number(-0.5 - (i % 3));
        if (i % 29 == 2) {
          r.result.metrics[0].value = MetricValue::Number(i % 2 ? -std::numeric_limits<double>::infinity()
                                                                : std::numeric_limits<double>::infinity());
        }
        if (i % 3 == 0) r.result.Add("MaxAbsErr", MetricValue::Number((i % 13) * 0.5));
        r.phase = i % 2 ? Phase::kForward : Phase::kBackward;
        r.role = i % 3 ? Role::kOutput : Role::kInput;
        ASSERT_TRUE(s->WriteSync(Store::UpsertOpResult(r)).ok());
      }
    }
    auto index = s->BuildJobIndex("indexed", marks);
    ASSERT_TRUE(index.ok()) << index.status();
    ASSERT_NE(*index, nullptr);
    ASSERT_TRUE(s->WriteSync(Store::SetCulprits("indexed", marks)).ok());
    ASSERT_TRUE(s->WriteSync(Store::StoreJobIndex("indexed", *index)).ok());
    ASSERT_TRUE(s->WriteSync(Store::UpdateJob(MakeJob("indexed", JobState::kDone))).ok());
    ASSERT_TRUE(s->WriteSync(Store::SetCulprits("plain", marks)).ok());
    ASSERT_TRUE(s->WriteSync(Store::UpdateJob(MakeJob("plain", JobState::kDone))).ok());
  }
  auto s = Open();
  auto listing = [&](const std::string& job, const OpResultFilter& f, int64_t offset, int64_t* total,
                     int64_t limit = 1000) {
    std::vector<std::string> names;
    auto rows = s->ListOpResults(job, f, offset, limit, total);
    EXPECT_TRUE(rows.ok()) << rows.status();
    if (rows.ok()) for (const OpResultRecord& r : *rows) names.push_back(r.name);
    return names;
  };
  int compared = 0;
  for (const char* sort : {"", "Cosine", "MaxAbsErr", "Mismatched elements", "EucDist"}) {
    for (bool descending : {false, true}) {
      for (int filter = 0; filter < 6; ++filter) {
        SCOPED_TRACE(absl::StrCat(sort, descending ? " desc" : "", " filter ", filter));
        OpResultFilter f;
        f.sort_metric = sort;
        f.descending = descending;
        if (filter == 1) f.verdicts = {2, 3};
        if (filter == 2) f.culprits = {CulpritStatus::kCulprit, CulpritStatus::kPropagated};
        if (filter == 3) f.phase = static_cast<int>(Phase::kBackward) + 1;
        if (filter == 4) f.role = static_cast<int>(Role::kInput) + 1;
        const int64_t offset = filter == 5 ? 17 : 0;
        int64_t a_total = -1, b_total = -2;
        const std::vector<std::string> a = listing("indexed", f, offset, &a_total);
        const std::vector<std::string> b = listing("plain", f, offset, &b_total);
        EXPECT_EQ(a_total, b_total);
        EXPECT_EQ(a, b);
        EXPECT_FALSE(a.empty());
        f.one_off = true;  // picked from the index without keeping the order (two ways)
        int64_t c_total = -3;
        EXPECT_EQ(listing("indexed", f, offset, &c_total, 5000), b);
        EXPECT_EQ(c_total, b_total);
        EXPECT_EQ(listing("indexed", f, offset, &c_total, 5),
                  std::vector<std::string>(b.begin(), b.begin() + std::min<size_t>(5, b.size())));
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 60);
  int64_t total = 0;
  OpResultFilter culprits;
  culprits.culprits = {CulpritStatus::kCulprit};
  EXPECT_EQ(listing("indexed", culprits, 0, &total), (std::vector<std::string>{"op14", "op202"}));
  for (const char* metric : {"Cosine", "MaxAbsErr", "EucDist"}) {
    SCOPED_TRACE(metric);
    auto a = s->JobSeries("indexed", metric, 13, 10);
    auto b = s->JobSeries("plain", metric, 13, 10);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_EQ(a->total, 240);
    ASSERT_EQ(a->buckets.size(), b->buckets.size());
    for (size_t k = 0; k < a->buckets.size(); ++k) {
      const SeriesBucket &x = a->buckets[k], &y = b->buckets[k];
      EXPECT_EQ(x.first, y.first);
      EXPECT_EQ(x.count, y.count);
      EXPECT_EQ(x.with_value, y.with_value);
      EXPECT_EQ(x.failing, y.failing);
      EXPECT_EQ(std::isnan(x.min) ? -1 : x.min, std::isnan(y.min) ? -1 : y.min);
      EXPECT_EQ(std::isnan(x.max) ? -1 : x.max, std::isnan(y.max) ? -1 : y.max);
    }
    ASSERT_EQ(a->culprits.size(), 1u);  // op14 fails; op202 passes
    ASSERT_EQ(a->culprits.size(), b->culprits.size());
    for (size_t k = 0; k < a->culprits.size(); ++k) {
      EXPECT_EQ(a->culprits[k].position, b->culprits[k].position);
      EXPECT_EQ(a->culprits[k].name, b->culprits[k].name);
    }
  }
  // The index is what is read: cut short, the listing and the series say so.
  s.reset();
  {
    auto db = RawDb();
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec("UPDATE job_index SET data=substr(data, 1, 13) WHERE job_id='indexed' AND col=-1").ok());
  }
  s = Open();
  OpResultFilter by_cosine;
  by_cosine.sort_metric = "Cosine";
  EXPECT_EQ(s->ListOpResults("indexed", by_cosine, 0, 10, &total).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s->JobSeries("indexed", "Cosine", 10, 1).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(s->JobSeries("plain", "Cosine", 10, 1).ok());
}

// A job's series: every result in one bucket of near-equal size, each bucket's least and
// greatest value of the metric (NaN when none has one), its failing count, and the failing
// culprit results; a finished job's is cut from memory for any bucket count and equals what the
// uncached path gives; culprit filters list the same rows from memory and by SQL.
TEST_P(StoreOnBothTest, SeriesBucketEveryResultAndMarkTheCulprits) {
  {
    auto s = Open();
    ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("g", Side::kGolden))).ok());
    ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget))).ok());
    ASSERT_TRUE(s->WriteSync(Store::InsertJob(MakeJob("j"))).ok());
    for (int i = 0; i < 100; ++i) {
      // Cosine 1 - i/1000, but none for every 10th; FAIL from 60 on.
      OpResultRecord r = Result("j", "op" + std::to_string(i), i, i >= 60 ? Verdict::kFail : Verdict::kPass,
                                1.0 - i / 1000.0);
      if (i % 10 == 5) r.result.metrics[0].value = MetricValue::Text("unsupported");
      ASSERT_TRUE(s->WriteSync(Store::UpsertOpResult(r)).ok());
    }
    ASSERT_TRUE(s->WriteSync(Store::SetCulprits("j", {{60, CulpritStatus::kCulprit}, {59, CulpritStatus::kCulprit},
                                                      {61, CulpritStatus::kPropagated}, {62, CulpritStatus::kPropagated}}))
                    .ok());
    ASSERT_TRUE(s->WriteSync(Store::UpdateJob(MakeJob("j", JobState::kDone))).ok());
  }
  auto cached = Open();
  auto sql = Open(/*sort_cache_entries=*/0);
  for (int buckets : {7, 1, 100, 1000}) {
    SCOPED_TRACE(buckets);
    auto a = cached->JobSeries("j", "Cosine", buckets, 10);
    auto b = sql->JobSeries("j", "Cosine", buckets, 10);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->total, 100);
    ASSERT_EQ(a->buckets.size(), static_cast<size_t>(std::min(buckets, 100)));
    ASSERT_EQ(a->buckets.size(), b->buckets.size());
    int64_t next = 0;
    for (size_t k = 0; k < a->buckets.size(); ++k) {
      const SeriesBucket& x = a->buckets[k];
      EXPECT_EQ(x.first, next);
      next += x.count;
      int64_t with = 0, failing = 0;
      double lo = 2, hi = -1;
      for (int64_t i = x.first; i < x.first + x.count; ++i) {
        failing += i >= 60;
        if (i % 10 == 5) continue;
        ++with;
        lo = std::min(lo, 1.0 - i / 1000.0);
        hi = std::max(hi, 1.0 - i / 1000.0);
      }
      EXPECT_EQ(x.with_value, with);
      EXPECT_EQ(x.failing, failing);
      if (with > 0) {
        EXPECT_DOUBLE_EQ(x.min, lo);
        EXPECT_DOUBLE_EQ(x.max, hi);
      } else {
        EXPECT_TRUE(std::isnan(x.min) && std::isnan(x.max));
      }
      EXPECT_EQ(b->buckets[k].first, x.first);
      EXPECT_EQ(b->buckets[k].with_value, x.with_value);
    }
    EXPECT_EQ(next, 100);
    // The culprit operator's failing result only (op59 passes).
    ASSERT_EQ(a->culprits.size(), 1u);
    EXPECT_EQ(a->culprits[0].position, 60);
    EXPECT_EQ(a->culprits[0].name, "op60");
    EXPECT_DOUBLE_EQ(a->culprits[0].value, 1.0 - 60 / 1000.0);
  }
  ASSERT_TRUE(cached->JobSeries("j", "Cosine", 5, 0).ok());
  EXPECT_TRUE(cached->JobSeries("j", "Cosine", 5, 0)->culprits.empty());
  EXPECT_EQ(cached->JobSeries("j", "Speed", 5, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cached->JobSeries("j", "Cosine", 0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cached->JobSeries("nope", "Cosine", 5, 1).status().code(), absl::StatusCode::kNotFound);
  for (Store* s : {cached.get(), sql.get()}) {
    OpResultFilter f;
    f.culprits = {CulpritStatus::kPropagated};
    int64_t total = 0;
    auto rows = s->ListOpResults("j", f, 0, 10, &total);
    ASSERT_TRUE(rows.ok());
    ASSERT_EQ(total, 2);
    EXPECT_EQ((*rows)[0].name, "op61");
    f.culprits = {CulpritStatus::kCulprit, CulpritStatus::kNone};
    ASSERT_TRUE(s->ListOpResults("j", f, 0, 10, &total).ok());
    EXPECT_EQ(total, 98);
  }
}

ItemRecord MakeItem(const std::string& run, const std::string& name, int64_t index) {
  ItemRecord it;
  it.run_id = run;
  it.name = name;
  it.api = "F." + name;
  it.index = index;
  return it;
}

// A project holds a blob when one of its items references that whole key: items are indexed
// by the key's first 16 hex digits, and a key sharing them is not taken for another.
TEST_P(StoreOnBothTest, ABlobIsHeldByItsWholeKeyAndOnlyInItsProject) {
  auto s = Open();
  ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("a", Side::kGolden, "p"))).ok());
  ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("b", Side::kGolden, "q"))).ok());
  const std::string key = "0123456789abcdef" + std::string(48, '1');
  const std::string twin = "0123456789abcdef" + std::string(48, '2');  // same first 16 digits
  ItemRecord it = MakeItem("a", "x", 0);
  it.blob = key;
  ASSERT_TRUE(s->WriteSync(Store::InsertItem(it)).ok());
  it = MakeItem("b", "y", 0);
  it.blob = twin;
  ASSERT_TRUE(s->WriteSync(Store::InsertItem(it)).ok());
  auto held = [&](const std::string& project, const std::string& k) {
    auto keys = s->ProjectBlobsWithHash(project, k);  // a content key is its own hash
    EXPECT_TRUE(keys.ok()) << keys.status();
    return keys.ok() && *keys == std::vector<std::string>{k};
  };
  EXPECT_TRUE(held("p", key));
  EXPECT_FALSE(held("p", twin));  // held by project q only
  EXPECT_TRUE(held("q", twin));
  EXPECT_FALSE(held("q", key));
  EXPECT_FALSE(held("p", key.substr(0, 16)));
  EXPECT_TRUE(s->ProjectBlobsWithHash("p", "")->empty());
  // Released data is no longer held.
  ASSERT_TRUE(s->WriteSync(Store::ReleaseRunData("a")).ok());
  EXPECT_FALSE(held("p", key));
}

// Hashes of uniquely keyed blobs: a probe's matches are the project's blobs of that length and
// CRC-32, those in the spool and not hashed yet marked; a recorded hash (or a content key) finds
// its blob within the project; records of blobs no item references any more are dropped.
TEST_P(StoreOnBothTest, BlobHashesAreRecordedForProbedBlobsAndForgottenWithThem) {
  auto s = Open();
  ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("a", Side::kGolden, "p"))).ok());
  ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("b", Side::kGolden, "q"))).ok());
  const std::string k1(64, '1'), k2(64, '2'), k3(64, '3'), sha(64, 'e');
  int n = 0;
  auto add = [&](const std::string& run, const std::string& key, uint64_t length, uint32_t crc) {
    ItemRecord it = MakeItem(run, "x" + std::to_string(n), n);
    ++n;
    it.blob = key;
    it.byte_length = length;
    it.crc32 = crc;
    ASSERT_TRUE(s->WriteSync(Store::InsertItem(it)).ok());
  };
  add("a", k1, 1 << 20, 7);
  add("a", k1, 1 << 20, 7);  // two items, one blob
  add("a", k2, 1 << 20, 7);
  add("a", k3, 1 << 20, 8);
  add("b", k3, 1 << 20, 7);  // another project's
  ItemRecord inline_item = MakeItem("a", "inline", 100);
  inline_item.blob = std::string(64, '4');
  inline_item.byte_length = 1 << 20;
  inline_item.crc32 = 9;
  inline_item.inline_data = std::make_shared<const std::string>("d");
  ASSERT_TRUE(s->WriteSync(Store::InsertItem(inline_item)).ok());
  const std::string content_key(64, 'c');  // a content-keyed blob: its key is its hash
  add("a", content_key, 1 << 20, 10);
  using Matches = std::vector<std::pair<std::string, bool>>;  // key, unhashed
  auto matching = [&](uint32_t crc, int limit = 8, uint64_t length = 1 << 20) {
    auto blobs = s->BlobsMatching("p", length, crc, limit);
    EXPECT_TRUE(blobs.ok()) << blobs.status();
    Matches v;
    for (const Store::MatchingBlob& b : blobs.value_or(std::vector<Store::MatchingBlob>{})) {
      v.emplace_back(b.key, b.unhashed);
    }
    std::sort(v.begin(), v.end());
    return v;
  };
  auto with_hash = [&](const std::string& project, const std::string& h) {
    auto keys = s->ProjectBlobsWithHash(project, h);
    EXPECT_TRUE(keys.ok()) << keys.status();
    std::vector<std::string> v = keys.value_or(std::vector<std::string>{});
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(matching(7), (Matches{{k1, true}, {k2, true}}));
  EXPECT_EQ(matching(7, 1).size(), 1u);
  EXPECT_EQ(matching(8), (Matches{{k3, true}}));
  // Data in its item's row is not in the spool: never matched, by CRC-32 or by hash (and not
  // indexed for either: storing a small tensor writes no random index key).
  EXPECT_TRUE(matching(9).empty());
  EXPECT_TRUE(with_hash("p", inline_item.blob).empty());
  EXPECT_TRUE(matching(7, 8, (1 << 20) + 1).empty());
  ASSERT_TRUE(s->WriteSync(Store::RecordBlobHash(k1, sha)).ok());
  ASSERT_TRUE(s->WriteSync(Store::RecordBlobHash(k3, sha)).ok());
  EXPECT_EQ(matching(7), (Matches{{k1, false}, {k2, true}}));
  EXPECT_EQ(matching(8), (Matches{{k3, false}}));
  EXPECT_EQ(with_hash("p", sha), (std::vector<std::string>{k1, k3}));
  EXPECT_EQ(with_hash("q", sha), (std::vector<std::string>{k3}));
  EXPECT_TRUE(with_hash("p", std::string(64, 'f')).empty());
  EXPECT_EQ(with_hash("p", content_key), (std::vector<std::string>{content_key}));
  EXPECT_TRUE(with_hash("q", content_key).empty());
  // Run a's data released: k1 is referenced by nothing and its record goes; k3's stays (run b).
  ASSERT_TRUE(s->WriteSync(Store::ReleaseRunData("a")).ok());
  ASSERT_TRUE(s->WriteSync(Store::ForgetUnreferencedBlobHashes()).ok());
  EXPECT_TRUE(with_hash("p", sha).empty());
  add("b", k1, 1 << 20, 7);  // referenced again: found only once hashed again
  EXPECT_EQ(with_hash("q", sha), (std::vector<std::string>{k3}));
}

// Results are keyed by job and item index (target rows, then golden-only rows), found by name
// through the runs' items, and kept apart per job.
TEST_P(StoreOnBothTest, ResultsAreKeyedByJobAndIndexAndFoundByName) {
  auto s = Open();
  ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("g", Side::kGolden))).ok());
  ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget))).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s->WriteSync(Store::InsertItem(MakeItem("t", "t" + std::to_string(i), i))).ok());
    ASSERT_TRUE(s->WriteSync(Store::InsertItem(MakeItem("g", "g" + std::to_string(i), i))).ok());
  }
  // "g2" exists only in the golden run; "t2" is a target row with an unresolvable name.
  ASSERT_TRUE(s->WriteSync(Store::InsertJob(MakeJob("a"))).ok());
  ASSERT_TRUE(s->WriteSync(Store::InsertJob(MakeJob("b"))).ok());
  for (const char* job : {"a", "b"}) {
    const double cos = job[0] == 'a' ? 0.5 : 0.9;
    ASSERT_TRUE(s->WriteSync(Store::UpsertOpResult(Result(job, "g2", kGoldenOnlyIndexBase + 2, Verdict::kUnmatched, cos))).ok());
    ASSERT_TRUE(s->WriteSync(Store::UpsertOpResult(Result(job, "t1", 1, Verdict::kFail, cos))).ok());
    ASSERT_TRUE(s->WriteSync(Store::UpsertOpResult(Result(job, "t0", 0, Verdict::kPass, cos))).ok());
    ASSERT_TRUE(s->WriteSync(Store::UpsertOpResult(Result(job, "renamed", 2, Verdict::kPass, cos))).ok());
  }
  // Writing the same index again replaces the row.
  ASSERT_TRUE(s->WriteSync(Store::UpsertOpResult(Result("a", "t1", 1, Verdict::kError, 0.25))).ok());
  // Unknown job, index out of range: refused alone.
  EXPECT_EQ(s->WriteSync(Store::UpsertOpResult(Result("nope", "t0", 0, Verdict::kPass, 1))).code(),
            absl::StatusCode::kNotFound);
  absl::Status far = s->WriteSync(Store::UpsertOpResult(Result("a", "x", int64_t{1} << 31, Verdict::kPass, 1)));
  EXPECT_EQ(far.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(far.message().find("below 2^31"), std::string::npos) << far;
  ASSERT_TRUE(s->WriteSync(Store::SetCulprits("a", {{1, CulpritStatus::kCulprit},
                                                    {kGoldenOnlyIndexBase + 2, CulpritStatus::kPropagated}})).ok());

  int64_t total = 0;
  for (JobState state : {JobState::kRunning, JobState::kDone}) {  // SQL path, then in-memory order
    ASSERT_TRUE(s->WriteSync(Store::UpdateJob(MakeJob("a", state))).ok());
    auto rows = s->ListOpResults("a", OpResultFilter(), 0, 10, &total);
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(total, 4);
    EXPECT_EQ((*rows)[0].name, "t0");
    EXPECT_EQ((*rows)[1].name, "t1");
    EXPECT_EQ((*rows)[1].result.verdict, Verdict::kError);
    EXPECT_EQ((*rows)[1].culprit, CulpritStatus::kCulprit);
    EXPECT_EQ((*rows)[2].name, "renamed");
    EXPECT_EQ((*rows)[3].name, "g2");  // golden-only rows last
    EXPECT_EQ((*rows)[3].index, kGoldenOnlyIndexBase + 2);
    EXPECT_EQ((*rows)[3].culprit, CulpritStatus::kPropagated);
    OpResultFilter desc;
    desc.descending = true;
    rows = s->ListOpResults("a", desc, 0, 1, &total);
    ASSERT_TRUE(rows.ok());
    EXPECT_EQ((*rows)[0].name, "g2");
  }
  auto b = s->ListOpResults("b", OpResultFilter(), 0, 10, &total);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(total, 4);
  EXPECT_EQ((*b)[1].result.verdict, Verdict::kFail);  // job a's rewrite left job b alone
  EXPECT_EQ((*b)[1].culprit, CulpritStatus::kNone);

  auto t1 = s->GetOpResult("a", "t1");  // through the target's items
  ASSERT_TRUE(t1.ok()) << t1.status();
  EXPECT_EQ(t1->result.verdict, Verdict::kError);
  auto g2 = s->GetOpResult("b", "g2");  // through the golden run's items
  ASSERT_TRUE(g2.ok()) << g2.status();
  EXPECT_EQ(g2->index, kGoldenOnlyIndexBase + 2);
  EXPECT_EQ(g2->result.Find("Cosine")->number(), 0.9);
  auto renamed = s->GetOpResult("b", "renamed");  // no item of that name: found by scanning
  ASSERT_TRUE(renamed.ok()) << renamed.status();
  EXPECT_EQ(renamed->index, 2);
  EXPECT_EQ(s->GetOpResult("a", "t2").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s->GetOpResult("zz", "t0").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*s->ListOpResultNames("b"), (std::vector<std::string>{"t0", "t1", "renamed", "g2"}));
  EXPECT_EQ(*s->ListCulpritApis("a"), std::vector<std::string>{"F.t1"});
  EXPECT_TRUE(s->ListCulpritApis("b")->empty());
  EXPECT_TRUE(s->ListOpResults("zz", OpResultFilter(), 0, 10, &total)->empty());
  EXPECT_EQ(total, 0);
}

// One write of many rows (stored by statements of several rows each): every row of each job in
// order, a repeated index replaced by its later row, and a bad row failing the whole write.
TEST_P(StoreOnBothTest, AWriteOfManyRowsStoresEachRowOfEachJob) {
  auto s = Open();
  ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("g", Side::kGolden))).ok());
  ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget))).ok());
  ASSERT_TRUE(s->WriteSync(Store::InsertJob(MakeJob("a"))).ok());
  ASSERT_TRUE(s->WriteSync(Store::InsertJob(MakeJob("b"))).ok());
  std::vector<OpResultRecord> rows;
  std::vector<std::string> want_a, want_b;
  for (int i = 0; i < 41; ++i) {  // a: 0-22, b: 0-8, a: 23-31 (runs of 23, 9 and 9 rows)
    const bool in_b = i >= 23 && i < 32;
    const int idx = in_b ? i - 23 : i < 23 ? i : i - 9;
    const std::string name = (in_b ? "b" : "a") + std::to_string(idx);
    rows.push_back(Result(in_b ? "b" : "a", name, idx, Verdict::kPass, idx / 64.0));
    (in_b ? want_b : want_a).push_back(name);
  }
  rows.push_back(Result("a", "a5", 5, Verdict::kFail, -1.0));  // replaces a5 (the 42nd row)
  ASSERT_TRUE(s->WriteSync(Store::UpsertOpResults(rows)).ok());
  EXPECT_EQ(*s->ListOpResultNames("a"), want_a);
  EXPECT_EQ(*s->ListOpResultNames("b"), want_b);
  int64_t total = 0;
  auto a = s->ListOpResults("a", OpResultFilter(), 0, 100, &total);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(total, 32);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ((*a)[i].index, i);
    EXPECT_EQ((*a)[i].result.Find("Cosine")->number(), i == 5 ? -1.0 : i / 64.0) << i;
    EXPECT_EQ((*a)[i].result.Find("Mismatched elements")->integer(), i);
  }
  EXPECT_EQ((*a)[5].result.verdict, Verdict::kFail);
  // A row with an index out of range, in the middle of a statement's rows: nothing is stored.
  std::vector<OpResultRecord> bad;
  for (int i = 0; i < 20; ++i) bad.push_back(Result("b", "n" + std::to_string(i), 100 + i, Verdict::kPass, 1));
  bad[9].index = int64_t{1} << 31;
  EXPECT_EQ(s->WriteSync(Store::UpsertOpResults(bad)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*s->ListOpResultNames("b"), want_b);
}

// A write given shared rows binds their names without copying them: it holds the rows until it
// has run, whoever else let go of them; a write given a span keeps copies of the names. Either
// way the caller's rows may die before the write runs (AddressSanitizer sees a name read after
// its row died).
TEST_P(StoreOnBothTest, AWriteOfSharedRowsHoldsThemUntilItRuns) {
  auto s = Open();
  ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("g", Side::kGolden))).ok());
  ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget))).ok());
  const std::string job = "a-job-id-longer-than-a-short-string";
  ASSERT_TRUE(s->WriteSync(Store::InsertJob(MakeJob(job))).ok());
  auto rows = std::make_shared<std::vector<OpResultRecord>>();
  std::vector<std::string> want;
  for (int i = 0; i < 21; ++i) {  // statements of 16, 4 and 1 rows
    want.push_back("Functional.some_long_operator_name." + std::to_string(i) + ".forward.output.0");
    rows->push_back(Result(job, want.back(), i, Verdict::kPass, i / 32.0));
  }
  Store::WriteFn write = Store::UpsertOpResults(std::shared_ptr<const std::vector<OpResultRecord>>(rows));
  const std::weak_ptr<std::vector<OpResultRecord>> held = rows;
  rows.reset();
  EXPECT_FALSE(held.expired());
  ASSERT_TRUE(s->WriteSync(std::move(write)).ok());
  EXPECT_EQ(*s->ListOpResultNames(job), want);
  int64_t total = 0;
  auto got = s->ListOpResults(job, OpResultFilter(), 0, 100, &total);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(total, 21);
  for (int i = 0; i < 21; ++i) {
    EXPECT_EQ((*got)[i].api, "F." + want[i]);
    EXPECT_EQ((*got)[i].result.Find("Cosine")->number(), i / 32.0) << i;
  }
  Store::WriteFn copied;
  {
    std::vector<OpResultRecord> more;
    for (int i = 21; i < 42; ++i) {
      want.push_back("Functional.another_long_operator_name." + std::to_string(i) + ".forward.output.0");
      more.push_back(Result(job, want.back(), i, Verdict::kPass, i / 32.0));
    }
    copied = Store::UpsertOpResults(more);
  }
  ASSERT_TRUE(s->WriteSync(std::move(copied)).ok());
  EXPECT_EQ(*s->ListOpResultNames(job), want);
}

// A batch that fails is replayed write by write: a job created and used in it, and the seq
// the writer remembered for it, survive the replay; the failing write fails alone.
TEST_P(StoreOnBothTest, ABatchReplayedAfterAFailedWriteKeepsItsJobsAndResults) {
  auto s = Open();
  ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("g", Side::kGolden))).ok());
  ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget))).ok());
  ASSERT_TRUE(s->WriteSync(Store::InsertItem(MakeItem("t", "dup", 0))).ok());
  for (int round = 0; round < 20; ++round) {
    const std::string job = "r" + std::to_string(round);
    absl::Mutex mu;
    std::vector<absl::StatusCode> codes(4, absl::StatusCode::kUnknown);
    int left = 4;
    auto done = [&](int i) {
      return [&, i](const absl::Status& st) {
        absl::MutexLock l(&mu);
        codes[i] = st.code();
        --left;
      };
    };
    s->Write(Store::InsertJob(MakeJob(job)), done(0));
    s->Write(Store::UpsertOpResult(Result(job, "a", 0, Verdict::kPass, 1.0)), done(1));
    s->Write(Store::InsertItem(MakeItem("t", "dup", 1)), done(2));  // ALREADY_EXISTS
    s->Write(Store::UpsertOpResult(Result(job, "b", 1, Verdict::kFail, 0.5)), done(3));
    {
      absl::MutexLock l(&mu);
      mu.Await(absl::Condition(+[](int* n) { return *n == 0; }, &left));
    }
    EXPECT_EQ(codes, (std::vector<absl::StatusCode>{absl::StatusCode::kOk, absl::StatusCode::kOk,
                                                     absl::StatusCode::kAlreadyExists, absl::StatusCode::kOk}));
    EXPECT_EQ(*s->ListOpResultNames(job), (std::vector<std::string>{"a", "b"})) << job;
  }
}

// Items queued together (WriteItem: on PostgreSQL several to a statement) are stored exactly as
// one at a time, each with its own outcome: in a run of them, one whose key exists fails alone
// (the batch replayed one by one) and the others are stored.
TEST_P(StoreOnBothTest, ItemsQueuedTogetherAreStoredAsOneByOneAndAFailingOneFailsAlone) {
  auto s = Open();
  ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget))).ok());
  ASSERT_TRUE(s->WriteSync(Store::InsertItem(MakeItem("t", "dup", 1000))).ok());
  constexpr int kItems = 300;
  auto item = [](int i) {
    ItemRecord it = MakeItem("t", i == 150 ? "dup" : "op" + std::to_string(i), i);
    it.op_type = "Linear";
    it.dtype = DType::kFloat16;
    it.shape = {i, 3};
    it.byte_length = static_cast<uint64_t>(i) * 6;
    it.max = 1.0 / (i + 1);
    it.mean = -0.0;
    it.crc32 = 0xfffffff0u + static_cast<uint32_t>(i % 16);
    it.requires_grad = i % 2 == 0;
    if (i % 3 == 0) it.scalar_value = "v" + std::to_string(i);
    it.blob = i % 5 == 0 ? "" : std::string(64, static_cast<char>('a' + i % 6));
    if (i % 7 == 0) it.inline_data = std::make_shared<const std::string>(std::string(5, '\0') + "x");
    it.dtype_text = "torch.float16";
    it.in_run_golden = i % 11 == 0 ? "src" : "";
    return it;
  };
  absl::Mutex mu;
  std::vector<absl::StatusCode> codes(kItems, absl::StatusCode::kUnknown);
  int left = kItems;
  for (int i = 0; i < kItems; ++i) {
    s->WriteItem({"p", 100}, item(i), [&, i](const absl::Status& st) {
      absl::MutexLock l(&mu);
      codes[static_cast<size_t>(i)] = st.code();
      --left;
    });
  }
  {
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(+[](int* n) { return *n == 0; }, &left));
  }
  for (int i = 0; i < kItems; ++i) {
    EXPECT_EQ(codes[static_cast<size_t>(i)], i == 150 ? absl::StatusCode::kAlreadyExists : absl::StatusCode::kOk) << i;
  }
  absl::StatusOr<std::vector<ItemRecord>> items = s->ListItems("t");
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->size(), static_cast<size_t>(kItems));  // 299 new and the first "dup"
  // Each stored as InsertItem stores it alone (a second store's answers, field for field).
  if (!IsPostgresStore(path_)) {
    path_ += ".alone";
  } else {
    absl::StatusOr<std::string> uri = testing::NewPostgresDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status();
    path_ = *uri;
  }
  auto alone = Open();
  ASSERT_TRUE(alone->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget))).ok());
  ASSERT_TRUE(alone->WriteSync(Store::InsertItem(MakeItem("t", "dup", 1000))).ok());
  for (int i = 0; i < kItems; ++i) {
    if (i == 150) continue;
    ASSERT_TRUE(alone->WriteSync(Store::InsertItem(item(i))).ok()) << i;
  }
  uint64_t queries = 0;
  EXPECT_TRUE(CompareStoreAnswers(*s, *alone, &queries, nullptr).ok());
}

// A file written by schema version 3 (see tests/data/store_v3/README.md) keeps every job,
// result, culprit mark and golden-only row, and takes new jobs after the migration.
TEST_F(StoreTest, MigratesAVersion3File) {
  fs::copy_file(std::string(PARITY_SOURCE_DIR) + "/tests/data/store_v3/parity.db", dir_ / "p.db");
  auto s = Open();
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->IntegrityCheck().ok());
  int64_t total = 0;
  auto full = s->ListOpResults("job-50e13e8ce9f1af97", OpResultFilter(), 0, 100, &total);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_EQ(total, 17);
  EXPECT_EQ((*full)[0].name, "Functional.linear.0.forward.input.0");
  EXPECT_EQ((*full)[16].name, "Functional.softmax.0.forward.output.0");
  OpResultFilter fail;
  fail.verdicts = {static_cast<int>(Verdict::kFail)};
  fail.sort_metric = "Cosine";
  auto fails = s->ListOpResults("job-50e13e8ce9f1af97", fail, 0, 100, &total);
  ASSERT_TRUE(fails.ok());
  EXPECT_EQ(total, 5);
  EXPECT_EQ(*s->ListCulpritApis("job-50e13e8ce9f1af97"), std::vector<std::string>{"Functional.linear.1.forward"});
  auto out = s->GetOpResult("job-50e13e8ce9f1af97", "Functional.linear.1.forward.output.0");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->result.verdict, Verdict::kFail);
  EXPECT_EQ(out->culprit, CulpritStatus::kCulprit);
  EXPECT_EQ(out->index, 9);
  ASSERT_TRUE(out->result.Find("Cosine") != nullptr);

  auto trimmed = s->ListOpResults("job-687704dd542a398e", OpResultFilter(), 0, 100, &total);
  ASSERT_TRUE(trimmed.ok());
  ASSERT_EQ(total, 17);
  EXPECT_EQ((*trimmed)[15].name, "Functional.relu.0.forward.input.0");
  EXPECT_EQ((*trimmed)[15].index, kGoldenOnlyIndexBase + 4);
  EXPECT_EQ((*trimmed)[15].result.verdict, Verdict::kUnmatched);
  auto relu = s->GetOpResult("job-687704dd542a398e", "Functional.relu.0.forward.output.0");
  ASSERT_TRUE(relu.ok()) << relu.status();
  EXPECT_EQ(relu->index, kGoldenOnlyIndexBase + 5);

  // Items read back through two migrations (version 5 added read_error, empty for them).
  auto migrated_items = s->ListItems("run-5bdb3c6c249c6bf3");
  ASSERT_TRUE(migrated_items.ok()) << migrated_items.status();
  ASSERT_FALSE(migrated_items->empty());
  for (const ItemRecord& it : *migrated_items) EXPECT_EQ(it.read_error, "") << it.name;
  // Version 7 added inline data: none for migrated items, whose data is in the spool.
  for (const ItemRecord& it : *migrated_items) EXPECT_EQ(it.inline_data, nullptr) << it.name;
  // Version 6 indexes data items by CRC-32: a migrated item's length and CRC may be held by its
  // project, not by another, and not with another CRC.
  auto run = s->GetRun("run-5bdb3c6c249c6bf3");
  ASSERT_TRUE(run.ok()) << run.status();
  int probed = 0;
  for (const ItemRecord& it : *migrated_items) {
    if (it.blob.empty() || !it.crc32) continue;
    EXPECT_FALSE(s->BlobsMatching(run->project, it.byte_length, *it.crc32, 1)->empty()) << it.name;
    EXPECT_TRUE(s->BlobsMatching(run->project + "-other", it.byte_length, *it.crc32, 1)->empty());
    EXPECT_TRUE(s->BlobsMatching(run->project, it.byte_length, *it.crc32 ^ 0x80000000u, 1)->empty());
    ++probed;
  }
  EXPECT_GT(probed, 0);

  // A new job gets a fresh seq: its results do not mix with the migrated ones.
  JobRecord j = MakeJob("new");
  j.golden_run_id = "run-4b7aee3e20d11f8f";
  j.target_run_id = "run-5bdb3c6c249c6bf3";
  absl::Status inserted = s->WriteSync(Store::InsertJob(j));
  ASSERT_TRUE(inserted.ok()) << inserted;
  ASSERT_TRUE(s->WriteSync(Store::UpsertOpResult(Result("new", "x", 0, Verdict::kPass, 1.0))).ok());
  EXPECT_EQ(*s->ListOpResultNames("new"), std::vector<std::string>{"x"});
  ASSERT_TRUE(s->ListOpResults("job-687704dd542a398e", OpResultFilter(), 0, 100, &total).ok());
  EXPECT_EQ(total, 17);
}

TEST_P(StoreOnBothTest, InlineDataIsKeptWithItsItemUntilTheRunsDataIsReleased) {
  auto s = Open();
  ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget))).ok());
  const std::string bytes("\x00\x01\x00\xff small tensor", 18);  // embedded NULs survive
  ItemRecord small;
  small.run_id = "t";
  small.name = "small";
  small.dtype = DType::kUInt8;
  small.shape = {18};
  small.byte_length = bytes.size();
  small.blob = Spool::KeyOf(bytes);
  small.inline_data = std::make_shared<const std::string>(bytes);
  ASSERT_TRUE(s->WriteSync(Store::InsertItem(small)).ok());
  ItemRecord empty = small;  // a tensor of no elements has inline data of no bytes
  empty.name = "empty";
  empty.index = 1;
  empty.shape = {0};
  empty.byte_length = 0;
  empty.blob = Spool::KeyOf("");
  empty.inline_data = std::make_shared<const std::string>();
  ASSERT_TRUE(s->WriteSync(Store::InsertItem(empty)).ok());
  ItemRecord large = small;
  large.name = "large";
  large.index = 2;
  large.blob = std::string(64, 'a');
  large.inline_data = nullptr;
  ASSERT_TRUE(s->WriteSync(Store::InsertItem(large)).ok());

  auto items = s->ListItems("t");
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->size(), 3u);
  ASSERT_NE((*items)[0].inline_data, nullptr);
  EXPECT_EQ(*(*items)[0].inline_data, bytes);
  EXPECT_EQ((*items)[0].blob, Spool::KeyOf(bytes));
  ASSERT_NE((*items)[1].inline_data, nullptr) << "no bytes is not no data";
  EXPECT_EQ(*(*items)[1].inline_data, "");
  EXPECT_EQ((*items)[2].inline_data, nullptr);
  // Only spool blobs are kept by the spool's collection.
  EXPECT_EQ(*s->ReferencedBlobs(), std::vector<std::string>{std::string(64, 'a')});
  EXPECT_EQ(*s->ListRunsWithDataBefore(2000), std::vector<std::string>{});  // not complete

  ASSERT_TRUE(s->WriteSync(Store::ReleaseRunData("t")).ok());
  items = s->ListItems("t");
  ASSERT_TRUE(items.ok());
  for (const ItemRecord& it : *items) {
    EXPECT_EQ(it.inline_data, nullptr) << it.name;
    EXPECT_EQ(it.blob, "") << it.name;
  }
}

TEST_F(StoreTest, RefusesANewerSchema) {
  { auto s = Open(); }
  {
    auto db = OpenSqlite((dir_ / "p.db").string());
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec("PRAGMA user_version=99").ok());
  }
  StoreOptions o;
  o.path = (dir_ / "p.db").string();
  auto s = Store::Open(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("newer than this binary"), std::string::npos);
}

// A file of schema 7 holds version 1 result blobs (metric and golden names as strings); one of
// schema 8 may hold version 2 blobs too. Opened by this binary it is marked schema 9 (so that an
// older binary refuses the file once it holds version 3 blobs) and its old rows still list, sort
// and read as they did, next to new ones.
TEST_F(StoreTest, AnOlderFileKeepsItsVersion1And2ResultBlobs) {
  // Version 1 of a result with metrics Cosine 0.25 and "Mismatched elements" 3, golden name
  // "op0", policy msprobe.
  const std::string v1(
      "\x01" "\x02\x00"
      "\x06\x00\x00\x00" "Cosine" "\x00" "\x00\x00\x00\x00\x00\x00\xd0\x3f"
      "\x13\x00\x00\x00" "Mismatched elements" "\x01" "\x00\x00\x00\x00\x00\x00\x08\x40"
      "\x00\x00\x00\x00" "\x03\x00\x00\x00" "op0" "\x07\x00\x00\x00" "msprobe"
      "\x00\x00\x00\x00" "\x00\x00\x00\x00"
      "\x00" "\x00" "\x00\x00\x00\x00" "\x00\x00\x00\x00",
      94);
  // Version 2 of a result with metrics Cosine 0.5 and "Mismatched elements" 3, golden name the
  // row's, policy msprobe.
  const std::string v2(
      "\x02" "\x02\x00"
      "\x00" "\x00" "\x00\x00\x00\x00\x00\x00\xe0\x3f"
      "\x18" "\x01" "\x00\x00\x00\x00\x00\x00\x08\x40"
      "\x00\x00\x00\x00" "\x01" "\x07\x00\x00\x00" "msprobe"
      "\x00\x00\x00\x00" "\x00\x00\x00\x00"
      "\x00" "\x00" "\x00\x00\x00\x00" "\x00\x00\x00\x00",
      57);
  {
    auto s = Open();
    ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("g", Side::kGolden))).ok());
    ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget))).ok());
    ASSERT_TRUE(s->WriteSync(Store::InsertJob(MakeJob("j"))).ok());
    ASSERT_TRUE(s->WriteSync(Store::UpsertOpResult(Result("j", "op0", 0, Verdict::kFail, 0.5))).ok());
    ASSERT_TRUE(s->WriteSync(Store::UpsertOpResult(Result("j", "op2", 2, Verdict::kFail, 0.5))).ok());
  }
  {
    auto db = OpenSqlite((dir_ / "p.db").string());
    ASSERT_TRUE(db.ok());
    for (const auto& [name, blob] : {std::pair<const char*, const std::string*>{"op0", &v1}, {"op2", &v2}}) {
      auto st = db->Prepare("UPDATE op_results SET rec=? WHERE name=?");
      ASSERT_TRUE(st.ok());
      st->BindBlobStatic(1, *blob).Bind(2, name);
      ASSERT_TRUE(st->Run().ok());
    }
    ASSERT_TRUE(db->Exec("PRAGMA user_version=7").ok());
  }
  auto s = Open();
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->WriteSync(Store::UpsertOpResult(Result("j", "op1", 1, Verdict::kPass, 0.75))).ok());
  absl::StatusOr<OpResultRecord> old = s->GetOpResult("j", "op0");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->golden_name, "op0");
  EXPECT_EQ(old->result.policy, "msprobe");
  ASSERT_EQ(old->result.metrics.size(), 2u);
  EXPECT_EQ(old->result.metrics[0].value.number(), 0.25);
  EXPECT_EQ(old->result.metrics[1].value.integer(), 3);
  absl::StatusOr<OpResultRecord> v2_row = s->GetOpResult("j", "op2");
  ASSERT_TRUE(v2_row.ok()) << v2_row.status();
  EXPECT_EQ(v2_row->golden_name, "op2");
  ASSERT_EQ(v2_row->result.metrics.size(), 2u);
  EXPECT_EQ(v2_row->result.metrics[0].value.number(), 0.5);
  EXPECT_EQ(v2_row->result.metrics[1].value.integer(), 3);
  OpResultFilter f;
  f.sort_metric = "Cosine";
  int64_t total = 0;
  auto rows = s->ListOpResults("j", f, 0, 10, &total);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].name, "op0");  // 0.25 (version 1), 0.5 (version 2), then 0.75 (new)
  EXPECT_EQ((*rows)[1].name, "op2");
  EXPECT_EQ((*rows)[2].name, "op1");
  auto db = OpenSqlite((dir_ / "p.db").string());
  ASSERT_TRUE(db.ok());
  auto version = db->Prepare("PRAGMA user_version");
  ASSERT_TRUE(version.ok());
  ASSERT_TRUE(*version->Step());
  EXPECT_EQ(version->ColumnInt(0), 18);
  auto column = db->Prepare("SELECT count(*) FROM items WHERE in_run_golden = ''");  // version 17's column
  ASSERT_TRUE(column.ok()) << column.status();
  auto tombstones = db->Prepare("SELECT count(*) FROM blob_tombstones");  // version 18's table
  ASSERT_TRUE(tombstones.ok()) << tombstones.status();
  auto rec = db->Prepare("SELECT hex(substr(rec, 1, 1)) FROM op_results WHERE name='op1'");
  ASSERT_TRUE(rec.ok());
  ASSERT_TRUE(*rec->Step());
  EXPECT_EQ(rec->ColumnText(0), "04");  // the new row: version 4
  // Version 11: the dedup indexes leave out items whose data is in their row.
  auto idx = db->Prepare("SELECT count(*) FROM sqlite_master WHERE type='index' AND name IN "
                         "('items_by_crc', 'items_by_blob_prefix') AND sql LIKE '%AND data IS NULL'");
  ASSERT_TRUE(idx.ok());
  ASSERT_TRUE(*idx->Step());
  EXPECT_EQ(idx->ColumnInt(0), 2);
}

TEST_P(StoreOnBothTest, WritesQueuedBeforeCloseAreDurable) {
  {
    auto s = Open();
    ASSERT_TRUE(s->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget))).ok());
    for (int i = 0; i < 500; ++i) {
      ItemRecord it;
      it.run_id = "t";
      it.name = "i" + std::to_string(i);
      it.index = i;
      s->Write(Store::InsertItem(it), nullptr);
    }
    s->Close();
  }
  auto s = Open();
  EXPECT_EQ(s->ListItemNames("t")->size(), 500u);
}

// Holds the store's writer inside a write until Release(), so that the writes queued meanwhile
// wait for it together.
class HeldWriter {
 public:
  explicit HeldWriter(Store& s) {
    s.Write([this](Database&) {
      holding_.Notify();
      release_.WaitForNotification();
      return absl::OkStatus();
    }, nullptr);
    holding_.WaitForNotification();
  }
  ~HeldWriter() { Release(); }
  void Release() {
    if (!release_.HasBeenNotified()) release_.Notify();
  }

 private:
  absl::Notification holding_, release_;
};

// Writes of one share keep their order; the writer takes turns between shares, so a share with
// a long queue does not stand in front of another's writes; a share waits at its own limit while
// others still queue; a transaction holds at most max_batch_bytes of declared bytes.
TEST_P(StoreOnBothTest, SharesTakeTurnsAndEachHasItsOwnLimit) {
  StoreOptions o;
  o.path = path_;
  o.max_pending_writes = 1000;
  o.max_pending_writes_per_share = 300;
  absl::Mutex mu;
  int commits = 0;  // transactions committed so far
  std::vector<std::pair<std::string, int>> order;  // (share, transaction) as writes ran
  o.before_commit = [&] {
    absl::MutexLock l(&mu);
    ++commits;
    return absl::OkStatus();
  };
  auto opened = Store::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& s = **opened;
  HeldWriter held(s);  // until every write below is queued
  auto write = [&](const std::string& share, int i) {
    s.Write({share, 1}, [&, share, i](Database&) {
      absl::MutexLock l(&mu);
      order.push_back({share + std::to_string(i), commits});
      return absl::OkStatus();
    }, nullptr);
  };
  for (int i = 0; i < 300; ++i) write("flood", i);
  absl::Notification flood_301_queued;
  std::thread over([&] {
    write("flood", 300);  // waits: the share holds its 300
    flood_301_queued.Notify();
  });
  for (int i = 0; i < 3; ++i) write("good", i);  // the other share still queues
  EXPECT_FALSE(flood_301_queued.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  held.Release();
  over.join();
  s.Close();
  ASSERT_EQ(order.size(), 304u);
  std::map<std::string, size_t> at;
  std::map<int, int> per_transaction;
  for (size_t i = 0; i < order.size(); ++i) {
    at[order[i].first] = i;
    ++per_transaction[order[i].second];
  }
  // The good share's writes run in its first turn, after at most one turn (64) of the flood.
  EXPECT_LT(at["good2"], 64u + 3u);
  EXPECT_LT(at["good0"], at["good1"]);
  EXPECT_LT(at["good1"], at["good2"]);
  for (int i = 1; i <= 300; ++i) {
    EXPECT_LT(at["flood" + std::to_string(i - 1)], at["flood" + std::to_string(i)]) << i;
  }
  EXPECT_GT(per_transaction.size(), 1u);
}

// A transaction holds at most max_batch_bytes of its writes' declared bytes.
TEST_P(StoreOnBothTest, ATransactionIsBoundedByItsWritesBytes) {
  StoreOptions o;
  o.path = path_;
  o.max_batch_bytes = 10000;
  std::atomic<int> commits{0};
  o.before_commit = [&] {
    ++commits;
    return absl::OkStatus();
  };
  auto opened = Store::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& s = **opened;
  HeldWriter held(s);
  absl::Mutex mu;
  std::map<int, int> per_transaction;
  for (int i = 0; i < 50; ++i) {
    s.Write({"p", 1000}, [&](Database&) {
      absl::MutexLock l(&mu);
      ++per_transaction[commits.load()];
      return absl::OkStatus();
    }, nullptr);
  }
  held.Release();
  s.Close();
  int total = 0;
  for (const auto& [tx, writes] : per_transaction) {
    EXPECT_LE(writes, 10) << "transaction " << tx;
    total += writes;
  }
  EXPECT_EQ(total, 50);
}

// A barrier returns after every write queued before it, whichever share it belongs to (a write
// of the daemon's own share would take its turn before them).
TEST_P(StoreOnBothTest, ABarrierWaitsForTheWritesOfEveryShare) {
  StoreOptions o;
  o.path = path_;
  o.max_batch = 10;  // many transactions, so that the daemon's share would get an early turn
  auto opened = Store::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<Store> s = std::move(*opened);
  HeldWriter held(*s);
  std::atomic<int> ran{0};
  for (int i = 0; i < 400; ++i) {
    s->Write({i % 2 ? "a" : "b", 100}, [&](Database&) {
      ran++;
      return absl::OkStatus();
    }, nullptr);
  }
  int seen = -1;
  std::thread barrier([&] {
    EXPECT_TRUE(s->Barrier().ok());
    seen = ran.load();
  });
  held.Release();
  barrier.join();
  EXPECT_EQ(seen, 400);
}

TEST_F(StoreTest, SpoolDeduplicatesEnforcesQuotaAndCollects) {
  SpoolOptions o;
  o.dir = (dir_ / "spool").string();
  o.quota_bytes = 10;
  auto spool = Spool::Open(o);
  ASSERT_TRUE(spool.ok()) << spool.status();
  auto w = (*spool)->Create(4);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append("abcd", 4).ok());
  EXPECT_EQ((*w)->Append("x", 1).code(), absl::StatusCode::kOutOfRange);
  auto key = (*w)->Commit();
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*key, "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589");  // sha256("abcd")
  auto w2 = (*spool)->Create(4);
  ASSERT_TRUE((*w2)->Append("abcd", 4).ok());
  EXPECT_EQ(*(*w2)->Commit(), *key);
  EXPECT_EQ((*spool)->used_bytes(), 4u);  // stored once
  auto big = (*spool)->Create(7);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("parityd --spool-quota-bytes=10"), std::string::npos);
  {
    auto abandoned = (*spool)->Create(3);  // destroyed without Commit: nothing stays
    ASSERT_TRUE((*abandoned)->Append("zzz", 3).ok());
  }
  auto w3 = (*spool)->Create(2);
  ASSERT_TRUE((*w3)->Append("hi", 2).ok());
  auto key3 = (*w3)->Commit();
  ASSERT_TRUE(key3.ok());
  auto freed = (*spool)->Collect({*key}, 0);
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(*freed, 2u);
  EXPECT_TRUE((*spool)->Contains(*key));
  EXPECT_FALSE((*spool)->Contains(*key3));
}

// Blobs of at least unique_key_min_bytes get a fresh key each, even for the same content (kept
// twice, counted twice); smaller ones are still stored once per content. HashOf reads either
// kind back to its content's SHA-256, and names a bad or unknown key.
TEST_F(StoreTest, SpoolUniqueKeysKeepEachBlobAndHashItOnDemand) {
  SpoolOptions o;
  o.dir = (dir_ / "unique").string();
  o.unique_key_min_bytes = 4;
  auto spool = Spool::Open(o);
  ASSERT_TRUE(spool.ok()) << spool.status();
  EXPECT_TRUE((*spool)->KeysByContent(3));
  EXPECT_FALSE((*spool)->KeysByContent(4));
  auto put = [&](const std::string& bytes) {
    auto w = (*spool)->Create(bytes.size());
    EXPECT_TRUE(w.ok()) << w.status();
    if (!w.ok()) return std::string();
    EXPECT_TRUE((*w)->Append(bytes.data(), bytes.size()).ok());
    auto key = (*w)->Commit();
    EXPECT_TRUE(key.ok()) << key.status();
    return key.value_or("");
  };
  const std::string a = put("abcd"), b = put("abcd");
  EXPECT_TRUE(Spool::IsKey(a)) << a;
  EXPECT_TRUE(Spool::IsKey(b)) << b;
  EXPECT_NE(a, b);
  EXPECT_NE(a, Spool::KeyOf("abcd"));
  EXPECT_TRUE((*spool)->Contains(a) && (*spool)->Contains(b));
  EXPECT_EQ((*spool)->used_bytes(), 8u);
  EXPECT_EQ((*spool)->HashOf(a).value_or("?"), Spool::KeyOf("abcd"));
  EXPECT_EQ((*spool)->HashOf(b).value_or("?"), Spool::KeyOf("abcd"));
  EXPECT_EQ(put("abc"), Spool::KeyOf("abc"));
  EXPECT_EQ(put("abc"), Spool::KeyOf("abc"));
  EXPECT_EQ((*spool)->used_bytes(), 11u);
  EXPECT_EQ((*spool)->HashOf(Spool::KeyOf("abc")).value_or("?"), Spool::KeyOf("abc"));
  EXPECT_EQ((*spool)->HashOf("abcd").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*spool)->HashOf(std::string(64, '0')).status().code(), absl::StatusCode::kNotFound);
}

// Two spools under `dir`: "direct" writes every blob with O_DIRECT (where the file system
// allows: `*supported`), "buffered" none; both key blobs by content below 1 MiB.
void OpenDirectAndBufferedSpools(const std::filesystem::path& dir, std::unique_ptr<Spool>* direct,
                                 std::unique_ptr<Spool>* buffered, bool* supported) {
  SpoolOptions direct_o, buffered_o;
  direct_o.dir = (dir / "direct").string();
  direct_o.direct_min_bytes = 1;
  buffered_o.dir = (dir / "buffered").string();
  buffered_o.direct_min_bytes = 0;
  direct_o.unique_key_min_bytes = buffered_o.unique_key_min_bytes = 1 << 20;
  auto d = Spool::Open(direct_o);
  auto b = Spool::Open(buffered_o);
  ASSERT_TRUE(d.ok() && b.ok());
  *direct = std::move(*d);
  *buffered = std::move(*b);
  *supported = testing::DirectIoWorksIn(direct_o.dir);
}

// Blobs at or above direct_min_bytes go through the aligned staging buffer with O_DIRECT: whatever
// the sizes of the appends and of the blob (block and staging-buffer boundaries, and a tail
// padded to a block and cut back), the file holds exactly the bytes, and its key is the one a
// buffered write of the same content gets (below 1 MiB) or a unique one; an abandoned direct
// blob leaves nothing.
TEST_F(StoreTest, SpoolDirectWritesHoldExactlyTheBytes) {
  std::unique_ptr<Spool> direct, buffered;
  bool supported = false;
  ASSERT_NO_FATAL_FAILURE(OpenDirectAndBufferedSpools(dir_, &direct, &buffered, &supported));
  std::mt19937 rng(5);
  const uint64_t kStage = 1 << 20;  // the staging buffers (one per started MiB, at most four per blob)
  for (uint64_t size : {uint64_t{1}, uint64_t{4095}, uint64_t{4096}, uint64_t{4097}, kStage - 1,
                        kStage, kStage + 1, 2 * kStage + 4096 * 3 + 17,
                        9 * kStage + 4096 * 3 + 17}) {
    SCOPED_TRACE(size);
    std::string bytes(size, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    auto write = [&](Spool& s, bool expect_direct) -> std::string {
      auto w = s.Create(size);
      EXPECT_TRUE(w.ok()) << w.status();
      if (!w.ok()) return "";
      EXPECT_EQ((*w)->direct(), expect_direct);
      for (uint64_t off = 0; off < size;) {
        const uint64_t n = std::min<uint64_t>(size - off, 1 + rng() % (1 << 20));
        EXPECT_TRUE((*w)->Append(bytes.data() + off, n).ok());
        off += n;
      }
      auto key = (*w)->Commit();
      EXPECT_TRUE(key.ok()) << key.status();
      return key.ok() ? *key : "";
    };
    const std::string k1 = write(*direct, supported);
    const std::string k2 = write(*buffered, false);
    // Content keys below 1 MiB (unique_key_min_bytes here), unique ones from there on;
    // HashOf reads either back to the content's SHA-256.
    if (size < kStage) {
      EXPECT_EQ(k1, Spool::KeyOf(bytes));
      EXPECT_EQ(k2, k1);
    } else {
      EXPECT_TRUE(Spool::IsKey(k1)) << k1;
      EXPECT_NE(k1, k2);
    }
    EXPECT_EQ(direct->HashOf(k1).value_or("?"), Spool::KeyOf(bytes));
    EXPECT_EQ(buffered->HashOf(k2).value_or("?"), Spool::KeyOf(bytes));
    auto held = ReadFileShared(direct->PathOf(k1));
    ASSERT_TRUE(held.ok()) << held.status();
    EXPECT_EQ(held->bytes.size(), size);
    EXPECT_TRUE(held->bytes == bytes);
    auto read = ReadFileDirect(direct->PathOf(k1));
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_TRUE(read->bytes == bytes);
  }
  EXPECT_EQ(direct->used_bytes(), buffered->used_bytes());
  {
    auto abandoned = direct->Create(kStage + 5);
    ASSERT_TRUE(abandoned.ok());
    const std::string part(kStage + 1, 'x');  // one staged buffer already written out
    ASSERT_TRUE((*abandoned)->Append(part.data(), part.size()).ok());
  }
  size_t tmp_files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_ / "direct" / "tmp")) {
    (void)e;
    ++tmp_files;
  }
  EXPECT_EQ(tmp_files, 0u);
}

// A blob written from a source (parityd's held copy): its bytes are put there first and
// appended from there; an O_DIRECT blob is written straight from the source and takes no
// staging buffer, and every file holds exactly the blob's bytes, as through the stages. A piece
// appended from anywhere else is refused.
TEST_F(StoreTest, SpoolBlobsWrittenFromTheirSourceTakeNoStages) {
  std::unique_ptr<Spool> direct, buffered;
  bool supported = false;
  ASSERT_NO_FATAL_FAILURE(OpenDirectAndBufferedSpools(dir_, &direct, &buffered, &supported));
  std::mt19937 rng(11);
  const uint64_t kStage = 1 << 20;
  for (uint64_t size : {uint64_t{1}, uint64_t{4095}, uint64_t{4097}, kStage - 1, kStage, kStage + 1,
                        2 * kStage + 4096 * 3 + 17, 9 * kStage + 4096 * 3 + 17, 6 * kStage}) {
    SCOPED_TRACE(size);
    std::string bytes(size, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    for (Spool* spool : {direct.get(), buffered.get()}) {
      std::shared_ptr<char> source = TakePooledBuffer(size);
      ASSERT_NE(source, nullptr);
      std::memset(source.get(), 0x5a, PooledBufferCapacity(size));  // what a previous user left
      auto w = spool->Create(size, source);
      ASSERT_TRUE(w.ok()) << w.status();
      EXPECT_EQ((*w)->direct(), spool == direct.get() && supported);
      for (uint64_t off = 0; off < size;) {
        const uint64_t n = std::min<uint64_t>(size - off, 1 + rng() % (1 << 20));
        std::memcpy(source.get() + off, bytes.data() + off, n);
        if (off > 0) {
          const absl::Status elsewhere = (*w)->Append(bytes.data() + off, n);
          EXPECT_EQ(elsewhere.code(), absl::StatusCode::kFailedPrecondition) << elsewhere;
        }
        ASSERT_TRUE((*w)->Append(source.get() + off, n).ok());
        off += n;
      }
      source.reset();  // the writer keeps it until its writes are done
      auto key = (*w)->Commit();
      ASSERT_TRUE(key.ok()) << key.status();
      auto read = ReadFileShared(spool->PathOf(*key));
      ASSERT_TRUE(read.ok()) << read.status();
      EXPECT_EQ(read->bytes.size(), size);
      EXPECT_TRUE(read->bytes == bytes);
    }
  }
  EXPECT_EQ(direct->stages_high_water(), 0u);
  EXPECT_EQ(direct->used_bytes(), buffered->used_bytes());
}

// O_DIRECT blobs of many stages written at once from several threads (their stages interleaved
// in the I/O queue, two and three I/O threads writing them), keyed by content and by unique
// keys: every content key is still the SHA-256 of exactly that blob's bytes, and every file
// holds exactly them.
TEST_F(StoreTest, SpoolDirectBlobsWrittenAtOnceKeepTheirOwnBytes) {
  for (uint64_t unique_min : {uint64_t{0}, uint64_t{1} << 20}) {
  for (int io_threads : {2, 3}) {
    SCOPED_TRACE(io_threads);
    SCOPED_TRACE(unique_min);
    SpoolOptions o;
    o.dir = (dir_ / ("concurrent" + std::to_string(io_threads) + "-" + std::to_string(unique_min))).string();
    o.direct_min_bytes = 1;
    o.io_threads = io_threads;
    o.unique_key_min_bytes = unique_min;
    auto spool = Spool::Open(o);
    ASSERT_TRUE(spool.ok()) << spool.status();
    const bool supported = testing::DirectIoWorksIn(o.dir);
    constexpr int kWriters = 4, kBlobs = 3;
    std::vector<std::string> bytes(kWriters * kBlobs), keys(kWriters * kBlobs), errors(kWriters);
    std::mt19937 rng(11);
    for (std::string& b : bytes) {
      b.resize((5 << 20) + rng() % (1 << 20));
      for (char& c : b) c = static_cast<char>(rng());
    }
    std::vector<std::thread> writers;
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&, t] {
        std::mt19937 pieces(t);
        for (int i = t * kBlobs; i < (t + 1) * kBlobs; ++i) {
          auto w = (*spool)->Create(bytes[i].size());
          if (!w.ok()) {
            errors[t] = std::string(w.status().message());
            return;
          }
          if ((*w)->direct() != supported) errors[t] = "direct() is not what the file system allows";
          for (size_t off = 0; off < bytes[i].size();) {
            const size_t n = std::min<size_t>(bytes[i].size() - off, 1 + pieces() % (300 << 10));
            if (absl::Status s = (*w)->Append(bytes[i].data() + off, n); !s.ok()) {
              errors[t] = std::string(s.message());
              return;
            }
            off += n;
          }
          auto key = (*w)->Commit();
          if (!key.ok()) {
            errors[t] = std::string(key.status().message());
            return;
          }
          keys[i] = *key;
        }
      });
    }
    for (std::thread& t : writers) t.join();
    for (const std::string& e : errors) EXPECT_EQ(e, "");
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (unique_min == 0) {
        EXPECT_EQ(keys[i], Spool::KeyOf(bytes[i])) << i;
      }
      auto held = ReadFileShared((*spool)->PathOf(keys[i]));
      ASSERT_TRUE(held.ok()) << held.status();
      EXPECT_TRUE(held->bytes == bytes[i]) << i;
    }
  }
  }
}

// A direct blob's blocks are allocated when it is created, its padded tail included, so that its
// stage writes neither extend the file nor allocate (ext4 then writes a blob's stages side by
// side); Commit cuts the file back to the blob's size. A file system without O_DIRECT gets a
// buffered blob, with nothing allocated ahead.
TEST_F(StoreTest, SpoolDirectBlobsAreAllocatedWhenCreated) {
  SpoolOptions o;
  o.dir = (dir_ / "spool").string();
  o.direct_min_bytes = 1;
  auto spool = Spool::Open(o);
  ASSERT_TRUE(spool.ok());
  const bool direct = testing::DirectIoWorksIn(o.dir);
  const uint64_t size = (3 << 20) + 5;
  const uint64_t padded = (size + 4095) / 4096 * 4096;
  auto w = (*spool)->Create(size);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ((*w)->direct(), direct);
  std::vector<std::filesystem::path> tmp;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(o.dir) / "tmp")) tmp.push_back(e.path());
  ASSERT_EQ(tmp.size(), 1u);
  struct stat st;
  ASSERT_EQ(::stat(tmp[0].c_str(), &st), 0);
  if (direct) {
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), padded);
    EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, padded);
  } else {
    EXPECT_EQ(st.st_size, 0);
  }
  std::string bytes(size, '\0');
  std::mt19937 rng(17);
  for (char& c : bytes) c = static_cast<char>(rng());
  ASSERT_TRUE((*w)->Append(bytes.data(), bytes.size()).ok());
  auto key = (*w)->Commit();
  ASSERT_TRUE(key.ok()) << key.status();
  auto read = ReadFileShared((*spool)->PathOf(*key));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->bytes.size(), size);
  EXPECT_TRUE(read->bytes == bytes);
}

// Seal hands a direct blob's last, partial stage to the disk without waiting: its writes finish
// on their own (WritesDone; the temp file then holds every byte, padded to a block, before
// Commit), no byte may be appended after it, and Commit gives the same key and content as a
// blob committed at once. A buffered blob has nothing in flight.
TEST_F(StoreTest, SpoolSealedBlobsFinishTheirWritesBeforeCommit) {
  SpoolOptions o;
  o.dir = (dir_ / "sealed").string();
  o.direct_min_bytes = 1;
  auto spool = Spool::Open(o);
  ASSERT_TRUE(spool.ok());
  const bool direct = testing::DirectIoWorksIn(o.dir);  // tmpfs refuses O_DIRECT: a buffered blob then
  const uint64_t size = 2 * (1 << 20) + 4096 + 100;  // two whole stages and a partial one
  std::string bytes(size, '\0');
  std::mt19937 rng(11);
  for (char& c : bytes) c = static_cast<char>(rng());
  auto w = (*spool)->Create(size);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ((*w)->direct(), direct);
  ASSERT_TRUE((*w)->Append(bytes.data(), bytes.size()).ok());
  ASSERT_TRUE((*w)->Seal().ok());
  const absl::Status late = (*w)->Append("x", 1);
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  for (int i = 0; i < 1000 && !(*w)->WritesDone(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE((*w)->WritesDone());
  // The temp file holds every byte before Commit: its content, not its size (a direct blob's
  // file has its padded size from Create on, its blocks allocated up front).
  std::vector<std::filesystem::path> tmp;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(o.dir) / "tmp")) tmp.push_back(e.path());
  ASSERT_EQ(tmp.size(), 1u);
  EXPECT_EQ(std::filesystem::file_size(tmp[0]), direct ? (size + 4095) / 4096 * 4096 : size);
  auto staged = ReadFileShared(tmp[0].string());
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_TRUE(staged->bytes.substr(0, size) == bytes) << "Seal left bytes unwritten";
  auto key = (*w)->Commit();
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ((*spool)->HashOf(*key).value_or("?"), Spool::KeyOf(bytes));
  auto read = ReadFileDirect((*spool)->PathOf(*key));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->bytes == bytes);

  SpoolOptions b = o;
  b.dir = (dir_ / "sealed-buffered").string();
  b.direct_min_bytes = 0;
  auto buffered = Spool::Open(b);
  ASSERT_TRUE(buffered.ok());
  auto bw = (*buffered)->Create(3);
  ASSERT_TRUE(bw.ok());
  ASSERT_TRUE((*bw)->Append("abc", 3).ok());
  ASSERT_TRUE((*bw)->Seal().ok());
  EXPECT_TRUE((*bw)->WritesDone());
  EXPECT_FALSE((*bw)->Append("d", 1).ok());
  auto bkey = (*bw)->Commit();
  ASSERT_TRUE(bkey.ok());
  EXPECT_EQ(*bkey, Spool::KeyOf("abc"));
}

// O_DIRECT staging buffers are bounded over all blobs (SpoolOptions::stage_bytes): a blob takes
// stages only within the budget (one that finds none is written through the page cache, not
// given a first stage regardless), and a blob whose last byte went to the I/O threads gives its
// stages back as their writes end, before Commit (a pending blob that kept four until committed
// would hold 9 blobs per stream, 1.1 GiB at 64 streams).
TEST_F(StoreTest, SpoolStagesStayWithinTheirBudget) {
  SpoolOptions o;
  o.dir = (dir_ / "stages").string();
  o.direct_min_bytes = 1;
  o.stage_bytes = 4 << 20;  // four stages
  auto spool = Spool::Open(o);
  ASSERT_TRUE(spool.ok());
  const bool direct = testing::DirectIoWorksIn(o.dir);
  auto blob = [](int seed) {
    std::string bytes((8 << 20) + 777, '\0');
    std::mt19937 rng(seed);
    for (char& c : bytes) c = static_cast<char>(rng());
    return bytes;
  };
  // A sealed blob's stages come back once written: the next blob gets all four again.
  const std::string a = blob(1);
  auto wa = (*spool)->Create(a.size());
  ASSERT_TRUE(wa.ok());
  ASSERT_TRUE((*wa)->Append(a.data(), a.size()).ok());
  ASSERT_TRUE((*wa)->Seal().ok());
  for (int i = 0; i < 1000 && !(*wa)->WritesDone(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE((*wa)->WritesDone());
  EXPECT_EQ((*spool)->stages_high_water(), direct ? 4u : 0u);
  auto wb = (*spool)->Create(a.size());
  ASSERT_TRUE(wb.ok());
  EXPECT_EQ((*spool)->stages_high_water(), direct ? 4u : 0u) << "the sealed blob kept its stages";
  // Three more blobs at once: the budget is taken, so each is written through the page cache.
  std::vector<std::string> more = {blob(2), blob(3), blob(4)};
  std::vector<std::unique_ptr<Spool::Writer>> ws;
  for (const std::string& m : more) {
    auto w = (*spool)->Create(m.size());
    ASSERT_TRUE(w.ok());
    ws.push_back(std::move(*w));
  }
  EXPECT_EQ((*spool)->stages_high_water(), direct ? 4u : 0u);
  EXPECT_EQ((*spool)->blobs_past_stage_budget(), direct ? 3u : 0u);
  // Interleaved appends of 300 KiB.
  for (size_t off = 0; off < more[0].size(); off += 300 << 10) {
    for (size_t i = 0; i < ws.size(); ++i) {
      const size_t n = std::min<size_t>(300 << 10, more[i].size() - off);
      ASSERT_TRUE(ws[i]->Append(more[i].data() + off, n).ok());
    }
  }
  ASSERT_TRUE((*wb)->Append(a.data(), a.size()).ok());
  std::vector<std::string> keys;
  for (auto* w : {&*wa, &*wb}) {
    auto key = (*w)->Commit();
    ASSERT_TRUE(key.ok()) << key.status();
    keys.push_back(*key);
  }
  for (auto& w : ws) {
    auto key = w->Commit();
    ASSERT_TRUE(key.ok()) << key.status();
    keys.push_back(*key);
  }
  EXPECT_EQ((*spool)->stages_high_water(), direct ? 4u : 0u);
  // With the stages back, the next blob is staged again.
  auto wc = (*spool)->Create(a.size());
  ASSERT_TRUE(wc.ok());
  ASSERT_TRUE((*wc)->Append(a.data(), a.size()).ok());
  auto kc = (*wc)->Commit();
  ASSERT_TRUE(kc.ok()) << kc.status();
  keys.push_back(*kc);
  EXPECT_EQ((*spool)->stages_high_water(), direct ? 4u : 0u);
  EXPECT_EQ((*spool)->blobs_past_stage_budget(), direct ? 3u : 0u);
  const std::vector<const std::string*> want = {&a, &a, &more[0], &more[1], &more[2], &a};
  for (size_t i = 0; i < keys.size(); ++i) {
    auto read = ReadFileDirect((*spool)->PathOf(keys[i]));
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_TRUE(read->bytes == *want[i]) << i;
  }
}

// A write the I/O threads fail (here: past RLIMIT_FSIZE, EFBIG), from a stage or from a source,
// comes back from Append or Commit as an error naming the file, nothing is committed, and the
// abandoned blob leaves nothing.
TEST_F(StoreTest, SpoolDirectWriteErrorsReachTheWriter) {
  SpoolOptions o;
  o.dir = (dir_ / "spool").string();
  o.direct_min_bytes = 1;
  auto spool = Spool::Open(o);
  ASSERT_TRUE(spool.ok());
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  void (*old_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 3 << 20;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  // Through the stages, and from a source (a held blob's copy).
  absl::Status failed[2];
  for (int from_source = 0; from_source < 2; ++from_source) {
    const std::string mib(1 << 20, 'q');
    std::shared_ptr<char> source = from_source ? TakePooledBuffer(8 << 20) : nullptr;
    auto w = (*spool)->Create(8 << 20, source);
    ASSERT_TRUE(w.ok());
    absl::Status& f = failed[from_source];
    for (int i = 0; i < 8 && f.ok(); ++i) {
      const char* piece = mib.data();
      if (source != nullptr) piece = static_cast<char*>(std::memcpy(source.get() + (i << 20), mib.data(), mib.size()));
      f = (*w)->Append(piece, mib.size());
    }
    if (f.ok()) f = (*w)->Commit().status();
  }
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  std::signal(SIGXFSZ, old_handler);
  for (const absl::Status& f : failed) {
    EXPECT_FALSE(f.ok());
    EXPECT_NE(f.message().find("cannot write"), std::string::npos) << f;
  }
  EXPECT_EQ((*spool)->used_bytes(), 0u);
  size_t files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(o.dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 0u);
}

// group_sync: Commit puts the blob in place without fsync; SyncPending makes every blob
// committed since the last sync durable with one syncfs, and only then; a failed sync is retried.
TEST_F(StoreTest, SpoolGroupSyncDefersDurabilityToSyncPending) {
  auto commit = [](Spool& s, const std::string& bytes) {
    auto w = s.Create(bytes.size());
    EXPECT_TRUE(w.ok());
    EXPECT_TRUE((*w)->Append(bytes.data(), bytes.size()).ok());
    auto key = (*w)->Commit();
    EXPECT_TRUE(key.ok()) << key.status();
    return key.ok() ? *key : "";
  };
  {
    SpoolOptions o;
    o.dir = (dir_ / "each").string();
    o.fsync = true;
    o.group_sync = false;
    auto spool = Spool::Open(o);
    ASSERT_TRUE(spool.ok());
    commit(**spool, "abcd");
    EXPECT_TRUE((*spool)->SyncPending().ok());
    EXPECT_EQ((*spool)->syncs(), 0u);  // each Commit synced its own blob
  }
  SpoolOptions o;
  o.dir = (dir_ / "group").string();
  o.fsync = true;
  o.group_sync = true;
  auto spool = Spool::Open(o);
  ASSERT_TRUE(spool.ok());
  Spool& s = **spool;
  EXPECT_TRUE(s.SyncPending().ok());
  EXPECT_EQ(s.syncs(), 0u);  // nothing committed
  const std::string a = commit(s, "abcd"), b = commit(s, "efgh");
  EXPECT_TRUE(s.Contains(a));  // in place at once
  EXPECT_TRUE(s.Contains(b));
  EXPECT_EQ(s.syncs(), 0u);
  EXPECT_TRUE(s.SyncPending().ok());
  EXPECT_EQ(s.syncs(), 1u);  // one sync for both
  EXPECT_TRUE(s.SyncPending().ok());
  EXPECT_EQ(s.syncs(), 1u);
  EXPECT_EQ(commit(s, "abcd"), a);  // the same content again still asks for a sync
  // A sync that fails keeps the blobs pending: the spool directory moved away, then back.
  fs::rename(o.dir, o.dir + ".away");
  const absl::Status failed = s.SyncPending();
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("group"), std::string::npos) << failed;
  fs::rename(o.dir + ".away", o.dir);
  EXPECT_TRUE(s.SyncPending().ok());
  EXPECT_EQ(s.syncs(), 2u);
}

// StoreOptions::before_commit runs before each transaction commits; its error fails the batch.
TEST_P(StoreOnBothTest, BeforeCommitRunsFirstAndItsErrorFailsTheBatch) {
  int calls = 0;
  bool fail = false;
  StoreOptions o;
  o.path = path_;
  o.before_commit = [&] {
    ++calls;
    return fail ? absl::InternalError("disk sync failed") : absl::OkStatus();
  };
  auto s = Store::Open(o);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->WriteSync(Store::InsertRun(MakeRun("g", Side::kGolden))).ok());
  EXPECT_GE(calls, 1);
  fail = true;
  const int before = calls;
  const absl::Status st = (*s)->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget)));
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(st.message(), "disk sync failed");
  EXPECT_EQ(calls, before + 1);
  EXPECT_EQ((*s)->GetRun("t").status().code(), absl::StatusCode::kNotFound);  // rolled back
  fail = false;
  ASSERT_TRUE((*s)->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget))).ok());
  EXPECT_TRUE((*s)->GetRun("t").ok());
}

TEST_F(StoreTest, ReadOnlyDataDirectoryIsRefusedClearly) {
  if (::geteuid() == 0) {
    // root ignores directory permissions; use a path below a regular file instead.
    std::ofstream(dir_ / "file") << "x";
    SpoolOptions o;
    o.dir = (dir_ / "file" / "spool").string();
    auto s = Spool::Open(o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
    return;
  }
  fs::create_directories(dir_ / "ro");
  fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  SpoolOptions o;
  o.dir = (dir_ / "ro" / "spool").string();
  auto s = Spool::Open(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  fs::permissions(dir_ / "ro", fs::perms::owner_all);
}

// Every count of a name among this process's threads (/proc/self/task/*/comm).
std::map<std::string, int> ThreadNames() {
  std::map<std::string, int> names;
  for (const auto& task : fs::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "comm");
    std::string name;
    if (std::getline(in, name)) names[name]++;
  }
  return names;
}

TEST_F(StoreTest, LongLivedThreadsCarryTheirRoleAsNameInTheirNumber) {
  std::map<std::string, int> before = ThreadNames();
  SpoolOptions so;
  so.dir = (dir_ / "spool").string();
  auto spool = Spool::Open(so);
  ASSERT_TRUE(spool.ok()) << spool.status();
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  std::map<std::string, int> after;
  for (int i = 0; i < 500; ++i) {  // a thread names itself when it starts running
    after = ThreadNames();
    if (after["spool-io"] == before["spool-io"] + 2 && after["store-writer"] == before["store-writer"] + 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(after["spool-io"] - before["spool-io"], 2);
  EXPECT_EQ(after["store-writer"] - before["store-writer"], 1);

  // SpoolOptions::io_threads sets how many write stages.
  so.dir = (dir_ / "spool3").string();
  so.io_threads = 3;
  auto spool3 = Spool::Open(so);
  ASSERT_TRUE(spool3.ok()) << spool3.status();
  for (int i = 0; i < 500 && ThreadNames()["spool-io"] != after["spool-io"] + 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(ThreadNames()["spool-io"] - after["spool-io"], 3);

  // Linux keeps 15 bytes of a name.
  std::thread([] {
    NameCurrentThread("a-name-longer-than-fifteen-bytes");
    EXPECT_EQ(CurrentThreadName(), "a-name-longer-t");
    NameCurrentThread("short");
    EXPECT_EQ(CurrentThreadName(), "short");
  }).join();
}

// An SQLite store migrated to PostgreSQL (MigrateStore, the work of `parity admin
// migrate-store`): every table's rows copied, the same answers; then a one-bit change to a
// copied row is found by the verification, as is a changed result.
TEST_F(StoreTest, AMigratedStoreAnswersAlikeAndTheVerificationFindsAnyDifference) {
  const fs::path data = dir_ / "data";
  fs::create_directories(data);
  path_ = (data / "parity.db").string();
  {
    auto s = Open();
    ASSERT_NE(s, nullptr);
    RunRecord g = MakeRun("g", Side::kGolden), t = MakeRun("t", Side::kTarget);
    g.labels["branch"] = "main";
    ASSERT_TRUE(s->WriteSync(Store::InsertRun(g)).ok());
    ASSERT_TRUE(s->WriteSync(Store::InsertRun(t)).ok());
    for (int i = 0; i < 600; ++i) {  // more rows than one insert statement takes
      for (const char* run : {"g", "t"}) {
        ItemRecord it = MakeItem(run, "op" + std::to_string(i), i);
        it.dtype = DType::kFloat32;
        it.shape = {2, i};
        it.max = 1.0 / (i + 3);  // not a short decimal: copied by its bits
        it.crc32 = 0xdeadbeefu - static_cast<uint32_t>(i);
        it.inline_data = std::make_shared<const std::string>(std::string(8, static_cast<char>(i)) + '\0');
        ASSERT_TRUE(s->WriteSync(Store::InsertItem(it)).ok());
      }
    }
    ASSERT_TRUE(s->WriteSync(Store::InsertJob(MakeJob("j"))).ok());
    for (int i = 0; i < 600; ++i) {
      ASSERT_TRUE(s->WriteSync(Store::UpsertOpResult(Result("j", "op" + std::to_string(i), i,
                                                            i % 7 ? Verdict::kPass : Verdict::kFail, 1.0 - i * 1e-4))).ok());
    }
  }
  absl::StatusOr<std::string> uri = testing::NewPostgresDatabase();
  ASSERT_TRUE(uri.ok()) << uri.status();
  MigrateStoreOptions o;
  o.from_dir = data.string();
  o.to_store = *uri;
  absl::StatusOr<MigrateStoreReport> r = MigrateStore(o);
  ASSERT_TRUE(r.ok()) << r.status();
  std::map<std::string, uint64_t> rows;
  for (const auto& t : r->tables) rows[t.name] = t.rows;
  EXPECT_EQ(rows["runs"], 2u);
  EXPECT_EQ(rows["run_labels"], 3u);
  EXPECT_EQ(rows["items"], 1200u);
  EXPECT_EQ(rows["op_results"], 600u);
  EXPECT_EQ(r->tables_checked, r->tables.size());
  EXPECT_EQ(r->queries_checked, 3u + 2u + 3u);
  // A second migration into it is refused.
  EXPECT_EQ(MigrateStore(o).status().code(), absl::StatusCode::kFailedPrecondition);

  auto source = Open();
  path_ = *uri;
  auto dest = Open();
  ASSERT_TRUE(source && dest);
  uint64_t queries = 0;
  EXPECT_TRUE(CompareStoreAnswers(*source, *dest, &queries, nullptr).ok());
  absl::StatusOr<Database> pg = RawDb();
  ASSERT_TRUE(pg.ok()) << pg.status();
  // One bit of one item's inline data.
  ASSERT_TRUE(pg->Exec("UPDATE items SET data = set_byte(data, 0, 4) WHERE run_id='t' AND idx=5").ok());
  absl::Status s = CompareStoreAnswers(*source, *dest, &queries, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("the items of run t"), std::string::npos) << s;
  ASSERT_TRUE(pg->Exec("UPDATE items SET data = set_byte(data, 0, 5) WHERE run_id='t' AND idx=5").ok());
  EXPECT_TRUE(CompareStoreAnswers(*source, *dest, &queries, nullptr).ok());
  ASSERT_TRUE(pg->Exec("UPDATE op_results SET verdict=3 WHERE name='op9'").ok());
  s = CompareStoreAnswers(*source, *dest, &queries, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("the results of job j"), std::string::npos) << s;
}

// Job leases on one PostgreSQL database shared by two stores (two daemons): one holder at a time,
// renewals keep a lease, an expired lease goes to whoever asks, a released one at once; jobs no
// live lease covers are the orphans. SQLite refuses leases (one daemon holds its file).
TEST_F(StoreTest, JobLeasesGiveEachJobOneHolderAndFreeExpiredOnes) {
  {
    auto lite = Open();
    ASSERT_NE(lite, nullptr);
    EXPECT_EQ(lite->TakeJobLease("j", "d-a", 1000).status().code(), absl::StatusCode::kFailedPrecondition);
  }
  absl::StatusOr<std::string> uri = testing::NewPostgresDatabase();
  ASSERT_TRUE(uri.ok()) << uri.status();
  path_ = *uri;
  auto a = Open(), b = Open();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->WriteSync(Store::InsertRun(MakeRun("g", Side::kGolden))).ok());
  ASSERT_TRUE(a->WriteSync(Store::InsertRun(MakeRun("t", Side::kTarget))).ok());
  for (const char* id : {"j1", "j2", "j3"}) ASSERT_TRUE(a->WriteSync(Store::InsertJob(MakeJob(id))).ok());
  ASSERT_TRUE(a->WriteSync(Store::InsertJob(MakeJob("done", JobState::kDone))).ok());
  auto orphans = [&] {
    std::vector<std::string> ids;
    absl::StatusOr<std::vector<JobRecord>> jobs = b->OrphanedJobs();
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    if (jobs.ok()) {
      for (const JobRecord& j : *jobs) ids.push_back(j.job_id);
    }
    return ids;
  };
  EXPECT_EQ(orphans(), (std::vector<std::string>{"j1", "j2", "j3"}));  // never leased; "done" is final
  EXPECT_TRUE(*a->TakeJobLease("j1", "d-a", 60000));
  EXPECT_TRUE(*a->TakeJobLease("j2", "d-a", 300));
  EXPECT_FALSE(*b->TakeJobLease("j1", "d-b", 60000));   // a holds it
  EXPECT_TRUE(*a->TakeJobLease("j1", "d-a", 60000));    // a holder takes its own again
  EXPECT_EQ(orphans(), (std::vector<std::string>{"j3"}));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // j2's lease expires
  EXPECT_EQ(orphans(), (std::vector<std::string>{"j2", "j3"}));
  EXPECT_TRUE(*b->TakeJobLease("j2", "d-b", 60000));
  // a's renewal covers what it still holds: j2 is b's now.
  absl::StatusOr<std::vector<std::string>> held = a->RenewJobLeases("d-a", 60000);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(*held, std::vector<std::string>{"j1"});
  EXPECT_TRUE(b->ReleaseJobLease("j1", "d-b").ok());  // not b's: no effect
  EXPECT_FALSE(*b->TakeJobLease("j1", "d-b", 60000));
  EXPECT_TRUE(a->ReleaseJobLease("j1", "d-a").ok());
  EXPECT_TRUE(*b->TakeJobLease("j1", "d-b", 60000));  // released: free at once
  EXPECT_EQ(orphans(), (std::vector<std::string>{"j3"}));
}

// Daemons started together on one PostgreSQL database create its tables once (the migration holds
// an advisory lock); a database marked with a newer schema is refused, as a newer SQLite file is.
TEST_F(StoreTest, PostgresMigratesOnceAndRefusesANewerSchema) {
  absl::StatusOr<std::string> uri = testing::NewPostgresDatabase();
  ASSERT_TRUE(uri.ok()) << uri.status();
  path_ = *uri;
  std::vector<absl::StatusOr<std::unique_ptr<Store>>> opened(4);
  {
    std::vector<std::thread> threads;
    for (auto& o : opened) {
      threads.emplace_back([&o, this] {
        StoreOptions so;
        so.path = path_;
        o = Store::Open(so);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  for (auto& o : opened) ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_TRUE((*opened[0])->WriteSync(Store::InsertRun(MakeRun("r1", Side::kGolden))).ok());
  EXPECT_TRUE((*opened[3])->GetRun("r1").ok());  // one database, seen by every store
  opened.clear();
  {
    absl::StatusOr<Database> db = RawDb();
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE(db->Exec("UPDATE parity_schema SET version=version+1").ok());
  }
  StoreOptions so;
  so.path = path_;
  absl::StatusOr<std::unique_ptr<Store>> newer = Store::Open(so);
  EXPECT_EQ(newer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(newer.status().message().find("is newer than this binary"), std::string::npos) << newer.status();
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreOnBothTest, ::testing::Values(SqlDialect::kSqlite, SqlDialect::kPostgres),
                         [](const ::testing::TestParamInfo<SqlDialect>& p) {
                           return p.param == SqlDialect::kSqlite ? "Sqlite" : "Postgres";
                         });

}  // namespace
}  // namespace parity
