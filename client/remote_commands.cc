// parity runs | jobs | submit | watch | cancel | summary | results | show | diff | export | token |
// status: the CLI over parityd's Jobs, Query and Admin APIs.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <ostream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/args.h"
#include "client/cli.h"
#include "client/export.h"
#include "client/proto_util.h"
#include "client/report_format.h"
#include "client/terminal.h"
#include "common/base/file_util.h"
#include "common/base/json.h"
#include "common/base/pyformat.h"
#include "parity/v1/parity.grpc.pb.h"

namespace parity {
namespace {

constexpr char kCommonHelp[] =
    "common options:\n"
    "  --server ADDR   parityd address (default $PARITY_SERVER or 127.0.0.1:50051)\n"
    "  --tls-ca FILE   connect with TLS, trusting this CA (default $PARITY_TLS_CA; none: plain)\n"
    "  --tls-cert FILE, --tls-key FILE   client certificate for mutual TLS ($PARITY_TLS_CERT/KEY)\n"
    "  --token T       bearer token for servers started with --auth=tokens (default $PARITY_TOKEN)\n"
    "  --json          machine-readable output\n"
    "  --no-color      no colours (also when NO_COLOR is set or stdout is not a terminal)\n"
    "  -h, --help      this help\n"
    "\n"
    "exit codes: 0 all pass, 1 precision failures (or regressions), 2 usage or system error\n";

struct Common {
  std::string server;
  bool json = false;
  bool no_color = false;
  bool color() const { return !no_color && ColorsWanted(stdout); }
};

// The connection flags (TLS files, token) of the command being run (one per process), and its
// --server flag.
ClientConnection g_connection;
const std::string* g_server_flag = nullptr;

void AddCommon(Args* a, Common* c) {
  a->Value("--server", &c->server);
  g_server_flag = &c->server;
  a->Value("--tls-ca", &g_connection.ca);
  a->Value("--tls-cert", &g_connection.cert);
  a->Value("--tls-key", &g_connection.key);
  a->Value("--token", &g_connection.token);
  a->Bool("--json", &c->json);
  a->Bool("--no-color", &c->no_color);
}

// Parses; returns -1 to go on, or an exit code (help printed, or a usage error).
int ParseOrExit(const Args& a, const std::vector<std::string>& args, std::vector<std::string>* pos,
                size_t want_positional, const char* help, std::ostream& out, std::ostream& err) {
  bool help_wanted = false;
  std::string error;
  if (!a.Parse(args, pos, &help_wanted, &error)) {
    err << "parity: " << error << "\n\n" << help << "\n" << kCommonHelp;
    return kExitUsage;
  }
  if (help_wanted) {
    out << help << "\n" << kCommonHelp;
    return kExitOk;
  }
  if (pos->size() != want_positional) {
    err << "parity: expected " << want_positional << " argument(s), got " << pos->size() << "\n\n"
        << help << "\n" << kCommonHelp;
    return kExitUsage;
  }
  if (absl::Status tls = ConfigureClient(g_connection); !tls.ok()) {
    err << "parity: " << tls.message() << "\n";
    return kExitUsage;
  }
  if (g_server_flag != nullptr) {
    if (absl::Status addr = CheckServerAddress(ServerAddress(*g_server_flag)); !addr.ok()) {
      err << "parity: " << addr.message() << "\n";
      return kExitUsage;
    }
  }
  return -1;
}

int RpcError(const grpc::Status& s, const std::string& server, std::ostream& err) {
  err << "parity: " << s.error_message() << " (" << server << ", code " << s.error_code() << ")\n";
  return kExitUsage;
}

std::string TimeText(int64_t ms) {
  if (ms == 0) return "-";
  std::time_t t = ms / 1000;
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string StateText(v1::JobState s) {
  std::string n = v1::JobState_Name(s);
  return absl::AsciiStrToLower(n.substr(std::string("JOB_STATE_").size()));
}

std::string Pad(const std::string& s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }

std::string CountsText(const v1::VerdictCounts& c) {
  return absl::StrCat(c.pass(), " pass, ", c.warn(), " warn, ", c.fail(), " fail, ", c.error(), " error, ",
                      c.unmatched(), " unmatched", c.skipped() ? absl::StrCat(", ", c.skipped(), " skipped") : "");
}

Json CountsJson(const v1::VerdictCounts& c) {
  Json j = Json::MakeObject();
  j.Set("PASS", Json::Integer(c.pass()));
  j.Set("WARN", Json::Integer(c.warn()));
  j.Set("FAIL", Json::Integer(c.fail()));
  j.Set("ERROR", Json::Integer(c.error()));
  j.Set("UNMATCHED", Json::Integer(c.unmatched()));
  j.Set("SKIPPED", Json::Integer(c.skipped()));
  return j;
}

Json JobJson(const v1::Job& j) {
  Json o = Json::MakeObject();
  o.Set("job_id", Json::String(j.job_id()));
  o.Set("project", Json::String(j.project()));
  o.Set("state", Json::String(StateText(j.state())));
  o.Set("golden_run_id", Json::String(j.golden_run_id()));
  o.Set("target_run_id", Json::String(j.target_run_id()));
  o.Set("pairs_done", Json::Integer(j.pairs_done()));
  o.Set("pairs_total", Json::Integer(j.pairs_total()));
  o.Set("counts", CountsJson(j.counts()));
  o.Set("first_culprit", Json::String(j.first_culprit()));
  o.Set("error", Json::String(j.error()));
  o.Set("created_at_ms", Json::Integer(j.created_at_ms()));
  return o;
}

int JobExitCode(const v1::Job& j) {
  if (j.state() == v1::JOB_STATE_FAILED || j.state() == v1::JOB_STATE_CANCELLED) return kExitUsage;
  return j.counts().fail() > 0 || j.counts().error() > 0 ? kExitFailures : kExitOk;
}

absl::StatusOr<v1::Verdict> ParseVerdictFlag(const std::string& s) {
  Verdict v;
  if (!ParseVerdict(s, &v)) return absl::InvalidArgumentError("--verdict must be pass, warn, fail, error, unmatched or skipped, got '" + s + "'");
  return static_cast<v1::Verdict>(static_cast<int>(v) + 1);
}

std::string ResultLine(const v1::OpResult& r, bool color) {
  const CheckResult c = CheckResultFromProto(r);
  std::string culprit = r.culprit() == v1::CULPRIT_STATUS_CULPRIT      ? "culprit"
                        : r.culprit() == v1::CULPRIT_STATUS_PROPAGATED ? "propagated"
                                                                       : "";
  std::string msg = c.message;
  for (char& ch : msg) {
    if (ch == '\n') ch = ' ';
  }
  return absl::StrCat(Paint(Pad(VerdictName(c.verdict), 10), VerdictColorCode(c.verdict), color), "  ",
                      Pad(culprit, 10), "  ", r.key().name(), "  ", KeyMetrics(PolicyFromProto(r.policy()), c),
                      msg.empty() ? "" : "  ", msg);
}

// Up to `limit` rows (every row when negative) of a paged listing, page by page (parityd
// answers at most 1000 per page): `call` is the RPC, `rows` the response's repeated field.
template <typename Req, typename Resp, typename Row, typename Call>
absl::StatusOr<std::vector<Row>> FetchPages(
    Req req, int64_t limit, const Call& call,
    google::protobuf::RepeatedPtrField<Row>* (Resp::*rows)()) {
  std::vector<Row> out;
  req.set_page_size(static_cast<int32_t>(limit >= 0 ? std::min<int64_t>(limit, 1000) : 1000));
  while (true) {
    grpc::ClientContext ctx;
    Resp resp;
    grpc::Status s = call(&ctx, req, &resp);
    if (!s.ok()) return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    for (Row& r : *(resp.*rows)()) {
      if (limit >= 0 && static_cast<int64_t>(out.size()) >= limit) return out;
      out.push_back(std::move(r));
    }
    if (resp.next_page_token().empty() ||
        (limit >= 0 && static_cast<int64_t>(out.size()) >= limit)) {
      return out;
    }
    req.set_page_token(resp.next_page_token());
  }
}

// Every result of a job (up to `limit` when not negative).
absl::StatusOr<std::vector<v1::OpResult>> FetchAll(v1::Query::Stub* q, v1::ListOpResultsRequest req,
                                                   int64_t limit) {
  return FetchPages(
      std::move(req), limit,
      [q](grpc::ClientContext* ctx, const v1::ListOpResultsRequest& r,
          v1::ListOpResultsResponse* resp) { return q->ListOpResults(ctx, r, resp); },
      &v1::ListOpResultsResponse::mutable_results);
}

// A listing's error as RpcError prints a gRPC status.
int ListError(const absl::Status& s, const std::string& server, std::ostream& err) {
  err << "parity: " << s.message() << " (" << server << ", code " << static_cast<int>(s.code())
      << ")\n";
  return kExitUsage;
}

// ----------------------------------------------------------------------------------------------

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
    err << "parity runs: --limit needs a positive integer\n";
    return kExitUsage;
  }
  v1::ListRunsRequest req;
  req.set_project(project);
  req.set_model(model);
  req.set_structure_hash(structure);
  for (const std::string& l : labels) {
    std::string k, v;
    if (!SplitKeyValue(l, &k, &v)) {
      err << "parity runs: --label needs key=value, got '" << l << "'\n";
      return kExitUsage;
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
  out << Pad("RUN", 22) << "  " << Pad("SIDE", 6) << "  " << Pad("PROJECT", 12) << "  " << Pad("ITEMS", 7) << "  "
      << Pad("STATE", 9) << "  " << Pad("CREATED (UTC)", 19) << "  " << Pad("STRUCTURE", 12) << "  NAME\n";
  for (const v1::Run& r : *runs) {
    out << Pad(r.run_id(), 22) << "  " << Pad(r.metadata().side() == v1::SIDE_GOLDEN ? "golden" : "target", 6) << "  "
        << Pad(r.metadata().project(), 12) << "  " << Pad(absl::StrCat(r.item_count()), 7) << "  "
        << Pad(r.complete() ? "complete" : "uploading", 9) << "  " << Pad(TimeText(r.created_at_ms()), 19) << "  "
        << Pad(r.structure_hash().substr(0, 12), 12) << "  " << r.metadata().name() << "\n";
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
    err << "parity jobs: --limit needs a positive integer\n";
    return kExitUsage;
  }
  v1::ListJobsRequest req;
  req.set_project(project);
  req.set_run_id(run);
  if (!state.empty()) {
    v1::JobState s;
    if (!v1::JobState_Parse("JOB_STATE_" + absl::AsciiStrToUpper(state), &s) || s == v1::JOB_STATE_UNSPECIFIED) {
      err << "parity jobs: --state must be queued, running, done, failed or cancelled\n";
      return kExitUsage;
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
  out << Pad("JOB", 22) << "  " << Pad("STATE", 9) << "  " << Pad("PAIRS", 11) << "  " << Pad("PASS/WARN/FAIL/ERR/UNM", 24)
      << "  FIRST CULPRIT\n";
  for (const v1::Job& j : *jobs) {
    const auto& k = j.counts();
    out << Pad(j.job_id(), 22) << "  " << Pad(StateText(j.state()), 9) << "  "
        << Pad(absl::StrCat(j.pairs_done(), "/", j.pairs_total() ? absl::StrCat(j.pairs_total()) : "?"), 11) << "  "
        << Pad(absl::StrCat(k.pass(), "/", k.warn(), "/", k.fail(), "/", k.error(), "/", k.unmatched()), 24) << "  "
        << (j.first_culprit().empty() ? "-" : j.first_culprit()) << "\n";
  }
  return kExitOk;
}

// Streams a job's progress until it is final; returns its last state. A stream lost to the
// network, a parityd restart or gRPC's memory quota (UNAVAILABLE, CANCELLED,
// RESOURCE_EXHAUSTED) is opened again, with backoff, for up to kWatchRetrySeconds after the
// loss, counted afresh once an update has arrived.
constexpr int kWatchRetrySeconds = 60;
absl::StatusOr<v1::Job> WatchJob(v1::Jobs::Stub* stub, const std::string& job_id, bool quiet,
                                 std::ostream& out, std::ostream& err) {
  v1::WatchJobRequest req;
  req.set_job_id(job_id);
  v1::JobProgress p;
  v1::Job last;
  ProgressBar bar("comparing");
  int64_t logged_done = -1;
  auto lost_since = std::chrono::steady_clock::now();
  auto backoff = std::chrono::milliseconds(500);
  for (;;) {
    grpc::ClientContext ctx;
    auto reader = stub->Watch(&ctx, req);
    bool updated = false;
    while (reader->Read(&p)) {
      updated = true;
      last = p.job();
      const int64_t total =
          last.pairs_total() ? last.pairs_total() : std::max<int64_t>(last.pairs_done(), 1);
      bar.Update(
          static_cast<size_t>(last.pairs_done()), static_cast<size_t>(total),
          absl::StrCat(
              " ", last.counts().fail(), " fail, ", last.counts().error(), " error",
              last.first_culprit().empty() ? "" : ", culprit so far: " + last.first_culprit()));
      if (!quiet && !bar.enabled() && last.pairs_done() != logged_done) {
        logged_done = last.pairs_done();
        out << "job " << last.job_id() << " " << StateText(last.state()) << ": "
            << last.pairs_done() << "/"
            << (last.pairs_total() ? absl::StrCat(last.pairs_total()) : "?") << " pairs, "
            << CountsText(last.counts()) << "\n";
      }
    }
    grpc::Status s = reader->Finish();
    const auto now = std::chrono::steady_clock::now();
    if (updated) {
      lost_since = now;
      backoff = std::chrono::milliseconds(500);
    }
    const bool transient = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           s.error_code() == grpc::StatusCode::CANCELLED ||
                           s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
    if (s.ok() || !transient ||
        now + backoff > lost_since + std::chrono::seconds(kWatchRetrySeconds)) {
      bar.Finish();
      if (!s.ok()) {
        return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
      }
      return last;
    }
    err << "parity: watch of " << job_id << " lost (" << s.error_message() << "); reconnecting in "
        << backoff.count() << " ms\n";
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(8000));
  }
}

void PrintJobSummary(const v1::Job& j, bool color, std::ostream& out) {
  out << "job " << j.job_id() << " " << StateText(j.state()) << ": " << CountsText(j.counts()) << "\n";
  if (!j.error().empty()) out << "error: " << j.error() << "\n";
  if (!j.first_culprit().empty()) {
    out << Paint("First culprit", "31;1", color) << ": " << j.first_culprit() << "\n";
  }
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
    err << "parity watch: " << job.status().message() << " (" << server << ")\n";
    return kExitUsage;
  }
  if (c.json) {
    out << JobJson(*job).Dump(2) << "\n";
  } else {
    PrintJobSummary(*job, c.color(), out);
  }
  return JobExitCode(*job);
}

int Summary(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const char kHelp[] =
      "usage: parity summary JOB [--worst N]\n"
      "\nA job's counts, every culprit operator in dump order (its outputs fail while its\n"
      "inputs pass), and the N worst operators (default 5, at most 100) by each metric its\n"
      "policy reports (Cosine, MaxAbsErr, MaxRelativeErr, PCC, ...).\n"
      "\nexamples:\n  parity summary job-1a2b3c4d5e6f7a8b --worst 3\n";
  Common c;
  std::string worst = "5";
  std::vector<std::string> pos;
  Args a;
  AddCommon(&a, &c);
  a.Value("--worst", &worst);
  if (int rc = ParseOrExit(a, args, &pos, 1, kHelp, out, err); rc >= 0) return rc;
  int n;
  if (!absl::SimpleAtoi(worst, &n) || n < 1 || n > 100) {
    err << "parity summary: --worst needs an integer from 1 to 100, got '" << worst << "'\n";
    return kExitUsage;
  }
  const std::string server = ServerAddress(c.server);
  auto q = v1::Query::NewStub(MakeChannel(server));
  grpc::ClientContext ctx;
  v1::GetJobSummaryRequest req;
  req.set_job_id(pos[0]);
  req.set_worst_per_metric(n);
  v1::JobSummary sum;
  grpc::Status s = q->GetJobSummary(&ctx, req, &sum);
  if (!s.ok()) return RpcError(s, server, err);
  if (c.json) {
    out << MessageJson(sum) << "\n";
    return JobExitCode(sum.job());
  }
  const v1::Job& j = sum.job();
  out << "job " << j.job_id() << " " << StateText(j.state()) << ": " << CountsText(sum.counts())
      << "\n  golden " << j.golden_run_id() << ", target " << j.target_run_id() << ", "
      << j.pairs_done() << "/" << (j.pairs_total() ? absl::StrCat(j.pairs_total()) : "?")
      << " pairs\n";
  if (!j.error().empty()) out << "job error: " << j.error() << "\n";
  out << "culprits (" << sum.culprits_size() << ")" << (sum.culprits_size() ? ":" : "") << "\n";
  for (const std::string& api : sum.culprits()) {
    out << "  " << Paint(api, "31;1", c.color()) << "\n";
  }
  std::string metric;
  for (const v1::WorstOp& w : sum.worst()) {
    if (w.metric() != metric) {
      metric = w.metric();
      out << "worst by " << metric << ":\n";
    }
    out << "  " << Pad(PyRepr(w.value()), 20) << "  " << w.name() << "\n";
  }
  return JobExitCode(j);
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
    err << "parity submit: --golden and --target are required\n";
    return kExitUsage;
  }
  v1::SubmitJobRequest req;
  req.set_golden_run_id(golden);
  req.set_target_run_id(target);
  if (!policy.empty()) {
    PolicyKind k;
    if (!ParsePolicyKind(policy, &k)) {
      err << "parity submit: --policy must be msprobe, forge or torch\n";
      return kExitUsage;
    }
    req.mutable_config()->set_policy(static_cast<v1::Policy>(static_cast<int>(k) + 1));
  }
  if (fuzzy) req.mutable_config()->set_match_mode(v1::MATCH_MODE_FUZZY);
  if (!config.empty()) {
    absl::StatusOr<CompareConfig> check = LoadCompareConfig(config);
    if (!check.ok()) {
      err << "parity submit: " << check.status().message() << "\n";
      return kExitUsage;
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
    err << "parity submit: " << done.status().message() << "\n";
    return kExitUsage;
  }
  if (c.json) {
    out << JobJson(*done).Dump(2) << "\n";
  } else {
    PrintJobSummary(*done, c.color(), out);
  }
  return JobExitCode(*done);
}

int Results(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const char kHelp[] =
      "usage: parity results JOB [--verdict V ...] [--op GLOB] [--phase forward|backward]\n"
      "                      [--role input|output|parameter|gradient] [--sort METRIC] [--desc] "
      "[--limit N]\n"
      "\nLists per-operator results in dump order (or sorted by a metric, e.g. Cosine, MaxAbsErr, "
      "PCC),\n"
      "at most --limit of them (default 100; 0: all).\n"
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
    err << "parity results: --limit needs a non-negative integer (0 = all)\n";
    return kExitUsage;
  }
  v1::ListOpResultsRequest req;
  req.set_job_id(pos[0]);
  for (const std::string& v : verdicts) {
    absl::StatusOr<v1::Verdict> pv = ParseVerdictFlag(v);
    if (!pv.ok()) {
      err << "parity results: " << pv.status().message() << "\n";
      return kExitUsage;
    }
    req.add_verdicts(*pv);
  }
  req.set_op_glob(glob);
  if (!phase.empty()) {
    if (phase != "forward" && phase != "backward") {
      err << "parity results: --phase must be forward or backward\n";
      return kExitUsage;
    }
    req.set_phase(phase == "forward" ? v1::PHASE_FORWARD : v1::PHASE_BACKWARD);
  }
  if (!role.empty()) {
    v1::Role r;
    if (!v1::Role_Parse("ROLE_" + absl::AsciiStrToUpper(role), &r) || r == v1::ROLE_UNSPECIFIED) {
      err << "parity results: --role must be input, output, parameter or gradient\n";
      return kExitUsage;
    }
    req.set_role(r);
  }
  req.set_sort_metric(sort);
  req.set_descending(desc);
  const std::string server = ServerAddress(c.server);
  auto q = v1::Query::NewStub(MakeChannel(server));
  absl::StatusOr<std::vector<v1::OpResult>> rows = FetchAll(q.get(), req, n == 0 ? -1 : n);
  if (!rows.ok()) {
    err << "parity results: " << rows.status().message() << " (" << server << ")\n";
    return kExitUsage;
  }
  bool failures = false;
  for (const v1::OpResult& r : *rows) {
    failures = failures || r.verdict() == v1::VERDICT_FAIL || r.verdict() == v1::VERDICT_ERROR;
  }
  if (c.json) {
    out << ExportJson(v1::Job(), v1::JobSummary(), *rows);
  } else {
    const bool color = c.color();
    for (const v1::OpResult& r : *rows) out << ResultLine(r, color) << "\n";
    out << rows->size() << " result(s)\n";
  }
  return failures ? kExitFailures : kExitOk;
}

int Show(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const char kHelp[] =
      "usage: parity show JOB ITEM\n"
      "\nEverything stored for one item's result (--json: the API's OpResult).\n"
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
    out << MessageJson(r) << "\n";
  } else {
    const CheckResult cr = CheckResultFromProto(r);
    const bool color = c.color();
    out << "item:          " << r.key().name() << "\n"
        << "golden item:   " << (r.golden_name().empty() ? "-" : r.golden_name()) << "\n"
        << "operator:      " << r.key().api() << " (" << r.key().op_type() << ", "
        << absl::AsciiStrToLower(v1::Phase_Name(r.key().phase()).substr(6)) << " "
        << absl::AsciiStrToLower(v1::Role_Name(r.key().role()).substr(5)) << ")\n"
        << "verdict:       " << Paint(VerdictName(cr.verdict), VerdictColorCode(cr.verdict), color)
        << "   (" << absl::AsciiStrToLower(v1::Policy_Name(r.policy()).substr(7)) << " says: "
        << (cr.peer_verdict.empty() ? "-" : cr.peer_verdict) << ")\n"
        << "culprit:       "
        << (r.culprit() == v1::CULPRIT_STATUS_CULPRIT      ? "yes: outputs fail while the inputs pass"
            : r.culprit() == v1::CULPRIT_STATUS_PROPAGATED ? "no, propagated: an input already fails"
                                                           : "-")
        << "\n";
    auto dtype = [](v1::DType d) {
      return d == v1::DTYPE_UNSPECIFIED ? std::string("-") : std::string(DTypeName(static_cast<DType>(static_cast<int>(d) - 1)));
    };
    out << "dtype / shape: golden " << dtype(r.golden_dtype()) << " [" << absl::StrJoin(r.golden_shape(), ", ")
        << "], target " << dtype(r.target_dtype()) << " [" << absl::StrJoin(r.target_shape(), ", ") << "]\n";
    out << "metrics:\n";
    for (const Metric& m : cr.metrics) out << "  " << Pad(m.name, 28) << m.value.ToString() << "\n";
    if (!cr.message.empty()) out << "message:\n  " << cr.message << "\n";
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
      err << "parity diff: --min-change needs a non-negative number\n";
      return kExitUsage;
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
    for (const auto& r : regs) out << Pad(r.name(), 50) << "  " << r.reason() << "\n";
    out << regs.size() << " regression(s)\n";
  }
  return regs.empty() ? kExitOk : kExitFailures;
}

int Export(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const char kHelp[] =
      "usage: parity export JOB --format csv|json|model-explorer [-o FILE] [--metric cosine|pcc|max_abs_err|max_rel_err]\n"
      "                     [--graph-id ID]\n"
      "\ncsv: msprobe's column set and order for the job's mode (real data, statistics, md5).\n"
      "json: the job, its summary and every result.\n"
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
    err << "parity export: --format must be csv, json or model-explorer\n";
    return kExitUsage;
  }
  if (format == "model-explorer" && output.empty()) {
    err << "parity export: model-explorer writes two files; give -o FILE\n";
    return kExitUsage;
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
  absl::StatusOr<std::vector<v1::OpResult>> rows = FetchAll(q.get(), req, -1);
  if (!rows.ok()) {
    err << "parity export: " << rows.status().message() << "\n";
    return kExitUsage;
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
  if (format == "csv") return write(output, ExportCsv(*rows)) ? kExitOk : kExitUsage;
  if (format == "json") return write(output, ExportJson(summary.job(), summary, *rows)) ? kExitOk : kExitUsage;
  absl::StatusOr<ModelExplorerExport> me =
      ExportModelExplorer(*rows, metric, graph_id, absl::StrCat("parity ", pos[0]));
  if (!me.ok()) {
    err << "parity export: " << me.status().message() << "\n";
    return kExitUsage;
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

constexpr char kTokenHelp[] =
    "usage: parity token create --project P --role viewer|agent|admin [--note TEXT]\n"
    "       parity token list [--project P]\n"
    "       parity token revoke TOKEN_ID\n"
    "\n"
    "Manages the API tokens of a server started with --auth=tokens (needs an admin token:\n"
    "--token or $PARITY_TOKEN). `create` prints the new token once; the server keeps only a\n"
    "salted hash. Roles: viewer reads its project, agent also uploads and submits, admin does\n"
    "everything in every project (--project '*') and manages tokens.\n"
    "\n"
    "examples:\n"
    "  parity token create --project llm --role agent --note 'board 7'\n"
    "  parity token list --project llm --json\n"
    "  parity token revoke 3f9a0c1d2e4b\n";

Json TokenJson(const v1::TokenInfo& t) {
  Json o = Json::MakeObject();
  o.Set("token_id", Json::String(t.token_id()));
  o.Set("project", Json::String(t.project()));
  o.Set("role", Json::String(t.role()));
  o.Set("note", Json::String(t.note()));
  o.Set("created_at_ms", Json::Integer(t.created_at_ms()));
  o.Set("revoked", Json::Bool(t.revoked_at_ms() != 0));
  return o;
}

// "0 B", "512 B", "3.5 KiB", "220.4 MiB", "52.1 GiB".
std::string BytesText(uint64_t n) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (n < 1024) return absl::StrCat(n, " B");
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[u]);
  return buf;
}

std::string DurationText(int64_t ms) {
  const int64_t s = ms / 1000;
  if (s < 60) return absl::StrCat(s, " s");
  if (s < 3600) return absl::StrCat(s / 60, " min ", s % 60, " s");
  if (s < 86400) return absl::StrCat(s / 3600, " h ", s / 60 % 60, " min");
  return absl::StrCat(s / 86400, " d ", s / 3600 % 24, " h");
}

int Status(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const char kHelp[] =
      "usage: parity status\n"
      "\nWhat a running parityd holds against each of its limits: open uploads, buffered bytes,\n"
      "queues, held blobs, spool and free disk, resident memory; now, the peak since it started,\n"
      "and the flag that sets the limit. A figure at 90 % of its limit or more is yellow, at its\n"
      "limit red (on a terminal). Any token may ask (servers started with --auth=tokens).\n"
      "\nexamples:\n"
      "  parity status --server npu-host:50051\n"
      "  parity status --json | jq .gauges.resident_bytes\n";
  Common c;
  std::vector<std::string> pos;
  Args a;
  AddCommon(&a, &c);
  if (int rc = ParseOrExit(a, args, &pos, 0, kHelp, out, err); rc >= 0) return rc;
  const std::string server = ServerAddress(c.server);
  auto q = v1::Query::NewStub(MakeChannel(server));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ServerStatus st;
  grpc::Status s = q->GetServerStatus(&ctx, v1::GetServerStatusRequest(), &st);
  if (!s.ok()) return RpcError(s, server, err);
  if (c.json) {
    Json o = Json::MakeObject();
    o.Set("server", Json::String(server));
    o.Set("version", Json::String(st.version()));
    o.Set("started_at_ms", Json::Integer(st.started_at_ms()));
    o.Set("uptime_ms", Json::Integer(st.uptime_ms()));
    Json gauges = Json::MakeObject();
    for (const v1::Gauge& g : st.gauges()) {
      Json j = Json::MakeObject();
      j.Set("value", Json::Integer(static_cast<int64_t>(g.value())));
      j.Set("peak", Json::Integer(static_cast<int64_t>(g.peak())));
      j.Set("limit", Json::Integer(static_cast<int64_t>(g.limit())));
      j.Set("limit_is_floor", Json::Bool(g.limit_is_floor()));
      j.Set("bytes", Json::Bool(g.bytes()));
      j.Set("flag", Json::String(g.flag()));
      gauges.Set(g.name(), std::move(j));
    }
    o.Set("gauges", std::move(gauges));
    out << o.Dump(2) << "\n";
    return kExitOk;
  }
  const bool color = c.color();
  out << st.version() << " at " << server << ", up " << DurationText(st.uptime_ms()) << " (since "
      << TimeText(st.started_at_ms()) << " UTC)\n\n";
  out << Pad("GAUGE", 22) << "  " << Pad("NOW", 11) << "  " << Pad("PEAK", 11) << "  "
      << Pad("LIMIT", 13) << "  FLAG\n";
  for (const v1::Gauge& g : st.gauges()) {
    auto text = [&](uint64_t v) { return g.bytes() ? BytesText(v) : absl::StrCat(v); };
    const bool bounded = !g.flag().empty();
    std::string limit = bounded ? text(g.limit()) : "-";
    if (bounded && g.limit_is_floor()) limit = ">= " + limit;
    // Near or at the limit: at least 90 % of it (a floor: under 110 % of it).
    const char* code = nullptr;
    if (bounded && g.limit_is_floor()) {
      if (g.value() < g.limit()) {
        code = "31;1";
      } else if (g.value() - g.limit() < g.limit() / 10) {
        code = "33";
      }
    } else if (bounded && g.limit() > 0) {
      if (g.value() >= g.limit()) {
        code = "31;1";
      } else if (g.value() >= g.limit() - g.limit() / 10) {
        code = "33";
      }
    }
    const std::string now = Pad(text(g.value()), 11);
    out << Pad(g.name(), 22) << "  " << (code != nullptr ? Paint(now, code, color) : now) << "  "
        << Pad(g.peak() > 0 ? text(g.peak()) : "-", 11) << "  " << Pad(limit, 13) << "  "
        << (bounded ? "--" + g.flag() : "") << "\n";
  }
  return kExitOk;
}

int Token(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    (args.empty() ? err : out) << kTokenHelp << "\n" << kCommonHelp;
    return args.empty() ? kExitUsage : kExitOk;
  }
  const std::string sub = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  Common c;
  std::string project, role, note;
  std::vector<std::string> pos;
  Args a;
  AddCommon(&a, &c);
  a.Value("--project", &project);
  if (sub == "create") {
    a.Value("--role", &role);
    a.Value("--note", &note);
  }
  size_t want = sub == "revoke" ? 1 : 0;
  if (sub != "create" && sub != "list" && sub != "revoke") {
    err << "parity token: unknown subcommand '" << sub << "'\n\n" << kTokenHelp;
    return kExitUsage;
  }
  if (int rc = ParseOrExit(a, rest, &pos, want, kTokenHelp, out, err); rc >= 0) return rc;
  const std::string server = ServerAddress(c.server);
  auto stub = v1::Admin::NewStub(MakeChannel(server));
  grpc::ClientContext ctx;
  if (sub == "create") {
    if (project.empty() || role.empty()) {
      err << "parity token create: --project and --role are required\n";
      return kExitUsage;
    }
    v1::CreateTokenRequest req;
    req.set_project(project);
    req.set_role(role);
    req.set_note(note);
    v1::CreateTokenResponse resp;
    grpc::Status s = stub->CreateToken(&ctx, req, &resp);
    if (!s.ok()) return RpcError(s, server, err);
    if (c.json) {
      Json o = TokenJson(resp.info());
      o.Set("token", Json::String(resp.token()));
      out << o.Dump() << "\n";
    } else {
      out << resp.token() << "\n";
      err << "token " << resp.info().token_id() << " (" << resp.info().role() << " of project '"
          << resp.info().project() << "'): shown once, store it now\n";
    }
    return kExitOk;
  }
  if (sub == "list") {
    v1::ListTokensRequest req;
    req.set_project(project);
    v1::ListTokensResponse resp;
    grpc::Status s = stub->ListTokens(&ctx, req, &resp);
    if (!s.ok()) return RpcError(s, server, err);
    if (c.json) {
      Json arr = Json::MakeArray();
      for (const v1::TokenInfo& t : resp.tokens()) arr.Append(TokenJson(t));
      out << arr.Dump() << "\n";
    } else {
      for (const v1::TokenInfo& t : resp.tokens()) {
        out << t.token_id() << "  " << t.role() << "  " << t.project()
            << (t.revoked_at_ms() ? "  revoked" : "") << (t.note().empty() ? "" : "  " + t.note()) << "\n";
      }
    }
    return kExitOk;
  }
  v1::RevokeTokenRequest req;
  req.set_token_id(pos[0]);
  v1::TokenInfo resp;
  grpc::Status s = stub->RevokeToken(&ctx, req, &resp);
  if (!s.ok()) return RpcError(s, server, err);
  if (c.json) {
    out << TokenJson(resp).Dump() << "\n";
  } else {
    out << "revoked " << resp.token_id() << "\n";
  }
  return kExitOk;
}

}  // namespace

int RunRemoteCommand(const std::string& cmd, const std::vector<std::string>& args, std::ostream& out,
                     std::ostream& err) {
  if (cmd == "runs") return Runs(args, out, err);
  if (cmd == "jobs") return Jobs(args, out, err);
  if (cmd == "submit") return Submit(args, out, err);
  if (cmd == "watch") return Watch(args, out, err);
  if (cmd == "results") return Results(args, out, err);
  if (cmd == "show") return Show(args, out, err);
  if (cmd == "diff") return Diff(args, out, err);
  if (cmd == "export") return Export(args, out, err);
  if (cmd == "token") return Token(args, out, err);
  if (cmd == "status") return Status(args, out, err);
  if (cmd == "cancel") return Cancel(args, out, err);
  if (cmd == "summary") return Summary(args, out, err);
  return -1;
}

}  // namespace parity
