// wire::Listener and wire::ConnectionPool on loopback: the hello, connections freed as soon as
// they end, the connection limit, a pool that never hands out a connection the server closed,
// and the cluster-key handshake (refusals, and what a refused or stalled handshake costs).
#include "wire/connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <dirent.h>

#include <functional>
#include <thread>

#include "wire_test_support.h"

namespace aquifer::wire {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Echo;
using testing::Soon;
using testing::WaitFor;

TEST(ConnectionTest, ClosedConnectionsAreFreedAtOnceAndTheLimitIsKept) {
  Result<std::unique_ptr<Listener>> l = Listener::Start("test", "127.0.0.1", 0, 42, Echo, 3);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ConnectionPool pool("127.0.0.1", (*l)->port(), 42);
  std::vector<Conn> fds;
  for (int i = 0; i < 3; ++i) {
    bool reused = true;
    Result<Conn> fd = pool.Acquire(Soon(), &reused);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    EXPECT_FALSE(reused);
    fds.push_back(std::move(*fd));
  }
  EXPECT_TRUE(WaitFor([&] { return (*l)->connections_open() == 3; }));
  // A fourth is closed at accept: no hello.
  bool reused = false;
  Result<Conn> fourth = pool.Acquire(Soon(), &reused);
  EXPECT_FALSE(fourth.ok());
  EXPECT_TRUE(WaitFor([&] { return (*l)->connections_refused() == 1; }));
  // Closing them frees their server side with no new connection arriving.
  fds.clear();  // closes them
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
  Result<Conn> fd = pool.Acquire(Soon(), &reused);
  ASSERT_TRUE(fd.ok());
  pool.Release(std::move(*fd));
  fd = pool.Acquire(Soon(), &reused);
  ASSERT_TRUE(fd.ok());
  EXPECT_TRUE(reused);  // the idle one, still open
  pool.Release(std::move(*fd));
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

ClusterKey KeyOf(uint8_t fill) {
  ClusterKey k;
  k.bytes.fill(static_cast<std::byte>(fill));
  return k;
}

// Threads of this process (entries of /proc/self/task).
int ThreadCount() {
  DIR* d = ::opendir("/proc/self/task");
  int n = 0;
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

// One echo round trip on a served connection.
template <class Socket>
bool Echoes(Socket& fd) {
  std::array<std::byte, 1> b{std::byte{42}};
  iovec iov{b.data(), 1};
  if (!SendAll(fd, &iov, 1, Soon()).ok()) return false;
  b[0] = std::byte{0};
  return RecvAll(fd, b, Soon()).ok() && b[0] == std::byte{42};
}

TEST(ConnectionAuthTest, OnlyAClientThatProvesTheKeyIsServed) {
  const ClusterKey key = KeyOf(1);
  auto l = Listener::Start("test", "127.0.0.1", 0, 9, Echo, 1024, key);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  const uint16_t port = (*l)->port();
  bool reused = false;

  ConnectionPool right("127.0.0.1", port, 9, 32, key);
  Result<Conn> fd = right.Acquire(Soon(), &reused);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_TRUE(Echoes(*fd));

  struct Row {
    const char* name;
    std::optional<ClusterKey> key;
    const char* message;
  } rows[] = {
      {"wrong key", KeyOf(2), "refused the handshake"},
      {"no key", std::nullopt, "requires the cluster key"},
  };
  for (const Row& row : rows) {
    ConnectionPool pool("127.0.0.1", port, 9, 32, row.key);
    Result<Conn> refused = pool.Acquire(Soon(), &reused);
    ASSERT_FALSE(refused.ok()) << row.name;
    EXPECT_EQ(refused.status().code(), Code::kUnavailable) << row.name;
    EXPECT_NE(refused.status().message().find(row.message), std::string::npos)
        << row.name << ": " << refused.status().message();
  }
  EXPECT_TRUE(WaitFor([&] { return (*l)->connections_unauthenticated() == 2; }))
      << (*l)->connections_unauthenticated();
  EXPECT_EQ((*l)->connections_accepted(), 1u);  // only the right key got a thread
  fd->Close();
}

TEST(ConnectionAuthTest, AKeyedClientRefusesAServerWithoutTheKey) {
  auto l = Listener::Start("test", "127.0.0.1", 0, 5, Echo, 1024, std::nullopt);
  ASSERT_TRUE(l.ok());
  ConnectionPool pool("127.0.0.1", (*l)->port(), 5, 32, KeyOf(1));
  bool reused = false;
  Result<Conn> fd = pool.Acquire(Soon(), &reused);
  ASSERT_FALSE(fd.ok());
  EXPECT_NE(fd.status().message().find("cannot prove"), std::string::npos)
      << fd.status().message();
  // A server with another key fails its own proof: the client never sends a request to it.
}

// Handshakes cut short or wrong, sent as raw bytes: each is refused and closed, and while they
// are pending or being refused the server starts no thread for them.
TEST(ConnectionAuthTest, TruncatedOrWrongHandshakesAreClosedAndCostNoThread) {
  const ClusterKey key = KeyOf(1);
  auto l = Listener::Start("test", "127.0.0.1", 0, 11, Echo, 1024, key);
  ASSERT_TRUE(l.ok());
  const uint16_t port = (*l)->port();
  const int threads_before = ThreadCount();

  // 100 connections that send nothing: pending handshakes, no thread each.
  std::vector<int> silent;
  for (int i = 0; i < 100; ++i) {
    Result<int> fd = Connect("127.0.0.1", port, Soon());
    ASSERT_TRUE(fd.ok());
    silent.push_back(*fd);
  }
  EXPECT_TRUE(WaitFor([&] { return (*l)->handshakes_pending() == 100; }))
      << (*l)->handshakes_pending();
  EXPECT_EQ(ThreadCount(), threads_before);
  EXPECT_EQ((*l)->connections_open(), 0u);
  for (int fd : silent) ::close(fd);
  EXPECT_TRUE(WaitFor([&] { return (*l)->handshakes_pending() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return (*l)->connections_unauthenticated() == 100; }));

  // Answers of 0, 1, 32 and 63 bytes then a close, 64 bytes of garbage, and a proof made with
  // the right key for another connection's nonce (a replay): all refused.
  struct Row {
    const char* name;
    size_t bytes;  // of the 64-byte answer sent before closing (64: the whole answer)
    bool replay;
  } rows[] = {{"nothing", 0, false}, {"1 byte", 1, false},   {"the nonce only", 32, false},
              {"63 bytes", 63, false}, {"garbage", 64, false}, {"replayed proof", 64, true}};
  // A proof from one good handshake, for the replay row.
  std::array<std::byte, kNonceBytes + kMacBytes> old_answer{};
  {
    Result<int> fd = Connect("127.0.0.1", port, Soon());
    ASSERT_TRUE(fd.ok());
    std::array<std::byte, kHelloBytes + kNonceBytes> first;
    ASSERT_TRUE(RecvAll(*fd, first, Soon()).ok());
    Nonce ns, nc{};
    std::copy_n(first.begin() + kHelloBytes, kNonceBytes, ns.begin());
    const Mac proof = WireClientProof(key, 11, ns, nc);
    std::copy(proof.begin(), proof.end(), old_answer.begin() + kNonceBytes);
    iovec iov{old_answer.data(), old_answer.size()};
    ASSERT_TRUE(SendAll(*fd, &iov, 1, Soon()).ok());
    Mac server_proof;
    ASSERT_TRUE(RecvAll(*fd, server_proof, Soon()).ok());
    EXPECT_TRUE(MacEqual(server_proof, WireServerProof(key, 11, ns, nc)));
    EXPECT_TRUE(Echoes(*fd));
    ::close(*fd);
  }
  const uint64_t refused_before = (*l)->connections_unauthenticated();
  for (const Row& row : rows) {
    Result<int> fd = Connect("127.0.0.1", port, Soon());
    ASSERT_TRUE(fd.ok());
    std::array<std::byte, kHelloBytes + kNonceBytes> first;
    ASSERT_TRUE(RecvAll(*fd, first, Soon()).ok()) << row.name;
    Result<Hello> hello = DecodeHello(std::span(first).first(kHelloBytes));
    ASSERT_TRUE(hello.ok() && hello->auth) << row.name;
    std::array<std::byte, kNonceBytes + kMacBytes> answer{};
    if (row.replay) answer = old_answer;
    for (size_t i = 0; i < answer.size() && !row.replay; ++i) answer[i] = std::byte(i * 7 + 1);
    iovec iov{answer.data(), row.bytes};
    if (row.bytes > 0) ASSERT_TRUE(SendAll(*fd, &iov, 1, Soon()).ok()) << row.name;
    if (row.bytes < answer.size()) ::shutdown(*fd, SHUT_WR);
    // The server closes: no proof comes back.
    std::array<std::byte, 1> b;
    EXPECT_FALSE(RecvAll(*fd, b, Soon()).ok()) << row.name;
    ::close(*fd);
  }
  EXPECT_TRUE(WaitFor([&] {
    return (*l)->connections_unauthenticated() == refused_before + std::size(rows);
  })) << (*l)->connections_unauthenticated();
  EXPECT_EQ((*l)->connections_accepted(), 1u);  // the one good handshake
}

TEST(ConnectionAuthTest, AStalledHandshakeIsClosedAtItsDeadline) {
  auto l = Listener::Start("test", "127.0.0.1", 0, 3, Echo, 1024, KeyOf(1));
  ASSERT_TRUE(l.ok());
  Result<int> fd = Connect("127.0.0.1", (*l)->port(), Soon());
  ASSERT_TRUE(fd.ok());
  const auto start = Clock::now();
  std::array<std::byte, kHelloBytes + kNonceBytes> first;
  ASSERT_TRUE(RecvAll(*fd, first, Soon()).ok());
  std::array<std::byte, 1> b;
  // The server closes it (the recv ends) about kHandshakeTimeoutSeconds after the accept.
  EXPECT_FALSE(RecvAll(*fd, b, start + std::chrono::seconds(3 * kHandshakeTimeoutSeconds)).ok());
  EXPECT_GE(Clock::now() - start, std::chrono::seconds(kHandshakeTimeoutSeconds - 1));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2 * kHandshakeTimeoutSeconds));
  EXPECT_EQ((*l)->connections_unauthenticated(), 1u);
  ::close(*fd);
}

}  // namespace
}  // namespace aquifer::wire
