#include "server/core/run_items_cache.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace parity {
namespace {

std::shared_ptr<const RunItemsCache::Items> Items(size_t n) {
  auto items = std::make_shared<RunItemsCache::Items>();
  for (size_t i = 0; i < n; ++i) {
    auto it = std::make_shared<ItemRecord>();
    it->name = "item." + std::to_string(i);
    items->push_back(std::move(it));
  }
  return items;
}

TEST(RunItemsCacheTest, KeepsRunsUpToTheItemBoundLeastRecentlyUsedFirst) {
  RunItemsCache c(10);
  c.Put("a", Items(4), c.epoch());
  c.Put("b", Items(4), c.epoch());
  ASSERT_NE(c.Get("a"), nullptr);  // a is now the most recently used
  c.Put("c", Items(4), c.epoch());   // 12 > 10: b goes
  EXPECT_NE(c.Get("a"), nullptr);
  EXPECT_EQ(c.Get("b"), nullptr);
  ASSERT_NE(c.Get("c"), nullptr);
  EXPECT_EQ(c.Get("c")->size(), 4u);
  EXPECT_EQ(c.items(), 8u);
}

TEST(RunItemsCacheTest, ARunLargerThanTheBoundIsNotKept) {
  RunItemsCache c(10);
  c.Put("a", Items(4), c.epoch());
  c.Put("big", Items(11), c.epoch());
  EXPECT_EQ(c.Get("big"), nullptr);
  EXPECT_NE(c.Get("a"), nullptr) << "nothing was dropped for it";
  RunItemsCache off(0);
  off.Put("a", Items(1), off.epoch());
  EXPECT_EQ(off.Get("a"), nullptr);
}

TEST(RunItemsCacheTest, ItemsReadWhileARunWasErasedAreNotKept) {
  RunItemsCache c(10);
  c.Put("a", Items(2), c.epoch());
  const uint64_t before = c.epoch();  // a job starts reading run b from the store...
  c.Erase("a");                       // ...while retention releases a run's data
  c.Put("b", Items(2), before);
  EXPECT_EQ(c.Get("a"), nullptr);
  EXPECT_EQ(c.Get("b"), nullptr);
  EXPECT_EQ(c.items(), 0u);
  c.Put("b", Items(2), c.epoch());
  EXPECT_NE(c.Get("b"), nullptr);
}

std::shared_ptr<const RunItemsCache::Items> ItemsWithData(size_t n, size_t bytes_each) {
  auto items = std::make_shared<RunItemsCache::Items>();
  for (size_t i = 0; i < n; ++i) {
    auto it = std::make_shared<ItemRecord>();
    it->name = "item." + std::to_string(i);
    it->inline_data = std::make_shared<const std::string>(bytes_each, 'x');
    items->push_back(std::move(it));
  }
  return items;
}

TEST(RunItemsCacheTest, InlineDataIsBoundedToo) {
  RunItemsCache c(100, 1000);
  c.Put("a", ItemsWithData(4, 100), c.epoch());  // 400 bytes
  c.Put("b", ItemsWithData(4, 100), c.epoch());  // 800
  EXPECT_EQ(c.data_bytes(), 800u);
  ASSERT_NE(c.Get("a"), nullptr);
  c.Put("c", ItemsWithData(2, 150), c.epoch());  // 1,100 > 1,000: b goes, though 10 items fit
  EXPECT_EQ(c.Get("b"), nullptr);
  EXPECT_NE(c.Get("a"), nullptr);
  EXPECT_NE(c.Get("c"), nullptr);
  EXPECT_EQ(c.data_bytes(), 700u);
  EXPECT_EQ(c.items(), 6u);
  c.Put("huge", ItemsWithData(1, 1001), c.epoch());
  EXPECT_EQ(c.Get("huge"), nullptr);
  EXPECT_EQ(c.data_bytes(), 700u) << "nothing was dropped for it";
  c.Erase("a");
  EXPECT_EQ(c.data_bytes(), 300u);
  EXPECT_EQ(c.items(), 2u);
}

}  // namespace
}  // namespace parity
