#include "common/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace parity {

TensorStats ComputeStats(const Tensor& t) {
  TensorStats s;
  if (t.numel() == 0) return s;
  if (t.rank() == 0) {
    const double v = t.At(0);
    s.max = s.min = s.mean = s.norm = v;
    return s;
  }
  constexpr int64_t kBlock = 1024;
  double buf[kBlock];
  double mx = -std::numeric_limits<double>::infinity(), mn = std::numeric_limits<double>::infinity();
  double sum = 0, sq = 0;
  bool nan = false;
  for (int64_t b = 0; b < t.numel(); b += kBlock) {
    const int64_t k = std::min(kBlock, t.numel() - b);
    t.ToDouble(b, k, buf);
    double bs = 0, bq = 0;
    for (int64_t i = 0; i < k; ++i) {
      const double v = buf[i];
      if (std::isnan(v)) nan = true;
      mx = std::max(mx, v);
      mn = std::min(mn, v);
      bs += v;
      bq += v * v;
    }
    sum += bs;
    sq += bq;
  }
  const double q = std::numeric_limits<double>::quiet_NaN();
  s.max = nan ? q : mx;
  s.min = nan ? q : mn;
  if (t.dtype() == DType::kBool) return s;  // max = any, min = all
  s.mean = sum / static_cast<double>(t.numel());
  s.norm = std::sqrt(sq);
  return s;
}

}  // namespace parity
