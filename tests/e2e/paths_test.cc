// One answer everywhere: the same dump pair, compared with the same policy, gives the same item
// documents (names, verdicts, metrics, culprit marks, each side's dtype, shape and statistics),
// culprits and msprobe CSV (byte for byte, `compare --csv` against `export --format csv`) through
// every path — `parity compare`, `parity-agent upload` of the
// target against an uploaded golden run, `parity-agent upload-pair`, and `parity submit` of the
// two stored runs — against one real parityd.
#include <sys/wait.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/base/file_util.h"
#include "common/base/json.h"
#include "common/base/tensor.h"
#include "common/formats/npy.h"
#include "common/formats/safetensors.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using testing::Daemon;

// What every path must agree on: each row's whole item document (names, verdict, metrics,
// culprit status, each side's dtype, shape and statistics) by item name, and the culprits.
struct Answer {
  std::map<std::string, std::string> items;  // item name -> its item document
  std::vector<std::string> culprits;
  std::string first_culprit;  // the one summaries report ("" when none)
  std::string Describe() const {
    std::string s;
    for (const auto& [n, doc] : items) s += n + ": " + doc + "\n";
    s += "culprits:";
    for (const std::string& c : culprits) s += " " + c;
    return s + "\nfirst culprit: " + first_culprit;
  }
  void Add(const Json& items_array) {
    for (const Json& it : items_array.as_array()) items[it.Find("name")->as_string()] = it.Dump();
  }
  // "" when `other` agrees; else the items that differ (both documents) and the culprits.
  std::string DifferencesFrom(const Answer& other) const {
    std::string s;
    for (const auto& [n, doc] : items) {
      auto it = other.items.find(n);
      if (it == other.items.end()) {
        s += n + ": missing there\n";
      } else if (it->second != doc) {
        s += n + ":\n  here:  " + doc + "\n  there: " + it->second + "\n";
      }
    }
    for (const auto& [n, doc] : other.items) {
      if (!items.count(n)) s += n + ": only there\n";
    }
    if (culprits != other.culprits) s += "the culprits differ\n";
    if (first_culprit != other.first_culprit) {
      s += "the first culprit differs: " + first_culprit + " here, " + other.first_culprit + " there\n";
    }
    return s;
  }
  std::string VerdictOf(const std::string& name) const {
    absl::StatusOr<Json> j = ParseJson(items.at(name));
    return j.ok() ? j->Find("verdict")->as_string() : "";
  }
};

// A summary document's "first_culprit" ("" for null).
std::string FirstCulpritOf(const Json& summary) {
  const Json* f = summary.Find("first_culprit");
  return f != nullptr && f->is_string() ? f->as_string() : "";
}

class PathsTest : public testing::ScratchTest {
 protected:
  void SetUp() override {
    ScratchTest::SetUp();
    daemon_ = std::make_unique<Daemon>(dir_ / "daemon");
    daemon_->Start();
  }

  testing::Output Parity(const std::string& args) {
    return testing::Run("client/parity", args, "NO_COLOR=1 PARITY_SERVER=" + daemon_->Address());
  }
  testing::Output Agent(const std::string& args) {
    return testing::RunAgent(args + " --server " + daemon_->Address(), "NO_COLOR=1");
  }

  Answer Local(const fs::path& golden, const fs::path& target, const std::string& policy) {
    testing::Output o = Parity("compare " + golden.string() + " " + target.string() + " --json --policy " + policy);
    Answer a;
    absl::StatusOr<Json> j = ParseJson(o.text.substr(0, o.text.rfind('}') + 1));
    EXPECT_TRUE(j.ok()) << o.text;
    if (!j.ok()) return a;
    a.Add(*j->Find("items"));
    for (const Json& c : j->Find("summary")->Find("culprits")->as_array()) a.culprits.push_back(c.as_string());
    a.first_culprit = FirstCulpritOf(*j->Find("summary"));
    return a;
  }

