#include "server/core/core.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <random>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/base/control_chars.h"
#include "common/compare/culprit.h"
#include "common/base/file_util.h"
#include "common/base/logging.h"
#include "common/compare/engine.h"
#include "common/checks/msprobe_policy.h"
#include "common/compare/pairing.h"
#include "common/formats/argument.h"
#include "common/base/pyformat.h"
#include "common/base/sha256.h"
#include "common/base/status_macros.h"
#include "common/base/thread_name.h"

#include "server/core/active_job.h"
#include "server/core/auth.h"

namespace parity {

namespace fs = std::filesystem;

namespace {
// What PairIncompatibility looks at (kind, type, dtype, shape), without ToDumpItem's copies.
DumpItem PairingView(const ItemRecord& r) {
  DumpItem d;
  d.is_tensor = r.dtype.has_value() || !r.read_error.empty();
  if (r.dtype) {
    d.dtype = r.dtype;
    d.dtype_text = TorchDTypeName(*r.dtype);
    d.shape = r.shape;
    d.has_shape = true;
  } else if (!d.is_tensor) {
    d.type = r.scalar_type.empty() ? "None" : r.scalar_type;
  }
  return d;
}
}  // namespace

namespace core_internal {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string NewId(const char* prefix) {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^
                                          static_cast<uint64_t>(NowMs()) ^
                                          reinterpret_cast<uintptr_t>(&rng));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%s-%016llx", prefix, static_cast<unsigned long long>(rng()));
  return buf;
}

DumpMode PairMode(const ItemRecord& t, const ItemRecord& g, DumpMode runs_mode) {
  // An item whose data the agent could not read is an error of a real-data comparison (as in
  // `parity compare`); non-tensor arguments take the mode of the dumps they came from.
  if (!t.read_error.empty() || !g.read_error.empty()) return DumpMode::kTensor;
  if (!t.dtype || !g.dtype) return runs_mode;
  if (t.data_mode == DataMode::kData && g.data_mode == DataMode::kData && !t.blob.empty() &&
      !g.blob.empty()) {
    return DumpMode::kTensor;
  }
  if (t.crc32 && g.crc32 && (t.data_mode == DataMode::kCrc || g.data_mode == DataMode::kCrc)) {
    return DumpMode::kMd5;
  }
  return DumpMode::kStatistics;
}

OpResultRecord MakeResult(const std::string& job_id, const ItemRecord* t, const ItemRecord* g,
                          CheckResult r) {
  const ItemRecord& any = t ? *t : *g;
  OpResultRecord rec;
  rec.job_id = job_id;
  rec.name = any.name;
  rec.api = any.api;
  rec.op_type = any.op_type;
  rec.phase = any.phase;
  rec.role = any.role;
  rec.index = t ? t->index : kGoldenOnlyIndexBase + g->index;
  rec.golden_name = g ? g->name : "";
  rec.result = std::move(r);
  if (g) {
    rec.golden_dtype = g->dtype;
    rec.golden_shape = g->shape;
  }
  if (t) {
    rec.target_dtype = t->dtype;
    rec.target_shape = t->shape;
  }
  rec.error = ItemError(rec.result, rec.target_dtype, g ? g->norm : std::nullopt, t ? t->norm : std::nullopt);
  return rec;
}

// Why the two items cannot be compared ("" when they can). An item whose data could not be read
// pairs by name whatever its dtype and shape (known or not): its row is the read error.
std::string Incompatibility(const ItemRecord& t, const ItemRecord& g, const PairingOptions& o) {
  if (!t.read_error.empty() || !g.read_error.empty()) return "";
  // What PairIncompatibility answers for the common cases, without building its views: two
  // non-tensors, or two tensors of one dtype and shape, always pair.
  if (!t.dtype && !g.dtype) return "";
  if (t.dtype && g.dtype && *t.dtype == *g.dtype && t.shape == g.shape) return "";
  return PairIncompatibility(PairingView(t), PairingView(g), o);
}

}  // namespace core_internal

using core_internal::Incompatibility;
using core_internal::MakeResult;
using core_internal::NewId;
using core_internal::NowMs;
using core_internal::PairMode;

namespace {

// This daemon's name in job leases: DIR/daemon-id, created with a random name on first use.
// One daemon holds a data directory at a time (DataDirLock), so a restarted daemon is the same
// holder and takes its leases back at once.
absl::StatusOr<std::string> DaemonId(const std::string& data_dir) {
  const std::string path = (fs::path(data_dir) / "daemon-id").string();
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (text.ok() && text->size() >= 16 && text->size() <= 64 && text->back() == '\n') {
    return text->substr(0, text->size() - 1);
  }
  std::random_device rd;
  std::string id = absl::StrCat("d-", absl::Hex(rd(), absl::kZeroPad8), absl::Hex(rd(), absl::kZeroPad8));
  const std::string tmp = path + ".tmp";
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    const bool ok = std::fprintf(f, "%s\n", id.c_str()) > 0 && std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
    std::fclose(f);
    if (ok && std::rename(tmp.c_str(), path.c_str()) == 0) return id;
  }
  return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
}

// How stale the first culprit of a running job's live record may be (it costs O(results)).
constexpr int64_t kLiveAnalysisMs = 200;

