#include "server/core/core.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>


#include <chrono>
#include <algorithm>
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
#include "common/compare/culprit.h"
#include "common/base/logging.h"
#include "common/compare/engine.h"
#include "common/checks/msprobe_policy.h"
#include "common/compare/pairing.h"
#include "common/base/pyformat.h"
#include "common/base/sha256.h"
#include "common/base/status_macros.h"
#include "common/base/thread_name.h"

namespace parity {

namespace fs = std::filesystem;

namespace {

// How stale the first culprit of a running job's live record may be (it costs O(results)).
constexpr int64_t kLiveAnalysisMs = 200;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
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

// `id` has NewId's form: `prefix`, '-' and 16 lowercase hex digits.
bool ValidNewId(const std::string& id, absl::string_view prefix) {
  if (id.size() != prefix.size() + 17 || !absl::StartsWith(id, prefix) || id[prefix.size()] != '-') return false;
  for (size_t i = prefix.size() + 1; i < id.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(id[i])) && (id[i] < 'a' || id[i] > 'f')) return false;
  }
  return true;
}

bool ValidProject(const std::string& p) {
  if (p.empty() || p.size() > 64) return false;
  for (char c : p) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
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

DumpMode PairMode(const ItemRecord& t, const ItemRecord& g) {
  // Non-tensor arguments are compared by value, as in a real-data dump; an item whose data the
  // agent could not read is an error of a real-data comparison (as in `parity compare`).
  if (!t.dtype || !g.dtype || !t.read_error.empty() || !g.read_error.empty()) return DumpMode::kTensor;
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
  return rec;
}

}  // namespace

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
    d.value = r.scalar_value ? Json::String(*r.scalar_value) : Json();
    d.md5 = NonTensorCrc32(d.value);
  }
  d.requires_grad = r.requires_grad;
  return d;
}

struct Core::ActiveJob {
  JobRecord rec;
  std::shared_ptr<const CompareConfig> config;
  PairingOptions pairing;
  bool fuzzy = false;
  bool loading = true;
  bool golden_complete = false, target_complete = false;
  bool finalizing = false;
  bool fuzzy_pass_done = false;
  // One slot per item of either run, in arrival order: a slot's index stays valid as the
  // vectors grow, and a pair's state is kept in its slots (no per-name sets to hash into).
  struct Slot {
    ItemPtr item;
    bool done = false;       // target: its result row is stored
    bool in_flight = false;  // target: its comparison is running
    bool paired = false;     // golden: paired with a target
  };
  std::vector<Slot> golden_slots, target_slots;
  // Name -> slot index. Hashed, not ordered: every walk that reaches the outside is sorted by
  // dump index. The keys view their slot's item name (re-keyed when an upgrade replaces it).
  absl::flat_hash_map<absl::string_view, uint32_t> golden, target;
  // Mapped key -> target slot; kept only when there is a mapping (without one, a target's key
  // is its name: TargetForKey looks in `target`).
  absl::flat_hash_map<std::string, uint32_t> target_by_key;
  absl::flat_hash_map<std::string, std::string> mapping;  // target name -> golden name
  absl::flat_hash_map<std::string, std::string> note;  // target name -> why it is unmatched
  // A resumed job's stored results: their target names count as done, their golden names as
  // paired, when the items arrive. Empty for a new job.
  absl::flat_hash_set<std::string> resumed_done, resumed_paired;
  // Pairs to compare, by slot. The target's item is read from its slot when the pair is
  // scheduled: an upgrade (the same item with its data) may replace it meanwhile.
  struct ReadyPair {
    uint32_t target, golden;
    bool fuzzy;
  };
  std::deque<ReadyPair> ready;
  size_t in_flight = 0;  // target slots with in_flight set
  absl::flat_hash_map<uint32_t, uint32_t> awaiting;  // target slot -> golden slot, awaiting data
  struct JobVerdict {
    std::string api;
    Role role;
    Verdict verdict;
  };
  absl::btree_map<int64_t, JobVerdict> verdicts;      // target index -> analysis input
  // LiveRecord's view, O(n) to compute: the first culprit so far, redone at most every
  // kLiveAnalysisMs and only when verdicts arrived; pairs_total once both runs are complete.
  mutable std::string live_culprit;
  mutable size_t live_culprit_verdicts = 0;
  mutable int64_t live_culprit_at_ms = 0;
  mutable int64_t live_pairs_total = -1;

  // The golden name a target is paired by.
  absl::string_view KeyOf(absl::string_view target_name) const {
    if (mapping.empty()) return target_name;  // (a lookup hashes the name even in an empty map)
    auto m = mapping.find(target_name);
    return m == mapping.end() ? target_name : absl::string_view(m->second);
  }
  // The slot of the target item whose key is `key`, or -1.
  int64_t TargetForKey(absl::string_view key) const {
    if (mapping.empty()) {
      auto t = target.find(key);
      return t == target.end() ? int64_t{-1} : int64_t{t->second};
    }
    auto k = target_by_key.find(key);
    return k == target_by_key.end() ? int64_t{-1} : int64_t{k->second};
  }
  // The slot of `name` in `golden` or `target`, or -1.
  static int64_t SlotOf(const absl::flat_hash_map<absl::string_view, uint32_t>& m, absl::string_view name) {
    auto it = m.find(name);
    return it == m.end() ? int64_t{-1} : int64_t{it->second};
  }
  // Adds a slot for `item` on one side (not yet in that side's name map); returns its index.
  uint32_t AddSlot(bool golden_side, const ItemPtr& item) {
    std::vector<Slot>& slots = golden_side ? golden_slots : target_slots;
    const uint32_t i = static_cast<uint32_t>(slots.size());
    Slot& s = slots.emplace_back();
    s.item = item;
    const absl::flat_hash_set<std::string>& resumed = golden_side ? resumed_paired : resumed_done;
    if (!resumed.empty() && resumed.contains(item->name)) (golden_side ? s.paired : s.done) = true;
    (golden_side ? golden : target).emplace(s.item->name, i);
    return i;
  }
};

