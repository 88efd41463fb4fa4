#include "server/storage/spool.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace parity {

namespace fs = std::filesystem;

struct Spool::Writer::HashState {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~HashState() { EVP_MD_CTX_free(ctx); }
};

namespace {
absl::Status Errno(const std::string& what, const std::string& path) {
  const int e = errno;
  std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(e));
  if (e == ENOSPC || e == EDQUOT) return absl::ResourceExhaustedError(msg);
  if (e == EROFS || e == EACCES || e == EPERM) return absl::FailedPreconditionError(msg);
  return absl::InternalError(msg);
}

absl::Status FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return Errno("cannot open directory", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? absl::OkStatus() : Errno("cannot fsync", dir);
}
}  // namespace

absl::StatusOr<std::unique_ptr<Spool>> Spool::Open(const SpoolOptions& options) {
  std::error_code ec;
  fs::create_directories(fs::path(options.dir) / "tmp", ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create spool ", options.dir, ": ", ec.message()));
  // Probe that the directory is writable now rather than at the first upload.
  const std::string probe = (fs::path(options.dir) / "tmp" / ".probe").string();
  const int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0) return Errno("spool directory is not writable:", probe);
  ::close(fd);
  ::unlink(probe.c_str());
  std::unique_ptr<Spool> s(new Spool(options));
  uint64_t used = 0;
  for (const auto& e : fs::recursive_directory_iterator(options.dir, ec)) {
    if (e.is_regular_file() && e.path().parent_path().filename() != "tmp") used += e.file_size();
  }
  absl::MutexLock l(&s->mu_);
  s->used_ = used;
  return s;
}

absl::StatusOr<std::unique_ptr<Spool::Writer>> Spool::Create(uint64_t size) {
  uint64_t id;
  {
    absl::MutexLock l(&mu_);
    if (used_ + reserved_ + size > options_.quota_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "spool quota exceeded: ", size, " more bytes would pass spool_quota_bytes=",
          options_.quota_bytes, " (", used_, " used, ", reserved_, " being written)"));
    }
    reserved_ += size;
    id = next_tmp_++;
  }
  const std::string tmp = (fs::path(options_.dir) / "tmp" / absl::StrCat(::getpid(), "-", id)).string();
  const bool want_direct = WritesDirect(size);
  int fd = -1;
  if (want_direct) {
    fd = ::open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
    // EINVAL: the file system does not do O_DIRECT (tmpfs); write through the page cache.
  }
  const bool direct = fd >= 0;
  if (fd < 0) fd = ::open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    absl::Status s = Errno("cannot create", tmp);
    Release(size, 0);
    return s;
  }
  std::unique_ptr<Writer> w(new Writer(this, tmp, fd, size));
  if (direct) {
    void* stage = nullptr;
    if (::posix_memalign(&stage, Writer::kDirectAlign, Writer::kStageBytes) != 0) {
      return absl::ResourceExhaustedError("cannot allocate the spool's write buffer");
    }
    w->stage_ = static_cast<char*>(stage);
    w->direct_ = true;
  }
  return w;
}

Spool::Writer::Writer(Spool* spool, std::string tmp_path, int fd, uint64_t reserved)
    : spool_(spool), tmp_path_(std::move(tmp_path)), fd_(fd), reserved_(reserved), hash_(new HashState) {
  EVP_DigestInit_ex(hash_->ctx, EVP_sha256(), nullptr);
}

Spool::Writer::~Writer() {
  std::free(stage_);
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_path_.c_str());
    spool_->Release(reserved_, 0);
  }
}

absl::Status Spool::Writer::Append(const void* data, size_t n) {
  if (fd_ < 0) return absl::FailedPreconditionError("blob already committed");
  if (size_ + n > reserved_) {
    return absl::OutOfRangeError(absl::StrCat("blob grows past its declared ", reserved_, " bytes"));
  }
  const char* p = static_cast<const char*>(data);
  if (direct_) {
    size_t left = n;
    while (left > 0) {
      const size_t take = std::min(left, kStageBytes - staged_);
      std::memcpy(stage_ + staged_, p, take);
      staged_ += take;
      p += take;
      left -= take;
      if (staged_ == kStageBytes) PARITY_RETURN_IF_ERROR(FlushStage(false));
    }
  } else {
    PARITY_RETURN_IF_ERROR(WriteAll(p, n));
  }
  EVP_DigestUpdate(hash_->ctx, data, n);
  size_ += n;
  if (!direct_ && spool_->options_.fsync && size_ - written_back_ >= kWritebackBytes) {
    // Start writing the bytes so far to disk now (asynchronously), so that Commit's fsync waits
    // only for the tail instead of the whole blob. Advisory: a failure here is ignored, the
    // fsync in Commit still decides durability.
    ::sync_file_range(fd_, static_cast<off_t>(written_back_), static_cast<off_t>(size_ - written_back_),
                      SYNC_FILE_RANGE_WRITE);
    written_back_ = size_;
  }
  return absl::OkStatus();
}

absl::Status Spool::Writer::WriteAll(const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(file_offset_));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot write", tmp_path_);
    }
    p += w;
    n -= static_cast<size_t>(w);
    file_offset_ += static_cast<uint64_t>(w);
  }
  return absl::OkStatus();
}

