#include "common/checks/msprobe_kernel.h"

// GCC 12's AVX-512 intrinsics (_mm512_cvtps_ph, _mm512_reduce_*) start from an "undefined"
// register that -Wmaybe-uninitialized reports from inside the system header.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"

#include "common/base/float_formats.h"
#include "common/base/tensor.h"
#include "common/checks/simd.h"

namespace parity {
namespace {

constexpr double kEps = 2.220446049250313e-16;  // np.finfo(float).eps
constexpr int64_t kBlock = 1024;                 // float64 sums are flushed every block

// For fp16 pairs the relative error is rounded to half before it is compared and maximised.
// Rounding is monotonic, so the vector paths compare and maximise the float32 quotient instead
// and round only the block's maximum: for x >= 0 or NaN, RoundToHalf(x) < t exactly when
// x < HalfLtBound(t), the smallest float y >= 0 with RoundToHalf(y) >= t.
float HalfLtBound(float t) {
  if (std::isnan(t)) return t;  // every comparison false, as with the rounded value
  // Called per tensor (or chunk) with the two thresholds in turn: one memo slot for each.
  // RoundToHalf(0) >= 0, so a slot starts out right for t = 0.
  thread_local float memo_t[2] = {0, 0}, memo_bound[2] = {0, 0};
  thread_local int memo_next = 0;
  if (t == memo_t[0]) return memo_bound[0];
  if (t == memo_t[1]) return memo_bound[1];
  uint32_t lo = 0, hi = 0x7f800000u;  // +0 .. +inf, ordered like their values
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    float y;
    std::memcpy(&y, &mid, sizeof(y));
    if (RoundToHalf(y) >= t) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  float bound;
  std::memcpy(&bound, &lo, sizeof(bound));
  memo_t[memo_next] = t;
  memo_bound[memo_next] = bound;
  memo_next ^= 1;
  return bound;
}

constexpr int64_t kChunk = int64_t{1} << 20;     // unit of MsprobeKernelRun's split

// How a dtype is loaded and in which arithmetic its relative error is computed.
// kF32EpsBench and kF32EpsNpu: float32 values of a pair where one side is float16 and the
// other loads as float32 (widened in L1): the relative error in float32 with eps added where
// bench == 0 to the float32-loading side only (float16's eps rounds to 0): to the bench side when
// the NPU side is the float16 one (both 0 give RE 1), to the NPU side otherwise (RE inf, or NaN).
enum class Kind {
  kF32, kBF16, kF16, kBool, kU8, kI8, kI16, kU16, kI32, kU32, kI64, kU64, kF64, kF8E4M3, kF8E5M2,
  kF32EpsBench, kF32EpsNpu,
  // float64 values of a pair whose NPU side loads as float32 (widened) and bench side is float64:
  // the relative error in float64, but the NPU side's eps (where bench == 0) added in float32
  // arithmetic, as msprobe adds it in that side's own dtype.
  kF64EpsNpuF32
};

bool KindOf(DType t, Kind* k) {
  switch (t) {
    case DType::kFloat32: *k = Kind::kF32; return true;
    case DType::kBFloat16: *k = Kind::kBF16; return true;
    case DType::kFloat16: *k = Kind::kF16; return true;
    case DType::kBool: *k = Kind::kBool; return true;
    case DType::kUInt8: *k = Kind::kU8; return true;
    case DType::kInt8: *k = Kind::kI8; return true;
    case DType::kInt16: *k = Kind::kI16; return true;
    case DType::kUInt16: *k = Kind::kU16; return true;
    case DType::kInt32: *k = Kind::kI32; return true;
    case DType::kUInt32: *k = Kind::kU32; return true;
    case DType::kInt64: *k = Kind::kI64; return true;
    case DType::kUInt64: *k = Kind::kU64; return true;
    case DType::kFloat64: *k = Kind::kF64; return true;
    case DType::kFloat8E4M3FN: *k = Kind::kF8E4M3; return true;
    case DType::kFloat8E5M2: *k = Kind::kF8E5M2; return true;
    default: return false;
  }
}

constexpr bool IsF64Kind(Kind k) { return k == Kind::kF64 || k == Kind::kF64EpsNpuF32; }
constexpr bool IsF32Kind(Kind k) { return k == Kind::kF32 || k == Kind::kF32EpsBench || k == Kind::kF32EpsNpu; }
constexpr bool IsFloatKind(Kind k) { return IsF32Kind(k) || k == Kind::kBF16 || k == Kind::kF16; }
// Which sides get eps where bench == 0 in float32 arithmetic (kF32 and bfloat16: both).
constexpr bool EpsOnNpu(Kind k) { return k == Kind::kF32 || k == Kind::kBF16 || k == Kind::kF32EpsNpu; }
constexpr bool EpsOnBench(Kind k) { return k == Kind::kF32 || k == Kind::kBF16 || k == Kind::kF32EpsBench; }

// Element i of an array of kind K, as float (float kinds) or as double (integer kinds and
// float64, whose relative error is computed in float64 like the integers').
template <Kind K>
inline double LoadScalar(const char* p, int64_t i) {
  switch (K) {
    case Kind::kF32:
    case Kind::kF32EpsBench:
    case Kind::kF32EpsNpu: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case Kind::kBF16:
    case Kind::kF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return K == Kind::kF16 ? HalfToFloat(h) : BFloat16ToFloat(h);
    }
    case Kind::kBool: return p[i] != 0 ? 1.0 : 0.0;
    case Kind::kU8: return static_cast<uint8_t>(p[i]);
    case Kind::kI8: return static_cast<int8_t>(p[i]);
    case Kind::kI16: {
      int16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return v;
    }
    case Kind::kU16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return v;
    }
    case Kind::kI32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case Kind::kU32: {
      uint32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case Kind::kI64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return static_cast<double>(v);  // as Tensor::ToDouble
    }
    case Kind::kU64: {
      uint64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return static_cast<double>(v);  // as Tensor::ToDouble
    }
    case Kind::kF64:
    case Kind::kF64EpsNpuF32: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
  }
  return 0;
}

// Per-block state: float64 lanes, maxima, flags and counts.
struct Acc {
  double dot[8] = {0}, nn[8] = {0}, bb[8] = {0}, euc[8] = {0};
  double max_abs = -1, max_re = -1;
  bool re_nan = false;
  int64_t c1 = 0, c5 = 0;
};

// One element into lane `l`, exactly as the vector code computes it.
template <Kind K>
inline void ScalarElement(double n, double b, int l, double t1, double t5, Acc* a) {
  a->dot[l] += n * b;
  a->nn[l] += n * n;
  a->bb[l] += b * b;
  const double d = n - b;
  a->euc[l] += d * d;
  a->max_abs = std::max(a->max_abs, std::fabs(d));
  double re;
  if (IsF32Kind(K) || K == Kind::kBF16) {
    const float epsf = static_cast<float>(kEps);
    float nf = static_cast<float>(n), bf = static_cast<float>(b);
    if (bf == 0) {
      if (EpsOnBench(K)) bf = epsf;
      if (EpsOnNpu(K)) nf = nf + epsf;
    }
    re = std::fabs((nf - bf) / bf);
  } else if (K == Kind::kF16) {
    const float nf = static_cast<float>(n), bf = static_cast<float>(b);
    const float dh = RoundToHalf(nf - bf);
    re = std::fabs(RoundToHalf(dh / bf));
  } else {
    double nq = n, bq = b;
    if (bq == 0) {
      bq = kEps;
      nq = K == Kind::kF64EpsNpuF32 ? static_cast<double>(static_cast<float>(nq) + static_cast<float>(kEps))
                                    : nq + kEps;
    }
    re = std::fabs((nq - bq) / bq);
  }
  if (std::isnan(re)) {
    a->re_nan = true;
  } else {
    a->max_re = std::max(a->max_re, re);
  }
  a->c1 += re < t1;
  a->c5 += re < t5;
}

