// The FUSE low-level operations of aquifer-mount: one small handler per op, each a thin adapter
// over aquifer::Client (include/aquifer/client.h) that replies to its request exactly once.
//
// Kernel-side setup (see Init in fuse_ops.cc): 1 MiB max_write/max_read (max_pages follows
// max_write), readdirplus, POSIX and flock locks, atomic O_TRUNC, DONT_MASK (umask applied here
// from fuse_req_ctx), no writeback cache and no direct_io, so the page cache and shared writable
// mmap work with write-through semantics. The mount runs with default_permissions: the kernel
// checks modes; the caller (uid, gid, groups, pid) is still passed to the library.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <memory>
#include <mutex>
#include <atomic>
#include <chrono>
#include <vector>
#include <unordered_map>

#include "aquifer/client.h"
#include "client_fuse/dir_changes.h"
#include "client_fuse/group_cache.h"
#include "client_fuse/inode_table.h"
#include "client_fuse/kernel_invalidator.h"
#include "client_fuse/lock_waiters.h"
#include "client_fuse/mount_options.h"
#include "client_fuse/stale_retries.h"

namespace aquifer::fuse {

// Every kernel open of one inode on this mount shares one SharedFile, so that all descriptors of
// a file see one write buffer and one size (two descriptors with O_APPEND, two processes writing
// one SQLite database, mmap write-back through any descriptor). The library handle in use is the
// writable one once any descriptor opened for write; earlier read-only handles stay alive until
// the last close. Each kernel open's OpenDescription (fi->fh) points to it.
struct SharedFile {
  InodeId inode;
  std::atomic<OpenFile*> current{nullptr};  // reads and writes go here
  bool writable = false;                    // current is open for write; guarded by open_mu
  int refs = 0;                             // kernel opens + handler pins; guarded by open_mu
  std::vector<std::unique_ptr<OpenFile>> files;  // owned library handles; guarded by open_mu
};

// One kernel open of a file: an open file description, which dup(2) and fork(2) share, and
// whose last close is the kernel's RELEASE. fi->fh points to it; RELEASE deletes it.
// An OFD lock's owner is its open file description, and the kernel, which leaves locks to the
// file system, never unlocks one: neither FLUSH nor RELEASE names it. So every owner that sets
// an fcntl lock through this description is recorded here, FLUSH drops the owner it names (a
// POSIX owner, whose locks that close frees), and RELEASE frees the locks of the owners left.
struct OpenDescription {
  explicit OpenDescription(SharedFile* s) : shared(s) {}
  SharedFile* const shared;
  std::mutex mu;                      // guards lock_owners
  std::vector<uint64_t> lock_owners;  // distinct fcntl lock owners not flushed since
};

// State shared by all handlers of one mount; fuse_req_userdata() points to it.
struct Daemon {
  MountOptions options;
  std::unique_ptr<Client> client;  // set before the session is mounted
  // Blocking lock requests waiting for a conflicting lock to go; set with `client`, reset (which
  // answers what is still parked) once the session loop ended.
  std::unique_ptr<LockWaiters> lock_waiters;
  InodeTable inodes;
  fuse_session* session = nullptr;
  // Cache leases: counts the recalls this mount was sent (main.cc's callbacks add one before
  // they drop the kernel's copy). A lookup, getattr or readdirplus page during which it moved
  // may carry what a recall already dropped (the reply was computed before the change; the
  // recall came first on another connection): the kernel gets it with timeouts 0.
  std::atomic<uint64_t> recall_epoch{0};
  // Sends the recalls' notifications to the kernel (cache leases only; else nullptr). A lookup
  // or readdirplus during which recall_epoch moved calls Replay after its reply (see
  // kernel_invalidator.h: the kernel makes the reply's inodes and dentries after the recall).
  KernelInvalidator* invalidator = nullptr;
  // The client caches under cache leases and recalls reach the kernel (main.cc); set before the
  // session is mounted. Then lookups that find nothing get negative entries (the kernel caches
  // "absent" for entry_timeout), and no kernel timeout outlasts the client's trust in its
  // leases (Client::CacheTrustLeft).
  bool cache_leases = false;
  // Changes of directories in flight (dir_changes.h), for the kernel invalidator.
  DirChanges dir_changes;

  // Open files by inode. Never held across an RPC.
  std::mutex open_mu;  // guards open_files and the SharedFile fields it says
  std::unordered_map<InodeId, SharedFile*> open_files;

  // Callers' supplementary groups, reused per thread for a second (see group_cache.h).
  GroupCache groups{std::chrono::seconds(1)};
  // Threads this mount answered ESTALE at open, followed through the kernel's one retry
  // (stale_retries.h).
  StaleRetries stale_retries;
  // Opens of unlinked inodes served as concurrent with their unlink (OnOpen), and answered
  // ESTALE: logged at unmount.
  std::atomic<uint64_t> orphan_opens_pending{0};
  std::atomic<uint64_t> orphan_opens_retry{0};
  std::atomic<uint64_t> stale_opens{0};
};

// The operation table to pass to fuse_session_new, with a Daemon* as userdata.
const fuse_lowlevel_ops& Operations();

// Flushes and releases every file the kernel left open (called after the session loop ends,
// e.g. on SIGTERM). Returns the number of files whose final flush failed.
int ReleaseAllOpenFiles(Daemon& daemon);

}  // namespace aquifer::fuse
