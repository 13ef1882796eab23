// Listener and ConnectionPool (connection.h).
#include "wire/connection.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <condition_variable>
#include <set>
#include <system_error>
#include <thread>

#include "common/logging.h"

namespace aquifer::wire {

Status ReadFull(int fd, std::span<std::byte> out, bool idle, const std::atomic<bool>& stopping) {
  size_t got = 0;
  int idle_waits = 0;
  while (got < out.size()) {
    const ssize_t n = ::recv(fd, out.data() + got, out.size() - got, MSG_WAITALL);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Unavailable("wire: connection closed");
    if (errno == EINTR) continue;
    // An idle connection between requests just waits on; a frame cut off in the middle ends.
    if ((errno == EAGAIN || errno == EWOULDBLOCK) && idle && got == 0 && !stopping) {
      if (++idle_waits * kFrameTimeoutSeconds >= kIdleTimeoutSeconds) {
        return Unavailable("wire: idle");
      }
      continue;
    }
    return Unavailable(std::string("wire: recv: ") + std::strerror(errno));
  }
  return OkStatus();
}

Status ReadPayload(int fd, uint64_t bytes, std::string* out, Deadline deadline) {
  out->clear();
  while (out->size() < bytes) {
    const uint64_t at = out->size();
    // Grow only once bytes are there, by at most what has come so far (64 KiB to 1 MiB): memory
    // stays within about twice what the sender sent.
    const uint64_t step = std::clamp<uint64_t>(at, 64 << 10, 1 << 20);
    const uint64_t n = std::min(bytes - at, step);
    AQ_RETURN_IF_ERROR(RecvAll(fd, {}, deadline, /*wait_first=*/true));
    out->resize(at + n);
    AQ_RETURN_IF_ERROR(
        RecvAll(fd, std::as_writable_bytes(std::span<char>(out->data() + at, n)), deadline));
  }
  return OkStatus();
}

Status WriteFull(int fd, iovec* iov, int iov_count) {
  ConsumeIov(iov, iov_count, 0);
  while (iov_count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iov_count);
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Unavailable(std::string("wire: send: ") + std::strerror(errno));
    }
    ConsumeIov(iov, iov_count, static_cast<size_t>(n));
  }
  return OkStatus();
}

struct Listener::Impl {
  std::string name;
  uint64_t instance = 0;
  uint32_t max_connections = 0;
  Serve serve;
  int listen_fd = -1;
  uint16_t port = 0;
  std::thread acceptor;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> accepted{0}, refused{0};

  // Connection threads are detached: each closes its own fd when it ends, so nothing waits for
  // a later accept to free it. Shutdown waits on `ended` until `open` is empty.
  std::mutex mu;  // guards the three below
  std::condition_variable ended;
  std::set<int> open;  // fds of running connections
  bool shut_down = false;
  std::chrono::steady_clock::time_point next_refusal_log;

  void Accept();
  void Run(int fd);
};

Result<std::unique_ptr<Listener>> Listener::Start(const std::string& name,
                                                  const std::string& host, uint16_t port,
                                                  uint64_t instance, Serve serve,
                                                  uint32_t max_connections) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints,
                               &found);
  if (rc != 0) return InvalidArgument(name + ": host " + host + ": " + ::gai_strerror(rc));
  int fd = -1;
  std::string err;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 256) != 0) {
      err = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return Unavailable(name + ": cannot listen on " + host + ":" + service + ": " + err);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  auto impl = std::make_unique<Impl>();
  impl->port = ntohs(bound.ss_family == AF_INET6
                         ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                         : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  impl->name = name;
  impl->instance = instance;
  impl->max_connections = max_connections;
  impl->serve = std::move(serve);
  impl->listen_fd = fd;
  Impl* raw = impl.get();
  impl->acceptor = std::thread([raw] { raw->Accept(); });
  return std::unique_ptr<Listener>(new Listener(std::move(impl)));
}

Listener::Listener(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Listener::~Listener() { Shutdown(); }
uint16_t Listener::port() const { return impl_->port; }
uint64_t Listener::instance() const { return impl_->instance; }
uint64_t Listener::connections_accepted() const { return impl_->accepted.load(); }
uint64_t Listener::connections_refused() const { return impl_->refused.load(); }
uint64_t Listener::connections_open() const {
  std::lock_guard lock(impl_->mu);
  return impl_->open.size();
}

void Listener::Shutdown() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->shut_down) return;
    impl_->shut_down = true;
  }
  impl_->stopping = true;
  ::shutdown(impl_->listen_fd, SHUT_RDWR);  // wakes accept()
  impl_->acceptor.join();
  ::close(impl_->listen_fd);
  std::unique_lock lock(impl_->mu);
  for (int fd : impl_->open) ::shutdown(fd, SHUT_RDWR);  // wakes its thread's recv or send
  impl_->ended.wait(lock, [this] { return impl_->open.empty(); });
}

