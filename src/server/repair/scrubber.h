// The scrubber: a background, rate-limited pass over every chunk this data server stores that
// verifies every block's CRC32C and rebuilds corrupt chunks in place from their stripe; then,
// per placement group it holds, rebuilds stale chunks (the stripe's other positions show a newer
// version). Reads that hit corruption queue the chunk here for a prompt repair.
// See docs/repair.md ("Scrub").
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "aquifer/ids.h"
#include "aquifer/status.h"
#include "server/chunk_store/chunk_store.h"
#include "server/repair/cluster.h"

namespace aquifer::server {

struct ScrubOptions {
  uint64_t rate_bytes_per_s = 20 * 1024 * 1024;  // chunk bytes read per second; 0 = unlimited
  std::chrono::seconds interval{3600};           // from one pass's start to the next; 0 = no
                                                 // periodic passes (queued repairs still run)
};

// Totals since the data server started.
struct ScrubCounters {
  uint64_t chunks_scrubbed = 0;   // chunk versions read whole and checked
  uint64_t corrupt_found = 0;     // corrupt (bad CRC or header) or stale chunk versions found
  uint64_t corrupt_repaired = 0;  // ... of which rebuilt and rewritten here
  uint64_t passes = 0;            // completed passes
};

class Scrubber {
 public:
  // `get_map` fetches the cluster map and `self` this server's id (0 before registration);
  // both are called from the scrub thread. `store` and `peers` outlive the scrubber.
  Scrubber(ChunkStore* store, PeerLink* peers, std::function<Result<ClusterView>()> get_map,
           std::function<ServerId()> self, ScrubOptions options);
  ~Scrubber();  // Stop()

  // Starts the scrub thread: the first pass begins one interval after Start(). Call once.
  void Start();
  // Stops the thread (it stops at its next chunk or after an in-flight peer call). Idempotent.
  void Stop();

  // Queues chunk `id` at `version` for a re-check and repair (the read path found it corrupt).
  // Cheap and non-blocking; duplicates are merged; at most 10,000 queued (more are dropped:
  // the next pass finds them). Reads made by the scrubber itself are not queued.
  void QueueRepair(const ChunkId& id, uint64_t version);
  // Starts a pass now (tests, operators), unless one is running.
  void RequestPass();

  ScrubCounters counters() const;

 private:
  void Loop();
  void Pass();
  // Reads `id` at `version` whole; on corruption counts it and repairs it. Returns false when
  // stopping.
  bool Check(const ChunkId& id, uint64_t version, const ChunkPlacement& placement,
             bool from_queue);
  Status Repair(const ChunkId& id, uint64_t version, const ChunkPlacement& placement);
  void DrainQueue();
  // Waits up to d unless stopping; false when stopping.
  bool Sleep(std::chrono::nanoseconds d);

  ChunkStore* store_;
  PeerLink* peers_;
  std::function<Result<ClusterView>()> get_map_;
  std::function<ServerId()> self_;
  const ScrubOptions options_;
  std::thread thread_;

  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  bool stopping_ = false;
  bool pass_requested_ = false;
  std::deque<std::pair<ChunkId, uint64_t>> queue_;
  std::set<std::pair<ChunkId, uint64_t>> queued_;
  ScrubCounters counters_;
};

}  // namespace aquifer::server
