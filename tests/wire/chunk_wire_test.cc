// The chunk wire's frame codecs (round trips, a table of malformed frames, random bytes) and its
// socket helpers (deadlines, a peer that closes) on socketpairs.
#include "wire/chunk_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <random>
#include <thread>

namespace aquifer::wire {
namespace {

using Clock = std::chrono::steady_clock;

Request SampleWrite() {
  Request r;
  r.op = Op::kWrite;
  r.sync = true;
  r.id = ChunkId{InodeId(0x0102030405060708ull), 0x1112131415161718ull, 5};
  r.version = 42;
  r.committed_version = 41;
  r.payload_bytes = 1 << 20;
  r.placement = {6, 0x01020304, 4, 2, false, 1 << 20, (4ull << 20) - 3};
  return r;
}

TEST(ChunkWireTest, FramesRoundTripEveryField) {
  const Request w = SampleWrite();
  Result<Request> w2 = DecodeRequest(EncodeRequest(w));
  ASSERT_TRUE(w2.ok()) << w2.status().ToString();
  EXPECT_EQ(w2->op, Op::kWrite);
  EXPECT_TRUE(w2->sync);
  EXPECT_EQ(w2->id, w.id);
  EXPECT_EQ(w2->version, 42u);
  EXPECT_EQ(w2->committed_version, 41u);
  EXPECT_EQ(w2->payload_bytes, 1u << 20);
  EXPECT_EQ(w2->placement, w.placement);

  Request r;
  r.op = Op::kRead;
  r.id = ChunkId{InodeId(9), 3, 1};
  r.version = UINT64_MAX;
  r.offset_bytes = 4096;
  r.length_bytes = 8192;
  Result<Request> r2 = DecodeRequest(EncodeRequest(r));
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->op, Op::kRead);
  EXPECT_FALSE(r2->sync);
  EXPECT_EQ(r2->version, UINT64_MAX);
  EXPECT_EQ(r2->offset_bytes, 4096u);
  EXPECT_EQ(r2->length_bytes, 8192u);
  EXPECT_EQ(r2->placement, WirePlacement{});

  Reply a{Code::kStale, 17, 7, 1 << 20, 3 << 20, 0};
  Result<Reply> a2 = DecodeReply(EncodeReply(a));
  ASSERT_TRUE(a2.ok()) << a2.status().ToString();
  EXPECT_EQ(a2->code, Code::kStale);
  EXPECT_EQ(a2->message_bytes, 17u);
  EXPECT_EQ(a2->version, 7u);
  EXPECT_EQ(a2->chunk_length_bytes, 1u << 20);
  EXPECT_EQ(a2->stripe_bytes, 3u << 20);

  Result<Hello> h = DecodeHello(EncodeHello({kProtocolVersion, 0xfeedfacecafebeefull}));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->instance, 0xfeedfacecafebeefull);
}

// ConsumeIov, the step SendAll and WriteFull share after each sendmsg: whole entries are
// dropped, a partly sent one is trimmed, empty entries are skipped.
TEST(ChunkWireTest, ConsumeIovDropsSentEntriesTrimsAPartialOneAndSkipsEmptyOnes) {
  char a[4], b[6];
  struct Case {
    const char* what;
    size_t sent;
    int left;              // entries left
    size_t first_len;      // length of the first entry left (if any)
    const char* first_at;  // where it starts
  };
  for (const Case& c : {Case{"nothing sent: leading empty entry skipped", 0, 3, 4, a},
                        Case{"part of the first", 3, 3, 1, a + 3},
                        Case{"exactly the first: the empty one after it skipped too", 4, 1, 6, b},
                        Case{"into the last", 7, 1, 3, b + 3},
                        Case{"everything", 10, 0, 0, nullptr}}) {
    iovec vec[4] = {{nullptr, 0}, {a, 4}, {nullptr, 0}, {b, 6}};
    iovec* iov = vec;
    int count = 4;
    ConsumeIov(iov, count, 0);  // as SendAll starts
    ConsumeIov(iov, count, c.sent);
    EXPECT_EQ(count, c.left) << c.what;
    if (count > 0) {
      EXPECT_EQ(iov->iov_len, c.first_len) << c.what;
      EXPECT_EQ(iov->iov_base, static_cast<void*>(const_cast<char*>(c.first_at))) << c.what;
    }
  }
}

