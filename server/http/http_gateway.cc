#include "server/http/http_gateway.h"

#include <grpcpp/client_context.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <set>
#include <thread>
#include <vector>

// Built with HTTPS through OpenSSL (CPPHTTPLIB_OPENSSL_SUPPORT, from pkg-config).
#include <httplib.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "parity/v1/parity.grpc.pb.h"
#include "server/http/assets.h"
#include "server/http/http_json.h"
#include "server/http/openapi.h"

namespace parity {

namespace {

using Params = std::vector<std::pair<std::string, std::string>>;

// Every API call gets this long; a browser that waits longer has lost interest.
constexpr auto kCallDeadline = std::chrono::seconds(30);

// JSON answers. With the charset, cpp-httplib does not compress them: it would take brotli at
// its highest quality whenever a browser accepts it (about 300 ms for a 60 KB series).
constexpr char kJson[] = "application/json; charset=utf-8";

// Pages hold no inline script or style, and fetch only from this origin.
constexpr char kContentSecurityPolicy[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

// httplib's queue of accepted connections, bounded: enqueue blocks while `limit` connections
// wait (the accept loop then stops and the kernel's backlog holds the rest).
class BoundedPool final : public httplib::TaskQueue {
 public:
  BoundedPool(int threads, size_t limit) : limit_(limit) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  void enqueue(std::function<void()> fn) override {
    absl::MutexLock l(&mu_);
    mu_.Await(absl::Condition(
        +[](BoundedPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) { return p->jobs_.size() < p->limit_ || p->stop_; },
        this));
    if (stop_) return;  // httplib closes what it could not hand over
    jobs_.push_back(std::move(fn));
  }
  void shutdown() override {
    {
      absl::MutexLock l(&mu_);
      stop_ = true;
    }
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Work() {
    while (true) {
      std::function<void()> fn;
      {
        absl::MutexLock l(&mu_);
        mu_.Await(absl::Condition(
            +[](BoundedPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) { return !p->jobs_.empty() || p->stop_; },
            this));
        if (jobs_.empty()) return;  // stopping, and nothing left to run
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      fn();
    }
  }

  const size_t limit_;
  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

// An OpenAPI path template from a route's regex: each group becomes {field} ("/jobs/([^/]+)" ->
// "/jobs/{job_id}").
std::string PathTemplate(const std::string& regex, const std::vector<std::string>& fields) {
  std::string out;
  size_t field = 0;
  int depth = 0;
  for (char c : regex) {
    if (c == '(') {
      if (depth++ == 0) out += "{" + (field < fields.size() ? fields[field++] : std::string("param")) + "}";
    } else if (c == ')') {
      --depth;
    } else if (depth == 0) {
      out.push_back(c);
    }
  }
  return out;
}

// HOST:PORT or [V6]:PORT into its parts.
absl::Status SplitHostPort(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), port) || *port < 0 ||
      *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("HTTP listen address '", listen, "' is not HOST:PORT"));
  }
  *host = listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  return absl::OkStatus();
}

// An HTTPS server from the PEM files.
absl::StatusOr<std::unique_ptr<httplib::Server>> MakeTlsServer(const HttpOptions& o) {
  auto server = std::make_unique<httplib::SSLServer>(
      o.tls_cert_file.c_str(), o.tls_key_file.c_str(),
      o.tls_client_ca_file.empty() ? nullptr : o.tls_client_ca_file.c_str());
  if (!server->is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HTTPS: cannot use --tls-cert ", o.tls_cert_file, " with --tls-key ", o.tls_key_file,
        o.tls_client_ca_file.empty() ? "" : absl::StrCat(" and --tls-client-ca ", o.tls_client_ca_file),
        " (unreadable, not PEM, or the key is not the certificate's)"));
  }
  return std::unique_ptr<httplib::Server>(std::move(server));
}

}  // namespace

class HttpGateway::Impl {
 public:
  Impl(const HttpOptions& o, std::shared_ptr<grpc::Channel> channel, MetricsRenderer metrics)
      : options_(o),
        jobs_(v1::Jobs::NewStub(channel)),
        query_(v1::Query::NewStub(channel)),
        metrics_(std::move(metrics)) {}

  absl::Status Listen(std::unique_ptr<httplib::Server> server);
  int port() const { return port_; }
  void Stop();

