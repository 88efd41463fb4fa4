// Tensor statistics as msprobe's dumper records them (get_stat_info): max, min, mean and L2
// norm; for bool max = any and min = all (no mean/norm); a 0-d tensor has all four equal to its
// value; an empty tensor has none. Accumulated in float64 (msprobe accumulates fp16/bf16 in
// their own dtype; statistics compared by Parity are computed on both sides by this function).
#ifndef PARITY_COMMON_STATS_H_
#define PARITY_COMMON_STATS_H_

#include <optional>

#include "common/tensor.h"

namespace parity {

struct TensorStats {
  std::optional<double> max, min, mean, norm;
};

TensorStats ComputeStats(const Tensor& t);

}  // namespace parity

#endif  // PARITY_COMMON_STATS_H_
