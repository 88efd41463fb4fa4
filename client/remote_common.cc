#include "client/remote_common.h"

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
#include "parity/v1/parity.grpc.pb.h"

namespace parity {
namespace remote {
namespace {

// The connection flags (TLS files, token) of the command being run (one per process), and its
// --server flag.
ClientConnection g_connection;
const std::string* g_server_flag = nullptr;

}  // namespace

void AddCommon(Args* a, Common* c) {
  a->Value("--server", &c->server);
  g_server_flag = &c->server;
  a->Value("--tls-ca", &g_connection.ca);
  a->Value("--tls-cert", &g_connection.cert);
  a->Value("--tls-key", &g_connection.key);
  a->Value("--token", &g_connection.token);
  a->Bool("--json", &c->json);
  a->Bool("--no-color", &c->no_color);
  a->Bool("--allow-unmatched", &c->allow_unmatched);
}

namespace {
// "parity runs" from a help text that starts "usage: parity runs ...", as every command's does.
std::string CommandOfUsage(absl::string_view help) {
  absl::string_view rest = absl::StripPrefix(help, "usage: ");
  const size_t program_end = rest.find(' ');
  const size_t command_end = rest.find_first_of(" \n", program_end + 1);
  return std::string(rest.substr(0, command_end));
}
}  // namespace

// Parses; returns -1 to go on, or an exit code (help printed, or a usage error).
int ParseOrExit(const Args& a, const std::vector<std::string>& args, std::vector<std::string>* pos,
                size_t want_positional, const char* help, std::ostream& out, std::ostream& err) {
  bool help_wanted = false;
  std::string error, unknown_flag;
  if (!a.Parse(args, pos, &help_wanted, &error, &unknown_flag)) {
    const std::string full_help = std::string(help) + "\n" + kCommonHelp;
    if (!unknown_flag.empty()) {
      err << UnknownFlagMessage(CommandOfUsage(help), unknown_flag, full_help) << "\n";
    } else {
      err << "parity: " << error << "\n\n" << full_help;
    }
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
    return ErrorExitCode("parity", tls, err);
  }
  if (g_server_flag != nullptr) {
    if (absl::Status addr = CheckServerAddress(ServerAddress(*g_server_flag)); !addr.ok()) {
      return ErrorExitCode("parity", addr, err);
    }
  }
  return -1;
}

int RpcError(const grpc::Status& s, const std::string& server, std::ostream& err) {
  return ListError(absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message()), server, err);
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


namespace {
std::function<int64_t(Verdict)> CountOf(const v1::VerdictCounts& c) {
  return [&c](Verdict v) -> int64_t {
    switch (v) {
      case Verdict::kPass: return c.pass();
      case Verdict::kWarn: return c.warn();
      case Verdict::kFail: return c.fail();
      case Verdict::kError: return c.error();
      case Verdict::kUnmatched: return c.unmatched();
      case Verdict::kSkipped: return c.skipped();
    }
    return 0;
  };
}
}  // namespace

std::string CountsText(const v1::VerdictCounts& c) { return parity::CountsText(CountOf(c)); }

Json CountsJson(const v1::VerdictCounts& c) { return parity::CountsJson(CountOf(c)); }

Json JobJson(const v1::Job& j) {
  auto text_or_null = [](const std::string& s) { return s.empty() ? Json() : Json::String(s); };
  Json o = Json::MakeObject();
  o.Set("job_id", Json::String(j.job_id()));
  o.Set("project", Json::String(j.project()));
  o.Set("state", Json::String(StateText(j.state())));
  o.Set("policy", j.config().policy() == v1::POLICY_UNSPECIFIED
                      ? Json()
                      : Json::String(PolicyName(PolicyFromProto(j.config().policy()))));
  o.Set("golden_run_id", Json::String(j.golden_run_id()));
  o.Set("target_run_id", Json::String(j.target_run_id()));
  o.Set("golden_run_name", text_or_null(j.golden_run_name()));
  o.Set("target_run_name", text_or_null(j.target_run_name()));
  o.Set("pairs_done", Json::Integer(j.pairs_done()));
  o.Set("pairs_total", Json::Integer(j.pairs_total()));
  o.Set("counts", CountsJson(j.counts()));
  o.Set("first_culprit", text_or_null(j.first_culprit()));
  o.Set("error", text_or_null(j.error()));
  o.Set("created_at_ms", Json::Integer(j.created_at_ms()));
  o.Set("finished_at_ms", j.finished_at_ms() ? Json::Integer(j.finished_at_ms()) : Json());
  return o;
}

int JobExitCode(const v1::Job& j, const Common& c, std::ostream& err) {
  if (j.state() == v1::JOB_STATE_FAILED) return kExitUsage;
  const CheckOutcome o = OutcomeFromProto(j);
  if (const std::string note = IncompleteNote(o, c.allow_unmatched); !note.empty()) {
    err << "parity: job " << j.job_id() << " " << note << "\n";
  }
  return OutcomeExitCode(o, c.allow_unmatched);
}

absl::StatusOr<v1::Verdict> ParseVerdictFlag(const std::string& s) {
  Verdict v;
  if (!ParseVerdict(s, &v)) return absl::InvalidArgumentError("--verdict must be pass, warn, fail, error, unmatched or skipped, got '" + s + "'");
  return static_cast<v1::Verdict>(static_cast<int>(v) + 1);
}

// Every result of a job (up to `limit` when not negative).
absl::StatusOr<std::vector<v1::OpResult>> FetchAll(v1::Query::Stub* q, v1::ListOpResultsRequest req,
                                                   int64_t limit, bool* has_stacks) {
  if (has_stacks != nullptr) *has_stacks = false;
  return FetchPages(
      std::move(req), limit,
      [q, has_stacks](grpc::ClientContext* ctx, const v1::ListOpResultsRequest& r, v1::ListOpResultsResponse* resp) {
        grpc::Status s = q->ListOpResults(ctx, r, resp);
        if (s.ok() && has_stacks != nullptr) *has_stacks |= resp->has_stacks();
        return s;
      },
      &v1::ListOpResultsResponse::mutable_results);
}

// A listing's error as RpcError prints a gRPC status.
int ListError(const absl::Status& s, const std::string& server, std::ostream& err) {
  return ErrorExitCode("parity",
                       absl::Status(s.code(), absl::StrCat(s.message(), " (", server, ", code ",
                                                           static_cast<int>(s.code()), ")", TlsHint(s.message()))),
                       err);
}

// Streams a job's progress until it is final; returns its last state. A stream lost to the
// network, a parityd restart or gRPC's memory quota (UNAVAILABLE, CANCELLED,
// RESOURCE_EXHAUSTED) is opened again, with backoff, for up to kWatchRetrySeconds after the
// loss, counted afresh once an update has arrived.
namespace {
constexpr int kWatchRetrySeconds = 60;
}  // namespace

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
              last.first_culprit().empty() ? "" : ", culprit so far: " + TerminalSafe(last.first_culprit())));
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
    out << Paint("First culprit", "31;1", color) << ": " << TerminalSafe(j.first_culprit()) << "\n";
  }
}

}  // namespace remote
}  // namespace parity
