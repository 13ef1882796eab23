// The chunk wire: a small binary protocol over TCP for the two calls on the data path,
// ReadChunk and WriteChunk, beside aquifer-data's gRPC service (which keeps every other call and
// still serves both of these). Why it exists, and what it costs, is in docs/design.md "The chunk
// wire". This file holds the frame formats, their encoders and strict decoders, and blocking
// socket helpers with a deadline. No gRPC, no protobuf, no threads.
//
// A connection, client to server:
//   1. On accept the server sends a 16-byte hello: magic "AQWH", protocol version, flags (bit 0:
//      the server holds a cluster key and requires the handshake), and the server's instance
//      token (a random number per process, also returned by the gRPC Info call), so a client
//      never talks to another process that reused the port.
//      With the auth flag the handshake of common/cluster_key.h follows (connection.h runs it):
//      server nonce (32 bytes), client nonce and proof (64), server proof (32); a wrong proof
//      closes the connection.
//   2. The client then sends requests one at a time: a 96-byte request header, then for a
//      write `payload_bytes` of chunk data. The server answers each with a 48-byte reply header,
//      `message_bytes` of error text, then `data_bytes` of chunk data (reads).
// All integers are little-endian. A frame that fails to decode ends the connection (the framing
// cannot be trusted after it); a request that decodes but is refused (kInvalidArgument, ...) gets
// a reply with that status and the connection goes on.
#pragma once

#include <sys/uio.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "aquifer/ids.h"
#include "aquifer/status.h"
#include "wire/conn.h"

namespace aquifer::wire {

inline constexpr uint32_t kHelloMagic = 0x48575141;    // "AQWH" in little-endian bytes
inline constexpr uint32_t kRequestMagic = 0x51575141;  // "AQWQ"
inline constexpr uint32_t kReplyMagic = 0x52575141;    // "AQWR"
inline constexpr uint16_t kProtocolVersion = 1;

inline constexpr size_t kHelloBytes = 16;
inline constexpr size_t kRequestBytes = 96;
inline constexpr size_t kReplyBytes = 48;

// Largest chunk a frame may carry, bytes (the chunk store's own limit).
inline constexpr uint64_t kMaxPayloadBytes = 16ull << 20;
// Largest error text a reply may carry, bytes.
inline constexpr uint32_t kMaxMessageBytes = 4096;

enum class Op : uint8_t { kRead = 1, kWrite = 2 };

// Placement of a chunk, as in proto/data.proto ChunkPlacement (pg_width 0 = not given).
struct WirePlacement {
  uint32_t pg_width = 0;
  uint32_t pg_index = 0;
  uint8_t k = 0;
  uint8_t m = 0;
  bool replicated = false;
  uint32_t unit_bytes = 0;     // bytes
  uint64_t stripe_bytes = 0;   // bytes
  bool operator==(const WirePlacement&) const = default;
};

struct Hello {
  uint16_t protocol_version = kProtocolVersion;
  uint64_t instance = 0;  // the server process's token
  bool auth = false;      // the cluster-key handshake follows the hello
};

struct Request {
  Op op = Op::kRead;
  bool sync = false;               // write: durable before the reply
  ChunkId id;
  uint64_t version = 0;            // read: newest version <= this (0 = newest); write: version
  uint64_t committed_version = 0;  // write only
  uint64_t offset_bytes = 0;       // read only: bytes into the chunk
  uint64_t length_bytes = 0;       // read only: bytes, 0 = to the end of the chunk
  uint64_t payload_bytes = 0;      // write only: chunk bytes that follow the header
  WirePlacement placement;         // write only
};

struct Reply {
  Code code = Code::kOk;
  uint32_t message_bytes = 0;      // error text that follows the header
  uint64_t version = 0;            // read: the version read
  uint64_t chunk_length_bytes = 0; // read: the whole chunk's length
  uint64_t stripe_bytes = 0;       // read: the placement's stripe_bytes (0 = not known)
  uint64_t data_bytes = 0;         // read: chunk bytes that follow the message
};

// Encoders: fixed-size frames. They never fail; decoders check what encoders guarantee.
std::array<std::byte, kHelloBytes> EncodeHello(const Hello& hello);
std::array<std::byte, kRequestBytes> EncodeRequest(const Request& request);
std::array<std::byte, kReplyBytes> EncodeReply(const Reply& reply);

// Decoders take exactly one frame's bytes. Errors (kInvalidArgument, with what was wrong):
// wrong size or magic; an unknown protocol version; a hello flag other than auth; an unknown op or flag bit; inode 0; a read
// with a payload; a payload over kMaxPayloadBytes; pg_width over 65535; nonzero reserved bytes;
// a reply code outside Code; a message over kMaxMessageBytes; data with an error code, or more
// than kMaxPayloadBytes of it.
Result<Hello> DecodeHello(std::span<const std::byte> bytes);
Result<Request> DecodeRequest(std::span<const std::byte> bytes);
Result<Reply> DecodeReply(std::span<const std::byte> bytes);

// Socket I/O on `fd` or `conn` (any mode; waits with poll) that ends by `deadline`; a Conn with
// a TLS session goes through it (conn.h), the `fd` forms are plain TCP.
// SendAll writes every byte of `iov` (modified as it goes: the array is consumed), with
// MSG_NOSIGNAL. RecvAll fills `out` completely; with `wait_first` it polls before its first
// recv (one system call fewer when the bytes are known not to be there yet, as for a reply just
// after its request was sent); with an empty `out` it only waits until the socket is readable
// (or closed).
// Errors: kUnavailable with "timed out", "connection closed" (the peer closed before all bytes
// came) or the errno text; the connection must then be closed (a frame may be half sent).
Status SendAll(int fd, struct iovec* iov, int iov_count, Deadline deadline);
Status SendAll(Conn& conn, struct iovec* iov, int iov_count, Deadline deadline);
// Moves `iov` / `iov_count` past `sent` bytes just written (sendmsg's return) and past any empty
// entries after them; the first partly written entry is trimmed in place. The shared step of
// SendAll and WriteFull (connection.h). `sent` must not exceed the bytes left in the array.
void ConsumeIov(struct iovec*& iov, int& iov_count, size_t sent);
Status RecvAll(int fd, std::span<std::byte> out, Deadline deadline, bool wait_first = false);
Status RecvAll(Conn& conn, std::span<std::byte> out, Deadline deadline, bool wait_first = false);

// Connects a TCP socket to `host`:`port` (a numeric IPv4 or IPv6 address, or a name), with
// TCP_NODELAY, by `deadline`. Returns the connected fd (the caller closes it).
// Errors: kUnavailable (refused, unreachable, timed out), kInvalidArgument (unparsable host).
Result<int> Connect(const std::string& host, uint16_t port, Deadline deadline);

}  // namespace aquifer::wire
