#include "common/formats/dump_structure.h"

#include <algorithm>
#include <filesystem>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/file_util.h"
#include "common/base/json.h"
#include "common/base/status_macros.h"
#include "common/checks/msprobe_policy.h"

namespace parity {
namespace {

absl::Status Bad(absl::string_view file, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", what));
}

absl::StatusOr<Json> ParseObject(absl::string_view file, absl::string_view text) {
  absl::StatusOr<Json> j = ParseJson(text);
  if (!j.ok()) return Bad(file, j.status().message());
  if (!j->is_object()) return Bad(file, "the outermost value is not an object");
  return j;
}

}  // namespace

absl::Status ParseStackJson(absl::string_view text, DumpStructure* out, absl::string_view label) {
  PARITY_ASSIGN_OR_RETURN(Json j, ParseObject(label, text));
  out->has_stack_json = true;
  // msprobe's load_stack_json: the current format is told by a member "0".
  if (j.Find("0") != nullptr) {
    for (const auto& [key, v] : j.as_object()) {
      // Entries that are not [[names...], "stack"] are skipped, as msprobe skips them.
      if (!v.is_array() || v.as_array().size() != 2) continue;
      const Json& names = v.as_array()[0];
      const Json& stack = v.as_array()[1];
      if (!names.is_array()) continue;
      const std::string text_of_stack = stack.is_string() ? stack.as_string() : PyStr(stack);
      for (const Json& n : names.as_array()) {
        if (n.is_string()) out->stacks[n.as_string()] = text_of_stack;
      }
    }
    return absl::OkStatus();
  }
  for (const auto& [name, v] : j.as_object()) {
    out->stacks[name] = v.is_string() ? v.as_string() : PyStr(v);
  }
  return absl::OkStatus();
}

std::string StackJsonText(const DumpStructure& s) {
  std::vector<std::pair<std::string, std::string>> sorted(s.stacks.begin(), s.stacks.end());
  std::sort(sorted.begin(), sorted.end());
  Json j = Json::MakeObject();
  for (size_t i = 0; i < sorted.size(); ++i) {
    Json names = Json::MakeArray();
    names.Append(Json::String(sorted[i].first));
    Json entry = Json::MakeArray();
    entry.Append(std::move(names));
    entry.Append(Json::String(sorted[i].second));
    j.Set(std::to_string(i), std::move(entry));
  }
  return j.Dump();
}

absl::Status ParseConstructJson(absl::string_view text, DumpStructure* out, absl::string_view label) {
  PARITY_ASSIGN_OR_RETURN(Json j, ParseObject(label, text));
  for (const auto& [node, v] : j.as_object()) {
    const Json* parent = &v;
    if (v.is_array()) {  // Megatron: [parent, micro_step]
      if (v.as_array().empty()) return Bad(label, absl::StrCat("\"", node, "\" has an empty list"));
      parent = &v.as_array()[0];
    }
    if (parent->is_null()) {
      out->parents.emplace_back(node, "");
    } else if (parent->is_string()) {
      out->parents.emplace_back(node, parent->as_string());
    } else if (parent->is_number()) {
      continue;  // Megatron's "megatron_micro_step_number": a count, no node
    } else {
      return Bad(label, absl::StrCat("the parent of \"", node, "\" is neither a name nor null"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> StackCandidates(absl::string_view api) {
  std::vector<std::string> out = {std::string(api)};
  const size_t at = api.rfind(".backward");
  if (at != absl::string_view::npos) out.push_back(absl::StrCat(api.substr(0, at), ".forward", api.substr(at + 9)));
  return out;
}

std::string StackOf(const DumpStructure& s, absl::string_view api) {
  for (const std::string& name : StackCandidates(api)) {
    if (auto it = s.stacks.find(name); it != s.stacks.end()) return it->second;
  }
  return "";
}

std::string ModuleOfForwardNode(absl::string_view node) {
  if (!absl::StartsWith(node, "Module.")) return "";
  const size_t at = node.rfind(".forward.");
  if (at == absl::string_view::npos) return "";
  const absl::string_view count = node.substr(at + 9);
  if (count.empty() || count.find_first_not_of("0123456789") != absl::string_view::npos) return "";
  return std::string(node.substr(0, at));
}

std::vector<std::string> GradientEntries(const DumpStructure& s) {
  std::vector<std::string> out(s.parents.size());
  absl::flat_hash_set<std::string> seen;
  for (size_t i = 0; i < s.parents.size(); ++i) {
    std::string module = ModuleOfForwardNode(s.parents[i].first);
    if (!module.empty() && seen.insert(module).second) out[i] = absl::StrCat(module, ".parameters_grad");
  }
  return out;
}

absl::StatusOr<DumpStructure> ReadDumpStructure(const std::string& dir) {
  DumpStructure s;
  for (const char* file : {kStackJson, kConstructJson}) {
    const std::filesystem::path p = std::filesystem::path(dir) / file;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p, ec)) continue;
    PARITY_ASSIGN_OR_RETURN(std::string text, ReadFileToString(p.string(), kMaxStructureFileBytes));
    PARITY_RETURN_IF_ERROR(file == kStackJson ? ParseStackJson(text, &s, p.string())
                                              : ParseConstructJson(text, &s, p.string()));
  }
  return s;
}

}  // namespace parity
