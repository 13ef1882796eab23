// aquifer-data's metrics for /metrics (docs/metrics.md lists them):
//   aquifer_data_chunk_requests_total{op, wire, code}  counter: chunk reads and writes served to
//                                                       clients and peers, by op ("read",
//                                                       "write"), wire ("grpc", "chunk_wire")
//                                                       and reply code (CodeName: "ok",
//                                                       "not_found", "corruption", "no_space"..)
//   aquifer_data_chunk_seconds{op}                     histogram: time to serve one, seconds
//   aquifer_data_chunk_bytes_total{op}                 counter: data bytes read or written
// and, read at scrape time from the running server (RegisterDataMetrics): capacity, used and
// free bytes, chunks and versions, checksum failures seen by reads and by scrub, scrub and
// backfill counts, move tasks and their progress, registrations and heartbeats. gRPC calls are
// counted as aquifer_data_rpc_* by common/rpc/rpc_metrics.h.
//
// Thread-safe. CountChunkOp costs two atomic adds and one histogram observation (the child's
// own mutex); children are looked up once per (op, wire, code) and kept.
#pragma once

#include <cstdint>

#include "aquifer/status.h"
#include "common/metrics.h"

namespace aquifer::server {

class DataServer;

enum class ChunkOp : uint8_t { kRead, kWrite };
enum class ChunkWire : uint8_t { kGrpc, kChunkWire };

// Counts one chunk request served: its outcome, data bytes moved (0 on error) and duration.
void CountChunkOp(ChunkOp op, ChunkWire wire, const Status& outcome, uint64_t bytes,
                  double seconds);

// Registers the scrape-time collector; `server` must outlive the returned handle.
metrics::Collector RegisterDataMetrics(DataServer* server);

}  // namespace aquifer::server
