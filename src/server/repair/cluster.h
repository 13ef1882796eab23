// What the repair machinery of a data server sees of the cluster: the cluster map (servers and
// placement-group tables), move and PG-GC tasks from aquifer-meta, and other data servers
// (PeerLink). No protobuf here: rpc/ converts. See docs/repair.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "aquifer/ids.h"
#include "aquifer/status.h"
#include "server/chunk_store/chunk_store.h"

namespace aquifer::server {

// One data server as the cluster map lists it.
struct PeerInfo {
  ServerId id;
  std::string address;  // HOST:PORT
  bool up = false;
  std::string state;    // "in", "draining" or "removed"
  std::string failure_domain;  // "" when the map gives none
  bool usable() const { return up && state != "removed" && !address.empty(); }
};

// One placement group: `targets` has width server ids (position i on targets[i]); `pending` is
// empty or has width entries, entry i being 0 or the server receiving position i by a move.
struct PgTargets {
  std::vector<ServerId> targets;
  std::vector<ServerId> pending;
};

// A snapshot of aquifer-meta's cluster map.
struct ClusterView {
  uint64_t version = 0;
  std::map<uint32_t, PeerInfo> servers;               // by server id
  std::map<uint32_t, std::vector<PgTargets>> tables;  // by width k + m
  // The server, or nullptr when the map does not list it.
  const PeerInfo* Server(ServerId id) const {
    auto it = servers.find(id.value());
    return it == servers.end() ? nullptr : &it->second;
  }
  // The PG, or nullptr when the map has no such table or index.
  const PgTargets* Pg(uint32_t width, uint32_t index) const {
    auto it = tables.find(width);
    if (it == tables.end() || index >= it->second.size()) return nullptr;
    return &it->second[index];
  }
};

// Move position `position` of PG (pg_width, pg_index) from `from` to `to` (this server).
struct MoveTask {
  uint64_t id = 0;
  uint32_t pg_width = 0;
  uint32_t pg_index = 0;
  uint32_t position = 0;
  ServerId from;                        // may be down or removed
  ServerId to;
  std::string kind;                     // "repair" | "rebalance" | "drain"
  uint64_t rate_limit_bytes_per_s = 0;  // 0 = unlimited
  uint64_t map_version = 0;
};

// What the destination reports about a move in each heartbeat.
struct MoveProgress {
  uint64_t task_id = 0;
  uint64_t chunks_done = 0;
  uint64_t chunks_total = 0;  // as far as known
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  bool done = false;          // every chunk of the PG position is durable here
  std::string error;          // non-empty: the task failed here
};

// Delete every chunk of PG (pg_width, pg_index) at `position` on this server.
struct PgGcTask {
  uint64_t id = 0;
  uint32_t pg_width = 0;
  uint32_t pg_index = 0;
  uint32_t position = 0;
};

// What the backfill pass needs to know of a file from aquifer-meta (GetAttr): its committed size
// and layout, to skip chunks a delete or truncate has removed.
struct InodeFacts {
  uint64_t size = 0;        // committed file size, bytes
  uint32_t k = 0;           // data units per stripe (0 = unknown: use the chunk's placement)
  uint32_t unit_bytes = 0;  // stripe unit, bytes (0 = unknown)
};

// One chunk version read from another data server.
struct PeerChunk {
  uint64_t version = 0;
  std::string data;
  ChunkPlacement placement;
};

// Other data servers, as seen by this one. Implementations: gRPC (rpc/), fakes in tests.
// Thread-safe: called from move and scrub threads at once.
class PeerLink {
 public:
  virtual ~PeerLink() = default;
  // Up to `limit` chunks of PG (pg_width, pg_index) with key > after on the server at
  // `address`, every version of each; *eof says whether the listing reached the end.
  // Errors: kUnavailable when the server cannot be reached; the server's own codes otherwise.
  virtual Result<std::vector<ChunkListEntry>> ListPg(const std::string& address,
                                                     uint32_t pg_width, uint32_t pg_index,
                                                     const ChunkId& after, uint32_t limit,
                                                     bool* eof) = 0;
  // The newest version <= max_version of chunk `id`, whole (<= 16 MiB).
  // Errors: kNotFound; kCorruption (the peer's copy is bad); kUnavailable.
  virtual Result<PeerChunk> Read(const std::string& address, const ChunkId& id,
                                 uint64_t max_version) = 0;
};

}  // namespace aquifer::server
