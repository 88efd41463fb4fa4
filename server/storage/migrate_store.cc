#include "server/storage/migrate_store.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/sha256.h"
#include "common/base/status_macros.h"
#include "server/storage/data_dir_lock.h"
#include "server/storage/database.h"
#include "server/storage/postgres.h"
#include "server/storage/s3.h"
#include "server/storage/spool.h"
#include "server/storage/sqlite.h"
#include "server/storage/store.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

enum class ColumnKind { kInt, kDouble, kText, kBlob };

struct TableSpec {
  std::string name;
  std::vector<std::string> columns;
  std::vector<ColumnKind> kinds;
};

// Parity's tables in the PostgreSQL schema with their columns' kinds, the tables others
// reference first (runs, then jobs); the schema's bookkeeping and the leases are not data.
absl::StatusOr<std::vector<TableSpec>> DestinationTables(Database& pg) {
  PARITY_ASSIGN_OR_RETURN(
      Statement st, pg.Prepare("SELECT table_name, column_name, data_type FROM information_schema.columns "
                               "WHERE table_schema=current_schema() AND table_name NOT IN "
                               "('parity_schema', 'job_leases') ORDER BY table_name, ordinal_position"));
  std::map<std::string, TableSpec> by_name;
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    TableSpec& t = by_name[st.ColumnText(0)];
    t.name = st.ColumnText(0);
    t.columns.push_back(st.ColumnText(1));
    const std::string type = st.ColumnText(2);
    t.kinds.push_back(type == "bigint" || type == "integer" || type == "smallint" ? ColumnKind::kInt
                      : type == "double precision" || type == "real"            ? ColumnKind::kDouble
                      : type == "bytea"                                         ? ColumnKind::kBlob
                                                                                : ColumnKind::kText);
  }
  std::vector<TableSpec> out;
  for (const char* first : {"runs", "jobs"}) {
    auto it = by_name.find(first);
    if (it == by_name.end()) return absl::InternalError(absl::StrCat("the PostgreSQL schema has no table ", first));
    out.push_back(std::move(it->second));
    by_name.erase(it);
  }
  for (auto& [name, t] : by_name) out.push_back(std::move(t));
  return out;
}

// FAILED_PRECONDITION naming an SQLite table the destination lacks: its rows would be lost.
absl::Status CheckSourceTables(Database& lite, const std::vector<TableSpec>& tables) {
  std::set<std::string> known;
  for (const TableSpec& t : tables) known.insert(t.name);
  PARITY_ASSIGN_OR_RETURN(Statement st, lite.Prepare("SELECT name FROM sqlite_master WHERE type='table' AND "
                                                     "name NOT LIKE 'sqlite_%' ORDER BY name"));
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    if (!known.count(st.ColumnText(0))) {
      return absl::FailedPreconditionError(absl::StrCat("the SQLite store's table ", st.ColumnText(0),
                                                        " has no counterpart in the PostgreSQL schema"));
    }
  }
  return absl::OkStatus();
}

// One column's value of the current row, kept to be bound later.
struct Value {
  bool null = false;
  int64_t i = 0;
  double d = 0;
  std::string s;
};

Value Read(const Statement& st, int col, ColumnKind kind) {
  Value v;
  v.null = st.ColumnIsNull(col);
  if (v.null) return v;
  switch (kind) {
    case ColumnKind::kInt: v.i = st.ColumnInt(col); break;
    case ColumnKind::kDouble: v.d = st.ColumnDouble(col); break;
    case ColumnKind::kText:
    case ColumnKind::kBlob: v.s = std::string(st.ColumnBlob(col)); break;
  }
  return v;
}

void Bind(Statement& st, int param, const Value& v, ColumnKind kind) {
  if (v.null) {
    st.BindNull(param);
  } else if (kind == ColumnKind::kInt) {
    st.Bind(param, v.i);
  } else if (kind == ColumnKind::kDouble) {
    st.Bind(param, v.d);
  } else if (kind == ColumnKind::kBlob) {
    st.BindBlob(param, v.s);
  } else {
    st.Bind(param, absl::string_view(v.s));
  }
}

// A table's rows as a multiset: their count and the sum of a 64-bit hash of each row's exact
// values (doubles by their bits), which two stores share only when they hold the same rows.
struct TableDigest {
  uint64_t rows = 0, sum = 0;
  bool operator==(const TableDigest& o) const { return rows == o.rows && sum == o.sum; }
};

