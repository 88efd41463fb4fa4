#include "common/checks/compare_config.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/file_util.h"
#include "common/base/glob.h"
#include "common/base/status_macros.h"

namespace parity {

const char* PolicyName(PolicyKind k) {
  switch (k) {
    case PolicyKind::kMsprobe: return "msprobe";
    case PolicyKind::kForge: return "forge";
    case PolicyKind::kTorch: return "torch";
  }
  return "?";
}

bool ParsePolicyKind(const std::string& name, PolicyKind* k) {
  for (PolicyKind c : {PolicyKind::kMsprobe, PolicyKind::kForge, PolicyKind::kTorch}) {
    if (name == PolicyName(c)) {
      *k = c;
      return true;
    }
  }
  return false;
}

const PolicyConfig& CompareConfig::PolicyFor(const std::string& item_name,
                                             const std::string& api_name,
                                             const std::string& op_type) const {
  for (const OverrideRule& r : overrides) {
    if (!r.op_glob.empty() && !GlobMatch(r.op_glob, item_name) && !GlobMatch(r.op_glob, api_name)) {
      continue;
    }
    if (!r.type_glob.empty() && !GlobMatch(r.type_glob, op_type)) continue;
    return r.policy;
  }
  return base;
}

namespace {

absl::Status Bad(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("config ", where, ": ", what));
}

absl::Status GetNumber(const std::string& where, const Json& v, double* out) {
  if (!v.is_number()) return Bad(where, "must be a number");
  *out = v.as_double();
  return absl::OkStatus();
}

absl::Status GetBool(const std::string& where, const Json& v, bool* out) {
  if (!v.is_bool()) return Bad(where, "must be true or false");
  *out = v.as_bool();
  return absl::OkStatus();
}

absl::Status GetNonNegative(const std::string& where, const Json& v, double* out) {
  PARITY_RETURN_IF_ERROR(GetNumber(where, v, out));
  if (!(*out >= 0)) return Bad(where, absl::StrCat("must be >= 0, got ", v.Dump()));
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyPolicySection(const std::string& section, const Json& j, PolicyConfig* p) {
  if (!j.is_object()) return Bad(section, "must be an object");
  for (const auto& [key, v] : j.as_object()) {
    const std::string where = absl::StrCat(section, ".", key);
    if (section == "msprobe") {
      MsprobeOptions& m = p->msprobe;
      if (key == "cos_threshold") {
        PARITY_RETURN_IF_ERROR(GetNumber(where, v, &m.cos_threshold));
      } else if (key == "mae_threshold") {
        PARITY_RETURN_IF_ERROR(GetNonNegative(where, v, &m.mae_threshold));
      } else if (key == "cos_max_threshold") {
        PARITY_RETURN_IF_ERROR(GetNumber(where, v, &m.cos_max_threshold));
      } else if (key == "mae_max_threshold") {
        PARITY_RETURN_IF_ERROR(GetNonNegative(where, v, &m.mae_max_threshold));
      } else {
        return Bad(where,
                   "unknown key (msprobe takes cos_threshold, mae_threshold, "
                   "cos_max_threshold, mae_max_threshold)");
      }
    } else if (section == "forge") {
      ForgeOptions& f = p->forge;
      if (key == "checker") {
        if (!v.is_string()) return Bad(where, "must be a string");
        if (v.as_string() == "automatic") {
          f.checker = ForgeChecker::kAutomatic;
        } else if (v.as_string() == "allclose") {
          f.checker = ForgeChecker::kAllClose;
        } else if (v.as_string() == "full") {
          f.checker = ForgeChecker::kFull;
        } else {
          return Bad(where, absl::StrCat("must be automatic, allclose or full, got '",
                                         v.as_string(), "'"));
        }
      } else if (key == "pcc") {
        PARITY_RETURN_IF_ERROR(GetNonNegative(where, v, &f.pcc));
      } else if (key == "rtol") {
        PARITY_RETURN_IF_ERROR(GetNonNegative(where, v, &f.rtol));
      } else if (key == "atol") {
        PARITY_RETURN_IF_ERROR(GetNonNegative(where, v, &f.atol));
      } else if (key == "dissimilarity_threshold") {
        PARITY_RETURN_IF_ERROR(GetNonNegative(where, v, &f.dissimilarity_threshold));
      } else if (key == "enabled") {
        PARITY_RETURN_IF_ERROR(GetBool(where, v, &f.enabled));
      } else if (key == "verify_dtype") {
        PARITY_RETURN_IF_ERROR(GetBool(where, v, &f.verify_dtype));
      } else if (key == "verify_shape") {
        PARITY_RETURN_IF_ERROR(GetBool(where, v, &f.verify_shape));
      } else if (key == "verify_values") {
        PARITY_RETURN_IF_ERROR(GetBool(where, v, &f.verify_values));
      } else {
        return Bad(where,
                   "unknown key (forge takes checker, pcc, rtol, atol, "
                   "dissimilarity_threshold, enabled, verify_dtype, verify_shape, "
                   "verify_values)");
      }
    } else if (section == "torch") {
      TorchOptions& t = p->torch;
      if (key == "rtol" || key == "atol") {
        double d;
        PARITY_RETURN_IF_ERROR(GetNonNegative(where, v, &d));
        (key == "rtol" ? t.rtol : t.atol) = d;
      } else if (key == "equal_nan") {
        PARITY_RETURN_IF_ERROR(GetBool(where, v, &t.equal_nan));
      } else if (key == "check_dtype") {
        PARITY_RETURN_IF_ERROR(GetBool(where, v, &t.check_dtype));
      } else if (key == "compat") {
        if (!v.is_string() || (v.as_string() != "2" && v.as_string() != "1.13")) {
          return Bad(where, "must be \"2\" or \"1.13\"");
        }
        t.compat = v.as_string() == "2" ? TorchCompat::kTorch2 : TorchCompat::kTorch113;
      } else {
        return Bad(where, "unknown key (torch takes rtol, atol, equal_nan, check_dtype, compat)");
      }
    } else {
      return Bad(section, "unknown section");
    }
  }
  if (section == "torch" && p->torch.rtol.has_value() != p->torch.atol.has_value()) {
    return Bad(section, "rtol and atol must be given together (torch.testing.assert_close rule)");
  }
  return absl::OkStatus();
}

std::optional<MetricLimit> PolicyMetricLimit(const PolicyConfig& p, absl::string_view metric) {
  switch (p.kind) {
    case PolicyKind::kMsprobe:
      if (metric == "Cosine") return MetricLimit{p.msprobe.cos_threshold, true};
      if (metric == "MaxAbsErr") return MetricLimit{p.msprobe.mae_threshold, false};
      return std::nullopt;
    case PolicyKind::kForge:
      if (metric == "PCC") return MetricLimit{p.forge.pcc, true};
      if (metric == "Dissimilarity") return MetricLimit{p.forge.dissimilarity_threshold, false};
      return std::nullopt;
    case PolicyKind::kTorch:
      return std::nullopt;
  }
  return std::nullopt;
}

const char* PolicyMainMetric(PolicyKind k) {
  switch (k) {
    case PolicyKind::kMsprobe: return "Cosine";
    case PolicyKind::kForge: return "PCC";
    case PolicyKind::kTorch: return "Greatest absolute difference";
  }
  return "Cosine";
}

absl::StatusOr<CompareConfig> ParseCompareConfig(const Json& j) {
  if (!j.is_object()) return Bad("", "the document must be a JSON object");
  CompareConfig c;
  // Policy sections first, so that "policy" may come anywhere.
  for (const char* section : {"msprobe", "forge", "torch"}) {
    if (const Json* s = j.Find(section)) PARITY_RETURN_IF_ERROR(ApplyPolicySection(section, *s, &c.base));
  }
  for (const auto& [key, v] : j.as_object()) {
    if (key == "msprobe" || key == "forge" || key == "torch") continue;
    if (key == "policy") {
      if (!v.is_string() || !ParsePolicyKind(v.as_string(), &c.base.kind)) {
        return Bad("policy", absl::StrCat("must be msprobe, forge or torch, got ", v.Dump()));
      }
    } else if (key == "match") {
      if (!v.is_object()) return Bad("match", "must be an object");
      for (const auto& [mk, mv] : v.as_object()) {
        if (mk == "fuzzy") {
          PARITY_RETURN_IF_ERROR(GetBool("match.fuzzy", mv, &c.fuzzy_match));
        } else if (mk == "mapping") {
          if (!mv.is_object()) return Bad("match.mapping", "must be an object of name -> name");
          for (const auto& [from, to] : mv.as_object()) {
            if (!to.is_string() || from.empty() || to.as_string().empty()) {
              return Bad("match.mapping", absl::StrCat("entry '", from, "' must map to a non-empty name"));
            }
            c.mapping.emplace_back(from, to.as_string());
          }
        } else {
          return Bad(absl::StrCat("match.", mk), "unknown key (match takes fuzzy, mapping)");
        }
      }
    } else if (key == "overrides") {
      if (!v.is_array()) return Bad("overrides", "must be an array of rules");
      int i = 0;
      for (const Json& rule : v.as_array()) {
        const std::string where = absl::StrCat("overrides[", i++, "]");
        if (!rule.is_object()) return Bad(where, "must be an object");
        OverrideRule r;
        r.policy = c.base;
        if (const Json* p = rule.Find("policy")) {
          if (!p->is_string() || !ParsePolicyKind(p->as_string(), &r.policy.kind)) {
            return Bad(where + ".policy", "must be msprobe, forge or torch");
          }
        }
        for (const auto& [rk, rv] : rule.as_object()) {
          if (rk == "op" || rk == "op_type") {
            if (!rv.is_string() || rv.as_string().empty()) {
              return Bad(where + "." + rk, "must be a non-empty glob");
            }
            (rk == "op" ? r.op_glob : r.type_glob) = rv.as_string();
          } else if (rk == "msprobe" || rk == "forge" || rk == "torch") {
            PARITY_RETURN_IF_ERROR(ApplyPolicySection(rk, rv, &r.policy));
          } else if (rk != "policy") {
            return Bad(where + "." + rk,
                       "unknown key (a rule takes op, op_type, policy, msprobe, forge, torch)");
          }
        }
        if (r.op_glob.empty() && r.type_glob.empty()) {
          return Bad(where, "needs \"op\" or \"op_type\"");
        }
        c.overrides.push_back(std::move(r));
      }
    } else {
      return Bad(key,
                 "unknown key (the document takes policy, msprobe, forge, torch, match, "
                 "overrides)");
    }
  }
  return c;
}

absl::StatusOr<CompareConfig> LoadCompareConfig(const std::string& path) {
  PARITY_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, kMaxCompareConfigBytes));
  return ParseCompareConfigText(text, path);
}

absl::StatusOr<CompareConfig> ParseCompareConfigText(absl::string_view text, const std::string& path) {
  absl::StatusOr<Json> j = ParseJson(text);
  if (!j.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", j.status().message()));
  absl::StatusOr<CompareConfig> c = ParseCompareConfig(*j);
  if (!c.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", c.status().message()));
  return c;
}

}  // namespace parity
