// The daemon's core: runs, items, jobs, live pairing, comparison on a bounded worker pool,
// result storage and culprit analysis. No gRPC here; the service layer is a thin translation.
//
// A job compares a target run against a golden run. It starts as soon as it exists (both runs
// may still be uploading): every durable item is paired with its counterpart, when present, and
// the pair is compared on the compare pool; results are stored, then announced to listeners.
// When both runs are complete and every pair is done, unmatched items get UNMATCHED results,
// the culprit analysis runs and the job is DONE. Jobs that were running when the daemon stopped
// are resumed by Open().
//
// Thread-safe.
#ifndef PARITY_SERVER_CORE_CORE_H_
#define PARITY_SERVER_CORE_CORE_H_

#include <atomic>
#include <functional>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/checks/compare_config.h"
#include "common/compare/culprit.h"
#include "common/formats/dump_structure.h"
#include "server/storage/data_dir_lock.h"
#include "server/core/run_items_cache.h"
#include "server/core/worker_pool.h"
#include "server/metrics/metrics.h"
#include "server/storage/held_blobs.h"
#include "server/storage/records.h"
#include "server/storage/shared_blobs.h"
#include "server/storage/spool.h"
#include "server/storage/store.h"

namespace parity {

struct CoreOptions {
  Metrics* metrics = nullptr;  // not owned; null: none kept
  std::string data_dir = "parity-data";   // holds parity.db and spool/
  // The store: "" is DIR/parity.db (SQLite); a PostgreSQL connection URI puts it in that
  // database instead (StoreOptions::path). The spool stays in the data directory.
  std::string store;
  // The shared blob tier: "" keeps tensor bytes only in the spool; an S3 URL
  // (s3://BUCKET[/PREFIX]?endpoint=URL, ParseS3Url) puts every blob in that bucket too, where
  // the other daemons of a scale-out deployment find it, and fetches into the spool the blobs
  // other daemons wrote (SharedBlobs). Every blob is then keyed uniquely; dedup finds blobs
  // by their content's hash, as for large blobs without it.
  std::string blobs;
  // With `blobs`: local copies in the spool older than this are dropped by the collector (the
  // bucket keeps them), and objects no item references are deleted from the bucket once they
  // are older than `blob_gc_grace_seconds` (longer than any upload's time between writing a
  // blob and committing its item).
  int64_t blob_cache_seconds = 3600;
  int64_t blob_gc_grace_seconds = 24 * 3600;
  // On a PostgreSQL store (several daemons): a daemon compares a job only while it holds the
  // job's lease, renewed every third of this; a job whose lease expired (its daemon died) is
  // taken over by another daemon and resumed from its stored results. The daemon receiving the
  // job's target upload takes it first; the others wait `job_takeover_wait_seconds` more for
  // a job whose target is still being uploaded (the agent reconnecting elsewhere).
  int64_t job_lease_seconds = 10;
  int64_t job_takeover_wait_seconds = 60;
  int compare_workers = 2;
  size_t compare_queue = 64;              // queued comparisons (each holds no tensor data)
  uint64_t max_tensor_bytes = 4ull << 30;
  // Largest stack.json or construct.json a run carries (held in memory while it arrives), and
  // the most such bytes all uploads may hold at once.
  uint64_t max_run_file_bytes = 256ull << 20;
  uint64_t max_run_file_memory_bytes = 512ull << 20;
  uint64_t max_chunk_bytes = 1u << 20;
  int64_t max_items_per_run = 2000000;
  uint64_t spool_quota_bytes = 64ull << 30;
  // New uploads and new tensor data are refused (RESOURCE_EXHAUSTED) while the data directory's
  // file system has less free space than this; queries and running comparisons go on.
  uint64_t min_free_disk_bytes = 64ull << 20;
  bool fsync = true;
  // With fsync: blobs are made durable together, once per store transaction (one syncfs)
  // instead of two fsyncs each; still before anything referencing them is acknowledged.
  bool group_sync = true;
  uint64_t spool_direct_min_bytes = 64 << 10;  // SpoolOptions::direct_min_bytes
  int spool_io_threads = 2;                   // SpoolOptions::io_threads
  uint64_t spool_stage_bytes = 32ull << 20;   // SpoolOptions::stage_bytes
  uint64_t spool_unique_key_min_bytes = 64 << 10;  // SpoolOptions::unique_key_min_bytes
  // Large blobs (at least spool_direct_min_bytes, written past the page cache) received for a
  // run that a running job compares are also kept in memory, up to this many bytes, until their
  // comparison takes them: not read back from disk just after being written there (see
  // HeldBlobs). 0: never.
  uint64_t held_blob_bytes = 128ull << 20;
  // Tensors of at most this many bytes keep their data in their item's row in the database
  // (ItemRecord::inline_data) instead of a spool file: no file to create, sync and open per
  // small tensor. Their data is read with the run's items, so a job holds at most this much per
  // item in memory. 0: every tensor's data goes to the spool.
  uint64_t inline_max_bytes = 4096;
  // Items of complete runs kept in memory for the next job comparing them (RunItemsCache),
  // at most this many in all (about 0.6 KiB each) and this much inline data.
  // 0 items: every job reads its runs from the store.
  size_t run_cache_items = 100000;
  uint64_t run_cache_data_bytes = 64ull << 20;
  size_t max_pending_writes = 4096;
  size_t max_pending_writes_per_project = 1024;
  int sort_cache_entries = 4;  // finished jobs' result orders kept in memory (StoreOptions)
  // Tensor data of complete runs older than this, that no running job needs, is dropped from
  // the spool (records, statistics and results stay; later jobs compare statistics).
  int64_t spool_retention_seconds = 7 * 24 * 3600;
  int64_t gc_interval_seconds = 600;  // 0: only at start-up
  // New uploads and new items are refused (RESOURCE_EXHAUSTED) while parity.db and its
  // write-ahead log hold this many bytes or more: metadata (names, statistics, non-tensor
  // values, results) has a quota as tensor data has. 0: no quota.
  uint64_t database_quota_bytes = 32ull << 30;
};

// Validation limits shared with the service layer.
inline constexpr size_t kMaxNameBytes = 1024;
inline constexpr size_t kMaxReadErrorBytes = 4096;  // ItemRecord::read_error
inline constexpr size_t kMaxLabels = 64;
// A non-tensor argument's value (its Python str()) is stored with its item: at most this long.
inline constexpr size_t kMaxScalarValueBytes = 64 << 10;
inline constexpr size_t kMaxConfigJsonBytes = 64 << 10;  // a job's config_json

// OK, or INVALID_ARGUMENT naming `field`: at most kMaxLabels labels, keys 1-256 bytes, values
// at most 256 bytes (a run's labels, and the labels that select a golden run).
absl::Status ValidateLabels(absl::string_view field, const std::map<std::string, std::string>& labels);

inline constexpr char kParitydVersion[] = "parityd 0.1.0";

// One figure of a running parityd against the flag that bounds it (ServerStatus).
struct Gauge {
  std::string name;
  uint64_t value = 0;
  uint64_t peak = 0;            // the most since start; 0 when not tracked
  uint64_t limit = 0;           // the value of `flag` (only when `flag` is set)
  bool limit_is_floor = false;  // the value must stay at or above `limit`
  bool bytes = false;
  // parityd's flag that sets `limit`, "" when none.
  std::string flag;
};

struct ResultEvent {
  std::string job_id;
  OpResultRecord result;
};

// A job's comparison settings: its config text, then its policy and match mode.
absl::StatusOr<CompareConfig> JobConfig(const JobRecord& rec);

// The run's construct.json parsed (its module tree); nullopt when the run carries none, or it
// cannot be read or parsed (it was checked when it arrived).
std::optional<DumpStructure> RunModuleTree(Store& store, const std::string& run_id);

class Core {
 public:
  using ResultListener = std::function<void(const ResultEvent&)>;
  using JobListener = std::function<void(const JobRecord&)>;

