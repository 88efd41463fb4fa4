// How many CPUs this process may use, for sizing thread pools by default.
#ifndef PARITY_COMMON_CPUS_H_
#define PARITY_COMMON_CPUS_H_

#include <optional>

#include "absl/strings/string_view.h"

namespace parity {

// The CPUs the calling thread may run on (its affinity mask: `taskset`, a container's cpuset),
// further capped by the cgroup v2 CPU quota of this process (`docker --cpus`, a Kubernetes CPU
// limit), rounded up; at least 1. std::thread::hardware_concurrency() counts the machine's
// CPUs and ignores both.
int UsableCpus();

// The CPU count a cgroup v2 `cpu.max` file allows ("QUOTA PERIOD", or "max PERIOD" for none):
// ceil(QUOTA / PERIOD), at least 1; nullopt for "max" or text that is not of that form.
std::optional<int> CpusFromCgroupCpuMax(absl::string_view text);

}  // namespace parity

#endif  // PARITY_COMMON_CPUS_H_
