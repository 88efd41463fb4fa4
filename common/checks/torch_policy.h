// The torch policy: torch.testing.assert_close, its per-dtype default tolerances and its
// mismatch report. See shared/reference/checker-semantics.md §4.
//
// Two semantics are offered: kTorch2 (default; the torch 2.x code read for the reference:
// isclose in the promoted native dtype, scalars report "Expected ... but got ...") and
// kTorch113 (torch 1.13: both tensors promoted to float64 / int64 before isclose and before the
// reported differences), which the conformance vectors were computed with.
//
// actual = TARGET, expected = GOLDEN.
#ifndef PARITY_COMMON_TORCH_POLICY_H_
#define PARITY_COMMON_TORCH_POLICY_H_

#include <optional>
#include <utility>

#include "common/base/tensor.h"
#include "common/checks/verdict.h"

namespace parity {

enum class TorchCompat { kTorch2, kTorch113 };

struct TorchOptions {
  std::optional<double> rtol;  // both or neither
  std::optional<double> atol;
  bool equal_nan = false;
  bool check_dtype = true;
  TorchCompat compat = TorchCompat::kTorch2;
};

// (rtol, atol) of _DTYPE_PRECISIONS for one dtype; (0, 0) for ints, bool and fp8.
std::pair<double, double> TorchDTypePrecision(DType t);
// default_tolerances(actual, expected): the maximum over both dtypes.
std::pair<double, double> TorchDefaultTolerances(DType actual, DType expected);

// Number of elements torch.isclose(actual, expected) flags with these tolerances, computed in
// the semantics of `compat` (informational; used by tests).
int64_t TorchIsCloseMismatches(const Tensor& actual, const Tensor& expected, double rtol,
                               double atol, bool equal_nan, TorchCompat compat);

// assert_close(actual, expected): PASS, or FAIL with the exact AssertionError message.
// Metrics: Mismatched elements, Total elements, Greatest absolute difference (+ index),
// Greatest relative difference (+ index), rtol, atol.
CheckResult TorchAssertClose(const Tensor& actual, const Tensor& expected, const TorchOptions& o);

}  // namespace parity

#endif  // PARITY_COMMON_TORCH_POLICY_H_