 private:
  void Routes();
  // Registers `path` (a regex; its groups fill `path_fields` in order) for one unary RPC.
  template <typename Req, typename Resp>
  void Route(const char* method, const char* path, std::vector<std::string> path_fields, const char* summary,
             std::function<grpc::Status(grpc::ClientContext*, const Req&, Resp*)> call);
  void Events(const httplib::Request& req, httplib::Response& res);
  void Metrics(const httplib::Request& req, httplib::Response& res);
  void Asset(const httplib::Request& req, httplib::Response& res);
  // The caller's Authorization header on `ctx`, and the call's deadline.
  static void Forward(const httplib::Request& req, grpc::ClientContext* ctx);
  static void Error(const grpc::Status& s, httplib::Response& res);

  // Constant after construction.
  const HttpOptions options_;
  const std::unique_ptr<v1::Jobs::Stub> jobs_;
  const std::unique_ptr<v1::Query::Stub> query_;
  const MetricsRenderer metrics_;
  std::unique_ptr<httplib::Server> server_;
  std::vector<ApiRoute> routes_;  // as registered, for the OpenAPI description
  std::string openapi_;
  std::thread listener_;
  int port_ = 0;

  absl::Mutex mu_;
  std::set<grpc::ClientContext*> streams_ ABSL_GUARDED_BY(mu_);  // open event streams
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

void HttpGateway::Impl::Forward(const httplib::Request& req, grpc::ClientContext* ctx) {
  const std::string auth = req.get_header_value("Authorization");
  if (!auth.empty()) ctx->AddMetadata("authorization", auth);
  ctx->set_deadline(std::chrono::system_clock::now() + kCallDeadline);
}

void HttpGateway::Impl::Error(const grpc::Status& s, httplib::Response& res) {
  res.status = HttpStatusFromGrpc(s.error_code());
  if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED) res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(ErrorJson(s), kJson);
}

template <typename Req, typename Resp>
void HttpGateway::Impl::Route(const char* method, const char* path, std::vector<std::string> path_fields,
                              const char* summary,
                              std::function<grpc::Status(grpc::ClientContext*, const Req&, Resp*)> call) {
  // The fields the path's groups fill (a route without groups takes them from the query).
  const size_t groups = static_cast<size_t>(std::count(path, path + std::strlen(path), '('));
  if (path_fields.size() > groups) path_fields.resize(groups);
  routes_.push_back({method, PathTemplate(path, path_fields), path_fields, Req::descriptor(), Resp::descriptor(), summary});
  auto handler = [path_fields, call](const httplib::Request& req, httplib::Response& res) {
    Req request;
    absl::Status s = MessageFromJsonBody(req.body, &request);
    Params params(req.params.begin(), req.params.end());
    for (size_t i = 0; i < path_fields.size() && i + 1 < req.matches.size(); ++i) {
      params.emplace_back(path_fields[i], req.matches[i + 1].str());
    }
    if (s.ok()) s = SetFieldsFromParams(params, &request);
    if (!s.ok()) return Error(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(s.message())), res);
    grpc::ClientContext ctx;
    Forward(req, &ctx);
    Resp response;
    const grpc::Status st = call(&ctx, request, &response);
    if (!st.ok()) return Error(st, res);
    res.set_content(ToJson(response), kJson);
  };
  if (std::string(method) == "GET") {
    server_->Get(path, handler);
  } else {
    server_->Post(path, handler);
  }
}

