// io_uring engine for the chunk store. See io_ring.h.
#include "server/chunk_store/io_ring.h"

#include <liburing.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace aquifer::server {
namespace {

std::atomic<uint32_t> g_io_depth{32};
// Bumped in a forked child: a ring inherited across fork() shares its queues with the parent,
// so the child must build its own.
std::atomic<uint64_t> g_fork_generation{0};

Status ErrnoStatus(int err, const char* what) {
  std::string msg = std::string(what) + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) return NoSpace(msg);
  return Internal(msg);
}

// The calling thread's ring, created on first use.
class Ring {
 public:
  Ring() {
    depth_ = g_io_depth.load();
    init_error_ = -io_uring_queue_init(depth_, &ring_, 0);
  }
  ~Ring() {
    if (init_error_ == 0) io_uring_queue_exit(&ring_);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  int init_error() const { return init_error_; }
  uint32_t depth() const { return depth_; }
  io_uring* get() { return &ring_; }

 private:
  io_uring ring_{};
  uint32_t depth_ = 32;
  int init_error_ = 0;
};

Ring& ThisThreadRing() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, [] { g_fork_generation.fetch_add(1); });
    return true;
  }();
  (void)registered;
  thread_local std::unique_ptr<Ring> ring;
  thread_local uint64_t generation = 0;
  if (!ring || generation != g_fork_generation.load(std::memory_order_relaxed)) {
    if (ring) (void)ring.release();  // inherited from the parent: leave its mappings alone
    ring = std::make_unique<Ring>();
    generation = g_fork_generation.load();
  }
  return *ring;
}

// One request's progress: the iovecs still to transfer and where they go in the file.
struct Pending {
  int fd;
  std::vector<iovec> iov;
  size_t first = 0;  // index of the first iovec not yet fully transferred
  uint64_t offset;
  bool done() const { return first >= iov.size(); }
  void Advance(size_t n) {
    offset += n;
    while (n > 0 && first < iov.size()) {
      size_t take = std::min(n, iov[first].iov_len);
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + take;
      iov[first].iov_len -= take;
      n -= take;
      if (iov[first].iov_len == 0) ++first;
    }
    while (first < iov.size() && iov[first].iov_len == 0) ++first;
  }
};

Status Transfer(std::span<const IoRequest> requests, bool write) {
  Ring& ring = ThisThreadRing();
  if (ring.init_error() != 0) return ErrnoStatus(ring.init_error(), "io_uring_queue_init");
  std::vector<Pending> pending;
  pending.reserve(requests.size());
  for (const IoRequest& r : requests) {
    Pending p{r.fd, std::vector<iovec>(r.iov.begin(), r.iov.end()), 0, r.offset};
    p.Advance(0);
    if (!p.done()) pending.push_back(std::move(p));
  }
  const char* what = write ? "io_uring write" : "io_uring read";
  size_t next = 0;  // requests below `next` are submitted or finished in this wave scheme
  std::vector<size_t> active;
  while (true) {
    // Fill the ring with the requests not yet done (at most depth in flight).
    active.clear();
    for (size_t i = 0; i < pending.size() && active.size() < ring.depth(); ++i) {
      size_t idx = (next + i) % pending.size();
      if (pending[idx].done()) continue;
      active.push_back(idx);
    }
    if (active.empty()) return OkStatus();
    next = (active.back() + 1) % pending.size();
    for (size_t idx : active) {
      Pending& p = pending[idx];
      io_uring_sqe* sqe = io_uring_get_sqe(ring.get());
      const unsigned n = static_cast<unsigned>(std::min<size_t>(p.iov.size() - p.first, IOV_MAX));
      if (write) {
        io_uring_prep_writev(sqe, p.fd, &p.iov[p.first], n, p.offset);
      } else {
        io_uring_prep_readv(sqe, p.fd, &p.iov[p.first], n, p.offset);
      }
      io_uring_sqe_set_data64(sqe, idx);
    }
    int rc = io_uring_submit_and_wait(ring.get(), static_cast<unsigned>(active.size()));
    if (rc < 0) return ErrnoStatus(-rc, "io_uring_submit_and_wait");
    Status first_error;
    for (size_t got = 0; got < active.size(); ++got) {
      io_uring_cqe* cqe = nullptr;
      rc = io_uring_wait_cqe(ring.get(), &cqe);
      if (rc < 0) return ErrnoStatus(-rc, "io_uring_wait_cqe");
      const int res = cqe->res;
      Pending& p = pending[io_uring_cqe_get_data64(cqe)];
      io_uring_cqe_seen(ring.get(), cqe);
      if (res < 0) {
        if (first_error.ok()) first_error = ErrnoStatus(-res, what);
        p.first = p.iov.size();
      } else if (res == 0) {
        if (first_error.ok()) {
          first_error = write ? Internal("io_uring write: wrote 0 bytes")
                              : Internal("io_uring read: unexpected end of file");
        }
        p.first = p.iov.size();
      } else {
        p.Advance(static_cast<size_t>(res));
      }
    }
    if (!first_error.ok()) return first_error;
  }
}

Status FsyncAll(std::span<const int> fds, bool datasync) {
  Ring& ring = ThisThreadRing();
  if (ring.init_error() != 0) return ErrnoStatus(ring.init_error(), "io_uring_queue_init");
  Status first_error;
  for (size_t start = 0; start < fds.size(); start += ring.depth()) {
    const size_t n = std::min<size_t>(ring.depth(), fds.size() - start);
    for (size_t i = 0; i < n; ++i) {
      io_uring_sqe* sqe = io_uring_get_sqe(ring.get());
      io_uring_prep_fsync(sqe, fds[start + i], datasync ? IORING_FSYNC_DATASYNC : 0);
    }
    int rc = io_uring_submit_and_wait(ring.get(), static_cast<unsigned>(n));
    if (rc < 0) return ErrnoStatus(-rc, "io_uring_submit_and_wait");
    for (size_t i = 0; i < n; ++i) {
      io_uring_cqe* cqe = nullptr;
      rc = io_uring_wait_cqe(ring.get(), &cqe);
      if (rc < 0) return ErrnoStatus(-rc, "io_uring_wait_cqe");
      if (cqe->res < 0 && first_error.ok()) first_error = ErrnoStatus(-cqe->res, "fsync");
      io_uring_cqe_seen(ring.get(), cqe);
    }
  }
  return first_error;
}

}  // namespace

void SetIoDepth(uint32_t entries) { g_io_depth = std::clamp<uint32_t>(entries, 1, 4096); }
uint32_t IoDepth() { return g_io_depth.load(); }

Status RingWrite(std::span<const IoRequest> requests, bool datasync) {
  AQ_RETURN_IF_ERROR(Transfer(requests, /*write=*/true));
  if (!datasync) return OkStatus();
  std::vector<int> fds;
  for (const IoRequest& r : requests) {
    if (std::find(fds.begin(), fds.end(), r.fd) == fds.end()) fds.push_back(r.fd);
  }
  return FsyncAll(fds, /*datasync=*/true);
}

Status RingRead(std::span<const IoRequest> requests) { return Transfer(requests, false); }

Status RingFsync(std::span<const int> fds) { return FsyncAll(fds, /*datasync=*/false); }

}  // namespace aquifer::server
