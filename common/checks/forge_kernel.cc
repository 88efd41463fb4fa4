#include "common/checks/forge_kernel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

#include "common/checks/simd.h"

namespace parity {
namespace {

constexpr int kLanes = 8;
constexpr int64_t kChunk = kForgeChunk;  // a multiple of kLanes: element s + i goes to lane i % 8

// Every implementation runs the same chunk loop (ScanChunks): per chunk, pass 1 (finiteness,
// maxima, the chunk's sums) and pass 2 (moments about the chunk's mean, while the chunk is in
// cache). Within a chunk, element s + i is added to lane i % 8 in element order, lanes are
// reduced in a fixed order, nothing is reassociated and no FMA is used, so all versions agree
// bit for bit. Tails (k % 8 elements) run the portable steps on the spilled lanes.

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

// Pass 1 lanes: maxima over the whole tensor, sums of the current chunk (finiteness follows
// from the sums, see ScanChunks).
struct ScanLanes {
  float mabs[kLanes] = {0}, mrel[kLanes] = {0};
  double sg[kLanes] = {0}, sc[kLanes] = {0};  // reset per chunk
};

// Pass 2 lanes: sums of dx, dy, dx*dx, dx*dy, dy*dy about the chunk's means.
struct MomentLanes {
  double dx[kLanes] = {0}, dy[kLanes] = {0}, aa[kLanes] = {0}, ab[kLanes] = {0}, bb[kLanes] = {0};
};

template <DType T>
PARITY_INLINE void ScanStep(ScanLanes& l, int j, float x, float y) {
  l.sg[j] += static_cast<double>(x);
  l.sc[j] += static_cast<double>(y);
  const float d = std::fabs(Round<T>(x - y));
  l.mabs[j] = Max(l.mabs[j], d);
  // calculate_rtol: a zero in c gives an infinite denominator, so a relative difference of 0.
  const float r = y == 0 ? 0.0f : Round<T>(d / (y == 0 ? 1.0f : std::fabs(y)));
  l.mrel[j] = Max(l.mrel[j], r);
}

PARITY_INLINE void MomentStep(MomentLanes& m, int j, double x, double y, double ma, double mb) {
  const double dx = x - ma;
  const double dy = y - mb;
  m.dx[j] += dx;
  m.dy[j] += dy;
  m.aa[j] += dx * dx;
  m.ab[j] += dx * dy;
  m.bb[j] += dy * dy;
}

// Pass 2 over elements [from, k) of the chunk at s (lane (from + i) % 8), element i of an array
// read as At(array, i).
template <double (*At)(const char*, int64_t)>
PARITY_INLINE void PortableMomentTail(const char* g, const char* c, int64_t s, int64_t from, int64_t k,
                                      double ma, double mb, MomentLanes& m) {
  for (int64_t i = from; i < k; ++i) MomentStep(m, static_cast<int>(i % kLanes), At(g, s + i), At(c, s + i), ma, mb);
}

PARITY_INLINE double LaneSum(const double* v) {
  double s = 0;
  for (int j = 0; j < kLanes; ++j) s += v[j];
  return s;
}

// Elements [from, k) of the chunk at `s` through the portable steps (lane (from + i) % 8).
template <DType T>
PARITY_INLINE void ScanTail(const char* g, const char* c, int64_t s, int64_t from, int64_t k, ScanLanes& l) {
  float x[kLanes], y[kLanes];
  simd::Widen<T>(g, s + from, k - from, x);
  simd::Widen<T>(c, s + from, k - from, y);
  for (int64_t i = from; i < k; ++i) ScanStep<T>(l, static_cast<int>(i % kLanes), x[i - from], y[i - from]);
}

template <DType T>
PARITY_INLINE void MomentTail(const char* g, const char* c, int64_t s, int64_t from, int64_t k,
                              double ma, double mb, MomentLanes& m) {
  float x[kLanes], y[kLanes];
  simd::Widen<T>(g, s + from, k - from, x);
  simd::Widen<T>(c, s + from, k - from, y);
  for (int64_t i = from; i < k; ++i) MomentStep(m, static_cast<int>(i % kLanes), x[i - from], y[i - from], ma, mb);
}

// ---- Portable passes over one chunk [s, s + k) ---------------------------------------------------

template <DType T>
struct PortablePasses {
  static constexpr DType kDType = T;
  using Lanes = ScanLanes;
  static constexpr int64_t kBytes = T == DType::kFloat32 ? 4 : 2;
  static constexpr int64_t kPiece = 1024;  // simd::Widen's limit; a multiple of kLanes

  static void Scan(const char* g, const char* c, int64_t s, int64_t k, ScanLanes& l) {
    alignas(64) float x[kPiece], y[kPiece];
    for (int64_t p = 0; p < k; p += kPiece) {
      const int64_t q = std::min(kPiece, k - p);
      simd::Widen<T>(g, s + p, q, x);
      simd::Widen<T>(c, s + p, q, y);
      for (int64_t i = 0; i < q; ++i) ScanStep<T>(l, static_cast<int>(i % kLanes), x[i], y[i]);
    }
  }
  static void Moments(const char* g, const char* c, int64_t s, int64_t k, double ma, double mb,
                      MomentLanes& m) {
    alignas(64) float x[kPiece], y[kPiece];
    for (int64_t p = 0; p < k; p += kPiece) {
      const int64_t q = std::min(kPiece, k - p);
      simd::Widen<T>(g, s + p, q, x);
      simd::Widen<T>(c, s + p, q, y);
      for (int64_t i = 0; i < q; ++i) MomentStep(m, static_cast<int>(i % kLanes), x[i], y[i], ma, mb);
    }
  }
};

// ---- AVX2 / AVX-512 ------------------------------------------------------------------------------

template <DType T>
PARITY_AVX2 inline __m256 Round8(__m256 v) {  // Round<T> on eight lanes
  return T == DType::kFloat16 ? simd::RoundTo8<DType::kFloat16>(v) : v;
}

// Float32 part of a scan step: |x - y| and |x - y| / |y| (0 where y == 0) maxima. The quotient's
// maximum is kept unrounded: rounding is monotonic (max of rounded = rounded max) and
// idempotent (lanes the portable tail already rounded stay the same), so ScanChunks rounds the
// reduced maximum once instead of every quotient.
struct Avx2ScanF {
  __m256 mabs, mrel;
};

template <DType T>
PARITY_AVX2 inline void ScanFloats(Avx2ScanF& f, __m256 x, __m256 y) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  const __m256 d = _mm256_andnot_ps(sign, Round8<T>(_mm256_sub_ps(x, y)));
  f.mabs = _mm256_max_ps(d, f.mabs);
  const __m256 yz = _mm256_cmp_ps(y, zero, _CMP_EQ_OQ);
  const __m256 den = _mm256_blendv_ps(_mm256_andnot_ps(sign, y), one, yz);
  f.mrel = _mm256_max_ps(_mm256_andnot_ps(yz, _mm256_div_ps(d, den)), f.mrel);  // rounded in ScanChunks
}

// Pass 2 works on a chunk already in cache and reads no memory: it asks for the next chunk
// meanwhile (the line holding element i + kChunk of each side), so that pass 1 of that chunk
// finds it in cache instead of waiting for it. A prefetch past the end is harmless (a hint never
// faults).
template <int64_t kBytes>
PARITY_AVX2 inline void Prefetch(const char* g, const char* c, int64_t i) {
  const uintptr_t at = static_cast<uintptr_t>(i + kChunk) * kBytes;
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(g) + at), _MM_HINT_T1);
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(c) + at), _MM_HINT_T1);
}

// Loads eight elements from index i as float64 lanes: Load4x2 as elements 0-3 and 4-7 (AVX2),
// Load8 as one vector (AVX-512). kBytes: the element size.
template <DType T>
struct FloatLoad {
  static constexpr int64_t kBytes = T == DType::kFloat32 ? 4 : 2;
  PARITY_AVX2 static void Load4x2(const char* p, int64_t i, __m256d* lo, __m256d* hi) {
    const __m256 x = simd::Load8<T>(p, i);
    *lo = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
    *hi = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
  }
  PARITY_AVX512 static __m512d Load8(const char* p, int64_t i) { return _mm512_cvtps_pd(simd::Load8<T>(p, i)); }
};

