#include "common/base/crc32.h"

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

PARITY_PCLMUL uint32_t FinishPclmul(__m128i x1, __m128i x2, __m128i x3, __m128i x4,
                                    const uint8_t* p, size_t size);

// Folds `size` bytes (a multiple of 16, at least 64) into the raw (not inverted) CRC state.
PARITY_PCLMUL uint32_t FoldPclmul(uint32_t state, const uint8_t* p, size_t size) {
  const __m128i r2r1 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
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
  return FinishPclmul(x1, x2, x3, x4, p, size);
}

// The end of FoldPclmul: x1..x4 (the state 64 bytes apart) into one, the remaining `size`
// bytes (a multiple of 16, less than 64) 16 at a time, and the reduction to 32 bits.
PARITY_PCLMUL uint32_t FinishPclmul(__m128i x1, __m128i x2, __m128i x3, __m128i x4,
                                    const uint8_t* p, size_t size) {
  const __m128i r4r3 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
  const __m128i r5 = _mm_set_epi64x(0, 0x163cd6124);
  const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
  const __m128i poly = _mm_set_epi64x(0x1f7011641, 0x1db710641);  // u', P'
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

#define PARITY_VPCLMUL __attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.1")))

PARITY_VPCLMUL inline __m512i Load512(const uint8_t* q) { return _mm512_loadu_si512(q); }

// The 128-bit fold of FoldPclmul, on the four lanes of a 512-bit register at once.
PARITY_VPCLMUL inline __m512i Fold512(__m512i x, __m512i k, __m512i next) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                   _mm512_clmulepi64_epi128(x, k, 0x11), next, 0x96);  // a^b^c
}

// FoldPclmul with 512-bit carry-less multiplication (VPCLMULQDQ): four registers of four
// 128-bit lanes fold 256 bytes per step (x^(2048+-32) mod P, as zlib-ng's crc32_fold_vpclmulqdq),
// then fold into one register 64 bytes apart (FoldPclmul's distance and constants), whose four
// lanes are FoldPclmul's x1..x4 at the same point: the rest is FoldPclmul's. `size` is a
// multiple of 16, at least 256.
PARITY_VPCLMUL uint32_t FoldVpclmul(uint32_t state, const uint8_t* p, size_t size) {
  const __m512i k2048 = _mm512_set_epi64(0x1322d1430, 0x11542778a, 0x1322d1430, 0x11542778a,
                                         0x1322d1430, 0x11542778a, 0x1322d1430, 0x11542778a);
  const __m512i k512 = _mm512_set_epi64(0x1c6e41596, 0x154442bd4, 0x1c6e41596, 0x154442bd4,
                                        0x1c6e41596, 0x154442bd4, 0x1c6e41596, 0x154442bd4);
  const __m512i first = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                         static_cast<int>(state));  // the state in lane 0
  __m512i z0 = _mm512_xor_si512(Load512(p), first);
  __m512i z1 = Load512(p + 64), z2 = Load512(p + 128), z3 = Load512(p + 192);
  p += 256;
  size -= 256;
  while (size >= 256) {
    z0 = Fold512(z0, k2048, Load512(p));
    z1 = Fold512(z1, k2048, Load512(p + 64));
    z2 = Fold512(z2, k2048, Load512(p + 128));
    z3 = Fold512(z3, k2048, Load512(p + 192));
    p += 256;
    size -= 256;
  }
  z0 = Fold512(z0, k512, z1);
  z0 = Fold512(z0, k512, z2);
  z0 = Fold512(z0, k512, z3);
  while (size >= 64) {
    z0 = Fold512(z0, k512, Load512(p));
    p += 64;
    size -= 64;
  }
  alignas(64) __m128i lanes[4];
  _mm512_store_si512(lanes, z0);
  return FinishPclmul(lanes[0], lanes[1], lanes[2], lanes[3], p, size);
}

Crc32Impl Best() {
  static const Crc32Impl best = [] {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("pclmul") || !__builtin_cpu_supports("sse4.1")) {
      return Crc32Impl::kZlib;
    }
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq")) {
      return Crc32Impl::kVpclmul;
    }
    return Crc32Impl::kPclmul;
  }();
  return best;
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

bool Crc32Supports(Crc32Impl impl) { return impl <= Best(); }

uint32_t Crc32Using(Crc32Impl impl, uint32_t crc, const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (impl > Best()) impl = Best();
  if (size >= 64 && impl != Crc32Impl::kZlib) {
    const size_t bulk = size & ~static_cast<size_t>(15);
    crc = impl == Crc32Impl::kVpclmul && bulk >= 256 ? ~FoldVpclmul(~crc, p, bulk)
                                                      : ~FoldPclmul(~crc, p, bulk);
    p += bulk;
    size -= bulk;
  }
  return Crc32Zlib(crc, p, size);
}

uint32_t Crc32(uint32_t crc, const void* data, size_t size) {
  return Crc32Using(Best(), crc, data, size);
}

}  // namespace parity
