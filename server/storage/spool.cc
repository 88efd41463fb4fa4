#include "server/storage/spool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <iterator>
#include <thread>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "common/base/file_util.h"
#include "common/base/sha256.h"
#include "common/base/status_macros.h"
#include "common/base/thread_name.h"

namespace parity {

namespace fs = std::filesystem;


namespace {
absl::Status Errno(const std::string& what, const std::string& path) {
  const int e = errno;
  std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(e));
  if (e == ENOSPC || e == EDQUOT) return absl::ResourceExhaustedError(msg);
  if (e == EROFS || e == EACCES || e == EPERM) return absl::FailedPreconditionError(msg);
  return absl::InternalError(msg);
}

// 256 random bits in hex: a uniquely keyed blob's name (the same form as a SHA-256 hex).
std::string UniqueKey() {
  thread_local absl::BitGen gen;  // seeded from the OS's entropy
  std::string key;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&key, absl::Hex(absl::Uniform<uint64_t>(gen), absl::kZeroPad16));
  return key;
}

absl::Status FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return Errno("cannot open directory", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? absl::OkStatus() : Errno("cannot fsync", dir);
}
}  // namespace

class Spool::IoThreads {
 public:
  explicit IoThreads(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Run(); });
  }
  ~IoThreads() {  // runs what is queued, then joins
    {
      absl::MutexLock l(&mu_);
      stop_ = true;
    }
    for (std::thread& t : threads_) t.join();
  }
  void Submit(std::function<void()> job) {
    absl::MutexLock l(&mu_);
    jobs_.push_back(std::move(job));
  }

 private:
  void Run() {
    NameCurrentThread("spool-io");
    while (true) {
      std::function<void()> job;
      {
        absl::MutexLock l(&mu_);
        mu_.Await(absl::Condition(
            +[](IoThreads* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu_) { return t->stop_ || !t->jobs_.empty(); },
            this));
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  absl::Mutex mu_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// A blob written with O_DIRECT: up to kStages aligned buffers (as many as its size needs) used
// in turn; a full one goes to the I/O threads and the next one is filled once its previous write
// has finished. A blob with a source (Create) has no buffers: its slots k are writes of whole
// pieces of the source in flight, at most kStages at once, as with buffers.
struct Spool::Writer::Direct {
  static constexpr int kStages = 4;  // idle's initialiser below lists one per stage
  static constexpr size_t kAlign = 4096;        // buffer, offsets and lengths in whole blocks
  static constexpr size_t kStageBytes = 1 << 20;

  explicit Direct(Spool* s) : spool(s) {}
  ~Direct() {  // after WaitAll: no write in flight
    absl::MutexLock l(&mu);
    for (char*& p : stage) {
      if (p != nullptr) spool->GiveStage(p);
      p = nullptr;
    }
  }
  // Takes the stages a blob of `size` bytes uses: one per started kStageBytes, at most kStages,
  // all within the spool's stage budget. False when not even one is to be had (the budget is
  // taken, or mapping failed): the blob is then written through the page cache.
  bool Allocate(uint64_t size) {
    const int wanted = static_cast<int>(std::clamp<uint64_t>((size + kStageBytes - 1) / kStageBytes, 1, kStages));
    stage[0] = spool->TakeStage();
    if (stage[0] == nullptr) return false;
    stages = 1;
    while (stages < wanted && (stage[stages] = spool->TakeStage()) != nullptr) ++stages;
    return true;
  }
  // After the blob's last stage was handed to the I/O threads: idle stages go back to the spool
  // now, the others as their writes end.
  void ReleaseStages() {
    absl::MutexLock l(&mu);
    released = true;
    for (int k = 0; k < kStages; ++k) {
      if (idle[k] && stage[k] != nullptr) {
        spool->GiveStage(stage[k]);
        stage[k] = nullptr;
      }
    }
  }
  // Waits until stage k may be filled; returns the first write error so far.
  absl::Status WaitFree(int k) {
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(&idle[k]));
    return error;
  }
  // Waits until no stage is being written (every one, even after an error: the I/O threads
  // use the buffers, the fd and this object until they mark their stage idle); returns the
  // first write error.
  absl::Status WaitAll() {
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(
        +[](Direct* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->mu) {
          return std::all_of(std::begin(d->idle), std::end(d->idle), [](bool b) { return b; });
        },
        this));
    return error;
  }

  Spool* const spool;
  // The buffers (all null with a source); after ReleaseStages, given back (and null) as their
  // writes end, under mu.
  char* stage[kStages] = {};
  int stages = kStages;      // in use: stage[0, stages)
  int cur = 0;
  size_t staged = 0;         // bytes in stage[cur]
  uint64_t offset = 0;       // file offset of stage[cur]
  absl::Mutex mu;
  bool idle[kStages] ABSL_GUARDED_BY(mu) = {true, true, true, true};  // not being written
  bool released ABSL_GUARDED_BY(mu) = false;  // ReleaseStages was called
  absl::Status error ABSL_GUARDED_BY(mu);
};

Spool::Spool(SpoolOptions o) : options_(std::move(o)), io_(new IoThreads(std::max(1, options_.io_threads))) {}

Spool::~Spool() {
  for (char* p : idle_stages_) ::munmap(p, Writer::Direct::kStageBytes);
}

char* Spool::TakeStage() {
  {
    absl::MutexLock l(&stages_mu_);
    if ((stages_in_use_ + 1) * Writer::Direct::kStageBytes > options_.stage_bytes) return nullptr;
    ++stages_in_use_;
    stages_high_ = std::max(stages_high_, stages_in_use_);
    if (!idle_stages_.empty()) {
      char* p = idle_stages_.back();
      idle_stages_.pop_back();
      return p;
    }
  }
  // A mapping is page-aligned, as O_DIRECT needs.
  void* m = ::mmap(nullptr, Writer::Direct::kStageBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m != MAP_FAILED) return static_cast<char*>(m);
  absl::MutexLock l(&stages_mu_);
  --stages_in_use_;
  return nullptr;
}

uint64_t Spool::stages_high_water() const {
  absl::MutexLock l(&stages_mu_);
  return stages_high_;
}

uint64_t Spool::stage_bytes_in_use() const {
  absl::MutexLock l(&stages_mu_);
  return stages_in_use_ * Writer::Direct::kStageBytes;
}

uint64_t Spool::stage_bytes_high_water() const {
  return stages_high_water() * Writer::Direct::kStageBytes;
}

uint64_t Spool::blobs_past_stage_budget() const {
  absl::MutexLock l(&stages_mu_);
  return past_stage_budget_;
}

void Spool::GiveStage(char* p) {
  {
    absl::MutexLock l(&stages_mu_);
    --stages_in_use_;
    if (idle_stages_.size() < kIdleStages) {
      idle_stages_.push_back(p);
      return;
    }
  }
  ::munmap(p, Writer::Direct::kStageBytes);
}

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

absl::StatusOr<std::string> Spool::Reserve(uint64_t size) {
  uint64_t id;
  {
    absl::MutexLock l(&mu_);
    if (used_ + reserved_ + size > options_.quota_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "spool quota exceeded: ", size, " more bytes would pass parityd --spool-quota-bytes=",
          options_.quota_bytes, " (", used_, " used, ", reserved_, " being written)"));
    }
    reserved_ += size;
    id = next_tmp_++;
  }
  return (fs::path(options_.dir) / "tmp" / absl::StrCat(::getpid(), "-", id)).string();
}

