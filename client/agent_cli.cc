// parity-agent's command line: upload and upload-pair, their flags, help and exit codes.
#include "common/base/args.h"
#include "client/agent.h"

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/cli.h"
#include "client/proto_util.h"
#include "client/remote_common.h"
#include "client/terminal.h"
#include "common/base/control_chars.h"
#include "common/base/status_macros.h"
#include "common/formats/dump.h"

namespace parity {
namespace {

constexpr char kHelp[] =
    "usage: parity-agent upload PATH --project P --role golden|target [options]\n"
    "       parity-agent upload-pair GOLDEN_PATH TARGET_PATH --project P [options]\n"
    "\n"
    "upload: uploads a dump (msprobe dump directory, dump.json, .npy/.pt/.safetensors file or\n"
    "directory) to parityd as one run; a step*/rank*/ tree becomes one run per rank, labelled step\n"
    "and rank, a TorchAir GE or FX dump tree one run per rank and token, labelled rank and token\n"
    "(and graph when it holds several). With --against, the daemon compares it with a golden run\n"
    "while it arrives; the verdicts are printed as they come back, then the job summary and the\n"
    "culprit.\n"
    "\n"
    "upload-pair: uploads both sides of a comparison at the same time, GOLDEN_PATH as a golden run\n"
    "and TARGET_PATH as a target run against it (one run each; not for --follow or --mode auto).\n"
    "Each pair is compared as soon as both halves have arrived, large tensors from memory rather\n"
    "than read back from disk; the target's verdicts, then the job's final summary are printed.\n"
    "--label, --run-name and --run-id-file (FILE.golden, FILE.target) apply to both runs. If the\n"
    "golden upload fails, the target's stops too.\n"
    "\n"
    "options:\n"
    "  --server ADDR            parityd address (default $PARITY_SERVER or 127.0.0.1:50051)\n"
    "  --tls-ca FILE            connect with TLS, trusting this CA (default $PARITY_TLS_CA)\n"
    "  --tls-cert FILE --tls-key FILE   client certificate for mutual TLS\n"
    "  --token T                bearer token (agent role) when parityd runs --auth=tokens\n"
    "                           (default $PARITY_TOKEN)\n"
    "  --project P              project (team namespace)\n"
    "  --role golden|target     which side this run is\n"
    "  --run-name N             free-text run name\n"
    "  --model M                the model the dump was taken from (parity runs --model M)\n"
    "  --device D               the device it ran on (npu:0, cuda:0, cpu, ...)\n"
    "  --label k=v              label the run (repeatable)\n"
    "  --against RUN_ID         compare against this golden run\n"
    "  --against-label k=v      compare against the newest golden run with this label\n"
    "  --mode full|stats|crc|auto     what to send: tensor data (default), statistics only,\n"
    "                           CRC-32 + statistics, or CRC + statistics first and the data of\n"
    "                           the items whose CRC/statistics disagree with the golden side\n"
    "  --policy msprobe|forge|torch   checker policy for the comparison\n"
    "  --config FILE            comparison config (JSON, as for `parity compare --config`)\n"
    "  --run-id-file FILE       write the new run id to FILE (FILE.step<S>.rank<R> per rank,\n"
    "                           FILE.rank<R>.token<T> per TorchAir run)\n"
    "  --retry-seconds N        reconnect (exponential backoff) and resume for up to N seconds\n"
    "                           after a lost connection, counted afresh once an attempt gets\n"
    "                           items acknowledged (default 300; 0: fail at once)\n"
    "  --max-bytes-per-second N throttle tensor data (default 0: unlimited)\n"
    "  --read-ahead N           tensors read ahead of the network, at most 256 MiB (default 4;\n"
    "                           0: read each just before sending; tensors under 64 KiB count\n"
    "                           as 1/64 each); a tensor of 4 MiB or more in\n"
    "                           one run of its file (.npy, .pt, .safetensors) is read and sent a\n"
    "                           piece at a time (at most 8 pieces ahead), so memory does not\n"
    "                           grow with tensor size (with 0, it is read whole)\n"
    "  --json                   print the final summary as JSON\n"
    "  --version                print the version\n"
    "  --allow-unmatched        items without a counterpart do not make the exit code 3 (a\n"
    "                           golden dump at a finer level than the target, say)\n"
    "  --no-dedup               send every tensor's data, even when the server already holds the\n"
    "                           same content (default: tensors of 64 KiB and more are offered,\n"
    "                           by length and CRC-32, then by SHA-256 where they may be held, and\n"
    "                           sent by reference when held)\n"
    "  --allow-outside-links    read data files that are symbolic links leading outside the dump's\n"
    "                           directory (default: not read; each is sent as an item whose read\n"
    "                           error names the link and its target)\n"
    "  --follow                 keep watching PATH while a model writes it; upload each tensor once\n"
    "                           its file is complete; stop when PATH/parity.done (--end-marker NAME)\n"
    "                           exists and everything is sent, or after --idle-timeout SECONDS\n"
    "                           (default 600) without a new item\n"
    "\n"
    "examples:\n"
    "  parity-agent upload gpu_dump/ --project llm --role golden --label build=42\n"
    "  parity-agent upload npu_dump/ --project llm --role target --against-label build=42\n"
    "  parity-agent upload-pair gpu_dump/ npu_dump/ --project llm --label build=42\n"
    "\n"
    "exit codes: 0 uploaded, and (with a job) everything compared and passed; 1 precision\n"
    "failures; 2 usage or system error (rejected or unreadable items, a failed job); 3 incomplete:\n"
    "the job did not finish, compared nothing, or has items without a counterpart\n";

// A parsed command line of upload or upload-pair.
struct AgentCommand {
  bool help = false;  // --help among the flags: print the help, nothing else
  bool pair = false;
  std::string cmd;  // "parity-agent upload"
  UploadOptions o;
  std::vector<std::string> positional;
  bool no_color = false;
};

absl::Status NeedsValue(const std::string& flag) {
  return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
}

// A non-negative integer of at most `max` for `flag`.
absl::Status ParseCount(const std::string& flag, const std::string& v, int64_t max, int64_t* n) {
  if (absl::SimpleAtoi(v, n) && *n >= 0 && *n <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      max == INT64_MAX ? absl::StrCat(flag, " needs a non-negative integer, got '", v, "'")
                       : absl::StrCat(flag, " needs 0..", max, ", got '", v, "'"));
}

// The flag at args[*i] into `c` (advancing *i over its value).
absl::Status ParseFlag(const std::vector<std::string>& args, size_t* i, AgentCommand* c) {
  UploadOptions& o = c->o;
  const std::string& a = args[*i];
  const std::map<std::string, std::string*> text = {
      {"--token", &o.token},       {"--tls-ca", &o.tls_ca},           {"--tls-cert", &o.tls_cert},
      {"--tls-key", &o.tls_key},   {"--server", &o.server},           {"--project", &o.project},
      {"--role", &o.role},         {"--run-name", &o.run_name},       {"--model", &o.model},
      {"--device", &o.device},     {"--against", &o.against_run_id},  {"--policy", &o.policy},
      {"--mode", &o.mode},         {"--config", &o.config_path},      {"--run-id-file", &o.run_id_file},
      {"--end-marker", &o.end_marker}};
  const std::map<std::string, bool*> switches = {
      {"--json", &o.json},         {"--follow", &o.follow},
      {"--allow-outside-links", &o.allow_outside_links},
      {"--allow-unmatched", &o.allow_unmatched}, {"--no-color", &c->no_color}};
  const std::map<std::string, std::pair<int64_t*, int64_t>> counts = {
      {"--read-ahead", {&o.read_ahead, 64}},
      {"--retry-seconds", {&o.retry_seconds, INT64_MAX}},
      {"--max-bytes-per-second", {&o.max_bytes_per_second, INT64_MAX}},
      {"--idle-timeout", {&o.idle_timeout_seconds, INT64_MAX}}};
  if (auto sw = switches.find(a); sw != switches.end()) {
    *sw->second = true;
    return absl::OkStatus();
  }
  if (a == "--no-dedup") {
    o.dedup = false;
    return absl::OkStatus();
  }
  const bool takes_value = text.count(a) || counts.count(a) || a == "--label" || a == "--against-label";
  if (!takes_value) return absl::InvalidArgumentError(UnknownFlagText(c->cmd, a, kHelp));
  if (*i + 1 >= args.size()) return NeedsValue(a);
  const std::string& v = args[++*i];
  if (auto t = text.find(a); t != text.end()) {
    *t->second = v;
    return absl::OkStatus();
  }
  if (auto n = counts.find(a); n != counts.end()) return ParseCount(a, v, n->second.second, n->second.first);
  std::string key, value;
  if (!SplitKeyValue(v, &key, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(a, " needs key=value, got '", v, "'"));
  }
  if (a == "--label") {
    o.labels[key] = value;
  } else {
    o.against_label_key = key;
    o.against_label_value = value;
  }
  return absl::OkStatus();
}

// What upload-pair takes: both sides by position, the target against the golden run.
absl::Status CheckPairOptions(const UploadOptions& o) {
  const char* not_here = !o.role.empty() ? "--role"
                         : (!o.against_run_id.empty() || !o.against_label_key.empty()) ? "--against"
                         : o.follow ? "--follow"
                         : o.mode == "auto" ? "--mode auto"
                         : nullptr;
  if (not_here == nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      not_here, " does not apply",
      std::string(not_here) == "--mode auto"
          ? " (its escalation needs a complete golden run: upload the golden side first, then the target "
            "with `upload --mode auto --against`)"
          : " (the first PATH is the golden side, the second the target compared with it)"));
}

absl::Status CheckOptions(const UploadOptions& o) {
  if (o.project.empty() || o.role.empty()) {
    return absl::InvalidArgumentError("--project and --role golden|target are required");
  }
  if (o.role != "golden" && o.role != "target") {
    return absl::InvalidArgumentError(absl::StrCat("--role must be golden or target, got '", o.role, "'"));
  }
  if (o.mode != "full" && o.mode != "stats" && o.mode != "crc" && o.mode != "auto") {
    return absl::InvalidArgumentError(absl::StrCat("--mode must be full, stats, crc or auto, got '", o.mode, "'"));
  }
  if (o.follow && o.mode == "auto") {
    return absl::InvalidArgumentError("--follow sends as it goes; use --mode full, stats or crc");
  }
  if (o.role == "golden" && (!o.against_run_id.empty() || !o.against_label_key.empty())) {
    return absl::InvalidArgumentError("--against applies to target runs only");
  }
  return ConfigureClient({o.tls_ca, o.tls_cert, o.tls_key, o.token});
}

// The command line after "upload" or "upload-pair", checked.
absl::Status ParseArgs(const std::vector<std::string>& args, AgentCommand* c) {
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      c->help = true;
      return absl::OkStatus();
    }
    if (a.size() > 1 && a[0] == '-') {
      PARITY_RETURN_IF_ERROR(ParseFlag(args, &i, c));
    } else {
      c->positional.push_back(a);
    }
  }
  UploadOptions& o = c->o;
  if (c->positional.size() != (c->pair ? 2u : 1u)) {
    return absl::InvalidArgumentError(
        absl::StrCat(c->pair ? "expected GOLDEN_PATH and TARGET_PATH\n\n" : "expected one PATH\n\n", kHelp));
  }
  o.path = c->positional[0];
  o.server = ServerAddress(o.server);
  PARITY_RETURN_IF_ERROR(CheckServerAddress(o.server));
  if (c->pair) {
    PARITY_RETURN_IF_ERROR(CheckPairOptions(o));
    o.role = "golden";  // checked as for upload; RunUploadPair sets each side's role
  }
  PARITY_RETURN_IF_ERROR(CheckOptions(o));
  o.color = !c->no_color && ColorsWanted(stdout);
  return absl::OkStatus();
}

