#include "common/base/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status_macros.h"

namespace parity {
namespace {

absl::Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

// Files below this size are read rather than mapped (MapFileShared).
constexpr size_t kMapMinBytes = 256 * 1024;

// An open descriptor, closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  const int fd_;
};

// Opens `path` read-only; O_NONBLOCK: opening a FIFO must not wait for a writer before
// StatRegular refuses it.
absl::Status OpenForReading(const std::string& path, int* fd_out) {
  *fd_out = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (*fd_out < 0) return ErrnoStatus("cannot open", path, errno);
  return absl::OkStatus();
}

// The size of the open `fd`, or an error naming `path` when it is not a regular file.
absl::Status StatRegular(int fd, const std::string& path, uint64_t* size_out) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus("cannot stat", path, errno);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  *size_out = static_cast<uint64_t>(st.st_size);
  return absl::OkStatus();
}

// Opens `path` read-only and stats it: a regular file or an error naming the path.
absl::Status OpenRegular(const std::string& path, int* fd_out, uint64_t* size_out) {
  int fd = -1;
  absl::Status s = OpenForReading(path, &fd);
  if (!s.ok()) return s;
  s = StatRegular(fd, path, size_out);
  if (!s.ok()) {
    ::close(fd);
    return s;
  }
  *fd_out = fd;
  return absl::OkStatus();
}

