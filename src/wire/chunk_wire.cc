// Frame codecs and socket helpers of the chunk wire (chunk_wire.h).
#include "wire/chunk_wire.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace aquifer::wire {
namespace {

// Little-endian field access at a byte offset of a frame.
template <class T>
void Put(std::byte* frame, size_t at, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    frame[at + i] = static_cast<std::byte>(static_cast<uint64_t>(value) >> (8 * i));
  }
}

template <class T>
T Get(std::span<const std::byte> frame, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    v |= static_cast<uint64_t>(std::to_integer<uint8_t>(frame[at + i])) << (8 * i);
  }
  return static_cast<T>(v);
}

bool AllZero(std::span<const std::byte> frame, size_t at, size_t n) {
  return std::all_of(frame.begin() + at, frame.begin() + at + n,
                     [](std::byte b) { return b == std::byte{0}; });
}

Status Bad(const char* frame, const std::string& what) {
  return InvalidArgument(std::string("chunk wire: bad ") + frame + ": " + what);
}

// Hello: magic u32 @0, version u16 @4, flags u16 @6 (bit 0: auth), instance u64 @8.
// Request: magic u32 @0, op u8 @4, flags u8 @5 (bit 0: sync), reserved u16 @6, ino u64 @8,
// stripe u64 @16, position u32 @24, reserved u32 @28, version u64 @32, committed u64 @40,
// offset u64 @48, length u64 @56, payload u64 @64, pg_width u32 @72, pg_index u32 @76, k u8 @80,
// m u8 @81, replicated u8 @82, reserved u8 @83, unit_bytes u32 @84, stripe_bytes u64 @88.
// Reply: magic u32 @0, code u32 @4, message u32 @8, reserved u32 @12, version u64 @16,
// chunk_length u64 @24, stripe_bytes u64 @32, data u64 @40.
constexpr uint8_t kFlagSync = 1;

}  // namespace

std::array<std::byte, kHelloBytes> EncodeHello(const Hello& hello) {
  std::array<std::byte, kHelloBytes> f{};
  Put<uint32_t>(f.data(), 0, kHelloMagic);
  Put<uint16_t>(f.data(), 4, hello.protocol_version);
  Put<uint16_t>(f.data(), 6, hello.auth ? 1 : 0);
  Put<uint64_t>(f.data(), 8, hello.instance);
  return f;
}

std::array<std::byte, kRequestBytes> EncodeRequest(const Request& r) {
  std::array<std::byte, kRequestBytes> f{};
  Put<uint32_t>(f.data(), 0, kRequestMagic);
  Put<uint8_t>(f.data(), 4, static_cast<uint8_t>(r.op));
  Put<uint8_t>(f.data(), 5, r.sync ? kFlagSync : 0);
  Put<uint64_t>(f.data(), 8, r.id.inode.value());
  Put<uint64_t>(f.data(), 16, r.id.stripe);
  Put<uint32_t>(f.data(), 24, r.id.position);
  Put<uint64_t>(f.data(), 32, r.version);
  Put<uint64_t>(f.data(), 40, r.committed_version);
  Put<uint64_t>(f.data(), 48, r.offset_bytes);
  Put<uint64_t>(f.data(), 56, r.length_bytes);
  Put<uint64_t>(f.data(), 64, r.payload_bytes);
  Put<uint32_t>(f.data(), 72, r.placement.pg_width);
  Put<uint32_t>(f.data(), 76, r.placement.pg_index);
  Put<uint8_t>(f.data(), 80, r.placement.k);
  Put<uint8_t>(f.data(), 81, r.placement.m);
  Put<uint8_t>(f.data(), 82, r.placement.replicated ? 1 : 0);
  Put<uint32_t>(f.data(), 84, r.placement.unit_bytes);
  Put<uint64_t>(f.data(), 88, r.placement.stripe_bytes);
  return f;
}

