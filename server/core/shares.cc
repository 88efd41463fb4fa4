#include "server/core/shares.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace parity {
namespace {

bool Known(const std::string& project) { return !project.empty() && project != "*"; }

// Decrements `key`'s count, dropping it at zero.
void Decrement(std::map<std::string, int>* counts, const std::string& key) {
  auto it = counts->find(key);
  if (it != counts->end() && --it->second <= 0) counts->erase(it);
}

}  // namespace

absl::Status Shares::Refusal(const std::string& flag, int limit, const std::string& scope) const {
  return absl::ResourceExhaustedError(absl::StrCat("too many ", limits_.what, scope, " (parityd --", flag,
                                                   "=", limit, "); retry later"));
}

absl::StatusOr<std::unique_ptr<Shares::Lease>> Shares::Acquire(const std::string& token,
                                                                const std::string& project) {
  {
    absl::MutexLock l(&mu_);
    if (limits_.total > 0 && held_ >= limits_.total) return Refusal(limits_.total_flag, limits_.total, "");
    if (limits_.per_token > 0 && !token.empty()) {
      auto it = by_token_.find(token);
      if (it != by_token_.end() && it->second >= limits_.per_token) {
        return Refusal(limits_.token_flag, limits_.per_token, absl::StrCat(" with token ", token));
      }
    }
    if (limits_.per_project > 0 && Known(project)) {
      auto it = by_project_.find(project);
      if (it != by_project_.end() && it->second >= limits_.per_project) {
        return Refusal(limits_.project_flag, limits_.per_project, absl::StrCat(" in project '", project, "'"));
      }
    }
    ++held_;
    high_ = std::max(high_, held_);
    if (!token.empty()) ++by_token_[token];
  }
  std::unique_ptr<Lease> lease(new Lease(this, token));
  if (Known(project)) {
    absl::Status counted = lease->SetProject(project);
    if (!counted.ok()) return counted;  // raced to the project's limit; the lease releases
  }
  return lease;
}

absl::Status Shares::Lease::SetProject(const std::string& project) {
  if (!project_.empty() || !Known(project)) return absl::OkStatus();
  absl::MutexLock l(&shares_->mu_);
  const ShareLimits& lim = shares_->limits_;
  int& n = shares_->by_project_[project];
  if (lim.per_project > 0 && n >= lim.per_project) {
    if (n == 0) shares_->by_project_.erase(project);
    return shares_->Refusal(lim.project_flag, lim.per_project, absl::StrCat(" in project '", project, "'"));
  }
  ++n;
  project_ = project;
  return absl::OkStatus();
}

Shares::Lease::~Lease() { shares_->Release(token_, project_); }

void Shares::Release(const std::string& token, const std::string& project) {
  absl::MutexLock l(&mu_);
  --held_;
  if (!token.empty()) Decrement(&by_token_, token);
  if (!project.empty()) Decrement(&by_project_, project);
}

int Shares::held() const {
  absl::MutexLock l(&mu_);
  return held_;
}

int Shares::high_water() const {
  absl::MutexLock l(&mu_);
  return high_;
}

}  // namespace parity
