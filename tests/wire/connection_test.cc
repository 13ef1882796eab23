// wire::Listener and wire::ConnectionPool on loopback: the hello, connections freed as soon as
// they end, the connection limit, a pool that never hands out a connection the server closed,
// and the cluster-key handshake (refusals, and what a refused or stalled handshake costs).
#include "wire/connection.h"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <dirent.h>

#include <cstring>
#include <functional>
#include <thread>

#include "testing/test_util.h"
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

// TLS under the wire (common/tls.h): the hello, the key handshake and the frames inside a TLS
// session; clients that do not speak TLS or do not trust the certificate are refused in the
// accepting thread, with no thread of their own.
class ConnectionTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);  // OpenSSL writes with write(2), as the daemons do
    ASSERT_TRUE(scratch_.ok());
    ASSERT_TRUE(WriteNewTlsFiles(scratch_.path() + "/a", "aquifer").ok());
    ASSERT_TRUE(WriteNewTlsFiles(scratch_.path() + "/b", "aquifer").ok());
    server_ = Load("a", true);
    client_ = Load("a", false);
    other_ca_client_ = Load("b", false);
    ASSERT_TRUE(server_ && client_ && other_ca_client_);
  }
  std::shared_ptr<const Tls> Load(const std::string& dir, bool server) {
    const std::string d = scratch_.path() + "/" + dir;
    TlsFiles f;
    f.ca_file = d + "/ca.pem";
    if (server) {
      f.cert_file = d + "/server.pem";
      f.key_file = d + "/server.key";
    }
    Result<std::shared_ptr<const Tls>> tls = Tls::Load(f, server);
    EXPECT_TRUE(tls.ok()) << tls.status().ToString();
    return tls.ok() ? *tls : nullptr;
  }
  aquifer::testing::ScratchDir scratch_{"aq-conn-tls"};
  std::shared_ptr<const Tls> server_, client_, other_ca_client_;
};

// A handler that echoes frames: an 8-byte length, then that many bytes, sent back in pieces.
void EchoFrames(Conn& conn, const std::atomic<bool>& stopping) {
  for (;;) {
    std::array<std::byte, 8> head;
    if (!ReadFull(conn, head, /*idle=*/true, stopping).ok()) return;
    uint64_t n = 0;
    std::memcpy(&n, head.data(), 8);
    std::string body;
    if (!ReadPayload(conn, n, &body, Soon()).ok()) return;
    const size_t cut = body.size() / 3;
    iovec iov[3] = {{head.data(), head.size()},
                    {body.data(), cut},
                    {body.data() + cut, body.size() - cut}};
    if (!WriteFull(conn, iov, 3).ok()) return;
  }
}

TEST_F(ConnectionTlsTest, FramesOfEverySizeCrossATlsConnectionWhole) {
  const ClusterKey key = KeyOf(1);
  auto l = Listener::Start("tls", "127.0.0.1", 0, 21, EchoFrames, 1024, key, server_);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ConnectionPool pool("127.0.0.1", (*l)->port(), 21, 4, key, client_);
  for (const uint64_t size : {uint64_t{0}, uint64_t{1}, uint64_t{100}, uint64_t{16383},
                              uint64_t{16384}, uint64_t{70000}, uint64_t{4} << 20}) {
    bool reused = false;
    Result<Conn> conn = pool.Acquire(Soon(), &reused);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    ASSERT_NE(conn->ssl(), nullptr);
    std::string body(size, '\0');
    for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 131 + size);
    std::array<std::byte, 8> head;
    std::memcpy(head.data(), &size, 8);
    iovec iov[2] = {{head.data(), 8}, {body.data(), body.size()}};
    ASSERT_TRUE(SendAll(*conn, iov, 2, Soon()).ok()) << size;
    std::array<std::byte, 8> back_head;
    ASSERT_TRUE(RecvAll(*conn, back_head, Soon(), /*wait_first=*/true).ok()) << size;
    EXPECT_EQ(std::memcmp(back_head.data(), head.data(), 8), 0);
    std::string back(size, '\0');
    ASSERT_TRUE(RecvAll(*conn, std::as_writable_bytes(std::span(back)), Soon()).ok()) << size;
    EXPECT_TRUE(back == body) << size;
    pool.Release(std::move(*conn));
  }
  EXPECT_EQ((*l)->connections_accepted(), 1u);  // one connection, reused for every size
}

