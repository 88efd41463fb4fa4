// Structured log lines on stderr: "ts=... level=info component=parityd msg="..." key=value".
// A stand-in until absl/log is available in Debian's Abseil; thread-safe (one fprintf a line).
#ifndef PARITY_COMMON_LOGGING_H_
#define PARITY_COMMON_LOGGING_H_

#include <string>

#include "absl/strings/string_view.h"

namespace parity {

enum class LogLevel { kInfo, kWarning, kError };

// `fields` is appended as is ("run=r-1 items=17"); values with spaces must be quoted.
void LogLine(LogLevel level, absl::string_view component, absl::string_view msg,
             absl::string_view fields = "");
// `value` as a double-quoted field value (quotes, backslashes and control characters escaped).
std::string LogQuote(absl::string_view value);
// Silences LogLine below `level` (tests); default kInfo.
void SetMinLogLevel(LogLevel level);

}  // namespace parity

#endif  // PARITY_COMMON_LOGGING_H_
