#include "common/base/json.h"

#include <cerrno>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/pyformat.h"

namespace parity {

Json Json::Bool(bool b) {
  Json j;
  j.type_ = Type::kBool;
  j.bool_ = b;
  return j;
}
Json Json::Number(double d) {
  Json j;
  j.type_ = Type::kNumber;
  j.num_ = d;
  return j;
}
Json Json::Integer(int64_t i) {
  Json j;
  j.type_ = Type::kNumber;
  j.int_ = i;
  j.is_int_ = true;
  return j;
}
Json Json::String(std::string s) {
  Json j;
  j.type_ = Type::kString;
  j.str_ = std::move(s);
  return j;
}
Json Json::MakeArray(Array a) {
  Json j;
  j.type_ = Type::kArray;
  j.box_ = std::make_shared<Array>(std::move(a));
  return j;
}
Json Json::MakeObject(Object o) {
  Json j;
  j.type_ = Type::kObject;
  j.box_ = std::make_shared<Object>(std::move(o));
  return j;
}

const Json* Json::Find(absl::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (const auto& [k, v] : as_object()) {
    if (k == key) return &v;
  }
  return nullptr;
}

Json& Json::Set(std::string key, Json value) {
  Object& o = mutable_object();
  o.emplace_back(std::move(key), std::move(value));
  return o.back().second;
}

Json& Json::Append(Json value) {
  Array& a = mutable_array();
  a.push_back(std::move(value));
  return a.back();
}

void AppendJsonString(absl::string_view s, std::string* out) {
  out->push_back('"');
  size_t run = 0;  // start of the characters not yet appended that need no escape
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      default: {  // the other control characters
        static const char kHex[] = "0123456789abcdef";
        out->append("\\u00");
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 15]);
      }
    }
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
}

std::string Json::Dump(int indent) const {
  std::string out;
  DumpTo(&out, indent, 0);
  return out;
}

void AppendJsonNumber(double d, std::string* out) {
  if (!std::isfinite(d)) {
    AppendJsonString(PyRepr(d), out);
  } else {
    out->append(PyRepr(d));
  }
}

void Json::DumpTo(std::string* out, int indent, int level) const {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(indent * lvl), ' ');
  };
  switch (type_) {
    case Type::kNull: out->append("null"); return;
    case Type::kBool: out->append(bool_ ? "true" : "false"); return;
    case Type::kNumber:
      if (is_int_) {
        absl::StrAppend(out, int_);
      } else {
        AppendJsonNumber(num_, out);
      }
      return;
    case Type::kString: AppendJsonString(str_, out); return;
    case Type::kArray: {
      out->push_back('[');
      bool first = true;
      for (const Json& v : as_array()) {
        if (!first) out->push_back(',');
        first = false;
        newline(level + 1);
        v.DumpTo(out, indent, level + 1);
      }
      if (!as_array().empty()) newline(level);
      out->push_back(']');
      return;
    }
    case Type::kObject: {
      out->push_back('{');
      bool first = true;
      for (const auto& [k, v] : as_object()) {
        if (!first) out->push_back(',');
        first = false;
        newline(level + 1);
        AppendJsonString(k, out);
        out->append(indent < 0 ? ":" : ": ");
        v.DumpTo(out, indent, level + 1);
      }
      if (!as_object().empty()) newline(level);
      out->push_back('}');
      return;
    }
  }
}

class JsonParser {
 public:
  explicit JsonParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<Json> ParseDocument() {
    Json v;
    absl::Status s = ParseValue(&v, 0);
    if (!s.ok()) return s;
    SkipWs();
    if (pos_ != text_.size()) return Error("unexpected trailing characters");
    return v;
  }

