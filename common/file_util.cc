#include "common/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace parity {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;

absl::Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

// Files below this size are read rather than mapped (MapFileShared).
constexpr size_t kMapMinBytes = 256 * 1024;

}  // namespace

absl::StatusOr<uint64_t> FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("cannot stat", path, errno);
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  return static_cast<uint64_t>(st.st_size);
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, uint64_t max_bytes) {
  absl::StatusOr<uint64_t> size = FileSize(path);
  if (!size.ok()) return size.status();
  if (*size > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, " is ", *size, " bytes, above the limit of ", max_bytes));
  }
  return ReadFileRange(path, 0, *size);
}

absl::StatusOr<std::string> ReadFileRange(const std::string& path, uint64_t offset,
                                          uint64_t length) {
  FilePtr f(std::fopen(path.c_str(), "rb"));
  if (!f) return ErrnoStatus("cannot open", path, errno);
  if (offset > 0 && ::fseeko(f.get(), static_cast<off_t>(offset), SEEK_SET) != 0) {
    return ErrnoStatus("cannot seek in", path, errno);
  }
  std::string data;
  data.resize(length);
  const size_t got = length == 0 ? 0 : std::fread(data.data(), 1, length, f.get());
  if (got != length) {
    if (std::ferror(f.get())) return ErrnoStatus("cannot read", path, errno);
    return absl::DataLossError(absl::StrCat(path, ": wanted ", length, " bytes at offset ", offset,
                                            ", the file ends after ", got));
  }
  return data;
}

absl::StatusOr<SharedBytes> ReadFileShared(const std::string& path) {
  absl::StatusOr<uint64_t> size = FileSize(path);
  if (!size.ok()) return size.status();
  FilePtr f(std::fopen(path.c_str(), "rb"));
  if (!f) return ErrnoStatus("cannot open", path, errno);
  const size_t length = static_cast<size_t>(*size);
  std::shared_ptr<char> buf(new char[length == 0 ? 1 : length], std::default_delete<char[]>());
  const size_t got = length == 0 ? 0 : std::fread(buf.get(), 1, length, f.get());
  if (got != length) {
    if (std::ferror(f.get())) return ErrnoStatus("cannot read", path, errno);
    return absl::DataLossError(
        absl::StrCat(path, ": wanted ", length, " bytes, the file ends after ", got));
  }
  SharedBytes out;
  out.bytes = absl::string_view(buf.get(), length);
  out.owner = std::move(buf);
  return out;
}

absl::StatusOr<SharedBytes> MapFileShared(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus("cannot stat", path, err);
  }
  const size_t length = static_cast<size_t>(st.st_size);
  if (length < kMapMinBytes) {
    // Small files are read: a mapping costs an munmap, and with it a TLB shootdown on every
    // core running the process, more than copying a few pages.
    std::shared_ptr<char> buf(new char[length == 0 ? 1 : length], std::default_delete<char[]>());
    size_t got = 0;
    while (got < length) {
      const ssize_t r = ::pread(fd, buf.get() + got, length - got, static_cast<off_t>(got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        const int err = r < 0 ? errno : 0;
        ::close(fd);
        if (err != 0) return ErrnoStatus("cannot read", path, err);
        return absl::DataLossError(
            absl::StrCat(path, ": wanted ", length, " bytes, the file ends after ", got));
      }
      got += static_cast<size_t>(r);
    }
    ::close(fd);
    SharedBytes out;
    out.bytes = absl::string_view(buf.get(), length);
    out.owner = std::move(buf);
    return out;
  }
  void* map = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (map == MAP_FAILED) return ErrnoStatus("cannot map", path, err);
  SharedBytes out;
  out.bytes = absl::string_view(static_cast<const char*>(map), length);
  out.owner = std::shared_ptr<const char>(static_cast<const char*>(map),
                                          [length](const char* p) {
                                            ::munmap(const_cast<char*>(p), length);
                                          });
  return out;
}

absl::Status WriteStringToFile(const std::string& path, const std::string& data) {
  FilePtr f(std::fopen(path.c_str(), "wb"));
  if (!f) return ErrnoStatus("cannot create", path, errno);
  if (std::fwrite(data.data(), 1, data.size(), f.get()) != data.size()) {
    return ErrnoStatus("cannot write", path, errno);
  }
  return absl::OkStatus();
}

}  // namespace parity
