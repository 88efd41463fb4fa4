#include "common/checks/torch_kernel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "common/checks/simd.h"

namespace parity {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

constexpr DType ToDType(TorchFormat f) {
  return f == TorchFormat::kF32 ? DType::kFloat32 : f == TorchFormat::kF16 ? DType::kFloat16 : DType::kBFloat16;
}

// ---- Portable ----------------------------------------------------------------------------------

template <TorchFormat F>
float LoadOne(const char* p, int64_t i) {
  if constexpr (F == TorchFormat::kF32) {
    float v;
    std::memcpy(&v, p + i * 4, 4);
    return v;
  } else {
    uint16_t h;
    std::memcpy(&h, p + i * 2, 2);
    return F == TorchFormat::kF16 ? HalfToFloat(h) : BFloat16ToFloat(h);
  }
}

template <TorchFormat F>
float RoundOne(float v) {
  return simd::RoundTo<ToDType(F)>(v);
}

// The header's d, rel and close of one finite pair.
struct One {
  float d, rel;
  bool close;
};

template <TorchFormat F>
One Evaluate(float a, float b, float rtol, float atol, bool tolerance) {
  One o;
  o.d = std::fabs(RoundOne<F>(a - b));
  const float allowed = RoundOne<F>(atol + std::fabs(RoundOne<F>(rtol * b)));
  o.close = a == b || (tolerance && o.d < kInf && o.d <= allowed);
  o.rel = o.d == 0 ? 0.0f : RoundOne<F>(o.d / std::fabs(b));
  return o;
}

template <TorchFormat F>
bool PortableBlock(const char* pa, const char* pb, int64_t count, float rtol, float atol,
                   bool tolerance, bool locate, TorchBlockSummary* out) {
  for (int64_t i = 0; i < count; ++i) {
    if (!(std::fabs(LoadOne<F>(pa, i)) < kInf) || !(std::fabs(LoadOne<F>(pb, i)) < kInf)) {
      return false;
    }
  }
  TorchBlockSummary s;
  for (int64_t i = 0; i < count; ++i) {
    const One o = Evaluate<F>(LoadOne<F>(pa, i), LoadOne<F>(pb, i), rtol, atol, tolerance);
    // Strictly greater: the first index of each maximum is kept.
    if (o.d > s.abs) { s.abs = o.d; s.abs_index = i; }
    if (o.rel > s.rel) { s.rel = o.rel; s.rel_index = i; }
    if (!o.close) {
      ++s.mismatches;
      if (o.d > s.gabs) { s.gabs = o.d; s.gabs_index = i; }
      if (o.rel > s.grel) { s.grel = o.rel; s.grel_index = i; }
    }
  }
  (void)locate;  // the element loop finds the indices at no extra cost
  *out = s;
  return true;
}

// ---- float64, portable ------------------------------------------------------------------------

constexpr double kInfD = std::numeric_limits<double>::infinity();

inline double LoadF64(const char* p, int64_t i) {
  double v;
  std::memcpy(&v, p + i * 8, 8);
  return v;
}

struct OneF64 {
  double d, rel;
  bool close;
};

// The element path's isclose in float64 (every rounding is the identity there).
inline OneF64 EvaluateF64(double a, double b, double rtol, double atol, bool tolerance) {
  OneF64 o;
  o.d = std::fabs(a - b);
  const double allowed = atol + std::fabs(rtol * b);
  o.close = a == b || (tolerance && o.d < kInfD && o.d <= allowed);
  o.rel = o.d == 0 ? 0.0 : o.d / std::fabs(b);
  return o;
}

bool PortableF64Block(const char* pa, const char* pb, int64_t count, double rtol, double atol,
                      bool tolerance, TorchBlockSummary* out) {
  for (int64_t i = 0; i < count; ++i) {
    if (!(std::fabs(LoadF64(pa, i)) < kInfD) || !(std::fabs(LoadF64(pb, i)) < kInfD)) return false;
  }
  TorchBlockSummary s;
  for (int64_t i = 0; i < count; ++i) {
    const OneF64 o = EvaluateF64(LoadF64(pa, i), LoadF64(pb, i), rtol, atol, tolerance);
    if (o.d > s.abs) { s.abs = o.d; s.abs_index = i; }
    if (o.rel > s.rel) { s.rel = o.rel; s.rel_index = i; }
    if (!o.close) {
      ++s.mismatches;
      if (o.d > s.gabs) { s.gabs = o.d; s.gabs_index = i; }
      if (o.rel > s.grel) { s.grel = o.rel; s.grel_index = i; }
    }
  }
  *out = s;
  return true;
}

// ---- Integer formats, portable ------------------------------------------------------------------

template <TorchFormat F>
constexpr bool IsIntFormat() {
  return F != TorchFormat::kF32 && F != TorchFormat::kF16 && F != TorchFormat::kBF16 &&
         F != TorchFormat::kF64 && F != TorchFormat::kF8E4M3 && F != TorchFormat::kF8E5M2;
}

template <TorchFormat F>
int32_t LoadInt(const char* p, int64_t i) {
  if constexpr (F == TorchFormat::kI32) {
    int32_t v;
    std::memcpy(&v, p + i * 4, 4);
    return v;
  } else if constexpr (F == TorchFormat::kI16) {
    int16_t v;
    std::memcpy(&v, p + i * 2, 2);
    return v;
  } else if constexpr (F == TorchFormat::kU16) {
    uint16_t v;
    std::memcpy(&v, p + i * 2, 2);
    return v;
  } else if constexpr (F == TorchFormat::kI8) {
    return static_cast<int8_t>(p[i]);
  } else if constexpr (F == TorchFormat::kBool) {
    return p[i] != 0 ? 1 : 0;  // any nonzero byte is true
  } else {
    return static_cast<uint8_t>(p[i]);
  }
}

struct OneInt {
  int64_t d;  // |a - b|: below 2^32 for the formats narrower than int64
  float rel;
  bool close;
};

inline OneInt EvaluateInt(int32_t a, int32_t b, float rtol, float atol, bool tolerance) {
  OneInt o;
  o.d = a < b ? static_cast<uint32_t>(b) - static_cast<uint32_t>(a) : static_cast<uint32_t>(a) - static_cast<uint32_t>(b);
  o.close = a == b;
  if (!o.close && tolerance) {
    const float af = static_cast<float>(a), bf = static_cast<float>(b);
    const float ad = std::fabs(af - bf);
    o.close = ad < kInf && ad <= atol + std::fabs(rtol * bf);
  }
  const uint32_t ub = b < 0 ? 0u - static_cast<uint32_t>(b) : static_cast<uint32_t>(b);
  o.rel = o.d == 0 ? 0.0f : static_cast<float>(o.d) / static_cast<float>(ub);
  return o;
}

// int64: torch subtracts in int64 modulo 2^64; d < 0 (a difference of exactly -2^63, whose abs
// wraps to itself) is left to the caller.
inline int64_t LoadI64(const char* p, int64_t i) {
  int64_t v;
  std::memcpy(&v, p + i * 8, 8);
  return v;
}
inline int64_t LoadU32(const char* p, int64_t i) {
  uint32_t v;
  std::memcpy(&v, p + i * 4, 4);
  return v;
}
inline int64_t WrapAbs64(int64_t v) {
  return v < 0 ? static_cast<int64_t>(0 - static_cast<uint64_t>(v)) : v;
}

// kUnsigned: uint64 bits (torch's isclose casts them to float32 as unsigned; its difference and
// relative difference take them as int64, wrapping, like int64's).
template <bool kUnsigned = false>
inline OneInt EvaluateI64(int64_t a, int64_t b, float rtol, float atol, bool tolerance) {
  OneInt o;
  o.d = WrapAbs64(static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)));
  o.close = a == b;
  if (!o.close && tolerance) {
    const float af = kUnsigned ? static_cast<float>(static_cast<uint64_t>(a)) : static_cast<float>(a);
    const float bf = kUnsigned ? static_cast<float>(static_cast<uint64_t>(b)) : static_cast<float>(b);
    const float ad = std::fabs(af - bf);
    o.close = ad < kInf && ad <= atol + std::fabs(rtol * bf);
  }
  o.rel = o.d == 0 ? 0.0f : static_cast<float>(o.d) / static_cast<float>(WrapAbs64(b));
  return o;
}

