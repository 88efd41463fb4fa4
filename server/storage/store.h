// The daemon's SQLite store: runs, items, jobs and op results. Tensor bytes never go here (see
// Spool). Schema versions are applied by PRAGMA user_version; a file written by a newer binary
// is refused.
//
// Writes go through one writer thread that batches queued writes into one transaction (each
// write in its own savepoint, so one failing write does not fail the batch). Each write belongs
// to a share (a project, or the daemon's own ""): writes of one share commit in the order they
// were queued, and the writer takes turns between shares, a few writes from each, so one share's
// flood does not stand in front of another's writes. Write() blocks while `max_pending_writes`
// writes are queued, or `max_pending_writes_per_share` of its share (back-pressure); its callback
// runs on the writer thread after the commit, so an OK callback means durable. Reads use a pool of read-only
// connections and may run concurrently with writes (WAL).
//
// Thread-safe.
#ifndef PARITY_SERVER_STORAGE_STORE_H_
#define PARITY_SERVER_STORAGE_STORE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "absl/synchronization/mutex.h"
#include "common/formats/dump_structure.h"
#include "server/storage/job_index.h"
#include "server/storage/records.h"
#include "server/storage/database.h"

namespace parity {

class Metrics;

// Metrics results can be sorted by: every numeric metric of every policy. Each has a column of
// op_results (m<i>, i = position here); the order is part of the schema: append only.
inline constexpr const char* kSortableMetrics[] = {
    "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio", "Max diff", "Min diff", "Mean diff", "L2norm diff", "PCC",
    "atol", "rtol", "Required atol", "Required rtol", "AllClose max excess", "Dissimilarity",
    "Greatest absolute difference", "Greatest relative difference", "Max absolute difference",
    "Max relative difference", "Mismatched elements", "Total elements",
    "Absolute difference index", "Relative difference index"};
// Position of `name` in kSortableMetrics, or -1.
int SortableMetricColumn(absl::string_view name);

// Whether a StoreOptions::path names a PostgreSQL database ("postgresql://...", "postgres://...").
bool IsPostgresStore(absl::string_view path);

struct StoreOptions {
  // The SQLite file, or a PostgreSQL connection URI (IsPostgresStore) whose database the store
  // creates its tables in when it has none.
  std::string path;
  Metrics* metrics = nullptr;       // not owned; commits are timed into it when set
  size_t max_pending_writes = 4096;
  size_t max_pending_writes_per_share = 1024;
  size_t max_batch = 4096;               // writes per transaction (at most)
  uint64_t max_batch_bytes = 512u << 10;  // their declared bytes per transaction (at most; a
                                         // larger single write still commits, alone)
  int readers = 4;
  // Runs on the writer thread before each transaction commits; an error fails every write of
  // the batch (the transaction is rolled back). The daemon makes spool blobs durable here.
  std::function<absl::Status()> before_commit;
  // Finished jobs whose filtered/sorted listings are served from memory (per job, sort key and
  // name glob, about 32 bytes per result the glob matches; least recently used dropped first),
  // and as many jobs' series columns (per job and metric, 9 bytes per result). 0 disables both.
  int sort_cache_entries = 4;
};

struct RunFilter {
  std::string project, model, structure_hash;
  std::map<std::string, std::string> labels;
  int64_t created_after_ms = 0, created_before_ms = 0;
  int side = 0;             // 0 = any
  bool complete_only = false;
};

struct JobFilter {
  std::string project, run_id;
  int state = 0;  // 0 = any
};

struct OpResultFilter {
  std::vector<int> verdicts;  // Verdict values; empty = any
  std::string glob;           // on name or api
  int phase = 0, role = 0;    // 0 = any (Phase/Role + 1 as stored)
  std::vector<CulpritStatus> culprits;  // any of; empty = any
  std::string sort_metric;    // "" = dump order
  bool descending = false;
  // A listing asked for once (a summary's worst results): a finished job's first rows are
  // picked from its index (BuildJobIndex) without sorting and keeping the whole order.
  bool one_off = false;
};

// A job's results along dump order in at most `buckets` buckets of consecutive results (see
// Store::JobSeries).
struct SeriesBucket {
  int64_t first = 0;       // position of its first result
  int64_t count = 0;
  int64_t with_value = 0;  // results with a number for the metric
  double min = 0, max = 0;  // over those; NaN when none
  int64_t failing = 0;     // FAIL or ERROR
};
struct SeriesMark {
  int64_t position = 0;
  std::string name, api;
  double value = 0;  // NaN: no number for the metric
};
struct ResultSeries {
  int64_t total = 0;
  std::vector<SeriesBucket> buckets;
  std::vector<SeriesMark> culprits;  // in dump order
};

// NOT_FOUND for a run or job id the store does not hold. A caller outside the project of one it
// does hold gets the same status, word for word, so that ids do not leak across projects.
absl::Status RunNotFound(absl::string_view run_id);
absl::Status JobNotFound(absl::string_view job_id);

namespace store_internal {
struct ItemRow;  // an item's row, ready to bind (store.cc)
}  // namespace store_internal

class Store {
 public:
  using WriteFn = std::function<absl::Status(Database&)>;
  using DoneFn = std::function<void(const absl::Status&)>;

