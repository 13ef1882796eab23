// DataClient: the client library's view of one aquifer-data server (proto/data.proto), in the
// library's own types. The gRPC implementation lives in data_client.cc.
//
// Errors: the server's status (kNotFound: no chunk version <= max_version; kCorruption: bad
// checksum; kNoSpace: disk full), or kUnavailable when the server cannot be reached before
// `deadline`. Thread-safe; one instance per server address, shared by all threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

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

struct ChunkData {
  uint64_t version = 0;
  uint64_t chunk_length_bytes = 0;  // the whole chunk's length
  std::string bytes;                // the requested range, clipped to the chunk's length
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
};

// Connects (lazily) to the data server at `address` ("host:port").
std::unique_ptr<DataClient> NewGrpcDataClient(const std::string& address);

}  // namespace aquifer::client
