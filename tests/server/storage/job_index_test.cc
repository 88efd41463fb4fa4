#include "server/storage/job_index.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace parity {
namespace {

// Rows and columns come back as they went in; a metric set on some rows is NaN on the others,
// including rows added after its last number.
TEST(JobIndexTest, PartsDecodeToWhatWasBuilt) {
  JobIndexBuilder b;
  b.AddRow({3, 2, 0, 1, 1});
  b.SetNumber(4, 0.5);
  b.AddRow({7, 0, 1, 0, 0});
  b.SetNumber(0, -2.25);
  b.AddRow({0xfffffffe, 3, 1, 1, 2});
  JobIndexParts parts = EncodeJobIndex(std::move(b).Finish());
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].first, kIndexRowsPart);
  EXPECT_EQ(parts[0].second.size(), 24u);
  auto rows = DecodeIndexRows(parts[0].second);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[2].slot, 0xfffffffeu);
  EXPECT_EQ((*rows)[0].verdict, 2);
  EXPECT_EQ((*rows)[1].phase, 1);
  EXPECT_EQ((*rows)[0].role, 1);
  EXPECT_EQ((*rows)[2].culprit, 2);
  EXPECT_EQ(parts[1].first, 0);
  auto cosine = DecodeIndexColumn(parts[1].second, 3);
  ASSERT_TRUE(cosine.ok());
  EXPECT_TRUE(std::isnan((*cosine)[0]));
  EXPECT_EQ((*cosine)[1], -2.25);
  EXPECT_TRUE(std::isnan((*cosine)[2]));
  EXPECT_EQ(parts[2].first, 4);
  auto other = DecodeIndexColumn(parts[2].second, 3);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)[0], 0.5);
  EXPECT_TRUE(std::isnan((*other)[1]) && std::isnan((*other)[2]));
}

TEST(JobIndexTest, DamagedPartsAreDataLoss) {
  const std::string rows = EncodeIndexRows({{1, 0, 0, 0, 0}, {2, 0, 0, 0, 0}});
  EXPECT_EQ(DecodeIndexRows(rows.substr(0, 13)).status().code(), absl::StatusCode::kDataLoss);
  const std::string backwards = EncodeIndexRows({{2, 0, 0, 0, 0}, {2, 0, 0, 0, 0}});
  EXPECT_EQ(DecodeIndexRows(backwards).status().code(), absl::StatusCode::kDataLoss);
  const std::string column = EncodeIndexColumn({1.0, 2.0});
  EXPECT_EQ(DecodeIndexColumn(column, 3).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(DecodeIndexColumn(column, 2).ok());
  EXPECT_TRUE(DecodeIndexRows("").ok());
}

}  // namespace
}  // namespace parity
