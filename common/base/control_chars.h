// Control characters in text that comes from outside (uploads, dumps, the API): the daemon
// refuses them where a string names something, and every program escapes them where it shows
// text on a terminal, so that no upload can move the cursor, retitle or clear a terminal.
#ifndef PARITY_COMMON_BASE_CONTROL_CHARS_H_
#define PARITY_COMMON_BASE_CONTROL_CHARS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace parity {

// The first control character of `s`: a C0 byte (below 0x20), DEL (0x7f) or a C1 code point
// (U+0080-U+009F, as UTF-8 0xc2 0x80-0x9f); nullopt when there is none.
std::optional<uint32_t> FindControlCharacter(absl::string_view s);

// `s` with every control character (as FindControlCharacter counts them) written as "\xNN"
// (C1: "\u0080"); the same text when there is none.
std::string TerminalSafe(absl::string_view s);

}  // namespace parity

#endif  // PARITY_COMMON_BASE_CONTROL_CHARS_H_
