// SHA-256 with lowercase hex digests: the spool's content keys (the agent offers the same keys
// for dedup) and run fingerprints. OpenSSL's libcrypto underneath (SHA-NI where the CPU has it).
#ifndef PARITY_COMMON_SHA256_H_
#define PARITY_COMMON_SHA256_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace parity {

// Incremental hash. Not thread-safe; HexDigest ends it (call it once).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t n);
  void Update(absl::string_view s) { Update(s.data(), s.size()); }
  std::string HexDigest();  // 64 lowercase hex digits

 private:
  struct Ctx;
  Ctx* ctx_;
};

// The lowercase hex SHA-256 of `bytes`.
std::string Sha256Hex(absl::string_view bytes);

}  // namespace parity

#endif  // PARITY_COMMON_SHA256_H_
