#include "proto/enums.h"

namespace parity {

v1::DType ToProto(std::optional<DType> t) {
  return t ? static_cast<v1::DType>(static_cast<int>(*t) + 1) : v1::DTYPE_UNSPECIFIED;
}
std::optional<DType> FromProto(v1::DType t) {
  if (t <= v1::DTYPE_UNSPECIFIED || t > v1::DTYPE_FLOAT8_E5M2) return std::nullopt;
  return static_cast<DType>(static_cast<int>(t) - 1);
}
v1::Phase ToProto(Phase p) {
  return p == Phase::kForward ? v1::PHASE_FORWARD : p == Phase::kBackward ? v1::PHASE_BACKWARD : v1::PHASE_UNSPECIFIED;
}
Phase FromProto(v1::Phase p) {
  return p == v1::PHASE_FORWARD ? Phase::kForward : p == v1::PHASE_BACKWARD ? Phase::kBackward : Phase::kUnknown;
}
v1::Role ToProto(Role r) {
  switch (r) {
    case Role::kInput: return v1::ROLE_INPUT;
    case Role::kOutput: return v1::ROLE_OUTPUT;
    case Role::kParameter: return v1::ROLE_PARAMETER;
    case Role::kGradient: return v1::ROLE_GRADIENT;
    default: return v1::ROLE_UNSPECIFIED;
  }
}
Role FromProto(v1::Role r) {
  switch (r) {
    case v1::ROLE_INPUT: return Role::kInput;
    case v1::ROLE_OUTPUT: return Role::kOutput;
    case v1::ROLE_PARAMETER: return Role::kParameter;
    case v1::ROLE_GRADIENT: return Role::kGradient;
    default: return Role::kUnknown;
  }
}
v1::Verdict ToProto(Verdict v) { return static_cast<v1::Verdict>(static_cast<int>(v) + 1); }
v1::DumpMode ToProto(DumpMode m) {
  switch (m) {
    case DumpMode::kTensor: return v1::DUMP_MODE_TENSOR;
    case DumpMode::kStatistics: return v1::DUMP_MODE_STATISTICS;
    case DumpMode::kMd5: return v1::DUMP_MODE_MD5;
  }
  return v1::DUMP_MODE_UNSPECIFIED;
}
std::optional<DumpMode> FromProto(v1::DumpMode m) {
  switch (m) {
    case v1::DUMP_MODE_TENSOR: return DumpMode::kTensor;
    case v1::DUMP_MODE_STATISTICS: return DumpMode::kStatistics;
    case v1::DUMP_MODE_MD5: return DumpMode::kMd5;
    default: return std::nullopt;
  }
}

}  // namespace parity
