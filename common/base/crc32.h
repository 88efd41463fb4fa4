// CRC-32 of the zlib/gzip polynomial (0xEDB88320, reflected), exactly as zlib's crc32(): pass 0
// to start and the previous result to continue. On x86-64 processors with PCLMULQDQ (chosen at
// run time) the bulk of a buffer of 64 bytes or more is folded with carry-less multiplication,
// 4 x 128 bits per step (Intel's "Fast CRC computation for generic polynomials using PCLMULQDQ";
// the constants are those of the Linux kernel's crc32-pclmul), about 3x zlib 1.2.13 here; with
// AVX-512 and VPCLMULQDQ, from 256 bytes, 16 x 128 bits per step in four 512-bit registers;
// the rest goes through zlib.
#ifndef PARITY_COMMON_CRC32_H_
#define PARITY_COMMON_CRC32_H_

#include <cstddef>
#include <cstdint>

namespace parity {

uint32_t Crc32(uint32_t crc, const void* data, size_t size);

// zlib's crc32() alone, for tests and benchmarks comparing the two.
uint32_t Crc32Zlib(uint32_t crc, const void* data, size_t size);

// The implementations Crc32 chooses from, slowest first, for tests and benchmarks. Crc32 uses
// the best this processor supports; Crc32Using(impl, ...) uses `impl` or, when the processor
// lacks it, the best it has. All give zlib's result.
enum class Crc32Impl { kZlib, kPclmul, kVpclmul };
bool Crc32Supports(Crc32Impl impl);
uint32_t Crc32Using(Crc32Impl impl, uint32_t crc, const void* data, size_t size);

}  // namespace parity

#endif  // PARITY_COMMON_CRC32_H_
