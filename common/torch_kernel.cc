#include "common/torch_kernel.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/float_formats.h"
#include "common/msprobe_kernel.h"

namespace parity {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

template <TorchFormat F>
float LoadOne(const void* p, int64_t i) {
  if constexpr (F == TorchFormat::kF32) {
    return static_cast<const float*>(p)[i];
  } else if constexpr (F == TorchFormat::kF16) {
    return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
  } else {
    return BFloat16ToFloat(static_cast<const uint16_t*>(p)[i]);
  }
}

template <TorchFormat F>
float RoundOne(float v) {
  if constexpr (F == TorchFormat::kF32) {
    return v;
  } else if constexpr (F == TorchFormat::kF16) {
    return RoundToHalf(v);
  } else {
    return RoundToBFloat16(v);
  }
}

template <TorchFormat F>
bool PortableBlock(const void* pa, const void* pb, int64_t count, float rtol, float atol,
                   bool tolerance, TorchBlockSummary* out) {
  for (int64_t i = 0; i < count; ++i) {
    if (!(std::fabs(LoadOne<F>(pa, i)) < kInf) || !(std::fabs(LoadOne<F>(pb, i)) < kInf)) {
      return false;
    }
  }
  TorchBlockSummary s;
  for (int64_t i = 0; i < count; ++i) {
    const float a = LoadOne<F>(pa, i), b = LoadOne<F>(pb, i);
    const float d = std::fabs(RoundOne<F>(a - b));
    const float allowed = RoundOne<F>(atol + std::fabs(RoundOne<F>(rtol * b)));
    const bool close = a == b || (tolerance && d < kInf && d <= allowed);
    const float rel = d == 0 ? 0.0f : RoundOne<F>(d / std::fabs(b));
    s.abs = std::max(s.abs, d);
    s.rel = std::max(s.rel, rel);
    if (!close) {
      ++s.mismatches;
      s.gabs = std::max(s.gabs, d);
      s.grel = std::max(s.grel, rel);
    }
  }
  *out = s;
  return true;
}

#define PARITY_AVX2 __attribute__((target("avx2,f16c,popcnt")))

PARITY_AVX2 float HMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

template <TorchFormat F>
PARITY_AVX2 inline __m256 Load8(const void* p, int64_t i) {
  if constexpr (F == TorchFormat::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(p) + i);
  } else {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
    if constexpr (F == TorchFormat::kF16) {
      return _mm256_cvtph_ps(h);
    } else {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
}

// Rounds float32 lanes to the format and back (round to nearest even; overflow gives inf).
template <TorchFormat F>
PARITY_AVX2 inline __m256 Round8(__m256 v) {
  if constexpr (F == TorchFormat::kF32) {
    return v;
  } else if constexpr (F == TorchFormat::kF16) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else {
    // As FloatToBFloat16 for non-NaN values: x + 0x7fff + lsb, truncated to the high half.
    const __m256i x = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  }
}

struct Avx2State {
  __m256 sign, inf, zero, vr, va, tol_on;
  __m256 mabs, mrel, mgabs, mgrel, finite;
  int64_t mism;
};

// One vector of 8 pairs (already widened to float32); lanes outside `valid` count for nothing.
template <TorchFormat F>
PARITY_AVX2 inline void Avx2Step(Avx2State& st, __m256 x, __m256 y, __m256 valid) {
  const __m256 fx = _mm256_cmp_ps(_mm256_andnot_ps(st.sign, x), st.inf, _CMP_LT_OQ);
  const __m256 fy = _mm256_cmp_ps(_mm256_andnot_ps(st.sign, y), st.inf, _CMP_LT_OQ);
  st.finite = _mm256_and_ps(st.finite, _mm256_or_ps(_mm256_andnot_ps(valid, st.finite), _mm256_and_ps(fx, fy)));
  const __m256 d = _mm256_andnot_ps(st.sign, Round8<F>(_mm256_sub_ps(x, y)));
  const __m256 allowed = Round8<F>(
      _mm256_add_ps(st.va, _mm256_andnot_ps(st.sign, Round8<F>(_mm256_mul_ps(st.vr, y)))));
  const __m256 within = _mm256_and_ps(st.tol_on, _mm256_and_ps(_mm256_cmp_ps(d, st.inf, _CMP_LT_OQ),
                                                               _mm256_cmp_ps(d, allowed, _CMP_LE_OQ)));
  const __m256 close = _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_EQ_OQ), within);
  const __m256 dz = _mm256_cmp_ps(d, st.zero, _CMP_EQ_OQ);
  const __m256 rel =
      _mm256_andnot_ps(dz, Round8<F>(_mm256_div_ps(d, _mm256_andnot_ps(st.sign, y))));
  const __m256 miss = _mm256_andnot_ps(close, valid);
  st.mabs = _mm256_max_ps(st.mabs, _mm256_and_ps(valid, d));
  st.mrel = _mm256_max_ps(st.mrel, _mm256_and_ps(valid, rel));
  st.mgabs = _mm256_max_ps(st.mgabs, _mm256_and_ps(miss, d));
  st.mgrel = _mm256_max_ps(st.mgrel, _mm256_and_ps(miss, rel));
  st.mism += __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(miss)));
}