// Reads up to `length` bytes at `offset` into `buf`; *got is how many there were (fewer only at
// the end of the file).
absl::Status PreadUpTo(int fd, char* buf, size_t length, uint64_t offset, const std::string& path,
                       size_t* got) {
  *got = 0;
  while (*got < length) {
    const ssize_t r = ::pread(fd, buf + *got, length - *got, static_cast<off_t>(offset + *got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoStatus("cannot read", path, errno);
    if (r == 0) break;
    *got += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

// PreadUpTo, DATA_LOSS when the file ends first.
absl::Status PreadExact(int fd, char* buf, size_t length, uint64_t offset,
                        const std::string& path) {
  size_t got = 0;
  absl::Status s = PreadUpTo(fd, buf, length, offset, path, &got);
  if (!s.ok()) return s;
  if (got != length) {
    return absl::DataLossError(absl::StrCat(path, ": wanted ", length, " bytes at offset ", offset,
                                            ", the file ends after ", got));
  }
  return absl::OkStatus();
}

// Page-aligned buffers for whole-file reads of at least kPooledReadMinBytes (ReadFileShared,
// ReadFileHeadOrWhole) and for ReadFileDirect, kept for reuse when released: a buffer's pages
// are faulted in once, not on every read (a fresh page costs a fault and a zero fill, and on a
// VM with free page reporting a trip to the host; jemalloc returns allocations of 8 MiB and more
// to the kernel as soon as they are freed). Capacities are powers of two from 64 KiB, so a buffer
// serves any size of its class (only the pages a read touches are ever resident); those of
// 2 MiB and more are advised into transparent huge pages (one fault per 2 MiB). At most
// kMaxIdleBytes of capacity wait idle: a released buffer is always kept and the buffers released
// longest ago are unmapped to make room, so the pool follows the sizes now being read (a dump's
// large tensors first, then its small ones) instead of holding on to a class no longer asked for.
class ReadBufferPool {
 public:
  static ReadBufferPool& Get() {
    static ReadBufferPool* pool = new ReadBufferPool;  // never destroyed: owners may outlive main
    return *pool;
  }
  // A buffer of at least `n` bytes; null when the address space is exhausted. Released to the
  // pool when the last owner goes.
  static size_t CapacityFor(size_t n) {
    size_t capacity = kMinCapacity;
    while (capacity < n) capacity <<= 1;
    return capacity;
  }
  std::shared_ptr<char> Take(size_t n) {
    const size_t capacity = CapacityFor(n);
    char* p = nullptr;
    {
      absl::MutexLock l(&mu_);
      in_use_bytes_ += capacity;
      peaks_.in_use_bytes = std::max<uint64_t>(peaks_.in_use_bytes, in_use_bytes_);
      // The most recently released buffer of the class: its pages are the likeliest resident.
      for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
        if (it->capacity != capacity) continue;
        p = it->p;
        idle_.erase(std::next(it).base());
        idle_bytes_ -= capacity;
        break;
      }
      if (p == nullptr) {
        peaks_.mapped_bytes = std::max<uint64_t>(peaks_.mapped_bytes, in_use_bytes_ + idle_bytes_);
      }
    }
    if (p == nullptr) {
      void* m = ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) {
        absl::MutexLock l(&mu_);
        in_use_bytes_ -= capacity;
        return nullptr;
      }
      mappings_.fetch_add(1, std::memory_order_relaxed);
      if (capacity >= (size_t{2} << 20)) ::madvise(m, capacity, MADV_HUGEPAGE);  // advisory
      p = static_cast<char*>(m);
    }
    return std::shared_ptr<char>(p, [this, capacity](char* q) { Give(q, capacity); });
  }
  uint64_t mappings() const { return mappings_.load(std::memory_order_relaxed); }
  PooledBufferPeaks peaks() {
    absl::MutexLock l(&mu_);
    return peaks_;
  }
  void set_limits(size_t max_idle, size_t max_total) {
    absl::MutexLock l(&mu_);
    max_idle_bytes_ = max_idle;
    max_total_bytes_ = max_total;
  }

 private:
  struct Idle {
    size_t capacity;
    char* p;
  };
  void Give(char* p, size_t capacity) {
    std::vector<Idle> unmap;
    {
      absl::MutexLock l(&mu_);
      in_use_bytes_ -= capacity;
      idle_.push_back({capacity, p});
      idle_bytes_ += capacity;
      // The oldest idle buffers go first (this one last).
      while (!idle_.empty() && (idle_bytes_ > max_idle_bytes_ || idle_bytes_ + in_use_bytes_ > max_total_bytes_)) {
        unmap.push_back(idle_.front());
        idle_bytes_ -= idle_.front().capacity;
        idle_.pop_front();
      }
    }
    for (const Idle& i : unmap) ::munmap(i.p, i.capacity);
  }
  static constexpr size_t kMinCapacity = size_t{64} << 10;
  std::atomic<uint64_t> mappings_{0};
  absl::Mutex mu_;
  size_t max_idle_bytes_ ABSL_GUARDED_BY(mu_) = size_t{128} << 20;
  size_t max_total_bytes_ ABSL_GUARDED_BY(mu_) = SIZE_MAX;
  std::deque<Idle> idle_ ABSL_GUARDED_BY(mu_);  // oldest release first
  size_t idle_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t in_use_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  PooledBufferPeaks peaks_ ABSL_GUARDED_BY(mu_);
};

// Whole-file reads from this size up use ReadBufferPool.
constexpr size_t kPooledReadMinBytes = size_t{1} << 20;

// The whole of an open file of `length` bytes in a shared buffer, without zero fill.
absl::StatusOr<SharedBytes> ReadShared(int fd, size_t length, const std::string& path, uint64_t offset = 0) {
  std::shared_ptr<char> buf;
  if (length >= kPooledReadMinBytes) buf = ReadBufferPool::Get().Take(length);
  if (buf == nullptr) buf.reset(new char[length == 0 ? 1 : length], std::default_delete<char[]>());
  absl::Status s = PreadExact(fd, buf.get(), length, offset, path);
  if (!s.ok()) return s;
  SharedBytes out;
  out.bytes = absl::string_view(buf.get(), length);
  out.owner = std::move(buf);
  return out;
}

}  // namespace

absl::StatusOr<uint64_t> FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("cannot stat", path, errno);
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  return static_cast<uint64_t>(st.st_size);
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, uint64_t max_bytes) {
  int fd = -1;
  uint64_t size = 0;
  absl::Status s = OpenRegular(path, &fd, &size);
  if (!s.ok()) return s;
  Fd closer(fd);
  if (size > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, " is ", size, " bytes, above the limit of ", max_bytes));
  }
  std::string data(size, '\0');
  s = PreadExact(fd, data.data(), data.size(), 0, path);
  if (!s.ok()) return s;
  return data;
}

