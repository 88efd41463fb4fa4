#include "server/storage/store.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/base/glob.h"
#include "common/base/json.h"
#include "common/base/pyformat.h"
#include "common/base/status_macros.h"
#include "common/base/thread_name.h"
#include "server/metrics/metrics.h"
#include "server/storage/postgres.h"
#include "server/storage/result_codec.h"
#include "server/storage/sqlite.h"

#include "server/storage/store_rows.h"

namespace parity {

using store_internal::BindOptStatic;
using store_internal::InsertInto;
using store_internal::ReplaceInto;
using store_internal::BindPacked;
using store_internal::JobSeq;
using store_internal::MapToJson;
using store_internal::Migrate;
using store_internal::Pack;
using store_internal::PackedResult;
using store_internal::ResultKey;
using store_internal::ShapeText;
using store_internal::StatText;

bool IsPostgresStore(absl::string_view path) {
  return absl::StartsWith(path, "postgresql://") || absl::StartsWith(path, "postgres://");
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  auto connect = [&options](bool read_only) {
    return IsPostgresStore(options.path) ? OpenPostgres(options.path) : OpenSqlite(options.path, read_only);
  };
  PARITY_ASSIGN_OR_RETURN(Database writer, connect(/*read_only=*/false));
  PARITY_RETURN_IF_ERROR(Migrate(writer));
  std::unique_ptr<Store> store(new Store(options, std::move(writer)));
  {
    absl::MutexLock l(&store->readers_mu_);
    for (int i = 0; i < std::max(1, options.readers); ++i) {
      PARITY_ASSIGN_OR_RETURN(Database r, connect(/*read_only=*/true));
      store->readers_.push_back(std::move(r));
    }
  }
  store->writer_ = std::thread([s = store.get()] { s->WriterLoop(); });
  return store;
}

Store::~Store() { Close(); }

size_t Store::pending_writes() {
  absl::MutexLock l(&mu_);
  return queued_;
}

size_t Store::pending_writes_high_water() {
  absl::MutexLock l(&mu_);
  return queue_high_;
}

void Store::Close() {
  {
    absl::MutexLock l(&mu_);
    if (closing_ && !writer_.joinable()) return;
    closing_ = true;
    room_.SignalAll();
    work_.SignalAll();
  }
  if (writer_.joinable()) writer_.join();
}

// An item's row, its texts made on the caller's thread; the writer binds them without copies.
namespace store_internal {
struct ItemRow {
  ItemRecord r;
  std::string shape;
  std::optional<std::string> stats[4];
};
}  // namespace store_internal

namespace {

using store_internal::ItemRow;
constexpr char kItemColumns[] =
    "run_id, name, api, op_type, phase, role, idx, dtype, shape, data_mode, byte_length, stat_max, stat_min, "
    "stat_mean, stat_norm, crc32, requires_grad, scalar_value, scalar_type, blob, read_error, data, dtype_text, "
    "data_name, shape_text, in_run_golden";
constexpr int kItemColumnCount = 26;

std::shared_ptr<const ItemRow> MakeItemRow(ItemRecord r) {
  auto row = std::make_shared<ItemRow>();
  row->shape = ShapeText(r.shape);
  row->stats[0] = StatText(r.max);
  row->stats[1] = StatText(r.min);
  row->stats[2] = StatText(r.mean);
  row->stats[3] = StatText(r.norm);
  row->r = std::move(r);
  return row;
}

// Binds `row` to parameters base + 1 .. base + kItemColumnCount (kItemColumns' order).
void BindItemRow(Statement& st, int base, const ItemRow& row) {
  const ItemRecord& r = row.r;
  st.BindStatic(base + 1, r.run_id).BindStatic(base + 2, r.name).BindStatic(base + 3, r.api);
  st.BindStatic(base + 4, r.op_type).Bind(base + 5, int64_t{static_cast<int>(r.phase)});
  st.Bind(base + 6, int64_t{static_cast<int>(r.role)}).Bind(base + 7, r.index);
  if (r.dtype) {
    st.Bind(base + 8, int64_t{static_cast<int>(*r.dtype)});
  } else {
    st.BindNull(base + 8);
  }
  st.BindStatic(base + 9, row.shape).Bind(base + 10, int64_t{static_cast<int>(r.data_mode)});
  st.Bind(base + 11, static_cast<int64_t>(r.byte_length));
  for (int i = 0; i < 4; ++i) BindOptStatic(st, base + 12 + i, row.stats[i]);
  if (r.crc32) {
    st.Bind(base + 16, int64_t{*r.crc32});
  } else {
    st.BindNull(base + 16);
  }
  if (r.requires_grad) {
    st.Bind(base + 17, int64_t{*r.requires_grad ? 1 : 0});
  } else {
    st.BindNull(base + 17);
  }
  BindOptStatic(st, base + 18, r.scalar_value);
  st.BindStatic(base + 19, r.scalar_type).BindStatic(base + 20, r.blob).BindStatic(base + 21, r.read_error);
  if (r.inline_data) {
    st.BindBlobStatic(base + 22, *r.inline_data);
  } else {
    st.BindNull(base + 22);
  }
  st.BindStatic(base + 23, r.dtype_text).BindStatic(base + 24, r.data_name).BindStatic(base + 25, r.shape_text);
  st.BindStatic(base + 26, r.in_run_golden);
}

Store::WriteFn ItemWrite(std::shared_ptr<const ItemRow> row, bool replace) {
  return [row = std::move(row), replace](Database& db) -> absl::Status {
    static const std::string* const kInsert = new std::string(InsertInto("items", kItemColumns));
    static const std::string* const kReplace = new std::string[2]{
        ReplaceInto(SqlDialect::kSqlite, "items", kItemColumns, "run_id, name"),
        ReplaceInto(SqlDialect::kPostgres, "items", kItemColumns, "run_id, name")};
    const ItemRecord& r = row->r;
    // A blob taken by reference gains a new reference: not one a collector is deleting.
    if (!r.offered_blob.empty() && !r.blob.empty()) PARITY_RETURN_IF_ERROR(store_internal::CheckNotTombstoned(db, r.blob));
    PARITY_ASSIGN_OR_RETURN(Statement * st,
                            db.Cached(replace ? kReplace[db.dialect() == SqlDialect::kSqlite ? 0 : 1] : *kInsert));
    BindItemRow(*st, 0, *row);
    return st->Run();
  };
}

constexpr int kItemsPerInsert[] = {32, 8, 2};  // merged inserts, largest first (PostgreSQL)

// Inserts `n` rows (kItemsPerInsert's sizes) in one statement.
absl::Status InsertItemRows(Database& db, const ItemRow* const* rows, int n) {
  static const std::string* const kSql = [] {
    auto* sql = new std::string[std::size(kItemsPerInsert)];
    for (size_t i = 0; i < std::size(kItemsPerInsert); ++i) {
      std::string one = "(?";
      for (int c = 1; c < kItemColumnCount; ++c) one += ", ?";
      one += ")";
      std::string values = one;
      for (int r = 1; r < kItemsPerInsert[i]; ++r) absl::StrAppend(&values, ", ", one);
      sql[i] = absl::StrCat("INSERT INTO items(", kItemColumns, ") VALUES ", values);
    }
    return sql;
  }();
  size_t kind = 0;
  while (kItemsPerInsert[kind] != n) ++kind;
  PARITY_ASSIGN_OR_RETURN(Statement * st, db.Cached(kSql[kind]));
  for (int r = 0; r < n; ++r) BindItemRow(*st, r * kItemColumnCount, *rows[r]);
  return st->Run();
}
}  // namespace

void Store::Write(const Share& share, WriteFn fn, DoneFn done) {
  Enqueue(share, Pending{std::move(fn), std::move(done), share.bytes, nullptr});
}

void Store::Enqueue(const Share& share, Pending p) {
  {
    absl::MutexLock l(&mu_);
    auto has_room = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (closing_) return true;
      if (queued_ >= options_.max_pending_writes) return false;
      auto it = queues_.find(share.key);
      return it == queues_.end() || it->second.size() < options_.max_pending_writes_per_share;
    };
    // A condition variable, not Await: absl evaluates an Await's Condition in the thread that
    // unlocks (the writer), and this one reads the caller's stack.
    while (!has_room()) room_.Wait(&mu_);
    if (!closing_) {
      auto [it, inserted] = queues_.try_emplace(share.key);
      if (inserted) turns_.push_back(share.key);
      it->second.push_back(std::move(p));
      ++queued_;
      queue_high_ = std::max(queue_high_, queued_);
      work_.Signal();
      return;
    }
  }
  if (p.done) p.done(absl::UnavailableError("the store is shutting down"));
}

