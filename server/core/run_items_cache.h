// The item lists of complete runs, kept for the next job that compares them: a golden run is
// typically compared with many target runs, and reading a large run's items back from SQLite
// costs about as much as pairing and comparing them (statistics mode).
//
// A complete run's items do not change until its data is released (retention), which must
// Erase it here. Bounded by the total number of items held and by the total bytes of their
// inline data (ItemRecord::inline_data); the least recently used run goes first; a run larger
// than either bound is not kept. Items are shared with the jobs using them.
//
// Thread-safe.
#ifndef PARITY_SERVER_CORE_RUN_ITEMS_CACHE_H_
#define PARITY_SERVER_CORE_RUN_ITEMS_CACHE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "server/storage/records.h"

namespace parity {

class RunItemsCache {
 public:
  using Items = std::vector<std::shared_ptr<const ItemRecord>>;  // dump order

  // 0 items: keeps nothing.
  explicit RunItemsCache(size_t max_items, uint64_t max_data_bytes = 64ull << 20)
      : max_items_(max_items), max_data_bytes_(max_data_bytes) {}
  RunItemsCache(const RunItemsCache&) = delete;
  RunItemsCache& operator=(const RunItemsCache&) = delete;

  // The run's items, or null.
  std::shared_ptr<const Items> Get(const std::string& run_id);
  // Call before reading a run's items from the store, and pass the value to Put: items read
  // while an Erase ran are not kept.
  uint64_t epoch() const;
  void Put(const std::string& run_id, std::shared_ptr<const Items> items, uint64_t epoch);
  void Erase(const std::string& run_id);
  size_t items() const;  // held now
  uint64_t data_bytes() const;  // inline data held now

 private:
  // Constant after construction.
  const size_t max_items_;
  const uint64_t max_data_bytes_;

  mutable absl::Mutex mu_;
  struct Entry {
    std::string run_id;
    std::shared_ptr<const Items> items;
    uint64_t data_bytes = 0;
  };
  void DropLocked(std::list<Entry>::iterator it, std::list<Entry>* dropped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // most recently used first
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> by_run_ ABSL_GUARDED_BY(mu_);
  size_t held_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t held_data_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;  // Erase calls so far
};

}  // namespace parity

#endif  // PARITY_SERVER_CORE_RUN_ITEMS_CACHE_H_
