#include "common/compare/culprit.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
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

// Largest of two error figures, NaN only when both are.
double MaxError(double a, double b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return std::max(a, b);
}

struct Acc {
  bool in_fail = false;
  bool out_fail = false;
  double in_error = kUnknownError;   // over inputs and parameters
  double own_error = kUnknownError;  // over every item (what a dependent entry receives)
  double out_error = kUnknownError;
  double unit = 0;                   // of the outputs' dtype
  bool has_inputs = false;           // any input or parameter item, compared or not
};

// What a module's entries say about a parameter gradient of it: whether any forward entry has a
// failing item, whether any backward entry has a failing incoming gradient (its inputs), and the
// largest error of those items.
struct ModuleFlags {
  bool forward_fail = false;
  bool backward_in_fail = false;
  double error = kUnknownError;
};

OpPhase PhaseOf(OpKind k) {
  switch (k) {
    case OpKind::kForward: return OpPhase::kForward;
    case OpKind::kBackward: return OpPhase::kBackward;
    case OpKind::kParameterGrad: return OpPhase::kGradient;
    case OpKind::kOther: break;
  }
  return OpPhase::kNone;
}

// The largest error an operator received, and whether its failing output is blamed on an
// entry it depends on (see culprit.h).
struct Received {
  double error = kUnknownError;
  bool blamed_elsewhere = false;
};

Received ReceivedBy(size_t i, const ApiParts& p, const std::vector<Acc>& acc,
                    const absl::flat_hash_map<absl::string_view, size_t>& position,
                    const absl::flat_hash_map<absl::string_view, ModuleFlags>& modules,
                    const std::string& api) {
  Received r{acc[i].in_error, acc[i].in_fail};
  if (p.kind == OpKind::kBackward) {
    // A backward entry records the gradients only, not the forward tensors the op saved: with
    // its forward entry failing, its wrong output is a consequence.
    std::string forward = api;
    forward.replace(p.word, 9, ".forward");
    if (auto it = position.find(forward); it != position.end()) {
      r.blamed_elsewhere |= acc[it->second].in_fail || acc[it->second].out_fail;
      r.error = MaxError(r.error, acc[it->second].own_error);
    }
  } else if (p.kind == OpKind::kParameterGrad) {
    // A parameter's gradient comes from the module's incoming gradient and its forward input.
    if (auto it = modules.find(absl::string_view(api).substr(0, p.word)); it != modules.end()) {
      r.blamed_elsewhere = it->second.forward_fail || it->second.backward_in_fail;
      r.error = it->second.error;
    }
  }
  return r;
}

// out / max(in, unit): how much the operator amplifies the error it received.
double Growth(double out, double in, double unit) {
  if (std::isnan(out)) return kUnknownError;
  if (out == 0) return 0;
  const double base = std::max(std::isnan(in) ? 0.0 : in, unit);
  return base > 0 ? out / base : std::numeric_limits<double>::infinity();
}

// The k-th smallest of `v` (0-based), reordering it.
double KthSmallest(std::vector<double>* v, size_t k) {
  std::nth_element(v->begin(), v->begin() + static_cast<std::ptrdiff_t>(k), v->end());
  return (*v)[k];
}

// The noise floor (the growth that operators without a failing output reach) and the outlier
// fence over every operator not blamed on another (see culprit.h).
GrowthFloor NoiseFloor(const std::vector<OpAnalysis>& ops, const std::vector<bool>& blamed) {
  std::vector<double> passing, logs;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpAnalysis& op = ops[i];
    if (!std::isfinite(op.growth) || std::isnan(op.in_error)) continue;
    if (!op.fails) passing.push_back(op.growth);
    if (!blamed[i]) logs.push_back(std::log(std::max(op.growth, kFenceFloor)));
  }
  GrowthFloor f;
  f.samples = passing.size();
  if (!passing.empty()) {
    // The 99th percentile (nearest rank); the largest below 100 samples.
    const size_t k = passing.size() < 100 ? passing.size() - 1 : (passing.size() * 99 + 99) / 100 - 1;
    f.noise = KthSmallest(&passing, k);
    f.threshold = std::max(f.threshold, kNoiseMargin * f.noise);
  }
  if (logs.size() >= kFenceMinSamples) {
    const double median = KthSmallest(&logs, logs.size() / 2);
    std::vector<double> deviations;
    deviations.reserve(logs.size());
    for (double l : logs) deviations.push_back(std::fabs(l - median));
    const double mad = KthSmallest(&deviations, deviations.size() / 2);
    f.fence = std::exp(median + kFenceMads * 1.4826 * mad);
    f.threshold = std::max(f.threshold, f.fence);
  }
  return f;
}