absl::StatusOr<std::string> ReadFileRange(const std::string& path, uint64_t offset,
                                          uint64_t length) {
  int fd = -1;
  uint64_t size = 0;
  absl::Status s = OpenRegular(path, &fd, &size);
  if (!s.ok()) return s;
  Fd closer(fd);
  std::string data(length, '\0');
  s = PreadExact(fd, data.data(), data.size(), offset, path);
  if (!s.ok()) return s;
  return data;
}

absl::StatusOr<SharedBytes> ReadFileRangeShared(const std::string& path, uint64_t offset, uint64_t length) {
  int fd = -1;
  uint64_t size = 0;
  absl::Status s = OpenRegular(path, &fd, &size);
  if (!s.ok()) return s;
  Fd closer(fd);
  return ReadShared(fd, static_cast<size_t>(length), path, offset);
}

absl::StatusOr<FileHead> ReadFileHead(const std::string& path, size_t max_bytes) {
  SharedBytes whole;  // with whole_max_bytes 0 only an empty file is kept whole: an empty head
  return ReadFileHeadOrWhole(path, max_bytes, 0, nullptr, &whole);
}

char* SmallFileArena::Reserve(size_t n) {
  if (n > kChunkBytes) return nullptr;
  if (used_ + n > kChunkBytes) {
    // A 2 MiB-aligned chunk (huge pages need the alignment): map twice that, unmap the slack.
    void* raw = ::mmap(nullptr, 2 * kChunkBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t start = (begin + kChunkBytes - 1) & ~(uintptr_t{kChunkBytes} - 1);
    if (start > begin) ::munmap(raw, start - begin);
    const uintptr_t end = begin + 2 * kChunkBytes;
    if (end > start + kChunkBytes) {
      ::munmap(reinterpret_cast<void*>(start + kChunkBytes), end - (start + kChunkBytes));
    }
    ::madvise(reinterpret_cast<void*>(start), kChunkBytes, MADV_HUGEPAGE);  // advice only
    chunk_ = std::shared_ptr<char>(reinterpret_cast<char*>(start),
                                   [](char* p) { ::munmap(p, kChunkBytes); });
    used_ = 0;
  }
  return chunk_.get() + used_;
}

void SmallFileArena::Recycle() {
  if (chunk_ != nullptr && chunk_.use_count() == 1) used_ = 0;
}

std::shared_ptr<char> SmallFileArena::Take(size_t n) {
  if (Reserve(n) == nullptr) return nullptr;
  std::shared_ptr<char> out(chunk_, chunk_.get() + used_);  // shares the chunk's ownership
  used_ += (n + 63) & ~size_t{63};
  return out;
}

absl::StatusOr<FileHead> ReadFileHeadOrWhole(const std::string& path, size_t max_bytes,
                                             size_t whole_max_bytes, SmallFileArena* arena,
                                             SharedBytes* whole) {
  *whole = SharedBytes();
  int fd = -1;
  absl::Status s = OpenForReading(path, &fd);
  if (!s.ok()) return s;
  Fd closer(fd);
  FileHead head;
  const char* probed = nullptr;  // the first probed_bytes of the file, when read already
  size_t probed_bytes = 0;
  if (arena != nullptr && whole_max_bytes > 0) {
    // One read of up to kProbeReadBytes + 1 bytes straight into the arena, no fstat: a regular
    // file's read returns fewer bytes than asked only at its end (Linux cuts reads of local
    // files short only for a fatal signal), so a short read is the whole file. An error or an
    // empty read (a directory, a FIFO, /dev/null, an empty file) and a longer file go the
    // general way below, which gives the precise error.
    const size_t probe = std::min(whole_max_bytes, kProbeReadBytes);
    if (char* room = arena->Reserve(probe + 1); room != nullptr) {
      ssize_t r;
      do {
        r = ::pread(fd, room, probe + 1, 0);
      } while (r < 0 && errno == EINTR);
      if (r > 0 && static_cast<size_t>(r) <= probe) {
        head.file_size = static_cast<uint64_t>(r);
        std::shared_ptr<char> buf = arena->Take(static_cast<size_t>(r));  // starts at `room`
        whole->bytes = absl::string_view(buf.get(), static_cast<size_t>(r));
        whole->owner = std::move(buf);
        return head;
      }
      if (r > 0) {
        probed = room;
        probed_bytes = static_cast<size_t>(r);
      }
    }
  }
  s = StatRegular(fd, path, &head.file_size);
  if (!s.ok()) return s;
  if (head.file_size <= whole_max_bytes) {
    const size_t length = static_cast<size_t>(head.file_size);
    std::shared_ptr<char> buf = arena != nullptr ? arena->Take(length) : nullptr;
    if (buf == nullptr) {
      absl::StatusOr<SharedBytes> all = ReadShared(fd, length, path);
      if (!all.ok()) return all.status();
      *whole = std::move(*all);
      return head;
    }
    s = PreadExact(fd, buf.get(), length, 0, path);
    if (!s.ok()) return s;
    whole->bytes = absl::string_view(buf.get(), length);
    whole->owner = std::move(buf);
    return head;
  }
  head.bytes.resize(static_cast<size_t>(std::min<uint64_t>(head.file_size, max_bytes)));
  if (head.bytes.size() <= probed_bytes) {
    head.bytes.assign(probed, head.bytes.size());
    return head;
  }
  size_t got = 0;
  s = PreadUpTo(fd, head.bytes.data(), head.bytes.size(), 0, path, &got);
  if (!s.ok()) return s;
  head.bytes.resize(got);
  return head;
}

absl::StatusOr<SharedBytes> ReadFileShared(const std::string& path) {
  int fd = -1;
  uint64_t size = 0;
  absl::Status s = OpenRegular(path, &fd, &size);
  if (!s.ok()) return s;
  Fd closer(fd);
  return ReadShared(fd, static_cast<size_t>(size), path);
}

absl::StatusOr<SharedBytes> MapFileShared(const std::string& path) {
  int fd = -1;
  uint64_t size = 0;
  absl::Status s = OpenRegular(path, &fd, &size);
  if (!s.ok()) return s;
  Fd closer(fd);
  const size_t length = static_cast<size_t>(size);
  // Small files are read: a mapping costs an munmap, and with it a TLB shootdown on every
  // core running the process, more than copying a few pages.
  if (length < kMapMinBytes) return ReadShared(fd, length, path);
  void* map = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (map == MAP_FAILED) return ErrnoStatus("cannot map", path, errno);
  SharedBytes out;
  out.bytes = absl::string_view(static_cast<const char*>(map), length);
  out.owner = std::shared_ptr<const char>(static_cast<const char*>(map),
                                          [length](const char* p) {
                                            ::munmap(const_cast<char*>(p), length);
                                          });
  return out;
}

uint64_t OpenFileLimit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return uint64_t{1} << 40;
  return static_cast<uint64_t>(r.rlim_cur);
}

