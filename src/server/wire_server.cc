// aquifer-data's chunk wire listener (wire_server.h): an accept thread and one thread per
// connection, each running read-request / call-the-store / write-reply until the peer closes.
#include "server/wire_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "wire/chunk_wire.h"

namespace aquifer::server {
namespace {

// A started frame (a request's bytes, a reply's send) must move within this, or the connection
// ends; between requests a connection may stay idle for any time.
constexpr int kFrameTimeoutSeconds = 60;
// A connection keeps a write buffer up to this size between requests (bytes); a larger one is
// freed after its request.
constexpr uint64_t kKeptBufferBytes = 4ull << 20;

// Blocking I/O on a connection whose SO_RCVTIMEO / SO_SNDTIMEO are kFrameTimeoutSeconds: one
// system call per transfer in the common case (no poll before it, no EAGAIN after it).
// Shutdown() wakes both with shutdown(2). Errors: kUnavailable.
Status ReadFull(int fd, std::span<std::byte> out, bool idle, const std::atomic<bool>& stopping) {
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::recv(fd, out.data() + got, out.size() - got, MSG_WAITALL);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Unavailable("chunk wire: connection closed");
    if (errno == EINTR) continue;
    // An idle connection between requests just waits on; a frame cut off in the middle ends.
    if ((errno == EAGAIN || errno == EWOULDBLOCK) && idle && got == 0 && !stopping) continue;
    return Unavailable(std::string("chunk wire: recv: ") + std::strerror(errno));
  }
  return OkStatus();
}

Status WriteFull(int fd, iovec* iov, int iov_count) {
  while (iov_count > 0) {
    if (iov->iov_len == 0) {
      ++iov;
      --iov_count;
      continue;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iov_count);
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Unavailable(std::string("chunk wire: send: ") + std::strerror(errno));
    }
    size_t left = static_cast<size_t>(n);
    while (left > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --iov_count;
    }
    if (left > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return OkStatus();
}

ChunkPlacement FromWire(const wire::WirePlacement& p) {
  if (p.pg_width == 0) return ChunkPlacement{};
  return ChunkPlacement{static_cast<uint16_t>(p.pg_width), p.k, p.m, p.pg_index, p.unit_bytes,
                        p.replicated, p.stripe_bytes};
}

}  // namespace

struct WireServer::Impl {
  ChunkStore* store = nullptr;
  uint64_t instance = 0;
  uint32_t max_connections = 0;
  int listen_fd = -1;
  uint16_t port = 0;
  std::thread acceptor;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> accepted{0}, served{0}, rejected{0};

  std::mutex mu;                       // guards the three below
  std::map<int, std::thread> threads;  // by connection fd, while it runs
  std::vector<int> finished;           // connection fds whose thread has returned
  bool shut_down = false;

  void Accept();
  void Serve(int fd);
  // One request on `fd` with its decoded header: runs it and sends the reply.
  // Errors: kUnavailable when the connection failed (the caller closes it).
  Status Handle(int fd, const wire::Request& request, std::string* read_buf,
                std::string* write_buf);
  void ReapFinished();
};

Result<std::unique_ptr<WireServer>> WireServer::Start(const std::string& host, uint16_t port,
                                                      ChunkStore* store, uint64_t instance,
                                                      uint32_t max_connections) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints,
                               &found);
  if (rc != 0) return InvalidArgument("chunk wire: host " + host + ": " + ::gai_strerror(rc));
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
  if (fd < 0) return Unavailable("chunk wire: cannot listen on " + host + ":" + service + ": " + err);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  auto impl = std::make_unique<Impl>();
  impl->port = ntohs(bound.ss_family == AF_INET6
                         ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                         : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  impl->store = store;
  impl->instance = instance;
  impl->max_connections = max_connections;
  impl->listen_fd = fd;
  Impl* raw = impl.get();
  impl->acceptor = std::thread([raw] { raw->Accept(); });
  return std::unique_ptr<WireServer>(new WireServer(std::move(impl)));
}

WireServer::WireServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WireServer::~WireServer() { Shutdown(); }
uint16_t WireServer::port() const { return impl_->port; }
uint64_t WireServer::instance() const { return impl_->instance; }
uint64_t WireServer::connections_accepted() const { return impl_->accepted.load(); }
uint64_t WireServer::requests_served() const { return impl_->served.load(); }
uint64_t WireServer::frames_rejected() const { return impl_->rejected.load(); }

void WireServer::Shutdown() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->shut_down) return;
    impl_->shut_down = true;
  }
  impl_->stopping = true;
  ::shutdown(impl_->listen_fd, SHUT_RDWR);  // wakes accept()
  impl_->acceptor.join();
  ::close(impl_->listen_fd);
  std::map<int, std::thread> threads;
  {
    std::lock_guard lock(impl_->mu);
    for (auto& [fd, thread] : impl_->threads) ::shutdown(fd, SHUT_RDWR);  // wakes its poll
    threads.swap(impl_->threads);
  }
  for (auto& [fd, thread] : threads) thread.join();
  for (auto& [fd, thread] : threads) ::close(fd);
  for (int fd : impl_->finished) {
    if (threads.count(fd) == 0) ::close(fd);
  }
  impl_->finished.clear();
}

