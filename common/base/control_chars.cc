#include "common/base/control_chars.h"

#include <cstdio>

namespace parity {
namespace {

// The length of the control character at s[i] (1 for C0/DEL, 2 for a C1 in UTF-8), 0 if none.
size_t ControlAt(absl::string_view s, size_t i, uint32_t* code) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x20 || c == 0x7f) {
    *code = c;
    return 1;
  }
  if (c == 0xc2 && i + 1 < s.size()) {
    const unsigned char d = static_cast<unsigned char>(s[i + 1]);
    if (d >= 0x80 && d <= 0x9f) {
      *code = d;
      return 2;
    }
  }
  return 0;
}

}  // namespace

std::optional<uint32_t> FindControlCharacter(absl::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    uint32_t code;
    if (ControlAt(s, i, &code) > 0) return code;
  }
  return std::nullopt;
}

std::string TerminalSafe(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t code;
    const size_t n = ControlAt(s, i, &code);
    if (n == 0) {
      out.push_back(s[i++]);
      continue;
    }
    char buf[8];
    std::snprintf(buf, sizeof buf, n == 1 ? "\\x%02x" : "\\u%04x", static_cast<unsigned>(code));
    out += buf;
    i += n;
  }
  return out;
}

}  // namespace parity
