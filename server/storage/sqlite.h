// The SQLite driver of Database (server/storage/database.h): the embedded store's file. Public
// headers do not include sqlite3.h.
#ifndef PARITY_SERVER_STORAGE_SQLITE_H_
#define PARITY_SERVER_STORAGE_SQLITE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/storage/database.h"

namespace parity {

// Opens (creating if needed) with WAL, synchronous=FULL, foreign keys and a busy timeout.
absl::StatusOr<Database> OpenSqlite(const std::string& path, bool read_only = false);

// Maps an SQLite result code to a status code (BUSY -> UNAVAILABLE, FULL -> RESOURCE_EXHAUSTED,
// CORRUPT -> DATA_LOSS, CONSTRAINT -> ALREADY_EXISTS, READONLY/CANTOPEN -> FAILED_PRECONDITION).
absl::StatusCode SqliteCodeToStatus(int rc);

}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_SQLITE_H_