absl::Status Spool::Writer::FlushStage(bool final) {
  if (staged_ == 0) return absl::OkStatus();
  // O_DIRECT writes whole aligned blocks: the last one is padded and cut back by ftruncate.
  const size_t padded = (staged_ + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
  std::memset(stage_ + staged_, 0, padded - staged_);
  PARITY_RETURN_IF_ERROR(WriteAll(stage_, padded));
  staged_ = 0;
  if (final && ::ftruncate(fd_, static_cast<off_t>(size_)) != 0) return Errno("cannot truncate", tmp_path_);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Spool::Writer::Commit() {
  if (fd_ < 0) return absl::FailedPreconditionError("blob already committed");
  if (direct_) PARITY_RETURN_IF_ERROR(FlushStage(true));
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(hash_->ctx, md, &len);
  static const char kHex[] = "0123456789abcdef";
  std::string key;
  for (unsigned int i = 0; i < len; ++i) {
    key.push_back(kHex[md[i] >> 4]);
    key.push_back(kHex[md[i] & 15]);
  }
  const bool sync_now = spool_->options_.fsync && !spool_->options_.group_sync;
  if (sync_now && ::fsync(fd_) != 0) return Errno("cannot fsync", tmp_path_);
  ::close(fd_);
  fd_ = -1;
  const fs::path final_path = spool_->PathOf(key);
  std::error_code ec;
  fs::create_directories(final_path.parent_path(), ec);
  if (ec) {
    ::unlink(tmp_path_.c_str());
    spool_->Release(reserved_, 0);
    return absl::InternalError(absl::StrCat("cannot create ", final_path.parent_path().string(), ": ", ec.message()));
  }
  uint64_t committed = 0;
  if (fs::exists(final_path, ec)) {
    ::unlink(tmp_path_.c_str());  // same content already stored
  } else {
    if (::rename(tmp_path_.c_str(), final_path.c_str()) != 0) {
      absl::Status s = Errno("cannot rename into", final_path.string());
      ::unlink(tmp_path_.c_str());
      spool_->Release(reserved_, 0);
      return s;
    }
    committed = size_;
    if (sync_now) {
      absl::Status s = FsyncDir(final_path.parent_path().string());
      if (!s.ok()) {
        spool_->Release(reserved_, committed);
        return s;
      }
    }
  }
  spool_->Release(reserved_, committed);
  if (spool_->options_.fsync && !sync_now) {
    // The bytes may still be only in the page cache, even when an earlier Commit put the same
    // content in place: the next SyncPending() covers both.
    absl::MutexLock l(&spool_->mu_);
    spool_->unsynced_ = true;
  }
  return key;
}

absl::Status Spool::SyncPending() {
  {
    absl::MutexLock l(&mu_);
    if (!unsynced_) return absl::OkStatus();
    unsynced_ = false;  // a blob committed while syncing sets it again
  }
  const int fd = ::open(options_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  absl::Status s;
  if (fd < 0) {
    s = Errno("cannot open spool directory", options_.dir);
  } else {
    if (::syncfs(fd) != 0) s = Errno("cannot sync the file system of", options_.dir);
    ::close(fd);
  }
  absl::MutexLock l(&mu_);
  if (s.ok()) {
    ++syncs_;
  } else {
    unsynced_ = true;
  }
  return s;
}

uint64_t Spool::syncs() const {
  absl::MutexLock l(&mu_);
  return syncs_;
}

void Spool::Release(uint64_t reserved, uint64_t committed) {
  absl::MutexLock l(&mu_);
  reserved_ -= reserved;
  used_ += committed;
}

std::string Spool::PathOf(const std::string& key) const {
  return (fs::path(options_.dir) / key.substr(0, 2) / key).string();
}

bool Spool::IsKey(absl::string_view key) {
  if (key.size() != 64) return false;
  for (char c : key) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool Spool::Contains(const std::string& key) const {
  std::error_code ec;
  return IsKey(key) && fs::exists(PathOf(key), ec);
}

absl::StatusOr<uint64_t> Spool::SizeOf(const std::string& key) const {
  if (!IsKey(key)) {
    return absl::InvalidArgumentError(absl::StrCat("'", key, "' is not a lowercase hex SHA-256"));
  }
  std::error_code ec;
  const uint64_t size = fs::file_size(PathOf(key), ec);
  if (ec) return absl::NotFoundError(absl::StrCat("blob ", key, " is not held"));
  return size;
}

absl::StatusOr<uint64_t> Spool::Collect(const std::set<std::string>& keep, int64_t grace_seconds) {
  uint64_t freed = 0;
  std::error_code ec;
  std::vector<fs::path> doomed;
  const auto cutoff = fs::file_time_type::clock::now() - std::chrono::seconds(grace_seconds);
  for (const auto& e : fs::recursive_directory_iterator(options_.dir, ec)) {
    if (!e.is_regular_file()) continue;
    if (grace_seconds > 0 && e.last_write_time(ec) > cutoff) continue;
    const bool tmp = e.path().parent_path().filename() == "tmp";
    if (tmp) {
      // Only temp files of dead processes (their name starts with another pid).
      const std::string n = e.path().filename().string();
      if (n.rfind(absl::StrCat(::getpid(), "-"), 0) == 0) continue;
      doomed.push_back(e.path());
    } else if (!keep.count(e.path().filename().string())) {
      freed += e.file_size();
      doomed.push_back(e.path());
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot scan spool: ", ec.message()));
  for (const fs::path& p : doomed) fs::remove(p, ec);
  absl::MutexLock l(&mu_);
  used_ -= std::min(used_, freed);
  return freed;
}

uint64_t Spool::used_bytes() const {
  absl::MutexLock l(&mu_);
  return used_;
}

}  // namespace parity