// upload-pair takes one run a side: a tree of rank dumps is uploaded side by side instead.
absl::Status CheckOneRunEach(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) {
    const std::vector<RankDump> r = FindRankDumps(p);
    if (r.size() == 1 && r[0].path == p) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        p, " holds ", r.size(), " rank dumps; upload-pair takes one run per side ",
        "(upload the golden tree with `upload --role golden --label build=N`, then the target tree with ",
        "`upload --role target --against-label build=N`: its ranks are matched by step and rank)"));
  }
  return absl::OkStatus();
}

// The upload of one run of a tree: labelled with its step and rank (TorchAir: rank, token and
// graph); with --against-label compared with the golden run of the same labels.
UploadOptions RankOptions(const UploadOptions& o, const RankDump& r) {
  UploadOptions one = o;
  one.path = r.path;
  one.run_name = o.run_name.empty() ? o.path : o.run_name;
  for (const auto& [k, v] : RankDumpParts(r)) {
    absl::StrAppend(&one.run_name, " ", k, " ", v);
    one.labels[k] = v;
    if (!one.against_label_key.empty()) one.against_extra_labels[k] = v;
  }
  if (!r.step.empty()) one.step = std::strtoll(r.step.c_str(), nullptr, 10);
  if (!r.rank.empty()) one.rank = static_cast<int32_t>(std::strtol(r.rank.c_str(), nullptr, 10));
  if (!o.run_id_file.empty()) one.run_id_file = o.run_id_file + RankDumpSuffix(r);
  return one;
}