template <TorchFormat F>
bool PortableIntBlock(const char* pa, const char* pb, int64_t count, float rtol, float atol,
                      bool tolerance, TorchBlockSummary* out) {
  int64_t mabs = 0, mgabs = 0;
  float mrel = 0, mgrel = 0;
  TorchBlockSummary s;
  for (int64_t i = 0; i < count; ++i) {
    OneInt o;
    if constexpr (F == TorchFormat::kI64 || F == TorchFormat::kU64) {
      o = EvaluateI64<F == TorchFormat::kU64>(LoadI64(pa, i), LoadI64(pb, i), rtol, atol, tolerance);
      if (o.d < 0) return false;
    } else if constexpr (F == TorchFormat::kU32) {  // as int64 (torch's upcast): never wraps
      o = EvaluateI64(LoadU32(pa, i), LoadU32(pb, i), rtol, atol, tolerance);
    } else {
      o = EvaluateInt(LoadInt<F>(pa, i), LoadInt<F>(pb, i), rtol, atol, tolerance);
    }
    if (o.d > mabs) { mabs = o.d; s.abs_index = i; }
    if (o.rel > mrel) { mrel = o.rel; s.rel_index = i; }
    if (!o.close) {
      ++s.mismatches;
      if (o.d > mgabs) { mgabs = o.d; s.gabs_index = i; }
      if (o.rel > mgrel) { mgrel = o.rel; s.grel_index = i; }
    }
  }
  s.iabs = mabs;
  s.igabs = mgabs;
  s.abs = static_cast<double>(mabs);
  s.rel = mrel;
  s.gabs = static_cast<double>(mgabs);
  s.grel = mgrel;
  *out = s;
  return true;
}

// ---- AVX2: 8 lanes -----------------------------------------------------------------------------

PARITY_AVX2 inline float HMax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

// Rounds float32 lanes to the format and back (round to nearest even; overflow gives inf).
template <TorchFormat F>
PARITY_AVX2 inline __m256 Round8(__m256 v) {
  return simd::RoundTo8<ToDType(F)>(v);
}

struct Consts8 {
  __m256 sign, inf, zero, vr, va, tol_on;
};

// The per-lane quantities of eight pairs: d and rel (0 in lanes outside `valid`), the
// not-close lanes within `valid`, and the lanes whose inputs are both finite.
struct Lanes8 {
  __m256 d, rel, miss, finite;
};

// kRoundRel false leaves rel unrounded: the summary pass rounds its maxima once instead
// (rounding is monotonic, so the rounded maximum is the maximum of the rounded values); the
// locate pass compares rel with those maxima and rounds every lane.
template <TorchFormat F, bool kRoundRel>
PARITY_AVX2 inline Lanes8 Evaluate8(const Consts8& c, __m256 x, __m256 y, __m256 valid) {
  Lanes8 q;
  q.finite = _mm256_and_ps(_mm256_cmp_ps(_mm256_andnot_ps(c.sign, x), c.inf, _CMP_LT_OQ),
                           _mm256_cmp_ps(_mm256_andnot_ps(c.sign, y), c.inf, _CMP_LT_OQ));
  const __m256 d = _mm256_andnot_ps(c.sign, Round8<F>(_mm256_sub_ps(x, y)));
  const __m256 allowed = Round8<F>(_mm256_add_ps(c.va, _mm256_andnot_ps(c.sign, Round8<F>(_mm256_mul_ps(c.vr, y)))));
  const __m256 within = _mm256_and_ps(c.tol_on, _mm256_and_ps(_mm256_cmp_ps(d, c.inf, _CMP_LT_OQ),
                                                              _mm256_cmp_ps(d, allowed, _CMP_LE_OQ)));
  const __m256 close = _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_EQ_OQ), within);
  const __m256 dz = _mm256_cmp_ps(d, c.zero, _CMP_EQ_OQ);
  q.d = _mm256_and_ps(valid, d);
  const __m256 rel = _mm256_div_ps(d, _mm256_andnot_ps(c.sign, y));
  q.rel = _mm256_and_ps(valid, _mm256_andnot_ps(dz, kRoundRel ? Round8<F>(rel) : rel));
  q.miss = _mm256_andnot_ps(close, valid);
  return q;
}

// The last, partial group of eight pairs from index i (count - i < 8), zero-padded; `valid`
// marks the real lanes.
template <TorchFormat F>
PARITY_AVX2 inline void LoadTail8(const char* a, const char* b, int64_t i, int64_t count,
                                  __m256* x, __m256* y, __m256* valid) {
  alignas(32) float xa[8] = {0}, xb[8] = {0};
  alignas(32) int32_t mask[8] = {0};
  for (int64_t j = 0; i + j < count; ++j) {
    xa[j] = LoadOne<F>(a, i + j);
    xb[j] = LoadOne<F>(b, i + j);
    mask[j] = -1;
  }
  *x = _mm256_load_ps(xa);
  *y = _mm256_load_ps(xb);
  *valid = _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(mask)));
}

