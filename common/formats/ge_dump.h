// Ascend GE / adump binary dumps: [uint64 little-endian header length][toolkit.dumpdata.DumpData
// protobuf][raw data: every input in order, then every output, each `size` bytes] (layout in
// shared/reference/msprobe-semantics.md §5.4). The protobuf is decoded by hand (wire format).
//
// Host formats (NCHW, NHWC, ND and the other plain layouts) are read as stored. NC1HWC0(_C04),
// NDC1HWC0, FRACTAL_Z(_3D) and FRACTAL_NZ with the tensor's original_shape are converted to it
// (common/formats/device_format.h); other device formats, or one without its original shape, are
// reported as unsupported, never guessed. Every size is checked against shape x dtype and
// against the file.
#ifndef PARITY_COMMON_GE_DUMP_H_
#define PARITY_COMMON_GE_DUMP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/formats/device_format.h"
#include "common/formats/dump.h"
#include "common/base/tensor.h"

namespace parity {

struct GeTensorEntry {
  Role role;        // kInput or kOutput
  int index;        // position among the inputs or the outputs
  DType dtype;
  Shape shape;      // as read: the original shape of a tensor stored in a device format
  uint64_t offset;  // of the data in the file
  uint64_t size;
  // A tensor stored in a device format (its original_shape given): the format and the stored
  // shape. ReadGeTensor converts it to the row-major tensor of `shape`.
  std::optional<DeviceFormat> device_format = std::nullopt;
  Shape device_shape = {};
};

struct GeDump {
  std::string op_name;
  std::vector<GeTensorEntry> tensors;  // inputs, then outputs
};

// GE dump file names: {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}, the op name itself
// possibly holding dots; the last three parts are numbers.
bool IsGeDumpFileName(absl::string_view filename);
// The op name of such a file name (what msit's reference keys dumps by).
std::string GeDumpFileOpName(absl::string_view filename);

// Parses the header and validates the layout (no tensor data is read).
absl::StatusOr<GeDump> ReadGeDump(const std::string& path);
absl::StatusOr<Tensor> ReadGeTensor(const std::string& path, const GeTensorEntry& e);
// Parses a header given the whole file size (for tests and fuzzing).
absl::StatusOr<GeDump> ParseGeDumpHeader(const std::string& origin, absl::string_view header,
                                         uint64_t data_offset, uint64_t file_size);

}  // namespace parity

#endif  // PARITY_COMMON_GE_DUMP_H_