  // Job `job`'s rows and culprits, as the daemon stored them.
  Answer OfJob(const std::string& job) {
    Answer a;
    testing::Output r = Parity("results " + job + " --json --limit 0");
    absl::StatusOr<Json> j = ParseJson(r.text);
    EXPECT_TRUE(j.ok()) << r.text;
    if (!j.ok()) return a;
    a.Add(*j->Find("items"));
    testing::Output s = Parity("summary " + job + " --json");
    absl::StatusOr<Json> sj = ParseJson(s.text);
    EXPECT_TRUE(sj.ok()) << s.text;
    if (sj.ok()) {
      if (const Json* cs = sj->Find("culprits")) {
        for (const Json& c : cs->as_array()) a.culprits.push_back(c.as_string());
      }
      a.first_culprit = FirstCulpritOf(*sj);
    }
    return a;
  }

  // `parity export JOB --format csv`: byte for byte what `parity compare --csv` writes.
  std::string ExportedCsv(const std::string& job) {
    const fs::path out = dir_ / ("export-" + job + ".csv");
    Parity("export " + job + " --format csv -o " + out.string());
    return ReadFileToString(out.string()).value_or("(no CSV exported)");
  }

  std::string JobOfTarget(const std::string& target_run) {
    testing::Output jobs = Parity("jobs --json --limit 1000");
    absl::StatusOr<Json> j = ParseJson(jobs.text);
    EXPECT_TRUE(j.ok()) << jobs.text;
    if (!j.ok()) return "";
    for (const Json& job : j->as_array()) {
      if (job.Find("target_run_id")->as_string() == target_run) return job.Find("job_id")->as_string();
    }
    ADD_FAILURE() << "no job for " << target_run << ": " << jobs.text;
    return "";
  }

  // Runs the pair through every path with `policy` and checks the answers agree.
  void ExpectOneAnswer(const std::string& fixture, const fs::path& golden, const fs::path& target,
                       const std::string& policy) {
    SCOPED_TRACE(fixture + ", policy " + policy);
    const std::string project = "p" + std::to_string(++uploads_);
    const fs::path ids = dir_ / ("ids" + std::to_string(uploads_));
    fs::create_directories(ids);
    const Answer local = Local(golden, target, policy);
    ASSERT_FALSE(local.items.empty());
    const fs::path local_csv = ids / "local.csv";
    Parity("compare " + golden.string() + " " + target.string() + " --policy " + policy + " --csv " +
           local_csv.string());
    const std::string csv = ReadFileToString(local_csv.string()).value_or("(no CSV written)");

    ASSERT_EQ(Agent("upload " + golden.string() + " --project " + project + " --role golden --run-id-file " +
                    (ids / "g").string()).code, 0);
    const std::string golden_run = testing::ReadFirstWord(ids / "g");
    Agent("upload " + target.string() + " --project " + project + " --role target --against " + golden_run +
          " --policy " + policy + " --allow-unmatched --run-id-file " + (ids / "t").string());
    const std::string target_run = testing::ReadFirstWord(ids / "t");
    const std::string job_of_uploaded = JobOfTarget(target_run);
    const Answer uploaded = OfJob(job_of_uploaded);
    EXPECT_EQ(uploaded.DifferencesFrom(local), "") << "agent upload --against";
    EXPECT_EQ(ExportedCsv(job_of_uploaded), csv) << "agent upload --against: export --format csv";

    Agent("upload-pair " + golden.string() + " " + target.string() + " --project " + project + " --policy " +
          policy + " --allow-unmatched --run-id-file " + (ids / "pair").string());
    const std::string job_of_paired = JobOfTarget(testing::ReadFirstWord(ids / "pair.target"));
    const Answer paired = OfJob(job_of_paired);
    EXPECT_EQ(paired.DifferencesFrom(local), "") << "agent upload-pair";
    EXPECT_EQ(ExportedCsv(job_of_paired), csv) << "agent upload-pair: export --format csv";

    testing::Output sub = Parity("submit --golden " + golden_run + " --target " + target_run + " --policy " +
                                 policy + " --watch --json --allow-unmatched");
    absl::StatusOr<Json> sj = ParseJson(sub.text.substr(sub.text.find('{')));
    ASSERT_TRUE(sj.ok()) << sub.text;
    const std::string job_of_submitted = sj->Find("job_id")->as_string();
    const Answer submitted = OfJob(job_of_submitted);
    EXPECT_EQ(submitted.DifferencesFrom(local), "") << "submit";
    EXPECT_EQ(ExportedCsv(job_of_submitted), csv) << "submit: export --format csv";
  }

