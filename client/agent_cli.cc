// parity-agent's command line: upload and upload-pair, their flags, help and exit codes.
#include "common/base/args.h"
#include "client/agent.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <cstdlib>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli.h"
#include "common/base/control_chars.h"
#include "client/file_pieces.h"
#include "client/proto_util.h"
#include "client/report_format.h"
#include "client/terminal.h"
#include "client/upload_stream.h"
#include "common/checks/compare_config.h"
#include "common/base/crc32.h"
#include "common/formats/dump.h"
#include "common/base/file_util.h"
#include "common/checks/msprobe_policy.h"
#include "common/base/sha256.h"
#include "common/checks/stats.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "parity/v1/parity.grpc.pb.h"
namespace parity {
namespace {

constexpr char kHelp[] =
    "usage: parity-agent upload PATH --project P --role golden|target [options]\n"
    "       parity-agent upload-pair GOLDEN_PATH TARGET_PATH --project P [options]\n"
    "\n"
    "upload: uploads a dump (msprobe dump directory, dump.json, .npy/.pt/.safetensors file or\n"
    "directory) to parityd as one run; a step*/rank*/ tree becomes one run per rank, labelled step\n"
    "and rank. With --against, the daemon compares it with a golden run while it arrives; the\n"
    "verdicts are printed as they come back, then the job summary and the culprit.\n"
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
    "  --run-id-file FILE       write the new run id to FILE (FILE.step<S>.rank<R> per rank)\n"
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

}  // namespace

int RunAgentCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    (args.empty() ? err : out) << kHelp;
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    out << "parity-agent 0.1.0\n";
    return 0;
  }
  if (args[0] != "upload" && args[0] != "upload-pair") {
    err << "parity-agent: unknown command '" << args[0] << "'\n\n" << kHelp;
    return 2;
  }
  const bool pair = args[0] == "upload-pair";
  const std::string cmd = "parity-agent " + args[0];
  UploadOptions o;
  bool no_color = false;
  std::vector<std::string> positional;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* dst) {
      if (i + 1 >= args.size()) {
        err << "parity-agent: " << a << " needs a value\n";
        return false;
      }
      *dst = args[++i];
      return true;
    };
    auto kv = [&](std::string* k, std::string* v) {
      std::string s;
      if (!value(&s)) return false;
      const size_t eq = s.find('=');
      if (eq == std::string::npos || eq == 0) {
        err << "parity-agent: " << a << " needs key=value, got '" << s << "'\n";
        return false;
      }
      *k = s.substr(0, eq);
      *v = s.substr(eq + 1);
      return true;
    };
    bool ok = true;
    if (a == "-h" || a == "--help") {
      out << kHelp;
      return 0;
    } else if (a == "--token") {
      ok = value(&o.token);
    } else if (a == "--tls-ca") {
      ok = value(&o.tls_ca);
    } else if (a == "--tls-cert") {
      ok = value(&o.tls_cert);
    } else if (a == "--tls-key") {
      ok = value(&o.tls_key);
    } else if (a == "--server") {
      ok = value(&o.server);
    } else if (a == "--project") {
      ok = value(&o.project);
    } else if (a == "--role") {
      ok = value(&o.role);
    } else if (a == "--run-name") {
      ok = value(&o.run_name);
    } else if (a == "--model") {
      ok = value(&o.model);
    } else if (a == "--device") {
      ok = value(&o.device);
    } else if (a == "--label") {
      std::string k, v;
      ok = kv(&k, &v);
      o.labels[k] = v;
    } else if (a == "--against") {
      ok = value(&o.against_run_id);
    } else if (a == "--against-label") {
      ok = kv(&o.against_label_key, &o.against_label_value);
    } else if (a == "--policy") {
      ok = value(&o.policy);
    } else if (a == "--mode") {
      ok = value(&o.mode);
    } else if (a == "--read-ahead") {
      std::string v;
      ok = value(&v);
      if (ok && (!absl::SimpleAtoi(v, &o.read_ahead) || o.read_ahead < 0 || o.read_ahead > 64)) {
        err << "parity-agent: --read-ahead needs 0..64\n";
        return 2;
      }
    } else if (a == "--retry-seconds" || a == "--max-bytes-per-second") {
      std::string v;
      ok = value(&v);
      int64_t n;
      if (ok && (!absl::SimpleAtoi(v, &n) || n < 0)) {
        err << "parity-agent: " << a << " needs a non-negative integer, got '" << v << "'\n";
        return 2;
      }
      if (ok) (a == "--retry-seconds" ? o.retry_seconds : o.max_bytes_per_second) = n;
    } else if (a == "--config") {
      ok = value(&o.config_path);
    } else if (a == "--run-id-file") {
      ok = value(&o.run_id_file);
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--follow") {
      o.follow = true;
    } else if (a == "--no-dedup") {
      o.dedup = false;
    } else if (a == "--allow-outside-links") {
      o.allow_outside_links = true;
    } else if (a == "--allow-unmatched") {
      o.allow_unmatched = true;
    } else if (a == "--end-marker") {
      ok = value(&o.end_marker);
    } else if (a == "--idle-timeout") {
      std::string v;
      ok = value(&v);
      if (ok && (!absl::SimpleAtoi(v, &o.idle_timeout_seconds) || o.idle_timeout_seconds < 0)) {
        err << "parity-agent: --idle-timeout needs a non-negative number of seconds\n";
        return 2;
      }
    } else if (a == "--no-color") {
      no_color = true;
    } else if (a.size() > 1 && a[0] == '-') {
      err << UnknownFlagMessage(cmd, a, kHelp) << "\n";
      return 2;
    } else {
      positional.push_back(a);
    }
    if (!ok) return 2;
  }
  if (positional.size() != (pair ? 2u : 1u)) {
    err << cmd << (pair ? ": expected GOLDEN_PATH and TARGET_PATH\n\n" : ": expected one PATH\n\n") << kHelp;
    return 2;
  }
  o.path = positional[0];
  o.server = ServerAddress(o.server);
  if (absl::Status addr = CheckServerAddress(o.server); !addr.ok()) {
    err << cmd << ": " << addr.message() << "\n";
    return 2;
  }
  if (pair) {
    // Both sides are named by position; the target's job is against the golden run uploaded now.
    const char* not_here = !o.role.empty() ? "--role"
                           : (!o.against_run_id.empty() || !o.against_label_key.empty()) ? "--against"
                           : o.follow ? "--follow"
                           : o.mode == "auto" ? "--mode auto"
                           : nullptr;
    if (not_here != nullptr) {
      err << cmd << ": " << not_here << " does not apply"
          << (std::string(not_here) == "--mode auto"
                  ? " (its escalation needs a complete golden run: upload the golden side first, then the target "
                    "with `upload --mode auto --against`)"
                  : " (the first PATH is the golden side, the second the target compared with it)")
          << "\n";
      return 2;
    }
    o.role = "golden";  // checked below as for upload; RunUploadPair sets each side's role
  }
  if (o.project.empty() || o.role.empty()) {
    err << cmd << ": --project and --role golden|target are required\n";
    return 2;
  }
  if (o.role != "golden" && o.role != "target") {
    err << cmd << ": --role must be golden or target, got '" << o.role << "'\n";
    return 2;
  }
  if (o.mode != "full" && o.mode != "stats" && o.mode != "crc" && o.mode != "auto") {
    err << cmd << ": --mode must be full, stats, crc or auto, got '" << o.mode << "'\n";
    return 2;
  }
  if (o.follow && o.mode == "auto") {
    err << "parity-agent upload: --follow sends as it goes; use --mode full, stats or crc\n";
    return 2;
  }
  if (o.role == "golden" && (!o.against_run_id.empty() || !o.against_label_key.empty())) {
    err << "parity-agent upload: --against applies to target runs only\n";
    return 2;
  }
  if (absl::Status tls = ConfigureClient({o.tls_ca, o.tls_cert, o.tls_key, o.token}); !tls.ok()) {
    err << cmd << ": " << tls.message() << "\n";
    return 2;
  }
  o.color = !no_color && ColorsWanted(stdout);
  if (pair) {
    for (const std::string& p : positional) {
      const std::vector<RankDump> r = FindRankDumps(p);
      if (!(r.size() == 1 && r[0].path == p)) {
        err << cmd << ": " << p << " holds " << r.size() << " rank dumps; upload-pair takes one run per side "
            << "(upload the golden tree with `upload --role golden --label build=N`, then the target tree with "
            << "`upload --role target --against-label build=N`: its ranks are matched by step and rank)\n";
        return 2;
      }
    }
    return RunUploadPair(o, positional[0], positional[1], out, err);
  }
  const std::vector<RankDump> ranks = FindRankDumps(o.path);
  if (o.follow || (ranks.size() == 1 && ranks[0].path == o.path)) return RunUpload(o, out, err);
  // A multi-rank / multi-step tree: one run per rank, labelled with its step and rank; with
  // --against-label each rank is compared with the golden run of the same step and rank.
  if (!o.against_run_id.empty()) {
    err << "parity-agent upload: " << o.path << " holds " << ranks.size()
        << " rank dumps; use --against-label (matched per step and rank) instead of --against\n";
    return 2;
  }
  int worst = 0;
  for (const RankDump& r : ranks) {
    UploadOptions one = o;
    one.path = r.path;
    one.run_name = absl::StrCat(o.run_name.empty() ? o.path : o.run_name, r.step.empty() ? "" : " step " + r.step,
                                r.rank.empty() ? "" : " rank " + r.rank);
    if (!r.step.empty()) {
      one.labels["step"] = r.step;
      one.step = std::strtoll(r.step.c_str(), nullptr, 10);
      if (!one.against_label_key.empty()) one.against_extra_labels["step"] = r.step;
    }
    if (!r.rank.empty()) {
      one.labels["rank"] = r.rank;
      one.rank = static_cast<int32_t>(std::strtol(r.rank.c_str(), nullptr, 10));
      if (!one.against_label_key.empty()) one.against_extra_labels["rank"] = r.rank;
    }
    if (!o.run_id_file.empty()) {
      one.run_id_file = absl::StrCat(o.run_id_file, r.step.empty() ? "" : ".step" + r.step,
                                     r.rank.empty() ? "" : ".rank" + r.rank);
    }
    if (!o.allow_outside_links) {
      // The rank's own files are confined to its directory; the directory, to the tree.
      if (absl::Status outside = CheckInsideTree(o.path, r.path); !outside.ok()) {
        err << "parity-agent: " << TerminalSafe(outside.message()) << "\n";
        worst = WorseExitCode(worst, kExitUsage);
        continue;
      }
    }
    const int rc = RunUpload(one, out, err);
    worst = WorseExitCode(worst, rc);
  }
  return worst;
}

}  // namespace parity
