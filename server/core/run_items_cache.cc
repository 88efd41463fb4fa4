#include "server/core/run_items_cache.h"

#include <iterator>
#include <utility>

namespace parity {

std::shared_ptr<const RunItemsCache::Items> RunItemsCache::Get(const std::string& run_id) {
  absl::MutexLock l(&mu_);
  auto it = by_run_.find(run_id);
  if (it == by_run_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->items;
}

uint64_t RunItemsCache::epoch() const {
  absl::MutexLock l(&mu_);
  return epoch_;
}

void RunItemsCache::Put(const std::string& run_id, std::shared_ptr<const Items> items, uint64_t epoch) {
  if (items == nullptr || items->size() > max_items_) return;
  uint64_t data = 0;
  for (const std::shared_ptr<const ItemRecord>& it : *items) {
    if (it->inline_data) data += it->inline_data->size();
  }
  if (data > max_data_bytes_) return;
  std::list<Entry> dropped;  // freed after the lock is released
  absl::MutexLock l(&mu_);
  if (epoch != epoch_ || by_run_.contains(run_id)) return;
  held_ += items->size();
  held_data_ += data;
  lru_.push_front(Entry{run_id, std::move(items), data});
  by_run_.emplace(run_id, lru_.begin());
  while (held_ > max_items_ || held_data_ > max_data_bytes_) DropLocked(std::prev(lru_.end()), &dropped);
}

void RunItemsCache::DropLocked(std::list<Entry>::iterator it, std::list<Entry>* dropped) {
  held_ -= it->items->size();
  held_data_ -= it->data_bytes;
  by_run_.erase(it->run_id);
  dropped->splice(dropped->end(), lru_, it);
}

void RunItemsCache::Erase(const std::string& run_id) {
  std::list<Entry> dropped;
  absl::MutexLock l(&mu_);
  ++epoch_;
  auto it = by_run_.find(run_id);
  if (it == by_run_.end()) return;
  DropLocked(it->second, &dropped);
}

size_t RunItemsCache::items() const {
  absl::MutexLock l(&mu_);
  return held_;
}

uint64_t RunItemsCache::data_bytes() const {
  absl::MutexLock l(&mu_);
  return held_data_;
}

}  // namespace parity
