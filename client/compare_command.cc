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
    "TorchAir graph mode: a GE dump tree (msit_ge_dump/, with its dynamo_original_graph_*.txt)\n"
    "against an FX dump tree (msit_fx_dump/ or data_dump/) or a fusion-off GE dump tree, compared\n"
    "rank by rank and token by token, GE ops paired with the FX nodes the graph maps them to\n"
    "(fused ops too); the CSV is then the TorchAir table (docs/formats.md).\n"
    "\n"
    "options:\n"
    "  --policy msprobe|forge|torch  checker policy (default msprobe, or the config's)\n"
    "  --config FILE        JSON config: thresholds, per-operator overrides, name mapping\n"
    "  --fuzzy              also pair items whose names differ only by call count (msprobe -f)\n"
    "  --csv OUT            write msprobe-compatible CSV (its column set and order) to OUT\n"
    "                       (OUT.rank<R>.token<T>, OUT.step<S>.rank<R> per run of a tree)\n"
    "  --json               print the report as JSON instead of a table\n"
    "  --limit N            print at most N table rows (default and 0: all)\n"
    "  --tree               also print the target's module tree (msprobe's construct.json) with\n"
    "                       each culprit marked <--- *** HERE *** (with --json: module_tree)\n"
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

// The command line of `parity compare`.
struct CompareArgs {
  bool help = false;
  std::vector<std::string> positional;
  std::string policy, config_path, csv_path;
  bool json = false, no_color = false, fuzzy = false, allow_unmatched = false, tree = false;
  int limit = -1;  // rows in the table; -1: all
  int threads = UsableCpus();
};

absl::Status ParseCompareArgs(const std::vector<std::string>& args, CompareArgs* c) {
  const std::map<std::string, std::string*> text = {
      {"--policy", &c->policy}, {"--config", &c->config_path}, {"--csv", &c->csv_path}};
  const std::map<std::string, bool*> switches = {
      {"--json", &c->json}, {"--no-color", &c->no_color}, {"--fuzzy", &c->fuzzy},
      {"--allow-unmatched", &c->allow_unmatched}, {"--tree", &c->tree}};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      c->help = true;
      return absl::OkStatus();
    }
    if (auto sw = switches.find(a); sw != switches.end()) {
      *sw->second = true;
      continue;
    }
    const bool number = a == "--limit" || a == "--threads";
    if (!text.count(a) && !number) {
      if (a.size() > 1 && a[0] == '-') return absl::InvalidArgumentError(UnknownFlagText("parity compare", a, kHelp));
      c->positional.push_back(a);
      continue;
    }
    if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat(a, " needs a value"));
    const std::string& v = args[++i];
    if (!number) {
      *text.at(a) = v;
    } else if (a == "--limit") {
      if (!absl::SimpleAtoi(v, &c->limit) || c->limit < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--limit needs a non-negative integer (0: all), got '", v, "'"));
      }
      if (c->limit == 0) c->limit = -1;  // as `parity results --limit 0`: every row
    } else if (!absl::SimpleAtoi(v, &c->threads) || c->threads < 1 || c->threads > 1024) {
      return absl::InvalidArgumentError(absl::StrCat("--threads needs an integer from 1 to 1024, got '", v, "'"));
    }
  }
  if (c->positional.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected GOLDEN and TARGET, got ", c->positional.size(), " path(s)\n\n", kHelp));
  }
  return absl::OkStatus();
}

absl::StatusOr<CompareConfig> ConfigFor(const CompareArgs& c) {
  CompareConfig config;
  if (!c.config_path.empty()) {
    PARITY_ASSIGN_OR_RETURN(config, LoadCompareConfig(c.config_path));
  }
  if (!c.policy.empty() && !ParsePolicyKind(c.policy, &config.base.kind)) {
    return absl::InvalidArgumentError(absl::StrCat("--policy must be msprobe, forge or torch, got '", c.policy, "'"));
  }
  if (c.fuzzy) config.fuzzy_match = true;
  // A plain file's statistics are computed from its data as its pair is compared, as
  // parity-agent computes them for parityd: the CSV and JSON show them, and the culprit analysis
  // takes the golden norm from them, so that the table, the JSON and the daemon give one growth.
  config.fill_missing_stats = true;
  return config;
}

