// A job in progress, as Core holds it (server/core/core.cc, jobs.cc), and the helpers both
// files use. Internal to server/core/.
#ifndef PARITY_SERVER_CORE_ACTIVE_JOB_H_
#define PARITY_SERVER_CORE_ACTIVE_JOB_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "common/compare/pairing.h"
#include "server/core/core.h"

namespace parity {
namespace core_internal {

// Milliseconds since the epoch (wall clock).
int64_t NowMs();
// Nanoseconds of the steady clock, for durations.
int64_t SteadyNowNs();
// `prefix`, '-' and 16 random lowercase hex digits ("job-1a2b...").
std::string NewId(const char* prefix);
// The dump mode a pair is compared in, from what each side's item holds; a pair of non-tensor
// arguments, which hold no data to say, in `runs_mode` (what the runs' dumps hold).
DumpMode PairMode(const ItemRecord& t, const ItemRecord& g, DumpMode runs_mode);
// A result row for a pair (or a lone target or golden item).
OpResultRecord MakeResult(const std::string& job_id, const ItemRecord* t, const ItemRecord* g,
                          CheckResult r);
// Why the two items cannot be compared ("" when they can).
std::string Incompatibility(const ItemRecord& t, const ItemRecord& g, const PairingOptions& o);

}  // namespace core_internal

struct Core::ActiveJob {
  JobRecord rec;
  std::shared_ptr<const CompareConfig> config;
  PairingOptions pairing;
  // What the runs' dumps hold (the target's RunMetadata.dump_mode, else the golden's; tensor when
  // neither says): the mode of non-tensor and unmatched rows.
  DumpMode runs_mode = DumpMode::kTensor;
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
    bool in_run = false;     // golden: an item of the target run (ItemRecord::in_run_golden)
  };
  std::vector<Slot> golden_slots, target_slots;
  // Name -> slot index. Hashed, not ordered: every walk that reaches the outside is sorted by
  // dump index. The keys view their slot's item name (re-keyed when an upgrade replaces it).
  absl::flat_hash_map<absl::string_view, uint32_t> golden, target;
  // Mapped key -> target slot; kept only when there is a mapping (without one, a target's key
  // is its name: TargetForKey looks in `target`).
  absl::flat_hash_map<std::string, uint32_t> target_by_key;
  absl::flat_hash_map<std::string, std::string> mapping;  // target name -> golden name
  // When the pairing rules compare items with their in-run goldens (PairingOptions::in_run_goldens):
  // target name -> the name of the target item it is compared with (kept in target_by_key too),
  // and those names, whose items go to the golden side (Slot::in_run) as they arrive.
  absl::flat_hash_map<std::string, std::string> in_run_key;
  absl::flat_hash_set<std::string> in_run_wanted;
  absl::flat_hash_map<std::string, std::string> note;  // target name -> why it is unmatched
  // A resumed job's stored results: their target names count as done, their golden names as
  // paired, when the items arrive. Empty for a new job.
  absl::flat_hash_set<std::string> resumed_done, resumed_paired;
  // Pairs to compare, by slot. The target's item is read from its slot when the pair is
  // scheduled: an upgrade (the same item with its data) may replace it meanwhile.
  struct ReadyPair {
    uint32_t target, golden;
    bool fuzzy;
    int64_t ready_ns = core_internal::SteadyNowNs();  // when both sides were there
  };
  std::deque<ReadyPair> ready;
  size_t in_flight = 0;  // target slots with in_flight set
  absl::flat_hash_map<uint32_t, uint32_t> awaiting;  // target slot -> golden slot, awaiting data
  struct JobVerdict {
    std::string api;
    Role role;
    Verdict verdict;
    double error;  // OpResultRecord::error
    double unit;   // RoundingUnit of the target's dtype

    static JobVerdict Of(const OpResultRecord& r) {
      return {r.api, r.role, r.result.verdict, r.error, r.target_dtype ? RoundingUnit(*r.target_dtype) : 0.0};
    }
    CulpritInput Input() const { return {api, role, verdict, error, unit}; }
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
    // (A lookup hashes the name even in an empty map.)
    if (!mapping.empty()) {
      auto m = mapping.find(target_name);
      if (m != mapping.end()) return m->second;
    }
    if (!in_run_key.empty()) {
      auto k = in_run_key.find(target_name);
      if (k != in_run_key.end()) return k->second;
    }
    return target_name;
  }
  // The slot of the target item whose key is `key`, or -1.
  int64_t TargetForKey(absl::string_view key) const {
    if (!target_by_key.empty()) {
      auto k = target_by_key.find(key);
      if (k != target_by_key.end()) return int64_t{k->second};
    }
    if (!mapping.empty()) return -1;  // every target is in target_by_key
    auto t = target.find(key);
    return t == target.end() ? int64_t{-1} : int64_t{t->second};
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

}  // namespace parity

#endif  // PARITY_SERVER_CORE_ACTIVE_JOB_H_
