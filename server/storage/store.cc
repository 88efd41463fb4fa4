#include "server/storage/store.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/base/glob.h"
#include "common/base/json.h"
#include "common/base/pyformat.h"
#include "common/base/status_macros.h"
#include "common/base/thread_name.h"
#include "server/storage/result_codec.h"

namespace parity {
namespace {

constexpr int kSchemaVersion = 11;
constexpr int64_t kApplicationId = 0x50415231;  // "PAR1"

constexpr char kSchemaV1[] = R"sql(
CREATE TABLE runs(
  run_id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  side INTEGER NOT NULL,
  name TEXT NOT NULL,
  model TEXT NOT NULL,
  framework TEXT NOT NULL,
  device TEXT NOT NULL,
  rank INTEGER NOT NULL,
  step INTEGER NOT NULL,
  created_at_ms INTEGER NOT NULL,
  complete INTEGER NOT NULL DEFAULT 0,
  item_count INTEGER NOT NULL DEFAULT 0,
  structure_hash TEXT NOT NULL DEFAULT '',
  fingerprint TEXT NOT NULL DEFAULT '',
  op_type_counts TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX runs_by_project ON runs(project, created_at_ms);
CREATE INDEX runs_by_structure ON runs(structure_hash);
CREATE TABLE run_labels(
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(run_id, key)
);
CREATE INDEX labels_by_kv ON run_labels(key, value);
CREATE TABLE items(
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  name TEXT NOT NULL,
  api TEXT NOT NULL,
  op_type TEXT NOT NULL,
  phase INTEGER NOT NULL,
  role INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  dtype INTEGER,
  shape TEXT NOT NULL,
  data_mode INTEGER NOT NULL,
  byte_length INTEGER NOT NULL,
  stat_max TEXT, stat_min TEXT, stat_mean TEXT, stat_norm TEXT,
  crc32 INTEGER,
  requires_grad INTEGER,
  scalar_value TEXT,
  scalar_type TEXT NOT NULL,
  blob TEXT NOT NULL,
  PRIMARY KEY(run_id, name)
);
CREATE UNIQUE INDEX items_by_index ON items(run_id, idx);
CREATE INDEX items_by_blob ON items(blob);
CREATE TABLE jobs(
  job_id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  golden_run_id TEXT NOT NULL REFERENCES runs(run_id),
  target_run_id TEXT NOT NULL REFERENCES runs(run_id),
  policy INTEGER NOT NULL,
  match_mode INTEGER NOT NULL,
  config_json TEXT NOT NULL,
  state INTEGER NOT NULL,
  created_at_ms INTEGER NOT NULL,
  finished_at_ms INTEGER NOT NULL DEFAULT 0,
  error TEXT NOT NULL DEFAULT '',
  pairs_done INTEGER NOT NULL DEFAULT 0,
  pairs_total INTEGER NOT NULL DEFAULT 0,
  counts TEXT NOT NULL DEFAULT '0,0,0,0,0,0',
  first_culprit TEXT NOT NULL DEFAULT ''
);
CREATE INDEX jobs_by_project ON jobs(project, created_at_ms);
CREATE INDEX jobs_by_golden ON jobs(golden_run_id);
CREATE INDEX jobs_by_target ON jobs(target_run_id);
CREATE INDEX jobs_by_state ON jobs(state);
CREATE TABLE op_results(
  job_id TEXT NOT NULL REFERENCES jobs(job_id),
  name TEXT NOT NULL,
  api TEXT NOT NULL,
  op_type TEXT NOT NULL,
  phase INTEGER NOT NULL,
  role INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  golden_name TEXT NOT NULL,
  verdict INTEGER NOT NULL,
  policy TEXT NOT NULL,
  peer_verdict TEXT NOT NULL,
  message TEXT NOT NULL,
  metrics TEXT NOT NULL,
  culprit INTEGER NOT NULL DEFAULT 0,
  golden_dtype INTEGER,
  target_dtype INTEGER,
  golden_shape TEXT NOT NULL,
  target_shape TEXT NOT NULL,
  PRIMARY KEY(job_id, name)
);
CREATE INDEX results_by_index ON op_results(job_id, idx);
CREATE INDEX results_by_verdict ON op_results(job_id, verdict, idx);
CREATE TABLE op_metrics(
  job_id TEXT NOT NULL,
  metric TEXT NOT NULL,
  name TEXT NOT NULL,
  value REAL,
  PRIMARY KEY(job_id, metric, name)
);
CREATE INDEX metrics_sorted ON op_metrics(job_id, metric, value);
)sql";

// Version 2: every numeric metric a policy reports gets its own column of op_results (m0, m1,
// ..., in kSortableMetrics order) instead of one op_metrics row per metric: one row and three
// index entries per result instead of seven rows, so writes keep up with the comparators.
// Version 3: API tokens (salted hashes only).
constexpr char kSchemaV3[] = R"sql(
CREATE TABLE tokens(
  token_id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  role TEXT NOT NULL,
  salt BLOB NOT NULL,
  hash BLOB NOT NULL,
  note TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  revoked_at_ms INTEGER NOT NULL DEFAULT 0
);
)sql";

// Version 4: op_results keyed by one integer, k = (job seq << 32) | slot (see ResultKey), with
// the fields no query filters on packed in one blob (result_codec.h), no secondary index but a
// partial one on culprits (few rows, written once per job). A job's results are appended at the
// end of one B-tree instead of being inserted into four (table, primary key, two indexes), and
// the writer binds 8 values instead of 44: that is what lets writes keep up with the
// comparators. Results are found by name through the runs' items (their primary key), which is
// where their names come from. jobs.seq numbers jobs from 1 (their rowids for older jobs).
// The rows are converted by MigrateResultsToV4.
constexpr char kSchemaV4Prepare[] = R"sql(
ALTER TABLE jobs ADD COLUMN seq INTEGER;
UPDATE jobs SET seq=rowid;
CREATE UNIQUE INDEX jobs_by_seq ON jobs(seq);
CREATE TABLE op_results_v4(
  k INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  api TEXT NOT NULL,
  verdict INTEGER NOT NULL,
  phase INTEGER NOT NULL,
  role INTEGER NOT NULL,
  culprit INTEGER NOT NULL DEFAULT 0,
  rec BLOB NOT NULL
);
)sql";
// Also in version 4: items without data (statistics, CRC, scalars; blob '') stay out of the
// blob index.
constexpr char kSchemaV4Finish[] = R"sql(
DROP TABLE op_results;
ALTER TABLE op_results_v4 RENAME TO op_results;
CREATE INDEX results_culprits ON op_results(k) WHERE culprit=1;
DROP INDEX items_by_blob;
CREATE INDEX items_by_blob ON items(blob) WHERE blob != '';
)sql";

// Version 5: an item the agent could not read keeps why (ItemRecord::read_error).
constexpr char kSchemaV5[] = R"sql(
ALTER TABLE items ADD COLUMN read_error TEXT NOT NULL DEFAULT '';
)sql";

// Version 6: data items by CRC-32, for dedup probes that need no hash (HaveBlobs' probes).
constexpr char kSchemaV6[] = R"sql(
CREATE INDEX items_by_crc ON items(crc32, byte_length) WHERE blob != '';
)sql";