  static absl::StatusOr<std::unique_ptr<Core>> Open(const CoreOptions& options);
  ~Core();
  // Stops the compare pool after the queued comparisons, then drains the store. Idempotent.
  void Shutdown();

  const CoreOptions& options() const { return options_; }
  // Run files being received (UploadSession::RunFile) hold at most
  // CoreOptions::max_run_file_memory_bytes in all: false when `n` more would exceed it.
  bool ReserveRunFileBytes(uint64_t n);
  void ReleaseRunFileBytes(uint64_t n) { run_file_bytes_.fetch_sub(n); }
  Store& store() { return *store_; }
  // OK, or RESOURCE_EXHAUSTED naming the free bytes and the limit (see min_free_disk_bytes).
  absl::Status CheckFreeDisk() const;
  // Bytes free to this process on the data directory's file system.
  absl::StatusOr<uint64_t> FreeDiskBytes() const;
  // OK, or RESOURCE_EXHAUSTED naming the database's size and database_quota_bytes. The size is
  // measured at most every 100 ms (a burst of headers costs no system call each).
  absl::Status CheckDatabaseQuota() const;
  // parity.db and its write-ahead log, in bytes, as last measured, plus the rows stored since and
  // those on their way to the store.
  uint64_t DatabaseBytes() const;
  // Appends the core's gauges: jobs_running, compare_queue, store_pending_writes,
  // held_blob_bytes, spool_stage_bytes, run_cache_items, spool_bytes, disk_free_bytes (omitted
  // when statvfs fails).
  void AppendGauges(std::vector<Gauge>* out) ABSL_LOCKS_EXCLUDED(mu_);
  Spool& spool() { return *spool_; }
  HeldBlobs& held_blobs() { return *held_blobs_; }
  SharedBlobs* shared_blobs() { return shared_blobs_.get(); }  // null without CoreOptions::blobs
  // An upload attached to `job_id`'s target run on this daemon: the job is compared here when
  // its lease can be taken (its verdicts then stream back on that upload), else by whichever
  // daemon holds or takes it. No effect without leases or when the job is active here.
  void AdoptJob(const std::string& job_id) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a running job involves `run_id`: its large blobs are then worth holding.
  bool RunHasActiveJob(const std::string& run_id) ABSL_LOCKS_EXCLUDED(mu_);

