#include "server/http/openapi.h"

#include <set>

#include "common/base/json.h"

namespace parity {

namespace pb = google::protobuf;

namespace {

Json Str(std::string s) { return Json::String(std::move(s)); }
Json Obj(Json::Object o) { return Json::MakeObject(std::move(o)); }
Json Ref(const pb::Descriptor* d) { return Obj({{"$ref", Str("#/components/schemas/" + d->name())}}); }

// The schema of one value of `f` (not repeated), as canonical JSON writes it. Messages it names
// are added to `pending`.
Json ValueSchema(const pb::FieldDescriptor* f, std::vector<const pb::Descriptor*>* pending) {
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_STRING:
      return f->type() == pb::FieldDescriptor::TYPE_BYTES ? Obj({{"type", Str("string")}, {"contentEncoding", Str("base64")}})
                                                          : Obj({{"type", Str("string")}});
    case pb::FieldDescriptor::CPPTYPE_INT32:
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      return Obj({{"type", Str("integer")}});
    case pb::FieldDescriptor::CPPTYPE_INT64:
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      // 64-bit integers are decimal strings in canonical JSON.
      return Obj({{"type", Str("string")}, {"pattern", Str("^-?[0-9]+$")}});
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
      // NaN and the infinities are the strings "NaN", "Infinity", "-Infinity".
      return Obj({{"oneOf", Json::MakeArray({Obj({{"type", Str("number")}}),
                                             Obj({{"enum", Json::MakeArray({Str("NaN"), Str("Infinity"), Str("-Infinity")})}})})}});
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      return Obj({{"type", Str("boolean")}});
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      Json::Array names;
      for (int i = 0; i < f->enum_type()->value_count(); ++i) names.push_back(Str(f->enum_type()->value(i)->name()));
      return Obj({{"type", Str("string")}, {"enum", Json::MakeArray(std::move(names))}});
    }
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      pending->push_back(f->message_type());
      return Ref(f->message_type());
  }
  return Obj({});
}

Json FieldSchema(const pb::FieldDescriptor* f, std::vector<const pb::Descriptor*>* pending) {
  if (f->is_map()) {
    return Obj({{"type", Str("object")}, {"additionalProperties", ValueSchema(f->message_type()->map_value(), pending)}});
  }
  Json v = ValueSchema(f, pending);
  if (f->is_repeated()) return Obj({{"type", Str("array")}, {"items", std::move(v)}});
  return v;
}

Json MessageSchema(const pb::Descriptor* d, std::vector<const pb::Descriptor*>* pending) {
  Json::Object props;
  for (int i = 0; i < d->field_count(); ++i) props.emplace_back(d->field(i)->json_name(), FieldSchema(d->field(i), pending));
  return Obj({{"type", Str("object")}, {"properties", Obj(std::move(props))}, {"additionalProperties", Json::Bool(false)}});
}