// Version 7: small tensors' data in their item's row (ItemRecord::inline_data); NULL when the
// data is in the spool or there is none.
constexpr char kSchemaV7[] = R"sql(
ALTER TABLE items ADD COLUMN data BLOB;
)sql";

// Version 8: no change of tables; op results are written as version 2 blobs (result_codec.h),
// which a binary of schema 7 cannot read, so such a binary refuses the file as newer than itself.
// Version 1 blobs stay as they are and are still read.
// Version 9: op results are written as version 3 blobs (varints: about 30 % smaller, and
// cheaper to insert), which a binary of schema 8 cannot read; version 1 and 2 blobs stay as they
// are and are still read. Items with data are indexed by the first 16 hex digits of their blob
// key (64 bits of a SHA-256) instead of all 64: a random 64-digit text key was the most costly
// part of storing an item (about 6 of 15 us of the writer's CPU per small tensor with data).
// Lookups compare the whole key once the prefix matched.
constexpr char kSchemaV9[] = R"sql(
DROP INDEX IF EXISTS items_by_blob;
CREATE INDEX IF NOT EXISTS items_by_blob_prefix ON items(substr(blob, 1, 16)) WHERE blob != '';
)sql";

// Version 10: the SHA-256 of spool blobs named by a unique key rather than by their content
// (SpoolOptions::unique_key_min_bytes), taken from disk the first time a dedup probe matches the
// blob; a cache that lookups by hash go through (BlobsWithHash), pruned with the spool.
constexpr char kSchemaV10[] = R"sql(
CREATE TABLE IF NOT EXISTS blob_hashes(blob TEXT PRIMARY KEY, sha256 TEXT NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS blob_hashes_by_sha ON blob_hashes(sha256);
)sql";

// Version 11: the dedup indexes hold only items whose data is in the spool (data IS NULL). A
// small tensor's data in its row can never be sent by reference (Core::HeldBlobFor takes only
// spool blobs), yet its two random index keys cost a fifth to a quarter of the writer's CPU per
// small tensor: each commit of a batch of them dirtied index pages scattered over both indexes,
// written into the WAL and, at the checkpoint, into the database.
constexpr char kSchemaV11[] = R"sql(
DROP INDEX IF EXISTS items_by_crc;
CREATE INDEX items_by_crc ON items(crc32, byte_length) WHERE blob != '' AND data IS NULL;
DROP INDEX IF EXISTS items_by_blob_prefix;
CREATE INDEX items_by_blob_prefix ON items(substr(blob, 1, 16)) WHERE blob != '' AND data IS NULL;
)sql";

std::string MigrateToV2Sql() {
  std::string sql;
  for (size_t i = 0; i < std::size(kSortableMetrics); ++i) {
    absl::StrAppend(&sql, "ALTER TABLE op_results ADD COLUMN m", i, " REAL;\n");
  }
  sql += "UPDATE op_results SET ";
  for (size_t i = 0; i < std::size(kSortableMetrics); ++i) {
    absl::StrAppend(&sql, i ? ", " : "", "m", i,
                    "=(SELECT value FROM op_metrics x WHERE x.job_id=op_results.job_id AND "
                    "x.name=op_results.name AND x.metric='", kSortableMetrics[i], "')");
  }
  sql += ";\nDROP TABLE op_metrics;\n";
  return sql;
}

std::string ShapeText(const Shape& s) { return absl::StrJoin(s, ","); }
// "2,3,4" (as ShapeText writes it; "" is 0-d), parsed without copies.
Shape ParseShape(absl::string_view t) {
  Shape s;
  const char* p = t.data();
  const char* const end = p + t.size();
  while (p < end) {
    int64_t v = 0;
    const std::from_chars_result r = std::from_chars(p, end, v);
    if (r.ptr == p) break;
    s.push_back(v);
    p = r.ptr;
    if (p < end && *p == ',') ++p;
  }
  return s;
}

std::optional<std::string> StatText(const std::optional<double>& v) {
  if (!v) return std::nullopt;
  return PyRepr(*v);
}
// PyRepr's text ("0.1", "1e+30", "nan", "-inf") back to the double, without copies.
std::optional<double> ParseStat(const Statement& st, int col) {
  if (st.ColumnIsNull(col)) return std::nullopt;
  const absl::string_view t = st.ColumnBlob(col);
  double v = 0;
  const std::from_chars_result r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (r.ec == std::errc() && r.ptr == t.data() + t.size()) return v;
  return std::strtod(std::string(t).c_str(), nullptr);  // anything from_chars does not take
}

// Binds without copying (see Statement::BindStatic): `v` must outlive the statement's run.
void BindOptStatic(Statement& st, int i, const std::optional<std::string>& v) {
  if (v) {
    st.BindStatic(i, *v);
  } else {
    st.BindNull(i);
  }
}

// Version 3 stored metrics as a JSON array of [name, kind, value]: kind "i" (integer), "n"
// (number, Python repr, so that NaN/inf survive) or "t" (text).
std::vector<Metric> MetricsFromJson(const std::string& text) {
  std::vector<Metric> out;
  absl::StatusOr<Json> j = ParseJson(text);
  if (!j.ok() || !j->is_array()) return out;
  for (const Json& e : j->as_array()) {
    const auto& a = e.as_array();
    if (a.size() != 3) continue;
    const std::string& kind = a[1].as_string();
    const std::string& v = a[2].as_string();
    MetricValue mv = kind == "i"   ? MetricValue::Integer(std::strtoll(v.c_str(), nullptr, 10))
                     : kind == "n" ? MetricValue::Number(std::strtod(v.c_str(), nullptr))
                                   : MetricValue::Text(v);
    out.push_back({a[0].as_string(), mv});
  }
  return out;
}

std::string MapToJson(const std::map<std::string, int64_t>& m) {
  Json o = Json::MakeObject();
  for (const auto& [k, v] : m) o.Set(k, Json::Integer(v));
  return o.Dump();
}

std::map<std::string, int64_t> MapFromJson(const std::string& text) {
  std::map<std::string, int64_t> out;
  absl::StatusOr<Json> j = ParseJson(text);
  if (!j.ok() || !j->is_object()) return out;
  for (const auto& [k, v] : j->as_object()) out[k] = v.as_int();
  return out;
}

constexpr char kRunColumns[] =
    "run_id, project, side, name, model, framework, device, rank, step, created_at_ms, complete, "
    "item_count, structure_hash, fingerprint, op_type_counts";

RunRecord ReadRun(const Statement& st) {
  RunRecord r;
  r.run_id = st.ColumnText(0);
  r.project = st.ColumnText(1);
  r.side = static_cast<Side>(st.ColumnInt(2));
  r.name = st.ColumnText(3);
  r.model = st.ColumnText(4);
  r.framework = st.ColumnText(5);
  r.device = st.ColumnText(6);
  r.rank = static_cast<int32_t>(st.ColumnInt(7));
  r.step = st.ColumnInt(8);
  r.created_at_ms = st.ColumnInt(9);
  r.complete = st.ColumnInt(10) != 0;
  r.item_count = st.ColumnInt(11);
  r.structure_hash = st.ColumnText(12);
  r.fingerprint = st.ColumnText(13);
  r.op_type_counts = MapFromJson(st.ColumnText(14));
  return r;
}

constexpr char kJobColumns[] =
    "job_id, project, golden_run_id, target_run_id, policy, match_mode, config_json, state, "
    "created_at_ms, finished_at_ms, error, pairs_done, pairs_total, counts, first_culprit";