TEST_F(ConnectionTlsTest, PlainOrUntrustingClientsAreRefusedInTheAcceptingThread) {
  const ClusterKey key = KeyOf(1);
  auto l = Listener::Start("tls", "127.0.0.1", 0, 22, Echo, 1024, key, server_);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  const uint16_t port = (*l)->port();
  const int threads_before = ThreadCount();
  bool reused = false;
  const auto short_deadline = [] { return Clock::now() + std::chrono::milliseconds(1500); };

  // Nothing in clear: a TLS server waits for the client's hello and sends no byte first.
  Result<int> raw = Connect("127.0.0.1", port, Soon());
  ASSERT_TRUE(raw.ok());
  std::array<std::byte, 1> b;
  EXPECT_FALSE(RecvAll(*raw, b, Clock::now() + std::chrono::milliseconds(300)).ok());
  // Bytes that are not TLS end the handshake at once.
  std::array<std::byte, kHelloBytes> plain = EncodeHello({kProtocolVersion, 22, false});
  iovec iov{plain.data(), plain.size()};
  ASSERT_TRUE(SendAll(*raw, &iov, 1, Soon()).ok());
  EXPECT_FALSE(RecvAll(*raw, b, Soon()).ok());
  ::close(*raw);

  // A client of another CA refuses the certificate; a plain client hears no hello.
  ConnectionPool untrusting("127.0.0.1", port, 22, 1, key, other_ca_client_);
  Result<Conn> refused = untrusting.Acquire(Soon(), &reused);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("certificate"), std::string::npos)
      << refused.status().message();
  ConnectionPool plain_pool("127.0.0.1", port, 22, 1, key, nullptr);
  EXPECT_FALSE(plain_pool.Acquire(short_deadline(), &reused).ok());
  // The right CA but the wrong cluster key: TLS passes, the key handshake does not.
  ConnectionPool wrong_key("127.0.0.1", port, 22, 1, KeyOf(2), client_);
  EXPECT_FALSE(wrong_key.Acquire(Soon(), &reused).ok());
  EXPECT_EQ(ThreadCount(), threads_before);
  EXPECT_EQ((*l)->connections_accepted(), 0u);

  ConnectionPool right("127.0.0.1", port, 22, 1, key, client_);
  Result<Conn> conn = right.Acquire(Soon(), &reused);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  EXPECT_TRUE(Echoes(*conn));
  EXPECT_EQ((*l)->connections_accepted(), 1u);
  // The raw one, the untrusting one, the wrong key; the plain pool's may still be pending.
  EXPECT_TRUE(WaitFor([&] { return (*l)->connections_unauthenticated() >= 3; }))
      << (*l)->connections_unauthenticated();
}

TEST_F(ConnectionTlsTest, AClientRefusesAServerWithoutTlsAndAListenerNeedsACertificate) {
  auto plain = Listener::Start("plain", "127.0.0.1", 0, 23, Echo, 1024, KeyOf(1), nullptr);
  ASSERT_TRUE(plain.ok());
  ConnectionPool pool("127.0.0.1", (*plain)->port(), 23, 1, KeyOf(1), client_);
  bool reused = false;
  Result<Conn> conn = pool.Acquire(Soon(), &reused);
  ASSERT_FALSE(conn.ok());
  EXPECT_NE(conn.status().message().find("TLS handshake"), std::string::npos)
      << conn.status().message();
  EXPECT_EQ(Listener::Start("x", "127.0.0.1", 0, 24, Echo, 1024, KeyOf(1), client_)
                .status()
                .code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace aquifer::wire
