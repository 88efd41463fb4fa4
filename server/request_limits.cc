#include "server/request_limits.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/control_chars.h"

namespace parity {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

absl::Status CheckString(const std::string& where, const FieldDescriptor* f, const std::string& value) {
  const size_t limit = f->name() == "config_json" ? kMaxConfigJsonBytes : kMaxRequestStringBytes;
  if (value.size() > limit) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", value.size(), " bytes, the limit is ", limit));
  }
  if (f->name() == "config_json") return absl::OkStatus();  // JSON text; parsed and checked later
  if (std::optional<uint32_t> c = FindControlCharacter(value)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: control character 0x%02x", where, *c));
  }
  return absl::OkStatus();
}

absl::Status CheckMessage(const Message& m, const std::string& prefix) {
  const Reflection* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    const std::string where = absl::StrCat(prefix, ".", f->name());
    if (f->is_repeated()) {
      const int n = r->FieldSize(m, f);
      if (n > kMaxRequestEntries) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", n, " entries, the limit is ", kMaxRequestEntries));
      }
      for (int i = 0; i < n; ++i) {
        if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
          if (absl::Status s = CheckString(where, f, r->GetRepeatedString(m, f, i)); !s.ok()) return s;
        } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {  // map entries too
          if (absl::Status s = CheckMessage(r->GetRepeatedMessage(m, f, i), where); !s.ok()) return s;
        }
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      if (absl::Status s = CheckString(where, f, r->GetString(m, f)); !s.ok()) return s;
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (absl::Status s = CheckMessage(r->GetMessage(m, f), where); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckRequestLimits(const Message& request) {
  return CheckMessage(request, request.GetDescriptor()->name());
}

}  // namespace parity