template <Kind K>
void BlockPortable(const char* np, const char* bp, int64_t begin, int64_t count, double t1,
                   double t5, Acc* a) {
  for (int64_t i = 0; i < count; ++i) {
    ScalarElement<K>(LoadScalar<K>(np, begin + i), LoadScalar<K>(bp, begin + i),
                     static_cast<int>(i & 7), t1, t5, a);
  }
}

// ---- AVX2 (+F16C, POPCNT); no FMA so that products round exactly as the portable code. ----

template <Kind K>
PARITY_AVX2 inline __m256 LoadF8(const char* p, int64_t i) {
  if (IsF32Kind(K)) return _mm256_loadu_ps(reinterpret_cast<const float*>(p) + i);
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i));
  if (K == Kind::kF16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));  // bf16
}

template <Kind K>
PARITY_AVX2 inline __m256i LoadI8(const char* p, int64_t i) {
  switch (K) {
    case Kind::kBool:
      return _mm256_min_epu32(
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + i))),
          _mm256_set1_epi32(1));
    case Kind::kU8:
      return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + i)));
    case Kind::kI8:
      return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + i)));
    case Kind::kI16:
      return _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
    case Kind::kU16:
      return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
    default:
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 4 * i));
  }
}

PARITY_AVX2 inline __m256 RoundHalf8(__m256 x) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

// out[j] += lane j of lo, out[4 + j] += lane j of hi.
PARITY_AVX2 inline void AddLanes(__m256d lo, __m256d hi, double* out) {
  alignas(32) double lanes[8];
  _mm256_store_pd(lanes, lo);
  _mm256_store_pd(lanes + 4, hi);
  for (int j = 0; j < 8; ++j) out[j] += lanes[j];
}

// BlockAvx2 and BlockAvx512 are one function each, longer than the rest of the code, on purpose:
// their sixteen-odd vector accumulators must stay in registers across the whole loop, which a
// split into calls does not guarantee (a call the compiler declines to inline spills them).
// BlockPortable is the readable reference they are tested against bit for bit.
template <Kind K>
PARITY_AVX2 void BlockAvx2(const char* np, const char* bp, int64_t begin, int64_t count, double t1,
                           double t5, float t1_half, float t5_half, Acc* a) {
  // Named accumulators (not arrays) so that they stay in registers.
  __m256d dot0 = _mm256_setzero_pd(), dot1 = dot0, nn0 = dot0, nn1 = dot0, bb0 = dot0,
          bb1 = dot0, euc0 = dot0, euc1 = dot0;
  const __m256d abs_mask_d = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
  const __m256 abs_mask_f = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256d max_abs = _mm256_set1_pd(-1);
  __m256d max_re_d = _mm256_set1_pd(-1);
  __m256 max_re_f = _mm256_set1_ps(-1);
  __m256 nan_f = _mm256_setzero_ps();
  const __m256 t1f = _mm256_set1_ps(static_cast<float>(t1)), t5f = _mm256_set1_ps(static_cast<float>(t5));
  const __m256d t1d = _mm256_set1_pd(t1), t5d = _mm256_set1_pd(t5);
  const __m256 t1h = _mm256_set1_ps(t1_half), t5h = _mm256_set1_ps(t5_half);
  const __m256 epsf = _mm256_set1_ps(static_cast<float>(kEps));
  const __m256d epsd = _mm256_set1_pd(kEps);
  int64_t c1 = 0, c5 = 0;
  __m256i c1v = _mm256_setzero_si256(), c5v = c1v;
  const int64_t vec = count & ~int64_t{7};
  for (int64_t i = 0; i < vec; i += 8) {
    __m256d n0, n1, b0, b1;
    __m256 nf = _mm256_setzero_ps(), bf = _mm256_setzero_ps();
    if (IsF64Kind(K)) {
      const double* nd = reinterpret_cast<const double*>(np) + begin + i;
      const double* bd = reinterpret_cast<const double*>(bp) + begin + i;
      n0 = _mm256_loadu_pd(nd);
      n1 = _mm256_loadu_pd(nd + 4);
      b0 = _mm256_loadu_pd(bd);
      b1 = _mm256_loadu_pd(bd + 4);
    } else if (K == Kind::kI64 || K == Kind::kU64) {
      // Cast to float64 first, as msprobe's astype(float).
      constexpr bool kUnsigned = K == Kind::kU64;
      n0 = simd::Int64ToF64x4<kUnsigned>(np + 8 * (begin + i));
      n1 = simd::Int64ToF64x4<kUnsigned>(np + 8 * (begin + i + 4));
      b0 = simd::Int64ToF64x4<kUnsigned>(bp + 8 * (begin + i));
      b1 = simd::Int64ToF64x4<kUnsigned>(bp + 8 * (begin + i + 4));
    } else if (K == Kind::kU32) {
      simd::U32ToF64x4x2(np + 4 * (begin + i), &n0, &n1);
      simd::U32ToF64x4x2(bp + 4 * (begin + i), &b0, &b1);
    } else if (IsFloatKind(K)) {
      nf = LoadF8<K>(np, begin + i);
      bf = LoadF8<K>(bp, begin + i);
      n0 = _mm256_cvtps_pd(_mm256_castps256_ps128(nf));
      n1 = _mm256_cvtps_pd(_mm256_extractf128_ps(nf, 1));
      b0 = _mm256_cvtps_pd(_mm256_castps256_ps128(bf));
      b1 = _mm256_cvtps_pd(_mm256_extractf128_ps(bf, 1));
    } else {
      const __m256i ni = LoadI8<K>(np, begin + i), bi = LoadI8<K>(bp, begin + i);
      n0 = _mm256_cvtepi32_pd(_mm256_castsi256_si128(ni));
      n1 = _mm256_cvtepi32_pd(_mm256_extracti128_si256(ni, 1));
      b0 = _mm256_cvtepi32_pd(_mm256_castsi256_si128(bi));
      b1 = _mm256_cvtepi32_pd(_mm256_extracti128_si256(bi, 1));
    }
    dot0 = _mm256_add_pd(dot0, _mm256_mul_pd(n0, b0));
    dot1 = _mm256_add_pd(dot1, _mm256_mul_pd(n1, b1));
    nn0 = _mm256_add_pd(nn0, _mm256_mul_pd(n0, n0));
    nn1 = _mm256_add_pd(nn1, _mm256_mul_pd(n1, n1));
    bb0 = _mm256_add_pd(bb0, _mm256_mul_pd(b0, b0));
    bb1 = _mm256_add_pd(bb1, _mm256_mul_pd(b1, b1));
    const __m256d d0 = _mm256_sub_pd(n0, b0), d1 = _mm256_sub_pd(n1, b1);
    euc0 = _mm256_add_pd(euc0, _mm256_mul_pd(d0, d0));
    euc1 = _mm256_add_pd(euc1, _mm256_mul_pd(d1, d1));
    max_abs = _mm256_max_pd(_mm256_max_pd(_mm256_and_pd(d0, abs_mask_d),
                                          _mm256_and_pd(d1, abs_mask_d)),
                            max_abs);
    if (IsF32Kind(K) || K == Kind::kBF16) {
      // eps where bench == 0 (0 + eps == eps; x + 0 == x), then |(n' - b') / b'|; finite inputs
      // give NaN only with eps on the NPU side alone (n' == 0 over b' == 0).
      const __m256 e = _mm256_and_ps(_mm256_cmp_ps(bf, _mm256_setzero_ps(), _CMP_EQ_OQ), epsf);
      const __m256 bq = EpsOnBench(K) ? _mm256_add_ps(bf, e) : bf;
      const __m256 nq = EpsOnNpu(K) ? _mm256_add_ps(nf, e) : nf;
      const __m256 re = _mm256_and_ps(_mm256_div_ps(_mm256_sub_ps(nq, bq), bq), abs_mask_f);
      if (!EpsOnBench(K)) nan_f = _mm256_or_ps(nan_f, _mm256_cmp_ps(re, re, _CMP_UNORD_Q));
      max_re_f = _mm256_max_ps(re, max_re_f);
      c1v = _mm256_sub_epi32(c1v, _mm256_castps_si256(_mm256_cmp_ps(re, t1f, _CMP_LT_OQ)));
      c5v = _mm256_sub_epi32(c5v, _mm256_castps_si256(_mm256_cmp_ps(re, t5f, _CMP_LT_OQ)));
    } else if (K == Kind::kF16) {
      // The quotient unrounded (see HalfLtBound); |x| rounds like x.
      const __m256 dh = RoundHalf8(_mm256_sub_ps(nf, bf));
      const __m256 re = _mm256_and_ps(_mm256_div_ps(dh, bf), abs_mask_f);
      nan_f = _mm256_or_ps(nan_f, _mm256_cmp_ps(re, re, _CMP_UNORD_Q));  // 0/0 when bench == 0
      max_re_f = _mm256_max_ps(re, max_re_f);
      c1v = _mm256_sub_epi32(c1v, _mm256_castps_si256(_mm256_cmp_ps(re, t1h, _CMP_LT_OQ)));
      c5v = _mm256_sub_epi32(c5v, _mm256_castps_si256(_mm256_cmp_ps(re, t5h, _CMP_LT_OQ)));
    } else {
      const __m256d z0 = _mm256_cmp_pd(b0, _mm256_setzero_pd(), _CMP_EQ_OQ);
      const __m256d z1 = _mm256_cmp_pd(b1, _mm256_setzero_pd(), _CMP_EQ_OQ);
      const __m256d e0 = _mm256_and_pd(z0, epsd), e1 = _mm256_and_pd(z1, epsd);
      const __m256d bq0 = _mm256_add_pd(b0, e0), bq1 = _mm256_add_pd(b1, e1);
      __m256d nq0 = _mm256_add_pd(n0, e0), nq1 = _mm256_add_pd(n1, e1);
      if (K == Kind::kF64EpsNpuF32) {  // the NPU side's eps in float32 arithmetic
        const __m128 ef = _mm_set1_ps(static_cast<float>(kEps));
        nq0 = _mm256_blendv_pd(n0, _mm256_cvtps_pd(_mm_add_ps(_mm256_cvtpd_ps(n0), ef)), z0);
        nq1 = _mm256_blendv_pd(n1, _mm256_cvtps_pd(_mm_add_ps(_mm256_cvtpd_ps(n1), ef)), z1);
      }
      const __m256d re0 = _mm256_and_pd(_mm256_div_pd(_mm256_sub_pd(nq0, bq0), bq0), abs_mask_d);
      const __m256d re1 = _mm256_and_pd(_mm256_div_pd(_mm256_sub_pd(nq1, bq1), bq1), abs_mask_d);
      // Never NaN for integers or finite float64 (non-finite input is the caller's case).
      max_re_d = _mm256_max_pd(_mm256_max_pd(re0, re1), max_re_d);
      // Two 4 x 64-bit masks packed to one 8 x 32-bit count step.
      const __m256i m1 = _mm256_castps_si256(_mm256_blend_ps(
          _mm256_castpd_ps(_mm256_cmp_pd(re0, t1d, _CMP_LT_OQ)),
          _mm256_castpd_ps(_mm256_cmp_pd(re1, t1d, _CMP_LT_OQ)), 0xaa));
      const __m256i m5 = _mm256_castps_si256(_mm256_blend_ps(
          _mm256_castpd_ps(_mm256_cmp_pd(re0, t5d, _CMP_LT_OQ)),
          _mm256_castpd_ps(_mm256_cmp_pd(re1, t5d, _CMP_LT_OQ)), 0xaa));
      c1v = _mm256_sub_epi32(c1v, m1);
      c5v = _mm256_sub_epi32(c5v, m5);
    }
  }
  // Lane counts are at most kBlock / 8 each: no overflow.
  alignas(32) int32_t counts[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(counts), c1v);
  for (int32_t v : counts) c1 += v;
  _mm256_store_si256(reinterpret_cast<__m256i*>(counts), c5v);
  for (int32_t v : counts) c5 += v;
  alignas(32) double lanes[4];
  AddLanes(dot0, dot1, a->dot);
  AddLanes(nn0, nn1, a->nn);
  AddLanes(bb0, bb1, a->bb);
  AddLanes(euc0, euc1, a->euc);
  _mm256_store_pd(lanes, max_abs);
  for (double v : lanes) a->max_abs = std::max(a->max_abs, v);
  _mm256_store_pd(lanes, max_re_d);
  for (double v : lanes) a->max_re = std::max(a->max_re, v);
  alignas(32) float fl[8];
  _mm256_store_ps(fl, max_re_f);
  float max_f = -1;
  for (float v : fl) max_f = std::max(max_f, v);
  if (K == Kind::kF16) max_f = RoundToHalf(max_f);
  a->max_re = std::max(a->max_re, static_cast<double>(max_f));
  if (_mm256_movemask_ps(nan_f) != 0) a->re_nan = true;
  a->c1 += c1;
  a->c5 += c5;
  for (int64_t i = vec; i < count; ++i) {
    ScalarElement<K>(LoadScalar<K>(np, begin + i), LoadScalar<K>(bp, begin + i),
                     static_cast<int>(i & 7), t1, t5, a);
  }
}