namespace {
// What a caller waits on for writes it queued: on the heap, shared with their callbacks, and
// waited for with a condition variable. (absl evaluates an Await's Condition in the thread that
// unlocks, through code compiled here that reads the waiter's stack; the writer thread would.)
struct WriteWait {
  absl::Mutex mu;
  absl::CondVar cv;
  size_t left ABSL_GUARDED_BY(mu) = 0;
  absl::Status result ABSL_GUARDED_BY(mu);
};

Store::DoneFn CountDown(std::shared_ptr<WriteWait> w) {
  return [w = std::move(w)](const absl::Status& s) {
    absl::MutexLock l(&w->mu);
    w->result.Update(s);
    if (--w->left == 0) w->cv.SignalAll();
  };
}

absl::Status AwaitWrites(WriteWait& w) {
  absl::MutexLock l(&w.mu);
  while (w.left != 0) w.cv.Wait(&w.mu);
  return w.result;
}
}  // namespace

absl::Status Store::WriteSync(WriteFn fn) {
  auto wait = std::make_shared<WriteWait>();
  {
    absl::MutexLock l(&wait->mu);
    wait->left = 1;
  }
  Write(std::move(fn), CountDown(wait));
  return AwaitWrites(*wait);
}

absl::Status Store::Barrier() {
  // Writes of one share commit in order, and the writer commits one batch after the other: a
  // no-op queued behind each share's queue (or behind the batch being committed, when nothing
  // is queued) commits after everything queued before it.
  std::vector<std::string> shares;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [key, q] : queues_) shares.push_back(key);
  }
  if (shares.empty()) shares.push_back("");
  auto wait = std::make_shared<WriteWait>();
  {
    absl::MutexLock l(&wait->mu);
    wait->left = shares.size();
  }
  for (const std::string& key : shares) {
    Write({key, 0}, [](Database&) { return absl::OkStatus(); }, CountDown(wait));
  }
  return AwaitWrites(*wait);
}

