#include "common/compare/pairing.h"

#include <map>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/formats/torchair.h"

namespace parity {
namespace {

bool DtypeGatePasses(const DumpItem& t, const DumpItem& g) {
  if (t.dtype_text == g.dtype_text) return true;
  static const std::set<std::string> kTorch = {"torch.float16", "torch.float32", "torch.bfloat16"};
  static const std::set<std::string> kMs = {"Float16", "Float32", "BFloat16"};
  return (kTorch.count(t.dtype_text) && kTorch.count(g.dtype_text)) ||
         (kMs.count(t.dtype_text) && kMs.count(g.dtype_text));
}

absl::Status CheckDuplicates(const std::vector<DumpItem>& items, const char* side) {
  absl::flat_hash_map<absl::string_view, size_t> seen;
  seen.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    auto [it, inserted] = seen.emplace(items[i].name, i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate item name '", items[i].name,
                                                     "' in the ", side, " dump (items ",
                                                     it->second, " and ", i, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

PairingOptions PairingOptionsFor(absl::string_view golden_format, absl::string_view target_format,
                                 bool fuzzy, std::vector<std::pair<std::string, std::string>> mapping) {
  PairingOptions po;
  const bool msprobe = golden_format == "msprobe" && target_format == "msprobe";
  po.match_shape = msprobe;
  po.dtype_gate = msprobe;
  po.fuzzy = fuzzy;
  po.mapping = std::move(mapping);
  po.in_run_goldens = target_format == kTorchairGeFormat && golden_format == kTorchairFxFormat;
  if (target_format == kTorchairGeFormat) {
    po.no_target_note =
        "no GE tensor is named after this one: a fused GE op dumps only its outer tensors, and ops "
        "the graph does not map keep their GE names";
  }
  return po;
}

void MoveInRunGoldens(std::vector<DumpItem>* target, std::vector<DumpItem>* golden, PairingOptions* o) {
  if (!o->in_run_goldens) return;
  absl::flat_hash_set<std::string> wanted;
  for (const DumpItem& t : *target) {
    if (!t.in_run_golden.empty() && t.in_run_golden != t.name) wanted.insert(t.in_run_golden);
  }
  if (wanted.empty()) return;
  absl::flat_hash_set<absl::string_view> golden_names;
  for (const DumpItem& g : *golden) golden_names.insert(g.name);
  absl::flat_hash_set<std::string> moved;
  std::vector<DumpItem> kept;
  kept.reserve(target->size());
  for (DumpItem& t : *target) {
    if (wanted.contains(t.name) && !golden_names.contains(t.name) && moved.insert(t.name).second) {
      golden->push_back(std::move(t));
    } else {
      kept.push_back(std::move(t));
    }
  }
  *target = std::move(kept);
  for (const DumpItem& t : *target) {
    if (moved.contains(t.in_run_golden)) o->mapping.emplace_back(t.name, t.in_run_golden);
  }
}

std::string PairIncompatibility(const DumpItem& t, const DumpItem& g, const PairingOptions& o) {
  if (t.is_tensor != g.is_tensor) {
    return absl::StrCat("the golden item is ", g.is_tensor ? "a tensor" : g.type,
                        ", the target item is ", t.is_tensor ? "a tensor" : t.type);
  }
  if (!t.is_tensor) return "";
  if (o.match_shape && t.has_shape && g.has_shape && t.shape != g.shape) {
    return absl::StrCat("shapes differ: golden ", ShapeToString(g.shape), ", target ",
                        ShapeToString(t.shape));
  }
  if (o.dtype_gate && !DtypeGatePasses(t, g)) {
    return absl::StrCat("dtypes cannot be compared (msprobe dtype gate): golden ", g.dtype_text,
                        ", target ", t.dtype_text);
  }
  return "";
}

absl::StatusOr<std::vector<ItemPair>> PairItems(const std::vector<DumpItem>& target,
                                                const std::vector<DumpItem>& golden,
                                                const PairingOptions& o) {
  absl::Status s = CheckDuplicates(target, "target");
  if (!s.ok()) return s;
  s = CheckDuplicates(golden, "golden");
  if (!s.ok()) return s;

  std::map<std::string, std::string> mapping(o.mapping.begin(), o.mapping.end());
  absl::flat_hash_map<absl::string_view, int> by_name;  // views of golden's names
  by_name.reserve(golden.size());
  for (size_t i = 0; i < golden.size(); ++i) by_name[golden[i].name] = static_cast<int>(i);
  std::map<std::string, std::vector<int>> by_fuzzy;
  if (o.fuzzy) {
    for (size_t i = 0; i < golden.size(); ++i) {
      by_fuzzy[FuzzyName(golden[i].name)].push_back(static_cast<int>(i));
    }
  }
  std::vector<std::string> golden_note(golden.size());
  std::vector<bool> used(golden.size(), false);
  std::vector<ItemPair> pairs;
  pairs.reserve(target.size());
  for (size_t ti = 0; ti < target.size(); ++ti) {
    const DumpItem& t = target[ti];
    ItemPair p;
    p.target = static_cast<int>(ti);
    auto m = mapping.find(t.name);
    const std::string& key = m == mapping.end() ? t.name : m->second;
    auto g = by_name.find(key);
    if (g != by_name.end() && !used[g->second]) {
      const std::string why = PairIncompatibility(t, golden[g->second], o);
      if (why.empty()) {
        p.golden = g->second;
      } else {
        p.note = why;
        golden_note[g->second] = why;
      }
    } else if (g != by_name.end()) {
      p.note = absl::StrCat("golden item '", key, "' is already paired");
    }
    if (p.golden < 0 && o.fuzzy && m == mapping.end()) {
      auto f = by_fuzzy.find(FuzzyName(t.name));
      if (f != by_fuzzy.end()) {
        for (int gi : f->second) {
          if (used[gi] || !PairIncompatibility(t, golden[gi], o).empty()) continue;
          p.golden = gi;
          p.fuzzy = golden[gi].name != t.name;
          p.note.clear();
          break;
        }
      }
    }
    if (p.golden >= 0) {
      used[p.golden] = true;
      golden_note[p.golden].clear();
    } else if (p.note.empty()) {
      p.note = absl::StrCat("no golden item named '", key, "'");
    }
    pairs.push_back(std::move(p));
  }
  for (size_t gi = 0; gi < golden.size(); ++gi) {
    if (used[gi]) continue;
    ItemPair p;
    p.golden = static_cast<int>(gi);
    p.note = golden_note[gi].empty() ? o.no_target_note : golden_note[gi];
    pairs.push_back(std::move(p));
  }
  return pairs;
}

}  // namespace parity
