#include "client_fuse/lock_waiters.h"

#include <cerrno>

#include <algorithm>
#include <utility>

#include "common/logging.h"

namespace aquifer::fuse {
namespace {

constexpr std::chrono::milliseconds kFirstRetry(1);
constexpr std::chrono::milliseconds kMaxRetry(50);

spdlog::logger& Log() {
  static std::shared_ptr<spdlog::logger> logger = Logger("fuse");
  return *logger;
}

}  // namespace

LockWaiters::LockWaiters(Client& client) : client_(client), thread_([this] { Run(); }) {}

LockWaiters::~LockWaiters() { Stop(); }

void LockWaiters::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void LockWaiters::OnInterrupt(fuse_req_t, void* self) {
  auto* w = static_cast<LockWaiters*>(self);
  {
    std::lock_guard lock(w->mu_);
    w->wake_ = true;
  }
  w->cv_.notify_one();
}

void LockWaiters::Park(fuse_req_t req, InodeId inode, uint64_t owner, const LockRange& range,
                       bool flock) {
  // Registered before the thread can see (and reply to, and so free) the request. If the
  // request was interrupted already, libfuse calls OnInterrupt right here.
  fuse_req_interrupt_func(req, &LockWaiters::OnInterrupt, this);
  SPDLOG_LOGGER_DEBUG(&Log(), "park lock wait inode={} owner={:x} flock={}", inode.value(), owner,
                      flock);
  {
    std::lock_guard lock(mu_);
    incoming_.push_back(Waiter{req, inode, owner, range, flock, kFirstRetry, Clock::now()});
  }
  cv_.notify_one();
}

void LockWaiters::Run() {
  std::vector<Waiter> parked;
  for (;;) {
    bool stopping;
    {
      std::unique_lock lock(mu_);
      auto ready = [&] { return stop_ || wake_ || !incoming_.empty(); };
      if (parked.empty()) {
        cv_.wait(lock, ready);
      } else {
        auto next = std::min_element(parked.begin(), parked.end(), [](const Waiter& a,
                                                                      const Waiter& b) {
                      return a.next_try < b.next_try;
                    })->next_try;
        cv_.wait_until(lock, next, ready);
      }
      for (Waiter& w : incoming_) parked.push_back(std::move(w));
      incoming_.clear();
      wake_ = false;
      stopping = stop_;
    }
    // Interrupts first, for every parked request, so none is tried once it was withdrawn.
    std::erase_if(parked, [&](const Waiter& w) {
      if (!stopping && !fuse_req_interrupted(w.req)) return false;
      Log().info("withdraw lock wait inode={} owner={:x} flock={} reason={}", w.inode.value(),
                 w.owner, w.flock, stopping ? "unmount" : "interrupted");
      fuse_reply_err(w.req, EINTR);
      return true;
    });
    if (stopping) return;
    const Clock::time_point now = Clock::now();
    std::erase_if(parked, [&](Waiter& w) {
      // An interrupt that came during an earlier RPC of this round: withdrawn next round.
      if (w.next_try > now || fuse_req_interrupted(w.req)) return false;
      Status s = client_.SetLock(w.inode, w.owner, w.range, w.flock, /*wait=*/false);
      if (s.code() == Code::kWouldBlock) {
        w.backoff = std::min(w.backoff * 2, kMaxRetry);
        w.next_try = Clock::now() + w.backoff;
        return false;
      }
      int err = 0;
      if (!s.ok()) {
        err = ToErrno(s) != 0 ? ToErrno(s) : EIO;
        Log().warn("lock wait failed inode={} owner={:x} errno={} status={}", w.inode.value(),
                   w.owner, err, s.ToString());
      }
      fuse_reply_err(w.req, err);
      return true;
    });
  }
}

}  // namespace aquifer::fuse
