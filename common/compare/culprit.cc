#include "common/compare/culprit.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace parity {
namespace {
// Only a precision failure: an ERROR row (data that could not be read or compared) says nothing
// about the numbers, so it neither makes its operator a culprit nor propagates.
bool Fails(Verdict v) { return v == Verdict::kFail; }
}  // namespace

std::vector<OpAnalysis> AnalyzeCulprits(const std::vector<CulpritInput>& items,
                                        std::vector<size_t>* op_of_item) {
  struct Acc {
    bool in_fail = false;
    bool out_fail = false;
  };
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
    // An item without a role (a plain file of named tensors) is its own operator's output.
    if (it.role == Role::kOutput || it.role == Role::kUnknown) {
      acc[pos].out_fail = true;
    } else {
      acc[pos].in_fail = true;
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (acc[i].out_fail) out[i].status = acc[i].in_fail ? OpStatus::kPropagated : OpStatus::kCulprit;
  }
  return out;
}

std::string FirstCulprit(const std::vector<OpAnalysis>& ops) {
  for (const OpAnalysis& op : ops) {
    if (op.status == OpStatus::kCulprit) return op.api;
  }
  return "";
}

}  // namespace parity
