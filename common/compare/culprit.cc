#include "common/compare/culprit.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace parity {
namespace {
// Only a precision failure: an ERROR row (data that could not be read or compared) says nothing
// about the numbers, so it neither makes its operator a culprit nor propagates.
bool Fails(Verdict v) { return v == Verdict::kFail; }

// Where the phase word sits in an API name: "X.forward", "X.backward" (APIs), "Module.m.C.forward.0"
// (modules, with their call count after it), "Module.m.C.parameters_grad" (a module's parameter
// gradients).
enum class OpKind { kForward, kBackward, kParameterGrad, kOther };

struct ApiParts {
  OpKind kind = OpKind::kOther;
  size_t word = 0;  // where ".forward"/".backward"/".parameters_grad" starts
};

bool IsCount(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

ApiParts PartsOf(absl::string_view api) {
  ApiParts p;
  if (absl::EndsWith(api, ".parameters_grad")) {
    p.kind = OpKind::kParameterGrad;
    p.word = api.size() - 16;
    return p;
  }
  for (auto [word, kind] : {std::pair<absl::string_view, OpKind>{".forward", OpKind::kForward},
                            std::pair<absl::string_view, OpKind>{".backward", OpKind::kBackward}}) {
    const size_t at = api.rfind(word);
    if (at == absl::string_view::npos) continue;
    const absl::string_view rest = api.substr(at + word.size());
    if (rest.empty() || (rest[0] == '.' && IsCount(rest.substr(1)))) {
      p.kind = kind;
      p.word = at;
      return p;
    }
  }
  return p;
}

struct Acc {
  bool in_fail = false;
  bool out_fail = false;
};

// What a module's entries say about a parameter gradient of it: whether any forward entry has a
// failing item, and whether any backward entry has a failing incoming gradient (its inputs).
struct ModuleFlags {
  bool forward_fail = false;
  bool backward_in_fail = false;
};

// The second pass: each operator's status from its own items and, for backward entries and
// parameter gradients, from the entries they depend on (see culprit.h).
void Decide(const std::vector<Acc>& acc, const absl::flat_hash_map<absl::string_view, size_t>& position,
            std::vector<OpAnalysis>* out) {
  absl::flat_hash_map<absl::string_view, ModuleFlags> modules;  // keyed by "Module.m.C"
  for (size_t i = 0; i < out->size(); ++i) {
    const absl::string_view api = (*out)[i].api;
    const ApiParts p = PartsOf(api);
    if (p.kind == OpKind::kForward) modules[api.substr(0, p.word)].forward_fail |= acc[i].in_fail || acc[i].out_fail;
    if (p.kind == OpKind::kBackward) modules[api.substr(0, p.word)].backward_in_fail |= acc[i].in_fail;
  }
  for (size_t i = 0; i < out->size(); ++i) {
    OpAnalysis& op = (*out)[i];
    if (!acc[i].out_fail) continue;
    const ApiParts p = PartsOf(op.api);
    bool blamed_elsewhere = acc[i].in_fail;
    if (p.kind == OpKind::kBackward) {
      // A backward entry records the gradients only, not the forward tensors the op saved: with
      // its forward entry failing, its wrong output is a consequence.
      std::string forward = op.api;
      forward.replace(p.word, 9, ".forward");
      if (auto it = position.find(forward); it != position.end()) {
        blamed_elsewhere |= acc[it->second].in_fail || acc[it->second].out_fail;
      }
    } else if (p.kind == OpKind::kParameterGrad) {
      // A parameter's gradient comes from the module's incoming gradient and its forward input.
      const absl::string_view module = absl::string_view(op.api).substr(0, p.word);
      if (auto it = modules.find(module); it != modules.end()) {
        blamed_elsewhere = it->second.forward_fail || it->second.backward_in_fail;
      }
    }
    op.status = blamed_elsewhere ? OpStatus::kPropagated : OpStatus::kCulprit;
  }
}

}  // namespace

std::vector<OpAnalysis> AnalyzeCulprits(const std::vector<CulpritInput>& items,
                                        std::vector<size_t>* op_of_item) {
  std::vector<OpAnalysis> out;
  std::vector<Acc> acc;
  // Operator -> its position in `out`; the keys view the APIs in `items`.
  absl::flat_hash_map<absl::string_view, size_t> position;
  if (op_of_item != nullptr) {
    op_of_item->clear();
    op_of_item->reserve(items.size());
  }
  size_t last = 0;  // the previous item's operator: an operator's items are usually together
  for (const CulpritInput& it : items) {
    size_t pos;
    if (!out.empty() && out[last].api == it.api) {
      pos = last;
    } else {
      auto [p, inserted] = position.try_emplace(it.api, out.size());
      if (inserted) {
        out.push_back({std::string(it.api), OpStatus::kNone});
        acc.emplace_back();
      }
      pos = p->second;
    }
    last = pos;
    if (op_of_item != nullptr) op_of_item->push_back(pos);
    if (!Fails(it.verdict)) continue;
    // An item without a role (a plain file of named tensors) is its own operator's output, and
    // a parameter gradient is what its parameters_grad entry produces.
    if (it.role == Role::kOutput || it.role == Role::kUnknown || it.role == Role::kGradient) {
      acc[pos].out_fail = true;
    } else {
      acc[pos].in_fail = true;
    }
  }
  Decide(acc, position, &out);
  return out;
}

std::string FirstCulprit(const std::vector<OpAnalysis>& ops) {
  for (const OpAnalysis& op : ops) {
    if (op.status == OpStatus::kCulprit) return op.api;
  }
  return "";
}

}  // namespace parity
