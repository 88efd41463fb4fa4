// parity results | show | diff | export: a job's stored results.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <ostream>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_join.h"
#include "client/cli.h"
#include "client/export.h"
#include "client/proto_util.h"
#include "client/report_format.h"
#include "common/base/control_chars.h"
#include "client/terminal.h"
#include "common/base/file_util.h"
#include "common/base/json.h"
#include "common/base/pyformat.h"
#include "parity/v1/parity.grpc.pb.h"
#include "client/remote_common.h"

namespace parity {
namespace remote {

int Results(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const char kHelp[] =
      "usage: parity results JOB [--verdict V ...] [--op GLOB] [--phase forward|backward]\n"
      "                      [--role input|output|parameter|gradient] [--sort METRIC] [--desc] "
      "[--limit N]\n"
      "\nLists per-operator results in dump order (or sorted by a metric, e.g. Cosine, MaxAbsErr, "
      "PCC),\n"
      "at most --limit of them (default 100; 0: all). The exit code is the whole job's.\n"
      "\nexamples:\n  parity results job-1a2b --verdict fail\n"
      "  parity results job-1a2b --op 'Functional.linear.*' --sort Cosine --limit 10\n";
  Common c;
  std::vector<std::string> verdicts, pos;
  std::string glob, phase, role, sort, limit = "100";
  bool desc = false;
  Args a;
  AddCommon(&a, &c);
  a.Multi("--verdict", &verdicts);
  a.Value("--op", &glob);
  a.Value("--phase", &phase);
  a.Value("--role", &role);
  a.Value("--sort", &sort);
  a.Value("--limit", &limit);
  a.Bool("--desc", &desc);
  if (int rc = ParseOrExit(a, args, &pos, 1, kHelp, out, err); rc >= 0) return rc;
  int n;
  if (!absl::SimpleAtoi(limit, &n) || n < 0) {
    return ErrorExitCode("parity results",
                         absl::InvalidArgumentError("--limit needs a non-negative integer (0 = all)"), err);
  }
  v1::ListOpResultsRequest req;
  req.set_job_id(pos[0]);
  for (const std::string& v : verdicts) {
    absl::StatusOr<v1::Verdict> pv = ParseVerdictFlag(v);
    if (!pv.ok()) {
      return ErrorExitCode("parity results", pv.status(), err);
    }
    req.add_verdicts(*pv);
  }
  req.set_op_glob(glob);
  if (!phase.empty()) {
    if (phase != "forward" && phase != "backward") {
      return ErrorExitCode("parity results",
                           absl::InvalidArgumentError("--phase must be forward or backward"), err);
    }
    req.set_phase(phase == "forward" ? v1::PHASE_FORWARD : v1::PHASE_BACKWARD);
  }
  if (!role.empty()) {
    v1::Role r = v1::ROLE_UNSPECIFIED;
    if (!v1::Role_Parse("ROLE_" + absl::AsciiStrToUpper(role), &r) || r == v1::ROLE_UNSPECIFIED) {
      return ErrorExitCode("parity results",
                           absl::InvalidArgumentError("--role must be input, output, parameter or gradient"), err);
    }
    req.set_role(r);
  }
  req.set_sort_metric(sort);
  req.set_descending(desc);
  const std::string server = ServerAddress(c.server);
  auto q = v1::Query::NewStub(MakeChannel(server));
  absl::StatusOr<std::vector<v1::OpResult>> rows = FetchAll(q.get(), req, n == 0 ? -1 : n);
  if (!rows.ok()) {
    return ErrorExitCode("parity results",
                         absl::Status(rows.status().code(), absl::StrCat(rows.status().message(), " (", server, ")")), err);
  }
  // The exit code follows the whole job, not the rows printed; the count of every matching row
  // says how many were left out.
  auto jobs = v1::Jobs::NewStub(MakeChannel(server));
  grpc::ClientContext jctx;
  v1::GetJobRequest jreq;
  jreq.set_job_id(pos[0]);
  v1::Job job;
  if (grpc::Status s = jobs->Get(&jctx, jreq, &job); !s.ok()) return RpcError(s, server, err);
  int64_t total = static_cast<int64_t>(rows->size());
  if (n > 0 && total == n) {
    grpc::ClientContext tctx;
    v1::ListOpResultsRequest treq = req;
    treq.set_page_size(1);
    v1::ListOpResultsResponse tresp;
    if (grpc::Status s = q->ListOpResults(&tctx, treq, &tresp); !s.ok()) return RpcError(s, server, err);
    total = tresp.total();
  }
  if (c.json) {
    Json head = Json::MakeObject();
    head.Set("job", JobJson(job));
    head.Set("total", Json::Integer(total));
    WriteResultsJson(head, *rows, out);
  } else {
    const ResultsReport page(*rows);
    WriteRowsTable(page.context(), c.color(), out);
    if (total > static_cast<int64_t>(rows->size())) {
      out << rows->size() << " of " << total << " result(s); --limit 0 lists all\n";
    } else {
      out << rows->size() << " result(s)\n";
    }
  }
  return JobExitCode(job, c, err);
}

int Show(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const char kHelp[] =
      "usage: parity show JOB ITEM\n"
      "\nEverything stored for one item's result: names, verdict, metrics, each side's dtype, shape\n"
      "and statistics.\n"
      "\nexamples:\n  parity show job-1a2b Functional.linear.1.forward.output.0\n";
  Common c;
  std::vector<std::string> pos;
  Args a;
  AddCommon(&a, &c);
  if (int rc = ParseOrExit(a, args, &pos, 2, kHelp, out, err); rc >= 0) return rc;
  const std::string server = ServerAddress(c.server);
  auto q = v1::Query::NewStub(MakeChannel(server));
  grpc::ClientContext ctx;
  v1::GetOpResultRequest req;
  req.set_job_id(pos[0]);
  req.set_name(pos[1]);
  v1::OpResult r;
  grpc::Status s = q->GetOpResult(&ctx, req, &r);
  if (!s.ok()) return RpcError(s, server, err);
  if (c.json) {
    if (r.stack().empty()) {
      out << ResultJson(r);
    } else {  // the item document with the API's stack (item.schema.json: "stack")
      absl::StatusOr<Json> doc = ParseJson(ResultJson(r));
      if (!doc.ok()) return ErrorExitCode("parity show", doc.status(), err);
      doc->Set("stack", Json::String(r.stack()));
      out << doc->Dump(2) << "\n";
    }
  } else {
    const CheckResult cr = CheckResultFromProto(r);
    const bool color = c.color();
    // An enum's name without its prefix ("PHASE_FORWARD" -> "forward"); "unknown" for a value
    // this build does not know (a store written by a newer parityd).
    auto enum_text = [](const std::string& name, size_t prefix) {
      return name.size() > prefix ? absl::AsciiStrToLower(name.substr(prefix)) : std::string("unknown");
    };
    out << "item:          " << TerminalSafe(r.key().name()) << "\n"
        << "golden item:   " << (r.golden_name().empty() ? "-" : TerminalSafe(r.golden_name())) << "\n"
        << "operator:      " << TerminalSafe(r.key().api()) << " (" << TerminalSafe(r.key().op_type()) << ", "
        << enum_text(v1::Phase_Name(r.key().phase()), 6) << " " << enum_text(v1::Role_Name(r.key().role()), 5)
        << ")\n"
        << "verdict:       " << Paint(VerdictName(cr.verdict), VerdictColorCode(cr.verdict), color)
        << "   (" << enum_text(v1::Policy_Name(r.policy()), 7) << " says: "
        << (cr.peer_verdict.empty() ? "-" : TerminalSafe(cr.peer_verdict)) << ")\n"
        << "culprit:       "
        << (r.culprit() == v1::CULPRIT_STATUS_CULPRIT      ? "yes: outputs fail while the inputs pass"
            : r.culprit() == v1::CULPRIT_STATUS_PROPAGATED
                ? "no, propagated: explained by another operator (a failing input, its forward entry, an inner culprit)"
                : "-")
        << "\n";
    if (!r.stack().empty()) {
      out << "stack:\n";
      for (absl::string_view line : absl::StrSplit(r.stack(), '\n', absl::SkipWhitespace())) {
        out << "  " << TerminalSafe(std::string(absl::StripAsciiWhitespace(line))) << "\n";
      }
    }
    auto dtype = [](v1::DType d) {
      return d == v1::DTYPE_UNSPECIFIED ? std::string("-") : std::string(DTypeName(static_cast<DType>(static_cast<int>(d) - 1)));
    };
    out << "dtype / shape: golden " << dtype(r.golden_dtype()) << " [" << absl::StrJoin(r.golden_shape(), ", ")
        << "], target " << dtype(r.target_dtype()) << " [" << absl::StrJoin(r.target_shape(), ", ") << "]\n";
    auto stats = [](const v1::Statistics& st) {
      auto one = [](const char* name, bool has, double v) {
        return absl::StrCat(name, " ", has ? PyRepr(v) : std::string("-"));
      };
      return absl::StrCat(one("max", st.has_max(), st.max()), "  ", one("min", st.has_min(), st.min()), "  ",
                          one("mean", st.has_mean(), st.mean()), "  ", one("norm", st.has_norm(), st.norm()));
    };
    out << "golden stats:  " << (r.golden_name().empty() ? "-" : stats(r.golden_stats())) << "\n"
        << "target stats:  " << (r.target_dtype() == v1::DTYPE_UNSPECIFIED && r.target_shape().empty() &&
                                         !r.has_target_stats()
                                     ? "-"
                                     : stats(r.target_stats()))
        << "\n";
    out << "metrics:\n";
    for (const Metric& m : cr.metrics) out << "  " << Pad(m.name, 28) << TerminalSafe(m.value.ToString()) << "\n";
    if (!cr.message.empty()) out << "message:\n  " << TerminalSafe(cr.message) << "\n";
  }
  return r.verdict() == v1::VERDICT_FAIL || r.verdict() == v1::VERDICT_ERROR ? kExitFailures : kExitOk;
}

int Diff(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const char kHelp[] =
      "usage: parity diff BASE_JOB JOB [--min-change X]\n"
      "\nOperators whose verdict or metric got worse from BASE_JOB to JOB (e.g. between builds).\n"
      "Exit code 1 when there is at least one regression.\n"
      "\nexamples:\n  parity diff job-yesterday job-today\n";
  Common c;
  std::string min_change;
  std::vector<std::string> pos;
  Args a;
  AddCommon(&a, &c);
  a.Value("--min-change", &min_change);
  if (int rc = ParseOrExit(a, args, &pos, 2, kHelp, out, err); rc >= 0) return rc;
  v1::DiffJobsRequest req;
  req.set_base_job_id(pos[0]);
  req.set_job_id(pos[1]);
  if (!min_change.empty()) {
    double d;
    if (!absl::SimpleAtod(min_change, &d) || !(d >= 0)) {
      return ErrorExitCode("parity diff",
                           absl::InvalidArgumentError("--min-change needs a non-negative number"), err);
    }
    req.set_min_change(d);
  }
  const std::string server = ServerAddress(c.server);
  auto q = v1::Query::NewStub(MakeChannel(server));
  absl::StatusOr<std::vector<v1::OpRegression>> found = FetchPages(
      std::move(req), -1,
      [&q](grpc::ClientContext* ctx, const v1::DiffJobsRequest& r, v1::DiffJobsResponse* resp) {
        return q->DiffJobs(ctx, r, resp);
      },
      &v1::DiffJobsResponse::mutable_regressions);
  if (!found.ok()) return ListError(found.status(), server, err);
  const std::vector<v1::OpRegression>& regs = *found;
  if (c.json) {
    Json arr = Json::MakeArray();
    for (const auto& r : regs) {
      Json o = Json::MakeObject();
      o.Set("name", Json::String(r.name()));
      o.Set("reason", Json::String(r.reason()));
      arr.Append(std::move(o));
    }
    out << arr.Dump(2) << "\n";
  } else {
    for (const auto& r : regs) out << Pad(r.name(), 50) << "  " << TerminalSafe(r.reason()) << "\n";
    out << regs.size() << " regression(s)\n";
  }
  return regs.empty() ? kExitOk : kExitFailures;
}

int Export(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const char kHelp[] =
      "usage: parity export JOB --format csv|json|model-explorer [-o FILE] [--metric cosine|pcc|max_abs_err|max_rel_err]\n"
      "                     [--graph-id ID]\n"
      "\ncsv: msprobe's column set and order for the job's mode (real data, statistics, md5), byte\n"
      "for byte what parity compare --csv writes for the same two dumps.\n"
      "json: the job, its summary and every item (docs/schemas/export.schema.json).\n"
      "model-explorer: a Model Explorer node-data overlay with one value per operator (--metric,\n"
      "cosine by default) and red/yellow/green thresholds, plus FILE's .verdicts.json twin with the\n"
      "verdicts; nodes are keyed by operator (API) name under graph --graph-id (default main).\n"
      "\nexamples:\n  parity export job-1a2b --format csv -o compare_result.csv\n"
      "  parity export job-1a2b --format model-explorer -o overlay.json\n";
  Common c;
  std::string format, output, metric = "cosine", graph_id = "main";
  std::vector<std::string> pos;
  Args a;
  AddCommon(&a, &c);
  a.Value("--format", &format);
  a.Value("-o", &output);
  a.Value("--output", &output);
  a.Value("--metric", &metric);
  a.Value("--graph-id", &graph_id);
  if (int rc = ParseOrExit(a, args, &pos, 1, kHelp, out, err); rc >= 0) return rc;
  if (format != "csv" && format != "json" && format != "model-explorer") {
    return ErrorExitCode("parity export",
                         absl::InvalidArgumentError("--format must be csv, json or model-explorer"), err);
  }
  if (format == "model-explorer" && output.empty()) {
    return ErrorExitCode("parity export",
                         absl::InvalidArgumentError("model-explorer writes two files; give -o FILE"), err);
  }
  const std::string server = ServerAddress(c.server);
  auto channel = MakeChannel(server);
  auto q = v1::Query::NewStub(channel);
  grpc::ClientContext sctx;
  v1::GetJobSummaryRequest sreq;
  sreq.set_job_id(pos[0]);
  v1::JobSummary summary;
  grpc::Status s = q->GetJobSummary(&sctx, sreq, &summary);
  if (!s.ok()) return RpcError(s, server, err);
  v1::ListOpResultsRequest req;
  req.set_job_id(pos[0]);
  req.set_with_stack(format == "csv");
  bool has_stacks = false;
  absl::StatusOr<std::vector<v1::OpResult>> rows = FetchAll(q.get(), req, -1, &has_stacks);
  if (!rows.ok()) {
    return ErrorExitCode("parity export", rows.status(), err);
  }
  auto write = [&](const std::string& path, const std::string& text) {
    if (path.empty() || path == "-") {
      out << text;
      return true;
    }
    absl::Status ws = WriteStringToFile(path, text);
    if (!ws.ok()) err << "parity export: " << ws.message() << "\n";
    return ws.ok();
  };
  if (format == "csv") {
    return write(output, ExportCsv(*rows, has_stacks, summary.job().target_dump_format())) ? kExitOk : kExitUsage;
  }
  if (format == "json") {
    Json head = Json::MakeObject();
    head.Set("job", JobJson(summary.job()));
    head.Set("summary", JobSummaryJson(summary));
    std::ostringstream doc;
    WriteResultsJson(head, *rows, doc);
    return write(output, doc.str()) ? kExitOk : kExitUsage;
  }
  absl::StatusOr<ModelExplorerExport> me =
      ExportModelExplorer(*rows, metric, graph_id, absl::StrCat("parity ", pos[0]));
  if (!me.ok()) {
    return ErrorExitCode("parity export", me.status(), err);
  }
  std::string verdict_path = output;
  if (verdict_path.size() > 5 && verdict_path.substr(verdict_path.size() - 5) == ".json") {
    verdict_path = verdict_path.substr(0, verdict_path.size() - 5);
  }
  verdict_path += ".verdicts.json";
  if (!write(output, me->metric_overlay) || !write(verdict_path, me->verdict_overlay)) return kExitUsage;
  if (!c.json) out << "wrote " << output << " and " << verdict_path << "\n";
  return kExitOk;
}

}  // namespace remote
}  // namespace parity