uint64_t RaiseOpenFileLimit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &r);  // refused: the old limit stays
  }
  return OpenFileLimit();
}

absl::StatusOr<RandomAccessFile> RandomAccessFile::Open(const std::string& path) {
  int fd = -1;
  absl::Status s = OpenForReading(path, &fd);
  if (!s.ok()) return s;
  return Adopt(fd, path);
}

absl::StatusOr<RandomAccessFile> RandomAccessFile::Adopt(int fd, const std::string& path) {
  uint64_t size = 0;
  absl::Status s = StatRegular(fd, path, &size);
  if (!s.ok()) {
    ::close(fd);
    return s;
  }
  std::shared_ptr<const int> owner(new int(fd), [](const int* p) {
    ::close(*p);
    delete p;
  });
  return RandomAccessFile(std::move(owner), std::make_shared<const std::string>(path), size);
}

absl::Status RandomAccessFile::ReadExact(uint64_t offset, size_t length, char* buf) const {
  return PreadExact(*fd_, buf, length, offset, *path_);
}

absl::Status RandomAccessFile::ReadUpTo(uint64_t offset, size_t length, char* buf, size_t* got) const {
  return PreadUpTo(*fd_, buf, length, offset, *path_, got);
}

std::shared_ptr<char> TakePooledBuffer(size_t n) { return ReadBufferPool::Get().Take(n); }
uint64_t PooledBufferMappings() { return ReadBufferPool::Get().mappings(); }
PooledBufferPeaks PooledBufferPeakBytes() { return ReadBufferPool::Get().peaks(); }
size_t PooledBufferCapacity(size_t n) { return ReadBufferPool::CapacityFor(n); }
void SetPooledBufferLimits(size_t max_idle_bytes, size_t max_total_bytes) {
  ReadBufferPool::Get().set_limits(max_idle_bytes, max_total_bytes);
}

