// A comparison's configuration: the base policy with its thresholds, per-operator overrides
// (an ordered list of glob rules; the first rule that matches an item picks its policy and
// thresholds), and how items are paired.
//
// JSON form (every key optional; unknown keys are errors):
//   {"policy": "msprobe" | "forge" | "torch",
//    "msprobe": {"cos_threshold": 0.99, "mae_threshold": 0.001,
//                "cos_max_threshold": 0.9, "mae_max_threshold": 1.0},
//    "forge": {"checker": "automatic" | "allclose" | "full", "pcc": 0.99, "rtol": 1e-5,
//              "atol": 1e-8, "dissimilarity_threshold": 1e-3, "enabled": true,
//              "verify_dtype": true, "verify_shape": true, "verify_values": true},
//    "torch": {"rtol": 1.3e-6, "atol": 1e-5, "equal_nan": false, "check_dtype": true,
//              "compat": "2" | "1.13"},
//    "match": {"fuzzy": false, "mapping": {"target item name": "golden item name"}},
//    "overrides": [{"op": "Functional.softmax.*", "op_type": "soft*", "policy": "torch",
//                   "torch": {"rtol": 1e-3, "atol": 1e-3}}]}
// An override starts from the base settings of the policy it picks and changes only the keys
// it names.
#ifndef PARITY_COMMON_COMPARE_CONFIG_H_
#define PARITY_COMMON_COMPARE_CONFIG_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/checks/forge_policy.h"
#include "common/base/json.h"
#include "common/checks/msprobe_policy.h"
#include "common/checks/torch_policy.h"

namespace parity {

enum class PolicyKind { kMsprobe, kForge, kTorch };
const char* PolicyName(PolicyKind k);
bool ParsePolicyKind(const std::string& name, PolicyKind* k);

struct PolicyConfig {
  PolicyKind kind = PolicyKind::kMsprobe;
  MsprobeOptions msprobe;
  ForgeOptions forge;
  TorchOptions torch;
};

struct OverrideRule {
  std::string op_glob;    // matched against the item name and its API name; empty: any
  std::string type_glob;  // matched against the op type; empty: any
  PolicyConfig policy;
};

struct CompareConfig {
  PolicyConfig base;
  std::vector<OverrideRule> overrides;
  bool fuzzy_match = false;
  std::vector<std::pair<std::string, std::string>> mapping;  // target name -> golden name
  // Compute the statistics a tensor's dump does not record (plain .npy, .pt, .safetensors files)
  // from its data as its pair is compared (CompareDumps): for outputs that show them.
  bool fill_missing_stats = false;

  // The policy for one item: the first matching override, else the base.
  const PolicyConfig& PolicyFor(const std::string& item_name, const std::string& api_name,
                                const std::string& op_type) const;
};

// The limit a policy puts on one of its metrics, for a plot's threshold line.
struct MetricLimit {
  double value = 0;
  bool higher_is_better = false;  // results below `value` fail (Cosine, PCC); else above it
};
// msprobe: Cosine and MaxAbsErr; forge: PCC and Dissimilarity; none for other metrics and for
// torch (whose tolerance is per element).
std::optional<MetricLimit> PolicyMetricLimit(const PolicyConfig& p, absl::string_view metric);
// The metric a plot of the policy's results shows first: Cosine, PCC, or torch's "Greatest
// absolute difference".
const char* PolicyMainMetric(PolicyKind k);

absl::StatusOr<CompareConfig> ParseCompareConfig(const Json& j);
absl::StatusOr<CompareConfig> LoadCompareConfig(const std::string& path);
// The text of a configuration file read from `path` (named in errors).
absl::StatusOr<CompareConfig> ParseCompareConfigText(absl::string_view text, const std::string& path);
inline constexpr uint64_t kMaxCompareConfigBytes = 16u << 20;
// Applies the keys of `j` (a "msprobe"/"forge"/"torch" section) onto `p`.
absl::Status ApplyPolicySection(const std::string& section, const Json& j, PolicyConfig* p);

}  // namespace parity

#endif  // PARITY_COMMON_COMPARE_CONFIG_H_