// Pass 2's vector loop over the whole groups of eight in [s, s + k) (lane j: elements s + j,
// s + 8 + j, ...), prefetching the next chunk; returns the elements covered, the caller does
// the rest through its portable steps.
template <typename L>
PARITY_AVX2 int64_t Avx2MomentLoop(const char* g, const char* c, int64_t s, int64_t k, double ma,
                                   double mb, MomentLanes& m) {
  const __m256d vma = _mm256_set1_pd(ma), vmb = _mm256_set1_pd(mb);
  __m256d dx[2], dy[2], aa[2], ab[2], bb[2];
  for (int h = 0; h < 2; ++h) dx[h] = dy[h] = aa[h] = ab[h] = bb[h] = _mm256_setzero_pd();
  const int64_t full = k / kLanes * kLanes;
  for (int64_t i = s; i < s + full; i += kLanes) {
    Prefetch<L::kBytes>(g, c, i);
    __m256d xs[2], ys[2];
    L::Load4x2(g, i, &xs[0], &xs[1]);
    L::Load4x2(c, i, &ys[0], &ys[1]);
    for (int h = 0; h < 2; ++h) {
      const __m256d ex = _mm256_sub_pd(xs[h], vma);
      const __m256d ey = _mm256_sub_pd(ys[h], vmb);
      dx[h] = _mm256_add_pd(dx[h], ex);
      dy[h] = _mm256_add_pd(dy[h], ey);
      aa[h] = _mm256_add_pd(aa[h], _mm256_mul_pd(ex, ex));
      ab[h] = _mm256_add_pd(ab[h], _mm256_mul_pd(ex, ey));
      bb[h] = _mm256_add_pd(bb[h], _mm256_mul_pd(ey, ey));
    }
  }
  for (int h = 0; h < 2; ++h) {
    _mm256_storeu_pd(m.dx + 4 * h, dx[h]);
    _mm256_storeu_pd(m.dy + 4 * h, dy[h]);
    _mm256_storeu_pd(m.aa + 4 * h, aa[h]);
    _mm256_storeu_pd(m.ab + 4 * h, ab[h]);
    _mm256_storeu_pd(m.bb + 4 * h, bb[h]);
  }
  return full;
}

template <typename L>
PARITY_AVX512 int64_t Avx512MomentLoop(const char* g, const char* c, int64_t s, int64_t k, double ma,
                                       double mb, MomentLanes& m) {
  const __m512d vma = _mm512_set1_pd(ma), vmb = _mm512_set1_pd(mb);
  __m512d dx = _mm512_setzero_pd(), dy = dx, aa = dx, ab = dx, bb = dx;
  const int64_t full = k / kLanes * kLanes;
  for (int64_t i = s; i < s + full; i += kLanes) {
    Prefetch<L::kBytes>(g, c, i);
    const __m512d ex = _mm512_sub_pd(L::Load8(g, i), vma);
    const __m512d ey = _mm512_sub_pd(L::Load8(c, i), vmb);
    dx = _mm512_add_pd(dx, ex);
    dy = _mm512_add_pd(dy, ey);
    aa = _mm512_add_pd(aa, _mm512_mul_pd(ex, ex));
    ab = _mm512_add_pd(ab, _mm512_mul_pd(ex, ey));
    bb = _mm512_add_pd(bb, _mm512_mul_pd(ey, ey));
  }
  _mm512_storeu_pd(m.dx, dx);
  _mm512_storeu_pd(m.dy, dy);
  _mm512_storeu_pd(m.aa, aa);
  _mm512_storeu_pd(m.ab, ab);
  _mm512_storeu_pd(m.bb, bb);
  return full;
}

template <DType T>
struct Avx2Passes {
  static constexpr DType kDType = T;
  using Lanes = ScanLanes;
  static constexpr int64_t kBytes = T == DType::kFloat32 ? 4 : 2;
  PARITY_AVX2 static void Scan(const char* g, const char* c, int64_t s, int64_t k, ScanLanes& l) {
    Avx2ScanF f{_mm256_loadu_ps(l.mabs), _mm256_loadu_ps(l.mrel)};
    __m256d sg_lo = _mm256_setzero_pd(), sg_hi = sg_lo, sc_lo = sg_lo, sc_hi = sg_lo;
    const int64_t full = k / kLanes * kLanes;
    for (int64_t i = s; i < s + full; i += kLanes) {
      const __m256 x = simd::Load8<T>(g, i), y = simd::Load8<T>(c, i);
      ScanFloats<T>(f, x, y);
      sg_lo = _mm256_add_pd(sg_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(x)));
      sg_hi = _mm256_add_pd(sg_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
      sc_lo = _mm256_add_pd(sc_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(y)));
      sc_hi = _mm256_add_pd(sc_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1)));
    }
    _mm256_storeu_ps(l.mabs, f.mabs);
    _mm256_storeu_ps(l.mrel, f.mrel);
    _mm256_storeu_pd(l.sg, sg_lo);
    _mm256_storeu_pd(l.sg + 4, sg_hi);
    _mm256_storeu_pd(l.sc, sc_lo);
    _mm256_storeu_pd(l.sc + 4, sc_hi);
    ScanTail<T>(g, c, s, full, k, l);
  }
  PARITY_AVX2 static void Moments(const char* g, const char* c, int64_t s, int64_t k, double ma,
                                  double mb, MomentLanes& m) {
    const int64_t full = Avx2MomentLoop<FloatLoad<T>>(g, c, s, k, ma, mb, m);
    MomentTail<T>(g, c, s, full, k, ma, mb, m);
  }
};

template <DType T>
struct Avx512Passes {
  static constexpr DType kDType = T;
  using Lanes = ScanLanes;
  static constexpr int64_t kBytes = T == DType::kFloat32 ? 4 : 2;
  // As Avx2Passes::Scan with mask registers: y == 0 lanes are left out of the relative maximum
  // by a masked max (no blend), and finiteness is left to the chunk sums (ScanChunks).
  PARITY_AVX512 static void Scan(const char* g, const char* c, int64_t s, int64_t k, ScanLanes& l) {
    const __m256 zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    __m256 mabs = _mm256_loadu_ps(l.mabs), mrel = _mm256_loadu_ps(l.mrel);
    __m512d sg = _mm512_setzero_pd(), sc = sg;
    const int64_t full = k / kLanes * kLanes;
    for (int64_t i = s; i < s + full; i += kLanes) {
      const __m256 x = simd::Load8<T>(g, i), y = simd::Load8<T>(c, i);
      const __m256 d = _mm256_andnot_ps(sign, Round8<T>(_mm256_sub_ps(x, y)));
      mabs = _mm256_max_ps(d, mabs);
      const __mmask8 nz = _mm256_cmp_ps_mask(y, zero, _CMP_NEQ_UQ);
      mrel = _mm256_mask_max_ps(mrel, nz, _mm256_div_ps(d, _mm256_andnot_ps(sign, y)), mrel);
      sg = _mm512_add_pd(sg, _mm512_cvtps_pd(x));
      sc = _mm512_add_pd(sc, _mm512_cvtps_pd(y));
    }
    _mm256_storeu_ps(l.mabs, mabs);
    _mm256_storeu_ps(l.mrel, mrel);
    _mm512_storeu_pd(l.sg, sg);
    _mm512_storeu_pd(l.sc, sc);
    ScanTail<T>(g, c, s, full, k, l);
  }
  PARITY_AVX512 static void Moments(const char* g, const char* c, int64_t s, int64_t k, double ma,
                                    double mb, MomentLanes& m) {
    const int64_t full = Avx512MomentLoop<FloatLoad<T>>(g, c, s, k, ma, mb, m);
    MomentTail<T>(g, c, s, full, k, ma, mb, m);
  }
};

