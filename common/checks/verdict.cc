#include "common/checks/verdict.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/base/pyformat.h"

namespace parity {

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "PASS";
    case Verdict::kWarn: return "WARN";
    case Verdict::kFail: return "FAIL";
    case Verdict::kError: return "ERROR";
    case Verdict::kUnmatched: return "UNMATCHED";
    case Verdict::kSkipped: return "SKIPPED";
  }
  return "?";
}

bool ParseVerdict(const std::string& name, Verdict* v) {
  const std::string up = absl::AsciiStrToUpper(name);
  for (Verdict c : {Verdict::kPass, Verdict::kWarn, Verdict::kFail, Verdict::kError,
                    Verdict::kUnmatched, Verdict::kSkipped}) {
    if (up == VerdictName(c)) {
      *v = c;
      return true;
    }
  }
  return false;
}

int VerdictSeverity(Verdict v) {
  switch (v) {
    case Verdict::kPass: return 0;
    case Verdict::kSkipped: return 1;
    case Verdict::kUnmatched: return 2;
    case Verdict::kWarn: return 3;
    case Verdict::kFail: return 4;
    case Verdict::kError: return 5;
  }
  return 0;
}

MetricValue MetricValue::Number(double d) {
  MetricValue m;
  m.kind_ = Kind::kNumber;
  m.number_ = d;
  return m;
}
MetricValue MetricValue::Integer(int64_t i) {
  MetricValue m;
  m.kind_ = Kind::kInteger;
  m.number_ = static_cast<double>(i);
  m.integer_ = i;
  return m;
}
MetricValue MetricValue::Text(std::string s) {
  MetricValue m;
  m.kind_ = Kind::kText;
  m.text_ = std::move(s);
  return m;
}

std::string MetricValue::ToString() const {
  switch (kind_) {
    case Kind::kNumber: return PyRepr(number_);
    case Kind::kInteger: return absl::StrCat(integer_);
    case Kind::kText: return text_;
  }
  return "";
}

Json MetricValue::ToJson() const {
  switch (kind_) {
    case Kind::kNumber: return Json::Number(number_);
    case Kind::kInteger: return Json::Integer(integer_);
    case Kind::kText: return Json::String(text_);
  }
  return Json();
}

bool MetricValue::operator==(const MetricValue& o) const {
  if (is_number() != o.is_number()) return false;
  if (!is_number()) return text_ == o.text_;
  if (is_integer() && o.is_integer()) return integer_ == o.integer_;
  if (std::isnan(number_) && std::isnan(o.number_)) return true;
  return number_ == o.number_;
}

const MetricValue* CheckResult::Find(const std::string& name) const {
  for (const Metric& m : metrics) {
    if (m.name == name) return &m.value;
  }
  return nullptr;
}

Json CheckResult::ToJson() const {
  Json j = Json::MakeObject();
  j.Set("verdict", Json::String(VerdictName(verdict)));
  j.Set("policy", Json::String(policy));
  j.Set("peer_verdict", Json::String(peer_verdict));
  j.Set("message", Json::String(message));
  Json m = Json::MakeObject();
  for (const Metric& x : metrics) m.Set(x.name, x.value.ToJson());
  j.Set("metrics", std::move(m));
  return j;
}

}  // namespace parity
