// Large tensors sent from their files a piece at a time, so that the agent's memory does not
// grow with a tensor's size: a reading thread fills a bounded queue of pieces (FilePieces::Fill)
// while the sending thread sends them (Next), each piece in its own buffer that gRPC may keep
// until it has sent it.
#ifndef PARITY_CLIENT_FILE_PIECES_H_
#define PARITY_CLIENT_FILE_PIECES_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/base/dtype.h"
#include "common/formats/dump.h"
#include "common/base/file_util.h"
#include "common/checks/stats.h"

namespace parity {

// Where a tensor's bytes lie in its file: `length` bytes at `offset`, numel(shape) elements of
// `dtype` as a Tensor holds them (little-endian, C order).
struct TensorFileRange {
  std::shared_ptr<const RandomAccessFile> file;
  uint64_t offset = 0;
  uint64_t length = 0;
  DType dtype = DType::kFloat32;
  Shape shape;
};

// The range of `item`'s tensor when it is one run of bytes of at least `min_bytes` in its file,
// as LoadItemTensor would return it: a whole .npy file in native layout (little-endian, C order;
// not one the listing kept in memory), a .pt tensor that is not a strided view, or a .safetensors
// entry; with the shape dump.json gives (when it gives one). Nullopt otherwise (GE entries), and
// when the file's header cannot be read: LoadItemTensor then reads the item whole and names any
// error.
std::optional<TensorFileRange> FindTensorFileRange(const DumpItem& item, uint64_t min_bytes);

// Pieces that hold whole blocks of kStatsPieceElements elements of any dtype.
inline constexpr size_t kStatsPieceBytes = kStatsPieceElements * 8;

// Reads the range once, `piece_bytes` at a time into one buffer, for what is asked (pointers
// not null): its zlib CRC-32, its SHA-256 (lowercase hex), its statistics (ComputeStats's bits:
// `piece_bytes` must then be a multiple of kStatsPieceBytes). DATA_LOSS when the file is
// shorter than the range.
absl::Status ScanTensorFileRange(const TensorFileRange& range, size_t piece_bytes, uint32_t* crc32,
                                 std::string* sha256, TensorStats* stats = nullptr);

// The pieces of one range, in order. One thread calls Fill, another Next; thread-safe.
class FilePieces {
 public:
  struct Piece {
    uint64_t offset = 0;  // within the range
    absl::string_view bytes;
    std::shared_ptr<const void> owner;  // keeps `bytes` alive
    // On the last piece: the CRC-32 of the whole range, and its statistics when asked for.
    std::optional<uint32_t> crc32;
    std::optional<TensorStats> stats;
  };

  // At most `max_queued` pieces of at most `piece_bytes` are read ahead of Next. With `stats`,
  // the tensor's statistics are computed as the pieces are read (ComputeStats's bits:
  // `piece_bytes` must then be a multiple of kStatsPieceBytes).
  FilePieces(TensorFileRange range, size_t piece_bytes, size_t max_queued, bool stats = false);
  FilePieces(const FilePieces&) = delete;
  FilePieces& operator=(const FilePieces&) = delete;

  const TensorFileRange& range() const { return range_; }

  // Reads every piece, waiting while `max_queued` are queued. Returns when all were read, at
  // the first read error (Next then returns it after the pieces before it), or once Cancel()led.
  void Fill();
  // The next piece, waiting for it; false when none is left. A read error is returned once
  // every piece read before it was taken; no piece follows it.
  absl::Status Next(Piece* piece, bool* got);
  // Fill stops (the sender is gone, or does not want the pieces).
  void Cancel();

 private:
  // Constant after construction.
  const TensorFileRange range_;
  const size_t piece_bytes_;
  const size_t max_queued_;
  const bool stats_;

  bool Room() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return cancelled_ || queue_.size() < max_queued_; }
  bool Ready() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return !queue_.empty() || filled_; }
  // The Await conditions live here, not on the waiting thread's stack: the thread that unlocks
  // evaluates a waiter's condition, and under TSan (whose view of Debian's Abseil is only the
  // annotated Lock/Unlock) its read of a stack-held Condition later looks like a race with
  // whatever the waiter's stack holds there next.
  const absl::Condition room_{this, &FilePieces::Room};
  const absl::Condition ready_{this, &FilePieces::Ready};
  absl::Mutex mu_;
  std::deque<Piece> queue_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool filled_ ABSL_GUARDED_BY(mu_) = false;  // Fill returned: nothing more will be queued
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace parity

#endif  // PARITY_CLIENT_FILE_PIECES_H_