absl::StatusOr<std::unique_ptr<Core>> Core::Open(const CoreOptions& options) {
  std::error_code ec;
  fs::create_directories(options.data_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create data directory ", options.data_dir, ": ", ec.message()));
  }
  std::unique_ptr<Core> core(new Core(options));
  SpoolOptions sp;
  sp.dir = (fs::path(options.data_dir) / "spool").string();
  sp.quota_bytes = options.spool_quota_bytes;
  sp.fsync = options.fsync;
  sp.group_sync = options.group_sync;
  sp.direct_min_bytes = options.spool_direct_min_bytes;
  sp.io_threads = options.spool_io_threads;
  sp.stage_bytes = options.spool_stage_bytes;
  sp.unique_key_min_bytes = options.spool_unique_key_min_bytes;
  PARITY_ASSIGN_OR_RETURN(core->spool_, Spool::Open(sp));
  core->held_blobs_ = std::make_unique<HeldBlobs>(options.held_blob_bytes);
  core->run_items_ = std::make_unique<RunItemsCache>(options.run_cache_items, options.run_cache_data_bytes);
  StoreOptions so;
  so.path = (fs::path(options.data_dir) / "parity.db").string();
  so.max_pending_writes = options.max_pending_writes;
  so.sort_cache_entries = options.sort_cache_entries;
  // Items reference blobs: the blobs committed so far become durable before the items do. (The
  // store is closed in Shutdown, before the spool is destroyed.)
  so.before_commit = [spool = core->spool_.get()] { return spool->SyncPending(); };
  PARITY_ASSIGN_OR_RETURN(core->store_, Store::Open(so));
  core->compare_pool_ = std::make_unique<WorkerPool>("compare", options.compare_workers, options.compare_queue);
  core->control_pool_ = std::make_unique<WorkerPool>("control", 1, 0);
  core->results_pool_ = std::make_unique<WorkerPool>("results", 1, kResultsQueue);
  // Blobs of uploads that never became durable (a crash between blob and record).
  PARITY_RETURN_IF_ERROR(core->CollectSpool(0).status());
  PARITY_RETURN_IF_ERROR(core->Resume());
  if (options.gc_interval_seconds > 0) core->gc_thread_ = std::thread([c = core.get()] { c->GcLoop(); });
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
  compare_pool_->Shutdown();
  compare_pool_.reset();   // joins after the queued comparisons
  // The store's done-callbacks (run by its writer while Close drains it) may still hand work
  // to the results and control pools, so those go last (results first: its tasks may hand
  // work to the control pool); their tasks then find the store closed.
  store_->Close();
  results_pool_->Shutdown();
  results_pool_.reset();
  control_pool_->Shutdown();
  control_pool_.reset();
  const HeldBlobs::Counters h = held_blobs_->counters();
  LogLine(LogLevel::kInfo, "core", "held blobs",
          absl::StrCat("held=", h.held, " taken=", h.taken, " evicted=", h.evicted,
                       " refused=", h.refused, " peak_mib=", h.peak_bytes >> 20));
  LogLine(LogLevel::kInfo, "core", "spool stages", absl::StrCat("peak=", spool_->stages_high_water(),
                                                           " blobs_past_budget=", spool_->blobs_past_stage_budget()));
}

absl::Status Core::Resume() {
  for (int state : {static_cast<int>(JobState::kQueued), static_cast<int>(JobState::kRunning)}) {
    JobFilter f;
    f.state = state;
    PARITY_ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, store_->ListJobs(f, 0, INT64_MAX));
    for (JobRecord& j : jobs) {
      LogLine(LogLevel::kInfo, "core", "resuming job", absl::StrCat("job=", j.job_id));
      PARITY_RETURN_IF_ERROR(StartJob(std::move(j), false).status());
    }
  }
  return absl::OkStatus();
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
  if (dropped > 0 || freed > 0) {
    LogLine(LogLevel::kInfo, "core", "spool retention", absl::StrCat("runs=", dropped, " bytes_freed=", freed));
  }
  return dropped;
}

