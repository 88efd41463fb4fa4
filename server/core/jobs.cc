// Core's jobs: live pairing of a job's items, scheduling comparisons, finalising (unmatched
// rows, culprit analysis), starting, cancelling and reading jobs.
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

#include "server/core/active_job.h"

namespace parity {

using core_internal::Incompatibility;
using core_internal::MakeResult;
using core_internal::NewId;
using core_internal::NowMs;
using core_internal::PairMode;

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
  auto add_golden = [&](const ItemPtr& g, bool in_run) {
    if (job.golden.contains(g->name)) return;
    const uint32_t gi = job.AddSlot(/*golden_side=*/true, g);
    job.golden_slots[gi].in_run = in_run;
    const int64_t ti = job.TargetForKey(g->name);
    if (ti >= 0) try_pair(static_cast<uint32_t>(ti), gi);
  };
  if (golden) return add_golden(item_ptr, false);
  if (job.pairing.in_run_goldens && job.in_run_wanted.contains(item.name)) return add_golden(item_ptr, true);
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
  const bool in_run = job.pairing.in_run_goldens && !item.in_run_golden.empty() &&
                      item.in_run_golden != item.name && !job.mapping.contains(item.name);
  if (in_run) {
    job.in_run_key.emplace(item.name, item.in_run_golden);
    job.in_run_wanted.insert(item.in_run_golden);
  }
  const uint32_t ti = job.AddSlot(/*golden_side=*/false, item_ptr);
  const absl::string_view key = job.KeyOf(item.name);
  if (!job.mapping.empty() || in_run) job.target_by_key[key] = ti;
  job.live_pairs_total = -1;
  if (in_run) {
    // Its golden arrived before it, as a target item: it moves to the golden side (no row).
    auto g = job.target.find(key);
    if (g != job.target.end() && !job.target_slots[g->second].done && !job.target_slots[g->second].in_flight) {
      ActiveJob::Slot& moved = job.target_slots[g->second];
      moved.done = true;
      job.target.erase(g);
      return add_golden(moved.item, true);
    }
  }
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
        ComparePair p{job->target_slots[rp.target].item, job->golden_slots[rp.golden].item, rp.target, rp.fuzzy,
                      rp.ready_ns};
        bytes += p.target->byte_length + p.golden->byte_length;
        group.push_back(std::move(p));
      }
      const size_t n = group.size();
      if (!compare_pool_->TrySubmit([this, job_id = id, mode = job->runs_mode, group = std::move(group),
                                     cfg = job->config] {
            RunCompares(job_id, mode, group, *cfg);
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

void Core::FetchShared(const ItemRecord& r, DumpItem* d) {
  if (d->raw_data_path.empty() || r.inline_data || r.blob.empty()) return;
  absl::Status s = shared_blobs_->Fetch(r.blob, r.byte_length);
  if (s.ok()) return;
  LogLine(LogLevel::kWarning, "core", "cannot fetch a shared blob",
          absl::StrCat("blob=", r.blob, " error=", LogQuote(s.message())));
  d->read_error = absl::Status(s.code(), absl::StrCat("tensor data unavailable from the shared blob store: ",
                                                      s.message()));
}

void Core::RunCompares(const std::string& job_id, DumpMode runs_mode, const std::vector<ComparePair>& pairs,
                       const CompareConfig& config) {
  auto results = std::make_shared<std::vector<OpResultRecord>>();
  results->reserve(pairs.size());
  auto slots = std::make_shared<std::vector<ComparedSlot>>();  // each result's target slot
  slots->reserve(pairs.size());
  for (const ComparePair& p : pairs) {
    slots->push_back({p.target_slot, p.ready_ns});
    const ItemRecord& t = *p.target;
    const ItemRecord& g = *p.golden;
    DumpItem dt = ToDumpItem(t, spool_.get());
    DumpItem dg = ToDumpItem(g, spool_.get());
    if (shared_blobs_) {
      FetchShared(t, &dt);
      FetchShared(g, &dg);
    }
    // Blobs just received are compared from memory (held for this); the rest is read.
    if (dt.raw_direct) dt.raw_bytes = held_blobs_->Take(t.blob);
    if (dg.raw_direct) {
      dg.raw_bytes = g.blob == t.blob && dt.raw_bytes.owner ? dt.raw_bytes : held_blobs_->Take(g.blob);
    }
    const PolicyConfig& policy = config.PolicyFor(t.name, t.api, t.op_type);
    CheckResult r = CompareItems(&dt, &dg, PairMode(t, g, runs_mode), policy, "");
    if (p.fuzzy && t.name != g.name) r.message += kFuzzyMatchNote;
    results->push_back(MakeResult(job_id, &t, &g, std::move(r)));
  }
  // One write for the group: stored together or not at all.
  store_->Write(
      Store::UpsertOpResults(std::shared_ptr<const std::vector<OpResultRecord>>(results)),
      [this, job_id, results, slots = std::shared_ptr<const std::vector<ComparedSlot>>(std::move(slots))](const absl::Status& s) {
        if (!results_pool_->TrySubmit([this, job_id, results, slots, s] { OnResultsStored(job_id, *results, *slots, s); })) {
          OnResultsStored(job_id, *results, *slots, s);  // its queue is full, or it is shutting down
        }
      });
}

void Core::OnResultsStored(const std::string& job_id, const std::vector<OpResultRecord>& rs,
                           const std::vector<ComparedSlot>& slots, const absl::Status& s) {
  std::string golden_run, target_run;
  JobRecord failed;
  bool job_failed = false, finalize = false;
  std::unique_ptr<ActiveJob> retired;  // freed after the lock is released
  {
    absl::MutexLock l(&mu_);
    auto it = active_.find(job_id);
    if (it == active_.end()) return;  // cancelled meanwhile
    ActiveJob& job = *it->second;
    for (const ComparedSlot& cs : slots) job.target_slots[cs.slot].in_flight = false;
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
      for (const ComparedSlot& cs : slots) job.target_slots[cs.slot].done = true;
      for (const OpResultRecord& r : rs) {
        job.rec.counts[static_cast<size_t>(r.result.verdict)]++;
        job.rec.pairs_done++;
        if (r.index < kGoldenOnlyIndexBase) {
          job.verdicts[r.index] = ActiveJob::JobVerdict::Of(r);
        }
      }
      golden_run = job.rec.golden_run_id;
      target_run = job.rec.target_run_id;
      finalize = MaybeFinalize(job, /*submit=*/false);
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
  if (Metrics* m = options_.metrics) {
    const int64_t now = core_internal::SteadyNowNs();
    for (size_t i = 0; i < rs.size() && i < slots.size(); ++i) {
      m->PairCompared(rs[i].result.policy, rs[i].result.verdict, static_cast<double>(now - slots[i].ready_ns) * 1e-9);
    }
  }
  // The job's end is announced after its last verdicts (an upload's stream ends with it).
  if (finalize) control_pool_->TrySubmit([this, job_id] { Finalize(job_id); });
  Pump();
}

bool Core::MaybeFinalize(ActiveJob& job, bool submit) {
  if (job.loading || job.finalizing || !job.golden_complete || !job.target_complete) return false;
  if (!job.awaiting.empty()) {
    // The upload ended without the data: compare what there is (statistics or CRC).
    for (const auto& [ti, gi] : job.awaiting) job.ready.push_back({ti, gi, false});
    job.awaiting.clear();
    return false;  // the caller pumps; finalised once these are done
  }
  if (!job.ready.empty() || job.in_flight != 0) return false;
  job.finalizing = true;
  if (!submit) return true;
  const std::string id = job.rec.job_id;
  control_pool_->TrySubmit([this, id] { Finalize(id); });  // unbounded: never refused while running
  return true;
}

bool Core::ScheduleFuzzyPairs(ActiveJob& job) {
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
      if (gs.paired || !Incompatibility(t, *gs.item, job.pairing).empty()) continue;
      gs.paired = true;
      job.note.erase(t.name);
      job.ready.push_back({ti, gi, true});
      scheduled = true;
      break;
    }
  }
  return scheduled;
}

std::vector<OpResultRecord> Core::UnmatchedRows(const std::string& job_id, const ActiveJob& job) {
  std::vector<OpResultRecord> rows;
  for (const ActiveJob::Slot& ts : job.target_slots) {
    if (ts.done) continue;
    const std::string& name = ts.item->name;
    auto n = job.note.find(name);
    const std::string why =
        n != job.note.end() ? n->second : absl::StrCat("no golden item named '", job.KeyOf(name), "'");
    rows.push_back(MakeResult(job_id, ts.item.get(), nullptr,
                              UnmatchedResult(job.runs_mode, MissingSide::kGolden, why)));
  }
  for (const ActiveJob::Slot& gs : job.golden_slots) {
    if (gs.paired) continue;
    const std::string& name = gs.item->name;
    if (gs.in_run) {  // a target item after all
      rows.push_back(MakeResult(job_id, gs.item.get(), nullptr,
                                UnmatchedResult(job.runs_mode, MissingSide::kGolden,
                                                absl::StrCat("no golden item named '", name, "'"))));
      continue;
    }
    const bool has_target = job.target.contains(name);
    OpResultRecord rec = MakeResult(job_id, nullptr, gs.item.get(),
                                    UnmatchedResult(job.runs_mode, MissingSide::kTarget,
                                                    has_target ? "the target item with this name is not comparable"
                                                               : job.pairing.no_target_note));
    if (has_target || job.resumed_done.contains(name)) rec.name = "golden:" + name;
    rows.push_back(std::move(rec));
  }
  std::sort(rows.begin(), rows.end(),
            [](const OpResultRecord& a, const OpResultRecord& b) { return a.index < b.index; });
  return rows;
}

std::optional<DumpStructure> RunModuleTree(Store& store, const std::string& run_id) {
  absl::StatusOr<std::optional<std::string>> text = store.GetRunFile(run_id, kConstructJson);
  if (!text.ok() || !text->has_value()) return std::nullopt;
  DumpStructure s;
  if (!ParseConstructJson(**text, &s).ok()) return std::nullopt;
  return s;
}

Core::CulpritMarks Core::CountAndAnalyze(ActiveJob& job, const std::vector<OpResultRecord>& rows,
                                         std::string* doc, const ParentList* parents) {
  for (const OpResultRecord& r : rows) {
    job.rec.counts[static_cast<size_t>(r.result.verdict)]++;
    job.rec.pairs_done++;
    if (r.index < kGoldenOnlyIndexBase) job.verdicts[r.index] = ActiveJob::JobVerdict::Of(r);
  }
  std::vector<CulpritInput> input;
  input.reserve(job.verdicts.size());
  for (const auto& [idx, v] : job.verdicts) input.push_back(v.Input());
  std::vector<size_t> op_of_item;
  GrowthFloor floor;
  const std::vector<OpAnalysis> ops = AnalyzeCulprits(input, &op_of_item, &floor, parents);
  if (job.rec.first_culprit.empty()) job.rec.first_culprit = FirstCulprit(ops);
  *doc = CulpritAnalysisJson(ops, floor).Dump();
  CulpritMarks marks;
  size_t i = 0;
  for (const auto& [idx, v] : job.verdicts) {
    const OpStatus s = ops[op_of_item[i++]].status;
    if (s != OpStatus::kNone) {
      marks.emplace_back(idx, s == OpStatus::kCulprit ? CulpritStatus::kCulprit : CulpritStatus::kPropagated);
    }
  }
  return marks;
}

void Core::Finalize(const std::string& job_id) {
  if (shut_down_) return;  // the store is closing; the job resumes at the next start
  std::vector<OpResultRecord> rows;
  bool rescheduled = false;
  std::string target_run_id;
  {
    absl::MutexLock l(&mu_);
    auto it = active_.find(job_id);
    if (it == active_.end()) return;
    ActiveJob& job = *it->second;
    target_run_id = job.rec.target_run_id;
    if (job.fuzzy && !job.fuzzy_pass_done && ScheduleFuzzyPairs(job)) {
      job.finalizing = false;  // finalised again once these pairs are done
      rescheduled = true;
    } else {
      rows = UnmatchedRows(job_id, job);
    }
  }
  if (rescheduled) {
    Pump();
    return;
  }
  // A few thousand rows per write (one transaction, one sync), not one write each.
  absl::Status st;
  for (size_t first = 0; first < rows.size(); first += kFinalRowsPerWrite) {
    st.Update(store_->WriteSync(
        Store::UpsertOpResults(absl::MakeConstSpan(rows).subspan(first, kFinalRowsPerWrite))));
  }
  // The target's module tree, when it carries one: a module enclosing a culprit is none.
  const std::optional<DumpStructure> tree = RunModuleTree(*store_, target_run_id);
  JobRecord final_rec;
  CulpritMarks marks;
  std::string analysis;
  std::string golden_run, target_run;
  {
    absl::MutexLock l(&mu_);
    auto it = active_.find(job_id);
    if (it == active_.end()) return;
    ActiveJob& job = *it->second;
    marks = CountAndAnalyze(job, rows, &analysis, tree && !tree->parents.empty() ? &tree->parents : nullptr);
    // The live record stays RUNNING until the job leaves active_, so that nobody sees it DONE
    // while it still holds its runs.
    final_rec = job.rec;
    final_rec.pairs_total = final_rec.pairs_done;
    final_rec.finished_at_ms = NowMs();
    final_rec.state = st.ok() ? JobState::kDone : JobState::kFailed;
    if (!st.ok()) final_rec.error = std::string(st.message());
    golden_run = job.rec.golden_run_id;
    target_run = job.rec.target_run_id;
  }
  NotifyResults(job_id, rows, golden_run, target_run);
  // What the job's listings and plot are read from once it is finished (without it, from every
  // row: slower for a big job, not wrong).
  std::shared_ptr<const JobIndexParts> index;
  if (final_rec.state == JobState::kDone) {
    absl::StatusOr<std::shared_ptr<const JobIndexParts>> built = store_->BuildJobIndex(job_id, marks);
    if (built.ok()) {
      index = *std::move(built);
    } else {
      LogLine(LogLevel::kWarning, "core", "job index not built",
              absl::StrCat("job=", job_id, " error=\"", built.status().message(), "\""));
    }
  }
  StoreFinalRecord(job_id, std::move(marks), std::move(analysis), std::move(index), &final_rec);
  if (leases_) store_->ReleaseJobLease(job_id, holder_).IgnoreError();  // a final job needs none
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

std::string Core::PlotMetric(const JobRecord& job) {
  absl::StatusOr<CompareConfig> config = JobConfig(job);
  const std::string main = PolicyMainMetric(config.ok() ? config->base.kind : PolicyKind::kMsprobe);
  // A job whose results lack it (statistics-only dumps): the first sortable metric of its first
  // result.
  int64_t total = 0;
  absl::StatusOr<std::vector<OpResultRecord>> first = store_->ListOpResults(job.job_id, OpResultFilter(), 0, 1, &total);
  if (!first.ok() || first->empty() || (*first)[0].result.Find(main) != nullptr) return main;
  for (const Metric& m : (*first)[0].result.metrics) {
    if (SortableMetricColumn(m.name) >= 0) return m.name;
  }
  return main;
}

void Core::StoreFinalRecord(const std::string& job_id, CulpritMarks marks, std::string doc,
                            std::shared_ptr<const JobIndexParts> index, JobRecord* final_rec) {
  // The culprit marks and analysis, the index and the final record in one transaction (one
  // sync, and the job is never stored finished without its marks). If that fails, the job's
  // failure is stored alone.
  const absl::Status s = store_->WriteSync(
      [marks = Store::SetCulprits(job_id, std::move(marks)), index = Store::StoreJobIndex(job_id, std::move(index)),
       analysis = Store::SetJobAnalysis(job_id, std::move(doc)),
       record = Store::UpdateJob(*final_rec)](Database& db) -> absl::Status {
        PARITY_RETURN_IF_ERROR(marks(db));
        PARITY_RETURN_IF_ERROR(index(db));
        PARITY_RETURN_IF_ERROR(analysis(db));
        return record(db);
      });
  if (s.ok()) return;
  if (final_rec->state == JobState::kDone) {
    final_rec->state = JobState::kFailed;
    final_rec->error = std::string(s.message());
  }
  store_->WriteSync(Store::UpdateJob(*final_rec)).IgnoreError();
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

absl::StatusOr<CompareConfig> JobConfig(const JobRecord& rec) {
  CompareConfig config;
  if (!rec.config_json.empty()) {
    absl::StatusOr<Json> j = ParseJson(rec.config_json);
    if (!j.ok()) return absl::InvalidArgumentError(absl::StrCat("config_json: ", j.status().message()));
    PARITY_ASSIGN_OR_RETURN(config, ParseCompareConfig(*j));
  }
  if (rec.policy >= 1 && rec.policy <= 3) config.base.kind = static_cast<PolicyKind>(rec.policy - 1);
  if (rec.match_mode == 2) config.fuzzy_match = true;
  if (rec.match_mode == 1) config.fuzzy_match = false;
  return config;
}

void Core::ReserveAndResume(ActiveJob& j, const RunRecord& golden, const RunRecord& target,
                      const std::vector<OpResultRecord>& existing) {
  const size_t golden_n = static_cast<size_t>(std::max<int64_t>(golden.item_count, 0));
  const size_t target_n = static_cast<size_t>(std::max<int64_t>(target.item_count, 0));
  j.golden.reserve(golden_n);
  j.target.reserve(target_n);
  if (!j.mapping.empty()) j.target_by_key.reserve(target_n);
  j.golden_slots.reserve(golden_n);
  j.target_slots.reserve(target_n);
  // Counted from the stored results alone: the stored row may carry a running job's progress
  // (Core::PublishProgress) that these results already make up.
  j.rec.counts = {};
  j.rec.pairs_done = 0;
  for (const OpResultRecord& r : existing) {
    j.resumed_done.insert(r.name);
    j.rec.counts[static_cast<size_t>(r.result.verdict)]++;
    j.rec.pairs_done++;
    if (!r.golden_name.empty()) j.resumed_paired.insert(r.golden_name);
    if (r.index < kGoldenOnlyIndexBase) j.verdicts[r.index] = ActiveJob::JobVerdict::Of(r);
  }
}

std::unique_ptr<Core::ActiveJob> Core::MakeActiveJob(const JobRecord& rec, CompareConfig config) {
  // A run's layout never changes; read here for the pairing rules, which must be in place
  // before the job is visible to arriving items.
  absl::StatusOr<RunRecord> golden_layout = store_->GetRun(rec.golden_run_id);
  absl::StatusOr<RunRecord> target_layout = store_->GetRun(rec.target_run_id);
  auto job = std::make_unique<ActiveJob>();
  job->rec = rec;
  job->fuzzy = config.fuzzy_match;
  job->mapping.insert(config.mapping.begin(), config.mapping.end());
  // The pairing rules of the layouts the runs were read from, as `parity compare` applies them
  // (one function for both). A run stored before its layout was kept pairs as an msprobe dump,
  // the rule then.
  auto layout = [](const absl::StatusOr<RunRecord>& r) {
    return !r.ok() || r->dump_format.empty() ? std::string("msprobe") : r->dump_format;
  };
  job->pairing = PairingOptionsFor(layout(golden_layout), layout(target_layout), config.fuzzy_match,
                                   config.mapping);
  ApplyLayoutRules(layout(golden_layout), layout(target_layout), &config);
  auto mode = [](const absl::StatusOr<RunRecord>& r) {
    return r.ok() ? r->dump_mode : std::optional<DumpMode>();
  };
  job->runs_mode = mode(target_layout).value_or(mode(golden_layout).value_or(DumpMode::kTensor));
  job->config = std::make_shared<const CompareConfig>(std::move(config));
  return job;
}

absl::Status Core::LoadRunIntoJob(const std::string& job_id, const RunRecord& run, bool golden) {
  auto add = [&](absl::Span<const ItemPtr> batch) {
    {
      absl::MutexLock l(&mu_);
      auto it = active_.find(job_id);
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
}

absl::StatusOr<JobRecord> Core::StartJob(JobRecord rec, bool is_new) {
  PARITY_ASSIGN_OR_RETURN(CompareConfig config, JobConfig(rec));
  if (is_new) {
    // Leased before the row exists, so that no other daemon's takeover sees it unleased.
    PARITY_ASSIGN_OR_RETURN(const bool mine, TakeLease(rec.job_id));
    if (!mine) return absl::InternalError(absl::StrCat("job ", rec.job_id, " is leased by another daemon"));
    PARITY_RETURN_IF_ERROR(store_->WriteSync(Store::InsertJob(rec)));
  }
  const std::string id = rec.job_id;
  {
    std::unique_ptr<ActiveJob> job = MakeActiveJob(rec, std::move(config));
    absl::MutexLock l(&mu_);
    active_[id] = std::move(job);
  }
  // Completeness is read now, after the job is in active_, so that a run completing meanwhile
  // is seen one way or the other.
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
    ReserveAndResume(*it->second, *gr, *tr, existing);
  }
  // Load what is already stored; items arriving meanwhile are added by OnItemDurable. Both runs
  // are read at once, on two of the store's reader connections, and paired batch by batch as
  // they are read, so that comparisons start while the rest still loads. (The job cannot
  // finalise before `loading` is cleared below.) A complete run's items come from, or go to,
  // run_items_.
  absl::Status golden_loaded;
  std::thread golden_loader([&] { golden_loaded = LoadRunIntoJob(id, *gr, true); });
  const absl::Status target_loaded = LoadRunIntoJob(id, *tr, false);
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
    if (it != active_.end() && it->second->finalizing) {
      // Every pair is compared and the final record is being written: a cancel now would be
      // acknowledged and then overwritten by DONE.
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " has compared every pair and is finishing; it cannot be cancelled"));
    }
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

}  // namespace parity
