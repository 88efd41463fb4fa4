// The HTTP/JSON mapping of the gRPC API, in the manner of grpc-gateway: request messages are
// filled from path and query parameters (or a JSON body) by field name, responses and errors are
// written in protobuf's canonical JSON mapping, and gRPC status codes map to HTTP statuses as
// grpc-gateway maps them. No HTTP server here: these functions are testable alone.
#ifndef PARITY_SERVER_HTTP_HTTP_JSON_H_
#define PARITY_SERVER_HTTP_HTTP_JSON_H_

#include <google/protobuf/message.h>
#include <grpcpp/support/status.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace parity {

// grpc-gateway's HTTPStatusFromCode: INVALID_ARGUMENT 400, UNAUTHENTICATED 401,
// PERMISSION_DENIED 403, NOT_FOUND 404, ALREADY_EXISTS and ABORTED 409, RESOURCE_EXHAUSTED 429,
// CANCELLED 499, UNIMPLEMENTED 501, UNAVAILABLE 503, DEADLINE_EXCEEDED 504, ...
int HttpStatusFromGrpc(grpc::StatusCode code);

// The error body: google.rpc.Status in JSON, {"code": 5, "message": "...", "details": []}.
std::string ErrorJson(const grpc::Status& status);

// `message` in canonical JSON (lowerCamelCase names, enums by name, 64-bit integers as
// strings), fields at their default value included so that a client sees every field.
std::string ToJson(const google::protobuf::Message& message);

// Sets fields of `message` from named text values, as grpc-gateway reads path and query
// parameters: a name is a field's proto name or JSON name, a dotted path into nested messages
// ("config.policy"), or "MAP.KEY" for a map<string, string>; a repeated field takes every value
// given for it; enums take their name (with or without the enum's prefix) or number; booleans
// true/false/1/0. INVALID_ARGUMENT naming the parameter for an unknown name or a bad value.
absl::Status SetFieldsFromParams(const std::vector<std::pair<std::string, std::string>>& params,
                                 google::protobuf::Message* message);

// Parses a JSON request body into `message` (unknown fields refused). INVALID_ARGUMENT with the
// parser's message.
absl::Status MessageFromJsonBody(const std::string& body, google::protobuf::Message* message);

}  // namespace parity

#endif  // PARITY_SERVER_HTTP_HTTP_JSON_H_
