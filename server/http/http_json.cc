#include "server/http/http_json.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include <cctype>
#include <map>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace parity {

namespace pb = google::protobuf;

int HttpStatusFromGrpc(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return 200;
    case grpc::StatusCode::CANCELLED: return 499;
    case grpc::StatusCode::UNKNOWN: return 500;
    case grpc::StatusCode::INVALID_ARGUMENT: return 400;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return 504;
    case grpc::StatusCode::NOT_FOUND: return 404;
    case grpc::StatusCode::ALREADY_EXISTS: return 409;
    case grpc::StatusCode::PERMISSION_DENIED: return 403;
    case grpc::StatusCode::UNAUTHENTICATED: return 401;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return 429;
    case grpc::StatusCode::FAILED_PRECONDITION: return 400;
    case grpc::StatusCode::ABORTED: return 409;
    case grpc::StatusCode::OUT_OF_RANGE: return 400;
    case grpc::StatusCode::UNIMPLEMENTED: return 501;
    case grpc::StatusCode::INTERNAL: return 500;
    case grpc::StatusCode::UNAVAILABLE: return 503;
    case grpc::StatusCode::DATA_LOSS: return 500;
    default: return 500;
  }
}

namespace {
// The length of the valid UTF-8 sequence at s[i] (0 when the bytes there are not one).
size_t Utf8Length(const std::string& s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  }
  return n;
}

// A JSON string literal of `s`: control characters and '<', '>', '&' escaped (a body read as
// HTML shows no markup), valid UTF-8 kept, any other byte as U+FFFD.
std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c == 0x7f || c == '<' || c == '>' || c == '&') {
      absl::StrAppend(&out, "\\u00", absl::Hex(c, absl::kZeroPad2));
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (const size_t n = Utf8Length(s, i); n > 0) {
      out.append(s, i, n);
      i += n - 1;
    } else {
      out += "\\ufffd";
    }
  }
  return out + "\"";
}
}  // namespace

std::string ErrorJson(const grpc::Status& status) {
  return absl::StrCat("{\"code\":", static_cast<int>(status.error_code()),
                      ",\"message\":", JsonQuote(status.error_message()), ",\"details\":[]}");
}

std::string ToJson(const pb::Message& message) {
  pb::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  o.always_print_enums_as_ints = false;
  std::string out;
  // Printing a valid message cannot fail; an empty object would hide a bug, so say so.
  if (!pb::util::MessageToJsonString(message, &out, o).ok()) return "{}";
  return out;
}

namespace {
absl::Status BadParam(const std::string& name, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("query parameter '", name.substr(0, 64), "': ", why));
}

const pb::FieldDescriptor* FindField(const pb::Descriptor* d, const std::string& name) {
  if (const pb::FieldDescriptor* f = d->FindFieldByName(name)) return f;
  for (int i = 0; i < d->field_count(); ++i) {
    if (d->field(i)->json_name() == name) return d->field(i);
  }
  return nullptr;
}

// "VerdictFilter" -> "VERDICT_FILTER_": the prefix protobuf style puts on an enum's values.
std::string EnumPrefix(const std::string& type_name) {
  std::string out;
  for (size_t i = 0; i < type_name.size(); ++i) {
    const char c = type_name[i];
    if (i > 0 && std::isupper(static_cast<unsigned char>(c))) out.push_back('_');
    out.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  }
  return out + "_";
}

absl::StatusOr<const pb::EnumValueDescriptor*> ParseEnum(const pb::EnumDescriptor* e, const std::string& param,
                                                         const std::string& text) {
  const std::string upper = absl::AsciiStrToUpper(text);
  if (const pb::EnumValueDescriptor* v = e->FindValueByName(upper)) return v;
  if (const pb::EnumValueDescriptor* v = e->FindValueByName(EnumPrefix(e->name()) + upper)) return v;
  int number = 0;
  if (absl::SimpleAtoi(text, &number)) {
    if (const pb::EnumValueDescriptor* v = e->FindValueByNumber(number)) return v;
  }
  std::string names;
  for (int i = 0; i < e->value_count(); ++i) {
    std::string n = e->value(i)->name();
    if (absl::StartsWith(n, EnumPrefix(e->name()))) n = n.substr(EnumPrefix(e->name()).size());
    absl::StrAppend(&names, i ? ", " : "", n);
  }
  return BadParam(param, absl::StrCat("'", text.substr(0, 64), "' is not one of ", names));
}

