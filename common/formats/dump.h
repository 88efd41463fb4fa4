// Dumps: the items (tensors and non-tensor arguments) of one run, read from
//   - an msprobe dump directory (dump.json + dump_tensor_data/), or its dump.json;
//   - a single .npy, .pt (torch.save) or .safetensors file;
//   - a plain directory of .npy / .pt / .safetensors files (item name = file stem, plus the
//     tensor key for containers);
//   - Ascend GE dump files ({op_type}.{op_name}.{task}.{stream}.{timestamp}), alone or in a
//     directory: items "<op_name>.<occurrence>.<input|output>.<i>", occurrences by timestamp.
// Items come in dump order; for msprobe, rows are named and ordered exactly as msprobe's
// compare does (shared/reference/msprobe-semantics.md §5): per API in dump.json order, inputs
// (args, kwargs) -> parameters -> output -> parameters_grad; lists add ".{i}", dicts ".{key}";
// a row with a data_name is named after it minus the extension.
// Tensor data is read by LoadItemTensor, one item at a time; only a directory listing keeps the
// bytes of its small .npy files (read whole when their header is, see OpenDump).
#ifndef PARITY_COMMON_DUMP_H_
#define PARITY_COMMON_DUMP_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/base/file_util.h"
#include "common/base/json.h"
#include "common/base/tensor.h"
#include "common/formats/dump_structure.h"

namespace parity {

struct OpenNpyFile;  // common/formats/npy.h

// msprobe's dump modes: task "tensor" (real data), "statistics" without / with md5.
enum class DumpMode { kTensor, kStatistics, kMd5 };
const char* DumpModeName(DumpMode m);  // "tensor", "statistics", "md5"

enum class Phase { kForward, kBackward, kUnknown };
enum class Role { kInput, kOutput, kParameter, kGradient, kUnknown };
const char* PhaseName(Phase p);
const char* RoleName(Role r);

struct DumpItem {
  std::string name;     // row name, the pairing key
  std::string api;      // dump.json key ("Functional.linear.0.forward") or source file
  std::string op_type;  // "linear", "Conv2d", or the file stem
  Phase phase = Phase::kUnknown;
  Role role = Role::kUnknown;
  bool is_tensor = true;
  std::string type;        // "torch.Tensor", "int", "float", "None", ...
  // As the dump writes it ("torch.float32", "Float32"); for a non-tensor argument, msprobe's
  // Dtype column ("<class 'int'>", "torch.Size", "None" for a null argument).
  std::string dtype_text;
  // A non-tensor argument's shape column as msprobe writes it ("[]", "None" for a null argument,
  // "[2, 3]" for a torch.Size, "(3,)" for a slice); "" for tensors.
  std::string shape_text;
  std::optional<DType> dtype;
  Shape shape;
  bool has_shape = false;
  Json max, min, mean, norm;  // statistics as dumped (null when absent)
  std::optional<bool> requires_grad;
  std::string md5;               // CRC-32 hex (md5 mode), or crc32(str(value)) for non-tensors
  std::string data_name = "-1";  // msprobe's data file name, "-1" when none
  Json value;                    // non-tensor value
  // Where the tensor data lives: a .npy path, or a .safetensors path plus key.
  std::string data_path;
  std::string safetensors_key;
  std::string pt_key;  // the tensor's key inside a .pt holding a dict or list
  int ge_index = -1;   // the tensor's position in a GE dump file

