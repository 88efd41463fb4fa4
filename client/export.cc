#include "client/export.h"

#include "common/base/status_macros.h"

#include <cmath>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "client/proto_util.h"
#include "client/remote_common.h"
#include "client/report_format.h"
#include "common/base/json.h"
#include "common/base/status_macros.h"
#include "common/checks/msprobe_policy.h"
#include "common/formats/argument.h"
#include "proto/enums.h"

namespace parity {
namespace {

constexpr int64_t kGoldenOnlyIndexBase = 1000000000000;

bool IsGoldenOnly(const v1::OpResult& r) { return r.key().index() >= kGoldenOnlyIndexBase; }

Json StatJson(const v1::Statistics& s, bool (v1::Statistics::*has)() const, double (v1::Statistics::*get)() const) {
  return (s.*has)() ? Json::Number((s.*get)()) : Json();
}

// An item as the report formatter knows it, rebuilt from one side of a result.
DumpItem SideItem(const v1::OpResult& r, bool golden) {
  DumpItem it;
  it.name = golden ? r.golden_name() : r.key().name();
  it.api = r.key().api();
  it.op_type = r.key().op_type();
  it.phase = FromProto(r.key().phase());
  it.role = FromProto(r.key().role());
  const v1::DType dt = golden ? r.golden_dtype() : r.target_dtype();
  it.is_tensor = dt != v1::DTYPE_UNSPECIFIED;
  if (it.is_tensor) {
    it.dtype = static_cast<DType>(static_cast<int>(dt) - 1);
    const std::string& text = golden ? r.golden_dtype_text() : r.target_dtype_text();
    it.dtype_text = text.empty() ? TorchDTypeName(*it.dtype) : text;
    const auto& shape = golden ? r.golden_shape() : r.target_shape();
    it.shape.assign(shape.begin(), shape.end());
    it.has_shape = true;
  } else {
    const std::string& type = golden ? r.golden_type() : r.target_type();
    it.type = type.empty() ? "scalar" : type;
    it.dtype_text = golden ? r.golden_dtype_text() : r.target_dtype_text();
    it.shape_text = golden ? r.golden_shape_text() : r.target_shape_text();
    if (golden ? r.has_golden_value() : r.has_target_value()) {
      it.value = ArgumentValue(it.type, golden ? r.golden_value() : r.target_value());
    }
  }
  const v1::Statistics& s = golden ? r.golden_stats() : r.target_stats();
  it.max = StatJson(s, &v1::Statistics::has_max, &v1::Statistics::max);
  it.min = StatJson(s, &v1::Statistics::has_min, &v1::Statistics::min);
  it.mean = StatJson(s, &v1::Statistics::has_mean, &v1::Statistics::mean);
  it.norm = StatJson(s, &v1::Statistics::has_norm, &v1::Statistics::norm);
  if (golden ? r.has_golden_requires_grad() : r.has_target_requires_grad()) {
    it.requires_grad = golden ? r.golden_requires_grad() : r.target_requires_grad();
  }
  for (const v1::Metric& m : r.metrics()) {
    if (m.name() == (golden ? "BENCH MD5" : "NPU MD5")) it.md5 = m.text();
  }
  const std::string& data_name = golden ? r.golden_data_name() : r.target_data_name();
  it.data_name = !data_name.empty() ? data_name : it.is_tensor ? it.name : "-1";  // "": stored before
  return it;
}

}  // namespace

ResultsReport::ResultsReport(const std::vector<v1::OpResult>& results) {
  report.mode = DumpMode::kTensor;
  bool mode_known = false;
  std::map<PolicyKind, int> policies;
  for (const v1::OpResult& r : results) {
    CompareRow row;
    row.policy = PolicyFromProto(r.policy());
    row.result = CheckResultFromProto(r);
    if (!mode_known && row.result.verdict != Verdict::kUnmatched) {
      if (row.result.Find("Max diff")) report.mode = DumpMode::kStatistics, mode_known = true;
      else if (row.result.Find("NPU MD5")) report.mode = DumpMode::kMd5, mode_known = true;
      else if (row.result.Find("Cosine")) mode_known = true;
    }
    const bool own_policy = r.policy() != v1::POLICY_UNSPECIFIED && r.verdict() != v1::VERDICT_UNMATCHED;
    if (own_policy) policies[row.policy]++;
    if (!IsGoldenOnly(r)) {
      row.target = static_cast<int>(target.items.size());
      target.items.push_back(SideItem(r, false));
    }
    if (!r.golden_name().empty()) {
      row.golden = static_cast<int>(golden.items.size());
      golden.items.push_back(SideItem(r, true));
    }
    report.rows.push_back(std::move(row));
    if (!r.stack().empty() && !IsGoldenOnly(r)) target.structure.stacks.emplace(r.key().api(), r.stack());
    // The operator's culprit status, as the daemon marked it on each of its target items.
    if (r.culprit() != v1::CULPRIT_STATUS_UNSPECIFIED && !IsGoldenOnly(r) &&
        (report.ops.empty() || report.ops.back().api != r.key().api())) {
      report.ops.push_back({r.key().api(), r.culprit() == v1::CULPRIT_STATUS_CULPRIT
                                               ? OpStatus::kCulprit
                                               : OpStatus::kPropagated});
    }
  }
  // The base policy is the one most compared rows used; rows of items without a counterpart
  // are the base policy's, as in the local report.
  int best = -1;
  for (const auto& [k, n] : policies) {
    if (n > best) {
      best = n;
      report.policy = k;
    }
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].policy() == v1::POLICY_UNSPECIFIED || results[i].verdict() == v1::VERDICT_UNMATCHED) {
      report.rows[i].policy = report.policy;
    }
  }
}

