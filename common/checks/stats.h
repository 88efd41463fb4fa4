// Tensor statistics as msprobe's dumper records them (get_stat_info): max, min, mean and L2
// norm; for bool max = any and min = all (no mean/norm); a 0-d tensor has all four equal to its
// value; an empty tensor has none. Accumulated in float64 (msprobe accumulates fp16/bf16 in
// their own dtype; statistics compared by Parity are computed on both sides by this function).
// float32/float16/bfloat16 tensors take one vectorised pass (AVX-512, AVX2 or portable, chosen
// at run time, bit-identical): sums in 8 float64 lanes (element i in lane i % 8) added in lane
// order, so mean and norm may differ from a sequential sum in the last bits; max and min are
// exact (when a tensor's maximum is a zero held as both -0 and +0, which of them is reported is
// not specified).
#ifndef PARITY_COMMON_STATS_H_
#define PARITY_COMMON_STATS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/base/tensor.h"

namespace parity {

struct TensorStats {
  std::optional<double> max, min, mean, norm;
};

TensorStats ComputeStats(const Tensor& t);

// ComputeStats a piece at a time, for a tensor of rank >= 1 read in pieces: Finish gives the
// same bits as ComputeStats of the whole tensor when every piece but the last holds a multiple
// of kStatsPieceElements elements (the blocks and lanes the sums are taken in). Statistics of
// no elements are none.
inline constexpr int64_t kStatsPieceElements = 1024;
class StatsAccumulator {
 public:
  explicit StatsAccumulator(DType dtype);
  ~StatsAccumulator();
  StatsAccumulator(StatsAccumulator&&) noexcept;
  StatsAccumulator& operator=(StatsAccumulator&&) noexcept;
  // `n` elements of the dtype at `data`, following those added before.
  void Add(const char* data, int64_t n);
  TensorStats Finish() const;

 private:
  struct State;
  DType dtype_;
  bool vectorised_;
  std::unique_ptr<State> state_;
};

// Process-wide switch (default on): off, every dtype takes the element-by-element path. For
// tests and benchmarks comparing the two.
void SetStatsKernelEnabled(bool enabled);

// The vectorised pass with a given implementation ("portable", "avx2", "avx512"); false when
// this machine does not allow it or `t` is not a float32/float16/bfloat16 tensor of rank >= 1
// with elements. For tests comparing the implementations.
bool ComputeStatsForIsa(const std::string& isa, const Tensor& t, TensorStats* out);

}  // namespace parity

#endif  // PARITY_COMMON_STATS_H_
