// TorchAir graph mode (torch.compile with the torchair backend): the GE graph that maps the Graph
// Engine's ops to the FX nodes they implement, and the names both kinds of dump are read under.
//
// A GE op's tensors and an FX node's tensors are named after the FX node, so that two runs pair by
// name whichever side they were uploaded from:
//   - FX dump file {node}-{target}.{INPUT|OUTPUT}.{i}.{timestamp}.npy -> "{node}-{target}.input.{i}"
//     (or ".output.{i}"), API "{node}-{target}";
//   - GE dump file {op_type}.{op_name}.{task}.{stream}.{timestamp}: the op is looked up in the GE
//     graph (dynamo_original_graph_*.txt); its FX node is the one its output_desc's
//     _fx_tensor_name attribute names ("{node}-{target}.OUTPUT.{i}" minus ".OUTPUT.{i}"). A fused
//     op, whose name is the concatenation of the original ops' names (resolved by longest match
//     as msit's torchair_acc_cmp.py does), names its inputs after its first op's FX node and its
//     outputs after its last op's. Input i and output i pair by position, as the reference zips
//     them. An op the graph does not resolve (Cast and TransData that GE inserts, ops of another
//     graph) keeps its GE name: "{op_name}.input.{i}", unmatched in a comparison with an FX dump.
// The API of a GE tensor is its GE op (the unit a culprit names).
#ifndef PARITY_COMMON_FORMATS_TORCHAIR_H_
#define PARITY_COMMON_FORMATS_TORCHAIR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace parity {

// Dump formats (Dump::format) of the two TorchAir layouts.
inline constexpr char kTorchairGeFormat[] = "torchair-ge";
inline constexpr char kTorchairFxFormat[] = "torchair-fx";
bool IsTorchairFormat(absl::string_view format);

struct GeGraphOp {
  std::string name, type;
  std::vector<std::string> inputs;  // as written: "producer:index"
  // The FX node of its last output_desc carrying _fx_tensor_name (the reference keeps the last);
  // "" when none does.
  std::string fx_node;
};

struct GeGraph {
  std::string path;  // the file it was read from ("" when parsed from text)
  std::vector<GeGraphOp> ops;  // in file order
  absl::flat_hash_map<std::string, size_t> by_name;
};

// Parses a GE graph in protobuf text format: `op { name: ... type: ... input: ...
// output_desc { attr { key: "_fx_tensor_name" value { s: ... } } } }` blocks at the top level or
// inside `graph { }` blocks. INVALID_ARGUMENT naming `origin` and the line for malformed text
// (an unterminated string or block, a stray '}', nesting deeper than 64).
absl::StatusOr<GeGraph> ParseGeGraphText(absl::string_view text, absl::string_view origin);

// The graph ops a dumped GE op name stands for: itself when the graph has it, else the longest
// prefix the graph has, then the longest prefix of the rest, and so on (a fused op). The
// resolution stops where no prefix is an op of the graph, or where a prefix is the name of
// another dumped op (`dumped`) that the graph lacks, as the reference's find_longest_name does;
// the ops resolved until then are returned (none when the first part fails).
std::vector<const GeGraphOp*> ResolveGeOp(const GeGraph& graph, absl::string_view op_name,
                                          const absl::flat_hash_set<std::string>& dumped);

// How a dumped GE op's tensors are named: inputs after `input_node`, outputs after
// `output_node` (each "" when the graph gives none: the GE op's own name then), and a line for
// the report's stack column ("GE op Add_2 (Add) <- add_1-aten.add.Tensor", the ops of a fused
// op, or why the op is not resolved).
// A fused op's inputs beyond its first op's: `fused_inputs` names the fused op's inputs in order,
// the inputs of its ops (in order) that no op of the group produces, "{op's FX node}.input.{j}",
// so that they pair with those ops' FX inputs (the reference drops them) and with the same ops'
// inputs in a fusion-off GE dump (as the reference gathers them).
// `self_compared`: an op the graph does not have whose type names a Cast or TransData (ops GE
// inserts): its output i is compared with its own input i against an FX dump, as the reference
// compares them (DumpItem::in_run_golden).
struct GeOpNaming {
  std::string input_node, output_node;
  std::vector<std::string> fused_inputs;
  std::string description;
  bool self_compared = false;
};
GeOpNaming NameGeOp(const GeGraph& graph, absl::string_view op_name, absl::string_view op_type,
                    const absl::flat_hash_set<std::string>& dumped);

// The FX node an _fx_tensor_name names: "{node}-{target}.OUTPUT.{i}" -> "{node}-{target}"; other
// text as it is.
std::string FxNodeOfTensorName(absl::string_view fx_tensor_name);

// An FX dump file name: {node}-{target}.{INPUT|OUTPUT}.{i}.{timestamp}.npy.
struct FxFileName {
  std::string node;  // "{node}-{target}"
  bool input = false;
  int index = 0;
  std::string timestamp;  // digits (msit's are 20 long: compared as numbers by TimestampLess)
};
// Numeric order of two digit strings.
bool TimestampLess(const std::string& a, const std::string& b);
bool ParseFxFileName(absl::string_view filename, FxFileName* out);

// GE graph files: dynamo_original_graph_*.txt (or, when a directory has none,
// dynamo_optimized_*.txt).
bool IsGeGraphFileName(absl::string_view filename);

// The GE graph a directory of GE dump files (one token of one model) was dumped under: the graph
// files in the nearest of its ancestors (itself included, at most 8 levels up) that holds any,
// those whose name carries "rank_{R}_" preferred when the directory lies under a
// worldsize*_global_rank{R} directory; of these, the one that resolves the most of `op_names`.
// NOT_FOUND when there is none; the parse error of a malformed one. Graph files are parsed once
// while they do not change (a process-wide cache of the last 8), for the many token directories
// of one run.
absl::StatusOr<std::shared_ptr<const GeGraph>> FindGeGraphFor(const std::string& dir,
                                                              const std::vector<std::string>& op_names);

// The rank of a worldsize{N}_global_rank{R} directory name; -1 for other names.
int TorchairRankOfDirName(absl::string_view name);

// One comparable unit of a TorchAir dump tree: a token of a rank (of a graph, when there are
// several) and the directory holding its files.
struct TorchairRun {
  std::string path;
  std::string rank;   // "" without rank directories
  std::string token;  // GE: the token directory's name; FX: the token (msit_fx_dump's directory
                      // name, or data_dump's directory name minus one)
  std::string graph;  // "" unless the tree holds several graphs: their order
};
// The runs of a TorchAir dump tree at `path` (msit_ge_dump or msit_fx_dump, with or without
// worldsize*_global_rank* directories, or the older data_dump/{token+1}/gm_*_dump layout), in
// rank, graph and token order. Empty when `path` is not such a tree, or is itself the one
// directory holding its files.
std::vector<TorchairRun> FindTorchairRuns(const std::string& path);

}  // namespace parity

#endif  // PARITY_COMMON_FORMATS_TORCHAIR_H_
