// Renderings of a CompareReport: the terminal table (worst first), msprobe-compatible CSV and
// JSON.
#ifndef PARITY_CLIENT_REPORT_FORMAT_H_
#define PARITY_CLIENT_REPORT_FORMAT_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/formats/dump.h"
#include "common/compare/engine.h"
#include "common/base/json.h"

namespace parity {

struct ReportContext {
  const Dump* golden;
  const Dump* target;
  const CompareReport* report;
};

// Row indices sorted worst first: by verdict severity, then by the policy's badness (lowest
// cosine / PCC, largest mismatch share), then dump order.
std::vector<size_t> WorstFirst(const ReportContext& c);

// Writes the per-item table, then the summary, to `out` a piece at a time. `limit` < 0 prints
// every row; otherwise the first `limit` rows worst first, the columns sized to them.
void WriteTable(const ReportContext& c, bool color, int limit, std::ostream& out);
// The rows alone, in the report's order, under the same header and in the same columns.
void WriteRowsTable(const ReportContext& c, bool color, std::ostream& out);

// msprobe's column set and order for the report's mode (ALL / SUMMARY / MD5), one row per pair
// in dump order. For a forge or torch base policy: the basic columns plus Policy, Verdict,
// the policy's metrics and Message.
std::string FormatCsv(const ReportContext& c);
// The same text handed to `sink` a piece at a time (memory does not grow with the number of
// rows); the first error the sink returns ends the writing and is returned.
using TextSink = std::function<absl::Status(absl::string_view)>;
absl::Status WriteCsv(const ReportContext& c, const TextSink& sink);
// With `stacks` (the target dump carries a stack.json), msprobe's NPU_Stack_Info column after
// Err_message (or Result in MD5 mode), holding the API's stack on the first row of each API.
std::vector<std::string> MsprobeCsvHeader(DumpMode mode, bool stacks = false);
// The TorchAir table (a TorchAir GE or FX dump on the target side, real data, msprobe's policy):
// API Name (the target's API, a GE op, with ".input.i" / ".output.i"), Bench Name, the dtypes
// and shapes, msprobe's six real-data metrics and statistics, Requires_grad Consistent, Result
// (the verdict), Accuracy Reached or Not (the TorchAir rule's Yes / No), Err_message, Stack
// Info (the GE op and the FX nodes it implements, on each op's first row) and Data Name.
std::vector<std::string> TorchairCsvHeader();

// A culprit's figures for the terminal: "(forward, growth 1.2e+03x, error 0.51)".
std::string CulpritFigures(OpPhase phase, double growth, double out_error);
// The noise-floor line under the culprits: the floor, how many operators it rests on, the
// threshold.
std::string NoiseFloorText(double noise, double threshold, int64_t samples, double fence);
// `d` to 3 significant digits ("4.92e+05", "0.172", "inf"), for display only.
std::string Figure3(double d);

// One node of a module tree (msprobe's construct.json) with its operator's analysis, and on a
// module's first forward node that of its parameters_grad entry.
struct TreeNodeView {
  std::string name, parent;
  OpStatus status = OpStatus::kNone;
  bool fails = false;
  OpStatus gradient_status = OpStatus::kNone;
  bool gradient_fails = false;
};
// The nodes of `structure`'s tree with the statuses of `ops` (a local report's analysis).
std::vector<TreeNodeView> TreeFromAnalysis(const DumpStructure& structure, const std::vector<OpAnalysis>& ops);
// PaDiff's picture: the hierarchy in file order, two spaces a level; a culprit marked
// "<--- *** HERE ***", propagated and within-noise failures dimmed (tagged "(propagated)",
// "(within noise)" without colour). Names are escaped for the terminal.
std::string ModuleTreeText(const std::vector<TreeNodeView>& nodes, bool color);
// "Module tree:" and the tree, or a line saying the dump has none.
std::string TreeSection(const std::vector<TreeNodeView>& nodes, bool color);
// The nodes as JSON: [{"name", "parent" (null at the top), "status" ("culprit", "propagated" or
// null), "fails", "gradient_status", "gradient_fails"}].
Json TreeJson(const std::vector<TreeNodeView>& nodes);

// The JSON documents of every command speak one vocabulary (docs/schemas/): verdicts as the
// table prints them ("FAIL"), counts as numbers with zeros present, shapes as arrays.

// {"PASS": n, "WARN": n, "FAIL": n, "ERROR": n, "UNMATCHED": n, "SKIPPED": n}.
Json CountsJson(const std::function<int64_t(Verdict)>& count);

// One table cell: `s` escaped for a terminal (TerminalSafe: no upload can send it control
// characters) and padded with spaces to `w` bytes.
std::string Pad(const std::string& s, size_t w);

// The counts line of every command: "12 pass, 0 warn, 5 fail, 0 error, 0 unmatched" (and ", N
// skipped" when there are any); with `color`, each non-zero count in its verdict's colour.
std::string CountsText(const std::function<int64_t(Verdict)>& count, bool color = false);

// `head`'s members, then "items": one item document per row of the report in its order; pretty
// printed (indent 2) with a final newline, written to `out` item by item: memory does not grow
// with the number of items.
void WriteItemsDocument(const ReportContext& c, const Json& head, std::ostream& out);

// One row's item document (docs/schemas/item.schema.json), pretty printed, with a newline.
std::string ItemJson(const ReportContext& c, const CompareRow& row);

// `parity compare --json` (docs/schemas/compare.schema.json): the dumps, policy and mode, the
// summary, then the items.
void WriteReportJson(const ReportContext& c, std::ostream& out, bool tree = false);

// What a statistics-only verdict cannot see, said under the summary of a comparison made from
// statistics alone (msprobe's SUMMARY mode, parity-agent --mode stats).
inline constexpr char kStatisticsOnlyNote[] =
    "Statistics only: a pair passes when its max, min, mean and norm agree, even if its data "
    "differ; compare tensor data to see such errors.";

// The few metrics worth a table column for this policy ("Cosine=0.99 MaxAbsErr=0.01 ...").
std::string KeyMetrics(PolicyKind policy, const CheckResult& r);

// The name shown for a row (target name, or golden name for golden-only rows).
std::string RowName(const ReportContext& c, const CompareRow& row);

}  // namespace parity

#endif  // PARITY_CLIENT_REPORT_FORMAT_H_
