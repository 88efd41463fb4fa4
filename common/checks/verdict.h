// The verdict model shared by every policy.
#ifndef PARITY_COMMON_VERDICT_H_
#define PARITY_COMMON_VERDICT_H_

#include <string>
#include <vector>

#include "common/base/json.h"

namespace parity {

// PASS: within tolerance. WARN: compared, but the peer flags it for a look (or could only
// compare part of it). FAIL: precision failure. ERROR: could not be compared (the message says
// why). UNMATCHED: no counterpart on the other side. SKIPPED: verification disabled by config.
enum class Verdict { kPass, kWarn, kFail, kError, kUnmatched, kSkipped };

const char* VerdictName(Verdict v);  // "PASS", "WARN", ...
bool ParseVerdict(const std::string& name, Verdict* v);  // case-insensitive
// Larger is worse: ERROR > FAIL > WARN > UNMATCHED > SKIPPED > PASS.
int VerdictSeverity(Verdict v);

// One value as the peer reports it: a number, or a placeholder text such as "unsupported",
// "Nan", "N/A", "shape unmatched", "12.5%".
class MetricValue {
 public:
  MetricValue() = default;
  static MetricValue Number(double d);
  static MetricValue Integer(int64_t i);
  static MetricValue Text(std::string s);

  bool is_number() const { return kind_ != Kind::kText; }
  bool is_integer() const { return kind_ == Kind::kInteger; }
  double number() const { return number_; }  // an integer's nearest double
  int64_t integer() const { return integer_; }  // exact; 0 unless is_integer()
  const std::string& text() const { return text_; }

  // Python str() of the value: repr for floats, the text for placeholders.
  std::string ToString() const;
  // Numbers as JSON numbers (non-finite as "nan"/"inf"/"-inf" strings), texts as strings.
  Json ToJson() const;
  bool operator==(const MetricValue& o) const;

 private:
  enum class Kind { kNumber, kInteger, kText };
  Kind kind_ = Kind::kText;
  double number_ = 0;
  int64_t integer_ = 0;
  std::string text_;
};

struct Metric {
  std::string name;
  MetricValue value;
};

// The outcome of checking one (golden, target) tensor pair under one policy.
struct CheckResult {
  Verdict verdict = Verdict::kError;
  std::string policy;        // "msprobe", "forge", "torch", or "" for pairing outcomes
  std::string peer_verdict;  // the peer's own verdict text ("Yes", "Warning", "pass", ...)
  std::string message;       // the text the peer would print (may be empty)
  std::vector<Metric> metrics;  // in the peer's column order

  const MetricValue* Find(const std::string& name) const;
  void Add(std::string name, MetricValue v) {
    if (metrics.empty()) metrics.reserve(8);  // a policy reports 4-10 metrics
    Metric& m = metrics.emplace_back();  // built in place: no temporary to move from
    m.name = std::move(name);
    m.value = std::move(v);
  }
  Json ToJson() const;
};

}  // namespace parity

#endif  // PARITY_COMMON_VERDICT_H_