JobRecord ReadJob(const Statement& st) {
  JobRecord j;
  j.job_id = st.ColumnText(0);
  j.project = st.ColumnText(1);
  j.golden_run_id = st.ColumnText(2);
  j.target_run_id = st.ColumnText(3);
  j.policy = static_cast<int>(st.ColumnInt(4));
  j.match_mode = static_cast<int>(st.ColumnInt(5));
  j.config_json = st.ColumnText(6);
  j.state = static_cast<JobState>(st.ColumnInt(7));
  j.created_at_ms = st.ColumnInt(8);
  j.finished_at_ms = st.ColumnInt(9);
  j.error = st.ColumnText(10);
  j.pairs_done = st.ColumnInt(11);
  j.pairs_total = st.ColumnInt(12);
  size_t i = 0;
  for (absl::string_view c : absl::StrSplit(st.ColumnText(13), ',')) {
    if (i < 6) j.counts[i++] = std::strtoll(std::string(c).c_str(), nullptr, 10);
  }
  j.first_culprit = st.ColumnText(14);
  return j;
}

// Version 3's op_results columns (read by the migration to version 4 only).
constexpr char kResultColumnsV3[] =
    "job_id, name, api, op_type, phase, role, idx, golden_name, verdict, policy, peer_verdict, "
    "message, metrics, culprit, golden_dtype, target_dtype, golden_shape, target_shape";

OpResultRecord ReadResultV3(const Statement& st, int base) {
  OpResultRecord r;
  r.job_id = st.ColumnText(base + 0);
  r.name = st.ColumnText(base + 1);
  r.api = st.ColumnText(base + 2);
  r.op_type = st.ColumnText(base + 3);
  r.phase = static_cast<Phase>(st.ColumnInt(base + 4));
  r.role = static_cast<Role>(st.ColumnInt(base + 5));
  r.index = st.ColumnInt(base + 6);
  r.golden_name = st.ColumnText(base + 7);
  r.result.verdict = static_cast<Verdict>(st.ColumnInt(base + 8));
  r.result.policy = st.ColumnText(base + 9);
  r.result.peer_verdict = st.ColumnText(base + 10);
  r.result.message = st.ColumnText(base + 11);
  r.result.metrics = MetricsFromJson(st.ColumnText(base + 12));
  r.culprit = static_cast<CulpritStatus>(st.ColumnInt(base + 13));
  if (!st.ColumnIsNull(base + 14)) r.golden_dtype = static_cast<DType>(st.ColumnInt(base + 14));
  if (!st.ColumnIsNull(base + 15)) r.target_dtype = static_cast<DType>(st.ColumnInt(base + 15));
  r.golden_shape = ParseShape(st.ColumnBlob(base + 16));
  r.target_shape = ParseShape(st.ColumnBlob(base + 17));
  return r;
}

constexpr int64_t kGoldenSlotBase = int64_t{1} << 31;

// A result's key: (job seq << 32) | slot, where the slot is the target item's index, or 2^31 +
// the golden item's index for a golden-only row, so that keys follow OpResultRecord::index.
absl::StatusOr<int64_t> ResultKey(int64_t seq, int64_t index) {
  int64_t slot = -1;
  if (index >= 0 && index < kGoldenSlotBase) {
    slot = index;
  } else if (index >= kGoldenOnlyIndexBase && index - kGoldenOnlyIndexBase < kGoldenSlotBase) {
    slot = kGoldenSlotBase + (index - kGoldenOnlyIndexBase);
  }
  if (slot < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "result index ", index, " is out of range: item indexes must be below 2^31"));
  }
  return (seq << 32) | slot;
}
int64_t FirstKey(int64_t seq) { return seq << 32; }
int64_t LastKey(int64_t seq) { return (seq << 32) | 0xffffffff; }

// The job's seq (NOT_FOUND for an unknown job), memoised per connection (a job's seq never
// changes; the memo is keyed by job id and forgets what a rolled-back transaction wrote).
absl::StatusOr<int64_t> JobSeq(Database& db, absl::string_view job_id) {
  if (const int64_t* seq = db.MemoFind(job_id)) return *seq;
  PARITY_ASSIGN_OR_RETURN(Statement * st, db.Cached("SELECT seq FROM jobs WHERE job_id=?"));
  st->Bind(1, job_id);
  PARITY_ASSIGN_OR_RETURN(bool row, st->Step());
  if (!row) return absl::NotFoundError(absl::StrCat("job '", job_id, "' not found"));
  const int64_t seq = st->ColumnInt(0);
  st->Reset();
  db.MemoPut(std::string(job_id), seq);
  return seq;
}

constexpr char kResultColumns[] = "k, name, api, verdict, phase, role, culprit, rec";

int64_t IndexOfKey(int64_t key) {
  const int64_t slot = key & 0xffffffff;
  return slot < kGoldenSlotBase ? slot : kGoldenOnlyIndexBase + (slot - kGoldenSlotBase);
}

// A row of kResultColumns. DATA_LOSS when its blob cannot be decoded.
absl::StatusOr<OpResultRecord> ReadResult(const Statement& st, const std::string& job_id) {
  OpResultRecord r;
  r.job_id = job_id;
  r.index = IndexOfKey(st.ColumnInt(0));
  r.name = st.ColumnText(1);
  r.api = st.ColumnText(2);
  r.result.verdict = static_cast<Verdict>(st.ColumnInt(3));
  r.phase = static_cast<Phase>(st.ColumnInt(4));
  r.role = static_cast<Role>(st.ColumnInt(5));
  r.culprit = static_cast<CulpritStatus>(st.ColumnInt(6));
  absl::Status s = DecodeResultBlob(st.ColumnBlob(7), &r);
  if (!s.ok()) {
    return absl::DataLossError(absl::StrCat("job '", job_id, "', result '", r.name, "': ", s.message()));
  }
  return r;
}

constexpr char kInsertResult[] =
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
PackedResult Pack(const OpResultRecord& r) {
  PackedResult p;
  p.job_id = r.job_id;
  p.name = r.name;
  p.api = r.api;
  p.index = r.index;
  p.verdict = r.result.verdict;
  p.phase = r.phase;
  p.role = r.role;
  p.culprit = r.culprit;
  p.blob = EncodeResultBlob(r);
  return p;
}

// Binds kInsertResult's values, as the row at position `row` of a multi-row insert (8 values per
// row); `p` must outlive the statement's run.
void BindPacked(Statement& st, int64_t key, const PackedResult& p, int row = 0) {
  const int b = 8 * row;
  st.Bind(b + 1, key).BindStatic(b + 2, p.name).BindStatic(b + 3, p.api);
  st.Bind(b + 4, int64_t{static_cast<int>(p.verdict)}).Bind(b + 5, int64_t{static_cast<int>(p.phase)});
  st.Bind(b + 6, int64_t{static_cast<int>(p.role)}).Bind(b + 7, int64_t{static_cast<int>(p.culprit)});
  st.BindBlobStatic(b + 8, p.blob);
}

