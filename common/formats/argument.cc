#include "common/formats/argument.h"

#include <cstdint>

#include "absl/strings/numbers.h"

namespace parity {
namespace {

// msprobe names a rank argument of a point-to-point or collective call by its key.
bool IsRankArgument(const DumpItem& it) {
  const absl::string_view name = it.name;
  const size_t dot = name.rfind('.');
  const absl::string_view last = dot == absl::string_view::npos ? name : name.substr(dot + 1);
  return last == "src" || last == "dst" || last == "group_src" || last == "group_dst";
}

bool TextArgument(const DumpItem& it) {
  return IsRankArgument(it) || it.type == "torch.ProcessGroup";
}

}  // namespace

Json ArgumentValue(absl::string_view type, const std::optional<std::string>& text) {
  if (!text.has_value() || type == "None" || type == "NoneType") return Json();
  if (type == "int") {
    int64_t i;
    if (absl::SimpleAtoi(*text, &i)) return Json::Integer(i);
  } else if (type == "float") {
    double d;
    if (absl::SimpleAtod(*text, &d)) return Json::Number(d);
  } else if (type == "bool") {
    if (*text == "True") return Json::Bool(true);
    if (*text == "False") return Json::Bool(false);
  }
  return Json::String(*text);
}

MsprobeStats ArgumentStats(const DumpItem& it) {
  MsprobeStats s;
  s.requires_grad = it.requires_grad;
  if (it.type == "torch.Size" || it.type == "slice") return s;
  const Json v = TextArgument(it) ? Json::String(PyStr(it.value)) : it.value;
  s.max = s.min = s.mean = s.norm = v;
  return s;
}

std::string ArgumentMd5(const DumpItem& it) {
  if (it.dtype_text == "None") return "None";  // a null argument: msprobe's default item has none
  return TextArgument(it) ? PyStr(it.value) : NonTensorCrc32(it.value);
}

MsprobeStats MsprobeStatsOf(const DumpItem& it) {
  if (!it.is_tensor) return ArgumentStats(it);
  return MsprobeStats{it.max, it.min, it.mean, it.norm, it.requires_grad};
}

}  // namespace parity
