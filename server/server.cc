#include "server/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/server_interceptor.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/logging.h"

namespace parity {

bool IsLoopbackAddress(const std::string& listen) {
  std::string host = listen;
  if (absl::StartsWith(host, "ipv4:") || absl::StartsWith(host, "ipv6:")) host = host.substr(5);
  // HOST:PORT, or [V6]:PORT.
  if (!host.empty() && host[0] == '[') {
    const size_t close = host.find(']');
    if (close == std::string::npos) return false;
    host = host.substr(1, close - 1);
  } else if (const size_t colon = host.rfind(':'); colon != std::string::npos) {
    host = host.substr(0, colon);
  }
  if (host.empty()) return false;
  // The addresses the name stands for, as the listener would bind them (a literal is itself; a
  // name such as "127.0.0.1.example" is whatever it resolves to): all must be loopback, and a
  // name that does not resolve is not.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return false;
  bool all_loopback = true;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr);
      all_loopback = all_loopback && (ip >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      all_loopback = all_loopback && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr);
    } else {
      all_loopback = false;
    }
  }
  ::freeaddrinfo(found);
  return all_loopback;
}

namespace {

// Counts and times every RPC into Metrics.
class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(Metrics* metrics, grpc::experimental::ServerRpcInfo* info)
      : metrics_(metrics), method_(info->method()), started_(std::chrono::steady_clock::now()) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      metrics_->RpcEnded(method_, static_cast<int>(methods->GetSendStatus().error_code()),
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
    }
    methods->Proceed();
  }

 private:
  Metrics* const metrics_;
  const std::string method_;
  const std::chrono::steady_clock::time_point started_;
};

class RpcMetricsFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcMetricsFactory(Metrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new RpcMetricsInterceptor(metrics_, info);
  }

 private:
  Metrics* const metrics_;
};

// /metrics: the counters, and the status's gauges against their limits.
std::string RenderMetrics(const Metrics& metrics, const v1::ServerStatus& status) {
  std::vector<GaugeSample> gauges;
  for (const v1::Gauge& g : status.gauges()) {
    GaugeSample s;
    s.name = g.name();
    s.value = static_cast<double>(g.value());
    s.peak = static_cast<double>(g.peak());
    s.has_limit = !g.flag().empty();
    s.limit = static_cast<double>(g.limit());
    s.limit_is_floor = g.limit_is_floor();
    s.flag = g.flag();
    gauges.push_back(std::move(s));
  }
  return metrics.Render(gauges, static_cast<double>(status.uptime_ms()) / 1000.0, status.version());
}

}  // namespace

