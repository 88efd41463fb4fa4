#include "common/base/batch_read.h"

#include <fcntl.h>
#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace parity {
namespace {

constexpr int kOpenFlags = O_RDONLY | O_NONBLOCK | O_CLOEXEC;

// Whether a request's file stays open after its read (Request::keep_open_if_longer).
bool KeepsOpen(const BatchReader::Request& r) {
  return r.keep_open_if_longer && r.result >= 0 && static_cast<uint64_t>(r.result) == r.len;
}

// One open, one read (a short count is the end of a regular file) and one close, unless the
// request keeps its file open (r->fd).
void ReadOnePlain(BatchReader::Request* r) {
  r->fd = -1;
  int fd;
  do {
    fd = ::openat(r->dir_fd, r->name, kOpenFlags);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    r->result = -errno;
    return;
  }
  ssize_t n;
  do {
    n = ::pread(fd, r->buf, r->len, 0);
  } while (n < 0 && errno == EINTR);
  r->result = n < 0 ? -errno : n;
  if (KeepsOpen(*r)) {
    r->fd = fd;
  } else {
    ::close(fd);
  }
}

class PlainReader final : public BatchReader {
 public:
  bool uses_io_uring() const override { return false; }
  void Read(absl::Span<Request> requests) override {
    for (Request& r : requests) ReadOnePlain(&r);
  }
};

template <typename T>
T LoadAcquire(const T* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
template <typename T>
void StoreRelease(T* p, T v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

class UringReader final : public BatchReader {
 public:
  // Null when the kernel has no io_uring, refuses it, or lacks OPENAT, READ or CLOSE.
  static std::unique_ptr<UringReader> Create() {
    io_uring_params p;
    std::memset(&p, 0, sizeof(p));
    const int fd = static_cast<int>(::syscall(__NR_io_uring_setup, kMaxBatch, &p));
    if (fd < 0) return nullptr;
    std::unique_ptr<UringReader> r(new UringReader(fd));
    if (!r->Map(p) || !r->Supports({IORING_OP_OPENAT, IORING_OP_READ, IORING_OP_CLOSE})) {
      return nullptr;
    }
    return r;
  }

  ~UringReader() override {
    if (sqes_ != nullptr) ::munmap(sqes_, sqes_bytes_);
    if (cq_ring_ != nullptr && cq_ring_ != sq_ring_) ::munmap(cq_ring_, cq_bytes_);
    if (sq_ring_ != nullptr) ::munmap(sq_ring_, sq_bytes_);
    ::close(ring_fd_);
  }

  bool uses_io_uring() const override { return true; }

  void Read(absl::Span<Request> requests) override {
    for (size_t i = 0; i < requests.size(); i += kMaxBatch) {
      absl::Span<Request> batch = requests.subspan(i, kMaxBatch);
      if (broken_) {
        for (Request& r : batch) ReadOnePlain(&r);
      } else {
        ReadBatch(batch);
      }
    }
  }

 private:
  explicit UringReader(int fd) : ring_fd_(fd) {}

  bool Map(const io_uring_params& p) {
    if (p.sq_entries < kMaxBatch || p.cq_entries < kMaxBatch) return false;
    sq_bytes_ = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    cq_bytes_ = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
    const bool single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single) sq_bytes_ = cq_bytes_ = std::max(sq_bytes_, cq_bytes_);
    void* sq = ::mmap(nullptr, sq_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                      ring_fd_, IORING_OFF_SQ_RING);
    if (sq == MAP_FAILED) return false;
    sq_ring_ = static_cast<char*>(sq);
    if (single) {
      cq_ring_ = sq_ring_;
    } else {
      void* cq = ::mmap(nullptr, cq_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                        ring_fd_, IORING_OFF_CQ_RING);
      if (cq == MAP_FAILED) return false;
      cq_ring_ = static_cast<char*>(cq);
    }
    sqes_bytes_ = p.sq_entries * sizeof(io_uring_sqe);
    void* sqes = ::mmap(nullptr, sqes_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                        ring_fd_, IORING_OFF_SQES);
    if (sqes == MAP_FAILED) return false;
    sqes_ = static_cast<io_uring_sqe*>(sqes);
    sq_tail_ = reinterpret_cast<unsigned*>(sq_ring_ + p.sq_off.tail);
    sq_mask_ = *reinterpret_cast<unsigned*>(sq_ring_ + p.sq_off.ring_mask);
    sq_array_ = reinterpret_cast<unsigned*>(sq_ring_ + p.sq_off.array);
    cq_head_ = reinterpret_cast<unsigned*>(cq_ring_ + p.cq_off.head);
    cq_tail_ = reinterpret_cast<unsigned*>(cq_ring_ + p.cq_off.tail);
    cq_mask_ = *reinterpret_cast<unsigned*>(cq_ring_ + p.cq_off.ring_mask);
    cqes_ = reinterpret_cast<io_uring_cqe*>(cq_ring_ + p.cq_off.cqes);
    return true;
  }

  bool Supports(std::initializer_list<int> ops) {
    constexpr int kOps = 256;
    std::vector<char> mem(sizeof(io_uring_probe) + kOps * sizeof(io_uring_probe_op), 0);
    auto* probe = reinterpret_cast<io_uring_probe*>(mem.data());
    if (::syscall(__NR_io_uring_register, ring_fd_, IORING_REGISTER_PROBE, probe, kOps) < 0) {
      return false;
    }
    for (int op : ops) {
      if (op > probe->last_op || !(probe->ops[op].flags & IO_URING_OP_SUPPORTED)) return false;
    }
    return true;
  }

  io_uring_sqe* NextSqe() {
    const unsigned index = (*sq_tail_ + pending_tail_) & sq_mask_;
    io_uring_sqe* sqe = &sqes_[index];
    std::memset(sqe, 0, sizeof(*sqe));
    sq_array_[index] = index;
    ++pending_tail_;
    return sqe;
  }

  // Submits the prepared entries and reaps `count` completions, calling done(user_data, res)
  // for each. False when io_uring_enter failed for good (the ring is then not used again).
  template <typename Done>
  bool SubmitAndReap(unsigned count, Done done) {
    StoreRelease(sq_tail_, *sq_tail_ + pending_tail_);
    unsigned to_submit = pending_tail_;
    pending_tail_ = 0;
    unsigned reaped = 0;
    while (reaped < count) {
      unsigned head = *cq_head_;
      const unsigned tail = LoadAcquire(cq_tail_);
      for (; head != tail && reaped < count; ++head, ++reaped) {
        const io_uring_cqe& c = cqes_[head & cq_mask_];
        done(c.user_data, c.res);
      }
      StoreRelease(cq_head_, head);
      if (reaped == count) break;
      const long r = ::syscall(__NR_io_uring_enter, ring_fd_, to_submit, count - reaped,
                               IORING_ENTER_GETEVENTS, nullptr, 0);
      if (r < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EBUSY) continue;
        return false;
      }
      to_submit -= std::min<unsigned>(to_submit, static_cast<unsigned>(r));
    }
    return true;
  }

  void ReadBatch(absl::Span<Request> batch) {
    int fds[kMaxBatch];
    const unsigned n = static_cast<unsigned>(batch.size());
    for (unsigned k = 0; k < n; ++k) {
      fds[k] = -1;
      io_uring_sqe* s = NextSqe();
      s->opcode = IORING_OP_OPENAT;
      s->fd = batch[k].dir_fd;
      s->addr = reinterpret_cast<uint64_t>(batch[k].name);
      s->open_flags = kOpenFlags;
      s->user_data = k;
    }
    bool ok = SubmitAndReap(n, [&](uint64_t k, int32_t res) {
      fds[k] = res;
      batch[k].result = res < 0 ? res : 0;
    });
    unsigned reads = 0;
    if (ok) {
      for (unsigned k = 0; k < n; ++k) {
        if (fds[k] < 0) continue;
        io_uring_sqe* s = NextSqe();
        s->opcode = IORING_OP_READ;
        s->fd = fds[k];
        s->addr = reinterpret_cast<uint64_t>(batch[k].buf);
        s->len = static_cast<uint32_t>(batch[k].len);
        s->off = 0;
        s->user_data = k;
        ++reads;
      }
      ok = SubmitAndReap(reads, [&](uint64_t k, int32_t res) { batch[k].result = res; });
    }
    if (!ok) {
      // io_uring_enter failed for good: no completion can be trusted; this batch and the rest
      // go the plain way, and the files this batch opened are closed here.
      broken_ = true;
      for (unsigned k = 0; k < n; ++k) {
        if (fds[k] >= 0) ::close(fds[k]);
        ReadOnePlain(&batch[k]);
      }
      return;
    }
    unsigned closes = 0;
    for (unsigned k = 0; k < n; ++k) {
      batch[k].fd = -1;
      if (fds[k] < 0) continue;
      if (KeepsOpen(batch[k])) {
        batch[k].fd = fds[k];
        continue;
      }
      io_uring_sqe* s = NextSqe();
      s->opcode = IORING_OP_CLOSE;
      s->fd = fds[k];
      s->user_data = k;
      ++closes;
    }
    // Should this fail, some of these files may stay open: rather that than closing numbers
    // another thread may already have been given.
    if (!SubmitAndReap(closes, [](uint64_t, int32_t) {})) broken_ = true;
  }

  // Constant after construction.
  const int ring_fd_;
  char* sq_ring_ = nullptr;
  char* cq_ring_ = nullptr;
  io_uring_sqe* sqes_ = nullptr;
  size_t sq_bytes_ = 0, cq_bytes_ = 0, sqes_bytes_ = 0;
  unsigned* sq_tail_ = nullptr;
  unsigned sq_mask_ = 0;
  unsigned* sq_array_ = nullptr;
  unsigned* cq_head_ = nullptr;
  unsigned* cq_tail_ = nullptr;
  unsigned cq_mask_ = 0;
  io_uring_cqe* cqes_ = nullptr;
  // Changing (the reader is used by one thread at a time).
  unsigned pending_tail_ = 0;  // entries prepared since the last submit
  bool broken_ = false;
};

}  // namespace

std::unique_ptr<BatchReader> BatchReader::Create(bool use_io_uring) {
  if (use_io_uring) {
    if (std::unique_ptr<UringReader> r = UringReader::Create()) return r;
  }
  return std::make_unique<PlainReader>();
}

}  // namespace parity