void HttpGateway::Impl::Routes() {
  using grpc::ClientContext;
  using grpc::Status;
  v1::Jobs::Stub* j = jobs_.get();
  v1::Query::Stub* q = query_.get();
  Route<v1::GetServerStatusRequest, v1::ServerStatus>(
      "GET", "/api/v1/status", {}, "The server's version and gauges (Query.GetServerStatus)", [q](ClientContext* c, const auto& r, auto* o) { return q->GetServerStatus(c, r, o); });
  for (const char* p : {"/api/v1/runs", "/api/v1/projects/([^/]+)/runs"}) {
    Route<v1::ListRunsRequest, v1::ListRunsResponse>(
        "GET", p, {"project"}, "Runs, newest first (Query.ListRuns)",
        [q](ClientContext* c, const auto& r, auto* o) { return q->ListRuns(c, r, o); });
  }
  for (const char* p : {"/api/v1/jobs", "/api/v1/projects/([^/]+)/jobs"}) {
    Route<v1::ListJobsRequest, v1::ListJobsResponse>(
        "GET", p, {"project"}, "Jobs, newest first (Jobs.List)",
        [j](ClientContext* c, const auto& r, auto* o) { return j->List(c, r, o); });
  }
  Route<v1::SubmitJobRequest, v1::Job>(
      "POST", "/api/v1/jobs", {}, "Submit a job comparing two stored runs (Jobs.Submit)", [j](ClientContext* c, const auto& r, auto* o) { return j->Submit(c, r, o); });
  Route<v1::GetJobRequest, v1::Job>(
      "GET", "/api/v1/jobs/([^/:]+)", {"job_id"}, "A job (Jobs.Get)", [j](ClientContext* c, const auto& r, auto* o) { return j->Get(c, r, o); });
  Route<v1::CancelJobRequest, v1::Job>(
      "POST", "/api/v1/jobs/([^/:]+):cancel", {"job_id"}, "Cancel a job (Jobs.Cancel)",
      [j](ClientContext* c, const auto& r, auto* o) { return j->Cancel(c, r, o); });
  Route<v1::GetJobSummaryRequest, v1::JobSummary>(
      "GET", "/api/v1/jobs/([^/]+)/summary", {"job_id"}, "Counts, culprits and worst operators (Query.GetJobSummary)",
      [q](ClientContext* c, const auto& r, auto* o) { return q->GetJobSummary(c, r, o); });
  Route<v1::ListOpResultsRequest, v1::ListOpResultsResponse>(
      "GET", "/api/v1/jobs/([^/]+)/results", {"job_id"}, "A page of results, filtered and sorted (Query.ListOpResults)",
      [q](ClientContext* c, const auto& r, auto* o) { return q->ListOpResults(c, r, o); });
  Route<v1::GetOpResultRequest, v1::OpResult>(
      "GET", "/api/v1/jobs/([^/]+)/results/(.+)", {"job_id", "name"}, "One result by item name (Query.GetOpResult)",
      [q](ClientContext* c, const auto& r, auto* o) { return q->GetOpResult(c, r, o); });
  Route<v1::DiffJobsRequest, v1::DiffJobsResponse>(
      "GET", "/api/v1/jobs/([^/]+)/diff/([^/]+)", {"base_job_id", "job_id"}, "Regressions and fixes between two jobs (Query.DiffJobs)",
      [q](ClientContext* c, const auto& r, auto* o) { return q->DiffJobs(c, r, o); });
  Route<v1::GetJobSeriesRequest, v1::JobSeries>(
      "GET", "/api/v1/jobs/([^/]+)/series", {"job_id"}, "A metric along dump order, downsampled (Query.GetJobSeries)",
      [q](ClientContext* c, const auto& r, auto* o) { return q->GetJobSeries(c, r, o); });
  openapi_ = OpenApiJson(routes_, options_.version);
  server_->Get("/api/v1/openapi.json", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(openapi_, kJson);
  });
  server_->Get("/api/v1/jobs/([^/]+)/events", [this](const httplib::Request& req, httplib::Response& res) { Events(req, res); });
  server_->Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) { Metrics(req, res); });
  server_->Get("/api/.*", [](const httplib::Request& req, httplib::Response& res) {
    Error(grpc::Status(grpc::StatusCode::NOT_FOUND, "no such API route: GET " + req.path.substr(0, 128)), res);
  });
  server_->Post(".*", [](const httplib::Request& req, httplib::Response& res) {
    Error(grpc::Status(grpc::StatusCode::NOT_FOUND, "no such API route: POST " + req.path.substr(0, 128)), res);
  });
  server_->Get(".*", [this](const httplib::Request& req, httplib::Response& res) { Asset(req, res); });
}

// One job's progress as Server-Sent Events: "progress" events (a JobProgress in JSON) while it
// runs, then one "end" event (google.rpc.Status in JSON; code 0 when the job reached a final
// state). The stream is Jobs.Watch's, so it refreshes at least twice a second.
void HttpGateway::Impl::Events(const httplib::Request& req, httplib::Response& res) {
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<v1::JobProgress>> reader;
    bool ended = false;
  };
  auto stream = std::make_shared<Stream>();
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return Error(grpc::Status(grpc::StatusCode::UNAVAILABLE, "parityd is shutting down"), res);
    if (static_cast<int>(streams_.size()) >= options_.max_event_streams) {
      return Error(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                absl::StrCat("too many event streams open (", streams_.size(),
                                             "; parityd --http-max-event-streams)")),
                   res);
    }
    streams_.insert(&stream->ctx);
  }
  const std::string auth = req.get_header_value("Authorization");
  if (!auth.empty()) stream->ctx.AddMetadata("authorization", auth);
  v1::WatchJobRequest request;
  request.set_job_id(req.matches[1].str());
  stream->reader = jobs_->Watch(&stream->ctx, request);
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [stream](size_t, httplib::DataSink& sink) {
        v1::JobProgress progress;
        if (stream->reader->Read(&progress)) {
          const std::string event = absl::StrCat("event: progress\ndata: ", ToJson(progress), "\n\n");
          if (!sink.write(event.data(), event.size())) stream->ctx.TryCancel();
          return true;
        }
        const grpc::Status s = stream->reader->Finish();
        stream->ended = true;
        const std::string event = absl::StrCat("event: end\ndata: ", ErrorJson(s), "\n\n");
        sink.write(event.data(), event.size());
        sink.done();
        return true;
      },
      [this, stream](bool) {
        if (!stream->ended) {
          stream->ctx.TryCancel();
          stream->reader->Finish();
        }
        absl::MutexLock l(&mu_);
        streams_.erase(&stream->ctx);
      });
}