// First lane of `eq` (a compare result) in `valid`, or -1.
PARITY_AVX2 inline int FirstLane8(__m256 eq, __m256 valid) {
  const int m = _mm256_movemask_ps(_mm256_and_ps(eq, valid));
  return m ? __builtin_ctz(static_cast<unsigned>(m)) : -1;
}

template <TorchFormat F>
PARITY_AVX2 bool Avx2Block(const char* a, const char* b, int64_t count, float rtol, float atol,
                           bool tolerance, bool locate, TorchBlockSummary* out) {
  Consts8 c;
  c.sign = _mm256_set1_ps(-0.0f);
  c.inf = _mm256_set1_ps(kInf);
  c.zero = _mm256_setzero_ps();
  c.vr = _mm256_set1_ps(rtol);
  c.va = _mm256_set1_ps(atol);
  c.tol_on = tolerance ? _mm256_castsi256_ps(_mm256_set1_epi32(-1)) : c.zero;
  __m256 mabs = c.zero, mrel = c.zero, mgabs = c.zero, mgrel = c.zero;
  __m256 bad = c.zero;
  int64_t mism = 0;
  const __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  for (int64_t i = 0; i < count; i += 8) {
    __m256 x, y, valid = all;
    if (i + 8 <= count) {
      x = simd::Load8<ToDType(F)>(a, i);
      y = simd::Load8<ToDType(F)>(b, i);
    } else {
      LoadTail8<F>(a, b, i, count, &x, &y, &valid);
    }
    const Lanes8 q = Evaluate8<F, false>(c, x, y, valid);
    bad = _mm256_or_ps(bad, _mm256_andnot_ps(q.finite, valid));
    mabs = _mm256_max_ps(mabs, q.d);
    mrel = _mm256_max_ps(mrel, q.rel);
    mgabs = _mm256_max_ps(mgabs, _mm256_and_ps(q.miss, q.d));
    mgrel = _mm256_max_ps(mgrel, _mm256_and_ps(q.miss, q.rel));
    mism += __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(q.miss)));
  }
  if (_mm256_movemask_ps(bad) != 0) return false;
  TorchBlockSummary s;
  s.abs = HMax8(mabs);
  s.rel = RoundOne<F>(HMax8(mrel));
  s.gabs = HMax8(mgabs);
  s.grel = RoundOne<F>(HMax8(mgrel));
  s.mismatches = mism;
  if (locate) {
    const __m256 tabs = _mm256_set1_ps(s.abs), trel = _mm256_set1_ps(s.rel);
    const __m256 tgabs = _mm256_set1_ps(s.gabs), tgrel = _mm256_set1_ps(s.grel);
    int64_t* idx[4] = {&s.abs_index, &s.rel_index, &s.gabs_index, &s.grel_index};
    int found = 0;  // bit k: idx[k] set
    for (int64_t i = 0; i < count && found != 15; i += 8) {
      __m256 x, y, valid = all;
      if (i + 8 <= count) {
        x = simd::Load8<ToDType(F)>(a, i);
        y = simd::Load8<ToDType(F)>(b, i);
      } else {
        LoadTail8<F>(a, b, i, count, &x, &y, &valid);
      }
      const Lanes8 q = Evaluate8<F, true>(c, x, y, valid);
      const __m256 eq[4] = {_mm256_cmp_ps(q.d, tabs, _CMP_EQ_OQ), _mm256_cmp_ps(q.rel, trel, _CMP_EQ_OQ),
                            _mm256_cmp_ps(_mm256_and_ps(q.miss, q.d), tgabs, _CMP_EQ_OQ),
                            _mm256_cmp_ps(_mm256_and_ps(q.miss, q.rel), tgrel, _CMP_EQ_OQ)};
      for (int k = 0; k < 4; ++k) {
        if (found & (1 << k)) continue;
        const int lane = FirstLane8(eq[k], valid);
        if (lane >= 0) {
          *idx[k] = i + lane;
          found |= 1 << k;
        }
      }
    }
  }
  *out = s;
  return true;
}

// ---- AVX-512: 16 lanes, mask registers, masked tail loads --------------------------------------

// The locate passes' bookkeeping: for each of the four maxima not located yet (bit k of *found),
// the first lane set in eq[k], as an index counted from i.
inline void TakeFirstIndices(const uint32_t (&eq)[4], int64_t i, int64_t* const (&idx)[4], int* found) {
  for (int k = 0; k < 4; ++k) {
    if ((*found & (1 << k)) || eq[k] == 0) continue;
    *idx[k] = i + __builtin_ctz(eq[k]);
    *found |= 1 << k;
  }
}