absl::StatusOr<std::unique_ptr<Spool::Writer>> Spool::Create(uint64_t size, std::shared_ptr<char> source) {
  PARITY_ASSIGN_OR_RETURN(const std::string tmp, Reserve(size));
  int fd = -1;
  if (WritesDirect(size)) {
    fd = ::open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
    // EINVAL: the file system does not do O_DIRECT (tmpfs); write through the page cache.
  }
  bool direct = fd >= 0;
  // A blob received in messages is staged in 1 MiB buffers; with none left in the budget it is
  // written through the page cache instead (so the budget bounds the stages, whatever the
  // number of uploads at once).
  std::unique_ptr<Writer::Direct> staged;
  if (direct && source == nullptr) {
    staged.reset(new Writer::Direct(this));
    if (!staged->Allocate(size)) {
      staged.reset();
      direct = false;
      {
        absl::MutexLock l(&stages_mu_);
        ++past_stage_budget_;
      }
      const int flags = ::fcntl(fd, F_GETFL);
      if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) != 0) {
        ::close(fd);  // opened again below, without O_DIRECT
        fd = -1;
      }
    }
  }
  if (fd < 0) fd = ::open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    absl::Status s = Errno("cannot create", tmp);
    Release(size, 0);
    return s;
  }
  std::unique_ptr<Writer> w(new Writer(this, tmp, fd, size, std::move(source)));
  if (direct) {
    if (staged != nullptr) {
      w->direct_ = std::move(staged);
    } else {
      w->direct_.reset(new Writer::Direct(this));
    }
    // A blob of several stages has its blocks allocated up front, the padded tail included:
    // the stage writes then neither extend the file nor allocate, so ext4 lets the I/O threads
    // write them at the same time (an extending direct write holds the inode lock exclusively).
    // A blob of one stage is one write, which allocates as it extends the file. Commit cuts the
    // file back to the blob's size. Advisory, except for a full disk.
    const off_t padded = static_cast<off_t>((size + Writer::Direct::kAlign - 1) / Writer::Direct::kAlign *
                                            Writer::Direct::kAlign);
    if (size > Writer::Direct::kStageBytes && ::fallocate(fd, 0, 0, padded) != 0 && errno == ENOSPC) {
      return Errno("no space left for a blob of " + std::to_string(size) + " bytes in", tmp);
    }
  }
  return w;
}