// `id` has NewId's form: `prefix`, '-' and 16 lowercase hex digits.
bool ValidNewId(const std::string& id, absl::string_view prefix) {
  if (id.size() != prefix.size() + 17 || !absl::StartsWith(id, prefix) || id[prefix.size()] != '-') return false;
  for (size_t i = prefix.size() + 1; i < id.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(id[i])) && (id[i] < 'a' || id[i] > 'f')) return false;
  }
  return true;
}

Json StatJson(const std::optional<double>& v) { return v ? Json::Number(*v) : Json(); }

// "%08x" without snprintf (which cost more than the rest of ToDumpItem on a small pair).
std::string Crc8(uint32_t crc) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(8, '0');
  for (int i = 7; i >= 0; --i, crc >>= 4) out[static_cast<size_t>(i)] = kHex[crc & 0xf];
  return out;
}

}  // namespace


DumpItem ToDumpItem(const ItemRecord& r, const Spool* spool) {
  DumpItem d;
  d.name = r.name;
  d.phase = r.phase;
  d.role = r.role;
  d.is_tensor = r.dtype.has_value() || !r.read_error.empty();
  if (!r.read_error.empty()) {
    // LoadItemTensor returns the agent's error, so the comparison reports it as msprobe reports
    // a data file it cannot read.
    d.type = "torch.Tensor";
    d.data_path = r.name;
    d.data_name = r.name;
    d.read_error = absl::DataLossError(r.read_error);
  }
  if (r.dtype) {
    d.type = "torch.Tensor";
    d.dtype = r.dtype;
    d.dtype_text = TorchDTypeName(*r.dtype);
    d.shape = r.shape;
    d.has_shape = true;
    d.max = StatJson(r.max);
    d.min = StatJson(r.min);
    d.mean = StatJson(r.mean);
    d.norm = StatJson(r.norm);
    if (r.crc32) d.md5 = Crc8(*r.crc32);
    if (!r.blob.empty() && r.inline_data && r.read_error.empty()) {
      // Kept in the item's row: compared from the bytes read with the item. The path only
      // marks the data as raw bytes (nothing opens it); short enough not to be allocated.
      d.raw_data_path = "inline:";
      d.raw_bytes.owner = std::shared_ptr<const char>(r.inline_data, r.inline_data->data());
      d.raw_bytes.bytes = *r.inline_data;
      d.data_path = d.raw_data_path;
      d.data_name = r.name;
    } else if (!r.blob.empty() && spool != nullptr && r.read_error.empty()) {
      d.raw_data_path = spool->PathOf(r.blob);
      d.raw_direct = spool->WritesDirect(r.byte_length);
      d.data_path = d.raw_data_path;
      d.data_name = r.name;
    }
  } else if (!d.is_tensor) {
    d.type = r.scalar_type.empty() ? "None" : r.scalar_type;
    d.dtype_text = r.dtype_text;
    d.shape_text = r.shape_text;
    d.value = ArgumentValue(d.type, r.scalar_value);
    d.md5 = ArgumentMd5(d);
  }
  d.requires_grad = r.requires_grad;
  return d;
}


absl::StatusOr<std::unique_ptr<Core>> Core::Open(const CoreOptions& options) {
  std::error_code ec;
  fs::create_directories(options.data_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create data directory ", options.data_dir, ": ", ec.message()));
  }
  std::unique_ptr<Core> core(new Core(options));
  PARITY_ASSIGN_OR_RETURN(core->data_dir_lock_, DataDirLock::Acquire(options.data_dir));
  SpoolOptions sp;
  sp.dir = (fs::path(options.data_dir) / "spool").string();
  sp.quota_bytes = options.spool_quota_bytes;
  sp.fsync = options.fsync;
  sp.group_sync = options.group_sync;
  sp.direct_min_bytes = options.spool_direct_min_bytes;
  sp.io_threads = options.spool_io_threads;
  sp.stage_bytes = options.spool_stage_bytes;
  sp.unique_key_min_bytes = options.spool_unique_key_min_bytes;
  // A shared tier keys every blob uniquely (see SharedBlobs).
  if (!options.blobs.empty()) sp.unique_key_min_bytes = 1;
  PARITY_ASSIGN_OR_RETURN(core->spool_, Spool::Open(sp));
  if (!options.blobs.empty()) {
    PARITY_ASSIGN_OR_RETURN(S3Options s3, ParseS3Url(options.blobs));
    PARITY_ASSIGN_OR_RETURN(core->shared_blobs_, SharedBlobs::Open(std::move(s3), core->spool_.get()));
  }
  core->held_blobs_ = std::make_unique<HeldBlobs>(options.held_blob_bytes);
  core->run_items_ = std::make_unique<RunItemsCache>(options.run_cache_items, options.run_cache_data_bytes);
  StoreOptions so;
  so.path = options.store.empty() ? (fs::path(options.data_dir) / "parity.db").string() : options.store;
  so.max_pending_writes = options.max_pending_writes;
  so.max_pending_writes_per_share = options.max_pending_writes_per_project;
  so.sort_cache_entries = options.sort_cache_entries;
  so.metrics = options.metrics;
  // Items reference blobs: the blobs committed so far become durable before the items do. (The
  // store is closed in Shutdown, before the spool is destroyed.)
  so.before_commit = [spool = core->spool_.get()] { return spool->SyncPending(); };
  PARITY_ASSIGN_OR_RETURN(core->store_, Store::Open(so));
  core->compare_pool_ = std::make_unique<WorkerPool>("compare", options.compare_workers, options.compare_queue);
  core->control_pool_ = std::make_unique<WorkerPool>("control", 1, 0);
  core->results_pool_ = std::make_unique<WorkerPool>("results", 1, kResultsQueue);
  // Blobs of uploads that never became durable (a crash between blob and record).
  PARITY_RETURN_IF_ERROR(core->CollectSpool(0).status());
  if (IsPostgresStore(so.path) && options.job_lease_seconds > 0) {
    core->leases_ = true;
    PARITY_ASSIGN_OR_RETURN(core->holder_, DaemonId(options.data_dir));
  }
  PARITY_RETURN_IF_ERROR(core->Resume());
  if (options.gc_interval_seconds > 0) core->gc_thread_ = std::thread([c = core.get()] { c->GcLoop(); });
  if (core->leases_) {
    core->lease_thread_ = std::thread([c = core.get()] { c->LeaseLoop(); });
    core->remote_thread_ = std::thread([c = core.get()] { c->RemoteRunsLoop(); });
  }
  return core;
}