namespace {
// Runs a fixed, parameterless statement through the connection's statement cache.
absl::Status RunCached(Database& db, absl::string_view sql) {
  absl::StatusOr<Statement*> st = db.Cached(sql);
  if (!st.ok()) return st.status();
  return (*st)->Run();
}
}  // namespace

// A share's turn: at most this many of its writes before the next share's.
constexpr size_t kWritesPerTurn = 64;

std::vector<Store::Pending> Store::TakeBatchLocked() {
  std::vector<Pending> batch;
  uint64_t bytes = 0;
  auto full = [&] {
    return batch.size() >= options_.max_batch || (!batch.empty() && bytes >= options_.max_batch_bytes);
  };
  while (!turns_.empty() && !full()) {
    const std::string key = std::move(turns_.front());
    turns_.pop_front();
    auto it = queues_.find(key);
    std::deque<Pending>& q = it->second;
    for (size_t n = 0; n < kWritesPerTurn && !q.empty() && !full(); ++n) {
      if (!batch.empty() && bytes + q.front().bytes > options_.max_batch_bytes) {
        bytes = options_.max_batch_bytes;  // the next write opens the next batch
        break;
      }
      bytes += q.front().bytes;
      batch.push_back(std::move(q.front()));
      q.pop_front();
      --queued_;
    }
    room_.SignalAll();  // writers waiting for room in the queues
    if (q.empty()) {
      queues_.erase(it);
    } else {
      turns_.push_back(key);
    }
  }
  return batch;
}

void Store::WriterLoop() {
  NameCurrentThread("store-writer");
  while (true) {
    std::vector<Pending> batch;
    {
      absl::MutexLock l(&mu_);
      while (!closing_ && queued_ == 0) work_.Wait(&mu_);
      if (queued_ == 0) return;  // closing and drained
      batch = TakeBatchLocked();
    }
    Commit(std::move(batch));
  }
}

int Store::MergeableItems(const std::vector<Pending>& batch, size_t i) const {
  if (writer_db_.dialect() != SqlDialect::kPostgres) return 0;
  size_t run = 0;
  while (i + run < batch.size() && batch[i + run].item != nullptr && run < static_cast<size_t>(kItemsPerInsert[0])) ++run;
  for (int n : kItemsPerInsert) {
    if (run >= static_cast<size_t>(n)) return n;
  }
  return 0;
}