// ---- AVX-512 (F, DQ, BW): 16 elements per step; lane l of the float64 accumulators receives
// element l of the low half, then element l of the high half, the portable order. ----

template <Kind K>
PARITY_AVX512 inline __m512 LoadF16x(const char* p, int64_t i) {
  if (IsF32Kind(K)) return _mm512_loadu_ps(reinterpret_cast<const float*>(p) + i);
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i));
  if (K == Kind::kF16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));  // bf16
}

template <Kind K>
PARITY_AVX512 inline __m512i LoadI16x(const char* p, int64_t i) {
  switch (K) {
    case Kind::kBool:
      return _mm512_min_epu32(
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i))),
          _mm512_set1_epi32(1));
    case Kind::kU8:
      return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)));
    case Kind::kI8:
      return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)));
    case Kind::kI16:
      return _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i)));
    case Kind::kU16:
      return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i)));
    default:
      return _mm512_loadu_si512(p + 4 * i);
  }
}

template <Kind K>
PARITY_AVX512 inline __m512d Int64ToF64x8(const char* p) {
  const __m512i x = _mm512_loadu_si512(p);
  return K == Kind::kU64 ? _mm512_cvtepu64_pd(x) : _mm512_cvtepi64_pd(x);
}

PARITY_AVX512 inline __m512 RoundHalf16x(__m512 x) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// |(n + e - (b + e)) / (b + e)| with e = eps where b == 0, in double; with `npu_eps_f32`, n + e
// in float32 arithmetic (n a float32 value).
template <bool npu_eps_f32 = false>
PARITY_AVX512 inline __m512d RelErrF64x8(__m512d n, __m512d b, __m512d eps) {
  const __mmask8 z = _mm512_cmp_pd_mask(b, _mm512_setzero_pd(), _CMP_EQ_OQ);
  const __m512d bq = _mm512_mask_add_pd(b, z, b, eps);
  __m512d nq;
  if constexpr (npu_eps_f32) {
    const __m256 nf = _mm512_cvtpd_ps(n);
    nq = _mm512_mask_mov_pd(n, z, _mm512_cvtps_pd(_mm256_add_ps(nf, _mm256_set1_ps(static_cast<float>(kEps)))));
  } else {
    nq = _mm512_mask_add_pd(n, z, n, eps);
  }
  return _mm512_abs_pd(_mm512_div_pd(_mm512_sub_pd(nq, bq), bq));
}

