// What the store's files share (server/storage/store.cc, schema.cc, store_queries.cc): row
// encodings of runs, jobs, items' statistics and results, result keys, and the reader lease.
// Internal to server/storage/.
#ifndef PARITY_SERVER_STORAGE_STORE_ROWS_H_
#define PARITY_SERVER_STORAGE_STORE_ROWS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/storage/database.h"
#include "server/storage/store.h"

namespace parity {
namespace store_internal {

// "INSERT INTO table(columns) VALUES(?, ...)".
std::string InsertInto(absl::string_view table, absl::string_view columns);

// "INSERT OR REPLACE INTO table(columns) VALUES(?, ...)" in SQLite; in PostgreSQL an insert that,
// when a row with the same `key` (its primary key's columns, a prefix of `columns`) exists,
// updates that row's other columns instead.
std::string ReplaceInto(SqlDialect d, absl::string_view table, absl::string_view columns, absl::string_view key);

// " INDEXED BY index" in SQLite (the planner's choice made for it), "" in PostgreSQL.
std::string IndexedBy(SqlDialect d, absl::string_view index);

std::string ShapeText(const Shape& s);

// "2,3,4" (as ShapeText writes it; "" is 0-d), parsed without copies.
Shape ParseShape(absl::string_view t);

std::optional<std::string> StatText(const std::optional<double>& v);

// PyRepr's text ("0.1", "1e+30", "nan", "-inf") back to the double, without copies.
std::optional<double> ParseStat(const Statement& st, int col);

// Binds without copying (see Statement::BindStatic): `v` must outlive the statement's run.
void BindOptStatic(Statement& st, int i, const std::optional<std::string>& v);

// Version 3 stored metrics as a JSON array of [name, kind, value]: kind "i" (integer), "n"
// (number, Python repr, so that NaN/inf survive) or "t" (text).
std::vector<Metric> MetricsFromJson(const std::string& text);

std::string MapToJson(const std::map<std::string, int64_t>& m);

std::map<std::string, int64_t> MapFromJson(const std::string& text);

inline constexpr char kRunColumns[] =
    "run_id, project, side, name, model, framework, device, rank, step, created_at_ms, complete, "
    "item_count, structure_hash, fingerprint, op_type_counts, dump_format, dump_mode";

RunRecord ReadRun(const Statement& st);

inline constexpr char kJobColumns[] =
    "job_id, project, golden_run_id, target_run_id, policy, match_mode, config_json, state, "
    "created_at_ms, finished_at_ms, error, pairs_done, pairs_total, counts, first_culprit";

JobRecord ReadJob(const Statement& st);

inline constexpr int64_t kGoldenSlotBase = int64_t{1} << 31;

// A result's key: (job seq << 32) | slot, where the slot is the target item's index, or 2^31 +
// the golden item's index for a golden-only row, so that keys follow OpResultRecord::index.
absl::StatusOr<int64_t> ResultKey(int64_t seq, int64_t index);

int64_t FirstKey(int64_t seq);

int64_t LastKey(int64_t seq);

// The job's seq (NOT_FOUND for an unknown job), memoised per connection (a job's seq never
// changes; the memo is keyed by job id and forgets what a rolled-back transaction wrote).
absl::StatusOr<int64_t> JobSeq(Database& db, absl::string_view job_id);

inline constexpr char kResultColumns[] = "k, name, api, verdict, phase, role, culprit, rec";

int64_t IndexOfKey(int64_t key);

// A row of kResultColumns. DATA_LOSS when its blob cannot be decoded.
absl::StatusOr<OpResultRecord> ReadResult(const Statement& st, const std::string& job_id);

inline constexpr char kInsertResult[] =
    "INSERT OR REPLACE INTO op_results(k, name, api, verdict, phase, role, culprit, rec) "
    "VALUES(?,?,?,?,?,?,?,?)";

// What the writer binds for one result: the columns kept as they are (views into the
// OpResultRecord it was packed from) and the encoded blob, built on the caller's thread so that
// the writer only looks the job up, binds and steps.
struct PackedResult {
  absl::string_view job_id, name, api;
  int64_t index = 0;
  Verdict verdict = Verdict::kError;
  Phase phase = Phase::kUnknown;
  Role role = Role::kUnknown;
  CulpritStatus culprit = CulpritStatus::kNone;
  std::string blob;
};

PackedResult Pack(const OpResultRecord&&) = delete;  // the views would outlive the record

PackedResult Pack(const OpResultRecord& r);

// Binds kInsertResult's values, as the row at position `row` of a multi-row insert (8 values per
// row); `p` must outlive the statement's run.
void BindPacked(Statement& st, int64_t key, const PackedResult& p, int row = 0);

// The first column of every row `st` still gives, as text.
absl::StatusOr<std::vector<std::string>> FirstColumnOfEachRow(Statement& st);

// Applies every schema version this binary knows to `db` (server/storage/schema.cc);
// FAILED_PRECONDITION for a file of a newer version or another application.
absl::Status Migrate(Database& db);

// OK unless `blob` is in blob_tombstones (a shared bucket's collector is deleting it):
// FAILED_PRECONDITION asking for the data instead.
absl::Status CheckNotTombstoned(Database& db, const std::string& blob);

}  // namespace store_internal

class Store::ReaderLease {
 public:
  ReaderLease(Store* s, Database db) : store_(s), db_(std::move(db)) {}
  ReaderLease(ReaderLease&& o) noexcept : store_(o.store_), db_(std::move(o.db_)) { o.store_ = nullptr; }
  ~ReaderLease() {
    if (store_ == nullptr) return;
    absl::MutexLock l(&store_->readers_mu_);
    store_->readers_.push_back(std::move(db_));
  }
  Database& db() { return db_; }

 private:
  Store* store_;
  Database db_;
};


}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_STORE_ROWS_H_