Core::Core(CoreOptions o) : options_(std::move(o)) {}

Core::~Core() { Shutdown(); }

void Core::Shutdown() {
  if (shut_down_.exchange(true)) return;
  {
    absl::MutexLock l(&mu_);
    stop_gc_ = true;
  }
  if (gc_thread_.joinable()) gc_thread_.join();
  if (lease_thread_.joinable()) lease_thread_.join();
  if (remote_thread_.joinable()) remote_thread_.join();
  // Open may have failed part way (a data directory another daemon holds, a spool or store that
  // would not open): only what was built is shut down.
  if (compare_pool_) {
    compare_pool_->Shutdown();
    compare_pool_.reset();  // joins after the queued comparisons
  }
  // The store's done-callbacks (run by its writer while Close drains it) may still hand work
  // to the results and control pools, so those go last (results first: its tasks may hand
  // work to the control pool); their tasks then find the store closed.
  // The jobs this daemon compared go to another daemon at once, not after their leases expire.
  if (leases_ && store_) {
    std::vector<std::string> held;
    {
      absl::MutexLock l(&mu_);
      for (const auto& [id, job] : active_) held.push_back(id);
    }
    for (const std::string& id : held) store_->ReleaseJobLease(id, holder_).IgnoreError();
  }
  if (store_) store_->Close();
  if (results_pool_) {
    results_pool_->Shutdown();
    results_pool_.reset();
  }
  if (control_pool_) {
    control_pool_->Shutdown();
    control_pool_.reset();
  }
  if (held_blobs_) {
    const HeldBlobs::Counters h = held_blobs_->counters();
    LogLine(LogLevel::kInfo, "core", "held blobs",
            absl::StrCat("held=", h.held, " taken=", h.taken, " evicted=", h.evicted,
                         " refused=", h.refused, " peak_mib=", h.peak_bytes >> 20));
  }
  if (spool_) {
    LogLine(LogLevel::kInfo, "core", "spool stages",
            absl::StrCat("peak=", spool_->stages_high_water(),
                         " blobs_past_budget=", spool_->blobs_past_stage_budget()));
  }
}

