#include "client_fuse/kernel_invalidator.h"

#include <algorithm>
#include <cerrno>
#include <iterator>

#include "common/logging.h"

namespace aquifer::fuse {

namespace {
constexpr std::chrono::seconds kKeepFor(2);
constexpr size_t kKeepAtMost = 4096;
}  // namespace

KernelInvalidator::KernelInvalidator(fuse_session* session, std::chrono::milliseconds bound,
                                     std::function<bool(uint64_t)> kernel_has,
                                     std::chrono::milliseconds name_bound,
                                     std::function<bool(uint64_t)> dir_changing)
    : session_(session),
      bound_(bound),
      kernel_has_(std::move(kernel_has)),
      name_bound_(std::max(name_bound, bound)),
      dir_changing_(std::move(dir_changing)) {
  for (Lane& lane : lanes_) lane.thread = std::thread([this, &lane] { Loop(lane); });
}

KernelInvalidator::~KernelInvalidator() { Stop(); }

void KernelInvalidator::Stop() {
  {
    MutexLock lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  for (Lane& lane : lanes_) {
    lane.work_cv.notify_all();
    lane.sent_cv.notify_all();
  }
  for (Lane& lane : lanes_) {
    if (lane.thread.joinable()) lane.thread.join();
  }
}

void KernelInvalidator::Attrs(InodeId inode, uint64_t epoch) {
  Queue(Item{false, inode.value(), {}}, epoch);
}

void KernelInvalidator::Name(InodeId parent, const std::string& name, uint64_t epoch) {
  Queue(Item{true, parent.value(), name}, epoch);
}

void KernelInvalidator::ResendLocked(const Item& item, Clock::time_point now) {
  Lane& lane = LaneOf(item);
  for (const auto delay : {std::chrono::milliseconds(5), std::chrono::milliseconds(50)}) {
    Delayed d{now + delay, item};
    auto at = lane.delayed.end();
    while (at != lane.delayed.begin() && std::prev(at)->due > d.due) --at;
    lane.delayed.insert(at, std::move(d));
  }
  lane.work_cv.notify_one();
}

void KernelInvalidator::Replay(uint64_t after_epoch) {
  MutexLock lock(mu_);
  if (stop_) return;
  const Clock::time_point now = Clock::now();
  for (const Kept& k : kept_) {
    if (k.epoch > after_epoch) ResendLocked(k.item, now);
  }
}

void KernelInvalidator::Queue(Item item, uint64_t epoch) {
  MutexLock lock(mu_);
  if (stop_) return;
  const Clock::time_point now = Clock::now();
  while (!kept_.empty() && (kept_.size() >= kKeepAtMost || now - kept_.front().at > kKeepFor)) {
    kept_.pop_front();
  }
  kept_.push_back(Kept{epoch, now, item});
  Lane& lane = LaneOf(item);
  const bool is_name = item.is_name;
  const uint64_t dir = item.inode;
  lane.queue.push_back(std::move(item));
  const uint64_t ticket = ++lane.queued;
  lane.work_cv.notify_one();
  auto sent = [&]() REQUIRES(mu_) { return stop_ || lane.sent >= ticket; };
  if (lane.sent_cv.wait_for(lock.native(), bound_, sent)) return;
  if (!is_name || !dir_changing_) {
    Logger("fuse")->debug("kernel invalidation still queued after {} ms; acknowledged anyway",
                          bound_.count());
    return;
  }
  // A name: wait on unless a change of this mount holds the directory the lane waits for (its
  // own, or one ahead of it in the lane), which may wait for the host that waits for us.
  for (;;) {
    const uint64_t blocking = lane.sending_dir;
    if (dir_changing_(dir) || (blocking != 0 && dir_changing_(blocking))) {
      Logger("fuse")->debug("kernel invalidation of a name still queued after {} ms (a change "
                            "of this mount holds the directory); acknowledged anyway",
                            std::chrono::duration_cast<std::chrono::milliseconds>(
                                Clock::now() - now).count());
      return;
    }
    if (Clock::now() - now >= name_bound_) {
      Logger("fuse")->info("kernel invalidation of a name still queued after {} ms (a request "
                           "holds the directory); acknowledged anyway", name_bound_.count());
      return;
    }
    if (lane.sent_cv.wait_for(lock.native(), std::chrono::milliseconds(2), sent)) return;
  }
}

int KernelInvalidator::Send(const Item& item) {
  const int rc = item.is_name ? fuse_lowlevel_notify_inval_entry(session_, item.inode,
                                                                 item.name.data(), item.name.size())
                              : fuse_lowlevel_notify_inval_inode(session_, item.inode, -1, 0);
  if (rc != 0 && rc != -ENOENT) {
    Logger("fuse")->warn("kernel invalidation inode={} name={} rc={}", item.inode,
                         item.is_name ? item.name : "-", rc);
  }
  return rc;
}

void KernelInvalidator::Loop(Lane& lane) {
  MutexLock lock(mu_);
  for (;;) {
    if (stop_) return;
    if (!lane.queue.empty()) {
      Item item = std::move(lane.queue.front());
      lane.queue.pop_front();
      lane.sending_dir = item.is_name ? item.inode : 0;
      lock.Unlock();
      int rc = Send(item);
      if (rc == -ENOENT && !item.is_name && kernel_has_ && kernel_has_(item.inode)) {
        const Clock::time_point give_up = Clock::now() + bound_;
        while (rc == -ENOENT && Clock::now() < give_up) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          rc = Send(item);
        }
      }
      lock.Lock();
      lane.sending_dir = 0;
      ++lane.sent;
      lane.sent_cv.notify_all();
      // The kernel does not know the inode or name: it may be making it from a reply that
      // crossed this recall (see the header). Sent again when it has.
      if (rc == -ENOENT && !stop_) ResendLocked(item, Clock::now());
      continue;
    }
    if (!lane.delayed.empty() && lane.delayed.front().due <= Clock::now()) {
      Item item = std::move(lane.delayed.front().item);
      lane.delayed.pop_front();
      lane.sending_dir = item.is_name ? item.inode : 0;
      lock.Unlock();
      Send(item);
      lock.Lock();
      lane.sending_dir = 0;
      continue;
    }
    if (lane.delayed.empty()) {
      lane.work_cv.wait(lock.native(), [&]() REQUIRES(mu_) {
        return stop_ || !lane.queue.empty() || !lane.delayed.empty();
      });
    } else {
      lane.work_cv.wait_until(lock.native(), lane.delayed.front().due);
    }
  }
}

}  // namespace aquifer::fuse
