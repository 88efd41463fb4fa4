#include "server/core/shares.h"

#include <vector>

#include "gtest/gtest.h"

namespace parity {
namespace {

ShareLimits Limits(int total, int per_project, int per_token) {
  return {total, per_project, per_token, "max-x", "max-x-per-project", "max-x-per-token", "things"};
}

TEST(SharesTest, EachLimitRefusesWithItsFlagAndReleasingMakesRoom) {
  Shares s(Limits(5, 3, 2));
  std::vector<std::unique_ptr<Shares::Lease>> held;
  auto take = [&](const std::string& token, const std::string& project) {
    absl::StatusOr<std::unique_ptr<Shares::Lease>> l = s.Acquire(token, project);
    if (l.ok()) held.push_back(std::move(*l));
    return l.status();
  };
  ASSERT_TRUE(take("t1", "A").ok());
  ASSERT_TRUE(take("t1", "A").ok());
  absl::Status third = take("t1", "A");
  EXPECT_TRUE(absl::IsResourceExhausted(third));
  EXPECT_EQ(third.message(), "too many things with token t1 (parityd --max-x-per-token=2); retry later");
  ASSERT_TRUE(take("t2", "A").ok());
  absl::Status project = take("t3", "A");
  EXPECT_TRUE(absl::IsResourceExhausted(project));
  EXPECT_EQ(project.message(), "too many things in project 'A' (parityd --max-x-per-project=3); retry later");
  ASSERT_TRUE(take("t3", "B").ok());
  ASSERT_TRUE(take("", "").ok());  // no token, project not known yet
  absl::Status total = take("t4", "C");
  EXPECT_TRUE(absl::IsResourceExhausted(total));
  EXPECT_EQ(total.message(), "too many things (parityd --max-x=5); retry later");
  EXPECT_EQ(s.held(), 5);
  held.erase(held.begin());  // one of t1's in A
  EXPECT_EQ(s.held(), 4);
  EXPECT_TRUE(take("t1", "A").ok());
  EXPECT_EQ(s.high_water(), 5);
}

TEST(SharesTest, AProjectLearnedLaterCountsThenAndCanBeRefused) {
  Shares s(Limits(0, 1, 0));
  absl::StatusOr<std::unique_ptr<Shares::Lease>> a = s.Acquire("", "*");
  absl::StatusOr<std::unique_ptr<Shares::Lease>> b = s.Acquire("", "");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE((*a)->SetProject("P").ok());
  EXPECT_TRUE((*a)->SetProject("Q").ok());  // counted once, against its first project
  absl::Status refused = (*b)->SetProject("P");
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_TRUE((*b)->SetProject("Q").ok());
  a->reset();
  absl::StatusOr<std::unique_ptr<Shares::Lease>> c = s.Acquire("", "P");
  EXPECT_TRUE(c.ok()) << c.status();
  absl::StatusOr<std::unique_ptr<Shares::Lease>> d = s.Acquire("", "Q");
  EXPECT_FALSE(d.ok());
}

}  // namespace
}  // namespace parity