std::string ExportCsv(const std::vector<v1::OpResult>& results, bool has_stacks, const std::string& target_format) {
  ResultsReport r(results);
  r.target.structure.has_stack_json = has_stacks;
  r.target.format = target_format;
  return FormatCsv(r.context());
}

Json JobSummaryJson(const v1::JobSummary& s) {
  Json j = Json::MakeObject();
  j.Set("counts", remote::CountsJson(s.counts()));
  j.Set("first_culprit", s.first_culprit().empty() ? Json() : Json::String(s.first_culprit()));
  Json culprits = Json::MakeArray();
  for (const std::string& c : s.culprits()) culprits.Append(Json::String(c));
  j.Set("culprits", std::move(culprits));
  Json worst = Json::MakeArray();
  for (const v1::WorstOp& w : s.worst()) {
    Json o = Json::MakeObject();
    o.Set("metric", Json::String(w.metric()));
    o.Set("name", Json::String(w.name()));
    o.Set("value", Json::Number(w.value()));
    worst.Append(std::move(o));
  }
  j.Set("worst", std::move(worst));
  j.Set("culprit_analysis", CulpritAnalysisFromProto(s));
  if (s.module_tree_size() > 0) j.Set("module_tree", TreeJson(TreeFromProto(s)));
  return j;
}

OpPhase PhaseFromProto(v1::StepPhase p) {
  switch (p) {
    case v1::STEP_PHASE_FORWARD: return OpPhase::kForward;
    case v1::STEP_PHASE_BACKWARD: return OpPhase::kBackward;
    case v1::STEP_PHASE_GRADIENT: return OpPhase::kGradient;
    default: return OpPhase::kNone;
  }
}

