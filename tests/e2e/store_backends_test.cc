// parityd on each of its stores, with the real binaries: the embedded SQLite file, and a
// PostgreSQL database on the server ctest starts for the tests (tests/postgres.sh, never a mock).
// The bundled sample's job must give the same verdicts, culprit and exported table on both,
// after a restart too; a --store parityd cannot use is refused at start, saying why.
#include <signal.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/json.h"
#include "gtest/gtest.h"
#include "tests/test_postgres.h"
#include "tests/test_util.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using testing::Daemon;
using testing::kSample;

class StoreBackendsTest : public testing::ScratchTest {};

// The sample's golden and target uploaded to a parityd started with `extra`, its job exported as
// CSV after the daemon restarted ("" after a failed expectation).
std::string SampleJobCsv(const fs::path& dir, const std::vector<std::string>& extra) {
  Daemon d(dir, extra);
  d.Start();
  const std::string server = " --server " + d.Address() + " --project demo";
  testing::Output g = testing::RunAgent("upload " + kSample + "/golden" + server + " --role golden --label build=7");
  EXPECT_EQ(g.code, 0) << g.text << d.Log();
  testing::Output t = testing::RunAgent("upload " + kSample + "/target" + server + " --role target --against-label build=7");
  EXPECT_EQ(t.code, 1) << t.text << d.Log();
  EXPECT_NE(t.text.find("done: 12 pass, 0 warn, 5 fail"), std::string::npos) << t.text;
  EXPECT_NE(t.text.find("First culprit: Functional.linear.1.forward"), std::string::npos) << t.text;
  EXPECT_EQ(d.Kill(SIGTERM), 0) << d.Log();
  d.Start();
  testing::Output jobs = testing::Run("client/parity", "jobs" + server + " --json", "", /*stderr_too=*/false);
  absl::StatusOr<Json> list = ParseJson(jobs.text);
  if (!list.ok() || !list->is_array() || list->as_array().size() != 1) {
    ADD_FAILURE() << jobs.text;
    return "";
  }
  const Json* id = list->as_array()[0].Find("job_id");
  if (id == nullptr || !id->is_string()) {
    ADD_FAILURE() << jobs.text;
    return "";
  }
  testing::Output csv = testing::Run("client/parity", "export " + id->as_string() + " --format csv --server " + d.Address(),
                                     "", /*stderr_too=*/false);
  EXPECT_EQ(csv.code, 0) << d.Log();
  return csv.text;
}

TEST_F(StoreBackendsTest, TheSampleJobIsTheSameOnSqliteAndOnPostgres) {
  const std::string sqlite_csv = SampleJobCsv(dir_ / "sqlite", {});
  absl::StatusOr<std::string> uri = testing::NewPostgresDatabase();
  ASSERT_TRUE(uri.ok()) << uri.status();
  const std::string postgres_csv = SampleJobCsv(dir_ / "postgres", {"--store=" + *uri});
  ASSERT_NE(sqlite_csv.find("Functional.linear.1.forward.output.0"), std::string::npos) << sqlite_csv;
  EXPECT_EQ(postgres_csv, sqlite_csv);
  // The PostgreSQL daemon's data directory holds the spool, not a database file.
  EXPECT_TRUE(fs::exists(dir_ / "sqlite" / "data" / "parity.db"));
  EXPECT_FALSE(fs::exists(dir_ / "postgres" / "data" / "parity.db"));
}

TEST_F(StoreBackendsTest, AStoreParitydCannotUseIsRefusedAtStartSayingWhy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--store=mysql://parity@127.0.0.1/db", "not a PostgreSQL URI"},
      {"--store=postgresql://parity:s3cret@127.0.0.1/db", "holds a password"},
      {"--store=postgresql://parity@127.0.0.1/db?password=s3cret", "holds a password"},
      // Nothing listens on port 1 of loopback.
      {"--store=postgresql://parity@127.0.0.1:1/postgres?connect_timeout=5", "cannot connect to PostgreSQL"},
  };
  for (const auto& [flag, why] : cases) {
    testing::Output o = testing::Run("server/parityd", "--data-dir=" + (dir_ / "d").string() + " --listen=127.0.0.1:0 " + flag);
    EXPECT_EQ(o.code, 2) << flag << "\n" << o.text;
    EXPECT_NE(o.text.find(why), std::string::npos) << flag << "\n" << o.text;
    EXPECT_EQ(o.text.find("s3cret"), std::string::npos) << "the password was echoed: " << o.text;
  }
}

}  // namespace
}  // namespace parity
