// RAII wrappers over the SQLite C API with absl::Status errors. Public headers do not include
// sqlite3.h.
#ifndef PARITY_SERVER_STORAGE_SQLITE_H_
#define PARITY_SERVER_STORAGE_SQLITE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;
struct sqlite3_stmt;

namespace parity {

class Statement;

// One connection. Move-only. Not thread-safe: use one per thread.
class Database {
 public:
  // Opens (creating if needed) with WAL, synchronous=FULL, foreign keys and a busy timeout.
  static absl::StatusOr<Database> Open(const std::string& path, bool read_only = false);
  Database(Database&& o) noexcept : db_(o.db_), cache_(std::move(o.cache_)), memo_(std::move(o.memo_)) {
    o.db_ = nullptr;
  }
  Database& operator=(Database&& o) noexcept;
  ~Database();

  // Runs one or more parameterless statements.
  absl::Status Exec(absl::string_view sql);
  absl::StatusOr<Statement> Prepare(absl::string_view sql);
  // A statement prepared once per connection and kept until the connection closes, returned
  // reset and with its bindings cleared. For hot, fixed SQL. The pointer stays valid while the
  // connection lives, but the next Cached() call with the same text resets the statement: finish
  // one use before starting the next.
  absl::StatusOr<Statement*> Cached(absl::string_view sql);
  int64_t LastInsertRowId() const;
  // A memo of facts read through this connection that only its own writes change (a job's seq):
  // cleared whenever a Transaction rolls back, and when it holds 4096 entries.
  const int64_t* MemoFind(absl::string_view key) const;
  void MemoPut(std::string key, int64_t value);
  void MemoClear() { memo_.clear(); }
  absl::Status Error(absl::string_view what) const;  // current error as a Status

  sqlite3* raw() const { return db_; }

 private:
  explicit Database(sqlite3* db) : db_(db) {}
  void Close();
  sqlite3* db_ = nullptr;
  std::unique_ptr<std::map<std::string, Statement, std::less<>>> cache_;  // finalized before close
  std::map<std::string, int64_t, std::less<>> memo_;
};

// A prepared statement. Bind indexes are 1-based; column indexes 0-based.
class Statement {
 public:
  Statement(Statement&& o) noexcept : db_(o.db_), stmt_(o.stmt_) { o.stmt_ = nullptr; }
  ~Statement();

  Statement& Bind(int i, int64_t v);
  Statement& Bind(int i, double v);
  Statement& Bind(int i, absl::string_view v);
  // Binds without copying: `v` must stay valid until the statement is stepped to completion and
  // reset or rebound (for the write builders, whose captured values outlive their one Run()).
  Statement& BindStatic(int i, absl::string_view v);
  Statement& BindNull(int i);
  Statement& BindBlob(int i, absl::string_view v);  // read back with ColumnText or ColumnBlob
  Statement& BindBlobStatic(int i, absl::string_view v);  // without copying, as BindStatic
  Statement& Bind(int i, const std::optional<double>& v) {
    return v ? Bind(i, *v) : BindNull(i);
  }

  // Steps once: true when a row is available, false when done.
  absl::StatusOr<bool> Step();
  // Steps to completion (for statements that return no rows).
  absl::Status Run();
  void Reset();

  int64_t ColumnInt(int i) const;
  double ColumnDouble(int i) const;
  std::string ColumnText(int i) const;
  // The bytes of a blob (or text) column, valid until the next Step, Reset or destruction.
  absl::string_view ColumnBlob(int i) const;
  bool ColumnIsNull(int i) const;
  std::optional<double> ColumnOptDouble(int i) const {
    return ColumnIsNull(i) ? std::nullopt : std::optional<double>(ColumnDouble(i));
  }

 private:
  friend class Database;
  Statement(sqlite3* db, sqlite3_stmt* s) : db_(db), stmt_(s) {}
  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

// BEGIN IMMEDIATE ... COMMIT; rolls back unless Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(Database* db) : db_(db) {}
  ~Transaction();
  absl::Status Begin();
  absl::Status Commit();

 private:
  Database* db_;
  bool open_ = false;
};

// Maps an SQLite result code to a status code (BUSY -> UNAVAILABLE, FULL -> RESOURCE_EXHAUSTED,
// CORRUPT -> DATA_LOSS, CONSTRAINT -> ALREADY_EXISTS, READONLY/CANTOPEN -> FAILED_PRECONDITION).
absl::StatusCode SqliteCodeToStatus(int rc);

}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_SQLITE_H_