  absl::Status ParseMembers(absl::string_view split, const JsonMemberFn& on_member,
                            const JsonMemberFn& on_split_member) {
    SkipWs();
    if (pos_ >= text_.size() || text_[pos_] != '{') {
      Json v;
      absl::Status s = ParseValue(&v, 0);
      if (!s.ok()) return s;
      SkipWs();
      if (pos_ != text_.size()) return Error("unexpected trailing characters");
      return absl::FailedPreconditionError("the document is not a JSON object");
    }
    absl::Status s = ForEachMember(0, [&](std::string key) -> absl::Status {
      SkipWs();
      if (key == split && pos_ < text_.size() && text_[pos_] == '{') {
        absl::Status inner = ForEachMember(1, [&](std::string k) -> absl::Status {
          Json v;
          absl::Status st = ParseValue(&v, 2);
          if (!st.ok()) return st;
          return on_split_member(std::move(k), std::move(v));
        });
        if (!inner.ok()) return inner;
        return on_member(std::move(key), Json::MakeObject());
      }
      Json v;
      absl::Status st = ParseValue(&v, 1);
      if (!st.ok()) return st;
      return on_member(std::move(key), std::move(v));
    });
    if (!s.ok()) return s;
    SkipWs();
    if (pos_ != text_.size()) return Error("unexpected trailing characters");
    return absl::OkStatus();
  }

 private:
  static constexpr int kMaxDepth = 512;

