// FUSE over io_uring for aquifer-mount: the kernel hands requests to, and takes replies from,
// buffers this process registered through io_uring commands on /dev/fuse, instead of one read(2)
// and one write(2) of /dev/fuse per request.
//
// Protocol: FUSE kernel ABI 7.42 (Linux 6.14), "FUSE-over-io-uring" in the kernel's
// Documentation/filesystems/fuse-io-uring.rst and include/uapi/linux/fuse.h
// (FUSE_OVER_IO_URING, struct fuse_uring_req_header, FUSE_IO_URING_CMD_REGISTER and
// FUSE_IO_URING_CMD_COMMIT_AND_FETCH). The kernel needs CONFIG_FUSE_IO_URING and the module
// parameter fuse.enable_uring=1 (root: `echo 1 > /sys/module/fuse/parameters/enable_uring`, or
// `options fuse enable_uring=1` in /etc/modprobe.d).
//
// How it fits libfuse 3.14 (which does not speak it): the session keeps libfuse's /dev/fuse
// loop, and this class installs libfuse's custom I/O hooks (fuse_session_custom_io) on it.
//   - FUSE_INIT still arrives on /dev/fuse. When the kernel offers FUSE_OVER_IO_URING in it, the
//     writer hook sets that flag (and FUSE_INIT_EXT) in libfuse's reply, then starts the rings.
//   - One queue per possible CPU (the kernel picks the queue of the CPU the calling task runs
//     on, and uses the rings only once every queue has an entry), `threads_per_queue` threads per
//     queue, each with its own io_uring (SQE128) and one registered entry: a 288-byte header
//     buffer and a payload buffer of the connection's largest request.
//   - A fetched request is rebuilt in place into the byte layout a /dev/fuse read would give
//     (fuse_in_header, the per-opcode struct, the payload; the payload is not copied) and handed
//     to fuse_session_process_buf, so every operation runs through the same handlers as on
//     /dev/fuse.
//   - The writer hook sends a reply to a ring request back through its entry's ring: the reply is
//     copied into the entry's buffers and COMMIT_AND_FETCH commits it and waits for the next
//     request in the same submission. A reply made on another thread (a parked blocking lock) is
//     handed to the entry's thread through an eventfd; the entry stays with the kernel until
//     then.
//   - A queue never runs out of free entries while it may grow: the kernel queues a request
//     for the CPU its caller runs on, and with every entry of that queue busy (slow handlers,
//     such as writes waiting for a dead data server, or parked locks) the request waits for one
//     of them, even with the other queues idle. So when a request takes a queue's last free
//     entry, the queue gets one more thread with an entry of its own, up to
//     `max_threads_per_queue` (as libfuse's /dev/fuse loop starts a worker when none is idle).
//     The kernel has no command to give an entry back, so a queue keeps the threads it grew.
//     Every thread holds one entry: an idle entry of a busy thread would hold the request the
//     kernel puts in it until that thread is free. (The one exception: a thread whose request
//     was parked while the queue cannot grow takes a second entry, or every entry could end up
//     parked, waiting for an unlock that cannot reach the mount.)
//   - Replies to /dev/fuse requests and notifications (unique 0) are written to /dev/fuse.
// The INIT reply also gets FUSE_PARALLEL_DIROPS, on either transport: libfuse 3.14 takes
// FUSE_CAP_PARALLEL_DIROPS in `want` but never puts the flag in its reply, so the kernel
// serialised every lookup and readdir of a directory (fuse_lock_inode), and one slow lookup
// held all the others in that directory, and the locks of the changes waiting behind them.
// What stays on /dev/fuse, as the kernel sends it there: FUSE_INIT, FORGET and BATCH_FORGET,
// INTERRUPT, and replies to notifications. Not supported on the rings: splice (the mount turns
// libfuse's splice capabilities off under this transport) and NOTIFY_RETRIEVE replies.
//
// Threading: Install on the main thread after fuse_session_mount and before the session loop;
// the hooks run on libfuse's worker threads and on this class's threads; Stop after the session
// loop ended (and after fuse_session_unmount, which makes the kernel end the rings' commands).
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <cstdint>
#include <memory>
#include <string>

#include "aquifer/status.h"

namespace aquifer::fuse {

// Whether the running kernel's fuse module accepts FUSE over io_uring now: its enable_uring
// parameter exists and reads Y.
bool KernelOffersFuseUring();

class FuseUring {
 public:
  struct Options {
    unsigned threads_per_queue = 4;  // threads (and ring entries) per CPU queue at start, 1..64
    // The most a queue grows to (see above), threads_per_queue..1024. Each thread's entry holds
    // a payload buffer of the connection's largest request (1 MiB by default).
    unsigned max_threads_per_queue = 64;
    // -o transport=uring: when the kernel does not offer the rings at FUSE_INIT, or they cannot
    // be made, the session ends (the mount goes away) instead of going on over /dev/fuse.
    bool required = false;
    // false: never the rings (-o transport=dev, or a kernel that does not offer them); the
    // hooks only complete the INIT reply (below) and pass every other message through.
    bool rings = true;
  };

  // Installs the hooks on `se` (mounted, loop not started); whether the rings are used is
  // decided at FUSE_INIT (transport()). Errors, the session then untouched: kInvalidArgument
  // (threads_per_queue outside 1..64, max_threads_per_queue outside threads_per_queue..1024),
  // kUnavailable (this process cannot make an io_uring with
  // 128-byte SQEs: io_uring disabled by sysctl, an old kernel; or libfuse refused the hooks),
  // kInternal (already installed in this process: one per process).
  static Result<std::unique_ptr<FuseUring>> Install(fuse_session* se, Options options);

  ~FuseUring();  // Stop()
  FuseUring(const FuseUring&) = delete;
  FuseUring& operator=(const FuseUring&) = delete;

  // Ends and joins the ring threads. Idempotent.
  void Stop();

  // "uring" once the rings were registered after FUSE_INIT, "dev" when the kernel did not offer
  // them or their set-up failed (requests then come on /dev/fuse), "" before FUSE_INIT.
  std::string transport() const;
  // Requests answered through the rings so far.
  uint64_t ring_requests() const;
  // Threads per queue now (each queue's starting threads_per_queue plus what it grew), e.g.
  // "16, 21"; "" before the rings started.
  std::string queue_threads() const;

  struct Impl;

 private:
  explicit FuseUring(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace aquifer::fuse
