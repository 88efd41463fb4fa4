// Shared pieces of the run-time-dispatched kernels (msprobe, torch and forge kernels, stats.cc):
// the target attributes of the AVX2 and AVX-512 versions, loads that widen float32/float16/
// bfloat16 to float32, the widening of fp8 blocks, the conversion of int64, uint64 and uint32
// lanes to float64, and the instruction set chosen for this process (MsprobeKernelIsa(): cpuid,
// capped by PARITY_KERNEL). Include only from .cc files compiled with -ffp-contract=off.
#ifndef PARITY_COMMON_SIMD_H_
#define PARITY_COMMON_SIMD_H_

// GCC 12's _mm512_cvtps_pd starts from an "undefined" register that -Wmaybe-uninitialized
// reports from inside the system header (for the rest of the including file).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "common/base/dtype.h"
#include "common/base/float_formats.h"
#include "common/checks/msprobe_kernel.h"

#define PARITY_INLINE inline __attribute__((always_inline))
#define PARITY_AVX2 __attribute__((target("avx2,f16c,popcnt")))
#define PARITY_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,f16c,popcnt")))

namespace parity {
namespace simd {

enum class Isa { kPortable, kAvx2, kAvx512 };

inline Isa Selected() {
  static const Isa isa = [] {
    const std::string s = MsprobeKernelIsa();
    return s == "avx512" ? Isa::kAvx512 : s == "avx2" ? Isa::kAvx2 : Isa::kPortable;
  }();
  return isa;
}

// Whether this machine may run the implementation named `name` ("portable", "avx2", "avx512").
inline bool Allowed(const std::string& name, Isa* out) {
  const Isa best = Selected();
  if (name == "portable") {
    *out = Isa::kPortable;
  } else if (name == "avx2" && best != Isa::kPortable) {
    *out = Isa::kAvx2;
  } else if (name == "avx512" && best == Isa::kAvx512) {
    *out = Isa::kAvx512;
  } else {
    return false;
  }
  return true;
}

// Elements [begin, begin + k) of an array of dtype T (float32, float16, bfloat16), exactly as
// float32, into out[0, k). k <= 1024.
template <DType T>
PARITY_INLINE void Widen(const char* p, int64_t begin, int64_t k, float* out) {
  if constexpr (T == DType::kFloat32) {
    std::memcpy(out, p + begin * 4, static_cast<size_t>(k) * 4);
  } else {
    uint16_t h[1024];
    std::memcpy(h, p + begin * 2, static_cast<size_t>(k) * 2);
    for (int64_t i = 0; i < k; ++i) {
      if constexpr (T == DType::kFloat16) {
        out[i] = HalfToFloat(h[i]);
      } else {
        const uint32_t bits = static_cast<uint32_t>(h[i]) << 16;
        std::memcpy(&out[i], &bits, 4);
      }
    }
  }
}

// Eight elements from index i, widened to float32 lanes.
template <DType T>
PARITY_AVX2 inline __m256 Load8(const char* p, int64_t i) {
  if constexpr (T == DType::kFloat32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p) + i);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i * 2));
    if constexpr (T == DType::kFloat16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// A float32 value rounded to T and back (round to nearest even; unchanged for float32).
template <DType T>
PARITY_INLINE float RoundTo(float v) {
  if constexpr (T == DType::kFloat16) {
    return RoundToHalf(v);
  } else if constexpr (T == DType::kBFloat16) {
    return RoundToBFloat16(v);
  } else {
    return v;
  }
}

// Eight float32 lanes rounded to T and back, round to nearest even, overflow to inf: unchanged
// for float32, F16C for float16, and for bfloat16 as RoundToBFloat16 does for non-NaN values
// (x + 0x7fff + lsb, truncated to the high half).
template <DType T>
PARITY_AVX2 inline __m256 RoundTo8(__m256 v) {
  if constexpr (T == DType::kFloat16) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else if constexpr (T == DType::kBFloat16) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  } else {
    return v;
  }
}

