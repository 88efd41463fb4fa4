// An S3-compatible server for tests, never a mock: the one ctest's `s3` fixture started
// (tests/s3.sh; PARITY_TEST_S3_ENDPOINT_FILE names the file holding its endpoint), or else one this
// process starts with tests/s3.sh and stops when it exits. Bucket "parity"; s3rver's fixed
// credentials (S3RVER / S3RVER).
#ifndef PARITY_TESTS_TEST_S3_H_
#define PARITY_TESTS_TEST_S3_H_

#include <string>

#include "server/storage/s3.h"
#include "tests/test_script_server.h"

namespace parity::testing {

// The server's endpoint ("http://127.0.0.1:PORT"); "" when none could be started.
inline const std::string& S3Endpoint() {
  static const ScriptServer server("s3.sh", "PARITY_TEST_S3_ENDPOINT_FILE");  // stopped at exit
  return server.address();
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
