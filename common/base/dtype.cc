#include "common/base/dtype.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace parity {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2:
      return 1;
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

bool IsFloating(DType t) {
  switch (t) {
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2:
      return true;
    default:
      return false;
  }
}

bool IsInteger(DType t) { return !IsFloating(t) && t != DType::kBool; }

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kBool: return "bool";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kUInt16: return "uint16";
    case DType::kInt32: return "int32";
    case DType::kUInt32: return "uint32";
    case DType::kInt64: return "int64";
    case DType::kUInt64: return "uint64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat8E4M3FN: return "float8_e4m3fn";
    case DType::kFloat8E5M2: return "float8_e5m2";
  }
  return "unknown";
}

std::string TorchDTypeName(DType t) { return std::string("torch.") + DTypeName(t); }

std::optional<DType> ParseDType(absl::string_view raw) {
  std::string name = absl::AsciiStrToLower(raw);
  if (absl::StartsWith(name, "torch.")) name = name.substr(6);
  if (absl::StartsWith(name, "mindspore.")) name = name.substr(10);
  struct Entry {
    const char* name;
    DType t;
  };
  static constexpr Entry kNames[] = {
      {"bool", DType::kBool},       {"bool_", DType::kBool},
      {"uint8", DType::kUInt8},     {"int8", DType::kInt8},
      {"int16", DType::kInt16},     {"short", DType::kInt16},
      {"uint16", DType::kUInt16},   {"int32", DType::kInt32},
      {"int", DType::kInt32},       {"uint32", DType::kUInt32},
      {"int64", DType::kInt64},     {"long", DType::kInt64},
      {"uint64", DType::kUInt64},   {"float16", DType::kFloat16},
      {"half", DType::kFloat16},    {"bfloat16", DType::kBFloat16},
      {"float32", DType::kFloat32}, {"float", DType::kFloat32},
      {"float64", DType::kFloat64}, {"double", DType::kFloat64},
      {"float8_e4m3fn", DType::kFloat8E4M3FN},
      {"float8_e5m2", DType::kFloat8E5M2},
  };
  for (const Entry& e : kNames) {
    if (name == e.name) return e.t;
  }
  return std::nullopt;
}

std::optional<DType> ParseSafetensorsDType(absl::string_view code) {
  struct Entry {
    const char* code;
    DType t;
  };
  static constexpr Entry kCodes[] = {
      {"BOOL", DType::kBool},  {"U8", DType::kUInt8},    {"I8", DType::kInt8},
      {"I16", DType::kInt16},  {"U16", DType::kUInt16},  {"I32", DType::kInt32},
      {"U32", DType::kUInt32}, {"I64", DType::kInt64},   {"U64", DType::kUInt64},
      {"F16", DType::kFloat16}, {"BF16", DType::kBFloat16}, {"F32", DType::kFloat32},
      {"F64", DType::kFloat64}, {"F8_E4M3", DType::kFloat8E4M3FN},
      {"F8_E5M2", DType::kFloat8E5M2},
  };
  for (const Entry& e : kCodes) {
    if (code == e.code) return e.t;
  }
  return std::nullopt;
}

}  // namespace parity
