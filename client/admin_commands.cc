// parity status | token: parityd's figures against its limits, and API tokens.
#include <algorithm>
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

namespace {

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

}  // namespace

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
      return ErrorExitCode("parity token create",
                           absl::InvalidArgumentError("--project and --role are required"), err);
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
      size_t id_w = 8, project_w = 7;
      for (const v1::TokenInfo& t : resp.tokens()) {
        id_w = std::max(id_w, t.token_id().size());
        project_w = std::max(project_w, t.project().size());
      }
      out << Pad("TOKEN", id_w) << "  " << Pad("ROLE", 6) << "  " << Pad("PROJECT", project_w) << "  "
          << Pad("STATE", 7) << "  " << Pad("CREATED (UTC)", 19) << "  NOTE\n";
      for (const v1::TokenInfo& t : resp.tokens()) {
        out << Pad(t.token_id(), id_w) << "  " << Pad(t.role(), 6) << "  " << Pad(t.project(), project_w) << "  "
            << Pad(t.revoked_at_ms() ? "revoked" : "active", 7) << "  " << Pad(TimeText(t.created_at_ms()), 19)
            << "  " << TerminalSafe(t.note()) << "\n";
      }
      out << resp.tokens_size() << " token(s)\n";
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

}  // namespace remote
}  // namespace parity
