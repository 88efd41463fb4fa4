// Google Benchmark for the store (writes, pages, summaries) on both engines in one run: an SQLite
// file in $TMPDIR (backend 0) and a database of its own on a PostgreSQL server this process starts
// on loopback with tests/postgres.sh (backend 1; fsync off there, as the tests run it).
//
//   BM_RawSqliteInsert   baseline: prepared INSERTs of rows of the same width into a plain table,
//                        512 per transaction, WAL + synchronous=FULL (what the store's writer
//                        does, minus the store); run in the same invocation for the ratio.
//   BM_StoreWrite        op results through Store::Write (the daemon's path): items/s; args:
//                        results per write, backend.
//   BM_PackedInsert/0|1  the layout a faster store would need: one row per result keyed by an
//                        integer (job << 32 | index) holding a 380-byte blob (about an op result
//                        serialised), 4096 per transaction, WAL + synchronous=FULL; /1 adds an
//                        index on the result's name.
//   BM_Page*             a 100-row page of a job holding PARITY_BENCH_RESULTS results (default
//                        1,000,000; 1/3 FAIL): filtered by verdict and sorted by a metric, in dump
//                        order, and by name glob.
//   BM_JobSummary        GetJob (counts, state, first culprit) on that job.
//   The BM_Page*, BM_WorstPerMetric and BM_JobSummary argument is the backend.
#include <benchmark/benchmark.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "server/storage/store.h"
#include "tests/test_postgres.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

fs::path BenchDir() {
  static const fs::path* dir = [] {
    auto* d = new fs::path(fs::temp_directory_path() / ("parity_store_bench_" + std::to_string(::getpid())));
    fs::remove_all(*d);
    fs::create_directories(*d);
    std::atexit([] { fs::remove_all(BenchDir()); });  // the databases are hundreds of MB at 1 M
    return d;
  }();
  return *dir;
}

OpResultRecord MakeResult(const std::string& job, int64_t i) {
  OpResultRecord r;
  r.job_id = job;
  r.name = "Functional.op_" + std::to_string(i / 4) + ".forward.output." + std::to_string(i % 4);
  r.api = "Functional.op_" + std::to_string(i / 4) + ".forward";
  r.op_type = "op";
  r.index = i;
  r.role = Role::kOutput;
  r.phase = Phase::kForward;
  r.result.verdict = i % 3 == 0 ? Verdict::kFail : Verdict::kPass;
  r.result.policy = "msprobe";
  r.result.peer_verdict = i % 3 == 0 ? "No" : "Yes";
  const double cos = 1.0 - static_cast<double>((i * 7919) % 1000003) * 1e-9;
  r.result.Add("Cosine", MetricValue::Number(cos));
  r.result.Add("EucDist", MetricValue::Number(1e-3 * (i % 101)));
  r.result.Add("MaxAbsErr", MetricValue::Number(1e-4 * (i % 997)));
  r.result.Add("MaxRelativeErr", MetricValue::Number(1e-5 * (i % 89)));
  r.result.Add("One Thousandth Err Ratio", MetricValue::Number(0.99));
  r.result.Add("Five Thousandths Err Ratio", MetricValue::Number(1.0));
  r.golden_dtype = r.target_dtype = DType::kFloat32;
  r.golden_shape = r.target_shape = {8, 1024};
  return r;
}

JobRecord MakeJob(const std::string& job, JobState state) {
  JobRecord j;
  j.job_id = job;
  j.project = "bench";
  j.golden_run_id = "g";
  j.target_run_id = "t";
  j.state = state;
  return j;
}

constexpr int kSqlite = 0, kPostgres = 1;  // the backend arguments

// Where store `name` of `backend` lives: a file in BenchDir, or a new PostgreSQL database.
std::string StorePath(const std::string& name, int64_t backend) {
  if (backend == kSqlite) return (BenchDir() / (name + ".db")).string();
  absl::StatusOr<std::string> uri = testing::NewPostgresDatabase();
  if (!uri.ok()) {
    std::cerr << uri.status() << "\n";
    std::abort();
  }
  return *uri;
}

