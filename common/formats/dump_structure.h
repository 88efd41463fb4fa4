// What msprobe writes beside dump.json about where each entry comes from: stack.json (the code
// that called each API) and construct.json (each module's and API's enclosing module). Shown,
// never used for pairing (as msprobe uses them).
#ifndef PARITY_COMMON_FORMATS_DUMP_STRUCTURE_H_
#define PARITY_COMMON_FORMATS_DUMP_STRUCTURE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace parity {

inline constexpr char kStackJson[] = "stack.json";
inline constexpr char kConstructJson[] = "construct.json";
// The largest stack.json or construct.json read or uploaded (a model of a million APIs writes
// some hundreds of MB of stacks).
inline constexpr size_t kMaxStructureFileBytes = size_t{1} << 30;

struct DumpStructure {
  // Entry name ("Functional.relu.0.forward") -> its NPU_Stack_Info text: the stack string of
  // the current format ({"0": [[names...], "stack"], ...}), or Python's str() of the list of
  // lines of the old one ({name: [lines]}).
  absl::flat_hash_map<std::string, std::string> stacks;
  // construct.json in file order: node -> its parent ("" for null, the first element of
  // Megatron's [parent, micro_step] pairs). Nodes are module entries
  // ("Module.conv1.Conv2d.forward.0") and, at level mix, APIs.
  std::vector<std::pair<std::string, std::string>> parents;
  // A stack.json was there (msprobe then writes its NPU_Stack_Info column, even if empty).
  bool has_stack_json = false;
};

// INVALID_ARGUMENT naming the file (`label`) and what is wrong (not JSON, not an object, a value
// of the wrong type), as msprobe refuses such files.
absl::Status ParseStackJson(absl::string_view text, DumpStructure* out, absl::string_view label = kStackJson);
absl::Status ParseConstructJson(absl::string_view text, DumpStructure* out,
                                absl::string_view label = kConstructJson);

// `s.stacks` as a stack.json of msprobe's current format ({"0": [[name], "stack"], ...}, names
// in byte order), which ParseStackJson reads back to the same stacks: what parity-agent sends for
// a dump whose stacks it made (a TorchAir GE dump's op lines).
std::string StackJsonText(const DumpStructure& s);

// The stack of entry `api`: its own, or, for a backward entry without one, its forward
// entry's (where the op was called). "" when none.
std::string StackOf(const DumpStructure& s, absl::string_view api);
// The entries whose stack StackOf shows for `api`, in order: itself, then its forward entry
// when it is a backward one.
std::vector<std::string> StackCandidates(absl::string_view api);

// "Module.m.C" for a module's forward node "Module.m.C.forward.N"; "" for any other name.
std::string ModuleOfForwardNode(absl::string_view node);

// Where a tree shows parameter gradients: for each node of `s.parents`, in order, the
// parameters_grad entry of its module ("Module.m.C.parameters_grad") on the module's first
// forward node, "" on every other node.
std::vector<std::string> GradientEntries(const DumpStructure& s);

// Reads `dir`/stack.json and `dir`/construct.json when they exist (either may be absent).
absl::StatusOr<DumpStructure> ReadDumpStructure(const std::string& dir);

}  // namespace parity

#endif  // PARITY_COMMON_FORMATS_DUMP_STRUCTURE_H_
