// A fixed pool of threads with a bounded task queue.
//
// Submit() blocks while the queue is full (use it from worker threads to apply back-pressure);
// TrySubmit() never blocks and returns false when full (use it from reactions and callbacks).
// Thread-safe.
#ifndef PARITY_SERVER_CORE_WORKER_POOL_H_
#define PARITY_SERVER_CORE_WORKER_POOL_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace parity {

class WorkerPool {
 public:
  // capacity = 0: unbounded (only for control tasks whose number is bounded elsewhere).
  WorkerPool(std::string name, int threads, size_t capacity);
  ~WorkerPool();  // runs the queued tasks, then joins

  void Submit(std::function<void()> task);
  bool TrySubmit(std::function<void()> task);
  // Stops accepting tasks; queued tasks still run. Idempotent.
  void Shutdown();
  size_t queued() const;
  size_t queued_high_water() const;  // the most tasks queued at once so far

 private:
  void Loop();

  const std::string name_;
  const size_t capacity_;
  std::vector<std::thread> threads_;

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  size_t queued_high_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace parity

#endif  // PARITY_SERVER_CORE_WORKER_POOL_H_