absl::Status MigrateResultsToV4(Database& db) {
  PARITY_RETURN_IF_ERROR(db.Exec(kSchemaV4Prepare));
  {
    PARITY_ASSIGN_OR_RETURN(
        Statement in, db.Prepare(absl::StrCat("SELECT j.seq, r.", absl::StrReplaceAll(kResultColumnsV3, {{", ", ", r."}}),
                                              " FROM op_results r JOIN jobs j ON j.job_id=r.job_id")));
    PARITY_ASSIGN_OR_RETURN(
        Statement out, db.Prepare(absl::StrReplaceAll(kInsertResult, {{"op_results(", "op_results_v4("}})));
    while (true) {
      PARITY_ASSIGN_OR_RETURN(bool row, in.Step());
      if (!row) break;
      const OpResultRecord rec = ReadResultV3(in, 1);
      const PackedResult p = Pack(rec);
      PARITY_ASSIGN_OR_RETURN(int64_t key, ResultKey(in.ColumnInt(0), p.index));
      out.Reset();
      BindPacked(out, key, p);
      PARITY_RETURN_IF_ERROR(out.Run());
    }
  }
  return db.Exec(kSchemaV4Finish);
}

// The first column of every row `st` still gives, as text.
absl::StatusOr<std::vector<std::string>> FirstColumnOfEachRow(Statement& st) {
  std::vector<std::string> out;
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(st.ColumnText(0));
  }
  return out;
}

absl::Status Migrate(Database& db) {
  int64_t version = 0, app = 0;
  {  // statements finalized before the migration (DROP TABLE needs no active statement)
    PARITY_ASSIGN_OR_RETURN(Statement q, db.Prepare("PRAGMA user_version"));
    PARITY_ASSIGN_OR_RETURN(bool row, q.Step());
    version = row ? q.ColumnInt(0) : 0;
    PARITY_ASSIGN_OR_RETURN(Statement a, db.Prepare("PRAGMA application_id"));
    PARITY_ASSIGN_OR_RETURN(bool arow, a.Step());
    app = arow ? a.ColumnInt(0) : 0;
  }
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database schema version ", version, " is newer than this binary's ", kSchemaVersion));
  }
  if (app != 0 && app != kApplicationId) {
    return absl::FailedPreconditionError("the database file belongs to another application");
  }
  if (version == kSchemaVersion) return absl::OkStatus();
  Transaction tx(&db);
  PARITY_RETURN_IF_ERROR(tx.Begin());
  if (version < 1) PARITY_RETURN_IF_ERROR(db.Exec(kSchemaV1));
  if (version < 2) PARITY_RETURN_IF_ERROR(db.Exec(MigrateToV2Sql()));
  if (version < 3) PARITY_RETURN_IF_ERROR(db.Exec(kSchemaV3));
  if (version < 4) PARITY_RETURN_IF_ERROR(MigrateResultsToV4(db));
  if (version < 5) PARITY_RETURN_IF_ERROR(db.Exec(kSchemaV5));
  if (version < 6) PARITY_RETURN_IF_ERROR(db.Exec(kSchemaV6));
  if (version < 7) PARITY_RETURN_IF_ERROR(db.Exec(kSchemaV7));
  if (version < 9) PARITY_RETURN_IF_ERROR(db.Exec(kSchemaV9));
  if (version < 10) PARITY_RETURN_IF_ERROR(db.Exec(kSchemaV10));
  if (version < 11) PARITY_RETURN_IF_ERROR(db.Exec(kSchemaV11));
  PARITY_RETURN_IF_ERROR(db.Exec(absl::StrCat("PRAGMA user_version=", kSchemaVersion,
                                              "; PRAGMA application_id=", kApplicationId)));
  return tx.Commit();
}

}  // namespace

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

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  PARITY_ASSIGN_OR_RETURN(Database writer, Database::Open(options.path));
  PARITY_RETURN_IF_ERROR(Migrate(writer));
  std::unique_ptr<Store> store(new Store(options, std::move(writer)));
  {
    absl::MutexLock l(&store->readers_mu_);
    for (int i = 0; i < std::max(1, options.readers); ++i) {
      PARITY_ASSIGN_OR_RETURN(Database r, Database::Open(options.path, /*read_only=*/true));
      store->readers_.push_back(std::move(r));
    }
  }
  store->writer_ = std::thread([s = store.get()] { s->WriterLoop(); });
  return store;
}

Store::~Store() { Close(); }

size_t Store::pending_writes() {
  absl::MutexLock l(&mu_);
  return queue_.size();
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
  }
  if (writer_.joinable()) writer_.join();
}

void Store::Write(WriteFn fn, DoneFn done) {
  {
    absl::MutexLock l(&mu_);
    mu_.Await(absl::Condition(
        +[](Store* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
          return s->closing_ || s->queue_.size() < s->options_.max_pending_writes;
        },
        this));
    if (!closing_) {
      queue_.push_back({std::move(fn), std::move(done)});
      queue_high_ = std::max(queue_high_, queue_.size());
      return;
    }
  }
  if (done) done(absl::UnavailableError("the store is shutting down"));
}

absl::Status Store::WriteSync(WriteFn fn) {
  absl::Mutex m;
  bool finished = false;
  absl::Status result;
  Write(std::move(fn), [&](const absl::Status& s) {
    absl::MutexLock l(&m);
    result = s;
    finished = true;
  });
  absl::MutexLock l(&m);
  m.Await(absl::Condition(&finished));
  return result;
}

namespace {
// Runs a fixed, parameterless statement through the connection's statement cache.
absl::Status RunCached(Database& db, absl::string_view sql) {
  absl::StatusOr<Statement*> st = db.Cached(sql);
  if (!st.ok()) return st.status();
  return (*st)->Run();
}
}  // namespace

void Store::WriterLoop() {
  NameCurrentThread("store-writer");
  while (true) {
    std::vector<Pending> batch;
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(
          +[](Store* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) { return s->closing_ || !s->queue_.empty(); },
          this));
      if (queue_.empty()) return;  // closing and drained
      while (!queue_.empty() && batch.size() < options_.max_batch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      writer_busy_ = true;
    }
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
        for (size_t i = 0; i < batch.size() && all_ok; ++i) {
          results[i] = batch[i].fn(writer_db_);
          all_ok = results[i].ok();
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
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].done) batch[i].done(tx_status.ok() ? results[i] : tx_status);
    }
    absl::MutexLock l(&mu_);
    writer_busy_ = false;
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

