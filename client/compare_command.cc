// parity compare: local comparison with the same engine the daemon uses.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/args.h"
#include "client/agent.h"
#include "client/cli.h"
#include "client/report_format.h"
#include "client/terminal.h"
#include "common/checks/compare_config.h"
#include "common/base/cpus.h"
#include "common/formats/dump.h"
#include "common/compare/engine.h"
#include "common/base/file_util.h"
#include "common/checks/msprobe_kernel.h"
#include "common/base/status_macros.h"

namespace parity {
namespace {

constexpr char kHelp[] =
    "usage: parity compare GOLDEN TARGET [options]\n"
    "\n"
    "Compares a target dump (device / NPU run) against a golden dump (framework run) item by\n"
    "item and prints a table, worst first, then a summary naming the first failing item in\n"
    "dump order.\n"
    "\n"
    "GOLDEN and TARGET are each an msprobe dump directory (dump.json + dump_tensor_data/), a\n"
    "dump.json file, a .npy, .pt or .safetensors file, a directory of such files, or Ascend GE\n"
    "dump files; step*/rank*/ trees are compared rank by rank (paired by step and rank).\n"
    "\n"
    "options:\n"
    "  --policy msprobe|forge|torch  checker policy (default msprobe, or the config's)\n"
    "  --config FILE        JSON config: thresholds, per-operator overrides, name mapping\n"
    "  --fuzzy              also pair items whose names differ only by call count (msprobe -f)\n"
    "  --csv OUT            write msprobe-compatible CSV (its column set and order) to OUT\n"
    "  --json               print the report as JSON instead of a table\n"
    "  --limit N            print at most N table rows (default and 0: all)\n"
    "  --allow-unmatched    items without a counterpart do not make the exit code 3 (a golden\n"
    "                       dump at a finer level than the target, say)\n"
    "  --threads N          threads comparing pairs side by side, and splitting a large tensor\n"
    "                       (default: the CPUs this process may use: its affinity and cgroup CPU\n"
    "                       quota; results do not depend on it)\n"
    "  --no-color           no colours (also when NO_COLOR is set or stdout is not a terminal)\n"
    "  -h, --help           show this help\n"
    "\n"
    "examples:\n"
    "  parity compare golden_dump/ npu_dump/\n"
    "  parity compare golden_dump/ npu_dump/ --csv result.csv\n"
    "  parity compare ref.npy out.npy --policy torch --json\n"
    "  parity compare gold.safetensors dev.safetensors --policy forge --config tol.json\n"
    "\n"
    "exit codes: 0 every item compared and passed, 1 a FAIL or ERROR verdict, 2 usage or system\n"
    "error, 3 incomplete (nothing compared, or items without a counterpart)\n";

}  // namespace

int RunCompareCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> positional;
  std::string policy, config_path, csv_path;
  bool json = false, no_color = false, fuzzy = false, allow_unmatched = false;
  int limit = -1;
  int threads = UsableCpus();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* dst) {
      if (i + 1 >= args.size()) {
        err << "parity compare: " << a << " needs a value\n";
        return false;
      }
      *dst = args[++i];
      return true;
    };
    if (a == "-h" || a == "--help") {
      out << kHelp;
      return kExitOk;
    } else if (a == "--policy") {
      if (!value(&policy)) return kExitUsage;
    } else if (a == "--config") {
      if (!value(&config_path)) return kExitUsage;
    } else if (a == "--csv") {
      if (!value(&csv_path)) return kExitUsage;
    } else if (a == "--limit") {
      std::string v;
      if (!value(&v)) return kExitUsage;
      if (!absl::SimpleAtoi(v, &limit) || limit < 0) {
        err << "parity compare: --limit needs a non-negative integer (0: all), got '" << v << "'\n";
        return kExitUsage;
      }
      if (limit == 0) limit = -1;  // as `parity results --limit 0`: every row
    } else if (a == "--threads") {
      std::string v;
      if (!value(&v)) return kExitUsage;
      if (!absl::SimpleAtoi(v, &threads) || threads < 1 || threads > 1024) {
        err << "parity compare: --threads needs an integer from 1 to 1024, got '" << v << "'\n";
        return kExitUsage;
      }
    } else if (a == "--json") {
      json = true;
    } else if (a == "--no-color") {
      no_color = true;
    } else if (a == "--fuzzy") {
      fuzzy = true;
    } else if (a == "--allow-unmatched") {
      allow_unmatched = true;
    } else if (a.size() > 1 && a[0] == '-') {
      err << UnknownFlagMessage("parity compare", a, kHelp) << "\n";
      return kExitUsage;
    } else {
      positional.push_back(a);
    }
  }
  SetKernelThreads(threads);
  RaiseOpenFileLimit();  // each thread comparing pairs holds up to ~80 files open
  if (positional.size() != 2) {
    err << "parity compare: expected GOLDEN and TARGET, got " << positional.size()
        << " path(s)\n\n" << kHelp;
    return kExitUsage;
  }
  CompareConfig config;
  if (!config_path.empty()) {
    absl::StatusOr<CompareConfig> c = LoadCompareConfig(config_path);
    if (!c.ok()) {
      err << "parity compare: " << c.status().message() << "\n";
      return kExitUsage;
    }
    config = std::move(*c);
  }
  if (!policy.empty() && !ParsePolicyKind(policy, &config.base.kind)) {
    err << "parity compare: --policy must be msprobe, forge or torch, got '" << policy << "'\n";
    return kExitUsage;
  }
  if (fuzzy) config.fuzzy_match = true;
  // The CSV and JSON show each side's statistics; a plain file's are computed from its data as
  // its pair is compared, as parity-agent computes them for parityd.
  config.fill_missing_stats = json || !csv_path.empty();

  // step*/rank* trees: compare rank by rank, paired by step and rank (as the agent uploads them).
  std::optional<std::vector<DirEntry>> glisting, tlisting;  // a plain directory's, for OpenDump
  const std::vector<RankDump> granks = FindRankDumps(positional[0], &glisting);
  const std::vector<RankDump> tranks = FindRankDumps(positional[1], &tlisting);
  const bool trees = !(granks.size() == 1 && granks[0].path == positional[0]) ||
                     !(tranks.size() == 1 && tranks[0].path == positional[1]);
  if (trees) {
    std::map<std::pair<std::string, std::string>, std::string> golden_by_key;
    for (const RankDump& r : granks) golden_by_key[{r.step, r.rank}] = r.path;
    if (granks.size() != tranks.size()) {
      err << "parity compare: the golden tree has " << granks.size() << " rank dump(s), the target "
          << tranks.size() << "\n";
      return kExitUsage;
    }
    int worst = kExitOk;
    Json reports = Json::MakeArray();
    for (const RankDump& t : tranks) {
      auto g = golden_by_key.find({t.step, t.rank});
      if (g == golden_by_key.end()) {
        err << "parity compare: no golden dump for step '" << t.step << "' rank '" << t.rank << "'\n";
        return kExitUsage;
      }
      std::vector<std::string> sub = {g->second, t.path};
      for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == positional[0] || args[i] == positional[1]) continue;
        if (args[i] == "--csv" && i + 1 < args.size()) {
          sub.push_back("--csv");
          sub.push_back(args[++i] + (t.step.empty() ? "" : ".step" + t.step) + (t.rank.empty() ? "" : ".rank" + t.rank));
          continue;
        }
        sub.push_back(args[i]);
      }
      std::ostringstream one;
      if (!json) out << "== step " << (t.step.empty() ? "-" : t.step) << " rank " << (t.rank.empty() ? "-" : t.rank) << "\n";
      const int rc = RunCompareCommand(sub, json ? one : out, err);
      if (json) {
        absl::StatusOr<Json> j = ParseJson(one.str());
        if (j.ok()) {
          Json entry = Json::MakeObject();
          entry.Set("step", Json::String(t.step));
          entry.Set("rank", Json::String(t.rank));
          entry.Set("report", std::move(*j));
          reports.Append(std::move(entry));
        }
      }
      worst = WorseExitCode(worst, rc);
    }
    if (json) out << reports.Dump(2) << "\n";
    return worst;
  }
  absl::StatusOr<Dump> golden = OpenDump(positional[0], kDefaultKeepBudgetBytes, NpyListing::kNamesOnly,
                                         glisting ? &*glisting : nullptr);
  if (!golden.ok()) {
    err << "parity compare: golden: " << golden.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<Dump> target = OpenDump(positional[1], kDefaultKeepBudgetBytes, NpyListing::kNamesOnly,
                                         tlisting ? &*tlisting : nullptr);
  if (!target.ok()) {
    err << "parity compare: target: " << target.status().message() << "\n";
    return kExitUsage;
  }
  ProgressBar bar("comparing");
  absl::StatusOr<CompareReport> report = CompareDumps(
      &*golden, &*target, config, [&](size_t done, size_t total) { bar.Update(done, total); },
      threads);
  bar.Finish();
  if (!report.ok()) {
    err << "parity compare: " << report.status().message() << "\n";
    return kExitUsage;
  }
  ReportContext ctx{&*golden, &*target, &*report};
  if (!csv_path.empty()) {
    absl::Status s = [&]() -> absl::Status {
      PARITY_ASSIGN_OR_RETURN(std::unique_ptr<FileWriter> f, FileWriter::Create(csv_path));
      PARITY_RETURN_IF_ERROR(WriteCsv(ctx, [&](absl::string_view piece) { return f->Append(piece); }));
      return f->Close();
    }();
    if (!s.ok()) {
      err << "parity compare: " << s.message() << "\n";
      return kExitUsage;
    }
  }
  if (json) {
    WriteReportJson(ctx, out);
  } else {
    WriteTable(ctx, !no_color && ColorsWanted(stdout), limit, out);
  }
  CheckOutcome outcome;
  outcome.pass = report->count(Verdict::kPass);
  outcome.warn = report->count(Verdict::kWarn);
  outcome.fail = report->count(Verdict::kFail);
  outcome.error = report->count(Verdict::kError);
  outcome.unmatched = report->count(Verdict::kUnmatched);
  outcome.skipped = report->count(Verdict::kSkipped);
  if (const std::string note = IncompleteNote(outcome, allow_unmatched); !note.empty()) {
    err << "parity compare: " << note << "\n";
  }
  return OutcomeExitCode(outcome, allow_unmatched);
}

}  // namespace parity