absl::Status Spool::Place(const std::string& key, uint64_t size,
                          const std::function<absl::StatusOr<uint64_t>(int fd)>& fill) {
  if (!IsKey(key)) return absl::InvalidArgumentError("malformed blob key");
  if (Contains(key)) return absl::OkStatus();
  PARITY_ASSIGN_OR_RETURN(const std::string tmp, Reserve(size));
  const int fd = ::open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    absl::Status s = Errno("cannot create", tmp);
    Release(size, 0);
    return s;
  }
  absl::StatusOr<uint64_t> wrote = fill(fd);
  ::close(fd);
  absl::Status s = wrote.status();
  if (s.ok() && *wrote != size) {
    s = absl::DataLossError(absl::StrCat("blob ", key, ": ", *wrote, " bytes arrived, its item says ", size));
  }
  const fs::path final_path = PathOf(key);
  std::error_code ec;
  if (s.ok()) {
    fs::create_directories(final_path.parent_path(), ec);
    if (ec) s = absl::InternalError(absl::StrCat("cannot create ", final_path.parent_path().string(), ": ", ec.message()));
  }
  uint64_t committed = 0;
  if (s.ok() && fs::exists(final_path, ec)) {
    // Placed meanwhile by another fetch of the same blob.
  } else if (s.ok()) {
    if (::rename(tmp.c_str(), final_path.c_str()) == 0) {
      committed = size;
    } else {
      s = Errno("cannot rename into", final_path.string());
    }
  }
  if (committed == 0) ::unlink(tmp.c_str());
  Release(size, committed);
  return s;
}

Spool::Writer::Writer(Spool* spool, std::string tmp_path, int fd, uint64_t reserved, std::shared_ptr<char> source)
    : spool_(spool), tmp_path_(std::move(tmp_path)), fd_(fd), reserved_(reserved), source_(std::move(source)) {
  if (spool->KeysByContent(reserved)) hash_ = std::make_unique<Sha256>();
}

