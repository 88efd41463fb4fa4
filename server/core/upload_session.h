// One agent's upload of one run: the state machine behind Ingest.Upload, without gRPC.
//
// Message order: Start, then per item a Header followed (DATA mode) by Chunks in offset order,
// then End. A bad item is rejected alone (an ItemRejected event) and the upload goes on; a
// status returned by a handler ends the stream (protocol violations such as a missing Start).
// Each tensor is acknowledged once durable; verdicts of every job involving the run are emitted
// as they are stored; after End a Summary event is the last one (once the job is final, or at
// once when the golden run is still incomplete).
//
// Handlers run one at a time per session (on a worker thread); events are emitted from any
// thread through `emit`, which must not block.
#ifndef PARITY_SERVER_CORE_UPLOAD_SESSION_H_
#define PARITY_SERVER_CORE_UPLOAD_SESSION_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/checks/stats.h"
#include "server/core/core.h"
#include "server/storage/held_blobs.h"

namespace parity {

struct UploadStartRequest {
  std::optional<RunRecord> new_run;  // metadata of a new run, or
  std::string attach_run_id;         // an incomplete run to resume
  std::string against_run_id;        // optional: compare against this golden run, or
  std::map<std::string, std::string> against_labels;  // the newest golden run with these labels
  int policy = 0;
  int match_mode = 0;
  std::string config_json;
  // The summary waits for the job to be final even while its golden run is incomplete.
  bool summary_waits_for_job = false;
};

struct UploadEvent {
  enum class Kind { kAccepted, kAck, kRejected, kVerdict, kSummary, kFlushDone };
  explicit UploadEvent(Kind k) : kind(k) {}
  Kind kind;
  // kAccepted
  std::string run_id, job_id;
  std::vector<std::string> held_items;
  uint64_t max_chunk_bytes = 0;
  // kAck, kRejected
  std::string name;
  int64_t index = 0;
  absl::Status status;
  // kVerdict
  OpResultRecord result;
  // kFlushDone
  std::vector<std::string> full_data_names;
  // kSummary
  std::optional<JobRecord> job;
  int64_t items_received = 0, items_rejected = 0;
};

class UploadSession {
 public:
  using EmitFn = std::function<void(UploadEvent)>;

  UploadSession(Core* core, EmitFn emit);
  ~UploadSession();

  // Limits the upload to runs (new, attached, and golden runs compared against) of `project`
  // ("*": any, the default). PERMISSION_DENIED from Start otherwise.
  void set_allowed_project(std::string project) { allowed_project_ = std::move(project); }
  // Asked by Start, with the run's project, before a new run is created or an existing one
  // attached to; an error refuses the start (e.g. RESOURCE_EXHAUSTED: the project holds its
  // share of upload streams).
  void set_admit(std::function<absl::Status(const std::string& project)> admit) { admit_ = std::move(admit); }
  absl::Status Start(const UploadStartRequest& req);
  // `item` carries the header fields (name, api, dtype, shape, data_mode, byte_length, stats,
  // crc32, ...); run_id, blob and inline_data are filled here.
  absl::Status Header(ItemRecord item);
  // `crc32`: the CRC-32 of all the item's bytes when the agent sends it with a chunk (its header
  // having none), verified as the header's is; one that disagrees with the header's is refused.
  // `stats` (not null): the item's statistics, on its last chunk, when its header has none.
  // The chunk's data is the concatenation of `pieces` (the slices it arrived in).
  absl::Status Chunk(uint64_t offset, absl::Span<const absl::string_view> pieces,
                     std::optional<uint32_t> crc32 = std::nullopt, const TensorStats* stats = nullptr);
  absl::Status Chunk(uint64_t offset, absl::string_view data, std::optional<uint32_t> crc32 = std::nullopt,
                     const TensorStats* stats = nullptr) {
    return Chunk(offset, absl::MakeConstSpan(&data, data.empty() ? 0 : 1), crc32, stats);
  }
  // The agent could not read the rest of the current item: the bytes received are dropped and
  // the item is stored as a header with `read_error` (no data) would have stored it. Without a
  // current item, a rejection as for a chunk without a header.
  absl::Status AbortItem(std::string read_error);
  absl::Status End();
  // A part of a file the run carries (RunFilePart): stack.json or construct.json, stored with
  // the run once its last part has arrived and it parses; any other name, a part out of order,
  // a file larger than CoreOptions::max_run_file_bytes or one that does not parse is rejected
  // (ItemRejected named after the file; its later parts are dropped) and the upload goes on.
  absl::Status RunFile(const std::string& name, uint64_t offset, const std::string& data, bool last);
  // Emits FlushDone with the items the server wants in full (upload mode auto).
  absl::Status Flush();
  // Rejects an item whose header could not even be decoded (e.g. an unknown dtype enum); its
  // chunks are dropped.
  absl::Status RejectHeader(const std::string& name, absl::Status why);

