// The parity CLI's server commands against a real parityd: runs, jobs, submit --watch,
// results, show, diff, and the three export formats (CSV header = msprobe's; Model Explorer
// overlays validated against the node-data schema).
#include <cmath>
#include <filesystem>

#include "gtest/gtest.h"
#include "common/base/file_util.h"
#include "common/base/json.h"
#include "tests/test_util.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using testing::Daemon;
using testing::kSample;

// Model Explorer's node-data overlay schema (shared/reference/service-prior-art.md §4.2).
constexpr char kNodeDataSchema[] = R"({
  "type": "object",
  "additionalProperties": { "$ref": "#/definitions/GraphNodeData" },
  "definitions": {
    "GraphNodeData": {
      "type": "object",
      "required": ["results"],
      "properties": {
        "name": { "type": "string" },
        "results": { "type": "object", "additionalProperties": { "$ref": "#/definitions/NodeDataResult" } },
        "thresholds": { "type": "array", "items": { "$ref": "#/definitions/ThresholdItem" } },
        "gradient":   { "type": "array", "items": { "$ref": "#/definitions/GradientItem" } },
        "hideInAggregatedStatsTable": { "type": "boolean" },
        "hideInChildrenStatsTable":   { "type": "boolean" },
        "hideAggregatedStats": { "type": "array", "items": { "enum": ["min", "max", "sum", "avg"] } },
        "showExpandedSummaryOnGroupNode":            { "type": "boolean" },
        "showLabelCountColumnsInChildrenStatsTable": { "type": "boolean" }
      }
    },
    "NodeDataResult": {
      "type": "object", "required": ["value"],
      "properties": { "value": { "type": ["number", "string"] }, "bgColor": { "type": "string" }, "textColor": { "type": "string" } }
    },
    "ThresholdItem": {
      "type": "object", "required": ["value", "bgColor"],
      "properties": { "value": { "type": "number" }, "bgColor": { "type": "string" }, "textColor": { "type": "string" } }
    },
    "GradientItem": {
      "type": "object", "required": ["stop"],
      "properties": { "stop": { "type": "number", "minimum": 0, "maximum": 1 }, "bgColor": { "type": "string" }, "textColor": { "type": "string" } }
    }
  }
})";

// A JSON Schema (draft-07) subset: type, required, properties, additionalProperties, items,
// enum, minimum, maximum, local $ref. Appends violations to *errors.
void Validate(const Json& v, const Json& schema, const Json& root, const std::string& path,
              std::vector<std::string>* errors) {
  if (const Json* ref = schema.Find("$ref")) {
    const std::string name = ref->as_string().substr(std::string("#/definitions/").size());
    return Validate(v, *root.Find("definitions")->Find(name), root, path, errors);
  }
  if (const Json* type = schema.Find("type")) {
    std::vector<std::string> types;
    if (type->is_string()) types.push_back(type->as_string());
    else for (const Json& t : type->as_array()) types.push_back(t.as_string());
    bool ok = false;
    for (const std::string& t : types) {
      ok = ok || (t == "object" && v.is_object()) || (t == "array" && v.is_array()) ||
           (t == "string" && v.is_string()) || (t == "boolean" && v.is_bool()) ||
           (t == "number" && v.is_number() && std::isfinite(v.as_double()));
    }
    if (!ok) errors->push_back(path + ": wrong type " + v.Dump());
  }
  if (const Json* e = schema.Find("enum")) {
    bool found = false;
    for (const Json& x : e->as_array()) found = found || x.Dump() == v.Dump();
    if (!found) errors->push_back(path + ": not in enum");
  }
  if (v.is_number()) {
    if (const Json* m = schema.Find("minimum"); m && v.as_double() < m->as_double()) errors->push_back(path + ": below minimum");
    if (const Json* m = schema.Find("maximum"); m && v.as_double() > m->as_double()) errors->push_back(path + ": above maximum");
  }
  if (v.is_object()) {
    if (const Json* req = schema.Find("required")) {
      for (const Json& k : req->as_array()) {
        if (!v.Find(k.as_string())) errors->push_back(path + ": missing " + k.as_string());
      }
    }
    const Json* props = schema.Find("properties");
    const Json* extra = schema.Find("additionalProperties");
    for (const auto& [k, child] : v.as_object()) {
      const Json* sub = props ? props->Find(k) : nullptr;
      if (sub) Validate(child, *sub, root, path + "." + k, errors);
      else if (extra) Validate(child, *extra, root, path + "." + k, errors);
    }
  }
  if (v.is_array()) {
    if (const Json* items = schema.Find("items")) {
      for (size_t i = 0; i < v.as_array().size(); ++i) {
        Validate(v.as_array()[i], *items, root, path + "[" + std::to_string(i) + "]", errors);
      }
    }
  }
}