template <Kind K>
PARITY_AVX512 void BlockAvx512(const char* np, const char* bp, int64_t begin, int64_t count,
                               double t1, double t5, float t1_half, float t5_half, Acc* a) {
  __m512d dot = _mm512_setzero_pd(), nn = dot, bb = dot, euc = dot;
  __m512d max_abs = _mm512_set1_pd(-1), max_re_d = max_abs;
  __m512 max_re_f = _mm512_set1_ps(-1);
  __mmask16 nan_k = 0;
  const __m512 t1f = _mm512_set1_ps(static_cast<float>(t1)), t5f = _mm512_set1_ps(static_cast<float>(t5));
  const __m512d t1d = _mm512_set1_pd(t1), t5d = _mm512_set1_pd(t5);
  const __m512 t1h = _mm512_set1_ps(t1_half), t5h = _mm512_set1_ps(t5_half);
  const __m512 epsf = _mm512_set1_ps(static_cast<float>(kEps));
  const __m512d epsd = _mm512_set1_pd(kEps);
  int64_t c1 = 0, c5 = 0;
  const int64_t vec = count & ~int64_t{15};
  for (int64_t i = 0; i < vec; i += 16) {
    __m512d n0, n1, b0, b1;
    __m512 nf = _mm512_setzero_ps(), bf = _mm512_setzero_ps();
    if (IsF64Kind(K)) {
      const double* nd = reinterpret_cast<const double*>(np) + begin + i;
      const double* bd = reinterpret_cast<const double*>(bp) + begin + i;
      n0 = _mm512_loadu_pd(nd);
      n1 = _mm512_loadu_pd(nd + 8);
      b0 = _mm512_loadu_pd(bd);
      b1 = _mm512_loadu_pd(bd + 8);
    } else if (K == Kind::kI64 || K == Kind::kU64) {
      // Cast to float64 first (vcvtqq2pd / vcvtuqq2pd round as static_cast).
      const char* ni = np + 8 * (begin + i);
      const char* bi = bp + 8 * (begin + i);
      n0 = Int64ToF64x8<K>(ni);
      n1 = Int64ToF64x8<K>(ni + 64);
      b0 = Int64ToF64x8<K>(bi);
      b1 = Int64ToF64x8<K>(bi + 64);
    } else if (K == Kind::kU32) {
      const __m512i ni = _mm512_loadu_si512(np + 4 * (begin + i));
      const __m512i bi = _mm512_loadu_si512(bp + 4 * (begin + i));
      n0 = _mm512_cvtepu32_pd(_mm512_castsi512_si256(ni));
      n1 = _mm512_cvtepu32_pd(_mm512_extracti64x4_epi64(ni, 1));
      b0 = _mm512_cvtepu32_pd(_mm512_castsi512_si256(bi));
      b1 = _mm512_cvtepu32_pd(_mm512_extracti64x4_epi64(bi, 1));
    } else if (IsFloatKind(K)) {
      nf = LoadF16x<K>(np, begin + i);
      bf = LoadF16x<K>(bp, begin + i);
      n0 = _mm512_cvtps_pd(_mm512_castps512_ps256(nf));
      n1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(nf), 1)));
      b0 = _mm512_cvtps_pd(_mm512_castps512_ps256(bf));
      b1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(bf), 1)));
    } else {
      const __m512i ni = LoadI16x<K>(np, begin + i), bi = LoadI16x<K>(bp, begin + i);
      n0 = _mm512_cvtepi32_pd(_mm512_castsi512_si256(ni));
      n1 = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(ni, 1));
      b0 = _mm512_cvtepi32_pd(_mm512_castsi512_si256(bi));
      b1 = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(bi, 1));
    }
    dot = _mm512_add_pd(_mm512_add_pd(dot, _mm512_mul_pd(n0, b0)), _mm512_mul_pd(n1, b1));
    nn = _mm512_add_pd(_mm512_add_pd(nn, _mm512_mul_pd(n0, n0)), _mm512_mul_pd(n1, n1));
    bb = _mm512_add_pd(_mm512_add_pd(bb, _mm512_mul_pd(b0, b0)), _mm512_mul_pd(b1, b1));
    const __m512d d0 = _mm512_sub_pd(n0, b0), d1 = _mm512_sub_pd(n1, b1);
    euc = _mm512_add_pd(_mm512_add_pd(euc, _mm512_mul_pd(d0, d0)), _mm512_mul_pd(d1, d1));
    max_abs = _mm512_max_pd(_mm512_max_pd(_mm512_abs_pd(d0), _mm512_abs_pd(d1)), max_abs);
    if (IsF32Kind(K) || K == Kind::kBF16) {
      const __mmask16 z = _mm512_cmp_ps_mask(bf, _mm512_setzero_ps(), _CMP_EQ_OQ);
      const __m512 bq = EpsOnBench(K) ? _mm512_mask_add_ps(bf, z, bf, epsf) : bf;
      const __m512 nq = EpsOnNpu(K) ? _mm512_mask_add_ps(nf, z, nf, epsf) : nf;
      const __m512 re = _mm512_abs_ps(_mm512_div_ps(_mm512_sub_ps(nq, bq), bq));
      if (!EpsOnBench(K)) nan_k |= _mm512_cmp_ps_mask(re, re, _CMP_UNORD_Q);
      max_re_f = _mm512_max_ps(re, max_re_f);
      c1 += __builtin_popcount(_mm512_cmp_ps_mask(re, t1f, _CMP_LT_OQ));
      c5 += __builtin_popcount(_mm512_cmp_ps_mask(re, t5f, _CMP_LT_OQ));
    } else if (K == Kind::kF16) {
      // The quotient unrounded (see HalfLtBound); |x| rounds like x.
      const __m512 dh = RoundHalf16x(_mm512_sub_ps(nf, bf));
      const __m512 re = _mm512_abs_ps(_mm512_div_ps(dh, bf));
      nan_k |= _mm512_cmp_ps_mask(re, re, _CMP_UNORD_Q);
      max_re_f = _mm512_max_ps(re, max_re_f);
      c1 += __builtin_popcount(_mm512_cmp_ps_mask(re, t1h, _CMP_LT_OQ));
      c5 += __builtin_popcount(_mm512_cmp_ps_mask(re, t5h, _CMP_LT_OQ));
    } else {
      constexpr bool kNpuF32 = K == Kind::kF64EpsNpuF32;
      const __m512d re0 = RelErrF64x8<kNpuF32>(n0, b0, epsd), re1 = RelErrF64x8<kNpuF32>(n1, b1, epsd);
      max_re_d = _mm512_max_pd(_mm512_max_pd(re0, re1), max_re_d);
      c1 += __builtin_popcount(_mm512_cmp_pd_mask(re0, t1d, _CMP_LT_OQ) |
                               (_mm512_cmp_pd_mask(re1, t1d, _CMP_LT_OQ) << 8));
      c5 += __builtin_popcount(_mm512_cmp_pd_mask(re0, t5d, _CMP_LT_OQ) |
                               (_mm512_cmp_pd_mask(re1, t5d, _CMP_LT_OQ) << 8));
    }
  }
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, dot);
  for (int j = 0; j < 8; ++j) a->dot[j] += lanes[j];
  _mm512_store_pd(lanes, nn);
  for (int j = 0; j < 8; ++j) a->nn[j] += lanes[j];
  _mm512_store_pd(lanes, bb);
  for (int j = 0; j < 8; ++j) a->bb[j] += lanes[j];
  _mm512_store_pd(lanes, euc);
  for (int j = 0; j < 8; ++j) a->euc[j] += lanes[j];
  a->max_abs = std::max(a->max_abs, _mm512_reduce_max_pd(max_abs));
  a->max_re = std::max(a->max_re, _mm512_reduce_max_pd(max_re_d));
  const float max_f = _mm512_reduce_max_ps(max_re_f);
  a->max_re = std::max(a->max_re, static_cast<double>(K == Kind::kF16 ? RoundToHalf(max_f) : max_f));
  if (nan_k != 0) a->re_nan = true;
  a->c1 += c1;
  a->c5 += c5;
  for (int64_t i = vec; i < count; ++i) {
    ScalarElement<K>(LoadScalar<K>(np, begin + i), LoadScalar<K>(bp, begin + i),
                     static_cast<int>(i & 7), t1, t5, a);
  }
}

