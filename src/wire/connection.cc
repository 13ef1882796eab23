// Listener and ConnectionPool (connection.h).
#include "wire/connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
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

namespace {

template <class Socket>
Status ReadPayloadOn(Socket& socket, uint64_t bytes, std::string* out, Deadline deadline) {
  out->clear();
  while (out->size() < bytes) {
    const uint64_t at = out->size();
    // Grow only once bytes are there, by at most what has come so far (64 KiB to 1 MiB): memory
    // stays within about twice what the sender sent.
    const uint64_t step = std::clamp<uint64_t>(at, 64 << 10, 1 << 20);
    const uint64_t n = std::min(bytes - at, step);
    AQ_RETURN_IF_ERROR(RecvAll(socket, {}, deadline, /*wait_first=*/true));
    out->resize(at + n);
    AQ_RETURN_IF_ERROR(
        RecvAll(socket, std::as_writable_bytes(std::span<char>(out->data() + at, n)), deadline));
  }
  return OkStatus();
}

}  // namespace

Status ReadPayload(int fd, uint64_t bytes, std::string* out, Deadline deadline) {
  return ReadPayloadOn(fd, bytes, out, deadline);
}

Status ReadPayload(Conn& conn, uint64_t bytes, std::string* out, Deadline deadline) {
  return ReadPayloadOn(conn, bytes, out, deadline);
}

Status ReadFull(Conn& conn, std::span<std::byte> out, bool idle,
                const std::atomic<bool>& stopping) {
  if (conn.ssl() != nullptr) return ReadFullTls(conn, out, idle, stopping);
  return ReadFull(conn.fd(), out, idle, stopping);
}