Spool::Writer::~Writer() {
  if (direct_) direct_->WaitAll().IgnoreError();  // the I/O threads use its buffers and fd_
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_path_.c_str());
    spool_->Release(reserved_, 0);
  }
}

absl::Status Spool::Writer::Append(const void* data, size_t n) {
  if (fd_ < 0) return absl::FailedPreconditionError("blob already committed");
  if (sealed_) return absl::FailedPreconditionError("blob already sealed");
  if (size_ + n > reserved_) {
    return absl::OutOfRangeError(absl::StrCat("blob grows past its declared ", reserved_, " bytes"));
  }
  const char* p = static_cast<const char*>(data);
  if (source_ != nullptr && p != source_.get() + size_) {
    return absl::FailedPreconditionError(absl::StrCat("blob appended from outside its source at byte ", size_));
  }
  if (direct_ && source_ != nullptr) {
    // The bytes are in place: whole pieces go to the I/O threads as they complete.
    Direct& d = *direct_;
    d.staged += n;
    while (d.staged >= Direct::kStageBytes) {
      PARITY_RETURN_IF_ERROR(SubmitStage(/*wait_next=*/d.offset + Direct::kStageBytes < reserved_));
    }
  } else if (direct_) {
    Direct& d = *direct_;
    size_t left = n;
    while (left > 0) {
      const size_t take = std::min(left, Direct::kStageBytes - d.staged);
      std::memcpy(d.stage[d.cur] + d.staged, p, take);
      d.staged += take;
      p += take;
      left -= take;
      // The blob's last byte needs no next stage (a blob of one stage has no other).
      const bool more = size_ + (n - left) < reserved_;
      if (d.staged == Direct::kStageBytes) PARITY_RETURN_IF_ERROR(SubmitStage(/*wait_next=*/more));
    }
  } else {
    PARITY_RETURN_IF_ERROR(WriteAll(p, n));
  }
  if (hash_) hash_->Update(data, n);
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

// Hands the current stage (padded to a whole block) to the I/O threads and moves to the next
// one, waiting (with `wait_next`) until that one's previous write has finished.
absl::Status Spool::Writer::SubmitStage(bool wait_next) {
  Direct& d = *direct_;
  const size_t len = std::min(d.staged, Direct::kStageBytes);  // more only with a source
  const size_t padded = (len + Direct::kAlign - 1) / Direct::kAlign * Direct::kAlign;
  char* const buf = source_ != nullptr ? source_.get() + d.offset : d.stage[d.cur];
  std::memset(buf + len, 0, padded - len);
  const int k = d.cur;
  {
    absl::MutexLock l(&d.mu);
    d.idle[k] = false;
  }
  spool_->io_->Submit([&d, k, fd = fd_, buf, padded, offset = d.offset, path = tmp_path_] {
    absl::Status s;
    for (size_t done = 0; done < padded;) {
      const ssize_t w = ::pwrite(fd, buf + done, padded - done, static_cast<off_t>(offset + done));
      if (w < 0) {
        if (errno == EINTR) continue;
        s = Errno("cannot write", path);
        break;
      }
      done += static_cast<size_t>(w);
    }
    absl::MutexLock l(&d.mu);
    d.idle[k] = true;
    if (d.released && d.stage[k] != nullptr) {
      d.spool->GiveStage(d.stage[k]);
      d.stage[k] = nullptr;
    }
    if (!s.ok() && d.error.ok()) d.error = s;
  });
  d.offset += padded;
  d.staged -= len;
  d.cur = (d.cur + 1) % d.stages;
  if (!wait_next) {
    d.ReleaseStages();  // the blob's last stage: nothing more will be filled
    return absl::OkStatus();
  }
  return d.WaitFree(d.cur);
}

absl::Status Spool::Writer::Seal() {
  if (fd_ < 0) return absl::FailedPreconditionError("blob already committed");
  sealed_ = true;
  if (direct_ && direct_->staged > 0) return SubmitStage(/*wait_next=*/false);
  return absl::OkStatus();
}

bool Spool::Writer::WritesDone() {
  if (!direct_) return true;
  absl::MutexLock l(&direct_->mu);
  return std::all_of(std::begin(direct_->idle), std::end(direct_->idle), [](bool b) { return b; });
}

absl::StatusOr<std::string> Spool::Writer::Commit() {
  if (fd_ < 0) return absl::FailedPreconditionError("blob already committed");
  if (direct_) {
    // The tail goes out padded to a block; the file is then cut back to the blob's size.
    if (direct_->staged > 0) PARITY_RETURN_IF_ERROR(SubmitStage(/*wait_next=*/false));
    PARITY_RETURN_IF_ERROR(direct_->WaitAll());
    if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0) return Errno("cannot truncate", tmp_path_);
  }
  const bool sync_now = spool_->options_.fsync && !spool_->options_.group_sync;
  if (sync_now && ::fsync(fd_) != 0) return Errno("cannot fsync", tmp_path_);
  ::close(fd_);
  fd_ = -1;
  std::error_code ec;
  std::string key;
  if (hash_) {
    key = hash_->HexDigest();
  } else {
    do key = UniqueKey(); while (fs::exists(spool_->PathOf(key), ec));
  }
  const fs::path final_path = spool_->PathOf(key);
  fs::create_directories(final_path.parent_path(), ec);
  if (ec) {
    ::unlink(tmp_path_.c_str());
    spool_->Release(reserved_, 0);
    return absl::InternalError(absl::StrCat("cannot create ", final_path.parent_path().string(), ": ", ec.message()));
  }
  uint64_t committed = 0;
  if (hash_ && fs::exists(final_path, ec)) {
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

std::string Spool::KeyOf(absl::string_view data) { return Sha256Hex(data); }

absl::StatusOr<std::string> Spool::HashOf(const std::string& key) const {
  PARITY_ASSIGN_OR_RETURN(const uint64_t size, SizeOf(key));
  const std::string path = PathOf(key);
  // Read through the page cache so that the kernel's read-ahead fetches the next pieces while
  // this one is hashed (O_DIRECT reads would wait for the disk, then hash, in turn); each piece
  // is dropped from the cache once hashed, as a blob written with O_DIRECT never filled it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("blob ", key, " is not held"));
    return Errno("cannot open", path);
  }
  const bool uncache = WritesDirect(size);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);  // advisory: a larger read-ahead window
  constexpr size_t kPiece = 1 << 20;
  std::shared_ptr<char> buf = TakePooledBuffer(kPiece);
  absl::Status status;
  Sha256 hash;
  uint64_t got = 0;
  if (buf == nullptr) status = absl::ResourceExhaustedError("cannot map a read buffer");
  while (status.ok()) {
    const ssize_t n = ::pread(fd, buf.get(), kPiece, static_cast<off_t>(got));
    if (n < 0) {
      if (errno == EINTR) continue;
      status = Errno("cannot read", path);
    } else if (n == 0 || got + static_cast<uint64_t>(n) > size) {
      if (n != 0 || got != size) {
        status = absl::DataLossError(absl::StrCat(path, " changed size while read: ", size,
                                                  " bytes, then ", got + static_cast<uint64_t>(n)));
      }
      break;
    } else {
      hash.Update(buf.get(), static_cast<size_t>(n));
      if (uncache) ::posix_fadvise(fd, static_cast<off_t>(got), n, POSIX_FADV_DONTNEED);
      got += static_cast<uint64_t>(n);
    }
  }
  ::close(fd);
  if (!status.ok()) return status;
  return hash.HexDigest();
}

std::string Spool::PathOf(const std::string& key) const {
  // Called for every item a comparison reads: one concatenation, not three fs::path objects.
  const absl::string_view sep = !options_.dir.empty() && options_.dir.back() == '/' ? "" : "/";
  return absl::StrCat(options_.dir, sep, absl::string_view(key).substr(0, 2), "/", key);
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
