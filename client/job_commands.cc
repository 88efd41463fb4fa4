// parity runs | jobs | watch | summary | cancel | submit: runs and jobs on parityd.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <ostream>
#include <map>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/cli.h"
#include "client/export.h"
#include "client/proto_util.h"
#include "client/report_format.h"
#include "common/base/control_chars.h"
#include "client/terminal.h"
#include "common/base/file_util.h"
#include "common/base/json.h"
#include "common/base/pyformat.h"
#include "common/compare/culprit.h"
#include "parity/v1/parity.grpc.pb.h"
#include "client/remote_common.h"

namespace parity {
namespace remote {

int Runs(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const char kHelp[] =
      "usage: parity runs [--project P] [--model M] [--label k=v ...] [--structure HASH] [--limit N]\n"
      "\nLists runs, newest first.\n\nexamples:\n  parity runs --project llm --label build=42\n";
  Common c;
  std::string project, model, structure, limit = "50";
  std::vector<std::string> labels, pos;
  Args a;
  AddCommon(&a, &c);
  a.Value("--project", &project);
  a.Value("--model", &model);
  a.Value("--structure", &structure);
  a.Value("--limit", &limit);
  a.Multi("--label", &labels);
  if (int rc = ParseOrExit(a, args, &pos, 0, kHelp, out, err); rc >= 0) return rc;
  int n;
  if (!absl::SimpleAtoi(limit, &n) || n <= 0) {
    return ErrorExitCode("parity runs", absl::InvalidArgumentError("--limit needs a positive integer"), err);
  }
  v1::ListRunsRequest req;
  req.set_project(project);
  req.set_model(model);
  req.set_structure_hash(structure);
  for (const std::string& l : labels) {
    std::string k, v;
    if (!SplitKeyValue(l, &k, &v)) {
      return ErrorExitCode("parity runs",
                           absl::InvalidArgumentError(absl::StrCat("--label needs key=value, got '", l, "'")), err);
    }
    (*req.mutable_labels())[k] = v;
  }
  const std::string server = ServerAddress(c.server);
  auto q = v1::Query::NewStub(MakeChannel(server));
  absl::StatusOr<std::vector<v1::Run>> runs = FetchPages(
      std::move(req), n,
      [&q](grpc::ClientContext* ctx, const v1::ListRunsRequest& r, v1::ListRunsResponse* resp) {
        return q->ListRuns(ctx, r, resp);
      },
      &v1::ListRunsResponse::mutable_runs);
  if (!runs.ok()) return ListError(runs.status(), server, err);
  if (c.json) {
    Json arr = Json::MakeArray();
    for (const v1::Run& r : *runs) {
      Json o = Json::MakeObject();
      o.Set("run_id", Json::String(r.run_id()));
      o.Set("project", Json::String(r.metadata().project()));
      o.Set("side", Json::String(r.metadata().side() == v1::SIDE_GOLDEN ? "golden" : "target"));
      o.Set("name", Json::String(r.metadata().name()));
      o.Set("model", Json::String(r.metadata().model()));
      o.Set("device", Json::String(r.metadata().device()));
      o.Set("framework", Json::String(r.metadata().framework()));
      o.Set("item_count", Json::Integer(r.item_count()));
      o.Set("complete", Json::Bool(r.complete()));
      o.Set("structure_hash", Json::String(r.structure_hash()));
      o.Set("fingerprint", Json::String(r.fingerprint()));
      Json labels_json = Json::MakeObject();
      for (const auto& [k, v] : r.metadata().labels()) labels_json.Set(k, Json::String(v));
      o.Set("labels", std::move(labels_json));
      o.Set("created_at_ms", Json::Integer(r.created_at_ms()));
      arr.Append(std::move(o));
    }
    out << arr.Dump(2) << "\n";
    return kExitOk;
  }
  // Columns sized to the runs shown; labels as k=v,k=v.
  auto LabelsText = [](const v1::Run& r) {
    std::map<std::string, std::string> sorted(r.metadata().labels().begin(), r.metadata().labels().end());
    std::vector<std::string> kv;
    for (const auto& [k, v] : sorted) kv.push_back(k + "=" + v);
    return kv.empty() ? std::string("-") : absl::StrJoin(kv, ",");
  };
  size_t project_w = 7, model_w = 5, labels_w = 6;
  for (const v1::Run& r : *runs) {
    project_w = std::max(project_w, r.metadata().project().size());
    model_w = std::max(model_w, r.metadata().model().size());
    labels_w = std::max(labels_w, LabelsText(r).size());
  }
  labels_w = std::min<size_t>(labels_w, 40);
  out << Pad("RUN", 20) << "  " << Pad("SIDE", 6) << "  " << Pad("PROJECT", project_w) << "  " << Pad("ITEMS", 7)
      << "  " << Pad("STATE", 9) << "  " << Pad("CREATED (UTC)", 19) << "  " << Pad("MODEL", model_w) << "  "
      << Pad("LABELS", labels_w) << "  NAME\n";
  for (const v1::Run& r : *runs) {
    const std::string& model = r.metadata().model();
    out << Pad(r.run_id(), 20) << "  " << Pad(r.metadata().side() == v1::SIDE_GOLDEN ? "golden" : "target", 6)
        << "  " << Pad(r.metadata().project(), project_w) << "  " << Pad(absl::StrCat(r.item_count()), 7) << "  "
        << Pad(r.complete() ? "complete" : "uploading", 9) << "  " << Pad(TimeText(r.created_at_ms()), 19) << "  "
        << Pad(model.empty() ? "-" : model, model_w) << "  " << Pad(LabelsText(r), labels_w) << "  "
        << TerminalSafe(r.metadata().name()) << "\n";
  }
  return kExitOk;
}

int Jobs(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const char kHelp[] =
      "usage: parity jobs [--project P] [--state queued|running|done|failed|cancelled] [--run RUN] [--limit N]\n"
      "\nLists jobs, newest first.\n\nexamples:\n  parity jobs --state running\n";
  Common c;
  std::string project, state, run, limit = "50";
  std::vector<std::string> pos;
  Args a;
  AddCommon(&a, &c);
  a.Value("--project", &project);
  a.Value("--state", &state);
  a.Value("--run", &run);
  a.Value("--limit", &limit);
  if (int rc = ParseOrExit(a, args, &pos, 0, kHelp, out, err); rc >= 0) return rc;
  int n;
  if (!absl::SimpleAtoi(limit, &n) || n <= 0) {
    return ErrorExitCode("parity jobs", absl::InvalidArgumentError("--limit needs a positive integer"), err);
  }
  v1::ListJobsRequest req;
  req.set_project(project);
  req.set_run_id(run);
  if (!state.empty()) {
    v1::JobState s = v1::JOB_STATE_UNSPECIFIED;
    if (!v1::JobState_Parse("JOB_STATE_" + absl::AsciiStrToUpper(state), &s) || s == v1::JOB_STATE_UNSPECIFIED) {
      return ErrorExitCode("parity jobs",
                           absl::InvalidArgumentError("--state must be queued, running, done, failed or cancelled"), err);
    }
    req.set_state(s);
  }
  const std::string server = ServerAddress(c.server);
  auto stub = v1::Jobs::NewStub(MakeChannel(server));
  absl::StatusOr<std::vector<v1::Job>> jobs = FetchPages(
      std::move(req), n,
      [&stub](grpc::ClientContext* ctx, const v1::ListJobsRequest& r, v1::ListJobsResponse* resp) {
        return stub->List(ctx, r, resp);
      },
      &v1::ListJobsResponse::mutable_jobs);
  if (!jobs.ok()) return ListError(jobs.status(), server, err);
  if (c.json) {
    Json arr = Json::MakeArray();
    for (const v1::Job& j : *jobs) arr.Append(JobJson(j));
    out << arr.Dump(2) << "\n";
    return kExitOk;
  }
  size_t target_w = 6;
  for (const v1::Job& j : *jobs) target_w = std::max(target_w, j.target_run_name().size());
  target_w = std::min<size_t>(target_w, 40);
  out << Pad("JOB", 20) << "  " << Pad("STATE", 9) << "  " << Pad("PAIRS", 11) << "  "
      << Pad("PASS/WARN/FAIL/ERR/UNM", 22) << "  " << Pad("TARGET", target_w) << "  FIRST CULPRIT\n";
  for (const v1::Job& j : *jobs) {
    const auto& k = j.counts();
    out << Pad(j.job_id(), 20) << "  " << Pad(StateText(j.state()), 9) << "  "
        << Pad(absl::StrCat(j.pairs_done(), "/", j.pairs_total() ? absl::StrCat(j.pairs_total()) : "?"), 11) << "  "
        << Pad(absl::StrCat(k.pass(), "/", k.warn(), "/", k.fail(), "/", k.error(), "/", k.unmatched()), 22) << "  "
        << Pad(j.target_run_name().empty() ? j.target_run_id() : j.target_run_name(), target_w) << "  "
        << (j.first_culprit().empty() ? "-" : TerminalSafe(j.first_culprit())) << "\n";
  }
  return kExitOk;
}

int Watch(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const char kHelp[] =
      "usage: parity watch JOB\n\nFollows a job until it finishes: a progress bar on a terminal, one line per update\n"
      "otherwise, then the counts and the first culprit. A lost connection (parityd restarting,\n"
      "say) is retried for up to 60 s.\n\nexamples:\n  parity watch job-1a2b3c4d5e6f7a8b\n";
  Common c;
  std::vector<std::string> pos;
  Args a;
  AddCommon(&a, &c);
  if (int rc = ParseOrExit(a, args, &pos, 1, kHelp, out, err); rc >= 0) return rc;
  const std::string server = ServerAddress(c.server);
  auto stub = v1::Jobs::NewStub(MakeChannel(server));
  absl::StatusOr<v1::Job> job = WatchJob(stub.get(), pos[0], c.json, out, err);
  if (!job.ok()) {
    return ErrorExitCode("parity watch",
                         absl::Status(job.status().code(), absl::StrCat(job.status().message(), " (", server, ")")), err);
  }
  if (c.json) {
    out << JobJson(*job).Dump(2) << "\n";
  } else {
    PrintJobSummary(*job, c.color(), out);
  }
  return JobExitCode(*job, c, err);
}

// The culprits, largest growth first, with their figures and the first frames of their stack;
// the noise floor; the failing operators within it. A job stored before the analysis kept its
// figures lists its culprits in dump order.
void PrintCulprits(const v1::JobSummary& sum, bool color, std::ostream& out) {
  const int n = sum.ranked_culprits_size() > 0 ? sum.ranked_culprits_size() : sum.culprits_size();
  out << "culprits (" << n + sum.more_culprits() << ")" << (n ? ", largest error growth first:" : "") << "\n";
  if (sum.ranked_culprits_size() == 0) {
    for (const std::string& api : sum.culprits()) out << "  " << Paint(TerminalSafe(api), "31;1", color) << "\n";
  }
  for (const v1::Culprit& k : sum.ranked_culprits()) {
    out << "  " << Paint(TerminalSafe(k.api()), "31;1", color) << "  "
        << CulpritFigures(PhaseFromProto(k.phase()), k.has_growth() ? k.growth() : kUnknownError,
                          k.has_out_error() ? k.out_error() : kUnknownError)
        << "\n";
    // The innermost frames: msprobe's stack lists the caller first.
    std::vector<absl::string_view> lines = absl::StrSplit(k.stack(), '\n', absl::SkipWhitespace());
    for (size_t i = 0; i < lines.size() && i < 4; ++i) out << "      " << TerminalSafe(std::string(absl::StripAsciiWhitespace(lines[i]))) << "\n";
    if (lines.size() > 4) out << "      ... (" << lines.size() - 4 << " more lines: parity summary --json)\n";
  }
  if (sum.more_culprits() > 0) out << "  ... and " << sum.more_culprits() << " more\n";
  out << NoiseFloorText(sum.has_noise_growth() ? sum.noise_growth() : kUnknownError, sum.growth_threshold(),
                        sum.noise_samples(), sum.has_growth_fence() ? sum.growth_fence() : kUnknownError)
      << "\n";
  if (sum.within_noise_size() > 0) {
    out << "within the noise floor (fail, but amplify the error they receive no more than passing operators do): "
        << sum.within_noise_size() << "\n";
    for (const std::string& api : sum.within_noise()) out << "  " << TerminalSafe(api) << "\n";
  }
}

int Summary(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const char kHelp[] =
      "usage: parity summary JOB [--worst N] [--tree]\n"
      "\nA job's counts; its culprit operators (outputs fail while the inputs pass, and the error\n"
      "grows more than the run's noise floor allows), largest error growth first, each with its\n"
      "phase, growth, error and the code that called it; the noise floor; the failing operators\n"
      "within it; and the N worst operators (default 5, at most 100) by each metric its policy\n"
      "reports (Cosine, MaxAbsErr, MaxRelativeErr, PCC, ...). With --tree, the target's module\n"
      "tree (msprobe's construct.json) with each culprit marked <--- *** HERE ***.\n"
      "\nexamples:\n  parity summary job-1a2b3c4d5e6f7a8b --worst 3\n  parity summary job-1a2b3c4d5e6f7a8b --tree\n";
  Common c;
  std::string worst = "5";
  bool tree = false;
  std::vector<std::string> pos;
  Args a;
  AddCommon(&a, &c);
  a.Value("--worst", &worst);
  a.Bool("--tree", &tree);
  if (int rc = ParseOrExit(a, args, &pos, 1, kHelp, out, err); rc >= 0) return rc;
  int n;
  if (!absl::SimpleAtoi(worst, &n) || n < 1 || n > 100) {
    return ErrorExitCode("parity summary",
                         absl::InvalidArgumentError(absl::StrCat("--worst needs an integer from 1 to 100, got '", worst, "'")), err);
  }
  const std::string server = ServerAddress(c.server);
  auto q = v1::Query::NewStub(MakeChannel(server));
  grpc::ClientContext ctx;
  v1::GetJobSummaryRequest req;
  req.set_job_id(pos[0]);
  req.set_worst_per_metric(n);
  req.set_module_tree(tree);
  v1::JobSummary sum;
  grpc::Status s = q->GetJobSummary(&ctx, req, &sum);
  if (!s.ok()) return RpcError(s, server, err);
  if (c.json) {
    Json doc = JobSummaryJson(sum);
    doc.mutable_object().insert(doc.mutable_object().begin(), {"job", JobJson(sum.job())});
    out << doc.Dump(2) << "\n";
    return JobExitCode(sum.job(), c, err);
  }
  const v1::Job& j = sum.job();
  out << "job " << j.job_id() << " " << StateText(j.state()) << ": " << CountsText(sum.counts())
      << "\n  golden " << j.golden_run_id() << ", target " << j.target_run_id() << ", "
      << j.pairs_done() << "/" << (j.pairs_total() ? absl::StrCat(j.pairs_total()) : "?")
      << " pairs\n";
  if (!j.error().empty()) out << "job error: " << TerminalSafe(j.error()) << "\n";
  PrintCulprits(sum, c.color(), out);
  if (tree) out << TreeSection(TreeFromProto(sum), c.color());
  std::string metric;
  for (const v1::WorstOp& w : sum.worst()) {
    if (w.metric() != metric) {
      metric = w.metric();
      out << "worst by " << metric << ":\n";
    }
    out << "  " << Pad(PyRepr(w.value()), 20) << "  " << TerminalSafe(w.name()) << "\n";
  }
  return JobExitCode(j, c, err);
}

int Cancel(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const char kHelp[] =
      "usage: parity cancel JOB\n"
      "\nStops a running job: no more pairs are compared; the results stored so far\n"
      "stay readable. A job already finished is an error (exit 2). Needs an agent or admin token\n"
      "on servers started with --auth=tokens.\n\nexamples:\n  parity cancel job-1a2b3c4d5e6f7a8b\n";
  Common c;
  std::vector<std::string> pos;
  Args a;
  AddCommon(&a, &c);
  if (int rc = ParseOrExit(a, args, &pos, 1, kHelp, out, err); rc >= 0) return rc;
  const std::string server = ServerAddress(c.server);
  auto stub = v1::Jobs::NewStub(MakeChannel(server));
  grpc::ClientContext ctx;
  v1::CancelJobRequest req;
  req.set_job_id(pos[0]);
  v1::Job job;
  grpc::Status s = stub->Cancel(&ctx, req, &job);
  if (!s.ok()) return RpcError(s, server, err);
  if (c.json) {
    out << JobJson(job).Dump(2) << "\n";
  } else {
    out << "job " << job.job_id() << " " << StateText(job.state()) << " after " << job.pairs_done()
        << " pair(s): " << CountsText(job.counts()) << "\n";
  }
  return kExitOk;
}

int Submit(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const char kHelp[] =
      "usage: parity submit --golden RUN --target RUN [--policy msprobe|forge|torch] [--config FILE]\n"
      "                     [--fuzzy] [--watch]\n"
      "\nCreates a job comparing two uploaded runs; with --watch, follows it to the end.\n"
      "\nexamples:\n  parity submit --golden run-aaaa --target run-bbbb --policy torch --watch\n";
  Common c;
  std::string golden, target, policy, config;
  bool fuzzy = false, watch = false;
  std::vector<std::string> pos;
  Args a;
  AddCommon(&a, &c);
  a.Value("--golden", &golden);
  a.Value("--target", &target);
  a.Value("--policy", &policy);
  a.Value("--config", &config);
  a.Bool("--fuzzy", &fuzzy);
  a.Bool("--watch", &watch);
  if (int rc = ParseOrExit(a, args, &pos, 0, kHelp, out, err); rc >= 0) return rc;
  if (golden.empty() || target.empty()) {
    return ErrorExitCode("parity submit",
                         absl::InvalidArgumentError("--golden and --target are required"), err);
  }
  v1::SubmitJobRequest req;
  req.set_golden_run_id(golden);
  req.set_target_run_id(target);
  if (!policy.empty()) {
    PolicyKind k;
    if (!ParsePolicyKind(policy, &k)) {
      return ErrorExitCode("parity submit",
                           absl::InvalidArgumentError("--policy must be msprobe, forge or torch"), err);
    }
    req.mutable_config()->set_policy(static_cast<v1::Policy>(static_cast<int>(k) + 1));
  }
  if (fuzzy) req.mutable_config()->set_match_mode(v1::MATCH_MODE_FUZZY);
  if (!config.empty()) {
    absl::StatusOr<CompareConfig> check = LoadCompareConfig(config);
    if (!check.ok()) {
      return ErrorExitCode("parity submit", check.status(), err);
    }
    req.mutable_config()->set_config_json(*ReadFileToString(config));
  }
  const std::string server = ServerAddress(c.server);
  auto stub = v1::Jobs::NewStub(MakeChannel(server));
  grpc::ClientContext ctx;
  v1::Job job;
  grpc::Status s = stub->Submit(&ctx, req, &job);
  if (!s.ok()) return RpcError(s, server, err);
  if (!watch) {
    if (c.json) {
      out << JobJson(job).Dump(2) << "\n";
    } else {
      out << job.job_id() << "\n";
    }
    return kExitOk;
  }
  absl::StatusOr<v1::Job> done = WatchJob(stub.get(), job.job_id(), c.json, out, err);
  if (!done.ok()) {
    return ErrorExitCode("parity submit", done.status(), err);
  }
  if (c.json) {
    out << JobJson(*done).Dump(2) << "\n";
  } else {
    PrintJobSummary(*done, c.color(), out);
  }
  return JobExitCode(*done, c, err);
}

}  // namespace remote
}  // namespace parity
