#include "common/base/logging.h"

#include <atomic>
#include <cstdio>
#include <ctime>

namespace parity {
namespace {
std::atomic<int> g_min_level{0};
}  // namespace

std::string LogQuote(absl::string_view value) {
  std::string out = "\"";
  for (const char c : value) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

void SetMinLogLevel(LogLevel level) { g_min_level = static_cast<int>(level); }

void LogLine(LogLevel level, absl::string_view component, absl::string_view msg,
             absl::string_view fields) {
  if (static_cast<int>(level) < g_min_level) return;
  std::time_t t = std::time(nullptr);
  std::tm tm;
  gmtime_r(&t, &tm);
  char ts[32];
  std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
  const char* lv = level == LogLevel::kInfo ? "info" : level == LogLevel::kWarning ? "warning" : "error";
  std::fprintf(stderr, "ts=%s level=%s component=%.*s msg=\"%.*s\"%s%.*s\n", ts, lv,
               static_cast<int>(component.size()), component.data(), static_cast<int>(msg.size()),
               msg.data(), fields.empty() ? "" : " ", static_cast<int>(fields.size()), fields.data());
}

}  // namespace parity