// Pass 2 over the chunk [s, s + k) whose sums pass 1 found to be sg and sc.
template <typename Passes>
ForgeChunkMoments ChunkMoments(const char* g, const char* c, int64_t s, int64_t k, double sg, double sc) {
  ForgeChunkMoments cm;
  cm.n = k;
  cm.mean_g = sg / static_cast<double>(k);
  cm.mean_c = sc / static_cast<double>(k);
  MomentLanes m;
  Passes::Moments(g, c, s, k, cm.mean_g, cm.mean_c, m);
  cm.dx = LaneSum(m.dx);
  cm.dy = LaneSum(m.dy);
  cm.aa = LaneSum(m.aa);
  cm.ab = LaneSum(m.ab);
  cm.bb = LaneSum(m.bb);
  return cm;
}

// ---- verif.all_close's max excess ----------------------------------------------------------------

// One element's excess, rounded to the tensors' own dtype (all_close works in it; bfloat16 is
// not upcast here).
template <DType T>
PARITY_INLINE float ExcessOne(float x, float y, float rt, float at) {
  const float d = std::fabs(simd::RoundTo<T>(x - y));
  return simd::RoundTo<T>(simd::RoundTo<T>(d - at) - simd::RoundTo<T>(rt * std::fabs(y)));
}

// rt and at: values of dtype T (exact as float).
template <DType T>
double AllClosePortable(const char* g, const char* c, int64_t n, double drt, double dat) {
  const float rt = static_cast<float>(drt), at = static_cast<float>(dat);
  constexpr int64_t kPiece = 1024;  // simd::Widen's limit
  alignas(64) float x[kPiece], y[kPiece];
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t p = 0; p < n; p += kPiece) {
    const int64_t q = std::min(kPiece, n - p);
    simd::Widen<T>(g, p, q, x);
    simd::Widen<T>(c, p, q, y);
    for (int64_t i = 0; i < q; ++i) m = Max(m, ExcessOne<T>(x[i], y[i], rt, at));
  }
  return m;
}

// Eight lanes; AVX-512 machines run it too (the work per element is small next to the loads).
template <DType T>
PARITY_AVX2 double AllCloseAvx2(const char* g, const char* c, int64_t n, double drt, double dat) {
  const float rt = static_cast<float>(drt), at = static_cast<float>(dat);
  const __m256 sign = _mm256_set1_ps(-0.0f), vrt = _mm256_set1_ps(rt), vat = _mm256_set1_ps(at);
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const int64_t full = n / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    const __m256 x = simd::Load8<T>(g, i), y = simd::Load8<T>(c, i);
    const __m256 d = _mm256_andnot_ps(sign, simd::RoundTo8<T>(_mm256_sub_ps(x, y)));
    const __m256 u = simd::RoundTo8<T>(_mm256_sub_ps(d, vat));
    const __m256 v = simd::RoundTo8<T>(_mm256_mul_ps(vrt, _mm256_andnot_ps(sign, y)));
    m = _mm256_max_ps(m, _mm256_sub_ps(u, v));  // rounded once below (monotonic)
  }
  alignas(32) float lanes[kLanes];
  _mm256_store_ps(lanes, m);
  float out = lanes[0];
  for (int j = 1; j < kLanes; ++j) out = Max(out, lanes[j]);
  out = simd::RoundTo<T>(out);
  if (full == n) return out;
  const int64_t bytes = full * (T == DType::kFloat32 ? 4 : 2);  // the tail, element by element
  return Max(static_cast<double>(out), AllClosePortable<T>(g + bytes, c + bytes, n - full, rt, at));
}

// ---- float64 pairs -------------------------------------------------------------------------------
//
// The same two passes per chunk in float64, the arithmetic forge's calculate_atol/calculate_rtol
// and all_close use for float64 tensors (no rounding). Unlike float32 sums, a chunk's float64
// sum can overflow with finite inputs, so finiteness is checked per element: x - x is exactly 0
// for a finite x and NaN otherwise, summed into a lane. Each side's largest magnitude is kept
// for F64ScanChunks' range check.

struct F64Lanes {
  double mabs[kLanes] = {0}, mrel[kLanes] = {0};
  double sg[kLanes] = {0}, sc[kLanes] = {0};  // reset per chunk
  double nonfinite[kLanes] = {0};             // 0 while every element is finite, NaN after
  double mag_g[kLanes] = {0}, mag_c[kLanes] = {0};
};

PARITY_INLINE double F64At(const char* p, int64_t i) {
  double v;
  std::memcpy(&v, p + 8 * i, 8);
  return v;
}

PARITY_INLINE void F64ScanStep(F64Lanes& l, int j, double x, double y) {
  l.nonfinite[j] += (x - x) + (y - y);
  l.sg[j] += x;
  l.sc[j] += y;
  const double d = std::fabs(x - y);
  l.mabs[j] = Max(l.mabs[j], d);
  if (y != 0) l.mrel[j] = Max(l.mrel[j], d / std::fabs(y));  // a zero in c: a quotient of 0
  l.mag_g[j] = Max(l.mag_g[j], std::fabs(x));
  l.mag_c[j] = Max(l.mag_c[j], std::fabs(y));
}

struct PortableF64Passes {
  static constexpr DType kDType = DType::kFloat64;
  static constexpr int64_t kBytes = 8;
  using Lanes = F64Lanes;
  static void Scan(const char* g, const char* c, int64_t s, int64_t k, F64Lanes& l) {
    ScanFrom(g, c, s, 0, k, l);
  }
  // Elements [from, k) of the chunk at s (lane (from + i) % 8).
  static void ScanFrom(const char* g, const char* c, int64_t s, int64_t from, int64_t k, F64Lanes& l) {
    for (int64_t i = from; i < k; ++i) {
      F64ScanStep(l, static_cast<int>(i % kLanes), F64At(g, s + i), F64At(c, s + i));
    }
  }
  static void Moments(const char* g, const char* c, int64_t s, int64_t k, double ma, double mb,
                      MomentLanes& m) {
    Tail(g, c, s, 0, k, ma, mb, m);
  }
  static void Tail(const char* g, const char* c, int64_t s, int64_t from, int64_t k, double ma,
                   double mb, MomentLanes& m) {
    PortableMomentTail<&F64At>(g, c, s, from, k, ma, mb, m);
  }
};

struct F64Load {
  static constexpr int64_t kBytes = 8;
  PARITY_AVX2 static void Load4x2(const char* p, int64_t i, __m256d* lo, __m256d* hi) {
    *lo = _mm256_loadu_pd(reinterpret_cast<const double*>(p + 8 * i));
    *hi = _mm256_loadu_pd(reinterpret_cast<const double*>(p + 8 * i + 32));
  }
  PARITY_AVX512 static __m512d Load8(const char* p, int64_t i) {
    return _mm512_loadu_pd(reinterpret_cast<const double*>(p + 8 * i));
  }
};

