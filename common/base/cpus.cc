#include "common/base/cpus.h"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace parity {

std::optional<int> CpusFromCgroupCpuMax(absl::string_view text) {
  std::vector<absl::string_view> parts =
      absl::StrSplit(absl::StripAsciiWhitespace(text), ' ', absl::SkipEmpty());
  if (parts.size() != 2) return std::nullopt;
  int64_t quota = 0, period = 0;
  if (!absl::SimpleAtoi(parts[0], &quota) || !absl::SimpleAtoi(parts[1], &period) || quota <= 0 ||
      period <= 0) {
    return std::nullopt;  // "max" (no limit) or malformed
  }
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((quota + period - 1) / period, 1 << 20)));
}

namespace {

// The file's text, or "" when it cannot be read (no cgroup v2, or no quota file). Read to the
// end of the stream: procfs and cgroupfs files report a size of 0, so ReadFileToString (which
// reads what fstat says) would return nothing for them.
std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The quota of this process's cgroup v2 (the "0::/path" line of /proc/self/cgroup), or of its
// nearest ancestor that has one; nullopt without cgroup v2 or without a quota.
std::optional<int> CgroupCpus() {
  std::string path;
  for (absl::string_view line : absl::StrSplit(ReadSmallFile("/proc/self/cgroup"), '\n')) {
    if (absl::ConsumePrefix(&line, "0::")) path = std::string(line);
  }
  if (path.empty() || path[0] != '/') return std::nullopt;
  std::optional<int> best;
  while (true) {
    const std::optional<int> here =
        CpusFromCgroupCpuMax(ReadSmallFile("/sys/fs/cgroup" + (path == "/" ? "" : path) + "/cpu.max"));
    if (here && (!best || *here < *best)) best = here;
    if (path == "/") break;
    const size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return best;
}

}  // namespace

int UsableCpus() {
  int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = std::max(1, CPU_COUNT(&set));
  if (const std::optional<int> quota = CgroupCpus()) n = std::min(n, *quota);
  return n;
}

}  // namespace parity
