// Drops what the kernel caches of names and inodes another host changed, for cache leases
// (docs/design.md "Cache leases"): the client's recall thread asks, two threads of ours talk to
// the kernel.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "aquifer/ids.h"
#include "common/thread_annotations.h"

namespace aquifer::fuse {

// Attrs(inode) calls fuse_lowlevel_notify_inval_inode(inode, -1, 0): the kernel drops the
// inode's cached attributes (and ACLs) and takes no inode or page lock. Name(parent, name) calls
// fuse_lowlevel_notify_inval_entry: the kernel drops the dentry (positive or negative), which
// takes the parent directory's inode lock, so it can wait on a request of this mount that holds
// that lock (a create or rename in the same directory) and is itself waiting for another host.
// So each call queues its notification for a thread of this class and waits until it was sent,
// at most `bound` for an attribute notification. A name notification waits past `bound` while
// the directory its lane's kernel call waits for is held by no change of this mount
// (`dir_changing`, dir_changes.h): then the holder is a lookup, readdir or other reader, which
// lets go without waiting for another host, and an acknowledgement before the kernel dropped the
// name let the other host's rename return while this kernel still opened the old file by it (the
// 30-minute storm's "read 9,000,000 bytes, closed 5,000,000" after a rename-over, with lookups
// of the same directory slow under load). It gives up after `name_bound` (a reader stuck on a
// metadata server that is down). What is still queued goes out as soon as the lock is free. Names and attributes have a thread each: attributes never wait behind a name that waits
// for a directory lock. (One thread for both let a recall of a file's new size be acknowledged
// after `bound` with the kernel's old size still cached: the writer's close returned, and the
// other host's stat said 0, 1 in ~400 creates in a two-mount create storm.) Each kind is sent in
// the order asked. -ENOENT (the kernel does not know the inode or name) is no error. Thread-safe.
// Stop() (also the destructor) ends the threads, dropping what is queued; it must run before the
// session is unmounted or destroyed, and later calls return at once.
//
// Replay: a notification about an inode or name the kernel does not know yet does nothing
// (-ENOENT), and a lookup or readdirplus reply that crossed the recall then brings the old state
// in after it: the reply is computed before another host's change, the recall of that change
// arrives on another connection while the reply is on its way, and the kernel makes the inode or
// dentry from the reply only when the waiting process runs again, after our write of the reply
// returned. So each notification is numbered with the mount's recall epoch and kept for 2 s; a
// handler whose reply may have crossed recalls (the epoch moved since its request began) calls
// Replay(its epoch) after replying, and the notifications numbered above it are sent again 5 ms
// and 50 ms later, when the kernel has made what the reply described. A recall that comes after
// the handler replied but before the kernel made the inode or dentry meets -ENOENT: every
// notification the kernel answers -ENOENT is sent again 5 ms and 50 ms later too. Sending one
// twice costs the kernel one more lookup or getattr.
class KernelInvalidator {
 public:
  // `kernel_has(ino)`: whether this mount has handed the kernel an entry of the inode it has not
  // forgotten (InodeTable::LookupCount > 0). An attribute notification the kernel answers
  // -ENOENT for such an inode is sent again every 0.2 ms until it lands or `bound` passed, before
  // it counts as sent: the kernel is making the inode from a reply that crossed the recall, and
  // acknowledging before it landed let the other host's close return while this kernel was about
  // to cache the old size (the storm's "stat says 0 after close on the other mount"). May be
  // empty (no such wait).
  // `dir_changing(dir)`: whether a request of this mount that changes directory `dir` is in
  // flight (DirChanges::Any). Empty: a name notification waits `bound` only, as an attribute one.
  KernelInvalidator(fuse_session* session, std::chrono::milliseconds bound,
                    std::function<bool(uint64_t)> kernel_has = {},
                    std::chrono::milliseconds name_bound = std::chrono::milliseconds(2000),
                    std::function<bool(uint64_t)> dir_changing = {});
  ~KernelInvalidator();
  KernelInvalidator(const KernelInvalidator&) = delete;
  KernelInvalidator& operator=(const KernelInvalidator&) = delete;

  // `epoch`: the recall epoch this notification was given (Daemon::recall_epoch after it was
  // counted); numbers the notification for Replay.
  void Attrs(InodeId inode, uint64_t epoch);
  void Name(InodeId parent, const std::string& name, uint64_t epoch);
  // Sends again, 5 ms and 50 ms from now, every notification of the last 2 s numbered above
  // `after_epoch`. Does not wait.
  void Replay(uint64_t after_epoch);
  void Stop();

 private:
  using Clock = std::chrono::steady_clock;
  struct Item {
    bool is_name = false;
    uint64_t inode = 0;
    std::string name;
  };
  struct Kept {
    uint64_t epoch = 0;
    Clock::time_point at;
    Item item;
  };
  struct Delayed {
    Clock::time_point due;
    Item item;
  };
  // One thread and its queues: [0] attributes, [1] names.
  struct Lane {
    std::condition_variable work_cv;
    std::condition_variable sent_cv;
    std::deque<Item> queue;
    uint64_t queued = 0;  // items ever queued
    uint64_t sent = 0;    // items sent (or dropped at Stop)
    std::deque<Delayed> delayed;  // resends, in due order
    uint64_t sending_dir = 0;     // names: the directory of the kernel call in progress, or 0
    std::thread thread;
  };
  Lane& LaneOf(const Item& item) { return lanes_[item.is_name ? 1 : 0]; }
  void Queue(Item item, uint64_t epoch) EXCLUDES(mu_);
  // Adds resends of `item` 5 ms and 50 ms from `now` to its lane. mu_ held.
  void ResendLocked(const Item& item, Clock::time_point now) REQUIRES(mu_);
  int Send(const Item& item);  // the kernel's answer (0, -ENOENT, ...)
  void Loop(Lane& lane) EXCLUDES(mu_);

  fuse_session* const session_;
  const std::chrono::milliseconds bound_;
  const std::function<bool(uint64_t)> kernel_has_;
  const std::chrono::milliseconds name_bound_;
  const std::function<bool(uint64_t)> dir_changing_;
  // Guards stop_, kept_ and both lanes' queues and counters (Lane's fields are not annotated:
  // a nested struct cannot name this member).
  Mutex mu_;
  bool stop_ GUARDED_BY(mu_) = false;
  // The last 2 s of notifications (at most 4,096), oldest first.
  std::deque<Kept> kept_ GUARDED_BY(mu_);
  Lane lanes_[2];
};

}  // namespace aquifer::fuse
