#include "client/report_format.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/terminal.h"
#include "common/base/control_chars.h"
#include "common/base/csv.h"
#include "common/checks/msprobe_policy.h"
#include "common/formats/argument.h"
#include "common/formats/torchair.h"
#include "common/base/pyformat.h"
#include "common/base/status_macros.h"

namespace parity {
namespace {

const DumpItem* TargetItem(const ReportContext& c, const CompareRow& r) {
  return r.target >= 0 ? &c.target->items[r.target] : nullptr;
}
const DumpItem* GoldenItem(const ReportContext& c, const CompareRow& r) {
  return r.golden >= 0 ? &c.golden->items[r.golden] : nullptr;
}

// Lower is worse.
double Badness(const CompareRow& row) {
  const CheckResult& r = row.result;
  auto num = [&](const char* name, double fallback) {
    const MetricValue* v = r.Find(name);
    if (v == nullptr || !v->is_number() || std::isnan(v->number())) return fallback;
    return v->number();
  };
  switch (row.policy) {
    case PolicyKind::kMsprobe:
      if (r.Find("Cosine")) return num("Cosine", 2.0) - 1e-3 * std::min(num("MaxAbsErr", 0), 1e3);
      return 0;
    case PolicyKind::kForge: return num("PCC", 2.0);
    case PolicyKind::kTorch: {
      const double total = num("Total elements", 0);
      return total > 0 ? -num("Mismatched elements", 0) / total : 0;
    }
  }
  return 0;
}

// Text gathered in text() and handed to a sink 64 KiB at a time, so that a report's output is
// never held whole. The first error the sink returns is kept and returned again.
class ChunkedText {
 public:
  explicit ChunkedText(TextSink sink) : sink_(std::move(sink)) {}
  std::string* text() { return &text_; }
  // Hands the text on once there is enough of it.
  absl::Status Step() { return text_.size() >= kChunkBytes ? Flush() : status_; }
  absl::Status Flush() {
    if (status_.ok() && !text_.empty()) status_ = sink_(text_);
    text_.clear();
    return status_;
  }

 private:
  static constexpr size_t kChunkBytes = 64 << 10;
  const TextSink sink_;
  std::string text_;
  absl::Status status_;
};

TextSink StreamSink(std::ostream& os) {
  return [&os](absl::string_view piece) {
    os.write(piece.data(), static_cast<std::streamsize>(piece.size()));
    return absl::OkStatus();
  };
}

// Writes one JSON object member by member, as Json::DumpTo(out, 2, level) lays it out.
class PrettyObject {
 public:
  PrettyObject(std::string* out, int level) : out_(out), level_(level) { out_->push_back('{'); }
  void String(absl::string_view key, absl::string_view value) { AppendJsonString(value, Key(key)); }
  void Null(absl::string_view key) { Key(key)->append("null"); }
  void Metric(absl::string_view key, const MetricValue& v) {
    std::string* out = Key(key);
    if (!v.is_number()) {
      AppendJsonString(v.text(), out);
    } else if (v.is_integer()) {
      absl::StrAppend(out, v.integer());
    } else {
      AppendJsonNumber(v.number(), out);
    }
  }
  // A member holding `value` (an array or object laid out at this depth).
  void Value(absl::string_view key, const Json& value) { value.DumpTo(Key(key), 2, level_ + 1); }
  // Opens an object-valued member; it is written before this one continues.
  PrettyObject Object(absl::string_view key) { return PrettyObject(Key(key), level_ + 1); }
  void Close() {
    if (!first_) Indent(level_);
    out_->push_back('}');
  }

