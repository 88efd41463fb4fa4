// Admission to a resource many callers share (upload streams, job watches): at most `total`
// holders at once, at most `per_project` of them in one project and `per_token` with one token,
// so that one tenant's idle or hostile callers cannot take every slot.
//
// A lease counts against its token from the start and against its project once the project is
// known (at once for a project token; at the upload's start for an admin token or with
// authentication off). A refusal is RESOURCE_EXHAUSTED naming the flag of the limit reached.
// Thread-safe.
#ifndef PARITY_SERVER_CORE_SHARES_H_
#define PARITY_SERVER_CORE_SHARES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace parity {

struct ShareLimits {
  // 0: no limit of that kind. The flags name the limits in refusals ("max-streams" for
  // "parityd --max-streams=64").
  int total = 0, per_project = 0, per_token = 0;
  std::string total_flag, project_flag, token_flag;
  // What is counted, for messages ("concurrent uploads").
  std::string what;
};

class Shares {
 public:
  class Lease {
   public:
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    // Counts this lease against `project` too (once; "" or "*" counts against none), or
    // RESOURCE_EXHAUSTED when the project holds its limit already (the lease keeps its other
    // counts).
    absl::Status SetProject(const std::string& project);

   private:
    friend class Shares;
    Lease(Shares* shares, std::string token) : shares_(shares), token_(std::move(token)) {}
    Shares* const shares_;
    const std::string token_;
    std::string project_;  // "" until counted against one
  };

  explicit Shares(ShareLimits limits) : limits_(std::move(limits)) {}
  // A lease for a caller with `token` ("" without authentication) in `project` ("" or "*"
  // when not known yet), or RESOURCE_EXHAUSTED naming the limit.
  absl::StatusOr<std::unique_ptr<Lease>> Acquire(const std::string& token, const std::string& project);

  int held() const;
  int high_water() const;
  const ShareLimits& limits() const { return limits_; }

 private:
  absl::Status Refusal(const std::string& flag, int limit, const std::string& scope) const;
  void Release(const std::string& token, const std::string& project);

  const ShareLimits limits_;
  mutable absl::Mutex mu_;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  int high_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> by_project_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> by_token_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity

#endif  // PARITY_SERVER_CORE_SHARES_H_
