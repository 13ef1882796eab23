// One wire connection: a TCP socket and, when the cluster runs TLS (common/tls.h), the TLS
// session on it. The wires' I/O (chunk_wire.h SendAll/RecvAll, connection.h ReadFull/WriteFull/
// ReadPayload) takes a Conn and goes through OpenSSL when it has a session, else straight to the
// socket, so the frames and handshakes above are the same on both.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <span>
#include <string>

#include "aquifer/status.h"

using SSL = struct ssl_st;

namespace aquifer {
class Tls;
}

namespace aquifer::wire {

using Deadline = std::chrono::steady_clock::time_point;

// Owns the socket and the session: both are freed when the Conn is destroyed or Close()d.
// Move-only. Not thread-safe: one thread uses a connection at a time (the wires' model).
class Conn {
 public:
  Conn() = default;
  explicit Conn(int fd, SSL* ssl = nullptr) noexcept : fd_(fd), ssl_(ssl) {}
  ~Conn() { Close(); }
  Conn(Conn&& other) noexcept;
  Conn& operator=(Conn&& other) noexcept;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  int fd() const { return fd_; }
  SSL* ssl() const { return ssl_; }  // null: plain TCP
  bool valid() const { return fd_ >= 0; }
  // Gives the socket up without closing it (a Conn with no session only); returns it.
  int Release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Frees the session (no close_notify: the peer reads the close as the end of the stream) and
  // closes the socket. Idempotent.
  void Close();

 private:
  int fd_ = -1;
  SSL* ssl_ = nullptr;
};

// The client side of TLS on a connected socket (non-blocking or not; `fd` is owned by the
// result, or closed on failure): a TLS 1.3 handshake with `tls`'s client context that accepts
// only a server whose certificate chains to the cluster's CA and names tls.server_name(), by
// `deadline`. Errors: kUnavailable with OpenSSL's reason or the certificate check's ("TLS
// handshake with HOST:PORT failed: ..."; a server that speaks plain TCP fails here too).
Result<Conn> StartTlsClient(int fd, const Tls& tls, const std::string& peer, Deadline deadline);

// Why a TLS client cannot talk to `host`:`port`, for a refusal's message: connects and runs
// only the TLS handshake (StartTlsClient: no hello, no request), then closes. OK when the
// server's certificate is accepted. Errors: Connect's, or the handshake's reason ("the server's
// certificate: certificate verify failed (tls_ca, tls_server_name)").
Status ProbeTls(const std::string& host, uint16_t port, const Tls& tls, Deadline deadline);

// The server side of TLS on an accepted non-blocking socket, owned by the result: a session
// with `tls`'s server context, its handshake not yet run (StepTlsAccept runs it).
// Errors: kInternal (OpenSSL could not make a session; `fd` is closed).
Result<Conn> NewTlsServerConn(int fd, const Tls& tls);
// One step of that handshake: *done once it is over, else *events is what to poll for.
// Errors: kUnavailable with the reason (a plain-TCP client, a client that refused the
// certificate, a close); the connection is then to be closed.
Status StepTlsAccept(Conn& conn, bool* done, short* events);
// Non-blocking reads and writes of what can go now, on either kind of connection: the byte
// count, 0 when nothing could (then poll for *events). Errors: kUnavailable ("wire: connection
// closed", or the reason); the connection is then to be closed.
Result<size_t> ReadSome(Conn& conn, std::span<std::byte> out, short* events);
Result<size_t> WriteSome(Conn& conn, std::span<const std::byte> bytes, short* events);

// TLS halves of the wires' I/O, called by SendAll, RecvAll, ReadFull and WriteFull when the
// connection has a session; the same contracts as theirs. Short leading pieces of `iov` go out
// as one TLS record (a frame header and a small payload: one record, one send).
Status SendAllTls(Conn& conn, struct iovec* iov, int iov_count, Deadline deadline);
Status RecvAllTls(Conn& conn, std::span<std::byte> out, Deadline deadline, bool wait_first);
Status ReadFullTls(Conn& conn, std::span<std::byte> out, bool idle,
                   const std::atomic<bool>& stopping);

// Waits until `fd` is ready for `events` (poll's) or the deadline passes. Errors: kUnavailable
// ("wire: timed out", or poll's errno text).
Status Wait(int fd, short events, Deadline deadline);

}  // namespace aquifer::wire
