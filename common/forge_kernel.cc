#include "common/forge_kernel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/simd.h"

namespace parity {
namespace {

constexpr int kLanes = 8;
constexpr int64_t kChunk = 1024;  // a multiple of kLanes: element s + i goes to lane i % 8
constexpr float kInf = std::numeric_limits<float>::infinity();

// The plain C++ below is compiled once per instruction set (the target attributes of the
// wrappers further down) and vectorised by the compiler across the 8 lanes; every lane is
// summed in element order and nothing is reassociated, so all versions agree bit for bit.

// The arithmetic of forge's calculate_atol/calculate_rtol: float16 for float16 tensors
// (every result rounded to half), float32 otherwise (bfloat16 is upcast).
template <DType T>
PARITY_INLINE float Round(float v) {
  if constexpr (T == DType::kFloat16) {
    return RoundToHalf(v);
  } else {
    return v;
  }
}

template <typename T>
PARITY_INLINE T Max(T a, T b) { return a < b ? b : a; }

struct ScanLanes {
  double sg[kLanes] = {0}, sc[kLanes] = {0};
  float mabs[kLanes] = {0}, mrel[kLanes] = {0};
  int bad[kLanes] = {0};
};

template <DType T>
PARITY_INLINE void ScanStep(ScanLanes& l, int j, float x, float y) {
  l.bad[j] |= static_cast<int>(!(std::fabs(x) < kInf && std::fabs(y) < kInf));
  l.sg[j] += static_cast<double>(x);
  l.sc[j] += static_cast<double>(y);
  const float d = std::fabs(Round<T>(x - y));
  l.mabs[j] = Max(l.mabs[j], d);
  // calculate_rtol: a zero in c gives an infinite denominator, so a relative difference of 0.
  const float r = y == 0 ? 0.0f : Round<T>(d / (y == 0 ? 1.0f : std::fabs(y)));
  l.mrel[j] = Max(l.mrel[j], r);
}

PARITY_INLINE ForgeScanResult ScanReduce(const ScanLanes& l) {
  ForgeScanResult out;
  for (int j = 0; j < kLanes; ++j) {
    out.finite = out.finite && l.bad[j] == 0;
    out.sum_g += l.sg[j];
    out.sum_c += l.sc[j];
    out.max_abs = Max(out.max_abs, l.mabs[j]);
    out.max_rel = Max(out.max_rel, l.mrel[j]);
  }
  return out;
}

template <DType T>
PARITY_INLINE ForgeScanResult ScanBody(const char* g, const char* c, int64_t n) {
  ScanLanes l;
  alignas(64) float x[kChunk], y[kChunk];
  for (int64_t s = 0; s < n; s += kChunk) {
    const int64_t k = std::min(kChunk, n - s);
    simd::Widen<T>(g, s, k, x);
    simd::Widen<T>(c, s, k, y);
    const int64_t full = k / kLanes * kLanes;
    for (int64_t i = 0; i < full; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) ScanStep<T>(l, j, x[i + j], y[i + j]);
    }
    for (int64_t i = full; i < k; ++i) ScanStep<T>(l, static_cast<int>(i % kLanes), x[i], y[i]);
  }
  return ScanReduce(l);
}

// Adds elements [from, n) to the lanes (element i to lane i % 8), in element order.
template <DType T>
PARITY_INLINE void CovarianceLanes(const char* a, const char* b, int64_t from, int64_t n, double ma,
                                   double mb, double* aa, double* ab, double* bb) {
  const double nd = static_cast<double>(n);
  alignas(64) float x[kChunk], y[kChunk];
  for (int64_t s = from; s < n; s += kChunk) {
    const int64_t k = std::min(kChunk, n - s);
    simd::Widen<T>(a, s, k, x);
    simd::Widen<T>(b, s, k, y);
    for (int64_t i = 0; i < k; ++i) {
      const int j = static_cast<int>((s + i) % kLanes);
      const double dx = static_cast<double>(x[i]) - ma;
      const double dy = static_cast<double>(y[i]) - mb;
      aa[j] += dx / nd * dx;
      ab[j] += dx / nd * dy;
      bb[j] += dy / nd * dy;
    }
  }
}

PARITY_INLINE ForgeCovarianceResult CovReduce(const double* aa, const double* ab, const double* bb) {
  ForgeCovarianceResult out;
  for (int j = 0; j < kLanes; ++j) {
    out.aa += aa[j];
    out.ab += ab[j];
    out.bb += bb[j];
  }
  return out;
}


// The vector versions: 8 elements per step, element i + j in lane j (for the float64 sums, lane j
// of one zmm, or of the low/high ymm halves with AVX2); the tail (n % 8) and the final reduction
// run the portable code on the spilled lanes, so the order of every sum is the same everywhere.
template <DType T>
PARITY_AVX2 inline __m256 Round8(__m256 v) {
  if constexpr (T == DType::kFloat16) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else {
    return v;
  }
}

template <DType T>
PARITY_INLINE void ScanTail(const char* g, const char* c, int64_t from, int64_t n, ScanLanes& l) {
  float x[kLanes], y[kLanes];
  simd::Widen<T>(g, from, n - from, x);
  simd::Widen<T>(c, from, n - from, y);
  for (int64_t i = from; i < n; ++i) ScanStep<T>(l, static_cast<int>(i % kLanes), x[i - from], y[i - from]);
}


// Float32 part of a scan step: finiteness, |x - y| and |x - y| / |y| (0 where y == 0) maxima.
struct Avx2ScanF {
  __m256 fin, mabs, mrel;
};

template <DType T>
PARITY_AVX2 inline void ScanFloats(Avx2ScanF& f, __m256 x, __m256 y) {
  const __m256 sign = _mm256_set1_ps(-0.0f), inf = _mm256_set1_ps(kInf);
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  f.fin = _mm256_and_ps(f.fin, _mm256_and_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, x), inf, _CMP_LT_OQ),
                                             _mm256_cmp_ps(_mm256_andnot_ps(sign, y), inf, _CMP_LT_OQ)));
  const __m256 d = _mm256_andnot_ps(sign, Round8<T>(_mm256_sub_ps(x, y)));
  f.mabs = _mm256_max_ps(d, f.mabs);
  const __m256 yz = _mm256_cmp_ps(y, zero, _CMP_EQ_OQ);
  const __m256 den = _mm256_blendv_ps(_mm256_andnot_ps(sign, y), one, yz);
  f.mrel = _mm256_max_ps(_mm256_andnot_ps(yz, Round8<T>(_mm256_div_ps(d, den))), f.mrel);
}

