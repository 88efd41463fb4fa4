#include "common/base/memory.h"

#include <malloc.h>

#include <cstdio>

namespace parity {

void KeepFreedTensorMemory(size_t keep_bytes) {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(keep_bytes));
}

ResidentMemory ReadResidentMemory() {
  ResidentMemory m;
  std::FILE* f = std::fopen("/proc/self/status", "re");
  if (f == nullptr) return m;
  char line[256];
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    unsigned long long kib = 0;
    if (std::sscanf(line, "VmRSS: %llu kB", &kib) == 1) m.now = kib << 10;
    if (std::sscanf(line, "VmHWM: %llu kB", &kib) == 1) m.peak = kib << 10;
  }
  std::fclose(f);
  return m;
}

}  // namespace parity
