// Conn and the wires' TLS I/O (conn.h), on OpenSSL 3.
#include "wire/conn.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>

#include "common/tls.h"
#include "wire/connection.h"

namespace aquifer::wire {

Conn::Conn(Conn&& other) noexcept : fd_(other.fd_), ssl_(other.ssl_) {
  other.fd_ = -1;
  other.ssl_ = nullptr;
}

Conn& Conn::operator=(Conn&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    ssl_ = other.ssl_;
    other.fd_ = -1;
    other.ssl_ = nullptr;
  }
  return *this;
}

void Conn::Close() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (fd_ >= 0) ::close(fd_);
  ssl_ = nullptr;
  fd_ = -1;
}

Status Wait(int fd, short events, Deadline deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Unavailable("wire: timed out");
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 60000)));
    if (n > 0) return OkStatus();  // readable, writable, or an error the next call reports
    if (n < 0 && errno != EINTR) return Unavailable(std::string("wire: poll: ") +
                                                    std::strerror(errno));
  }
}

namespace {

// What an SSL_read/SSL_write/SSL_do_handshake result `rc` means: OK to retry after waiting for
// *events (POLLIN or POLLOUT), or the error that ends the connection.
Status Classify(SSL* ssl, int rc, short* events) {
  const int err = SSL_get_error(ssl, rc);
  switch (err) {
    case SSL_ERROR_WANT_READ:
      *events = POLLIN;
      return OkStatus();
    case SSL_ERROR_WANT_WRITE:
      *events = POLLOUT;
      return OkStatus();
    case SSL_ERROR_ZERO_RETURN:
      return Unavailable("wire: connection closed");
    case SSL_ERROR_SYSCALL: {
      const int e = errno;
      const std::string reason = TakeOpenSslErrors();
      if (e == EINTR) {
        *events = 0;
        return OkStatus();
      }
      if (e == 0 || e == ECONNRESET || e == EPIPE) return Unavailable("wire: connection closed");
      return Unavailable(std::string("wire: TLS: ") + std::strerror(e) +
                         (reason.empty() ? "" : " (" + reason + ")"));
    }
    default: {
      const std::string reason = TakeOpenSslErrors();
      return Unavailable("wire: TLS: " + (reason.empty() ? "error " + std::to_string(err)
                                                         : reason));
    }
  }
}

// One SSL_read / SSL_write of at most `len` bytes (OpenSSL takes an int length) with this
// thread's error queue emptied first, so SSL_get_error sees only this call's reason.
int ReadTls(SSL* ssl, std::byte* out, size_t len) {
  ERR_clear_error();
  return SSL_read(ssl, out, static_cast<int>(std::min<size_t>(len, INT_MAX / 2)));
}
int WriteTlsOnce(SSL* ssl, const std::byte* data, size_t len) {
  ERR_clear_error();
  return SSL_write(ssl, data, static_cast<int>(std::min<size_t>(len, INT_MAX / 2)));
}

// Writes all of `data`, waiting as OpenSSL asks, by `deadline`.
Status WriteTls(Conn& conn, const std::byte* data, size_t len, Deadline deadline) {
  size_t done = 0;
  while (done < len) {
    const int n = WriteTlsOnce(conn.ssl(), data + done, len - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    short events = 0;
    AQ_RETURN_IF_ERROR(Classify(conn.ssl(), n, &events));
    if (events != 0) AQ_RETURN_IF_ERROR(Wait(conn.fd(), events, deadline));
  }
  return OkStatus();
}

}  // namespace

Result<Conn> StartTlsClient(int fd, const Tls& tls, const std::string& peer,
                            Deadline deadline) {
  Conn conn(fd, SSL_new(tls.client_ctx()));
  auto failed = [&](const std::string& why) {
    return Unavailable("TLS handshake with " + peer + " failed: " + why);
  };
  if (conn.ssl() == nullptr) return failed(TakeOpenSslErrors());
  if (SSL_set_fd(conn.ssl(), fd) != 1 ||
      SSL_set1_host(conn.ssl(), tls.server_name().c_str()) != 1) {
    return failed(TakeOpenSslErrors());
  }
  SSL_set_connect_state(conn.ssl());
  for (;;) {
    ERR_clear_error();
    const int rc = SSL_do_handshake(conn.ssl());
    if (rc == 1) return conn;
    short events = 0;
    Status s = Classify(conn.ssl(), rc, &events);
    if (!s.ok()) {
      const long verify = SSL_get_verify_result(conn.ssl());
      if (verify != X509_V_OK) {
        return failed(std::string("the server's certificate: ") +
                      X509_verify_cert_error_string(verify) + " (tls_ca, tls_server_name)");
      }
      return failed(s.message() + " (does the server run TLS?)");
    }
    if (events != 0) {
      Status waited = Wait(fd, events, deadline);
      if (!waited.ok()) return failed(waited.message());
    }
  }
}

Status ProbeTls(const std::string& host, uint16_t port, const Tls& tls, Deadline deadline) {
  Result<int> fd = Connect(host, port, deadline);
  if (!fd.ok()) return fd.status();
  return StartTlsClient(*fd, tls, host + ":" + std::to_string(port), deadline).status();
}

Result<Conn> NewTlsServerConn(int fd, const Tls& tls) {
  Conn conn(fd, SSL_new(tls.server_ctx()));
  if (conn.ssl() == nullptr || SSL_set_fd(conn.ssl(), fd) != 1) {
    return Internal("wire: no TLS session: " + TakeOpenSslErrors());
  }
  SSL_set_accept_state(conn.ssl());
  return conn;
}

Status StepTlsAccept(Conn& conn, bool* done, short* events) {
  ERR_clear_error();
  const int rc = SSL_do_handshake(conn.ssl());
  *done = rc == 1;
  if (*done) return OkStatus();
  AQ_RETURN_IF_ERROR(Classify(conn.ssl(), rc, events));
  if (*events == 0) *events = POLLIN;  // EINTR: poll again
  return OkStatus();
}

Result<size_t> ReadSome(Conn& conn, std::span<std::byte> out, short* events) {
  *events = POLLIN;
  if (out.empty()) return size_t{0};
  if (conn.ssl() == nullptr) {
    const ssize_t n = ::recv(conn.fd(), out.data(), out.size(), MSG_DONTWAIT);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) return Unavailable("wire: connection closed");
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return size_t{0};
    return Unavailable(std::string("wire: recv: ") + std::strerror(errno));
  }
  const int n = ReadTls(conn.ssl(), out.data(), out.size());
  if (n > 0) return static_cast<size_t>(n);
  AQ_RETURN_IF_ERROR(Classify(conn.ssl(), n, events));
  if (*events == 0) *events = POLLIN;
  return size_t{0};
}