enum class Isa { kPortable, kAvx2, kAvx512 };

Isa SelectedIsa() {
  static const Isa isa = [] {
    const char* force = std::getenv("PARITY_KERNEL");
    __builtin_cpu_init();
#if defined(__clang__)
    // clang 14 cannot ask for F16C here; every AVX2 processor has it.
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
#else
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
                      __builtin_cpu_supports("popcnt");
#endif
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl");
    if (force != nullptr && std::strcmp(force, "portable") == 0) return Isa::kPortable;
    if (force != nullptr && std::strcmp(force, "avx2") == 0 && avx2) return Isa::kAvx2;
    if (avx512) return Isa::kAvx512;
    return avx2 ? Isa::kAvx2 : Isa::kPortable;
  }();
  return isa;
}

// A block's accumulators into the partial of the range it continues.
inline void AddBlock(const Acc& a, MsprobePartial* p) {
  for (int l = 0; l < 8; ++l) {
    p->dot[l] += a.dot[l];
    p->nn[l] += a.nn[l];
    p->bb[l] += a.bb[l];
    p->euc[l] += a.euc[l];
  }
  p->max_abs = std::max(p->max_abs, a.max_abs);
  p->max_re = std::max(p->max_re, a.max_re);
  p->re_nan = p->re_nan || a.re_nan;
  p->c1 += a.c1;
  p->c5 += a.c5;
}

// An inf or nan anywhere shows in the squares' lane sums.
inline void CheckLanes(MsprobePartial* p) {
  for (int l = 0; l < 8; ++l) {
    if (!std::isfinite(p->nn[l]) || !std::isfinite(p->bb[l])) p->nonfinite = true;
  }
}

template <Kind K>
void Run(Isa isa, const char* np, const char* bp, int64_t begin, int64_t count, double t1,
         double t5, MsprobePartial* p) {
  // Computed here, in plain code: called from the vector functions it would cost an SSE/AVX
  // transition per block (measured: 9 % of an fp16 run).
  const float t1_half = K == Kind::kF16 ? HalfLtBound(static_cast<float>(t1)) : 0.0f;
  const float t5_half = K == Kind::kF16 ? HalfLtBound(static_cast<float>(t5)) : 0.0f;
  for (int64_t s = 0; s < count; s += kBlock) {
    const int64_t k = std::min(kBlock, count - s);
    Acc a;
    if (isa == Isa::kAvx512) {
      BlockAvx512<K>(np, bp, begin + s, k, t1, t5, t1_half, t5_half, &a);
    } else if (isa == Isa::kAvx2) {
      BlockAvx2<K>(np, bp, begin + s, k, t1, t5, t1_half, t5_half, &a);
    } else {
      BlockPortable<K>(np, bp, begin + s, k, t1, t5, &a);
    }
    AddBlock(a, p);
  }
  CheckLanes(p);
}

// Whether a dtype loads as float32 in msprobe (read_pt_data widens bf16 and fp8 to it), so that
// two tensors of such dtypes compare as a float32 pair of their exactly widened values.
bool LoadsAsFloat32(DType t) {
  return t == DType::kFloat32 || t == DType::kBFloat16 || t == DType::kFloat8E4M3FN ||
         t == DType::kFloat8E5M2;
}

// Elements [begin, begin + k) of an array of dtype `t` (LoadsAsFloat32, or float16) as float32:
// the array itself for float32, else widened exactly into `out`.
const char* WidenToFloat32(Isa isa, DType t, const char* p, int64_t begin, int64_t k, float* out) {
  const simd::Isa widen = isa == Isa::kAvx512 ? simd::Isa::kAvx512
                          : isa == Isa::kAvx2 ? simd::Isa::kAvx2
                                              : simd::Isa::kPortable;
  return reinterpret_cast<const char*>(simd::WidenToFloat32(widen, t, p + DTypeSize(t) * begin, k, out));
}

// Zeroes the positions of n and b (floats of `Bits`' width: exponent mask kExp, mantissa mask
// kMant) where either is inf or NaN; true when the two sides' inf positions or NaN positions
// differ.
template <typename Bits, Bits kExp, Bits kMant>
bool ZeroSpecialBits(Bits* n, Bits* b, int64_t k) {
  // On the bits, without branches: special = exponent all ones (inf or NaN), NaN = special with a
  // mantissa. The masks differ where exactly one side is special or exactly one is NaN.
  Bits mismatch = 0;
  for (int64_t i = 0; i < k; ++i) {
    Bits un = n[i], ub = b[i];
    const Bits sn = (un & kExp) == kExp, sb = (ub & kExp) == kExp;
    const Bits nan_n = sn & ((un & kMant) != 0), nan_b = sb & ((ub & kMant) != 0);
    mismatch |= (sn ^ sb) | (nan_n ^ nan_b);
    const Bits keep = static_cast<Bits>((sn | sb) - 1u);  // all ones where neither is special
    n[i] = static_cast<Bits>(un & keep);
    b[i] = static_cast<Bits>(ub & keep);
  }
  return mismatch != 0;
}

// ZeroSpecialBits with AVX2, 256 bits at a time (the same masks per element, 64-, 32- or 16-bit
// lanes); the rest of the block as ZeroSpecialBits.
template <typename Bits>
PARITY_AVX2 inline __m256i Set1Bits(Bits v) {
  if constexpr (sizeof(Bits) == 8) {
    return _mm256_set1_epi64x(static_cast<int64_t>(v));
  } else if constexpr (sizeof(Bits) == 4) {
    return _mm256_set1_epi32(static_cast<int32_t>(v));
  } else {
    return _mm256_set1_epi16(static_cast<int16_t>(v));
  }
}

template <typename Bits>
PARITY_AVX2 inline __m256i EqBits(__m256i x, __m256i y) {
  if constexpr (sizeof(Bits) == 8) {
    return _mm256_cmpeq_epi64(x, y);
  } else if constexpr (sizeof(Bits) == 4) {
    return _mm256_cmpeq_epi32(x, y);
  } else {
    return _mm256_cmpeq_epi16(x, y);
  }
}

template <typename Bits, Bits kExp, Bits kMant>
PARITY_AVX2 bool ZeroSpecialAvx2(Bits* n, Bits* b, int64_t k) {
  static_assert(sizeof(Bits) == 8 || sizeof(Bits) == 4 || sizeof(Bits) == 2, "float64, float32 or float16 bits");
  const __m256i exp = Set1Bits<Bits>(kExp), mant = Set1Bits<Bits>(kMant), zero = _mm256_setzero_si256();
  __m256i mismatch = zero;
  constexpr int64_t kLanes = 32 / static_cast<int64_t>(sizeof(Bits));
  int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes) {
    const __m256i un = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(n + i));
    const __m256i ub = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256i sn = EqBits<Bits>(_mm256_and_si256(un, exp), exp), sb = EqBits<Bits>(_mm256_and_si256(ub, exp), exp);
    // NaN: special and a mantissa (andnot: mantissa == 0 is not NaN).
    const __m256i nan_n = _mm256_andnot_si256(EqBits<Bits>(_mm256_and_si256(un, mant), zero), sn);
    const __m256i nan_b = _mm256_andnot_si256(EqBits<Bits>(_mm256_and_si256(ub, mant), zero), sb);
    mismatch = _mm256_or_si256(mismatch, _mm256_or_si256(_mm256_xor_si256(sn, sb), _mm256_xor_si256(nan_n, nan_b)));
    const __m256i special = _mm256_or_si256(sn, sb);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(n + i), _mm256_andnot_si256(special, un));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b + i), _mm256_andnot_si256(special, ub));
  }
  const bool tail = ZeroSpecialBits<Bits, kExp, kMant>(n + i, b + i, k - i);
  return !_mm256_testz_si256(mismatch, mismatch) || tail;
}

