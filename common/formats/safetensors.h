// .safetensors files: [u64 little-endian header size N][N bytes of JSON header][data].
//
// Open() reads and validates only the header (dtype codes, shapes, offsets inside the data
// section, byte counts that agree with shape x dtype, no overlaps or holes); tensors are read
// one at a time by Read(), so memory does not grow with the file size.
#ifndef PARITY_COMMON_SAFETENSORS_H_
#define PARITY_COMMON_SAFETENSORS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/tensor.h"

namespace parity {

class SafetensorsFile {
 public:
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin;  // offset inside the data section
    uint64_t end;
  };

  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);
  // Validates a header given the total file size; used by Open and by tests/fuzzers.
  static absl::StatusOr<SafetensorsFile> FromHeader(const std::string& origin,
                                                    absl::string_view header_json,
                                                    uint64_t data_offset, uint64_t file_size);

  // Entries in the order of their data offsets.
  const std::vector<Entry>& entries() const { return entries_; }
  // Where the data section starts in the file: an entry's bytes are [data_offset() + begin,
  // data_offset() + end), as Read returns them.
  uint64_t data_offset() const { return data_offset_; }
  absl::StatusOr<Tensor> Read(const Entry& e) const;

 private:
  std::string path_;
  uint64_t data_offset_ = 0;
  std::vector<Entry> entries_;
};

// Serialises named tensors (in the given order) as a .safetensors file.
std::string EncodeSafetensors(const std::vector<std::pair<std::string, Tensor>>& tensors);

}  // namespace parity

#endif  // PARITY_COMMON_SAFETENSORS_H_