void AddRow(const std::vector<Value>& row, const TableSpec& t, TableDigest* d) {
  std::string canonical;
  for (size_t c = 0; c < row.size(); ++c) {
    const Value& v = row[c];
    if (v.null) {
      canonical += 'N';
      continue;
    }
    char bits[8];
    switch (t.kinds[c]) {
      case ColumnKind::kInt: std::memcpy(bits, &v.i, 8); canonical += 'I'; canonical.append(bits, 8); break;
      case ColumnKind::kDouble: std::memcpy(bits, &v.d, 8); canonical += 'D'; canonical.append(bits, 8); break;
      default: {
        const uint64_t n = v.s.size();
        std::memcpy(bits, &n, 8);
        canonical += 'S';
        canonical.append(bits, 8);
        canonical += v.s;
      }
    }
  }
  const std::string h = Sha256Hex(canonical);
  d->sum += std::stoull(h.substr(0, 16), nullptr, 16);
  ++d->rows;
}

// Reads every row of `t` from `db`, calling `each` with its values (one vector reused).
absl::Status VisitRows(Database& db, const TableSpec& t, const std::function<absl::Status(const std::vector<Value>&)>& each) {
  PARITY_ASSIGN_OR_RETURN(Statement st,
                          db.Prepare(absl::StrCat("SELECT ", absl::StrJoin(t.columns, ", "), " FROM ", t.name)));
  std::vector<Value> row(t.columns.size());
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool more, st.Step());
    if (!more) return absl::OkStatus();
    for (size_t c = 0; c < t.columns.size(); ++c) row[c] = Read(st, static_cast<int>(c), t.kinds[c]);
    PARITY_RETURN_IF_ERROR(each(row));
  }
}

std::string InsertSql(const TableSpec& t, size_t rows) {
  const std::string one = absl::StrCat("(", absl::StrJoin(std::vector<std::string>(t.columns.size(), "?"), ", "), ")");
  return absl::StrCat("INSERT INTO ", t.name, "(", absl::StrJoin(t.columns, ", "), ") VALUES ",
                      absl::StrJoin(std::vector<std::string>(rows, one), ", "));
}

// Copies `t`'s rows from `from` to `to`, many to a statement (each statement is a round trip);
// returns the source's digest.
absl::StatusOr<TableDigest> CopyTable(Database& from, Database& to, const TableSpec& t) {
  const size_t per_statement = std::clamp<size_t>(16000 / t.columns.size(), 1, 256);
  std::vector<std::vector<Value>> batch;
  TableDigest digest;
  auto flush = [&]() -> absl::Status {
    if (batch.empty()) return absl::OkStatus();
    PARITY_ASSIGN_OR_RETURN(Statement ins, to.Prepare(InsertSql(t, batch.size())));
    int p = 1;
    for (const std::vector<Value>& row : batch) {
      for (size_t c = 0; c < row.size(); ++c) Bind(ins, p++, row[c], t.kinds[c]);
    }
    batch.clear();
    return ins.Run();
  };
  PARITY_RETURN_IF_ERROR(VisitRows(from, t, [&](const std::vector<Value>& row) -> absl::Status {
    AddRow(row, t, &digest);
    batch.push_back(row);
    return batch.size() == per_statement ? flush() : absl::OkStatus();
  }));
  PARITY_RETURN_IF_ERROR(flush());
  return digest;
}

absl::StatusOr<TableDigest> DigestTable(Database& db, const TableSpec& t) {
  TableDigest d;
  PARITY_RETURN_IF_ERROR(VisitRows(db, t, [&](const std::vector<Value>& row) {
    AddRow(row, t, &d);
    return absl::OkStatus();
  }));
  return d;
}

absl::Status CheckEmpty(Database& pg) {
  for (const char* table : {"runs", "jobs", "tokens"}) {
    PARITY_ASSIGN_OR_RETURN(Statement st, pg.Prepare(absl::StrCat("SELECT COUNT(*) FROM ", table)));
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (row && st.ColumnInt(0) > 0) {
      return absl::FailedPreconditionError(absl::StrCat("the destination database already holds ", st.ColumnInt(0),
                                                        " row(s) in ", table, "; migrate into an empty database"));
    }
  }
  return absl::OkStatus();
}

