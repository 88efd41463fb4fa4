// An S3-compatible server for tests, never a mock: the one ctest's `s3` fixture started
// (tests/s3.sh; PARITY_TEST_S3_ENDPOINT_FILE names the file holding its endpoint), or else one this
// process starts with tests/s3.sh and stops when it exits. Bucket "parity"; s3rver's fixed
// credentials (S3RVER / S3RVER).
#ifndef PARITY_TESTS_TEST_S3_H_
#define PARITY_TESTS_TEST_S3_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/storage/s3.h"

namespace parity::testing {

// The server's endpoint ("http://127.0.0.1:PORT"); "" when none could be started.
inline const std::string& S3Endpoint() {
  struct Server {
    std::string endpoint, dir;  // dir: a server of this process's own, stopped at exit
    Server() {
      if (const char* f = std::getenv("PARITY_TEST_S3_ENDPOINT_FILE"); f != nullptr && *f != '\0') {
        std::ifstream in(f);
        std::getline(in, endpoint);
        if (!endpoint.empty()) return;
      }
      dir = (std::filesystem::temp_directory_path() / absl::StrCat("parity_s3_", ::getpid())).string();
      const std::string cmd = absl::StrCat(PARITY_SOURCE_DIR, "/tests/s3.sh start ", dir);
      if (FILE* p = ::popen(cmd.c_str(), "r")) {
        char line[512];
        while (std::fgets(line, sizeof(line), p) != nullptr) endpoint = std::string(absl::StripTrailingAsciiWhitespace(line));
        if (::pclose(p) != 0) endpoint.clear();
      }
    }
    ~Server() {
      if (dir.empty()) return;
      const std::string cmd = absl::StrCat(PARITY_SOURCE_DIR, "/tests/s3.sh stop ", dir);
      if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not stop the test S3 server in %s\n", dir.c_str());
    }
  };
  static const Server server;  // stopped (when its own) as the process exits
  return server.endpoint;
}

// Options for the test server's bucket, keys under `prefix`.
inline S3Options TestS3Options(const std::string& prefix) {
  S3Options o;
  o.endpoint = S3Endpoint();
  o.bucket = "parity";
  o.prefix = prefix;
  o.access_key = "S3RVER";
  o.secret_key = "S3RVER";
  return o;
}

}  // namespace parity::testing

#endif  // PARITY_TESTS_TEST_S3_H_