Store::WriteFn Store::InsertRun(RunRecord r) {
  return [r = std::move(r)](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("INSERT INTO runs(run_id, project, side, name, model, framework, device, rank, "
                   "step, created_at_ms) VALUES(?,?,?,?,?,?,?,?,?,?)"));
    st.Bind(1, r.run_id).Bind(2, r.project).Bind(3, int64_t{static_cast<int>(r.side)}).Bind(4, r.name);
    st.Bind(5, r.model).Bind(6, r.framework).Bind(7, r.device).Bind(8, int64_t{r.rank});
    st.Bind(9, r.step).Bind(10, r.created_at_ms);
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

namespace {
Store::WriteFn ItemWrite(ItemRecord r, bool replace) {
  // Texts are made here, on the caller's thread; the writer binds them without copies.
  struct Row {
    ItemRecord r;
    std::string shape;
    std::optional<std::string> stats[4];
  };
  auto row = std::make_shared<Row>();
  row->shape = ShapeText(r.shape);
  row->stats[0] = StatText(r.max);
  row->stats[1] = StatText(r.min);
  row->stats[2] = StatText(r.mean);
  row->stats[3] = StatText(r.norm);
  row->r = std::move(r);
  return [row = std::move(row), replace](Database& db) -> absl::Status {
#define PARITY_ITEM_COLUMNS                                                                     \
  " INTO items(run_id, name, api, op_type, phase, role, idx, dtype, shape, data_mode, "          \
  "byte_length, stat_max, stat_min, stat_mean, stat_norm, crc32, requires_grad, scalar_value, " \
  "scalar_type, blob, read_error, data) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
    static constexpr absl::string_view kInsert = "INSERT" PARITY_ITEM_COLUMNS;
    static constexpr absl::string_view kReplace = "INSERT OR REPLACE" PARITY_ITEM_COLUMNS;
#undef PARITY_ITEM_COLUMNS
    const ItemRecord& r = row->r;
    PARITY_ASSIGN_OR_RETURN(Statement * stp, db.Cached(replace ? kReplace : kInsert));
    Statement& st = *stp;
    st.BindStatic(1, r.run_id).BindStatic(2, r.name).BindStatic(3, r.api).BindStatic(4, r.op_type);
    st.Bind(5, int64_t{static_cast<int>(r.phase)}).Bind(6, int64_t{static_cast<int>(r.role)}).Bind(7, r.index);
    if (r.dtype) {
      st.Bind(8, int64_t{static_cast<int>(*r.dtype)});
    } else {
      st.BindNull(8);
    }
    st.BindStatic(9, row->shape).Bind(10, int64_t{static_cast<int>(r.data_mode)});
    st.Bind(11, static_cast<int64_t>(r.byte_length));
    for (int i = 0; i < 4; ++i) BindOptStatic(st, 12 + i, row->stats[i]);
    if (r.crc32) {
      st.Bind(16, int64_t{*r.crc32});
    } else {
      st.BindNull(16);
    }
    if (r.requires_grad) {
      st.Bind(17, int64_t{*r.requires_grad ? 1 : 0});
    } else {
      st.BindNull(17);
    }
    BindOptStatic(st, 18, r.scalar_value);
    st.BindStatic(19, r.scalar_type).BindStatic(20, r.blob).BindStatic(21, r.read_error);
    if (r.inline_data) {
      st.BindBlobStatic(22, *r.inline_data);
    } else {
      st.BindNull(22);
    }
    return st.Run();
  };
}
}  // namespace

Store::WriteFn Store::InsertItem(ItemRecord r) { return ItemWrite(std::move(r), false); }
Store::WriteFn Store::ReplaceItem(ItemRecord r) { return ItemWrite(std::move(r), true); }

Store::WriteFn Store::InsertJob(JobRecord j) {
  return [j = std::move(j)](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("INSERT INTO jobs(job_id, project, golden_run_id, target_run_id, policy, "
                   "match_mode, config_json, state, created_at_ms, seq) VALUES(?,?,?,?,?,?,?,?,?,"
                   "(SELECT IFNULL(MAX(seq), 0) + 1 FROM jobs))"));
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

namespace {
// kInsertResult with `rows` rows of values: one statement step stores them all, which costs about
// 30 % less writer CPU per row than a step per row (SQLite's per-step work is paid once).
// Rows with the same key replace each other in order, as separate inserts would.
std::string MultiRowInsert(int rows) {
  std::string sql(kInsertResult);
  for (int i = 1; i < rows; ++i) sql += ",(?,?,?,?,?,?,?,?)";
  return sql;
}
constexpr int kRowsPerInsert[] = {16, 4, 1};  // largest first
static_assert(kRowsPerInsert[std::size(kRowsPerInsert) - 1] == 1, "every run of rows must be consumed");

// Inserts (or replaces) the rows in order: each run of rows of one job (its seq looked up once)
// in statements of kRowsPerInsert rows, largest first.
absl::Status InsertPacked(Database& db, const std::vector<PackedResult>& rows) {
  static const std::string* const kSql = [] {
    auto* sql = new std::string[std::size(kRowsPerInsert)];
    for (size_t i = 0; i < std::size(kRowsPerInsert); ++i) sql[i] = MultiRowInsert(kRowsPerInsert[i]);
    return sql;
  }();
  for (size_t begin = 0; begin < rows.size();) {
    size_t end = begin + 1;
    while (end < rows.size() && rows[end].job_id == rows[begin].job_id) ++end;
    PARITY_ASSIGN_OR_RETURN(const int64_t seq, JobSeq(db, rows[begin].job_id));
    for (size_t i = 0; i < std::size(kRowsPerInsert); ++i) {
      const size_t n = static_cast<size_t>(kRowsPerInsert[i]);
      while (end - begin >= n) {
        PARITY_ASSIGN_OR_RETURN(Statement * st, db.Cached(kSql[i]));
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

absl::StatusOr<RunRecord> Store::GetRun(const std::string& run_id) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare(absl::StrCat("SELECT ", kRunColumns, " FROM runs WHERE run_id=?")));
  st.Bind(1, run_id);
  PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("run '", run_id, "' not found"));
  RunRecord run = ReadRun(st);
  PARITY_ASSIGN_OR_RETURN(Statement l, r.db().Prepare("SELECT key, value FROM run_labels WHERE run_id=? ORDER BY key"));
  l.Bind(1, run_id);
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool more, l.Step());
    if (!more) break;
    run.labels[l.ColumnText(0)] = l.ColumnText(1);
  }
  return run;
}

absl::StatusOr<std::vector<RunRecord>> Store::ListRuns(const RunFilter& f, int64_t offset, int64_t limit) {
  std::vector<std::string> where;
  std::vector<std::string> args;
  if (!f.project.empty()) { where.push_back("project=?"); args.push_back(f.project); }
  if (!f.model.empty()) { where.push_back("model=?"); args.push_back(f.model); }
  if (!f.structure_hash.empty()) { where.push_back("structure_hash=?"); args.push_back(f.structure_hash); }
  if (f.side) where.push_back(absl::StrCat("side=", f.side));
  if (f.complete_only) where.push_back("complete=1");
  if (f.created_after_ms) where.push_back(absl::StrCat("created_at_ms>=", f.created_after_ms));
  if (f.created_before_ms) where.push_back(absl::StrCat("created_at_ms<", f.created_before_ms));
  for (const auto& [k, v] : f.labels) {
    where.push_back("run_id IN (SELECT run_id FROM run_labels WHERE key=? AND value=?)");
    args.push_back(k);
    args.push_back(v);
  }
  std::vector<std::string> ids;
  {
    PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
    PARITY_ASSIGN_OR_RETURN(
        Statement st,
        r.db().Prepare(absl::StrCat("SELECT run_id FROM runs", where.empty() ? "" : " WHERE ",
                                    absl::StrJoin(where, " AND "),
                                    " ORDER BY created_at_ms DESC, run_id DESC LIMIT ? OFFSET ?")));
    int i = 1;
    for (const std::string& a : args) st.Bind(i++, a);
    st.Bind(i, limit).Bind(i + 1, offset);
    while (true) {
      PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      ids.push_back(st.ColumnText(0));
    }
  }
  std::vector<RunRecord> out;
  for (const std::string& id : ids) {
    PARITY_ASSIGN_OR_RETURN(RunRecord run, GetRun(id));
    out.push_back(std::move(run));
  }
  return out;
}

namespace {
constexpr char kItemColumns[] =
    "run_id, name, api, op_type, phase, role, idx, dtype, shape, data_mode, byte_length, stat_max, "
    "stat_min, stat_mean, stat_norm, crc32, requires_grad, scalar_value, scalar_type, blob, read_error, "
    "data";

// Reads the row into *it, reusing its strings' storage.
void ReadItemInto(const Statement& st, ItemRecord* it) {
  auto text = [&st](int col, std::string* out) {
    const absl::string_view v = st.ColumnBlob(col);
    out->assign(v.data(), v.size());
  };
  text(0, &it->run_id);
  text(1, &it->name);
  text(2, &it->api);
  text(3, &it->op_type);
  it->phase = static_cast<Phase>(st.ColumnInt(4));
  it->role = static_cast<Role>(st.ColumnInt(5));
  it->index = st.ColumnInt(6);
  it->dtype.reset();
  if (!st.ColumnIsNull(7)) it->dtype = static_cast<DType>(st.ColumnInt(7));
  it->shape = ParseShape(st.ColumnBlob(8));
  it->data_mode = static_cast<DataMode>(st.ColumnInt(9));
  it->byte_length = static_cast<uint64_t>(st.ColumnInt(10));
  it->max = ParseStat(st, 11);
  it->min = ParseStat(st, 12);
  it->mean = ParseStat(st, 13);
  it->norm = ParseStat(st, 14);
  it->crc32.reset();
  if (!st.ColumnIsNull(15)) it->crc32 = static_cast<uint32_t>(st.ColumnInt(15));
  it->requires_grad.reset();
  if (!st.ColumnIsNull(16)) it->requires_grad = st.ColumnInt(16) != 0;
  it->scalar_value.reset();
  if (!st.ColumnIsNull(17)) it->scalar_value = st.ColumnText(17);
  text(18, &it->scalar_type);
  text(19, &it->blob);
  text(20, &it->read_error);
  it->inline_data.reset();
  if (!st.ColumnIsNull(21)) {
    const absl::string_view v = st.ColumnBlob(21);
    it->inline_data = std::make_shared<const std::string>(v.data(), v.size());
  }
}

ItemRecord ReadItem(const Statement& st) {
  ItemRecord it;
  ReadItemInto(st, &it);
  return it;
}
}  // namespace

absl::StatusOr<std::vector<ItemRecord>> Store::ListItems(const std::string& run_id) {
  std::vector<ItemRecord> out;
  PARITY_RETURN_IF_ERROR(VisitItems(run_id, [&out](const ItemRecord& it) { out.push_back(it); }));
  return out;
}

absl::Status Store::VisitItems(const std::string& run_id,
                               const std::function<void(const ItemRecord&)>& visit) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare(absl::StrCat(
                                            "SELECT ", kItemColumns, " FROM items WHERE run_id=? ORDER BY idx")));
  st.Bind(1, run_id);
  ItemRecord it;
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    ReadItemInto(st, &it);
    visit(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<ItemRecord> Store::GetItem(const std::string& run_id, const std::string& name) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare(absl::StrCat(
                                            "SELECT ", kItemColumns, " FROM items WHERE run_id=? AND name=?")));
  st.Bind(1, run_id).Bind(2, name);
  PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("run ", run_id, " has no item '", name, "'"));
  return ReadItem(st);
}