// Sixteen elements of 4, 2 or 1 bytes, zero outside `valid` (a prefix mask). Full vectors take a
// plain load: on AMD Zen 5 a masked load (vmovdqu32 {k}{z}) of data beyond the caches ran at
// about a third of a plain one's rate (torch fp32 at 4 Mi elements: 0.71 against 1.2-2.4 G pairs/s),
// so only a block's last, partial vector is masked. The empty asm hides the plain load's value
// from the optimiser, which otherwise proves both arms equal when valid == 0xffff and keeps only
// the masked load (GCC 12 did, for int32).
template <typename V>
PARITY_AVX512 inline V Opaque(V v) {
  asm("" : "+v"(v));
  return v;
}
PARITY_AVX512 inline __m512i LoadEpi32(const char* p, __mmask16 valid) {
  if (valid == 0xffff) return Opaque(_mm512_loadu_si512(p));
  return _mm512_maskz_loadu_epi32(valid, p);
}
PARITY_AVX512 inline __m256i LoadEpi16(const char* p, __mmask16 valid) {
  if (valid == 0xffff) return Opaque(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm256_maskz_loadu_epi16(valid, p);
}
PARITY_AVX512 inline __m128i LoadEpi8(const char* p, __mmask16 valid) {
  if (valid == 0xffff) return Opaque(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm_maskz_loadu_epi8(valid, p);
}

template <TorchFormat F>
PARITY_AVX512 inline __m512 Load16(const char* p, int64_t i, __mmask16 valid) {
  if constexpr (F == TorchFormat::kF32) {
    return _mm512_castsi512_ps(LoadEpi32(p + i * 4, valid));
  } else {
    const __m256i h = LoadEpi16(p + i * 2, valid);
    if constexpr (F == TorchFormat::kF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <TorchFormat F>
PARITY_AVX512 inline __m512 Round16(__m512 v) {
  if constexpr (F == TorchFormat::kF32) {
    return v;
  } else if constexpr (F == TorchFormat::kF16) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else {
    const __m512i x = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  }
}

struct Consts16 {
  __m512 inf, vr, va;
  __mmask16 tol_on;
};

struct Lanes16 {
  __m512 d, rel;            // 0 outside valid
  __mmask16 miss, bad;      // within valid
};

// kRoundRel: as Evaluate8.
template <TorchFormat F, bool kRoundRel>
PARITY_AVX512 inline Lanes16 Evaluate16(const Consts16& c, __m512 x, __m512 y, __mmask16 valid) {
  Lanes16 q;
  const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_abs_ps(x), c.inf, _CMP_LT_OQ) &
                           _mm512_cmp_ps_mask(_mm512_abs_ps(y), c.inf, _CMP_LT_OQ);
  q.bad = static_cast<__mmask16>(valid & ~finite);
  const __m512 d = _mm512_abs_ps(Round16<F>(_mm512_sub_ps(x, y)));
  const __m512 allowed = Round16<F>(_mm512_add_ps(c.va, _mm512_abs_ps(Round16<F>(_mm512_mul_ps(c.vr, y)))));
  const __mmask16 within = c.tol_on & _mm512_cmp_ps_mask(d, c.inf, _CMP_LT_OQ) &
                           _mm512_cmp_ps_mask(d, allowed, _CMP_LE_OQ);
  const __mmask16 close = _mm512_cmp_ps_mask(x, y, _CMP_EQ_OQ) | within;
  const __mmask16 dnz = _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ);
  q.d = _mm512_maskz_mov_ps(valid, d);
  const __m512 rel = _mm512_div_ps(d, _mm512_abs_ps(y));
  q.rel = _mm512_maskz_mov_ps(static_cast<__mmask16>(valid & dnz), kRoundRel ? Round16<F>(rel) : rel);
  q.miss = static_cast<__mmask16>(valid & ~close);
  return q;
}

// The lanes of the group of (at most) sixteen pairs from index i.
PARITY_AVX512 inline __mmask16 Valid16(int64_t i, int64_t count) {
  return count - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (count - i)) - 1);
}

template <TorchFormat F>
PARITY_AVX512 bool Avx512Block(const char* a, const char* b, int64_t count, float rtol, float atol,
                               bool tolerance, bool locate, TorchBlockSummary* out) {
  Consts16 c;
  c.inf = _mm512_set1_ps(kInf);
  c.vr = _mm512_set1_ps(rtol);
  c.va = _mm512_set1_ps(atol);
  c.tol_on = tolerance ? 0xffff : 0;
  const __m512 zero = _mm512_setzero_ps();
  __m512 mabs = zero, mrel = zero, mgabs = zero, mgrel = zero;
  __mmask16 bad = 0;
  int64_t mism = 0;
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 valid = Valid16(i, count);
    const Lanes16 q = Evaluate16<F, false>(c, Load16<F>(a, i, valid), Load16<F>(b, i, valid), valid);
    bad = static_cast<__mmask16>(bad | q.bad);
    mabs = _mm512_max_ps(mabs, q.d);
    mrel = _mm512_max_ps(mrel, q.rel);
    mgabs = _mm512_mask_max_ps(mgabs, q.miss, mgabs, q.d);
    mgrel = _mm512_mask_max_ps(mgrel, q.miss, mgrel, q.rel);
    mism += __builtin_popcount(q.miss);
  }
  if (bad) return false;
  TorchBlockSummary s;
  s.abs = _mm512_reduce_max_ps(mabs);
  s.rel = RoundOne<F>(_mm512_reduce_max_ps(mrel));
  s.gabs = _mm512_reduce_max_ps(mgabs);
  s.grel = RoundOne<F>(_mm512_reduce_max_ps(mgrel));
  s.mismatches = mism;
  if (locate) {
    const __m512 tabs = _mm512_set1_ps(s.abs), trel = _mm512_set1_ps(s.rel);
    const __m512 tgabs = _mm512_set1_ps(s.gabs), tgrel = _mm512_set1_ps(s.grel);
    int64_t* idx[4] = {&s.abs_index, &s.rel_index, &s.gabs_index, &s.grel_index};
    int found = 0;
    for (int64_t i = 0; i < count && found != 15; i += 16) {
      const __mmask16 valid = Valid16(i, count);
      const Lanes16 q = Evaluate16<F, true>(c, Load16<F>(a, i, valid), Load16<F>(b, i, valid), valid);
      const uint32_t eq[4] = {
          static_cast<__mmask16>(valid & _mm512_cmp_ps_mask(q.d, tabs, _CMP_EQ_OQ)),
          static_cast<__mmask16>(valid & _mm512_cmp_ps_mask(q.rel, trel, _CMP_EQ_OQ)),
          static_cast<__mmask16>(valid & _mm512_cmp_ps_mask(_mm512_maskz_mov_ps(q.miss, q.d), tgabs, _CMP_EQ_OQ)),
          static_cast<__mmask16>(valid & _mm512_cmp_ps_mask(_mm512_maskz_mov_ps(q.miss, q.rel), tgrel, _CMP_EQ_OQ))};
      TakeFirstIndices(eq, i, idx, &found);
    }
  }
  *out = s;
  return true;
}

// float64: eight lanes, the portable arithmetic (no FMA).
struct LanesF64 {
  __m512d d, rel;       // 0 outside valid
  __mmask8 miss, bad;   // within valid
};

PARITY_AVX512 inline __m512d LoadPd8(const char* p, __mmask8 valid) {
  if (valid == 0xff) return Opaque(_mm512_loadu_pd(p));
  return _mm512_maskz_loadu_pd(valid, p);
}

PARITY_AVX512 inline __mmask8 Valid8(int64_t i, int64_t count) {
  return count - i >= 8 ? static_cast<__mmask8>(0xff) : static_cast<__mmask8>((1u << (count - i)) - 1);
}