Result<size_t> WriteSome(Conn& conn, std::span<const std::byte> bytes, short* events) {
  *events = POLLOUT;
  if (bytes.empty()) return size_t{0};
  if (conn.ssl() == nullptr) {
    const ssize_t n = ::send(conn.fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return size_t{0};
    return Unavailable(std::string("wire: send: ") + std::strerror(errno));
  }
  const int n = WriteTlsOnce(conn.ssl(), bytes.data(), bytes.size());
  if (n > 0) return static_cast<size_t>(n);
  AQ_RETURN_IF_ERROR(Classify(conn.ssl(), n, events));
  if (*events == 0) *events = POLLOUT;
  return size_t{0};
}

Status SendAllTls(Conn& conn, struct iovec* iov, int iov_count, Deadline deadline) {
  ConsumeIov(iov, iov_count, 0);
  std::array<std::byte, 16384> joined;
  while (iov_count > 0) {
    // Entries that fit together in one record go as one: a frame header with its small
    // payload costs one record and one send, not two.
    size_t bytes = 0;
    int pieces = 0;
    while (pieces < iov_count && bytes + iov[pieces].iov_len <= joined.size()) {
      std::memcpy(joined.data() + bytes, iov[pieces].iov_base, iov[pieces].iov_len);
      bytes += iov[pieces].iov_len;
      ++pieces;
    }
    if (pieces >= 2) {
      AQ_RETURN_IF_ERROR(WriteTls(conn, joined.data(), bytes, deadline));
    } else {
      bytes = iov[0].iov_len;
      AQ_RETURN_IF_ERROR(
          WriteTls(conn, static_cast<const std::byte*>(iov[0].iov_base), bytes, deadline));
    }
    ConsumeIov(iov, iov_count, bytes);
  }
  return OkStatus();
}

Status RecvAllTls(Conn& conn, std::span<std::byte> out, Deadline deadline, bool wait_first) {
  // Bytes OpenSSL already read (decrypted or not: read-ahead) are not on the socket: poll only
  // when it holds none.
  if (wait_first && SSL_has_pending(conn.ssl()) == 0) {
    AQ_RETURN_IF_ERROR(Wait(conn.fd(), POLLIN, deadline));
  }
  size_t got = 0;
  while (got < out.size()) {
    const int n = ReadTls(conn.ssl(), out.data() + got, out.size() - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    short events = 0;
    AQ_RETURN_IF_ERROR(Classify(conn.ssl(), n, &events));
    if (events != 0) AQ_RETURN_IF_ERROR(Wait(conn.fd(), events, deadline));
  }
  return OkStatus();
}

Status ReadFullTls(Conn& conn, std::span<std::byte> out, bool idle,
                   const std::atomic<bool>& stopping) {
  size_t got = 0;
  int idle_waits = 0;
  while (got < out.size()) {
    // A blocking socket: SSL_read waits up to the socket's SO_RCVTIMEO, then asks to be called
    // again (SSL_ERROR_WANT_READ), as recv's EAGAIN in ReadFull.
    const int n = ReadTls(conn.ssl(), out.data() + got, out.size() - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    short events = 0;
    AQ_RETURN_IF_ERROR(Classify(conn.ssl(), n, &events));
    if (events == 0) continue;  // EINTR
    if (events == POLLIN && idle && got == 0 && !stopping) {
      if (++idle_waits * kFrameTimeoutSeconds >= kIdleTimeoutSeconds) {
        return Unavailable("wire: idle");
      }
      continue;
    }
    if (events == POLLOUT) {
      AQ_RETURN_IF_ERROR(Wait(conn.fd(), POLLOUT,
                              std::chrono::steady_clock::now() +
                                  std::chrono::seconds(kFrameTimeoutSeconds)));
      continue;
    }
    return Unavailable("wire: recv: timed out");
  }
  return OkStatus();
}

}  // namespace aquifer::wire
