// What several daemons sharing a store coordinate through it: job leases (Store::TakeJobLease
// and the rest) and the tombstones of a shared bucket's collector (Store::MarkTombstones...).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "server/storage/store.h"
#include "server/storage/store_rows.h"

namespace parity {
namespace {

using store_internal::FirstColumnOfEachRow;
using store_internal::IndexedBy;
using store_internal::ReadJob;
using store_internal::kJobColumns;

// The database server's clock in milliseconds since the epoch.
constexpr char kNowMs[] = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)";

absl::Status NeedsPostgres(const Database& db) {
  if (db.dialect() == SqlDialect::kPostgres) return absl::OkStatus();
  return absl::FailedPreconditionError("job leases need a PostgreSQL store (one daemon holds an SQLite store)");
}

}  // namespace

absl::StatusOr<bool> Store::TakeJobLease(const std::string& job_id, const std::string& holder, int64_t ttl_ms) {
  auto taken = std::make_shared<bool>(false);
  PARITY_RETURN_IF_ERROR(WriteSync([job_id, holder, ttl_ms, taken](Database& db) -> absl::Status {
    PARITY_RETURN_IF_ERROR(NeedsPostgres(db));
    PARITY_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare(absl::StrCat("INSERT INTO job_leases(job_id, holder, expires_at_ms) VALUES(?, ?, ", kNowMs,
                                " + ?) ON CONFLICT(job_id) DO UPDATE SET holder=excluded.holder, "
                                "expires_at_ms=excluded.expires_at_ms WHERE job_leases.holder=excluded.holder OR "
                                "job_leases.expires_at_ms < ", kNowMs, " RETURNING job_id")));
    st.Bind(1, job_id).Bind(2, holder).Bind(3, ttl_ms);
    PARITY_ASSIGN_OR_RETURN(*taken, st.Step());
    while (true) {  // read to the end, so that the statement completes
      PARITY_ASSIGN_OR_RETURN(bool more, st.Step());
      if (!more) break;
    }
    return absl::OkStatus();
  }));
  return *taken;
}

absl::StatusOr<std::vector<std::string>> Store::RenewJobLeases(const std::string& holder, int64_t ttl_ms) {
  auto held = std::make_shared<std::vector<std::string>>();
  PARITY_RETURN_IF_ERROR(WriteSync([holder, ttl_ms, held](Database& db) -> absl::Status {
    PARITY_RETURN_IF_ERROR(NeedsPostgres(db));
    PARITY_ASSIGN_OR_RETURN(
        Statement st, db.Prepare(absl::StrCat("UPDATE job_leases SET expires_at_ms=", kNowMs,
                                              " + ? WHERE holder=? RETURNING job_id")));
    st.Bind(1, ttl_ms).Bind(2, holder);
    PARITY_ASSIGN_OR_RETURN(*held, FirstColumnOfEachRow(st));
    return absl::OkStatus();
  }));
  return std::move(*held);
}

absl::Status Store::ReleaseJobLease(const std::string& job_id, const std::string& holder) {
  return WriteSync([job_id, holder](Database& db) -> absl::Status {
    PARITY_RETURN_IF_ERROR(NeedsPostgres(db));
    PARITY_ASSIGN_OR_RETURN(Statement st, db.Prepare("DELETE FROM job_leases WHERE job_id=? AND holder=?"));
    st.Bind(1, job_id).Bind(2, holder);
    return st.Run();
  });
}

absl::StatusOr<std::vector<JobRecord>> Store::OrphanedJobs() {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_RETURN_IF_ERROR(NeedsPostgres(r.db()));
  // kJobColumns name the jobs table's columns unqualified: job_leases is read in a subquery.
  PARITY_ASSIGN_OR_RETURN(
      Statement st,
      r.db().Prepare(absl::StrCat(
          "SELECT ", kJobColumns, " FROM jobs WHERE state IN (", static_cast<int>(JobState::kQueued), ", ",
          static_cast<int>(JobState::kRunning), ") AND NOT EXISTS (SELECT 1 FROM job_leases WHERE "
          "job_leases.job_id=jobs.job_id AND job_leases.expires_at_ms >= ", kNowMs, ") ORDER BY created_at_ms")));
  std::vector<JobRecord> out;
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(ReadJob(st));
  }
  return out;
}

namespace store_internal {

absl::Status CheckNotTombstoned(Database& db, const std::string& blob) {
  PARITY_ASSIGN_OR_RETURN(Statement * st, db.Cached("SELECT 1 FROM blob_tombstones WHERE blob=?"));
  st->Bind(1, blob);
  PARITY_ASSIGN_OR_RETURN(const bool marked, st->Step());
  st->Reset();
  if (!marked) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("blob ", blob, " is being collected from the shared store; send the data"));
}

}  // namespace store_internal

absl::StatusOr<uint64_t> Store::MarkTombstones(const std::vector<std::string>& blobs, int64_t now_ms) {
  auto marked = std::make_shared<uint64_t>(0);
  PARITY_RETURN_IF_ERROR(WriteSync([blobs, now_ms, marked](Database& db) -> absl::Status {
    *marked = 0;
    PARITY_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare(absl::StrCat("INSERT INTO blob_tombstones(blob, marked_at_ms) SELECT ?1, ?2 WHERE NOT EXISTS "
                                "(SELECT 1 FROM items", IndexedBy(db.dialect(), "items_by_blob_prefix"),
                                " WHERE substr(items.blob, 1, 16)=substr(?1, 1, 16) AND items.blob=?1 AND "
                                "items.blob != '' AND items.data IS NULL) ON CONFLICT(blob) DO NOTHING RETURNING blob")));
    for (const std::string& b : blobs) {
      st.Reset();
      st.Bind(1, b).Bind(2, now_ms);
      PARITY_ASSIGN_OR_RETURN(const bool row, st.Step());
      if (row) ++*marked;
      while (true) {
        PARITY_ASSIGN_OR_RETURN(const bool more, st.Step());
        if (!more) break;
      }
    }
    return absl::OkStatus();
  }));
  return *marked;
}

absl::StatusOr<std::vector<std::string>> Store::TombstonesBefore(int64_t before_ms) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare("SELECT blob FROM blob_tombstones WHERE marked_at_ms < ? "
                                                       "ORDER BY marked_at_ms, blob"));
  st.Bind(1, before_ms);
  return FirstColumnOfEachRow(st);
}

absl::StatusOr<bool> Store::IsTombstoned(const std::string& blob) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  const absl::Status s = store_internal::CheckNotTombstoned(r.db(), blob);
  if (s.ok() || absl::IsFailedPrecondition(s)) return !s.ok();
  return s;
}

absl::StatusOr<bool> Store::IsReferenced(const std::string& blob) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(
      Statement st,
      r.db().Prepare(absl::StrCat("SELECT 1 FROM items", IndexedBy(r.db().dialect(), "items_by_blob_prefix"),
                                  " WHERE substr(items.blob, 1, 16)=substr(?1, 1, 16) AND items.blob=?1 AND "
                                  "items.blob != '' AND items.data IS NULL LIMIT 1")));
  st.Bind(1, blob);
  return st.Step();
}

absl::Status Store::DropTombstone(const std::string& blob) {
  return WriteSync([blob](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(Statement st, db.Prepare("DELETE FROM blob_tombstones WHERE blob=?"));
    st.Bind(1, blob);
    return st.Run();
  });
}

}  // namespace parity
