// parity admin migrate-store: a team's embedded store (a data directory) moved to the shared
// backends of a scale-out deployment (server/storage/migrate_store.h does the work).
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli.h"
#include "client/terminal.h"
#include "common/base/args.h"
#include "common/base/json.h"
#include "server/storage/migrate_store.h"

namespace parity {
namespace {

constexpr char kMigrateHelp[] =
    "usage: parity admin migrate-store --from sqlite:DIR --to postgresql://USER@HOST:PORT/DB\n"
    "                                  [--blobs s3://BUCKET[/PREFIX]?endpoint=URL] [--json]\n"
    "\n"
    "Moves a parityd data directory's store to PostgreSQL, for several daemons on one store\n"
    "(docs/scale-out.md). Stop the daemon first: the directory must not be in use. Every table is\n"
    "copied in one transaction into a database that holds no runs, jobs or tokens yet (the\n"
    "tables are created there); with --blobs, every tensor blob the items reference is put in\n"
    "that bucket first (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), else the\n"
    "blobs stay in DIR/spool/ for a daemon started with --data-dir DIR. Then both stores are\n"
    "compared: every table's rows, and the answers to the runs, items, jobs, results and tokens\n"
    "queries. The source is left as it was (its schema upgraded if it was older).\n"
    "\n"
    "options:\n"
    "  --from sqlite:DIR   the data directory (DIR/parity.db, DIR/spool/)\n"
    "  --to URI            the PostgreSQL database (a password goes in ~/.pgpass, not the URI)\n"
    "  --blobs URL         also copy the blobs to this S3-compatible bucket\n"
    "  --json              the report as JSON\n"
    "  -h, --help          this help\n"
    "\n"
    "exit codes: 0 migrated and verified, 2 refused or failed (the message says why; on a\n"
    "failure before the verification nothing was written to the database)\n";

constexpr char kAdminHelp[] =
    "usage: parity admin migrate-store ...   (parity admin migrate-store --help)\n";

Json ReportJson(const MigrateStoreReport& r) {
  Json o = Json::MakeObject();
  Json tables = Json::MakeObject();
  for (const MigrateStoreReport::Table& t : r.tables) tables.Set(t.name, Json::Integer(static_cast<int64_t>(t.rows)));
  o.Set("tables", std::move(tables));
  o.Set("blobs", Json::Integer(static_cast<int64_t>(r.blobs)));
  o.Set("blob_bytes", Json::Integer(static_cast<int64_t>(r.blob_bytes)));
  o.Set("tables_checked", Json::Integer(static_cast<int64_t>(r.tables_checked)));
  o.Set("queries_checked", Json::Integer(static_cast<int64_t>(r.queries_checked)));
  return o;
}

int MigrateStoreCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  MigrateStoreOptions o;
  std::string from;
  bool json = false;
  Args a;
  a.Value("--from", &from);
  a.Value("--to", &o.to_store);
  a.Value("--blobs", &o.to_blobs);
  a.Bool("--json", &json);
  std::vector<std::string> pos;
  bool help = false;
  std::string error;
  if (!a.Parse(args, &pos, &help, &error)) {
    err << "parity admin migrate-store: " << error << "\n\n" << kMigrateHelp;
    return kExitUsage;
  }
  if (help) {
    out << kMigrateHelp;
    return kExitOk;
  }
  if (!pos.empty() || !absl::StartsWith(from, "sqlite:") || from.size() == 7 || o.to_store.empty()) {
    err << "parity admin migrate-store: --from sqlite:DIR and --to postgresql://... are required\n\n" << kMigrateHelp;
    return kExitUsage;
  }
  o.from_dir = from.substr(7);
  ProgressBar bar("migrating", !json);
  o.progress = [&bar](const std::string& what, uint64_t done, uint64_t total) { bar.Update(done, total, what); };
  absl::StatusOr<MigrateStoreReport> r = MigrateStore(o);
  bar.Finish();
  if (!r.ok()) return ErrorExitCode("parity admin migrate-store", r.status(), err);
  if (json) {
    out << ReportJson(*r).Dump() << "\n";
    return kExitOk;
  }
  for (const MigrateStoreReport::Table& t : r->tables) out << t.name << ": " << t.rows << " rows\n";
  if (!o.to_blobs.empty()) out << "blobs: " << r->blobs << " (" << r->blob_bytes << " bytes)\n";
  out << "verified: " << r->tables_checked << " tables row for row, " << r->queries_checked
      << " queries answered alike\n";
  return kExitOk;
}

}  // namespace

int RunAdminCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (!args.empty() && args[0] == "migrate-store") {
    return MigrateStoreCommand(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
  }
  const bool help = !args.empty() && (args[0] == "-h" || args[0] == "--help");
  (help ? out : err) << (args.empty() || help ? "" : "parity admin: unknown subcommand '" + args[0] + "'\n\n")
                     << kAdminHelp;
  return help ? kExitOk : kExitUsage;
}

}  // namespace parity
