// Per-tensor cost of the daemon's pipeline for many small tensors, without the network: a
// target run of N tiny items handed to a real UploadSession over a real Core (SQLite file and
// spool in a temporary directory), compared live against a golden run of the same names, until
// the upload's summary (every item stored, paired, compared and its result written).
//   build/tests/ingest_bench [--benchmark_filter=...]
// Arguments: items per run; mode 0 = statistics only (no tensor data), 1 = 16 float32 values
// each (spooled, CRC-checked, hashed); fsync 0/1. Reports items/s; the per-item cost is its
// inverse.
// BM_JobOverStoredRuns: the per-pair cost of a job alone (pairing, scheduling, loading both
// tensors, the msprobe check, the result write, culprit analysis) on two runs of N small
// tensors already stored: SubmitJob until the job is DONE.
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "server/core/core.h"
#include "server/core/upload_session.h"

namespace parity {
namespace {

constexpr int kFloats = 16;

ItemRecord Item(int64_t i, bool data, float salt) {
  ItemRecord it;
  it.name = "Functional.op." + std::to_string(i) + ".forward.output.0";
  it.api = "Functional.op." + std::to_string(i) + ".forward";
  it.op_type = "op";
  it.phase = Phase::kForward;
  it.role = Role::kOutput;
  it.index = i;
  it.dtype = DType::kFloat32;
  it.shape = {kFloats};
  it.data_mode = data ? DataMode::kData : DataMode::kStats;
  it.byte_length = data ? 4 * kFloats : 0;
  it.max = 1.0 + salt;
  it.min = 0.0;
  it.mean = 0.5;
  it.norm = 2.0;
  return it;
}

std::string Bytes(int64_t i, float salt) {
  float v[kFloats];
  for (int k = 0; k < kFloats; ++k) v[k] = static_cast<float>(i % 97) * 0.01f + static_cast<float>(k) + salt;
  return std::string(reinterpret_cast<const char*>(v), sizeof(v));
}

// CPU seconds (user + system) of every thread of this process so far.
double ProcessCpuSeconds() {
  rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// CPU seconds (user + system) of this process's live threads so far, summed by thread name.
std::map<std::string, double> ThreadCpuSecondsByName() {
  std::map<std::string, double> out;
  const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(t.path() / "comm"), stat(t.path() / "stat");
    std::string name, line;
    std::getline(comm, name);
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    if (name.empty() || paren == std::string::npos) continue;
    std::istringstream fields(line.substr(paren + 2));
    std::string f;
    double utime = 0, stime = 0;
    for (int i = 3; fields >> f; ++i) {  // field 3 is the state; 14 utime, 15 stime
      if (i == 14) utime = std::stod(f);
      if (i == 15) stime = std::stod(f);
    }
    out[name] += (utime + stime) / hz;
  }
  return out;
}

// Uploads one run; returns once its summary arrived.
std::string UploadRun(Core* core, Side side, const std::string& against, int64_t n, bool data,
                      float salt) {
  absl::Mutex mu;
  bool done = false;
  std::string run_id;
  UploadSession s(core, [&](UploadEvent e) {
    absl::MutexLock l(&mu);
    if (e.kind == UploadEvent::Kind::kAccepted) run_id = e.run_id;
    if (e.kind == UploadEvent::Kind::kSummary) done = true;
    if (e.kind == UploadEvent::Kind::kRejected) {
      std::fprintf(stderr, "rejected %s: %s\n", e.name.c_str(), e.status.ToString().c_str());
      std::abort();
    }
  });
  UploadStartRequest start;
  RunRecord run;
  run.project = "bench";
  run.side = side;
  start.new_run = run;
  start.against_run_id = against;
  if (!s.Start(start).ok()) std::abort();
  for (int64_t i = 0; i < n; ++i) {
    if (!s.Header(Item(i, data, salt)).ok()) std::abort();
    if (data && !s.Chunk(0, Bytes(i, salt)).ok()) std::abort();
  }
  if (!s.End().ok()) std::abort();
  absl::MutexLock l(&mu);
  mu.Await(absl::Condition(&done));
  return run_id;
}

// A Core on a fresh data directory named after `what`; both go with the BenchCore.
struct BenchCore {
  std::string dir;
  std::unique_ptr<Core> core;