void Store::Commit(std::vector<Pending> batch) {
  const auto started = std::chrono::steady_clock::now();
  std::vector<absl::Status> results(batch.size());
  absl::Status tx_status;
  // Fast path: the whole batch in one transaction, no savepoints. If any write fails, that
  // transaction is rolled back and the batch is replayed with a savepoint per write, so one
  // bad write fails alone.
  bool all_ok = false;
  {
    Transaction tx(&writer_db_);
    tx_status = tx.Begin();
    if (tx_status.ok()) {
      all_ok = true;
      for (size_t i = 0; i < batch.size() && all_ok;) {
        // On PostgreSQL, where each statement is a round trip, consecutive item inserts go
        // several to a statement (replayed one by one below if the batch fails).
        const int merged = MergeableItems(batch, i);
        if (merged > 1) {
          const ItemRow* rows[kItemsPerInsert[0]];
          for (int k = 0; k < merged; ++k) rows[k] = batch[i + static_cast<size_t>(k)].item.get();
          const absl::Status st = InsertItemRows(writer_db_, rows, merged);
          for (int k = 0; k < merged; ++k) results[i + static_cast<size_t>(k)] = st;
          all_ok = st.ok();
          i += static_cast<size_t>(merged);
          continue;
        }
        results[i] = batch[i].fn(writer_db_);
        all_ok = results[i].ok();
        ++i;
      }
      if (all_ok && options_.before_commit) tx_status = options_.before_commit();
      if (all_ok && tx_status.ok()) tx_status = tx.Commit();  // otherwise the destructor rolls back
    }
  }
  if (tx_status.ok() && !all_ok) {
    Transaction tx(&writer_db_);
    tx_status = tx.Begin();
    if (tx_status.ok()) {
      for (size_t i = 0; i < batch.size(); ++i) {
        absl::Status sp = RunCached(writer_db_, "SAVEPOINT w");
        if (!sp.ok()) {
          results[i] = sp;
          continue;
        }
        results[i] = batch[i].fn(writer_db_);
        if (results[i].ok()) {
          RunCached(writer_db_, "RELEASE w").IgnoreError();
        } else {
          writer_db_.Exec("ROLLBACK TO w; RELEASE w").IgnoreError();
        }
      }
      if (options_.before_commit) tx_status = options_.before_commit();
      if (tx_status.ok()) tx_status = tx.Commit();
    }
  }
  if (options_.metrics && tx_status.ok()) {
    options_.metrics->StoreCommitted(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), batch.size());
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].done) batch[i].done(tx_status.ok() ? results[i] : tx_status);
  }
}

absl::StatusOr<Store::ReaderLease> Store::Reader() {
  absl::MutexLock l(&readers_mu_);
  readers_mu_.Await(absl::Condition(
      +[](Store* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->readers_mu_) { return !s->readers_.empty(); },
      this));
  Database db = std::move(readers_.back());
  readers_.pop_back();
  return ReaderLease(this, std::move(db));
}

absl::Status RunNotFound(absl::string_view run_id) {
  return absl::NotFoundError(absl::StrCat("run '", run_id, "' not found"));
}

absl::Status JobNotFound(absl::string_view job_id) {
  return absl::NotFoundError(absl::StrCat("job '", job_id, "' not found"));
}

Store::WriteFn Store::InsertRun(RunRecord r) {
  return [r = std::move(r)](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("INSERT INTO runs(run_id, project, side, name, model, framework, device, rank, "
                   "step, created_at_ms, dump_format, dump_mode) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)"));
    st.Bind(1, r.run_id).Bind(2, r.project).Bind(3, int64_t{static_cast<int>(r.side)}).Bind(4, r.name);
    st.Bind(5, r.model).Bind(6, r.framework).Bind(7, r.device).Bind(8, int64_t{r.rank});
    st.Bind(9, r.step).Bind(10, r.created_at_ms).Bind(11, r.dump_format);
    st.Bind(12, int64_t{r.dump_mode ? static_cast<int>(*r.dump_mode) + 1 : 0});
    PARITY_RETURN_IF_ERROR(st.Run());
    for (const auto& [k, v] : r.labels) {
      PARITY_ASSIGN_OR_RETURN(Statement l, db.Prepare("INSERT INTO run_labels(run_id, key, value) VALUES(?,?,?)"));
      l.Bind(1, r.run_id).Bind(2, k).Bind(3, v);
      PARITY_RETURN_IF_ERROR(l.Run());
    }
    return absl::OkStatus();
  };
}