 private:
  std::string* Key(absl::string_view key) {
    if (!first_) out_->push_back(',');
    first_ = false;
    Indent(level_ + 1);
    AppendJsonString(key, out_);
    out_->append(": ");
    return out_;
  }
  void Indent(int level) {
    out_->push_back('\n');
    out_->append(static_cast<size_t>(2 * level), ' ');
  }
  std::string* const out_;
  const int level_;
  bool first_ = true;
};

// One side of an item: {"dtype", "shape", "stats", "requires_grad", "value"}; null for a side
// that is missing. dtype is the canonical name ("float32", "bfloat16"), null for a non-tensor
// item; value is a non-tensor argument's Python str(), null for a tensor.
Json SideJson(const DumpItem* it) {
  if (it == nullptr) return Json();
  Json side = Json::MakeObject();
  side.Set("dtype", it->dtype ? Json::String(DTypeName(*it->dtype)) : Json());
  if (it->has_shape) {
    Json shape = Json::MakeArray();
    for (int64_t d : it->shape) shape.Append(Json::Integer(d));
    side.Set("shape", std::move(shape));
  } else {
    side.Set("shape", Json());
  }
  Json stats = Json::MakeObject();
  stats.Set("max", it->max);
  stats.Set("min", it->min);
  stats.Set("mean", it->mean);
  stats.Set("norm", it->norm);
  side.Set("stats", std::move(stats));
  side.Set("requires_grad", it->requires_grad ? Json::Bool(*it->requires_grad) : Json());
  side.Set("value", it->is_tensor ? Json() : Json::String(PyStr(it->value)));
  return side;
}

// One item document (docs/schemas/item.schema.json) at nesting depth `level`: the names and
// where the item sits, the verdict, the policy's metrics, and each side's dtype, shape and
// statistics.
void AppendItemJson(const DumpItem* t, const DumpItem* g, const CheckResult& r, OpStatus op,
                    int level, std::string* out) {
  const DumpItem& any = t ? *t : *g;
  PrettyObject item(out, level);
  item.String("name", any.name);
  if (g) {
    item.String("golden_name", g->name);
  } else {
    item.Null("golden_name");
  }
  if (t) {
    item.String("target_name", t->name);
  } else {
    item.Null("target_name");
  }
  item.String("api", any.api);
  item.String("op_type", any.op_type);
  item.String("phase", PhaseName(any.phase));
  item.String("role", RoleName(any.role));
  item.String("verdict", VerdictName(r.verdict));
  item.String("policy", r.policy);
  item.String("peer_verdict", r.peer_verdict);
  item.String("message", r.message);
  // Whether the item's operator is a culprit or shows a failure propagated from one (target
  // items only).
  if (t != nullptr && op != OpStatus::kNone) {
    item.String("culprit", op == OpStatus::kCulprit ? "culprit" : "propagated");
  } else {
    item.Null("culprit");
  }
  PrettyObject metrics = item.Object("metrics");
  for (const parity::Metric& m : r.metrics) metrics.Metric(m.name, m.value);
  metrics.Close();
  item.Value("golden", SideJson(g));
  item.Value("target", SideJson(t));
  item.Close();
}

}  // namespace

std::string KeyMetrics(PolicyKind policy, const CheckResult& r) {
  static const char* kMsReal[] = {"Cosine", "MaxAbsErr", "MaxRelativeErr"};
  static const char* kMsStats[] = {"Max diff", "MaxRelativeErr", "NormRelativeErr"};
  static const char* kMsMd5[] = {"NPU MD5", "BENCH MD5"};
  static const char* kForge[] = {"PCC", "Dissimilarity", "Required atol"};
  static const char* kTorch[] = {"Mismatched elements", "Max absolute difference",
                                 "Max relative difference"};
  std::vector<const char*> names;
  if (r.verdict == Verdict::kUnmatched) return "";
  switch (policy) {
    case PolicyKind::kMsprobe:
      if (r.Find("Cosine")) {
        names.assign(std::begin(kMsReal), std::end(kMsReal));
      } else if (r.Find("Max diff")) {
        names.assign(std::begin(kMsStats), std::end(kMsStats));
      } else {
        names.assign(std::begin(kMsMd5), std::end(kMsMd5));
      }
      break;
    case PolicyKind::kForge: names.assign(std::begin(kForge), std::end(kForge)); break;
    case PolicyKind::kTorch: names.assign(std::begin(kTorch), std::end(kTorch)); break;
  }
  std::vector<std::string> parts;
  for (const char* n : names) {
    if (const MetricValue* v = r.Find(n)) parts.push_back(absl::StrCat(n, "=", v->ToString()));
  }
  return absl::StrJoin(parts, " ");
}

namespace {

// A message on one table line: its line breaks as " | ", other control characters escaped.
std::string OneLine(std::string s) {
  absl::StrReplaceAll({{"\n", " | "}}, &s);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return TerminalSafe(s);
}

std::string CsvLine(const std::vector<std::string>& fields) {
  std::vector<std::string> q;
  q.reserve(fields.size());
  for (const std::string& f : fields) q.push_back(CsvField(f));
  return absl::StrJoin(q, ",") + "\n";
}

// The four statistics columns of one side, as msprobe shows them (ArgumentStats for a
// non-tensor argument); N/A for a missing side.
void AppendStatTexts(const DumpItem* it, std::vector<std::string>* f) {
  if (it == nullptr) {
    f->insert(f->end(), 4, kNotApplicable);
    return;
  }
  const MsprobeStats s = MsprobeStatsOf(*it);
  for (const Json* v : {&s.max, &s.min, &s.mean, &s.norm}) f->push_back(MsprobeStatDisplay(*v).ToString());
}

std::string DataNames(const DumpItem* t, const DumpItem* g) {
  return absl::StrCat("['", t ? t->data_name : "-1", "', '", g ? g->data_name : "-1", "']");
}

std::vector<std::string> BasicColumns(const DumpItem* t, const DumpItem* g) {
  auto dtype = [](const DumpItem* it) {
    if (it == nullptr) return std::string(kNotApplicable);
    return it->is_tensor || !it->dtype_text.empty() ? it->dtype_text : it->type;
  };
  auto shape = [](const DumpItem* it) {
    if (it == nullptr) return std::string(kNotApplicable);
    if (!it->is_tensor && !it->shape_text.empty()) return it->shape_text;
    return it->has_shape ? ShapeToString(it->shape) : std::string("[]");
  };
  auto rg = [](const DumpItem* it) { return it ? MsprobeRequiresGradText(it->requires_grad) : std::string(kNotApplicable); };
  return {t ? t->name : kNotApplicable, g ? g->name : kNotApplicable, dtype(t), dtype(g),
          shape(t), shape(g), rg(t), rg(g)};
}

std::string ConsistentText(const DumpItem* t, const DumpItem* g) {
  if (t == nullptr || g == nullptr) return kNotApplicable;
  return MsprobeRequiresGradText(t->requires_grad) == MsprobeRequiresGradText(g->requires_grad)
             ? "True"
             : "False";
}

}  // namespace

std::string RowName(const ReportContext& c, const CompareRow& row) {
  if (const DumpItem* t = TargetItem(c, row)) return t->name;
  return GoldenItem(c, row)->name;
}

std::vector<size_t> WorstFirst(const ReportContext& c) {
  const auto& rows = c.report->rows;
  std::vector<size_t> order(rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int sa = VerdictSeverity(rows[a].result.verdict);
    const int sb = VerdictSeverity(rows[b].result.verdict);
    if (sa != sb) return sa > sb;
    return Badness(rows[a]) < Badness(rows[b]);
  });
  return order;
}