// The vector steps keep the portable step's operand order: max(v, acc) keeps acc when equal
// (as Max(acc, v) does) and when v is NaN.
struct Avx2F64Passes {
  static constexpr DType kDType = DType::kFloat64;
  static constexpr int64_t kBytes = 8;
  using Lanes = F64Lanes;
  PARITY_AVX2 static void Scan(const char* g, const char* c, int64_t s, int64_t k, F64Lanes& l) {
    const __m256d sign = _mm256_set1_pd(-0.0), zero = _mm256_setzero_pd(), one = _mm256_set1_pd(1.0);
    __m256d nf[2], sg[2], sc[2], mabs[2], mrel[2], mg[2], mc[2];
    for (int h = 0; h < 2; ++h) {
      nf[h] = _mm256_loadu_pd(l.nonfinite + 4 * h);
      sg[h] = _mm256_loadu_pd(l.sg + 4 * h);
      sc[h] = _mm256_loadu_pd(l.sc + 4 * h);
      mabs[h] = _mm256_loadu_pd(l.mabs + 4 * h);
      mrel[h] = _mm256_loadu_pd(l.mrel + 4 * h);
      mg[h] = _mm256_loadu_pd(l.mag_g + 4 * h);
      mc[h] = _mm256_loadu_pd(l.mag_c + 4 * h);
    }
    const int64_t full = k / kLanes * kLanes;
    for (int64_t i = s; i < s + full; i += kLanes) {
      __m256d xs[2], ys[2];
      F64Load::Load4x2(g, i, &xs[0], &xs[1]);
      F64Load::Load4x2(c, i, &ys[0], &ys[1]);
      for (int h = 0; h < 2; ++h) {
        const __m256d x = xs[h], y = ys[h];
        nf[h] = _mm256_add_pd(nf[h], _mm256_add_pd(_mm256_sub_pd(x, x), _mm256_sub_pd(y, y)));
        sg[h] = _mm256_add_pd(sg[h], x);
        sc[h] = _mm256_add_pd(sc[h], y);
        const __m256d d = _mm256_andnot_pd(sign, _mm256_sub_pd(x, y));
        mabs[h] = _mm256_max_pd(d, mabs[h]);
        const __m256d ay = _mm256_andnot_pd(sign, y);
        const __m256d nz = _mm256_cmp_pd(y, zero, _CMP_NEQ_UQ);
        const __m256d q = _mm256_div_pd(d, _mm256_blendv_pd(one, ay, nz));
        mrel[h] = _mm256_blendv_pd(mrel[h], _mm256_max_pd(q, mrel[h]), nz);
        mg[h] = _mm256_max_pd(_mm256_andnot_pd(sign, x), mg[h]);
        mc[h] = _mm256_max_pd(ay, mc[h]);
      }
    }
    for (int h = 0; h < 2; ++h) {
      _mm256_storeu_pd(l.nonfinite + 4 * h, nf[h]);
      _mm256_storeu_pd(l.sg + 4 * h, sg[h]);
      _mm256_storeu_pd(l.sc + 4 * h, sc[h]);
      _mm256_storeu_pd(l.mabs + 4 * h, mabs[h]);
      _mm256_storeu_pd(l.mrel + 4 * h, mrel[h]);
      _mm256_storeu_pd(l.mag_g + 4 * h, mg[h]);
      _mm256_storeu_pd(l.mag_c + 4 * h, mc[h]);
    }
    PortableF64Passes::ScanFrom(g, c, s, full, k, l);
  }
  PARITY_AVX2 static void Moments(const char* g, const char* c, int64_t s, int64_t k, double ma,
                                  double mb, MomentLanes& m) {
    const int64_t full = Avx2MomentLoop<F64Load>(g, c, s, k, ma, mb, m);
    PortableF64Passes::Tail(g, c, s, full, k, ma, mb, m);
  }
};

struct Avx512F64Passes {
  static constexpr DType kDType = DType::kFloat64;
  static constexpr int64_t kBytes = 8;
  using Lanes = F64Lanes;
  PARITY_AVX512 static void Scan(const char* g, const char* c, int64_t s, int64_t k, F64Lanes& l) {
    const __m512d zero = _mm512_setzero_pd();
    __m512d nf = _mm512_loadu_pd(l.nonfinite), sg = _mm512_loadu_pd(l.sg), sc = _mm512_loadu_pd(l.sc);
    __m512d mabs = _mm512_loadu_pd(l.mabs), mrel = _mm512_loadu_pd(l.mrel);
    __m512d mg = _mm512_loadu_pd(l.mag_g), mc = _mm512_loadu_pd(l.mag_c);
    const int64_t full = k / kLanes * kLanes;
    for (int64_t i = s; i < s + full; i += kLanes) {
      const __m512d x = F64Load::Load8(g, i), y = F64Load::Load8(c, i);
      nf = _mm512_add_pd(nf, _mm512_add_pd(_mm512_sub_pd(x, x), _mm512_sub_pd(y, y)));
      sg = _mm512_add_pd(sg, x);
      sc = _mm512_add_pd(sc, y);
      const __m512d d = _mm512_abs_pd(_mm512_sub_pd(x, y));
      mabs = _mm512_max_pd(d, mabs);
      const __m512d ay = _mm512_abs_pd(y);
      const __mmask8 nz = _mm512_cmp_pd_mask(y, zero, _CMP_NEQ_UQ);
      mrel = _mm512_mask_max_pd(mrel, nz, _mm512_div_pd(d, ay), mrel);
      mg = _mm512_max_pd(_mm512_abs_pd(x), mg);
      mc = _mm512_max_pd(ay, mc);
    }
    _mm512_storeu_pd(l.nonfinite, nf);
    _mm512_storeu_pd(l.sg, sg);
    _mm512_storeu_pd(l.sc, sc);
    _mm512_storeu_pd(l.mabs, mabs);
    _mm512_storeu_pd(l.mrel, mrel);
    _mm512_storeu_pd(l.mag_g, mg);
    _mm512_storeu_pd(l.mag_c, mc);
    PortableF64Passes::ScanFrom(g, c, s, full, k, l);
  }
  PARITY_AVX512 static void Moments(const char* g, const char* c, int64_t s, int64_t k, double ma,
                                    double mb, MomentLanes& m) {
    const int64_t full = Avx512MomentLoop<F64Load>(g, c, s, k, ma, mb, m);
    PortableF64Passes::Tail(g, c, s, full, k, ma, mb, m);
  }
};

// all_close's excess in float64: (|g - c| - atol) - rtol * |c|, a max (any order gives it).
PARITY_INLINE double F64Excess(double x, double y, double rt, double at) {
  return (std::fabs(x - y) - at) - rt * std::fabs(y);
}

double AllCloseF64Portable(const char* g, const char* c, int64_t n, double rt, double at) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) m = Max(m, F64Excess(F64At(g, i), F64At(c, i), rt, at));
  return m;
}

PARITY_AVX2 double AllCloseF64Avx2(const char* g, const char* c, int64_t n, double rt, double at) {
  const __m256d sign = _mm256_set1_pd(-0.0), vrt = _mm256_set1_pd(rt), vat = _mm256_set1_pd(at);
  __m256d m = _mm256_set1_pd(-std::numeric_limits<double>::infinity());
  const int64_t full = n / 4 * 4;
  for (int64_t i = 0; i < full; i += 4) {
    const __m256d x = _mm256_loadu_pd(reinterpret_cast<const double*>(g + 8 * i));
    const __m256d y = _mm256_loadu_pd(reinterpret_cast<const double*>(c + 8 * i));
    const __m256d u = _mm256_sub_pd(_mm256_andnot_pd(sign, _mm256_sub_pd(x, y)), vat);
    m = _mm256_max_pd(_mm256_sub_pd(u, _mm256_mul_pd(vrt, _mm256_andnot_pd(sign, y))), m);
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, m);
  double out = -std::numeric_limits<double>::infinity();
  for (double v : lanes) out = Max(out, v);
  return Max(out, AllCloseF64Portable(g + 8 * full, c + 8 * full, n - full, rt, at));
}

// ---- fp8 pairs -----------------------------------------------------------------------------------
//
// forge's element path evaluates fp8 (e4m3fn, e5m2) in float32 (RoundTo's default), except
// calculate_atol, which takes max |g - c| in float64 (fp8 is not one of the PCC kernel's
// dtypes). Each chunk is widened exactly into float32 buffers held in the lanes and scanned by
// the float32 passes of the same instruction set (with s = 0: element s + i of the chunk still
// goes to lane i % 8), and max |g - c| is also taken from the widened values in float64, where a
// difference of two fp8 values (at most 33 significant bits) is exact; it is a maximum of exact
// values, so its lane order does not matter.

struct F8Lanes : ScanLanes {
  alignas(64) float wg[kChunk], wc[kChunk];  // the current chunk, widened
  double exact_abs = 0;                      // max |g - c| in float64, whole tensor so far
};