absl::Status Core::Resume() {
  for (int state : {static_cast<int>(JobState::kQueued), static_cast<int>(JobState::kRunning)}) {
    JobFilter f;
    f.state = state;
    PARITY_ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, store_->ListJobs(f, 0, INT64_MAX));
    for (JobRecord& j : jobs) {
      PARITY_ASSIGN_OR_RETURN(const bool mine, TakeLease(j.job_id));
      if (!mine) continue;  // another daemon compares it
      LogLine(LogLevel::kInfo, "core", "resuming job", absl::StrCat("job=", j.job_id));
      PARITY_RETURN_IF_ERROR(StartJob(std::move(j), false).status());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Core::TakeLease(const std::string& job_id) {
  if (!leases_) return true;
  return store_->TakeJobLease(job_id, holder_, options_.job_lease_seconds * 1000);
}

bool Core::HasUploadOf(const std::string& run_id) {
  absl::MutexLock l(&mu_);
  for (const auto& [id, li] : listeners_) {
    if (li.run_id == run_id && li.job_id.empty()) return true;
  }
  return false;
}

void Core::AdoptJob(const std::string& job_id) {
  if (!leases_ || job_id.empty()) return;
  {
    absl::MutexLock l(&mu_);
    if (active_.count(job_id)) return;
  }
  absl::StatusOr<JobRecord> rec = store_->GetJob(job_id);
  if (!rec.ok() || IsFinal(rec->state)) return;
  absl::StatusOr<bool> mine = TakeLease(job_id);
  if (!mine.ok() || !*mine) return;  // held by a live daemon, or taken over later (LeaseLoop)
  LogLine(LogLevel::kInfo, "core", "job taken over", absl::StrCat("job=", job_id, " by=upload"));
  absl::StatusOr<JobRecord> started = StartJob(*std::move(rec), false);
  if (!started.ok()) {
    LogLine(LogLevel::kWarning, "core", "cannot resume a job taken over",
            absl::StrCat("job=", job_id, " error=", LogQuote(started.status().message())));
  }
}

void Core::LeaseLoop() {
  NameCurrentThread("job-leases");
  const absl::Duration period = absl::Milliseconds(std::max<int64_t>(options_.job_lease_seconds * 1000 / 3, 100));
  while (true) {
    {
      absl::MutexLock l(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_gc_), period);
      if (stop_gc_) return;
    }
    absl::StatusOr<std::vector<std::string>> held = store_->RenewJobLeases(holder_, options_.job_lease_seconds * 1000);
    if (!held.ok()) {
      LogLine(LogLevel::kWarning, "core", "cannot renew job leases", absl::StrCat("error=", LogQuote(held.status().message())));
      continue;
    }
    // A job compared here whose lease was not renewed (this daemon stalled past its expiry, or
    // the job is finishing) is taken back when still free; one another daemon took is said once.
    std::vector<std::string> missing;
    {
      const std::set<std::string> still(held->begin(), held->end());
      absl::MutexLock l(&mu_);
      for (const auto& [id, job] : active_) {
        if (!still.count(id) && !job->finalizing) missing.push_back(id);
      }
    }
    for (const std::string& id : missing) {
      absl::StatusOr<bool> back = TakeLease(id);
      if (back.ok() && !*back && lost_leases_.insert(id).second) {
        LogLine(LogLevel::kWarning, "core", "job lease lost: another daemon took the job over; both may compare it",
                absl::StrCat("job=", id));
      }
    }
    PublishProgress();
    TakeOverOrphans();
  }
}

void Core::PublishProgress() {
  std::vector<JobRecord> live;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [id, job] : active_) {
      if (!job->loading && !job->finalizing) live.push_back(LiveRecord(*job));
    }
  }
  for (JobRecord& rec : live) store_->Write(Store::UpdateJobProgress(std::move(rec)), nullptr);
}

void Core::TakeOverOrphans() {
  absl::StatusOr<std::vector<JobRecord>> orphans = store_->OrphanedJobs();
  if (!orphans.ok()) return;
  const int64_t now = NowMs();
  std::map<std::string, int64_t> seen;
  for (JobRecord& rec : *orphans) {
    const int64_t first = orphan_seen_ms_.count(rec.job_id) ? orphan_seen_ms_[rec.job_id] : now;
    seen[rec.job_id] = first;
    {
      absl::MutexLock l(&mu_);
      if (active_.count(rec.job_id)) continue;
    }
    // A target still being uploaded goes to the daemon its agent reconnects to, unless none has
    // for a while.
    absl::StatusOr<RunRecord> target = store_->GetRun(rec.target_run_id);
    const bool uploading = target.ok() && !target->complete;
    if (uploading && !HasUploadOf(rec.target_run_id) &&
        now - first < options_.job_takeover_wait_seconds * 1000) {
      continue;
    }
    absl::StatusOr<bool> mine = TakeLease(rec.job_id);
    if (!mine.ok() || !*mine) continue;
    seen.erase(rec.job_id);
    LogLine(LogLevel::kInfo, "core", "job taken over", absl::StrCat("job=", rec.job_id, " by=lease"));
    const std::string id = rec.job_id;
    absl::StatusOr<JobRecord> started = StartJob(std::move(rec), false);
    if (!started.ok()) {
      LogLine(LogLevel::kWarning, "core", "cannot resume a job taken over",
              absl::StrCat("job=", id, " error=", LogQuote(started.status().message())));
    }
  }
  orphan_seen_ms_ = std::move(seen);
}

void Core::GcLoop() {
  NameCurrentThread("spool-gc");
  while (true) {
    {
      absl::MutexLock l(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_gc_), absl::Seconds(options_.gc_interval_seconds));
      if (stop_gc_) return;
    }
    absl::StatusOr<int64_t> n = ApplyRetention(NowMs());
    if (!n.ok()) {
      LogLine(LogLevel::kWarning, "core", "spool retention failed",
              absl::StrCat("error=", LogQuote(n.status().message())));
    }
  }
}

absl::StatusOr<int64_t> Core::ApplyRetention(int64_t now_ms) {
  PARITY_ASSIGN_OR_RETURN(std::vector<std::string> runs,
                          store_->ListRunsWithDataBefore(now_ms - options_.spool_retention_seconds * 1000));
  int64_t dropped = 0;
  for (const std::string& run : runs) {
    if (RunHasActiveJob(run)) continue;
    PARITY_RETURN_IF_ERROR(store_->WriteSync(Store::ReleaseRunData(run)));
    run_items_->Erase(run);
    ++dropped;
  }
  // Blobs written in the last 10 minutes may belong to records still in the write queue.
  PARITY_ASSIGN_OR_RETURN(uint64_t freed, CollectSpool(600));
  if (shared_blobs_) {
    PARITY_ASSIGN_OR_RETURN(SharedBlobs::Collected c,
                            shared_blobs_->Collect(*store_, options_.blob_gc_grace_seconds, kTombstoneWaitSeconds));
    if (c.marked > 0 || c.deleted > 0) {
      LogLine(LogLevel::kInfo, "core", "shared blobs collected",
              absl::StrCat("listed=", c.listed, " marked=", c.marked, " deleted=", c.deleted, " bytes_freed=", c.bytes));
    }
  }
  if (dropped > 0 || freed > 0) {
    LogLine(LogLevel::kInfo, "core", "spool retention", absl::StrCat("runs=", dropped, " bytes_freed=", freed));
  }
  return dropped;
}

