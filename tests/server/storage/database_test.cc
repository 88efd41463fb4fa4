// Database and Statement over both drivers, each on a real engine: an SQLite file, and a
// PostgreSQL server started for the tests (tests/postgres.sh, never a mock). The store's SQL is
// written once against this interface, so both must give the same answers.
#include "server/storage/database.h"

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/storage/postgres.h"
#include "server/storage/sqlite.h"
#include "tests/test_postgres.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

}  // namespace

void PrintTo(SqlDialect d, std::ostream* os) { *os << (d == SqlDialect::kSqlite ? "sqlite" : "postgres"); }

namespace {

class DatabaseTest : public ::testing::TestWithParam<SqlDialect> {
 protected:
  void SetUp() override {
    if (GetParam() == SqlDialect::kSqlite) {
      dir_ = fs::temp_directory_path() / absl::StrCat("parity_db_", ::getpid(), "_",
                                                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
      fs::remove_all(dir_);
      fs::create_directories(dir_);
      uri_ = (dir_ / "t.db").string();
    } else {
      absl::StatusOr<std::string> uri = testing::NewPostgresDatabase();
      ASSERT_TRUE(uri.ok()) << uri.status();
      uri_ = *uri;
    }
    db_ = Connect();
  }
  void TearDown() override {
    db_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  std::unique_ptr<Database> Connect() {
    absl::StatusOr<Database> db = GetParam() == SqlDialect::kSqlite ? OpenSqlite(uri_) : OpenPostgres(uri_);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? std::make_unique<Database>(*std::move(db)) : nullptr;
  }
  // A blob column's type.
  const char* Blob() const { return GetParam() == SqlDialect::kSqlite ? "BLOB" : "BYTEA"; }
  int64_t Count(const std::string& table) {
    absl::StatusOr<Statement> st = db_->Prepare(absl::StrCat("SELECT count(*) FROM ", table));
    EXPECT_TRUE(st.ok()) << st.status();
    absl::StatusOr<bool> row = st->Step();
    EXPECT_TRUE(row.ok() && *row);
    return st->ColumnInt(0);
  }

  fs::path dir_;
  std::string uri_;
  std::unique_ptr<Database> db_;
};

TEST_P(DatabaseTest, EveryTypeRoundTripsExactly) {
  ASSERT_TRUE(db_->Exec(absl::StrCat("CREATE TABLE t(k BIGINT PRIMARY KEY, i BIGINT, d DOUBLE PRECISION, s TEXT, b ",
                                     Blob(), ")"))
                  .ok());
  std::string all_bytes;
  for (int c = 0; c < 256; ++c) all_bytes.push_back(static_cast<char>(c));
  struct Row {
    int64_t i;
    double d;
    std::string s, b;
  };
  const std::vector<Row> rows = {
      {std::numeric_limits<int64_t>::min(), 0.1, "it's a '?' -- not a parameter", all_bytes},
      {std::numeric_limits<int64_t>::max(), 1e300, "ünïcødé \"quoted\" /* no comment */", std::string("\0\0x", 3)},
      {0, -2.5e-310, "", ""},
      {-1, std::numeric_limits<double>::infinity(), "?", "\\x41"},
      {42, -std::numeric_limits<double>::infinity(), "$1", std::string(70000, '\xff')},
  };
  {
    Transaction tx(db_.get());
    ASSERT_TRUE(tx.Begin().ok());
    absl::StatusOr<Statement*> ins = db_->Cached("INSERT INTO t(k, i, d, s, b) VALUES(?, ?, ?, ?, ?)");
    ASSERT_TRUE(ins.ok()) << ins.status();
    for (size_t k = 0; k < rows.size(); ++k) {
      (*ins)->Reset();
      (*ins)->Bind(1, static_cast<int64_t>(k)).Bind(2, rows[k].i).Bind(3, rows[k].d);
      (*ins)->BindStatic(4, rows[k].s).BindBlobStatic(5, rows[k].b);
      ASSERT_TRUE((*ins)->Run().ok());
    }
    absl::StatusOr<Statement> nulls = db_->Prepare("INSERT INTO t(k, i, d, s, b) VALUES(?, ?, ?, ?, ?)");
    ASSERT_TRUE(nulls.ok());
    nulls->Bind(1, int64_t{99}).BindNull(2).Bind(3, std::optional<double>()).BindNull(4).BindNull(5);
    ASSERT_TRUE(nulls->Run().ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  absl::StatusOr<Statement> st = db_->Prepare("SELECT k, i, d, s, b FROM t WHERE k >= ? ORDER BY k");
  ASSERT_TRUE(st.ok()) << st.status();
  st->Bind(1, int64_t{0});
  for (size_t k = 0; k < rows.size(); ++k) {
    absl::StatusOr<bool> row = st->Step();
    ASSERT_TRUE(row.ok() && *row) << row.status();
    EXPECT_EQ(st->ColumnInt(0), static_cast<int64_t>(k));
    EXPECT_EQ(st->ColumnInt(1), rows[k].i);
    const double d = st->ColumnDouble(2);
    EXPECT_TRUE(d == rows[k].d && std::signbit(d) == std::signbit(rows[k].d)) << k << ": " << d;
    EXPECT_EQ(st->ColumnText(3), rows[k].s);
    EXPECT_EQ(std::string(st->ColumnBlob(4)), rows[k].b) << k;
    EXPECT_FALSE(st->ColumnIsNull(1));
  }
  absl::StatusOr<bool> row = st->Step();
  ASSERT_TRUE(row.ok() && *row);
  for (int c = 1; c <= 4; ++c) EXPECT_TRUE(st->ColumnIsNull(c)) << c;
  EXPECT_FALSE(st->ColumnOptDouble(2).has_value());
  row = st->Step();
  ASSERT_TRUE(row.ok());
  EXPECT_FALSE(*row);
  // NaN reads back as NaN.
  absl::StatusOr<Statement> nan = db_->Prepare("INSERT INTO t(k, d) VALUES(100, ?)");
  ASSERT_TRUE(nan.ok());
  nan->Bind(1, std::numeric_limits<double>::quiet_NaN());
  ASSERT_TRUE(nan->Run().ok());
  absl::StatusOr<Statement> back = db_->Prepare("SELECT d FROM t WHERE k = 100");
  ASSERT_TRUE(back.ok() && *back->Step());
  // SQLite stores a NaN as NULL; PostgreSQL keeps it.
  if (GetParam() == SqlDialect::kPostgres) {
    EXPECT_TRUE(std::isnan(back->ColumnDouble(0)));
  }
}

// Rows are read one at a time, and another statement may run on the same connection between two
// of them (the PostgreSQL driver then reads the rest of the first one's rows ahead).
TEST_P(DatabaseTest, LargeResultsAreReadRowByRowAndStatementsInterleave) {
  ASSERT_TRUE(db_->Exec("CREATE TABLE a(k BIGINT PRIMARY KEY, v BIGINT); CREATE TABLE b(k BIGINT)").ok());
  constexpr int64_t kRows = 20000;
  {
    Transaction tx(db_.get());
    ASSERT_TRUE(tx.Begin().ok());
    for (int64_t k = 0; k < kRows; ++k) {
      absl::StatusOr<Statement*> ins = db_->Cached("INSERT INTO a(k, v) VALUES(?, ?)");
      ASSERT_TRUE(ins.ok());
      (*ins)->Bind(1, k).Bind(2, 3 * k);
      ASSERT_TRUE((*ins)->Run().ok());
    }
    ASSERT_TRUE(tx.Commit().ok());
  }
  absl::StatusOr<Statement> scan = db_->Prepare("SELECT k, v FROM a ORDER BY k");
  ASSERT_TRUE(scan.ok());
  int64_t n = 0, sum = 0;
  while (true) {
    absl::StatusOr<bool> row = scan->Step();
    ASSERT_TRUE(row.ok()) << row.status();
    if (!*row) break;
    EXPECT_EQ(scan->ColumnInt(0), n);
    sum += scan->ColumnInt(1);
    if (n % 4000 == 5) {
      absl::StatusOr<Statement*> other = db_->Cached("INSERT INTO b(k) VALUES(?)");
      ASSERT_TRUE(other.ok());
      (*other)->Bind(1, n);
      ASSERT_TRUE((*other)->Run().ok());
      ASSERT_TRUE(db_->Exec("UPDATE b SET k = k").ok());
    }
    ++n;
  }
  EXPECT_EQ(n, kRows);
  EXPECT_EQ(sum, 3 * kRows * (kRows - 1) / 2);
  EXPECT_EQ(Count("b"), 5);
  // Reset drops the rows not read: the next Step starts over.
  ASSERT_TRUE(*scan->Step());
  ASSERT_TRUE(*scan->Step());
  EXPECT_EQ(scan->ColumnInt(0), 1);
  scan->Reset();
  ASSERT_TRUE(*scan->Step());
  EXPECT_EQ(scan->ColumnInt(0), 0);
}

TEST_P(DatabaseTest, AnUncommittedTransactionRollsBack) {
  ASSERT_TRUE(db_->Exec("CREATE TABLE t(k BIGINT PRIMARY KEY)").ok());
  {
    Transaction tx(db_.get());
    ASSERT_TRUE(tx.Begin().ok());
    ASSERT_TRUE(db_->Exec("INSERT INTO t VALUES(1)").ok());
  }
  EXPECT_EQ(Count("t"), 0);
  {
    Transaction tx(db_.get());
    ASSERT_TRUE(tx.Begin().ok());
    ASSERT_TRUE(db_->Exec("INSERT INTO t VALUES(2)").ok());
    // A failed write inside a savepoint leaves the rest of the transaction usable.
    ASSERT_TRUE(db_->Exec("SAVEPOINT w").ok());
    EXPECT_FALSE(db_->Exec("INSERT INTO t VALUES(2)").ok());
    ASSERT_TRUE(db_->Exec("ROLLBACK TO SAVEPOINT w").ok());
    ASSERT_TRUE(db_->Exec("RELEASE SAVEPOINT w").ok());
    ASSERT_TRUE(db_->Exec("INSERT INTO t VALUES(3)").ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  EXPECT_EQ(Count("t"), 2);
  // Committed on one connection, seen by another.
  std::unique_ptr<Database> other = Connect();
  ASSERT_NE(other, nullptr);
  absl::StatusOr<Statement> st = other->Prepare("SELECT sum(k) FROM t");
  ASSERT_TRUE(st.ok() && *st->Step());
  EXPECT_EQ(st->ColumnInt(0), 5);
}

TEST_P(DatabaseTest, ErrorsCarryTheirStatusCode) {
  ASSERT_TRUE(db_->Exec("CREATE TABLE t(k BIGINT PRIMARY KEY)").ok());
  ASSERT_TRUE(db_->Exec("INSERT INTO t VALUES(1)").ok());
  absl::StatusOr<Statement> dup = db_->Prepare("INSERT INTO t VALUES(?)");
  ASSERT_TRUE(dup.ok());
  dup->Bind(1, int64_t{1});
  const absl::Status s = dup->Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_EQ(db_->Exec("SELEKT 1").code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(db_->Prepare("SELECT nope FROM t").ok() && db_->Prepare("SELECT nope FROM t")->Step().ok());
  // The connection goes on after an error.
  EXPECT_EQ(Count("t"), 1);
}

INSTANTIATE_TEST_SUITE_P(Drivers, DatabaseTest, ::testing::Values(SqlDialect::kSqlite, SqlDialect::kPostgres),
                         [](const ::testing::TestParamInfo<SqlDialect>& p) {
                           return p.param == SqlDialect::kSqlite ? "Sqlite" : "Postgres";
                         });

TEST(Postgres, ParametersAreNumberedOutsideQuotesAndComments) {
  int n = 0;
  EXPECT_EQ(NumberParameters("SELECT ?, '?', \"a?\", ? -- ?\n, ? /* ? */", &n),
            "SELECT $1, '?', \"a?\", $2 -- ?\n, $3 /* ? */");
  EXPECT_EQ(n, 3);
  EXPECT_EQ(NumberParameters("SELECT 'it''s ?', ?", &n), "SELECT 'it''s ?', $1");
  EXPECT_EQ(n, 1);
  EXPECT_EQ(NumberParameters("SELECT '?", &n), "SELECT '?");  // unterminated: copied as it is
  EXPECT_EQ(n, 0);
  EXPECT_EQ(NumberParameters("SELECT ?1 UNION SELECT x WHERE y=?1 AND z=?2", &n),
            "SELECT $1 UNION SELECT x WHERE y=$1 AND z=$2");
  EXPECT_EQ(n, 2);
}

TEST(Postgres, StatesMapToStatusCodes) {
  EXPECT_EQ(PostgresStateToStatus("23505"), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(PostgresStateToStatus("40P01"), absl::StatusCode::kAborted);
  EXPECT_EQ(PostgresStateToStatus("53100"), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(PostgresStateToStatus("08006"), absl::StatusCode::kUnavailable);
  EXPECT_EQ(PostgresStateToStatus("57P01"), absl::StatusCode::kUnavailable);
  EXPECT_EQ(PostgresStateToStatus("57014"), absl::StatusCode::kCancelled);
  EXPECT_EQ(PostgresStateToStatus("25006"), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PostgresStateToStatus("22003"), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PostgresStateToStatus("XX001"), absl::StatusCode::kDataLoss);
  EXPECT_EQ(PostgresStateToStatus("42601"), absl::StatusCode::kInternal);
}

TEST(Postgres, AServerThatCannotBeReachedOrRefusesIsSaidSo) {
  // A loopback port nothing listens on (bound and closed by this process just now would race;
  // port 1 needs root to listen on and is not a PostgreSQL server).
  absl::StatusOr<Database> none = OpenPostgres("postgresql://parity@127.0.0.1:1/postgres?connect_timeout=5");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable) << none.status();
  const std::string& server = testing::PostgresServerUri();
  ASSERT_FALSE(server.empty());
  absl::StatusOr<Database> nodb = OpenPostgres(server.substr(0, server.rfind('/')) + "/no_such_database");
  EXPECT_EQ(nodb.status().code(), absl::StatusCode::kFailedPrecondition) << nodb.status();
}

}  // namespace
}  // namespace parity
