#include "server/storage/held_blobs.h"

#include <cstring>
#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace parity {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Reserves, fills with `fill` and holds a blob of `size` bytes under `key`; false when refused.
bool HoldBlob(HeldBlobs* h, const std::string& key, uint64_t size, char fill) {
  std::unique_ptr<HeldBlobs::Filling> f = h->Reserve(size);
  if (f == nullptr) return false;
  EXPECT_EQ(f->size(), size);
  std::memset(f->data(), fill, size);
  h->Hold(key, std::move(f));
  return true;
}

TEST(HeldBlobsTest, AHeldBlobIsTakenOnceWithItsBytes) {
  HeldBlobs h(8 * kMiB);
  ASSERT_TRUE(HoldBlob(&h, "a", kMiB + 3, 'x'));
  EXPECT_EQ(h.counters().held_bytes, 2 * kMiB) << "its buffer's capacity";
  SharedBytes b = h.Take("a");
  ASSERT_NE(b.owner, nullptr);
  ASSERT_EQ(b.bytes.size(), kMiB + 3);
  EXPECT_EQ(b.bytes.front(), 'x');
  EXPECT_EQ(b.bytes.back(), 'x');
  EXPECT_EQ(h.Take("a").owner, nullptr) << "taking removes it";
  EXPECT_EQ(h.Take("never held").owner, nullptr);
  const HeldBlobs::Counters c = h.counters();
  EXPECT_EQ(c.held, 1u);
  EXPECT_EQ(c.taken, 1u);
  EXPECT_EQ(c.held_bytes, 0u);
  EXPECT_EQ(c.reserved_bytes, 0u);
}

TEST(HeldBlobsTest, TakenBytesOutliveTheHolder) {
  SharedBytes b;
  {
    HeldBlobs h(4 * kMiB);
    ASSERT_TRUE(HoldBlob(&h, "a", kMiB, 'y'));
    b = h.Take("a");
  }
  ASSERT_EQ(b.bytes.size(), kMiB);
  EXPECT_EQ(b.bytes[kMiB / 2], 'y');
}

TEST(HeldBlobsTest, TheOldestHeldBlobsMakeRoom) {
  HeldBlobs h(4 * kMiB);
  for (const char* key : {"a", "b", "c", "d"}) ASSERT_TRUE(HoldBlob(&h, key, kMiB, key[0]));
  ASSERT_TRUE(HoldBlob(&h, "e", 2 * kMiB, 'e'));  // a and b go
  EXPECT_EQ(h.Take("a").owner, nullptr);
  EXPECT_EQ(h.Take("b").owner, nullptr);
  SharedBytes c = h.Take("c");
  ASSERT_NE(c.owner, nullptr);
  EXPECT_EQ(c.bytes[0], 'c');
  EXPECT_EQ(h.counters().evicted, 2u);
  EXPECT_LE(h.counters().held_bytes + h.counters().reserved_bytes, 4 * kMiB);
}

TEST(HeldBlobsTest, BlobsBeingReceivedAreNeverEvicted) {
  HeldBlobs h(4 * kMiB);
  std::unique_ptr<HeldBlobs::Filling> a = h.Reserve(2 * kMiB);
  std::unique_ptr<HeldBlobs::Filling> b = h.Reserve(2 * kMiB);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(h.Reserve(kMiB), nullptr) << "the room is all reserved";
  EXPECT_EQ(h.counters().refused, 1u);
  a.reset();  // abandoned: its reservation returns
  EXPECT_EQ(h.counters().reserved_bytes, 2 * kMiB);
  EXPECT_NE(h.Reserve(kMiB), nullptr);
}

// What a held blob may keep resident is its pooled buffer, a power of two from 64 KiB: the
// room counts that, so blobs of awkward sizes cannot take more memory than the room says
// (not a buffer of at least 1 MiB counted at the blob's size).
TEST(HeldBlobsTest, BlobsCountTheirBuffersCapacity) {
  HeldBlobs h(kMiB);
  constexpr uint64_t kBlob = 100 << 10;  // a 128 KiB buffer
  EXPECT_EQ(PooledBufferCapacity(kBlob), 128u << 10);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(HoldBlob(&h, std::to_string(i), kBlob, 'a' + i));
  EXPECT_EQ(h.counters().held_bytes, kMiB);
  EXPECT_EQ(h.counters().evicted, 0u);
  ASSERT_TRUE(HoldBlob(&h, "8", kBlob, 'z'));  // the first goes
  EXPECT_EQ(h.counters().evicted, 1u);
  EXPECT_EQ(h.Take("0").owner, nullptr);
  SharedBytes b = h.Take("8");
  ASSERT_EQ(b.bytes.size(), kBlob);
  EXPECT_EQ(b.bytes.back(), 'z');
  EXPECT_EQ(h.counters().held_bytes, 7 * (128u << 10));
  EXPECT_EQ(PooledBufferCapacity(1), 64u << 10);
  EXPECT_EQ(PooledBufferCapacity(64 << 10), 64u << 10);
  EXPECT_EQ(PooledBufferCapacity((64 << 10) + 1), 128u << 10);
}

TEST(HeldBlobsTest, TooLargeOrEmptyBlobsAreNotHeld) {
  HeldBlobs h(4 * kMiB);
  EXPECT_EQ(h.Reserve(0), nullptr);
  EXPECT_EQ(h.Reserve(2 * kMiB + 1), nullptr) << "at most half the room";
  EXPECT_NE(h.Reserve(2 * kMiB), nullptr);
  HeldBlobs off(0);
  EXPECT_EQ(off.Reserve(1), nullptr);
}

TEST(HeldBlobsTest, TheSameContentTwiceIsHeldOnce) {
  HeldBlobs h(8 * kMiB);
  ASSERT_TRUE(HoldBlob(&h, "k", kMiB, '1'));
  ASSERT_TRUE(HoldBlob(&h, "k", kMiB, '2'));
  const HeldBlobs::Counters c = h.counters();
  EXPECT_EQ(c.held, 1u);
  EXPECT_EQ(c.held_bytes, kMiB);
  EXPECT_EQ(c.reserved_bytes, 0u);
  EXPECT_EQ(h.Take("k").bytes[0], '1');
}

}  // namespace
}  // namespace parity
