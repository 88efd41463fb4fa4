// Bytes of large blobs just received, held in memory until a comparison takes them, so that a
// tensor written to the spool past the page cache (O_DIRECT) is not read back from disk a moment
// later when its pair is compared.
//
// Bounded: `capacity_bytes` covers both the blobs being received (reserved at their first byte)
// and the blobs held, each counted as its buffer's capacity (PooledBufferCapacity: a power of
// two from 64 KiB), which is what it may keep resident. A reservation that does not fit evicts the oldest held blobs; one that
// still does not fit is refused, and that blob is read from the spool as before. Taking a blob
// removes it (its bytes live on with the taker), so what is held is what no comparison has read
// yet. Holding is only an optimisation: the spool stays the record, and a miss costs a disk read.
//
// Thread-safe.
#ifndef PARITY_SERVER_STORAGE_HELD_BLOBS_H_
#define PARITY_SERVER_STORAGE_HELD_BLOBS_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/base/file_util.h"

namespace parity {

class HeldBlobs {
 public:
  // 0 disables holding: Reserve never succeeds.
  explicit HeldBlobs(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}
  HeldBlobs(const HeldBlobs&) = delete;
  HeldBlobs& operator=(const HeldBlobs&) = delete;

  // A blob of `size` bytes being received, to be filled by the caller and then Hold()-ed, or
  // dropped (its reservation returns). Not thread-safe itself.
  class Filling {
   public:
    ~Filling();
    char* data() { return buffer_.get(); }
    // The page-aligned buffer itself (a spool writer may write the blob from it: Spool::Create).
    const std::shared_ptr<char>& buffer() const { return buffer_; }
    uint64_t size() const { return size_; }

   private:
    friend class HeldBlobs;
    Filling(HeldBlobs* owner, std::shared_ptr<char> buffer, uint64_t size, uint64_t charge)
        : owner_(owner), buffer_(std::move(buffer)), size_(size), charge_(charge) {}
    HeldBlobs* owner_;
    std::shared_ptr<char> buffer_;
    uint64_t size_;
    uint64_t charge_;  // the buffer's capacity, as counted against the room
  };

  // Null when `size` is 0 or its buffer's capacity is above half the room, when no room can be made (blobs being
  // received are never evicted), or when no memory can be mapped.
  std::unique_ptr<Filling> Reserve(uint64_t size);
  // The filled blob becomes takeable under `key` (its content address). A key already held keeps
  // the first copy.
  void Hold(const std::string& key, std::unique_ptr<Filling> filled);
  // The bytes held under `key`, removed from here; null owner when not held.
  SharedBytes Take(const std::string& key);

  struct Counters {
    uint64_t held = 0;       // blobs ever held
    uint64_t taken = 0;      // of those, taken by a comparison
    uint64_t evicted = 0;    // dropped to make room before anyone took them
    uint64_t refused = 0;    // reservations that found no room
    uint64_t held_bytes = 0, reserved_bytes = 0;  // now (buffers' capacities)
    uint64_t peak_bytes = 0;  // the most ever held and reserved at once (the same)
  };
  Counters counters() const;

 private:
  void Unreserve(uint64_t charge);

  // Constant after construction.
  const uint64_t capacity_;

  mutable absl::Mutex mu_;
  struct Entry {
    std::string key;
    SharedBytes bytes;
    uint64_t charge;  // its buffer's capacity
  };
  std::list<Entry> order_ ABSL_GUARDED_BY(mu_);  // oldest first
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> by_key_ ABSL_GUARDED_BY(mu_);
  uint64_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reserved_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  Counters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_HELD_BLOBS_H_