// step*/rank* trees and TorchAir trees: compared run by run (each as its own `parity compare`),
// paired by step and rank (TorchAir: rank, token and graph) as the agent uploads them; the worst
// exit code.
int CompareTrees(const std::vector<std::string>& args, const CompareArgs& c, const std::vector<RankDump>& granks,
                 const std::vector<RankDump>& tranks, std::ostream& out, std::ostream& err) {
  if (granks.size() != tranks.size()) {
    return ErrorExitCode("parity compare",
                         absl::InvalidArgumentError(absl::StrCat("the golden tree has ", granks.size(),
                                                                 " run(s), the target ", tranks.size())),
                         err);
  }
  std::map<std::string, std::string> golden_by_key;
  for (const RankDump& r : granks) golden_by_key[RankDumpSuffix(r)] = r.path;
  int worst = kExitOk;
  Json reports = Json::MakeArray();
  for (const RankDump& t : tranks) {
    auto g = golden_by_key.find(RankDumpSuffix(t));
    if (g == golden_by_key.end()) {
      return ErrorExitCode("parity compare",
                           absl::InvalidArgumentError(absl::StrCat("no golden dump for ", RankDumpTitle(t))), err);
    }
    std::vector<std::string> sub = {g->second, t.path};
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == c.positional[0] || args[i] == c.positional[1]) continue;
      if (args[i] == "--csv" && i + 1 < args.size()) {
        sub.push_back("--csv");
        sub.push_back(args[++i] + RankDumpSuffix(t));
        continue;
      }
      sub.push_back(args[i]);
    }
    std::ostringstream one;
    if (!c.json) out << "== " << RankDumpTitle(t) << "\n";
    worst = WorseExitCode(worst, RunCompareCommand(sub, c.json ? one : out, err));
    if (!c.json) continue;
    if (absl::StatusOr<Json> j = ParseJson(one.str()); j.ok()) {
      Json entry = Json::MakeObject();
      entry.Set("step", Json::String(t.step));
      entry.Set("rank", Json::String(t.rank));
      if (!t.token.empty()) entry.Set("token", Json::String(t.token));
      if (!t.graph.empty()) entry.Set("graph", Json::String(t.graph));
      entry.Set("report", std::move(*j));
      reports.Append(std::move(entry));
    }
  }
  if (c.json) out << reports.Dump(2) << "\n";
  return worst;
}

absl::Status WriteCsvFile(const ReportContext& ctx, const std::string& path) {
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<FileWriter> f, FileWriter::Create(path));
  PARITY_RETURN_IF_ERROR(WriteCsv(ctx, [&](absl::string_view piece) { return f->Append(piece); }));
  return f->Close();
}

absl::StatusOr<Dump> OpenSide(const char* side, const std::string& path,
                              const std::optional<std::vector<DirEntry>>& listing) {
  absl::StatusOr<Dump> d =
      OpenDump(path, kDefaultKeepBudgetBytes, NpyListing::kNamesOnly, listing ? &*listing : nullptr);
  if (!d.ok()) return absl::Status(d.status().code(), absl::StrCat(side, ": ", d.status().message()));
  return d;
}

// One golden dump against one target dump: the report printed (and written as CSV); the exit
// code of its verdicts.
int ComparePair(const CompareArgs& c, const CompareConfig& config,
                const std::optional<std::vector<DirEntry>>& glisting,
                const std::optional<std::vector<DirEntry>>& tlisting, std::ostream& out, std::ostream& err) {
  absl::StatusOr<Dump> golden = OpenSide("golden", c.positional[0], glisting);
  if (!golden.ok()) return ErrorExitCode("parity compare", golden.status(), err);
  absl::StatusOr<Dump> target = OpenSide("target", c.positional[1], tlisting);
  if (!target.ok()) return ErrorExitCode("parity compare", target.status(), err);
  ProgressBar bar("comparing");
  absl::StatusOr<CompareReport> report = CompareDumps(
      &*golden, &*target, config, [&](size_t done, size_t total) { bar.Update(done, total); }, c.threads);
  bar.Finish();
  if (!report.ok()) return ErrorExitCode("parity compare", report.status(), err);
  const ReportContext ctx{&*golden, &*target, &*report};
  if (!c.csv_path.empty()) {
    if (absl::Status s = WriteCsvFile(ctx, c.csv_path); !s.ok()) return ErrorExitCode("parity compare", s, err);
  }
  const bool color = !c.no_color && ColorsWanted(stdout);
  if (c.json) {
    WriteReportJson(ctx, out, c.tree);
  } else {
    WriteTable(ctx, color, c.limit, out);
    if (c.tree) out << "\n" << TreeSection(TreeFromAnalysis(target->structure, report->ops), color);
  }
  CheckOutcome outcome;
  outcome.pass = report->count(Verdict::kPass);
  outcome.warn = report->count(Verdict::kWarn);
  outcome.fail = report->count(Verdict::kFail);
  outcome.error = report->count(Verdict::kError);
  outcome.unmatched = report->count(Verdict::kUnmatched);
  outcome.skipped = report->count(Verdict::kSkipped);
  if (const std::string note = IncompleteNote(outcome, c.allow_unmatched); !note.empty()) {
    err << "parity compare: " << note << "\n";
  }
  return OutcomeExitCode(outcome, c.allow_unmatched);
}

}  // namespace

int RunCompareCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CompareArgs c;
  if (absl::Status s = ParseCompareArgs(args, &c); !s.ok()) return ErrorExitCode("parity compare", s, err);
  if (c.help) {
    out << kHelp;
    return kExitOk;
  }
  SetKernelThreads(c.threads);
  RaiseOpenFileLimit();  // each thread comparing pairs holds up to ~80 files open
  absl::StatusOr<CompareConfig> config = ConfigFor(c);
  if (!config.ok()) return ErrorExitCode("parity compare", config.status(), err);
  std::optional<std::vector<DirEntry>> glisting, tlisting;  // a plain directory's, for OpenDump
  const std::vector<RankDump> granks = FindRankDumps(c.positional[0], &glisting);
  const std::vector<RankDump> tranks = FindRankDumps(c.positional[1], &tlisting);
  const bool trees = !(granks.size() == 1 && granks[0].path == c.positional[0]) ||
                     !(tranks.size() == 1 && tranks[0].path == c.positional[1]);
  if (trees) return CompareTrees(args, c, granks, tranks, out, err);
  return ComparePair(c, *config, glisting, tlisting, out, err);
}

}  // namespace parity