class CliRemoteTest : public testing::ScratchTest {
 protected:
  testing::Output Parity(const std::string& args) {
    return testing::Run("client/parity", args, "NO_COLOR=1 PARITY_SERVER=" + daemon_->Address());
  }
  testing::Output Agent(const std::string& args) {
    return testing::RunAgent(args + " --server " + daemon_->Address());
  }
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(CliRemoteTest, EveryCommandAgainstARealDaemon) {
  daemon_ = std::make_unique<Daemon>(dir_);
  daemon_->Start();
  ASSERT_EQ(Agent("upload " + kSample + "/golden --project demo --role golden --label build=1 --model tiny-mlp "
                  "--device cpu --run-id-file " + (dir_ / "g").string()).code, 0);
  testing::Output t = Agent("upload " + kSample + "/target --project demo --role target --against-label build=1 "
                            "--run-id-file " + (dir_ / "t").string());
  ASSERT_EQ(t.code, 1) << t.text;
  ASSERT_EQ(Agent("upload " + kSample + "/golden --project demo --role target --run-id-file " +
                  (dir_ / "same").string()).code, 0);
  const std::string golden = testing::ReadFirstWord(dir_ / "g");
  const std::string target = testing::ReadFirstWord(dir_ / "t");
  const std::string same = testing::ReadFirstWord(dir_ / "same");

  testing::Output runs = Parity("runs --project demo");
  EXPECT_EQ(runs.code, 0) << runs.text;
  EXPECT_NE(runs.text.find(golden), std::string::npos);
  testing::Output runs_json = Parity("runs --json --label build=1");
  auto rj = ParseJson(runs_json.text);
  ASSERT_TRUE(rj.ok()) << runs_json.text;
  ASSERT_EQ(rj->as_array().size(), 1u);
  EXPECT_EQ(rj->as_array()[0].Find("side")->as_string(), "golden");
  EXPECT_EQ(rj->as_array()[0].Find("device")->as_string(), "cpu");
  // The agent's --model is what parity runs --model finds; the table shows models and labels.
  testing::Output by_model = Parity("runs --model tiny-mlp --json");
  auto mj = ParseJson(by_model.text);
  ASSERT_TRUE(mj.ok()) << by_model.text;
  ASSERT_EQ(mj->as_array().size(), 1u) << by_model.text;
  EXPECT_EQ(mj->as_array()[0].Find("run_id")->as_string(), golden);
  EXPECT_NE(runs.text.find("MODEL"), std::string::npos) << runs.text;
  EXPECT_NE(runs.text.find("tiny-mlp  build=1"), std::string::npos) << runs.text;
  // jobs names each job's target run.
  testing::Output jobs_table = Parity("jobs");
  EXPECT_NE(jobs_table.text.find("TARGET"), std::string::npos) << jobs_table.text;
  EXPECT_NE(jobs_table.text.find(kSample + "/target"), std::string::npos) << jobs_table.text;

  testing::Output jobs = Parity("jobs --json --state done");
  auto jj = ParseJson(jobs.text);
  ASSERT_TRUE(jj.ok()) << jobs.text;
  ASSERT_EQ(jj->as_array().size(), 1u);
  const std::string job = jj->as_array()[0].Find("job_id")->as_string();
  EXPECT_EQ(jj->as_array()[0].Find("first_culprit")->as_string(), "Functional.linear.1.forward");

  // A second job: the golden numbers uploaded as a target, all pass.
  testing::Output sub = Parity("submit --golden " + golden + " --target " + same + " --watch");
  EXPECT_EQ(sub.code, 0) << sub.text;
  EXPECT_NE(sub.text.find("done: 17 pass"), std::string::npos) << sub.text;
  testing::Output sub_json = Parity("submit --json --golden " + golden + " --target " + same);
  auto sj = ParseJson(sub_json.text);
  ASSERT_TRUE(sj.ok()) << sub_json.text;
  const std::string pass_job = sj->Find("job_id")->as_string();
  EXPECT_EQ(Parity("watch " + pass_job).code, 0);
  // A job of identical runs has no "worst" operators: rows at Cosine 1 or an error of 0 are not
  // listed.
  testing::Output clean = Parity("summary " + pass_job);
  EXPECT_EQ(clean.code, 0) << clean.text;
  EXPECT_EQ(clean.text.find("worst by"), std::string::npos) << clean.text;

  testing::Output res = Parity("results " + job + " --verdict fail --sort Cosine");
  EXPECT_EQ(res.code, 1) << res.text;
  EXPECT_NE(res.text.find("5 result(s)"), std::string::npos) << res.text;
  EXPECT_NE(res.text.find("VERDICT     POLICY    CULPRIT     ITEM"), std::string::npos) << res.text;
  EXPECT_NE(res.text.find("FAIL        msprobe   culprit     Functional.linear.1.forward.output.0"),
            std::string::npos) << res.text;
  // The exit code is the whole job's, not the page's: passing rows of a failing job exit 1, and
  // a page cut by --limit says how many rows match in all.
  EXPECT_EQ(Parity("results " + job + " --verdict pass --op 'Functional.relu.*'").code, 1);
  EXPECT_EQ(Parity("results " + pass_job + " --verdict pass").code, 0);
  testing::Output page = Parity("results " + job + " --limit 2");
  EXPECT_EQ(page.code, 1) << page.text;
  EXPECT_NE(page.text.find("2 of 17 result(s); --limit 0 lists all"), std::string::npos) << page.text;
  EXPECT_EQ(Parity("results " + job + " --verdict nope").code, 2);

  testing::Output show = Parity("show " + job + " Functional.linear.1.forward.output.0");
  EXPECT_EQ(show.code, 1);
  EXPECT_NE(show.text.find("culprit:       yes"), std::string::npos) << show.text;
  EXPECT_NE(show.text.find("Cosine                      0.985454980666"), std::string::npos) << show.text;
  EXPECT_NE(show.text.find("golden stats:  max 1.6693291664123535  min -1.5708245038986206"), std::string::npos)
      << show.text;
  EXPECT_NE(show.text.find("target stats:  max 1.6693297624588013"), std::string::npos) << show.text;
  EXPECT_EQ(Parity("show " + job + " no.such.item").code, 2);
  testing::Output show_json =
      Parity("show --json " + job + " Functional.linear.1.forward.output.0");
  EXPECT_EQ(show_json.code, 1);
  absl::StatusOr<Json> shj = ParseJson(show_json.text);
  ASSERT_TRUE(shj.ok()) << show_json.text;
  EXPECT_EQ(shj->Find("name")->as_string(), "Functional.linear.1.forward.output.0");
  EXPECT_EQ(shj->Find("verdict")->as_string(), "FAIL");
  EXPECT_EQ(shj->Find("culprit")->as_string(), "culprit");
  EXPECT_EQ(shj->Find("target")->Find("shape")->Dump(), "[4,16]");
  EXPECT_EQ(shj->Find("golden")->Find("dtype")->as_string(), "float32");

  testing::Output summary = Parity("summary " + job + " --worst 2");
  EXPECT_EQ(summary.code, 1) << summary.text;
  for (const char* want : {"culprits (1), largest error growth first:\n  Functional.linear.1.forward  (forward, growth ",
                           "Noise floor: growth ", "worst by Cosine:\n",
                           "0.984903988301        Functional.layer_norm.0.forward.output.0\n",
                           "worst by MaxRelativeErr:\n"}) {
    EXPECT_NE(summary.text.find(want), std::string::npos) << want << "\n" << summary.text;
  }
  testing::Output summary_json = Parity("summary --json " + job);
  EXPECT_EQ(summary_json.code, 1);
  absl::StatusOr<Json> suj = ParseJson(summary_json.text);
  ASSERT_TRUE(suj.ok()) << summary_json.text;
  EXPECT_EQ(suj->Find("culprits")->as_array().size(), 1u);
  EXPECT_EQ(suj->Find("first_culprit")->as_string(), "Functional.linear.1.forward");
  // The daemon's analysis is the local one: the same culprit, growth and noise floor.
  const Json* ranked = suj->Find("culprit_analysis")->Find("ranked");
  ASSERT_EQ(ranked->as_array().size(), 1u);
  EXPECT_EQ(ranked->as_array()[0].Find("api")->as_string(), "Functional.linear.1.forward");
  EXPECT_EQ(ranked->as_array()[0].Find("phase")->as_string(), "forward");
  testing::Output local = Parity("compare " + kSample + "/golden " + kSample + "/target --json");
  absl::StatusOr<Json> lj = ParseJson(local.text);
  ASSERT_TRUE(lj.ok()) << local.text;
  const Json* local_analysis = lj->Find("summary")->Find("culprit_analysis");
  EXPECT_EQ(ranked->as_array()[0].Find("growth")->Dump(),
            local_analysis->Find("ranked")->as_array()[0].Find("growth")->Dump());
  EXPECT_EQ(suj->Find("culprit_analysis")->Find("noise_growth")->Dump(), local_analysis->Find("noise_growth")->Dump());
  EXPECT_EQ(Parity("summary " + job + " --worst 0").code, 2);

  testing::Output diff = Parity("diff " + pass_job + " " + job);
  EXPECT_EQ(diff.code, 1) << diff.text;
  EXPECT_NE(diff.text.find("5 regression(s)"), std::string::npos) << diff.text;
  EXPECT_EQ(Parity("diff " + job + " " + job).code, 0);

  // CSV: msprobe's real-data header, one row per pair.
  const std::string csv = (dir_ / "out.csv").string();
  testing::Output csv_export = Parity("export " + job + " --format csv -o " + csv);
  ASSERT_EQ(csv_export.code, 0) << csv_export.text;
  const std::string text = *ReadFileToString(csv);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,"
            "NPU Requires_grad,Bench Requires_grad,Cosine,EucDist,MaxAbsErr,MaxRelativeErr,"
            "One Thousandth Err Ratio,Five Thousandths Err Ratio,NPU max,NPU min,NPU mean,"
            "NPU l2norm,Bench max,Bench min,Bench mean,Bench l2norm,Requires_grad Consistent,"
            "Accuracy Reached or Not,Err_message,Data_name");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 18);
  // The dtype as the dump writes it (the sample is MindSpore-style), as parity compare --csv.
  EXPECT_NE(text.find("Functional.linear.1.forward.output.0,Functional.linear.1.forward.output.0,Float32,"
                      "Float32,\"[4, 16]\",\"[4, 16]\",False,False,0.985454980666"),
            std::string::npos) << text;

  testing::Output js = Parity("export " + job + " --format json");
  ASSERT_EQ(js.code, 0);
  auto exported = ParseJson(js.text);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->Find("items")->as_array().size(), 17u);
  EXPECT_EQ(exported->Find("job")->Find("job_id")->as_string(), job);
  EXPECT_EQ(exported->Find("summary")->Find("first_culprit")->as_string(), "Functional.linear.1.forward");

  // Model Explorer overlays, validated against the node-data schema.
  const std::string overlay = (dir_ / "overlay.json").string();
  ASSERT_EQ(Parity("export " + job + " --format model-explorer -o " + overlay).code, 0);
  const Json schema = *ParseJson(kNodeDataSchema);
  for (const std::string& path : {overlay, (dir_ / "overlay.verdicts.json").string()}) {
    auto doc = ParseJson(*ReadFileToString(path));
    ASSERT_TRUE(doc.ok()) << path;
    std::vector<std::string> errors;
    Validate(*doc, schema, schema, "$", &errors);
    EXPECT_TRUE(errors.empty()) << path << ": " << errors[0];
    ASSERT_NE(doc->Find("main"), nullptr);
    EXPECT_EQ(doc->Find("main")->Find("results")->as_object().size(), 5u);  // one per operator
  }
  auto verdicts = ParseJson(*ReadFileToString((dir_ / "overlay.verdicts.json").string()));
  EXPECT_EQ(verdicts->Find("main")->Find("results")->Find("Functional.linear.1.forward")->Find("value")->as_string(),
            "fail (culprit)");
  EXPECT_EQ(Parity("export " + job + " --format model-explorer").code, 2);  // needs -o
  EXPECT_EQ(Parity("export " + job + " --format xml").code, 2);
  EXPECT_EQ(Parity("export " + job + " --format model-explorer --metric speed -o " + overlay).code, 2);
  // A validator that accepts anything would be useless: it must reject a broken overlay.
  std::vector<std::string> errors;
  Validate(*ParseJson(R"({"main": {"results": {"a": {"bgColor": "#fff"}}, "thresholds": [{"value": "x"}]}})"),
           schema, schema, "$", &errors);
  EXPECT_EQ(errors.size(), 3u);
}