inline double ExactMaxAbsPortable(const float* x, const float* y, int64_t k, double m) {
  for (int64_t i = 0; i < k; ++i) {
    m = Max(m, std::fabs(static_cast<double>(x[i]) - static_cast<double>(y[i])));
  }
  return m;
}

PARITY_AVX2 inline double ExactMaxAbsAvx2(const float* x, const float* y, int64_t k, double m) {
  const __m256d sign = _mm256_set1_pd(-0.0);
  __m256d a = _mm256_set1_pd(m), b = a;
  const int64_t full = k / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    const __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i)), _mm256_cvtps_pd(_mm_loadu_ps(y + i)));
    const __m256d d1 =
        _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i + 4)), _mm256_cvtps_pd(_mm_loadu_ps(y + i + 4)));
    a = _mm256_max_pd(a, _mm256_andnot_pd(sign, d0));
    b = _mm256_max_pd(b, _mm256_andnot_pd(sign, d1));
  }
  alignas(32) double lanes[8];
  _mm256_store_pd(lanes, a);
  _mm256_store_pd(lanes + 4, b);
  for (double v : lanes) m = Max(m, v);
  return ExactMaxAbsPortable(x + full, y + full, k - full, m);
}

PARITY_AVX512 inline double ExactMaxAbsAvx512(const float* x, const float* y, int64_t k, double m) {
  const __m512d sign = _mm512_set1_pd(-0.0);
  __m512d a = _mm512_set1_pd(m);
  const int64_t full = k / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    const __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), _mm512_cvtps_pd(_mm256_loadu_ps(y + i)));
    a = _mm512_max_pd(a, _mm512_andnot_pd(sign, d));
  }
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, a);
  for (double v : lanes) m = Max(m, v);
  return ExactMaxAbsPortable(x + full, y + full, k - full, m);
}

// Inner: the float32 passes of instruction set kIsa. ScanChunks widens each chunk (Widen) and
// gives Scan, Moments and all_close the widened buffers.
template <typename Inner, simd::Isa kIsa, bool kE5M2>
struct F8Passes {
  static constexpr DType kDType = DType::kFloat32;
  using Lanes = F8Lanes;
  static constexpr int64_t kBytes = 4;  // of the widened buffers
  static void Widen(const char* g, const char* c, int64_t s, int64_t k, F8Lanes& l) {
    simd::WidenFloat8(kIsa, kE5M2, g + s, k, l.wg);
    simd::WidenFloat8(kIsa, kE5M2, c + s, k, l.wc);
  }
  static void Scan(const char* g, const char* c, int64_t s, int64_t k, F8Lanes& l) {
    Inner::Scan(g, c, s, k, l);
    const float* x = reinterpret_cast<const float*>(g) + s;
    const float* y = reinterpret_cast<const float*>(c) + s;
    l.exact_abs = kIsa == simd::Isa::kAvx512 ? ExactMaxAbsAvx512(x, y, k, l.exact_abs)
                  : kIsa == simd::Isa::kAvx2 ? ExactMaxAbsAvx2(x, y, k, l.exact_abs)
                                             : ExactMaxAbsPortable(x, y, k, l.exact_abs);
  }
  static void Moments(const char* g, const char* c, int64_t s, int64_t k, double ma, double mb,
                      MomentLanes& m) {
    Inner::Moments(g, c, s, k, ma, mb, m);
  }
};

// How a chunk's sums and the lanes at the end give finiteness and the maxima. float32, float16
// and bfloat16: a chunk's sums of finite floats are finite (|sum| <= 8192 * 3.4e38), so a
// non-finite sum is exactly a NaN or inf among its inputs; the quotients' maximum is rounded once
// (the vector scans leave it unrounded). float64: finiteness per element (F64Lanes), the range
// check of F64RangeForPcc.
PARITY_INLINE bool ChunkSumsShowFinite(const ScanLanes&, double sg, double sc) {
  return std::isfinite(sg) && std::isfinite(sc);
}
PARITY_INLINE bool ChunkSumsShowFinite(const F64Lanes&, double, double) { return true; }
PARITY_INLINE bool ChunkLanesShowFinite(const ScanLanes&) { return true; }
PARITY_INLINE bool ChunkLanesShowFinite(const F64Lanes& l) {
  bool finite = true;
  for (int j = 0; j < kLanes; ++j) finite = finite && l.nonfinite[j] == 0;
  return finite;
}

template <DType T>
void FinishScan(const ScanLanes& l, ForgeScanResult* out) {
  float max_abs = 0, max_rel = 0;
  for (int j = 0; j < kLanes; ++j) {
    max_abs = Max(max_abs, l.mabs[j]);
    max_rel = Max(max_rel, l.mrel[j]);
  }
  out->max_abs = max_abs;
  out->max_rel = Round<T>(max_rel);
}

template <DType T>
void FinishScan(const F64Lanes& l, ForgeScanResult* out) {
  double mag_g = 0, mag_c = 0;
  for (int j = 0; j < kLanes; ++j) {
    out->finite = out->finite && l.nonfinite[j] == 0;
    out->max_abs = Max(out->max_abs, l.mabs[j]);
    out->max_rel = Max(out->max_rel, l.mrel[j]);
    mag_g = Max(mag_g, l.mag_g[j]);
    mag_c = Max(mag_c, l.mag_c[j]);
  }
  out->unsupported = out->finite && !(ForgeF64RangeForPcc(mag_g) && ForgeF64RangeForPcc(mag_c));
}

template <DType T>
void FinishScan(const F8Lanes& l, ForgeScanResult* out) {
  FinishScan<DType::kFloat32>(static_cast<const ScanLanes&>(l), out);
  out->max_abs = l.exact_abs;
}

// Pass 1 lanes for ScanChunks: on its stack, but fp8's (two widened chunks, 64 KiB) on the heap,
// their buffers left uninitialised.
template <typename Lanes>
struct LanesHolder {
  Lanes& get() { return lanes; }
  Lanes lanes;
};
template <>
struct LanesHolder<F8Lanes> {
  F8Lanes& get() { return *lanes; }
  const std::unique_ptr<F8Lanes> lanes{new F8Lanes};
};

// The chunk loop shared by every floating implementation (Passes: one of the structs above,
// Passes::Lanes its pass 1 lanes).
template <typename Passes>
ForgeScanResult ScanChunks(const char* g, const char* c, int64_t n, const ForgeAllCloseTolerance* tol,
                           double (*chunk_all_close)(const char*, const char*, int64_t, double, double)) {
  ForgeScanResult out;
  double all_close = -std::numeric_limits<double>::infinity();
  out.chunks.reserve(static_cast<size_t>((n + kChunk - 1) / kChunk));
  LanesHolder<typename Passes::Lanes> lanes;
  typename Passes::Lanes& l = lanes.get();
  for (int64_t s = 0; s < n; s += kChunk) {
    const int64_t k = std::min(kChunk, n - s);
    for (int j = 0; j < kLanes; ++j) l.sg[j] = l.sc[j] = 0;
    const char* pg = g;  // where the passes read the chunk: in place, or widened (fp8)
    const char* pc = c;
    int64_t ps = s;
    if constexpr (std::is_same_v<typename Passes::Lanes, F8Lanes>) {
      Passes::Widen(g, c, s, k, l);
      pg = reinterpret_cast<const char*>(l.wg);
      pc = reinterpret_cast<const char*>(l.wc);
      ps = 0;
    }
    Passes::Scan(pg, pc, ps, k, l);
    const double sg = LaneSum(l.sg), sc = LaneSum(l.sc);
    out.finite = out.finite && ChunkSumsShowFinite(l, sg, sc) && ChunkLanesShowFinite(l);
    if (!out.finite) return out;  // the caller takes the masked path: nothing else is used
    out.sum_g += sg;
    out.sum_c += sc;
    out.chunks.push_back(ChunkMoments<Passes>(pg, pc, ps, k, sg, sc));
    if (tol != nullptr) {  // a max: chunk by chunk gives the same value as one pass
      const int64_t at = ps * Passes::kBytes;
      all_close = Max(all_close, chunk_all_close(pg + at, pc + at, k, tol->rtol, tol->atol));
    }
  }
  if (tol != nullptr) {
    out.all_close_max = all_close;
    out.all_close_rtol = tol->rtol;
    out.all_close_atol = tol->atol;
  }
  FinishScan<Passes::kDType>(l, &out);
  return out;
}