Store::WriteFn Store::CompleteRun(std::string run_id, int64_t item_count, std::string structure_hash,
                                  std::string fingerprint, std::map<std::string, int64_t> op_counts) {
  return [=](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(
        Statement st, db.Prepare("UPDATE runs SET complete=1, item_count=?, structure_hash=?, "
                                 "fingerprint=?, op_type_counts=? WHERE run_id=?"));
    st.Bind(1, item_count).Bind(2, structure_hash).Bind(3, fingerprint).Bind(4, MapToJson(op_counts)).Bind(5, run_id);
    return st.Run();
  };
}

void Store::WriteItem(const Share& share, ItemRecord item, DoneFn done) {
  std::shared_ptr<const ItemRow> row = MakeItemRow(std::move(item));
  // A by-reference item checks the blob first (ItemWrite): never merged.
  const bool mergeable = row->r.offered_blob.empty();
  Enqueue(share, Pending{ItemWrite(row, false), std::move(done), share.bytes, mergeable ? row : nullptr});
}

Store::WriteFn Store::InsertItem(ItemRecord r) { return ItemWrite(MakeItemRow(std::move(r)), false); }
Store::WriteFn Store::ReplaceItem(ItemRecord r) { return ItemWrite(MakeItemRow(std::move(r)), true); }

Store::WriteFn Store::InsertJob(JobRecord j) {
  return [j = std::move(j)](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("INSERT INTO jobs(job_id, project, golden_run_id, target_run_id, policy, "
                   "match_mode, config_json, state, created_at_ms, seq) VALUES(?,?,?,?,?,?,?,?,?,"
                   "(SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs))"));
    st.Bind(1, j.job_id).Bind(2, j.project).Bind(3, j.golden_run_id).Bind(4, j.target_run_id);
    st.Bind(5, int64_t{j.policy}).Bind(6, int64_t{j.match_mode}).Bind(7, j.config_json);
    st.Bind(8, int64_t{static_cast<int>(j.state)}).Bind(9, j.created_at_ms);
    return st.Run();
  };
}

Store::WriteFn Store::UpdateJob(JobRecord j) {
  return [j = std::move(j)](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("UPDATE jobs SET state=?, finished_at_ms=?, error=?, pairs_done=?, pairs_total=?, "
                   "counts=?, first_culprit=? WHERE job_id=?"));
    st.Bind(1, int64_t{static_cast<int>(j.state)}).Bind(2, j.finished_at_ms).Bind(3, j.error);
    st.Bind(4, j.pairs_done).Bind(5, j.pairs_total).Bind(6, absl::StrJoin(j.counts, ","));
    st.Bind(7, j.first_culprit).Bind(8, j.job_id);
    return st.Run();
  };
}

Store::WriteFn Store::UpdateJobProgress(JobRecord j) {
  return [j = std::move(j)](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare(absl::StrCat("UPDATE jobs SET state=?, pairs_done=?, pairs_total=?, counts=?, first_culprit=? "
                                "WHERE job_id=? AND state IN (", static_cast<int>(JobState::kQueued), ", ",
                                static_cast<int>(JobState::kRunning), ")")));
    st.Bind(1, int64_t{static_cast<int>(j.state)}).Bind(2, j.pairs_done).Bind(3, j.pairs_total);
    st.Bind(4, absl::StrJoin(j.counts, ",")).Bind(5, j.first_culprit).Bind(6, j.job_id);
    return st.Run();
  };
}

