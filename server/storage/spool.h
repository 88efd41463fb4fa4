// The spool: tensor bytes outside SQLite, one file per blob.
//
// Layout: <dir>/<first two hex digits>/<key>, and <dir>/tmp/ for blobs being written. A key is
// 64 lowercase hex digits: the SHA-256 of the content for blobs below `unique_key_min_bytes`
// (content-addressed: writing the same content twice stores it once), a unique random name for
// larger ones (the write path hashes nothing; the same content written twice is kept twice, and
// HashOf() gives the content's SHA-256 when dedup asks for it).
// A blob is written to tmp/, fsynced (unless disabled), then renamed into place, so a crash
// leaves either the whole blob or a temp file that Recover() removes. With `group_sync`, Commit
// renames without fsync and the blob becomes durable at the next SyncPending() (one syncfs for
// every blob committed since the previous one): the caller runs it before it records anything
// that references the blob. A power loss can then leave a blob under its final name whose bytes
// never reached the disk; nothing committed references it, and the owner must delete
// unreferenced blobs at start-up (Collect with an empty grace) before trusting the spool.
// The total size is capped by `quota_bytes`: a write that would exceed it
// fails with RESOURCE_EXHAUSTED before any byte is written. Blobs of at least `direct_min_bytes`
// are written with O_DIRECT by two I/O threads (a blob of more than 1 MiB into blocks allocated
// when it is created), through up to four 1 MiB aligned buffers per blob (one per started MiB):
// the caller fills one while earlier ones go to disk; readers should read them with O_DIRECT too
// (ReadFileDirect) rather than fill the page cache.
//
// Thread-safe.
#ifndef PARITY_SERVER_STORAGE_SPOOL_H_
#define PARITY_SERVER_STORAGE_SPOOL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/base/sha256.h"

namespace parity {

struct SpoolOptions {
  std::string dir;
  uint64_t quota_bytes = 64ull << 30;
  bool fsync = true;
  bool group_sync = false;  // with fsync: durability deferred to SyncPending()
  // Blobs of at least this many bytes are written with O_DIRECT (0: never), bypassing the page
  // cache; falls back to buffered writes where the file system refuses O_DIRECT. Smaller blobs
  // go through the page cache, where their many small writes and reads are cheaper than disk
  // round trips.
  uint64_t direct_min_bytes = 64 << 10;
  // Threads writing O_DIRECT stages (at least 1). A blob keeps at most 4 stages in flight.
  int io_threads = 2;
  // Staging buffers (1 MiB each) of O_DIRECT blobs in use at once over all blobs: a blob takes
  // up to 4 while the count is below this; a blob whose last byte has been handed to the I/O
  // threads gives each stage back as soon as its write ends. A blob that finds none left is
  // written through the page cache instead (blobs_past_stage_budget counts them), so stages in
  // use are at most this many whatever the number of uploads. A blob created with a source
  // takes none.
  uint64_t stage_bytes = 32ull << 20;
  // Blobs of at least this many bytes are named by a unique random key instead of their
  // content's SHA-256 (0: never): hashing was the write path's largest cost (0.5 CPU-seconds per
  // GB with SHA-NI), and only content offered for dedup needs it (HashOf). 64 KiB: the size from
  // which the agent probes by length and CRC-32 before it offers a hash.
  uint64_t unique_key_min_bytes = 64 << 10;
};

class Spool {
 public:
  // One blob being written. Not thread-safe; destroy without Commit() to abandon it.
  class Writer {
   public:
    ~Writer();
    // FAILED_PRECONDITION past Commit or Seal, or for a blob created with a source when `data`
    // is not source + size(); OUT_OF_RANGE past the declared size.
    absl::Status Append(const void* data, size_t n);
    uint64_t size() const { return size_; }
    bool direct() const { return direct_ != nullptr; }  // written with O_DIRECT (see WritesDirect)
    // Hands every byte appended so far to the disk without waiting for the writes (O_DIRECT:
    // the last, partial stage goes to the I/O threads); no Append may follow. Commit() then
    // waits only for what is still in flight. Optional.
    absl::Status Seal();
    // Whether Commit() would not wait for the disk: no O_DIRECT write is in flight.
    bool WritesDone();
    // Puts the blob in place and returns its key (the SHA-256 hex of the content, or a fresh
    // unique key: KeysByContent); durable on return, or with `group_sync` after the next
    // SyncPending().
    absl::StatusOr<std::string> Commit();

   private:
    friend class Spool;
    Writer(Spool* spool, std::string tmp_path, int fd, uint64_t reserved, std::shared_ptr<char> source);
    Spool* spool_;
    std::string tmp_path_;
    int fd_;
    uint64_t reserved_;
    const std::shared_ptr<char> source_;  // see Create; null: Append copies
    uint64_t size_ = 0;
    bool sealed_ = false;
    uint64_t written_back_ = 0;  // bytes whose writeback was started (fsync mode)
    uint64_t file_offset_ = 0;   // buffered writes
    absl::Status WriteAll(const char* p, size_t n);
    // O_DIRECT: bytes are staged in aligned buffers and written in whole blocks by the spool's
    // I/O threads while the next buffer fills (and the caller hashes).
    struct Direct;
    std::unique_ptr<Direct> direct_;
    // `wait_next`: returns once the next stage may be filled (not needed after the last one).
    absl::Status SubmitStage(bool wait_next = true);
    std::unique_ptr<Sha256> hash_;  // null for a uniquely keyed blob
    static constexpr uint64_t kWritebackBytes = 4 << 20;
  };

  static absl::StatusOr<std::unique_ptr<Spool>> Open(const SpoolOptions& options);
  ~Spool();  // after every Writer

