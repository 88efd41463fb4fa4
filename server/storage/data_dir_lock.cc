#include "server/storage/data_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace parity {

absl::StatusOr<std::unique_ptr<DataDirLock>> DataDirLock::Acquire(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "parityd.lock").string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open the lock file ", path, ": ", std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat("cannot lock ", path, ": ", std::strerror(err)));
    }
    std::string holder = n > 0 ? std::string(absl::StripAsciiWhitespace(std::string(buf, n))) : "";
    return absl::FailedPreconditionError(absl::StrCat(
        "data directory ", dir, " is in use by another parityd",
        holder.empty() ? "" : absl::StrCat(" (pid ", holder, ")"), "; one daemon per data directory"));
  }
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int err = errno;
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat("cannot write ", path, ": ", std::strerror(err)));
  }
  return std::unique_ptr<DataDirLock>(new DataDirLock(fd));
}

DataDirLock::~DataDirLock() { ::close(fd_); }  // releases the lock

}  // namespace parity