ForgeScanResult ScanF64(simd::Isa isa, const char* g, const char* c, int64_t n,
                        const ForgeAllCloseTolerance* tol) {
  return isa == simd::Isa::kAvx512 ? ScanChunks<Avx512F64Passes>(g, c, n, tol, &AllCloseF64Avx2)
         : isa == simd::Isa::kAvx2 ? ScanChunks<Avx2F64Passes>(g, c, n, tol, &AllCloseF64Avx2)
                                   : ScanChunks<PortableF64Passes>(g, c, n, tol, &AllCloseF64Portable);
}

using simd::Allowed;
using simd::Isa;
using simd::Selected;

template <DType T>
ForgeScanResult ScanT(Isa isa, const char* g, const char* c, int64_t n, const ForgeAllCloseTolerance* tol) {
  // all_close as ForgeAllCloseMax computes it on this machine (AllCloseT).
  return isa == Isa::kAvx512 ? ScanChunks<Avx512Passes<T>>(g, c, n, tol, &AllCloseAvx2<T>)
         : isa == Isa::kAvx2 ? ScanChunks<Avx2Passes<T>>(g, c, n, tol, &AllCloseAvx2<T>)
                             : ScanChunks<PortablePasses<T>>(g, c, n, tol, &AllClosePortable<T>);
}

template <bool kE5M2>
ForgeScanResult ScanF8(Isa isa, const char* g, const char* c, int64_t n, const ForgeAllCloseTolerance* tol) {
  constexpr DType F = DType::kFloat32;
  auto run = [&](auto passes) {
    using P = decltype(passes);
    return ScanChunks<P>(g, c, n, tol, isa == Isa::kPortable ? &AllClosePortable<F> : &AllCloseAvx2<F>);
  };
  return isa == Isa::kAvx512 ? run(F8Passes<Avx512Passes<F>, Isa::kAvx512, kE5M2>())
         : isa == Isa::kAvx2 ? run(F8Passes<Avx2Passes<F>, Isa::kAvx2, kE5M2>())
                             : run(F8Passes<PortablePasses<F>, Isa::kPortable, kE5M2>());
}

ForgeScanResult Scan(Isa isa, DType t, const char* g, const char* c, int64_t n,
                     const ForgeAllCloseTolerance* tol) {
  if (t == DType::kFloat8E4M3FN) return ScanF8<false>(isa, g, c, n, tol);
  if (t == DType::kFloat8E5M2) return ScanF8<true>(isa, g, c, n, tol);
  if (t == DType::kFloat64) return ScanF64(isa, g, c, n, tol);
  if (t == DType::kFloat32) return ScanT<DType::kFloat32>(isa, g, c, n, tol);
  if (t == DType::kFloat16) return ScanT<DType::kFloat16>(isa, g, c, n, tol);
  return ScanT<DType::kBFloat16>(isa, g, c, n, tol);
}

template <DType T>
double AllCloseT(Isa isa, const char* g, const char* c, int64_t n, double rt, double at) {
  return isa == Isa::kPortable ? AllClosePortable<T>(g, c, n, rt, at) : AllCloseAvx2<T>(g, c, n, rt, at);
}

// rt and at are values of dtype t (so exact as float for the narrower dtypes).
double AllClose(Isa isa, DType t, const char* g, const char* c, int64_t n, double rt, double at) {
  if (t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2) {  // float32 on widened pieces
    constexpr int64_t kPiece = 1024;
    alignas(64) float x[kPiece], y[kPiece];
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t p = 0; p < n; p += kPiece) {
      const int64_t q = std::min(kPiece, n - p);
      simd::WidenFloat8(isa, t == DType::kFloat8E5M2, g + p, q, x);
      simd::WidenFloat8(isa, t == DType::kFloat8E5M2, c + p, q, y);
      m = Max(m, AllCloseT<DType::kFloat32>(isa, reinterpret_cast<const char*>(x),
                                            reinterpret_cast<const char*>(y), q, rt, at));
    }
    return m;
  }
  if (t == DType::kFloat64) {
    return isa == Isa::kPortable ? AllCloseF64Portable(g, c, n, rt, at) : AllCloseF64Avx2(g, c, n, rt, at);
  }
  if (t == DType::kFloat32) return AllCloseT<DType::kFloat32>(isa, g, c, n, rt, at);
  if (t == DType::kFloat16) return AllCloseT<DType::kFloat16>(isa, g, c, n, rt, at);
  return AllCloseT<DType::kBFloat16>(isa, g, c, n, rt, at);
}

// ---- Integer and bool pairs (ForgeIntScan) -------------------------------------------------------
//
// Every value is taken as Tensor::ToDouble gives it: exact for every dtype but (u)int64, whose
// values beyond 2^53 round to nearest (vector code: _mm512_cvtep(i|u)64_pd, simd::Int64ToF64x4).
// Pass 1 of a chunk gives its sums, max |g - c|, the maximum quotient and the dissimilar count:
// exact (integers below 2^53) or maxima, so their order does not matter, except (u)int64 sums of
// values beyond 2^53 / 8192, which round like any float64 sum (lanes in a fixed order). Pass 2
// takes the moments about the chunk's means in lanes i % 8, in element order, without FMA (as the
// float passes), so every version agrees bit for bit.

struct IntLanes {
  double sg[kLanes] = {0}, sc[kLanes] = {0}, mabs[kLanes] = {0}, mrel[kLanes] = {0};
  int64_t dissimilar = 0;
};

// Element i of an integer array of dtype T (bool: nonzero is 1).
template <DType T>
PARITY_INLINE double IntAt(const char* p, int64_t i) {
  if constexpr (T == DType::kInt64) {
    int64_t v;
    std::memcpy(&v, p + 8 * i, 8);
    return static_cast<double>(v);  // as Tensor::ToDouble
  } else if constexpr (T == DType::kUInt64) {
    uint64_t v;
    std::memcpy(&v, p + 8 * i, 8);
    return static_cast<double>(v);  // as Tensor::ToDouble
  } else if constexpr (T == DType::kUInt32) {
    uint32_t v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  } else if constexpr (T == DType::kInt32) {
    int32_t v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  } else if constexpr (T == DType::kInt16) {
    int16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    return v;
  } else if constexpr (T == DType::kUInt16) {
    uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    return v;
  } else if constexpr (T == DType::kInt8) {
    return static_cast<int8_t>(p[i]);
  } else if constexpr (T == DType::kUInt8) {
    return static_cast<uint8_t>(p[i]);
  } else {
    return p[i] != 0 ? 1.0 : 0.0;
  }
}

// calculate_rtol for integer tensors (float32 arithmetic): float32(|g - c|) / |c|, the quotient
// left in float64 (ForgeIntScan rounds the maximum to float32 once: rounding is monotonic).
PARITY_INLINE double IntRel(double d, double y) {
  return y == 0 ? 0.0 : static_cast<double>(static_cast<float>(d)) / std::fabs(y);
}

template <DType T>
PARITY_INLINE void IntScanStep(IntLanes& l, int j, double x, double y) {
  l.sg[j] += x;
  l.sc[j] += y;
  const double d = std::fabs(x - y);
  l.mabs[j] = Max(l.mabs[j], d);
  l.mrel[j] = Max(l.mrel[j], IntRel(d, y));
  l.dissimilar += (x != 0) != (y != 0);
}