namespace {

// The rows `order` names, under a header, in columns sized to them (VERDICT, POLICY, ITEM,
// METRICS, MESSAGE), appended to `chunks`.
void AppendRowsTable(const ReportContext& c, const std::vector<size_t>& order, bool color,
                     ChunkedText* chunks) {
  const CompareReport& rep = *c.report;
  std::string& out = *chunks->text();
  size_t name_w = 4;
  size_t metric_w = 7;
  std::vector<std::string> metrics(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const CompareRow& row = rep.rows[order[k]];
    name_w = std::max(name_w, RowName(c, row).size());
    metrics[k] = KeyMetrics(row.policy, row.result);
    metric_w = std::max(metric_w, metrics[k].size());
  }
  name_w = std::min<size_t>(name_w, 60);
  metric_w = std::min<size_t>(metric_w, 70);
  std::map<absl::string_view, OpStatus> ops;
  for (const OpAnalysis& op : rep.ops) ops.emplace(op.api, op.status);
  auto culprit = [&](const CompareRow& row) -> const char* {
    const DumpItem* t = TargetItem(c, row);
    auto it = t ? ops.find(t->api) : ops.end();
    if (it == ops.end()) return "";
    return it->second == OpStatus::kCulprit ? "culprit" : it->second == OpStatus::kPropagated ? "propagated" : "";
  };
  absl::StrAppend(&out, Pad("VERDICT", 10), "  ", Pad("POLICY", 8), "  ", Pad("CULPRIT", 10), "  ",
                  Pad("ITEM", name_w), "  ", Pad("METRICS", metric_w), "  MESSAGE\n");
  for (size_t k = 0; k < order.size(); ++k) {
    const CompareRow& row = rep.rows[order[k]];
    const char* v = VerdictName(row.result.verdict);
    absl::StrAppend(&out, Paint(Pad(v, 10), VerdictColorCode(row.result.verdict), color), "  ",
                    Pad(PolicyName(row.policy), 8), "  ", Pad(culprit(row), 10), "  ",
                    Pad(RowName(c, row), name_w), "  ", Pad(metrics[k], metric_w), "  ",
                    OneLine(row.result.message), "\n");
    chunks->Step().IgnoreError();  // a stream sink never fails
  }
}

}  // namespace

std::string Figure3(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.3g", d);
}

