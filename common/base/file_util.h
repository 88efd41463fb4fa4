// Whole-file and ranged reads, and file writes, with errors that name the path.
#ifndef PARITY_COMMON_FILE_UTIL_H_
#define PARITY_COMMON_FILE_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace parity {

// Reads the whole file. NOT_FOUND when it does not exist; RESOURCE_EXHAUSTED when it is larger
// than max_bytes.
absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             uint64_t max_bytes = UINT64_MAX);
// Reads exactly `length` bytes at `offset`; DATA_LOSS when the file is shorter.
absl::StatusOr<std::string> ReadFileRange(const std::string& path, uint64_t offset,
                                          uint64_t length);
absl::StatusOr<uint64_t> FileSize(const std::string& path);
// The first min(file size, max_bytes) bytes of a regular file and its size, with one open, one
// fstat and one read (fewer bytes only if the file shrank meanwhile).
struct FileHead {
  std::string bytes;
  uint64_t file_size = 0;
};
absl::StatusOr<FileHead> ReadFileHead(const std::string& path, size_t max_bytes);

// The whole file in a shared, uninitialised-then-filled buffer (no zero fill, one copy from the
// page cache); same errors as ReadFileToString. Files of 1 MiB and more are read into buffers
// of TakePooledBuffer's pool, whose pages stay mapped for the next read once released.
struct SharedBytes {
  std::shared_ptr<const char> owner;
  absl::string_view bytes;  // inside *owner
};
absl::StatusOr<SharedBytes> ReadFileShared(const std::string& path);
// ReadFileRange into such a buffer (pooled from 1 MiB on): no zero fill, no second copy.
absl::StatusOr<SharedBytes> ReadFileRangeShared(const std::string& path, uint64_t offset, uint64_t length);
// Buffers for many small files read whole and kept together (a directory listing's), carved
// from 2 MiB chunks that the kernel may back with transparent huge pages: keeping tens of MiB
// of small files then costs a few page faults, not one per 4 KiB. A chunk is unmapped when the
// last buffer carved from it is released. Not thread-safe.
class SmallFileArena {
 public:
  static constexpr size_t kChunkBytes = size_t{2} << 20;
  // A buffer of n <= kChunkBytes bytes; null for a larger n or when no memory can be mapped.
  std::shared_ptr<char> Take(size_t n);
  // Room for n <= kChunkBytes bytes (null as for Take): the next Take(k), k <= n, returns a
  // buffer that starts at the returned address and keeps what was written there.
  char* Reserve(size_t n);
  // Lets the next Take reuse the current chunk from its start when no buffer carved from it is
  // still held (its pages are then already faulted in and likely cached); otherwise the next
  // Take carves on as before.
  void Recycle();

 private:
  std::shared_ptr<char> chunk_;
  size_t used_ = kChunkBytes;
};

// ReadFileHead, except that a file of at most `whole_max_bytes` is read whole into *whole (the
// same one open, one fstat, one read; into a buffer from `arena` when given, and with an arena
// a file of at most kProbeReadBytes takes one open and one read, no fstat), and `bytes` is
// then left empty: its head is the start of whole->bytes. *whole is left empty (null owner)
// for a larger file.
inline constexpr size_t kProbeReadBytes = 16 << 10;
absl::StatusOr<FileHead> ReadFileHeadOrWhole(const std::string& path, size_t max_bytes,
                                             size_t whole_max_bytes, SmallFileArena* arena,
                                             SharedBytes* whole);
