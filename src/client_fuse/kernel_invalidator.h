// Drops what the kernel caches of names and inodes another host changed, for cache leases
// (docs/design.md "Cache leases"): the client's recall thread asks, one thread of ours talks to
// the kernel.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "aquifer/ids.h"

namespace aquifer::fuse {

// Attrs(inode) calls fuse_lowlevel_notify_inval_inode(inode, -1, 0): the kernel drops the
// inode's cached attributes (and ACLs) and takes no inode or page lock. Name(parent, name) calls
// fuse_lowlevel_notify_inval_entry: the kernel drops the dentry (positive or negative), which
// takes the parent directory's inode lock, so it can wait on a request of this mount that holds
// that lock (a create or rename in the same directory) and is itself waiting for another host.
// So each call queues its notification for this class's thread and waits until it was sent or
// `bound` passed, whichever comes first; what is still queued goes out as soon as the lock is
// free. Notifications are sent in the order asked. -ENOENT (the kernel does not know the inode
// or name) is no error. Thread-safe. Stop() (also the destructor) ends the thread, dropping what
// is queued; it must run before the session is unmounted or destroyed, and later calls return
// at once.
class KernelInvalidator {
 public:
  KernelInvalidator(fuse_session* session, std::chrono::milliseconds bound);
  ~KernelInvalidator();
  KernelInvalidator(const KernelInvalidator&) = delete;
  KernelInvalidator& operator=(const KernelInvalidator&) = delete;

  void Attrs(InodeId inode);
  void Name(InodeId parent, const std::string& name);
  void Stop();

 private:
  struct Item {
    bool is_name = false;
    uint64_t inode = 0;
    std::string name;
  };
  void Queue(Item item);
  void Loop();

  fuse_session* const session_;
  const std::chrono::milliseconds bound_;
  std::mutex mu_;  // guards queue_, queued_, sent_, stop_
  std::condition_variable work_cv_;
  std::condition_variable sent_cv_;
  std::deque<Item> queue_;
  uint64_t queued_ = 0;  // items ever queued
  uint64_t sent_ = 0;    // items sent (or dropped at Stop)
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace aquifer::fuse
