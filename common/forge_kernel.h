// The fused, vectorised passes behind the forge policy (tt-forge-fe's verify) for the common
// case: golden and calculated of the same dtype, float32, float16 or bfloat16, no NaN/inf.
//
// Contract:
// - ForgeScan reads both inputs once and gives what compute_required_tolerances and the PCC
//   kernel need before the means are known: whether every input is finite, the float64 sums of
//   each side, max |g - c| and max |g - c| / |c| with zeros of c ignored (calculate_atol and
//   calculate_rtol), in float16 arithmetic for float16 tensors and float32 otherwise (forge
//   upcasts bf16 to f32 there).
// - ForgeCovariance is the PCC kernel's second pass: sum over k of (x_k - ma) / N * (y_k - mb)
//   (and the aa/bb terms), in float64, each term exactly as the element-by-element code forms it.
// - Sums use 8 lanes (element i goes to lane i % 8), reduced in a fixed order at the end, and no
//   FMA is used, so every implementation gives bit-identical results; they differ from a
//   sequential sum only in summation order (the peer's own kernel sums in parallel chunks, in
//   no fixed order). The implementation (AVX-512, AVX2 or portable code) follows
//   MsprobeKernelIsa(): chosen at run time, never at build time.
#ifndef PARITY_COMMON_FORGE_KERNEL_H_
#define PARITY_COMMON_FORGE_KERNEL_H_

#include <cstdint>
#include <string>

#include "common/dtype.h"

namespace parity {

struct ForgeScanResult {
  bool finite = true;
  double sum_g = 0, sum_c = 0;
  float max_abs = 0;  // 0 for n == 0
  float max_rel = 0;
};

// True when the functions below handle two tensors of dtype `t` (and the kernel is enabled).
bool ForgeKernelSupports(DType t);

// `g` and `c` point at `n` elements of dtype `t` (ForgeKernelSupports(t)).
ForgeScanResult ForgeScan(DType t, const char* g, const char* c, int64_t n);

struct ForgeCovarianceResult {
  double aa = 0, ab = 0, bb = 0;
};
ForgeCovarianceResult ForgeCovariance(DType t, const char* a, const char* b, int64_t n,
                                      double mean_a, double mean_b);

// Process-wide switch (default on): off, ForgeKernelSupports is false for every dtype and the
// forge policy takes its element-by-element path. For tests and benchmarks comparing the two.
void SetForgeKernelEnabled(bool enabled);

// The same with a given implementation ("portable", "avx2", "avx512"); false when this machine
// does not allow it. For tests comparing the implementations.
bool ForgeScanForIsa(const std::string& isa, DType t, const char* g, const char* c, int64_t n,
                     ForgeScanResult* out);
bool ForgeCovarianceForIsa(const std::string& isa, DType t, const char* a, const char* b,
                           int64_t n, double mean_a, double mean_b, ForgeCovarianceResult* out);

}  // namespace parity

#endif  // PARITY_COMMON_FORGE_KERNEL_H_
