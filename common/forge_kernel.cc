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

PARITY_INLINE void MomentStep(MomentLanes& m, int j, float x, float y, double ma, double mb) {
  const double dx = static_cast<double>(x) - ma;
  const double dy = static_cast<double>(y) - mb;
  m.dx[j] += dx;
  m.dy[j] += dy;
  m.aa[j] += dx * dx;
  m.ab[j] += dx * dy;
  m.bb[j] += dy * dy;
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
template <DType T>
PARITY_AVX2 inline void Prefetch(const char* g, const char* c, int64_t i) {
  const uintptr_t at = static_cast<uintptr_t>(i + kChunk) * (T == DType::kFloat32 ? 4 : 2);
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(g) + at), _MM_HINT_T1);
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(c) + at), _MM_HINT_T1);
}

template <DType T>
struct Avx2Passes {
  static constexpr DType kDType = T;
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
    const __m256d vma = _mm256_set1_pd(ma), vmb = _mm256_set1_pd(mb);
    __m256d dx[2], dy[2], aa[2], ab[2], bb[2];
    for (int h = 0; h < 2; ++h) dx[h] = dy[h] = aa[h] = ab[h] = bb[h] = _mm256_setzero_pd();
    const int64_t full = k / kLanes * kLanes;
    for (int64_t i = s; i < s + full; i += kLanes) {
      Prefetch<T>(g, c, i);
      const __m256 x = simd::Load8<T>(g, i), y = simd::Load8<T>(c, i);
      const __m128 xs[2] = {_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1)};
      const __m128 ys[2] = {_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1)};
      for (int h = 0; h < 2; ++h) {
        const __m256d ex = _mm256_sub_pd(_mm256_cvtps_pd(xs[h]), vma);
        const __m256d ey = _mm256_sub_pd(_mm256_cvtps_pd(ys[h]), vmb);
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
    MomentTail<T>(g, c, s, full, k, ma, mb, m);
  }
};

template <DType T>
struct Avx512Passes {
  static constexpr DType kDType = T;
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
    const __m512d vma = _mm512_set1_pd(ma), vmb = _mm512_set1_pd(mb);
    __m512d dx = _mm512_setzero_pd(), dy = dx, aa = dx, ab = dx, bb = dx;
    const int64_t full = k / kLanes * kLanes;
    for (int64_t i = s; i < s + full; i += kLanes) {
      Prefetch<T>(g, c, i);
      const __m512d ex = _mm512_sub_pd(_mm512_cvtps_pd(simd::Load8<T>(g, i)), vma);
      const __m512d ey = _mm512_sub_pd(_mm512_cvtps_pd(simd::Load8<T>(c, i)), vmb);
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
    MomentTail<T>(g, c, s, full, k, ma, mb, m);
  }
};