std::string CulpritFigures(OpPhase phase, double growth, double out_error) {
  std::vector<std::string> parts;
  if (phase != OpPhase::kNone) parts.push_back(OpPhaseName(phase));
  parts.push_back(std::isnan(growth) ? "growth unknown" : absl::StrCat("growth ", Figure3(growth), "x"));
  if (!std::isnan(out_error)) parts.push_back(absl::StrCat("error ", Figure3(out_error)));
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

std::string NoiseFloorText(double noise, double threshold, int64_t samples, double fence) {
  const std::string floor = std::isnan(noise) ? "Noise floor: unknown (no passing operator with error figures)"
                                              : absl::StrCat("Noise floor: growth ", Figure3(noise), "x over ",
                                                             samples, " passing operators");
  const std::string why = !std::isnan(fence) && fence >= threshold ? " (the outlier fence over the operators that receive passing inputs)" : "";
  return absl::StrCat(floor, "; culprits need growth >= ", Figure3(threshold), "x", why);
}

std::vector<TreeNodeView> TreeFromAnalysis(const DumpStructure& structure, const std::vector<OpAnalysis>& ops) {
  absl::flat_hash_map<absl::string_view, const OpAnalysis*> by_api;
  for (const OpAnalysis& op : ops) by_api.emplace(op.api, &op);
  const std::vector<std::string> gradients = GradientEntries(structure);
  std::vector<TreeNodeView> out;
  out.reserve(structure.parents.size());
  for (size_t i = 0; i < structure.parents.size(); ++i) {
    TreeNodeView& n = out.emplace_back();
    n.name = structure.parents[i].first;
    n.parent = structure.parents[i].second;
    if (auto it = by_api.find(n.name); it != by_api.end()) {
      n.status = it->second->status;
      n.fails = it->second->fails;
    }
    if (gradients[i].empty()) continue;
    if (auto it = by_api.find(gradients[i]); it != by_api.end()) {
      n.gradient_status = it->second->status;
      n.gradient_fails = it->second->fails;
    }
  }
  return out;
}

std::string ModuleTreeText(const std::vector<TreeNodeView>& nodes, bool color) {
  absl::flat_hash_map<absl::string_view, std::vector<size_t>> children;
  absl::flat_hash_set<absl::string_view> names;
  for (const TreeNodeView& n : nodes) names.insert(n.name);
  std::vector<size_t> roots;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const TreeNodeView& n = nodes[i];
    if (n.parent.empty() || !names.contains(n.parent) || n.parent == n.name) {
      roots.push_back(i);
    } else {
      children[n.parent].push_back(i);
    }
  }
  // `what`: "" for the node's own operator, "parameters_grad" for its module's gradients.
  auto mark = [color](OpStatus status, bool fails, absl::string_view what) -> std::string {
    if (status == OpStatus::kCulprit) {
      return absl::StrCat("  ", Paint(absl::StrCat("<--- *** HERE ***", what.empty() ? "" : " (", what,
                                                   what.empty() ? "" : ")"),
                                      "31;1", color));
    }
    const char* word = status == OpStatus::kPropagated ? "propagated" : fails ? "within noise" : nullptr;
    if (word == nullptr || (color && what.empty())) return "";  // in colour, the node's own is dimmed
    return absl::StrCat("  (", what, what.empty() ? "" : ": ", word, ")");
  };
  std::string out;
  // Depth first, in file order, without recursion (a tree may be deep); a node reached twice
  // (a malformed file) is printed once.
  std::vector<bool> printed(nodes.size());
  std::vector<std::pair<size_t, size_t>> stack;  // node, depth
  for (auto r = roots.rbegin(); r != roots.rend(); ++r) stack.emplace_back(*r, 0);
  while (!stack.empty()) {
    const auto [i, depth] = stack.back();
    stack.pop_back();
    if (printed[i]) continue;
    printed[i] = true;
    const TreeNodeView& n = nodes[i];
    std::string line = absl::StrCat(std::string(2 * depth, ' '), TerminalSafe(n.name));
    const bool dim = color && (n.status == OpStatus::kPropagated || (n.status == OpStatus::kNone && n.fails));
    if (dim) line = Paint(line, "2", true);
    absl::StrAppend(&out, line, mark(n.status, n.fails, ""), mark(n.gradient_status, n.gradient_fails, "parameters_grad"),
                    "\n");
    if (auto c = children.find(n.name); c != children.end()) {
      for (auto k = c->second.rbegin(); k != c->second.rend(); ++k) stack.emplace_back(*k, depth + 1);
    }
  }
  return out;
}

std::string TreeSection(const std::vector<TreeNodeView>& nodes, bool color) {
  if (nodes.empty()) return "Module tree: none (the target dump has no construct.json, or it is empty)\n";
  return absl::StrCat("Module tree:\n", ModuleTreeText(nodes, color));
}