namespace {
// An insert-or-replace of `rows` results at once: one statement step stores them all, which costs
// about 30 % less writer CPU per row than a step per row (SQLite's per-step work is paid once).
// In SQLite, rows with the same key replace each other in order, as separate inserts would;
// PostgreSQL refuses a key twice in one statement, so such rows go one statement each there.
std::string MultiRowInsert(SqlDialect d, int rows) {
  std::string sql = ReplaceInto(d, "op_results", "k, name, api, verdict, phase, role, culprit, rec", "k");
  std::string more;
  for (int i = 1; i < rows; ++i) more += ", (?, ?, ?, ?, ?, ?, ?, ?)";
  sql.insert(sql.find(')', sql.find(" VALUES(")) + 1, more);  // after the first row's values
  return sql;
}
constexpr int kRowsPerInsert[] = {16, 4, 1};  // largest first
static_assert(kRowsPerInsert[std::size(kRowsPerInsert) - 1] == 1, "every run of rows must be consumed");
constexpr size_t kInsertKinds = std::size(kRowsPerInsert);

// Whether rows [begin, begin + n) of one job have distinct indexes (so distinct keys).
bool DistinctIndexes(const std::vector<PackedResult>& rows, size_t begin, size_t n) {
  for (size_t a = begin; a < begin + n; ++a) {
    for (size_t b = a + 1; b < begin + n; ++b) {
      if (rows[a].index == rows[b].index) return false;
    }
  }
  return true;
}

// Inserts (or replaces) the rows in order: each run of rows of one job (its seq looked up once)
// in statements of kRowsPerInsert rows, largest first.
absl::Status InsertPacked(Database& db, const std::vector<PackedResult>& rows) {
  static const std::string* const kSql = [] {  // [dialect][kind]
    auto* sql = new std::string[2 * kInsertKinds];
    for (SqlDialect d : {SqlDialect::kSqlite, SqlDialect::kPostgres}) {
      for (size_t i = 0; i < kInsertKinds; ++i) {
        sql[static_cast<size_t>(d) * kInsertKinds + i] = MultiRowInsert(d, kRowsPerInsert[i]);
      }
    }
    return sql;
  }();
  const bool postgres = db.dialect() == SqlDialect::kPostgres;
  for (size_t begin = 0; begin < rows.size();) {
    size_t end = begin + 1;
    while (end < rows.size() && rows[end].job_id == rows[begin].job_id) ++end;
    PARITY_ASSIGN_OR_RETURN(const int64_t seq, JobSeq(db, rows[begin].job_id));
    for (size_t i = 0; i < kInsertKinds; ++i) {
      const size_t n = static_cast<size_t>(kRowsPerInsert[i]);
      while (end - begin >= n) {
        if (postgres && n > 1 && !DistinctIndexes(rows, begin, n)) break;  // fewer rows per statement
        PARITY_ASSIGN_OR_RETURN(Statement * st, db.Cached(kSql[static_cast<size_t>(db.dialect()) * kInsertKinds + i]));
        for (size_t r = 0; r < n; ++r) {
          PARITY_ASSIGN_OR_RETURN(int64_t key, ResultKey(seq, rows[begin + r].index));
          BindPacked(*st, key, rows[begin + r], static_cast<int>(r));
        }
        PARITY_RETURN_IF_ERROR(st->Run());
        begin += n;
      }
    }
  }
  return absl::OkStatus();
}
}  // namespace

Store::WriteFn Store::UpsertOpResult(const OpResultRecord& r) {
  return UpsertOpResults(absl::MakeConstSpan(&r, 1));
}

Store::WriteFn Store::UpsertOpResults(absl::Span<const OpResultRecord> rows) {
  // The rows may be gone before the write runs: it keeps copies of their text columns (reserved
  // whole first, so that no string moves once viewed), not of the whole records.
  auto texts = std::make_shared<std::vector<std::string>>();
  texts->reserve(3 * rows.size());
  std::vector<PackedResult> packed;
  packed.reserve(rows.size());
  for (const OpResultRecord& r : rows) {
    PackedResult p = Pack(r);
    p.job_id = texts->emplace_back(r.job_id);
    p.name = texts->emplace_back(r.name);
    p.api = texts->emplace_back(r.api);
    packed.push_back(std::move(p));
  }
  return [texts = std::move(texts), packed = std::move(packed)](Database& db) -> absl::Status {
    return InsertPacked(db, packed);
  };
}

Store::WriteFn Store::UpsertOpResults(std::shared_ptr<const std::vector<OpResultRecord>> rows) {
  std::vector<PackedResult> packed;
  packed.reserve(rows->size());
  for (const OpResultRecord& r : *rows) packed.push_back(Pack(r));
  return [rows = std::move(rows), packed = std::move(packed)](Database& db) -> absl::Status {
    return InsertPacked(db, packed);
  };
}

Store::WriteFn Store::SetCulprits(std::string job_id,
                                  std::vector<std::pair<int64_t, CulpritStatus>> statuses) {
  return [job_id = std::move(job_id), statuses = std::move(statuses)](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(int64_t seq, JobSeq(db, job_id));
    PARITY_ASSIGN_OR_RETURN(Statement st, db.Prepare("UPDATE op_results SET culprit=? WHERE k=?"));
    for (const auto& [index, status] : statuses) {
      PARITY_ASSIGN_OR_RETURN(int64_t key, ResultKey(seq, index));
      st.Reset();
      st.Bind(1, int64_t{static_cast<int>(status)}).Bind(2, key);
      PARITY_RETURN_IF_ERROR(st.Run());
    }
    return absl::OkStatus();
  };
}

}  // namespace parity