template <DType T>
struct PortableIntPasses {
  static void Scan(const char* g, const char* c, int64_t s, int64_t k, IntLanes& l) {
    ScanFrom(g, c, s, 0, k, l);
  }
  // Elements [from, k) of the chunk at s (lane (from + i) % 8).
  static void ScanFrom(const char* g, const char* c, int64_t s, int64_t from, int64_t k, IntLanes& l) {
    for (int64_t i = from; i < k; ++i) {
      IntScanStep<T>(l, static_cast<int>(i % kLanes), IntAt<T>(g, s + i), IntAt<T>(c, s + i));
    }
  }
  static void Moments(const char* g, const char* c, int64_t s, int64_t k, double ma, double mb,
                      MomentLanes& m) {
    Tail(g, c, s, 0, k, ma, mb, m);
  }
  // Elements [from, k) of the chunk at s (lane (from + i) % 8).
  static void Tail(const char* g, const char* c, int64_t s, int64_t from, int64_t k, double ma,
                   double mb, MomentLanes& m) {
    PortableMomentTail<&IntAt<T>>(g, c, s, from, k, ma, mb, m);
  }
};

// The dtypes whose values int32 lanes do not hold: loaded straight to float64 lanes.
template <DType T>
constexpr bool kWideInt = T == DType::kInt64 || T == DType::kUInt64 || T == DType::kUInt32;

// Eight elements from index i as int32 lanes (not the wide ones: see IntLoad).
template <DType T>
PARITY_AVX2 inline __m256i LoadInt8(const char* p, int64_t i) {
  static_assert(!kWideInt<T>);
  if constexpr (T == DType::kInt32) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 4 * i));
  } else if constexpr (T == DType::kInt16) {
    return _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
  } else if constexpr (T == DType::kUInt16) {
    return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
  } else if constexpr (T == DType::kInt8) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + i)));
  } else if constexpr (T == DType::kUInt8) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + i)));
  } else {
    return _mm256_min_epu32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + i))),
                            _mm256_set1_epi32(1));
  }
}

template <DType T>
struct IntLoad {
  static constexpr int64_t kBytes = T == DType::kInt64 || T == DType::kUInt64   ? 8
                                    : T == DType::kInt32 || T == DType::kUInt32 ? 4
                                    : T == DType::kInt16 || T == DType::kUInt16 ? 2
                                                                                : 1;
  PARITY_AVX2 static void Load4x2(const char* p, int64_t i, __m256d* lo, __m256d* hi) {
    if constexpr (T == DType::kInt64 || T == DType::kUInt64) {
      *lo = simd::Int64ToF64x4<T == DType::kUInt64>(p + 8 * i);
      *hi = simd::Int64ToF64x4<T == DType::kUInt64>(p + 8 * i + 32);
    } else if constexpr (T == DType::kUInt32) {
      simd::U32ToF64x4x2(p + 4 * i, lo, hi);
    } else {
      const __m256i x = LoadInt8<T>(p, i);
      *lo = _mm256_cvtepi32_pd(_mm256_castsi256_si128(x));
      *hi = _mm256_cvtepi32_pd(_mm256_extracti128_si256(x, 1));
    }
  }
  PARITY_AVX512 static __m512d Load8(const char* p, int64_t i) {
    if constexpr (T == DType::kInt64 || T == DType::kUInt64) {
      const __m512i x = _mm512_loadu_si512(p + 8 * i);
      return T == DType::kUInt64 ? _mm512_cvtepu64_pd(x) : _mm512_cvtepi64_pd(x);
    } else if constexpr (T == DType::kUInt32) {
      return _mm512_cvtepu32_pd(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 4 * i)));
    } else {
      return _mm512_cvtepi32_pd(LoadInt8<T>(p, i));
    }
  }
};

template <DType T>
struct Avx2IntPasses {
  PARITY_AVX2 static void Scan(const char* g, const char* c, int64_t s, int64_t k, IntLanes& l) {
    const __m256d sign = _mm256_set1_pd(-0.0), zero = _mm256_setzero_pd(), one = _mm256_set1_pd(1.0);
    __m256d sg[2], sc[2], mabs[2], mrel[2];
    for (int h = 0; h < 2; ++h) {
      sg[h] = _mm256_loadu_pd(l.sg + 4 * h);
      sc[h] = _mm256_loadu_pd(l.sc + 4 * h);
      mabs[h] = _mm256_loadu_pd(l.mabs + 4 * h);
      mrel[h] = _mm256_loadu_pd(l.mrel + 4 * h);
    }
    int64_t dissimilar = 0;
    const int64_t full = k / kLanes * kLanes;
    for (int64_t i = s; i < s + full; i += kLanes) {
      __m256d xs[2], ys[2];
      if constexpr (kWideInt<T>) {  // a nonzero integer is a nonzero double
        IntLoad<T>::Load4x2(g, i, &xs[0], &xs[1]);
        IntLoad<T>::Load4x2(c, i, &ys[0], &ys[1]);
        for (int h = 0; h < 2; ++h) {
          dissimilar += __builtin_popcount(static_cast<unsigned>(_mm256_movemask_pd(
              _mm256_xor_pd(_mm256_cmp_pd(xs[h], zero, _CMP_EQ_OQ), _mm256_cmp_pd(ys[h], zero, _CMP_EQ_OQ)))));
        }
      } else {
        const __m256i xi = LoadInt8<T>(g, i), yi = LoadInt8<T>(c, i);
        const __m256i zi = _mm256_setzero_si256();
        dissimilar += __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(
            _mm256_xor_si256(_mm256_cmpeq_epi32(xi, zi), _mm256_cmpeq_epi32(yi, zi))))));
        xs[0] = _mm256_cvtepi32_pd(_mm256_castsi256_si128(xi));
        xs[1] = _mm256_cvtepi32_pd(_mm256_extracti128_si256(xi, 1));
        ys[0] = _mm256_cvtepi32_pd(_mm256_castsi256_si128(yi));
        ys[1] = _mm256_cvtepi32_pd(_mm256_extracti128_si256(yi, 1));
      }
      for (int h = 0; h < 2; ++h) {
        const __m256d x = xs[h], y = ys[h];
        sg[h] = _mm256_add_pd(sg[h], x);
        sc[h] = _mm256_add_pd(sc[h], y);
        const __m256d d = _mm256_andnot_pd(sign, _mm256_sub_pd(x, y));
        mabs[h] = _mm256_max_pd(mabs[h], d);
        const __m256d yz = _mm256_cmp_pd(y, zero, _CMP_EQ_OQ);
        const __m256d den = _mm256_blendv_pd(_mm256_andnot_pd(sign, y), one, yz);
        const __m256d q = _mm256_div_pd(_mm256_cvtps_pd(_mm256_cvtpd_ps(d)), den);
        mrel[h] = _mm256_max_pd(mrel[h], _mm256_andnot_pd(yz, q));
      }
    }
    for (int h = 0; h < 2; ++h) {
      _mm256_storeu_pd(l.sg + 4 * h, sg[h]);
      _mm256_storeu_pd(l.sc + 4 * h, sc[h]);
      _mm256_storeu_pd(l.mabs + 4 * h, mabs[h]);
      _mm256_storeu_pd(l.mrel + 4 * h, mrel[h]);
    }
    l.dissimilar += dissimilar;
    PortableIntPasses<T>::ScanFrom(g, c, s, full, k, l);
  }
  PARITY_AVX2 static void Moments(const char* g, const char* c, int64_t s, int64_t k, double ma,
                                  double mb, MomentLanes& m) {
    const int64_t full = Avx2MomentLoop<IntLoad<T>>(g, c, s, k, ma, mb, m);
    PortableIntPasses<T>::Tail(g, c, s, full, k, ma, mb, m);
  }
};

