#include "client/terminal.h"

#include <unistd.h>

#include <cstdlib>
#include <algorithm>
#include <cstring>

namespace parity {

bool IsTerminal(FILE* f) { return ::isatty(::fileno(f)) == 1; }

bool ColorsWanted(FILE* f) {
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && no_color[0] != '\0') return false;
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::strcmp(term, "dumb") == 0) return false;
  return IsTerminal(f);
}

const char* VerdictColorCode(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "32";
    case Verdict::kWarn: return "33";
    case Verdict::kFail: return "31;1";
    case Verdict::kError: return "35;1";
    case Verdict::kUnmatched: return "36";
    case Verdict::kSkipped: return "2";
  }
  return "0";
}

std::string Paint(const std::string& s, const char* code, bool on) {
  if (!on) return s;
  return std::string("\033[") + code + "m" + s + "\033[0m";
}

ProgressBar::ProgressBar(const char* label) : label_(label), enabled_(IsTerminal(stderr)) {}

void ProgressBar::Update(size_t done, size_t total, const std::string& suffix) {
  if (!enabled_ || total == 0) return;
  const size_t width = 30;
  const size_t filled = std::min(done, total) * width / total;
  if (filled == last_ && done != total && suffix.empty()) return;
  last_ = filled;
  std::string bar(filled, '#');
  bar.append(width - filled, ' ');
  std::fprintf(stderr, "\r\033[K%s [%s] %zu/%zu%s", label_, bar.c_str(), done, total, suffix.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::Finish() {
  if (drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
}

}  // namespace parity
