// parityd's Prometheus metrics: counters and latency histograms the daemon's parts update as
// they work, and the text exposition format (version 0.0.4) for /metrics, with the gauges of the
// server's status added at each scrape. No gRPC here: the storage and core layers report
// through it. (Debian ships prometheus-cpp as a shared library only, while parityd links its
// dependencies statically; the few families here do not need a registry.)
//
// Thread-safe. Counters and histograms are atomics; only RPC endings take a lock (a map by
// method and code, bounded by the registered methods).
#ifndef PARITY_SERVER_METRICS_METRICS_H_
#define PARITY_SERVER_METRICS_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/checks/verdict.h"

namespace parity {

// One gauge of the server's status, as /metrics shows it: parity_<name> (with _bytes kept as
// the name has it), and parity_<name>_peak and parity_<name>_limit when known.
struct GaugeSample {
  std::string name;
  double value = 0;
  double peak = 0;   // 0: not tracked
  double limit = 0;  // 0 with has_limit false: no limit
  bool has_limit = false;
  bool limit_is_floor = false;
  std::string flag;  // the flag setting the limit
};

class Metrics {
 public:
  Metrics() = default;
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // An upload started a run or resumed one (how streams end: parity_rpcs_total of
  // Ingest/Upload by code).
  void UploadStarted();
  // An item was received and stored: a tensor with `data_bytes` bytes of data (0: statistics
  // or a reference to data the server holds), or a non-tensor value.
  void ItemReceived(bool tensor, uint64_t data_bytes);
  // A pair was compared under `policy` ("msprobe", "forge", "torch") with `verdict`; its verdict
  // reached the streams `latency_seconds` after both sides were there.
  void PairCompared(absl::string_view policy, Verdict verdict, double latency_seconds);
  // The store committed a transaction of `writes` writes in `seconds`.
  void StoreCommitted(double seconds, size_t writes);
  // An RPC ended: its full method name ("/parity.v1.Query/ListRuns") and status code.
  void RpcEnded(const std::string& method, int code, double seconds);

  // The exposition text: every counter and histogram, then `gauges`, `uptime_seconds` and the
  // build's version as parity_build_info.
  std::string Render(const std::vector<GaugeSample>& gauges, double uptime_seconds,
                     const std::string& version) const;

  // Latency buckets' upper bounds, seconds (100 us to 30 s).
  static constexpr std::array<double, 17> kBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

  class Histogram {
   public:
    void Observe(double seconds);
    // Appends NAME_bucket/_sum/_count lines with `labels` ("" or `a="b",`).
    void Render(const std::string& name, const std::string& labels, std::string* out) const;

   private:
    std::array<std::atomic<uint64_t>, kBuckets.size() + 1> counts_{};  // the last: above all
    std::atomic<uint64_t> sum_ns_{0};
  };

 private:
  std::atomic<uint64_t> uploads_started_{0};
  std::atomic<uint64_t> tensors_received_{0};
  std::atomic<uint64_t> values_received_{0};
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> pairs_[3][6] = {};  // [policy][verdict]
  Histogram verdict_latency_;
  Histogram store_commit_;
  std::atomic<uint64_t> store_writes_{0};

  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> rpcs_ ABSL_GUARDED_BY(mu_);  // (method, code)
  std::map<std::string, std::unique_ptr<Histogram>> rpc_latency_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity

#endif  // PARITY_SERVER_METRICS_METRICS_H_