JobRecord Core::LiveRecord(const ActiveJob& job) const {
  JobRecord rec = job.rec;
  if (rec.first_culprit.empty() && !job.verdicts.empty()) {
    const int64_t now = NowMs();
    if (job.verdicts.size() != job.live_culprit_verdicts && now - job.live_culprit_at_ms >= kLiveAnalysisMs) {
      std::vector<CulpritInput> input;
      input.reserve(job.verdicts.size());
      for (const auto& [idx, v] : job.verdicts) input.push_back(v.Input());
      job.live_culprit = FirstCulprit(AnalyzeCulprits(input));
      job.live_culprit_verdicts = job.verdicts.size();
      job.live_culprit_at_ms = now;
    }
    rec.first_culprit = job.live_culprit;
  }
  if (job.golden_complete && job.target_complete && rec.pairs_total == 0) {
    if (job.live_pairs_total < 0) {  // both runs complete: their items no longer change
      int64_t golden_only = 0;
      for (const auto& [name, g] : job.golden) golden_only += job.TargetForKey(name) < 0;
      job.live_pairs_total = static_cast<int64_t>(job.target.size()) + golden_only;
    }
    rec.pairs_total = job.live_pairs_total;
  }
  return rec;
}

absl::Status ValidateLabels(absl::string_view field, const std::map<std::string, std::string>& labels) {
  if (labels.size() > kMaxLabels) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", labels.size(), " labels, the limit is ", kMaxLabels));
  }
  for (const auto& [k, v] : labels) {
    if (k.empty() || k.size() > 256 || v.size() > 256) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": keys must be 1-256 bytes and values at most 256 bytes (key '", k.substr(0, 64), "')"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RunRecord> Core::CreateRun(RunRecord r) {
  if (!ValidProjectName(r.project)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "run.project '", r.project, "' must be 1-64 characters of [A-Za-z0-9_.-]"));
  }
  if (r.side != Side::kGolden && r.side != Side::kTarget) {
    return absl::InvalidArgumentError("run.side must be SIDE_GOLDEN or SIDE_TARGET");
  }
  PARITY_RETURN_IF_ERROR(ValidateLabels("run.labels", r.labels));
  const std::pair<const char*, const std::string*> fields[] = {
      {"name", &r.name}, {"model", &r.model}, {"framework", &r.framework}, {"device", &r.device},
      {"dump_format", &r.dump_format}};
  for (const auto& [field, f] : fields) {
    if (f->size() > kMaxNameBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("run.", field, " is ", f->size(), " bytes, the limit is ", kMaxNameBytes));
    }
    if (std::optional<uint32_t> c = FindControlCharacter(*f)) {
      return absl::InvalidArgumentError(absl::StrCat("run.", field, " contains control character 0x", absl::Hex(*c)));
    }
  }
  for (const auto& [k, v] : r.labels) {
    if (std::optional<uint32_t> c = FindControlCharacter(absl::StrCat(k, v))) {
      return absl::InvalidArgumentError(absl::StrCat("run.labels: a key or value contains control character 0x",
                                                     absl::Hex(*c)));
    }
  }
  if (r.run_id.empty()) {
    r.run_id = NewId("run");
  } else if (!ValidNewId(r.run_id, "run")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "new_run_id '", r.run_id.substr(0, 64), "' must be 'run-' and 16 lowercase hex digits"));
  }
  r.created_at_ms = NowMs();
  r.complete = false;
  PARITY_RETURN_IF_ERROR(store_->WriteSync(Store::InsertRun(r)));
  return r;
}

absl::StatusOr<RunRecord> Core::FindGoldenByLabels(const std::string& project,
                                                   const std::map<std::string, std::string>& labels) {
  RunFilter f;
  f.project = project;
  f.labels = labels;
  f.side = static_cast<int>(Side::kGolden);
  f.complete_only = true;
  PARITY_ASSIGN_OR_RETURN(std::vector<RunRecord> runs, store_->ListRuns(f, 0, 1));
  if (runs.empty()) {
    std::string want;
    for (const auto& [k, v] : labels) absl::StrAppend(&want, want.empty() ? "" : ", ", k, "=", v);
    return absl::NotFoundError(absl::StrCat("no complete golden run in project '", project,
                                            "' has label ", want));
  }
  return runs[0];
}

