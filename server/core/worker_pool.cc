#include "server/core/worker_pool.h"

#include <algorithm>

#include "common/base/thread_name.h"

namespace parity {

WorkerPool::WorkerPool(std::string name, int threads, size_t capacity)
    : name_(std::move(name)), capacity_(capacity) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Loop(); });
}

WorkerPool::~WorkerPool() {
  Shutdown();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::Shutdown() {
  absl::MutexLock l(&mu_);
  stopping_ = true;
}

size_t WorkerPool::queued() const {
  absl::MutexLock l(&mu_);
  return queue_.size();
}

size_t WorkerPool::queued_high_water() const {
  absl::MutexLock l(&mu_);
  return queued_high_;
}

void WorkerPool::Submit(std::function<void()> task) {
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(
      +[](WorkerPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
        return p->stopping_ || p->capacity_ == 0 || p->queue_.size() < p->capacity_;
      },
      this));
  if (stopping_) return;
  queue_.push_back(std::move(task));
  queued_high_ = std::max(queued_high_, queue_.size());
}

bool WorkerPool::TrySubmit(std::function<void()> task) {
  absl::MutexLock l(&mu_);
  if (stopping_ || (capacity_ != 0 && queue_.size() >= capacity_)) return false;
  queue_.push_back(std::move(task));
  queued_high_ = std::max(queued_high_, queue_.size());
  return true;
}

void WorkerPool::Loop() {
  NameCurrentThread(name_);
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(
          +[](WorkerPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->stopping_ || !p->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace parity
