// Bad input at the wire's edges (issue 20 item 4): every frame parser of the chunk wire, the
// metadata wire and the cluster-key handshake is fed tables of edge cases and thousands of
// malformed, truncated, oversized-length, random-byte and bit-flipped-valid frames from a seed
// printed in the output (AQ_FUZZ_SEED=N replays a run, AQ_FUZZ_CASES=N sets how many random cases
// per parser). Each must give a clear error (kInvalidArgument or kPermissionDenied, a message
// that names the frame and echoes no raw byte), never crash, accept only canonical frames, and
// never allocate past what the frame carries. The handshake is also fuzzed over loopback
// sockets, from both sides. Its own binary: it replaces operator new to measure allocations.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <new>
#include <random>
#include <thread>

#include "common/cluster_key.h"
#include "common/printable.h"
#include "frame_mutations.h"
#include "wire/chunk_wire.h"
#include "wire/connection.h"
#include "wire/meta_wire.h"
#include "wire_test_support.h"

// ---- allocation tracking: the largest single allocation made by this thread while tracking --
namespace {
thread_local bool t_tracking = false;
thread_local size_t t_largest_bytes = 0;

void* Allocate(size_t bytes) {
  if (t_tracking && bytes > t_largest_bytes) t_largest_bytes = bytes;
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(size_t bytes) { return Allocate(bytes); }
void* operator new[](size_t bytes) { return Allocate(bytes); }
void* operator new(size_t bytes, const std::nothrow_t&) noexcept {
  try {
    return Allocate(bytes);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](size_t bytes, const std::nothrow_t& tag) noexcept {
  return operator new(bytes, tag);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace aquifer::wire {
namespace {

using testing::Bytes;
using testing::Echo;
using testing::Mutation;
using testing::Soon;
using testing::WaitFor;
using Clock = std::chrono::steady_clock;

// A decode allocates at most its error text (a Status holding a short message).
constexpr size_t kMaxDecodeAllocationBytes = 512;

// Measures the largest allocation `fn` makes on this thread.
size_t LargestAllocation(const std::function<void()>& fn) {
  t_largest_bytes = 0;
  t_tracking = true;
  fn();
  t_tracking = false;
  return t_largest_bytes;
}

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// The run's seed, printed once per test so a failure can be replayed.
uint64_t Seed() {
  const uint64_t seed = EnvOr("AQ_FUZZ_SEED", 20260520);
  std::printf("[ fuzz     ] seed=%llu (replay: AQ_FUZZ_SEED=%llu)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  ::testing::Test::RecordProperty("fuzz_seed", std::to_string(seed));
  return seed;
}

uint64_t Cases() { return EnvOr("AQ_FUZZ_CASES", 20000); }

template <size_t N>
Bytes ToBytes(const std::array<std::byte, N>& a) {
  return Bytes(a.begin(), a.end());
}

// What a parser said about one input.
struct Verdict {
  bool accepted = false;
  bool canonical = true;      // accepted: re-encoding gives back the very bytes
  bool within_limits = true;  // accepted: every length field within its limit
  Status status;              // refused: why
};

// One frame parser under test, with valid frames to mutate.
struct Parser {
  const char* name;
  size_t frame_bytes;
  const char* message_prefix;  // every refusal's message starts so
  Code refusal_code;
  std::vector<Bytes> samples;
  std::function<Verdict(std::span<const std::byte>)> parse;
};

template <class T, class Encode, class Limits>
Verdict Judge(const Result<T>& r, std::span<const std::byte> f, Encode encode, Limits limits) {
  Verdict v;
  if (!r.ok()) {
    v.status = r.status();
    return v;
  }
  v.accepted = true;
  const auto again = encode(*r);
  v.canonical = f.size() == again.size() && std::equal(f.begin(), f.end(), again.begin());
  v.within_limits = limits(*r);
  return v;
}

Request SampleRead() {
  Request r;
  r.op = Op::kRead;
  r.id = ChunkId{InodeId(77), 3, 2};
  r.version = 9;
  r.offset_bytes = 4096;
  r.length_bytes = 65536;
  return r;
}

Request SampleWrite() {
  Request r;
  r.op = Op::kWrite;
  r.sync = true;
  r.id = ChunkId{InodeId(0x0102030405060708ull), 0x1112131415161718ull, 5};
  r.version = 42;
  r.committed_version = 41;
  r.payload_bytes = 1 << 20;
  r.placement = {6, 1, 4, 2, false, 1 << 20, 4ull << 20};
  return r;
}

// A fixed server nonce and instance for the handshake parser.
constexpr uint64_t kInstance = 0xabcdef;
ClusterKey KeyOf(uint8_t fill) {
  ClusterKey k;
  k.bytes.fill(std::byte{fill});
  return k;
}
Nonce NonceOf(uint8_t fill) {
  Nonce n;
  n.fill(std::byte{fill});
  return n;
}
Bytes ValidAnswer(const ClusterKey& key, uint64_t instance, const Nonce& server_nonce,
                  const Nonce& client_nonce) {
  Bytes answer(client_nonce.begin(), client_nonce.end());
  const Mac proof = WireClientProof(key, instance, server_nonce, client_nonce);
  answer.insert(answer.end(), proof.begin(), proof.end());
  return answer;
}

std::vector<Parser> Parsers() {
  std::vector<Parser> out;
  out.push_back({"chunk hello", kHelloBytes, "chunk wire: bad hello: ", Code::kInvalidArgument,
                 {ToBytes(EncodeHello({kProtocolVersion, 1, false})),
                  ToBytes(EncodeHello({kProtocolVersion, ~0ull, true}))},
                 [](std::span<const std::byte> f) {
                   return Judge(DecodeHello(f), f, EncodeHello, [](const Hello&) { return true; });
                 }});
  out.push_back({"chunk request", kRequestBytes, "chunk wire: bad request: ",
                 Code::kInvalidArgument,
                 {ToBytes(EncodeRequest(SampleRead())), ToBytes(EncodeRequest(SampleWrite()))},
                 [](std::span<const std::byte> f) {
                   return Judge(DecodeRequest(f), f, EncodeRequest, [](const Request& r) {
                     return r.payload_bytes <= kMaxPayloadBytes &&
                            r.placement.pg_width <= UINT16_MAX && r.id.inode.value() != 0 &&
                            (r.op == Op::kWrite || r.payload_bytes == 0);
                   });
                 }});
  Reply ok_read{Code::kOk, 0, 7, 1 << 20, 4 << 20, 65536};
  Reply not_found{Code::kNotFound, 120, 0, 0, 0, 0};
  out.push_back({"chunk reply", kReplyBytes, "chunk wire: bad reply: ", Code::kInvalidArgument,
                 {ToBytes(EncodeReply(ok_read)), ToBytes(EncodeReply(not_found))},
                 [](std::span<const std::byte> f) {
                   return Judge(DecodeReply(f), f, EncodeReply, [](const Reply& r) {
                     return r.message_bytes <= kMaxMessageBytes &&
                            r.data_bytes <= kMaxPayloadBytes &&
                            (r.code == Code::kOk || r.data_bytes == 0);
                   });
                 }});
  out.push_back({"metadata call", kCallHeaderBytes, "metadata wire: bad call: ",
                 Code::kInvalidArgument,
                 {ToBytes(EncodeCall({MetaMethod::kLookup, 40})),
                  ToBytes(EncodeCall({MetaMethod::kWaitRecall, 0}))},
                 [](std::span<const std::byte> f) {
                   return Judge(DecodeCall(f), f, EncodeCall, [](const CallHeader& h) {
                     const auto m = static_cast<uint16_t>(h.method);
                     return h.payload_bytes <= kMaxCallPayloadBytes && m >= 1 &&
                            m < static_cast<uint16_t>(MetaMethod::kEnd);
                   });
                 }});
  out.push_back({"metadata reply", kCallHeaderBytes, "metadata wire: bad reply: ",
                 Code::kInvalidArgument,
                 {ToBytes(EncodeCallReply({CallOutcome::kOk, 1234})),
                  ToBytes(EncodeCallReply({CallOutcome::kBadRequest, 0}))},
                 [](std::span<const std::byte> f) {
                   return Judge(DecodeCallReply(f), f, EncodeCallReply,
                                [](const CallReplyHeader& h) {
                                  return h.payload_bytes <= kMaxCallPayloadBytes &&
                                         (h.outcome == CallOutcome::kOk || h.payload_bytes == 0);
                                });
                 }});
  // The handshake answer: only the one right answer passes; there is no encoder, so an accepted
  // answer is canonical when it equals the valid one.
  const Bytes answer = ValidAnswer(KeyOf(1), kInstance, NonceOf(2), NonceOf(3));
  out.push_back({"handshake answer", kNonceBytes + kMacBytes, "wire: ",
                 Code::kPermissionDenied,
                 {answer},
                 [answer](std::span<const std::byte> f) {
                   Verdict v;
                   Nonce client_nonce{};
                   v.status = CheckHandshakeAnswer(KeyOf(1), kInstance, NonceOf(2), f,
                                                   &client_nonce);
                   v.accepted = v.status.ok();
                   v.canonical = std::equal(f.begin(), f.end(), answer.begin(), answer.end());
                   v.within_limits = client_nonce == NonceOf(3);
                   return v;
                 }});
  return out;
}

// The checks every input gets: no crash (we got here), a bounded allocation, and either a
// canonical, in-limits accept or a clear refusal that echoes no raw byte.
void ExpectClearVerdict(const Parser& p, std::span<const std::byte> f, const std::string& what) {
  Verdict v;
  const size_t largest = LargestAllocation([&] { v = p.parse(f); });
  EXPECT_LE(largest, kMaxDecodeAllocationBytes)
      << p.name << " " << what << " allocated " << largest << " bytes for a " << f.size()
      << "-byte frame " << testing::Hex(f);
  if (v.accepted) {
    EXPECT_EQ(f.size(), p.frame_bytes) << p.name << " " << what;
    EXPECT_TRUE(v.canonical) << p.name << " " << what << " accepted a non-canonical frame "
                             << testing::Hex(f);
    EXPECT_TRUE(v.within_limits) << p.name << " " << what << " accepted a field past its limit "
                                 << testing::Hex(f);
    return;
  }
  EXPECT_EQ(v.status.code(), p.refusal_code) << p.name << " " << what << ": "
                                             << v.status.ToString();
  const std::string& m = v.status.message();
  EXPECT_EQ(m.rfind(p.message_prefix, 0), 0u) << p.name << " " << what << ": " << m;
  EXPECT_GT(m.size(), std::string(p.message_prefix).size()) << p.name << " says no reason";
  EXPECT_EQ(Printable(m, SIZE_MAX), m) << p.name << " echoes raw bytes: " << Printable(m);
  EXPECT_LT(m.size(), 160u) << p.name << ": " << m;
}

TEST(WireFuzzTest, EveryWrongSizeOfEveryFrameIsRefusedBySize) {
  for (const Parser& p : Parsers()) {
    const Bytes& valid = p.samples.front();
    for (size_t n = 0; n <= 2 * p.frame_bytes + 1; ++n) {
      if (n == p.frame_bytes) continue;
      Bytes f(valid.begin(), valid.begin() + std::min(n, valid.size()));
      f.resize(n, std::byte{0});
      ExpectClearVerdict(p, f, "size " + std::to_string(n));
      Verdict v = p.parse(f);
      ASSERT_FALSE(v.accepted) << p.name << " size " << n;
      EXPECT_NE(v.status.message().find(std::to_string(n)), std::string::npos)
          << p.name << ": the refusal of " << n << " bytes does not say the size: "
          << v.status.message();
    }
  }
}

// Every single-bit flip of every valid sample: refused with a reason, or (for a field where
// every value is legal) decoded to exactly the flipped frame. The magic, the version, the op and
// the reserved bytes admit no flip; the handshake answer admits none at all.
TEST(WireFuzzTest, EverySingleBitFlipIsRefusedOrDecodesToTheFlippedFrame) {
  std::map<std::string, int> refused;
  for (const Parser& p : Parsers()) {
    for (const Bytes& valid : p.samples) {
      ASSERT_TRUE(p.parse(valid).accepted) << p.name << " refuses its own sample";
      for (size_t bit = 0; bit < 8 * valid.size(); ++bit) {
        Bytes f = valid;
        f[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
        const std::string what = "bit " + std::to_string(bit);
        ExpectClearVerdict(p, f, what);
        const Verdict v = p.parse(f);
        if (!v.accepted) ++refused[p.name];
        if (bit < 32) {
          EXPECT_FALSE(v.accepted) << p.name << " took a flipped magic, " << what;
        }
        if (p.refusal_code == Code::kPermissionDenied) {
          EXPECT_FALSE(v.accepted) << p.name << " took a flipped answer, " << what;
        }
      }
    }
  }
  for (const Parser& p : Parsers()) {
    std::printf("[ fuzz     ] %s: %d of %zu single-bit flips refused\n", p.name, refused[p.name],
                8 * p.frame_bytes * p.samples.size());
    EXPECT_GE(refused[p.name], 32 * static_cast<int>(p.samples.size())) << p.name;
  }
}

// Length fields at, just past and far past their limits, and other edge values.
TEST(WireFuzzTest, LengthFieldsPastTheirLimitsAreRefusedAndAtTheLimitAccepted) {
  struct Row {
    const char* parser;
    size_t sample;   // which sample to start from
    size_t at;       // the field's byte offset
    size_t bytes;    // its width
    uint64_t value;
    bool accepted;
    const char* reason;  // in the refusal's message
  } rows[] = {
      {"chunk request", 1, 64, 8, kMaxPayloadBytes, true, ""},
      {"chunk request", 1, 64, 8, kMaxPayloadBytes + 1, false, "payload of 16777217 bytes"},
      {"chunk request", 1, 64, 8, UINT64_MAX, false, "payload of 18446744073709551615"},
      {"chunk request", 1, 64, 8, 1ull << 63, false, "payload of"},
      {"chunk request", 1, 64, 8, UINT32_MAX + 1ull, false, "payload of"},
      {"chunk request", 0, 64, 8, 1, false, "read with a payload"},
      {"chunk request", 1, 72, 4, UINT16_MAX, true, ""},
      {"chunk request", 1, 72, 4, UINT16_MAX + 1u, false, "pg_width 65536"},
      {"chunk request", 1, 72, 4, UINT32_MAX, false, "pg_width"},
      {"chunk request", 1, 8, 8, 0, false, "inode 0"},
      {"chunk request", 1, 4, 1, 0, false, "op 0"},
      {"chunk request", 1, 4, 1, 3, false, "op 3"},
      {"chunk request", 1, 4, 1, 255, false, "op 255"},
      {"chunk request", 1, 5, 1, 2, false, "flags 2"},
      {"chunk request", 1, 82, 1, 2, false, "replicated 2"},
      {"chunk request", 0, 48, 8, UINT64_MAX, true, ""},  // offsets: the store judges them
      {"chunk request", 0, 56, 8, UINT64_MAX, true, ""},
      {"chunk reply", 1, 8, 4, kMaxMessageBytes, true, ""},
      {"chunk reply", 1, 8, 4, kMaxMessageBytes + 1, false, "message of 4097 bytes"},
      {"chunk reply", 1, 8, 4, UINT32_MAX, false, "message of 4294967295 bytes"},
      {"chunk reply", 0, 40, 8, kMaxPayloadBytes, true, ""},
      {"chunk reply", 0, 40, 8, kMaxPayloadBytes + 1, false, "data of 16777217 bytes"},
      {"chunk reply", 0, 40, 8, UINT64_MAX, false, "data of"},
      {"chunk reply", 1, 40, 8, 1, false, "data with an error"},
      {"chunk reply", 0, 4, 4, 0xffffffffu, false, "code 4294967295"},
      {"chunk reply", 0, 4, 4, 256, false, "code 256"},
      {"chunk hello", 0, 4, 2, 0, false, "protocol version 0"},
      {"chunk hello", 0, 4, 2, 0xffff, false, "protocol version 65535"},
      {"chunk hello", 0, 6, 2, 2, false, "reserved"},
      {"chunk hello", 0, 6, 2, 0x8001, false, "reserved"},
      {"metadata call", 0, 8, 4, kMaxCallPayloadBytes, true, ""},
      {"metadata call", 0, 8, 4, kMaxCallPayloadBytes + 1, false, "payload of 83886081 bytes"},
      {"metadata call", 0, 8, 4, UINT32_MAX, false, "payload of 4294967295 bytes"},
      {"metadata call", 0, 4, 2, 0, false, "method 0"},
      {"metadata call", 0, 4, 2, static_cast<uint16_t>(MetaMethod::kEnd), false, "method"},
      {"metadata call", 0, 4, 2, 0xffff, false, "method 65535"},
      {"metadata call", 0, 4, 2, static_cast<uint16_t>(MetaMethod::kEnd) - 1, true, ""},
      {"metadata reply", 0, 8, 4, kMaxCallPayloadBytes, true, ""},
      {"metadata reply", 0, 8, 4, kMaxCallPayloadBytes + 1, false, "payload of 83886081 bytes"},
      {"metadata reply", 0, 8, 4, UINT32_MAX, false, "payload of"},
      {"metadata reply", 1, 8, 4, 1, false, "a payload with outcome 2"},
      {"metadata reply", 0, 4, 1, 3, false, "outcome 3"},
      {"metadata reply", 0, 4, 1, 255, false, "outcome 255"},
  };
  const std::vector<Parser> parsers = Parsers();
  for (const Row& row : rows) {
    const Parser* p = nullptr;
    for (const Parser& q : parsers) {
      if (std::string(q.name) == row.parser) p = &q;
    }
    ASSERT_NE(p, nullptr) << row.parser;
    Bytes f = p->samples.at(row.sample);
    testing::PutLe(f, row.at, row.value, row.bytes);
    const std::string what = "field @" + std::to_string(row.at) + " = " +
                             std::to_string(row.value);
    ExpectClearVerdict(*p, f, what);
    const Verdict v = p->parse(f);
    EXPECT_EQ(v.accepted, row.accepted) << row.parser << " " << what << ": "
                                        << v.status.ToString();
    if (!row.accepted) {
      EXPECT_NE(v.status.message().find(row.reason), std::string::npos)
          << row.parser << " " << what << ": " << v.status.message();
    }
  }
}

// N random cases per parser from the printed seed: each mutation kind of each valid sample.
TEST(WireFuzzTest, RandomMutationsOfValidFramesGetAClearVerdictAndStayWithinLimits) {
  std::mt19937_64 random(Seed());
  const uint64_t cases = Cases();
  for (const Parser& p : Parsers()) {
    std::map<Mutation, std::pair<int, int>> counts;  // mutation -> (accepted, refused)
    for (uint64_t i = 0; i < cases; ++i) {
      const Bytes& valid = p.samples[random() % p.samples.size()];
      const Mutation m = testing::RandomMutation(random);
      const Bytes f = testing::Mutate(valid, m, random);
      ExpectClearVerdict(p, f, std::string(testing::MutationName(m)) + " case " +
                                   std::to_string(i));
      const Verdict v = p.parse(f);
      (v.accepted ? counts[m].first : counts[m].second)++;
      if (m == Mutation::kTruncated || m == Mutation::kExtended) {
        EXPECT_FALSE(v.accepted) << p.name << " took a frame of " << f.size() << " bytes";
      }
      if (p.refusal_code == Code::kPermissionDenied && f != valid) {
        EXPECT_FALSE(v.accepted) << p.name << " took a changed answer " << testing::Hex(f);
      }
      if (::testing::Test::HasFailure()) {
        FAIL() << p.name << ": stopping at case " << i << " (" << testing::MutationName(m)
               << ") of seed " << EnvOr("AQ_FUZZ_SEED", 20260520) << ": " << testing::Hex(f);
      }
    }
    std::string summary;
    for (const auto& [m, c] : counts) {
      summary += std::string(" ") + testing::MutationName(m) + "=" + std::to_string(c.first) +
                 "/" + std::to_string(c.first + c.second);
    }
    std::printf("[ fuzz     ] %s: %llu cases, accepted/total by mutation:%s\n", p.name,
                static_cast<unsigned long long>(cases), summary.c_str());
    // Random bytes of the right size almost never carry the magic: nearly all are refused.
    EXPECT_LE(counts[Mutation::kRandom].first, counts[Mutation::kRandom].second / 100 + 1)
        << p.name;
  }
}

// A sender that announces a large payload and sends little costs about what it sent, whatever
// it announced (up to the 80 MiB metadata-wire limit).
TEST(WireFuzzTest, ReadPayloadAllocatesAboutWhatArrivedWhateverTheAnnouncedLength) {
  std::mt19937_64 random(Seed() ^ 0x9e3779b97f4a7c15ull);
  for (int i = 0; i < 24; ++i) {
    int fd[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd), 0);
    const uint64_t announced =
        i % 3 == 0 ? kMaxCallPayloadBytes : 1 + random() % kMaxCallPayloadBytes;
    const uint64_t sent = std::min<uint64_t>(announced - 1, random() % (300 << 10));
    std::thread sender([&, out = fd[1]] {
      std::vector<std::byte> bytes(sent, std::byte{0x5a});
      iovec iov{bytes.data(), bytes.size()};
      (void)SendAll(out, &iov, 1, Clock::now() + std::chrono::seconds(10));
      ::shutdown(out, SHUT_WR);
    });
    std::string buffer;
    Status s;
    const size_t largest = LargestAllocation([&] {
      s = ReadPayload(fd[0], announced, &buffer, Clock::now() + std::chrono::seconds(10));
    });
    sender.join();
    ::close(fd[0]);
    ::close(fd[1]);
    EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
    EXPECT_LE(largest, 4 * std::max<uint64_t>(sent, 64 << 10) + 4096)
        << "announced " << announced << " bytes, sent " << sent << ", largest allocation "
        << largest;
  }
}

// ---- the handshake over loopback ------------------------------------------------------------

template <class Socket>
bool Echoes(Socket& fd) {
  std::array<std::byte, 1> b{std::byte{42}};
  iovec iov{b.data(), 1};
  if (!SendAll(fd, &iov, 1, Soon()).ok()) return false;
  b[0] = std::byte{0};
  return RecvAll(fd, b, Soon()).ok() && b[0] == std::byte{42};
}

// Mutated answers to a real Listener's challenge: only an unchanged answer is served; every
// other one is closed without a proof and counted, and the listener goes on serving.
TEST(WireFuzzTest, MutatedHandshakeAnswersAreRefusedAndTheListenerGoesOnServing) {
  std::mt19937_64 random(Seed() ^ 0x51ed);
  const ClusterKey key = KeyOf(7);
  auto l = Listener::Start("fuzz", "127.0.0.1", 0, kInstance, Echo, 1024, key);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  const uint16_t port = (*l)->port();
  int served = 0, refused = 0;
  for (int i = 0; i < 400; ++i) {
    Result<int> fd = Connect("127.0.0.1", port, Soon());
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    std::array<std::byte, kHelloBytes + kNonceBytes> first;
    ASSERT_TRUE(RecvAll(*fd, first, Soon()).ok());
    Nonce ns;
    std::copy_n(first.begin() + kHelloBytes, kNonceBytes, ns.begin());
    Nonce nc;
    for (auto& b : nc) b = static_cast<std::byte>(random());
    const Bytes valid = ValidAnswer(key, kInstance, ns, nc);
    // One in eight sent as is (the control); the rest mutated.
    const Mutation m = testing::RandomMutation(random);
    const Bytes answer = i % 8 == 0 ? valid : testing::Mutate(valid, m, random);
    const bool good = answer.size() >= valid.size() &&
                      std::equal(valid.begin(), valid.end(), answer.begin());
    Bytes sent = answer;
    iovec iov{sent.data(), sent.size()};
    if (!sent.empty()) {
      ASSERT_TRUE(SendAll(*fd, &iov, 1, Soon()).ok());
    }
    if (answer.size() < valid.size()) ::shutdown(*fd, SHUT_WR);  // a truncated answer ends
    Mac proof;
    const Status got = RecvAll(*fd, proof, Soon());
    if (good) {
      ASSERT_TRUE(got.ok()) << "case " << i << ": a right answer got no proof: " << got.ToString();
      EXPECT_TRUE(MacEqual(proof, WireServerProof(key, kInstance, ns, nc)));
      // Bytes after the answer are the first request's: the echo server sends them back.
      if (answer.size() == valid.size()) {
        EXPECT_TRUE(Echoes(*fd)) << "case " << i;
      }
      ++served;
    } else {
      EXPECT_FALSE(got.ok()) << "case " << i << " (" << testing::MutationName(m)
                             << "): a wrong answer got a proof: " << testing::Hex(answer);
      ++refused;
    }
    ::close(*fd);
  }
  std::printf("[ fuzz     ] listener: %d answers served, %d refused\n", served, refused);
  EXPECT_TRUE(WaitFor([&] {
    return (*l)->connections_unauthenticated() == static_cast<uint64_t>(refused);
  })) << (*l)->connections_unauthenticated() << " refused, want " << refused;
  EXPECT_TRUE(WaitFor([&] { return (*l)->handshakes_pending() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return (*l)->connections_open() == 0; }));
  EXPECT_EQ((*l)->connections_accepted(), static_cast<uint64_t>(served));
  ConnectionPool pool("127.0.0.1", port, kInstance, 4, key);
  bool reused = false;
  Result<Conn> fd = pool.Acquire(Soon(), &reused);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_TRUE(Echoes(*fd));
  fd->Close();
}

// A hostile server: hellos, nonces and proofs mutated, cut short or never sent. A keyed client
// refuses every one (kUnavailable) by its deadline, and takes only the unchanged handshake.
TEST(WireFuzzTest, AKeyedClientRefusesEveryMutatedServerHandshakeByItsDeadline) {
  std::mt19937_64 random(Seed() ^ 0xc11e);
  const ClusterKey key = KeyOf(9);
  Result<int> listen_fd = [] () -> Result<int> {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0) {
      return Unavailable("bind");
    }
    return fd;
  }();
  ASSERT_TRUE(listen_fd.ok());
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  ::getsockname(*listen_fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const uint16_t port = ntohs(bound.sin_port);

  enum Part { kHelloPart, kNoncePart, kProofPart, kStall, kUnchanged };
  // Per ten cases: three hellos, two nonces, three proofs mutated, one stall, one unchanged.
  constexpr int kCases = 200;
  constexpr Part kPlan[10] = {kHelloPart, kHelloPart, kHelloPart, kNoncePart, kNoncePart,
                              kProofPart, kProofPart, kProofPart, kStall,     kUnchanged};
  std::vector<Part> parts;
  std::vector<uint64_t> seeds;
  for (int i = 0; i < kCases; ++i) {
    parts.push_back(kPlan[i % 10]);
    seeds.push_back(random());
  }
  // Whether the client must take case i: the server's bytes are what a right server sends,
  // perhaps followed by more (the proof's extension is the first reply's bytes). Set by the
  // server thread before it sends; read after it is joined.
  std::vector<char> must_take(kCases, 0);
  auto same_prefix = [](const Bytes& mutated, const Bytes& original, bool may_extend) {
    return (mutated.size() == original.size() ||
            (may_extend && mutated.size() > original.size())) &&
           std::equal(original.begin(), original.end(), mutated.begin());
  };
  std::thread server([&] {
    for (int i = 0; i < kCases; ++i) {
      const int fd = ::accept4(*listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      std::mt19937_64 r(seeds[i]);
      const Nonce ns = NonceOf(static_cast<uint8_t>(i));
      const Bytes right_hello = ToBytes(EncodeHello({kProtocolVersion, kInstance, true}));
      const Bytes right_nonce(ns.begin(), ns.end());
      Bytes hello = right_hello, nonce = right_nonce;
      if (parts[i] == kHelloPart) hello = testing::Mutate(hello, testing::RandomMutation(r), r);
      if (parts[i] == kNoncePart) nonce = testing::Mutate(nonce, testing::RandomMutation(r), r);
      bool take = parts[i] != kStall && same_prefix(hello, right_hello, false) &&
                  same_prefix(nonce, right_nonce, false);
      Bytes first = hello;
      first.insert(first.end(), nonce.begin(), nonce.end());
      std::array<std::byte, kNonceBytes + kMacBytes> answer;
      Bytes proof_bytes;
      if (parts[i] != kStall) {
        iovec iov{first.data(), first.size()};
        (void)SendAll(fd, &iov, 1, Soon());
        if (RecvAll(fd, answer, Clock::now() + std::chrono::seconds(2)).ok()) {
          Nonce nc;
          std::copy_n(answer.begin(), kNonceBytes, nc.begin());
          const Mac proof = WireServerProof(key, kInstance, ns, nc);
          const Bytes right_proof(proof.begin(), proof.end());
          proof_bytes = right_proof;
          if (parts[i] == kProofPart) {
            proof_bytes = testing::Mutate(proof_bytes, testing::RandomMutation(r), r);
          }
          take = take && same_prefix(proof_bytes, right_proof, true);
          must_take[i] = take;
          iovec piov{proof_bytes.data(), proof_bytes.size()};
          (void)SendAll(fd, &piov, 1, Soon());
        }
      }
      // Wait for the client to finish (it closes, or its deadline passes) before closing.
      std::array<std::byte, 1> b;
      (void)RecvAll(fd, b, Clock::now() + std::chrono::seconds(2));
      ::close(fd);
    }
  });
  std::vector<char> taken(kCases, 0);
  int refused = 0;
  for (int i = 0; i < kCases; ++i) {
    ConnectionPool pool("127.0.0.1", port, kInstance, 1, key);
    bool reused = false;
    const auto deadline = Clock::now() + std::chrono::milliseconds(200);
    Result<Conn> fd = pool.Acquire(deadline, &reused);
    EXPECT_LT(Clock::now() - deadline, std::chrono::milliseconds(500)) << "case " << i;
    if (fd.ok()) {
      taken[i] = 1;
      fd->Close();
      continue;
    }
    ++refused;
    EXPECT_EQ(fd.status().code(), Code::kUnavailable) << "case " << i << ": "
                                                      << fd.status().ToString();
    EXPECT_EQ(Printable(fd.status().message(), SIZE_MAX), fd.status().message());
  }
  server.join();
  ::close(*listen_fd);
  int must = 0;
  for (int i = 0; i < kCases; ++i) {
    must += must_take[i];
    EXPECT_EQ(taken[i], must_take[i]) << "case " << i << " (part " << parts[i] << ")";
  }
  std::printf("[ fuzz     ] client: %d server handshakes refused, %d taken (%d right ones)\n",
              refused, kCases - refused, must);
  EXPECT_GE(must, kCases / 10);  // at least the unchanged ones
}

}  // namespace
}  // namespace aquifer::wire
