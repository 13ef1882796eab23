#include "client_fuse/stale_retries.h"

namespace aquifer::fuse {

void StaleRetries::AnsweredStale(uint32_t tid, uint64_t stale, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (by_tid_.size() >= max_entries_ && !by_tid_.count(tid)) {
    std::erase_if(by_tid_, [&](const auto& kv) { return now - kv.second.at >= window_; });
    if (by_tid_.size() >= max_entries_) by_tid_.clear();
  }
  by_tid_[tid] = Entry{now, stale, 0};
  followed_.store(by_tid_.size());
}

void StaleRetries::LookedUp(uint32_t tid, uint64_t ino) {
  if (followed_.load() == 0) return;  // the usual case: no mutex
  std::lock_guard lock(mu_);
  auto it = by_tid_.find(tid);
  if (it != by_tid_.end()) it->second.found = ino;
}

bool StaleRetries::IsFreshRetry(uint32_t tid, uint64_t ino, Clock::time_point now) {
  if (followed_.load() == 0) return false;  // no mutex per open
  std::lock_guard lock(mu_);
  auto it = by_tid_.find(tid);
  if (it == by_tid_.end()) return false;
  const Entry e = it->second;
  by_tid_.erase(it);
  followed_.store(by_tid_.size());
  return now >= e.at && now - e.at < window_ && ino != 0 && e.found == ino && ino != e.stale;
}

size_t StaleRetries::size() const {
  std::lock_guard lock(mu_);
  return by_tid_.size();
}

}  // namespace aquifer::fuse