TEST(ChunkWireTest, IntegersAreLittleEndianAtDocumentedOffsets) {
  const auto f = EncodeRequest(SampleWrite());
  EXPECT_EQ(f[0], std::byte{'A'});  // magic "AQWQ"
  EXPECT_EQ(f[3], std::byte{'Q'});
  EXPECT_EQ(f[8], std::byte{0x08});  // inode's low byte first
  EXPECT_EQ(f[15], std::byte{0x01});
  EXPECT_EQ(f[80], std::byte{4});  // k
}

// One byte of a valid frame changed, and the reason the decoder must give.
struct Corruption {
  size_t at;
  uint8_t value;
  const char* reason;
};

TEST(ChunkWireTest, MalformedRequestsAreRefusedWithTheReason) {
  const auto good = EncodeRequest(SampleWrite());
  const Corruption table[] = {
      {0, 'X', "magic"},           {4, 0, "op 0"},
      {4, 3, "op 3"},              {5, 2, "flags"},
      {6, 1, "reserved"},          {28, 1, "reserved"},
      {83, 1, "reserved"},         {82, 2, "replicated"},
      {74, 1, "pg_width"},  // pg_width 65542
      {71, 1, "payload"},   // payload over 16 MiB
  };
  for (const Corruption& c : table) {
    auto f = good;
    f[c.at] = std::byte{c.value};
    Result<Request> r = DecodeRequest(f);
    ASSERT_FALSE(r.ok()) << "byte " << c.at;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.reason), std::string::npos)
        << "byte " << c.at << ": " << r.status().message();
  }
  // Inode 0.
  Request zero = SampleWrite();
  zero.id.inode = InodeId(0);
  EXPECT_NE(DecodeRequest(EncodeRequest(zero)).status().message().find("inode 0"),
            std::string::npos);
  // A read that claims a payload.
  Request read = SampleWrite();
  read.op = Op::kRead;
  EXPECT_NE(DecodeRequest(EncodeRequest(read)).status().message().find("read with a payload"),
            std::string::npos);
  // Wrong sizes.
  EXPECT_FALSE(DecodeRequest(std::span(good).first(kRequestBytes - 1)).ok());
  EXPECT_FALSE(DecodeRequest({}).ok());
}

TEST(ChunkWireTest, MalformedRepliesAndHellosAreRefused) {
  const auto good = EncodeReply({Code::kOk, 0, 1, 10, 10, 10});
  ASSERT_TRUE(DecodeReply(good).ok());
  const Corruption table[] = {
      {1, 'X', "magic"},  {4, 200, "code"}, {10, 1, "message"},
      {13, 1, "reserved"}, {43, 1, "data"},
  };
  for (const Corruption& c : table) {
    auto f = good;
    f[c.at] = std::byte{c.value};
    Result<Reply> r = DecodeReply(f);
    ASSERT_FALSE(r.ok()) << "byte " << c.at;
    EXPECT_NE(r.status().message().find(c.reason), std::string::npos) << r.status().message();
  }
  EXPECT_NE(DecodeReply(EncodeReply({Code::kNotFound, 0, 0, 0, 0, 5})).status().message().find(
                "data with an error"),
            std::string::npos);
  auto hello = EncodeHello({kProtocolVersion, 1});
  hello[4] = std::byte{2};
  EXPECT_NE(DecodeHello(hello).status().message().find("protocol version"), std::string::npos);
  hello = EncodeHello({kProtocolVersion, 1});
  hello[0] = std::byte{0};
  EXPECT_FALSE(DecodeHello(hello).ok());
}