// parity status: what parityd holds against each limit, with the flag that sets it.
// Through the daemon too, a job that did not check everything never exits 0: a target that
// lacks a golden item exits 3 (0 with --allow-unmatched), one that shares no item with its
// golden run exits 3 whatever the flag, and a diff of two jobs with no item in common is an
// error, not "0 regressions".
// The agent uploads msprobe's stack.json and construct.json with the run: the daemon shows the
// culprit's stack in the summary and in `show`, marks it in the module tree, and writes the
// NPU_Stack_Info column in the CSV export as `parity compare --csv` writes it.
TEST_F(CliRemoteTest, StacksAndTheModuleTreeTravelWithTheRun) {
  const fs::path t = dir_ / "target";
  fs::create_directories(dir_);
  fs::copy(kSample + "/target", t, fs::copy_options::recursive);
  ASSERT_TRUE(WriteStringToFile((t / "stack.json").string(),
                                R"js({"0": [["Functional.linear.1.forward"], "File train.py, line 12, in forward, \n self.fc2(x) \n"]})js")
                  .ok());
  ASSERT_TRUE(WriteStringToFile((t / "construct.json").string(),
                                R"js({"Module.mlp.MLP.forward.0": null,
                                      "Functional.linear.1.forward": "Module.mlp.MLP.forward.0",
                                      "Functional.layer_norm.0.forward": null})js")
                  .ok());
  daemon_ = std::make_unique<Daemon>(dir_);
  daemon_->Start();
  ASSERT_EQ(Agent("upload " + kSample + "/golden --project st --role golden --label build=1").code, 0);
  testing::Output up = Agent("upload " + t.string() + " --project st --role target --against-label build=1");
  ASSERT_EQ(up.code, 1) << up.text;
  absl::StatusOr<Json> jobs = ParseJson(Parity("jobs --project st --json").text);
  ASSERT_TRUE(jobs.ok() && jobs->is_array() && jobs->as_array().size() == 1u);
  const std::string job = jobs->as_array()[0].Find("job_id")->as_string();
  testing::Output sum = Parity("summary " + job + " --tree");
  EXPECT_EQ(sum.code, 1) << sum.text;
  for (const char* want : {"  Functional.linear.1.forward  (forward, growth ", "      File train.py, line 12, in forward,\n",
                           "      self.fc2(x)\n",
                           "Module tree:\nModule.mlp.MLP.forward.0\n  Functional.linear.1.forward  <--- *** HERE ***\n"
                           "Functional.layer_norm.0.forward  (propagated)\n"}) {
    EXPECT_NE(sum.text.find(want), std::string::npos) << want << "\n" << sum.text;
  }
  testing::Output show = Parity("show " + job + " Functional.linear.1.forward.output.0");
  EXPECT_NE(show.text.find("stack:\n  File train.py, line 12, in forward,\n  self.fc2(x)\n"), std::string::npos)
      << show.text;
  testing::Output remote = Parity("export " + job + " --format csv -o " + (dir_ / "remote.csv").string());
  ASSERT_EQ(remote.code, 0) << remote.text;
  ASSERT_EQ(testing::Run("client/parity", "compare " + kSample + "/golden " + t.string() + " --csv " +
                                              (dir_ / "local.csv").string()).code, 1);
  const std::string local_csv = ReadFileToString((dir_ / "local.csv").string()).value_or("");
  EXPECT_NE(local_csv.find(",NPU_Stack_Info,"), std::string::npos);
  EXPECT_EQ(ReadFileToString((dir_ / "remote.csv").string()).value_or(""), local_csv);
}