Json CulpritAnalysisFromProto(const v1::JobSummary& s) {
  auto number = [](bool has, double v) { return has ? Json::Number(v) : Json(); };
  Json j = Json::MakeObject();
  j.Set("noise_growth", number(s.has_noise_growth(), s.noise_growth()));
  j.Set("growth_threshold", Json::Number(s.growth_threshold()));
  j.Set("noise_samples", Json::Integer(s.noise_samples()));
  j.Set("growth_fence", number(s.has_growth_fence(), s.growth_fence()));
  Json ranked = Json::MakeArray();
  for (const v1::Culprit& c : s.ranked_culprits()) {
    Json o = Json::MakeObject();
    o.Set("api", Json::String(c.api()));
    const OpPhase phase = PhaseFromProto(c.phase());
    o.Set("phase", phase == OpPhase::kNone ? Json() : Json::String(OpPhaseName(phase)));
    o.Set("growth", number(c.has_growth(), c.growth()));
    o.Set("in_error", number(c.has_in_error(), c.in_error()));
    o.Set("out_error", number(c.has_out_error(), c.out_error()));
    o.Set("stack", c.stack().empty() ? Json() : Json::String(c.stack()));
    ranked.Append(std::move(o));
  }
  j.Set("ranked", std::move(ranked));
  Json noise = Json::MakeArray();
  for (const std::string& n : s.within_noise()) noise.Append(Json::String(n));
  j.Set("within_noise", std::move(noise));
  j.Set("more", Json::Integer(s.more_culprits()));
  return j;
}

std::vector<TreeNodeView> TreeFromProto(const v1::JobSummary& s) {
  auto status = [](v1::CulpritStatus c) {
    return c == v1::CULPRIT_STATUS_CULPRIT ? OpStatus::kCulprit
           : c == v1::CULPRIT_STATUS_PROPAGATED ? OpStatus::kPropagated
                                                : OpStatus::kNone;
  };
  std::vector<TreeNodeView> out;
  out.reserve(static_cast<size_t>(s.module_tree_size()));
  for (const v1::TreeNode& n : s.module_tree()) {
    TreeNodeView& v = out.emplace_back();
    v.name = n.name();
    v.parent = n.parent();
    v.status = status(n.status());
    v.fails = n.fails();
    v.gradient_status = status(n.gradient_status());
    v.gradient_fails = n.gradient_fails();
  }
  return out;
}

void WriteResultsJson(const Json& head, const std::vector<v1::OpResult>& results, std::ostream& out) {
  const ResultsReport r(results);
  WriteItemsDocument(r.context(), head, out);
}

std::string ResultJson(const v1::OpResult& result) {
  const ResultsReport r({result});
  return ItemJson(r.context(), r.report.rows[0]);
}

namespace {

// The overlay of one --metric: the result metrics it reads (the first present wins), whether a
// higher value is worse, and Model Explorer's colour thresholds.
struct OverlayMetric {
  std::vector<std::string> names;
  bool higher_is_worse = false;
  Json thresholds = Json::MakeArray();
};

absl::StatusOr<OverlayMetric> OverlayMetricFor(const std::string& metric) {
  OverlayMetric o;
  auto threshold = [&o](double v, const char* color) {
    Json t = Json::MakeObject();
    t.Set("value", Json::Number(v));
    t.Set("bgColor", Json::String(color));
    o.thresholds.Append(std::move(t));
  };
  if (metric == "cosine" || metric == "pcc") {
    o.names = metric == "cosine" ? std::vector<std::string>{"Cosine", "PCC"} : std::vector<std::string>{"PCC", "Cosine"};
    threshold(0.99, "#e53935");
    threshold(0.999, "#fdd835");
    threshold(1.000001, "#43a047");  // slightly above 1 so that rounded cosines are coloured
  } else if (metric == "max_abs_err") {
    o.names = {"MaxAbsErr", "Max absolute difference", "Required atol"};
    o.higher_is_worse = true;
    threshold(1e-3, "#43a047");
    threshold(1.0, "#fdd835");
    threshold(1e308, "#e53935");
  } else if (metric == "max_rel_err") {
    o.names = {"MaxRelativeErr", "Max relative difference", "Required rtol"};
    o.higher_is_worse = true;
    threshold(1e-3, "#43a047");
    threshold(5e-3, "#fdd835");
    threshold(1e308, "#e53935");
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metric must be cosine, pcc, max_abs_err or max_rel_err, got '", metric, "'"));
  }
  return o;
}

}  // namespace

