// Conversions from API messages to the engine's types, for the client side.
#ifndef PARITY_CLIENT_PROTO_UTIL_H_
#define PARITY_CLIENT_PROTO_UTIL_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "client/cli.h"
#include "common/checks/compare_config.h"
#include "common/checks/verdict.h"
#include "parity/v1/parity.pb.h"

namespace parity {

CheckResult CheckResultFromProto(const v1::OpResult& r);
PolicyKind PolicyFromProto(v1::Policy p);
Verdict VerdictFromProto(v1::Verdict v);
// What a job checked, for its exit code (OutcomeExitCode): its counts, finished when DONE.
CheckOutcome OutcomeFromProto(const v1::Job& j);

// The server address: `flag`, else $PARITY_SERVER, else 127.0.0.1:50051.
std::string ServerAddress(const std::string& flag);
// INVALID_ARGUMENT, saying what is wrong, unless `address` is HOST:PORT or [IPv6]:PORT with a
// port from 1 to 65535, or a target with a gRPC scheme (unix:, unix-abstract:, dns:, ipv4:,
// ipv6:, vsock:), which gRPC checks itself. gRPC takes "HOST:abc" or "HOST:" as port 0 and
// "HOST:99999" as 34463, and the caller would then retry a connection that cannot succeed.
absl::Status CheckServerAddress(const std::string& address);
// How every channel MakeChannel creates connects. TLS is on when a CA file is given (flag, else
// $PARITY_TLS_CA); a client certificate and key (flags, else $PARITY_TLS_CERT / $PARITY_TLS_KEY)
// add mutual TLS. The bearer token (flag, else $PARITY_TOKEN) goes with every call as
// "authorization: Bearer <token>". Reads the files now; an error names the file. Call before
// MakeChannel.
struct ClientConnection {
  std::string ca, cert, key, token;
};
absl::Status ConfigureClient(const ClientConnection& flags);
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

// What a failed connection's message most likely means for the TLS settings ConfigureClient
// made, as a sentence to append (" (a server with TLS ...)"), or "" when it says nothing about
// TLS. gRPC reports a plaintext client at a TLS server only as "Socket closed".
std::string TlsHint(absl::string_view grpc_message);

}  // namespace parity

#endif  // PARITY_CLIENT_PROTO_UTIL_H_
