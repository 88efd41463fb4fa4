// parityd's HTTP listener: the JSON API (/api/v1/..., each route one Jobs or Query RPC, made on
// an in-process channel to the same server so that tokens, limits and errors are the gRPC
// API's own), a job's progress as Server-Sent Events, Prometheus metrics (/metrics) and the
// dashboard's files, built into the binary (/). docs/http-api.md lists the routes.
//
// Bounded: `threads` handle requests (a connection waits in the kernel's listen backlog when
// all are busy: the accept loop blocks rather than queueing without bound); event streams hold
// a thread each and at most `max_event_streams` are open (more get 429).
#ifndef PARITY_SERVER_HTTP_HTTP_GATEWAY_H_
#define PARITY_SERVER_HTTP_HTTP_GATEWAY_H_

#include <grpcpp/channel.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "parity/v1/parity.pb.h"

namespace parity {

struct HttpOptions {
  std::string listen;  // HOST:PORT or [V6]:PORT; port 0 picks a free port
  int threads = 8;
  int max_event_streams = 4;
  size_t max_body_bytes = 1 << 20;
  std::string version;  // parityd's, for the OpenAPI description
  // HTTPS when a certificate file is set (PEM); with a client CA file, clients must present a
  // certificate it signed. Files, not contents: cpp-httplib reads them with its own OpenSSL
  // (Debian's shared build), and no OpenSSL object crosses from parityd's.
  std::string tls_cert_file, tls_key_file, tls_client_ca_file;
};

// The Prometheus text for GET /metrics, given the server's status (its gauges), which the
// gateway reads with the caller's token first: whoever may read the status may read metrics.
using MetricsRenderer = std::function<std::string(const v1::ServerStatus& status)>;

class HttpGateway {
 public:
  // Binds the listener and starts serving. `channel` reaches the gRPC services (an in-process
  // channel of the same server). UNAVAILABLE when the address cannot be bound, INVALID_ARGUMENT
  // for unreadable TLS material.
  static absl::StatusOr<std::unique_ptr<HttpGateway>> Start(const HttpOptions& options,
                                                            std::shared_ptr<grpc::Channel> channel,
                                                            MetricsRenderer metrics);
  ~HttpGateway();
  HttpGateway(const HttpGateway&) = delete;
  HttpGateway& operator=(const HttpGateway&) = delete;

  int port() const;
  // Ends every event stream, stops listening and waits for requests in flight. Idempotent.
  void Stop();

  class Impl;

 private:
  explicit HttpGateway(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace parity

#endif  // PARITY_SERVER_HTTP_HTTP_GATEWAY_H_
