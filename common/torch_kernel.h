// A vectorised summary of one block of a float32 pair for torch.testing.assert_close (the
// torch policy), in float32 arithmetic as torch evaluates two float32 tensors.
//
// Contract: for elements [0, count) of `a` (actual) and `b` (expected), when every input is
// finite, fills `out` and returns true; otherwise returns false and the caller takes the
// element-by-element path (NaN and inf need torch's position rules). The values are exactly
// those of the element-by-element evaluation (same float32 operations, no FMA):
//   d = |a - b|, close = a == b || (tolerance && d finite && d <= atol + |rtol * b|),
//   rel = d / |b| (0 where d == 0);
//   abs/rel: max d and max rel over all elements; gabs/grel: the same with 0 for close elements;
//   mismatches: elements not close.
// The implementation (AVX2 or portable) follows MsprobeKernelIsa(): same results on any machine.
#ifndef PARITY_COMMON_TORCH_KERNEL_H_
#define PARITY_COMMON_TORCH_KERNEL_H_

#include <cstdint>
#include <string>

namespace parity {

struct TorchBlockSummary {
  float abs = 0, rel = 0, gabs = 0, grel = 0;
  int64_t mismatches = 0;
};

// `tolerance` false: rtol == atol == 0, close means equal. count >= 1.
bool TorchF32Block(const float* a, const float* b, int64_t count, float rtol, float atol,
                   bool tolerance, TorchBlockSummary* out);

// Process-wide switch (default on): off, TorchF32Block returns false and callers take their
// element-by-element path. For tests and benchmarks comparing the two.
void SetTorchKernelEnabled(bool enabled);

// The same with a given implementation ("portable" or "avx2"); false when this machine does
// not allow it or an input is not finite. For tests comparing the implementations.
bool TorchF32BlockForIsa(const std::string& isa, const float* a, const float* b, int64_t count,
                         float rtol, float atol, bool tolerance, TorchBlockSummary* out);

}  // namespace parity

#endif  // PARITY_COMMON_TORCH_KERNEL_H_
