// Exports of a job's results fetched from parityd: msprobe-compatible CSV, JSON, and Model
// Explorer node-data overlays.
#ifndef PARITY_CLIENT_EXPORT_H_
#define PARITY_CLIENT_EXPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "parity/v1/parity.pb.h"

namespace parity {

// msprobe's column set and order for the results' mode (real data, statistics or md5).
std::string ExportCsv(const std::vector<v1::OpResult>& results);

// One message in the API's JSON mapping (proto field names), on one line.
std::string MessageJson(const google::protobuf::Message& m);
// {"job": ..., "summary": ..., "results": [...]} in the API's JSON mapping.
std::string ExportJson(const v1::Job& job, const v1::JobSummary& summary,
                       const std::vector<v1::OpResult>& results);

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