Status WriteFull(Conn& conn, iovec* iov, int iov_count) {
  if (conn.ssl() == nullptr) return WriteFull(conn.fd(), iov, iov_count);
  // The whole frame within the frame timeout (the plain path's bound is per send call).
  return SendAllTls(conn, iov, iov_count,
                    std::chrono::steady_clock::now() + std::chrono::seconds(kFrameTimeoutSeconds));
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

Status CheckHandshakeAnswer(const ClusterKey& key, uint64_t instance, const Nonce& server_nonce,
                            std::span<const std::byte> answer, Nonce* client_nonce) {
  if (answer.size() != kNonceBytes + kMacBytes) {
    return PermissionDenied("wire: handshake answer of " + std::to_string(answer.size()) +
                            " bytes");
  }
  Nonce nonce;
  std::copy_n(answer.begin(), kNonceBytes, nonce.begin());
  const Mac want = WireClientProof(key, instance, server_nonce, nonce);
  if (!MacEqual(want, answer.subspan(kNonceBytes))) return PermissionDenied("wire: wrong key");
  *client_nonce = nonce;
  return OkStatus();
}

struct Listener::Impl {
  std::string name;
  uint64_t instance = 0;
  uint32_t max_connections = 0;
  std::optional<ClusterKey> key;
  std::shared_ptr<const Tls> tls;
  Serve serve;
  int listen_fd = -1;
  int wake_read = -1, wake_write = -1;  // a pipe: Shutdown wakes the accepting thread's poll
  uint16_t port = 0;
  std::thread acceptor;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> accepted{0}, refused{0}, unauthenticated{0}, pending_count{0};

  // Connection threads are detached: each closes its own fd when it ends, so nothing waits for
  // a later accept to free it. Shutdown waits on `ended` until `open` is empty.
  std::mutex mu;  // guards the four below
  std::condition_variable ended;
  std::set<int> open;  // fds of running connections
  bool shut_down = false;
  std::chrono::steady_clock::time_point next_refusal_log;
  std::chrono::steady_clock::time_point next_auth_log;  // also used by the acceptor only

  // A connection in the handshake (TLS, then the cluster key's), owned by the accepting thread
  // (no lock).
  struct Pending {
    Conn conn;
    bool in_tls = false;    // the TLS handshake is not over yet
    short events = POLLIN;  // what its poll waits for
    Nonce server_nonce{};
    std::array<std::byte, kNonceBytes + kMacBytes> answer{};  // client nonce, client proof
    size_t answer_bytes = 0;
    std::chrono::steady_clock::time_point deadline;
  };
  std::vector<Pending> pending;

  void Accept();
  void AcceptOne(int fd);
  // Hands an accepted (or authenticated) connection to its own thread, unless max_connections
  // are open. `send_hello`: the thread sends the hello first (no key handshake ran).
  void Admit(Conn conn, bool send_hello);
  // Moves a pending handshake on as far as it can go now; false when the connection is no
  // longer pending (admitted, or refused and closed here).
  bool Advance(Pending& p);
  // Sends the hello with the server's nonce (the key handshake's first step); false when the
  // connection was refused.
  bool SendHelloAndNonce(Pending& p);
  void Refuse(Conn& conn, const std::string& reason);
  void Run(Conn conn, bool send_hello);
};

namespace {

// How long Listener::Shutdown lets connection threads send the replies they are making.
constexpr std::chrono::milliseconds kReplyGrace{1000};

void SetBlocking(int fd, bool blocking) {
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, blocking ? (flags & ~O_NONBLOCK) : (flags | O_NONBLOCK));
}

std::string PeerOf(int fd) {
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return "?";
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (peer.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<sockaddr_in6*>(&peer);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  } else if (peer.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<sockaddr_in*>(&peer);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

// One non-blocking send of a short frame to a fresh connection (its send buffer is empty, so
// all of it goes or the peer is gone).
bool SendShort(Conn& conn, std::span<const std::byte> bytes) {
  short events = 0;
  Result<size_t> n = WriteSome(conn, bytes, &events);
  return n.ok() && *n == bytes.size();
}

}  // namespace

Result<std::unique_ptr<Listener>> Listener::Start(const std::string& name,
                                                  const std::string& host, uint16_t port,
                                                  uint64_t instance, Serve serve,
                                                  uint32_t max_connections,
                                                  std::optional<ClusterKey> key,
                                                  std::shared_ptr<const Tls> tls) {
  if (tls != nullptr && !tls->is_server()) {
    return InvalidArgument(name + ": TLS needs a server certificate and key (tls_cert, tls_key)");
  }
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
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
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
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(fd);
    return Unavailable(name + ": pipe: " + std::strerror(errno));
  }
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
  impl->key = key;
  impl->tls = std::move(tls);
  impl->serve = std::move(serve);
  impl->listen_fd = fd;
  impl->wake_read = wake[0];
  impl->wake_write = wake[1];
  if (!key) {
    Logger("wire")->warn("{} serves without a cluster key: any process that reaches port {} is "
                         "served (docs/operations.md \"The cluster key\")",
                         name, impl->port);
  }
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
uint64_t Listener::connections_unauthenticated() const { return impl_->unauthenticated.load(); }
uint64_t Listener::handshakes_pending() const { return impl_->pending_count.load(); }
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
  const char one = 1;
  (void)!::write(impl_->wake_write, &one, 1);  // wakes the accepting thread's poll
  impl_->acceptor.join();
  ::close(impl_->listen_fd);
  ::close(impl_->wake_read);
  ::close(impl_->wake_write);
  std::unique_lock lock(impl_->mu);
  // First the read side only: a thread waiting for the next request wakes and ends, and one
  // whose reply is being made (a recall wait the shutdown just ended) still sends it. Cutting
  // both sides at once lost such replies, and the client sent the call again over gRPC, which
  // was shutting down too: it waited out its deadline (5 s) instead of hearing at once.
  for (int fd : impl_->open) ::shutdown(fd, SHUT_RD);
  if (!impl_->ended.wait_for(lock, kReplyGrace, [this] { return impl_->open.empty(); })) {
    for (int fd : impl_->open) ::shutdown(fd, SHUT_RDWR);  // a send blocked on its peer
    impl_->ended.wait(lock, [this] { return impl_->open.empty(); });
  }
}

void Listener::Impl::Accept() {
  std::vector<pollfd> fds;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    // Handshakes past their deadline end first.
    for (size_t i = 0; i < pending.size();) {
      if (pending[i].deadline <= now) {
        Refuse(pending[i].conn, "handshake timed out");
        pending[i] = std::move(pending.back());
        pending.pop_back();
      } else {
        ++i;
      }
    }
    pending_count = pending.size();
    int timeout_ms = -1;
    for (const Pending& p : pending) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(p.deadline - now).count() + 1;
      if (timeout_ms < 0 || left < timeout_ms) timeout_ms = static_cast<int>(left);
    }
    fds.clear();
    fds.push_back({wake_read, POLLIN, 0});
    fds.push_back({listen_fd, POLLIN, 0});
    for (const Pending& p : pending) fds.push_back({p.conn.fd(), p.events, 0});
    const int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (stopping) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      Logger("wire")->error("{} poll failed error={}", name, std::strerror(errno));
      break;
    }
    // Pending handshakes (fds[2..]) before new connections: the indices match `pending`.
    std::vector<Pending> still;
    still.reserve(pending.size());
    for (size_t i = 0; i < pending.size(); ++i) {
      if (fds[i + 2].revents == 0 || Advance(pending[i])) still.push_back(std::move(pending[i]));
    }
    pending.swap(still);
    if (fds[1].revents != 0) {
      for (;;) {  // every connection waiting to be accepted
        const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
          AcceptOne(fd);
          continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          Logger("wire")->warn("{} accept failed error={}", name, std::strerror(errno));
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          break;
        }
        Logger("wire")->error("{} accept failed error={}", name, std::strerror(errno));
        stopping = true;
        break;
      }
    }
  }
  pending.clear();  // closes them
  pending_count = 0;
}