  // Runs. INVALID_ARGUMENT for a bad project, side or label.
  absl::StatusOr<RunRecord> CreateRun(RunRecord meta);
  // The newest complete golden run of `project` with all these labels; NOT_FOUND when none.
  absl::StatusOr<RunRecord> FindGoldenByLabels(const std::string& project,
                                               const std::map<std::string, std::string>& labels);
  // Marks the run complete (hashes, op counts) once all its queued item writes are durable.
  absl::Status CompleteRun(const std::string& run_id);

  // Stores an item record (its blob already in the spool); `done` runs once it is durable (or
  // failed), then the item takes part in every job involving its run. `upgrade` replaces an
  // item of the same name first sent as statistics/CRC with its data. The write takes its turn
  // among `project`'s (see Store::Share).
  void AddItem(const std::string& project, ItemRecord item, std::function<void(const absl::Status&)> done,
               bool upgrade = false);

  // The target items of `run_id` whose statistics or CRC disagree with their golden counterpart,
  // and which therefore need their data (upload mode auto). Waits until every item write queued
  // before the call is durable; empty while the golden run is still incomplete.
  absl::StatusOr<std::vector<std::string>> FullDataWanted(const std::string& run_id);

  // A job's stored items are paired, and their pairs scheduled, this many at a time as they
  // load: comparisons start before both runs are read.
  static constexpr size_t kLoadBatch = 1024;
  // A finishing job stores its unmatched rows this many per write (one transaction each).
  static constexpr size_t kFinalRowsPerWrite = 4096;
  // Jobs. FAILED_PRECONDITION when the runs are not a golden and a target of one project.
  absl::StatusOr<JobRecord> SubmitJob(const std::string& golden_run_id,
                                      const std::string& target_run_id, int policy,
                                      int match_mode, const std::string& config_json);
  absl::StatusOr<JobRecord> CancelJob(const std::string& job_id);
  // The live record of a running job, or the stored one.
  absl::StatusOr<JobRecord> GetJob(const std::string& job_id);
  // The metric a plot of the job shows unless asked for another: its policy's main one
  // (PolicyMainMetric), or, when its results lack it (statistics-only dumps), the first
  // sortable metric of its first result.
  std::string PlotMetric(const JobRecord& job);