absl::Status Core::CompleteRun(const std::string& run_id) {
  // A barrier: once it commits, every item write queued before it is durable and announced.
  PARITY_RETURN_IF_ERROR(store_->Barrier());
  Sha256 structure, fingerprint;
  std::map<std::string, absl::flat_hash_set<std::string>> apis_by_type;
  int64_t n_items = 0;
  std::string line;
  PARITY_RETURN_IF_ERROR(store_->VisitItems(run_id, [&](const ItemRecord& it) {
    line.clear();
    absl::StrAppend(&line, it.name, "|", it.op_type, "|", absl::StrJoin(it.shape, ","), "|",
                    it.dtype ? DTypeName(*it.dtype) : it.scalar_type, "\n");
    structure.Update(line);
    fingerprint.Update(line);
    fingerprint.Update(it.crc32 ? Crc8(*it.crc32) : it.scalar_value.value_or(it.blob));
    apis_by_type[it.op_type].insert(it.api);
    ++n_items;
  }));
  std::map<std::string, int64_t> counts;
  for (const auto& [type, apis] : apis_by_type) counts[type] = static_cast<int64_t>(apis.size());
  PARITY_RETURN_IF_ERROR(store_->WriteSync(Store::CompleteRun(
      run_id, n_items, structure.HexDigest(), fingerprint.HexDigest(), counts)));
  MarkRunComplete(run_id);
  return absl::OkStatus();
}

void Core::MarkRunComplete(const std::string& run_id) {
  {
    absl::MutexLock l(&mu_);
    for (auto& [id, job] : active_) {
      if (job->rec.golden_run_id == run_id) job->golden_complete = true;
      if (job->rec.target_run_id == run_id) job->target_complete = true;
      MaybeFinalize(*job);
    }
  }
  Pump();
}

void Core::RemoteRunsLoop() {
  NameCurrentThread("remote-runs");
  while (true) {
    {
      absl::MutexLock l(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_gc_), absl::Milliseconds(kRemotePollMs));
      if (stop_gc_) return;
    }
    PollRemoteRuns();
  }
}

void Core::PollRemoteRuns() {
  std::set<std::string> runs;
  {
    absl::MutexLock l(&mu_);
    std::set<std::string> uploading;
    for (const auto& [id, li] : listeners_) {
      if (li.job_id.empty()) uploading.insert(li.run_id);
    }
    for (const auto& [id, job] : active_) {
      if (job->loading) continue;  // StartJob reads what is stored, then this follows
      if (!job->golden_complete && !uploading.count(job->rec.golden_run_id)) runs.insert(job->rec.golden_run_id);
      if (!job->target_complete && !uploading.count(job->rec.target_run_id)) runs.insert(job->rec.target_run_id);
    }
  }
  for (auto it = remote_runs_.begin(); it != remote_runs_.end();) {
    it = runs.count(it->first) ? std::next(it) : remote_runs_.erase(it);
  }
  for (const std::string& run_id : runs) {
    // The run's record first: when it says complete, every item was stored before it.
    absl::StatusOr<RunRecord> run = store_->GetRun(run_id);
    if (!run.ok()) continue;
    RemoteRun& seen = remote_runs_[run_id];
    std::vector<ItemPtr> fresh;
    absl::Status s = store_->VisitItems(run_id, [&](const ItemRecord& it) {
      if (it.index < seen.prefix || !seen.beyond.insert(it.index).second) return;
      fresh.push_back(std::make_shared<const ItemRecord>(it));
    }, seen.prefix);
    if (!s.ok()) continue;
    while (!seen.beyond.empty() && *seen.beyond.begin() == seen.prefix) {
      seen.beyond.erase(seen.beyond.begin());
      ++seen.prefix;
    }
    for (const ItemPtr& item : fresh) OnItemDurable(item, /*upgrade=*/false);
    if (run->complete) MarkRunComplete(run_id);
  }
}

