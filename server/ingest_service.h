// Ingest.Upload with the gRPC callback API: one read and one write in flight per stream; every
// message is handled on the ingest worker pool (reactions never block), and the next read is
// started only when the previous message has been handled, so a slow disk or database slows the
// agent down instead of growing buffers.
#ifndef PARITY_SERVER_INGEST_SERVICE_H_
#define PARITY_SERVER_INGEST_SERVICE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <vector>
#include <thread>

#include "absl/synchronization/mutex.h"

#include "parity/v1/parity.grpc.pb.h"
#include "server/core/auth.h"
#include "server/core/core.h"
#include "server/core/shares.h"
#include "server/core/worker_pool.h"
#include "server/upload_message.h"

namespace parity {

// Trailing metadata key (value "1") on every Upload stream parityd itself ends, whatever the
// status; a stream ended without it was ended by gRPC or the network (see parity.proto).
inline constexpr char kUploadEndedByParitydKey[] = "parityd-ended";

struct IngestOptions {
  int max_streams = 64;                 // concurrent uploads
  // Fair shares of max_streams: uploads of one project (counted from the stream's start for a
  // project token, from UploadStart otherwise) and with one token. 0: no limit.
  int max_streams_per_project = 32;
  int max_streams_per_token = 16;
  size_t max_outgoing_messages = 65536; // per stream; a client that stops reading is cut off
  // An upload that sends nothing for this long while the server waits for it (before
  // UploadEnd, with no Flush being answered) ends with DEADLINE_EXCEEDED naming the limit; its
  // run stays incomplete and can be resumed. 0: no limit.
  // Only progress resets this clock: a message that starts the upload, carries an item or ends
  // it (a Flush does not).
  int64_t upload_idle_timeout_seconds = 900;
  // A stream that has not sent its UploadStart this long after opening is ended the same way
  // (it holds a slot of max_streams without being any project's yet). 0: no limit.
  int64_t upload_start_timeout_seconds = 30;
  // Received messages waiting to be handled, in bytes: per stream, and over all streams. When
  // either is reached a stream stops reading (gRPC flow control then holds the agent back) until
  // handling makes room; nothing is refused. Each stream may be one message over.
  uint64_t max_stream_buffer_bytes = 4u << 20;
  uint64_t max_buffered_bytes = 32u << 20;
  // Whether a waiting chunk keeps its data in the slices gRPC received it in (no copy) or is
  // copied out at once. Kept slices count against gRPC's memory quota, which cancels streams
  // when it is full: keep them only where max_buffered_bytes fits in the quota's half (or
  // there is no quota). Set by the server from the quota.
  bool keep_received_slices = true;
  // Tests (fault injection at a named point): called on a stream after each acknowledgement it
  // has written, with their count and whether the stream resumed a run (UploadStart's
  // attach_run_id); it may end the stream there with RESOURCE_EXHAUSTED, as gRPC's memory quota
  // does (no parityd trailer: the agent resumes) or as parityd does (the agent stops).
  enum class TestStreamEnd { kNone, kLikeGrpcQuota, kByParityd };
  std::function<TestStreamEnd(int64_t acks_written, bool resumed)> end_after_ack_for_test;
};

class IngestService final : public v1::Ingest::CallbackService {
 public:
  // Upload's index among the service's methods (the order of parity.proto).
  static constexpr int kUploadMethodIndex = 0;
  // `auth` null: authentication off.
  IngestService(Core* core, WorkerPool* pool, IngestOptions options, const TokenAuth* auth);
  ~IngestService() override;
  // Ingest.Upload, registered in place of the generated handler so that requests arrive as
  // IncomingUpload (a chunk's data left in gRPC's slices).
  grpc::ServerBidiReactor<IncomingUpload, v1::UploadResponse>* UploadWithSlices(
      grpc::CallbackServerContext* context);
  // Answers from the spool's directory (a stat per hash; at most 4096 hashes per call).
  grpc::ServerUnaryReactor* HaveBlobs(grpc::CallbackServerContext* context,
                                      const v1::HaveBlobsRequest* request,
                                      v1::HaveBlobsResponse* response) override;

  // The most bytes ever buffered at once over all streams (see max_buffered_bytes).
  uint64_t buffered_high_water() const { return buffered_high_.load(); }
  // Appends upload_streams (uploads holding a slot of max_streams) and upload_buffered_bytes.
  void AppendGauges(std::vector<Gauge>* out) const;
  // For a graceful shutdown: refuses new uploads (UNAVAILABLE; the agent resumes against the
  // next daemon) and waits until every open upload has ended or `deadline` has passed. Returns
  // how many are still open.
  int FinishUploads(std::chrono::system_clock::time_point deadline);

 private:
  friend class UploadReactor;
  using IdleCheck = std::function<void(int64_t now_ms)>;
  // Streams register an idle check, run about once a second by the reaper thread.
  int64_t AddIdleCheck(IdleCheck check);
  void RemoveIdleCheck(int64_t id);
  void ReapLoop();
  // Global buffer accounting: Hold adds a message's bytes (released when it is destroyed).
  void Hold(uint64_t bytes);
  bool GlobalRoom() const { return buffered_->load() < options_.max_buffered_bytes; }
  // A stream paused for global room registers `resume` (true: done, or the stream is gone;
  // false: still no room, keep waiting); WakeWaiters runs them once room appears.
  void AddWaiter(std::function<bool()> resume);
  void WakeWaiters();

  Core* const core_;
  WorkerPool* const pool_;
  const IngestOptions options_;
  const TokenAuth* const auth_;
  Shares streams_;              // the slots of max_streams and their fair shares
  std::atomic<bool> refusing_{false};  // shutting down: new uploads are refused
  // Shared with the deleters of buffered messages, which may outlive a stream.
  const std::shared_ptr<std::atomic<uint64_t>> buffered_ = std::make_shared<std::atomic<uint64_t>>(0);
  std::atomic<uint64_t> buffered_high_{0};
  absl::Mutex waiters_mu_;
  std::vector<std::function<bool()>> waiters_ ABSL_GUARDED_BY(waiters_mu_);

  absl::Mutex idle_mu_;
  std::map<int64_t, IdleCheck> idle_checks_ ABSL_GUARDED_BY(idle_mu_);
  int64_t next_idle_id_ ABSL_GUARDED_BY(idle_mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(idle_mu_) = false;
  std::thread reaper_;
};

}  // namespace parity

#endif  // PARITY_SERVER_INGEST_SERVICE_H_
