// Process-wide allocator tuning for programs that allocate one tensor buffer (up to tens of MiB)
// per operator.
#ifndef PARITY_COMMON_MEMORY_H_
#define PARITY_COMMON_MEMORY_H_

#include <cstddef>
#include <cstdint>

namespace parity {

// By default glibc serves buffers of 32 MiB or less with fresh mmaps or trims them back to the
// kernel on free, so every tensor read pays a page fault and a zero fill per 4 KiB page (21% of
// `parity compare`'s time on a dump of many files, perf). After this call, buffers below
// 64 MiB come from the heap and up to `keep_bytes` of freed heap stay mapped for reuse, so the
// resident size may exceed the live data by up to that much. Call once, at the start of main.
void KeepFreedTensorMemory(size_t keep_bytes);

// This process's resident memory now and its peak since start (VmRSS and VmHWM of
// /proc/self/status), in bytes; zero where they cannot be read.
struct ResidentMemory {
  uint64_t now = 0, peak = 0;
};
ResidentMemory ReadResidentMemory();

}  // namespace parity

#endif  // PARITY_COMMON_MEMORY_H_
