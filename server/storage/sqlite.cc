#include "server/storage/sqlite.h"

#include <sqlite3.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

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
}  // namespace

absl::StatusOr<Database> Database::Open(const std::string& path, bool read_only) {
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
  Database d(db);
  absl::Status s = d.Exec(read_only ? "PRAGMA foreign_keys=ON;"
                                    : "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA cache_size=-65536; "
                                      "PRAGMA journal_size_limit=4194304; PRAGMA foreign_keys=ON;");
  if (!s.ok()) return s;
  return d;
}

Database& Database::operator=(Database&& o) noexcept {
  if (this != &o) {
    Close();
    db_ = o.db_;
    cache_ = std::move(o.cache_);
    memo_ = std::move(o.memo_);
    o.db_ = nullptr;
  }
  return *this;
}

Database::~Database() { Close(); }

void Database::Close() {
  cache_.reset();  // finalizes the cached statements
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
}

absl::StatusOr<Statement*> Database::Cached(absl::string_view sql) {
  if (!cache_) cache_ = std::make_unique<std::map<std::string, Statement, std::less<>>>();
  auto it = cache_->find(sql);
  if (it == cache_->end()) {
    absl::StatusOr<Statement> st = Prepare(sql);
    if (!st.ok()) return st.status();
    it = cache_->emplace(std::string(sql), *std::move(st)).first;
  } else {
    it->second.Reset();
  }
  return &it->second;
}

absl::Status Database::Error(absl::string_view what) const {
  return SqliteStatus(db_, sqlite3_extended_errcode(db_), what, sqlite3_errmsg(db_));
}

absl::Status Database::Exec(absl::string_view sql) {
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

absl::StatusOr<Statement> Database::Prepare(absl::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(absl::StrCat("prepare '", sql.substr(0, 60), "'"));
  return Statement(db_, stmt);
}

int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement& Statement::Bind(int i, int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}
Statement& Statement::Bind(int i, double v) {
  sqlite3_bind_double(stmt_, i, v);
  return *this;
}
Statement& Statement::Bind(int i, absl::string_view v) {
  sqlite3_bind_text(stmt_, i, v.data() ? v.data() : "", static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::BindStatic(int i, absl::string_view v) {
  sqlite3_bind_text(stmt_, i, v.data() ? v.data() : "", static_cast<int>(v.size()), SQLITE_STATIC);
  return *this;
}
Statement& Statement::BindBlob(int i, absl::string_view v) {
  sqlite3_bind_blob(stmt_, i, v.data() ? v.data() : "", static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::BindBlobStatic(int i, absl::string_view v) {
  sqlite3_bind_blob(stmt_, i, v.data() ? v.data() : "", static_cast<int>(v.size()), SQLITE_STATIC);
  return *this;
}
Statement& Statement::BindNull(int i) {
  sqlite3_bind_null(stmt_, i);
  return *this;
}

absl::StatusOr<bool> Statement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteStatus(db_, sqlite3_extended_errcode(db_), "sqlite step", sqlite3_errmsg(db_));
}

absl::Status Statement::Run() {
  while (true) {
    absl::StatusOr<bool> r = Step();
    if (!r.ok()) return r.status();
    if (!*r) return absl::OkStatus();
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::ColumnInt(int i) const { return sqlite3_column_int64(stmt_, i); }
double Statement::ColumnDouble(int i) const { return sqlite3_column_double(stmt_, i); }
std::string Statement::ColumnText(int i) const {
  const unsigned char* t = sqlite3_column_text(stmt_, i);
  return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(stmt_, i)) : "";
}
absl::string_view Statement::ColumnBlob(int i) const {
  const void* b = sqlite3_column_blob(stmt_, i);
  return b ? absl::string_view(static_cast<const char*>(b), sqlite3_column_bytes(stmt_, i))
           : absl::string_view();
}
bool Statement::ColumnIsNull(int i) const { return sqlite3_column_type(stmt_, i) == SQLITE_NULL; }

Transaction::~Transaction() {
  if (!open_) return;
  db_->Exec("ROLLBACK").IgnoreError();
  db_->MemoClear();
}

const int64_t* Database::MemoFind(absl::string_view key) const {
  auto it = memo_.find(key);
  return it == memo_.end() ? nullptr : &it->second;
}

void Database::MemoPut(std::string key, int64_t value) {
  if (memo_.size() >= 4096) memo_.clear();
  memo_[std::move(key)] = value;
}

absl::Status Transaction::Begin() {
  absl::Status s = db_->Exec("BEGIN IMMEDIATE");
  open_ = s.ok();
  return s;
}

absl::Status Transaction::Commit() {
  absl::Status s = db_->Exec("COMMIT");
  if (s.ok()) open_ = false;
  return s;
}

}  // namespace parity
