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
                                     std::function<bool(uint64_t)> dir_changing,
                                     size_t name_threads)
    : session_(session),
      bound_(bound),
      kernel_has_(std::move(kernel_has)),
      name_bound_(std::max(name_bound, bound)),
      dir_changing_(std::move(dir_changing)) {
  lanes_[0].sending.assign(1, 0);
  lanes_[1].sending.assign(std::max<size_t>(name_threads, 1), 0);
  for (Lane& lane : lanes_) {
    for (size_t slot = 0; slot < lane.sending.size(); ++slot) {
      lane.threads.emplace_back([this, &lane, slot] { Loop(lane, slot); });
    }
  }
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
    for (std::thread& t : lane.threads) {
      if (t.joinable()) t.join();
    }
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
  lane.work_cv.notify_all();
}

void KernelInvalidator::Replay(uint64_t after_epoch) {
  MutexLock lock(mu_);
  if (stop_) return;
  const Clock::time_point now = Clock::now();
  for (const Kept& k : kept_) {
    if (k.epoch > after_epoch) ResendLocked(k.item, now);
  }
}

bool KernelInvalidator::DirBusy(const Lane& lane, const Item& item) {
  return item.is_name &&
         std::find(lane.sending.begin(), lane.sending.end(), item.inode) != lane.sending.end();
}

bool KernelInvalidator::NameMayBeSkipped(const Lane& lane, uint64_t id, uint64_t dir) {
  if (dir_changing_(dir)) return true;
  const bool queued = std::any_of(lane.queue.begin(), lane.queue.end(),
                                  [id](const Job& j) { return j.id == id; });
  if (!queued) return false;  // being sent: its own directory's lock is what it waits for
  for (uint64_t busy : lane.sending) {
    if (busy == 0 || !dir_changing_(busy)) return false;  // a thread is or will be free
  }
  return true;
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
  const std::string name = item.name;
  const uint64_t id = ++lane.next_id;
  lane.queue.push_back(Job{id, std::move(item)});
  lane.unsent.insert(id);
  lane.work_cv.notify_all();
  auto sent = [&]() REQUIRES(mu_) { return stop_ || !lane.unsent.count(id); };
  if (lane.sent_cv.wait_for(lock.native(), bound_, sent)) return;
  if (!is_name || !dir_changing_) {
    Logger("fuse")->debug("kernel invalidation still queued after {} ms; acknowledged anyway",
                          bound_.count());
    return;
  }
  // A name: wait on unless a change of this mount holds its directory, which may wait for the
  // host that waits for us.
  for (;;) {
    if (NameMayBeSkipped(lane, id, dir)) {
      Logger("fuse")->debug("kernel invalidation of a name still queued after {} ms (a change "
                            "of this mount holds the directory); acknowledged anyway",
                            std::chrono::duration_cast<std::chrono::milliseconds>(
                                Clock::now() - now).count());
      return;
    }
    if (Clock::now() - now >= name_bound_) {
      Logger("fuse")->info("kernel invalidation of a name still queued after {} ms (a request "
                           "holds the directory); acknowledged anyway dir={} name={}",
                           name_bound_.count(), dir, name);
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

void KernelInvalidator::Loop(Lane& lane, size_t slot) {
  MutexLock lock(mu_);
  for (;;) {
    if (stop_) return;
    // The first queued notification whose directory no other thread is sending to.
    auto job = std::find_if(lane.queue.begin(), lane.queue.end(),
                            [&](const Job& j) REQUIRES(mu_) { return !DirBusy(lane, j.item); });
    if (job != lane.queue.end()) {
      Job taken = std::move(*job);
      lane.queue.erase(job);
      lane.sending[slot] = taken.item.is_name ? taken.item.inode : 0;
      lock.Unlock();
      int rc = Send(taken.item);
      if (rc == -ENOENT && !taken.item.is_name && kernel_has_ && kernel_has_(taken.item.inode)) {
        const Clock::time_point give_up = Clock::now() + bound_;
        while (rc == -ENOENT && Clock::now() < give_up) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          rc = Send(taken.item);
        }
      }
      lock.Lock();
      lane.sending[slot] = 0;
      lane.unsent.erase(taken.id);
      lane.sent_cv.notify_all();
      lane.work_cv.notify_all();  // names of this directory may be waiting for it
      // The kernel does not know the inode or name: it may be making it from a reply that
      // crossed this recall (see the header). Sent again when it has.
      if (rc == -ENOENT && !stop_) ResendLocked(taken.item, Clock::now());
      continue;
    }
    const Clock::time_point now = Clock::now();
    auto due = std::find_if(lane.delayed.begin(), lane.delayed.end(),
                            [&](const Delayed& d) REQUIRES(mu_) {
                              return d.due <= now && !DirBusy(lane, d.item);
                            });
    if (due != lane.delayed.end()) {
      Item item = std::move(due->item);
      lane.delayed.erase(due);
      lane.sending[slot] = item.is_name ? item.inode : 0;
      lock.Unlock();
      Send(item);
      lock.Lock();
      lane.sending[slot] = 0;
      lane.work_cv.notify_all();
      continue;
    }
    // Nothing this thread may send now: wait for new work, a thread to finish, or the next
    // resend to fall due.
    auto next = std::find_if(lane.delayed.begin(), lane.delayed.end(),
                             [&](const Delayed& d) { return d.due > now; });
    if (next == lane.delayed.end()) {
      lane.work_cv.wait(lock.native());
    } else {
      lane.work_cv.wait_until(lock.native(), next->due);
    }
  }
}

}  // namespace aquifer::fuse
