#include "server/core/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cctype>
#include <chrono>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/control_chars.h"
#include "common/base/status_macros.h"

namespace parity {
namespace {

constexpr char kPrefix[] = "parity_";
constexpr size_t kIdBytes = 6;       // 12 hex digits
constexpr size_t kSecretBytes = 20;  // 40 hex digits, 160 bits
constexpr size_t kSaltBytes = 16;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::StatusOr<std::string> RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    return absl::InternalError("no random bytes from OpenSSL");
  }
  return out;
}

std::string Digest(absl::string_view salt, absl::string_view secret) {
  std::string in = absl::StrCat(salt, secret);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(in.data(), in.size(), md, &len, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(md), len);
}

bool IsLowerHex(absl::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return !s.empty();
}

}  // namespace

const char* RoleName(AccessRole r) {
  switch (r) {
    case AccessRole::kViewer: return "viewer";
    case AccessRole::kAgent: return "agent";
    case AccessRole::kAdmin: return "admin";
  }
  return "viewer";
}

absl::StatusOr<AccessRole> ParseRole(absl::string_view name) {
  if (name == "viewer") return AccessRole::kViewer;
  if (name == "agent") return AccessRole::kAgent;
  if (name == "admin") return AccessRole::kAdmin;
  return absl::InvalidArgumentError(
      absl::StrCat("role '", name, "' is not one of viewer, agent, admin"));
}

absl::Status Require(const Principal& p, AccessRole min_role, const std::string& project) {
  const bool role_ok = static_cast<int>(p.role) >= static_cast<int>(min_role);
  const bool project_ok = p.AllProjects() || p.project == project;
  if (role_ok && project_ok) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "token ", p.token_id, " (", RoleName(p.role), " of project '", p.project, "') may not do this: ",
      role_ok ? "" : absl::StrCat("it needs the ", RoleName(min_role), " role"),
      role_ok || project_ok ? "" : " and ",
      project_ok ? "" : absl::StrCat("it belongs to project '", project, "'")));
}

bool ValidProjectName(const std::string& p) {
  if (p.empty() || p.size() > 64) return false;
  for (char c : p) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  }
  return true;
}

absl::StatusOr<std::string> TokenAuth::Create(const std::string& project, AccessRole role,
                                              const std::string& note, TokenRecord* record) {
  if (project.empty()) return absl::InvalidArgumentError("a token needs a project");
  if (project == "*" && role != AccessRole::kAdmin) {
    return absl::InvalidArgumentError("project '*' (every project) is for admin tokens only");
  }
  if (project != "*" && !ValidProjectName(project)) {
    return absl::InvalidArgumentError(
        "the token's project must be '*' or 1-64 characters of [A-Za-z0-9_.-], as a run's");
  }
  if (note.size() > kMaxTokenNoteBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the token's note is ", note.size(), " bytes, the limit is ", kMaxTokenNoteBytes));
  }
  if (std::optional<uint32_t> c = FindControlCharacter(note)) {
    return absl::InvalidArgumentError(absl::StrCat("the token's note contains control character 0x", absl::Hex(*c)));
  }
  PARITY_ASSIGN_OR_RETURN(std::string id, RandomBytes(kIdBytes));
  PARITY_ASSIGN_OR_RETURN(std::string secret, RandomBytes(kSecretBytes));
  PARITY_ASSIGN_OR_RETURN(std::string salt, RandomBytes(kSaltBytes));
  TokenRecord t;
  t.token_id = absl::BytesToHexString(id);
  t.project = project;
  t.role = RoleName(role);
  t.salt = salt;
  const std::string secret_hex = absl::BytesToHexString(secret);
  t.hash = Digest(salt, secret_hex);
  t.note = note;
  t.created_at_ms = NowMs();
  PARITY_RETURN_IF_ERROR(store_->WriteSync(Store::InsertToken(t)));
  if (record != nullptr) *record = t;
  return absl::StrCat(kPrefix, t.token_id, "_", secret_hex);
}

absl::StatusOr<Principal> TokenAuth::Authenticate(absl::string_view token) const {
  if (!absl::StartsWith(token, kPrefix)) {
    return absl::UnauthenticatedError("the bearer token is not a Parity token (parity_<id>_<secret>)");
  }
  absl::string_view rest = token.substr(sizeof(kPrefix) - 1);
  const size_t sep = rest.find('_');
  if (sep == absl::string_view::npos || !IsLowerHex(rest.substr(0, sep)) ||
      !IsLowerHex(rest.substr(sep + 1)) || sep != 2 * kIdBytes ||
      rest.size() - sep - 1 != 2 * kSecretBytes) {
    return absl::UnauthenticatedError("the bearer token is malformed (parity_<id>_<secret>)");
  }
  const std::string id(rest.substr(0, sep));
  absl::StatusOr<TokenRecord> t = store_->GetToken(id);
  if (!t.ok()) {
    if (t.status().code() == absl::StatusCode::kNotFound) {
      return absl::UnauthenticatedError(absl::StrCat("token ", id, " is unknown"));
    }
    return t.status();
  }
  const std::string digest = Digest(t->salt, rest.substr(sep + 1));
  if (digest.size() != t->hash.size() ||
      CRYPTO_memcmp(digest.data(), t->hash.data(), digest.size()) != 0) {
    return absl::UnauthenticatedError(absl::StrCat("token ", id, ": wrong secret"));
  }
  if (t->revoked_at_ms != 0) {
    return absl::UnauthenticatedError(absl::StrCat("token ", id, " was revoked"));
  }
  PARITY_ASSIGN_OR_RETURN(AccessRole role, ParseRole(t->role));
  return Principal{t->token_id, t->project, role};
}

absl::StatusOr<TokenRecord> TokenAuth::Revoke(const std::string& token_id) {
  PARITY_RETURN_IF_ERROR(store_->GetToken(token_id).status());
  PARITY_RETURN_IF_ERROR(store_->WriteSync(Store::RevokeToken(token_id, NowMs())));
  return store_->GetToken(token_id);
}

bool TokenAuth::HasValidAdmin() const {
  absl::StatusOr<std::vector<TokenRecord>> all = store_->ListTokens("");
  if (!all.ok()) return false;
  for (const TokenRecord& t : *all) {
    if (t.role == "admin" && t.revoked_at_ms == 0) return true;
  }
  return false;
}

}  // namespace parity
