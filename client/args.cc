#include "client/args.h"

namespace parity {

bool Args::Parse(const std::vector<std::string>& args, std::vector<std::string>* positional, bool* help,
                 std::string* error) const {
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
      if (has_inline) {
        *error = a + " takes no value";
        return false;
      }
      *b->second = true;
    } else if (auto v = values_.find(a); v != values_.end()) {
      if (!take(v->second)) return false;
    } else if (auto m = multis_.find(a); m != multis_.end()) {
      std::string s;
      if (!take(&s)) return false;
      m->second->push_back(s);
    } else {
      *error = "unknown option '" + a + "'";
      return false;
    }
  }
  return true;
}

bool SplitKeyValue(const std::string& s, std::string* k, std::string* v) {
  const size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  *k = s.substr(0, eq);
  *v = s.substr(eq + 1);
  return true;
}

}  // namespace parity