PARITY_AVX512 inline LanesF64 EvaluateF64x8(__m512d x, __m512d y, __mmask8 valid, __m512d vr,
                                            __m512d va, __mmask8 tol_on) {
  LanesF64 q;
  const __m512d inf = _mm512_set1_pd(kInfD);
  const __mmask8 finite = _mm512_cmp_pd_mask(_mm512_abs_pd(x), inf, _CMP_LT_OQ) &
                          _mm512_cmp_pd_mask(_mm512_abs_pd(y), inf, _CMP_LT_OQ);
  q.bad = static_cast<__mmask8>(valid & ~finite);
  const __m512d d = _mm512_abs_pd(_mm512_sub_pd(x, y));
  const __m512d allowed = _mm512_add_pd(va, _mm512_abs_pd(_mm512_mul_pd(vr, y)));
  const __mmask8 within = tol_on & _mm512_cmp_pd_mask(d, inf, _CMP_LT_OQ) &
                          _mm512_cmp_pd_mask(d, allowed, _CMP_LE_OQ);
  const __mmask8 close = _mm512_cmp_pd_mask(x, y, _CMP_EQ_OQ) | within;
  const __mmask8 dnz = static_cast<__mmask8>(valid & _mm512_cmp_pd_mask(d, _mm512_setzero_pd(), _CMP_NEQ_UQ));
  q.d = _mm512_maskz_mov_pd(valid, d);
  q.rel = _mm512_maskz_div_pd(dnz, d, _mm512_abs_pd(y));
  q.miss = static_cast<__mmask8>(valid & ~close);
  return q;
}

PARITY_AVX512 bool Avx512F64Block(const char* a, const char* b, int64_t count, double rtol,
                                  double atol, bool tolerance, bool locate, TorchBlockSummary* out) {
  const __m512d vr = _mm512_set1_pd(rtol), va = _mm512_set1_pd(atol);
  const __mmask8 tol_on = tolerance ? 0xff : 0;
  const __m512d zero = _mm512_setzero_pd();
  __m512d mabs = zero, mrel = zero, mgabs = zero, mgrel = zero;
  __mmask8 bad = 0;
  int64_t mism = 0;
  for (int64_t i = 0; i < count; i += 8) {
    const __mmask8 valid = Valid8(i, count);
    const LanesF64 q = EvaluateF64x8(LoadPd8(a + i * 8, valid), LoadPd8(b + i * 8, valid), valid, vr, va, tol_on);
    bad = static_cast<__mmask8>(bad | q.bad);
    mabs = _mm512_max_pd(mabs, q.d);
    mrel = _mm512_max_pd(mrel, q.rel);
    mgabs = _mm512_mask_max_pd(mgabs, q.miss, mgabs, q.d);
    mgrel = _mm512_mask_max_pd(mgrel, q.miss, mgrel, q.rel);
    mism += __builtin_popcount(q.miss);
  }
  if (bad) return false;
  TorchBlockSummary s;
  s.abs = _mm512_reduce_max_pd(mabs);
  s.rel = _mm512_reduce_max_pd(mrel);
  s.gabs = _mm512_reduce_max_pd(mgabs);
  s.grel = _mm512_reduce_max_pd(mgrel);
  s.mismatches = mism;
  if (locate) {
    const __m512d tabs = _mm512_set1_pd(s.abs), trel = _mm512_set1_pd(s.rel);
    const __m512d tgabs = _mm512_set1_pd(s.gabs), tgrel = _mm512_set1_pd(s.grel);
    int64_t* idx[4] = {&s.abs_index, &s.rel_index, &s.gabs_index, &s.grel_index};
    int found = 0;
    for (int64_t i = 0; i < count && found != 15; i += 8) {
      const __mmask8 valid = Valid8(i, count);
      const LanesF64 q = EvaluateF64x8(LoadPd8(a + i * 8, valid), LoadPd8(b + i * 8, valid), valid, vr, va, tol_on);
      const uint32_t eq[4] = {
          static_cast<__mmask8>(valid & _mm512_cmp_pd_mask(q.d, tabs, _CMP_EQ_OQ)),
          static_cast<__mmask8>(valid & _mm512_cmp_pd_mask(q.rel, trel, _CMP_EQ_OQ)),
          static_cast<__mmask8>(valid & _mm512_cmp_pd_mask(_mm512_maskz_mov_pd(q.miss, q.d), tgabs, _CMP_EQ_OQ)),
          static_cast<__mmask8>(valid & _mm512_cmp_pd_mask(_mm512_maskz_mov_pd(q.miss, q.rel), tgrel, _CMP_EQ_OQ))};
      TakeFirstIndices(eq, i, idx, &found);
    }
  }
  *out = s;
  return true;
}

// Integer formats: sixteen int32 lanes. d = max - min as uint32 (exact for any int32 pair),
// converted to float32 with round to nearest even as the element path's casts do.
// int64 lanes narrowed to int32; a lane whose value does not fit sets bits of *bad (uint64: a
// value of 2^31 or more, the top bit included).
template <bool kUnsigned>
PARITY_AVX512 inline __m256i NarrowI64x8(const char* p, __mmask8 valid, __mmask8* bad) {
  const __m512i v = valid == 0xff ? Opaque(_mm512_loadu_si512(p)) : _mm512_maskz_loadu_epi64(valid, p);
  const __m256i n = _mm512_cvtepi64_epi32(v);
  *bad = static_cast<__mmask8>(*bad | _mm512_cmpneq_epi64_mask(_mm512_cvtepi32_epi64(n), v));
  if (kUnsigned) *bad = static_cast<__mmask8>(*bad | _mm512_movepi64_mask(v));
  return n;
}

// Sixteen elements as int32 lanes. int64 is narrowed (within int32's range the pair's results
// are exactly the int32 pair's); a value that does not fit sets bits of *bad.
template <TorchFormat F>
PARITY_AVX512 inline __m512i LoadInt16(const char* p, int64_t i, __mmask16 valid, __mmask8* bad) {
  if constexpr (F == TorchFormat::kI64 || F == TorchFormat::kU64) {
    constexpr bool kUnsigned = F == TorchFormat::kU64;
    const __m256i lo = NarrowI64x8<kUnsigned>(p + i * 8, static_cast<__mmask8>(valid), bad);
    const __m256i hi = NarrowI64x8<kUnsigned>(p + i * 8 + 64, static_cast<__mmask8>(valid >> 8), bad);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  } else if constexpr (F == TorchFormat::kI32 || F == TorchFormat::kU32) {
    return LoadEpi32(p + i * 4, valid);
  } else if constexpr (F == TorchFormat::kI16) {
    return _mm512_cvtepi16_epi32(LoadEpi16(p + i * 2, valid));
  } else if constexpr (F == TorchFormat::kU16) {
    return _mm512_cvtepu16_epi32(LoadEpi16(p + i * 2, valid));
  } else if constexpr (F == TorchFormat::kI8) {
    return _mm512_cvtepi8_epi32(LoadEpi8(p + i, valid));
  } else if constexpr (F == TorchFormat::kBool) {  // any nonzero byte is true
    return _mm512_min_epu32(_mm512_cvtepu8_epi32(LoadEpi8(p + i, valid)), _mm512_set1_epi32(1));
  } else {
    return _mm512_cvtepu8_epi32(LoadEpi8(p + i, valid));
  }
}

