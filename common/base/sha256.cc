#include "common/base/sha256.h"

#include <openssl/evp.h>

namespace parity {
namespace {

// SHA-256 fetched once: OpenSSL 3 looks EVP_sha256() up in its provider tables at every init,
// which cost more than hashing a small tensor.
const EVP_MD* Sha256Md() {
  static const EVP_MD* const md = [] {
    const EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return fetched != nullptr ? fetched : EVP_sha256();
  }();
  return md;
}

std::string Hex(const unsigned char* md, unsigned int len) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * static_cast<size_t>(len), '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 15];
  }
  return out;
}

// One context per thread for Sha256Hex, reset by each init (no allocation per hash).
struct ThreadCtx {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~ThreadCtx() { EVP_MD_CTX_free(md); }
};

}  // namespace

struct Sha256::Ctx {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(new Ctx) { EVP_DigestInit_ex(ctx_->md, Sha256Md(), nullptr); }

Sha256::~Sha256() { delete ctx_; }

void Sha256::Update(const void* data, size_t n) { EVP_DigestUpdate(ctx_->md, data, n); }

std::string Sha256::HexDigest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_->md, md, &len);
  return Hex(md, len);
}

std::string Sha256Hex(absl::string_view bytes) {
  thread_local ThreadCtx ctx;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestInit_ex(ctx.md, Sha256Md(), nullptr);
  EVP_DigestUpdate(ctx.md, bytes.data(), bytes.size());
  EVP_DigestFinal_ex(ctx.md, md, &len);
  return Hex(md, len);
}

}  // namespace parity