// The second pass: each operator's errors and growth, then its status from its own items and,
// for backward entries and parameter gradients, from the entries they depend on, and from its
// growth against the run's noise floor (see culprit.h).
GrowthFloor Decide(const std::vector<Acc>& acc, const absl::flat_hash_map<absl::string_view, size_t>& position,
                   std::vector<OpAnalysis>* out) {
  absl::flat_hash_map<absl::string_view, ModuleFlags> modules;  // keyed by "Module.m.C"
  for (size_t i = 0; i < out->size(); ++i) {
    const absl::string_view api = (*out)[i].api;
    const ApiParts p = PartsOf(api);
    if (p.kind == OpKind::kForward) {
      ModuleFlags& m = modules[api.substr(0, p.word)];
      m.forward_fail |= acc[i].in_fail || acc[i].out_fail;
      m.error = MaxError(m.error, acc[i].own_error);
    }
    if (p.kind == OpKind::kBackward) {
      ModuleFlags& m = modules[api.substr(0, p.word)];
      m.backward_in_fail |= acc[i].in_fail;
      m.error = MaxError(m.error, acc[i].in_error);
    }
  }
  std::vector<bool> blamed(out->size());
  for (size_t i = 0; i < out->size(); ++i) {
    OpAnalysis& op = (*out)[i];
    const ApiParts p = PartsOf(op.api);
    const Received r = ReceivedBy(i, p, acc, position, modules, op.api);
    op.phase = PhaseOf(p.kind);
    op.fails = acc[i].out_fail;
    op.out_error = acc[i].out_error;
    // An operator with no input item (a plain file) received nothing it could amplify.
    const bool receives = acc[i].has_inputs || p.kind == OpKind::kBackward || p.kind == OpKind::kParameterGrad;
    op.in_error = receives ? r.error : kUnknownError;
    op.growth = receives ? Growth(op.out_error, op.in_error, acc[i].unit) : kUnknownError;
    blamed[i] = r.blamed_elsewhere;
  }
  const GrowthFloor floor = NoiseFloor(*out, blamed);
  for (size_t i = 0; i < out->size(); ++i) {
    OpAnalysis& op = (*out)[i];
    if (!op.fails) continue;
    if (blamed[i]) {
      op.status = OpStatus::kPropagated;
    } else if (std::isnan(op.growth) || op.growth >= floor.threshold) {
      op.status = OpStatus::kCulprit;
    }
  }
  return floor;
}

// A culprit enclosing another culprit (construct.json) is propagated: every ancestor of a
// culprit that is one itself.
void DemoteEnclosing(const ParentList& parents, const absl::flat_hash_map<absl::string_view, size_t>& position,
                     std::vector<OpAnalysis>* out) {
  absl::flat_hash_map<absl::string_view, absl::string_view> parent;
  parent.reserve(parents.size());
  for (const auto& [node, p] : parents) parent.emplace(node, p);
  std::vector<size_t> enclosing;
  for (const OpAnalysis& op : *out) {
    if (op.status != OpStatus::kCulprit) continue;
    absl::string_view at = op.api;
    // Bounded: a malformed file may hold a cycle.
    for (size_t depth = 0; depth < 4096; ++depth) {
      auto p = parent.find(at);
      if (p == parent.end() || p->second.empty()) break;
      at = p->second;
      auto pos = position.find(at);
      if (pos != position.end() && (*out)[pos->second].status == OpStatus::kCulprit) enclosing.push_back(pos->second);
    }
  }
  for (size_t i : enclosing) (*out)[i].status = OpStatus::kPropagated;
}

}  // namespace

const char* OpPhaseName(OpPhase p) {
  switch (p) {
    case OpPhase::kForward: return "forward";
    case OpPhase::kBackward: return "backward";
    case OpPhase::kGradient: return "gradient";
    case OpPhase::kNone: break;
  }
  return "";
}

std::vector<OpAnalysis> AnalyzeCulprits(const std::vector<CulpritInput>& items,
                                        std::vector<size_t>* op_of_item, GrowthFloor* floor,
                                        const ParentList* parents) {
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
        out.emplace_back().api = std::string(it.api);
        acc.emplace_back();
      }
      pos = p->second;
    }
    last = pos;
    if (op_of_item != nullptr) op_of_item->push_back(pos);
    Acc& a = acc[pos];
    // An item without a role (a plain file of named tensors) is its own operator's output, and
    // a parameter gradient is what its parameters_grad entry produces.
    const bool output = it.role == Role::kOutput || it.role == Role::kUnknown || it.role == Role::kGradient;
    const bool fails = Fails(it.verdict);
    a.own_error = MaxError(a.own_error, it.error);
    if (output) {
      a.out_fail |= fails;
      a.out_error = MaxError(a.out_error, it.error);
      a.unit = std::max(a.unit, it.unit);
    } else {
      a.in_fail |= fails;
      a.in_error = MaxError(a.in_error, it.error);
      a.has_inputs = true;
    }
  }
  const GrowthFloor f = Decide(acc, position, &out);
  if (parents != nullptr) DemoteEnclosing(*parents, position, &out);
  if (floor != nullptr) *floor = f;
  return out;
}