struct IntLanes16 {
  __m512i d;    // 0 outside valid
  __m512 rel;   // 0 outside valid
  __mmask16 miss;
};

// kU32: the lanes hold uint32 (d, the float32 values and |b| taken unsigned).
template <TorchFormat F>
PARITY_AVX512 inline IntLanes16 EvaluateInt16(__m512i a, __m512i b, __mmask16 valid, __m512 vr,
                                              __m512 va, __mmask16 tol_on) {
  constexpr bool kUnsigned = F == TorchFormat::kU32;
  IntLanes16 q;
  const __m512 inf = _mm512_set1_ps(kInf);
  const __m512i d = kUnsigned ? _mm512_sub_epi32(_mm512_max_epu32(a, b), _mm512_min_epu32(a, b))
                              : _mm512_sub_epi32(_mm512_max_epi32(a, b), _mm512_min_epi32(a, b));
  const __m512 af = kUnsigned ? _mm512_cvtepu32_ps(a) : _mm512_cvtepi32_ps(a);
  const __m512 bf = kUnsigned ? _mm512_cvtepu32_ps(b) : _mm512_cvtepi32_ps(b);
  const __m512 ad = _mm512_abs_ps(_mm512_sub_ps(af, bf));
  const __m512 allowed = _mm512_add_ps(va, _mm512_abs_ps(_mm512_mul_ps(vr, bf)));
  const __mmask16 within = tol_on & _mm512_cmp_ps_mask(ad, inf, _CMP_LT_OQ) &
                           _mm512_cmp_ps_mask(ad, allowed, _CMP_LE_OQ);
  const __mmask16 close = _mm512_cmpeq_epi32_mask(a, b) | within;
  const __mmask16 dnz = static_cast<__mmask16>(valid & _mm512_test_epi32_mask(d, d));
  q.d = _mm512_maskz_mov_epi32(valid, d);
  const __m512i absb = kUnsigned ? b : _mm512_abs_epi32(b);
  q.rel = _mm512_maskz_div_ps(dnz, _mm512_cvtepu32_ps(d), _mm512_cvtepu32_ps(absb));
  q.miss = static_cast<__mmask16>(valid & ~close);
  return q;
}

template <TorchFormat F>
PARITY_AVX512 bool Avx512IntBlock(const char* a, const char* b, int64_t count, float rtol,
                                  float atol, bool tolerance, bool locate, TorchBlockSummary* out) {
  const __m512 vr = _mm512_set1_ps(rtol), va = _mm512_set1_ps(atol);
  const __mmask16 tol_on = tolerance ? 0xffff : 0;
  __m512i mabs = _mm512_setzero_si512(), mgabs = mabs;
  __m512 mrel = _mm512_setzero_ps(), mgrel = mrel;
  int64_t mism = 0;
  __mmask8 bad = 0;  // int64: a value outside int32's range (Avx512I64Block takes the block)
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 valid = Valid16(i, count);
    const IntLanes16 q = EvaluateInt16<F>(LoadInt16<F>(a, i, valid, &bad), LoadInt16<F>(b, i, valid, &bad), valid, vr, va, tol_on);
    mabs = _mm512_max_epu32(mabs, q.d);
    mrel = _mm512_max_ps(mrel, q.rel);
    mgabs = _mm512_mask_max_epu32(mgabs, q.miss, mgabs, q.d);
    mgrel = _mm512_mask_max_ps(mgrel, q.miss, mgrel, q.rel);
    mism += __builtin_popcount(q.miss);
    if ((F == TorchFormat::kI64 || F == TorchFormat::kU64) && bad != 0) return false;
  }
  TorchBlockSummary s;
  const uint32_t tabs_u = _mm512_reduce_max_epu32(mabs), tgabs_u = _mm512_reduce_max_epu32(mgabs);
  const float trel_f = _mm512_reduce_max_ps(mrel), tgrel_f = _mm512_reduce_max_ps(mgrel);
  s.iabs = tabs_u;
  s.igabs = tgabs_u;
  s.abs = tabs_u;
  s.rel = trel_f;
  s.gabs = tgabs_u;
  s.grel = tgrel_f;
  s.mismatches = mism;
  if (locate) {
    const __m512i tabs = _mm512_set1_epi32(static_cast<int>(tabs_u)), tgabs = _mm512_set1_epi32(static_cast<int>(tgabs_u));
    const __m512 trel = _mm512_set1_ps(trel_f), tgrel = _mm512_set1_ps(tgrel_f);
    int64_t* idx[4] = {&s.abs_index, &s.rel_index, &s.gabs_index, &s.grel_index};
    int found = 0;
    for (int64_t i = 0; i < count && found != 15; i += 16) {
      const __mmask16 valid = Valid16(i, count);
      const IntLanes16 q = EvaluateInt16<F>(LoadInt16<F>(a, i, valid, &bad), LoadInt16<F>(b, i, valid, &bad), valid, vr, va, tol_on);
      const uint32_t eq[4] = {
          static_cast<__mmask16>(valid & _mm512_cmpeq_epi32_mask(q.d, tabs)),
          static_cast<__mmask16>(valid & _mm512_cmp_ps_mask(q.rel, trel, _CMP_EQ_OQ)),
          static_cast<__mmask16>(valid & _mm512_cmpeq_epi32_mask(_mm512_maskz_mov_epi32(q.miss, q.d), tgabs)),
          static_cast<__mmask16>(valid & _mm512_cmp_ps_mask(_mm512_maskz_mov_ps(q.miss, q.rel), tgrel, _CMP_EQ_OQ))};
      TakeFirstIndices(eq, i, idx, &found);
    }
  }
  *out = s;
  return true;
}

// int64: eight lanes in int64 (exact, modulo 2^64 as torch), the float32 quantities from a
// direct int64 -> float32 conversion (vcvtqq2ps, round to nearest even, as static_cast; uint64's
// tolerance test converts unsigned, vcvtuqq2ps). A lane with d < 0 (the one difference, -2^63,
// whose abs wraps) sets *neg.
struct I64Lanes8 {
  __m512i d;  // 0 outside valid
  __m256 rel;  // 0 outside valid
  __mmask8 miss;
};