absl::StatusOr<std::vector<std::string>> Store::QueryStrings(const char* sql, const std::string& arg) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare(sql));
  if (!arg.empty()) st.Bind(1, arg);
  return FirstColumnOfEachRow(st);
}

absl::StatusOr<std::vector<std::string>> Store::ListItemNames(const std::string& run_id) {
  return QueryStrings("SELECT name FROM items WHERE run_id=? ORDER BY idx", run_id);
}

absl::StatusOr<JobRecord> Store::GetJob(const std::string& job_id) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare(absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE job_id=?")));
  st.Bind(1, job_id);
  PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("job '", job_id, "' not found"));
  return ReadJob(st);
}

absl::StatusOr<std::vector<JobRecord>> Store::ListJobs(const JobFilter& f, int64_t offset, int64_t limit) {
  std::vector<std::string> where;
  std::vector<std::string> args;
  if (!f.project.empty()) { where.push_back("project=?"); args.push_back(f.project); }
  if (!f.run_id.empty()) {
    where.push_back("(golden_run_id=? OR target_run_id=?)");
    args.push_back(f.run_id);
    args.push_back(f.run_id);
  }
  if (f.state) where.push_back(absl::StrCat("state=", f.state));
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(
      Statement st,
      r.db().Prepare(absl::StrCat("SELECT ", kJobColumns, " FROM jobs", where.empty() ? "" : " WHERE ",
                                  absl::StrJoin(where, " AND "),
                                  " ORDER BY created_at_ms DESC, job_id DESC LIMIT ? OFFSET ?")));
  int i = 1;
  for (const std::string& a : args) st.Bind(i++, a);
  st.Bind(i, limit).Bind(i + 1, offset);
  std::vector<JobRecord> out;
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(ReadJob(st));
  }
  return out;
}

int SortableMetricColumn(absl::string_view name) {
  for (size_t i = 0; i < std::size(kSortableMetrics); ++i) {
    if (name == kSortableMetrics[i]) return static_cast<int>(i);
  }
  return -1;
}

// A row of "SELECT k, verdict, phase, role, rec-or-NULL": its place in a listing.
Store::SortedRow Store::SortRow(const Statement& st, int column) {
  SortedRow r;
  r.key = st.ColumnInt(0);
  r.verdict = static_cast<uint8_t>(st.ColumnInt(1));
  r.phase = static_cast<uint8_t>(st.ColumnInt(2));
  r.role = static_cast<uint8_t>(st.ColumnInt(3));
  r.value = std::numeric_limits<double>::quiet_NaN();
  if (column >= 0) {
    const std::optional<double> v = BlobSortValue(st.ColumnBlob(4), kSortableMetrics[column]);
    if (v) r.value = *v;
  }
  return r;
}

// Orders rows by value (rows without one last, in both directions), then dump order; by dump
// order alone when column < 0.
void Store::SortRows(int column, bool descending, std::vector<SortedRow>* rows) {
  std::sort(rows->begin(), rows->end(), [column, descending](const SortedRow& a, const SortedRow& b) {
    if (column >= 0) {
      const bool an = std::isnan(a.value), bn = std::isnan(b.value);
      if (an != bn) return bn;
      if (!an && a.value != b.value) return descending ? a.value > b.value : a.value < b.value;
      return a.key < b.key;
    }
    return descending ? a.key > b.key : a.key < b.key;
  });
}

