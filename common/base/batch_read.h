// Reads the first bytes of many files with few system calls. On Linux with io_uring (5.6 and
// later, not refused by a seccomp filter or kernel.io_uring_disabled) a batch's opens, reads and
// closes go to the kernel one step at a time, each step one io_uring_enter for the whole batch;
// otherwise each file costs its own openat, pread and close. Where a system call is dear (a PVM
// guest: about 1.2 us before it does anything) that halves a small file's cost; where it is
// cheap (a Firecracker guest: both ways ~3.3 us a file) the kernel's own work is all there is.
#ifndef PARITY_COMMON_BATCH_READ_H_
#define PARITY_COMMON_BATCH_READ_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/types/span.h"

namespace parity {

class BatchReader {
 public:
  struct Request {
    int dir_fd = -100;           // AT_FDCWD, or a directory `name` is relative to
    const char* name = nullptr;  // the file (absolute, or relative to dir_fd)
    char* buf = nullptr;         // room for `len` bytes
    size_t len = 0;
    // When set and the read fills all `len` bytes (the file may be longer), the file is left
    // open for the caller: `fd` is then its descriptor, which the caller closes.
    bool keep_open_if_longer = false;
    // Out: the bytes read from offset 0 (fewer than `len` only at the end of a regular file),
    // or -errno of the open or the read. Files are opened O_RDONLY | O_NONBLOCK | O_CLOEXEC.
    int64_t result = 0;
    int fd = -1;  // out: see keep_open_if_longer; -1 when the file was closed
  };

  // Batches through io_uring when `use_io_uring` and the kernel allows it; plain system calls
  // otherwise. Never fails.
  static std::unique_ptr<BatchReader> Create(bool use_io_uring = true);
  virtual ~BatchReader() = default;

  virtual bool uses_io_uring() const = 0;
  // Reads every request; any number of them (io_uring submits at most kMaxBatch at a time).
  virtual void Read(absl::Span<Request> requests) = 0;

  static constexpr size_t kMaxBatch = 64;
};

}  // namespace parity

#endif  // PARITY_COMMON_BATCH_READ_H_
