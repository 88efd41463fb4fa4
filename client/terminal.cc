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

ProgressBar::ProgressBar(const char* label, bool wanted) : label_(label), enabled_(wanted && IsTerminal(stderr)) {}

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

LinesTo::LinesTo(std::ostream& out, absl::Mutex* mu) : std::ostream(&buf_), buf_(out, mu) {}

LinesTo::~LinesTo() { buf_.Emit(); }

void LinesTo::Buf::Emit() {
  if (line_.empty()) return;
  absl::MutexLock l(mu_);
  out_ << line_;
  out_.flush();
  line_.clear();
}

LinesTo::Buf::int_type LinesTo::Buf::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  line_.push_back(traits_type::to_char_type(c));
  if (line_.back() == '\n') Emit();
  return c;
}

std::streamsize LinesTo::Buf::xsputn(const char* s, std::streamsize n) {
  line_.append(s, static_cast<size_t>(n));
  // Everything up to the last newline goes out in one piece.
  const size_t nl = line_.rfind('\n');
  if (nl == std::string::npos) return n;
  std::string rest = line_.substr(nl + 1);
  line_.resize(nl + 1);
  Emit();
  line_ = std::move(rest);
  return n;
}

}  // namespace parity