void Listener::Impl::AcceptOne(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!key && tls == nullptr) {
    Admit(Conn(fd), /*send_hello=*/true);
    return;
  }
  Pending p;
  p.conn = Conn(fd);
  if (pending.size() >= kMaxPendingHandshakes) {
    Refuse(p.conn, "too many handshakes at once");
    return;
  }
  p.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kHandshakeTimeoutSeconds);
  if (key && !RandomBytes(p.server_nonce).ok()) {
    Refuse(p.conn, "no random nonce");
    return;
  }
  if (tls != nullptr) {
    Result<Conn> session = NewTlsServerConn(p.conn.fd(), *tls);
    (void)p.conn.Release();  // the fd now belongs to `session` (closed by it on failure)
    if (!session.ok()) {
      Conn closed;
      Refuse(closed, session.status().message());
      return;
    }
    p.conn = std::move(*session);
    p.in_tls = true;
    pending.push_back(std::move(p));  // the client speaks first (its ClientHello)
    return;
  }
  if (SendHelloAndNonce(p)) pending.push_back(std::move(p));
}

bool Listener::Impl::SendHelloAndNonce(Pending& p) {
  std::array<std::byte, kHelloBytes + kNonceBytes> first;
  const auto hello = EncodeHello({kProtocolVersion, instance, /*auth=*/true});
  std::copy(hello.begin(), hello.end(), first.begin());
  std::copy(p.server_nonce.begin(), p.server_nonce.end(), first.begin() + kHelloBytes);
  if (!SendShort(p.conn, first)) {
    Refuse(p.conn, "closed before the hello");
    return false;
  }
  p.events = POLLIN;
  return true;
}

bool Listener::Impl::Advance(Pending& p) {
  if (p.in_tls) {
    bool done = false;
    if (Status s = StepTlsAccept(p.conn, &done, &p.events); !s.ok()) {
      Refuse(p.conn, "TLS handshake failed: " + s.message());
      return false;
    }
    if (!done) return true;
    p.in_tls = false;
    if (!key) {
      Admit(std::move(p.conn), /*send_hello=*/true);
      return false;
    }
    return SendHelloAndNonce(p);
  }
  while (p.answer_bytes < p.answer.size()) {
    Result<size_t> n = ReadSome(
        p.conn, std::span(p.answer).subspan(p.answer_bytes), &p.events);
    if (!n.ok()) {
      Refuse(p.conn, n.status().message() == "wire: connection closed"
                         ? "closed in the handshake"
                         : "recv failed in the handshake");
      return false;
    }
    if (*n == 0) return true;  // more to come: poll again
    p.answer_bytes += *n;
  }
  Nonce client_nonce;
  if (!CheckHandshakeAnswer(*key, instance, p.server_nonce, p.answer, &client_nonce).ok()) {
    Refuse(p.conn, "wrong key");
    return false;
  }
  const Mac proof = WireServerProof(*key, instance, p.server_nonce, client_nonce);
  if (!SendShort(p.conn, proof)) {
    Refuse(p.conn, "closed in the handshake");
    return false;
  }
  Admit(std::move(p.conn), /*send_hello=*/false);
  return false;  // no longer pending
}

void Listener::Impl::Refuse(Conn& conn, const std::string& reason) {
  const uint64_t count = unauthenticated.fetch_add(1) + 1;
  const auto now = std::chrono::steady_clock::now();
  if (now >= next_auth_log) {  // at most one line per 10 s however fast connections come
    Logger("wire")->warn("{} refused unauthenticated connection peer={} reason={} "
                         "refused_total={}",
                         name, conn.valid() ? PeerOf(conn.fd()) : "?", reason, count);
    next_auth_log = now + std::chrono::seconds(10);
  }
  conn.Close();
}

void Listener::Impl::Admit(Conn conn, bool send_hello) {
  const int fd = conn.fd();
  SetBlocking(fd, true);
  const timeval frame_timeout{kFrameTimeoutSeconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &frame_timeout, sizeof frame_timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &frame_timeout, sizeof frame_timeout);
  std::lock_guard lock(mu);
  if (open.size() >= max_connections) {
    refused.fetch_add(1);  // before the close the client sees
    conn.Close();
    // At most one line per 10 s however fast connections come.
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_refusal_log) {
      Logger("wire")->warn("{} refused connections: {} open (the limit), {} refused so far",
                           name, open.size(), refused.load());
      next_refusal_log = now + std::chrono::seconds(10);
    }
    return;
  }
  try {
    std::thread([this, c = std::move(conn), send_hello]() mutable {
      Run(std::move(c), send_hello);
    }).detach();
  } catch (const std::system_error& e) {  // no thread to be had (a process or memory limit)
    refused.fetch_add(1);  // the lambda holding the connection is gone: it is closed
    Logger("wire")->warn("{} refused a connection: no thread ({})", name, e.what());
    return;
  }
  accepted.fetch_add(1);
  open.insert(fd);  // under mu, so the new thread's erase comes after
}

