// One dump's upload (RunUpload): the run's start, its connections (each resuming the run of the
// one before), what they send and receive, and the final report. Internal to the agent.
#ifndef PARITY_CLIENT_AGENT_UPLOAD_H_
#define PARITY_CLIENT_AGENT_UPLOAD_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "client/agent.h"
#include "client/terminal.h"
#include "common/formats/dump.h"
#include "parity/v1/parity.pb.h"

namespace parity::agent {

// A token bucket over bytes per second (0: unlimited).
class RateLimiter {
 public:
  explicit RateLimiter(uint64_t bytes_per_second) : rate_(bytes_per_second) {}
  // Waits until `n` more bytes may go.
  void Take(uint64_t n);

 private:
  const uint64_t rate_;
  uint64_t sent_ = 0;
  std::chrono::steady_clock::time_point start_;
};

// What an upload's connections sent and met, over all of them; counted by the threads that send
// (the writer, the read-ahead thread) and read when the upload ends.
struct UploadCounters {
  std::atomic<int64_t> load_errors{0};
  std::atomic<uint64_t> data_bytes{0};   // tensor data handed to gRPC
  std::atomic<uint64_t> full_bytes{0};   // the dump's tensor data, each item once
  std::atomic<uint64_t> dedup_bytes{0};  // the server held it: sent by reference
  std::atomic<int64_t> dedup_probes{0}, dedup_hashes{0};
  std::atomic<int64_t> piece_tensors{0};  // tensors sent from their files in pieces
  std::atomic<size_t> follow_items{0};    // --follow: items sent so far (read by the progress bar)
  // Whether the server answers HaveBlobs' probes (-1: not known yet; 0: an older server, every
  // candidate is hashed and offered).
  std::atomic<int> probes_answered{-1};
};

class UploadAttempt;

class Upload {
 public:
  Upload(const UploadOptions& o, std::ostream& out, std::ostream& err, const UploadHooks& hooks);

  // Uploads the dump and prints the report; the exit code (RunUpload's).
  int Run();

 private:
  friend class UploadAttempt;

  // Opens the dump and builds the first attempt's UploadStart.
  absl::Status Open();
  // Connects until an attempt ends with the run's summary; an error when the upload was
  // cancelled, failed for good, or lost its connection for longer than --retry-seconds.
  absl::Status Send();
  // The dump as it is now (--follow reads it again and again).
  absl::StatusOr<Dump> ReadDump() const;
  // The UploadStart of the next attempt: the new run, or an attach to the run it created.
  v1::UploadStart NextStart() const;
  // The first attempt's acceptance (it says what is uploaded) or a later one's (what is held).
  void Accepted(const v1::UploadAccepted& a);
  // Item `name` was sent whole: its verdict's latency is counted from now.
  void MarkSent(const std::string& name);
  void OnAck(const std::string& name);
  void OnVerdict(const v1::OpResult& r);
  void WriteJsonReport(std::ostream& out);
  void WriteTextReport(std::ostream& out);
  // Prints the upload's report; the exit code of what it checked.
  int Report();

  // Constant after construction (the dump and start after Open).
  const UploadOptions& o_;
  std::ostream& out_;
  std::ostream& err_;
  const UploadHooks& hooks_;
  const std::chrono::steady_clock::time_point started_at_;
  std::optional<Dump> dump_;
  v1::UploadStart start_;
  v1::DataMode first_mode_ = v1::DATA_MODE_DATA;

  UploadCounters counters_;
  // Written by the main thread between attempts; read by an attempt's threads.
  v1::UploadAccepted accepted_;

  // Used by the writer thread alone.
  RateLimiter limiter_;
  std::string load_error_text_;  // the last tensor that could not be read
  std::map<std::string, int64_t> follow_index_;  // --follow: stable item indexes by first sighting
  std::set<std::string> counted_;  // items whose size went into full_bytes

  // Used by the main (reading) thread alone.
  int64_t acks_ = 0, rejected_ = 0;
  std::unordered_set<std::string> acked_names_;  // the items counted in `acks_`
  v1::UploadSummary summary_;
  bool have_summary_ = false;
  ProgressBar bar_;
  bool verdict_header_printed_ = false;  // before the first streamed verdict

  // Verdict latency: from the item's last byte written to its verdict's arrival.
  absl::Mutex latency_mu_;
  std::map<std::string, std::chrono::steady_clock::time_point> sent_at_ ABSL_GUARDED_BY(latency_mu_);
  std::vector<double> latencies_ms_ ABSL_GUARDED_BY(latency_mu_);
};

}  // namespace parity::agent

#endif  // PARITY_CLIENT_AGENT_UPLOAD_H_