PARITY_AVX2 inline void SpillFloats(const Avx2ScanF& f, ScanLanes& l) {
  alignas(32) float fin[kLanes];
  _mm256_store_ps(fin, f.fin);
  _mm256_storeu_ps(l.mabs, f.mabs);
  _mm256_storeu_ps(l.mrel, f.mrel);
  for (int j = 0; j < kLanes; ++j) {
    uint32_t bits;
    std::memcpy(&bits, &fin[j], 4);
    l.bad[j] = bits == 0;
  }
}

template <DType T>
PARITY_AVX2 ForgeScanResult ScanAvx2(const char* g, const char* c, int64_t n) {
  Avx2ScanF f{_mm256_castsi256_ps(_mm256_set1_epi32(-1)), _mm256_setzero_ps(), _mm256_setzero_ps()};
  __m256d sg_lo = _mm256_setzero_pd(), sg_hi = sg_lo, sc_lo = sg_lo, sc_hi = sg_lo;
  const int64_t full = n / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    const __m256 x = simd::Load8<T>(g, i), y = simd::Load8<T>(c, i);
    ScanFloats<T>(f, x, y);
    sg_lo = _mm256_add_pd(sg_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(x)));
    sg_hi = _mm256_add_pd(sg_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
    sc_lo = _mm256_add_pd(sc_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(y)));
    sc_hi = _mm256_add_pd(sc_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1)));
  }
  ScanLanes l;
  SpillFloats(f, l);
  _mm256_storeu_pd(l.sg, sg_lo);
  _mm256_storeu_pd(l.sg + 4, sg_hi);
  _mm256_storeu_pd(l.sc, sc_lo);
  _mm256_storeu_pd(l.sc + 4, sc_hi);
  ScanTail<T>(g, c, full, n, l);
  return ScanReduce(l);
}

