// Element types of tensors and their names in the formats Parity reads and writes.
#ifndef PARITY_COMMON_DTYPE_H_
#define PARITY_COMMON_DTYPE_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace parity {

enum class DType {
  kBool,
  kUInt8,
  kInt8,
  kInt16,
  kUInt16,
  kInt32,
  kUInt32,
  kInt64,
  kUInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kFloat8E4M3FN,
  kFloat8E5M2,
};

inline constexpr int kMaxRank = 8;

// Size of one element in bytes.
size_t DTypeSize(DType t);
bool IsFloating(DType t);  // fp8, fp16, bf16, fp32, fp64
bool IsInteger(DType t);   // signed and unsigned integers (not bool)

// Canonical lower-case name: "float32", "bfloat16", "float8_e4m3fn", "bool", ...
const char* DTypeName(DType t);
// PyTorch name as msprobe's dump.json writes it: "torch.float32".
std::string TorchDTypeName(DType t);

// Parses a canonical name, a torch name ("torch.float32", "torch.half"), a MindSpore name
// ("Float32", "BFloat16") or a safetensors code ("F32", "BF16"). nullopt when unknown.
std::optional<DType> ParseDType(absl::string_view name);
std::optional<DType> ParseSafetensorsDType(absl::string_view code);

}  // namespace parity

#endif  // PARITY_COMMON_DTYPE_H_
