// The kernel's one retry of an open this mount answered ESTALE, followed per calling thread.
//
// When an open finds its inode unlinked by another host (the name was replaced: write a
// temporary file, rename it over), the mount answers ESTALE and the kernel walks the path again
// with LOOKUP_REVAL, which sends a FUSE_LOOKUP for the name from the same thread, then opens
// what that lookup found, once (fs/namei.c do_filp_open; fs/fuse/dir.c fuse_dentry_revalidate).
// If the name was replaced again between that lookup and the second open, a second ESTALE
// reaches the application, although the name always existed. That second open is concurrent
// with the change that unlinked its inode (the lookup that found the inode ran inside the
// application's open call, after the first ESTALE), so POSIX lets it open the inode the lookup
// found, still alive as an orphan. This class tells OnOpen when it may: the open comes from a
// thread that was answered ESTALE less than `window` ago, and names the inode the lookup of that
// thread answered since, which differs from the one that was stale (a lookup that gave the same
// stale inode again proves nothing fresh). One use per ESTALE.
//
// Thread ids are the kernel's (fuse_req_ctx()->pid is the calling task's id). Threading: every
// method is safe to call concurrently (one mutex, held for a map operation). Memory: at most
// `max_entries` threads are followed; when full, expired entries are dropped, then all.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace aquifer::fuse {

class StaleRetries {
 public:
  using Clock = std::chrono::steady_clock;

  explicit StaleRetries(std::chrono::milliseconds window = std::chrono::milliseconds(1000),
                        size_t max_entries = 4096)
      : window_(window), max_entries_(max_entries) {}

  // The open of inode `stale` by thread `tid` was answered ESTALE at `now`.
  void AnsweredStale(uint32_t tid, uint64_t stale, Clock::time_point now);
  // A lookup by thread `tid` answered inode `ino` (no-op for threads not being followed).
  void LookedUp(uint32_t tid, uint64_t ino);
  // True when thread `tid`'s open of `ino` at `now` is the retry described above: answered
  // ESTALE within the window, and `ino` is what its lookup found since (not the stale inode).
  // Consumes the entry either way.
  bool IsFreshRetry(uint32_t tid, uint64_t ino, Clock::time_point now);

  size_t size() const;

 private:
  struct Entry {
    Clock::time_point at;
    uint64_t stale = 0;
    uint64_t found = 0;  // the last lookup's answer since; 0 = none yet
  };
  const std::chrono::milliseconds window_;
  const size_t max_entries_;
  mutable std::mutex mu_;
  std::unordered_map<uint32_t, Entry> by_tid_;
  // by_tid_.size(), read without mu_: every open and lookup asks, and almost always nobody is
  // followed. A thread's own AnsweredStale happens before its retry's lookup and open (the
  // kernel sends them after the ESTALE reply), so it always sees its entry counted.
  std::atomic<size_t> followed_{0};
};

}  // namespace aquifer::fuse
