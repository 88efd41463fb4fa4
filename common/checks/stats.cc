#include "common/checks/stats.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>

#include "common/checks/simd.h"

namespace parity {
namespace {

constexpr int kLanes = 8;
constexpr int64_t kChunk = 1024;
constexpr float kInf = std::numeric_limits<float>::infinity();

std::atomic<bool> g_kernel{true};

// Per lane (element i in lane i % 8, in element order): max, min, NaN seen, float64 sum and
// sum of squares.
struct Lanes {
  float mx[kLanes], mn[kLanes];
  int nan[kLanes] = {0};
  double sum[kLanes] = {0}, sq[kLanes] = {0};
  Lanes() {
    std::fill(mx, mx + kLanes, -kInf);
    std::fill(mn, mn + kLanes, kInf);
  }
};

PARITY_INLINE void Step(Lanes& l, int j, float v) {
  l.nan[j] |= static_cast<int>(std::isnan(v));
  l.mx[j] = l.mx[j] < v ? v : l.mx[j];  // as std::max(mx, v): a NaN v leaves it
  l.mn[j] = v < l.mn[j] ? v : l.mn[j];
  const double d = static_cast<double>(v);
  l.sum[j] += d;
  l.sq[j] += d * d;
}

template <DType T>
PARITY_INLINE void Tail(const char* p, int64_t from, int64_t n, Lanes& l) {
  float x[kChunk];
  for (int64_t s = from; s < n; s += kChunk) {
    const int64_t k = std::min(kChunk, n - s);
    simd::Widen<T>(p, s, k, x);
    for (int64_t i = 0; i < k; ++i) Step(l, static_cast<int>((s + i) % kLanes), x[i]);
  }
}

// The vectorised passes add elements [0, n) at `p` to `l` (which holds what came before them,
// n of them a multiple of kLanes unless they are the last).
template <DType T>
void Portable(const char* p, int64_t n, Lanes& l) {
  Tail<T>(p, 0, n, l);
}

PARITY_AVX2 inline void SpillFloats(__m256 mx, __m256 mn, __m256 nan, Lanes& l) {
  alignas(32) float f[kLanes];
  _mm256_storeu_ps(l.mx, mx);
  _mm256_storeu_ps(l.mn, mn);
  _mm256_store_ps(f, nan);
  for (int j = 0; j < kLanes; ++j) {
    uint32_t bits;
    std::memcpy(&bits, &f[j], 4);
    l.nan[j] = bits != 0;
  }
}

// The lanes' NaN flags (0 or 1) as a mask: all bits set where a NaN was seen.
PARITY_AVX2 inline __m256 LoadNan(const Lanes& l) {
  return _mm256_castsi256_ps(
      _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(l.nan))));
}

template <DType T>
PARITY_AVX2 void Avx2(const char* p, int64_t n, Lanes& l) {
  __m256 mx = _mm256_loadu_ps(l.mx), mn = _mm256_loadu_ps(l.mn), nan = LoadNan(l);
  __m256d sum[2] = {_mm256_loadu_pd(l.sum), _mm256_loadu_pd(l.sum + 4)},
          sq[2] = {_mm256_loadu_pd(l.sq), _mm256_loadu_pd(l.sq + 4)};
  const int64_t full = n / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    const __m256 v = simd::Load8<T>(p, i);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    mx = _mm256_max_ps(v, mx);  // v > mx ? v : mx, so a NaN v leaves it
    mn = _mm256_min_ps(v, mn);
    const __m256d d[2] = {_mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                          _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))};
    for (int h = 0; h < 2; ++h) {
      sum[h] = _mm256_add_pd(sum[h], d[h]);
      sq[h] = _mm256_add_pd(sq[h], _mm256_mul_pd(d[h], d[h]));
    }
  }
  SpillFloats(mx, mn, nan, l);
  for (int h = 0; h < 2; ++h) {
    _mm256_storeu_pd(l.sum + 4 * h, sum[h]);
    _mm256_storeu_pd(l.sq + 4 * h, sq[h]);
  }
  Tail<T>(p, full, n, l);
}

template <DType T>
PARITY_AVX512 void Avx512(const char* p, int64_t n, Lanes& l) {
  __m256 mx = _mm256_loadu_ps(l.mx), mn = _mm256_loadu_ps(l.mn), nan = LoadNan(l);
  __m512d sum = _mm512_loadu_pd(l.sum), sq = _mm512_loadu_pd(l.sq);
  const int64_t full = n / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    const __m256 v = simd::Load8<T>(p, i);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    mx = _mm256_max_ps(v, mx);
    mn = _mm256_min_ps(v, mn);
    const __m512d d = _mm512_cvtps_pd(v);
    sum = _mm512_add_pd(sum, d);
    sq = _mm512_add_pd(sq, _mm512_mul_pd(d, d));
  }
  SpillFloats(mx, mn, nan, l);
  _mm512_storeu_pd(l.sum, sum);
  _mm512_storeu_pd(l.sq, sq);
  Tail<T>(p, full, n, l);
}