  // Listeners run on internal threads and must not block. Events of every job involving
  // `run_id` (or only `job_id`). Returns an id for Unsubscribe.
  int64_t SubscribeRun(const std::string& run_id, ResultListener on_result, JobListener on_job);
  int64_t SubscribeJob(const std::string& job_id, ResultListener on_result, JobListener on_job);
  void Unsubscribe(int64_t id);

  // Dedup. The key of a spool blob that an item of `project` references and whose content's
  // SHA-256 is `sha256` (a content key, or a unique key whose hash was recorded by HashBlobs);
  // "" when none is held. Another project's blobs are never answered. With `wait`, first waits
  // for the hashes being taken when it is called (HashesPending), up to 60 s: call it so on a
  // worker thread only.
  absl::StatusOr<std::string> HeldBlobFor(const std::string& project, const std::string& sha256,
                                          bool wait = true);
  // Whether `project` may hold content of this length and CRC-32 (an item of it references such
  // a blob). Adds to `to_hash` the blobs of that length and CRC-32 whose SHA-256 is not known
  // yet (at most kMaxHashedPerProbe) and marks them pending: the caller must pass them to
  // HashBlobs (or AbandonHashes), typically after answering, so that the agent hashes its copy
  // meanwhile.
  absl::StatusOr<bool> ProbeContent(const std::string& project, uint64_t byte_length,
                                    uint32_t crc32, std::vector<std::string>* to_hash);
  static constexpr int kMaxHashedPerProbe = 8;
  // Takes the blobs' SHA-256 from disk and records it, then clears them from the pending set
  // (also on failure: their content is then not deduplicated). Blocks for the reads.
  void HashBlobs(const std::vector<std::string>& keys);
  // Clears blobs marked by ProbeContent from the pending set without hashing them.
  void AbandonHashes(const std::vector<std::string>& keys);
  bool HashesPending() const ABSL_LOCKS_EXCLUDED(hash_mu_);

  // Deletes spool blobs no item references (and stale temp files); returns bytes freed.
  absl::StatusOr<uint64_t> CollectSpool(int64_t grace_seconds);
  // Drops the data of runs past the retention period that no running job involves, then
  // collects the spool. Returns the number of runs whose data was dropped.
  absl::StatusOr<int64_t> ApplyRetention(int64_t now_ms);

 private:
  struct ActiveJob;
  struct Listener {
    std::string run_id, job_id;
    ResultListener on_result;
    JobListener on_job;
  };

