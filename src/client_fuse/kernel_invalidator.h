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
#include <set>
#include <string>
#include <thread>
#include <vector>

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
// its directory is held by no change of this mount (`dir_changing`, dir_changes.h): then the
// holder is a lookup, readdir or other reader, which lets go without waiting for another host,
// and an acknowledgement before the kernel dropped the name let the other host's rename return
// while this kernel still opened the old file by it (the 30-minute storm's "read 9,000,000
// bytes, closed 5,000,000" after a rename-over, with lookups of the same directory slow under
// load). It gives up after `name_bound` (a reader stuck on a metadata server that is down).
// What is still queued goes out as soon as the lock is free.
//
// Names go out on `name_threads` threads, one directory per thread at a time (a directory's
// names in the order asked), so a name never waits behind another directory's lock. (One
// thread for all names sent them in order, and a name queued behind a directory held by a
// change of this mount was acknowledged after `bound` unsent, because that change might wait
// for the host that waits for us: with both mounts changing one directory, another host's
// rename-over elsewhere returned while this kernel still opened the old file by its name, the
// 3-minute storm's "read 5,000,000 bytes, closed 9,000,000";
// tests/mount/recall_dir_lock_test.sh's second part.) A name still queued is acknowledged
// unsent after `bound` only while its own directory is held by a change of this mount, or while
// every name thread waits for a directory so held. Attributes have a thread of their own: they
// never wait behind a name that waits for a directory lock. (One thread for both let a recall
// of a file's new size be acknowledged after `bound` with the kernel's old size still cached:
// the writer's close returned, and the other host's stat said 0, 1 in ~400 creates in a
// two-mount create storm.) Attributes are sent in the order asked. -ENOENT (the kernel does not
// know the inode or name) is no error. Thread-safe. Stop() (also the destructor) ends the
// threads, dropping what is queued; it must run before the session is unmounted or destroyed,
// and later calls return at once.
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
  // `name_threads` (at least 1): threads sending name notifications, each for one directory
  // at a time.
  KernelInvalidator(fuse_session* session, std::chrono::milliseconds bound,
                    std::function<bool(uint64_t)> kernel_has = {},
                    std::chrono::milliseconds name_bound = std::chrono::milliseconds(2000),
                    std::function<bool(uint64_t)> dir_changing = {}, size_t name_threads = 8);
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
    uint64_t inode = 0;  // the inode, or for a name its directory
    std::string name;
  };
  struct Kept {
    uint64_t epoch = 0;
    Clock::time_point at;
    Item item;
  };
  struct Job {
    uint64_t id = 0;
    Item item;
  };
  struct Delayed {
    Clock::time_point due;
    Item item;
  };
  // A kind's threads and queues: [0] attributes (one thread), [1] names.
  struct Lane {
    std::condition_variable work_cv;
    std::condition_variable sent_cv;
    std::deque<Job> queue;
    uint64_t next_id = 0;
    std::set<uint64_t> unsent;    // ids queued or being sent
    std::deque<Delayed> delayed;  // resends, in due order
    // Per thread: for names the directory of its kernel call in progress, 0 when idle.
    std::vector<uint64_t> sending;
    std::vector<std::thread> threads;
  };
  Lane& LaneOf(const Item& item) { return lanes_[item.is_name ? 1 : 0]; }
  void Queue(Item item, uint64_t epoch) EXCLUDES(mu_);
  // Adds resends of `item` 5 ms and 50 ms from `now` to its lane. mu_ held.
  void ResendLocked(const Item& item, Clock::time_point now) REQUIRES(mu_);
  // Whether a thread of the lane is sending a name of `item`'s directory. mu_ held.
  static bool DirBusy(const Lane& lane, const Item& item);
  // Whether a name of `dir` queued `id` may be acknowledged unsent: its directory, or the
  // directory of every name thread while all are busy, is held by a change of this mount.
  // mu_ held.
  bool NameMayBeSkipped(const Lane& lane, uint64_t id, uint64_t dir) REQUIRES(mu_);
  int Send(const Item& item);  // the kernel's answer (0, -ENOENT, ...)
  void Loop(Lane& lane, size_t slot) EXCLUDES(mu_);

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