std::array<std::byte, kReplyBytes> EncodeReply(const Reply& r) {
  std::array<std::byte, kReplyBytes> f{};
  Put<uint32_t>(f.data(), 0, kReplyMagic);
  Put<uint32_t>(f.data(), 4, static_cast<uint32_t>(r.code));
  Put<uint32_t>(f.data(), 8, r.message_bytes);
  Put<uint64_t>(f.data(), 16, r.version);
  Put<uint64_t>(f.data(), 24, r.chunk_length_bytes);
  Put<uint64_t>(f.data(), 32, r.stripe_bytes);
  Put<uint64_t>(f.data(), 40, r.data_bytes);
  return f;
}

Result<Hello> DecodeHello(std::span<const std::byte> f) {
  if (f.size() != kHelloBytes) return Bad("hello", "size " + std::to_string(f.size()));
  if (Get<uint32_t>(f, 0) != kHelloMagic) return Bad("hello", "magic");
  Hello h;
  h.protocol_version = Get<uint16_t>(f, 4);
  if (h.protocol_version != kProtocolVersion) {
    return Bad("hello", "protocol version " + std::to_string(h.protocol_version));
  }
  const uint16_t flags = Get<uint16_t>(f, 6);
  if ((flags & ~1u) != 0) return Bad("hello", "reserved bytes");
  h.auth = (flags & 1) != 0;
  h.instance = Get<uint64_t>(f, 8);
  return h;
}

Result<Request> DecodeRequest(std::span<const std::byte> f) {
  if (f.size() != kRequestBytes) return Bad("request", "size " + std::to_string(f.size()));
  if (Get<uint32_t>(f, 0) != kRequestMagic) return Bad("request", "magic");
  Request r;
  const uint8_t op = Get<uint8_t>(f, 4);
  if (op != static_cast<uint8_t>(Op::kRead) && op != static_cast<uint8_t>(Op::kWrite)) {
    return Bad("request", "op " + std::to_string(op));
  }
  r.op = static_cast<Op>(op);
  const uint8_t flags = Get<uint8_t>(f, 5);
  if ((flags & ~kFlagSync) != 0) return Bad("request", "flags " + std::to_string(flags));
  r.sync = (flags & kFlagSync) != 0;
  if (!AllZero(f, 6, 2) || !AllZero(f, 28, 4) || !AllZero(f, 83, 1)) {
    return Bad("request", "reserved bytes");
  }
  r.id = ChunkId{InodeId(Get<uint64_t>(f, 8)), Get<uint64_t>(f, 16), Get<uint32_t>(f, 24)};
  if (r.id.inode.value() == 0) return Bad("request", "inode 0");
  r.version = Get<uint64_t>(f, 32);
  r.committed_version = Get<uint64_t>(f, 40);
  r.offset_bytes = Get<uint64_t>(f, 48);
  r.length_bytes = Get<uint64_t>(f, 56);
  r.payload_bytes = Get<uint64_t>(f, 64);
  if (r.op == Op::kRead && r.payload_bytes != 0) return Bad("request", "read with a payload");
  if (r.payload_bytes > kMaxPayloadBytes) {
    return Bad("request", "payload of " + std::to_string(r.payload_bytes) + " bytes");
  }
  WirePlacement& p = r.placement;
  p.pg_width = Get<uint32_t>(f, 72);
  p.pg_index = Get<uint32_t>(f, 76);
  p.k = Get<uint8_t>(f, 80);
  p.m = Get<uint8_t>(f, 81);
  const uint8_t replicated = Get<uint8_t>(f, 82);
  if (replicated > 1) return Bad("request", "replicated " + std::to_string(replicated));
  p.replicated = replicated == 1;
  p.unit_bytes = Get<uint32_t>(f, 84);
  p.stripe_bytes = Get<uint64_t>(f, 88);
  if (p.pg_width > UINT16_MAX) return Bad("request", "pg_width " + std::to_string(p.pg_width));
  return r;
}

