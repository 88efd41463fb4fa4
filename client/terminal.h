// Terminal capabilities: colours only on a terminal and never with NO_COLOR set.
#ifndef PARITY_CLIENT_TERMINAL_H_
#define PARITY_CLIENT_TERMINAL_H_

#include <cstdio>
#include <string>

#include "common/verdict.h"

namespace parity {

bool IsTerminal(FILE* f);
// True when `f` is a terminal, NO_COLOR is unset (or empty) and TERM is not "dumb".
bool ColorsWanted(FILE* f);

// The ANSI colour code for a verdict (green PASS, yellow WARN, red FAIL, magenta ERROR, ...).
const char* VerdictColorCode(Verdict v);

// ANSI wrappers; return `s` unchanged when `on` is false.
std::string Paint(const std::string& s, const char* ansi_code, bool on);

// A one-line progress bar on stderr ("\r[#####     ] 12/40 items"), only on a terminal.
class ProgressBar {
 public:
  explicit ProgressBar(const char* label);
  // `suffix` is printed after the counts (e.g. rates, verdict counts).
  void Update(size_t done, size_t total, const std::string& suffix = "");
  void Finish();
  bool enabled() const { return enabled_; }

 private:
  const char* label_;
  bool enabled_;
  bool drawn_ = false;
  size_t last_ = static_cast<size_t>(-1);
};

}  // namespace parity

#endif  // PARITY_CLIENT_TERMINAL_H_
