// Ingest.Upload with the gRPC callback API: one read and one write in flight per stream; every
// message is handled on the ingest worker pool (reactions never block), and the next read is
// started only when the previous message has been handled, so a slow disk or database slows the
// agent down instead of growing buffers.
#ifndef PARITY_SERVER_INGEST_SERVICE_H_
#define PARITY_SERVER_INGEST_SERVICE_H_

#include <atomic>

#include "parity/v1/parity.grpc.pb.h"
#include "server/core/auth.h"
#include "server/core/core.h"
#include "server/core/worker_pool.h"

namespace parity {

struct IngestOptions {
  int max_streams = 64;                 // concurrent uploads
  size_t max_outgoing_messages = 65536; // per stream; a client that stops reading is cut off
};

class IngestService final : public v1::Ingest::CallbackService {
 public:
  // `auth` null: authentication off.
  IngestService(Core* core, WorkerPool* pool, IngestOptions options, const TokenAuth* auth)
      : core_(core), pool_(pool), options_(options), auth_(auth) {}
  grpc::ServerBidiReactor<v1::UploadRequest, v1::UploadResponse>* Upload(
      grpc::CallbackServerContext* context) override;
  // Answers from the spool's directory (a stat per hash; at most 4096 hashes per call).
  grpc::ServerUnaryReactor* HaveBlobs(grpc::CallbackServerContext* context,
                                      const v1::HaveBlobsRequest* request,
                                      v1::HaveBlobsResponse* response) override;

  int active_streams() const { return active_.load(); }

 private:
  friend class UploadReactor;
  Core* const core_;
  WorkerPool* const pool_;
  const IngestOptions options_;
  const TokenAuth* const auth_;
  std::atomic<int> active_{0};
};

}  // namespace parity

#endif  // PARITY_SERVER_INGEST_SERVICE_H_