// Sets (or, for a repeated field, adds) the scalar `f` of `m` from `text`.
absl::Status SetScalar(pb::Message* m, const pb::FieldDescriptor* f, const std::string& param,
                       const std::string& text) {
  const pb::Reflection* r = m->GetReflection();
  const bool rep = f->is_repeated();
  auto bad = [&](const char* what) { return BadParam(param, absl::StrCat("'", text.substr(0, 64), "' is not ", what)); };
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_STRING:
      rep ? r->AddString(m, f, text) : r->SetString(m, f, text);
      return absl::OkStatus();
    case pb::FieldDescriptor::CPPTYPE_INT32: {
      int32_t v;
      if (!absl::SimpleAtoi(text, &v)) return bad("a 32-bit integer");
      rep ? r->AddInt32(m, f, v) : r->SetInt32(m, f, v);
      return absl::OkStatus();
    }
    case pb::FieldDescriptor::CPPTYPE_INT64: {
      int64_t v;
      if (!absl::SimpleAtoi(text, &v)) return bad("an integer");
      rep ? r->AddInt64(m, f, v) : r->SetInt64(m, f, v);
      return absl::OkStatus();
    }
    case pb::FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t v;
      if (!absl::SimpleAtoi(text, &v)) return bad("an unsigned 32-bit integer");
      rep ? r->AddUInt32(m, f, v) : r->SetUInt32(m, f, v);
      return absl::OkStatus();
    }
    case pb::FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v;
      if (!absl::SimpleAtoi(text, &v)) return bad("an unsigned integer");
      rep ? r->AddUInt64(m, f, v) : r->SetUInt64(m, f, v);
      return absl::OkStatus();
    }
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
    case pb::FieldDescriptor::CPPTYPE_FLOAT: {
      double v;
      if (!absl::SimpleAtod(text, &v)) return bad("a number");
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_FLOAT) {
        rep ? r->AddFloat(m, f, static_cast<float>(v)) : r->SetFloat(m, f, static_cast<float>(v));
      } else {
        rep ? r->AddDouble(m, f, v) : r->SetDouble(m, f, v);
      }
      return absl::OkStatus();
    }
    case pb::FieldDescriptor::CPPTYPE_BOOL: {
      bool v;
      if (text == "true" || text == "1") {
        v = true;
      } else if (text == "false" || text == "0") {
        v = false;
      } else {
        return bad("true or false");
      }
      rep ? r->AddBool(m, f, v) : r->SetBool(m, f, v);
      return absl::OkStatus();
    }
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      absl::StatusOr<const pb::EnumValueDescriptor*> v = ParseEnum(f->enum_type(), param, text);
      if (!v.ok()) return v.status();
      rep ? r->AddEnum(m, f, *v) : r->SetEnum(m, f, *v);
      return absl::OkStatus();
    }
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return BadParam(param, "names a message, not a value (name one of its fields: NAME.FIELD)");
}

// Adds the entry (key, text) to the map<string, string> field `f` of `m`.
absl::Status AddMapEntry(pb::Message* m, const pb::FieldDescriptor* f, const std::string& param,
                         const std::string& key, const std::string& text) {
  const pb::Descriptor* entry = f->message_type();
  const pb::FieldDescriptor* k = entry->FindFieldByName("key");
  const pb::FieldDescriptor* v = entry->FindFieldByName("value");
  if (k->cpp_type() != pb::FieldDescriptor::CPPTYPE_STRING || v->cpp_type() != pb::FieldDescriptor::CPPTYPE_STRING) {
    return BadParam(param, "only maps of strings to strings are set from parameters");
  }
  pb::Message* e = m->GetReflection()->AddMessage(m, f);
  e->GetReflection()->SetString(e, k, key);
  e->GetReflection()->SetString(e, v, text);
  return absl::OkStatus();
}

absl::Status SetParam(pb::Message* m, const std::string& name, const std::string& text) {
  std::vector<std::string> path = absl::StrSplit(name, '.');
  for (size_t i = 0; i < path.size(); ++i) {
    const pb::FieldDescriptor* f = FindField(m->GetDescriptor(), path[i]);
    if (f == nullptr) {
      return BadParam(name, absl::StrCat("no field '", path[i].substr(0, 64), "' in ", m->GetDescriptor()->name()));
    }
    if (f->is_map()) {
      if (i + 2 != path.size()) return BadParam(name, "a map entry is set as MAP.KEY=VALUE");
      return AddMapEntry(m, f, name, path[i + 1], text);
    }
    if (i + 1 == path.size()) return SetScalar(m, f, name, text);
    if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE || f->is_repeated()) {
      return BadParam(name, absl::StrCat("'", path[i], "' is not a message field"));
    }
    m = m->GetReflection()->MutableMessage(m, f);
  }
  return absl::OkStatus();
}
}  // namespace

absl::Status SetFieldsFromParams(const std::vector<std::pair<std::string, std::string>>& params,
                                 pb::Message* message) {
  for (const auto& [name, text] : params) {
    if (absl::Status s = SetParam(message, name, text); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status MessageFromJsonBody(const std::string& body, pb::Message* message) {
  if (body.empty()) return absl::OkStatus();
  pb::util::JsonParseOptions o;
  o.ignore_unknown_fields = false;
  const pb::util::Status s = pb::util::JsonStringToMessage(body, message, o);
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the request body is not a valid ",
                                                   message->GetDescriptor()->name(), " in JSON: ",
                                                   std::string(s.message()).substr(0, 256)));
  }
  return absl::OkStatus();
}

}  // namespace parity
