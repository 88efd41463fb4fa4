// The comparison engine: pairs two dumps, runs each pair through the policy that the config
// picks for it, and summarises. Used by `parity compare` and by the daemon.
#ifndef PARITY_COMMON_ENGINE_H_
#define PARITY_COMMON_ENGINE_H_

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/checks/compare_config.h"
#include "common/compare/culprit.h"
#include "common/formats/dump.h"
#include "common/checks/verdict.h"

namespace parity {

// msprobe's note appended to the message of a pair matched by fuzzy name.
extern const char kFuzzyMatchNote[];

struct CompareRow {
  int target = -1;  // index into the target dump's items, -1 when none
  int golden = -1;
  PolicyKind policy = PolicyKind::kMsprobe;
  CheckResult result;
};

struct CompareReport {
  DumpMode mode = DumpMode::kTensor;
  PolicyKind policy = PolicyKind::kMsprobe;  // the base policy
  std::vector<CompareRow> rows;              // target dump order, then golden-only items
  std::array<int, 6> counts{};               // indexed by Verdict
  int first_failure = -1;                    // first FAIL or ERROR row in dump order
  std::vector<OpAnalysis> ops;               // culprit analysis of the target's operators
  GrowthFloor growth_floor;                  // the noise floor that analysis used
  std::string first_culprit;                 // API of the first culprit, "" when none

  int count(Verdict v) const { return counts[static_cast<int>(v)]; }
};

// Sets `it`'s statistics from its data when its dump records none (a plain file), as
// parity-agent computes them for parityd; an item whose data cannot be read keeps none.
void FillMissingStats(DumpItem* it);

// Which side of an unmatched item has no counterpart.
enum class MissingSide { kGolden, kTarget };

// The UNMATCHED result of an item without a counterpart: msprobe's "No bench data matched." for
// a target item without a golden one, "No target data matched." for a golden item the target
// lacks, each followed by `note` (why) in parentheses; msprobe's placeholders for `mode`.
CheckResult UnmatchedResult(DumpMode mode, MissingSide missing, const std::string& note);

// Compares one pair of items (either may be null for an unmatched item: UnmatchedResult).
CheckResult CompareItems(const DumpItem* target, const DumpItem* golden, DumpMode mode,
                         const PolicyConfig& policy, const std::string& unmatched_note);

// The rules a layout brings to the policy, applied wherever two runs are compared (CompareDumps,
// parityd's jobs): a TorchAir GE or FX dump on either side decides msprobe rows by the TorchAir
// rule (MsprobeRule::kTorchair) in the base policy and every override.
void ApplyLayoutRules(absl::string_view golden_format, absl::string_view target_format, CompareConfig* config);

// Compares two dumps. INVALID_ARGUMENT when the dumps cannot be compared at all (different
// msprobe tasks, duplicate item names). A target item that other target items are compared with
// (DumpItem::in_run_golden, under the layouts' pairing rules) is moved to `golden`'s items. Deferred .npy items (NpyListing::kNamesOnly) are
// resolved in place (ResolveDeferredNpy) when their pair is compared, and keep no file bytes.
// Pairs are compared on up to `threads` threads (the caller is one of them; fewer when the
// limit on open files would not allow about 80 descriptors each), each taking windows of pairs
// in turn (read ahead together); the report is the same for any count.
// `progress`, when set, is called after each pair with (pairs done, pairs total), one call at a
// time, from any of those threads.
absl::StatusOr<CompareReport> CompareDumps(
    Dump* golden, Dump* target, const CompareConfig& config,
    const std::function<void(size_t, size_t)>& progress = nullptr, int threads = 1);

}  // namespace parity

#endif  // PARITY_COMMON_ENGINE_H_
