// The vectorised pass behind the forge policy's other path: the pairs forge's PCC kernel does not
// take (golden and calculated of different dtypes, which `verify_dtype=False` lets through, or
// holding NaN/inf), where the peer uses numpy's masked corrcoef (calculate_or_estimate_pcc),
// compute_required_tolerances' general branch and verif.all_close in the wider dtype.
//
// Contract (every value as Tensor::ToDouble gives it, x from golden, y from calculated, over the
// n pairs):
// - mismatch: some pair where exactly one of x, y is NaN/inf, or both are but differ (+inf vs
//   -inf, inf vs NaN): numpy's masks or masked values differ (the PCC is then 0.0);
// - unequal: some pair with x != y (so any NaN);
// - special_g / special_c: a NaN/inf on that side (all_close raises);
// - max_abs: max |x - y| over pairs whose difference is not NaN, -inf when there is none;
// - max_rel, rel_nan: calculate_rtol's terms R(R(x - y)| / d) with d = |y|, or +inf where y == 0,
//   R the rounding to float64 / float16 / float32 for a float64 / float16 / other golden: their
//   maximum (-inf for n == 0) and whether any is NaN;
// - moments.sum_g, moments.sum_c, moments.chunks: the sums of the pairs where both values are
//   finite, and per kForgeChunk positions (chunks with no such pair left out) their means and
//   moments about them, as ForgeScan gives them (ForgeCovariance applies; n counts those pairs);
//   moments.unsupported when a float64 side holds finite values whose chunked moments could
//   overflow or underflow (then use nothing of this result);
// - all_close_max (when asked and no side holds NaN/inf): max over pairs of
//   R2(R2(|R2(x - y)| - atol) - R2(rtol * |y|)) with R2 the rounding to `all_close_dtype` and the
//   tolerances already rounded to it; -inf for n == 0.
// Within a chunk, element i goes to lane i % 8 of each sum, lanes are reduced in a fixed order and
// no FMA is used, so the implementations (AVX-512, AVX2, portable) agree bit for bit; the sums
// differ from the element path's sequential ones only in the last bits.
#ifndef PARITY_COMMON_FORGE_MASKED_KERNEL_H_
#define PARITY_COMMON_FORGE_MASKED_KERNEL_H_

#include <cstdint>
#include <optional>
#include <string>

#include "common/base/dtype.h"
#include "common/checks/forge_kernel.h"

namespace parity {

struct ForgeMaskedScanResult {
  bool mismatch = false;
  bool unequal = false;
  bool special_g = false, special_c = false;
  double max_abs = 0;
  double max_rel = 0;
  bool rel_nan = false;
  ForgeScanResult moments;  // sum_g, sum_c, chunks, unsupported
  int64_t valid = 0;        // pairs where both values are finite
  std::optional<double> all_close_max;
  double all_close_rtol = 0, all_close_atol = 0;  // the tolerances it was computed for
};

struct ForgeMaskedAllClose {
  DType dtype = DType::kFloat32;  // floating
  double rtol = 0, atol = 0;      // values of that dtype
};

// True when ForgeMaskedScan takes a golden of dtype `g` and a calculated of dtype `c` (floating
// and integer dtypes, bool excluded; the kernel enabled: SetForgeKernelEnabled).
bool ForgeMaskedKernelSupports(DType g, DType c);

ForgeMaskedScanResult ForgeMaskedScan(DType tg, const char* g, DType tc, const char* c, int64_t n,
                                      const ForgeMaskedAllClose* all_close = nullptr);

// The same with a given implementation ("portable", "avx2", "avx512"); false when this machine
// does not allow it. For tests comparing the implementations.
bool ForgeMaskedScanForIsa(const std::string& isa, DType tg, const char* g, DType tc, const char* c,
                           int64_t n, const ForgeMaskedAllClose* all_close, ForgeMaskedScanResult* out);

}  // namespace parity

#endif  // PARITY_COMMON_FORGE_MASKED_KERNEL_H_
