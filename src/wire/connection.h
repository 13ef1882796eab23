// The wire's connection plumbing, shared by the chunk wire (chunk_wire.h) and the metadata wire
// (meta_wire.h): a server-side TCP listener with the hello, the cluster-key handshake and one
// thread per authenticated connection, and a client-side pool of idle connections to one server.
// No protobuf, no gRPC.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "aquifer/status.h"
#include "common/cluster_key.h"
#include "common/tls.h"
#include "wire/chunk_wire.h"

namespace aquifer::wire {

// Blocking I/O for a server's connection (Listener sets SO_RCVTIMEO / SO_SNDTIMEO to
// kFrameTimeoutSeconds on it): one system call per transfer in the common case. ReadFull with
// `idle` waits on past the timeout while no byte of the frame has come (a connection between
// requests), up to kIdleTimeoutSeconds in all, unless `stopping` is set; a header cut off in the
// middle is dropped within two frame timeouts. Errors: kUnavailable ("connection closed", "idle",
// a timeout, or the errno text).
inline constexpr int kFrameTimeoutSeconds = 60;
inline constexpr int kIdleTimeoutSeconds = 600;
inline constexpr int kHandshakeTimeoutSeconds = 5;
inline constexpr size_t kMaxPendingHandshakes = 256;
// The Conn forms go through the connection's TLS session when it has one (conn.h).
Status ReadFull(int fd, std::span<std::byte> out, bool idle, const std::atomic<bool>& stopping);
Status ReadFull(Conn& conn, std::span<std::byte> out, bool idle,
                const std::atomic<bool>& stopping);
Status WriteFull(int fd, struct iovec* iov, int iov_count);
Status WriteFull(Conn& conn, struct iovec* iov, int iov_count);

// Reads a frame's payload of `bytes` into *out (replaced), growing it only after bytes arrived
// and by at most as much as has arrived (64 KiB at least, 1 MiB at most), so a sender that
// announces a large payload and stalls costs about what it sent. The whole payload must arrive
// by `deadline`. Errors: kUnavailable.
Status ReadPayload(int fd, uint64_t bytes, std::string* out, Deadline deadline);
Status ReadPayload(Conn& conn, uint64_t bytes, std::string* out, Deadline deadline);

// The server's check of a client's handshake answer, the bytes the client sends after the
// server's hello and nonce: its nonce then its proof (kNonceBytes + kMacBytes bytes). OK when
// `answer` is exactly that long and the proof is WireClientProof(key, instance, server_nonce,
// its nonce); *client_nonce is then that nonce. Errors: kPermissionDenied ("handshake answer of
// N bytes", "wrong key"). Pure (no I/O, no allocation on success); thread-safe. Listener runs
// it; the fuzzers feed it arbitrary bytes.
Status CheckHandshakeAnswer(const ClusterKey& key, uint64_t instance, const Nonce& server_nonce,
                            std::span<const std::byte> answer, Nonce* client_nonce);

class Listener {
 public:
  // Serves one connection until it returns (the listener then shuts the socket down and, later,
  // closes it). `stopping` is set when the listener shuts down.
  using Serve = std::function<void(Conn& conn, const std::atomic<bool>& stopping)>;

  // Listens on `host`:`port` (port 0 = the kernel chooses; host "" = every address); each
  // accepted connection gets the hello with `instance`, then `serve` on its own thread. At most
  // `max_connections` are served at once; one more is closed at accept. `name` labels log lines.
  //
  // With a `key`, the hello says so and the connection must pass the cluster-key handshake
  // (common/cluster_key.h) before it gets a thread: the accepting thread runs every pending
  // handshake itself with non-blocking sockets and poll(2), holding about 150 bytes per
  // connection, at most kMaxPendingHandshakes at once (more are closed at accept), each for at
  // most kHandshakeTimeoutSeconds. A wrong proof, a close or a timeout closes the connection at
  // once and counts it in connections_unauthenticated(), with at most one log line per 10 s.
  // Without a key every connection is served, as before the key existed.
  //
  // With `tls`, a TLS handshake (tls->server_ctx(), common/tls.h) comes before the hello, run by
  // the accepting thread the same way and within the same deadline and limits; one that fails
  // (a plain-TCP client, a client that does not trust the certificate) is refused and counted
  // as above. Everything after it, the hello included, is inside the TLS session.
  // Errors: kUnavailable when the address cannot be bound; kInvalidArgument for a bad host.
  static Result<std::unique_ptr<Listener>> Start(const std::string& name, const std::string& host,
                                                 uint16_t port, uint64_t instance, Serve serve,
                                                 uint32_t max_connections = 1024,
                                                 std::optional<ClusterKey> key =
                                                     ProcessClusterKey(),
                                                 std::shared_ptr<const Tls> tls = ProcessTls());
  // Stops accepting, shuts every connection's read side down (waking threads waiting for a
  // request), lets replies being made go out for up to 1 s, then shuts the rest down fully,
  // and joins every connection thread. Idempotent.
  void Shutdown();
  ~Listener();

  uint16_t port() const;
  uint64_t instance() const;
  uint64_t connections_accepted() const;
  uint64_t connections_refused() const;  // closed at accept: max_connections were open
  uint64_t connections_open() const;
  uint64_t connections_unauthenticated() const;  // closed in the handshake (refused)
  uint64_t handshakes_pending() const;            // accepted, handshake not yet over

  struct Impl;

 private:
  explicit Listener(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Idle connections to one server endpoint (host, port, and the instance its hello must carry).
// With a `key`, a new connection runs the client side of the cluster-key handshake and refuses a
// server that does not prove the key (or asks for none); without one, a server that asks for
// the handshake is refused with a message naming the missing key. With `tls`, each new
// connection runs a TLS handshake (StartTlsClient) first. Thread-safe.
class ConnectionPool {
 public:
  ConnectionPool(std::string host, uint16_t port, uint64_t instance, size_t max_idle = 32,
                 std::optional<ClusterKey> key = ProcessClusterKey(),
                 std::shared_ptr<const Tls> tls = ProcessTls());
  ~ConnectionPool();

  uint16_t port() const { return port_; }
  uint64_t instance() const { return instance_; }

  // An idle connection that the server has not closed meanwhile (*reused = true), or a new one
  // whose hello carries the expected instance and whose handshake passed. Errors: kUnavailable
  // (refused, timed out, a hello from another process or protocol version, a handshake that
  // failed: a wrong key on either side, or a key on one side only).
  Result<Conn> Acquire(Deadline deadline, bool* reused);
  // Returns a connection whose last reply was read whole (else let it close instead).
  void Release(Conn conn);
  // Closes every idle connection.
  void DropIdle();

 private:
  // The client side of the handshake after `hello` on a new connection. Errors: kUnavailable.
  Status Handshake(Conn& conn, const Hello& hello, Deadline deadline) const;

  const std::string host_;
  const uint16_t port_;
  const uint64_t instance_;
  const size_t max_idle_;
  const std::optional<ClusterKey> key_;
  const std::shared_ptr<const Tls> tls_;
  std::mutex mu_;  // guards idle_
  std::vector<Conn> idle_;
};

}  // namespace aquifer::wire
