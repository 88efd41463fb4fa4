// Moving a team's embedded store (a data directory's parity.db and spool/) to the shared
// backends of a scale-out deployment (docs/scale-out.md): every table's rows into an empty
// PostgreSQL database, and optionally every referenced blob into an S3 bucket, then a
// verification that both stores give the same answers.
#ifndef PARITY_SERVER_STORAGE_MIGRATE_STORE_H_
#define PARITY_SERVER_STORAGE_MIGRATE_STORE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace parity {

struct MigrateStoreOptions {
  std::string from_dir;   // a data directory no daemon holds (parity.db and spool/)
  std::string to_store;   // a PostgreSQL URI (IsPostgresStore) whose database holds no Parity data
  std::string to_blobs;   // an S3 URL (ParseS3Url), or "": the blobs stay in from_dir/spool/
  // Called as each table or the blobs are copied, and as the verification goes: what, how many
  // done of how many (total 0: unknown).
  std::function<void(const std::string& what, uint64_t done, uint64_t total)> progress;
};

struct MigrateStoreReport {
  struct Table {
    std::string name;
    uint64_t rows = 0;
  };
  std::vector<Table> tables;
  uint64_t blobs = 0, blob_bytes = 0;
  // The verification: tables whose rows were compared (as a multiset of exact values), and
  // store queries whose answers were compared (runs, items, jobs, results, tokens).
  uint64_t tables_checked = 0, queries_checked = 0;
};

// Locks from_dir (FAILED_PRECONDITION while a daemon holds it), migrates its parity.db to the
// current schema if it is older, creates the schema in the PostgreSQL database, copies every
// table in one PostgreSQL transaction (nothing is left on failure), copies the referenced blobs
// when to_blobs is set, and verifies. FAILED_PRECONDITION when the destination already holds
// runs, jobs or tokens; DATA_LOSS naming the first difference the verification finds; the
// stores' and S3's own errors otherwise.
absl::StatusOr<MigrateStoreReport> MigrateStore(const MigrateStoreOptions& options);

class Store;
// The verification's second half: the runs, jobs and tokens listings, every run's items and
// three listings of every job's results (dump order, failures by Cosine, all by MaxAbsErr),
// compared field for field (doubles by their bits). DATA_LOSS naming the first question the
// stores answer differently; counts the questions in `*queries`.
absl::Status CompareStoreAnswers(Store& a, Store& b, uint64_t* queries,
                                 const std::function<void(const std::string&, uint64_t, uint64_t)>& progress);

}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_MIGRATE_STORE_H_
