#include "server/admin_service.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/convert.h"
#include "server/request_limits.h"

namespace parity {
namespace {

void ToProto(const TokenRecord& t, v1::TokenInfo* out) {
  out->set_token_id(t.token_id);
  out->set_project(t.project);
  out->set_role(t.role);
  out->set_note(t.note);
  out->set_created_at_ms(t.created_at_ms);
  out->set_revoked_at_ms(t.revoked_at_ms);
}

// The admin caller, or the status to return.
absl::StatusOr<Principal> Admin(const grpc::ServerContextBase& ctx, const TokenAuth* auth) {
  if (auth == nullptr) {
    return absl::FailedPreconditionError("tokens are off on this server (start parityd with --auth=tokens)");
  }
  absl::StatusOr<Principal> p = CallerOf(ctx, auth);
  if (!p.ok()) return p.status();
  if (p->role != AccessRole::kAdmin) {
    return absl::PermissionDeniedError(
        absl::StrCat("token ", p->token_id, " is a ", RoleName(p->role), " token; managing tokens needs admin"));
  }
  return p;
}

}  // namespace

absl::StatusOr<Principal> CallerOf(const grpc::ServerContextBase& ctx, const TokenAuth* auth) {
  if (auth == nullptr) return Principal::Anyone();
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) {
    return absl::UnauthenticatedError(
        "no token: this server needs \"authorization: Bearer <token>\" (parity --token or $PARITY_TOKEN)");
  }
  const absl::string_view value(it->second.data(), it->second.size());
  if (!absl::StartsWith(value, "Bearer ")) {
    return absl::UnauthenticatedError("the authorization header is not \"Bearer <token>\"");
  }
  return auth->Authenticate(value.substr(7));
}

absl::StatusOr<Principal> CallerOnJob(const grpc::ServerContextBase& ctx, const TokenAuth* auth, Core* core,
                                      AccessRole role, const std::string& job_id) {
  absl::StatusOr<Principal> p = CallerOf(ctx, auth);
  if (!p.ok() || p->AllProjects()) return p;
  absl::StatusOr<JobRecord> job = core->GetJob(job_id);
  if (!job.ok()) return job.status();
  // Another project's job is, to this caller, a job that does not exist.
  if (job->project != p->project) return JobNotFound(job_id);
  if (absl::Status ok = Require(*p, role, job->project); !ok.ok()) return ok;
  return p;
}

grpc::Status AdminService::CreateToken(grpc::ServerContext* ctx, const v1::CreateTokenRequest* req,
                                       v1::CreateTokenResponse* out) {
  if (absl::Status limits = CheckRequestLimits(*req); !limits.ok()) return ToGrpcStatus(limits);
  absl::StatusOr<Principal> p = Admin(*ctx, auth_);
  if (!p.ok()) return ToGrpcStatus(p.status());
  absl::StatusOr<AccessRole> role = ParseRole(req->role());
  if (!role.ok()) return ToGrpcStatus(role.status());
  TokenRecord rec;
  absl::StatusOr<std::string> token = auth_->Create(req->project(), *role, req->note(), &rec);
  if (!token.ok()) return ToGrpcStatus(token.status());
  out->set_token(*token);
  ToProto(rec, out->mutable_info());
  return grpc::Status::OK;
}

grpc::Status AdminService::ListTokens(grpc::ServerContext* ctx, const v1::ListTokensRequest* req,
                                      v1::ListTokensResponse* out) {
  if (absl::Status limits = CheckRequestLimits(*req); !limits.ok()) return ToGrpcStatus(limits);
  absl::StatusOr<Principal> p = Admin(*ctx, auth_);
  if (!p.ok()) return ToGrpcStatus(p.status());
  absl::StatusOr<std::vector<TokenRecord>> all = auth_->List(req->project());
  if (!all.ok()) return ToGrpcStatus(all.status());
  for (const TokenRecord& t : *all) ToProto(t, out->add_tokens());
  return grpc::Status::OK;
}

grpc::Status AdminService::RevokeToken(grpc::ServerContext* ctx, const v1::RevokeTokenRequest* req,
                                       v1::TokenInfo* out) {
  if (absl::Status limits = CheckRequestLimits(*req); !limits.ok()) return ToGrpcStatus(limits);
  absl::StatusOr<Principal> p = Admin(*ctx, auth_);
  if (!p.ok()) return ToGrpcStatus(p.status());
  absl::StatusOr<TokenRecord> t = auth_->Revoke(req->token_id());
  if (!t.ok()) return ToGrpcStatus(t.status());
  ToProto(*t, out);
  return grpc::Status::OK;
}

}  // namespace parity
