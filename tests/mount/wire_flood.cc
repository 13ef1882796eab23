// aquifer_wire_flood: sends malformed, truncated and random frames and handshakes to the ports of
// running daemons, for tests/mount/wire_flood_test.sh (issue 20 item 4). One thread per target;
// connections one after another, each with a deadline.
//
//   aquifer_wire_flood --key FILE --frames N --seed S KIND:HOST:PORT...
//
// KIND is chunk (a data server's chunk wire), meta (the metadata wire) or grpc (any gRPC port).
// On a wire port each case is one of: a mutated handshake answer (or none, or a close part way);
// a right handshake then a mutated frame; a right handshake, a few requests with random fields
// that decode (reads of random chunks; read-only metadata calls with random payloads), then a
// mutated frame. Frames that would decode as a change (a chunk write, a metadata call that
// changes the namespace) are never sent whole: a mutating call gets a payload that cannot parse,
// a write is sent cut short. On a gRPC port: random bytes, a cut HTTP/2 preface, or the preface
// then mutated frames. Afterwards each target must still serve a right request.
//
// Prints one line per target (cases, what happened) and exits 1 when a server did something it
// must not: answered a wrong handshake with a proof, sent a reply that does not decode, gave a
// malformed frame anything but a kInvalidArgument reply or a close, did not answer or close
// within the deadline (a hang), or stopped serving.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../wire/frame_mutations.h"
#include "common/cluster_key.h"
#include "wire/chunk_wire.h"
#include "wire/connection.h"
#include "wire/meta_wire.h"

