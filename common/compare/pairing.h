// Pairs the items of a target run with those of a golden run.
//
// Exact mode joins on the (mapped) item name and, for msprobe dumps, the shape, plus msprobe's
// dtype gate (equal dtypes, or both within {float16, float32, bfloat16}). Fuzzy mode also
// ignores the call count (msprobe -f). Every item appears in exactly one pair; an item with no
// counterpart is paired with -1 and carries a note saying why. A name that occurs twice on one
// side is an INVALID_ARGUMENT error, never a silent pick.
#ifndef PARITY_COMMON_PAIRING_H_
#define PARITY_COMMON_PAIRING_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/formats/dump.h"

namespace parity {

struct PairingOptions {
  bool match_shape = true;
  bool dtype_gate = true;
  bool fuzzy = false;
  std::vector<std::pair<std::string, std::string>> mapping;  // target name -> golden name
  // Why a golden item has no target item of its name, as the unmatched row says it.
  std::string no_target_note = "no target item with this name";
  // Target items naming another target item as their golden (DumpItem::in_run_golden) are
  // compared with it: against a TorchAir FX dump, for a GE target.
  bool in_run_goldens = false;
};

// The pairing rules for a golden and a target dump of the given layouts (Dump::format), as every
// path applies them (parity compare, and parityd's jobs from the layouts their runs were read
// from): msprobe's shape and dtype gates when both are msprobe dumps, by name alone otherwise;
// against a TorchAir GE dump, the unmatched FX tensors' reason names fused ops.
PairingOptions PairingOptionsFor(absl::string_view golden_format, absl::string_view target_format,
                                 bool fuzzy, std::vector<std::pair<std::string, std::string>> mapping);

struct ItemPair {
  int target = -1;  // index into the target dump's items, -1 when none
  int golden = -1;
  bool fuzzy = false;  // paired by the fuzzy name although the names differ
  std::string note;    // why an item is unmatched
};

// Why target item `t` and golden item `g` cannot be paired under `opts` ("" when they can):
// tensor vs non-tensor, different shapes, or msprobe's dtype gate.
std::string PairIncompatibility(const DumpItem& t, const DumpItem& g, const PairingOptions& opts);

// When `opts->in_run_goldens`: moves each target item that another target item names as its
// in-run golden to the end of `golden`, and maps the naming item to it (opts->mapping), so that
// PairItems pairs the two; the moved item has no row of its own. An item whose name `golden`
// already has stays where it is.
void MoveInRunGoldens(std::vector<DumpItem>* target, std::vector<DumpItem>* golden, PairingOptions* opts);

// Pairs in target dump order, followed by the golden items nothing matched.
absl::StatusOr<std::vector<ItemPair>> PairItems(const std::vector<DumpItem>& target,
                                                const std::vector<DumpItem>& golden,
                                                const PairingOptions& opts);

}  // namespace parity

#endif  // PARITY_COMMON_PAIRING_H_