  // Starts a blob of exactly `size` bytes (reserved against the quota).
  //
  // With `source` (page-aligned, at least `size` rounded up to 4096 bytes; parityd's held
  // blobs), the caller puts the blob's bytes there itself and Appends each piece from there, in
  // order: Append(source + size(), n). An O_DIRECT blob is then written straight from `source`,
  // with no staging buffer and no copy (at most four 1 MiB writes in flight, as with stages),
  // and the bytes from `size` to the next 4096 boundary are overwritten with zeros; a blob
  // written through the page cache writes the same bytes as without it. The writer keeps
  // `source` until it is destroyed.
  absl::StatusOr<std::unique_ptr<Writer>> Create(uint64_t size, std::shared_ptr<char> source = nullptr);
  std::string PathOf(const std::string& key) const;
  // Puts a copy of a blob kept elsewhere (a shared blob store) under `key`: `fill` writes the
  // blob's `size` bytes to the open file it is given and returns how many it wrote. Reserved
  // against the quota as Create; neither hashed nor fsynced (a copy that can be fetched again).
  // OK at once when the key is held. INVALID_ARGUMENT for a malformed key, DATA_LOSS when `fill`
  // wrote another number of bytes, `fill`'s own error otherwise.
  absl::Status Place(const std::string& key, uint64_t size,
                     const std::function<absl::StatusOr<uint64_t>(int fd)>& fill);
  // The content key of these bytes (their SHA-256 hex), wherever they are kept.
  static std::string KeyOf(absl::string_view data);
  // Whether a blob of `size` bytes is keyed by its content (KeyOf) rather than by a unique key.
  bool KeysByContent(uint64_t size) const {
    return options_.unique_key_min_bytes == 0 || size < options_.unique_key_min_bytes;
  }
  // The SHA-256 hex of a held blob's content, read from disk in 1 MiB pieces (pieces of a blob
  // written with O_DIRECT are dropped from the page cache once hashed). INVALID_ARGUMENT for a malformed key, NOT_FOUND when not held,
  // DATA_LOSS when the file changes size while read.
  absl::StatusOr<std::string> HashOf(const std::string& key) const;
  // Whether a blob of `size` bytes is written with O_DIRECT (when the file system allows):
  // readers should read it so too, past the page cache.
  bool WritesDirect(uint64_t size) const {
    return options_.direct_min_bytes > 0 && size >= options_.direct_min_bytes;
  }
  bool Contains(const std::string& key) const;  // false for anything but a valid key
  // Size of a held blob; INVALID_ARGUMENT for a malformed key, NOT_FOUND when not held.
  absl::StatusOr<uint64_t> SizeOf(const std::string& key) const;
  // True for 64 lowercase hex digits (the only names PathOf is ever given from outside).
  static bool IsKey(absl::string_view key);
  // Deletes every blob not in `keep` and every temp file left by another process, except files
  // modified less than `grace_seconds` ago (a blob committed while `keep` was being computed);
  // returns the bytes freed.
  absl::StatusOr<uint64_t> Collect(const std::set<std::string>& keep, int64_t grace_seconds);
  uint64_t used_bytes() const;
  // With fsync and group_sync: makes every blob committed so far durable (syncfs of the spool's
  // file system, only when a blob was committed since the last success). OK otherwise.
  absl::Status SyncPending();
  uint64_t syncs() const;  // successful syncfs calls by SyncPending

 private:
  class IoThreads;
  explicit Spool(SpoolOptions o);
  // Reserves `size` bytes against the quota (RESOURCE_EXHAUSTED past it) and names a new temp
  // file for them; Release gives the reservation back.
  absl::StatusOr<std::string> Reserve(uint64_t size);
  void Release(uint64_t reserved, uint64_t committed);

  // Constant after construction.
  const SpoolOptions options_;
  // Writes O_DIRECT stages. Its queue holds at most Writer::Direct::kStages jobs per blob being
  // written or sealed and not yet committed, so it is bounded by the number of such blobs (per
  // upload stream, one being received and UploadSession's few pending ones).
  const std::unique_ptr<IoThreads> io_;

  // Staging buffers of O_DIRECT blobs, kept for the next blob (mapped once: no fresh pages per
  // blob, no heap fragmentation); at most kIdleStages wait idle. TakeStage returns null when
  // options_.stage_bytes are in use, or when mapping fails.
  char* TakeStage();
  void GiveStage(char* p);
  static constexpr size_t kIdleStages = 32;
  mutable absl::Mutex stages_mu_;
  std::vector<char*> idle_stages_ ABSL_GUARDED_BY(stages_mu_);
  uint64_t stages_in_use_ ABSL_GUARDED_BY(stages_mu_) = 0;
  uint64_t stages_high_ ABSL_GUARDED_BY(stages_mu_) = 0;
  uint64_t past_stage_budget_ ABSL_GUARDED_BY(stages_mu_) = 0;

 public:
  // The most O_DIRECT staging buffers in use at once so far (see SpoolOptions::stage_bytes).
  uint64_t stages_high_water() const;
  // Bytes of O_DIRECT staging buffers in use now, and the most at once so far (both within
  // SpoolOptions::stage_bytes).
  uint64_t stage_bytes_in_use() const;
  uint64_t stage_bytes_high_water() const;
  // Blobs that would have been written O_DIRECT but found no stage within the budget, so far.
  uint64_t blobs_past_stage_budget() const;

  mutable absl::Mutex mu_;
  uint64_t used_ ABSL_GUARDED_BY(mu_) = 0;      // committed blob bytes
  uint64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;  // bytes of blobs being written
  uint64_t next_tmp_ ABSL_GUARDED_BY(mu_) = 0;
  bool unsynced_ ABSL_GUARDED_BY(mu_) = false;  // group_sync: a blob committed since the last sync
  uint64_t syncs_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_SPOOL_H_