template <typename Bits, Bits kExp, Bits kMant>
bool ZeroSpecialOn(Isa isa, Bits* n, Bits* b, int64_t k) {
  return isa == Isa::kPortable ? ZeroSpecialBits<Bits, kExp, kMant>(n, b, k) : ZeroSpecialAvx2<Bits, kExp, kMant>(n, b, k);
}

bool ZeroSpecial(Isa isa, float* n, float* b, int64_t k) {
  static_assert(sizeof(float) == sizeof(uint32_t), "float32");
  return ZeroSpecialOn<uint32_t, 0x7f800000u, 0x007fffffu>(isa, reinterpret_cast<uint32_t*>(n),
                                                            reinterpret_cast<uint32_t*>(b), k);
}

// A float16 pair (the same dtype on both sides) with msprobe's handle_inf_nan: each block of each
// side copied to an L1 buffer, the positions where either is inf or NaN zeroed on both, then the
// float16 block kernel (its relative error in float16 arithmetic), as Run<kF16> runs it.
void RunHalfZeroingSpecial(Isa isa, const char* np, const char* bp, int64_t begin, int64_t count, double t1,
                           double t5, MsprobePartial* p) {
  const float t1_half = HalfLtBound(static_cast<float>(t1)), t5_half = HalfLtBound(static_cast<float>(t5));
  for (int64_t s = 0; s < count; s += kBlock) {
    const int64_t k = std::min(kBlock, count - s);
    uint16_t nh[kBlock], bh[kBlock];
    std::memcpy(nh, np + 2 * (begin + s), static_cast<size_t>(k) * 2);
    std::memcpy(bh, bp + 2 * (begin + s), static_cast<size_t>(k) * 2);
    p->special_mismatch = ZeroSpecialOn<uint16_t, 0x7c00, 0x03ff>(isa, nh, bh, k) || p->special_mismatch;
    const char* n16 = reinterpret_cast<const char*>(nh);
    const char* b16 = reinterpret_cast<const char*>(bh);
    Acc a;
    if (isa == Isa::kAvx512) {
      BlockAvx512<Kind::kF16>(n16, b16, 0, k, t1, t5, t1_half, t5_half, &a);
    } else if (isa == Isa::kAvx2) {
      BlockAvx2<Kind::kF16>(n16, b16, 0, k, t1, t5, t1_half, t5_half, &a);
    } else {
      BlockPortable<Kind::kF16>(n16, b16, 0, k, t1, t5, &a);
    }
    AddBlock(a, p);
  }
  CheckLanes(p);
}

// One block of float32 values (widened) with kind K's relative error.
template <Kind K>
void WidenedBlock(Isa isa, const char* n32, const char* b32, int64_t k, double t1, double t5, Acc* a) {
  if (isa == Isa::kAvx512) {
    BlockAvx512<K>(n32, b32, 0, k, t1, t5, 0.0f, 0.0f, a);
  } else if (isa == Isa::kAvx2) {
    BlockAvx2<K>(n32, b32, 0, k, t1, t5, 0.0f, 0.0f, a);
  } else {
    BlockPortable<K>(n32, b32, 0, k, t1, t5, a);
  }
}

// Two dtypes that both load as float32 (float32 against bfloat16, fp8 against itself), or float16
// against one of those (its relative error's eps on the other side only, kF32EpsBench /
// kF32EpsNpu; float16 values are exact in float32 and the promoted arithmetic is float32): each block
// of each side widened to float32 in a buffer that stays in L1, then the float32 block kernel.
// The results are the float32 pair's of the widened values, which is what msprobe compares.
// With `zero_special`, msprobe's handle_inf_nan on each block: where either value is inf or NaN
// both count as 0, and p->special_mismatch is set where the two sides' inf or NaN positions
// differ.
void RunWidened(Isa isa, DType tn, DType tb, const char* np, const char* bp, int64_t begin, int64_t count,
                double t1, double t5, MsprobePartial* p, bool zero_special = false) {
  for (int64_t s = 0; s < count; s += kBlock) {
    const int64_t k = std::min(kBlock, count - s);
    float nf[kBlock], bf[kBlock];
    const char* n32 = WidenToFloat32(isa, tn, np, begin + s, k, nf);
    const char* b32 = WidenToFloat32(isa, tb, bp, begin + s, k, bf);
    if (zero_special) {
      if (n32 != reinterpret_cast<const char*>(nf)) std::memcpy(nf, n32, static_cast<size_t>(k) * 4);
      if (b32 != reinterpret_cast<const char*>(bf)) std::memcpy(bf, b32, static_cast<size_t>(k) * 4);
      n32 = reinterpret_cast<const char*>(nf);
      b32 = reinterpret_cast<const char*>(bf);
      p->special_mismatch = ZeroSpecial(isa, nf, bf, k) || p->special_mismatch;
    }
    Acc a;
    if (tn == DType::kFloat16) {
      WidenedBlock<Kind::kF32EpsBench>(isa, n32, b32, k, t1, t5, &a);
    } else if (tb == DType::kFloat16) {
      WidenedBlock<Kind::kF32EpsNpu>(isa, n32, b32, k, t1, t5, &a);
    } else {
      WidenedBlock<Kind::kF32>(isa, n32, b32, k, t1, t5, &a);
    }
    AddBlock(a, p);
  }
  CheckLanes(p);
}

// Elements [begin, begin + k) of an array of dtype `t` (float64, or one that loads as float32) as
// float64: the array itself for float64, else widened exactly into `out` (through `tmp`).
const char* WidenToFloat64(Isa isa, DType t, const char* p, int64_t begin, int64_t k, float* tmp, double* out) {
  if (t == DType::kFloat64) return p + 8 * begin;
  if (!IsFloating(t)) {  // integers and bool, as msprobe casts them: to float64
    ElementsToDouble(t, p, begin, k, out);
    return reinterpret_cast<const char*>(out);
  }
  const float* f = reinterpret_cast<const float*>(WidenToFloat32(isa, t, p, begin, k, tmp));
  for (int64_t i = 0; i < k; ++i) out[i] = f[i];
  return reinterpret_cast<const char*>(out);
}

// float64 or an integer dtype against a dtype that loads as float32 (float32, bfloat16, fp8), float64
// or another integer dtype: each side's blocks widened to float64 in L1 (integers as msprobe casts
// them), then the float64 block kernel (msprobe's arithmetic for the pair is float64); with a side
// that loads as float32 as the NPU's, its eps added in float32 (kF64EpsNpuF32).
// With `zero_special` (float64 against float64 too), msprobe's handle_inf_nan on each block as
// RunWidened applies it, on the blocks copied to L1 as float64.
void RunWidened64(Isa isa, DType tn, DType tb, const char* np, const char* bp, int64_t begin, int64_t count,
                  double t1, double t5, MsprobePartial* p, bool zero_special = false) {
  for (int64_t s = 0; s < count; s += kBlock) {
    const int64_t k = std::min(kBlock, count - s);
    float tmp[kBlock];
    double nd[kBlock], bd[kBlock];
    const char* n64 = WidenToFloat64(isa, tn, np, begin + s, k, tmp, nd);
    const char* b64 = WidenToFloat64(isa, tb, bp, begin + s, k, tmp, bd);
    if (zero_special) {
      if (n64 != reinterpret_cast<const char*>(nd)) std::memcpy(nd, n64, static_cast<size_t>(k) * 8);
      if (b64 != reinterpret_cast<const char*>(bd)) std::memcpy(bd, b64, static_cast<size_t>(k) * 8);
      n64 = reinterpret_cast<const char*>(nd);
      b64 = reinterpret_cast<const char*>(bd);
      p->special_mismatch = ZeroSpecialOn<uint64_t, 0x7ff0000000000000ull, 0x000fffffffffffffull>(
                                isa, reinterpret_cast<uint64_t*>(nd), reinterpret_cast<uint64_t*>(bd), k) ||
                            p->special_mismatch;
    }
    Acc a;
    if (LoadsAsFloat32(tn)) {
      WidenedBlock<Kind::kF64EpsNpuF32>(isa, n64, b64, k, t1, t5, &a);
    } else {
      WidenedBlock<Kind::kF64>(isa, n64, b64, k, t1, t5, &a);
    }
    AddBlock(a, p);
  }
  CheckLanes(p);
}