// A GET route's query parameters: the request's fields that are not in the path (scalars,
// enums and repeated ones; a nested message's fields as NAME.FIELD are accepted, not listed).
Json::Array Parameters(const ApiRoute& r) {
  Json::Array out;
  for (const std::string& p : r.path_fields) {
    out.push_back(Obj({{"name", Str(p)}, {"in", Str("path")}, {"required", Json::Bool(true)},
                       {"schema", Obj({{"type", Str("string")}})}}));
  }
  if (r.method != "GET") return out;
  std::vector<const pb::Descriptor*> ignored;
  for (int i = 0; i < r.request->field_count(); ++i) {
    const pb::FieldDescriptor* f = r.request->field(i);
    bool in_path = false;
    for (const std::string& p : r.path_fields) in_path = in_path || p == f->name();
    if (in_path || f->is_map() || f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    Json::Object p = {{"name", Str(f->name())}, {"in", Str("query")}, {"schema", FieldSchema(f, &ignored)}};
    if (f->is_repeated()) {
      p.emplace_back("style", Str("form"));
      p.emplace_back("explode", Json::Bool(true));
    }
    out.push_back(Obj(std::move(p)));
  }
  return out;
}

Json ErrorResponse() {
  return Obj({{"description", Str("The RPC's status: code (gRPC), message; HTTP status as grpc-gateway maps it")},
              {"content", Obj({{"application/json", Obj({{"schema", Obj({{"$ref", Str("#/components/schemas/Status")}})}})}})}});
}

Json Operation(const ApiRoute& r, std::vector<const pb::Descriptor*>* pending) {
  pending->push_back(r.response);
  Json::Object op = {{"summary", Str(r.summary)},
                     {"operationId", Str(r.method + r.path)},
                     {"parameters", Json::MakeArray(Parameters(r))}};
  if (r.method == "POST" && r.request->field_count() > static_cast<int>(r.path_fields.size())) {
    pending->push_back(r.request);
    op.emplace_back("requestBody", Obj({{"content", Obj({{"application/json", Obj({{"schema", Ref(r.request)}})}})}}));
  }
  op.emplace_back("responses", Obj({{"200", Obj({{"description", Str(r.response->name())},
                                                  {"content", Obj({{"application/json", Obj({{"schema", Ref(r.response)}})}})}})},
                                    {"default", ErrorResponse()}}));
  return Obj(std::move(op));
}

Json OtherPaths() {
  auto text = [](const char* summary, const char* type, const char* description) {
    return Obj({{"get", Obj({{"summary", Str(summary)},
                             {"responses", Obj({{"200", Obj({{"description", Str(description)},
                                                             {"content", Obj({{type, Obj({{"schema", Obj({{"type", Str("string")}})}})}})}})},
                                                {"default", ErrorResponse()}})}})}});
  };
  return Obj({{"/api/v1/jobs/{job_id}/events",
               text("A job's progress as Server-Sent Events (Jobs.Watch)", "text/event-stream",
                    "'progress' events (a JobProgress in JSON) until the job ends, then one 'end' event (a Status)")},
              {"/metrics", text("Prometheus metrics", "text/plain", "The text exposition format, version 0.0.4")}});
}

}  // namespace

std::string OpenApiJson(const std::vector<ApiRoute>& routes, const std::string& version) {
  std::vector<const pb::Descriptor*> pending;
  Json::Object paths;
  for (const ApiRoute& r : routes) {
    Json* entry = nullptr;
    for (auto& [p, v] : paths) {
      if (p == r.path) entry = &v;
    }
    if (entry == nullptr) {
      paths.emplace_back(r.path, Obj({}));
      entry = &paths.back().second;
    }
    std::string method = r.method == "GET" ? "get" : "post";
    entry->Set(method, Operation(r, &pending));
  }
  Json other = OtherPaths();
  for (auto& [p, v] : other.mutable_object()) paths.emplace_back(p, v);
  // Every message the routes reach, each once, in the order first reached.
  Json::Object schemas;
  std::set<const pb::Descriptor*> done;
  for (size_t i = 0; i < pending.size(); ++i) {
    const pb::Descriptor* d = pending[i];
    if (!done.insert(d).second) continue;
    schemas.emplace_back(d->name(), MessageSchema(d, &pending));
  }
  schemas.emplace_back("Status", Obj({{"type", Str("object")},
                                      {"properties", Obj({{"code", Obj({{"type", Str("integer")}})},
                                                          {"message", Obj({{"type", Str("string")}})},
                                                          {"details", Obj({{"type", Str("array")}})}})},
                                      {"required", Json::MakeArray({Str("code"), Str("message")})}}));
  Json doc = Obj({{"openapi", Str("3.1.0")},
                  {"info", Obj({{"title", Str("Parity HTTP API")}, {"version", Str(version)},
                                {"description", Str("parityd's Jobs and Query RPCs over HTTP/JSON (protobuf's canonical JSON "
                                                    "mapping); Authorization: Bearer <token> when parityd requires tokens.")}})},
                  {"paths", Obj(std::move(paths))},
                  {"components", Obj({{"schemas", Obj(std::move(schemas))},
                                      {"securitySchemes", Obj({{"bearer", Obj({{"type", Str("http")}, {"scheme", Str("bearer")}})}})}})},
                  {"security", Json::MakeArray({Obj({{"bearer", Json::MakeArray()}})})}});
  return doc.Dump(2) + "\n";
}

}  // namespace parity
