// Crc32 equals zlib's crc32() for every length around the folding boundaries, any alignment,
// and when continued across calls.
#include "common/base/crc32.h"

#include <cstdio>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace parity {
namespace {

TEST(Crc32, KnownValue) {
  EXPECT_EQ(Crc32(0, "123456789", 9), 0xCBF43926u);  // the CRC-32 check value
  const std::string a(1000, 'a');
  EXPECT_EQ(Crc32(0, a.data(), a.size()), Crc32Zlib(0, a.data(), a.size()));
  EXPECT_EQ(Crc32(0, nullptr, 0), 0u);
}

TEST(Crc32, MatchesZlibForEveryLengthAndAlignment) {
  std::mt19937 rng(3);
  std::string buf(70000, '\0');
  for (char& c : buf) c = static_cast<char>(rng());
  for (size_t off = 0; off < 16; ++off) {
    for (size_t n = 0; n < 600; ++n) {
      ASSERT_EQ(Crc32(0, buf.data() + off, n), Crc32Zlib(0, buf.data() + off, n)) << off << " " << n;
    }
  }
  for (size_t n : {4095, 4096, 4097, 65536, 69999}) {
    EXPECT_EQ(Crc32(0, buf.data() + 1, n), Crc32Zlib(0, buf.data() + 1, n)) << n;
  }
}

TEST(Crc32, ContinuesAcrossCalls) {
  std::mt19937 rng(5);
  std::string buf(10000, '\0');
  for (char& c : buf) c = static_cast<char>(rng());
  const uint32_t whole = Crc32Zlib(0, buf.data(), buf.size());
  for (size_t cut : {1, 63, 64, 65, 1000, 9999}) {
    uint32_t c = Crc32(0, buf.data(), cut);
    c = Crc32(c, buf.data() + cut, buf.size() - cut);
    EXPECT_EQ(c, whole) << cut;
  }
}

// Each implementation by itself (the 128-bit fold below 256 bytes is exercised above too):
// lengths around the 512-bit loop's 256-byte step and its 64-byte tail, every alignment, and
// continued across calls. An implementation the processor lacks is skipped, saying so (asked
// for, it would fall back to one the processor has: a second run of that one).
void ExpectMatchesZlib(Crc32Impl impl) {
  std::mt19937 rng(11);
  std::string buf(70000, '\0');
  for (char& c : buf) c = static_cast<char>(rng());
  for (size_t off = 0; off < 64; off += 7) {
    for (size_t n = 0; n < 1400; n += (n < 600 ? 1 : 13)) {
      ASSERT_EQ(Crc32Using(impl, 0, buf.data() + off, n), Crc32Zlib(0, buf.data() + off, n))
          << off << " " << n;
    }
  }
  for (size_t n : {4095, 4096, 4097, 65536, 69999}) {
    EXPECT_EQ(Crc32Using(impl, 0, buf.data() + 3, n), Crc32Zlib(0, buf.data() + 3, n)) << n;
    const uint32_t head = Crc32Using(impl, 0, buf.data(), 300);
    EXPECT_EQ(Crc32Using(impl, head, buf.data() + 300, n - 300), Crc32Zlib(0, buf.data(), n)) << n;
  }
}

TEST(Crc32, ZlibImplementationMatchesZlib) {
  ASSERT_TRUE(Crc32Supports(Crc32Impl::kZlib));
  ExpectMatchesZlib(Crc32Impl::kZlib);
}

TEST(Crc32, PclmulImplementationMatchesZlib) {
  if (!Crc32Supports(Crc32Impl::kPclmul)) GTEST_SKIP() << "this processor lacks PCLMULQDQ";
  ExpectMatchesZlib(Crc32Impl::kPclmul);
}

TEST(Crc32, VpclmulImplementationMatchesZlib) {
  if (!Crc32Supports(Crc32Impl::kVpclmul)) GTEST_SKIP() << "this processor lacks VPCLMULQDQ (AVX-512)";
  ExpectMatchesZlib(Crc32Impl::kVpclmul);
}

}  // namespace
}  // namespace parity
