#include "common/crc32.h"

#include <immintrin.h>
#include <zlib.h>

#include <algorithm>

namespace parity {
namespace {

#define PARITY_PCLMUL __attribute__((target("pclmul,sse4.1")))

PARITY_PCLMUL inline __m128i Load(const uint8_t* q) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
}

// x * k (low and high halves, each by its constant) + next: one 128-bit fold.
PARITY_PCLMUL inline __m128i Fold(__m128i x, __m128i k, __m128i next) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), next);
}

// Folds `size` bytes (a multiple of 16, at least 64) into the raw (not inverted) CRC state.
PARITY_PCLMUL uint32_t FoldPclmul(uint32_t state, const uint8_t* p, size_t size) {
  const __m128i r2r1 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
  const __m128i r4r3 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
  const __m128i r5 = _mm_set_epi64x(0, 0x163cd6124);
  const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
  const __m128i poly = _mm_set_epi64x(0x1f7011641, 0x1db710641);  // u', P'
  __m128i x1 = _mm_xor_si128(Load(p), _mm_cvtsi32_si128(static_cast<int>(state)));
  __m128i x2 = Load(p + 16), x3 = Load(p + 32), x4 = Load(p + 48);
  p += 64;
  size -= 64;
  while (size >= 64) {
    x1 = Fold(x1, r2r1, Load(p));
    x2 = Fold(x2, r2r1, Load(p + 16));
    x3 = Fold(x3, r2r1, Load(p + 32));
    x4 = Fold(x4, r2r1, Load(p + 48));
    p += 64;
    size -= 64;
  }
  x1 = Fold(x1, r4r3, x2);
  x1 = Fold(x1, r4r3, x3);
  x1 = Fold(x1, r4r3, x4);
  while (size >= 16) {
    x1 = Fold(x1, r4r3, Load(p));
    p += 16;
    size -= 16;
  }
  // 128 -> 64 bits (also appends 32 zero bits), then 64 -> 32 and a Barrett reduction.
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(r4r3, x1, 0x01), _mm_srli_si128(x1, 8));
  __m128i x2b = _mm_srli_si128(x1, 4);
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask32), r5, 0x00), x2b);
  x2b = x1;
  x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly, 0x10);
  x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly, 0x00);
  x1 = _mm_xor_si128(x1, x2b);
  return static_cast<uint32_t>(_mm_extract_epi32(x1, 1));
}

bool HavePclmul() {
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  }();
  return have;
}

}  // namespace

uint32_t Crc32Zlib(uint32_t crc, const void* data, size_t size) {
  const Bytef* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (size > 0) {
    const uInt n = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    c = crc32(c, p, n);
    p += n;
    size -= n;
  }
  return static_cast<uint32_t>(c);
}

uint32_t Crc32(uint32_t crc, const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (size >= 64 && HavePclmul()) {
    const size_t bulk = size & ~static_cast<size_t>(15);
    crc = ~FoldPclmul(~crc, p, bulk);
    p += bulk;
    size -= bulk;
  }
  return Crc32Zlib(crc, p, size);
}

}  // namespace parity
