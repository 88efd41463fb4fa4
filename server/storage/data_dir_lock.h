// An advisory lock on a data directory, held for the life of the object: one parityd per data
// directory. Two daemons on one SQLite file and spool would both resume the same jobs and each
// collect the other's blobs as orphans.
//
// The lock is flock(2) on DIR/parityd.lock, which holds the holder's pid as text; the kernel
// releases it when the process exits, however it exits, so a crash never leaves a stale lock.
#ifndef PARITY_SERVER_STORAGE_DATA_DIR_LOCK_H_
#define PARITY_SERVER_STORAGE_DATA_DIR_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace parity {

class DataDirLock {
 public:
  // Locks `dir` (which must exist). FAILED_PRECONDITION naming the directory and the holder's
  // pid when another process (or another DataDirLock in this one) holds it; the system's
  // reason when the lock file cannot be opened.
  static absl::StatusOr<std::unique_ptr<DataDirLock>> Acquire(const std::string& dir);
  ~DataDirLock();

  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  const int fd_;
};

}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_DATA_DIR_LOCK_H_
