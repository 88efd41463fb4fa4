// LD_PRELOAD fault injection for the disk-full and read-only tests (tests/e2e/disk_fault_test.cc).
//
// While the file named by $PARITY_FAULT_FILE starts with "ENOSPC" or "EROFS", every write to a
// regular file (write, pwrite, writev, pwritev, fallocate) and every open of a regular file for
// writing or creation fails with that errno, as it would on a full or read-only file system.
// "ENOSPC skip=N fail=M" (or EROFS) counts those calls from the moment the file says so: the
// first N go through, the next M fail, the rest go through again: a fault at a named point of
// the daemon's work, not at a moment. Sockets, pipes, reads and the standard streams are
// untouched, and with the file absent nothing changes. A real full file system needs mount
// rights the test machine may not have; this needs none.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

template <typename Fn>
Fn Next(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
}

using OpenFn = int (*)(const char*, int, ...);
using OpenatFn = int (*)(int, const char*, int, ...);

// The calls counted since the fault file last changed (see the top), and what it said then.
std::atomic<long> g_calls{0};
std::atomic_flag g_seen_lock = ATOMIC_FLAG_INIT;
char g_seen[64] = {};

// Reads a "key=N" number from `spec`; `fallback` when absent.
long SpecNumber(const char* spec, const char* key, long fallback) {
  const char* at = std::strstr(spec, key);
  return at == nullptr ? fallback : std::strtol(at + std::strlen(key), nullptr, 10);
}

// The errno to fail with now, or 0 (one call counted).
int Fault() {
  const char* flag = std::getenv("PARITY_FAULT_FILE");
  if (flag == nullptr) return 0;
  static OpenFn real_open = Next<OpenFn>("open");
  const int fd = real_open(flag, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[64] = {};
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  int e = 0;
  if (n >= 6 && std::strncmp(buf, "ENOSPC", 6) == 0) e = ENOSPC;
  if (n >= 5 && std::strncmp(buf, "EROFS", 5) == 0) e = EROFS;
  if (e == 0 || std::strstr(buf, "skip=") == nullptr) return e;
  while (g_seen_lock.test_and_set(std::memory_order_acquire)) {
  }
  if (std::strcmp(buf, g_seen) != 0) {  // a new spec: count from here
    std::memcpy(g_seen, buf, sizeof(g_seen));
    g_calls = 0;
  }
  const long call = g_calls++;
  g_seen_lock.clear(std::memory_order_release);
  const long skip = SpecNumber(buf, "skip=", 0), fail = SpecNumber(buf, "fail=", 1L << 62);
  return call >= skip && call < skip + fail ? e : 0;
}

int FaultOnFile(int fd) {
  if (fd <= 2) return 0;  // stdin/out/err: the daemon's log stays readable
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  return Fault();
}

// Opening for writing fails on a read-only file system (and creating fails when full) unless
// the path is not a regular file (/dev/null, sockets).
int FaultOnOpen(int dirfd, const char* path, int flags) {
  if ((flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) == 0) return 0;
  struct stat st;
  if (::fstatat(dirfd, path, &st, 0) == 0 && !S_ISREG(st.st_mode)) return 0;
  const int e = Fault();
  if (e == EROFS) return e;
  if (e == ENOSPC && (flags & O_CREAT) != 0 && ::fstatat(dirfd, path, &st, 0) != 0) return e;
  return 0;
}

// Runs `call` unless the fault applies to `fd`.
template <typename Call>
auto OnFile(int fd, Call call) -> decltype(call()) {
  if (const int e = FaultOnFile(fd)) {
    errno = e;
    return -1;
  }
  return call();
}

// Runs `call` unless the fault applies to opening `path` with `flags`.
template <typename Call>
int OnOpen(int dirfd, const char* path, int flags, Call call) {
  if (const int e = FaultOnOpen(dirfd, path, flags)) {
    errno = e;
    return -1;
  }
  return call();
}

}  // namespace

// The mode argument of open(2), present only with O_CREAT or O_TMPFILE.
#define PARITY_OPEN_MODE(flags, mode)          \
  mode_t mode = 0;                             \
  if (((flags) & (O_CREAT | O_TMPFILE)) != 0) { \
    va_list ap;                                \
    va_start(ap, flags);                       \
    mode = va_arg(ap, mode_t);                 \
    va_end(ap);                                \
  }

extern "C" {

ssize_t write(int fd, const void* buf, size_t n) {
  static auto real = Next<ssize_t (*)(int, const void*, size_t)>("write");
  return OnFile(fd, [&] { return real(fd, buf, n); });
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  static auto real = Next<ssize_t (*)(int, const void*, size_t, off_t)>("pwrite");
  return OnFile(fd, [&] { return real(fd, buf, n, off); });
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t off) {
  static auto real = Next<ssize_t (*)(int, const void*, size_t, off64_t)>("pwrite64");
  return OnFile(fd, [&] { return real(fd, buf, n, off); });
}

ssize_t writev(int fd, const struct iovec* iov, int n) {
  static auto real = Next<ssize_t (*)(int, const struct iovec*, int)>("writev");
  return OnFile(fd, [&] { return real(fd, iov, n); });
}

ssize_t pwritev(int fd, const struct iovec* iov, int n, off_t off) {
  static auto real = Next<ssize_t (*)(int, const struct iovec*, int, off_t)>("pwritev");
  return OnFile(fd, [&] { return real(fd, iov, n, off); });
}

int fallocate(int fd, int mode, off_t off, off_t len) {
  static auto real = Next<int (*)(int, int, off_t, off_t)>("fallocate");
  return OnFile(fd, [&] { return real(fd, mode, off, len); });
}

int open(const char* path, int flags, ...) {
  static auto real = Next<OpenFn>("open");
  PARITY_OPEN_MODE(flags, mode)
  return OnOpen(AT_FDCWD, path, flags, [&] { return real(path, flags, mode); });
}

int open64(const char* path, int flags, ...) {
  static auto real = Next<OpenFn>("open64");
  PARITY_OPEN_MODE(flags, mode)
  return OnOpen(AT_FDCWD, path, flags, [&] { return real(path, flags, mode); });
}

int openat(int dirfd, const char* path, int flags, ...) {
  static auto real = Next<OpenatFn>("openat");
  PARITY_OPEN_MODE(flags, mode)
  return OnOpen(dirfd, path, flags, [&] { return real(dirfd, path, flags, mode); });
}

}  // extern "C"
