// Rebuilding chunks from their stripe, and bringing one position of one placement group up to
// date on this data server: the one mechanism behind repair, rebalance, drain and the scrubber's
// anti-entropy (docs/repair.md).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "aquifer/ids.h"
#include "aquifer/status.h"
#include "server/chunk_store/chunk_store.h"
#include "server/repair/cluster.h"
#include "server/repair/throttle.h"

namespace aquifer::server {

// Waits up to `d` unless the job is cancelled; returns false when cancelled.
using Sleeper = std::function<bool(std::chrono::nanoseconds d)>;

// Builds the bytes of chunk `id` (position id.position of its stripe) at `version` from the
// stripe's other chunks of that same version.
//
// `sources` has placement.pg_width entries: sources[j] is the HOST:PORT of a server believed to
// hold position j at `version`, or "" (sources[id.position] is ignored). Replicated stripe
// (placement.replicated): copies any one of positions 0..m. Erasure-coded stripe: reads k chunks
// (skipping ones that fail, are of another version or have a bad length), zero-pads data chunks
// to unit_bytes, decodes with ErasureCodec::Reconstruct, and clips a data chunk to
// clamp(stripe_bytes - i * unit_bytes, 0, unit_bytes). *bytes_read (may be null) gets the bytes
// fetched from peers.
// Errors: kNotFound when the position holds nothing for this placement (replicated and
// position > m); kInvalidArgument for an unknown or impossible placement (k or m out of the
// codec's range); kUnavailable when too few sources answered with that version.
// Thread-safe (codecs are cached per (k, m)).
Result<std::string> RebuildChunk(PeerLink& peers, const ChunkId& id, uint64_t version,
                                 const ChunkPlacement& placement,
                                 const std::vector<std::string>& sources, uint64_t* bytes_read);

// The length position `position` of a stripe has, from its placement: a copy's stripe_bytes when
// replicated (0 past m), else unit_bytes for parity and the clipped length for data.
uint64_t ExpectedChunkBytes(const ChunkPlacement& placement, uint32_t position);

struct PgSyncTask {
  uint32_t pg_width = 0;
  uint32_t pg_index = 0;
  uint32_t position = 0;
  ServerId copy_from;       // when usable and it lists a version: copy that chunk from it (0: none)
  // false (moves): store every version that the PG's other targets (or copy_from) show and this
  // server lacks. true (scrub): only versions newer than this server's newest of that chunk
  // (stale chunks), so versions pruned here are never brought back.
  bool only_newer = false;
  // true (backfill): only versions newer than this server's newest of that chunk, every
  // version the others hold when it holds none (a write that went degraded while it was down,
  // also a rewrite over a version it holds); rebuilt as in a move.
  bool only_missing = false;
  // When set (backfill): asked once per stripe that has work; false skips the stripe (its file
  // is deleted, or the stripe truncated away). Called from the calling thread.
  std::function<bool(const ChunkId& id, const ChunkPlacement& placement)> keep;
};

// Counters of one pass, readable while it runs.
struct PgSyncStats {
  std::atomic<uint64_t> chunks_done{0};   // chunk versions stored here (copied, rebuilt, present)
  std::atomic<uint64_t> chunks_total{0};  // ... known to be needed (grows while listing)
  std::atomic<uint64_t> bytes_done{0};
  std::atomic<uint64_t> bytes_total{0};
  std::atomic<uint64_t> copied{0};        // fetched whole from copy_from
  std::atomic<uint64_t> rebuilt{0};       // copied from a replica or decoded
  std::atomic<uint64_t> unrebuildable{0}; // versions too few servers hold (e.g. a torn write)
  std::atomic<uint64_t> listed{0};        // chunk versions listed on peers
  std::atomic<uint64_t> skipped{0};       // stripes `keep` refused
  std::atomic<uint64_t> collected{0};     // versions the store refused: a GC task applied here
                                          // covers them (taken out of the totals)
};

// One pass that makes position `task.position` of PG (task.pg_width, task.pg_index) complete on
// this server (`store`): lists the PG on every other usable target in `map` (position j from
// targets[j] only) and on task.copy_from, then for every (inode, stripe, version) found, oldest
// first, copies it from copy_from or rebuilds it (RebuildChunk) and writes it here durably with
// the same version and placement, never replacing a version already here (so chunks present are
// skipped, and a pass can be re-run after a restart). A version the store refuses because a GC
// task applied here covers it (ChunkStore::CollectGarbage) is garbage: skipped, out of the totals.
// Reads are paced by `throttle` (bytes fetched from peers), waiting through `sleep`.
// Errors: kNotFound when the map has no such PG; kUnavailable when a listing or a needed chunk
// could not be fetched, or when cancelled (what was stored stays; re-run the pass); the store's
// errors (kNoSpace, kInternal).
Status SyncPgPosition(const PgSyncTask& task, const ClusterView& map, ChunkStore& store,
                      PeerLink& peers, Throttle& throttle, const Sleeper& sleep,
                      PgSyncStats* stats);

}  // namespace aquifer::server
