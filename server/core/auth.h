// API tokens and roles. A token is "parity_<id>_<secret>"; the store keeps only a random salt and
// SHA-256(salt || secret). Roles: viewer (read its project), agent (read, upload, submit and
// cancel in its project), admin (everything in every project, and tokens).
//
// Thread-safe (the store is).
#ifndef PARITY_SERVER_CORE_AUTH_H_
#define PARITY_SERVER_CORE_AUTH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/storage/store.h"

namespace parity {

enum class AccessRole { kViewer = 1, kAgent = 2, kAdmin = 3 };
const char* RoleName(AccessRole r);
absl::StatusOr<AccessRole> ParseRole(absl::string_view name);  // INVALID_ARGUMENT naming the choices

// Who is calling. project "*" means every project (admin tokens, or authentication off).
struct Principal {
  std::string token_id;  // "" when authentication is off
  std::string project;
  AccessRole role = AccessRole::kViewer;

  static Principal Anyone() { return {"", "*", AccessRole::kAdmin}; }
  bool AllProjects() const { return project == "*"; }
};

// PERMISSION_DENIED (naming the token, the role needed and the project) unless `p` has at least
// `min_role` in `project`.
absl::Status Require(const Principal& p, AccessRole min_role, const std::string& project);

// A project name, for runs and tokens alike: 1-64 characters of [A-Za-z0-9_.-].
bool ValidProjectName(const std::string& p);

// At most this many bytes of note on a token, without control characters.
inline constexpr size_t kMaxTokenNoteBytes = 1024;

class TokenAuth {
 public:
  explicit TokenAuth(Store* store) : store_(store) {}

  // Makes a token and returns its text; shown once, never stored. project "*" only for admin.
  absl::StatusOr<std::string> Create(const std::string& project, AccessRole role, const std::string& note,
                                     TokenRecord* record);
  // UNAUTHENTICATED for a malformed, unknown or revoked token (the message says which, never
  // echoing the secret).
  absl::StatusOr<Principal> Authenticate(absl::string_view token) const;
  // NOT_FOUND for an unknown id; revoking twice keeps the first revocation time.
  absl::StatusOr<TokenRecord> Revoke(const std::string& token_id);
  bool HasValidAdmin() const;
  absl::StatusOr<std::vector<TokenRecord>> List(const std::string& project) const {
    return store_->ListTokens(project);
  }

 private:
  Store* const store_;
};

}  // namespace parity

#endif  // PARITY_SERVER_CORE_AUTH_H_