// The chunk loop shared by every implementation (Passes: one of the structs above).
template <typename Passes>
ForgeScanResult ScanChunks(const char* g, const char* c, int64_t n, const ForgeAllCloseTolerance* tol,
                           float (*chunk_all_close)(const char*, const char*, int64_t, float, float)) {
  ForgeScanResult out;
  float all_close = -std::numeric_limits<float>::infinity();
  out.chunks.reserve(static_cast<size_t>((n + kChunk - 1) / kChunk));
  ScanLanes l;
  for (int64_t s = 0; s < n; s += kChunk) {
    const int64_t k = std::min(kChunk, n - s);
    for (int j = 0; j < kLanes; ++j) l.sg[j] = l.sc[j] = 0;
    Passes::Scan(g, c, s, k, l);
    ForgeChunkMoments cm;
    cm.n = k;
    const double sg = LaneSum(l.sg), sc = LaneSum(l.sc);
    // A chunk's sums of finite floats are finite (|sum| <= 8192 * 3.4e38): a non-finite sum is
    // exactly a NaN or inf among its inputs.
    out.finite = out.finite && std::isfinite(sg) && std::isfinite(sc);
    out.sum_g += sg;
    out.sum_c += sc;
    cm.mean_g = sg / static_cast<double>(k);
    cm.mean_c = sc / static_cast<double>(k);
    MomentLanes m;
    Passes::Moments(g, c, s, k, cm.mean_g, cm.mean_c, m);
    cm.dx = LaneSum(m.dx);
    cm.dy = LaneSum(m.dy);
    cm.aa = LaneSum(m.aa);
    cm.ab = LaneSum(m.ab);
    cm.bb = LaneSum(m.bb);
    out.chunks.push_back(cm);
    if (tol != nullptr) {  // a max: chunk by chunk gives the same value as one pass
      const int64_t at = s * Passes::kBytes;
      all_close = Max(all_close, chunk_all_close(g + at, c + at, k, tol->rtol, tol->atol));
    }
  }
  if (tol != nullptr) {
    out.all_close_max = all_close;
    out.all_close_rtol = tol->rtol;
    out.all_close_atol = tol->atol;
  }
  for (int j = 0; j < kLanes; ++j) {
    out.max_abs = Max(out.max_abs, l.mabs[j]);
    out.max_rel = Max(out.max_rel, l.mrel[j]);
  }
  out.max_rel = Round<Passes::kDType>(out.max_rel);  // the vector scans leave it unrounded
  return out;
}

// ---- verif.all_close's max excess ----------------------------------------------------------------

// One element's excess, rounded to the tensors' own dtype (all_close works in it; bfloat16 is
// not upcast here).
template <DType T>
PARITY_INLINE float ExcessOne(float x, float y, float rt, float at) {
  const float d = std::fabs(simd::RoundTo<T>(x - y));
  return simd::RoundTo<T>(simd::RoundTo<T>(d - at) - simd::RoundTo<T>(rt * std::fabs(y)));
}

template <DType T>
float AllClosePortable(const char* g, const char* c, int64_t n, float rt, float at) {
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
PARITY_AVX2 float AllCloseAvx2(const char* g, const char* c, int64_t n, float rt, float at) {
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
  return Max(out, AllClosePortable<T>(g + bytes, c + bytes, n - full, rt, at));
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

ForgeScanResult Scan(Isa isa, DType t, const char* g, const char* c, int64_t n,
                     const ForgeAllCloseTolerance* tol) {
  if (t == DType::kFloat32) return ScanT<DType::kFloat32>(isa, g, c, n, tol);
  if (t == DType::kFloat16) return ScanT<DType::kFloat16>(isa, g, c, n, tol);
  return ScanT<DType::kBFloat16>(isa, g, c, n, tol);
}

template <DType T>
float AllCloseT(Isa isa, const char* g, const char* c, int64_t n, float rt, float at) {
  return isa == Isa::kPortable ? AllClosePortable<T>(g, c, n, rt, at) : AllCloseAvx2<T>(g, c, n, rt, at);
}

float AllClose(Isa isa, DType t, const char* g, const char* c, int64_t n, float rt, float at) {
  if (t == DType::kFloat32) return AllCloseT<DType::kFloat32>(isa, g, c, n, rt, at);
  if (t == DType::kFloat16) return AllCloseT<DType::kFloat16>(isa, g, c, n, rt, at);
  return AllCloseT<DType::kBFloat16>(isa, g, c, n, rt, at);
}

std::atomic<bool> g_enabled{true};

bool DTypeHandled(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

}  // namespace

bool ForgeKernelSupports(DType t) { return g_enabled && DTypeHandled(t); }

void SetForgeKernelEnabled(bool enabled) { g_enabled = enabled; }

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

float ForgeAllCloseMax(DType t, const char* g, const char* c, int64_t n, float rtol, float atol) {
  return AllClose(Selected(), t, g, c, n, rtol, atol);
}

bool ForgeAllCloseMaxForIsa(const std::string& isa, DType t, const char* g, const char* c, int64_t n,
                            float rtol, float atol, float* out) {
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