template <TorchFormat F>
PARITY_AVX2 bool Avx2Block(const void* a, const void* b, int64_t count, float rtol, float atol,
                           bool tolerance, TorchBlockSummary* out) {
  const __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  Avx2State st;
  st.sign = _mm256_set1_ps(-0.0f);
  st.inf = _mm256_set1_ps(kInf);
  st.zero = _mm256_setzero_ps();
  st.vr = _mm256_set1_ps(rtol);
  st.va = _mm256_set1_ps(atol);
  st.tol_on = tolerance ? all : st.zero;
  st.mabs = st.mrel = st.mgabs = st.mgrel = st.zero;
  st.finite = all;
  st.mism = 0;
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) Avx2Step<F>(st, Load8<F>(a, i), Load8<F>(b, i), all);
  if (i < count) {
    alignas(32) float xa[8] = {0}, xb[8] = {0};
    alignas(32) int32_t mask[8] = {0};
    for (int64_t j = 0; i + j < count; ++j) {
      xa[j] = LoadOne<F>(a, i + j);
      xb[j] = LoadOne<F>(b, i + j);
      mask[j] = -1;
    }
    Avx2Step<F>(st, _mm256_load_ps(xa), _mm256_load_ps(xb),
                _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(mask))));
  }
  if (_mm256_movemask_ps(st.finite) != 0xff) return false;
  out->abs = HMax(st.mabs);
  out->rel = HMax(st.mrel);
  out->gabs = HMax(st.mgabs);
  out->grel = HMax(st.mgrel);
  out->mismatches = st.mism;
  return true;
}

std::atomic<bool> g_enabled{true};

bool UseAvx2() {
  static const bool avx2 = std::strcmp(MsprobeKernelIsa(), "portable") != 0;
  return avx2;
}

bool Run(bool avx2, TorchFormat format, const void* a, const void* b, int64_t count, float rtol,
         float atol, bool tolerance, TorchBlockSummary* out) {
  switch (format) {
    case TorchFormat::kF32:
      return avx2 ? Avx2Block<TorchFormat::kF32>(a, b, count, rtol, atol, tolerance, out)
                  : PortableBlock<TorchFormat::kF32>(a, b, count, rtol, atol, tolerance, out);
    case TorchFormat::kF16:
      return avx2 ? Avx2Block<TorchFormat::kF16>(a, b, count, rtol, atol, tolerance, out)
                  : PortableBlock<TorchFormat::kF16>(a, b, count, rtol, atol, tolerance, out);
    case TorchFormat::kBF16:
      return avx2 ? Avx2Block<TorchFormat::kBF16>(a, b, count, rtol, atol, tolerance, out)
                  : PortableBlock<TorchFormat::kBF16>(a, b, count, rtol, atol, tolerance, out);
  }
  return false;
}

}  // namespace

void SetTorchKernelEnabled(bool enabled) { g_enabled = enabled; }

bool TorchBlock(TorchFormat format, const void* a, const void* b, int64_t count, float rtol,
                float atol, bool tolerance, TorchBlockSummary* out) {
  if (!g_enabled) return false;
  return Run(UseAvx2(), format, a, b, count, rtol, atol, tolerance, out);
}

bool TorchBlockForIsa(const std::string& isa, TorchFormat format, const void* a, const void* b,
                      int64_t count, float rtol, float atol, bool tolerance,
                      TorchBlockSummary* out) {
  if (isa == "portable") return Run(false, format, a, b, count, rtol, atol, tolerance, out);
  if (isa == "avx2" && UseAvx2()) return Run(true, format, a, b, count, rtol, atol, tolerance, out);
  return false;
}

}  // namespace parity
