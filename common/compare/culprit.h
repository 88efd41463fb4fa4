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
//
// Error growth (Parity's own; the verdicts stay the peers'): each item may carry an error
// figure (ItemError: its relative L2 error), and each operator's growth is the largest error of
// its outputs over the largest error it received (its inputs and parameters; for a backward
// entry also its forward entry's items, the tensors it saved; for a parameters_grad entry its
// module's forward items and incoming gradients), the latter no smaller than the rounding unit
// of the outputs' dtype. The noise floor is the finite growth that the run's operators without a
// failing output reach (the 99th percentile, the largest with fewer than 100 of them). An
// operator's own rounding can grow the error more when its outputs fail too (a ReLU's backward
// whose mask flips with bf16 inputs), so the run also gives an outlier fence: over the
// operators not blamed on another (passing or failing), kFenceMads robust standard deviations
// (1.4826 MADs) above the median, in log scale (growth below kFenceFloor counted as it), with at
// least kFenceMinSamples of them. A candidate culprit (by the rules above) whose growth is known
// and stays below the threshold (the largest of kMinGrowth, kNoiseMargin times the noise floor
// and the fence) is no culprit: its failure is within what the run's own rounding does. An operator with unknown growth (no error figures:
// a policy that reports none, or data the peer could not measure) is decided by the rules
// above alone.
//
// With the dump's module tree (msprobe's construct.json: node -> enclosing module), a culprit
// that encloses another culprit (a module around the failing API, at level mix) is propagated:
// the failure is its inner operator's.
#ifndef PARITY_COMMON_CULPRIT_H_
#define PARITY_COMMON_CULPRIT_H_

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/base/dtype.h"
#include "common/formats/dump.h"
#include "common/checks/verdict.h"

namespace parity {

enum class OpStatus { kNone, kCulprit, kPropagated };

// Which part of a training step an operator belongs to: "X.forward" and
// "Module.m.C.forward.N" entries, backward entries, a module's parameters_grad (its parameter
// gradients), or none of these (a plain dump, a graph dump).
enum class OpPhase { kForward, kBackward, kGradient, kNone };
const char* OpPhaseName(OpPhase p);  // "forward", "backward", "gradient", ""

inline constexpr double kUnknownError = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kMinGrowth = 4.0;
inline constexpr double kNoiseMargin = 2.0;
inline constexpr double kFenceMads = 5.0;
inline constexpr double kFenceFloor = 1e-3;
inline constexpr size_t kFenceMinSamples = 20;

struct CulpritInput {
  absl::string_view api;  // views a string that outlives the analysis
  Role role;
  Verdict verdict;
  double error = kUnknownError;  // ItemError of the item; NaN when unknown
  double unit = 0;               // RoundingUnit of the target item's dtype
};

struct OpAnalysis {
  std::string api;
  OpStatus status = OpStatus::kNone;
  OpPhase phase = OpPhase::kNone;
  bool fails = false;                   // an output (or a parameter gradient) FAILs
  double in_error = kUnknownError;      // the largest error received; NaN when unknown
  double out_error = kUnknownError;     // the largest error of its outputs
  double growth = kUnknownError;        // out_error / max(in_error, unit); NaN when unknown
};

// The run's noise floor (NaN when no operator without a failing output has a known growth) and
// the growth a culprit must reach (at least kMinGrowth).
struct GrowthFloor {
  double noise = kUnknownError;
  double threshold = kMinGrowth;
  size_t samples = 0;  // operators the noise floor was estimated from
  double fence = kUnknownError;  // the outlier fence; NaN with fewer than kFenceMinSamples
};

// `items` in dump order; returns one entry per operator in order of first appearance. With
// `op_of_item`, also the position in the result of each item's operator; with `floor`, the
// noise floor the analysis used.
// `parents`, when given, is construct.json (node -> its parent, "" for none).
using ParentList = std::vector<std::pair<std::string, std::string>>;
std::vector<OpAnalysis> AnalyzeCulprits(const std::vector<CulpritInput>& items,
                                        std::vector<size_t>* op_of_item = nullptr,
                                        GrowthFloor* floor = nullptr, const ParentList* parents = nullptr);

// Parity's error figure of one compared item: its relative L2 error ||t - g|| / ||g||, from the
// policy's metrics and the items' L2 norms (statistics): msprobe's EucDist over the golden norm;
// else a cosine (msprobe's Cosine, forge's PCC) with both norms (exact: r^2 + 1 - 2rc under the
// root, r the norms' ratio) or, without them, sqrt(2 - 2c); msprobe's statistics NormRelativeErr
// (a lower bound). NaN when the row holds none of these as numbers, is no comparison (ERROR,
// UNMATCHED, SKIPPED), or the target is no floating-point tensor (a flipped mask or index has no
// relative error worth comparing).
double ItemError(const CheckResult& r, std::optional<DType> target_dtype, std::optional<double> golden_norm,
                 std::optional<double> target_norm);

// Half the spacing of `t`'s values at 1 (2^-8 for bfloat16, 2^-24 for float32); 0 for integers
// and bool.
double RoundingUnit(DType t);

// The culprits' positions in `ops`, largest growth first (unknown growth after known, then dump
// order).
std::vector<size_t> RankedCulprits(const std::vector<OpAnalysis>& ops);

// The analysis in the JSON vocabulary (docs/schemas/culprit_analysis.schema.json): the noise
// floor ("noise_growth", null when unknown), "growth_threshold", "noise_samples", "growth_fence"
// (null when unknown), and "ranked":
// the culprits, largest growth first, each {"api", "phase" (null outside a training step),
// "growth", "in_error", "out_error" (null when unknown)}; at most `max_culprits` of them
// ("more": how many were left out); "within_noise": the operators whose outputs fail but whose
// growth stays below the threshold, in dump order (at most `max_culprits`).
Json CulpritAnalysisJson(const std::vector<OpAnalysis>& ops, const GrowthFloor& floor,
                         size_t max_culprits = 1000);

// The first culprit of an analysis, in dump order: the one summaries report; "" when none.
std::string FirstCulprit(const std::vector<OpAnalysis>& ops);

}  // namespace parity

#endif  // PARITY_COMMON_CULPRIT_H_
