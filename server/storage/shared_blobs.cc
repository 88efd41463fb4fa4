#include "server/storage/shared_blobs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status_macros.h"

namespace parity {

absl::StatusOr<std::unique_ptr<SharedBlobs>> SharedBlobs::Open(S3Options options, Spool* spool) {
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<S3Client> s3, S3Client::Open(std::move(options)));
  // Reach the bucket now rather than at the first upload: a wrong endpoint, bucket or key is
  // an error at start.
  PARITY_RETURN_IF_ERROR(s3->ListObjects("~").status());
  return std::unique_ptr<SharedBlobs>(new SharedBlobs(std::move(s3), spool));
}

absl::Status SharedBlobs::Publish(const std::string& key, uint64_t size) {
  const std::string path = spool_->PathOf(key);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open blob ", key, " to publish it: ", std::strerror(errno)));
  }
  absl::Status s = s3_->PutFile(key, fd, size);
  ::close(fd);
  if (s.ok()) published_.fetch_add(1, std::memory_order_relaxed);
  return s;
}

absl::Status SharedBlobs::Fetch(const std::string& key, uint64_t size) {
  if (spool_->Contains(key)) return absl::OkStatus();
  PARITY_RETURN_IF_ERROR(spool_->Place(key, size, [&](int fd) { return s3_->GetToFile(key, fd); }));
  fetched_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status SharedBlobs::Fetch(const std::string& key) {
  if (spool_->Contains(key)) return absl::OkStatus();
  PARITY_ASSIGN_OR_RETURN(const uint64_t size, s3_->SizeOf(key));
  return Fetch(key, size);
}

absl::StatusOr<SharedBlobs::Collected> SharedBlobs::Collect(Store& store, int64_t grace_seconds,
                                                            int64_t wait_seconds) {
  const int64_t listed_at_ms = absl::ToUnixMillis(absl::Now());
  PARITY_ASSIGN_OR_RETURN(std::vector<S3Client::Object> objects, s3_->ListObjects(""));
  std::map<std::string, uint64_t> sizes;
  Collected c;
  for (const S3Client::Object& o : objects) {
    if (Spool::IsKey(o.key)) sizes[o.key] = o.size;  // other names are not Parity's
  }
  c.listed = sizes.size();
  // Marked in an earlier pass: gone unless an item took it meanwhile (before it was marked;
  // none can since).
  PARITY_ASSIGN_OR_RETURN(std::vector<std::string> marked, store.TombstonesBefore(listed_at_ms - wait_seconds * 1000));
  for (const std::string& key : marked) {
    PARITY_ASSIGN_OR_RETURN(const bool referenced, store.IsReferenced(key));
    if (!referenced) {
      PARITY_RETURN_IF_ERROR(s3_->Delete(key));
      ++c.deleted;
      auto it = sizes.find(key);
      if (it != sizes.end()) {
        c.bytes += it->second;
        sizes.erase(it);
      }
    }
    PARITY_RETURN_IF_ERROR(store.DropTombstone(key));
  }
  PARITY_ASSIGN_OR_RETURN(std::vector<std::string> refs, store.ReferencedBlobs());
  const std::set<std::string> keep(refs.begin(), refs.end());
  std::vector<std::string> candidates;
  const int64_t cutoff_ms = listed_at_ms - grace_seconds * 1000;
  for (const S3Client::Object& o : objects) {
    if (sizes.count(o.key) && !keep.count(o.key) && o.modified_ms != 0 && o.modified_ms < cutoff_ms) {
      candidates.push_back(o.key);
    }
  }
  PARITY_ASSIGN_OR_RETURN(c.marked, store.MarkTombstones(candidates, listed_at_ms));
  return c;
}

}  // namespace parity
