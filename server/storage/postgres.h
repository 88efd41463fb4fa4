// The PostgreSQL driver of Database (server/storage/database.h), over libpq: the shared store
// of several daemons (docs/scale-out.md). Public headers do not include libpq-fe.h.
//
// - Parameters: the store's one-based `?` are rewritten as $1, $2, ... (outside quoted strings,
//   quoted identifiers and comments). Numbers and text travel as text; blobs as binary bytea.
// - Results are read row by row (libpq's single-row mode): a statement over a million rows holds
//   one. Columns come as text: ColumnInt/ColumnDouble parse them (booleans as 1/0, "Infinity"
//   and "NaN" as such), ColumnBlob gives a bytea column's bytes decoded.
// - A statement kept by Database::Cached is prepared on the server once per connection; others
//   are sent with their SQL each time they run.
// - Errors carry PostgreSQL's SQLSTATE as a status code (PostgresStateToStatus) and its message.
#ifndef PARITY_SERVER_STORAGE_POSTGRES_H_
#define PARITY_SERVER_STORAGE_POSTGRES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/storage/database.h"

namespace parity {

// Connects with a libpq connection URI or keyword string ("postgresql://user@host:5432/db").
// UNAVAILABLE when the server cannot be reached, FAILED_PRECONDITION when it refuses the login.
absl::StatusOr<Database> OpenPostgres(const std::string& uri);

// SQLSTATE -> status code: integrity violations (23...) ALREADY_EXISTS, as SQLite's constraint
// errors; serialization failures and deadlocks (40001, 40P01) ABORTED; insufficient resources
// (53...) RESOURCE_EXHAUSTED; connection errors and shutdowns (08..., 57P01-57P03) UNAVAILABLE;
// a cancelled statement (57014) CANCELLED; read-only transactions (25006) and authorization
// (28...) FAILED_PRECONDITION; data exceptions (22...) INVALID_ARGUMENT; corruption (XX001,
// XX002) DATA_LOSS; anything else INTERNAL.
absl::StatusCode PostgresStateToStatus(absl::string_view sqlstate);

// `sql` with its `?` parameters numbered as PostgreSQL's $n (SQLite's `?NNN` as $NNN); *count is
// the highest number.
std::string NumberParameters(absl::string_view sql, int* count);

}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_POSTGRES_H_