  std::unique_ptr<Daemon> daemon_;
  int uploads_ = 0;
};

void WriteNpy(const fs::path& path, DType dtype, const Shape& shape, const std::vector<float>& values) {
  fs::create_directories(path.parent_path());
  ASSERT_TRUE(WriteStringToFile(path.string(), EncodeNpy(*Tensor::Make(dtype, shape, testing::EncodeFloats(values, dtype)))).ok());
}

// The bundled msprobe sample (a culprit and the operators it propagates to).
TEST_F(PathsTest, TheSampleGivesOneAnswerOnEveryPathWithEachPolicy) {
  for (const char* policy : {"msprobe", "forge", "torch"}) {
    ExpectOneAnswer("sample", testing::kSample + "/golden", testing::kSample + "/target", policy);
  }
}

// Directories of .npy files: a shape mismatch is a FAIL row on every path (through parityd it
// was UNMATCHED, and the job passed), a dtype change is compared, and an item missing from the
// target is UNMATCHED on every path.
TEST_F(PathsTest, NpyDirectoriesWithShapeAndDtypeChangesGiveOneAnswer) {
  const fs::path g = dir_ / "npy" / "golden", t = dir_ / "npy" / "target";
  WriteNpy(g / "a.npy", DType::kFloat32, {4}, {1, 2, 3, 4});
  WriteNpy(t / "a.npy", DType::kFloat32, {4}, {1, 2, 3, 4});
  WriteNpy(g / "b.npy", DType::kFloat32, {2, 2}, {1, 2, 3, 4});
  WriteNpy(t / "b.npy", DType::kFloat32, {4}, {1, 2, 3, 4});
  WriteNpy(g / "c.npy", DType::kFloat32, {3}, {0.5, -1, 2});
  WriteNpy(t / "c.npy", DType::kFloat16, {3}, {0.5, -1, 2});
  WriteNpy(g / "d.npy", DType::kFloat32, {2}, {1, 2});
  for (const char* policy : {"msprobe", "forge", "torch"}) {
    ExpectOneAnswer("npy", g, t, policy);
  }
  // And the shape mismatch fails: the wrong-shaped output does not pass through the daemon.
  const Answer local = Local(g, t, "msprobe");
  EXPECT_EQ(local.VerdictOf("b"), "FAIL") << local.Describe();
}

// Two operators that fail independently: both are culprits, and every path reports the first in
// dump order as the first culprit (not the last one the analysis met).
TEST_F(PathsTest, TheFirstOfTwoIndependentCulpritsIsTheOneReportedOnEveryPath) {
  const fs::path g = dir_ / "two" / "golden", t = dir_ / "two" / "target";
  for (const char* name : {"t0", "t1", "t2", "t3"}) {
    const bool bad = std::string(name) == "t1" || std::string(name) == "t3";
    WriteNpy(g / (std::string(name) + ".npy"), DType::kFloat32, {4}, {1, 2, 3, 4});
    WriteNpy(t / (std::string(name) + ".npy"), DType::kFloat32, {4}, {1, bad ? -2.0f : 2.0f, 3, 4});
  }
  ExpectOneAnswer("two culprits", g, t, "msprobe");
  const Answer local = Local(g, t, "msprobe");
  EXPECT_EQ(local.culprits, (std::vector<std::string>{"t1", "t3"})) << local.Describe();
  EXPECT_EQ(local.first_culprit, "t1") << local.Describe();
}

// The peers' own conformance inputs, one directory per side (each case's pair under one name).
TEST_F(PathsTest, ConformanceInputsGiveOneAnswerOnEveryPath) {
  const fs::path root = fs::path(PARITY_SOURCE_DIR) / "tests" / "conformance";
  const fs::path g = dir_ / "conf" / "golden", t = dir_ / "conf" / "target";
  fs::create_directories(g);
  fs::create_directories(t);
  const std::vector<std::pair<std::string, std::pair<std::string, std::string>>> sets = {
      {"msprobe_real", {"bench.npy", "npu.npy"}},
      {"pcc_allclose", {"golden.npy", "calculated.npy"}},
      {"torch_assert_close", {"expected.npy", "actual.npy"}}};
  int cases = 0;
  for (const auto& [set, files] : sets) {
    for (const auto& c : fs::directory_iterator(root / set)) {
      if (!fs::exists(c.path() / files.first) || !fs::exists(c.path() / files.second)) continue;
      const std::string name = set + "." + c.path().filename().string() + ".npy";
      fs::copy_file(c.path() / files.first, g / name);
      fs::copy_file(c.path() / files.second, t / name);
      ++cases;
    }
  }
  ASSERT_GT(cases, 40);
  for (const char* policy : {"msprobe", "forge", "torch"}) {
    ExpectOneAnswer("conformance", g, t, policy);
  }
}