absl::StatusOr<std::unique_ptr<ParityServer>> ParityServer::Start(const ServerOptions& options) {
  std::unique_ptr<ParityServer> s(new ParityServer());
  s->metrics_ = std::make_unique<Metrics>();
  CoreOptions core_options = options.core;
  core_options.metrics = s->metrics_.get();
  absl::StatusOr<std::unique_ptr<Core>> core = Core::Open(core_options);
  if (!core.ok()) return core.status();
  s->core_ = std::move(*core);
  // Each stream has at most one Drain task queued, so the queue is bounded by max_streams.
  s->ingest_pool_ = std::make_unique<WorkerPool>("ingest", options.ingest_workers,
                                                 static_cast<size_t>(options.ingest.max_streams) + 1);
  if (options.require_tokens) {
    s->auth_ = std::make_unique<TokenAuth>(&s->core_->store());
    if (!s->auth_->HasValidAdmin()) {
      if (options.admin_token_file.empty()) {
        s->core_->Shutdown();
        return absl::FailedPreconditionError(
            "tokens are required but no admin token exists: pass --admin-token-file to create one");
      }
      // A new file only (never one that exists, nor through a symlink), opened before the token
      // is made: a token nobody can read would lock the operator out.
      const int fd = ::open(options.admin_token_file.c_str(),
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      absl::Status written = absl::OkStatus();
      if (fd < 0) {
        const int e = errno;
        written = absl::FailedPreconditionError(absl::StrCat(
            "cannot create --admin-token-file ", options.admin_token_file, ": ", std::strerror(e),
            e == EEXIST || e == ELOOP ? " (it must not exist yet: parityd writes a new file, never through a link)"
                                      : ""));
      } else {
        TokenRecord rec;
        absl::StatusOr<std::string> token = s->auth_->Create("*", AccessRole::kAdmin, "bootstrap", &rec);
        written = token.status();
        const std::string line = token.ok() ? *token + "\n" : "";
        if (token.ok() && ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
          written = absl::InternalError(absl::StrCat("cannot write ", options.admin_token_file));
        }
        ::close(fd);
        if (!written.ok()) ::unlink(options.admin_token_file.c_str());
      }
      if (!written.ok()) {
        s->core_->Shutdown();
        return written;
      }
    }
  }
  s->admin_ = std::make_unique<AdminService>(s->auth_.get());
  IngestOptions ingest_options = options.ingest;
  ingest_options.keep_received_slices =
      options.grpc_memory_bytes == 0 || options.ingest.max_buffered_bytes <= options.grpc_memory_bytes / 2;
  s->ingest_ = std::make_unique<IngestService>(s->core_.get(), s->ingest_pool_.get(), ingest_options,
                                               s->auth_.get());
  s->jobs_ = std::make_unique<JobsService>(s->core_.get(), s->auth_.get(), options.watch);
  IngestService* ingest = s->ingest_.get();
  Watches* watches = &s->jobs_->watches();
  s->query_ = std::make_unique<QueryService>(s->core_.get(), s->auth_.get(), [ingest, watches](std::vector<Gauge>* out) {
    ingest->AppendGauges(out);
    watches->AppendGauges(out);
  });

  grpc::EnableDefaultHealthCheckService(true);
  if (options.reflection) grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!options.tls_cert_pem.empty()) {
    grpc::SslServerCredentialsOptions tls(
        options.tls_client_ca_pem.empty()
            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    tls.pem_key_cert_pairs.push_back({options.tls_key_pem, options.tls_cert_pem});
    tls.pem_root_certs = options.tls_client_ca_pem;
    creds = grpc::SslServerCredentials(tls);
  }
  builder.AddListeningPort(options.listen, creds, &s->port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.core.max_chunk_bytes + (1 << 20)));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.ingest.max_streams * 4);
  // No SO_REUSEPORT: a second daemon on a port in use must fail to start, not share the port
  // and answer half of the callers.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (options.stream_window_bytes > 0) {
    // A fixed window instead of BDP probing: a known bound on what gRPC holds per stream.
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, options.stream_window_bytes);
  }
  if (options.grpc_memory_bytes > 0) {
    grpc::ResourceQuota quota("parityd");
    quota.Resize(static_cast<size_t>(options.grpc_memory_bytes));
    builder.SetResourceQuota(quota);
  }
  builder.RegisterService(s->ingest_.get());
  builder.RegisterService(s->jobs_.get());
  builder.RegisterService(s->query_.get());
  builder.RegisterService(s->admin_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<RpcMetricsFactory>(s->metrics_.get()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || s->port_ == 0) {
    s->core_->Shutdown();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options.listen,
        ": the port is in use (another parityd?) or the address is not one of this machine's"));
  }
  s->server_->GetHealthCheckService()->SetServingStatus(true);
  if (!options.http.listen.empty()) {
    HttpOptions http = options.http;
    http.version = kParitydVersion;
    const Metrics* metrics = s->metrics_.get();
    absl::StatusOr<std::unique_ptr<HttpGateway>> gateway = HttpGateway::Start(
        http, s->server_->InProcessChannel(grpc::ChannelArguments()),
        [metrics](const v1::ServerStatus& status) { return RenderMetrics(*metrics, status); });
    if (!gateway.ok()) {
      s->Shutdown(std::chrono::system_clock::now());
      return gateway.status();
    }
    s->http_ = std::move(*gateway);
  }
  return s;
}

ParityServer::~ParityServer() { Shutdown(std::chrono::system_clock::now()); }

void ParityServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  if (shut_down_) return;
  shut_down_ = true;
  // Start may fail before the server or the core exist.
  if (http_) http_->Stop();  // its event streams are watches: they end first
  if (server_) {
    server_->GetHealthCheckService()->Shutdown();
    jobs_->watches().Shutdown();  // a watch would otherwise hold the shutdown until its job ends
    // Uploads in flight finish first. gRPC's own shutdown then gives the other calls in flight
    // (short reads) at most 2 s more: it waits until every client connection has closed, an idle
    // one too, so it would otherwise always take the whole grace while any client is connected.
    const int open = ingest_->FinishUploads(deadline);
    if (open > 0) {
      LogLine(LogLevel::kWarning, "server", "shutdown grace over", absl::StrCat("uploads_cancelled=", open));
    }
    server_->Shutdown(std::min(deadline, std::chrono::system_clock::now() + std::chrono::seconds(2)));
    server_->Wait();
  }
  ingest_pool_.reset();  // runs what was queued
  if (core_) core_->Shutdown();
}

void ParityServer::Wait() { server_->Wait(); }

}  // namespace parity