absl::StatusOr<std::vector<std::string>> Core::FullDataWanted(const std::string& run_id) {
  // Items are paired (and judged) when their write commits; after this barrier every item sent
  // before the call has been.
  PARITY_RETURN_IF_ERROR(store_->Barrier());
  std::vector<std::string> names;
  absl::MutexLock l(&mu_);
  for (const auto& [id, job] : active_) {
    if (job->rec.target_run_id != run_id || !job->golden_complete) continue;
    for (const auto& [ti, gi] : job->awaiting) names.push_back(job->target_slots[ti].item->name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {
// About what an item's row takes in the database: its text and inline data, plus the rest.
uint64_t ItemRowBytes(const ItemRecord& it) {
  return 256 + it.name.size() + it.api.size() + it.op_type.size() + it.dtype_text.size() + it.data_name.size() +
         it.shape_text.size() + it.in_run_golden.size() + it.scalar_value.value_or("").size() + it.scalar_type.size() +
         it.read_error.size() + (it.inline_data ? it.inline_data->size() : 0);
}
}  // namespace

void Core::AddItem(const std::string& project, ItemRecord item, std::function<void(const absl::Status&)> done,
                   bool upgrade) {
  auto shared = std::make_shared<const ItemRecord>(item);
  // Counted against the database quota from now: pending until stored, then as stored until the
  // next measurement of the files.
  const uint64_t row = ItemRowBytes(item);
  database_pending_bytes_ += row;
  database_unmeasured_bytes_ += row;
  Store::DoneFn stored = [this, shared = std::move(shared), done = std::move(done), upgrade, row](const absl::Status& s) {
    database_pending_bytes_ -= row;
    if (s.ok()) database_bytes_ += row;
    if (s.ok()) OnItemDurable(shared, upgrade);
    if (done) done(s);
  };
  if (upgrade) {
    store_->Write({project, row}, Store::ReplaceItem(std::move(item)), std::move(stored));
  } else {
    store_->WriteItem({project, row}, std::move(item), std::move(stored));
  }
}

void Core::OnItemDurable(const ItemPtr& item, bool upgrade) {
  {
    absl::MutexLock l(&mu_);
    for (auto& [id, job] : active_) {
      if (job->rec.golden_run_id == item->run_id) AddToJob(*job, item, true, upgrade);
      if (job->rec.target_run_id == item->run_id) AddToJob(*job, item, false, upgrade);
    }
  }
  Pump();
}

int64_t Core::SubscribeRun(const std::string& run_id, ResultListener on_result, JobListener on_job) {
  absl::MutexLock l(&mu_);
  const int64_t id = next_listener_++;
  listeners_[id] = {run_id, "", std::move(on_result), std::move(on_job)};
  return id;
}

int64_t Core::SubscribeJob(const std::string& job_id, ResultListener on_result, JobListener on_job) {
  absl::MutexLock l(&mu_);
  const int64_t id = next_listener_++;
  listeners_[id] = {"", job_id, std::move(on_result), std::move(on_job)};
  return id;
}

void Core::Unsubscribe(int64_t id) {
  absl::MutexLock l(&mu_);
  listeners_.erase(id);
}

void Core::NotifyResults(const std::string& job_id, const std::vector<OpResultRecord>& rs,
                         const std::string& golden_run, const std::string& target_run) {
  std::vector<ResultListener> calls;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [id, li] : listeners_) {
      if (!li.on_result) continue;
      if (li.job_id == job_id || (!li.run_id.empty() && (li.run_id == golden_run || li.run_id == target_run))) {
        calls.push_back(li.on_result);
      }
    }
  }
  if (calls.empty()) return;
  for (const OpResultRecord& r : rs) {
    const ResultEvent ev{job_id, r};
    for (const ResultListener& f : calls) f(ev);
  }
}

void Core::NotifyJob(const JobRecord& job) {
  std::vector<JobListener> calls;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [id, li] : listeners_) {
      if (!li.on_job) continue;
      if (li.job_id == job.job_id ||
          (!li.run_id.empty() && (li.run_id == job.golden_run_id || li.run_id == job.target_run_id))) {
        calls.push_back(li.on_job);
      }
    }
  }
  for (const JobListener& f : calls) f(job);
}

absl::StatusOr<std::string> Core::HeldBlobFor(const std::string& project, const std::string& sha256,
                                              bool wait) {
  if (!Spool::IsKey(sha256)) return std::string();
  if (wait) {
    // A probe that matched this content may still be hashing its blob: wait for the hashes
    // pending now (not for those started later).
    absl::MutexLock l(&hash_mu_);
    if (!hashing_.empty()) {
      const std::set<std::string> pending = hashing_;
      auto done = [this, &pending]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(hash_mu_) {
        for (const std::string& k : pending) {
          if (hashing_.count(k)) return false;
        }
        return true;
      };
      hash_mu_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(60));
    }
  }
  PARITY_ASSIGN_OR_RETURN(std::vector<std::string> keys, store_->ProjectBlobsWithHash(project, sha256));
  for (const std::string& key : keys) {
    if (!shared_blobs_) {
      if (spool_->Contains(key)) return key;
      continue;
    }
    // In the bucket (an item references it) unless its collector marked it; compared and
    // checked here from the spool.
    PARITY_ASSIGN_OR_RETURN(const bool collected, store_->IsTombstoned(key));
    if (!collected && shared_blobs_->Fetch(key).ok()) return key;
  }
  return std::string();
}

absl::StatusOr<bool> Core::ProbeContent(const std::string& project, uint64_t byte_length,
                                        uint32_t crc32, std::vector<std::string>* to_hash) {
  PARITY_ASSIGN_OR_RETURN(std::vector<Store::MatchingBlob> blobs,
                          store_->BlobsMatching(project, byte_length, crc32, kMaxHashedPerProbe));
  absl::MutexLock l(&hash_mu_);
  for (Store::MatchingBlob& b : blobs) {
    if (b.unhashed && hashing_.insert(b.key).second) to_hash->push_back(std::move(b.key));
  }
  return !blobs.empty();
}

void Core::HashBlobs(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    // Another daemon's blob is hashed from a copy in the spool.
    if (shared_blobs_) shared_blobs_->Fetch(key).IgnoreError();  // else HashOf says NOT_FOUND
    absl::StatusOr<std::string> sha = spool_->HashOf(key);
    absl::Status s = sha.status();
    if (sha.ok()) s = store_->WriteSync(Store::RecordBlobHash(key, *std::move(sha)));
    if (!s.ok() && !absl::IsNotFound(s)) {  // NOT_FOUND: collected meanwhile
      LogLine(LogLevel::kWarning, "core", "dedup probe: cannot hash a blob",
              absl::StrCat("blob=", key, " error=", LogQuote(s.ToString())));
    }
    absl::MutexLock l(&hash_mu_);
    hashing_.erase(key);
  }
}