template <bool kUnsigned>
PARITY_AVX512 inline I64Lanes8 EvaluateI64x8(const char* pa, const char* pb, int64_t i, __mmask8 valid,
                                             __m256 vr, __m256 va, __mmask8 tol_on, __mmask8* neg) {
  __m512i a, b;
  if (valid == 0xff) {
    a = Opaque(_mm512_loadu_si512(pa + i * 8));
    b = Opaque(_mm512_loadu_si512(pb + i * 8));
  } else {
    a = _mm512_maskz_loadu_epi64(valid, pa + i * 8);
    b = _mm512_maskz_loadu_epi64(valid, pb + i * 8);
  }
  I64Lanes8 q;
  const __m256 inf = _mm256_set1_ps(kInf);
  const __m512i d = _mm512_abs_epi64(_mm512_sub_epi64(a, b));
  *neg = static_cast<__mmask8>(*neg | _mm512_movepi64_mask(d));
  const __m256 af = kUnsigned ? _mm512_cvtepu64_ps(a) : _mm512_cvtepi64_ps(a);
  const __m256 bf = kUnsigned ? _mm512_cvtepu64_ps(b) : _mm512_cvtepi64_ps(b);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 ad = _mm256_andnot_ps(sign, _mm256_sub_ps(af, bf));
  const __m256 allowed = _mm256_add_ps(va, _mm256_andnot_ps(sign, _mm256_mul_ps(vr, bf)));
  const __mmask8 within = tol_on & _mm256_cmp_ps_mask(ad, inf, _CMP_LT_OQ) &
                          _mm256_cmp_ps_mask(ad, allowed, _CMP_LE_OQ);
  const __mmask8 close = _mm512_cmpeq_epi64_mask(a, b) | within;
  const __mmask8 dnz = static_cast<__mmask8>(valid & _mm512_test_epi64_mask(d, d));
  q.d = _mm512_maskz_mov_epi64(valid, d);
  q.rel = _mm256_maskz_div_ps(dnz, _mm512_cvtepi64_ps(d), _mm512_cvtepi64_ps(_mm512_abs_epi64(b)));
  q.miss = static_cast<__mmask8>(valid & ~close);
  return q;
}

template <bool kUnsigned>
PARITY_AVX512 bool Avx512I64Block(const char* a, const char* b, int64_t count, float rtol,
                                  float atol, bool tolerance, bool locate, TorchBlockSummary* out) {
  const __m256 vr = _mm256_set1_ps(rtol), va = _mm256_set1_ps(atol);
  const __mmask8 tol_on = tolerance ? 0xff : 0;
  __m512i mabs = _mm512_setzero_si512(), mgabs = mabs;
  __m256 mrel = _mm256_setzero_ps(), mgrel = mrel;
  int64_t mism = 0;
  __mmask8 neg = 0;
  for (int64_t i = 0; i < count; i += 8) {
    const I64Lanes8 q = EvaluateI64x8<kUnsigned>(a, b, i, Valid8(i, count), vr, va, tol_on, &neg);
    mabs = _mm512_max_epi64(mabs, q.d);
    mrel = _mm256_max_ps(mrel, q.rel);
    mgabs = _mm512_mask_max_epi64(mgabs, q.miss, mgabs, q.d);
    mgrel = _mm256_mask_max_ps(mgrel, q.miss, mgrel, q.rel);
    mism += __builtin_popcount(q.miss);
  }
  if (neg != 0) return false;
  TorchBlockSummary s;
  s.iabs = _mm512_reduce_max_epi64(mabs);
  s.igabs = _mm512_reduce_max_epi64(mgabs);
  const float trel_f = _mm512_reduce_max_ps(_mm512_castps256_ps512(mrel));
  const float tgrel_f = _mm512_reduce_max_ps(_mm512_castps256_ps512(mgrel));
  s.abs = static_cast<double>(s.iabs);
  s.rel = trel_f;
  s.gabs = static_cast<double>(s.igabs);
  s.grel = tgrel_f;
  s.mismatches = mism;
  if (locate) {
    const __m512i tabs = _mm512_set1_epi64(s.iabs), tgabs = _mm512_set1_epi64(s.igabs);
    const __m256 trel = _mm256_set1_ps(trel_f), tgrel = _mm256_set1_ps(tgrel_f);
    int64_t* idx[4] = {&s.abs_index, &s.rel_index, &s.gabs_index, &s.grel_index};
    int found = 0;
    for (int64_t i = 0; i < count && found != 15; i += 8) {
      const __mmask8 valid = Valid8(i, count);
      const I64Lanes8 q = EvaluateI64x8<kUnsigned>(a, b, i, valid, vr, va, tol_on, &neg);
      const uint32_t eq[4] = {
          static_cast<__mmask8>(valid & _mm512_cmpeq_epi64_mask(q.d, tabs)),
          static_cast<__mmask8>(valid & _mm256_cmp_ps_mask(q.rel, trel, _CMP_EQ_OQ)),
          static_cast<__mmask8>(valid & _mm512_cmpeq_epi64_mask(_mm512_maskz_mov_epi64(q.miss, q.d), tgabs)),
          static_cast<__mmask8>(valid & _mm256_cmp_ps_mask(_mm256_maskz_mov_ps(q.miss, q.rel), tgrel, _CMP_EQ_OQ))};
      TakeFirstIndices(eq, i, idx, &found);
    }
  }
  *out = s;
  return true;
}

// ---- Dispatch ----------------------------------------------------------------------------------

std::atomic<bool> g_enabled{true};

