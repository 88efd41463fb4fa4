#include "common/base/glob.h"

namespace parity {
namespace {

// Matches one class starting at pattern[p] == '['; sets *next past ']'. A class without a
// closing ']' matches a literal '['.
bool MatchClass(absl::string_view pat, size_t p, char c, size_t* next) {
  size_t i = p + 1;
  bool negate = false;
  if (i < pat.size() && (pat[i] == '!' || pat[i] == '^')) {
    negate = true;
    ++i;
  }
  bool matched = false;
  bool first = true;
  while (i < pat.size() && (first || pat[i] != ']')) {
    first = false;
    if (i + 2 < pat.size() && pat[i + 1] == '-' && pat[i + 2] != ']') {
      if (pat[i] <= c && c <= pat[i + 2]) matched = true;
      i += 3;
    } else {
      if (pat[i] == c) matched = true;
      ++i;
    }
  }
  if (i >= pat.size()) {  // unterminated: literal '['
    *next = p + 1;
    return c == '[';
  }
  *next = i + 1;
  return matched != negate;
}

}  // namespace

bool GlobMatch(absl::string_view pat, absl::string_view text) {
  size_t p = 0, t = 0;
  size_t star_p = absl::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pat.size() && pat[p] == '*') {
      star_p = p++;
      star_t = t;
      continue;
    }
    if (p < pat.size()) {
      if (pat[p] == '?') {
        ++p;
        ++t;
        continue;
      }
      if (pat[p] == '[') {
        size_t next;
        if (MatchClass(pat, p, text[t], &next)) {
          p = next;
          ++t;
          continue;
        }
      } else if (pat[p] == text[t]) {
        ++p;
        ++t;
        continue;
      }
    }
    if (star_p == absl::string_view::npos) return false;
    p = star_p + 1;
    t = ++star_t;
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

}  // namespace parity
