// The OpenAPI 3.1 description of the HTTP API, made from the routes the gateway serves and the
// proto's descriptors (field names, types, enums as protobuf's canonical JSON mapping writes
// them), so that it cannot drift from either. Served at /api/v1/openapi.json; docs/openapi.json
// is a copy that tests/e2e/http_test.cc holds equal to it.
#ifndef PARITY_SERVER_HTTP_OPENAPI_H_
#define PARITY_SERVER_HTTP_OPENAPI_H_

#include <google/protobuf/descriptor.h>

#include <string>
#include <vector>

namespace parity {

// One JSON route: an RPC's request filled from `path_fields` (the path's parameters, in order)
// and the query (GET) or a JSON body (POST).
struct ApiRoute {
  std::string method;    // "GET" or "POST"
  std::string path;      // OpenAPI template, "/api/v1/jobs/{job_id}"
  std::vector<std::string> path_fields;
  const google::protobuf::Descriptor* request;
  const google::protobuf::Descriptor* response;
  std::string summary;
};

// The description, pretty-printed JSON. `version` is parityd's.
std::string OpenApiJson(const std::vector<ApiRoute>& routes, const std::string& version);

}  // namespace parity

#endif  // PARITY_SERVER_HTTP_OPENAPI_H_
