// A server a test needs, started by a script of tests/ (postgres.sh, s3.sh), never a mock: the
// one ctest's fixture started (the file an environment variable names holds its address), or else
// one this process starts with `SCRIPT start DIR` (its last line of output is the address) and
// stops with `SCRIPT stop DIR` when it exits.
#ifndef PARITY_TESTS_TEST_SCRIPT_SERVER_H_
#define PARITY_TESTS_TEST_SCRIPT_SERVER_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace parity::testing {

class ScriptServer {
 public:
  // `script` under tests/, `file_env` the variable naming the fixture's address file.
  ScriptServer(const char* script, const char* file_env) : script_(script) {
    if (const char* f = std::getenv(file_env); f != nullptr && *f != '\0') {
      std::ifstream in(f);
      std::getline(in, address_);
      if (!address_.empty()) return;
    }
    dir_ = (std::filesystem::temp_directory_path() / absl::StrCat("parity_", script, "_", ::getpid())).string();
    if (FILE* p = ::popen(Command("start").c_str(), "r")) {
      char line[512];
      while (std::fgets(line, sizeof(line), p) != nullptr) address_ = std::string(absl::StripTrailingAsciiWhitespace(line));
      if (::pclose(p) != 0) address_.clear();
    }
  }
  ~ScriptServer() {
    if (dir_.empty()) return;
    if (std::system(Command("stop").c_str()) != 0) std::fprintf(stderr, "could not stop %s in %s\n", script_, dir_.c_str());
  }
  ScriptServer(const ScriptServer&) = delete;
  ScriptServer& operator=(const ScriptServer&) = delete;

  // "" when none could be started.
  const std::string& address() const { return address_; }

 private:
  std::string Command(const char* verb) const {
    return absl::StrCat(PARITY_SOURCE_DIR, "/tests/", script_, " ", verb, " ", dir_);
  }
  const char* const script_;
  std::string address_;
  std::string dir_;  // a server of this process's own
};

}  // namespace parity::testing

#endif  // PARITY_TESTS_TEST_SCRIPT_SERVER_H_
