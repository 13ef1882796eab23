// wire::Listener and wire::ConnectionPool on loopback: the hello, connections freed as soon as
// they end, the connection limit, and a pool that never hands out a connection the server closed.
#include "wire/connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <functional>
#include <thread>

namespace aquifer::wire {
namespace {

using Clock = std::chrono::steady_clock;

Deadline Soon() { return Clock::now() + std::chrono::seconds(10); }

bool WaitFor(const std::function<bool()>& pred) {
  const auto end = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// Serves by echoing one byte per byte received, until the peer closes.
void Echo(int fd, const std::atomic<bool>& stopping) {
  std::array<std::byte, 1> b;
  while (ReadFull(fd, b, /*idle=*/true, stopping).ok()) {
    iovec iov{b.data(), 1};
    if (!WriteFull(fd, &iov, 1).ok()) return;
  }
}

TEST(ConnectionTest, ClosedConnectionsAreFreedAtOnceAndTheLimitIsKept) {
  Result<std::unique_ptr<Listener>> l = Listener::Start("test", "127.0.0.1", 0, 42, Echo, 3);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ConnectionPool pool("127.0.0.1", (*l)->port(), 42);
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) {
    bool reused = true;
    Result<int> fd = pool.Acquire(Soon(), &reused);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    EXPECT_FALSE(reused);
    fds.push_back(*fd);
  }
  EXPECT_TRUE(WaitFor([&] { return (*l)->connections_open() == 3; }));
  // A fourth is closed at accept: no hello.
  bool reused = false;
  Result<int> fourth = pool.Acquire(Soon(), &reused);
  EXPECT_FALSE(fourth.ok());
  EXPECT_TRUE(WaitFor([&] { return (*l)->connections_refused() == 1; }));
  // Closing them frees their server side with no new connection arriving.
  for (int fd : fds) ::close(fd);
  EXPECT_TRUE(WaitFor([&] { return (*l)->connections_open() == 0; }))
      << (*l)->connections_open() << " still open";
  (*l)->Shutdown();
}

TEST(ConnectionTest, PoolNeverReusesAConnectionTheServerClosedAndChecksTheHello) {
  auto l = Listener::Start("test", "127.0.0.1", 0, 7, Echo);
  ASSERT_TRUE(l.ok());
  const uint16_t port = (*l)->port();
  ConnectionPool pool("127.0.0.1", port, 7);
  bool reused = false;
  Result<int> fd = pool.Acquire(Soon(), &reused);
  ASSERT_TRUE(fd.ok());
  pool.Release(*fd);
  fd = pool.Acquire(Soon(), &reused);
  ASSERT_TRUE(fd.ok());
  EXPECT_TRUE(reused);  // the idle one, still open
  pool.Release(*fd);
  // The server goes away (and its idle connection with it): the pool does not hand it out.
  (*l)->Shutdown();
  l->reset();
  fd = pool.Acquire(Soon(), &reused);
  EXPECT_FALSE(fd.ok());  // nothing listens any more
  // A server on the same port with another token is refused by the hello check.
  auto other = Listener::Start("test", "127.0.0.1", port, 8, Echo);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  fd = pool.Acquire(Soon(), &reused);
  ASSERT_FALSE(fd.ok());
  EXPECT_NE(fd.status().message().find("another process"), std::string::npos)
      << fd.status().ToString();
}

TEST(ConnectionTest, ReadPayloadGrowsWithWhatArrivesAndKeepsTheDeadline) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_EQ(::write(sv[0], "hello", 5), 5);
  std::string out;
  const auto start = Clock::now();
  Status s = ReadPayload(sv[1], 16 << 20, &out, start + std::chrono::milliseconds(300));
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(290));
  EXPECT_LE(out.capacity(), (128u << 10));  // no 16 MiB (or 1 MiB) buffer for 5 bytes
  ::close(sv[0]);
  ::close(sv[1]);
}

}  // namespace
}  // namespace aquifer::wire
