// PyTorch .pt files as torch.save writes them (a ZIP archive with data.pkl and data/<key>
// storages), read without Python and without executing pickle code.
//
// Only a safe subset of pickle is interpreted: opcodes that build plain values (dicts, lists,
// tuples, strings, numbers, booleans, None), persistent storage references, and calls to an
// allowlist of tensor-rebuilding globals (torch._utils._rebuild_tensor_v2 / _rebuild_tensor /
// _rebuild_parameter, collections.OrderedDict, the torch.*Storage classes). Anything else, such
// as a GLOBAL 'os.system' followed by REDUCE, is refused with an error naming the opcode or the
// global; nothing is ever executed. Compressed ZIP entries, big-endian archives, strided views
// outside their storage and byte counts that disagree are errors too.
#ifndef PARITY_COMMON_PT_READER_H_
#define PARITY_COMMON_PT_READER_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/tensor.h"

namespace parity {

// The tensors of a .pt file: one unnamed tensor when the file holds a tensor; (key, tensor)
// pairs when it holds a dict (e.g. a state_dict) or (index, tensor) for a list/tuple.
absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadPtTensors(const std::string& path);
// Names, dtypes and shapes of the tensors of a .pt file, without reading their data.
struct PtEntry {
  std::string name;  // "" for a file holding one tensor
  DType dtype;
  Shape shape;
};
absl::StatusOr<std::vector<PtEntry>> ReadPtIndex(const std::string& path);

// Where a tensor of a .pt file lies, for reading it in pieces: `length` bytes at `offset` in the
// file are the tensor's bytes as ReadPtTensors returns them. `key` names it in a container; ""
// is the file's single tensor (ReadPtFile's). Nullopt for a strided view (not one run of bytes)
// or an empty tensor; errors as ReadPtTensors' (and NOT_FOUND for a missing key).
struct PtRange {
  DType dtype;
  Shape shape;
  uint64_t offset = 0;
  uint64_t length = 0;
};
absl::StatusOr<std::optional<PtRange>> FindPtRange(const std::string& path, const std::string& key);

// The single tensor of a .pt file (msprobe writes one per file); an error otherwise.
absl::StatusOr<Tensor> ReadPtFile(const std::string& path);

}  // namespace parity

#endif  // PARITY_COMMON_PT_READER_H_
