// Culprit analysis: which operator *causes* a divergence.
//
// Items are grouped by operator (their API, e.g. "Functional.linear.1.forward"). An operator
// whose outputs FAIL while none of its inputs or parameters fail is a culprit; one with failing
// outputs and an already failing input is propagated. An ERROR (data that could not be read) is
// no precision failure and counts as neither; unmatched inputs count as not failing. An item
// without a role (from a plain directory of tensor files) counts as its own operator's output.
//
// Training steps (msprobe's forward, backward and parameters_grad entries) are one causal story:
// - a backward entry ("X.backward", "Module.m.C.backward.N") records the gradient arriving at the
//   op (its inputs) and the one it passes on (its outputs), not the forward tensors the op
//   saved; it is a culprit only when its outputs fail while its inputs pass *and* its forward
//   entry (same name with "forward"; absent counts as passing) has no failing item; otherwise a
//   failing output is propagated;
// - a parameters_grad entry ("Module.m.C.parameters_grad") produces the module's parameter
//   gradients (its items, role gradient): failing, it is a culprit of its own (the gradient
//   phase) when no forward entry of the module has a failing item and no backward entry of it a
//   failing incoming gradient; otherwise propagated.
// Dump order is execution order: forward entries, then backward ones in gradient-flow order, so
// the first culprit in dump order is the earliest cause.
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
