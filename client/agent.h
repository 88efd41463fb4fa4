// parity-agent: uploads a dump to parityd and prints the verdicts as they arrive.
#ifndef PARITY_CLIENT_AGENT_H_
#define PARITY_CLIENT_AGENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/base/file_util.h"

namespace grpc {
class ClientContext;
}

namespace parity {

struct UploadOptions {
  std::string path;
  std::string server;
  std::string project;
  std::string role;  // "golden" or "target"
  std::string run_name;
  std::string model, device;  // the run's model and device (parity runs --model M finds it)
  std::map<std::string, std::string> labels;
  std::string against_run_id;
  std::string against_label_key, against_label_value;
  std::map<std::string, std::string> against_extra_labels;  // e.g. the same step and rank
  int32_t rank = 0;
  int64_t step = 0;
  std::string policy;      // "", msprobe, forge, torch
  bool allow_unmatched = false;  // items without a counterpart do not make the exit code 3
  std::string config_path;
  std::string run_id_file;  // write the new run's id here
  // full: tensor data; stats: statistics only; crc: CRC-32 and statistics; auto: CRC-32 and
  // statistics first, then the data of the items the server asks for (their CRC or statistics
  // disagree with the golden side).
  std::string mode = "full";
  int64_t retry_seconds = 300;       // reconnect and resume for this long after a lost connection
  int64_t max_bytes_per_second = 0;  // 0: unlimited
  // --follow: keep watching `path` while a model writes it; upload each tensor once its file is
  // complete; stop when `end_marker` appears in `path` (and everything is sent) or after
  // `idle_timeout_seconds` without a new complete item.
  int64_t read_ahead = 4;  // tensors loaded ahead of the network (0: load each just before sending)
  bool follow = false;
  // Offer content hashes of tensors >= 64 KiB and send only what the server does not hold.
  bool dedup = true;
  // Read data files that are symbolic links leading outside the dump's directory (by default
  // they are not read: each is sent as an item with a read error naming the link).
  bool allow_outside_links = false;
  std::string tls_ca, tls_cert, tls_key, token;  // see ConfigureClient
  std::string end_marker = "parity.done";
  int64_t idle_timeout_seconds = 600;
  bool json = false;
  bool color = false;
  bool progress = true;  // a progress bar on stderr when it is a terminal
  // The summary waits for the job to finish even while the golden run is still arriving (on
  // another stream: upload-pair).
  bool summary_waits_for_job = false;
  // Tensors of at least this many bytes that are one run of bytes in their files (.npy, .pt) are
  // read and sent a piece at a time, not loaded whole (0: none).
  uint64_t stream_min_bytes = 4ull << 20;
  // upload-pair: how far (bytes of tensor data) the golden side may run ahead of the target side.
  uint64_t pair_lead_bytes = 16ull << 20;
};

// Stops an upload running on another thread: its stream is cancelled, it does not reconnect,
// and RunUpload returns 2. Thread-safe.
class UploadCanceller {
 public:
  void Cancel();
  bool cancelled() const;
  // RunUpload's: the call of the current attempt (nullptr between attempts). Cancels it at once
  // when Cancel came first.
  void Attach(grpc::ClientContext* ctx);

 private:
  mutable absl::Mutex mu_;
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// Keeps one upload (the leader) from sending tensor data more than `lead_bytes` ahead of
// another (the follower): upload-pair's golden side, ahead of its target side, would make
// parityd hold the golden tensors until their pairs arrive. Thread-safe.
class UploadPacer {
 public:
  explicit UploadPacer(uint64_t lead_bytes) : lead_bytes_(lead_bytes) {}
  // The leader, before its next item, having sent `sent` bytes of data: waits while that is
  // more than lead_bytes ahead of the follower, unless Release() was called.
  void WaitToLead(uint64_t sent);
  // Whether WaitToLead(sent) would return at once, now and from now on (the follower only gains).
  bool WouldLead(uint64_t sent);
  // The follower has sent `sent` bytes of data in all.
  void Followed(uint64_t sent);
  // The follower is done (or failed, or never started): the leader no longer waits.
  void Release();