template <DType T>
PARITY_AVX512 ForgeScanResult ScanAvx512(const char* g, const char* c, int64_t n) {
  Avx2ScanF f{_mm256_castsi256_ps(_mm256_set1_epi32(-1)), _mm256_setzero_ps(), _mm256_setzero_ps()};
  __m512d sg = _mm512_setzero_pd(), sc = sg;
  const int64_t full = n / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    const __m256 x = simd::Load8<T>(g, i), y = simd::Load8<T>(c, i);
    ScanFloats<T>(f, x, y);
    sg = _mm512_add_pd(sg, _mm512_cvtps_pd(x));
    sc = _mm512_add_pd(sc, _mm512_cvtps_pd(y));
  }
  ScanLanes l;
  SpillFloats(f, l);
  _mm512_storeu_pd(l.sg, sg);
  _mm512_storeu_pd(l.sc, sc);
  ScanTail<T>(g, c, full, n, l);
  return ScanReduce(l);
}

template <DType T>
ForgeScanResult ScanPortable(const char* g, const char* c, int64_t n) { return ScanBody<T>(g, c, n); }

template <DType T>
ForgeCovarianceResult CovPortable(const char* a, const char* b, int64_t n, double ma, double mb) {
  double aa[kLanes] = {0}, ab[kLanes] = {0}, bb[kLanes] = {0};
  CovarianceLanes<T>(a, b, 0, n, ma, mb, aa, ab, bb);
  return CovReduce(aa, ab, bb);
}

template <DType T>
PARITY_AVX2 ForgeCovarianceResult CovAvx2(const char* a, const char* b, int64_t n, double ma, double mb) {
  const __m256d vma = _mm256_set1_pd(ma), vmb = _mm256_set1_pd(mb);
  const __m256d nd = _mm256_set1_pd(static_cast<double>(n));
  __m256d aa[2], ab[2], bb[2];
  for (int h = 0; h < 2; ++h) aa[h] = ab[h] = bb[h] = _mm256_setzero_pd();
  const int64_t full = n / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    const __m256 x = simd::Load8<T>(a, i), y = simd::Load8<T>(b, i);
    const __m128 xs[2] = {_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1)};
    const __m128 ys[2] = {_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1)};
    for (int h = 0; h < 2; ++h) {
      const __m256d dx = _mm256_sub_pd(_mm256_cvtps_pd(xs[h]), vma);
      const __m256d dy = _mm256_sub_pd(_mm256_cvtps_pd(ys[h]), vmb);
      const __m256d dxn = _mm256_div_pd(dx, nd);
      aa[h] = _mm256_add_pd(aa[h], _mm256_mul_pd(dxn, dx));
      ab[h] = _mm256_add_pd(ab[h], _mm256_mul_pd(dxn, dy));
      bb[h] = _mm256_add_pd(bb[h], _mm256_mul_pd(_mm256_div_pd(dy, nd), dy));
    }
  }
  double la[kLanes], lb[kLanes], lc[kLanes];
  for (int h = 0; h < 2; ++h) {
    _mm256_storeu_pd(la + 4 * h, aa[h]);
    _mm256_storeu_pd(lb + 4 * h, ab[h]);
    _mm256_storeu_pd(lc + 4 * h, bb[h]);
  }
  CovarianceLanes<T>(a, b, full, n, ma, mb, la, lb, lc);
  return CovReduce(la, lb, lc);
}