std::unique_ptr<Store> OpenStore(const std::string& path, const std::string& job) {
  StoreOptions o;
  o.path = path;
  auto s = Store::Open(o);
  if (!s.ok()) {
    std::cerr << s.status() << "\n";
    std::abort();
  }
  for (const char* id : {"g", "t"}) {
    RunRecord r;
    r.run_id = id;
    r.project = "bench";
    r.side = id[0] == 'g' ? Side::kGolden : Side::kTarget;
    r.name = id;
    (void)(*s)->WriteSync(Store::InsertRun(r));  // AlreadyExists on a second open
  }
  (void)(*s)->WriteSync(Store::InsertJob(MakeJob(job, JobState::kRunning)));
  return *std::move(s);
}

// Writes results [begin, end) through the store's queue, `per_write` per write (parityd's
// compare tasks write up to 32 at once), and waits for every one to be durable.
void WriteResults(Store* s, const std::string& job, int64_t begin, int64_t end, int64_t per_write = 1) {
  absl::BlockingCounter left(static_cast<int>((end - begin + per_write - 1) / per_write));
  for (int64_t i = begin; i < end; i += per_write) {
    std::vector<OpResultRecord> rows;
    for (int64_t k = i; k < std::min(end, i + per_write); ++k) rows.push_back(MakeResult(job, k));
    s->Write(Store::UpsertOpResults(rows), [&left](const absl::Status& st) {
      if (!st.ok()) std::cerr << st << "\n";
      left.DecrementCount();
    });
  }
  left.Wait();
}

constexpr int64_t kWriteBatch = 50000;