// The blobs items reference, put in the bucket from the spool. A referenced blob the spool
// lacks is an error: its item's data would be lost without a word.
absl::Status CopyBlobs(const MigrateStoreOptions& o, Store& source, MigrateStoreReport* report) {
  PARITY_ASSIGN_OR_RETURN(S3Options s3o, ParseS3Url(o.to_blobs));
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<S3Client> s3, S3Client::Open(std::move(s3o)));
  SpoolOptions so;
  so.dir = (fs::path(o.from_dir) / "spool").string();
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<Spool> spool, Spool::Open(so));
  PARITY_ASSIGN_OR_RETURN(std::vector<std::string> keys, source.ReferencedBlobs());
  for (const std::string& key : keys) {
    absl::StatusOr<uint64_t> size = spool->SizeOf(key);
    if (!size.ok()) {
      return absl::DataLossError(absl::StrCat("blob ", key, " is referenced but not in the spool: ",
                                              size.status().message()));
    }
    const std::string path = spool->PathOf(key);
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return absl::InternalError(absl::StrCat("cannot open ", path));
    absl::Status s = s3->PutFile(key, fileno(f), *size);
    std::fclose(f);
    PARITY_RETURN_IF_ERROR(s);
    ++report->blobs;
    report->blob_bytes += *size;
    if (o.progress) o.progress("blobs", report->blobs, keys.size());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& path) {
  StoreOptions so;
  so.path = path;
  return Store::Open(so);
}

}  // namespace

absl::StatusOr<MigrateStoreReport> MigrateStore(const MigrateStoreOptions& o) {
  if (!IsPostgresStore(o.to_store)) return absl::InvalidArgumentError("--to: not a PostgreSQL URI");
  const std::string db_path = (fs::path(o.from_dir) / "parity.db").string();
  if (!fs::exists(db_path)) return absl::NotFoundError(absl::StrCat(db_path, " does not exist"));
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<DataDirLock> lock, DataDirLock::Acquire(o.from_dir));
  // Both schemas current: the SQLite file migrated in place if it is older, the PostgreSQL one
  // created if the database has none.
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<Store> source, OpenStore(db_path));
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<Store> dest, OpenStore(o.to_store));
  PARITY_ASSIGN_OR_RETURN(Database lite, OpenSqlite(db_path, /*read_only=*/true));
  PARITY_ASSIGN_OR_RETURN(Database pg, OpenPostgres(o.to_store));
  PARITY_RETURN_IF_ERROR(CheckEmpty(pg));
  PARITY_ASSIGN_OR_RETURN(std::vector<TableSpec> tables, DestinationTables(pg));
  PARITY_RETURN_IF_ERROR(CheckSourceTables(lite, tables));
  MigrateStoreReport report;
  // Blobs first: rows that reference them are committed only once they are in the bucket.
  if (!o.to_blobs.empty()) PARITY_RETURN_IF_ERROR(CopyBlobs(o, *source, &report));
  std::vector<TableDigest> digests;
  {
    Transaction tx(&pg);
    PARITY_RETURN_IF_ERROR(tx.Begin());
    for (size_t i = 0; i < tables.size(); ++i) {
      absl::StatusOr<TableDigest> d = CopyTable(lite, pg, tables[i]);
      if (!d.ok()) return absl::Status(d.status().code(), absl::StrCat("table ", tables[i].name, ": ", d.status().message()));
      digests.push_back(*d);
      report.tables.push_back({tables[i].name, d->rows});
      if (o.progress) o.progress("tables", i + 1, tables.size());
    }
    PARITY_RETURN_IF_ERROR(tx.Commit());
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    PARITY_ASSIGN_OR_RETURN(TableDigest d, DigestTable(pg, tables[i]));
    if (!(d == digests[i])) {
      return absl::DataLossError(absl::StrCat("table ", tables[i].name, ": ", digests[i].rows,
                                              " rows in the SQLite store, ", d.rows,
                                              " in PostgreSQL, or rows that differ"));
    }
    ++report.tables_checked;
  }
  PARITY_RETURN_IF_ERROR(CompareStoreAnswers(*source, *dest, &report.queries_checked, o.progress));
  return report;
}

}  // namespace parity