// A multi-rank / multi-step tree: one run per rank; the worst exit code.
int UploadRanks(const UploadOptions& o, const std::vector<RankDump>& ranks, std::ostream& out, std::ostream& err) {
  if (!o.against_run_id.empty()) {
    return ErrorExitCode("parity-agent upload",
                         absl::InvalidArgumentError(absl::StrCat(
                             o.path, " holds ", ranks.size(),
                             " rank dumps; use --against-label (matched per step and rank) instead of --against")),
                         err);
  }
  int worst = kExitOk;
  for (const RankDump& r : ranks) {
    if (!o.allow_outside_links) {
      // The rank's own files are confined to its directory; the directory, to the tree.
      if (absl::Status outside = CheckInsideTree(o.path, r.path); !outside.ok()) {
        worst = WorseExitCode(
            worst, ErrorExitCode("parity-agent", absl::InvalidArgumentError(TerminalSafe(outside.message())), err));
        continue;
      }
    }
    worst = WorseExitCode(worst, RunUpload(RankOptions(o, r), out, err));
  }
  return worst;
}

}  // namespace

int RunAgentCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    (args.empty() ? err : out) << kHelp;
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "--version") {
    out << "parity-agent 0.1.0\n";
    return kExitOk;
  }
  if (args[0] != "upload" && args[0] != "upload-pair") {
    return ErrorExitCode("parity-agent", absl::InvalidArgumentError(absl::StrCat(
                                             "unknown command '", args[0], "'\n\n", kHelp)), err);
  }
  AgentCommand c;
  c.pair = args[0] == "upload-pair";
  c.cmd = "parity-agent " + args[0];
  if (absl::Status s = ParseArgs(args, &c); !s.ok()) return ErrorExitCode(c.cmd, s, err);
  if (c.help) {
    out << kHelp;
    return kExitOk;
  }
  if (c.pair) {
    if (absl::Status s = CheckOneRunEach(c.positional); !s.ok()) return ErrorExitCode(c.cmd, s, err);
    return RunUploadPair(c.o, c.positional[0], c.positional[1], out, err);
  }
  const std::vector<RankDump> ranks = FindRankDumps(c.o.path);
  if (c.o.follow || (ranks.size() == 1 && ranks[0].path == c.o.path)) return RunUpload(c.o, out, err);
  return UploadRanks(c.o, ranks, out, err);
}

}  // namespace parity
