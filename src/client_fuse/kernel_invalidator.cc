#include "client_fuse/kernel_invalidator.h"

#include <cerrno>

#include "common/logging.h"

namespace aquifer::fuse {

KernelInvalidator::KernelInvalidator(fuse_session* session, std::chrono::milliseconds bound)
    : session_(session), bound_(bound), thread_([this] { Loop(); }) {}

KernelInvalidator::~KernelInvalidator() { Stop(); }

void KernelInvalidator::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  work_cv_.notify_all();
  sent_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KernelInvalidator::Attrs(InodeId inode) { Queue(Item{false, inode.value(), {}}); }

void KernelInvalidator::Name(InodeId parent, const std::string& name) {
  Queue(Item{true, parent.value(), name});
}

void KernelInvalidator::Queue(Item item) {
  std::unique_lock lock(mu_);
  if (stop_) return;
  queue_.push_back(std::move(item));
  const uint64_t ticket = ++queued_;
  work_cv_.notify_one();
  if (!sent_cv_.wait_for(lock, bound_, [&] { return stop_ || sent_ >= ticket; })) {
    Logger("fuse")->debug("kernel invalidation still queued after {} ms (a request holds the "
                          "directory); acknowledged anyway", bound_.count());
  }
}

void KernelInvalidator::Loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Item item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    const int rc =
        item.is_name
            ? fuse_lowlevel_notify_inval_entry(session_, item.inode, item.name.data(),
                                               item.name.size())
            : fuse_lowlevel_notify_inval_inode(session_, item.inode, -1, 0);
    if (rc != 0 && rc != -ENOENT) {
      Logger("fuse")->warn("kernel invalidation inode={} name={} rc={}", item.inode,
                           item.is_name ? item.name : "-", rc);
    }
    lock.lock();
    ++sent_;
    sent_cv_.notify_all();
  }
}

}  // namespace aquifer::fuse