namespace aquifer::wire {
namespace {

using testing::Bytes;
using Clock = std::chrono::steady_clock;

struct Target {
  std::string kind, host;
  uint16_t port = 0;
};

struct Tally {
  uint64_t cases = 0, handshakes_refused = 0, frames_rejected = 0, requests_answered = 0,
           grpc_closed = 0, errors = 0;
  std::vector<std::string> first_errors;
  void Error(const std::string& what) {
    ++errors;
    if (first_errors.size() < 5) first_errors.push_back(what);
  }
};

Deadline After(int ms) { return Clock::now() + std::chrono::milliseconds(ms); }
constexpr int kDeadlineMs = 5000;  // a server that neither answers nor closes by then hangs

// Reads until the peer closes or the deadline passes. Returns what came; *closed says which.
Bytes Drain(int fd, Deadline deadline, bool* closed) {
  Bytes got;
  std::array<std::byte, 4096> buf;
  for (;;) {
    Status s = RecvAll(fd, {}, deadline, /*wait_first=*/true);
    if (!s.ok()) {
      *closed = false;
      return got;
    }
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0) {
      got.insert(got.end(), buf.begin(), buf.begin() + n);
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      *closed = true;  // EOF or a reset
      return got;
    }
  }
}

bool Send(int fd, std::span<const std::byte> bytes) {
  if (bytes.empty()) return true;
  Bytes copy(bytes.begin(), bytes.end());
  iovec iov{copy.data(), copy.size()};
  return SendAll(fd, &iov, 1, After(kDeadlineMs)).ok();
}

// Connects and reads the hello (and the nonce when the server asks for the key).
struct Opened {
  int fd = -1;
  Hello hello;
  Nonce server_nonce{};
};
Result<Opened> Open(const Target& t) {
  Result<int> fd = Connect(t.host, t.port, After(kDeadlineMs));
  if (!fd.ok()) return fd.status();
  Opened o;
  o.fd = *fd;
  std::array<std::byte, kHelloBytes> hello;
  Status s = RecvAll(o.fd, hello, After(kDeadlineMs), true);
  Result<Hello> h = s.ok() ? DecodeHello(hello) : Result<Hello>(s);
  if (h.ok() && h->auth) s = RecvAll(o.fd, o.server_nonce, After(kDeadlineMs));
  if (!h.ok() || !s.ok()) {
    ::close(o.fd);
    return Internal("no hello: " + (h.ok() ? s : h.status()).ToString());
  }
  o.hello = *h;
  return o;
}

Bytes RightAnswer(const ClusterKey& key, const Opened& o, std::mt19937_64& random, Nonce* nc) {
  for (auto& b : *nc) b = static_cast<std::byte>(random());
  Bytes a(nc->begin(), nc->end());
  const Mac proof = WireClientProof(key, o.hello.instance, o.server_nonce, *nc);
  a.insert(a.end(), proof.begin(), proof.end());
  return a;
}

// The right handshake; false (and an error) when the server refuses it.
bool Authenticate(const ClusterKey& key, const Opened& o, std::mt19937_64& random, Tally& t) {
  if (!o.hello.auth) return true;
  Nonce nc;
  if (!Send(o.fd, RightAnswer(key, o, random, &nc))) {
    t.Error("send of a right handshake failed");
    return false;
  }
  Mac proof;
  if (!RecvAll(o.fd, proof, After(kDeadlineMs), true).ok() ||
      !MacEqual(proof, WireServerProof(key, o.hello.instance, o.server_nonce, nc))) {
    t.Error("a right handshake was refused");
    return false;
  }
  return true;
}

// Metadata methods that only read: random payloads for these may parse and run.
bool ReadOnly(MetaMethod m) {
  switch (m) {
    case MetaMethod::kLookup: case MetaMethod::kGetAttr: case MetaMethod::kReadlink:
    case MetaMethod::kReadDir: case MetaMethod::kGetXattr: case MetaMethod::kListXattr:
    case MetaMethod::kStatFs: case MetaMethod::kGetLock: case MetaMethod::kGetClusterMap:
      return true;
    default:
      return false;
  }
}

Request RandomRead(std::mt19937_64& random) {
  Request r;
  r.op = Op::kRead;
  r.id = ChunkId{InodeId(1 + random() % (random() % 2 ? 1000 : UINT64_MAX - 1)), random() % 64,
                 static_cast<uint32_t>(random() % 8)};
  r.version = random() % 3 == 0 ? 0 : random();
  r.offset_bytes = random() % 2 ? random() % (4 << 20) : random();
  r.length_bytes = random() % 2 ? random() % (1 << 20) : random();
  return r;
}

// One request that decodes, answered by the server; false when the connection is no good.
bool ValidChunkRead(int fd, std::mt19937_64& random, Tally& t) {
  const auto f = EncodeRequest(RandomRead(random));
  if (!Send(fd, f)) return false;
  std::array<std::byte, kReplyBytes> head;
  if (!RecvAll(fd, head, After(kDeadlineMs), true).ok()) {
    t.Error("chunk wire: no reply to a valid read");
    return false;
  }
  Result<Reply> r = DecodeReply(head);
  if (!r.ok()) {
    t.Error("chunk wire: a reply that does not decode: " + r.status().message());
    return false;
  }
  std::string rest;
  if (!ReadPayload(fd, r->message_bytes + r->data_bytes, &rest, After(kDeadlineMs)).ok()) {
    t.Error("chunk wire: a reply cut short");
    return false;
  }
  ++t.requests_answered;
  return true;
}

bool ValidMetaCall(int fd, std::mt19937_64& random, Tally& t) {
  static constexpr MetaMethod kReads[] = {
      MetaMethod::kLookup, MetaMethod::kGetAttr, MetaMethod::kReadlink, MetaMethod::kReadDir,
      MetaMethod::kGetXattr, MetaMethod::kListXattr, MetaMethod::kStatFs, MetaMethod::kGetLock,
      MetaMethod::kGetClusterMap};
  const MetaMethod m = kReads[random() % std::size(kReads)];
  Bytes payload(random() % 48);
  for (auto& b : payload) b = static_cast<std::byte>(random());
  const auto head = EncodeCall({m, static_cast<uint32_t>(payload.size())});
  Bytes f(head.begin(), head.end());
  f.insert(f.end(), payload.begin(), payload.end());
  if (!Send(fd, f)) return false;
  std::array<std::byte, kCallHeaderBytes> reply;
  if (!RecvAll(fd, reply, After(kDeadlineMs), true).ok()) {
    t.Error("metadata wire: no reply to a read-only call");
    return false;
  }
  Result<CallReplyHeader> r = DecodeCallReply(reply);
  if (!r.ok()) {
    t.Error("metadata wire: a reply that does not decode: " + r.status().message());
    return false;
  }
  std::string rest;
  if (!ReadPayload(fd, r->payload_bytes, &rest, After(kDeadlineMs)).ok()) {
    t.Error("metadata wire: a reply cut short");
    return false;
  }
  ++t.requests_answered;
  return true;
}

// A mutated frame the server must refuse (or, when the mutation left a frame that decodes, one
// it serves; changes are never sent whole). Then the client stops writing and reads to the end.
void BadFrame(int fd, const Target& tg, std::mt19937_64& random, Tally& t) {
  const bool chunk = tg.kind == "chunk";
  Bytes valid;
  if (chunk) {
    const auto f = EncodeRequest(RandomRead(random));
    valid.assign(f.begin(), f.end());
  } else {
    const auto m = static_cast<MetaMethod>(1 + random() % (static_cast<int>(MetaMethod::kEnd) - 1));
    const auto f = EncodeCall({m, static_cast<uint32_t>(random() % 64)});
    valid.assign(f.begin(), f.end());
  }
  Bytes frame = testing::Mutate(valid, testing::RandomMutation(random), random);
  const size_t frame_bytes = chunk ? kRequestBytes : kCallHeaderBytes;
  bool must_refuse = true;  // the first frame_bytes do not decode
  Bytes tail;               // what follows a frame that decodes
  if (frame.size() >= frame_bytes) {
    const auto head = std::span<const std::byte>(frame).first(frame_bytes);
    if (chunk) {
      if (Result<Request> r = DecodeRequest(head); r.ok()) {
        must_refuse = false;
        if (r->op == Op::kWrite) frame.resize(frame_bytes - 1 - random() % 8);  // never whole
      }
    } else if (Result<CallHeader> h = DecodeCall(head); h.ok()) {
      must_refuse = false;
      frame.resize(frame_bytes);
      // A payload that cannot parse for a change (0x07: field 0, wire type 7); random bytes for a
      // read; a large announced payload is cut short.
      const size_t n = std::min<size_t>(h->payload_bytes, 4096);
      for (size_t i = 0; i < n; ++i) tail.push_back(static_cast<std::byte>(random()));
      if (!ReadOnly(h->method)) {
        if (n == 0) {  // an empty request parses (all defaults): announce one byte instead
          testing::PutLe(frame, 8, 1, 4);
          tail.push_back(std::byte{0});
        }
        tail[0] = std::byte{0x07};
      }
    }
  }
  frame.insert(frame.end(), tail.begin(), tail.end());
  if (!Send(fd, frame)) return;  // the server may close first (an early refusal)
  ::shutdown(fd, SHUT_WR);
  bool closed = false;
  const Bytes got = Drain(fd, After(kDeadlineMs), &closed);
  if (!closed) {
    t.Error(tg.kind + " wire: neither answered nor closed within 5 s after a " +
            std::to_string(frame.size()) + "-byte frame " + testing::Hex(frame));
    return;
  }
  if (must_refuse && frame.size() >= frame_bytes) {
    ++t.frames_rejected;
    if (chunk) {  // the refusal says why: a kInvalidArgument reply, then the close
      Result<Reply> r = got.size() >= kReplyBytes
                            ? DecodeReply(std::span(got).first(kReplyBytes))
                            : Result<Reply>(Internal("short"));
      if (!r.ok() || r->code != Code::kInvalidArgument) {
        t.Error("chunk wire: a malformed frame got " + std::to_string(got.size()) +
                " bytes that are no kInvalidArgument reply");
      }
    } else if (!got.empty()) {
      t.Error("metadata wire: a malformed call got " + std::to_string(got.size()) + " bytes");
    }
  } else if (frame.size() < frame_bytes) {
    ++t.frames_rejected;  // cut short: the close ends it
    if (!got.empty() && !chunk) t.Error("metadata wire: a truncated call got an answer");
  }
}

// A mutated handshake answer (or none): no proof may come back unless it is the right one.
void BadHandshake(const ClusterKey& key, const Opened& o, std::mt19937_64& random, Tally& t) {
  Nonce nc;
  const Bytes right = RightAnswer(key, o, random, &nc);
  Bytes answer = testing::Mutate(right, testing::RandomMutation(random), random);
  if (random() % 16 == 0) answer.clear();  // says nothing at all
  const bool is_right = answer.size() >= right.size() &&
                        std::equal(right.begin(), right.end(), answer.begin());
  (void)Send(o.fd, answer);
  ::shutdown(o.fd, SHUT_WR);
  bool closed = false;
  const Bytes got = Drain(o.fd, After(kDeadlineMs), &closed);
  if (!closed) t.Error("wire: a bad handshake was neither refused nor closed within 5 s");
  if (!is_right && !got.empty()) {
    t.Error("wire: a wrong handshake answer got " + std::to_string(got.size()) + " bytes back");
  }
  if (!is_right) ++t.handshakes_refused;
}

void WireCase(const ClusterKey& key, const Target& tg, std::mt19937_64& random, Tally& t) {
  Result<Opened> o = Open(tg);
  if (!o.ok()) {
    t.Error(tg.kind + " wire: " + o.status().ToString());
    return;
  }
  const uint64_t pick = random() % 10;
  if (pick < 3 && o->hello.auth) {
    BadHandshake(key, *o, random, t);
  } else if (Authenticate(key, *o, random, t)) {
    bool ok = true;
    if (pick >= 8) {  // a few requests that decode first: the handlers behind the parser
      for (int i = 0, n = 1 + static_cast<int>(random() % 4); ok && i < n; ++i) {
        ok = tg.kind == "chunk" ? ValidChunkRead(o->fd, random, t)
                                : ValidMetaCall(o->fd, random, t);
      }
    }
    if (ok) BadFrame(o->fd, tg, random, t);
  }
  ::close(o->fd);
}

// gRPC: bytes that are no valid HTTP/2 conversation; the server must close (or wait) and live.
void GrpcCase(const Target& tg, std::mt19937_64& random, Tally& t) {
  static const std::string kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  Result<int> fd = Connect(tg.host, tg.port, After(kDeadlineMs));
  if (!fd.ok()) {
    t.Error("grpc: " + fd.status().ToString());
    return;
  }
  Bytes f;
  const uint64_t pick = random() % 4;
  const auto* p = reinterpret_cast<const std::byte*>(kPreface.data());
  if (pick == 0) {  // random bytes
    f.resize(1 + random() % 200);
    for (auto& b : f) b = static_cast<std::byte>(random());
  } else if (pick == 1) {  // the preface, cut or mutated
    f = testing::Mutate(Bytes(p, p + kPreface.size()), testing::RandomMutation(random), random);
  } else {  // the preface, then a mutated SETTINGS or HEADERS frame (9-byte header + payload)
    f.assign(p, p + kPreface.size());
    Bytes frame = {std::byte{0}, std::byte{0}, std::byte{6},
                   static_cast<std::byte>(pick == 2 ? 4 : 1),
                   std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{1},
                   std::byte{0}, std::byte{3}, std::byte{0}, std::byte{0}, std::byte{0x10},
                   std::byte{0}};
    frame = testing::Mutate(frame, testing::RandomMutation(random), random);
    if (random() % 4 == 0) {  // an oversized length: 16 MiB - 1 announced
      frame[0] = frame[1] = frame[2] = std::byte{0xff};
    }
    f.insert(f.end(), frame.begin(), frame.end());
  }
  (void)Send(*fd, f);
  ::shutdown(*fd, SHUT_WR);
  bool closed = false;
  (void)Drain(*fd, After(kDeadlineMs), &closed);
  if (!closed) t.Error("grpc: neither closed nor answered within 5 s after our close");
  ++t.grpc_closed;
  ::close(*fd);
}

// After the flood: a right request still gets a right answer.
bool StillServes(const ClusterKey& key, const Target& tg, std::mt19937_64& random, Tally& t) {
  if (tg.kind == "grpc") {
    Result<int> fd = Connect(tg.host, tg.port, After(kDeadlineMs));
    if (!fd.ok()) return false;
    static const std::string kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    Bytes f(reinterpret_cast<const std::byte*>(kPreface.data()),
            reinterpret_cast<const std::byte*>(kPreface.data()) + kPreface.size());
    for (int b : {0, 0, 0, 4, 0, 0, 0, 0, 0}) f.push_back(static_cast<std::byte>(b));  // SETTINGS
    std::array<std::byte, 9> head;
    const bool ok = Send(*fd, f) && RecvAll(*fd, head, After(kDeadlineMs), true).ok() &&
                    head[3] == std::byte{4};  // the server's SETTINGS frame
    ::close(*fd);
    return ok;
  }
  Result<Opened> o = Open(tg);
  if (!o.ok()) return false;
  const bool ok = Authenticate(key, *o, random, t) &&
                  (tg.kind == "chunk" ? ValidChunkRead(o->fd, random, t)
                                      : ValidMetaCall(o->fd, random, t));
  ::close(o->fd);
  return ok;
}

int Main(int argc, char** argv) {
  std::string key_file;
  uint64_t frames = 10000, seed = 1;
  std::vector<Target> targets;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--key" && i + 1 < argc) {
      key_file = argv[++i];
    } else if (a == "--frames" && i + 1 < argc) {
      frames = std::stoull(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::stoull(argv[++i]);
    } else {
      const size_t c1 = a.find(':'), c2 = a.rfind(':');
      if (c1 == std::string::npos || c1 == c2) {
        std::fprintf(stderr, "usage: aquifer_wire_flood --key FILE --frames N --seed S "
                             "KIND:HOST:PORT...\n");
        return 2;
      }
      targets.push_back({a.substr(0, c1), a.substr(c1 + 1, c2 - c1 - 1),
                         static_cast<uint16_t>(std::stoi(a.substr(c2 + 1)))});
    }
  }
  Result<ClusterKey> key = ReadClusterKeyFile(key_file);
  if (!key.ok()) {
    std::fprintf(stderr, "aquifer_wire_flood: key: %s\n", key.status().ToString().c_str());
    return 2;
  }
  std::printf("wire flood: seed=%llu frames=%llu per target, %zu targets\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(frames),
              targets.size());
  std::fflush(stdout);
  std::vector<Tally> tallies(targets.size());
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (size_t i = 0; i < targets.size(); ++i) {
    threads.emplace_back([&, i] {
      std::mt19937_64 random(seed * 1000003 + i);
      const Target& tg = targets[i];
      Tally& t = tallies[i];
      for (uint64_t n = 0; n < frames; ++n, ++t.cases) {
        if (tg.kind == "grpc") {
          GrpcCase(tg, random, t);
        } else {
          WireCase(*key, tg, random, t);
        }
      }
      if (!StillServes(*key, tg, random, t)) t.Error("does not serve a right request afterwards");
    });
  }
  for (auto& th : threads) th.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  uint64_t errors = 0, total = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    const Tally& t = tallies[i];
    const Target& tg = targets[i];
    std::printf("wire flood: %s %s:%u cases=%llu handshakes_refused=%llu frames_rejected=%llu "
                "requests_answered=%llu grpc_closed=%llu errors=%llu\n",
                tg.kind.c_str(), tg.host.c_str(), tg.port,
                static_cast<unsigned long long>(t.cases),
                static_cast<unsigned long long>(t.handshakes_refused),
                static_cast<unsigned long long>(t.frames_rejected),
                static_cast<unsigned long long>(t.requests_answered),
                static_cast<unsigned long long>(t.grpc_closed),
                static_cast<unsigned long long>(t.errors));
    for (const std::string& e : t.first_errors) std::printf("  error: %s\n", e.c_str());
    errors += t.errors;
    total += t.cases;
  }
  std::printf("wire flood: %llu cases in %.1f s, %llu errors\n",
              static_cast<unsigned long long>(total), seconds,
              static_cast<unsigned long long>(errors));
  return errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace aquifer::wire

int main(int argc, char** argv) { return aquifer::wire::Main(argc, argv); }
