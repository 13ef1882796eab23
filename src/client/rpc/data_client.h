// DataClient: the client library's view of one aquifer-data server (proto/data.proto), in the
// library's own types. The gRPC implementation lives in data_client.cc.
//
// Errors: the server's status (kNotFound: no chunk version <= max_version; kStale: only versions
// above max_version, the ones below were pruned; kCorruption: bad
// checksum; kNoSpace: disk full), or kUnavailable when the server cannot be reached before
// `deadline`. Thread-safe; one instance per server address, shared by all threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "aquifer/ids.h"
#include "aquifer/status.h"

namespace aquifer::client {

// Where a chunk belongs (proto ChunkPlacement; docs/repair.md), sent with every chunk write so a
// data server can find every chunk of a placement group and rebuild any one chunk by itself.
struct ChunkPlacement {
  uint32_t pg_width = 0;       // k + m: which PG table
  uint32_t pg_index = 0;       // index of the stripe's PG in that table
  uint32_t k = 0;
  uint32_t m = 0;
  uint32_t unit_bytes = 0;     // stripe unit, bytes
  uint64_t stripe_bytes = 0;   // file bytes in this stripe
  bool replicated = false;     // true: positions 0..m hold copies; false: erasure coded
};

// Bytes received from a data server, kept in the buffers they arrived in (gRPC's receive
// slices) instead of being gathered into one string: copying them out to where they belong is
// their only copy in the client. Movable and copyable (copies share the buffers); immutable.
class ChunkBytes {
 public:
  ChunkBytes() = default;
  // One piece that owns `bytes` (tests and in-memory uses).
  explicit ChunkBytes(std::string bytes);
  // `pieces`, in order, are the bytes; `owner` keeps their memory alive as long as this object or
  // a copy of it lives.
  ChunkBytes(std::vector<std::span<const std::byte>> pieces, std::shared_ptr<const void> owner);

  uint64_t size() const { return size_; }  // bytes
  // Copies bytes [offset, offset + dst.size()) into `dst`. Requires offset + dst.size() <= size().
  void CopyTo(uint64_t offset, std::span<std::byte> dst) const;
  std::string ToString() const;  // all the bytes, copied

  // Appends bytes [offset, offset + length) of `from` after these, sharing its buffers (no
  // copy). Requires offset + length <= from.size().
  void Append(const ChunkBytes& from, uint64_t offset, uint64_t length);
  // Appends `length` zero bytes: views of one static zeroed block, never written.
  void AppendZeros(uint64_t length);
  // Appends the pieces that hold bytes [offset, offset + length) to `out`, in order (views
  // valid while this object or a copy lives). Requires offset + length <= size().
  void Slice(uint64_t offset, uint64_t length,
             std::vector<std::span<const std::byte>>* out) const;

 private:
  // Calls fn(span) for each piece of bytes [offset, offset + length), in order.
  template <class Fn>
  void ForEachPiece(uint64_t offset, uint64_t length, Fn&& fn) const;

  std::vector<std::shared_ptr<const void>> owners_;  // keep every piece's memory alive
  std::vector<std::span<const std::byte>> pieces_;
  uint64_t size_ = 0;
};

struct ChunkData {
  uint64_t version = 0;
  uint64_t chunk_length_bytes = 0;  // the whole chunk's length
  uint64_t stripe_bytes = 0;        // the stripe's length when this version was written (0: not told)
  ChunkBytes bytes;                 // the requested range, clipped to the chunk's length
};

// Parses a serialized ReadChunkResponse (proto/data.proto) that arrived as `pieces` (in order,
// split anywhere) without copying its `data`: the result's bytes point into the pieces and hold
// `owner`. `address` names the server in errors. Errors: kInternal when the bytes are not a
// well-formed ReadChunkResponse (truncated, or a known field with the wrong wire type); the
// server's own status (kNotFound, kCorruption, ...) when it is not OK.
Result<ChunkData> ParseReadChunkReply(std::vector<std::span<const std::byte>> pieces,
                                      std::shared_ptr<const void> owner,
                                      const std::string& address);

// Where a data server serves the chunk wire (docs/design.md "The chunk wire"), as its Info call
// reports it.
struct WireEndpoint {
  uint16_t port = 0;      // on the server's gRPC host; 0 = the server does not serve the wire
  uint64_t instance = 0;  // the token the server's hello carries
};

class DataClient {
 public:
  virtual ~DataClient() = default;

  // Writes the whole chunk `id` at `version` (copy-on-write on the server). `committed_version`
  // is the file's committed data_version; `placement` is stored with the chunk. With sync,
  // durable before return. kStale: the server is neither target nor pending target of this PG
  // position in the map it knows (refresh the map, then retry).
  virtual Status WriteChunk(const ChunkId& id, uint64_t version, uint64_t committed_version,
                            std::span<const std::byte> data, bool sync,
                            const ChunkPlacement& placement,
                            std::chrono::steady_clock::time_point deadline) = 0;

  // Reads [offset, offset + length) (length 0 = to the end) of the newest version of chunk `id`
  // that is <= max_version (0 = newest of all).
  virtual Result<ChunkData> ReadChunk(const ChunkId& id, uint64_t max_version,
                                      uint64_t offset_bytes, uint64_t length_bytes,
                                      std::chrono::steady_clock::time_point deadline) = 0;

  // Deletes every chunk of `inode` with stripe >= from_stripe and version <= max_version.
  virtual Status DeleteChunks(InodeId inode, uint64_t from_stripe, uint64_t max_version,
                              std::chrono::steady_clock::time_point deadline) = 0;

  // Asks the server where it serves the chunk wire (the Info call). Errors: kUnavailable.
  virtual Result<WireEndpoint> GetWireEndpoint(std::chrono::steady_clock::time_point deadline) = 0;
};

// Where a data client gets the chunk capability (docs/design.md "Chunk capabilities") each
// ReadChunk (write = false) and WriteChunk (write = true) of `inode` carries: the bytes, or ""
// when none is needed (the process holds the cluster key). `fresh` asks for one not taken from
// a cache (after a data server refused the one sent). Errors: the metadata server's (kReadOnly
// for a write by a read-only credential, kNotFound, kUnavailable); the chunk call then fails
// with it. Called from any thread. An empty function: no capability is ever sent.
using CapabilitySource = std::function<Result<std::string>(InodeId inode, bool write, bool fresh)>;

// Connects (lazily) to the data server at `address` ("host:port"), every call over gRPC.
std::unique_ptr<DataClient> NewGrpcDataClient(const std::string& address,
                                              CapabilitySource capabilities = {});

// Connects (lazily) to the data server at `address` ("host:port"). With `use_wire`, ReadChunk and
// WriteChunk go over the chunk wire when the server serves it (learnt with one Info call, asked
// again after a connection to it fails), else over gRPC; DeleteChunks always goes over gRPC.
// Errors as DataClient's; a connection that fails mid-call is kUnavailable, and a call on an
// idle pooled connection that the server had closed is retried once on a new one (both calls
// are idempotent: a chunk version is written whole or not at all). `capabilities` as for
// NewGrpcDataClient; the chunk wire carries none (only cluster-key holders pass its handshake).
std::unique_ptr<DataClient> NewDataClient(const std::string& address, bool use_wire,
                                          CapabilitySource capabilities = {});

}  // namespace aquifer::client
