// What parity-agent sends for each item of a dump: its data loaded, or streamed from its file in
// pieces, read ahead of the network within a budget (Prefetcher), and its TensorHeader.
// Internal to client/.
#ifndef PARITY_CLIENT_AGENT_ITEMS_H_
#define PARITY_CLIENT_AGENT_ITEMS_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "client/file_pieces.h"
#include "common/base/json.h"
#include "common/base/tensor.h"
#include "common/checks/stats.h"
#include "common/formats/dump.h"
#include "parity/v1/parity.pb.h"

namespace parity {
namespace agent {

// Tensors of this size or more are probed (length + CRC-32) before a hash is offered. parityd's
// --spool-unique-key-min-bytes defaults to the same size: its blobs from there on are keyed at
// random and found for dedup through such a probe only.
inline constexpr size_t kDedupMinBytes = 64 << 10;

// An item's data for upload: the tensor (when the dump has data) or the reason it could not be
// read.
struct Loaded {
  std::optional<Tensor> tensor;
  absl::Status status;
  // The dedup offer, when it was made ahead (Prefetcher's `prepare`): the data's CRC-32 (for
  // the header), the content hash when one was taken, and whether the server holds it.
  bool offered = false;
  bool held = false;
  std::optional<uint32_t> crc32;
  std::string sha256;
  // The tensor's statistics, when the dump has none and they were computed ahead (Precompute).
  std::optional<TensorStats> stats;
  // Or, in place of `tensor`, a large tensor sent from its file a piece at a time: where its
  // bytes lie, and the pieces being read (null when none are to be read: the server holds the
  // content, or it could not be read).
  std::optional<TensorFileRange> range;
  std::shared_ptr<FilePieces> pieces;
};

// Tensors of at least UploadOptions::stream_min_bytes that are one run of bytes in their files
// (FindTensorFileRange) are sent from their files in pieces (FilePieces), at most
// kStreamQueuedPieces pieces read ahead, when read ahead (--read-ahead > 0) in DATA mode: the
// agent's memory does not grow with a tensor's size. Their CRC-32 and, when the dump has none,
// statistics are computed as the pieces are read and sent with the last one (the CRC in the
// header when the dedup offer took it).
inline constexpr size_t kStreamQueuedPieces = 8;

// Computes ahead what the header of an item sent in `mode` needs from its data: the CRC-32
// (unless the dedup offer took it) and, when the dump carries no statistics, the statistics.
// Run on the read-ahead thread, so that the sending thread only sends.
void Precompute(const DumpItem& it, v1::DataMode mode, Loaded* l);

// The server's limit on TensorHeader.read_error.
inline constexpr size_t kMaxReadErrorBytes = 4096;

// At most `max` bytes of `s`, cut before a UTF-8 continuation byte (proto3 strings are UTF-8).
std::string Utf8Prefix(absl::string_view s, size_t max);

Loaded LoadForSend(const DumpItem& it);

// LoadForSend, except that a tensor of at least `stream_min_bytes` (0: none) that can be sent
// from its file in pieces of at most `max_piece_bytes` is not read here (Loaded::range and
// pieces; the caller fills the pieces). When the dump has no statistics for it, they are
// computed from the pieces (and sent with the last one).
Loaded LoadOrStreamForSend(const DumpItem& it, uint64_t stream_min_bytes, size_t max_piece_bytes);

// For an item sent without its data (`mode` CRC or STATS): LoadForSend, except that a tensor of
// at least `stream_min_bytes` (0: none) that is one run of bytes in its file is not loaded: what
// its header needs (the CRC-32 in CRC mode, the statistics when the dump has none) is computed
// from its file a piece at a time (Loaded::range, crc32 and stats; no pieces).
Loaded LoadSummaryForSend(const DumpItem& it, v1::DataMode mode, uint64_t stream_min_bytes);

// Reads ahead: a thread loads the next items' tensors (`load`) into a bounded queue (at most
// `max_items` tensors and `max_bytes` bytes, one tensor always fits) so that reading files and
// sending overlap; memory stays bounded whatever the dump's size. Items of less than
// kSmallReadAheadBytes count as 1/kSmallReadAheadFactor of a tensor, and a producer that found
// the queue full of them waits until it is half empty: handing such an item between the threads
// one at a time cost more than reading it. `prepare` (may be empty) runs
// on that thread for each item after its load, before it is queued. An item loaded as pieces
// (Loaded::pieces) has them read on that thread after it is queued, before the next item is
// loaded: the sender takes them as they come.
inline constexpr uint64_t kSmallReadAheadBytes = 64 << 10;
inline constexpr size_t kSmallReadAheadFactor = 64;

class Prefetcher {
 public:
  using Load = std::function<Loaded(const DumpItem&)>;
  using Prepare = std::function<void(const DumpItem&, Loaded*)>;
  Prefetcher(const std::vector<DumpItem>& items, std::vector<size_t> order, size_t max_items,
             uint64_t max_bytes, Load load, Prepare prepare)
      : items_(items), order_(std::move(order)), max_items_(max_items), max_bytes_(max_bytes),
        load_(std::move(load)), prepare_(std::move(prepare)), thread_([this] { Run(); }) {}
  ~Prefetcher() {
    {
      absl::MutexLock l(&mu_);
      stop_ = true;
      if (filling_ != nullptr) filling_->Cancel();
    }
    thread_.join();
  }
  // The next item in order and its data; false when all were returned. `*more`: whether the
  // item after it is queued already (Next will not wait for it).
  bool Next(size_t* index, Loaded* loaded, bool* more) {
    absl::MutexLock l(&mu_);
    mu_.Await(ready_);
    if (queue_.empty()) return false;
    *index = queue_.front().first;
    *loaded = std::move(queue_.front().second);
    queue_.pop_front();
    if (loaded->tensor) bytes_ -= loaded->tensor->bytes().size();
    *more = !queue_.empty();
    return true;
  }