template <DType T>
void Run(simd::Isa isa, const char* p, int64_t n, Lanes& l) {
  if (isa == simd::Isa::kAvx512) {
    Avx512<T>(p, n, l);
  } else if (isa == simd::Isa::kAvx2) {
    Avx2<T>(p, n, l);
  } else {
    Portable<T>(p, n, l);
  }
}

void RunFor(simd::Isa isa, DType t, const char* p, int64_t n, Lanes& l) {
  switch (t) {
    case DType::kFloat32: return Run<DType::kFloat32>(isa, p, n, l);
    case DType::kFloat16: return Run<DType::kFloat16>(isa, p, n, l);
    default: return Run<DType::kBFloat16>(isa, p, n, l);
  }
}

TensorStats FromLanes(const Lanes& l, int64_t n) {
  bool nan = false;
  double mx = -std::numeric_limits<double>::infinity(), mn = -mx, sum = 0, sq = 0;
  for (int j = 0; j < kLanes; ++j) {
    nan = nan || l.nan[j] != 0;
    mx = std::max(mx, static_cast<double>(l.mx[j]));
    mn = std::min(mn, static_cast<double>(l.mn[j]));
    sum += l.sum[j];
    sq += l.sq[j];
  }
  const double q = std::numeric_limits<double>::quiet_NaN();
  TensorStats s;
  s.max = nan ? q : mx;
  s.min = nan ? q : mn;
  s.mean = sum / static_cast<double>(n);
  s.norm = std::sqrt(sq);
  return s;
}

bool Vectorised(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

TensorStats VectorStats(simd::Isa isa, const Tensor& t) {
  Lanes l;
  RunFor(isa, t.dtype(), t.data(), t.numel(), l);
  return FromLanes(l, t.numel());
}

// The element-by-element path's blocks (kStatsPieceElements: a piece's blocks are the whole
// tensor's).
constexpr int64_t kBlock = 1024;
static_assert(kStatsPieceElements % kBlock == 0 && kBlock % kLanes == 0, "pieces end on blocks and lanes");

}  // namespace

struct StatsAccumulator::State {
  Lanes lanes;  // the vectorised path
  // The element-by-element path.
  double mx = -std::numeric_limits<double>::infinity(), mn = std::numeric_limits<double>::infinity();
  double sum = 0, sq = 0;
  bool nan = false;
  int64_t n = 0;
};

StatsAccumulator::StatsAccumulator(DType dtype)
    : dtype_(dtype), vectorised_(g_kernel && Vectorised(dtype)), state_(std::make_unique<State>()) {}

StatsAccumulator::~StatsAccumulator() = default;
StatsAccumulator::StatsAccumulator(StatsAccumulator&&) noexcept = default;
StatsAccumulator& StatsAccumulator::operator=(StatsAccumulator&&) noexcept = default;

void StatsAccumulator::Add(const char* data, int64_t n) {
  if (n <= 0) return;
  State& st = *state_;
  st.n += n;
  if (vectorised_) {
    RunFor(simd::Selected(), dtype_, data, n, st.lanes);
    return;
  }
  absl::StatusOr<Tensor> piece = Tensor::MakeView(dtype_, Shape{n}, nullptr,
                                                  absl::string_view(data, static_cast<size_t>(n) * DTypeSize(dtype_)));
  if (!piece.ok()) return;  // cannot happen: the size is numel x DTypeSize
  double buf[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t k = std::min(kBlock, n - b);
    piece->ToDouble(b, k, buf);
    double bs = 0, bq = 0;
    for (int64_t i = 0; i < k; ++i) {
      const double v = buf[i];
      if (std::isnan(v)) st.nan = true;
      st.mx = std::max(st.mx, v);
      st.mn = std::min(st.mn, v);
      bs += v;
      bq += v * v;
    }
    st.sum += bs;
    st.sq += bq;
  }
}

TensorStats StatsAccumulator::Finish() const {
  const State& st = *state_;
  TensorStats s;
  if (st.n == 0) return s;
  if (vectorised_) return FromLanes(st.lanes, st.n);
  const double q = std::numeric_limits<double>::quiet_NaN();
  s.max = st.nan ? q : st.mx;
  s.min = st.nan ? q : st.mn;
  if (dtype_ == DType::kBool) return s;  // max = any, min = all
  s.mean = st.sum / static_cast<double>(st.n);
  s.norm = std::sqrt(st.sq);
  return s;
}

TensorStats ComputeStats(const Tensor& t) {
  TensorStats s;
  if (t.numel() == 0) return s;
  if (t.rank() == 0) {
    const double v = t.At(0);
    s.max = s.min = s.mean = s.norm = v;
    return s;
  }
  StatsAccumulator a(t.dtype());
  a.Add(t.data(), t.numel());
  return a.Finish();
}

void SetStatsKernelEnabled(bool enabled) { g_kernel = enabled; }

bool ComputeStatsForIsa(const std::string& isa, const Tensor& t, TensorStats* out) {
  simd::Isa i;
  if (!Vectorised(t.dtype()) || t.numel() == 0 || t.rank() == 0 || !simd::Allowed(isa, &i)) {
    return false;
  }
  *out = VectorStats(i, t);
  return true;
}

}  // namespace parity