namespace {

// A number from a metric: a number, or a text that is one ("12.5%" as 0.125).
std::optional<double> MetricNumber(const MetricValue* v) {
  if (v == nullptr) return std::nullopt;
  if (v->is_number()) return std::isnan(v->number()) ? std::nullopt : std::optional<double>(v->number());
  absl::string_view t = v->text();
  double scale = 1;
  if (absl::ConsumeSuffix(&t, "%")) scale = 0.01;
  double d;
  if (!absl::SimpleAtod(t, &d) || std::isnan(d)) return std::nullopt;
  return d * scale;
}

}  // namespace

double ItemError(const CheckResult& r, std::optional<DType> target_dtype, std::optional<double> golden_norm,
                 std::optional<double> target_norm) {
  if (r.verdict != Verdict::kPass && r.verdict != Verdict::kWarn && r.verdict != Verdict::kFail) {
    return kUnknownError;
  }
  if (!target_dtype || !IsFloating(*target_dtype)) return kUnknownError;
  // NaN when absent or not finite (plain doubles: GCC 12 warns about optionals here).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double gn = golden_norm && std::isfinite(*golden_norm) ? *golden_norm : nan;
  const double tn = target_norm && std::isfinite(*target_norm) ? *target_norm : nan;
  if (std::optional<double> euc = MetricNumber(r.Find("EucDist")); euc && !std::isnan(gn)) {
    if (gn > 0) return *euc / gn;
    return *euc == 0 ? 0 : std::numeric_limits<double>::infinity();
  }
  std::optional<double> cos = MetricNumber(r.Find("Cosine"));
  if (!cos) cos = MetricNumber(r.Find("PCC"));
  if (cos) {
    const double c = std::min(1.0, std::max(-1.0, *cos));
    if (gn > 0 && !std::isnan(tn)) {
      const double q = tn / gn;
      return std::sqrt(std::max(0.0, q * q + 1 - 2 * q * c));
    }
    return std::sqrt(std::max(0.0, 2 - 2 * c));
  }
  if (std::optional<double> nre = MetricNumber(r.Find("NormRelativeErr"))) return std::fabs(*nre);
  return kUnknownError;
}

double RoundingUnit(DType t) {
  switch (t) {
    case DType::kFloat8E5M2: return 0x1p-3;
    case DType::kFloat8E4M3FN: return 0x1p-4;
    case DType::kBFloat16: return 0x1p-8;
    case DType::kFloat16: return 0x1p-11;
    case DType::kFloat32: return 0x1p-24;
    case DType::kFloat64: return 0x1p-53;
    default: return 0;
  }
}

std::vector<size_t> RankedCulprits(const std::vector<OpAnalysis>& ops) {
  std::vector<size_t> out;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].status == OpStatus::kCulprit) out.push_back(i);
  }
  std::stable_sort(out.begin(), out.end(), [&](size_t a, size_t b) {
    const double ga = ops[a].growth, gb = ops[b].growth;
    if (std::isnan(gb)) return !std::isnan(ga);
    return !std::isnan(ga) && ga > gb;
  });
  return out;
}

std::string FirstCulprit(const std::vector<OpAnalysis>& ops) {
  for (const OpAnalysis& op : ops) {
    if (op.status == OpStatus::kCulprit) return op.api;
  }
  return "";
}

Json CulpritAnalysisJson(const std::vector<OpAnalysis>& ops, const GrowthFloor& floor, size_t max_culprits) {
  auto number = [](double d) { return std::isnan(d) ? Json() : Json::Number(d); };
  Json j = Json::MakeObject();
  j.Set("noise_growth", number(floor.noise));
  j.Set("growth_threshold", Json::Number(floor.threshold));
  j.Set("noise_samples", Json::Integer(static_cast<int64_t>(floor.samples)));
  j.Set("growth_fence", number(floor.fence));
  Json ranked = Json::MakeArray();
  const std::vector<size_t> order = RankedCulprits(ops);
  for (size_t k = 0; k < order.size() && k < max_culprits; ++k) {
    const OpAnalysis& op = ops[order[k]];
    Json c = Json::MakeObject();
    c.Set("api", Json::String(op.api));
    c.Set("phase", op.phase == OpPhase::kNone ? Json() : Json::String(OpPhaseName(op.phase)));
    c.Set("growth", number(op.growth));
    c.Set("in_error", number(op.in_error));
    c.Set("out_error", number(op.out_error));
    ranked.Append(std::move(c));
  }
  j.Set("ranked", std::move(ranked));
  Json noise = Json::MakeArray();
  size_t n = 0;
  for (const OpAnalysis& op : ops) {
    if (op.fails && op.status == OpStatus::kNone && n++ < max_culprits) noise.Append(Json::String(op.api));
  }
  j.Set("within_noise", std::move(noise));
  j.Set("more", Json::Integer(static_cast<int64_t>(order.size() > max_culprits ? order.size() - max_culprits : 0)));
  return j;
}

}  // namespace parity