double Tree(const double* l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

}  // namespace

void MsprobePartial::Merge(const MsprobePartial& o) {
  for (int l = 0; l < 8; ++l) {
    dot[l] += o.dot[l];
    nn[l] += o.nn[l];
    bb[l] += o.bb[l];
    euc[l] += o.euc[l];
  }
  max_abs = std::max(max_abs, o.max_abs);
  max_re = std::max(max_re, o.max_re);
  re_nan = re_nan || o.re_nan;
  nonfinite = nonfinite || o.nonfinite;
  special_mismatch = special_mismatch || o.special_mismatch;
  c1 += o.c1;
  c5 += o.c5;
}

double MsprobePartial::Dot() const { return Tree(dot); }
double MsprobePartial::NN() const { return Tree(nn); }
double MsprobePartial::BB() const { return Tree(bb); }
double MsprobePartial::Euc() const { return Tree(euc); }

bool MsprobeKernelSupports(DType t) {
  Kind k;
  return KindOf(t, &k);
}

const char* MsprobeKernelIsa() {
  switch (SelectedIsa()) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    case Isa::kPortable: break;
  }
  return "portable";
}

namespace {
// Two different dtypes the widened float32 pass takes: both load as float32, or one is float16
// and the other loads as float32.
bool WidenedPair(DType npu, DType bench) {
  if (npu == bench) return false;
  const bool n = LoadsAsFloat32(npu) || npu == DType::kFloat16, b = LoadsAsFloat32(bench) || bench == DType::kFloat16;
  return n && b;
}
// Two different dtypes whose relative error msprobe computes in float64, neither float16 (whose eps
// rounds to 0): float64 or an integer dtype (cast to float64) on one side, float64, an integer
// dtype or one loading as float32 on the other. The widened float64 pass.
bool Widened64Pair(DType npu, DType bench) {
  auto f64 = [](DType t) { return t == DType::kFloat64 || !IsFloating(t); };
  auto side = [&](DType t) { return f64(t) || LoadsAsFloat32(t); };
  return npu != bench && side(npu) && side(bench) && (f64(npu) || f64(bench));
}
}  // namespace

bool MsprobeKernelSupports(DType npu, DType bench) {
  return npu == bench ? MsprobeKernelSupports(npu) : WidenedPair(npu, bench) || Widened64Pair(npu, bench);
}

namespace {
void KernelWith(Isa isa, DType t, DType tb, const char* npu, const char* bench, int64_t begin,
                int64_t count, double t1, double t5, MsprobePartial* p) {
  if (t != tb) {
    if (Widened64Pair(t, tb)) return RunWidened64(isa, t, tb, npu, bench, begin, count, t1, t5, p);
    if (!WidenedPair(t, tb)) std::abort();  // callers check MsprobeKernelSupports
    return RunWidened(isa, t, tb, npu, bench, begin, count, t1, t5, p);
  }
  Kind k;
  if (!KindOf(t, &k)) std::abort();  // contract: callers check MsprobeKernelSupports
  switch (k) {
    case Kind::kF32: return Run<Kind::kF32>(isa, npu, bench, begin, count, t1, t5, p);
    case Kind::kBF16: return Run<Kind::kBF16>(isa, npu, bench, begin, count, t1, t5, p);
    case Kind::kF16: return Run<Kind::kF16>(isa, npu, bench, begin, count, t1, t5, p);
    case Kind::kBool: return Run<Kind::kBool>(isa, npu, bench, begin, count, t1, t5, p);
    case Kind::kU8: return Run<Kind::kU8>(isa, npu, bench, begin, count, t1, t5, p);
    case Kind::kI8: return Run<Kind::kI8>(isa, npu, bench, begin, count, t1, t5, p);
    case Kind::kI16: return Run<Kind::kI16>(isa, npu, bench, begin, count, t1, t5, p);
    case Kind::kU16: return Run<Kind::kU16>(isa, npu, bench, begin, count, t1, t5, p);
    case Kind::kI32: return Run<Kind::kI32>(isa, npu, bench, begin, count, t1, t5, p);
    case Kind::kU32: return Run<Kind::kU32>(isa, npu, bench, begin, count, t1, t5, p);
    case Kind::kI64: return Run<Kind::kI64>(isa, npu, bench, begin, count, t1, t5, p);
    case Kind::kU64: return Run<Kind::kU64>(isa, npu, bench, begin, count, t1, t5, p);
    case Kind::kF64: return Run<Kind::kF64>(isa, npu, bench, begin, count, t1, t5, p);
    case Kind::kF8E4M3:
    case Kind::kF8E5M2:  // msprobe widens fp8 to float32 (as bf16): run as the widened float32 pair
      return RunWidened(isa, t, tb, npu, bench, begin, count, t1, t5, p);
    case Kind::kF32EpsBench:
    case Kind::kF32EpsNpu:
    case Kind::kF64EpsNpuF32:
      std::abort();  // kinds of widened pairs only, never of a dtype
  }
}
}  // namespace

void MsprobeKernel(DType t, const char* npu, const char* bench, int64_t begin, int64_t count,
                   double t1, double t5, MsprobePartial* p) {
  KernelWith(SelectedIsa(), t, t, npu, bench, begin, count, t1, t5, p);
}

void MsprobeKernel(DType npu_dtype, DType bench_dtype, const char* npu, const char* bench, int64_t begin,
                   int64_t count, double t1, double t5, MsprobePartial* p) {
  KernelWith(SelectedIsa(), npu_dtype, bench_dtype, npu, bench, begin, count, t1, t5, p);
}

bool MsprobeKernelForIsa(const std::string& isa, DType t, const char* npu, const char* bench,
                         int64_t begin, int64_t count, double t1, double t5, MsprobePartial* p) {
  return MsprobeKernelForIsa(isa, t, t, npu, bench, begin, count, t1, t5, p);
}

bool MsprobeKernelForIsa(const std::string& isa, DType npu_dtype, DType bench_dtype, const char* npu,
                         const char* bench, int64_t begin, int64_t count, double t1, double t5,
                         MsprobePartial* p) {
  const Isa best = SelectedIsa();
  Isa want;
  if (isa == "portable") {
    want = Isa::kPortable;
  } else if (isa == "avx2") {
    want = Isa::kAvx2;
  } else if (isa == "avx512") {
    want = Isa::kAvx512;
  } else {
    return false;
  }
  if (static_cast<int>(want) > static_cast<int>(best)) return false;
  KernelWith(want, npu_dtype, bench_dtype, npu, bench, begin, count, t1, t5, p);
  return true;
}

