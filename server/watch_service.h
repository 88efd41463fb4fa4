// Jobs.Watch on the gRPC callback API: no thread waits for a job's progress. One ticker thread,
// shared by every watch, writes a job's state when it changed (bursts coalesced over a tick) and
// at least every kRefresh (never relying on a notification alone); each stream has at most one
// write in flight, so a client that stops reading holds one message, not a queue. Concurrent
// watches are bounded over all projects and per project (RESOURCE_EXHAUSTED naming the flag).
#ifndef PARITY_SERVER_WATCH_SERVICE_H_
#define PARITY_SERVER_WATCH_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "parity/v1/parity.grpc.pb.h"
#include "server/core/auth.h"
#include "server/core/core.h"
#include "server/core/shares.h"

namespace parity {

struct WatchOptions {
  int max_watches = 256;             // open Jobs.Watch streams
  int max_watches_per_project = 64;  // of them on one project's jobs (0: no share)
};

class Watches {
 public:
  // `auth` null: authentication off.
  Watches(Core* core, const TokenAuth* auth, WatchOptions options);
  // Joins the ticker; every watch must have ended (after Shutdown and gRPC's own shutdown).
  ~Watches();

  // The reactor for one Jobs.Watch call.
  grpc::ServerWriteReactor<v1::JobProgress>* Start(grpc::CallbackServerContext* context,
                                                   const v1::WatchJobRequest* request);
  // Ends every open watch with UNAVAILABLE (the client may watch again after a restart) and
  // refuses new ones. Idempotent.
  void Shutdown();
  // Appends job_watches (open watches, against max-watches).
  void AppendGauges(std::vector<Gauge>* out) const;

  struct State;  // one watch's, shared with the ticker and the core's listeners

 private:
  class Reactor;
  void Add(int64_t id, std::weak_ptr<State> st);
  void Remove(int64_t id);
  void TickLoop();
  // Writes `st`'s job when it is due (changed, or kRefresh since the last write).
  void Tick(const std::shared_ptr<State>& st, int64_t now_ms);

  Core* const core_;
  const TokenAuth* const auth_;
  Shares shares_;

  mutable absl::Mutex mu_;
  std::map<int64_t, std::weak_ptr<State>> open_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread ticker_;
};

}  // namespace parity

#endif  // PARITY_SERVER_WATCH_SERVICE_H_
