#include "common/memory.h"

#include <malloc.h>

namespace parity {

void KeepFreedTensorMemory(size_t keep_bytes) {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(keep_bytes));
}

}  // namespace parity