absl::StatusOr<SharedBytes> ReadFileDirect(const std::string& path) {
  constexpr size_t kAlign = 4096;  // O_DIRECT: buffer, offsets and lengths in whole blocks
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_DIRECT);
  if (fd < 0) {
    if (errno == EINVAL) return MapFileShared(path);
    return ErrnoStatus("cannot open", path, errno);
  }
  Fd closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus("cannot stat", path, errno);
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  const size_t length = static_cast<size_t>(st.st_size);
  const size_t capacity = std::max(kAlign, (length + kAlign - 1) / kAlign * kAlign);
  std::shared_ptr<char> owner = ReadBufferPool::Get().Take(capacity);
  if (owner == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", capacity, " bytes to read ", path));
  }
  char* buf = owner.get();
  size_t got = 0;
  while (got < length) {
    // Whole blocks, up to 64 MiB per call (the kernel splits them into concurrent requests).
    const size_t want = std::min<size_t>(capacity - got, size_t{64} << 20);
    const ssize_t n = ::pread(fd, buf + got, want, static_cast<off_t>(got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot read", path, errno);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
    if (got % kAlign != 0) break;  // a short read ends the file
  }
  if (got < length) {
    return absl::DataLossError(absl::StrCat(path, " shrank while it was read: ", got, " of ", length, " bytes"));
  }
  SharedBytes out;
  out.bytes = absl::string_view(buf, length);
  out.owner = std::move(owner);
  return out;
}

absl::Status WriteStringToFile(const std::string& path, const std::string& data) {
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<FileWriter> w, FileWriter::Create(path));
  absl::Status s = w->Append(data);
  absl::Status closed = w->Close();
  return s.ok() ? closed : s;
}

absl::StatusOr<std::unique_ptr<FileWriter>> FileWriter::Create(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return ErrnoStatus("cannot create", path, errno);
  return std::unique_ptr<FileWriter>(new FileWriter(path, f));
}

FileWriter::~FileWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

absl::Status FileWriter::Append(absl::string_view data) {
  if (!status_.ok()) return status_;
  if (f_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, ": written after Close"));
  if (std::fwrite(data.data(), 1, data.size(), f_) != data.size()) {
    status_ = ErrnoStatus("cannot write", path_, errno);
  }
  return status_;
}

absl::Status FileWriter::Close() {
  if (f_ == nullptr) return status_;
  // A full disk often shows only when the buffer is flushed by fclose.
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0 && status_.ok()) status_ = ErrnoStatus("cannot write", path_, errno);
  return status_;
}

absl::StatusOr<std::vector<DirEntry>> ListDirectory(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoStatus("cannot list directory", dir, errno);
  std::unique_ptr<DIR, int (*)(DIR*)> closer(d, ::closedir);
  std::vector<DirEntry> out;
  while (true) {
    errno = 0;
    const struct dirent* e = ::readdir(d);
    if (e == nullptr) {
      if (errno != 0) return ErrnoStatus("cannot list directory", dir, errno);
      break;
    }
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    DirEntry entry;
    entry.name = e->d_name;
    unsigned char type = e->d_type;
    struct stat st;
    if (type == DT_UNKNOWN && ::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
      type = S_ISLNK(st.st_mode) ? DT_LNK : S_ISREG(st.st_mode) ? DT_REG : S_ISDIR(st.st_mode) ? DT_DIR : DT_UNKNOWN;
    }
    entry.is_link = type == DT_LNK;
    if (type == DT_LNK) {
      type = ::fstatat(::dirfd(d), e->d_name, &st, 0) != 0 ? DT_UNKNOWN
             : S_ISREG(st.st_mode)                        ? DT_REG
             : S_ISDIR(st.st_mode)                        ? DT_DIR
                                                          : DT_UNKNOWN;
    }
    entry.is_regular = type == DT_REG;
    entry.is_directory = type == DT_DIR;
    out.push_back(std::move(entry));
  }
  std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return out;
}

}  // namespace parity