void Listener::Impl::Run(Conn conn, bool send_hello) {
  bool ok = true;
  if (send_hello) {
    const auto hello = EncodeHello({kProtocolVersion, instance, /*auth=*/false});
    iovec iov{const_cast<std::byte*>(hello.data()), hello.size()};
    ok = WriteFull(conn, &iov, 1).ok();
  }
  if (ok) serve(conn, stopping);
  // Closed under the lock, so Shutdown never shuts down a number another accept reused; the
  // notification comes after this thread's last use of the listener (at thread exit).
  std::unique_lock lock(mu);
  open.erase(conn.fd());
  conn.Close();
  std::notify_all_at_thread_exit(ended, std::move(lock));
}

ConnectionPool::ConnectionPool(std::string host, uint16_t port, uint64_t instance,
                               size_t max_idle, std::optional<ClusterKey> key,
                               std::shared_ptr<const Tls> tls)
    : host_(std::move(host)),
      port_(port),
      instance_(instance),
      max_idle_(max_idle),
      key_(key),
      tls_(std::move(tls)) {}

ConnectionPool::~ConnectionPool() { DropIdle(); }

void ConnectionPool::DropIdle() {
  std::lock_guard lock(mu_);
  idle_.clear();  // closes them
}

void ConnectionPool::Release(Conn conn) {
  std::lock_guard lock(mu_);
  if (idle_.size() < max_idle_) idle_.push_back(std::move(conn));
}

Status ConnectionPool::Handshake(Conn& conn, const Hello& hello, Deadline deadline) const {
  if (!hello.auth) {
    if (!key_) return OkStatus();
    return Unavailable("the server asks for no cluster key, so it cannot prove it holds ours: "
                       "refused");
  }
  if (!key_) return Unavailable("the server requires the cluster key and none is configured");
  Nonce server_nonce, client_nonce;
  AQ_RETURN_IF_ERROR(RecvAll(conn, server_nonce, deadline));
  AQ_RETURN_IF_ERROR(RandomBytes(client_nonce));
  const Mac proof = WireClientProof(*key_, hello.instance, server_nonce, client_nonce);
  iovec iov[2] = {{client_nonce.data(), client_nonce.size()},
                  {const_cast<std::byte*>(proof.data()), proof.size()}};
  AQ_RETURN_IF_ERROR(SendAll(conn, iov, 2, deadline));
  Mac server_proof;
  if (!RecvAll(conn, server_proof, deadline, /*wait_first=*/true).ok()) {
    return Unavailable("the server refused the handshake (a wrong cluster key?)");
  }
  if (!MacEqual(server_proof,
                WireServerProof(*key_, hello.instance, server_nonce, client_nonce))) {
    return Unavailable("the server failed to prove the cluster key");
  }
  return OkStatus();
}

Result<Conn> ConnectionPool::Acquire(Deadline deadline, bool* reused) {
  for (;;) {
    Conn conn;
    {
      std::lock_guard lock(mu_);
      if (idle_.empty()) break;
      conn = std::move(idle_.back());
      idle_.pop_back();
    }
    // An idle connection has nothing to read (TLS sends nothing after its handshake either: no
    // session tickets): anything readable is the server's close (a restart), so the request
    // never goes out on it.
    pollfd p{conn.fd(), POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) == 0) {
      *reused = true;
      return conn;
    }
  }
  *reused = false;
  Result<int> fd = Connect(host_, port_, deadline);
  if (!fd.ok()) return fd.status();
  Conn conn(*fd);
  if (tls_ != nullptr) {
    Result<Conn> session = StartTlsClient(conn.Release(), *tls_,
                                          host_ + ":" + std::to_string(port_), deadline);
    if (!session.ok()) return session.status();
    conn = std::move(*session);
  }
  std::array<std::byte, kHelloBytes> frame;
  Status s = RecvAll(conn, frame, deadline, /*wait_first=*/true);
  Result<Hello> hello = s.ok() ? DecodeHello(frame) : Result<Hello>(s);
  if (hello.ok() && hello->instance != instance_) {
    hello = Unavailable("the port now belongs to another process (a restart)");
  }
  Status auth = hello.ok() ? Handshake(conn, *hello, deadline) : hello.status();
  if (!auth.ok()) return Unavailable(auth.message());
  return conn;
}

}  // namespace aquifer::wire