  // Or raw little-endian bytes of `dtype` and `shape` (the daemon's spool blobs).
  std::string raw_data_path;
  bool raw_direct = false;  // raw_data_path was written with O_DIRECT: read it so (ReadFileDirect)
  // The raw blob's bytes when they are already in memory (parityd's held blobs): LoadItemTensor
  // uses them instead of reading raw_data_path. Null owner: read the file.
  SharedBytes raw_bytes;
  // The whole .npy file at data_path as the listing read it (small files only, see OpenDump);
  // LoadItemTensor parses these bytes instead of opening the file again. Null owner: not kept.
  SharedBytes npy_file;
  // The .npy file at data_path held open with its header read (CompareDumps' read-ahead, for a
  // file larger than its probe): comparing it reads from here. Null: open data_path.
  std::shared_ptr<const OpenNpyFile> npy_open;
  // The name of another item of this dump that is this item's golden when the golden run can
  // have none (TorchAir: output i of a Cast or TransData op GE inserted is compared with its
  // input i, as msit's reference compares them); "" for none. Used only where the pairing rules
  // say so (PairingOptions::in_run_goldens).
  std::string in_run_golden;
  // Why the file could not be read when a directory was listed (its other files still were);
  // LoadItemTensor returns it. OK otherwise.
  absl::Status read_error;
  // A .npy file listed by name only (NpyListing::kNamesOnly): dtype, dtype_text, shape and
  // has_shape are unknown, and read_error unset, until ResolveDeferredNpy reads its header.
  bool npy_deferred = false;
};

struct Dump {
  std::string root;    // the path that was opened
  std::string format;  // "msprobe", "npy", "safetensors", "directory"
  DumpMode mode = DumpMode::kTensor;
  std::string framework;
  std::vector<DumpItem> items;
  // msprobe's stack.json and construct.json beside dump.json (empty when absent).
  DumpStructure structure;
};

// Opens any supported layout. INVALID_ARGUMENT / NOT_FOUND with a message naming the path and
// the problem (bad JSON, missing "data", unknown task, unsupported files, ...). In a directory
// of .npy/.pt/.safetensors files, a file that cannot be read does not fail the others: it
// becomes one item named after it with `read_error` set. Listing such a directory reads every
// .npy file's header; a file of at most kKeptNpyFileBytes is then read whole by that same read
// and kept in its item (DumpItem::npy_file), up to `keep_budget_bytes` in all, so that comparing
// or uploading it opens it only once (its tensor is the file as it was when listed).
// With NpyListing::kNamesOnly a directory's .npy files are listed without being opened
// (DumpItem::npy_deferred; nothing is kept): CompareDumps reads each one's header when it
// compares its pair, so comparing two directories opens each small file once and holds the
// bytes of one pair at a time, in the same few pages. The items and the report are the same as
// with a listing that reads the headers. `listing`, when set, is ListDirectory(path) made by
// the caller (FindRankDumps lists the directory first): a directory is then not listed again.
//
// `links`: what to do with a data file that is a symbolic link (or lies in a linked directory)
// leading outside the dump's tree, the directory opened (the one holding the dump.json opened),
// itself resolved: read it as any other, or refuse it without reading it; its item then has a
// PERMISSION_DENIED read_error naming the file and where it leads.
inline constexpr size_t kKeptNpyFileBytes = 64 << 10;
inline constexpr size_t kDefaultKeepBudgetBytes = 32 << 20;
enum class NpyListing { kReadHeaders, kNamesOnly };
enum class OutsideLinks { kFollow, kRefuse };
absl::StatusOr<Dump> OpenDump(const std::string& path,
                              size_t keep_budget_bytes = kDefaultKeepBudgetBytes,
                              NpyListing npy_listing = NpyListing::kReadHeaders,
                              const std::vector<DirEntry>* listing = nullptr,
                              OutsideLinks links = OutsideLinks::kFollow);
// OK when `path` (a file or a directory in `root`'s tree) resolves inside that tree; otherwise
// the PERMISSION_DENIED that OutsideLinks::kRefuse gives, naming the path and where it leads.
// For a dump within a larger tree (a rank directory of a step*/rank* tree) that is itself a link.
absl::Status CheckInsideTree(const std::string& root, const std::string& path);

// Reads the header of a deferred .npy item (see OpenDump) and fills it in as a listing that
// reads headers would have: dtype, dtype_text, shape and has_shape, or read_error. A file of at
// most kKeptNpyFileBytes is read whole by that read, into `arena`, and kept in npy_file (drop it
// to let the arena reuse its memory, see SmallFileArena::Recycle). No-op for other items.
void ResolveDeferredNpy(DumpItem* item, SmallFileArena* arena);
// The same from the whole file's bytes, read already (by a BatchReader); they are kept in
// npy_file. False, the item left deferred, when they do not parse as a .npy file: the caller then
// calls ResolveDeferredNpy, which reads the file again and gives the precise error.
bool ResolveDeferredNpyFrom(DumpItem* item, SharedBytes whole);
// The same from a file held open with its header read; the item keeps it in npy_open.
void ResolveDeferredNpyFromOpen(DumpItem* item, std::shared_ptr<const OpenNpyFile> open);

// Parses a dump.json document; `root` is the directory holding dump_tensor_data/.
absl::StatusOr<Dump> ParseMsprobeDumpJson(const std::string& root, const std::string& origin,
                                          absl::string_view json_text);

// Reads one item's tensor (.npy, .pt or a .safetensors entry). FAILED_PRECONDITION for
// non-tensors or items without data (e.g. statistics dumps).
absl::StatusOr<Tensor> LoadItemTensor(const DumpItem& item);

// msprobe's fuzzy-match name normalisation (rename_api): drops the call count, i.e. the last
// dot-segment before the first "forward"/"backward".
std::string FuzzyName(const std::string& name);

}  // namespace parity

#endif  // PARITY_COMMON_DUMP_H_
