// Builds and runs parityd: the core, the Ingest/Jobs/Query services, gRPC health checking and
// server reflection, and the message-size limits.
#ifndef PARITY_SERVER_SERVER_H_
#define PARITY_SERVER_SERVER_H_

#include <grpcpp/server.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/core/core.h"
#include "server/admin_service.h"
#include "server/http/http_gateway.h"
#include "server/metrics/metrics.h"
#include "server/ingest_service.h"
#include "server/jobs_service.h"

namespace parity {

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";  // port 0 picks a free port
  CoreOptions core;
  IngestOptions ingest;
  WatchOptions watch;
  int ingest_workers = 4;
  // HTTP/2 receive window of each stream, fixed (gRPC's BDP probing off), so that uploads have
  // at most max_streams times this in flight; 0 leaves gRPC's automatic window, whose growth
  // only grpc_memory_bytes bounds.
  int stream_window_bytes = 1 << 20;
  // gRPC's memory quota for this server (grpc::ResourceQuota): what its HTTP/2 transports hold
  // (read buffers, received messages not yet taken) counts against it. As it fills, gRPC grants
  // smaller automatic windows; at the limit it cancels a stream (the client reads
  // RESOURCE_EXHAUSTED "Received RST_STREAM with error code 11"), which an agent resumes.
  // 0: unbounded.
  uint64_t grpc_memory_bytes = 128ull << 20;
  // TLS: on when a certificate is set (PEM contents, not paths). With a client CA, every client
  // must present a certificate signed by it (mutual TLS).
  std::string tls_cert_pem, tls_key_pem, tls_client_ca_pem;
  // Bearer tokens with roles on every RPC (else everyone who reaches the port is admin).
  bool require_tokens = false;
  // With require_tokens: when no valid admin token exists yet, one is created and written to
  // this file (mode 0600) at start.
  std::string admin_token_file;
  // gRPC server reflection (the API's public proto, to tools such as grpcurl; it answers
  // without a token).
  bool reflection = true;
  // The HTTP listener (JSON API, dashboard, /metrics): off while http.listen is empty. Its TLS
  // files are the gRPC listener's (main sets both).
  HttpOptions http;
};

class ParityServer {
 public:
  // Opens the data directory, resumes unfinished jobs and starts listening.
  static absl::StatusOr<std::unique_ptr<ParityServer>> Start(const ServerOptions& options);
  ~ParityServer();

  int port() const { return port_; }
  int http_port() const { return http_ ? http_->port() : 0; }  // 0: HTTP off
  Metrics& metrics() { return *metrics_; }
  const IngestService& ingest() const { return *ingest_; }
  Core& core() { return *core_; }
  grpc::Server* grpc_server() { return server_.get(); }

  // Health NOT_SERVING, stop accepting, let calls finish until `deadline` (then cancel them),
  // drain the workers and the store. Idempotent.
  void Shutdown(std::chrono::system_clock::time_point deadline);
  void Wait();

 private:
  ParityServer() = default;

  std::unique_ptr<Metrics> metrics_;  // before everything that reports to it
  std::unique_ptr<Core> core_;
  std::unique_ptr<WorkerPool> ingest_pool_;
  std::unique_ptr<IngestService> ingest_;
  std::unique_ptr<JobsService> jobs_;
  std::unique_ptr<QueryService> query_;
  std::unique_ptr<TokenAuth> auth_;  // null: tokens off
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HttpGateway> http_;
  int port_ = 0;
  bool shut_down_ = false;
};

// True when every address `listen` (HOST:PORT, [V6]:PORT, optionally "ipv4:"/"ipv6:") stands
// for is loopback (127.0.0.0/8, ::1): a literal as written, a name as it resolves ("localhost");
// false for a name that does not resolve.
bool IsLoopbackAddress(const std::string& listen);

}  // namespace parity

#endif  // PARITY_SERVER_SERVER_H_
