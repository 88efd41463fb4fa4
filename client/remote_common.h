// The pieces every `parity` command that talks to parityd shares: the common flags and their
// help, the connection they configure, formatting of jobs, counts and results, paged listings
// and following a job. Internal to client/.
#ifndef PARITY_CLIENT_REMOTE_COMMON_H_
#define PARITY_CLIENT_REMOTE_COMMON_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/args.h"
#include "client/terminal.h"
#include "common/base/json.h"
#include "parity/v1/parity.grpc.pb.h"

namespace parity {
namespace remote {

inline constexpr char kCommonHelp[] =
    "common options:\n"
    "  --server ADDR   parityd address (default $PARITY_SERVER or 127.0.0.1:50051)\n"
    "  --tls-ca FILE   connect with TLS, trusting this CA (default $PARITY_TLS_CA; none: plain)\n"
    "  --tls-cert FILE, --tls-key FILE   client certificate for mutual TLS ($PARITY_TLS_CERT/KEY)\n"
    "  --token T       bearer token for servers started with --auth=tokens (default $PARITY_TOKEN)\n"
    "  --json          machine-readable output\n"
    "  --no-color      no colours (also when NO_COLOR is set or stdout is not a terminal)\n"
    "  --allow-unmatched  a job's items without a counterpart do not make the exit code 3\n"
    "  -h, --help      this help\n"
    "\n"
    "exit codes (of the whole job, whatever part is printed): 0 everything compared and passed,\n"
    "1 precision failures (or regressions), 2 usage or system error, 3 incomplete (the job was\n"
    "cancelled or is not done, compared nothing, or has items without a counterpart)\n";

struct Common {
  std::string server;
  bool json = false;
  bool no_color = false;
  bool allow_unmatched = false;
  bool color() const { return !no_color && ColorsWanted(stdout); }
};

// Adds --server, --tls-ca, --tls-cert, --tls-key, --token, --json, --no-color and
// --allow-unmatched; the
// connection flags configure the channels MakeChannel creates (one command per process).
void AddCommon(Args* a, Common* c);

// Parses; returns -1 to go on, or an exit code (help printed, or a usage error).
int ParseOrExit(const Args& a, const std::vector<std::string>& args, std::vector<std::string>* pos,
                size_t want_positional, const char* help, std::ostream& out, std::ostream& err);

// Prints a failed RPC's message with the server and code; returns the usage exit code.
int RpcError(const grpc::Status& s, const std::string& server, std::ostream& err);
// A listing's error as RpcError prints a gRPC status.
int ListError(const absl::Status& s, const std::string& server, std::ostream& err);

std::string TimeText(int64_t ms);             // "2026-11-27 12:00:00" (UTC), "-" for 0
std::string StateText(v1::JobState s);        // "running", "done", ...
std::string CountsText(const v1::VerdictCounts& c);
Json CountsJson(const v1::VerdictCounts& c);
Json JobJson(const v1::Job& j);
// The exit code of a job (kExitUsage when it failed, else OutcomeExitCode of its counts); prints
// IncompleteNote to `err` when it is kExitIncomplete.
int JobExitCode(const v1::Job& j, const Common& c, std::ostream& err);
absl::StatusOr<v1::Verdict> ParseVerdictFlag(const std::string& s);

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

// Every result of a job (up to `limit` when not negative). With `has_stacks`: whether the
// daemon said the target run carries a stack.json (ListOpResultsRequest.with_stack).
absl::StatusOr<std::vector<v1::OpResult>> FetchAll(v1::Query::Stub* q, v1::ListOpResultsRequest req,
                                                   int64_t limit, bool* has_stacks = nullptr);

// Streams a job's progress until it is final; returns its last state. A stream lost to the
// network, a parityd restart or gRPC's memory quota (UNAVAILABLE, CANCELLED,
// RESOURCE_EXHAUSTED) is opened again, with backoff, for up to 60 s after the loss, counted
// afresh once an update has arrived.
absl::StatusOr<v1::Job> WatchJob(v1::Jobs::Stub* stub, const std::string& job_id, bool quiet,
                                 std::ostream& out, std::ostream& err);
void PrintJobSummary(const v1::Job& j, bool color, std::ostream& out);

// The commands, each with the arguments after its name.
using Command = int (*)(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int Runs(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int Jobs(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int Watch(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int Summary(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int Cancel(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int Submit(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int Results(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int Show(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int Diff(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int Export(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int Status(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int Token(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace remote
}  // namespace parity

#endif  // PARITY_CLIENT_REMOTE_COMMON_H_
