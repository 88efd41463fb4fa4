#include "common/torch_kernel.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/msprobe_kernel.h"

namespace parity {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

bool PortableBlock(const float* a, const float* b, int64_t count, float rtol, float atol,
                   bool tolerance, TorchBlockSummary* out) {
  for (int64_t i = 0; i < count; ++i) {
    if (!(std::fabs(a[i]) < kInf) || !(std::fabs(b[i]) < kInf)) return false;
  }
  TorchBlockSummary s;
  for (int64_t i = 0; i < count; ++i) {
    const float d = std::fabs(a[i] - b[i]);
    const float allowed = atol + std::fabs(rtol * b[i]);
    const bool close = a[i] == b[i] || (tolerance && d < kInf && d <= allowed);
    const float rel = d == 0 ? 0.0f : d / std::fabs(b[i]);
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

#define PARITY_AVX2 __attribute__((target("avx2,popcnt")))

PARITY_AVX2 float HMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

struct Avx2State {
  __m256 sign, inf, zero, vr, va, tol_on;
  __m256 mabs, mrel, mgabs, mgrel, finite;
  int64_t mism;
};

// One vector of 8 pairs; lanes outside `valid` count for nothing.
PARITY_AVX2 inline void Avx2Step(Avx2State& st, __m256 x, __m256 y, __m256 valid) {
  const __m256 fx = _mm256_cmp_ps(_mm256_andnot_ps(st.sign, x), st.inf, _CMP_LT_OQ);
  const __m256 fy = _mm256_cmp_ps(_mm256_andnot_ps(st.sign, y), st.inf, _CMP_LT_OQ);
  st.finite = _mm256_and_ps(st.finite, _mm256_or_ps(_mm256_andnot_ps(valid, st.finite), _mm256_and_ps(fx, fy)));
  const __m256 d = _mm256_andnot_ps(st.sign, _mm256_sub_ps(x, y));
  const __m256 allowed = _mm256_add_ps(st.va, _mm256_andnot_ps(st.sign, _mm256_mul_ps(st.vr, y)));
  const __m256 within = _mm256_and_ps(st.tol_on, _mm256_and_ps(_mm256_cmp_ps(d, st.inf, _CMP_LT_OQ),
                                                               _mm256_cmp_ps(d, allowed, _CMP_LE_OQ)));
  const __m256 close = _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_EQ_OQ), within);
  const __m256 dz = _mm256_cmp_ps(d, st.zero, _CMP_EQ_OQ);
  const __m256 rel = _mm256_andnot_ps(dz, _mm256_div_ps(d, _mm256_andnot_ps(st.sign, y)));
  const __m256 miss = _mm256_andnot_ps(close, valid);
  st.mabs = _mm256_max_ps(st.mabs, _mm256_and_ps(valid, d));
  st.mrel = _mm256_max_ps(st.mrel, _mm256_and_ps(valid, rel));
  st.mgabs = _mm256_max_ps(st.mgabs, _mm256_and_ps(miss, d));
  st.mgrel = _mm256_max_ps(st.mgrel, _mm256_and_ps(miss, rel));
  st.mism += __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(miss)));
}

PARITY_AVX2 bool Avx2Block(const float* a, const float* b, int64_t count, float rtol, float atol,
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
  for (; i + 8 <= count; i += 8) Avx2Step(st, _mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), all);
  if (i < count) {
    alignas(32) float xa[8] = {0}, xb[8] = {0};
    alignas(32) int32_t mask[8] = {0};
    for (int64_t j = 0; i + j < count; ++j) {
      xa[j] = a[i + j];
      xb[j] = b[i + j];
      mask[j] = -1;
    }
    Avx2Step(st, _mm256_load_ps(xa), _mm256_load_ps(xb),
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

}  // namespace

void SetTorchKernelEnabled(bool enabled) { g_enabled = enabled; }

bool TorchF32Block(const float* a, const float* b, int64_t count, float rtol, float atol,
                   bool tolerance, TorchBlockSummary* out) {
  if (!g_enabled) return false;
  if (UseAvx2()) return Avx2Block(a, b, count, rtol, atol, tolerance, out);
  return PortableBlock(a, b, count, rtol, atol, tolerance, out);
}

bool TorchF32BlockForIsa(const std::string& isa, const float* a, const float* b, int64_t count,
                         float rtol, float atol, bool tolerance, TorchBlockSummary* out) {
  if (isa == "portable") return PortableBlock(a, b, count, rtol, atol, tolerance, out);
  if (isa == "avx2" && UseAvx2()) return Avx2Block(a, b, count, rtol, atol, tolerance, out);
  return false;
}

}  // namespace parity