// Four int64 (kUnsigned: uint64) as double, rounded once to nearest as static_cast<double>
// rounds: x = hi * 2^32 + lo, where hi * 2^32 (signed, or unsigned) and lo (unsigned) are exact
// doubles built from their bits by the usual magic-number subtraction, and their sum is the one
// rounding.
template <bool kUnsigned>
PARITY_AVX2 inline __m256d Int64ToF64x4(const char* p) {
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  // 0x45300000_00000000 ^ hi: the double 2^84 + hi * 2^32; minus 2^84 is hi * 2^32. Signed, the
  // sign bit of hi flipped too: 2^84 + (hi + 2^31) * 2^32, minus 2^84 + 2^63.
  constexpr int64_t kHiMagic = kUnsigned ? 0x4530000000000000LL : 0x4530000080000000LL;
  constexpr double kHiBias = kUnsigned ? 0x1p84 : 0x1.000008p84;
  const __m256i hi_bits = _mm256_xor_si256(_mm256_srli_epi64(x, 32), _mm256_set1_epi64x(kHiMagic));
  const __m256d hi = _mm256_sub_pd(_mm256_castsi256_pd(hi_bits), _mm256_set1_pd(kHiBias));
  // 0x43300000 above lo: the double 2^52 + lo; minus 2^52 is lo.
  const __m256i lo_bits = _mm256_blend_epi32(x, _mm256_set1_epi64x(0x4330000000000000LL), 0xaa);
  const __m256d lo = _mm256_sub_pd(_mm256_castsi256_pd(lo_bits), _mm256_set1_pd(0x1p52));
  return _mm256_add_pd(hi, lo);
}

// Eight uint32 as doubles (exact): biased to int32 by flipping the top bit, converted, and the
// bias 2^31 added back.
PARITY_AVX2 inline void U32ToF64x4x2(const char* p, __m256d* lo, __m256d* hi) {
  const __m256i x = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                                     _mm256_set1_epi32(static_cast<int>(0x80000000u)));
  const __m256d bias = _mm256_set1_pd(0x1p31);
  *lo = _mm256_add_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(x)), bias);
  *hi = _mm256_add_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(x, 1)), bias);
}

// n fp8 values (e5m2 when `e5m2`, else e4m3fn) widened to float32, bit for bit what
// Float8ToFloats gives except that NaNs come out quiet (F16C quiets e5m2's signalling NaN; the
// kernels leave non-finite pairs to the element path), through binary16 in registers: an e5m2
// is a binary16's top byte; an e4m3fn's sign moved to bit 15 and its other bits shifted left by
// 7 make a binary16 worth 2^-8 times it, normal and subnormal alike, so the float32 of that
// times 256 is its value exactly; its NaN (S.1111.111) becomes binary16's quiet NaN, which the
// product keeps.
PARITY_AVX2 inline __m128i Float8ToHalf8(__m128i w, bool e5m2) {  // 8 bytes in 16-bit lanes
  if (e5m2) return _mm_slli_epi16(w, 8);
  const __m128i mag = _mm_and_si128(w, _mm_set1_epi16(0x7f));
  const __m128i sign = _mm_slli_epi16(_mm_and_si128(w, _mm_set1_epi16(0x80)), 8);
  const __m128i h = _mm_or_si128(_mm_slli_epi16(mag, 7), sign);
  const __m128i nan = _mm_or_si128(sign, _mm_set1_epi16(0x7e00));
  return _mm_blendv_epi8(h, nan, _mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7f)));
}

PARITY_AVX2 inline void WidenFloat8Avx2(bool e5m2, const char* in, int64_t n, float* out) {
  const __m256 scale = _mm256_set1_ps(e5m2 ? 1.0f : 256.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_cvtph_ps(Float8ToHalf8(w, e5m2)), scale));
  }
  Float8ToFloats(e5m2, in + i, n - i, out + i);
}

