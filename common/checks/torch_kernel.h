// A vectorised summary of one block of a floating pair for torch.testing.assert_close (the
// torch policy), for two tensors of the same dtype (float64, float32, float16 or bfloat16)
// evaluated in that dtype, as torch does: float64 in float64; the others in float32 and, for
// float16/bfloat16, every operation rounded to the dtype (round to nearest even) before the
// next one.
//
// Contract: for elements [0, count) of `a` (actual) and `b` (expected), when every input is
// finite, fills `out` and returns true; otherwise returns false and the caller takes the
// element-by-element path (NaN and inf need torch's position rules). Integer formats are
// always finite; for (u)int64 it also returns false when some a - b is exactly -2^63 modulo 2^64
// (torch's abs of it wraps to -2^63, a negative "difference"). With R the rounding to
// the dtype (identity for float32), `rtol`/`atol` already rounded by the caller, no FMA:
//   d = |R(a - b)|, close = a == b || (tolerance && d finite && d <= R(atol + |R(rtol * b)|)),
//   rel = R(d / |b|) (0 where d == 0);
//   abs/rel: max d and max rel over all elements; gabs/grel: the same with 0 for close elements;
//   mismatches: elements not close.
// With `locate`, also the first index in [0, count) holding each of the four maxima (a second
// pass over the block; 0 when the maximum is 0 and held by element 0). These are exactly the
// values of the element-by-element evaluation. The implementation (AVX-512, AVX2 with F16C, or
// portable; the integer formats and float64 have AVX-512 and portable code, AVX2 runs the
// portable one) follows MsprobeKernelIsa(): same results on any machine.
#ifndef PARITY_COMMON_TORCH_KERNEL_H_
#define PARITY_COMMON_TORCH_KERNEL_H_

#include <cstdint>
#include <string>

namespace parity {

// The element format of both inputs: float64, float32, IEEE half (raw uint16) or bfloat16 (raw
// uint16);
// or an integer format (bool as one byte 0/1), for which torch computes (Arith kInt64, the
// values upcast to int64; uint64 reinterpreted as int64, wrapping):
//   d = |a - b| exactly (int64: modulo 2^64); close = a == b || (tolerance &&
//   |f(a) - f(b)| <= atol + |rtol * f(b)|) in float32 with f the rounding of the exact value to
//   float32 (uint64: of the unsigned value); rel = f(d) / f(|b|) in float32 (0 where d == 0).
// kF8E4M3/kF8E5M2: fp8 pairs, evaluated in float32 as the policy's element path widens them
// (exactly; the summary is the float32 pair's).
enum class TorchFormat {
  kF32, kF16, kBF16, kI8, kU8, kI16, kU16, kI32, kU32, kBool, kI64, kU64, kF64, kF8E4M3, kF8E5M2
};

struct TorchBlockSummary {
  double abs = 0, rel = 0, gabs = 0, grel = 0;  // float32 values for the formats evaluated in it
  int64_t iabs = 0, igabs = 0;  // integer formats: abs and gabs exactly (above: nearest doubles)
  int64_t mismatches = 0;
  int64_t abs_index = 0, rel_index = 0, gabs_index = 0, grel_index = 0;  // with `locate`
};

// `tolerance` false: rtol == atol == 0, close means equal. count >= 1. `a` and `b` point at
// `count` elements of `format`. rtol/atol are used as float32 values except for float64.
bool TorchBlock(TorchFormat format, const void* a, const void* b, int64_t count, double rtol,
                double atol, bool tolerance, bool locate, TorchBlockSummary* out);

// Process-wide switch (default on): off, TorchBlock returns false and callers take their
// element-by-element path. For tests and benchmarks comparing the two.
void SetTorchKernelEnabled(bool enabled);

// The same with a given implementation ("portable", "avx2" or "avx512"); false when this machine does
// not allow it or an input is not finite. For tests comparing the implementations.
bool TorchBlockForIsa(const std::string& isa, TorchFormat format, const void* a, const void* b,
                      int64_t count, double rtol, double atol, bool tolerance, bool locate,
                      TorchBlockSummary* out);

// n fp8 values (e5m2 when `e5m2`, else e4m3fn) widened to float32 by the given implementation,
// as the fp8 kernels widen them; false when this machine does not allow it. For tests: every
// implementation must give Float8ToFloats's bits (a NaN may come out quiet).
bool WidenFloat8ForIsa(const std::string& isa, bool e5m2, const char* in, int64_t n, float* out);

}  // namespace parity

#endif  // PARITY_COMMON_TORCH_KERNEL_H_
