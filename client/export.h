// Renderings of a job's results fetched from parityd: msprobe-compatible CSV, the item JSON
// documents, and Model Explorer node-data overlays.
#ifndef PARITY_CLIENT_EXPORT_H_
#define PARITY_CLIENT_EXPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/report_format.h"
#include "common/base/json.h"
#include "parity/v1/parity.pb.h"

namespace parity {

// A job's results rebuilt as a report of two dumps (one item per side of each result), so that
// the local report's CSV and JSON writers render them.
struct ResultsReport {
  explicit ResultsReport(const std::vector<v1::OpResult>& results);
  ReportContext context() const { return {&golden, &target, &report}; }
  Dump golden, target;
  CompareReport report;
};

// msprobe's column set and order for the results' mode (real data, statistics or md5).
// `target_format`: the job's target run's dump format (Job.target_dump_format), which picks the
// table (msprobe's or the TorchAir one), as `parity compare` picks it.
std::string ExportCsv(const std::vector<v1::OpResult>& results, bool has_stacks = false,
                      const std::string& target_format = "");

// The summary document's members but the job (docs/schemas/summary.schema.json): counts,
// first_culprit, culprits, worst.
Json JobSummaryJson(const v1::JobSummary& summary);
// The summary's culprit analysis in the vocabulary of `parity compare --json`
// (CulpritAnalysisJson, with each culprit's stack).
Json CulpritAnalysisFromProto(const v1::JobSummary& summary);
OpPhase PhaseFromProto(v1::StepPhase p);
// The summary's module tree (GetJobSummaryRequest.module_tree) for ModuleTreeText.
std::vector<TreeNodeView> TreeFromProto(const v1::JobSummary& summary);

// `head`'s members, then "items": the results' item documents (docs/schemas/item.schema.json).
void WriteResultsJson(const Json& head, const std::vector<v1::OpResult>& results, std::ostream& out);

// One result's item document, pretty printed, with a newline.
std::string ResultJson(const v1::OpResult& result);

struct ModelExplorerExport {
  std::string metric_overlay;   // one value per operator, with thresholds
  std::string verdict_overlay;  // one verdict string per operator, coloured
};

// `metric`: cosine (default), pcc, max_abs_err or max_rel_err. Operators are keyed by their API
// name (the node id when the graph was built from the same dump); the value is the worst one of
// the operator's outputs. INVALID_ARGUMENT for an unknown metric.
absl::StatusOr<ModelExplorerExport> ExportModelExplorer(const std::vector<v1::OpResult>& results,
                                                        const std::string& metric,
                                                        const std::string& graph_id,
                                                        const std::string& title);

}  // namespace parity

#endif  // PARITY_CLIENT_EXPORT_H_
