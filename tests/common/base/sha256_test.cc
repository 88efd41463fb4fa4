// Sha256 gives FIPS 180-2's digests, the same whether fed at once or piece by piece.
#include "common/base/sha256.h"

#include <algorithm>
#include <string>

#include "gtest/gtest.h"

namespace parity {
namespace {

TEST(Sha256, KnownDigests) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, PiecesGiveTheDigestOfTheWhole) {
  std::string data;
  for (int i = 0; i < 10000; ++i) data.push_back(static_cast<char>(i * 131 % 251));
  Sha256 h;
  size_t at = 0;
  for (size_t n = 1; at < data.size(); n = n * 3 + 1) {
    const size_t k = std::min(n, data.size() - at);
    h.Update(data.data() + at, k);
    at += k;
  }
  EXPECT_EQ(h.HexDigest(), Sha256Hex(data));
  EXPECT_NE(Sha256Hex(data), Sha256Hex(data.substr(1)));
}

}  // namespace
}  // namespace parity