Result<Reply> DecodeReply(std::span<const std::byte> f) {
  if (f.size() != kReplyBytes) return Bad("reply", "size " + std::to_string(f.size()));
  if (Get<uint32_t>(f, 0) != kReplyMagic) return Bad("reply", "magic");
  Reply r;
  const uint32_t code = Get<uint32_t>(f, 4);
  if (code > static_cast<uint32_t>(Code::kDataLoss) ||
      CodeFromInt(static_cast<int>(code)) != static_cast<Code>(code)) {
    return Bad("reply", "code " + std::to_string(code));
  }
  r.code = static_cast<Code>(code);
  r.message_bytes = Get<uint32_t>(f, 8);
  if (r.message_bytes > kMaxMessageBytes) {
    return Bad("reply", "message of " + std::to_string(r.message_bytes) + " bytes");
  }
  if (!AllZero(f, 12, 4)) return Bad("reply", "reserved bytes");
  r.version = Get<uint64_t>(f, 16);
  r.chunk_length_bytes = Get<uint64_t>(f, 24);
  r.stripe_bytes = Get<uint64_t>(f, 32);
  r.data_bytes = Get<uint64_t>(f, 40);
  if (r.data_bytes > kMaxPayloadBytes) {
    return Bad("reply", "data of " + std::to_string(r.data_bytes) + " bytes");
  }
  if (r.code != Code::kOk && r.data_bytes != 0) return Bad("reply", "data with an error");
  return r;
}

void ConsumeIov(struct iovec*& iov, int& iov_count, size_t sent) {
  while (iov_count > 0 && sent >= iov->iov_len) {
    sent -= iov->iov_len;
    ++iov;
    --iov_count;
  }
  if (sent > 0) {  // iov_count > 0 here: sent never exceeds what is left
    iov->iov_base = static_cast<char*>(iov->iov_base) + sent;
    iov->iov_len -= sent;
  }
}

Status SendAll(int fd, struct iovec* iov, int iov_count, Deadline deadline) {
  ConsumeIov(iov, iov_count, 0);
  while (iov_count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(std::min(iov_count, 64));
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        AQ_RETURN_IF_ERROR(Wait(fd, POLLOUT, deadline));
        continue;
      }
      return Unavailable(std::string("wire: send: ") + std::strerror(errno));
    }
    ConsumeIov(iov, iov_count, static_cast<size_t>(n));
  }
  return OkStatus();
}

Status RecvAll(int fd, std::span<std::byte> out, Deadline deadline, bool wait_first) {
  if (wait_first) AQ_RETURN_IF_ERROR(Wait(fd, POLLIN, deadline));
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::recv(fd, out.data() + got, out.size() - got, MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Unavailable("wire: connection closed");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      AQ_RETURN_IF_ERROR(Wait(fd, POLLIN, deadline));
      continue;
    }
    return Unavailable(std::string("wire: recv: ") + std::strerror(errno));
  }
  return OkStatus();
}

Status SendAll(Conn& conn, struct iovec* iov, int iov_count, Deadline deadline) {
  if (conn.ssl() != nullptr) return SendAllTls(conn, iov, iov_count, deadline);
  return SendAll(conn.fd(), iov, iov_count, deadline);
}

Status RecvAll(Conn& conn, std::span<std::byte> out, Deadline deadline, bool wait_first) {
  if (conn.ssl() != nullptr) return RecvAllTls(conn, out, deadline, wait_first);
  return RecvAll(conn.fd(), out, deadline, wait_first);
}

Result<int> Connect(const std::string& host, uint16_t port, Deadline deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    return InvalidArgument("wire: host " + host + ": " + ::gai_strerror(rc));
  }
  Status last = Unavailable("wire: no address for " + host);
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                            a->ai_protocol);
    if (fd < 0) {
      last = Unavailable(std::string("wire: socket: ") + std::strerror(errno));
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    Status s = OkStatus();
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        s = Unavailable("wire: connect " + host + ":" + service + ": " +
                        std::strerror(errno));
      } else {
        s = Wait(fd, POLLOUT, deadline);
        int err = 0;
        socklen_t len = sizeof err;
        if (s.ok() && (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)) {
          s = Unavailable("wire: connect " + host + ":" + service + ": " +
                          std::strerror(err != 0 ? err : errno));
        }
      }
    }
    if (s.ok()) {
      ::freeaddrinfo(found);
      return fd;
    }
    ::close(fd);
    last = s;
  }
  ::freeaddrinfo(found);
  return last;
}

}  // namespace aquifer::wire