TEST_F(CliRemoteTest, IncompleteJobsAndDisjointDiffsNeverPass) {
  daemon_ = std::make_unique<Daemon>(dir_);
  daemon_->Start();
  testing::WriteNpyDump(dir_ / "g4", -1, 0, 4);
  testing::WriteNpyDump(dir_ / "t3", -1, 1, 3);
  ASSERT_EQ(Agent("upload " + (dir_ / "g4").string() + " --project p --role golden --label build=4").code, 0);
  testing::Output missing = Agent("upload " + (dir_ / "t3").string() + " --project p --role target --against-label build=4");
  EXPECT_EQ(missing.code, 3) << missing.text;
  EXPECT_NE(missing.text.find("incomplete: 1 item(s) without a counterpart"), std::string::npos) << missing.text;
  testing::Output allowed = Agent("upload " + (dir_ / "t3").string() + " --project p --role target --against-label build=4 "
                                  "--allow-unmatched --run-id-file " + (dir_ / "allowed").string());
  EXPECT_EQ(allowed.code, 0) << allowed.text;

  ASSERT_EQ(Agent("upload " + kSample + "/golden --project p --role golden --label build=s").code, 0);
  testing::Output disjoint = Agent("upload " + (dir_ / "t3").string() + " --project p --role target --against-label build=s "
                                   "--allow-unmatched --json --run-id-file " + (dir_ / "disjoint").string());
  EXPECT_EQ(disjoint.code, 3) << disjoint.text;

  ASSERT_EQ(Agent("upload " + kSample + "/target --project p --role target --against-label build=s "
                  "--run-id-file " + (dir_ / "sample").string()).code, 1);

  testing::Output jobs = Parity("jobs --json");
  auto jj = ParseJson(jobs.text);
  ASSERT_TRUE(jj.ok()) << jobs.text;
  std::string allowed_job, disjoint_job, sample_job;
  const std::string sample_run = testing::ReadFirstWord(dir_ / "sample");
  const std::string allowed_run = testing::ReadFirstWord(dir_ / "allowed");
  const std::string disjoint_run = testing::ReadFirstWord(dir_ / "disjoint");
  for (const Json& j : jj->as_array()) {
    if (j.Find("target_run_id")->as_string() == allowed_run) allowed_job = j.Find("job_id")->as_string();
    if (j.Find("target_run_id")->as_string() == disjoint_run) disjoint_job = j.Find("job_id")->as_string();
    if (j.Find("target_run_id")->as_string() == sample_run) sample_job = j.Find("job_id")->as_string();
  }
  ASSERT_FALSE(allowed_job.empty() || disjoint_job.empty() || sample_job.empty()) << jobs.text;
  EXPECT_EQ(Parity("summary " + allowed_job).code, 3);
  EXPECT_EQ(Parity("summary " + allowed_job + " --allow-unmatched").code, 0);
  EXPECT_EQ(Parity("summary " + disjoint_job + " --allow-unmatched").code, 3);

  testing::Output diff = Parity("diff " + allowed_job + " " + sample_job);
  EXPECT_EQ(diff.code, 2) << diff.text;
  EXPECT_NE(diff.text.find("have no item in common: nothing to compare"), std::string::npos) << diff.text;
  EXPECT_EQ(Parity("diff " + allowed_job + " " + allowed_job).code, 0);
}