void Core::AbandonHashes(const std::vector<std::string>& keys) {
  absl::MutexLock l(&hash_mu_);
  for (const std::string& key : keys) hashing_.erase(key);
}

bool Core::HashesPending() const {
  absl::MutexLock l(&hash_mu_);
  return !hashing_.empty();
}

absl::StatusOr<uint64_t> Core::CollectSpool(int64_t grace_seconds) {
  PARITY_RETURN_IF_ERROR(store_->WriteSync(Store::ForgetUnreferencedBlobHashes()));
  // With a shared tier the spool holds copies: every one older than the cache time (and the
  // grace) goes, referenced or not; the bucket keeps them.
  if (shared_blobs_) return spool_->Collect({}, std::max(grace_seconds, options_.blob_cache_seconds));
  PARITY_ASSIGN_OR_RETURN(std::vector<std::string> refs, store_->ReferencedBlobs());
  return spool_->Collect(std::set<std::string>(refs.begin(), refs.end()), grace_seconds);
}

absl::StatusOr<uint64_t> Core::FreeDiskBytes() const {
  struct statvfs st;
  if (::statvfs(options_.data_dir.c_str(), &st) != 0) {
    return absl::InternalError(absl::StrCat("statvfs ", options_.data_dir, ": ", std::strerror(errno)));
  }
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

absl::Status Core::CheckFreeDisk() const {
  absl::StatusOr<uint64_t> free_bytes = FreeDiskBytes();
  if (!free_bytes.ok()) return free_bytes.status();
  if (*free_bytes < options_.min_free_disk_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the data directory's disk has ", *free_bytes, " bytes free, below parityd --min-free-disk-bytes=",
        options_.min_free_disk_bytes, "; new uploads are refused until space is freed"));
  }
  return absl::OkStatus();
}

uint64_t Core::DatabaseBytes() const {
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  // The files are measured every 100 ms, and after every MiB of rows added: between
  // measurements the rows' estimate stands in for what the files grew by.
  int64_t last = database_measured_ms_.load();
  const bool due = now - last >= 100 || database_unmeasured_bytes_.load() >= (1u << 20);
  if (due && database_measured_ms_.compare_exchange_strong(last, now)) {
    database_unmeasured_bytes_ = 0;
    absl::StatusOr<uint64_t> bytes = store_->SizeBytes();
    if (bytes.ok()) database_bytes_ = *bytes;
  }
  return database_bytes_.load() + database_pending_bytes_.load();
}

absl::Status Core::CheckDatabaseQuota() const {
  if (options_.database_quota_bytes == 0) return absl::OkStatus();
  const uint64_t bytes = DatabaseBytes();
  if (bytes < options_.database_quota_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "the database holds ", bytes, " bytes, at parityd --database-quota-bytes=", options_.database_quota_bytes,
      "; new uploads and items are refused until runs are deleted"));
}

void Core::AppendGauges(std::vector<Gauge>* out) {
  size_t jobs;
  {
    absl::MutexLock l(&mu_);
    jobs = active_.size();
  }
  out->push_back({"jobs_running", jobs, 0, 0, false, false, ""});
  out->push_back({"database_bytes", DatabaseBytes(), 0, options_.database_quota_bytes, false, true,
                  options_.database_quota_bytes > 0 ? "database-quota-bytes" : ""});
  out->push_back({"compare_queue", compare_pool_->queued(), compare_pool_->queued_high_water(),
                  options_.compare_queue, false, false, "compare-queue"});
  out->push_back({"store_pending_writes", store_->pending_writes(),
                  store_->pending_writes_high_water(), options_.max_pending_writes, false, false,
                  "max-pending-writes"});
  const HeldBlobs::Counters held = held_blobs_->counters();
  out->push_back({"held_blob_bytes", held.held_bytes + held.reserved_bytes, held.peak_bytes,
                  options_.held_blob_bytes, false, true, "held-blob-bytes"});
  out->push_back({"spool_stage_bytes", spool_->stage_bytes_in_use(),
                  spool_->stage_bytes_high_water(), options_.spool_stage_bytes, false, true,
                  "spool-stage-bytes"});
  out->push_back({"run_cache_items", run_items_->items(), 0, options_.run_cache_items, false, false,
                  "run-cache-items"});
  out->push_back({"spool_bytes", spool_->used_bytes(), 0, options_.spool_quota_bytes, false, true,
                  "spool-quota-bytes"});
  if (absl::StatusOr<uint64_t> free_bytes = FreeDiskBytes(); free_bytes.ok()) {
    out->push_back({"disk_free_bytes", *free_bytes, 0, options_.min_free_disk_bytes, true, true,
                    "min-free-disk-bytes"});
  }
}

bool Core::ReserveRunFileBytes(uint64_t n) {
  uint64_t held = run_file_bytes_.load();
  do {
    if (n > options_.max_run_file_memory_bytes - std::min(held, options_.max_run_file_memory_bytes)) return false;
  } while (!run_file_bytes_.compare_exchange_weak(held, held + n));
  return true;
}

}  // namespace parity
