// Supplementary groups of the processes calling into the mount, remembered for a short time.
//
// libfuse's fuse_req_getgroups reads /proc/TID/task/TID/status: a path walk, an open, a formatted
// read and a close per request, which the profile of a create loop showed as ~5% of the mount's
// CPU. Requests from one thread come in bursts (an open, a create, a setattr per file), so the
// mount asks /proc once per thread and reuses the answer for `ttl`.
//
// Why a stale answer is safe: the mount runs with default_permissions, so the kernel itself
// checks every access, chown/chgrp and set-id clearing against the caller's current credentials
// before the request reaches us. The groups only feed the metadata server's second check, so a
// list up to `ttl` old can at worst refuse (EACCES) what the kernel allowed, never allow more.
// An entry matches only the same thread id *and* the same uid and gid, so a reused thread id of
// another user never sees it.
//
// Threading: all methods are safe to call concurrently (one mutex, held for a map operation).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace aquifer::fuse {

class GroupCache {
 public:
  using Clock = std::chrono::steady_clock;

  // ttl: how long an answer is reused (0 disables the cache: Find never hits).
  // max_entries: entries kept at most; when full, the whole map is dropped (callers refill it
  // in one request each), so memory stays bounded by max_entries * (groups per caller).
  explicit GroupCache(std::chrono::milliseconds ttl, size_t max_entries = 4096)
      : ttl_(ttl), max_entries_(max_entries) {}

  // The groups stored for thread `tid` with this uid and gid, if stored less than ttl before
  // `now`; std::nullopt otherwise (also when the uid or gid differ).
  std::optional<std::vector<uint32_t>> Find(uint32_t tid, uint32_t uid, uint32_t gid,
                                            Clock::time_point now) const;

  // Stores `groups` (a caller's supplementary group ids, any count) for (tid, uid, gid) as of
  // `now`, replacing an older entry of that tid.
  void Put(uint32_t tid, uint32_t uid, uint32_t gid, std::vector<uint32_t> groups,
           Clock::time_point now);

  // Entries currently stored (expired ones included until replaced or dropped).
  size_t size() const;

 private:
  struct Entry {
    uint32_t uid = 0;
    uint32_t gid = 0;
    Clock::time_point stored;
    std::vector<uint32_t> groups;
  };
  const std::chrono::milliseconds ttl_;
  const size_t max_entries_;
  mutable std::mutex mu_;
  std::unordered_map<uint32_t, Entry> entries_;  // by thread id
};

}  // namespace aquifer::fuse
