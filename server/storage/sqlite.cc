#include "server/storage/sqlite.h"

#include <sqlite3.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

namespace parity {

absl::StatusCode SqliteCodeToStatus(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kUnavailable;
    case SQLITE_FULL:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    case SQLITE_CONSTRAINT:
      return absl::StatusCode::kAlreadyExists;
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

namespace {
// After an I/O error SQLite does not always keep the errno (it clears it for SQLITE_FULL): try
// writing a file beside the database and return the errno that fails it, or 0.
int ProbeWritable(sqlite3* db) {
  const char* file = db != nullptr ? sqlite3_db_filename(db, "main") : nullptr;
  if (file == nullptr || *file == '\0') return 0;
  const std::string path = std::filesystem::path(file).parent_path() / ".parity-write-probe";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  int e = 0;
  if (::write(fd, "p", 1) != 1) e = errno;
  ::close(fd);
  ::unlink(path.c_str());
  return e;
}

// The status for a failed call on `db`: the code from SqliteCodeToStatus and SQLite's message,
// plus, for I/O errors, the operating system's errno (a full disk is RESOURCE_EXHAUSTED, a
// read-only one FAILED_PRECONDITION, both named, rather than "disk I/O error").
absl::Status SqliteStatus(sqlite3* db, int rc, absl::string_view what, absl::string_view msg) {
  absl::StatusCode code = SqliteCodeToStatus(rc);
  std::string text = absl::StrCat(what, ": ", msg);
  const int primary = rc & 0xff;
  if (primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_CANTOPEN) {
    int e = db != nullptr ? sqlite3_system_errno(db) : 0;
    if (e == 0) e = ProbeWritable(db);
    if (e != 0) {
      absl::StrAppend(&text, " (", std::strerror(e), ")");
      if (e == ENOSPC || e == EDQUOT) code = absl::StatusCode::kResourceExhausted;
      if (e == EROFS || e == EACCES || e == EPERM) code = absl::StatusCode::kFailedPrecondition;
    }
  }
  return absl::Status(code, text);
}

// One prepared statement of a connection.
class SqliteStatement final : public StatementDriver {
 public:
  SqliteStatement(sqlite3* db, sqlite3_stmt* s) : db_(db), stmt_(s) {}
  ~SqliteStatement() override { sqlite3_finalize(stmt_); }

  void BindInt(int i, int64_t v) override { sqlite3_bind_int64(stmt_, i, v); }
  void BindDouble(int i, double v) override { sqlite3_bind_double(stmt_, i, v); }
  void BindText(int i, absl::string_view v, bool copy) override {
    sqlite3_bind_text(stmt_, i, v.data() ? v.data() : "", static_cast<int>(v.size()),
                      copy ? SQLITE_TRANSIENT : SQLITE_STATIC);
  }
  void BindBlob(int i, absl::string_view v, bool copy) override {
    sqlite3_bind_blob(stmt_, i, v.data() ? v.data() : "", static_cast<int>(v.size()),
                      copy ? SQLITE_TRANSIENT : SQLITE_STATIC);
  }
  void BindNull(int i) override { sqlite3_bind_null(stmt_, i); }

  absl::StatusOr<bool> Step() override {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteStatus(db_, sqlite3_extended_errcode(db_), "sqlite step", sqlite3_errmsg(db_));
  }
  void Reset() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  int64_t ColumnInt(int i) const override { return sqlite3_column_int64(stmt_, i); }
  double ColumnDouble(int i) const override { return sqlite3_column_double(stmt_, i); }
  absl::string_view ColumnBlob(int i) const override {
    const void* b = sqlite3_column_blob(stmt_, i);
    return b ? absl::string_view(static_cast<const char*>(b), sqlite3_column_bytes(stmt_, i))
             : absl::string_view();
  }
  bool ColumnIsNull(int i) const override { return sqlite3_column_type(stmt_, i) == SQLITE_NULL; }

 private:
  sqlite3* const db_;
  sqlite3_stmt* const stmt_;
};

// One connection.
class SqliteDatabase final : public DatabaseDriver {
 public:
  explicit SqliteDatabase(sqlite3* db) : db_(db) {}
  ~SqliteDatabase() override { sqlite3_close_v2(db_); }

  SqlDialect dialect() const override { return SqlDialect::kSqlite; }
  absl::Status Exec(absl::string_view sql) override {
    char* err = nullptr;
    const std::string s(sql);
    const int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      std::string msg = err ? err : sqlite3_errstr(rc);
      sqlite3_free(err);
      return SqliteStatus(db_, sqlite3_extended_errcode(db_), "sqlite", msg);
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<StatementDriver>> Prepare(absl::string_view sql, bool /*keep*/) override {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
    if (rc != SQLITE_OK) {
      return SqliteStatus(db_, sqlite3_extended_errcode(db_), absl::StrCat("prepare '", sql.substr(0, 60), "'"),
                          sqlite3_errmsg(db_));
    }
    return std::make_unique<SqliteStatement>(db_, stmt);
  }
  absl::string_view BeginSql() const override { return "BEGIN IMMEDIATE"; }

 private:
  sqlite3* const db_;
};

}  // namespace

absl::StatusOr<Database> OpenSqlite(const std::string& path, bool read_only) {
  // Before SQLite initialises: no global memory statistics (each allocation would take a
  // process-wide mutex). Fails harmlessly if SQLite was already initialised.
  static const bool configured = [] { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK; }();
  (void)configured;
  sqlite3* db = nullptr;
  const int flags = (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                    SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = SqliteStatus(db, rc, absl::StrCat("cannot open database ", path),
                                  db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return s;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, 10000);
  Database d(std::make_unique<SqliteDatabase>(db));
  absl::Status s = d.Exec(read_only ? "PRAGMA foreign_keys=ON;"
                                    : "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA cache_size=-65536; "
                                      "PRAGMA journal_size_limit=4194304; PRAGMA foreign_keys=ON;");
  if (!s.ok()) return s;
  return d;
}

}  // namespace parity
