// Helpers shared by the wire's socket tests (connection_test.cc, wire_fuzz_test.cc): a deadline
// for one socket call, a poll with a deadline, and a Listener handler that echoes. Header-only.
#pragma once

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <thread>

#include "wire/connection.h"

namespace aquifer::wire::testing {

// 10 s from now: the bound of one socket call in a test.
inline Deadline Soon() { return std::chrono::steady_clock::now() + std::chrono::seconds(10); }

// Polls `pred` every 10 ms for up to 20 s; its last answer.
inline bool WaitFor(const std::function<bool()>& pred) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// A Listener handler: echoes one byte per byte received, until the peer closes.
inline void Echo(Conn& conn, const std::atomic<bool>& stopping) {
  std::array<std::byte, 1> b;
  while (ReadFull(conn, b, /*idle=*/true, stopping).ok()) {
    iovec iov{b.data(), 1};
    if (!WriteFull(conn, &iov, 1).ok()) return;
  }
}

}  // namespace aquifer::wire::testing
