// A database connection and its prepared statements, over either driver: SQLite (the embedded
// default, server/storage/sqlite.h) or PostgreSQL (server/storage/postgres.h). The store's SQL is
// written once against these, with one-based `?` parameters; where the two dialects differ the
// caller asks dialect(). Errors are absl::Status values with the driver's message.
#ifndef PARITY_SERVER_STORAGE_DATABASE_H_
#define PARITY_SERVER_STORAGE_DATABASE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace parity {

enum class SqlDialect { kSqlite, kPostgres };

// What a driver implements for one prepared statement. Bind indexes are 1-based, column indexes
// 0-based. `copy` false: the bytes stay valid until the statement has been stepped to
// completion and reset or rebound.
class StatementDriver {
 public:
  virtual ~StatementDriver() = default;
  virtual void BindInt(int i, int64_t v) = 0;
  virtual void BindDouble(int i, double v) = 0;
  virtual void BindText(int i, absl::string_view v, bool copy) = 0;
  virtual void BindBlob(int i, absl::string_view v, bool copy) = 0;
  virtual void BindNull(int i) = 0;
  // True when a row is available, false when done.
  virtual absl::StatusOr<bool> Step() = 0;
  // Ends the current execution (the rows not read are dropped) and clears the bindings.
  virtual void Reset() = 0;
  virtual int64_t ColumnInt(int i) const = 0;
  virtual double ColumnDouble(int i) const = 0;
  // A text or blob column's bytes, valid until the next Step, Reset or destruction.
  virtual absl::string_view ColumnBlob(int i) const = 0;
  virtual bool ColumnIsNull(int i) const = 0;
};

// What a driver implements for one connection. Not thread-safe.
class DatabaseDriver {
 public:
  virtual ~DatabaseDriver() = default;
  virtual SqlDialect dialect() const = 0;
  // One or more parameterless statements.
  virtual absl::Status Exec(absl::string_view sql) = 0;
  // `keep`: the statement lives as long as the connection (Database::Cached), so a driver may
  // prepare it on the server once.
  virtual absl::StatusOr<std::unique_ptr<StatementDriver>> Prepare(absl::string_view sql, bool keep) = 0;
  // The statement that opens a write transaction ("BEGIN IMMEDIATE" in SQLite).
  virtual absl::string_view BeginSql() const = 0;
};

// A prepared statement. Move-only.
class Statement {
 public:
  explicit Statement(std::unique_ptr<StatementDriver> d) : d_(std::move(d)) {}

  Statement& Bind(int i, int64_t v) {
    d_->BindInt(i, v);
    return *this;
  }
  Statement& Bind(int i, double v) {
    d_->BindDouble(i, v);
    return *this;
  }
  Statement& Bind(int i, absl::string_view v) {
    d_->BindText(i, v, true);
    return *this;
  }
  // Binds without copying: `v` must stay valid until the statement is stepped to completion and
  // reset or rebound (for the write builders, whose captured values outlive their one Run()).
  Statement& BindStatic(int i, absl::string_view v) {
    d_->BindText(i, v, false);
    return *this;
  }
  Statement& BindNull(int i) {
    d_->BindNull(i);
    return *this;
  }
  // Read back with ColumnText or ColumnBlob.
  Statement& BindBlob(int i, absl::string_view v) {
    d_->BindBlob(i, v, true);
    return *this;
  }
  // Without copying, as BindStatic.
  Statement& BindBlobStatic(int i, absl::string_view v) {
    d_->BindBlob(i, v, false);
    return *this;
  }
  Statement& Bind(int i, const std::optional<double>& v) { return v ? Bind(i, *v) : BindNull(i); }

  // Steps once: true when a row is available, false when done.
  absl::StatusOr<bool> Step() { return d_->Step(); }
  // Steps to completion (for statements that return no rows).
  absl::Status Run();
  void Reset() { d_->Reset(); }

  int64_t ColumnInt(int i) const { return d_->ColumnInt(i); }
  double ColumnDouble(int i) const { return d_->ColumnDouble(i); }
  std::string ColumnText(int i) const { return std::string(d_->ColumnBlob(i)); }
  // The bytes of a blob (or text) column, valid until the next Step, Reset or destruction.
  absl::string_view ColumnBlob(int i) const { return d_->ColumnBlob(i); }
  bool ColumnIsNull(int i) const { return d_->ColumnIsNull(i); }
  std::optional<double> ColumnOptDouble(int i) const {
    return ColumnIsNull(i) ? std::nullopt : std::optional<double>(ColumnDouble(i));
  }

 private:
  std::unique_ptr<StatementDriver> d_;
};

// One connection. Move-only. Not thread-safe: use one per thread.
class Database {
 public:
  explicit Database(std::unique_ptr<DatabaseDriver> d) : d_(std::move(d)) {}
  Database(Database&&) noexcept = default;
  Database& operator=(Database&& o) noexcept;
  ~Database();

  SqlDialect dialect() const { return d_->dialect(); }
  // Runs one or more parameterless statements.
  absl::Status Exec(absl::string_view sql) { return d_->Exec(sql); }
  absl::StatusOr<Statement> Prepare(absl::string_view sql);
  // A statement prepared once per connection and kept until the connection closes, returned
  // reset and with its bindings cleared. For hot, fixed SQL. The pointer stays valid while the
  // connection lives, but the next Cached() call with the same text resets the statement: finish
  // one use before starting the next.
  absl::StatusOr<Statement*> Cached(absl::string_view sql);
  // A memo of facts read through this connection that only its own writes change (a job's seq):
  // cleared whenever a Transaction rolls back, and when it holds 4096 entries.
  const int64_t* MemoFind(absl::string_view key) const;
  void MemoPut(std::string key, int64_t value);
  void MemoClear() { memo_.clear(); }
  absl::string_view BeginSql() const { return d_->BeginSql(); }

 private:
  void Close();
  // Finalized before the connection closes (declared after it: destroyed first).
  std::unique_ptr<DatabaseDriver> d_;
  std::unique_ptr<std::map<std::string, Statement, std::less<>>> cache_;
  std::map<std::string, int64_t, std::less<>> memo_;
};

// Opens a write transaction (the driver's BeginSql) ... COMMIT; rolls back unless Commit()
// succeeded.
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

}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_DATABASE_H_
