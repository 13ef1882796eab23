#include "client_fuse/group_cache.h"

namespace aquifer::fuse {

std::optional<std::vector<uint32_t>> GroupCache::Find(uint32_t tid, uint32_t uid, uint32_t gid,
                                                      Clock::time_point now) const {
  if (ttl_.count() <= 0) return std::nullopt;
  std::lock_guard lock(mu_);
  auto it = entries_.find(tid);
  if (it == entries_.end() || it->second.uid != uid || it->second.gid != gid) return std::nullopt;
  if (now - it->second.stored >= ttl_ || now < it->second.stored) return std::nullopt;
  return it->second.groups;
}

void GroupCache::Put(uint32_t tid, uint32_t uid, uint32_t gid, std::vector<uint32_t> groups,
                     Clock::time_point now) {
  if (ttl_.count() <= 0) return;
  std::lock_guard lock(mu_);
  if (entries_.size() >= max_entries_ && !entries_.contains(tid)) entries_.clear();
  entries_[tid] = Entry{uid, gid, now, std::move(groups)};
}

size_t GroupCache::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace aquifer::fuse
