// The forge policy: tt-forge-fe's verify() (VerifyConfig + value checkers), reproduced from
// forge/forge/verify/{verify,value_checkers,compare}.py and the verif_ops.cpp kernels.
// See shared/reference/checker-semantics.md §1.
//
// golden = framework model output (the GOLDEN run), calculated = compiled model output (TARGET).
#ifndef PARITY_COMMON_FORGE_POLICY_H_
#define PARITY_COMMON_FORGE_POLICY_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/checks/forge_kernel.h"
#include "common/base/tensor.h"
#include "common/checks/verdict.h"

namespace parity {

enum class ForgeChecker { kAutomatic, kAllClose, kFull };

struct ForgeOptions {
  bool enabled = true;
  bool verify_dtype = true;
  bool verify_shape = true;
  bool verify_values = true;
  ForgeChecker checker = ForgeChecker::kAutomatic;
  double pcc = 0.99;
  double rtol = 1e-05;
  double atol = 1e-08;
  double dissimilarity_threshold = 1e-03;
};

// A Python exception the peer would raise: type ("AssertionError", "RuntimeError",
// "ValueError") and message; empty type when nothing was raised.
struct PeerRaise {
  std::string type;
  std::string message;
  bool raised() const { return !type.empty(); }
};

// compare.calculate_pcc: the custom-kernel path (population covariance in double, mean in the
// tensor dtype, NaN -> all_close(atol=1e-9) -> 1.0 or AssertionError) when both tensors share
// a kernel dtype and hold no NaN/Inf; otherwise the numpy masked-corrcoef path.
struct PccOutcome {
  std::optional<double> value;
  PeerRaise raise;
  bool kernel_path = false;
};
PccOutcome ForgeCalculatePcc(const Tensor& a, const Tensor& b);
// calculate_or_estimate_pcc (numpy masked path) alone.
double ForgeNumpyPcc(const Tensor& a, const Tensor& b);
// The kernel PCC alone (NaN for constant tensors), without the NaN fallback.
double ForgeKernelPcc(const Tensor& a, const Tensor& b);
bool ForgeCanUseKernel(const Tensor& a, const Tensor& b);

// verif.all_close in the tensor dtype: max(|a-b| - atol - rtol*|b|) <= 0. RuntimeError
// ("TT_ASSERT: Tensor a contains NaN/Inf values") when a or b holds NaN/Inf.
struct AllCloseOutcome {
  std::optional<bool> pass;
  std::optional<double> max_excess;  // floating dtypes only
  PeerRaise raise;
};
// `scan`: ForgeScan of a and b (same kernel dtype). When it found them finite, the NaN/Inf scans
// are skipped and the fused kernel runs, or nothing runs when the scan computed the max excess
// for these tolerances already.
AllCloseOutcome ForgeAllClose(const Tensor& a, const Tensor& b, double rtol, double atol,
                              const ForgeScanResult* scan = nullptr);

// compute_required_tolerances(golden, calculated) -> (atol, rtol).
std::pair<double, double> ForgeRequiredTolerances(const Tensor& golden, const Tensor& calculated);

// Rogers-Tanimoto dissimilarity 2k/(n+k) of bool golden vs calculated (cast to bool).
double ForgeDissimilarity(const Tensor& golden, const Tensor& calculated);

// compare_with_golden(golden, calculated, pcc, rtol, atol, dissimilarity_threshold).
struct GoldenOutcome {
  std::string path;  // "dissimilarity", "pcc", "scalar_allclose"
  std::optional<bool> result;
  PeerRaise raise;
  std::vector<std::string> log;  // "ERROR: ..." / "TRACE: ..." lines (tensor dumps omitted)
  std::optional<double> pcc;
  std::optional<double> dissimilarity;
};
GoldenOutcome ForgeCompareWithGolden(const Tensor& golden, const Tensor& calculated,
                                     const ForgeOptions& opts);

// The whole per-tensor verify(): SKIPPED when disabled, then dtype and shape checks (both sides
// go through forge's DataFormat round trip: bool/int8/uint8/int64 read as int32, since both come
// from dumps rather than from a compiled model), then the
// configured value checker. PASS / FAIL (mismatch, or AssertionError) / ERROR (RuntimeError,
// or a checker that refuses the dtype).
CheckResult ForgeCheck(const Tensor& golden, const Tensor& calculated, const ForgeOptions& opts);

}  // namespace parity

#endif  // PARITY_COMMON_FORGE_POLICY_H_
