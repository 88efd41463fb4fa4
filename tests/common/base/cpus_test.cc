// UsableCpus follows the calling thread's affinity (what `taskset` and a container's cpuset
// set) and never answers less than 1; cgroup v2 cpu.max text gives ceil(quota / period).
#include "common/base/cpus.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

namespace parity {
namespace {

TEST(Cpus, CgroupCpuMaxIsQuotaOverPeriodRoundedUp) {
  EXPECT_EQ(CpusFromCgroupCpuMax("100000 100000\n"), 1);
  EXPECT_EQ(CpusFromCgroupCpuMax("150000 100000"), 2);
  EXPECT_EQ(CpusFromCgroupCpuMax("400000 100000\n"), 4);
  EXPECT_EQ(CpusFromCgroupCpuMax("5000 100000"), 1);  // a tenth of a CPU still gets one thread
  EXPECT_EQ(CpusFromCgroupCpuMax("max 100000\n"), std::nullopt);
  EXPECT_EQ(CpusFromCgroupCpuMax(""), std::nullopt);
  EXPECT_EQ(CpusFromCgroupCpuMax("100000"), std::nullopt);
  EXPECT_EQ(CpusFromCgroupCpuMax("-1 100000"), std::nullopt);
  EXPECT_EQ(CpusFromCgroupCpuMax("100000 0"), std::nullopt);
}

TEST(Cpus, FollowTheThreadsAffinity) {
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  const int usable = UsableCpus();
  EXPECT_GE(usable, 1);
  EXPECT_LE(usable, CPU_COUNT(&all));
  // A thread pinned to one of this process's CPUs sees one.
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c) {
    if (CPU_ISSET(c, &all)) first = c;
  }
  ASSERT_GE(first, 0);
  int pinned = 0;
  std::thread t([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) pinned = UsableCpus();
  });
  t.join();
  EXPECT_EQ(pinned, 1);
}

}  // namespace
}  // namespace parity