void Listener::Impl::Accept() {
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (stopping) {
      if (fd >= 0) ::close(fd);
      return;
    }
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        Logger("wire")->warn("{} accept failed error={}", name, std::strerror(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      Logger("wire")->error("{} accept failed error={}", name, std::strerror(errno));
      return;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const timeval frame_timeout{kFrameTimeoutSeconds, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &frame_timeout, sizeof frame_timeout);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &frame_timeout, sizeof frame_timeout);
    std::lock_guard lock(mu);
    if (open.size() >= max_connections) {
      refused.fetch_add(1);  // before the close the client sees
      ::close(fd);
      // At most one line per 10 s however fast connections come.
      const auto now = std::chrono::steady_clock::now();
      if (now >= next_refusal_log) {
        Logger("wire")->warn("{} refused connections: {} open (the limit), {} refused so far",
                             name, open.size(), refused.load());
        next_refusal_log = now + std::chrono::seconds(10);
      }
      continue;
    }
    try {
      std::thread([this, fd] { Run(fd); }).detach();
    } catch (const std::system_error& e) {  // no thread to be had (a process or memory limit)
      refused.fetch_add(1);
      ::close(fd);
      Logger("wire")->warn("{} refused a connection: no thread ({})", name, e.what());
      continue;
    }
    accepted.fetch_add(1);
    open.insert(fd);  // under mu, so the new thread's erase comes after
  }
}

void Listener::Impl::Run(int fd) {
  const auto hello = EncodeHello({kProtocolVersion, instance});
  iovec iov{const_cast<std::byte*>(hello.data()), hello.size()};
  if (WriteFull(fd, &iov, 1).ok()) serve(fd, stopping);
  // Closed under the lock, so Shutdown never shuts down a number another accept reused; the
  // notification comes after this thread's last use of the listener (at thread exit).
  std::unique_lock lock(mu);
  open.erase(fd);
  ::close(fd);
  std::notify_all_at_thread_exit(ended, std::move(lock));
}

ConnectionPool::ConnectionPool(std::string host, uint16_t port, uint64_t instance,
                               size_t max_idle)
    : host_(std::move(host)), port_(port), instance_(instance), max_idle_(max_idle) {}

ConnectionPool::~ConnectionPool() { DropIdle(); }

void ConnectionPool::DropIdle() {
  std::lock_guard lock(mu_);
  for (int fd : idle_) ::close(fd);
  idle_.clear();
}

void ConnectionPool::Release(int fd) {
  std::lock_guard lock(mu_);
  if (idle_.size() < max_idle_) {
    idle_.push_back(fd);
  } else {
    ::close(fd);
  }
}

Result<int> ConnectionPool::Acquire(Deadline deadline, bool* reused) {
  for (;;) {
    int fd = -1;
    {
      std::lock_guard lock(mu_);
      if (idle_.empty()) break;
      fd = idle_.back();
      idle_.pop_back();
    }
    // An idle connection has nothing to read: anything readable is the server's close (a
    // restart), so the request never goes out on it.
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) == 0) {
      *reused = true;
      return fd;
    }
    ::close(fd);
  }
  *reused = false;
  Result<int> fd = Connect(host_, port_, deadline);
  if (!fd.ok()) return fd.status();
  std::array<std::byte, kHelloBytes> frame;
  Status s = RecvAll(*fd, frame, deadline, /*wait_first=*/true);
  Result<Hello> hello = s.ok() ? DecodeHello(frame) : Result<Hello>(s);
  if (hello.ok() && hello->instance != instance_) {
    hello = Unavailable("the port now belongs to another process (a restart)");
  }
  if (!hello.ok()) {
    ::close(*fd);
    return Unavailable(hello.status().message());
  }
  return *fd;
}

}  // namespace aquifer::wire