template <TorchFormat F>
bool RunFormat(simd::Isa isa, const char* a, const char* b, int64_t count, float rtol, float atol,
               bool tolerance, bool locate, TorchBlockSummary* out) {
  if constexpr (F == TorchFormat::kI64 || F == TorchFormat::kU64) {
    // Blocks within int32's range (uint64: below 2^31) in int32 lanes (twice the lanes), others in
    // int64 lanes.
    if (isa == simd::Isa::kAvx512) {
      return Avx512IntBlock<F>(a, b, count, rtol, atol, tolerance, locate, out) ||
             Avx512I64Block<F == TorchFormat::kU64>(a, b, count, rtol, atol, tolerance, locate, out);
    }
    return PortableIntBlock<F>(a, b, count, rtol, atol, tolerance, out);
  } else if constexpr (IsIntFormat<F>()) {
    if (isa == simd::Isa::kAvx512) return Avx512IntBlock<F>(a, b, count, rtol, atol, tolerance, locate, out);
    return PortableIntBlock<F>(a, b, count, rtol, atol, tolerance, out);
  } else {
    switch (isa) {
      case simd::Isa::kAvx512: return Avx512Block<F>(a, b, count, rtol, atol, tolerance, locate, out);
      case simd::Isa::kAvx2: return Avx2Block<F>(a, b, count, rtol, atol, tolerance, locate, out);
      case simd::Isa::kPortable: break;
    }
    return PortableBlock<F>(a, b, count, rtol, atol, tolerance, locate, out);
  }
}

// fp8: widened to float32 1024 elements at a time, each piece a float32 block; the pieces'
// maxima merge keeping the first index of equal maxima.
bool RunF8(simd::Isa isa, bool e5m2, const char* a, const char* b, int64_t count, float rtol,
           float atol, bool tolerance, bool locate, TorchBlockSummary* out) {
  constexpr int64_t kPiece = 1024;
  float fa[kPiece], fb[kPiece];
  TorchBlockSummary total;
  for (int64_t s = 0; s < count; s += kPiece) {
    const int64_t k = std::min(kPiece, count - s);
    simd::WidenFloat8(isa, e5m2, a + s, k, fa);
    simd::WidenFloat8(isa, e5m2, b + s, k, fb);
    TorchBlockSummary part;
    if (!RunFormat<TorchFormat::kF32>(isa, reinterpret_cast<const char*>(fa),
                                      reinterpret_cast<const char*>(fb), k, rtol, atol, tolerance,
                                      locate, &part)) {
      return false;
    }
    if (s == 0) {
      total = part;
      continue;
    }
    auto merge = [s](double v, int64_t i, double* tv, int64_t* ti) {
      if (v > *tv) {
        *tv = v;
        *ti = s + i;
      }
    };
    merge(part.abs, part.abs_index, &total.abs, &total.abs_index);
    merge(part.rel, part.rel_index, &total.rel, &total.rel_index);
    merge(part.gabs, part.gabs_index, &total.gabs, &total.gabs_index);
    merge(part.grel, part.grel_index, &total.grel, &total.grel_index);
    total.mismatches += part.mismatches;
  }
  *out = total;
  return true;
}

bool Run(simd::Isa isa, TorchFormat format, const void* a, const void* b, int64_t count,
         double rtol_d, double atol_d, bool tolerance, bool locate, TorchBlockSummary* out) {
  const char* pa = static_cast<const char*>(a);
  const char* pb = static_cast<const char*>(b);
  if (format == TorchFormat::kF64) {
    if (isa == simd::Isa::kAvx512) return Avx512F64Block(pa, pb, count, rtol_d, atol_d, tolerance, locate, out);
    return PortableF64Block(pa, pb, count, rtol_d, atol_d, tolerance, out);
  }
  // The other formats' tolerances are float32 values (the caller rounded them).
  const float rtol = static_cast<float>(rtol_d), atol = static_cast<float>(atol_d);
  switch (format) {
    case TorchFormat::kF32:
      return RunFormat<TorchFormat::kF32>(isa, pa, pb, count, rtol, atol, tolerance, locate, out);
    case TorchFormat::kF16:
      return RunFormat<TorchFormat::kF16>(isa, pa, pb, count, rtol, atol, tolerance, locate, out);
    case TorchFormat::kBF16:
      return RunFormat<TorchFormat::kBF16>(isa, pa, pb, count, rtol, atol, tolerance, locate, out);
    case TorchFormat::kI8:
      return RunFormat<TorchFormat::kI8>(isa, pa, pb, count, rtol, atol, tolerance, locate, out);
    case TorchFormat::kU8:
      return RunFormat<TorchFormat::kU8>(isa, pa, pb, count, rtol, atol, tolerance, locate, out);
    case TorchFormat::kI16:
      return RunFormat<TorchFormat::kI16>(isa, pa, pb, count, rtol, atol, tolerance, locate, out);
    case TorchFormat::kI32:
      return RunFormat<TorchFormat::kI32>(isa, pa, pb, count, rtol, atol, tolerance, locate, out);
    case TorchFormat::kU16:
      return RunFormat<TorchFormat::kU16>(isa, pa, pb, count, rtol, atol, tolerance, locate, out);
    case TorchFormat::kU32:
      return RunFormat<TorchFormat::kU32>(isa, pa, pb, count, rtol, atol, tolerance, locate, out);
    case TorchFormat::kBool:
      return RunFormat<TorchFormat::kBool>(isa, pa, pb, count, rtol, atol, tolerance, locate, out);
    case TorchFormat::kI64:
      return RunFormat<TorchFormat::kI64>(isa, pa, pb, count, rtol, atol, tolerance, locate, out);
    case TorchFormat::kU64:
      return RunFormat<TorchFormat::kU64>(isa, pa, pb, count, rtol, atol, tolerance, locate, out);
    case TorchFormat::kF8E4M3:
    case TorchFormat::kF8E5M2:
      return RunF8(isa, format == TorchFormat::kF8E5M2, pa, pb, count, rtol, atol, tolerance,
                   locate, out);
    case TorchFormat::kF64:
      break;  // above
  }
  return false;
}

}  // namespace

void SetTorchKernelEnabled(bool enabled) { g_enabled = enabled; }

bool TorchBlock(TorchFormat format, const void* a, const void* b, int64_t count, double rtol,
                double atol, bool tolerance, bool locate, TorchBlockSummary* out) {
  if (!g_enabled) return false;
  return Run(simd::Selected(), format, a, b, count, rtol, atol, tolerance, locate, out);
}

bool TorchBlockForIsa(const std::string& isa, TorchFormat format, const void* a, const void* b,
                      int64_t count, double rtol, double atol, bool tolerance, bool locate,
                      TorchBlockSummary* out) {
  simd::Isa chosen;
  if (!simd::Allowed(isa, &chosen)) return false;
  return Run(chosen, format, a, b, count, rtol, atol, tolerance, locate, out);
}

bool WidenFloat8ForIsa(const std::string& isa, bool e5m2, const char* in, int64_t n, float* out) {
  simd::Isa chosen;
  if (!simd::Allowed(isa, &chosen)) return false;
  simd::WidenFloat8(chosen, e5m2, in, n, out);
  return true;
}

}  // namespace parity