  bool Open(const char* what, bool fsync, benchmark::State& state,
            size_t run_cache_items = CoreOptions().run_cache_items) {
    dir = std::filesystem::temp_directory_path() / (std::string(what) + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    CoreOptions o;
    o.data_dir = dir;
    o.fsync = fsync;
    o.min_free_disk_bytes = 0;
    o.run_cache_items = run_cache_items;
    absl::StatusOr<std::unique_ptr<Core>> c = Core::Open(o);
    if (!c.ok()) {
      state.SkipWithError(std::string(c.status().message()).c_str());
      return false;
    }
    core = std::move(*c);
    return true;
  }
  ~BenchCore() {
    if (core) core->Shutdown();
    core.reset();
    std::filesystem::remove_all(dir);
  }
};

void BM_SmallTensors(benchmark::State& state) {
  const int64_t n = state.range(0);
  const bool data = state.range(1) != 0;
  BenchCore bc;
  if (!bc.Open("parity_ingest_bench_", state.range(2) != 0, state)) return;
  const std::string golden = UploadRun(bc.core.get(), Side::kGolden, "", n, data, 0.0f);
  float salt = 0.0f;
  for (auto _ : state) {
    salt += 0.5f;  // new contents each time: nothing is deduplicated
    UploadRun(bc.core.get(), Side::kTarget, golden, n, data, salt);
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_JobOverStoredRuns(benchmark::State& state) {
  const int64_t n = state.range(0);
  const bool data = state.range(1) != 0;
  BenchCore bc;
  // cached:0 reads both runs from SQLite in every job; cached:1 lets every job after the first
  // take their items from memory (RunItemsCache), as jobs against a golden run compared before do.
  if (!bc.Open("parity_job_bench_", /*fsync=*/true, state, state.range(2) != 0 ? CoreOptions().run_cache_items : 0)) return;
  Core* c = bc.core.get();
  const std::string golden = UploadRun(c, Side::kGolden, "", n, data, 0.0f);
  const std::string target = UploadRun(c, Side::kTarget, "", n, data, 0.5f);
  const double cpu0 = ProcessCpuSeconds();
  const std::map<std::string, double> threads0 = ThreadCpuSecondsByName();
  absl::Duration submit;  // SubmitJob returns once both runs are loaded and paired
  for (auto _ : state) {
    const absl::Time t0 = absl::Now();
    absl::StatusOr<JobRecord> job = c->SubmitJob(golden, target, /*POLICY_MSPROBE*/ 1,
                                                  /*MATCH_MODE_EXACT*/ 1, "");
    submit += absl::Now() - t0;
    if (!job.ok()) {
      state.SkipWithError(std::string(job.status().message()).c_str());
      break;
    }
    absl::StatusOr<JobRecord> end = job;
    while (end.ok() && !IsFinal(end->state)) {  // polled every millisecond (< 0.2 % of a run)
      absl::SleepFor(absl::Milliseconds(1));
      end = c->GetJob(job->job_id);
    }
    if (!end.ok() || end->state != JobState::kDone || end->pairs_done != n) {
      state.SkipWithError("the job did not compare every pair");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * n);
  // Every thread's CPU per pair: against the wall time per pair, how much of a job is waiting.
  const double pairs = static_cast<double>(state.iterations() * n);
  const double cpu = ProcessCpuSeconds() - cpu0;
  state.counters["cpu_us_per_pair"] = cpu * 1e6 / pairs;
  state.counters["submit_us"] = absl::ToDoubleMicroseconds(submit) / pairs;
  // By the daemon's long-lived threads (named by role); "other" is the rest: the benchmark's
  // own thread and each job's loader and control threads, gone when the job ends. Jiffies
  // (10 ms), so meaningful over the ten jobs, not one.
  double named = 0;
  for (const auto& [name, seconds] : ThreadCpuSecondsByName()) {
    if (name != "store-writer" && name != "compare" && name != "results") continue;
    auto it = threads0.find(name);
    const double d = seconds - (it == threads0.end() ? 0.0 : it->second);
    state.counters[name + "_us"] = d * 1e6 / pairs;
    named += d;
  }
  state.counters["other_us"] = (cpu - named) * 1e6 / pairs;
}

BENCHMARK(BM_JobOverStoredRuns)
    ->ArgsProduct({{10000}, {0, 1}, {0, 1}})
    ->ArgNames({"items", "data", "cached"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(10);

BENCHMARK(BM_SmallTensors)
    ->ArgsProduct({{10000}, {0, 1}, {0, 1}})
    ->ArgNames({"items", "data", "fsync"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

}  // namespace
}  // namespace parity

BENCHMARK_MAIN();
