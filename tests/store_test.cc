// The SQLite store and the spool, on real files.
#include "server/storage/store.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "server/storage/spool.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("parity_store_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::unique_ptr<Store> Open() {
    StoreOptions o;
    o.path = (dir_ / "p.db").string();
    auto s = Store::Open(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  fs::path dir_;
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

TEST_F(StoreTest, PersistsAcrossReopenAndAnswersQueries) {
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
    ASSERT_TRUE(s->WriteSync(Store::SetCulprits("j", {{"op3", CulpritStatus::kCulprit}})).ok());
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
  ASSERT_EQ(items->size(), 1u);
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

TEST_F(StoreTest, RefusesANewerSchema) {
  { auto s = Open(); }
  {
    auto db = Database::Open((dir_ / "p.db").string());
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

TEST_F(StoreTest, WritesQueuedBeforeCloseAreDurable) {
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
  EXPECT_NE(big.status().message().find("spool_quota_bytes=10"), std::string::npos);
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

}  // namespace
}  // namespace parity
