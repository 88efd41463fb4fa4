#include "client/proto_util.h"

#include <cstdlib>

#include <grpcpp/security/credentials.h>
#include <grpcpp/support/client_interceptor.h>

#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/file_util.h"

namespace parity {

CheckOutcome OutcomeFromProto(const v1::Job& j) {
  CheckOutcome o;
  o.pass = j.counts().pass();
  o.warn = j.counts().warn();
  o.fail = j.counts().fail();
  o.error = j.counts().error();
  o.unmatched = j.counts().unmatched();
  o.skipped = j.counts().skipped();
  o.finished = j.state() == v1::JOB_STATE_DONE;
  return o;
}

Verdict VerdictFromProto(v1::Verdict v) { return static_cast<Verdict>(std::max(0, static_cast<int>(v) - 1)); }

CheckResult CheckResultFromProto(const v1::OpResult& r) {
  CheckResult c;
  c.verdict = VerdictFromProto(r.verdict());
  c.policy = r.policy() == v1::POLICY_UNSPECIFIED ? "" : PolicyName(PolicyFromProto(r.policy()));
  c.peer_verdict = r.peer_verdict();
  c.message = r.message();
  for (const v1::Metric& m : r.metrics()) {
    c.Add(m.name(), m.has_text()      ? MetricValue::Text(m.text())
                    : m.has_integer() ? MetricValue::Integer(m.integer())
                                      : MetricValue::Number(m.number()));
  }
  return c;
}

PolicyKind PolicyFromProto(v1::Policy p) {
  switch (p) {
    case v1::POLICY_FORGE: return PolicyKind::kForge;
    case v1::POLICY_TORCH: return PolicyKind::kTorch;
    default: return PolicyKind::kMsprobe;
  }
}

std::string ServerAddress(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv("PARITY_SERVER");
  return env && *env ? env : "127.0.0.1:50051";
}

absl::Status CheckServerAddress(const std::string& address) {
  for (absl::string_view scheme : {"unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:", "vsock:"}) {
    if (absl::StartsWith(address, scheme)) return absl::OkStatus();
  }
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server address '", address, "': ", why,
        " (HOST:PORT, [IPv6]:PORT, or a gRPC target such as unix:/path)"));
  };
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return bad("no port");
  const absl::string_view host = absl::string_view(address).substr(0, colon);
  const absl::string_view port = absl::string_view(address).substr(colon + 1);
  if (host.empty() || host == "[]") return bad("no host");
  if (host.front() == '[' ? host.back() != ']' : host.find(':') != absl::string_view::npos) {
    return bad("an IPv6 address goes in brackets");
  }
  uint32_t n = 0;
  if (port.empty() || port.find_first_not_of("0123456789") != absl::string_view::npos ||
      !absl::SimpleAtoi(port, &n) || n < 1 || n > 65535) {
    return bad("the port must be a number from 1 to 65535");
  }
  return absl::OkStatus();
}

namespace {
// Set once by ConfigureClient (before any channel exists), read by MakeChannel.
std::shared_ptr<grpc::ChannelCredentials>& ClientCredentials() {
  static std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  return creds;
}

struct ClientTls {
  bool on = false;
  bool certificate = false;
};
ClientTls& ClientTlsSettings() {
  static ClientTls tls;
  return tls;
}

std::string& ClientToken() {
  static std::string token;
  return token;
}

// Adds the bearer token to every call of the channel.
class TokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(std::string header) : header_(std::move(header)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", header_});
    }
    methods->Proceed();
  }

 private:
  const std::string header_;
};

class TokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string token) : header_("Bearer " + std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(header_);
  }

 private:
  const std::string header_;
};

std::string FlagOrEnv(const std::string& flag, const char* env) {
  if (!flag.empty()) return flag;
  const char* v = std::getenv(env);
  return v != nullptr ? v : "";
}
}  // namespace

absl::Status ConfigureClient(const ClientConnection& flags) {
  const std::string ca = FlagOrEnv(flags.ca, "PARITY_TLS_CA");
  const std::string cert = FlagOrEnv(flags.cert, "PARITY_TLS_CERT");
  const std::string key = FlagOrEnv(flags.key, "PARITY_TLS_KEY");
  ClientToken() = FlagOrEnv(flags.token, "PARITY_TOKEN");
  while (!ClientToken().empty() && (ClientToken().back() == '\n' || ClientToken().back() == ' ')) {
    ClientToken().pop_back();  // a token pasted from a file
  }
  if (ca.empty()) {
    if (!cert.empty() || !key.empty()) {
      return absl::InvalidArgumentError("--tls-cert/--tls-key need --tls-ca (the server's CA)");
    }
    ClientCredentials() = grpc::InsecureChannelCredentials();
    ClientTlsSettings() = ClientTls{};
    return absl::OkStatus();
  }
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  grpc::SslCredentialsOptions o;
  absl::StatusOr<std::string> pem = ReadFileToString(ca, 1 << 20);
  if (!pem.ok()) return pem.status();
  o.pem_root_certs = *pem;
  if (!cert.empty()) {
    absl::StatusOr<std::string> c = ReadFileToString(cert, 1 << 20);
    if (!c.ok()) return c.status();
    absl::StatusOr<std::string> k = ReadFileToString(key, 1 << 20);
    if (!k.ok()) return k.status();
    o.pem_cert_chain = *c;
    o.pem_private_key = *k;
  }
  ClientCredentials() = grpc::SslCredentials(o);
  ClientTlsSettings() = ClientTls{true, !cert.empty()};
  return absl::OkStatus();
}

std::string TlsHint(absl::string_view m) {
  const ClientTls& tls = ClientTlsSettings();
  if (!tls.on) {
    return absl::StrContains(m, "Socket closed")
               ? " (a server with TLS closes plaintext connections this way: pass --tls-ca CA.pem or set "
                 "PARITY_TLS_CA)"
               : "";
  }
  if (absl::StrContains(m, "wrong version number")) {
    return " (the server does not speak TLS: drop --tls-ca and PARITY_TLS_CA)";
  }
  if (absl::StrContains(m, "certificate verify failed") || absl::StrContains(m, "Peer name")) {
    return " (the server's certificate is not signed by the --tls-ca CA, or not for this address)";
  }
  if (!tls.certificate && (absl::StrContains(m, "Socket closed") || absl::StrContains(m, "certificate required"))) {
    return " (a server with mutual TLS needs a client certificate: --tls-cert and --tls-key)";
  }
  return "";
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  if (ClientToken().empty()) return grpc::CreateCustomChannel(address, ClientCredentials(), args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<TokenInterceptorFactory>(ClientToken()));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, ClientCredentials(), args,
                                                                 std::move(interceptors));
}

}  // namespace parity
