#include "server/watch_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/base/thread_name.h"
#include "server/admin_service.h"
#include "server/convert.h"
#include "server/request_limits.h"

namespace parity {
namespace {

constexpr int64_t kTickMs = 50;      // a burst of results within a tick is one write
constexpr int64_t kRefreshMs = 500;  // the job is written at least this often

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct Watches::State {
  explicit State(std::string job) : job_id(std::move(job)) {}
  const std::string job_id;
  absl::Mutex mu;
  Reactor* reactor ABSL_GUARDED_BY(mu) = nullptr;  // null once the call is done
  bool changed ABSL_GUARDED_BY(mu) = true;         // a write is due (the first one at once)
  bool writing ABSL_GUARDED_BY(mu) = false;        // one write in flight at most
  bool finished ABSL_GUARDED_BY(mu) = false;       // Finish was called
  // The watch ends with `end_status` once the write in flight (if any) completes.
  bool ending ABSL_GUARDED_BY(mu) = false;
  grpc::Status end_status ABSL_GUARDED_BY(mu);
  int64_t last_write_ms ABSL_GUARDED_BY(mu) = 0;
  v1::JobProgress message ABSL_GUARDED_BY(mu);  // the one being written
};

class Watches::Reactor : public grpc::ServerWriteReactor<v1::JobProgress> {
 public:
  // A watch refused before it started: ends with `refusal` at once.
  explicit Reactor(grpc::Status refusal) { Finish(std::move(refusal)); }
  // A started watch (`id` in the open list, `subscription` with the core).
  Reactor(Watches* watches, std::shared_ptr<State> st, std::unique_ptr<Shares::Lease> lease, int64_t id,
          int64_t subscription)
      : watches_(watches), st_(std::move(st)), lease_(std::move(lease)), id_(id), subscription_(subscription) {
    absl::MutexLock l(&st_->mu);
    st_->reactor = this;
  }

