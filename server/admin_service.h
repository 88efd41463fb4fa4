// The service edge of authentication: who is calling (from the "authorization: Bearer" header),
// and the Admin service that manages tokens.
#ifndef PARITY_SERVER_ADMIN_SERVICE_H_
#define PARITY_SERVER_ADMIN_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "parity/v1/parity.grpc.pb.h"
#include "server/core/auth.h"
#include "server/core/core.h"

namespace parity {

// The caller of an RPC: Principal::Anyone() when `auth` is null (authentication off), else the
// token's principal, or UNAUTHENTICATED when the header is missing or the token is not valid.
absl::StatusOr<Principal> CallerOf(const grpc::ServerContextBase& ctx, const TokenAuth* auth);

// The caller of an RPC on job `job_id`, when the job exists and the caller has `role` in its
// project; the caller is authenticated first, and a job of another project is NOT_FOUND as a
// missing one is.
absl::StatusOr<Principal> CallerOnJob(const grpc::ServerContextBase& ctx, const TokenAuth* auth, Core* core,
                                      AccessRole role, const std::string& job_id);

class AdminService final : public v1::Admin::Service {
 public:
  explicit AdminService(TokenAuth* auth) : auth_(auth) {}
  grpc::Status CreateToken(grpc::ServerContext*, const v1::CreateTokenRequest*,
                           v1::CreateTokenResponse*) override;
  grpc::Status ListTokens(grpc::ServerContext*, const v1::ListTokensRequest*,
                          v1::ListTokensResponse*) override;
  grpc::Status RevokeToken(grpc::ServerContext*, const v1::RevokeTokenRequest*,
                           v1::TokenInfo*) override;

 private:
  TokenAuth* const auth_;  // null: authentication off (every call FAILED_PRECONDITION)
};

}  // namespace parity

#endif  // PARITY_SERVER_ADMIN_SERVICE_H_