template <DType T>
struct Avx512IntPasses {
  PARITY_AVX512 static void Scan(const char* g, const char* c, int64_t s, int64_t k, IntLanes& l) {
    const __m512d zero = _mm512_setzero_pd();
    __m512d sg = _mm512_loadu_pd(l.sg), sc = _mm512_loadu_pd(l.sc);
    __m512d mabs = _mm512_loadu_pd(l.mabs), mrel = _mm512_loadu_pd(l.mrel);
    int64_t dissimilar = 0;
    const int64_t full = k / kLanes * kLanes;
    for (int64_t i = s; i < s + full; i += kLanes) {
      const __m512d x = IntLoad<T>::Load8(g, i), y = IntLoad<T>::Load8(c, i);
      sg = _mm512_add_pd(sg, x);
      sc = _mm512_add_pd(sc, y);
      const __m512d d = _mm512_abs_pd(_mm512_sub_pd(x, y));
      mabs = _mm512_max_pd(mabs, d);
      const __mmask8 xnz = _mm512_cmp_pd_mask(x, zero, _CMP_NEQ_OQ);
      const __mmask8 ynz = _mm512_cmp_pd_mask(y, zero, _CMP_NEQ_OQ);
      dissimilar += __builtin_popcount(static_cast<unsigned>(xnz ^ ynz));
      // Lanes with y == 0 give 0, as IntRel does; mrel starts at 0, so a zeroed quotient never
      // raises it.
      const __m512d q = _mm512_maskz_div_pd(ynz, _mm512_cvtps_pd(_mm512_cvtpd_ps(d)), _mm512_abs_pd(y));
      mrel = _mm512_max_pd(mrel, q);
    }
    _mm512_storeu_pd(l.sg, sg);
    _mm512_storeu_pd(l.sc, sc);
    _mm512_storeu_pd(l.mabs, mabs);
    _mm512_storeu_pd(l.mrel, mrel);
    l.dissimilar += dissimilar;
    PortableIntPasses<T>::ScanFrom(g, c, s, full, k, l);
  }
  PARITY_AVX512 static void Moments(const char* g, const char* c, int64_t s, int64_t k, double ma,
                                    double mb, MomentLanes& m) {
    const int64_t full = Avx512MomentLoop<IntLoad<T>>(g, c, s, k, ma, mb, m);
    PortableIntPasses<T>::Tail(g, c, s, full, k, ma, mb, m);
  }
};

template <typename Passes>
ForgeScanResult IntScanChunks(const char* g, const char* c, int64_t n) {
  ForgeScanResult out;
  out.integer = true;
  out.chunks.reserve(static_cast<size_t>((n + kChunk - 1) / kChunk));
  IntLanes l;
  for (int64_t s = 0; s < n; s += kChunk) {
    const int64_t k = std::min(kChunk, n - s);
    for (int j = 0; j < kLanes; ++j) l.sg[j] = l.sc[j] = 0;
    Passes::Scan(g, c, s, k, l);
    const double sg = LaneSum(l.sg), sc = LaneSum(l.sc);  // exact
    out.sum_g += sg;
    out.sum_c += sc;
    out.chunks.push_back(ChunkMoments<Passes>(g, c, s, k, sg, sc));
  }
  double max_rel = 0;
  for (int j = 0; j < kLanes; ++j) {
    out.max_abs = Max(out.max_abs, l.mabs[j]);
    max_rel = Max(max_rel, l.mrel[j]);
  }
  out.max_rel = static_cast<float>(max_rel);
  out.dissimilar = l.dissimilar;
  return out;
}

template <DType T>
ForgeScanResult IntScanT(simd::Isa isa, const char* g, const char* c, int64_t n) {
  return isa == simd::Isa::kAvx512 ? IntScanChunks<Avx512IntPasses<T>>(g, c, n)
         : isa == simd::Isa::kAvx2 ? IntScanChunks<Avx2IntPasses<T>>(g, c, n)
                                   : IntScanChunks<PortableIntPasses<T>>(g, c, n);
}

bool IntDTypeHandled(DType t) {
  switch (t) {
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      return true;
    default:
      return false;
  }
}

ForgeScanResult IntScan(simd::Isa isa, DType t, const char* g, const char* c, int64_t n) {
  switch (t) {
    case DType::kInt64: return IntScanT<DType::kInt64>(isa, g, c, n);
    case DType::kUInt64: return IntScanT<DType::kUInt64>(isa, g, c, n);
    case DType::kInt32: return IntScanT<DType::kInt32>(isa, g, c, n);
    case DType::kUInt32: return IntScanT<DType::kUInt32>(isa, g, c, n);
    case DType::kInt16: return IntScanT<DType::kInt16>(isa, g, c, n);
    case DType::kUInt16: return IntScanT<DType::kUInt16>(isa, g, c, n);
    case DType::kInt8: return IntScanT<DType::kInt8>(isa, g, c, n);
    case DType::kUInt8: return IntScanT<DType::kUInt8>(isa, g, c, n);
    default: return IntScanT<DType::kBool>(isa, g, c, n);
  }
}

std::atomic<bool> g_enabled{true};

bool DTypeHandled(DType t) {
  return t == DType::kFloat64 || t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
         t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2;
}

}  // namespace

bool ForgeF64RangeForPcc(double magnitude) {
  return magnitude == 0 || (magnitude >= 0x1p-300 && magnitude <= 0x1p300);
}

bool ForgeKernelSupports(DType t) { return g_enabled && DTypeHandled(t); }

void SetForgeKernelEnabled(bool enabled) { g_enabled = enabled; }

bool ForgeIntKernelSupports(DType t) { return g_enabled && IntDTypeHandled(t); }

ForgeScanResult ForgeIntScan(DType t, const char* g, const char* c, int64_t n) {
  return IntScan(Selected(), t, g, c, n);
}

bool ForgeIntScanForIsa(const std::string& isa, DType t, const char* g, const char* c, int64_t n,
                        ForgeScanResult* out) {
  Isa i;
  if (!IntDTypeHandled(t) || !Allowed(isa, &i)) return false;
  *out = IntScan(i, t, g, c, n);
  return true;
}

ForgeScanResult ForgeScan(DType t, const char* g, const char* c, int64_t n,
                          const ForgeAllCloseTolerance* all_close) {
  return Scan(Selected(), t, g, c, n, all_close);
}

ForgeCovarianceResult ForgeCovariance(const ForgeScanResult& scan, double mean_g, double mean_c) {
  // Per chunk, with u = chunk mean - mean: sum (x - mean)(y - mean') = ab + u' dx + u dy + k u u'
  // (dx, dy: the sums of the deviations from the chunk's rounded means, ~0).
  ForgeCovarianceResult out;
  int64_t n = 0;
  for (const ForgeChunkMoments& m : scan.chunks) {
    const double k = static_cast<double>(m.n);
    const double ug = m.mean_g - mean_g, uc = m.mean_c - mean_c;
    out.aa += m.aa + (ug * m.dx + ug * m.dx) + k * ug * ug;
    out.ab += m.ab + (uc * m.dx + ug * m.dy) + k * ug * uc;
    out.bb += m.bb + (uc * m.dy + uc * m.dy) + k * uc * uc;
    n += m.n;
  }
  const double nd = static_cast<double>(n);
  out.aa /= nd;
  out.ab /= nd;
  out.bb /= nd;
  return out;
}

double ForgeAllCloseMax(DType t, const char* g, const char* c, int64_t n, double rtol, double atol) {
  return AllClose(Selected(), t, g, c, n, rtol, atol);
}

bool ForgeAllCloseMaxForIsa(const std::string& isa, DType t, const char* g, const char* c, int64_t n,
                            double rtol, double atol, double* out) {
  Isa i;
  if (!DTypeHandled(t) || !Allowed(isa, &i)) return false;
  *out = AllClose(i, t, g, c, n, rtol, atol);
  return true;
}

bool ForgeScanForIsa(const std::string& isa, DType t, const char* g, const char* c, int64_t n,
                     ForgeScanResult* out, const ForgeAllCloseTolerance* all_close) {
  Isa i;
  if (!DTypeHandled(t) || !Allowed(isa, &i)) return false;
  *out = Scan(i, t, g, c, n, all_close);
  return true;
}

}  // namespace parity
