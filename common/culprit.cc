#include "common/culprit.h"

#include <map>

namespace parity {
namespace {
bool Fails(Verdict v) { return v == Verdict::kFail || v == Verdict::kError; }
}  // namespace

std::vector<OpAnalysis> AnalyzeCulprits(const std::vector<CulpritInput>& items) {
  struct Acc {
    bool in_fail = false;
    bool out_fail = false;
  };
  std::vector<std::string> order;
  std::map<std::string, Acc> ops;
  for (const CulpritInput& it : items) {
    auto [pos, inserted] = ops.try_emplace(it.api);
    if (inserted) order.push_back(it.api);
    if (!Fails(it.verdict)) continue;
    // An item without a role (a plain file of named tensors) is its own operator's output.
    if (it.role == Role::kOutput || it.role == Role::kUnknown) {
      pos->second.out_fail = true;
    } else {
      pos->second.in_fail = true;
    }
  }
  std::vector<OpAnalysis> out;
  out.reserve(order.size());
  for (const std::string& api : order) {
    const Acc& a = ops[api];
    OpStatus s = OpStatus::kNone;
    if (a.out_fail) s = a.in_fail ? OpStatus::kPropagated : OpStatus::kCulprit;
    out.push_back({api, s});
  }
  return out;
}

}  // namespace parity