 private:
  void Run() {
    for (size_t i : order_) {
      Loaded l = load_(items_[i]);
      if (prepare_) prepare_(items_[i], &l);
      const uint64_t n = l.tensor ? l.tensor->bytes().size() : 0;
      const std::shared_ptr<FilePieces> pieces = l.pieces;
      {
        absl::MutexLock lock(&mu_);
        next_bytes_ = n;
        if (!Room()) mu_.Await(resume_);
        if (stop_) break;
        bytes_ += n;
        queue_.emplace_back(i, std::move(l));
        if (pieces == nullptr) continue;
        filling_ = pieces;
      }
      pieces->Fill();  // returns early once the destructor cancels it
      absl::MutexLock lock(&mu_);
      filling_ = nullptr;
      if (stop_) break;
    }
    absl::MutexLock lock(&mu_);
    producer_done_ = true;
  }
  // Await's conditions, members rather than on the waiting thread's stack (see FilePieces's).
  bool Ready() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return !queue_.empty() || producer_done_; }
  // The queue may take the next item (of next_bytes_).
  bool Room() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return HasRoom(false); }
  // A producer that found no room goes on: with room for the next item, and for half a queue
  // when that item is small.
  bool Resume() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return HasRoom(true); }
  bool HasRoom(bool resuming) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (stop_ || queue_.empty()) return true;
    if (bytes_ + next_bytes_ > max_bytes_) return false;
    if (next_bytes_ >= kSmallReadAheadBytes) return queue_.size() < max_items_;
    const size_t limit = max_items_ * kSmallReadAheadFactor;
    return resuming ? queue_.size() <= limit / 2 : queue_.size() < limit;
  }
  const absl::Condition ready_{this, &Prefetcher::Ready};
  const absl::Condition resume_{this, &Prefetcher::Resume};

  const std::vector<DumpItem>& items_;
  const std::vector<size_t> order_;
  const size_t max_items_;
  const uint64_t max_bytes_;
  const Load load_;
  const Prepare prepare_;
  absl::Mutex mu_;
  std::deque<std::pair<size_t, Loaded>> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool producer_done_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<FilePieces> filling_ ABSL_GUARDED_BY(mu_);  // being read (Cancel()led on stop)
  uint64_t next_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // the size of the item the producer waits to queue
  std::thread thread_;  // last: starts after the members above exist
};

// The statistics that are set.
void SetStatistics(const TensorStats& s, v1::Statistics* out);

std::optional<double> StatOf(const Json& v);

// The header for item `index` of the dump. `tensor` is the item's data when the dump has it;
// `mode` says what is sent (DATA sends the tensor's bytes in chunks after the header).
// `crc32`, when known, is the CRC-32 of the tensor's bytes (not computed again).
// `crc32` and `stats`: computed ahead (Precompute), else computed here.
// `range`, when `tensor` is null: the tensor is sent from its file (or, in CRC or STATS mode,
// summarised from it); the header has its CRC-32 and statistics only when `crc32` and `stats`
// (or the dump's statistics) are set: in DATA mode the last chunk has them otherwise.
v1::TensorHeader MakeHeader(const DumpItem& it, int64_t index, const Tensor* tensor, v1::DataMode mode,
                            std::optional<uint32_t> crc32 = std::nullopt,
                            const std::optional<TensorStats>& stats = std::nullopt,
                            const TensorFileRange* range = nullptr);

}  // namespace agent
}  // namespace parity

#endif  // PARITY_CLIENT_AGENT_ITEMS_H_