absl::StatusOr<ModelExplorerExport> ExportModelExplorer(const std::vector<v1::OpResult>& results,
                                                        const std::string& metric,
                                                        const std::string& graph_id,
                                                        const std::string& title) {
  PARITY_ASSIGN_OR_RETURN(OverlayMetric overlay, OverlayMetricFor(metric));
  const std::vector<std::string>& names = overlay.names;
  const bool higher_is_worse = overlay.higher_is_worse;
  struct Op {
    std::optional<double> value;
    bool value_from_output = false;
    Verdict worst = Verdict::kPass;
    v1::CulpritStatus culprit = v1::CULPRIT_STATUS_UNSPECIFIED;
    int64_t first_index = 0;
  };
  std::map<std::string, Op> ops;
  std::vector<std::string> order;
  for (const v1::OpResult& r : results) {
    if (IsGoldenOnly(r)) continue;
    const std::string& api = r.key().api();
    auto [it, inserted] = ops.try_emplace(api);
    Op& op = it->second;
    if (inserted) order.push_back(api);
    const Verdict v = VerdictFromProto(r.verdict());
    if (VerdictSeverity(v) > VerdictSeverity(op.worst)) op.worst = v;
    if (r.culprit() != v1::CULPRIT_STATUS_UNSPECIFIED) op.culprit = r.culprit();
    const bool is_output = r.key().role() == v1::ROLE_OUTPUT;
    for (const std::string& n : names) {
      const v1::Metric* m = nullptr;
      for (const v1::Metric& x : r.metrics()) {
        if (x.name() == n && x.has_number() && !std::isnan(x.number())) m = &x;
      }
      if (m == nullptr) continue;
      // Prefer the operator's outputs; within them keep the worst value.
      if (op.value_from_output && !is_output) break;
      const bool worse = !op.value || (is_output && !op.value_from_output) ||
                         (higher_is_worse ? m->number() > *op.value : m->number() < *op.value);
      if (worse) {
        op.value = m->number();
        op.value_from_output = is_output;
      }
      break;
    }
  }
  Json metric_results = Json::MakeObject();
  Json verdict_results = Json::MakeObject();
  for (const std::string& api : order) {
    const Op& op = ops[api];
    if (op.value) {
      Json v = Json::MakeObject();
      v.Set("value", Json::Number(*op.value));
      metric_results.Set(api, std::move(v));
    }
    std::string text = absl::AsciiStrToLower(VerdictName(op.worst));
    if (op.culprit == v1::CULPRIT_STATUS_CULPRIT) text += " (culprit)";
    if (op.culprit == v1::CULPRIT_STATUS_PROPAGATED) text += " (propagated)";
    const char* color = op.worst == Verdict::kPass ? "#43a047"
                        : op.worst == Verdict::kWarn ? "#fdd835"
                        : op.worst == Verdict::kFail ? "#e53935"
                        : op.worst == Verdict::kError ? "#8e24aa"
                                                      : "#9e9e9e";
    Json v = Json::MakeObject();
    v.Set("value", Json::String(text));
    v.Set("bgColor", Json::String(color));
    verdict_results.Set(api, std::move(v));
  }
  Json metric_data = Json::MakeObject();
  metric_data.Set("name", Json::String(absl::StrCat(title, " ", metric)));
  metric_data.Set("results", std::move(metric_results));
  metric_data.Set("thresholds", std::move(overlay.thresholds));
  Json verdict_data = Json::MakeObject();
  verdict_data.Set("name", Json::String(absl::StrCat(title, " verdicts")));
  verdict_data.Set("results", std::move(verdict_results));
  Json m = Json::MakeObject(), v = Json::MakeObject();
  m.Set(graph_id, std::move(metric_data));
  v.Set(graph_id, std::move(verdict_data));
  return ModelExplorerExport{m.Dump(2) + "\n", v.Dump(2) + "\n"};
}

}  // namespace parity
