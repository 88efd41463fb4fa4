#include "server/storage/held_blobs.h"

#include <algorithm>
#include <utility>

namespace parity {

HeldBlobs::Filling::~Filling() {
  if (owner_ != nullptr) owner_->Unreserve(charge_);
}

std::unique_ptr<HeldBlobs::Filling> HeldBlobs::Reserve(uint64_t size) {
  if (size == 0) return nullptr;
  const uint64_t charge = PooledBufferCapacity(size);
  if (charge > capacity_ / 2) return nullptr;
  std::list<Entry> evicted;  // freed after the lock is released
  {
    absl::MutexLock l(&mu_);
    while (held_bytes_ + reserved_bytes_ + charge > capacity_ && !order_.empty()) {
      by_key_.erase(order_.front().key);
      held_bytes_ -= order_.front().charge;
      ++counters_.evicted;
      evicted.splice(evicted.end(), order_, order_.begin());
    }
    if (held_bytes_ + reserved_bytes_ + charge > capacity_) {
      ++counters_.refused;
      return nullptr;
    }
    reserved_bytes_ += charge;
    counters_.peak_bytes = std::max(counters_.peak_bytes, held_bytes_ + reserved_bytes_);
  }
  std::shared_ptr<char> buffer = TakePooledBuffer(size);
  if (buffer == nullptr) {
    Unreserve(charge);
    return nullptr;
  }
  return std::unique_ptr<Filling>(new Filling(this, std::move(buffer), size, charge));
}

void HeldBlobs::Hold(const std::string& key, std::unique_ptr<Filling> filled) {
  SharedBytes bytes;
  bytes.bytes = absl::string_view(filled->buffer_.get(), filled->size_);
  bytes.owner = std::move(filled->buffer_);
  filled->owner_ = nullptr;  // the reservation becomes the held blob below
  absl::MutexLock l(&mu_);
  reserved_bytes_ -= filled->charge_;
  if (by_key_.contains(key)) return;  // the same content twice: the first copy serves both
  held_bytes_ += filled->charge_;
  ++counters_.held;
  order_.push_back(Entry{key, std::move(bytes), filled->charge_});
  by_key_.emplace(key, std::prev(order_.end()));
}

SharedBytes HeldBlobs::Take(const std::string& key) {
  absl::MutexLock l(&mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return SharedBytes();
  SharedBytes out = std::move(it->second->bytes);
  held_bytes_ -= it->second->charge;
  order_.erase(it->second);
  by_key_.erase(it);
  ++counters_.taken;
  return out;
}

HeldBlobs::Counters HeldBlobs::counters() const {
  absl::MutexLock l(&mu_);
  Counters c = counters_;
  c.held_bytes = held_bytes_;
  c.reserved_bytes = reserved_bytes_;
  return c;
}

void HeldBlobs::Unreserve(uint64_t charge) {
  absl::MutexLock l(&mu_);
  reserved_bytes_ -= charge;
}

}  // namespace parity
