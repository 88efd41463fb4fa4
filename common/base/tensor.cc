#include "common/base/tensor.h"

#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/float_formats.h"

namespace parity {

absl::StatusOr<int64_t> CheckedNumel(const Shape& shape) {
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", shape.size(), " exceeds the maximum rank ", kMaxRank));
  }
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t d = shape[i];
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("dimension ", i, " is negative (", d, ")"));
    }
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeToString(shape), " overflows a 64-bit element count"));
    }
    n *= d;
  }
  return n;
}

std::string ShapeToString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<Tensor> Tensor::Make(DType dtype, Shape shape, std::string data) {
  auto owner = std::make_shared<const std::string>(std::move(data));
  const absl::string_view view(*owner);
  return MakeView(dtype, std::move(shape), std::move(owner), view);
}

absl::StatusOr<Tensor> Tensor::MakeView(DType dtype, Shape shape,
                                        std::shared_ptr<const void> owner,
                                        absl::string_view data) {
  absl::StatusOr<int64_t> numel = CheckedNumel(shape);
  if (!numel.ok()) return numel.status();
  const size_t esize = DTypeSize(dtype);
  if (*numel > 0 && static_cast<uint64_t>(*numel) > std::numeric_limits<uint64_t>::max() / esize) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", ShapeToString(shape), " is too large for dtype ", DTypeName(dtype)));
  }
  const uint64_t expected = static_cast<uint64_t>(*numel) * esize;
  if (expected != data.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor byte length ", data.size(), " does not match shape ", ShapeToString(shape), " (",
        *numel, " elements) x ", esize, " bytes per ", DTypeName(dtype), " = ", expected));
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = *numel;
  t.owner_ = std::move(owner);
  t.data_ = data;
  return t;
}

namespace {
template <typename T, typename Out>
void Convert(const char* base, int64_t begin, int64_t count, Out* out) {
  const char* p = base + begin * static_cast<int64_t>(sizeof(T));
  for (int64_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    out[i] = static_cast<Out>(v);
  }
}
template <float (*F)(uint16_t)>
void Convert16(const char* base, int64_t begin, int64_t count, double* out) {
  const char* p = base + begin * 2;
  for (int64_t i = 0; i < count; ++i) {
    uint16_t v;
    std::memcpy(&v, p + i * 2, 2);
    out[i] = static_cast<double>(F(v));
  }
}

// Integer and bool dtypes into `out` (uint64 modulo 2^64 when Out is int64_t); false for the
// floating dtypes.
template <typename Out>
bool ConvertInteger(DType t, const char* b, int64_t begin, int64_t count, Out* out) {
  switch (t) {
    case DType::kBool:
      for (int64_t i = 0; i < count; ++i) out[i] = b[begin + i] != 0 ? 1 : 0;
      return true;
    case DType::kUInt8: Convert<uint8_t>(b, begin, count, out); return true;
    case DType::kInt8: Convert<int8_t>(b, begin, count, out); return true;
    case DType::kInt16: Convert<int16_t>(b, begin, count, out); return true;
    case DType::kUInt16: Convert<uint16_t>(b, begin, count, out); return true;
    case DType::kInt32: Convert<int32_t>(b, begin, count, out); return true;
    case DType::kUInt32: Convert<uint32_t>(b, begin, count, out); return true;
    case DType::kInt64: Convert<int64_t>(b, begin, count, out); return true;
    case DType::kUInt64: Convert<uint64_t>(b, begin, count, out); return true;
    default: return false;
  }
}
}  // namespace

void ElementsToDouble(DType t, const char* data, int64_t begin, int64_t count, double* out) {
  if (ConvertInteger(t, data, begin, count, out)) return;
  switch (t) {
    case DType::kFloat32: return Convert<float>(data, begin, count, out);
    case DType::kFloat64: return Convert<double>(data, begin, count, out);
    case DType::kFloat16: return Convert16<HalfToFloat>(data, begin, count, out);
    case DType::kBFloat16: return Convert16<BFloat16ToFloat>(data, begin, count, out);
    case DType::kFloat8E4M3FN: {
      for (int64_t i = 0; i < count; ++i) {
        out[i] = Float8E4M3FNToFloat(static_cast<uint8_t>(data[begin + i]));
      }
      return;
    }
    case DType::kFloat8E5M2: {
      for (int64_t i = 0; i < count; ++i) {
        out[i] = Float8E5M2ToFloat(static_cast<uint8_t>(data[begin + i]));
      }
      return;
    }
    default: return;  // integers: above
  }
}

void Tensor::ToDouble(int64_t begin, int64_t count, double* out) const {
  ElementsToDouble(dtype_, data_.data(), begin, count, out);
}

void Tensor::ToInt64(int64_t begin, int64_t count, int64_t* out) const {
  if (!ConvertInteger(dtype_, data_.data(), begin, count, out)) {
    for (int64_t i = 0; i < count; ++i) out[i] = 0;  // not an integer dtype (contract)
  }
}

}  // namespace parity