  // At an object's '{': for each member, parses its name and the ':' and calls `value(name)`,
  // which must consume the value; stops after the closing '}'.
  template <typename ValueFn>
  absl::Status ForEachMember(int depth, ValueFn&& value) {
    if (depth > kMaxDepth) return Error("nesting deeper than 512 levels");
    ++pos_;
    SkipWs();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      SkipWs();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Error("expected a member name");
      std::string key;
      absl::Status s = ParseString(&key);
      if (!s.ok()) return s;
      SkipWs();
      if (pos_ >= text_.size() || text_[pos_] != ':') return Error("expected ':' after name");
      ++pos_;
      s = value(std::move(key));
      if (!s.ok()) return s;
      SkipWs();
      if (pos_ >= text_.size()) return Error("unterminated object");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == '}') {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("expected ',' or '}' in object");
    }
  }

  absl::Status Error(absl::string_view what) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("JSON parse error at line ", line, " column ", col, ": ", what));
  }

  void SkipWs() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' ||
            text_[pos_] == '\t')) {
      ++pos_;
    }
  }

  bool Consume(absl::string_view word) {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  absl::Status ParseValue(Json* out, int depth) {
    if (depth > kMaxDepth) return Error("nesting deeper than 512 levels");
    SkipWs();
    if (pos_ >= text_.size()) return Error("unexpected end of input");
    const char c = text_[pos_];
    switch (c) {
      case '{': return ParseObject(out, depth);
      case '[': return ParseArray(out, depth);
      case '"': {
        std::string s;
        absl::Status st = ParseString(&s);
        if (!st.ok()) return st;
        *out = Json::String(std::move(s));
        return absl::OkStatus();
      }
      case 't':
        if (Consume("true")) {
          *out = Json::Bool(true);
          return absl::OkStatus();
        }
        break;
      case 'f':
        if (Consume("false")) {
          *out = Json::Bool(false);
          return absl::OkStatus();
        }
        break;
      case 'n':
        if (Consume("null")) {
          *out = Json();
          return absl::OkStatus();
        }
        break;
      case 'N':
        if (Consume("NaN")) {
          *out = Json::Number(std::numeric_limits<double>::quiet_NaN());
          return absl::OkStatus();
        }
        break;
      case 'I':
        if (Consume("Infinity")) {
          *out = Json::Number(std::numeric_limits<double>::infinity());
          return absl::OkStatus();
        }
        break;
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
    }
    return Error(absl::StrCat("unexpected character '", std::string(1, c), "'"));
  }

  absl::Status ParseNumber(Json* out) {
    const size_t start = pos_;
    if (text_[pos_] == '-') {
      ++pos_;
      if (Consume("Infinity")) {
        *out = Json::Number(-std::numeric_limits<double>::infinity());
        return absl::OkStatus();
      }
    }
    bool is_int = true;
    auto digits = [&]() {
      size_t n = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        ++pos_;
        ++n;
      }
      return n;
    };
    if (digits() == 0) return Error("malformed number");
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      is_int = false;
      if (digits() == 0) return Error("malformed number: no digits after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      is_int = false;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Error("malformed number: no exponent digits");
    }
    // strtod needs a terminated copy: on the stack for any number a dump writes (a statistics
    // dump has four per tensor, most of them longer than a std::string holds without the heap).
    const absl::string_view digits_text = text_.substr(start, pos_ - start);
    char small[64];
    std::string large;
    const char* num = small;
    if (digits_text.size() < sizeof(small)) {
      std::memcpy(small, digits_text.data(), digits_text.size());
      small[digits_text.size()] = '\0';
    } else {
      large = std::string(digits_text);
      num = large.c_str();
    }
    Json j;
    j.type_ = Json::Type::kNumber;
    j.num_ = std::strtod(num, nullptr);
    if (is_int) {
      errno = 0;
      long long v = std::strtoll(num, nullptr, 10);
      if (errno == 0) {  // as_double() is then double(v): the same rounding strtod does
        j.is_int_ = true;
        j.int_ = v;
      }
    }
    *out = std::move(j);
    return absl::OkStatus();
  }

  static void AppendUtf8(uint32_t cp, std::string* s) {
    if (cp < 0x80) {
      s->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      s->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      s->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  absl::Status ParseHex4(uint32_t* v) {
    if (pos_ + 4 > text_.size()) return Error("truncated \\u escape");
    *v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      *v <<= 4;
      if (h >= '0' && h <= '9') {
        *v |= static_cast<uint32_t>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        *v |= static_cast<uint32_t>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        *v |= static_cast<uint32_t>(h - 'A' + 10);
      } else {
        return Error("bad hex digit in \\u escape");
      }
    }
    return absl::OkStatus();
  }

  absl::Status ParseString(std::string* s) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= text_.size()) return Error("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return absl::OkStatus();
      if (static_cast<unsigned char>(c) < 0x20) return Error("control character in string");
      if (c != '\\') {
        s->push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) return Error("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"': s->push_back('"'); break;
        case '\\': s->push_back('\\'); break;
        case '/': s->push_back('/'); break;
        case 'b': s->push_back('\b'); break;
        case 'f': s->push_back('\f'); break;
        case 'n': s->push_back('\n'); break;
        case 'r': s->push_back('\r'); break;
        case 't': s->push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          absl::Status st = ParseHex4(&cp);
          if (!st.ok()) return st;
          if (cp >= 0xd800 && cp < 0xdc00 && Consume("\\u")) {
            uint32_t lo = 0;
            st = ParseHex4(&lo);
            if (!st.ok()) return st;
            if (lo >= 0xdc00 && lo < 0xe000) {
              cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else {
              AppendUtf8(cp, s);
              cp = lo;
            }
          }
          AppendUtf8(cp, s);
          break;
        }
        default: return Error(absl::StrCat("bad escape '\\", std::string(1, e), "'"));
      }
    }
  }

  absl::Status ParseArray(Json* out, int depth) {
    ++pos_;
    Json arr = Json::MakeArray();
    SkipWs();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      *out = std::move(arr);
      return absl::OkStatus();
    }
    while (true) {
      Json v;
      absl::Status s = ParseValue(&v, depth + 1);
      if (!s.ok()) return s;
      arr.Append(std::move(v));
      SkipWs();
      if (pos_ >= text_.size()) return Error("unterminated array");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == ']') {
        ++pos_;
        *out = std::move(arr);
        return absl::OkStatus();
      }
      return Error("expected ',' or ']' in array");
    }
  }

  absl::Status ParseObject(Json* out, int depth) {
    Json obj = Json::MakeObject();
    absl::Status s = ForEachMember(depth, [&](std::string key) -> absl::Status {
      Json v;
      absl::Status st = ParseValue(&v, depth + 1);
      if (!st.ok()) return st;
      obj.Set(std::move(key), std::move(v));
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    *out = std::move(obj);
    return absl::OkStatus();
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

absl::StatusOr<Json> ParseJson(absl::string_view text) { return JsonParser(text).ParseDocument(); }

absl::Status ParseJsonObjectMembers(absl::string_view text, absl::string_view split,
                                    const JsonMemberFn& on_member, const JsonMemberFn& on_split_member) {
  return JsonParser(text).ParseMembers(split, on_member, on_split_member);
}

}  // namespace parity