Json TreeJson(const std::vector<TreeNodeView>& nodes) {
  auto status = [](OpStatus s) {
    return s == OpStatus::kCulprit ? Json::String("culprit") : s == OpStatus::kPropagated ? Json::String("propagated") : Json();
  };
  Json out = Json::MakeArray();
  for (const TreeNodeView& n : nodes) {
    Json j = Json::MakeObject();
    j.Set("name", Json::String(n.name));
    j.Set("parent", n.parent.empty() ? Json() : Json::String(n.parent));
    j.Set("status", status(n.status));
    j.Set("fails", Json::Bool(n.fails));
    j.Set("gradient_status", status(n.gradient_status));
    j.Set("gradient_fails", Json::Bool(n.gradient_fails));
    out.Append(std::move(j));
  }
  return out;
}

void WriteRowsTable(const ReportContext& c, bool color, std::ostream& os) {
  ChunkedText chunks(StreamSink(os));
  std::vector<size_t> order(c.report->rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  AppendRowsTable(c, order, color, &chunks);
  chunks.Flush().IgnoreError();
}

void WriteTable(const ReportContext& c, bool color, int limit, std::ostream& os) {
  const CompareReport& rep = *c.report;
  ChunkedText chunks(StreamSink(os));
  std::string& out = *chunks.text();
  out = absl::StrCat("golden: ", c.golden->root, "\ntarget: ", c.target->root,
                                 "\npolicy: ", PolicyName(rep.policy), "    mode: ",
                                 DumpModeName(rep.mode), "    pairs: ", rep.rows.size(), "\n\n");
  std::vector<size_t> order = WorstFirst(c);
  // Only the rows shown are formatted, and only they set the column widths.
  if (limit >= 0 && order.size() > static_cast<size_t>(limit)) order.resize(static_cast<size_t>(limit));
  const size_t shown = order.size();
  AppendRowsTable(c, order, color, &chunks);
  if (shown < rep.rows.size()) {
    absl::StrAppend(&out, "... ", rep.rows.size() - shown, " more rows (use --limit)\n");
  }
  absl::StrAppend(&out, "\nSummary: ", CountsText([&rep](Verdict v) { return rep.count(v); }, color), "\n");
  if (rep.first_failure >= 0) {
    absl::StrAppend(&out, "First failure in dump order: ",
                    TerminalSafe(RowName(c, rep.rows[rep.first_failure])), "\n");
  } else {
    absl::StrAppend(&out, "No failures.\n");
  }
  if (rep.mode == DumpMode::kStatistics) absl::StrAppend(&out, kStatisticsOnlyNote, "\n");
  std::vector<std::string> propagated, noise;
  for (const OpAnalysis& op : rep.ops) {
    if (op.status == OpStatus::kPropagated) propagated.push_back(TerminalSafe(op.api));
    if (op.status == OpStatus::kNone && op.fails) noise.push_back(TerminalSafe(op.api));
  }
  const std::vector<size_t> ranked = RankedCulprits(rep.ops);
  if (!ranked.empty()) {
    absl::StrAppend(&out, Paint("Culprits", "31;1", color),
                    " (outputs fail, inputs pass, error growth above the noise floor), largest growth first:\n");
    for (size_t i : ranked) {
      const OpAnalysis& op = rep.ops[i];
      absl::StrAppend(&out, "  ", TerminalSafe(op.api), "  ", CulpritFigures(op.phase, op.growth, op.out_error), "\n");
    }
  }
  absl::StrAppend(&out, NoiseFloorText(rep.growth_floor.noise, rep.growth_floor.threshold,
                                       static_cast<int64_t>(rep.growth_floor.samples), rep.growth_floor.fence),
                  "\n");
  if (!propagated.empty()) {
    absl::StrAppend(&out, "Propagated (explained by another operator: a failing input, its forward entry, an inner culprit): ",
                    absl::StrJoin(propagated, ", "), "\n");
  }
  if (!noise.empty()) {
    absl::StrAppend(&out, "Within the noise floor (fail, but amplify the error they receive no more than passing operators do): ",
                    absl::StrJoin(noise, ", "), "\n");
  }
  chunks.Flush().IgnoreError();
}

std::vector<std::string> MsprobeCsvHeader(DumpMode mode, bool stacks) {
  std::vector<std::string> h = {"NPU Name",          "Bench Name",         "NPU Dtype",
                                "Bench Dtype",       "NPU Tensor Shape",   "Bench Tensor Shape",
                                "NPU Requires_grad", "Bench Requires_grad"};
  const std::vector<std::string> summary = {"NPU max",   "NPU min",   "NPU mean",
                                            "NPU l2norm", "Bench max", "Bench min",
                                            "Bench mean", "Bench l2norm"};
  switch (mode) {
    case DumpMode::kTensor:
      for (const char* col : kMsprobeRealColumns) h.push_back(col);
      h.insert(h.end(), summary.begin(), summary.end());
      for (const char* col : {"Requires_grad Consistent", "Accuracy Reached or Not", "Err_message"}) {
        h.push_back(col);
      }
      if (stacks) h.push_back("NPU_Stack_Info");
      h.push_back("Data_name");
      break;
    case DumpMode::kStatistics:
      for (const char* col : kMsprobeStatsColumns) h.push_back(col);
      h.insert(h.end(), summary.begin(), summary.end());
      for (const char* col : {"Requires_grad Consistent", "Result", "Err_message"}) h.push_back(col);
      if (stacks) h.push_back("NPU_Stack_Info");
      break;
    case DumpMode::kMd5:
      for (const char* col : {"NPU MD5", "BENCH MD5", "Requires_grad Consistent", "Result"}) {
        h.push_back(col);
      }
      if (stacks) h.push_back("NPU_Stack_Info");
      break;
  }
  return h;
}

std::vector<std::string> TorchairCsvHeader() {
  std::vector<std::string> h = MsprobeCsvHeader(DumpMode::kTensor, true);
  h.erase(h.begin() + 6, h.begin() + 8);  // no requires_grad in graph dumps
  h[0] = "API Name";
  for (std::string& col : h) {
    if (col == "Accuracy Reached or Not") col = "Result";
    if (col == "NPU_Stack_Info") col = "Stack Info";
    if (col == "Data_name") col = "Data Name";
  }
  h.insert(std::find(h.begin(), h.end(), "Err_message"), "Accuracy Reached or Not");
  return h;
}

namespace {

// "{GE op}.input.3" for the GE op's fourth input (its data name "{file},inputs,3", whatever FX
// node it is named after); "{API}.output.0" from the name of other items.
std::string TorchairApiName(const DumpItem* t) {
  if (t == nullptr) return kNotApplicable;
  for (const auto& [marker, role] : {std::pair<const char*, const char*>{",inputs,", ".input."}, {",outputs,", ".output."}}) {
    const size_t p = t->data_name.rfind(marker);
    if (p != std::string::npos) return absl::StrCat(t->api, role, t->data_name.substr(p + std::strlen(marker)));
  }
  size_t at = std::string::npos;
  for (const char* role : {".input.", ".output."}) {
    const size_t p = t->name.rfind(role);
    if (p != std::string::npos && (at == std::string::npos || p > at)) at = p;
  }
  return at == std::string::npos ? t->name : t->api + t->name.substr(at);
}

absl::Status WriteTorchairCsv(const ReportContext& c, ChunkedText* chunks) {
  std::string& out = *chunks->text();
  out += CsvLine(TorchairCsvHeader());
  const std::string* previous_api = nullptr;
  for (const CompareRow& row : c.report->rows) {
    const DumpItem* t = TargetItem(c, row);
    const DumpItem* g = GoldenItem(c, row);
    std::string stack;
    if (t != nullptr && (previous_api == nullptr || *previous_api != t->api)) {
      if (auto it = c.target->structure.stacks.find(t->api); it != c.target->structure.stacks.end()) stack = it->second;
    }
    if (t != nullptr) previous_api = &t->api;
    std::vector<std::string> f = BasicColumns(t, g);
    f.resize(6);
    f[0] = TorchairApiName(t);
    const CheckResult& r = row.result;
    const bool own = row.policy == PolicyKind::kMsprobe;
    for (const char* col : kMsprobeRealColumns) {
      const MetricValue* v = own ? r.Find(col) : nullptr;
      f.push_back(v ? v->ToString() : std::string(kNotApplicable));
    }
    for (const DumpItem* it : {t, g}) AppendStatTexts(it, &f);
    f.push_back(ConsistentText(t, g));
    f.push_back(VerdictName(r.verdict));
    f.push_back(own ? r.peer_verdict : r.verdict == Verdict::kPass ? "Yes" : "No");
    f.push_back(own ? r.message : absl::StrCat("[", PolicyName(row.policy), "] ", r.message));
    f.push_back(stack);
    f.push_back(DataNames(t, g));
    out += CsvLine(f);
    PARITY_RETURN_IF_ERROR(chunks->Step());
  }
  return chunks->Flush();
}

}  // namespace

absl::Status WriteCsv(const ReportContext& c, const TextSink& sink) {
  const CompareReport& rep = *c.report;
  ChunkedText chunks(sink);
  std::string& out = *chunks.text();
  if (rep.policy != PolicyKind::kMsprobe) {
    std::vector<std::string> h = MsprobeCsvHeader(DumpMode::kMd5);
    h.resize(8);
    for (const char* col : {"Policy", "Verdict", "Peer Verdict", "Metrics", "Message"}) h.push_back(col);
    out += CsvLine(h);
    for (const CompareRow& row : rep.rows) {
      std::vector<std::string> f = BasicColumns(TargetItem(c, row), GoldenItem(c, row));
      std::vector<std::string> m;
      for (const Metric& x : row.result.metrics) m.push_back(absl::StrCat(x.name, "=", x.value.ToString()));
      for (const std::string& s : {std::string(PolicyName(row.policy)),
                                   std::string(VerdictName(row.result.verdict)),
                                   row.result.peer_verdict, absl::StrJoin(m, "; "),
                                   row.result.message}) {
        f.push_back(s);
      }
      out += CsvLine(f);
      PARITY_RETURN_IF_ERROR(chunks.Step());
    }
    return chunks.Flush();
  }
  if (rep.mode == DumpMode::kTensor && (IsTorchairFormat(c.target->format) || IsTorchairFormat(c.golden->format))) {
    return WriteTorchairCsv(c, &chunks);
  }
  const bool stacks = c.target->structure.has_stack_json;
  out += CsvLine(MsprobeCsvHeader(rep.mode, stacks));
  const std::string* previous_api = nullptr;  // the last target row's
  for (const CompareRow& row : rep.rows) {
    const DumpItem* t = TargetItem(c, row);
    const DumpItem* g = GoldenItem(c, row);
    // msprobe's stack column: the API's stack on its first row, nothing on the others.
    std::string stack;
    if (stacks && t != nullptr && (previous_api == nullptr || *previous_api != t->api)) {
      if (auto it = c.target->structure.stacks.find(t->api); it != c.target->structure.stacks.end()) stack = it->second;
    }
    if (t != nullptr) previous_api = &t->api;
    std::vector<std::string> f = BasicColumns(t, g);
    const CheckResult& r = row.result;
    const bool foreign = row.policy != PolicyKind::kMsprobe;  // an override picked another policy
    std::string message = r.message;
    std::string peer = r.peer_verdict;
    if (foreign) {
      message = absl::StrCat("[", PolicyName(row.policy), " ", VerdictName(r.verdict), "] ", r.message);
      peer = r.verdict == Verdict::kPass ? "Yes" : r.verdict == Verdict::kFail ? "No" : "None";
    }
    auto metric = [&](const char* name) {
      const MetricValue* v = foreign ? nullptr : r.Find(name);
      return v ? v->ToString() : std::string(kNotApplicable);
    };
    auto stats = [&]() {
      for (const DumpItem* it : {t, g}) AppendStatTexts(it, &f);
    };
    switch (rep.mode) {
      case DumpMode::kTensor:
        for (const char* col : kMsprobeRealColumns) f.push_back(metric(col));
        stats();
        f.push_back(ConsistentText(t, g));
        f.push_back(peer);
        f.push_back(message);
        if (stacks) f.push_back(stack);
        f.push_back(DataNames(t, g));
        break;
      case DumpMode::kStatistics:
        for (const char* col : kMsprobeStatsColumns) f.push_back(metric(col));
        stats();
        f.push_back(ConsistentText(t, g));
        f.push_back(peer);
        f.push_back(message);
        if (stacks) f.push_back(stack);
        break;
      case DumpMode::kMd5:
        f.push_back(t ? t->md5 : kNotApplicable);
        f.push_back(g ? g->md5 : kNotApplicable);
        f.push_back(ConsistentText(t, g));
        f.push_back(peer);
        if (stacks) f.push_back(stack);
        break;
    }
    out += CsvLine(f);
    PARITY_RETURN_IF_ERROR(chunks.Step());
  }
  return chunks.Flush();
}

std::string FormatCsv(const ReportContext& c) {
  std::string text;
  WriteCsv(c, [&](absl::string_view piece) {
    text.append(piece.data(), piece.size());
    return absl::OkStatus();
  }).IgnoreError();  // the sink never fails
  return text;
}

Json CountsJson(const std::function<int64_t(Verdict)>& count) {
  Json j = Json::MakeObject();
  for (Verdict v : {Verdict::kPass, Verdict::kWarn, Verdict::kFail, Verdict::kError,
                    Verdict::kUnmatched, Verdict::kSkipped}) {
    j.Set(VerdictName(v), Json::Integer(count(v)));
  }
  return j;
}

std::string Pad(const std::string& s, size_t w) {
  std::string cell = TerminalSafe(s);
  if (cell.size() < w) cell.append(w - cell.size(), ' ');
  return cell;
}

std::string CountsText(const std::function<int64_t(Verdict)>& count, bool color) {
  std::vector<std::string> parts;
  for (Verdict v : {Verdict::kPass, Verdict::kWarn, Verdict::kFail, Verdict::kError,
                    Verdict::kUnmatched, Verdict::kSkipped}) {
    const int64_t n = count(v);
    if (v == Verdict::kSkipped && n == 0) continue;
    const std::string text = absl::StrCat(n, " ", absl::AsciiStrToLower(VerdictName(v)));
    parts.push_back(n > 0 ? Paint(text, VerdictColorCode(v), color) : text);
  }
  return absl::StrJoin(parts, ", ");
}

void WriteItemsDocument(const ReportContext& c, const Json& head, std::ostream& out) {
  // The document without its items ends with "\n}": the items go in before that brace.
  ChunkedText chunks(StreamSink(out));
  std::string& buf = *chunks.text();
  buf = head.Dump(2);
  buf.resize(buf.size() - 1);
  while (!buf.empty() && (buf.back() == '\n' || buf.back() == ' ')) buf.pop_back();
  buf.append(buf.back() == '{' ? "\n  \"items\": [" : ",\n  \"items\": [");
  std::map<absl::string_view, OpStatus> ops;
  for (const OpAnalysis& op : c.report->ops) ops.emplace(op.api, op.status);
  bool first = true;
  for (const CompareRow& row : c.report->rows) {
    buf.append(first ? "\n    " : ",\n    ");
    first = false;
    const DumpItem* t = TargetItem(c, row);
    const DumpItem* g = GoldenItem(c, row);
    const auto op = ops.find((t ? t : g)->api);
    AppendItemJson(t, g, row.result, op == ops.end() ? OpStatus::kNone : op->second, 2, &buf);
    chunks.Step().IgnoreError();  // a stream sink never fails
  }
  buf.append(first ? "]\n}\n" : "\n  ]\n}\n");
  chunks.Flush().IgnoreError();
}

std::string ItemJson(const ReportContext& c, const CompareRow& row) {
  const DumpItem* t = TargetItem(c, row);
  const DumpItem* g = GoldenItem(c, row);
  OpStatus status = OpStatus::kNone;
  for (const OpAnalysis& op : c.report->ops) {
    if (op.api == (t ? t : g)->api) status = op.status;
  }
  std::string out;
  AppendItemJson(t, g, row.result, status, 0, &out);
  return out + "\n";
}

void WriteReportJson(const ReportContext& c, std::ostream& out, bool tree) {
  const CompareReport& rep = *c.report;
  Json j = Json::MakeObject();
  j.Set("golden", Json::String(c.golden->root));
  j.Set("target", Json::String(c.target->root));
  j.Set("policy", Json::String(PolicyName(rep.policy)));
  j.Set("mode", Json::String(DumpModeName(rep.mode)));
  Json summary = Json::MakeObject();
  summary.Set("pairs", Json::Integer(static_cast<int64_t>(rep.rows.size())));
  summary.Set("counts", CountsJson([&rep](Verdict v) { return static_cast<int64_t>(rep.count(v)); }));
  summary.Set("first_failure", rep.first_failure >= 0
                                   ? Json::String(RowName(c, rep.rows[rep.first_failure]))
                                   : Json());
  summary.Set("first_culprit", rep.first_culprit.empty() ? Json() : Json::String(rep.first_culprit));
  Json culprits = Json::MakeArray(), propagated = Json::MakeArray();
  for (const OpAnalysis& op : rep.ops) {
    if (op.status == OpStatus::kCulprit) culprits.Append(Json::String(op.api));
    if (op.status == OpStatus::kPropagated) propagated.Append(Json::String(op.api));
  }
  summary.Set("culprits", std::move(culprits));
  summary.Set("propagated", std::move(propagated));
  Json analysis = CulpritAnalysisJson(rep.ops, rep.growth_floor);
  for (auto& [key, v] : analysis.mutable_object()) {
    if (key != "ranked") continue;
    for (Json& culprit : v.mutable_array()) {
      const std::string stack = StackOf(c.target->structure, culprit.Find("api")->as_string());
      culprit.Set("stack", stack.empty() ? Json() : Json::String(stack));
    }
  }
  summary.Set("culprit_analysis", std::move(analysis));
  if (tree) summary.Set("module_tree", TreeJson(TreeFromAnalysis(c.target->structure, rep.ops)));
  j.Set("summary", std::move(summary));
  WriteItemsDocument(c, j, out);
}

}  // namespace parity
