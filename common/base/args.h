// A small command-line parser for the three programs: --flag VALUE, --flag=VALUE, boolean --flag
// (or --flag=true, --flag=false), repeatable flags and positionals, with precise errors.
#ifndef PARITY_COMMON_BASE_ARGS_H_
#define PARITY_COMMON_BASE_ARGS_H_

#include <map>
#include <string>
#include <vector>

namespace parity {

class Args {
 public:
  void Value(const std::string& name, std::string* dst) { values_[name] = dst; }
  void Bool(const std::string& name, bool* dst) { bools_[name] = dst; }
  void Multi(const std::string& name, std::vector<std::string>* dst) { multis_[name] = dst; }

  // Parses `args`; false with `*error` set on an unknown flag or a missing value (and, for an
  // unknown flag, `*unknown_flag` set to it when given). Sets *help for -h/--help.
  bool Parse(const std::vector<std::string>& args, std::vector<std::string>* positional, bool* help,
             std::string* error, std::string* unknown_flag = nullptr) const;

 private:
  std::map<std::string, std::string*> values_;
  std::map<std::string, bool*> bools_;
  std::map<std::string, std::vector<std::string>*> multis_;
};

// The usage error for an unknown flag `flag` of `command` ("parity runs"): its name, the nearest
// flag that `help` (the command's help text) names when one is close (edit distance at most a
// third of its length, at least 2), and where the full list is.
std::string UnknownFlagMessage(const std::string& command, const std::string& flag,
                               const std::string& help);
// The same without the leading "<command>: ".
std::string UnknownFlagText(const std::string& command, const std::string& flag, const std::string& help);

// Splits "k=v"; false when there is no '=' or the key is empty.
bool SplitKeyValue(const std::string& s, std::string* k, std::string* v);

}  // namespace parity

#endif  // PARITY_COMMON_BASE_ARGS_H_