 private:
  bool MayLead() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return MayLeadWith(leading_); }
  bool MayLeadWith(uint64_t sent) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return released_ || sent <= followed_ + lead_bytes_;
  }
  const uint64_t lead_bytes_;
  // A member, not on the waiting thread's stack (see FilePieces's conditions).
  const absl::Condition may_lead_{this, &UploadPacer::MayLead};
  absl::Mutex mu_;
  uint64_t leading_ ABSL_GUARDED_BY(mu_) = 0;  // what the waiting leader has sent
  uint64_t followed_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

// What a caller running RunUpload on a thread learns while it runs. Every member is optional.
struct UploadHooks {
  // Called once, when the server has accepted the new run, with its id.
  std::function<void(const std::string& run_id)> on_run_id;
  UploadCanceller* canceller = nullptr;
  // Set to whether the server acknowledged the run's end (the run is complete).
  bool* completed = nullptr;
  // This upload leads (waits for) or follows (reports to) `pacer`.
  UploadPacer* pacer = nullptr;
  bool pacer_leads = false;
  // The job's verdicts that reach this stream are not printed (upload-pair's golden side: the
  // target side prints them all).
  bool quiet_verdicts = false;
  // Tests: called with the file's path once the dedup offer has read a tensor's CRC-32 from its
  // file, before its pieces are read for sending (a file changed here changed during the upload).
  std::function<void(const std::string& path)> after_offer_read;
  // Tests: called on the read-ahead thread with each item's name before it is loaded, and on
  // the reading thread with each acknowledged item's name.
  std::function<void(const std::string& name)> before_read_ahead;
  std::function<void(const std::string& name)> on_ack;
};

// Exit code: 0 all pass (or no job), 1 precision failures, 2 usage/system error or rejected items.
int RunUpload(const UploadOptions& o, std::ostream& out, std::ostream& err, const UploadHooks& hooks = {});

// upload-pair: uploads `golden_path` as a golden run and, once the server has accepted that run,
// `target_path` as a target run against it, both at the same time on two streams; parityd
// compares each pair as soon as both halves have arrived (large tensors from memory, not read
// back from disk). `o` holds everything else (role and against are set here; run_id_file, when
// set, names the files FILE.golden and FILE.target). The target's verdicts, then the job's
// final summary are printed; the golden side prints its run lines only (to `err` with --json).
// A golden upload that fails before its run is complete stops the target's (its job could not
// finish); a failed target upload leaves the golden one to complete. The golden side sends at
// most o.pair_lead_bytes of data ahead of the target side (UploadPacer), so that parityd holds
// little of it waiting for its pairs. Exit code as RunUpload's,
// the worse of the two sides.
int RunUploadPair(const UploadOptions& o, const std::string& golden_path, const std::string& target_path,
                  std::ostream& out, std::ostream& err);

// One run of a dump tree: a rank of an msprobe tree (step*/rank*/dump.json or rank*/dump.json),
// or a token of a rank of a TorchAir GE or FX tree (common/formats/torchair.h).
struct RankDump {
  std::string path;
  std::string step, rank;  // the numbers in the folder names ("" when absent)
  std::string token;       // TorchAir: the token ("" otherwise)
  std::string graph;       // TorchAir: the graph's order when the tree holds several ("" otherwise)
};
// The runs of the tree at `path`, sorted by step then rank number (TorchAir: by rank, graph and
// token); {path} itself when it is not such a tree. When `listing` is set and `path` is a directory returned as itself after
// being listed, *listing receives that listing (ListDirectory's), for OpenDump; else it is reset.
std::vector<RankDump> FindRankDumps(const std::string& path,
                                    std::optional<std::vector<DirEntry>>* listing = nullptr);
// The parts a run of a tree is known by, in order, those that are set: {"step", "1"},
// {"rank", "0"}, {"token", "2"}, {"graph", "1"} (upload labels, file name suffixes, titles).
std::vector<std::pair<std::string, std::string>> RankDumpParts(const RankDump& r);
// ".step1.rank0" / ".rank0.token2": the suffix of a per-run file name.
std::string RankDumpSuffix(const RankDump& r);
// "step 1 rank 0" / "rank 0 token 2" ("step - rank -" for a run known by none).
std::string RankDumpTitle(const RankDump& r);

// `parity-agent ARGS...` (argv without the program name).
int RunAgentCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace parity

#endif  // PARITY_CLIENT_AGENT_H_