  explicit Core(CoreOptions o);
  absl::Status Resume();
  // Job leases (CoreOptions::job_lease_seconds; only with a PostgreSQL store, leases_): whether
  // this daemon may compare the job (it took or holds its lease). Always true without leases.
  absl::StatusOr<bool> TakeLease(const std::string& job_id);
  // Renews this daemon's leases and takes over orphaned jobs, every third of the lease time.
  void LeaseLoop();
  void TakeOverOrphans();
  // Stores the live record of each job compared here, so that other daemons show its progress.
  void PublishProgress() ABSL_LOCKS_EXCLUDED(mu_);
  bool HasUploadOf(const std::string& run_id) ABSL_LOCKS_EXCLUDED(mu_);
  // Live pairing across daemons (with leases): every kRemotePollMs, the items another daemon
  // stored since the last look, of each incomplete run a job here compares and no upload here
  // sends, are added to the jobs as if they had arrived here, and a run found complete
  // completes them.
  void RemoteRunsLoop();
  void PollRemoteRuns();
  // Marks `run_id` complete in every job here comparing it, then finalises what can be.
  void MarkRunComplete(const std::string& run_id) ABSL_LOCKS_EXCLUDED(mu_);
  static constexpr int64_t kRemotePollMs = 500;
  // A shared blob marked for deletion is deleted no sooner than this after (by a later pass):
  // longer than any upload takes between finding a blob for dedup and storing its item.
  static constexpr int64_t kTombstoneWaitSeconds = 60;
  absl::StatusOr<JobRecord> StartJob(JobRecord rec, bool is_new) ABSL_LOCKS_EXCLUDED(mu_);
  // Sizes the job's tables once for what its runs hold now (growing a table rehashes every name
  // in it), and counts the results already stored (a resumed job) as done before any item is
  // paired.
  void ReserveAndResume(ActiveJob& j, const RunRecord& golden, const RunRecord& target,
                        const std::vector<OpResultRecord>& existing) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A job's live state before it is visible: its pairing rules from its runs' layouts.
  std::unique_ptr<ActiveJob> MakeActiveJob(const JobRecord& rec, CompareConfig config);
  // Adds a stored run's items to the job a batch at a time, pairing as they come.
  absl::Status LoadRunIntoJob(const std::string& job_id, const RunRecord& run, bool golden)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Items are shared, never copied, between the jobs and comparisons that use them.
  using ItemPtr = std::shared_ptr<const ItemRecord>;
  void OnItemDurable(const ItemPtr& item, bool upgrade);
  void AddToJob(ActiveJob& job, const ItemPtr& item, bool golden, bool upgrade = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Pump() ABSL_LOCKS_EXCLUDED(mu_);
  struct ComparePair {
    ItemPtr target, golden;
    uint32_t target_slot = 0;  // ActiveJob::target_slots
    bool fuzzy = false;
    int64_t ready_ns = 0;  // ActiveJob::ReadyPair::ready_ns
  };
  // A compared pair's target slot and when it was ready, carried to OnResultsStored.
  struct ComparedSlot {
    uint32_t slot;
    int64_t ready_ns;
  };
  // A compare task takes up to kMaxPairsPerTask pairs, fewer once they hold kMaxBytesPerTask.
  static constexpr size_t kMaxPairsPerTask = 32;
  static constexpr uint64_t kMaxBytesPerTask = 256 * 1024;
  // Compares the pairs and stores their results in one write.
  // With a shared tier: fetches `r`'s blob into the spool unless it is there; on failure the
  // pair's item `d` carries the error (its comparison is an error, never a pass).
  void FetchShared(const ItemRecord& r, DumpItem* d);
  void RunCompares(const std::string& job_id, DumpMode runs_mode, const std::vector<ComparePair>& pairs,
                   const CompareConfig& config) ABSL_LOCKS_EXCLUDED(mu_);
  // `slots[i]` is the target slot of `rs[i]`.
  void OnResultsStored(const std::string& job_id, const std::vector<OpResultRecord>& rs,
                       const std::vector<ComparedSlot>& slots, const absl::Status& s) ABSL_LOCKS_EXCLUDED(mu_);
  // Starts the job's finalisation once nothing is left to compare: submits Finalize, or, with
  // `submit` false, returns true and leaves the submission to the caller (who announces
  // results first, so that no verdict is announced after its job's end).
  bool MaybeFinalize(ActiveJob& job, bool submit = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finalize(const std::string& job_id) ABSL_LOCKS_EXCLUDED(mu_);
  // Finalize's parts. Fuzzy matching's second pass: pairs what exact matching left over by the
  // name without call count, in dump order; true when it scheduled pairs.
  bool ScheduleFuzzyPairs(ActiveJob& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The rows of the items left without a counterpart, in index order: target items, then
  // golden-only ones (named "golden:<name>" where a target row has the name).
  std::vector<OpResultRecord> UnmatchedRows(const std::string& job_id, const ActiveJob& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts the final rows into the job and analyses culprits over every target row in dump
  // order: sets the job's first culprit and returns the rows to mark, and the analysis
  // document (CulpritAnalysisJson) in `doc`.
  using CulpritMarks = std::vector<std::pair<int64_t, CulpritStatus>>;
  CulpritMarks CountAndAnalyze(ActiveJob& job, const std::vector<OpResultRecord>& rows, std::string* doc,
                               const ParentList* parents) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores the culprit marks, the analysis document and the job's final record together; when
  // that fails, the record alone as FAILED (`final_rec` then says why).
  void StoreFinalRecord(const std::string& job_id, CulpritMarks marks, std::string doc,
                        std::shared_ptr<const JobIndexParts> index, JobRecord* final_rec)
      ABSL_LOCKS_EXCLUDED(mu_);
  void NotifyJob(const JobRecord& job) ABSL_LOCKS_EXCLUDED(mu_);
  // Builds the events only when someone listens.
  void NotifyResults(const std::string& job_id, const std::vector<OpResultRecord>& rs,
                     const std::string& golden_run, const std::string& target_run);
  // A running job's record with progress derived from its live state (first culprit so far,
  // expected pair count once both runs are complete). Its live_* fields are a cache: ActiveJob
  // is guarded by mu_ as a whole (active_).
  JobRecord LiveRecord(const ActiveJob& job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void GcLoop();
  // Removes a job from active_ and keeps its final record in finished_ (bounded), so that
  // GetJob answers with it even when the store could not record it (a full disk) or has not
  // yet.
  // Returns the retired job, to be freed once mu_ is released (freeing a large job's items
  // takes milliseconds).
  [[nodiscard]] std::unique_ptr<ActiveJob> RetireLocked(const std::string& job_id,
                                                        const JobRecord& final_rec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CoreOptions options_;
  // Held for the core's life, released last: no other parityd opens the same data directory.
  std::unique_ptr<DataDirLock> data_dir_lock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Spool> spool_;
  std::unique_ptr<SharedBlobs> shared_blobs_;
  std::unique_ptr<HeldBlobs> held_blobs_;
  std::unique_ptr<RunItemsCache> run_items_;
  std::unique_ptr<WorkerPool> compare_pool_;
  std::unique_ptr<WorkerPool> control_pool_;  // finalisation and job start-up scans
  // Takes stored results from the store's writer thread (OnResultsStored), so that the writer
  // starts its next transaction meanwhile; when its queue is full the writer runs them itself.
  std::unique_ptr<WorkerPool> results_pool_;
  static constexpr size_t kResultsQueue = 256;
  std::atomic<bool> shut_down_{false};

  // Blobs whose hash a probe started (ProbeContent, HashBlobs).
  mutable std::atomic<int64_t> database_measured_ms_{-1000};  // steady clock
  mutable std::atomic<uint64_t> database_bytes_{0};
  std::atomic<uint64_t> database_pending_bytes_{0};
  std::atomic<uint64_t> run_file_bytes_{0};  // run files being received, all uploads
  mutable std::atomic<uint64_t> database_unmeasured_bytes_{0};  // rows added since the measurement
  mutable absl::Mutex hash_mu_;
  std::set<std::string> hashing_ ABSL_GUARDED_BY(hash_mu_);

  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<ActiveJob>> active_ ABSL_GUARDED_BY(mu_);
  static constexpr size_t kFinishedJobsKept = 1024;
  std::map<std::string, JobRecord> finished_ ABSL_GUARDED_BY(mu_);  // newest kFinishedJobsKept
  std::deque<std::string> finished_order_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Listener> listeners_ ABSL_GUARDED_BY(mu_);
  int64_t next_listener_ ABSL_GUARDED_BY(mu_) = 1;
  bool stop_gc_ ABSL_GUARDED_BY(mu_) = false;
  std::thread gc_thread_;
  // Leases: this daemon's name in job_leases (kept in DIR/daemon-id, so that a restarted daemon
  // takes its own leases back at once), and when each orphaned job was first seen (lease thread
  // only).
  bool leases_ = false;
  std::string holder_;
  std::map<std::string, int64_t> orphan_seen_ms_;
  std::set<std::string> lost_leases_;  // said once each
  std::thread lease_thread_;
  // Runs stored by other daemons that jobs here follow (remote-runs thread only): every item
  // index below `prefix` is seen, and those in `beyond` (item indexes are 0, 1, 2, ... in a run,
  // stored nearly in order).
  struct RemoteRun {
    int64_t prefix = 0;
    std::set<int64_t> beyond;
  };
  std::map<std::string, RemoteRun> remote_runs_;
  std::thread remote_thread_;
};

// Converts a stored item into what CompareItems and LoadItemTensor read (data read from
// `spool`, or the item's inline bytes). `api` and `op_type` are left empty: a result takes them
// from the ItemRecord.
DumpItem ToDumpItem(const ItemRecord& r, const Spool* spool);

}  // namespace parity

#endif  // PARITY_SERVER_CORE_CORE_H_
