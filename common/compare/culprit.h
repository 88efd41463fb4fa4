// Culprit analysis: which operator *causes* a divergence.
//
// Items are grouped by operator (their API, e.g. "Functional.linear.1.forward"). An operator
// whose outputs FAIL while none of its inputs or parameters fail is a culprit; one with failing
// outputs and an already failing input is propagated. An ERROR (data that could not be read) is
// no precision failure and counts as neither; unmatched inputs count as not failing. An item
// without a role (from a plain directory of tensor files) counts as its own operator's output.
#ifndef PARITY_COMMON_CULPRIT_H_
#define PARITY_COMMON_CULPRIT_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/formats/dump.h"
#include "common/checks/verdict.h"

namespace parity {

enum class OpStatus { kNone, kCulprit, kPropagated };

struct CulpritInput {
  absl::string_view api;  // views a string that outlives the analysis
  Role role;
  Verdict verdict;
};

struct OpAnalysis {
  std::string api;
  OpStatus status;
};

// `items` in dump order; returns one entry per operator in order of first appearance. With
// `op_of_item`, also the position in the result of each item's operator.
std::vector<OpAnalysis> AnalyzeCulprits(const std::vector<CulpritInput>& items,
                                        std::vector<size_t>* op_of_item = nullptr);

// The first culprit of an analysis, in dump order: the one summaries report; "" when none.
std::string FirstCulprit(const std::vector<OpAnalysis>& ops);

}  // namespace parity

#endif  // PARITY_COMMON_CULPRIT_H_