absl::StatusOr<std::shared_ptr<const Store::SortedJob>> Store::Sorted(Database& db,
                                                                      const std::string& job_id,
                                                                      int64_t seq, int column,
                                                                      bool descending,
                                                                      int64_t finished_at_ms,
                                                                      const std::string& glob) {
  {
    absl::MutexLock l(&cache_mu_);
    for (auto it = sort_cache_.begin(); it != sort_cache_.end(); ++it) {
      const SortedJob& e = **it;
      if (e.job_id == job_id && e.column == column && e.descending == descending &&
          e.finished_at_ms == finished_at_ms && e.glob == glob) {
        std::shared_ptr<const SortedJob> hit = *it;
        sort_cache_.erase(it);
        sort_cache_.push_front(hit);
        return hit;
      }
    }
  }
  auto built = std::make_shared<SortedJob>();
  built->job_id = job_id;
  built->column = column;
  built->descending = descending;
  built->finished_at_ms = finished_at_ms;
  built->glob = glob;
  PARITY_ASSIGN_OR_RETURN(
      Statement st,
      db.Prepare(absl::StrCat("SELECT k, verdict, phase, role, ", column < 0 ? "NULL" : "rec",
                              glob.empty() ? "" : ", name, api",
                              " FROM op_results WHERE k BETWEEN ? AND ? ORDER BY k")));
  st.Bind(1, FirstKey(seq)).Bind(2, LastKey(seq));
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    if (!glob.empty() && !GlobMatch(glob, st.ColumnText(5)) && !GlobMatch(glob, st.ColumnText(6))) {
      continue;
    }
    built->rows.push_back(SortRow(st, column));
  }
  SortRows(column, descending, &built->rows);
  std::shared_ptr<const SortedJob> entry = std::move(built);
  absl::MutexLock l(&cache_mu_);
  sort_cache_.push_front(entry);
  while (static_cast<int>(sort_cache_.size()) > options_.sort_cache_entries) sort_cache_.pop_back();
  return entry;
}

absl::StatusOr<std::vector<OpResultRecord>> Store::ListOpResults(const std::string& job_id,
                                                                 const OpResultFilter& f,
                                                                 int64_t offset, int64_t limit,
                                                                 int64_t* total) {
  int column = -1;
  if (!f.sort_metric.empty()) {
    column = SortableMetricColumn(f.sort_metric);
    if (column < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot sort by '", f.sort_metric, "': not a numeric metric of any policy; one of: ",
          absl::StrJoin(kSortableMetrics, ", ")));
    }
  }
  offset = std::max<int64_t>(offset, 0);
  limit = std::max<int64_t>(limit, 0);
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  std::vector<int64_t> page;  // keys, in order
  PARITY_ASSIGN_OR_RETURN(
      Statement js, r.db().Prepare("SELECT state, finished_at_ms, seq FROM jobs WHERE job_id=?"));
  js.Bind(1, job_id);
  PARITY_ASSIGN_OR_RETURN(bool have_job, js.Step());
  *total = 0;
  if (!have_job) return std::vector<OpResultRecord>();
  const bool finished = IsFinal(static_cast<JobState>(js.ColumnInt(0)));
  const int64_t seq = js.ColumnInt(2);
  if (finished && options_.sort_cache_entries > 0) {
    // Finished jobs do not change: filter and page an in-memory order (of the glob's rows).
    PARITY_ASSIGN_OR_RETURN(std::shared_ptr<const SortedJob> sorted,
                            Sorted(r.db(), job_id, seq, column, f.descending, js.ColumnInt(1), f.glob));
    bool want_verdict[256] = {false};
    for (int v : f.verdicts) {
      if (v >= 0 && v < 256) want_verdict[v] = true;
    }
    int64_t matched = 0;
    for (const SortedRow& row : sorted->rows) {
      if (!f.verdicts.empty() && !want_verdict[row.verdict]) continue;
      if (f.phase && row.phase != f.phase - 1) continue;
      if (f.role && row.role != f.role - 1) continue;
      if (matched >= offset && static_cast<int64_t>(page.size()) < limit) page.push_back(row.key);
      ++matched;
    }
    *total = matched;
  } else {
    std::vector<std::string> where = {"k BETWEEN ? AND ?"};
    if (!f.verdicts.empty()) where.push_back(absl::StrCat("verdict IN (", absl::StrJoin(f.verdicts, ","), ")"));
    if (f.phase) where.push_back(absl::StrCat("phase=", f.phase - 1));
    if (f.role) where.push_back(absl::StrCat("role=", f.role - 1));
    PARITY_ASSIGN_OR_RETURN(
        Statement st, r.db().Prepare(absl::StrCat("SELECT k, verdict, phase, role, ",
                                                  column < 0 ? "NULL" : "rec", ", name, api FROM op_results WHERE ",
                                                  absl::StrJoin(where, " AND "), " ORDER BY k")));
    st.Bind(1, FirstKey(seq)).Bind(2, LastKey(seq));
    std::vector<SortedRow> rows;
    while (true) {
      PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      if (!f.glob.empty() && !GlobMatch(f.glob, st.ColumnText(5)) && !GlobMatch(f.glob, st.ColumnText(6))) {
        continue;
      }
      rows.push_back(SortRow(st, column));
    }
    if (column >= 0 || f.descending) SortRows(column, f.descending, &rows);
    for (int64_t i = offset; i < static_cast<int64_t>(rows.size()) && static_cast<int64_t>(page.size()) < limit; ++i) {
      page.push_back(rows[i].key);
    }
    *total = static_cast<int64_t>(rows.size());
  }
  std::vector<OpResultRecord> out;
  out.reserve(page.size());
  PARITY_ASSIGN_OR_RETURN(
      Statement one, r.db().Prepare(absl::StrCat("SELECT ", kResultColumns, " FROM op_results WHERE k=?")));
  for (int64_t key : page) {
    one.Reset();
    one.Bind(1, key);
    PARITY_ASSIGN_OR_RETURN(bool row, one.Step());
    if (!row) continue;
    PARITY_ASSIGN_OR_RETURN(OpResultRecord rec, ReadResult(one, job_id));
    out.push_back(std::move(rec));
  }
  return out;
}

absl::StatusOr<OpResultRecord> Store::GetOpResult(const std::string& job_id, const std::string& name) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(
      Statement js, r.db().Prepare("SELECT seq, target_run_id, golden_run_id FROM jobs WHERE job_id=?"));
  js.Bind(1, job_id);
  PARITY_ASSIGN_OR_RETURN(bool have_job, js.Step());
  if (!have_job) return absl::NotFoundError(absl::StrCat("job '", job_id, "' not found"));
  const int64_t seq = js.ColumnInt(0);
  PARITY_ASSIGN_OR_RETURN(
      Statement one,
      r.db().Prepare(absl::StrCat("SELECT ", kResultColumns, " FROM op_results WHERE k=? AND name=?")));
  // A result is named after its target item, or its golden item when the target side is
  // missing: look the index up there first.
  PARITY_ASSIGN_OR_RETURN(Statement item, r.db().Prepare("SELECT idx FROM items WHERE run_id=? AND name=?"));
  for (int side = 0; side < 2; ++side) {
    item.Reset();
    item.Bind(1, js.ColumnText(1 + side)).Bind(2, name);
    PARITY_ASSIGN_OR_RETURN(bool found, item.Step());
    if (!found) continue;
    const int64_t index = side == 0 ? item.ColumnInt(0) : kGoldenOnlyIndexBase + item.ColumnInt(0);
    absl::StatusOr<int64_t> key = ResultKey(seq, index);
    if (!key.ok()) continue;
    one.Reset();
    one.Bind(1, *key).Bind(2, name);
    PARITY_ASSIGN_OR_RETURN(bool row, one.Step());
    if (row) return ReadResult(one, job_id);
  }
  // Results written without items (or under another name): scan the job's results.
  PARITY_ASSIGN_OR_RETURN(
      Statement scan,
      r.db().Prepare(absl::StrCat("SELECT ", kResultColumns,
                                  " FROM op_results WHERE k BETWEEN ? AND ? AND name=? ORDER BY k LIMIT 1")));
  scan.Bind(1, FirstKey(seq)).Bind(2, LastKey(seq)).Bind(3, name);
  PARITY_ASSIGN_OR_RETURN(bool row, scan.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("job '", job_id, "' has no result for '", name, "'"));
  return ReadResult(scan, job_id);
}

