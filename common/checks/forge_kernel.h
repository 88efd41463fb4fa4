// The fused, vectorised passes behind the forge policy (tt-forge-fe's verify) for the common
// case: golden and calculated of the same dtype, float64, float32, float16, bfloat16 or fp8
// (e4m3fn, e5m2), no NaN/inf.
//
// Contract:
// - ForgeScan reads both inputs once and gives what compute_required_tolerances and the PCC
//   kernel need: whether every input is finite, the float64 sums of each side, max |g - c| and
//   max |g - c| / |c| with zeros of c ignored (calculate_atol and calculate_rtol), in float16
//   arithmetic for float16 tensors, float64 for float64 and float32 otherwise (forge upcasts
//   bf16 to f32 there; fp8 is widened to float32 exactly, and its max |g - c| is the float64
//   one, as forge's element path takes it for dtypes outside the PCC kernel's), and for each
//   chunk of kForgeChunk elements its means and the float64 sums of the deviations from them
//   (dx, dy) and of their products (aa, ab, bb), taken while the chunk is in cache.
// - ForgeCovariance gives the PCC kernel's population covariances about the means the caller
//   derives from the sums (the dtype-rounded means of the peer), from the chunks alone:
//   sum over chunks of aa + 2 u dx + k u^2 (u = chunk mean - mean; likewise ab, bb), divided by
//   N. In exact arithmetic that is the peer's sum over k of (x_k - ma) / N * (y_k - mb); in
//   float64 it differs in the last bits, as the peer's own parallel sums do (their order is not
//   fixed), and needs no second pass over the tensors.
// - Within a chunk, element i goes to lane i % 8 of each sum, lanes are reduced in a fixed order,
//   chunks are combined in order and no FMA is used, so every implementation gives
//   bit-identical results. The implementation (AVX-512, AVX2 or portable code) follows
//   MsprobeKernelIsa(): chosen at run time, never at build time.
#ifndef PARITY_COMMON_FORGE_KERNEL_H_
#define PARITY_COMMON_FORGE_KERNEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/base/dtype.h"

namespace parity {

constexpr int64_t kForgeChunk = 8192;

struct ForgeChunkMoments {
  int64_t n = 0;
  double mean_g = 0, mean_c = 0;  // the chunk's sums / n
  double dx = 0, dy = 0;          // sums of (x - mean_g), (y - mean_c)
  double aa = 0, ab = 0, bb = 0;  // sums of their products
};

struct ForgeScanResult {
  // False: ForgeScan stopped at the first chunk holding a NaN/inf; use no other field then.
  bool finite = true;
  bool integer = false;  // from ForgeIntScan
  double sum_g = 0, sum_c = 0;
  double max_abs = 0;  // 0 for n == 0; a value of the arithmetic's dtype (above)
  double max_rel = 0;
  int64_t dissimilar = 0;  // ForgeIntScan: elements where exactly one of g, c is nonzero
  // Use nothing else when set: ForgeScan found float64 values beyond 2^300 or below 2^-300 in
  // magnitude (besides zeros; the chunked moments could overflow or lose bits to subnormals
  // where the element path does not).
  bool unsupported = false;
  std::vector<ForgeChunkMoments> chunks;  // one per kForgeChunk elements
  // ForgeAllCloseMax(t, g, c, n, rtol, atol) when ForgeScan was given those tolerances.
  std::optional<double> all_close_max;
  double all_close_rtol = 0, all_close_atol = 0;
};

// Tolerances for ForgeScan to compute verif.all_close's max excess in the same pass over the
// data (chunk by chunk, while each chunk is in cache), already rounded to the tensors' dtype.
struct ForgeAllCloseTolerance {
  double rtol = 0, atol = 0;
};

// True when the functions below handle two tensors of dtype `t` (and the kernel is enabled).
bool ForgeKernelSupports(DType t);

// `g` and `c` point at `n` elements of dtype `t` (ForgeKernelSupports(t)). With `all_close`,
// also all_close_max (bit for bit ForgeAllCloseMax's value).
ForgeScanResult ForgeScan(DType t, const char* g, const char* c, int64_t n,
                          const ForgeAllCloseTolerance* all_close = nullptr);

// Integer and bool pairs ((u)int8, (u)int16, (u)int32, (u)int64, bool as a byte, nonzero
// meaning true; both tensors of dtype `t`, ForgeIntKernelSupports(t)): in one pass over memory,
// what the forge policy's element path derives from them, with the values as Tensor::ToDouble
// gives them (exact but for (u)int64 beyond 2^53, rounded to nearest), integer = true and
// finite = true:
// - sum_g, sum_c: the sums (exact while a chunk's partial sums are integers below 2^53, so for
//   every dtype but (u)int64 with values beyond about 2^40; those round as float64 sums do);
// - max_abs: max |g - c| of those doubles (exact for every dtype but such (u)int64 values);
// - max_rel: calculate_rtol's max of float32(float32(g - c) / |c|) over c != 0 (forge computes
//   it in float32 for integer tensors), 0 for n == 0;
// - dissimilar: the count of elements where (g != 0) != (c != 0) (bool dissimilarity);
// - chunks: as ForgeScan, in float64 (ForgeCovariance applies).
// The implementations (AVX-512, AVX2, portable) agree bit for bit.
bool ForgeIntKernelSupports(DType t);
ForgeScanResult ForgeIntScan(DType t, const char* g, const char* c, int64_t n);
bool ForgeIntScanForIsa(const std::string& isa, DType t, const char* g, const char* c, int64_t n,
                        ForgeScanResult* out);

struct ForgeCovarianceResult {
  double aa = 0, ab = 0, bb = 0;
};
// `scan` from ForgeScan(t, g, c, n); the means of g and c as the PCC kernel forms them.
ForgeCovarianceResult ForgeCovariance(const ForgeScanResult& scan, double mean_g, double mean_c);

// verif.all_close's max excess for finite inputs (the caller knows it from ForgeScan): the
// maximum over k of R(R(|R(g_k - c_k)|) - atol) - R(rtol * |c_k|)) with R the rounding to the
// tensors' dtype (bfloat16 included) and `rtol`/`atol` already rounded to it; -inf for n == 0.
// Exactly the element-by-element value (a max, no sums).
double ForgeAllCloseMax(DType t, const char* g, const char* c, int64_t n, double rtol, double atol);

// Whether chunked float64 moments of values whose largest magnitude is `magnitude` give the PCC
// the element path gives (within 1e-12 relative): a side beyond 2^300 can overflow a product of
// deviations (the element path divides by N first), one below 2^-300 can lose bits to subnormal
// products.
bool ForgeF64RangeForPcc(double magnitude);

// Process-wide switch (default on): off, ForgeKernelSupports is false for every dtype and the
// forge policy takes its element-by-element path. For tests and benchmarks comparing the two.
void SetForgeKernelEnabled(bool enabled);

// The same with a given implementation ("portable", "avx2", "avx512"); false when this machine
// does not allow it. For tests comparing the implementations.
bool ForgeScanForIsa(const std::string& isa, DType t, const char* g, const char* c, int64_t n,
                     ForgeScanResult* out, const ForgeAllCloseTolerance* all_close = nullptr);
bool ForgeAllCloseMaxForIsa(const std::string& isa, DType t, const char* g, const char* c, int64_t n,
                            double rtol, double atol, double* out);

}  // namespace parity

#endif  // PARITY_COMMON_FORGE_KERNEL_H_
