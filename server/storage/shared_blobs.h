// The shared tier of tensor blobs (docs/scale-out.md): an S3-compatible bucket that several
// daemons share, in front of which each daemon's spool holds local copies. Every blob a daemon
// commits to its spool is put in the bucket (Publish) before any row referencing it commits; a
// blob missing from the spool (written by another daemon, or dropped from the spool) is fetched
// into it (Fetch) before it is read. Objects are named by their spool key under the URL's prefix.
//
// Collection rests on two rules the daemon keeps when a shared tier is set: every blob has a
// unique key (never the same key written twice) and a blob is never offered for dedup (never a
// new reference to an object after the upload that wrote it). An object is then referenced only
// by rows its own upload committed shortly after its put, and any daemon may delete an object
// that no item references and that was last modified more than the grace period before the
// listing it was seen in began.
//
// Thread-safe.
#ifndef PARITY_SERVER_STORAGE_SHARED_BLOBS_H_
#define PARITY_SERVER_STORAGE_SHARED_BLOBS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/storage/s3.h"
#include "server/storage/spool.h"

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

  struct Collected {
    uint64_t listed = 0;   // objects with a blob's name
    uint64_t deleted = 0;
    uint64_t bytes = 0;    // of the deleted objects
  };
  // Lists the bucket, then asks `referenced` for every blob key some item references, then
  // deletes each listed blob that is not among them and was last modified more than
  // `grace_seconds` before the listing began. A delete that fails stops the pass with its error
  // (what was deleted before it stays deleted).
  absl::StatusOr<Collected> Collect(const std::function<absl::StatusOr<std::set<std::string>>()>& referenced,
                                    int64_t grace_seconds);

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
