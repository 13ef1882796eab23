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
#include <condition_variable>
#include <unordered_map>

#include "aquifer/client.h"
#include "client_fuse/inode_table.h"
#include "client_fuse/mount_options.h"

namespace aquifer::fuse {

// One open file of the kernel (fi->fh points to it).
struct FileHandle {
  InodeId inode;
  std::unique_ptr<OpenFile> file;
  // Pins held by a handler that reached this handle through Daemon::open_files rather than the
  // kernel's fi (see FlushOpenFilesOf); RELEASE waits until they are dropped.
  std::mutex pin_mu;  // guards pins
  std::condition_variable pin_cv;
  int pins = 0;
};

// State shared by all handlers of one mount; fuse_req_userdata() points to it.
struct Daemon {
  MountOptions options;
  std::unique_ptr<Client> client;  // set before the session is mounted
  InodeTable inodes;
  fuse_session* session = nullptr;

  // Open files by inode: to flush them before a time change, and to release them all at exit.
  // Lock order: open_mu before FileHandle::pin_mu; neither is held across an RPC.
  std::mutex open_mu;  // guards open_files
  std::unordered_multimap<InodeId, FileHandle*> open_files;
};

// The operation table to pass to fuse_session_new, with a Daemon* as userdata.
const fuse_lowlevel_ops& Operations();

// Flushes and releases every file the kernel left open (called after the session loop ends,
// e.g. on SIGTERM). Returns the number of files whose final flush failed.
int ReleaseAllOpenFiles(Daemon& daemon);

}  // namespace aquifer::fuse
