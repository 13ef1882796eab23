// A bounded LRU cache of whole stripes read from the data servers, for read-ahead and small
// reads. Keys carry the chunk version bound the stripe was read with, so a newer data_version
// never hits an older entry. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <list>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "aquifer/ids.h"
#include "client/rpc/data_client.h"

namespace aquifer::client {

// An allocator whose value-construction leaves trivial elements uninitialised, so resize() and
// the size constructor of a ByteVec do not zero-fill (a stripe buffer is about to be overwritten
// anyway; zeroing 4 MiB per stripe was the mount's top CPU cost). Callers zero only the holes.
template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() noexcept = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using ByteVec = std::vector<std::byte, UninitAllocator<std::byte>>;

// A stripe's data bytes as read: usually views of the data servers' replies as they arrived
// (no copy), or a buffer the client filled (decoded reads).
using StripeBytes = std::shared_ptr<const ChunkBytes>;

struct StripeKey {
  InodeId inode;
  uint64_t stripe = 0;
  uint64_t max_version = 0;
  uint64_t stripe_len = 0;  // stored length the stripe was read under
  uint64_t floor = 0;       // the file's truncate floor it was read under (a truncate moves it)
  auto operator<=>(const StripeKey&) const = default;
};

class StripeCache {
 public:
  explicit StripeCache(uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  // The cached stripe, or null.
  StripeBytes Get(const StripeKey& key) {
    std::lock_guard lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return it->second.bytes;
  }

  // Inserts (or replaces) `bytes` under `key`, evicting least recently used stripes.
  void Put(const StripeKey& key, StripeBytes bytes) {
    if (!bytes || bytes->size() > capacity_bytes_) return;
    std::lock_guard lock(mu_);
    EraseLocked(key);
    lru_.push_front(key);
    used_bytes_ += bytes->size();
    entries_[key] = Entry{std::move(bytes), lru_.begin()};
    while (used_bytes_ > capacity_bytes_ && !lru_.empty()) EraseLocked(lru_.back());
  }

  // Drops every cached version of stripe `stripe` of `inode`.
  void Invalidate(InodeId inode, uint64_t stripe) {
    std::lock_guard lock(mu_);
    auto it = entries_.lower_bound(StripeKey{inode, stripe, 0, 0});
    while (it != entries_.end() && it->first.inode == inode && it->first.stripe == stripe) {
      used_bytes_ -= it->second.bytes->size();
      lru_.erase(it->second.lru);
      it = entries_.erase(it);
    }
  }

  // Drops every cached stripe >= from_stripe of `inode`: O(log n + stripes dropped), whatever
  // the range (a truncate from 2^62 bytes costs what is cached, not 2^40 lookups).
  void InvalidateFrom(InodeId inode, uint64_t from_stripe) {
    std::lock_guard lock(mu_);
    auto it = entries_.lower_bound(StripeKey{inode, from_stripe, 0, 0});
    while (it != entries_.end() && it->first.inode == inode) {
      used_bytes_ -= it->second.bytes->size();
      lru_.erase(it->second.lru);
      it = entries_.erase(it);
    }
  }

  // Bytes of the stripes held now.
  uint64_t used_bytes() {
    std::lock_guard lock(mu_);
    return used_bytes_;
  }

  // Marks `key` as being fetched; returns false when a fetch is already in flight.
  bool BeginFetch(const StripeKey& key) {
    std::lock_guard lock(mu_);
    return inflight_.insert(key).second;
  }
  void EndFetch(const StripeKey& key) {
    std::lock_guard lock(mu_);
    inflight_.erase(key);
  }

 private:
  struct Entry {
    StripeBytes bytes;
    std::list<StripeKey>::iterator lru;
  };
  void EraseLocked(const StripeKey& key) {
    auto it = entries_.find(key);
    if (it == entries_.end()) return;
    used_bytes_ -= it->second.bytes->size();
    lru_.erase(it->second.lru);
    entries_.erase(it);
  }

  const uint64_t capacity_bytes_;
  std::mutex mu_;  // guards everything below
  std::map<StripeKey, Entry> entries_;
  std::list<StripeKey> lru_;  // front = most recently used
  std::set<StripeKey> inflight_;
  uint64_t used_bytes_ = 0;
};

}  // namespace aquifer::client
