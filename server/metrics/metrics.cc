#include "server/metrics/metrics.h"

#include <cctype>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace parity {

namespace {

constexpr const char* kPolicies[] = {"msprobe", "forge", "torch"};

int PolicyIndex(absl::string_view policy) {
  for (int i = 0; i < 3; ++i) {
    if (policy == kPolicies[i]) return i;
  }
  return 0;
}

// A label value with '\\', '"' and newlines escaped as the text format requires.
std::string LabelValue(absl::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// A number as Prometheus reads it (shortest round-trip form; +Inf, -Inf, NaN).
std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) return absl::StrCat(static_cast<int64_t>(v));
  return absl::StrFormat("%.17g", v);
}

void Head(std::string* out, const std::string& name, const char* type, absl::string_view help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void Sample(std::string* out, const std::string& name, const std::string& labels, double v) {
  absl::StrAppend(out, name, labels.empty() ? "" : absl::StrCat("{", labels, "}"), " ", Number(v), "\n");
}

// Prometheus names: letters, digits and '_'.
std::string GaugeName(const std::string& gauge) {
  std::string out = "parity_";
  for (char c : gauge) out.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return out;
}

}  // namespace

void Metrics::Histogram::Observe(double seconds) {
  size_t i = 0;
  while (i < kBuckets.size() && seconds > kBuckets[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(std::max(seconds, 0.0) * 1e9), std::memory_order_relaxed);
}

void Metrics::Histogram::Render(const std::string& name, const std::string& labels, std::string* out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= kBuckets.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    const std::string le = i < kBuckets.size() ? Number(kBuckets[i]) : "+Inf";
    Sample(out, name + "_bucket", absl::StrCat(labels, labels.empty() ? "" : ",", "le=\"", le, "\""),
           static_cast<double>(cumulative));
  }
  Sample(out, name + "_sum", labels, static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9);
  Sample(out, name + "_count", labels, static_cast<double>(cumulative));
}

void Metrics::UploadStarted() { uploads_started_.fetch_add(1, std::memory_order_relaxed); }

void Metrics::ItemReceived(bool tensor, uint64_t data_bytes) {
  (tensor ? tensors_received_ : values_received_).fetch_add(1, std::memory_order_relaxed);
  bytes_received_.fetch_add(data_bytes, std::memory_order_relaxed);
}

void Metrics::PairCompared(absl::string_view policy, Verdict verdict, double latency_seconds) {
  const int v = static_cast<int>(verdict);
  if (v >= 0 && v < 6) pairs_[PolicyIndex(policy)][v].fetch_add(1, std::memory_order_relaxed);
  verdict_latency_.Observe(latency_seconds);
}

void Metrics::StoreCommitted(double seconds, size_t writes) {
  store_commit_.Observe(seconds);
  store_writes_.fetch_add(writes, std::memory_order_relaxed);
}

void Metrics::RpcEnded(const std::string& method, int code, double seconds) {
  absl::MutexLock l(&mu_);
  ++rpcs_[{method, code}];
  std::unique_ptr<Histogram>& h = rpc_latency_[method];
  if (!h) h = std::make_unique<Histogram>();
  h->Observe(seconds);
}

std::string Metrics::Render(const std::vector<GaugeSample>& gauges, double uptime_seconds,
                            const std::string& version) const {
  std::string out;
  auto counter = [&out](const std::string& name, absl::string_view help, const std::atomic<uint64_t>& v) {
    Head(&out, name, "counter", help);
    Sample(&out, name, "", static_cast<double>(v.load(std::memory_order_relaxed)));
  };
  counter("parity_uploads_started_total", "Uploads that started or resumed a run.", uploads_started_);
  Head(&out, "parity_items_received_total", "counter", "Items received and stored, by kind (tensor or value).");
  Sample(&out, "parity_items_received_total", "kind=\"tensor\"", static_cast<double>(tensors_received_.load()));
  Sample(&out, "parity_items_received_total", "kind=\"value\"", static_cast<double>(values_received_.load()));
  counter("parity_tensor_bytes_received_total", "Bytes of tensor data received in uploads.", bytes_received_);
  Head(&out, "parity_pairs_compared_total", "counter", "Tensor pairs compared, by policy and verdict.");
  for (int p = 0; p < 3; ++p) {
    for (int v = 0; v < 6; ++v) {
      Sample(&out, "parity_pairs_compared_total",
             absl::StrCat("policy=\"", kPolicies[p], "\",verdict=\"", VerdictName(static_cast<Verdict>(v)), "\""),
             static_cast<double>(pairs_[p][v].load(std::memory_order_relaxed)));
    }
  }
  Head(&out, "parity_verdict_latency_seconds", "histogram",
       "From a pair's both sides received to its verdict handed to the streams.");
  verdict_latency_.Render("parity_verdict_latency_seconds", "", &out);
  Head(&out, "parity_store_commit_seconds", "histogram", "Time to commit one store transaction (a batch of writes).");
  store_commit_.Render("parity_store_commit_seconds", "", &out);
  counter("parity_store_writes_total", "Store writes committed.", store_writes_);
  {
    absl::MutexLock l(&mu_);
    Head(&out, "parity_rpcs_total", "counter", "RPCs ended, by method and gRPC status code (HTTP API calls included).");
    for (const auto& [key, n] : rpcs_) {
      Sample(&out, "parity_rpcs_total", absl::StrCat("method=\"", LabelValue(key.first), "\",code=\"", key.second, "\""),
             static_cast<double>(n));
    }
    Head(&out, "parity_rpc_seconds", "histogram", "RPC duration, by method (an upload stream lasts as long as its upload).");
    for (const auto& [method, h] : rpc_latency_) {
      h->Render("parity_rpc_seconds", absl::StrCat("method=\"", LabelValue(method), "\""), &out);
    }
  }
  for (const GaugeSample& g : gauges) {
    const std::string name = GaugeName(g.name);
    Head(&out, name, "gauge", absl::StrCat("Now (parity status: ", g.name, ")."));
    Sample(&out, name, "", g.value);
    if (g.peak > 0) {
      Head(&out, name + "_peak", "gauge", absl::StrCat("The most since parityd started (", g.name, ")."));
      Sample(&out, name + "_peak", "", g.peak);
    }
    if (g.has_limit) {
      Head(&out, name + "_limit", "gauge",
           absl::StrCat(g.limit_is_floor ? "The least allowed" : "The most allowed", " (parityd --", g.flag, ")."));
      Sample(&out, name + "_limit", "", g.limit);
    }
  }
  Head(&out, "parity_uptime_seconds", "gauge", "Seconds since parityd started.");
  Sample(&out, "parity_uptime_seconds", "", uptime_seconds);
  Head(&out, "parity_build_info", "gauge", "parityd's version, as a label; always 1.");
  Sample(&out, "parity_build_info", absl::StrCat("version=\"", LabelValue(version), "\""), 1);
  return out;
}

}  // namespace parity