  static absl::StatusOr<std::unique_ptr<Store>> Open(const StoreOptions& options);
  ~Store();  // drains queued writes

  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Who a write is for and about how many bytes it adds (its batch's bound counts these).
  struct Share {
    std::string key;     // "" for the daemon's own writes
    uint64_t bytes = 0;
  };
  // Queues a write (runs on the writer thread inside a transaction). `done` may be null.
  void Write(WriteFn fn, DoneFn done) { Write(Share{}, std::move(fn), std::move(done)); }
  void Write(const Share& share, WriteFn fn, DoneFn done);
  // Queues InsertItem(item): on PostgreSQL, where every statement is a round trip, the writer
  // inserts consecutive ones several to a statement. Same outcome as Write(share,
  // InsertItem(item), done), each item's `done` getting its own result.
  void WriteItem(const Share& share, ItemRecord item, DoneFn done);
  absl::Status WriteSync(WriteFn fn);
  // Returns once every write queued before the call, of every share, has committed (or
  // failed); an error only when the store is shutting down.
  absl::Status Barrier();
  // Stops accepting writes and waits until every queued write is committed.
  void Close();
  // Writes queued and not yet taken by the writer thread (at most max_pending_writes), and the
  // most at once so far.
  size_t pending_writes() ABSL_LOCKS_EXCLUDED(mu_);
  size_t pending_writes_high_water() ABSL_LOCKS_EXCLUDED(mu_);

  // Write builders.
  static WriteFn InsertRun(RunRecord r);
  static WriteFn CompleteRun(std::string run_id, int64_t item_count, std::string structure_hash,
                             std::string fingerprint, std::map<std::string, int64_t> op_counts);
  static WriteFn InsertItem(ItemRecord r);
  // Replaces an item of the same run and name (an upgrade from statistics to data).
  static WriteFn ReplaceItem(ItemRecord r);
  static WriteFn InsertJob(JobRecord j);
  static WriteFn UpdateJob(JobRecord j);
  // A running job's progress (state, counts, pairs, first culprit) for other daemons' readers;
  // no effect once the job's row is final, so it never undoes a finished job's record.
  static WriteFn UpdateJobProgress(JobRecord j);
  static WriteFn UpsertOpResult(const OpResultRecord& r);
  // The rows in one write: stored together or not at all (the writer rolls back a failed write
  // alone). The rows' columns are taken now, on the caller's thread.
  static WriteFn UpsertOpResults(absl::Span<const OpResultRecord> rows);
  // The same without copying the rows' names: the write holds `rows` (which must not change
  // after this call) until it has run or been dropped.
  static WriteFn UpsertOpResults(std::shared_ptr<const std::vector<OpResultRecord>> rows);
  // Marks results, named by OpResultRecord::index, as culprits or propagated.
  static WriteFn SetCulprits(std::string job_id,
                             std::vector<std::pair<int64_t, CulpritStatus>> statuses);
  // A finished job's packed index (job_index.h), read from its stored rows with `marks` (the
  // statuses SetCulprits is to write in the same transaction) applied; nullptr for a job of
  // more than kMaxIndexedResults results. Once StoreJobIndex has written it with the job's final
  // record, the job's series and its listings without a name glob are read from it instead of
  // from every row. Takes a few bytes per result and sortable metric, in memory while it is
  // built and on disk.
  static constexpr size_t kMaxIndexedResults = size_t{1} << 26;
  absl::StatusOr<std::shared_ptr<const JobIndexParts>> BuildJobIndex(
      const std::string& job_id, const std::vector<std::pair<int64_t, CulpritStatus>>& marks);
  static WriteFn StoreJobIndex(std::string job_id, std::shared_ptr<const JobIndexParts> index);

  // Reads. NOT_FOUND when the id is unknown.
  absl::StatusOr<RunRecord> GetRun(const std::string& run_id);
  absl::StatusOr<std::vector<RunRecord>> ListRuns(const RunFilter& f, int64_t offset, int64_t limit);
  absl::StatusOr<std::vector<ItemRecord>> ListItems(const std::string& run_id);  // dump order
  // Calls `visit` for each item of the run in dump order, with one record reused for all
  // (copy what outlives the call); no vector of the whole run. Only items whose index is at
  // least `from_index`.
  absl::Status VisitItems(const std::string& run_id, const std::function<void(const ItemRecord&)>& visit,
                          int64_t from_index = 0);
  absl::StatusOr<std::vector<std::string>> ListItemNames(const std::string& run_id);
  absl::StatusOr<ItemRecord> GetItem(const std::string& run_id, const std::string& name);
  absl::StatusOr<JobRecord> GetJob(const std::string& job_id);
  absl::StatusOr<std::vector<JobRecord>> ListJobs(const JobFilter& f, int64_t offset, int64_t limit);
  // A page of a job's results. Finished jobs are served from an in-memory order of the rows
  // their name glob matches (built on first use, see StoreOptions::sort_cache_entries); running
  // jobs by SQL. Rows without a number for
  // the sort metric come last in both directions. INVALID_ARGUMENT for an unknown sort metric.
  absl::StatusOr<std::vector<OpResultRecord>> ListOpResults(const std::string& job_id,
                                                            const OpResultFilter& f,
                                                            int64_t offset, int64_t limit,
                                                            int64_t* total);
  absl::StatusOr<OpResultRecord> GetOpResult(const std::string& job_id, const std::string& name);
  // The job's results in dump order split into min(buckets, total) buckets of near-equal size,
  // with the least and greatest value of `metric` (a kSortableMetrics name) in each, and up to
  // `max_culprits` failing results of culprit operators (their outputs). A finished job's
  // metric is read once and kept (sort_cache_entries): later series of it, of any bucket
  // count, are cut from memory. NOT_FOUND for an unknown job, INVALID_ARGUMENT for an unknown
  // metric or buckets < 1.
  absl::StatusOr<ResultSeries> JobSeries(const std::string& job_id, const std::string& metric,
                                         int64_t buckets, int64_t max_culprits);
  absl::StatusOr<std::vector<std::string>> ListOpResultNames(const std::string& job_id);
  // The APIs of a job's culprit items, in dump order.
  absl::StatusOr<std::vector<std::string>> ListCulpritApis(const std::string& job_id);
  // Each operator (API) of a job with a culprit mark or a failing result: its mark (the
  // strongest: culprit over propagated) and whether a result of it fails. Dump order of first
  // appearance.
  struct OpStatusRow {
    std::string api;
    CulpritStatus status = CulpritStatus::kNone;
    bool fails = false;
  };
  absl::StatusOr<std::vector<OpStatusRow>> ListOpStatuses(const std::string& job_id);
  // A finished job's culprit analysis document (written by SetJobAnalysis with its final
  // record); "" for a job without one (running, or finished before it was kept).
  static WriteFn SetJobAnalysis(std::string job_id, std::string doc);
  absl::StatusOr<std::string> GetJobAnalysis(const std::string& job_id);
  // Files a run carries beside its items (msprobe's stack.json, construct.json), by name;
  // replaces a file of the same name. GetRunFile: "" with found=false when the run has none.
  static WriteFn PutRunFile(std::string run_id, std::string name, std::string data);
  // A run's stack.json as its index: each distinct stack once, each entry's by API (replacing
  // the run's earlier ones), and an empty run_files row "stack.json" marking that it has one.
  static WriteFn PutRunStacks(std::string run_id, const DumpStructure& stacks);
  // The stacks of `apis` in the run (those it has); empty when it has none.
  absl::StatusOr<absl::flat_hash_map<std::string, std::string>> GetStacks(const std::string& run_id,
                                                                           const std::vector<std::string>& apis);
  absl::StatusOr<std::optional<std::string>> GetRunFile(const std::string& run_id, const std::string& name);
  // Complete runs created before `cutoff_ms` that still have data (in the spool or inline).
  absl::StatusOr<std::vector<std::string>> ListRunsWithDataBefore(int64_t cutoff_ms);
  // Forgets a run's data: its spool references (then collectable) and its inline data.
  static WriteFn ReleaseRunData(std::string run_id);
  // API tokens. ALREADY_EXISTS for a duplicate id; RevokeToken leaves revoked ones as they are.
  static WriteFn InsertToken(TokenRecord t);
  static WriteFn RevokeToken(std::string token_id, int64_t at_ms);
  absl::StatusOr<TokenRecord> GetToken(const std::string& token_id);  // NOT_FOUND
  absl::StatusOr<std::vector<TokenRecord>> ListTokens(const std::string& project);  // "": all
  // Keys of spool blobs still referenced by some item (inline data is not in the spool).
  absl::StatusOr<std::vector<std::string>> ReferencedBlobs();

  // Job leases, in a store several daemons share (PostgreSQL only; FAILED_PRECONDITION on
  // SQLite, whose data directory one daemon holds). A lease names the daemon (`holder`) that
  // compares a job until it expires; times are the database server's clock, so the daemons'
  // clocks need not agree. Each runs as a write of its own.
  //
  // Takes job `job_id`'s lease for `ttl_ms` when it is free, expired or already `holder`'s;
  // false when another holder's lease runs.
  absl::StatusOr<bool> TakeJobLease(const std::string& job_id, const std::string& holder, int64_t ttl_ms);
  // Extends every lease `holder` still has by `ttl_ms` from now; returns their job ids (a job
  // missing from them was taken over by another daemon).
  absl::StatusOr<std::vector<std::string>> RenewJobLeases(const std::string& holder, int64_t ttl_ms);
  // Gives up `holder`'s lease of the job (no effect when another holds it).
  absl::Status ReleaseJobLease(const std::string& job_id, const std::string& holder);
  // Queued and running jobs whose lease is missing or expired: those no live daemon compares.
  absl::StatusOr<std::vector<JobRecord>> OrphanedJobs();

  // The collector of a shared blob bucket (SharedBlobs::Collect) deletes a blob in two steps:
  // it marks it (a tombstone) while no item references it, and later deletes it if that is
  // still so. A tombstoned blob is never given a new reference: an item taking it by reference
  // is refused (CheckNotTombstoned), and dedup does not offer it (IsTombstoned).
  // Marks each of `blobs` that no item references and that is not marked yet; returns how many.
  absl::StatusOr<uint64_t> MarkTombstones(const std::vector<std::string>& blobs, int64_t now_ms);
  // Tombstones marked before `before_ms`, oldest first.
  absl::StatusOr<std::vector<std::string>> TombstonesBefore(int64_t before_ms);
  absl::StatusOr<bool> IsTombstoned(const std::string& blob);
  absl::StatusOr<bool> IsReferenced(const std::string& blob);
  absl::Status DropTombstone(const std::string& blob);
  // Up to `limit` distinct spool blob keys that items of `project` with data of this length and
  // CRC-32 reference (empty: none; otherwise the same content is likely, only a hash proves it),
  // each with whether its SHA-256 is not recorded yet (RecordBlobHash). Data kept in an item's
  // row (ItemRecord::inline_data) is never matched: it cannot be sent by reference.
  struct MatchingBlob {
    std::string key;
    bool unhashed = false;
  };
  absl::StatusOr<std::vector<MatchingBlob>> BlobsMatching(const std::string& project,
                                                          uint64_t byte_length, uint32_t crc32,
                                                          int limit);
  // Keys of the spool blobs referenced by items of `project` whose content's SHA-256 is
  // `sha256`: the hash itself (a content-keyed blob) or keys whose hash was recorded.
  absl::StatusOr<std::vector<std::string>> ProjectBlobsWithHash(const std::string& project,
                                                                const std::string& sha256);
  static WriteFn RecordBlobHash(std::string key, std::string sha256);
  // Drops the recorded hashes of blobs no item references any more.
  static WriteFn ForgetUnreferencedBlobHashes();
  absl::Status IntegrityCheck();
  // What the database takes: the SQLite file and its write-ahead log, or PostgreSQL's size of
  // the database.
  absl::StatusOr<uint64_t> SizeBytes();

 private:
  struct Pending {
    WriteFn fn;
    DoneFn done;
    uint64_t bytes;
    // An item insert the writer may merge with its neighbours into one statement; null for
    // other writes. `fn` inserts it alone (the replay after a failed batch).
    std::shared_ptr<const store_internal::ItemRow> item;
  };
  class ReaderLease;

  explicit Store(StoreOptions o, Database writer) : options_(std::move(o)), writer_db_(std::move(writer)) {}
  void WriterLoop();
  void Enqueue(const Share& share, Pending p);
  // How many writes from batch[i] on to insert in one statement (0 or 1: none merged).
  int MergeableItems(const std::vector<Pending>& batch, size_t i) const;
  // The next transaction's writes, taken in turns from the shares' queues.
  std::vector<Pending> TakeBatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs a batch in one transaction (replayed with a savepoint per write if one fails) and
  // calls each write's callback.
  void Commit(std::vector<Pending> batch);
  absl::StatusOr<ReaderLease> Reader();
  // The first column of every row of `sql`, with `arg` bound to its one parameter (if not "").
  absl::StatusOr<std::vector<std::string>> QueryStrings(const char* sql, const std::string& arg);

  // Constant after construction.
  const StoreOptions options_;

  // Owned by the writer thread.
  Database writer_db_;
  std::thread writer_;

  absl::Mutex mu_;  // guards the write queues below
  std::map<std::string, std::deque<Pending>> queues_ ABSL_GUARDED_BY(mu_);  // by share; none empty
  std::deque<std::string> turns_ ABSL_GUARDED_BY(mu_);  // the shares in queues_, next first
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;              // writes in queues_
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  size_t queue_high_ ABSL_GUARDED_BY(mu_) = 0;
  // Condition variables, not Await: absl evaluates an Await's Condition in the unlocking thread.
  absl::CondVar room_;  // signalled (under mu_) when writes leave the queues, and on Close
  absl::CondVar work_;  // signalled (under mu_) when a write is queued, and on Close

  // One finished job's results in one order, for paging without SQL sorting or counting.
  struct SortedRow {
    double value;  // NaN when the row has no number for the sort metric (listed last)
    int64_t key;   // op_results.k: dump order within a job
    uint8_t verdict, phase, role, culprit;
  };
  struct SortedJob {
    std::string job_id;
    int column;  // -1: dump order
    bool descending;
    int64_t finished_at_ms;
    std::string glob;             // rows whose name or API matches it; empty: every row
    std::vector<SortedRow> rows;  // ascending
  };
  static SortedRow SortRow(const Statement& st, int column);
  // A finished job's stored index: its rows and the values of `column` (NaN where a row has
  // none; no values for column -1); nullopt when the job has none.
  struct IndexedColumn {
    std::vector<IndexRow> rows;
    std::vector<double> values;
  };
  static absl::StatusOr<std::optional<IndexedColumn>> ReadIndex(Database& db, const std::string& job_id,
                                                                int column);
  static void SortRows(int column, bool descending, std::vector<SortedRow>* rows);
  // The keys of the rows of a finished job's index that `f` keeps, from `offset` on (at most
  // `limit`), in f's order; nullopt when the job has no index.
  static absl::StatusOr<std::optional<std::vector<int64_t>>> PickFromIndex(Database& db, const std::string& job_id,
                                                                           int64_t seq, int column,
                                                                           const OpResultFilter& f, int64_t offset,
                                                                           int64_t limit, int64_t* total);
  // A finished job's index's rows in the listing order of `column` (-1: dump order).
  static void OrderIndexRows(const IndexedColumn& index, int64_t seq, int column, bool descending,
                             std::vector<SortedRow>* rows);
  // Appends the rows of a job whose name or API matches `glob` (any when empty), in dump order.
  static absl::Status SortRowsFromResults(Database& db, int64_t seq, int column, const std::string& glob,
                                          std::vector<SortedRow>* rows);
  absl::StatusOr<std::shared_ptr<const SortedJob>> Sorted(Database& db, const std::string& job_id,
                                                          int64_t seq, int column, bool descending,
                                                          int64_t finished_at_ms,
                                                          const std::string& glob);

  // One metric of a job's results in dump order: what a series of any bucket count is cut from.
  struct SeriesColumn {
    std::vector<double> values;   // NaN: no number for the metric
    std::vector<uint8_t> failing;  // FAIL or ERROR
    std::vector<SeriesMark> culprits;
  };
  // The job's column, cached for finished jobs (sort_cache_entries of them).
  absl::StatusOr<std::shared_ptr<const SeriesColumn>> Column(const std::string& job_id, int column);
  // From the job's index when `finished` and it has one, else from its rows.
  static absl::StatusOr<std::shared_ptr<const SeriesColumn>> BuildColumn(Database& db, const std::string& job_id,
                                                                         int64_t seq, int column, bool finished);
  static ResultSeries Bucketize(const SeriesColumn& c, int64_t buckets, int64_t max_culprits);
  struct CachedColumn {
    std::string job_id;
    int column;
    int64_t finished_at_ms;
    std::shared_ptr<const SeriesColumn> values;
  };

  // Held while a listing order or a series is built: requests for the same one (a page's
  // parallel calls) wait for the first build and take it from the cache instead of building
  // it again. Before cache_mu_.
  absl::Mutex build_mu_ ABSL_ACQUIRED_BEFORE(cache_mu_);
  absl::Mutex cache_mu_;
  std::deque<std::shared_ptr<const SortedJob>> sort_cache_ ABSL_GUARDED_BY(cache_mu_);  // MRU first
  std::deque<CachedColumn> column_cache_ ABSL_GUARDED_BY(cache_mu_);                    // MRU first

  absl::Mutex readers_mu_;
  std::vector<Database> readers_ ABSL_GUARDED_BY(readers_mu_);  // idle read-only connections
};

}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_STORE_H_