TEST_F(CliRemoteTest, StatusShowsTheDaemonsFiguresAgainstItsFlags) {
  daemon_ = std::make_unique<Daemon>(
      dir_, std::vector<std::string>{"--max-streams=7", "--inline-max-bytes=0"});
  daemon_->Start();
  ASSERT_EQ(Agent("upload-pair " + kSample + "/golden " + kSample + "/target --project demo").code,
            1);
  testing::Output text = Parity("status");
  EXPECT_EQ(text.code, 0) << text.text;
  EXPECT_EQ(text.text.rfind("parityd 0.1.0 at " + daemon_->Address() + ", up ", 0), 0u)
      << text.text;
  for (const char* want :
       {"\nGAUGE                   NOW          PEAK         LIMIT          FLAG\n",
        "7              --max-streams\n", ">= 64.0 MiB    --min-free-disk-bytes\n",
        "\nresident_bytes  ", "\nspool_bytes  "}) {
    EXPECT_NE(text.text.find(want), std::string::npos) << want << "\n" << text.text;
  }
  EXPECT_EQ(text.text.find('\x1b'), std::string::npos);  // NO_COLOR
  testing::Output json = Parity("status --json");
  EXPECT_EQ(json.code, 0) << json.text;
  absl::StatusOr<Json> j = ParseJson(json.text);
  ASSERT_TRUE(j.ok()) << json.text;
  EXPECT_EQ(j->Find("version")->as_string(), "parityd 0.1.0");
  const Json* g = j->Find("gauges");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->Find("upload_streams")->Find("limit")->as_int(), 7);
  EXPECT_GE(g->Find("upload_streams")->Find("peak")->as_int(), 1);  // the golden's, the target's
  EXPECT_LE(g->Find("upload_streams")->Find("peak")->as_int(), 2);
  EXPECT_GT(g->Find("spool_bytes")->Find("value")->as_int(), 0);  // every tensor is a spool blob
  EXPECT_TRUE(g->Find("disk_free_bytes")->Find("limit_is_floor")->as_bool());
  EXPECT_GT(g->Find("resident_bytes")->Find("value")->as_int(), 0);
  EXPECT_GE(g->Find("compare_queue")->Find("peak")->as_int(), 1);
}

