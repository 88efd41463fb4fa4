// A PostgreSQL server for tests, never a mock: the one ctest's `postgres` fixture started
// (tests/postgres.sh; PARITY_TEST_POSTGRES_URI_FILE names the file holding its URI), or else one
// this process starts with tests/postgres.sh and stops when it exits.
#ifndef PARITY_TESTS_TEST_POSTGRES_H_
#define PARITY_TESTS_TEST_POSTGRES_H_

#include <unistd.h>

#include <atomic>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/storage/postgres.h"
#include "tests/test_script_server.h"

namespace parity::testing {

// The server's URI (its "postgres" database); "" when none could be started.
inline const std::string& PostgresServerUri() {
  static const ScriptServer server("postgres.sh", "PARITY_TEST_POSTGRES_URI_FILE");  // stopped at exit
  return server.address();
}

// A new, empty database on that server for one test: its URI.
inline absl::StatusOr<std::string> NewPostgresDatabase() {
  const std::string& server = PostgresServerUri();
  if (server.empty()) return absl::UnavailableError("no test PostgreSQL server (tests/postgres.sh start failed)");
  static std::atomic<int> next{0};
  const std::string name = absl::StrCat("t_", ::getpid(), "_", next++);
  absl::StatusOr<Database> db = OpenPostgres(server);
  if (!db.ok()) return db.status();
  if (absl::Status s = db->Exec(absl::StrCat("CREATE DATABASE ", name)); !s.ok()) return s;
  absl::string_view base = server;
  if (!absl::ConsumeSuffix(&base, "/postgres")) return absl::InternalError(absl::StrCat("unexpected URI ", server));
  return absl::StrCat(base, "/", name);
}

}  // namespace parity::testing

#endif  // PARITY_TESTS_TEST_POSTGRES_H_