void BM_RawSqliteInsert(benchmark::State& state) {
  sqlite3* db = nullptr;
  const std::string path = (BenchDir() / "raw.db").string();
  sqlite3_open(path.c_str(), &db);
  sqlite3_exec(db,
               "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
               "CREATE TABLE IF NOT EXISTS r(job TEXT, name TEXT, idx INTEGER, verdict INTEGER,"
               " metrics TEXT, PRIMARY KEY(job, name));",
               nullptr, nullptr, nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO r VALUES(?,?,?,?,?)", -1, &st, nullptr);
  int64_t next = 0;
  for (auto _ : state) {
    for (int64_t i = 0; i < kWriteBatch; ++i, ++next) {
      if (i % 512 == 0) sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
      OpResultRecord r = MakeResult("raw", next);
      const std::string metrics = r.result.ToJson().Dump();
      sqlite3_bind_text(st, 1, r.job_id.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 2, r.name.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(st, 3, r.index);
      sqlite3_bind_int(st, 4, static_cast<int>(r.result.verdict));
      sqlite3_bind_text(st, 5, metrics.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_step(st);
      sqlite3_reset(st);
      if (i % 512 == 511 || i + 1 == kWriteBatch) sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  state.SetItemsProcessed(state.iterations() * kWriteBatch);
}

void BM_PackedInsert(benchmark::State& state) {
  // 0: no secondary index; 1: an index on the name; 2: an index on a 64-bit hash of the name.
  const int64_t mode = state.range(0);
  sqlite3* db = nullptr;
  const std::string path = (BenchDir() / ("packed" + std::to_string(mode) + ".db")).string();
  sqlite3_open(path.c_str(), &db);
  sqlite3_exec(db,
               "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA cache_size=-65536;"
               "CREATE TABLE IF NOT EXISTS r(k INTEGER PRIMARY KEY, name TEXT, v BLOB);",
               nullptr, nullptr, nullptr);
  if (mode == 1) sqlite3_exec(db, "CREATE INDEX IF NOT EXISTS r_by_name ON r(name);", nullptr, nullptr, nullptr);
  if (mode == 2) {
    sqlite3_exec(db, "ALTER TABLE r ADD COLUMN h INTEGER; CREATE INDEX IF NOT EXISTS r_by_hash ON r(h);",
                 nullptr, nullptr, nullptr);
  }
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, mode == 2 ? "INSERT INTO r(k, name, v, h) VALUES(?,?,?,?)" : "INSERT INTO r(k, name, v) VALUES(?,?,?)",
                     -1, &st, nullptr);
  const std::string blob(380, 'x');
  int64_t next = 0;
  for (auto _ : state) {
    for (int64_t i = 0; i < kWriteBatch; ++i, ++next) {
      if (i % 4096 == 0) sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
      const std::string name = "Functional.op_" + std::to_string(next / 4) + ".forward.output." +
                               std::to_string(next % 4);
      sqlite3_bind_int64(st, 1, (int64_t{7} << 32) + next);
      sqlite3_bind_text(st, 2, name.c_str(), static_cast<int>(name.size()), SQLITE_STATIC);
      sqlite3_bind_blob(st, 3, blob.data(), static_cast<int>(blob.size()), SQLITE_STATIC);
      if (mode == 2) {
        uint64_t h = 1469598103934665603ull;  // FNV-1a
        for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
        sqlite3_bind_int64(st, 4, static_cast<int64_t>(h));
      }
      sqlite3_step(st);
      sqlite3_reset(st);
      if (i % 4096 == 4095 || i + 1 == kWriteBatch) sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  state.SetItemsProcessed(state.iterations() * kWriteBatch);
}

// Args: results per write (1: one Store::Write each; 32: as parityd's compare tasks write them),
// backend.
void BM_StoreWrite(benchmark::State& state) {
  const int64_t per_write = state.range(0);
  auto s = OpenStore(StorePath("write" + std::to_string(per_write), state.range(1)), "w");
  int64_t next = 0;
  for (auto _ : state) {
    WriteResults(s.get(), "w", next, next + kWriteBatch, per_write);
    next += kWriteBatch;
  }
  state.SetItemsProcessed(state.iterations() * kWriteBatch);
}

// Items as an upload stores them, one queued per item: Store::WriteItem (arg 1: several to a
// statement on PostgreSQL) or Store::Write of InsertItem (arg 0: one statement each, the
// baseline); backend. kWriteBatch items of a run per iteration, each waited for.
void BM_StoreItems(benchmark::State& state) {
  const bool merged = state.range(0) == 1;
  auto s = OpenStore(StorePath(absl::StrCat("items", state.range(0)), state.range(1)), "i");
  int64_t next = 0;
  for (auto _ : state) {
    absl::BlockingCounter left(static_cast<int>(kWriteBatch));
    for (int64_t i = next; i < next + kWriteBatch; ++i) {
      ItemRecord it;
      it.run_id = "t";
      it.name = absl::StrCat("Functional.op_", i, ".forward.output.0");
      it.api = absl::StrCat("Functional.op_", i, ".forward");
      it.op_type = "Functional";
      it.index = i;
      it.dtype = DType::kFloat32;
      it.shape = {8, 1024};
      it.byte_length = 32768;
      it.max = 1.5;
      it.min = -1.5;
      it.mean = 1e-3;
      it.norm = 91.0;
      it.crc32 = static_cast<uint32_t>(i * 2654435761u);
      it.blob = std::string(64, 'a' + static_cast<char>(i % 6));
      Store::DoneFn done = [&left](const absl::Status& st) {
        if (!st.ok()) std::cerr << st << "\n";
        left.DecrementCount();
      };
      if (merged) {
        s->WriteItem({"bench", 600}, std::move(it), std::move(done));
      } else {
        s->Write({"bench", 600}, Store::InsertItem(std::move(it)), std::move(done));
      }
    }
    left.Wait();
    next += kWriteBatch;
  }
  state.SetItemsProcessed(state.iterations() * kWriteBatch);
}

// The store of `backend` with one job of PARITY_BENCH_RESULTS results, filled once (32 results
// per write, as parityd writes them).
Store* BigStore(int64_t backend) {
  static std::map<int64_t, Store*>* stores = new std::map<int64_t, Store*>();
  Store*& store = (*stores)[backend];
  if (store == nullptr) {
    const char* v = std::getenv("PARITY_BENCH_RESULTS");
    const int64_t n = v ? std::atoll(v) : 1000000;
    Store* s = OpenStore(StorePath("big", backend), "big").release();
    for (int64_t i = 0; i < n; i += kWriteBatch) WriteResults(s, "big", i, std::min(n, i + kWriteBatch), 32);
    JobRecord j = MakeJob("big", JobState::kDone);
    j.counts = {n - (n + 2) / 3, 0, (n + 2) / 3, 0, 0, 0};
    j.first_culprit = "Functional.op_0.forward";
    // As parityd finishes a job: its index with its final record.
    auto index = s->BuildJobIndex("big", {});
    (void)s->WriteSync(Store::StoreJobIndex("big", index.ok() ? *index : nullptr));
    (void)s->WriteSync(Store::UpdateJob(j));
    store = s;
  }
  return store;
}

// Building the big job's index from its rows, as parityd does when a job finishes: about what a
// first listing or plot of a job without one costs (every row read and its metrics decoded).
void BM_BuildJobIndex(benchmark::State& state) {
  Store* s = BigStore(state.range(0));
  for (auto _ : state) {
    auto index = s->BuildJobIndex("big", {});
    if (!index.ok() || *index == nullptr) state.SkipWithError("no index");
    benchmark::DoNotOptimize(index);
  }
}

void Page(benchmark::State& state, const OpResultFilter& f, const std::string& name) {
  const std::string key = name + std::to_string(state.range(0));
  Store* s = BigStore(state.range(0));
  int64_t total = 0;
  // The first listing of a finished job builds its in-memory order (from the job's index, or
  // from its rows for a name glob); reported apart (cold_ms), the timed loop measures the pages
  // after it.
  // Google Benchmark calls this function more than once: keep the very first call's time.
  static std::map<std::string, double> cold;
  if (!cold.count(key)) {
    const auto cold_start = std::chrono::steady_clock::now();
    (void)s->ListOpResults("big", f, 0, 100, &total);
    cold[key] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                          cold_start).count();
  }
  state.counters["cold_ms"] = cold[key];
  for (auto _ : state) {
    auto page = s->ListOpResults("big", f, 0, 100, &total);
    if (!page.ok() || page->size() != 100) state.SkipWithError("page query failed");
    benchmark::DoNotOptimize(page);
  }
  state.counters["total"] = static_cast<double>(total);
}

void BM_PageFailSortedByCosine(benchmark::State& state) {
  OpResultFilter f;
  f.verdicts = {static_cast<int>(Verdict::kFail)};
  f.sort_metric = "Cosine";
  Page(state, f, "fail-by-cosine");
}

void BM_PageDumpOrder(benchmark::State& state) { Page(state, OpResultFilter(), "dump"); }

void BM_PageGlobSortedByMaxAbsErr(benchmark::State& state) {
  OpResultFilter f;
  f.glob = "Functional.op_1*";
  f.sort_metric = "MaxAbsErr";
  f.descending = true;
  Page(state, f, "glob-by-maxabserr");
}

// What a job summary asks the store for beside the job: the five worst results by each of six
// metrics (one-off listings, picked from the job's index).
void BM_WorstPerMetric(benchmark::State& state) {
  Store* s = BigStore(state.range(0));
  for (auto _ : state) {
    for (const char* metric : {"Cosine", "MaxAbsErr", "MaxRelativeErr", "PCC", "Mismatched elements",
                               "Max absolute difference"}) {
      OpResultFilter f;
      f.sort_metric = metric;
      f.descending = std::string(metric) != "Cosine" && std::string(metric) != "PCC";
      f.one_off = true;
      int64_t total = 0;
      auto rows = s->ListOpResults("big", f, 0, 5, &total);
      if (!rows.ok()) state.SkipWithError("listing failed");
      benchmark::DoNotOptimize(rows);
    }
  }
}

void BM_JobSummary(benchmark::State& state) {
  Store* s = BigStore(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(s->GetJob("big"));
}

BENCHMARK(BM_RawSqliteInsert)->Unit(benchmark::kMillisecond)->Iterations(2)->UseRealTime();
BENCHMARK(BM_StoreWrite)
    ->Args({1, kSqlite})
    ->Args({32, kSqlite})
    ->Args({1, kPostgres})
    ->Args({32, kPostgres})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2)
    ->UseRealTime();
BENCHMARK(BM_StoreItems)
    ->Args({0, kSqlite})
    ->Args({1, kSqlite})
    ->Args({0, kPostgres})
    ->Args({1, kPostgres})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2)
    ->UseRealTime();
BENCHMARK(BM_PackedInsert)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->Iterations(2)->UseRealTime();
BENCHMARK(BM_BuildJobIndex)->Arg(kSqlite)->Arg(kPostgres)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_PageFailSortedByCosine)->Arg(kSqlite)->Arg(kPostgres)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PageDumpOrder)->Arg(kSqlite)->Arg(kPostgres)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PageGlobSortedByMaxAbsErr)->Arg(kSqlite)->Arg(kPostgres)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WorstPerMetric)->Arg(kSqlite)->Arg(kPostgres)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_JobSummary)->Arg(kSqlite)->Arg(kPostgres)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace parity

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::filesystem::remove_all(parity::BenchDir());
  return 0;
}