TEST_F(CliRemoteTest, HelpAndConnectionErrors) {
  for (const char* cmd : {"runs", "jobs", "submit", "watch", "cancel", "summary", "results", "show",
                          "diff", "export", "status"}) {
    testing::Output h = testing::Run("client/parity", std::string(cmd) + " --help");
    EXPECT_EQ(h.code, 0) << cmd;
    EXPECT_NE(h.text.find("examples:"), std::string::npos) << cmd;
    EXPECT_NE(h.text.find("--json"), std::string::npos) << cmd;
  }
  testing::Output down = testing::Run("client/parity", "runs --server 127.0.0.1:1");
  EXPECT_EQ(down.code, 2);
  EXPECT_EQ(testing::Run("client/parity", "status --server 127.0.0.1:1").code, 2);
  EXPECT_EQ(testing::Run("client/parity", "status extra").code, 2);
  EXPECT_EQ(testing::Run("client/parity", "results").code, 2);
  EXPECT_EQ(testing::Run("client/parity", "jobs --state sleeping").code, 2);
  // A malformed address is a usage error, not a connection retried (gRPC takes "HOST:abc" as
  // port 0 and "HOST:99999" as 34463); gRPC targets with a scheme go to gRPC as they are.
  struct Case {
    std::string address, says;
  } cases[] = {{"127.0.0.1:", "the port must be"},      {"127.0.0.1:abc", "the port must be"},
               {"127.0.0.1:99999", "the port must be"}, {"127.0.0.1:0", "the port must be"},
               {"127.0.0.1", "no port"},                {":50051", "no host"},
               {"::1:50051", "in brackets"}};
  for (const Case& c : cases) {
    testing::Output o = testing::Run("client/parity", "runs --server " + c.address);
    EXPECT_EQ(o.code, 2) << c.address << "\n" << o.text;
    EXPECT_NE(o.text.find(c.says), std::string::npos) << c.address << "\n" << o.text;
    EXPECT_NE(o.text.find("'" + c.address + "'"), std::string::npos) << o.text;
  }
  for (const char* fine : {"[::1]:1", "localhost:1", "unix:/nonexistent/parityd.sock"}) {
    testing::Output o = testing::Run("client/parity", std::string("runs --server ") + fine);
    EXPECT_EQ(o.code, 2) << fine << "\n" << o.text;  // nothing listens there
    EXPECT_EQ(o.text.find("server address"), std::string::npos) << fine << "\n" << o.text;
  }
}

}  // namespace
}  // namespace parity
