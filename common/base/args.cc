#include "common/base/args.h"

#include <cctype>

#include <algorithm>

namespace parity {

bool Args::Parse(const std::vector<std::string>& args, std::vector<std::string>* positional, bool* help,
                 std::string* error, std::string* unknown_flag) const {
  *help = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "-h" || a == "--help") {
      *help = true;
      return true;
    }
    if (a.size() < 2 || a[0] != '-') {
      positional->push_back(a);
      continue;
    }
    std::string inline_value;
    bool has_inline = false;
    const size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_inline = true;
    }
    auto take = [&](std::string* out) {
      if (has_inline) {
        *out = inline_value;
        return true;
      }
      if (i + 1 >= args.size()) {
        *error = a + " needs a value";
        return false;
      }
      *out = args[++i];
      return true;
    };
    if (auto b = bools_.find(a); b != bools_.end()) {
      if (!has_inline || inline_value == "true") {
        *b->second = true;
      } else if (inline_value == "false") {
        *b->second = false;
      } else {
        *error = a + " takes no value (or =true, =false), got '" + inline_value + "'";
        return false;
      }
    } else if (auto v = values_.find(a); v != values_.end()) {
      if (!take(v->second)) return false;
    } else if (auto m = multis_.find(a); m != multis_.end()) {
      std::string s;
      if (!take(&s)) return false;
      m->second->push_back(s);
    } else {
      *error = "unknown option '" + a + "'";
      if (unknown_flag != nullptr) *unknown_flag = a;
      return false;
    }
  }
  return true;
}

namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string UnknownFlagText(const std::string& command, const std::string& flag,
                            const std::string& help) {
  const std::string name = flag.substr(0, flag.find('='));
  std::string best;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  for (size_t i = help.find("--"); i != std::string::npos; i = help.find("--", i + 2)) {
    size_t end = i + 2;
    while (end < help.size() && (std::isalnum(static_cast<unsigned char>(help[end])) || help[end] == '-' ||
                                 help[end] == '_')) {
      ++end;
    }
    const std::string known = help.substr(i, end - i);
    if (known.size() <= 2) continue;
    const size_t d = EditDistance(name, known);
    if (d < best_distance) {
      best_distance = d;
      best = known;
    }
    i = end - 2;
  }
  std::string msg = "unknown option '" + flag + "'";
  if (!best.empty()) msg += "; did you mean " + best + "?";
  return msg + " (" + command + " --help lists the options)";
}

std::string UnknownFlagMessage(const std::string& command, const std::string& flag,
                               const std::string& help) {
  return command + ": " + UnknownFlagText(command, flag, help);
}

bool SplitKeyValue(const std::string& s, std::string* k, std::string* v) {
  const size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  *k = s.substr(0, eq);
  *v = s.substr(eq + 1);
  return true;
}

}  // namespace parity