// msprobe dumps of every kind of non-tensor argument, one per dump task (tests/data/make_args.py):
// the value taken as the statistics, the MD5 column, the placeholders, on every path.
TEST_F(PathsTest, ArgumentRowsGiveOneAnswerInEveryDumpTask) {
  const std::string root = std::string(PARITY_SOURCE_DIR) + "/tests/data/msprobe_args/";
  for (const char* task : {"tensor", "statistics", "md5"}) {
    for (const char* policy : {"msprobe", "forge", "torch"}) {
      ExpectOneAnswer(std::string("args-") + task, root + task + "/golden", root + task + "/target", policy);
    }
  }
}

// The other layouts: an msprobe PyTorch dump (.pt data files), a directory of .pt files (tensors
// and a state dict), .safetensors files, and Ascend GE dumps.
TEST_F(PathsTest, PtSafetensorsAndGeDumpsGiveOneAnswer) {
  const fs::path data = fs::path(PARITY_SOURCE_DIR) / "tests" / "data";
  const fs::path pg = dir_ / "pt" / "golden", ptt = dir_ / "pt" / "target";
  fs::create_directories(pg);
  fs::create_directories(ptt);
  // The readable .pt fixtures (the unreadable ones fail a golden upload on purpose); the
  // target's f32.pt holds offset.pt's tensor.
  for (const char* f : {"bf16.pt", "f32.pt", "offset.pt", "state_dict.pt", "transposed.pt"}) {
    fs::copy_file(data / "pt" / f, pg / f);
    fs::copy_file(data / "pt" / (std::string(f) == "f32.pt" ? "offset.pt" : f), ptt / f);
  }
  const fs::path sg = dir_ / "st" / "golden", st = dir_ / "st" / "target";
  fs::create_directories(sg);
  fs::create_directories(st);
  auto tensor = [](DType dt, const Shape& shape, const std::vector<float>& v) {
    return *Tensor::Make(dt, shape, testing::EncodeFloats(v, dt));
  };
  ASSERT_TRUE(WriteStringToFile((sg / "model.safetensors").string(),
                                EncodeSafetensors({{"a", tensor(DType::kFloat32, {4}, {1, 2, 3, 4})},
                                                   {"b", tensor(DType::kFloat32, {2, 2}, {1, -1, 0.5, 2})},
                                                   {"c", tensor(DType::kFloat32, {3}, {0.25, 8, -3})}}))
                  .ok());
  ASSERT_TRUE(WriteStringToFile((st / "model.safetensors").string(),
                                EncodeSafetensors({{"a", tensor(DType::kBFloat16, {4}, {1, 2, 3, 4.01f})},
                                                   {"b", tensor(DType::kFloat32, {4}, {1, -1, 0.5, 2})},
                                                   {"c", tensor(DType::kFloat32, {3}, {0.25, -8, -3})}}))
                  .ok());
  for (const char* policy : {"msprobe", "forge", "torch"}) {
    ExpectOneAnswer("pt-msprobe", (data / "pt" / "msprobe_dump" / "golden").string(),
                    (data / "pt" / "msprobe_dump" / "target").string(), policy);
    ExpectOneAnswer("pt-files", pg, ptt, policy);
    ExpectOneAnswer("safetensors", sg, st, policy);
    ExpectOneAnswer("ge", (data / "ge" / "golden").string(), (data / "ge" / "target").string(), policy);
  }
  // The safetensors pair fails where it should on every path (the local answer is the one the
  // others matched): a shape change and a sign flip.
  const Answer local = Local(sg, st, "msprobe");
  EXPECT_EQ(local.VerdictOf("b"), "FAIL") << local.Describe();
  EXPECT_EQ(local.VerdictOf("c"), "FAIL") << local.Describe();
}

}  // namespace
}  // namespace parity