// The whole file mapped read-only and prefaulted (no copy, no zero fill), unmapped when the last
// owner goes. Only for files nobody truncates while they are mapped (a truncated mapping faults
// with SIGBUS): parityd's spool blobs, which are never rewritten. Files under 256 KiB are read
// instead (unmapping costs more than the copy).
absl::StatusOr<SharedBytes> MapFileShared(const std::string& path);
// The whole file read with O_DIRECT (past the page cache) into a page-aligned pooled buffer, for
// files written with O_DIRECT (parityd's large spool blobs): their pages are not cached, and
// reading them through the cache would first fill it, a fresh page per 4 KiB. Where the file
// system refuses O_DIRECT (tmpfs), the same as MapFileShared. A file that shrinks while it is
// read is DATA_LOSS.
absl::StatusOr<SharedBytes> ReadFileDirect(const std::string& path);
// A page-aligned buffer of at least `n` bytes from the pool of ReadFileDirect and of large
// ReadFileShared reads (its pages are faulted in once and reused, not zeroed again), returned to
// the pool when the last owner goes; null when no memory can be mapped. Contents are whatever
// the last user left.
std::shared_ptr<char> TakePooledBuffer(size_t n);
// How many buffers that pool has mapped since the process started (a fresh mapping: fresh pages).
uint64_t PooledBufferMappings();
// The most bytes (whole buffers) of that pool in use at once, and in use and idle together.
struct PooledBufferPeaks {
  uint64_t in_use_bytes = 0;
  uint64_t mapped_bytes = 0;
};
PooledBufferPeaks PooledBufferPeakBytes();
// The capacity TakePooledBuffer(n) takes: the power of two from 64 KiB that holds `n` bytes.
size_t PooledBufferCapacity(size_t n);
// Released buffers stay mapped for reuse while at most `max_idle_bytes` of them are idle and the
// pool's buffers, in use and idle, take at most `max_total_bytes`; beyond either the oldest idle
// ones are unmapped (defaults: 128 MiB idle, no total). A daemon keeps what it needed once for
// the next upload (on a VM with free page reporting memory handed back is faulted in from the
// host again) within a bound on its memory. Sizes count whole buffers (PooledBufferCapacity).
void SetPooledBufferLimits(size_t max_idle_bytes, size_t max_total_bytes);
// A regular file open for reads at offsets (pread: callers on several threads may share it);
// closed when the last copy goes.
// This process's soft limit on open files (RLIMIT_NOFILE); a very large number when unlimited
// or unknown.
uint64_t OpenFileLimit();
// Raises that soft limit to the hard limit (best effort: unchanged where refused); returns the
// soft limit in force after.
uint64_t RaiseOpenFileLimit();

class RandomAccessFile {
 public:
  // NOT_FOUND, PERMISSION_DENIED, INVALID_ARGUMENT (not a regular file) or INTERNAL, naming
  // `path`.
  static absl::StatusOr<RandomAccessFile> Open(const std::string& path);
  // Takes over `fd`, open for reading `path` (closed here on an error): the errors of Open
  // after its open.
  static absl::StatusOr<RandomAccessFile> Adopt(int fd, const std::string& path);
  const std::string& path() const { return *path_; }
  uint64_t size() const { return size_; }  // when opened
  // Exactly `length` bytes at `offset` into `buf`; DATA_LOSS when the file ends first.
  absl::Status ReadExact(uint64_t offset, size_t length, char* buf) const;
  // Up to `length` bytes; *got is how many there were (fewer only at the end of the file).
  absl::Status ReadUpTo(uint64_t offset, size_t length, char* buf, size_t* got) const;

 private:
  RandomAccessFile(std::shared_ptr<const int> fd, std::shared_ptr<const std::string> path, uint64_t size)
      : fd_(std::move(fd)), path_(std::move(path)), size_(size) {}
  std::shared_ptr<const int> fd_;
  std::shared_ptr<const std::string> path_;
  uint64_t size_ = 0;
};

absl::Status WriteStringToFile(const std::string& path, const std::string& data);

// Writes a new file (an existing one is truncated) a piece at a time, through stdio's buffer.
// Errors name the path and the system's reason ("cannot create P: ...", "cannot write P: ...");
// after one, Append and Close return it again. A full disk may show only at Close.
class FileWriter {
 public:
  static absl::StatusOr<std::unique_ptr<FileWriter>> Create(const std::string& path);
  ~FileWriter();  // closes the file if Close was not called (its result is then lost)
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  absl::Status Append(absl::string_view data);
  absl::Status Close();

 private:
  FileWriter(std::string path, FILE* f) : path_(std::move(path)), f_(f) {}
  const std::string path_;
  FILE* f_;
  absl::Status status_;
};

// One entry of a directory listing; the type follows symbolic links (a link to a regular file
// is a regular file, a dangling link neither).
struct DirEntry {
  std::string name;  // the file name, without the directory
  bool is_regular = false;
  bool is_directory = false;
  bool is_link = false;  // the entry itself is a symbolic link
};
// The entries of `dir` other than "." and "..", sorted by name (byte order), with one getdents
// pass (a stat only for the entries whose type the file system does not report, and for links).
// NOT_FOUND, PERMISSION_DENIED or INTERNAL naming `dir` when it cannot be listed.
absl::StatusOr<std::vector<DirEntry>> ListDirectory(const std::string& dir);

}  // namespace parity

#endif  // PARITY_COMMON_FILE_UTIL_H_
