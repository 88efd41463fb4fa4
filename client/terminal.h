// Terminal capabilities: colours only on a terminal and never with NO_COLOR set.
#ifndef PARITY_CLIENT_TERMINAL_H_
#define PARITY_CLIENT_TERMINAL_H_

#include <cstdio>
#include <ostream>
#include <streambuf>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "common/checks/verdict.h"

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
  // Drawn only when `wanted` and stderr is a terminal.
  explicit ProgressBar(const char* label, bool wanted = true);
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

// An ostream that hands `out` whole lines only, each under `mu`: threads writing one stream,
// each through its own LinesTo sharing `mu`, never interleave within a line. A partial last
// line goes out when the LinesTo is destroyed. `out` and `mu` must outlive it.
class LinesTo : public std::ostream {
 public:
  LinesTo(std::ostream& out, absl::Mutex* mu);
  ~LinesTo() override;

 private:
  class Buf : public std::streambuf {
   public:
    Buf(std::ostream& out, absl::Mutex* mu) : out_(out), mu_(mu) {}
    void Emit();  // writes the buffered text, if any, under mu_

   protected:
    int_type overflow(int_type c) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;

   private:
    std::ostream& out_;
    absl::Mutex* const mu_;
    std::string line_;
  };
  Buf buf_;
};

}  // namespace parity

#endif  // PARITY_CLIENT_TERMINAL_H_
