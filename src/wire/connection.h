// The wire's connection plumbing, shared by the chunk wire (chunk_wire.h) and the metadata wire
// (meta_wire.h): a server-side TCP listener with one thread per connection and the hello, and a
// client-side pool of idle connections to one server. No protobuf, no gRPC.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "aquifer/status.h"
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
Status ReadFull(int fd, std::span<std::byte> out, bool idle, const std::atomic<bool>& stopping);
Status WriteFull(int fd, struct iovec* iov, int iov_count);

// Reads a frame's payload of `bytes` into *out (replaced), growing it only after bytes arrived
// and by at most as much as has arrived (64 KiB at least, 1 MiB at most), so a sender that
// announces a large payload and stalls costs about what it sent. The whole payload must arrive
// by `deadline`. Errors: kUnavailable.
Status ReadPayload(int fd, uint64_t bytes, std::string* out, Deadline deadline);

class Listener {
 public:
  // Serves one connection until it returns (the listener then shuts the socket down and, later,
  // closes it). `stopping` is set when the listener shuts down.
  using Serve = std::function<void(int fd, const std::atomic<bool>& stopping)>;

  // Listens on `host`:`port` (port 0 = the kernel chooses; host "" = every address); each
  // accepted connection gets the hello with `instance`, then `serve` on its own thread. At most
  // `max_connections` are served at once; one more is closed at accept. `name` labels log lines.
  // Errors: kUnavailable when the address cannot be bound; kInvalidArgument for a bad host.
  static Result<std::unique_ptr<Listener>> Start(const std::string& name, const std::string& host,
                                                 uint16_t port, uint64_t instance, Serve serve,
                                                 uint32_t max_connections = 1024);
  // Stops accepting, shuts every connection down (waking their threads) and joins them.
  // Idempotent.
  void Shutdown();
  ~Listener();

  uint16_t port() const;
  uint64_t instance() const;
  uint64_t connections_accepted() const;
  uint64_t connections_refused() const;  // closed at accept: max_connections were open
  uint64_t connections_open() const;

  struct Impl;

 private:
  explicit Listener(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Idle connections to one server endpoint (host, port, and the instance its hello must carry).
// Thread-safe.
class ConnectionPool {
 public:
  ConnectionPool(std::string host, uint16_t port, uint64_t instance, size_t max_idle = 32);
  ~ConnectionPool();

  uint16_t port() const { return port_; }
  uint64_t instance() const { return instance_; }

  // An idle connection that the server has not closed meanwhile (*reused = true), or a new one
  // whose hello carries the expected instance. Errors: kUnavailable (refused, timed out, a
  // hello from another process or protocol version).
  Result<int> Acquire(Deadline deadline, bool* reused);
  // Returns a connection whose last reply was read whole (else close it instead).
  void Release(int fd);
  // Closes every idle connection.
  void DropIdle();

 private:
  const std::string host_;
  const uint16_t port_;
  const uint64_t instance_;
  const size_t max_idle_;
  std::mutex mu_;  // guards idle_
  std::vector<int> idle_;
};

}  // namespace aquifer::wire