  // A blob written with O_DIRECT whose bytes have all arrived is not waited for at once: its
  // last writes go on while the next tensors arrive, and it is put in place and its item stored
  // (then acknowledged) as soon as a later chunk finds its writes done, in arrival order; when
  // more than kMaxPending are pending, the oldest is waited for; all are finished before any
  // message that is not a header or chunk of another item, or by FinishPending(). The caller must
  // call FinishOldestPending() whenever no message is waiting to be handled (until none is
  // pending, or a message arrives), so that a pending item never waits for the agent.
  static constexpr size_t kMaxPending = 8;
  bool has_pending() const { return !pending_.empty(); }
  // Stores the oldest pending item, waiting for its writes.
  void FinishOldestPending();
  // Stores every pending item.
  void FinishPending();

 private:
  struct Shared;
  std::string allowed_project_ = "*";
  std::function<absl::Status(const std::string&)> admit_;
  bool attached_complete_ = false;  // resumed a run whose UploadEnd was already handled
  // Start's parts. Whether this caller's token reaches `project` (`what` names the object).
  absl::Status Allowed(const std::string& project, const std::string& what) const;
  // A run in another project is, to this caller, a run that does not exist (NOT_FOUND).
  absl::Status Visible(const RunRecord& r) const;
  // The golden run a target is uploaded against, in `project`: by id, or the newest complete
  // one with the labels; refused unless the caller sees it.
  absl::StatusOr<std::string> FindGolden(const UploadStartRequest& req, const std::string& project) const;
  // The start's sizes, the disk, the database quota, the labels.
  absl::Status CheckStart(const UploadStartRequest& req) const;
  // Creates the new run once nothing can refuse the start (`golden_id` found first), or names
  // in `attach_id` the run a retried start created.
  absl::Status StartNewRun(const UploadStartRequest& req, bool against, RunRecord* run, std::string* attach_id,
                           std::string* golden_id);
  // Resumes run `run_id`: the items it holds (`held`) and the job it is the target of.
  absl::Status AttachRun(const std::string& run_id, RunRecord* run, std::vector<std::string>* held);
  // The run's verdicts and its job's end reach this upload's stream.
  void SubscribeToRun();
  // UploadAccepted, then the verdicts that arrived before it, in order.
  void SendAccepted(std::vector<std::string> held);
  // Header's parts. Why `item` cannot be received (OK when it can); sets upgrading_.
  absl::Status CheckHeader(const ItemRecord& item);
  // The spool key of the current item's offered blob (sent by reference), or why it cannot
  // be used.
  absl::StatusOr<std::string> ReferencedBlob();
  // Where the current item's data goes: inline, or a spool blob (held in memory for a running
  // job); OK with nothing to receive when the item is complete already.
  absl::Status OpenData();
  void Reject(const std::string& name, absl::Status s);
  void AbandonCurrent();
  // Rejects the item being received, if any, as truncated (DATA_LOSS).
  void RejectUnfinished(const char* because);
  absl::Status Complete();
  // A received item on its way to the store: its blob (if any) to commit, its held copy.
  struct Received {
    ItemRecord item;
    std::unique_ptr<Spool::Writer> blob;
    std::unique_ptr<HeldBlobs::Filling> in_memory;
    bool upgrade = false;
  };
  // Commits the blob, then records and stores the item (or rejects it).
  void Store(Received r);
  static void MaybeSummarize(const std::shared_ptr<Shared>& sh, Core* core);

  Core* const core_;
  std::shared_ptr<Shared> shared_;
  bool started_ = false;
  bool ended_ = false;
  std::string run_id_;
  std::string project_;  // the run's
  int64_t listener_ = 0;
  std::map<std::string, std::pair<int64_t, DataMode>> held_;  // name -> (index, data mode)
  std::set<int64_t> indexes_;
  bool upgrading_ = false;  // the current item replaces a STATS/CRC item of the same name
  int64_t item_count_ = 0;
  // The item being received.
  std::optional<ItemRecord> current_;
  std::unique_ptr<Spool::Writer> blob_;
  // Data of at most CoreOptions::inline_max_bytes, gathered here for the item's row (blob_ null).
  bool inline_ = false;
  std::string inline_buf_;
  // A copy of a large blob's bytes for the comparison, when a running job involves this run.
  std::unique_ptr<HeldBlobs::Filling> in_memory_;
  uint64_t received_ = 0;
  uint32_t crc_ = 0;
  bool crc_from_chunk_ = false;  // the current item's crc32 came with a chunk (TensorChunk.crc32)
  std::deque<Received> pending_;  // oldest first; see FinishPending
  // Stores pending items, oldest first, while their writes are done.
  void FinishWritten();
  bool skipping_ = false;  // the chunks of a rejected item are dropped
  // Run files arriving (RunFile), by name; a refused one keeps an entry (failed) until its last
  // part so that its other parts are dropped.
  struct RunFileBuffer {
    std::string data;
    bool failed = false;
  };
  std::map<std::string, RunFileBuffer> run_files_;
};

// Validates a header; OK or the status to reject the item with (naming field and values).
absl::Status ValidateHeader(const ItemRecord& item, const CoreOptions& options);

}  // namespace parity

#endif  // PARITY_SERVER_CORE_UPLOAD_SESSION_H_
