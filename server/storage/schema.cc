// The store's schema, version by version, and the migrations between them.
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

#include "server/storage/store_rows.h"

namespace parity {
namespace store_internal {
namespace {

constexpr int kSchemaVersion = 18;
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

// Version 15: finished jobs' packed indexes (job_index.h), one row per part (col -1: the rows;
// otherwise a kSortableMetrics position), written with the job's final record. Jobs finished
// before have none and are read from their rows.
constexpr char kSchemaV15[] = R"sql(
CREATE TABLE IF NOT EXISTS job_index(
  job_id TEXT NOT NULL,
  col INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY(job_id, col)
);
)sql";

// Version 16: finished jobs' culprit analysis (growth figures, noise floor) as one JSON document
// (CulpritAnalysisJson), and files a run carries beside its items: construct.json as it came, and
// stack.json as an index (each distinct stack once, each entry's stack by API; its run_files row
// empty, marking that the run has one), so that a page of results finds its stacks without
// parsing the file. Op results are written as version 4 blobs (with their error figure), which a
// binary of schema 15 cannot read.
constexpr char kSchemaV16[] = R"sql(
CREATE TABLE IF NOT EXISTS job_analysis(
  job_id TEXT PRIMARY KEY,
  doc TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS run_files(
  run_id TEXT NOT NULL,
  name TEXT NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY(run_id, name)
);
CREATE TABLE IF NOT EXISTS run_stack_texts(
  run_id TEXT NOT NULL,
  id INTEGER NOT NULL,
  text TEXT NOT NULL,
  PRIMARY KEY(run_id, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS run_stacks(
  run_id TEXT NOT NULL,
  api TEXT NOT NULL,
  id INTEGER NOT NULL,
  PRIMARY KEY(run_id, api)
) WITHOUT ROWID;
)sql";

// Adds `column` (with its declaration `decl`) to `table` unless it is there: migrations stay
// idempotent (a file marked older than a version runs that version again).
absl::Status AddColumnIfMissing(Database& db, absl::string_view table, absl::string_view column,
                                absl::string_view decl) {
  bool present = false;
  {  // finalized before the ALTER TABLE
    PARITY_ASSIGN_OR_RETURN(Statement q, db.Prepare(absl::StrCat("SELECT COUNT(*) FROM pragma_table_info('",
                                                                 table, "') WHERE name='", column, "'")));
    PARITY_ASSIGN_OR_RETURN(bool row, q.Step());
    present = row && q.ColumnInt(0) > 0;
  }
  if (present) return absl::OkStatus();
  return db.Exec(absl::StrCat("ALTER TABLE ", table, " ADD COLUMN ", column, " ", decl, ";"));
}

// Version 12: the layout a run was read from (RunMetadata.dump_format), which pairing follows.
absl::Status MigrateToV12(Database& db) {
  return AddColumnIfMissing(db, "runs", "dump_format", "TEXT NOT NULL DEFAULT ''");
}

// Version 13: each item's dtype text, data file name and (non-tensors) shape text as its dump
// writes them (msprobe's CSV columns); '' for items stored before.
absl::Status MigrateToV13(Database& db) {
  PARITY_RETURN_IF_ERROR(AddColumnIfMissing(db, "items", "dtype_text", "TEXT NOT NULL DEFAULT ''"));
  PARITY_RETURN_IF_ERROR(AddColumnIfMissing(db, "items", "shape_text", "TEXT NOT NULL DEFAULT ''"));
  return AddColumnIfMissing(db, "items", "data_name", "TEXT NOT NULL DEFAULT ''");
}

// Version 14: what a run's dump holds (RunMetadata.dump_mode: 1 tensor, 2 statistics, 3 md5; 0
// not said), the mode of its non-tensor and unmatched rows.
absl::Status MigrateToV14(Database& db) {
  return AddColumnIfMissing(db, "runs", "dump_mode", "INTEGER NOT NULL DEFAULT 0");
}

// Version 17: the item of the same run an item is compared with when the golden run can have
// none (ItemRecord::in_run_golden); '' for items stored before.
absl::Status MigrateToV17(Database& db) {
  return AddColumnIfMissing(db, "items", "in_run_golden", "TEXT NOT NULL DEFAULT ''");
}

// Version 18: blobs of a shared bucket being collected (SharedBlobs::Collect): a blob listed
// here takes no new reference.
constexpr char kBlobTombstones[] =
    "CREATE TABLE IF NOT EXISTS blob_tombstones(blob TEXT PRIMARY KEY, marked_at_ms BIGINT NOT NULL)";

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

// A new PostgreSQL store at kSchemaVersion: the SQLite schema's tables, columns and indexes after
// every migration above, in PostgreSQL's types (64-bit integers, BYTEA for blobs). Later versions
// add their own steps for both dialects.
constexpr char kPostgresSchema[] = R"sql(
CREATE TABLE runs(
  run_id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  side BIGINT NOT NULL,
  name TEXT NOT NULL,
  model TEXT NOT NULL,
  framework TEXT NOT NULL,
  device TEXT NOT NULL,
  rank BIGINT NOT NULL,
  step BIGINT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  complete BIGINT NOT NULL DEFAULT 0,
  item_count BIGINT NOT NULL DEFAULT 0,
  structure_hash TEXT NOT NULL DEFAULT '',
  fingerprint TEXT NOT NULL DEFAULT '',
  op_type_counts TEXT NOT NULL DEFAULT '{}',
  dump_format TEXT NOT NULL DEFAULT '',
  dump_mode BIGINT NOT NULL DEFAULT 0
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
  phase BIGINT NOT NULL,
  role BIGINT NOT NULL,
  idx BIGINT NOT NULL,
  dtype BIGINT,
  shape TEXT NOT NULL,
  data_mode BIGINT NOT NULL,
  byte_length BIGINT NOT NULL,
  stat_max TEXT, stat_min TEXT, stat_mean TEXT, stat_norm TEXT,
  crc32 BIGINT,
  requires_grad BIGINT,
  scalar_value TEXT,
  scalar_type TEXT NOT NULL,
  blob TEXT NOT NULL,
  read_error TEXT NOT NULL DEFAULT '',
  data BYTEA,
  dtype_text TEXT NOT NULL DEFAULT '',
  shape_text TEXT NOT NULL DEFAULT '',
  data_name TEXT NOT NULL DEFAULT '',
  in_run_golden TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(run_id, name)
);
CREATE UNIQUE INDEX items_by_index ON items(run_id, idx);
CREATE INDEX items_by_crc ON items(crc32, byte_length) WHERE blob != '' AND data IS NULL;
CREATE INDEX items_by_blob_prefix ON items(substr(blob, 1, 16)) WHERE blob != '' AND data IS NULL;
CREATE TABLE jobs(
  job_id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  golden_run_id TEXT NOT NULL REFERENCES runs(run_id),
  target_run_id TEXT NOT NULL REFERENCES runs(run_id),
  policy BIGINT NOT NULL,
  match_mode BIGINT NOT NULL,
  config_json TEXT NOT NULL,
  state BIGINT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  finished_at_ms BIGINT NOT NULL DEFAULT 0,
  error TEXT NOT NULL DEFAULT '',
  pairs_done BIGINT NOT NULL DEFAULT 0,
  pairs_total BIGINT NOT NULL DEFAULT 0,
  counts TEXT NOT NULL DEFAULT '0,0,0,0,0,0',
  first_culprit TEXT NOT NULL DEFAULT '',
  seq BIGINT
);
CREATE INDEX jobs_by_project ON jobs(project, created_at_ms);
CREATE INDEX jobs_by_golden ON jobs(golden_run_id);
CREATE INDEX jobs_by_target ON jobs(target_run_id);
CREATE INDEX jobs_by_state ON jobs(state);
CREATE UNIQUE INDEX jobs_by_seq ON jobs(seq);
CREATE TABLE op_results(
  k BIGINT PRIMARY KEY,
  name TEXT NOT NULL,
  api TEXT NOT NULL,
  verdict BIGINT NOT NULL,
  phase BIGINT NOT NULL,
  role BIGINT NOT NULL,
  culprit BIGINT NOT NULL DEFAULT 0,
  rec BYTEA NOT NULL
);
CREATE INDEX results_culprits ON op_results(k) WHERE culprit=1;
CREATE TABLE tokens(
  token_id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  role TEXT NOT NULL,
  salt BYTEA NOT NULL,
  hash BYTEA NOT NULL,
  note TEXT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  revoked_at_ms BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE blob_hashes(blob TEXT PRIMARY KEY, sha256 TEXT NOT NULL);
CREATE INDEX blob_hashes_by_sha ON blob_hashes(sha256);
CREATE TABLE job_index(
  job_id TEXT NOT NULL,
  col BIGINT NOT NULL,
  data BYTEA NOT NULL,
  PRIMARY KEY(job_id, col)
);
CREATE TABLE job_analysis(
  job_id TEXT PRIMARY KEY,
  doc TEXT NOT NULL
);
CREATE TABLE run_files(
  run_id TEXT NOT NULL,
  name TEXT NOT NULL,
  data BYTEA NOT NULL,
  PRIMARY KEY(run_id, name)
);
CREATE TABLE run_stack_texts(
  run_id TEXT NOT NULL,
  id BIGINT NOT NULL,
  text TEXT NOT NULL,
  PRIMARY KEY(run_id, id)
);
CREATE TABLE run_stacks(
  run_id TEXT NOT NULL,
  api TEXT NOT NULL,
  id BIGINT NOT NULL,
  PRIMARY KEY(run_id, api)
);
CREATE TABLE job_leases(
  job_id TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  expires_at_ms BIGINT NOT NULL
);
CREATE TABLE blob_tombstones(blob TEXT PRIMARY KEY, marked_at_ms BIGINT NOT NULL);
)sql";

// PostgreSQL keeps the version in a table of its own; several daemons starting on one database
// migrate it once, one at a time (a session advisory lock keyed by kApplicationId).
absl::Status MigratePostgresLocked(Database& db) {
  PARITY_RETURN_IF_ERROR(
      db.Exec("CREATE TABLE IF NOT EXISTS parity_schema(version BIGINT NOT NULL, application BIGINT NOT NULL)"));
  int64_t version = 0;
  {
    PARITY_ASSIGN_OR_RETURN(Statement q, db.Prepare("SELECT version, application FROM parity_schema"));
    PARITY_ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      if (q.ColumnInt(1) != kApplicationId) {
        return absl::FailedPreconditionError("the database belongs to another application");
      }
      version = q.ColumnInt(0);
    }
  }
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat("database schema version ", version,
                                                      " is newer than this binary's ", kSchemaVersion));
  }
  if (version == kSchemaVersion) return absl::OkStatus();
  Transaction tx(&db);
  PARITY_RETURN_IF_ERROR(tx.Begin());
  if (version == 0) {
    PARITY_RETURN_IF_ERROR(db.Exec(kPostgresSchema));
  } else {
    // Version 18: the job leases and the collector's tombstones.
    PARITY_RETURN_IF_ERROR(db.Exec("CREATE TABLE IF NOT EXISTS job_leases(job_id TEXT PRIMARY KEY, holder TEXT NOT NULL, "
                                   "expires_at_ms BIGINT NOT NULL)"));
    PARITY_RETURN_IF_ERROR(db.Exec(kBlobTombstones));
  }
  PARITY_RETURN_IF_ERROR(db.Exec("DELETE FROM parity_schema"));
  PARITY_RETURN_IF_ERROR(db.Exec(
      absl::StrCat("INSERT INTO parity_schema(version, application) VALUES(", kSchemaVersion, ", ", kApplicationId, ")")));
  return tx.Commit();
}

absl::Status MigratePostgres(Database& db) {
  const std::string key = absl::StrCat(kApplicationId);
  PARITY_RETURN_IF_ERROR(db.Exec(absl::StrCat("SELECT pg_advisory_lock(", key, ")")));
  const absl::Status s = MigratePostgresLocked(db);
  db.Exec(absl::StrCat("SELECT pg_advisory_unlock(", key, ")")).IgnoreError();
  return s;
}

}  // namespace

absl::Status Migrate(Database& db) {
  if (db.dialect() == SqlDialect::kPostgres) return MigratePostgres(db);
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
  if (version < 12) PARITY_RETURN_IF_ERROR(MigrateToV12(db));
  if (version < 13) PARITY_RETURN_IF_ERROR(MigrateToV13(db));
  if (version < 14) PARITY_RETURN_IF_ERROR(MigrateToV14(db));
  if (version < 15) PARITY_RETURN_IF_ERROR(db.Exec(kSchemaV15));
  if (version < 16) PARITY_RETURN_IF_ERROR(db.Exec(kSchemaV16));
  if (version < 17) PARITY_RETURN_IF_ERROR(MigrateToV17(db));
  if (version < 18) PARITY_RETURN_IF_ERROR(db.Exec(kBlobTombstones));
  PARITY_RETURN_IF_ERROR(db.Exec(absl::StrCat("PRAGMA user_version=", kSchemaVersion,
                                              "; PRAGMA application_id=", kApplicationId)));
  return tx.Commit();
}

}  // namespace store_internal
}  // namespace parity