absl::StatusOr<std::vector<std::string>> Store::ListOpResultNames(const std::string& job_id) {
  return QueryStrings(
      "SELECT name FROM op_results WHERE k BETWEEN (SELECT seq FROM jobs WHERE job_id=?1) << 32 "
      "AND ((SELECT seq FROM jobs WHERE job_id=?1) << 32) | 4294967295 ORDER BY k",
      job_id);
}

absl::StatusOr<std::vector<std::string>> Store::ListCulpritApis(const std::string& job_id) {
  return QueryStrings(
      "SELECT api, MIN(k) AS first FROM op_results WHERE k BETWEEN (SELECT seq FROM jobs WHERE "
      "job_id=?1) << 32 AND ((SELECT seq FROM jobs WHERE job_id=?1) << 32) | 4294967295 AND "
      "culprit=1 GROUP BY api ORDER BY first",
      job_id);
}

absl::StatusOr<std::vector<std::string>> Store::ListRunsWithDataBefore(int64_t cutoff_ms) {
  return QueryStrings(
      "SELECT run_id FROM runs WHERE complete=1 AND created_at_ms<CAST(? AS INTEGER) AND "
      "EXISTS (SELECT 1 FROM items WHERE items.run_id=runs.run_id AND blob != '') ORDER BY created_at_ms",
      absl::StrCat(cutoff_ms));
}

Store::WriteFn Store::ReleaseRunData(std::string run_id) {
  return [run_id = std::move(run_id)](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(Statement st, db.Prepare("UPDATE items SET blob='', data=NULL WHERE run_id=?"));
    st.Bind(1, run_id);
    return st.Run();
  };
}

absl::StatusOr<std::vector<std::string>> Store::ReferencedBlobs() {
  return QueryStrings("SELECT DISTINCT blob FROM items WHERE blob != '' AND data IS NULL", "");
}

absl::StatusOr<std::vector<Store::MatchingBlob>> Store::BlobsMatching(const std::string& project,
                                                                     uint64_t byte_length,
                                                                     uint32_t crc32, int limit) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(
      Statement st,
      r.db().Prepare("SELECT DISTINCT items.blob, NOT EXISTS "
                     "(SELECT 1 FROM blob_hashes WHERE blob_hashes.blob=items.blob) "
                     "FROM items INDEXED BY items_by_crc JOIN runs ON runs.run_id=items.run_id "
                     "WHERE items.crc32=? AND items.byte_length=? AND items.blob != '' AND "
                     "items.data IS NULL AND runs.project=? LIMIT ?"));
  st.Bind(1, int64_t{crc32}).Bind(2, static_cast<int64_t>(byte_length)).Bind(3, project).Bind(4, int64_t{limit});
  std::vector<MatchingBlob> out;
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back({st.ColumnText(0), st.ColumnInt(1) != 0});
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> Store::ProjectBlobsWithHash(const std::string& project,
                                                                     const std::string& sha256) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(
      Statement st,
      r.db().Prepare("SELECT c.k FROM (SELECT ?1 AS k UNION SELECT blob FROM blob_hashes "
                     "WHERE sha256=?1) AS c WHERE c.k != '' AND EXISTS (SELECT 1 FROM items "
                     "INDEXED BY items_by_blob_prefix JOIN runs ON runs.run_id=items.run_id "
                     "WHERE substr(items.blob, 1, 16)=substr(c.k, 1, 16) AND items.blob=c.k AND "
                     "items.blob != '' AND items.data IS NULL AND runs.project=?2)"));
  st.Bind(1, sha256).Bind(2, project);
  return FirstColumnOfEachRow(st);
}

Store::WriteFn Store::RecordBlobHash(std::string key, std::string sha256) {
  return [key = std::move(key), sha256 = std::move(sha256)](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(Statement st,
                            db.Prepare("INSERT OR REPLACE INTO blob_hashes(blob, sha256) VALUES(?, ?)"));
    st.Bind(1, key).Bind(2, sha256);
    return st.Run();
  };
}

Store::WriteFn Store::ForgetUnreferencedBlobHashes() {
  return [](Database& db) -> absl::Status {
    return db.Exec(
        "DELETE FROM blob_hashes WHERE NOT EXISTS (SELECT 1 FROM items INDEXED BY "
        "items_by_blob_prefix WHERE substr(items.blob, 1, 16)=substr(blob_hashes.blob, 1, 16) AND "
        "items.blob=blob_hashes.blob AND items.blob != '' AND items.data IS NULL)");
  };
}

absl::Status Store::IntegrityCheck() {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare("PRAGMA integrity_check"));
  PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row || st.ColumnText(0) != "ok") {
    return absl::DataLossError(absl::StrCat("integrity_check: ", row ? st.ColumnText(0) : "no answer"));
  }
  return absl::OkStatus();
}

namespace {
constexpr char kTokenColumns[] =
    "token_id, project, role, salt, hash, note, created_at_ms, revoked_at_ms";

TokenRecord ReadToken(const Statement& st) {
  TokenRecord t;
  t.token_id = st.ColumnText(0);
  t.project = st.ColumnText(1);
  t.role = st.ColumnText(2);
  t.salt = st.ColumnText(3);
  t.hash = st.ColumnText(4);
  t.note = st.ColumnText(5);
  t.created_at_ms = st.ColumnInt(6);
  t.revoked_at_ms = st.ColumnInt(7);
  return t;
}
}  // namespace

Store::WriteFn Store::InsertToken(TokenRecord t) {
  return [t = std::move(t)](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(Statement st,
                            db.Prepare(absl::StrCat("INSERT INTO tokens(", kTokenColumns,
                                                    ") VALUES(?,?,?,?,?,?,?,?)")));
    st.Bind(1, t.token_id).Bind(2, t.project).Bind(3, t.role);
    st.BindBlob(4, t.salt).BindBlob(5, t.hash).Bind(6, t.note);
    st.Bind(7, t.created_at_ms).Bind(8, t.revoked_at_ms);
    return st.Run();
  };
}

Store::WriteFn Store::RevokeToken(std::string token_id, int64_t at_ms) {
  return [token_id = std::move(token_id), at_ms](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("UPDATE tokens SET revoked_at_ms=? WHERE token_id=? AND revoked_at_ms=0"));
    st.Bind(1, at_ms).Bind(2, token_id);
    return st.Run();
  };
}

absl::StatusOr<TokenRecord> Store::GetToken(const std::string& token_id) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(
      Statement st,
      r.db().Prepare(absl::StrCat("SELECT ", kTokenColumns, " FROM tokens WHERE token_id=?")));
  st.Bind(1, token_id);
  PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("no token '", token_id, "'"));
  return ReadToken(st);
}

absl::StatusOr<std::vector<TokenRecord>> Store::ListTokens(const std::string& project) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(
      Statement st,
      r.db().Prepare(absl::StrCat("SELECT ", kTokenColumns, " FROM tokens",
                                  project.empty() ? "" : " WHERE project=?",
                                  " ORDER BY created_at_ms, token_id")));
  if (!project.empty()) st.Bind(1, project);
  std::vector<TokenRecord> out;
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(ReadToken(st));
  }
  return out;
}

}  // namespace parity
