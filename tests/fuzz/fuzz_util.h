// Helpers for the libFuzzer targets: the input as a file, for readers that take a path.
#ifndef PARITY_TESTS_FUZZ_FUZZ_UTIL_H_
#define PARITY_TESTS_FUZZ_FUZZ_UTIL_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace parity {

// Writes data to a per-process file under $TMPDIR (rewritten on every call) and returns its path.
inline std::string FuzzInputFile(const uint8_t* data, size_t size, const char* ext) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/parity-fuzz-" +
                           std::to_string(::getpid()) + ext;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace parity

#endif  // PARITY_TESTS_FUZZ_FUZZ_UTIL_H_
