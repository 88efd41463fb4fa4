// The shared tier of tensor blobs (docs/scale-out.md): an S3-compatible bucket that several
// daemons share, in front of which each daemon's spool holds local copies. Every blob a daemon
// commits to its spool is put in the bucket (Publish) before any row referencing it commits; a
// blob missing from the spool (written by another daemon, or dropped from the spool) is fetched
// into it (Fetch) before it is read. Objects are named by their spool key under the URL's prefix.
//
// Collection rests on two rules the daemon keeps when a shared tier is set: every blob has a
// unique key (never the same key written twice), and a blob gains a new reference after the
// upload that wrote it only through dedup, which never takes a blob the collector has marked
// (Store::MarkTombstones). A blob is deleted in two passes: the first marks each listed blob no
// item references that was last modified more than the grace period before the listing began;
// a later pass deletes each marked blob that still no item references. Any daemon may collect.
//
// Thread-safe.
#ifndef PARITY_SERVER_STORAGE_SHARED_BLOBS_H_
#define PARITY_SERVER_STORAGE_SHARED_BLOBS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/storage/s3.h"
#include "server/storage/spool.h"
#include "server/storage/store.h"

namespace parity {

class SharedBlobs {
 public:
  // `spool` (not owned) outlives the tier.
  static absl::StatusOr<std::unique_ptr<SharedBlobs>> Open(S3Options options, Spool* spool);

  // Puts the spool's blob `key` (`size` bytes) in the bucket, streamed from its file.
  absl::Status Publish(const std::string& key, uint64_t size);
  // Makes blob `key` (`size` bytes) present in the spool: at once when it is there, else
  // fetched from the bucket. NOT_FOUND when the bucket lacks it; the S3 client's and the spool's
  // errors otherwise.
  absl::Status Fetch(const std::string& key, uint64_t size);

  // Makes blob `key` present in the spool, its size asked of the bucket.
  absl::Status Fetch(const std::string& key);

  struct Collected {
    uint64_t listed = 0;   // objects with a blob's name
    uint64_t marked = 0;   // newly marked for deletion
    uint64_t deleted = 0;
    uint64_t bytes = 0;    // of the deleted objects
  };
  // One collection pass over the bucket and `store`: lists the bucket; deletes each blob marked
  // at least `wait_seconds` ago that no item references yet (unmarking the rest); marks each
  // listed blob no item references that was last modified more than `grace_seconds` before the
  // listing began. A failure stops the pass with its error (what was done stays done).
  absl::StatusOr<Collected> Collect(Store& store, int64_t grace_seconds, int64_t wait_seconds);

  uint64_t published() const { return published_.load(std::memory_order_relaxed); }
  uint64_t fetched() const { return fetched_.load(std::memory_order_relaxed); }

 private:
  SharedBlobs(std::unique_ptr<S3Client> s3, Spool* spool) : s3_(std::move(s3)), spool_(spool) {}

  // Constant after construction.
  const std::unique_ptr<S3Client> s3_;
  Spool* const spool_;

  std::atomic<uint64_t> published_{0}, fetched_{0};
};

}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_SHARED_BLOBS_H_
