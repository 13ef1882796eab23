// Requests of this mount in flight that change a directory (create, mknod, mkdir, symlink,
// link, unlink, rmdir, rename, and setattr or xattr changes of the directory itself), counted
// by the directory's inode. The kernel holds that directory's inode lock for each of them while
// it waits for our reply, and with cache leases our reply may wait for another host's
// acknowledgement. The kernel invalidator (kernel_invalidator.h) uses this to tell the one case
// in which a name notification must not hold up an acknowledgement (the directory's lock is
// held by such a change, which may be waiting for the host that waits for us) from a lock held
// by a lookup, readdir or other reader, which lets go without waiting for anyone. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace aquifer::fuse {

class DirChanges {
 public:
  // Counts a change of `dir` (and of `other_dir`, if not 0: a rename's second directory) for
  // its lifetime. Declare it before the handler's reply so that it ends after it.
  class Scope {
   public:
    Scope(DirChanges& changes, uint64_t dir, uint64_t other_dir = 0)
        : changes_(changes), dir_(dir), other_(other_dir == dir ? 0 : other_dir) {
      changes_.Add(dir_, 1);
      if (other_ != 0) changes_.Add(other_, 1);
    }
    ~Scope() {
      changes_.Add(dir_, -1);
      if (other_ != 0) changes_.Add(other_, -1);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    DirChanges& changes_;
    const uint64_t dir_;
    const uint64_t other_;
  };

  // Whether a change of directory `dir` is in flight.
  bool Any(uint64_t dir) const {
    std::lock_guard lock(mu_);
    return in_flight_.count(dir) != 0;
  }

 private:
  void Add(uint64_t dir, int delta) {
    std::lock_guard lock(mu_);
    uint32_t& n = in_flight_[dir];
    n += delta;
    if (n == 0) in_flight_.erase(dir);
  }

  mutable std::mutex mu_;  // guards in_flight_
  std::unordered_map<uint64_t, uint32_t> in_flight_;  // directory inode -> changes in flight
};

}  // namespace aquifer::fuse
