// NumPy .npy files, format versions 1.0, 2.0 and 3.0.
//
// Any byte order is accepted and converted to little-endian; Fortran-order arrays are
// transposed to C order. Object arrays, structured and string dtypes, truncated files, headers
// that lie about the data size, and negative or overflowing dimensions are INVALID_ARGUMENT
// (DATA_LOSS for truncation) errors whose message names the file and the offending value.
#ifndef PARITY_COMMON_NPY_H_
#define PARITY_COMMON_NPY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/base/file_util.h"
#include "common/base/tensor.h"

namespace parity {

// `origin` names the data in error messages (usually the path).
absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, absl::string_view origin);
absl::StatusOr<Tensor> ReadNpyFile(const std::string& path);

// Reads only the header of a .npy file and checks the file size against it.
struct NpyInfo {
  DType dtype;
  Shape shape;
};
absl::StatusOr<NpyInfo> ReadNpyInfo(const std::string& path);
// The same, and when the file is at most `keep_max_bytes` long, the whole file in *kept (in a
// buffer from `arena`), from the same single read (kept->owner is null for a larger file). ParseNpyFile then reads the
// tensor from it without opening the file again.
absl::StatusOr<NpyInfo> ReadNpyInfo(const std::string& path, size_t keep_max_bytes,
                                    SmallFileArena* arena, SharedBytes* kept);
// The header of a whole .npy file already in memory (`path` names it in errors), with
// ReadNpyInfo's checks; a header longer than `file` is an error here.
absl::StatusOr<NpyInfo> ParseNpyInfo(absl::string_view file, const std::string& path);
// Where a .npy file's data lies, for reading it in pieces: bytes [data_offset, file end) hold
// numel(shape) elements of `dtype`; `native` when they are the tensor's own bytes as a Tensor
// holds them (little-endian, C order), false when ReadNpyFile would swap or transpose them.
struct NpyLayout {
  DType dtype;
  Shape shape;
  uint64_t data_offset = 0;
  bool native = true;
};
// Reads and checks the header of an open .npy file (the same checks and errors as ReadNpyInfo).
// `head`, when given, holds the file's first bytes as read already: a header within them is
// not read again.
absl::StatusOr<NpyLayout> ReadNpyLayout(const RandomAccessFile& file,
                                        absl::string_view head = absl::string_view());
// A .npy file held open with its header read (CompareDumps' read-ahead keeps a file larger
// than its probe open this way, so that comparing it does not open it again).
struct OpenNpyFile {
  RandomAccessFile file;
  NpyLayout layout;
};
// A whole .npy file already read (`path` names it in errors): the tensor references the bytes
// when it can, as ReadNpyFile does.
absl::StatusOr<Tensor> ParseNpyFile(const SharedBytes& file, const std::string& path);

// Serialises as a version 1.0 little-endian C-order file (bfloat16 and fp8, which numpy lacks,
// are written as their uint16 / uint8 bit patterns).
std::string EncodeNpy(const Tensor& t);

}  // namespace parity

#endif  // PARITY_COMMON_NPY_H_
