// CRC-32 of the zlib/gzip polynomial (0xEDB88320, reflected), exactly as zlib's crc32(): pass 0
// to start and the previous result to continue. On x86-64 processors with PCLMULQDQ (chosen at
// run time) the bulk of a buffer of 64 bytes or more is folded with carry-less multiplication,
// 4 x 128 bits per step (Intel's "Fast CRC computation for generic polynomials using PCLMULQDQ";
// the constants are those of the Linux kernel's crc32-pclmul), about 3x zlib 1.2.13 here;
// the rest goes through zlib.
#ifndef PARITY_COMMON_CRC32_H_
#define PARITY_COMMON_CRC32_H_

#include <cstddef>
#include <cstdint>

namespace parity {

uint32_t Crc32(uint32_t crc, const void* data, size_t size);

// zlib's crc32() alone, for tests and benchmarks comparing the two.
uint32_t Crc32Zlib(uint32_t crc, const void* data, size_t size);

}  // namespace parity

#endif  // PARITY_COMMON_CRC32_H_
