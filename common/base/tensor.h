// A dense tensor: dtype, shape (rank <= kMaxRank) and contiguous little-endian C-order bytes.
#ifndef PARITY_COMMON_TENSOR_H_
#define PARITY_COMMON_TENSOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/base/dtype.h"

namespace parity {

using Shape = std::vector<int64_t>;

// Number of elements of `shape`, or an INVALID_ARGUMENT error naming the offending dimension
// when a dimension is negative, the rank exceeds kMaxRank or the product overflows int64.
absl::StatusOr<int64_t> CheckedNumel(const Shape& shape);

// Python list notation as msprobe prints shapes: "[2, 3]", "[]".
std::string ShapeToString(const Shape& shape);

// Tensor::ToDouble on raw elements of dtype `t` at `data`.
void ElementsToDouble(DType t, const char* data, int64_t begin, int64_t count, double* out);

class Tensor {
 public:
  Tensor() = default;

  // Validates that numel(shape) * DTypeSize(dtype) == data.size(); the error names the numbers.
  static absl::StatusOr<Tensor> Make(DType dtype, Shape shape, std::string data);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  // Same as Make, but the bytes are `data` inside a buffer kept alive by `owner` (no copy).
  static absl::StatusOr<Tensor> MakeView(DType dtype, Shape shape,
                                         std::shared_ptr<const void> owner,
                                         absl::string_view data);

  const char* data() const { return data_.data(); }
  absl::string_view bytes() const { return data_; }
  // What keeps bytes() alive (null for an empty tensor): holding a copy keeps them valid after
  // the tensor is gone.
  const std::shared_ptr<const void>& owner() const { return owner_; }

  // Converts elements [begin, begin + count) to double (exact for every dtype except
  // (u)int64 magnitudes above 2^53, which round as numpy's astype(float) does).
  void ToDouble(int64_t begin, int64_t count, double* out) const;
  // Integer and bool dtypes only (others give zeros): elements [begin, begin + count) as int64,
  // exactly; uint64 values above 2^63 - 1 wrap to negative, as torch's .to(torch.int64) does.
  void ToInt64(int64_t begin, int64_t count, int64_t* out) const;
  double At(int64_t i) const {
    double v;
    ToDouble(i, 1, &v);
    return v;
  }

 private:
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<const void> owner_;  // keeps data_ alive; immutable, shared by copies
  absl::string_view data_{"", 0};             // inside *owner_ (never a null pointer)
};

}  // namespace parity

#endif  // PARITY_COMMON_TENSOR_H_