void WireServer::Impl::ReapFinished() {
  std::vector<std::thread> done;
  {
    std::lock_guard lock(mu);
    for (int fd : finished) {
      auto it = threads.find(fd);
      if (it == threads.end()) continue;
      done.push_back(std::move(it->second));
      threads.erase(it);
    }
    for (int fd : finished) ::close(fd);  // after erase: the fd number may be reused at once
    finished.clear();
  }
  for (std::thread& t : done) t.join();
}

void WireServer::Impl::Accept() {
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (stopping) {
      if (fd >= 0) ::close(fd);
      return;
    }
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        Logger("data")->warn("chunk wire accept failed error={}", std::strerror(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      Logger("data")->error("chunk wire accept failed error={}", std::strerror(errno));
      return;
    }
    ReapFinished();
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const timeval frame_timeout{kFrameTimeoutSeconds, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &frame_timeout, sizeof frame_timeout);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &frame_timeout, sizeof frame_timeout);
    std::lock_guard lock(mu);
    if (threads.size() >= max_connections) {
      Logger("data")->warn("chunk wire refused a connection: {} open", threads.size());
      ::close(fd);
      continue;
    }
    accepted.fetch_add(1);
    threads.emplace(fd, std::thread([this, fd] { Serve(fd); }));
  }
}

void WireServer::Impl::Serve(int fd) {
  std::string read_buf, write_buf;
  const auto hello = wire::EncodeHello({wire::kProtocolVersion, instance});
  iovec iov{const_cast<std::byte*>(hello.data()), hello.size()};
  Status s = WriteFull(fd, &iov, 1);
  while (s.ok() && !stopping) {
    std::array<std::byte, wire::kRequestBytes> frame;
    s = ReadFull(fd, frame, /*idle=*/true, stopping);
    if (!s.ok()) break;  // the peer closed, or shutdown
    Result<wire::Request> request = wire::DecodeRequest(frame);
    if (!request.ok()) {
      // The framing cannot be trusted after a bad header: say why, then end the connection.
      rejected.fetch_add(1);
      Logger("data")->warn("chunk wire rejected a frame: {}", request.status().ToString());
      const std::string& text = request.status().message();
      const uint32_t n = static_cast<uint32_t>(std::min<size_t>(text.size(), wire::kMaxMessageBytes));
      const auto reply = wire::EncodeReply({Code::kInvalidArgument, n});
      iovec out[2] = {{const_cast<std::byte*>(reply.data()), reply.size()},
                      {const_cast<char*>(text.data()), n}};
      (void)WriteFull(fd, out, 2);
      break;
    }
    s = Handle(fd, *request, &read_buf, &write_buf);
  }
  // The peer sees the end now; the fd itself is closed when the thread is reaped, so its number
  // cannot be reused while the threads map still names it.
  ::shutdown(fd, SHUT_RDWR);
  std::lock_guard lock(mu);
  finished.push_back(fd);
}

Status WireServer::Impl::Handle(int fd, const wire::Request& request, std::string* read_buf,
                                std::string* write_buf) {
  wire::Reply reply;
  Status status = OkStatus();
  std::string_view data;
  if (request.op == wire::Op::kWrite) {
    // Bytes that arrive here are the chunk; the store copies them to its file.
    write_buf->resize(request.payload_bytes);
    AQ_RETURN_IF_ERROR(ReadFull(
        fd, std::as_writable_bytes(std::span<char>(write_buf->data(), write_buf->size())),
        /*idle=*/false, stopping));
    status = store->Write(request.id, request.version, request.committed_version, *write_buf,
                          request.sync, FromWire(request.placement));
    if (write_buf->capacity() > kKeptBufferBytes) std::string().swap(*write_buf);
  } else {
    Result<ChunkReadInfo> r = store->Read(request.id, request.version, request.offset_bytes,
                                          request.length_bytes, read_buf);
    if (r.ok()) {
      reply.version = r->version;
      reply.chunk_length_bytes = r->chunk_length_bytes;
      reply.stripe_bytes = r->placement.known() ? r->placement.stripe_bytes : 0;
      reply.data_bytes = read_buf->size();
      data = *read_buf;
    } else {
      status = r.status();
    }
  }
  served.fetch_add(1);  // before the reply, so a client that saw it sees the count too
  const std::string& text = status.message();
  reply.code = status.code();
  reply.message_bytes =
      status.ok() ? 0 : static_cast<uint32_t>(std::min<size_t>(text.size(), wire::kMaxMessageBytes));
  const auto head = wire::EncodeReply(reply);
  iovec out[3] = {{const_cast<std::byte*>(head.data()), head.size()},
                  {const_cast<char*>(text.data()), reply.message_bytes},
                  {const_cast<char*>(data.data()), data.size()}};
  Status sent = WriteFull(fd, out, 3);
  if (read_buf->capacity() > kKeptBufferBytes) std::string().swap(*read_buf);
  return sent;
}

}  // namespace aquifer::server
