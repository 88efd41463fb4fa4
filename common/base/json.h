// A small JSON value, parser and writer. The parser accepts the bare NaN, Infinity and
// -Infinity tokens that Python's json.dump writes (msprobe's dump.json contains them) and keeps
// object members in document order (dump.json's order is the dump order).
#ifndef PARITY_COMMON_JSON_H_
#define PARITY_COMMON_JSON_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace parity {

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;
  static Json Bool(bool b);
  static Json Number(double d);
  static Json Integer(int64_t i);
  static Json String(std::string s);
  static Json MakeArray(Array a = {});
  static Json MakeObject(Object o = {});

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }
  // True for a number written without fraction or exponent that fits int64.
  bool is_integer() const { return type_ == Type::kNumber && is_int_; }

  bool as_bool() const { return bool_; }
  double as_double() const { return is_int_ ? static_cast<double>(int_) : type_ == Type::kNumber ? num_ : 0; }
  int64_t as_int() const { return is_int_ ? int_ : 0; }
  const std::string& as_string() const { return str_; }
  const Array& as_array() const { return *static_cast<const Array*>(box_.get()); }
  Array& mutable_array() { return *static_cast<Array*>(box_.get()); }
  const Object& as_object() const { return *static_cast<const Object*>(box_.get()); }
  Object& mutable_object() { return *static_cast<Object*>(box_.get()); }

  // Object member lookup; nullptr when absent or when this is not an object.
  const Json* Find(absl::string_view key) const;
  // Appends a member (objects only; does not check for duplicates).
  Json& Set(std::string key, Json value);
  Json& Append(Json value);

  // Serialises compactly (indent < 0) or pretty-printed. Non-finite numbers are written as the
  // strings "nan", "inf", "-inf"; doubles use Python repr (shortest round-trip) notation.
  std::string Dump(int indent = -1) const;
  // Appends what Dump(indent) writes for this value when it is nested `level` deep in a
  // document (pretty-printed lines are indented by indent * (level + 1) inside it): documents
  // too large to build whole can be written piece by piece.
  void DumpTo(std::string* out, int indent, int level) const;

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  bool is_int_ = false;
  // 64 bytes: a dump holds four or five per tensor (statistics, values).
  union {
    double num_ = 0;  // a number that is not is_int_
    int64_t int_;     // is_int_
  };
  std::string str_;
  std::shared_ptr<void> box_;  // the Array or the Object

  friend class JsonParser;
};

// Parses a complete document. Errors are INVALID_ARGUMENT with line and column.
absl::StatusOr<Json> ParseJson(absl::string_view text);

// Parses a document whose top level is an object one member at a time, so that a large member
// is never held whole: each member of the top-level member named `split`, when that one is an
// object, goes to `on_split_member` as soon as it is parsed (then the `split` member itself goes
// to `on_member` with an empty object as its value); every other member goes whole to
// `on_member`. Members arrive in document order, duplicates included. Errors are ParseJson's
// (INVALID_ARGUMENT with line and column), FAILED_PRECONDITION for a well-formed document that
// is not an object; a status a callback returns ends the parse and is returned as is.
using JsonMemberFn = std::function<absl::Status(std::string key, Json value)>;
absl::Status ParseJsonObjectMembers(absl::string_view text, absl::string_view split,
                                    const JsonMemberFn& on_member, const JsonMemberFn& on_split_member);

// Appends `s` as a JSON string literal (with quotes and escapes) to `out`.
void AppendJsonString(absl::string_view s, std::string* out);
// Appends a number as Json::Dump writes it: Python repr, non-finite ones as "nan"/"inf"/"-inf".
void AppendJsonNumber(double d, std::string* out);

}  // namespace parity

#endif  // PARITY_COMMON_JSON_H_
