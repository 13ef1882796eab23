// Blocking lock requests (F_SETLKW, F_OFD_SETLKW, flock without LOCK_NB) that met a conflicting
// lock, parked off the FUSE worker threads until they are granted, fail, or are interrupted.
//
// A handler that got kWouldBlock for a blocking request hands the request to Park() and returns
// without replying; from then on this class replies to it, exactly once. One thread retries every
// parked request (a non-blocking SetLock; per request every 1 ms at first, doubling to 50 ms) and
// replies 0 (granted) or the error. A signal to the waiting process makes the kernel send
// FUSE_INTERRUPT: the callback registered with fuse_req_interrupt_func wakes the thread, which
// replies EINTR to every interrupted request before it tries any of them again, so a withdrawn
// waiter has no SetLock in flight and is never granted afterwards. A waiter killed -9 is
// interrupted the same way (the kernel sends FUSE_INTERRUPT for any signal), and its process can
// then exit. A request granted in the same moment it is interrupted is answered with the grant
// (the kernel hands the process the lock, as a local lock granted just before the signal); its
// locks go at the process's close or exit like any other.
//
// Parked requests hold no FUSE worker thread, so any number of waiters leave the mount answering
// (and able to read the INTERRUPTs that end them). The metadata server keeps no queue of waiters:
// a withdrawn request leaves nothing behind there.
//
// Threading: Park() may be called from any handler thread. The interrupt callback only takes
// this class's mutex (libfuse calls it holding the request's own lock); no libfuse call and no
// RPC is made with that mutex held. Destroy (or Stop) after the session loop ended and before
// fuse_session_destroy: it replies EINTR to whatever is still parked.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "aquifer/client.h"

namespace aquifer::fuse {

class LockWaiters {
 public:
  explicit LockWaiters(Client& client);
  ~LockWaiters();  // Stop()
  LockWaiters(const LockWaiters&) = delete;
  LockWaiters& operator=(const LockWaiters&) = delete;

  // Takes over the reply to `req`, a blocking lock request of `owner` on `inode` (`flock` for
  // flock(2), else an fcntl lock of `range`). Returns at once.
  void Park(fuse_req_t req, InodeId inode, uint64_t owner, const LockRange& range, bool flock);

  // Replies EINTR to every parked request and joins the thread. Idempotent.
  void Stop();

 private:
  using Clock = std::chrono::steady_clock;
  struct Waiter {
    fuse_req_t req;
    InodeId inode;
    uint64_t owner;
    LockRange range;
    bool flock;
    std::chrono::milliseconds backoff;
    Clock::time_point next_try;
  };

  static void OnInterrupt(fuse_req_t req, void* self);
  void Run();

  Client& client_;
  std::mutex mu_;  // guards incoming_, wake_, stop_
  std::condition_variable cv_;
  std::vector<Waiter> incoming_;  // parked, not yet taken by the thread
  bool wake_ = false;             // an interrupt arrived
  bool stop_ = false;
  std::thread thread_;  // owns the parked requests it took from incoming_
};

}  // namespace aquifer::fuse