PARITY_AVX512 inline void WidenFloat8Avx512(bool e5m2, const char* in, int64_t n, float* out) {
  const __m512 scale = _mm512_set1_ps(e5m2 ? 1.0f : 256.0f);
  const __m256i low7 = _mm256_set1_epi16(0x7f), quiet = _mm256_set1_epi16(0x7e00);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    __m256i h;
    if (e5m2) {
      h = _mm256_slli_epi16(w, 8);
    } else {
      const __m256i mag = _mm256_and_si256(w, low7);
      const __m256i sign = _mm256_slli_epi16(_mm256_andnot_si256(low7, w), 8);
      h = _mm256_or_si256(_mm256_slli_epi16(mag, 7), sign);
      h = _mm256_mask_mov_epi16(h, _mm256_cmpeq_epi16_mask(mag, low7), _mm256_or_si256(sign, quiet));
    }
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_cvtph_ps(h), scale));
  }
  Float8ToFloats(e5m2, in + i, n - i, out + i);
}

inline void WidenFloat8(Isa isa, bool e5m2, const char* in, int64_t n, float* out) {
  switch (isa) {
    case Isa::kAvx512: return WidenFloat8Avx512(e5m2, in, n, out);
    case Isa::kAvx2: return WidenFloat8Avx2(e5m2, in, n, out);
    case Isa::kPortable: break;
  }
  Float8ToFloats(e5m2, in, n, out);
}

// bfloat16 to float32, exactly (a bfloat16 is a float32's top half): 16 bits shifted left by 16.
inline void BFloat16ToFloats(const char* in, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    std::memcpy(out + i, &bits, 4);
  }
}

PARITY_AVX2 inline void WidenBFloat16Avx2(const char* in, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_slli_epi32(w, 16));
  }
  BFloat16ToFloats(in + 2 * i, n - i, out + i);
}

PARITY_AVX512 inline void WidenBFloat16Avx512(const char* in, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 2 * i)));
    _mm512_storeu_si512(out + i, _mm512_slli_epi32(w, 16));
  }
  BFloat16ToFloats(in + 2 * i, n - i, out + i);
}

inline void WidenBFloat16(Isa isa, const char* in, int64_t n, float* out) {
  switch (isa) {
    case Isa::kAvx512: return WidenBFloat16Avx512(in, n, out);
    case Isa::kAvx2: return WidenBFloat16Avx2(in, n, out);
    case Isa::kPortable: break;
  }
  BFloat16ToFloats(in, n, out);
}

// float16 to float32, exactly.
inline void HalfToFloats(const char* in, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    out[i] = HalfToFloat(h);
  }
}

PARITY_AVX2 inline void WidenFloat16Avx2(const char* in, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i))));
  }
  HalfToFloats(in + 2 * i, n - i, out + i);
}

PARITY_AVX512 inline void WidenFloat16Avx512(const char* in, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 2 * i))));
  }
  HalfToFloats(in + 2 * i, n - i, out + i);
}

inline void WidenFloat16(Isa isa, const char* in, int64_t n, float* out) {
  switch (isa) {
    case Isa::kAvx512: return WidenFloat16Avx512(in, n, out);
    case Isa::kAvx2: return WidenFloat16Avx2(in, n, out);
    case Isa::kPortable: break;
  }
  HalfToFloats(in, n, out);
}

// k elements of dtype `t` at `p` (float32, float16, bfloat16 or fp8) as float32: `p` itself for
// float32, else widened exactly into `out`.
inline const float* WidenToFloat32(Isa isa, DType t, const char* p, int64_t k, float* out) {
  switch (t) {
    case DType::kFloat32:
      return reinterpret_cast<const float*>(p);
    case DType::kBFloat16:
      WidenBFloat16(isa, p, k, out);
      break;
    case DType::kFloat16:
      WidenFloat16(isa, p, k, out);
      break;
    default:
      WidenFloat8(isa, t == DType::kFloat8E5M2, p, k, out);
      break;
  }
  return out;
}

}  // namespace simd
}  // namespace parity

#endif  // PARITY_COMMON_SIMD_H_