// Random frames: the decoders never crash and accept only frames that re-encode to themselves
// (every byte means something, so nothing is silently ignored).
TEST(ChunkWireTest, RandomBytesNeverCrashAndOnlyCanonicalFramesDecode) {
  std::mt19937_64 random(1234);
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    std::array<std::byte, kRequestBytes> f;
    for (auto& b : f) b = static_cast<std::byte>(random());
    if (i % 2 == 0) {  // mostly valid headers, so the checks after the magic run too
      const auto base = EncodeRequest(SampleWrite());
      for (size_t j = 0; j < 8; ++j) f[j] = base[j];
      f[4] = static_cast<std::byte>(1 + random() % 2);
      f[5] = static_cast<std::byte>(random() % 2);
      for (size_t j : {6, 7, 28, 29, 30, 31, 83}) f[j] = std::byte{0};
      f[82] = static_cast<std::byte>(random() % 2);
      f[74] = f[75] = std::byte{0};
      f[66] = f[67] = f[68] = f[69] = f[70] = f[71] = std::byte{0};
    }
    Result<Request> r = DecodeRequest(f);
    if (r.ok()) {
      ++accepted;
      EXPECT_EQ(EncodeRequest(*r), f);
    }
    std::array<std::byte, kReplyBytes> g;
    for (auto& b : g) b = static_cast<std::byte>(random());
    if (Result<Reply> reply = DecodeReply(g); reply.ok()) {
      EXPECT_EQ(EncodeReply(*reply), g);
    }
  }
  EXPECT_GT(accepted, 1000);  // the valid-header half mostly decodes
}

class SocketPair {
 public:
  SocketPair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd), 0); }
  ~SocketPair() {
    for (int f : fd) {
      if (f >= 0) ::close(f);
    }
  }
  int fd[2] = {-1, -1};
};

TEST(ChunkWireTest, SendAllAndRecvAllMoveLargeBuffersWhole) {
  SocketPair p;
  std::string big(8 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  std::string got(big.size(), '\0');
  std::thread reader([&] {
    Status s = RecvAll(p.fd[1], std::as_writable_bytes(std::span<char>(got.data(), got.size())),
                       Clock::now() + std::chrono::seconds(20));
    EXPECT_TRUE(s.ok()) << s.ToString();
  });
  iovec iov[3] = {{big.data(), 100}, {big.data() + 100, 0}, {big.data() + 100, big.size() - 100}};
  Status s = SendAll(p.fd[0], iov, 3, Clock::now() + std::chrono::seconds(20));
  EXPECT_TRUE(s.ok()) << s.ToString();
  reader.join();
  EXPECT_TRUE(got == big);
}

TEST(ChunkWireTest, RecvAllEndsAtTheDeadlineOrWhenThePeerCloses) {
  SocketPair p;
  std::array<std::byte, 16> buf;
  const auto start = Clock::now();
  Status s = RecvAll(p.fd[0], buf, start + std::chrono::milliseconds(200));
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("timed out"), std::string::npos);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(190));
  ASSERT_EQ(::write(p.fd[1], "12345", 5), 5);
  ::close(p.fd[1]);
  p.fd[1] = -1;
  s = RecvAll(p.fd[0], buf, Clock::now() + std::chrono::seconds(5));
  EXPECT_NE(s.message().find("connection closed"), std::string::npos) << s.ToString();
}

TEST(ChunkWireTest, ConnectToAClosedPortIsUnavailable) {
  // Bind a port, then close it: nothing listens there now.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  Result<int> c = Connect("127.0.0.1", ntohs(a.sin_port), Clock::now() + std::chrono::seconds(5));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kUnavailable);
  EXPECT_EQ(Connect("no such host!", 1, Clock::now() + std::chrono::seconds(5)).status().code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace aquifer::wire