  // Ends the watch with `status`: at once, or when the write in flight completes.
  static void EndLocked(State& st, grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
    if (st.reactor == nullptr || st.finished) return;
    if (st.writing) {
      if (!st.ending) st.end_status = std::move(status);
      st.ending = true;
      return;
    }
    st.finished = true;
    st.reactor->Finish(std::move(status));
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock l(&st_->mu);
    st_->writing = false;
    if (!ok) {
      EndLocked(*st_, grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
    } else if (st_->ending) {
      EndLocked(*st_, st_->end_status);
    }
  }

  void OnCancel() override {
    if (!st_) return;
    absl::MutexLock l(&st_->mu);
    EndLocked(*st_, grpc::Status::CANCELLED);
  }

  void OnDone() override {
    if (st_) {
      watches_->Remove(id_);
      watches_->core_->Unsubscribe(subscription_);
      lease_.reset();
      absl::MutexLock l(&st_->mu);
      st_->reactor = nullptr;
    }
    delete this;
  }

 private:
  Watches* const watches_ = nullptr;
  const std::shared_ptr<State> st_;  // null for a refused watch
  std::unique_ptr<Shares::Lease> lease_;
  const int64_t id_ = -1;
  const int64_t subscription_ = 0;
};

Watches::Watches(Core* core, const TokenAuth* auth, WatchOptions options)
    : core_(core),
      auth_(auth),
      shares_({options.max_watches, options.max_watches_per_project, 0, "max-watches",
               "max-watches-per-project", "", "concurrent watches"}) {
  ticker_ = std::thread([this] { TickLoop(); });
}

Watches::~Watches() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  ticker_.join();
}

grpc::ServerWriteReactor<v1::JobProgress>* Watches::Start(grpc::CallbackServerContext* context,
                                                          const v1::WatchJobRequest* request) {
  if (absl::Status limits = CheckRequestLimits(*request); !limits.ok()) return new Reactor(ToGrpcStatus(limits));
  const std::string& job_id = request->job_id();
  if (job_id.empty()) return new Reactor(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job_id is empty"));
  absl::StatusOr<Principal> caller = CallerOnJob(*context, auth_, core_, AccessRole::kViewer, job_id);
  if (!caller.ok()) return new Reactor(ToGrpcStatus(caller.status()));
  absl::StatusOr<JobRecord> job = core_->GetJob(job_id);
  if (!job.ok()) return new Reactor(ToGrpcStatus(job.status()));
  absl::StatusOr<std::unique_ptr<Shares::Lease>> lease = shares_.Acquire(caller->token_id, job->project);
  if (!lease.ok()) return new Reactor(ToGrpcStatus(lease.status()));
  auto st = std::make_shared<State>(job_id);
  std::weak_ptr<State> weak = st;
  auto mark = [weak] {
    if (std::shared_ptr<State> s = weak.lock()) {
      absl::MutexLock l(&s->mu);
      s->changed = true;
    }
  };
  // Subscribed before the first read of the job, so that no change between the two is missed.
  const int64_t subscription =
      core_->SubscribeJob(job_id, [mark](const ResultEvent&) { mark(); }, [mark](const JobRecord&) { mark(); });
  int64_t id;
  {
    absl::MutexLock l(&mu_);
    if (stopping_) {
      core_->Unsubscribe(subscription);
      return new Reactor(grpc::Status(grpc::StatusCode::UNAVAILABLE, "parityd is shutting down"));
    }
    id = next_id_++;
  }
  auto* reactor = new Reactor(this, st, std::move(*lease), id, subscription);
  Add(id, st);
  Tick(st, NowMs());
  return reactor;
}

void Watches::Add(int64_t id, std::weak_ptr<State> st) {
  absl::MutexLock l(&mu_);
  open_[id] = std::move(st);
}

void Watches::Remove(int64_t id) {
  absl::MutexLock l(&mu_);
  open_.erase(id);
}

void Watches::Tick(const std::shared_ptr<State>& st, int64_t now_ms) {
  {
    absl::MutexLock l(&st->mu);
    if (st->reactor == nullptr || st->finished || st->ending || st->writing) return;
    if (!st->changed && now_ms - st->last_write_ms < kRefreshMs) return;
    st->changed = false;
  }
  // Outside the watch's lock: the core calls its listeners (which take it) under its own.
  absl::StatusOr<JobRecord> job = core_->GetJob(st->job_id);
  absl::MutexLock l(&st->mu);
  if (st->reactor == nullptr || st->finished || st->ending || st->writing) return;
  if (!job.ok()) {
    Reactor::EndLocked(*st, ToGrpcStatus(job.status()));
    return;
  }
  st->message.Clear();
  ToProto(*job, st->message.mutable_job());
  st->writing = true;
  st->last_write_ms = now_ms;
  if (IsFinal(job->state)) {  // the last message
    st->ending = true;
    st->end_status = grpc::Status::OK;
  }
  st->reactor->StartWrite(&st->message);
}

void Watches::TickLoop() {
  NameCurrentThread("watch-ticker");
  absl::MutexLock l(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(kTickMs))) {
    std::vector<std::shared_ptr<State>> open;
    open.reserve(open_.size());
    for (const auto& [id, weak] : open_) {
      if (std::shared_ptr<State> st = weak.lock()) open.push_back(std::move(st));
    }
    mu_.Unlock();
    const int64_t now = NowMs();
    for (const std::shared_ptr<State>& st : open) Tick(st, now);
    open.clear();
    mu_.Lock();
  }
}

void Watches::Shutdown() {
  std::vector<std::shared_ptr<State>> open;
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
    for (const auto& [id, weak] : open_) {
      if (std::shared_ptr<State> st = weak.lock()) open.push_back(std::move(st));
    }
  }
  for (const std::shared_ptr<State>& st : open) {
    absl::MutexLock l(&st->mu);
    Reactor::EndLocked(*st, grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                         "parityd is shutting down; watch again once it is back"));
  }
}

void Watches::AppendGauges(std::vector<Gauge>* out) const {
  out->push_back({"job_watches", static_cast<uint64_t>(shares_.held()),
                  static_cast<uint64_t>(shares_.high_water()),
                  static_cast<uint64_t>(shares_.limits().total), false, false, "max-watches"});
}

}  // namespace parity