void HttpGateway::Impl::Metrics(const httplib::Request& req, httplib::Response& res) {
  grpc::ClientContext ctx;
  Forward(req, &ctx);
  v1::ServerStatus status;
  const grpc::Status s = query_->GetServerStatus(&ctx, v1::GetServerStatusRequest(), &status);
  if (!s.ok()) return Error(s, res);
  res.set_content(metrics_ ? metrics_(status) : "", "text/plain; version=0.0.4; charset=utf-8");
}

void HttpGateway::Impl::Asset(const httplib::Request& req, httplib::Response& res) {
  // The dashboard is one page: every path that is not a file is the page, whose script reads
  // the path (links into it can be shared).
  const EmbeddedAsset* a = FindAsset(req.path);
  const bool file = absl::EndsWith(req.path, ".js") || absl::EndsWith(req.path, ".css") ||
                    absl::StartsWith(req.path, "/vendor/");
  if (a == nullptr && file) {
    return Error(grpc::Status(grpc::StatusCode::NOT_FOUND, "no such file: " + req.path.substr(0, 128)), res);
  }
  if (a == nullptr) a = FindAsset("/index.html");
  if (a == nullptr) {
    return Error(grpc::Status(grpc::StatusCode::NOT_FOUND, "this parityd was built without the dashboard"), res);
  }
  res.set_content(a->data, a->size, a->content_type);
}

absl::Status HttpGateway::Impl::Listen(std::unique_ptr<httplib::Server> server) {
  server_ = std::move(server);
  std::string host;
  int port = 0;
  if (absl::Status s = SplitHostPort(options_.listen, &host, &port); !s.ok()) return s;
  const int threads = options_.threads;
  server_->new_task_queue = [threads] { return new BoundedPool(threads, static_cast<size_t>(threads)); };
  server_->set_payload_max_length(options_.max_body_bytes);
  server_->set_read_timeout(std::chrono::seconds(10));
  server_->set_write_timeout(std::chrono::seconds(10));
  server_->set_keep_alive_timeout(5);
  server_->set_default_headers({{"X-Content-Type-Options", "nosniff"},
                                {"Content-Security-Policy", kContentSecurityPolicy},
                                {"Referrer-Policy", "no-referrer"},
                                {"X-Frame-Options", "DENY"},
                                {"Cache-Control", "no-store"}});
  server_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    Error(grpc::Status(grpc::StatusCode::INTERNAL, "internal error in parityd's HTTP gateway"), res);
  });
  Routes();
  port_ = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ", options_.listen,
                                               ": the port is in use or the address is not this machine's"));
  }
  listener_ = std::thread([this] { server_->listen_after_bind(); });
  return absl::OkStatus();
}

void HttpGateway::Impl::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (grpc::ClientContext* c : streams_) c->TryCancel();
  }
  if (server_) server_->stop();
  if (listener_.joinable()) listener_.join();
}

absl::StatusOr<std::unique_ptr<HttpGateway>> HttpGateway::Start(const HttpOptions& options,
                                                                std::shared_ptr<grpc::Channel> channel,
                                                                MetricsRenderer metrics) {
  auto impl = std::make_unique<Impl>(options, std::move(channel), std::move(metrics));
  std::unique_ptr<httplib::Server> server;
  if (options.tls_cert_file.empty()) {
    server = std::make_unique<httplib::Server>();
  } else {
    absl::StatusOr<std::unique_ptr<httplib::Server>> tls = MakeTlsServer(options);
    if (!tls.ok()) return tls.status();
    server = std::move(*tls);
  }
  if (absl::Status s = impl->Listen(std::move(server)); !s.ok()) return s;
  return std::unique_ptr<HttpGateway>(new HttpGateway(std::move(impl)));
}

HttpGateway::HttpGateway(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpGateway::~HttpGateway() { Stop(); }
int HttpGateway::port() const { return impl_->port(); }
void HttpGateway::Stop() { impl_->Stop(); }

}  // namespace parity