namespace {
std::atomic<int> g_kernel_threads{1};
std::atomic<int> g_pair_workers{0};  // ScopedPairWorkers alive
thread_local bool t_pair_worker = false;

// Runs fn(0..n-1) on up to `threads` threads (the caller is one of them), chunks taken in turn;
// one helper fewer for each pair worker other than the caller.
void RunOnThreads(int threads, int64_t n, const std::function<void(int64_t)>& fn) {
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t c = next++; c < n; c = next++) fn(c);
  };
  const int others = g_pair_workers.load(std::memory_order_relaxed) - (t_pair_worker ? 1 : 0);
  const int64_t helper_count =
      std::max<int64_t>(0, std::min<int64_t>(threads, n) - 1 - std::max(0, others));
  std::vector<std::thread> helpers;
  for (int64_t i = 0; i < helper_count; ++i) helpers.emplace_back(work);
  work();
  for (std::thread& h : helpers) h.join();
}
}  // namespace

void SetKernelThreads(int threads) { g_kernel_threads = std::max(1, threads); }
int KernelThreads() { return g_kernel_threads; }

ScopedPairWorker::ScopedPairWorker() {
  t_pair_worker = true;
  ++g_pair_workers;
}
ScopedPairWorker::~ScopedPairWorker() {
  --g_pair_workers;
  t_pair_worker = false;
}

namespace {
// SetKernelThreads' count as a ParallelFor when none is given; null for one thread.
ParallelFor ResolveParallelFor(const ParallelFor& explicit_parallel_for) {
  if (explicit_parallel_for) return explicit_parallel_for;
  const int threads = g_kernel_threads;
  if (threads <= 1) return nullptr;
  return [threads](int64_t n, const std::function<void(int64_t)>& fn) { RunOnThreads(threads, n, fn); };
}
}  // namespace

MsprobePartial MsprobeKernelRun(DType t, const char* npu, const char* bench, int64_t numel,
                                double t1, double t5, const ParallelFor& explicit_parallel_for) {
  return MsprobeKernelRun(t, t, npu, bench, numel, t1, t5, explicit_parallel_for);
}

namespace {
// A tensor of `numel` elements as fixed chunks, chunk(begin, count, part) filling each chunk's
// partial, merged in order; on one thread, the chunks after one that saw a non-finite value are
// skipped.
MsprobePartial RunChunks(int64_t numel, const ParallelFor& explicit_parallel_for,
                         const std::function<void(int64_t, int64_t, MsprobePartial*)>& chunk) {
  const int64_t chunks = (numel + kChunk - 1) / kChunk;
  const ParallelFor parallel_for = ResolveParallelFor(explicit_parallel_for);
  if (chunks <= 1 || !parallel_for) {
    MsprobePartial total;
    for (int64_t c = 0; c < chunks && !total.nonfinite; ++c) {
      MsprobePartial part;
      const int64_t s = c * kChunk;
      chunk(s, std::min(kChunk, numel - s), &part);
      total.Merge(part);
    }
    return total;
  }
  std::vector<MsprobePartial> parts(chunks);
  parallel_for(chunks, [&](int64_t c) {
    const int64_t s = c * kChunk;
    chunk(s, std::min(kChunk, numel - s), &parts[c]);
  });
  MsprobePartial total;
  for (const MsprobePartial& part : parts) total.Merge(part);
  return total;
}
}  // namespace

MsprobePartial MsprobeKernelRun(DType tn, DType tb, const char* npu, const char* bench, int64_t numel,
                                double t1, double t5, const ParallelFor& explicit_parallel_for) {
  return RunChunks(numel, explicit_parallel_for, [&](int64_t s, int64_t count, MsprobePartial* part) {
    MsprobeKernel(tn, tb, npu, bench, s, count, t1, t5, part);
  });
}

bool MsprobeKernelZeroesSpecial(DType npu, DType bench) {
  return (LoadsAsFloat32(npu) && LoadsAsFloat32(bench)) || WidenedPair(npu, bench) ||
         (npu == DType::kFloat16 && bench == DType::kFloat16) ||
         (npu == DType::kFloat64 && bench == DType::kFloat64) || Widened64Pair(npu, bench);
}

MsprobePartial MsprobeKernelRunZeroingSpecial(DType tn, DType tb, const char* npu, const char* bench,
                                              int64_t numel, double t1, double t5,
                                              const ParallelFor& explicit_parallel_for) {
  if (!MsprobeKernelZeroesSpecial(tn, tb)) std::abort();  // contract: callers check
  const Isa isa = SelectedIsa();
  return RunChunks(numel, explicit_parallel_for, [&](int64_t s, int64_t count, MsprobePartial* part) {
    if (tn == DType::kFloat16 && tb == DType::kFloat16) {
      RunHalfZeroingSpecial(isa, npu, bench, s, count, t1, t5, part);
    } else if ((tn == DType::kFloat64 && tb == DType::kFloat64) || Widened64Pair(tn, tb)) {
      RunWidened64(isa, tn, tb, npu, bench, s, count, t1, t5, part, /*zero_special=*/true);
    } else {
      RunWidened(isa, tn, tb, npu, bench, s, count, t1, t5, part, /*zero_special=*/true);
    }
  });
}

absl::StatusOr<MsprobePartial> MsprobeKernelRunPieces(DType t, int64_t numel, double t1, double t5,
                                                      const ReadPiece& read,
                                                      const ParallelFor& explicit_parallel_for) {
  return MsprobeKernelRunPieces(t, t, numel, t1, t5, read, explicit_parallel_for);
}

absl::StatusOr<MsprobePartial> MsprobeKernelRunPieces(DType tn, DType tb, int64_t numel, double t1, double t5,
                                                      const ReadPiece& read,
                                                      const ParallelFor& explicit_parallel_for) {
  const int64_t chunks = (numel + kChunk - 1) / kChunk;
  // Both sides' pieces fit their buffers: the wider element sets the count.
  const int64_t piece = static_cast<int64_t>(kMsprobePieceBytes / std::max(DTypeSize(tn), DTypeSize(tb)));
  static_assert(kChunk % (kMsprobePieceBytes / 8) == 0 && (kMsprobePieceBytes / 8) % kBlock == 0,
                "a piece of any element size is whole blocks and divides a chunk");
  // Chunk c into *part as MsprobeKernelRun computes it: its pieces are consecutive ranges of
  // whole blocks, accumulated into one partial in order.
  auto run_chunk = [&](int64_t c, MsprobePartial* part) -> absl::Status {
    // Per thread, reused: read and then passed over while still in cache.
    thread_local std::unique_ptr<char[]> buffers(new char[2 * kMsprobePieceBytes]);
    char* nb = buffers.get();
    char* bb = nb + kMsprobePieceBytes;
    const int64_t end = std::min(numel, (c + 1) * kChunk);
    for (int64_t b = c * kChunk; b < end && !part->nonfinite; b += piece) {
      const int64_t k = std::min(piece, end - b);
      absl::Status s = read(0, b, k, nb);
      if (s.ok()) s = read(1, b, k, bb);
      if (!s.ok()) return s;
      MsprobeKernel(tn, tb, nb, bb, 0, k, t1, t5, part);
    }
    return absl::OkStatus();
  };
  const ParallelFor parallel_for = ResolveParallelFor(explicit_parallel_for);
  MsprobePartial total;
  if (chunks <= 1 || !parallel_for) {
    for (int64_t c = 0; c < chunks && !total.nonfinite; ++c) {
      MsprobePartial part;
      absl::Status s = run_chunk(c, &part);
      if (!s.ok()) return s;
      total.Merge(part);
    }
    return total;
  }
  std::vector<MsprobePartial> parts(chunks);
  std::vector<absl::Status> status(chunks);
  parallel_for(chunks, [&](int64_t c) { status[c] = run_chunk(c, &parts[c]); });
  for (int64_t c = 0; c < chunks; ++c) {
    if (!status[c].ok()) return status[c];
    total.Merge(parts[c]);
  }
  return total;
}

}  // namespace parity