JobRecord Core::LiveRecord(const ActiveJob& job) {
  JobRecord rec = job.rec;
  if (rec.first_culprit.empty() && !job.verdicts.empty()) {
    const int64_t now = NowMs();
    if (job.verdicts.size() != job.live_culprit_verdicts && now - job.live_culprit_at_ms >= kLiveAnalysisMs) {
      std::vector<CulpritInput> input;
      input.reserve(job.verdicts.size());
      for (const auto& [idx, v] : job.verdicts) input.push_back({v.api, v.role, v.verdict});
      job.live_culprit.clear();
      for (const OpAnalysis& op : AnalyzeCulprits(input)) {
        if (op.status == OpStatus::kCulprit) {
          job.live_culprit = op.api;
          break;
        }
      }
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

absl::StatusOr<RunRecord> Core::CreateRun(RunRecord r) {
  if (!ValidProject(r.project)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "run.project '", r.project, "' must be 1-64 characters of [A-Za-z0-9_.-]"));
  }
  if (r.side != Side::kGolden && r.side != Side::kTarget) {
    return absl::InvalidArgumentError("run.side must be SIDE_GOLDEN or SIDE_TARGET");
  }
  if (r.labels.size() > kMaxLabels) {
    return absl::InvalidArgumentError(absl::StrCat("run.labels has ", r.labels.size(),
                                                   " entries, the limit is ", kMaxLabels));
  }
  for (const auto& [k, v] : r.labels) {
    if (k.empty() || k.size() > 256 || v.size() > 256) {
      return absl::InvalidArgumentError(absl::StrCat(
          "run.labels: keys must be 1-256 bytes and values at most 256 bytes (key '", k.substr(0, 64), "')"));
    }
  }
  for (const std::string* f : {&r.name, &r.model, &r.framework, &r.device}) {
    if (f->size() > kMaxNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat("run metadata field longer than ", kMaxNameBytes, " bytes"));
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
  PARITY_RETURN_IF_ERROR(store_->WriteSync([](Database&) { return absl::OkStatus(); }));
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
  {
    absl::MutexLock l(&mu_);
    for (auto& [id, job] : active_) {
      if (job->rec.golden_run_id == run_id) job->golden_complete = true;
      if (job->rec.target_run_id == run_id) job->target_complete = true;
      MaybeFinalize(*job);
    }
  }
  Pump();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Core::FullDataWanted(const std::string& run_id) {
  // Items are paired (and judged) when their write commits; after this barrier every item sent
  // before the call has been.
  PARITY_RETURN_IF_ERROR(store_->WriteSync([](Database&) { return absl::OkStatus(); }));
  std::vector<std::string> names;
  absl::MutexLock l(&mu_);
  for (const auto& [id, job] : active_) {
    if (job->rec.target_run_id != run_id || !job->golden_complete) continue;
    for (const auto& [ti, gi] : job->awaiting) names.push_back(job->target_slots[ti].item->name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

void Core::AddItem(ItemRecord item, std::function<void(const absl::Status&)> done, bool upgrade) {
  auto shared = std::make_shared<const ItemRecord>(item);
  store_->Write(upgrade ? Store::ReplaceItem(std::move(item)) : Store::InsertItem(std::move(item)),
                [this, shared = std::move(shared), done = std::move(done), upgrade](const absl::Status& s) {
                  if (s.ok()) OnItemDurable(shared, upgrade);
                  if (done) done(s);
                });
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

namespace {
bool SameStat(const std::optional<double>& a, const std::optional<double>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  return *a == *b || (std::isnan(*a) && std::isnan(*b));
}

// Upload mode auto: a target item sent without data whose CRC (or, lacking one, statistics)
// disagrees with a golden item that has data needs its own data for a real comparison.
bool NeedsFullData(const ItemRecord& t, const ItemRecord& g) {
  if (!t.dtype || !t.blob.empty() || g.blob.empty() || !t.read_error.empty()) return false;
  if (t.crc32 && g.crc32) return *t.crc32 != *g.crc32;
  return !(SameStat(t.max, g.max) && SameStat(t.min, g.min) && SameStat(t.mean, g.mean) &&
           SameStat(t.norm, g.norm));
}
}  // namespace

void Core::AddToJob(ActiveJob& job, const ItemPtr& item_ptr, bool golden, bool upgrade) {
  const ItemRecord& item = *item_ptr;
  auto try_pair = [&](uint32_t ti, uint32_t gi) {
    ActiveJob::Slot& ts = job.target_slots[ti];
    ActiveJob::Slot& gs = job.golden_slots[gi];
    if (ts.done || ts.in_flight || gs.paired) return;
    const ItemRecord& t = *ts.item;
    const ItemRecord& g = *gs.item;
    std::string why = Incompatibility(t, g, job.pairing);
    if (!why.empty()) {
      job.note[t.name] = std::move(why);
      return;
    }
    gs.paired = true;
    if (NeedsFullData(t, g)) {
      job.awaiting[ti] = gi;
      return;
    }
    job.ready.push_back({ti, gi, false});
  };
  if (golden) {
    if (job.golden.contains(item.name)) return;
    const uint32_t gi = job.AddSlot(/*golden_side=*/true, item_ptr);
    const int64_t ti = job.TargetForKey(item.name);
    if (ti >= 0) try_pair(static_cast<uint32_t>(ti), gi);
    return;
  }
  if (upgrade) {
    auto it = job.target.find(item.name);
    if (it != job.target.end()) {
      const uint32_t ti = it->second;
      ActiveJob::Slot& ts = job.target_slots[ti];
      // The key views the old item's name: re-keyed to the new item's.
      job.target.erase(it);
      ts.item = item_ptr;
      job.target.emplace(ts.item->name, ti);
      auto a = job.awaiting.find(ti);
      if (a != job.awaiting.end()) {
        job.ready.push_back({ti, a->second, false});
        job.awaiting.erase(a);
      } else if (ts.done) {
        // Compared without data before: compare again with the data.
        auto v = job.verdicts.find(item.index);
        if (v != job.verdicts.end()) {
          job.rec.counts[static_cast<size_t>(v->second.verdict)]--;
          job.rec.pairs_done--;
          job.verdicts.erase(v);
        }
        ts.done = false;
        const absl::string_view key = job.KeyOf(item.name);
        const int64_t gi = ActiveJob::SlotOf(job.golden, key);
        if (gi >= 0 && job.TargetForKey(key) == ti) {
          job.ready.push_back({ti, static_cast<uint32_t>(gi), false});
        }
      }
      return;
    }
  }
  if (job.target.contains(item.name)) return;
  const uint32_t ti = job.AddSlot(/*golden_side=*/false, item_ptr);
  const absl::string_view key = job.KeyOf(item.name);
  if (!job.mapping.empty()) job.target_by_key[key] = ti;
  job.live_pairs_total = -1;
  const int64_t gi = ActiveJob::SlotOf(job.golden, key);
  if (gi >= 0) try_pair(ti, static_cast<uint32_t>(gi));
}

void Core::Pump() {
  absl::MutexLock l(&mu_);
  if (shut_down_) return;
  for (auto& [id, job] : active_) {
    while (!job->ready.empty()) {
      // Small pairs travel in groups (one task, one store write, one callback for the group);
      // a large pair fills a task alone, so that large tensors still spread over the workers.
      std::vector<ComparePair> group;
      uint64_t bytes = 0;
      for (size_t i = 0; i < job->ready.size() && group.size() < kMaxPairsPerTask &&
                         bytes < kMaxBytesPerTask;
           ++i) {
        const ActiveJob::ReadyPair& rp = job->ready[i];
        // The target slot holds the item an upgrade left, if any.
        ComparePair p{job->target_slots[rp.target].item, job->golden_slots[rp.golden].item, rp.target, rp.fuzzy};
        bytes += p.target->byte_length + p.golden->byte_length;
        group.push_back(std::move(p));
      }
      const size_t n = group.size();
      if (!compare_pool_->TrySubmit([this, job_id = id, group = std::move(group), cfg = job->config] {
            RunCompares(job_id, group, *cfg);
          })) {
        return;  // the pool is full: the next finished comparison pumps again
      }
      for (size_t i = 0; i < n; ++i) {
        job->target_slots[job->ready.front().target].in_flight = true;
        job->in_flight++;
        job->ready.pop_front();
      }
    }
  }
}

void Core::RunCompares(const std::string& job_id, const std::vector<ComparePair>& pairs,
                       const CompareConfig& config) {
  auto results = std::make_shared<std::vector<OpResultRecord>>();
  results->reserve(pairs.size());
  auto slots = std::make_shared<std::vector<uint32_t>>();  // each result's target slot
  slots->reserve(pairs.size());
  for (const ComparePair& p : pairs) {
    slots->push_back(p.target_slot);
    const ItemRecord& t = *p.target;
    const ItemRecord& g = *p.golden;
    DumpItem dt = ToDumpItem(t, spool_.get());
    DumpItem dg = ToDumpItem(g, spool_.get());
    // Blobs just received are compared from memory (held for this); the rest is read.
    if (dt.raw_direct) dt.raw_bytes = held_blobs_->Take(t.blob);
    if (dg.raw_direct) {
      dg.raw_bytes = g.blob == t.blob && dt.raw_bytes.owner ? dt.raw_bytes : held_blobs_->Take(g.blob);
    }
    const PolicyConfig& policy = config.PolicyFor(t.name, t.api, t.op_type);
    CheckResult r = CompareItems(&dt, &dg, PairMode(t, g), policy, "");
    if (p.fuzzy && t.name != g.name) r.message += kFuzzyMatchNote;
    results->push_back(MakeResult(job_id, &t, &g, std::move(r)));
  }
  // One write for the group: stored together or not at all.
  store_->Write(
      Store::UpsertOpResults(std::shared_ptr<const std::vector<OpResultRecord>>(results)),
      [this, job_id, results, slots = std::shared_ptr<const std::vector<uint32_t>>(std::move(slots))](const absl::Status& s) {
        if (!results_pool_->TrySubmit([this, job_id, results, slots, s] { OnResultsStored(job_id, *results, *slots, s); })) {
          OnResultsStored(job_id, *results, *slots, s);  // its queue is full, or it is shutting down
        }
      });
}

void Core::OnResultsStored(const std::string& job_id, const std::vector<OpResultRecord>& rs,
                           const std::vector<uint32_t>& slots, const absl::Status& s) {
  std::string golden_run, target_run;
  JobRecord failed;
  bool job_failed = false;
  std::unique_ptr<ActiveJob> retired;  // freed after the lock is released
  {
    absl::MutexLock l(&mu_);
    auto it = active_.find(job_id);
    if (it == active_.end()) return;  // cancelled meanwhile
    ActiveJob& job = *it->second;
    for (uint32_t ti : slots) job.target_slots[ti].in_flight = false;
    job.in_flight -= slots.size();
    if (!s.ok() && shut_down_) {
      // The store refused because it is closing: not the job's failure. The rows are not
      // stored; the job resumes at the next start and compares these pairs again.
      return;
    }
    if (!s.ok()) {
      job.rec.state = JobState::kFailed;
      job.rec.error = absl::StrCat("cannot store the result of ", rs.front().name,
                                   rs.size() > 1 ? absl::StrCat(" (and ", rs.size() - 1,
                                                                " more written with it)")
                                                 : "",
                                   ": ", s.message());
      job.rec.finished_at_ms = NowMs();
      failed = job.rec;
      job_failed = true;
      retired = RetireLocked(job_id, failed);
    } else {
      for (uint32_t ti : slots) job.target_slots[ti].done = true;
      for (const OpResultRecord& r : rs) {
        job.rec.counts[static_cast<size_t>(r.result.verdict)]++;
        job.rec.pairs_done++;
        if (r.index < kGoldenOnlyIndexBase) {
          job.verdicts[r.index] = {r.api, r.role, r.result.verdict};
        }
      }
      golden_run = job.rec.golden_run_id;
      target_run = job.rec.target_run_id;
      MaybeFinalize(job);
    }
  }
  if (job_failed) {
    LogLine(LogLevel::kError, "core", "job failed", absl::StrCat("job=", job_id, " error=\"", failed.error, "\""));
    // This may run on the store's writer thread (a done-callback): a Write here would wait on
    // the writer's own queue when it is full. Record the failure from the control pool instead,
    // and announce it once it is stored.
    if (!control_pool_->TrySubmit([this, failed] {
          store_->WriteSync(Store::UpdateJob(failed)).IgnoreError();
          NotifyJob(failed);
        })) {
      NotifyJob(failed);  // shutting down: the store is closing too
    }
    return;
  }
  NotifyResults(job_id, rs, golden_run, target_run);
  Pump();
}

void Core::MaybeFinalize(ActiveJob& job) {
  if (job.loading || job.finalizing || !job.golden_complete || !job.target_complete) return;
  if (!job.awaiting.empty()) {
    // The upload ended without the data: compare what there is (statistics or CRC).
    for (const auto& [ti, gi] : job.awaiting) job.ready.push_back({ti, gi, false});
    job.awaiting.clear();
    return;  // the caller pumps; finalised once these are done
  }
  if (!job.ready.empty() || job.in_flight != 0) return;
  job.finalizing = true;
  const std::string id = job.rec.job_id;
  control_pool_->TrySubmit([this, id] { Finalize(id); });  // unbounded: never refused while running
}

void Core::Finalize(const std::string& job_id) {
  if (shut_down_) return;  // the store is closing; the job resumes at the next start
  std::vector<OpResultRecord> rows;
  bool rescheduled = false;
  {
    absl::MutexLock l(&mu_);
    auto it = active_.find(job_id);
    if (it == active_.end()) return;
    ActiveJob& job = *it->second;
    if (job.fuzzy && !job.fuzzy_pass_done) {
      // Pair what exact matching left over by the name without call count, in dump order.
      job.fuzzy_pass_done = true;
      std::map<std::string, std::vector<uint32_t>> by_fuzzy;  // golden slots by fuzzy name
      std::vector<uint32_t> golden_order(job.golden_slots.size());
      for (uint32_t i = 0; i < golden_order.size(); ++i) golden_order[i] = i;
      auto by_index = [](const std::vector<ActiveJob::Slot>& slots) {
        return [&slots](uint32_t a, uint32_t b) { return slots[a].item->index < slots[b].item->index; };
      };
      std::sort(golden_order.begin(), golden_order.end(), by_index(job.golden_slots));
      for (uint32_t gi : golden_order) {
        const ActiveJob::Slot& gs = job.golden_slots[gi];
        if (!gs.paired) by_fuzzy[FuzzyName(gs.item->name)].push_back(gi);
      }
      std::vector<uint32_t> targets;
      for (uint32_t i = 0; i < job.target_slots.size(); ++i) {
        if (!job.target_slots[i].done) targets.push_back(i);
      }
      std::sort(targets.begin(), targets.end(), by_index(job.target_slots));
      bool scheduled = false;
      for (uint32_t ti : targets) {
        const ItemRecord& t = *job.target_slots[ti].item;
        auto f = by_fuzzy.find(FuzzyName(t.name));
        if (f == by_fuzzy.end()) continue;
        for (uint32_t gi : f->second) {
          ActiveJob::Slot& gs = job.golden_slots[gi];
          if (gs.paired) continue;
          if (!Incompatibility(t, *gs.item, job.pairing).empty()) continue;
          gs.paired = true;
          job.note.erase(t.name);
          job.ready.push_back({ti, gi, true});
          scheduled = true;
          break;
        }
      }
      if (scheduled) {
        job.finalizing = false;  // finalised again once these pairs are done
        rescheduled = true;
      }
    }
    for (const ActiveJob::Slot& ts : job.target_slots) {
      if (rescheduled) break;
      if (ts.done) continue;
      const std::string& name = ts.item->name;
      const absl::string_view key = job.KeyOf(name);
      auto n = job.note.find(name);
      const std::string why = n != job.note.end() ? n->second : absl::StrCat("no golden item named '", key, "'");
      rows.push_back(MakeResult(job_id, ts.item.get(), nullptr, CompareItems(nullptr, nullptr, DumpMode::kTensor,
                                                                        job.config->base, why)));
    }
    for (const ActiveJob::Slot& gs : job.golden_slots) {
      if (rescheduled) break;
      if (gs.paired) continue;
      const std::string& name = gs.item->name;
      const bool has_target = job.target.contains(name);
      OpResultRecord rec = MakeResult(
          job_id, nullptr, gs.item.get(),
          CompareItems(nullptr, nullptr, DumpMode::kTensor, job.config->base,
                       has_target ? "the target item with this name is not comparable"
                                  : "no target item with this name"));
      if (has_target || job.resumed_done.contains(name)) rec.name = "golden:" + name;
      rows.push_back(std::move(rec));
    }
  }
  if (rescheduled) {
    Pump();
    return;
  }
  // Store the unmatched rows (target rows, then golden-only ones, each in dump order), then
  // analyse culprits over every target row in dump order.
  std::sort(rows.begin(), rows.end(),
            [](const OpResultRecord& a, const OpResultRecord& b) { return a.index < b.index; });
  // A few thousand rows per write (one transaction, one sync), not one write each.
  absl::Status st;
  for (size_t first = 0; first < rows.size(); first += kFinalRowsPerWrite) {
    st.Update(store_->WriteSync(
        Store::UpsertOpResults(absl::MakeConstSpan(rows).subspan(first, kFinalRowsPerWrite))));
  }
  JobRecord final_rec;
  std::vector<std::pair<int64_t, CulpritStatus>> statuses;
  std::string golden_run, target_run;
  {
    absl::MutexLock l(&mu_);
    auto it = active_.find(job_id);
    if (it == active_.end()) return;
    ActiveJob& job = *it->second;
    for (const OpResultRecord& r : rows) {
      job.rec.counts[static_cast<size_t>(r.result.verdict)]++;
      job.rec.pairs_done++;
      if (r.index < kGoldenOnlyIndexBase) {
        job.verdicts[r.index] = {r.api, r.role, r.result.verdict};
      }
    }
    std::vector<CulpritInput> input;
    input.reserve(job.verdicts.size());
    for (const auto& [idx, v] : job.verdicts) input.push_back({v.api, v.role, v.verdict});
    std::vector<size_t> op_of_item;
    const std::vector<OpAnalysis> ops = AnalyzeCulprits(input, &op_of_item);
    for (const OpAnalysis& op : ops) {
      if (op.status == OpStatus::kCulprit) {
        if (job.rec.first_culprit.empty()) job.rec.first_culprit = op.api;
        break;
      }
    }
    statuses.reserve(job.verdicts.size());
    size_t i = 0;
    for (const auto& [idx, v] : job.verdicts) {
      const OpStatus s = ops[op_of_item[i++]].status;
      if (s != OpStatus::kNone) {
        statuses.emplace_back(idx, s == OpStatus::kCulprit ? CulpritStatus::kCulprit
                                                            : CulpritStatus::kPropagated);
      }
    }
    // The live record stays RUNNING until the job leaves active_, so that nobody sees it DONE
    // while it still holds its runs.
    final_rec = job.rec;
    final_rec.pairs_total = final_rec.pairs_done;
    final_rec.finished_at_ms = NowMs();
    if (st.ok()) {
      final_rec.state = JobState::kDone;
    } else {
      final_rec.state = JobState::kFailed;
      final_rec.error = std::string(st.message());
    }
    golden_run = job.rec.golden_run_id;
    target_run = job.rec.target_run_id;
  }
  NotifyResults(job_id, rows, golden_run, target_run);
  // The culprit marks and the final record in one transaction (one sync, and the job is never
  // stored finished without its marks). If that fails, the job's failure is stored alone.
  absl::Status s2 = store_->WriteSync(
      [marks = Store::SetCulprits(job_id, std::move(statuses)),
       record = Store::UpdateJob(final_rec)](Database& db) -> absl::Status {
        PARITY_RETURN_IF_ERROR(marks(db));
        return record(db);
      });
  if (!s2.ok()) {
    if (final_rec.state == JobState::kDone) {
      final_rec.state = JobState::kFailed;
      final_rec.error = std::string(s2.message());
    }
    store_->WriteSync(Store::UpdateJob(final_rec)).IgnoreError();
  }
  std::unique_ptr<ActiveJob> retired;  // freed after the lock is released
  {
    absl::MutexLock l(&mu_);
    retired = RetireLocked(job_id, final_rec);
  }
  retired.reset();
  const int64_t* c = final_rec.counts.data();
  LogLine(final_rec.state == JobState::kDone ? LogLevel::kInfo : LogLevel::kError, "core", "job finished",
          absl::StrCat("job=", job_id, " state=", static_cast<int>(final_rec.state), " pass=", c[0],
                       " warn=", c[1], " fail=", c[2], " error=", c[3], " unmatched=", c[4],
                       " first_culprit=\"", final_rec.first_culprit, "\""));
  NotifyJob(final_rec);
}

absl::StatusOr<JobRecord> Core::SubmitJob(const std::string& golden_run_id,
                                          const std::string& target_run_id, int policy,
                                          int match_mode, const std::string& config_json) {
  PARITY_ASSIGN_OR_RETURN(RunRecord golden, store_->GetRun(golden_run_id));
  PARITY_ASSIGN_OR_RETURN(RunRecord target, store_->GetRun(target_run_id));
  if (golden.side != Side::kGolden) {
    return absl::FailedPreconditionError(absl::StrCat("run ", golden_run_id, " is not a golden run"));
  }
  if (target.side != Side::kTarget) {
    return absl::FailedPreconditionError(absl::StrCat("run ", target_run_id, " is not a target run"));
  }
  if (golden.project != target.project) {
    return absl::FailedPreconditionError(absl::StrCat("runs belong to different projects ('",
                                                      golden.project, "' and '", target.project, "')"));
  }
  JobRecord rec;
  rec.job_id = NewId("job");
  rec.project = target.project;
  rec.golden_run_id = golden_run_id;
  rec.target_run_id = target_run_id;
  rec.policy = policy;
  rec.match_mode = match_mode;
  rec.config_json = config_json;
  rec.state = JobState::kRunning;
  rec.created_at_ms = NowMs();
  return StartJob(std::move(rec), true);
}

absl::StatusOr<JobRecord> Core::StartJob(JobRecord rec, bool is_new) {
  CompareConfig config;
  if (!rec.config_json.empty()) {
    absl::StatusOr<Json> j = ParseJson(rec.config_json);
    if (!j.ok()) return absl::InvalidArgumentError(absl::StrCat("config_json: ", j.status().message()));
    PARITY_ASSIGN_OR_RETURN(config, ParseCompareConfig(*j));
  }
  if (rec.policy >= 1 && rec.policy <= 3) config.base.kind = static_cast<PolicyKind>(rec.policy - 1);
  if (rec.match_mode == 2) config.fuzzy_match = true;
  if (rec.match_mode == 1) config.fuzzy_match = false;
  if (is_new) PARITY_RETURN_IF_ERROR(store_->WriteSync(Store::InsertJob(rec)));

  auto job = std::make_unique<ActiveJob>();
  job->rec = rec;
  job->fuzzy = config.fuzzy_match;
  job->mapping.insert(config.mapping.begin(), config.mapping.end());
  job->pairing.mapping = config.mapping;
  job->config = std::make_shared<const CompareConfig>(std::move(config));
  const std::string id = rec.job_id;
  {
    absl::MutexLock l(&mu_);
    active_[id] = std::move(job);
  }
  // Results already stored (a resumed job) count as done before any item is paired.
  std::vector<OpResultRecord> existing;
  if (!is_new) {
    int64_t total = 0;
    absl::StatusOr<std::vector<OpResultRecord>> ex = store_->ListOpResults(id, OpResultFilter(), 0, INT64_MAX, &total);
    if (ex.ok()) existing = std::move(*ex);
  }
  absl::StatusOr<RunRecord> gr = store_->GetRun(rec.golden_run_id);
  absl::StatusOr<RunRecord> tr = store_->GetRun(rec.target_run_id);
  std::unique_ptr<ActiveJob> dropped;  // freed after the lock is released
  {
    absl::MutexLock l(&mu_);
    auto it = active_.find(id);
    if (it == active_.end()) return rec;
    if (!gr.ok() || !tr.ok()) {
      dropped = std::move(it->second);
      active_.erase(it);
      return !gr.ok() ? gr.status() : tr.status();
    }
    ActiveJob& j = *it->second;
    // Sized once for what the runs hold now (growing a table rehashes every name in it).
    const size_t golden_n = static_cast<size_t>(std::max<int64_t>(gr->item_count, 0));
    const size_t target_n = static_cast<size_t>(std::max<int64_t>(tr->item_count, 0));
    j.golden.reserve(golden_n);
    j.target.reserve(target_n);
    if (!j.mapping.empty()) j.target_by_key.reserve(target_n);
    j.golden_slots.reserve(golden_n);
    j.target_slots.reserve(target_n);
    for (const OpResultRecord& r : existing) {
      j.resumed_done.insert(r.name);
      j.rec.counts[static_cast<size_t>(r.result.verdict)]++;
      j.rec.pairs_done++;
      if (!r.golden_name.empty()) j.resumed_paired.insert(r.golden_name);
      if (r.index < kGoldenOnlyIndexBase) {
        j.verdicts[r.index] = {r.api, r.role, r.result.verdict};
      }
    }
  }
  // Load what is already stored; items arriving meanwhile are added by OnItemDurable. Both runs
  // are read at once, on two of the store's reader connections, and paired batch by batch as
  // they are read, so that comparisons start while the rest still loads. (The job cannot
  // finalise before `loading` is cleared below.) A complete run's items come from, or go to,
  // run_items_.
  auto load = [this, &id](const RunRecord& run, bool golden) -> absl::Status {
    auto add = [&](absl::Span<const ItemPtr> batch) {
      {
        absl::MutexLock l(&mu_);
        auto it = active_.find(id);
        if (it != active_.end()) {
          for (const ItemPtr& item : batch) AddToJob(*it->second, item, golden);
        }
      }
      Pump();
    };
    if (run.complete) {
      if (std::shared_ptr<const RunItemsCache::Items> items = run_items_->Get(run.run_id)) {
        const absl::Span<const ItemPtr> all(*items);
        for (size_t i = 0; i < all.size(); i += kLoadBatch) add(all.subspan(i, kLoadBatch));
        return absl::OkStatus();
      }
    }
    const uint64_t epoch = run_items_->epoch();
    auto all = std::make_shared<RunItemsCache::Items>();
    size_t added = 0;
    PARITY_RETURN_IF_ERROR(store_->VisitItems(run.run_id, [&](const ItemRecord& it) {
      all->push_back(std::make_shared<const ItemRecord>(it));
      if (all->size() - added == kLoadBatch) {
        add(absl::Span<const ItemPtr>(*all).subspan(added));
        added = all->size();
      }
    }));
    add(absl::Span<const ItemPtr>(*all).subspan(added));
    if (run.complete) run_items_->Put(run.run_id, std::move(all), epoch);
    return absl::OkStatus();
  };
  absl::Status golden_loaded;
  std::thread golden_loader([&] { golden_loaded = load(*gr, true); });
  const absl::Status target_loaded = load(*tr, false);
  golden_loader.join();
  {
    absl::MutexLock l(&mu_);
    auto it = active_.find(id);
    if (it == active_.end()) return rec;
    if (!golden_loaded.ok() || !target_loaded.ok()) {
      dropped = std::move(it->second);
      active_.erase(it);
      return !golden_loaded.ok() ? golden_loaded : target_loaded;
    }
    ActiveJob& j = *it->second;
    j.golden_complete = j.golden_complete || gr->complete;
    j.target_complete = j.target_complete || tr->complete;
    j.loading = false;
    rec = j.rec;
    MaybeFinalize(j);
  }
  Pump();
  return rec;
}

absl::StatusOr<JobRecord> Core::CancelJob(const std::string& job_id) {
  JobRecord rec;
  std::unique_ptr<ActiveJob> retired;  // freed after the lock is released
  {
    absl::MutexLock l(&mu_);
    auto it = active_.find(job_id);
    if (it != active_.end()) {
      rec = it->second->rec;
      rec.state = JobState::kCancelled;
      rec.finished_at_ms = NowMs();
      retired = RetireLocked(job_id, rec);
    }
  }
  if (rec.job_id.empty()) {
    PARITY_ASSIGN_OR_RETURN(JobRecord stored, store_->GetJob(job_id));
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " is already finished"));
  }
  PARITY_RETURN_IF_ERROR(store_->WriteSync(Store::UpdateJob(rec)));
  NotifyJob(rec);
  return rec;
}

bool Core::RunHasActiveJob(const std::string& run_id) {
  absl::MutexLock l(&mu_);
  for (const auto& [id, job] : active_) {
    if (job->rec.golden_run_id == run_id || job->rec.target_run_id == run_id) return true;
  }
  return false;
}

absl::StatusOr<JobRecord> Core::GetJob(const std::string& job_id) {
  {
    absl::MutexLock l(&mu_);
    auto it = active_.find(job_id);
    if (it != active_.end()) return LiveRecord(*it->second);
    auto f = finished_.find(job_id);
    if (f != finished_.end()) return f->second;
  }
  return store_->GetJob(job_id);
}

std::unique_ptr<Core::ActiveJob> Core::RetireLocked(const std::string& job_id,
                                                    const JobRecord& final_rec) {
  std::unique_ptr<ActiveJob> retired;
  auto it = active_.find(job_id);
  if (it != active_.end()) {
    retired = std::move(it->second);
    active_.erase(it);
  }
  if (finished_.insert_or_assign(job_id, final_rec).second) finished_order_.push_back(job_id);
  while (finished_order_.size() > kFinishedJobsKept) {
    finished_.erase(finished_order_.front());
    finished_order_.pop_front();
  }
  return retired;
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
    if (spool_->Contains(key)) return key;
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
        "the data directory's disk has ", *free_bytes, " bytes free, below min_free_disk_bytes=",
        options_.min_free_disk_bytes, "; new uploads are refused until space is freed"));
  }
  return absl::OkStatus();
}

void Core::AppendGauges(std::vector<Gauge>* out) {
  size_t jobs;
  {
    absl::MutexLock l(&mu_);
    jobs = active_.size();
  }
  out->push_back({"jobs_running", jobs, 0, 0, false, false, ""});
  out->push_back({"compare_queue", compare_pool_->queued(), compare_pool_->queued_high_water(),
                  options_.compare_queue, false, false, "compare_queue"});
  out->push_back({"store_pending_writes", store_->pending_writes(),
                  store_->pending_writes_high_water(), options_.max_pending_writes, false, false,
                  "max_pending_writes"});
  const HeldBlobs::Counters held = held_blobs_->counters();
  out->push_back({"held_blob_bytes", held.held_bytes + held.reserved_bytes, held.peak_bytes,
                  options_.held_blob_bytes, false, true, "held_blob_bytes"});
  out->push_back({"spool_stage_bytes", spool_->stage_bytes_in_use(),
                  spool_->stage_bytes_high_water(), options_.spool_stage_bytes, false, true,
                  "spool_stage_bytes"});
  out->push_back({"run_cache_items", run_items_->items(), 0, options_.run_cache_items, false, false,
                  "run_cache_items"});
  out->push_back({"spool_bytes", spool_->used_bytes(), 0, options_.spool_quota_bytes, false, true,
                  "spool_quota_bytes"});
  if (absl::StatusOr<uint64_t> free_bytes = FreeDiskBytes(); free_bytes.ok()) {
    out->push_back({"disk_free_bytes", *free_bytes, 0, options_.min_free_disk_bytes, true, true,
                    "min_free_disk_bytes"});
  }
}

}  // namespace parity