template <DType T>
PARITY_AVX512 ForgeCovarianceResult CovAvx512(const char* a, const char* b, int64_t n, double ma, double mb) {
  const __m512d vma = _mm512_set1_pd(ma), vmb = _mm512_set1_pd(mb);
  const __m512d nd = _mm512_set1_pd(static_cast<double>(n));
  __m512d aa = _mm512_setzero_pd(), ab = aa, bb = aa;
  const int64_t full = n / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    const __m512d dx = _mm512_sub_pd(_mm512_cvtps_pd(simd::Load8<T>(a, i)), vma);
    const __m512d dy = _mm512_sub_pd(_mm512_cvtps_pd(simd::Load8<T>(b, i)), vmb);
    const __m512d dxn = _mm512_div_pd(dx, nd);
    aa = _mm512_add_pd(aa, _mm512_mul_pd(dxn, dx));
    ab = _mm512_add_pd(ab, _mm512_mul_pd(dxn, dy));
    bb = _mm512_add_pd(bb, _mm512_mul_pd(_mm512_div_pd(dy, nd), dy));
  }
  double la[kLanes], lb[kLanes], lc[kLanes];
  _mm512_storeu_pd(la, aa);
  _mm512_storeu_pd(lb, ab);
  _mm512_storeu_pd(lc, bb);
  CovarianceLanes<T>(a, b, full, n, ma, mb, la, lb, lc);
  return CovReduce(la, lb, lc);
}

using simd::Allowed;
using simd::Isa;
using simd::Selected;

template <DType T>
ForgeScanResult ScanT(Isa isa, const char* g, const char* c, int64_t n) {
  return isa == Isa::kAvx512 ? ScanAvx512<T>(g, c, n)
         : isa == Isa::kAvx2 ? ScanAvx2<T>(g, c, n)
                             : ScanPortable<T>(g, c, n);
}

ForgeScanResult Scan(Isa isa, DType t, const char* g, const char* c, int64_t n) {
  if (t == DType::kFloat32) return ScanT<DType::kFloat32>(isa, g, c, n);
  if (t == DType::kFloat16) return ScanT<DType::kFloat16>(isa, g, c, n);
  return ScanT<DType::kBFloat16>(isa, g, c, n);
}

template <DType T>
ForgeCovarianceResult CovT(Isa isa, const char* a, const char* b, int64_t n, double ma, double mb) {
  return isa == Isa::kAvx512 ? CovAvx512<T>(a, b, n, ma, mb)
         : isa == Isa::kAvx2 ? CovAvx2<T>(a, b, n, ma, mb)
                             : CovPortable<T>(a, b, n, ma, mb);
}

ForgeCovarianceResult Cov(Isa isa, DType t, const char* a, const char* b, int64_t n, double ma,
                          double mb) {
  if (t == DType::kFloat32) return CovT<DType::kFloat32>(isa, a, b, n, ma, mb);
  if (t == DType::kFloat16) return CovT<DType::kFloat16>(isa, a, b, n, ma, mb);
  return CovT<DType::kBFloat16>(isa, a, b, n, ma, mb);
}

std::atomic<bool> g_enabled{true};

bool DTypeHandled(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

}  // namespace

bool ForgeKernelSupports(DType t) { return g_enabled && DTypeHandled(t); }

void SetForgeKernelEnabled(bool enabled) { g_enabled = enabled; }

ForgeScanResult ForgeScan(DType t, const char* g, const char* c, int64_t n) {
  return Scan(Selected(), t, g, c, n);
}

ForgeCovarianceResult ForgeCovariance(DType t, const char* a, const char* b, int64_t n,
                                      double mean_a, double mean_b) {
  return Cov(Selected(), t, a, b, n, mean_a, mean_b);
}

bool ForgeScanForIsa(const std::string& isa, DType t, const char* g, const char* c, int64_t n,
                     ForgeScanResult* out) {
  Isa i;
  if (!DTypeHandled(t) || !Allowed(isa, &i)) return false;
  *out = Scan(i, t, g, c, n);
  return true;
}

bool ForgeCovarianceForIsa(const std::string& isa, DType t, const char* a, const char* b,
                           int64_t n, double mean_a, double mean_b, ForgeCovarianceResult* out) {
  Isa i;
  if (!DTypeHandled(t) || !Allowed(isa, &i)) return false;
  *out = Cov(i, t, a, b, n, mean_a, mean_b);
  return true;
}

}  // namespace parity
