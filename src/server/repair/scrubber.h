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
#include "server/repair/throttle.h"

namespace aquifer::server {

struct ScrubOptions {
  uint64_t rate_bytes_per_s = 20 * 1024 * 1024;  // chunk bytes read per second; 0 = unlimited
  std::chrono::seconds interval{3600};           // from one pass's start to the next; 0 = no
                                                 // periodic passes (queued repairs still run)
  // A backfill pass that left work undone (a PG position whose peers could not all be listed, a
  // file whose size meta could not say) runs again this long after it ends, then after twice as
  // long each time it is still incomplete, up to kMaxBackfillRetry; a complete pass resets it.
  std::chrono::milliseconds backfill_retry{3000};
  // Between sweeps of hand-off copies: chunk versions stored here for a PG position whose
  // target (or pending target) is another server, deleted once that server holds the version or
  // a newer one (docs/design.md "Hand-off to a spare failure domain"). 0 = no sweeps.
  std::chrono::milliseconds handoff_sweep{20000};
};

inline constexpr std::chrono::milliseconds kMaxBackfillRetry{300000};  // 5 minutes

// Totals since the data server started.
struct ScrubCounters {
  uint64_t chunks_scrubbed = 0;   // chunk versions read whole and checked
  uint64_t corrupt_found = 0;     // corrupt (bad CRC or header) or stale chunk versions found
  uint64_t corrupt_repaired = 0;  // ... of which rebuilt and rewritten here
  uint64_t passes = 0;            // completed passes
  uint64_t chunks_backfilled = 0; // chunk versions this server lacked entirely, rebuilt here
  uint64_t bytes_backfilled = 0;  // ... their bytes
  uint64_t backfill_passes = 0;   // completed backfill passes (alone or within a scrub pass)
  uint64_t backfills_complete = 0;  // ... of which brought every PG position up to date
};

class Scrubber {
 public:
  // `get_map` fetches the cluster map, `self` this server's id (0 before registration) and
  // `get_inode` a file's committed size and layout from aquifer-meta (kNotFound: deleted); all
  // are called from the scrub thread. `store` and `peers` outlive the scrubber.
  Scrubber(ChunkStore* store, PeerLink* peers, std::function<Result<ClusterView>()> get_map,
           std::function<ServerId()> self, std::function<Result<InodeFacts>(InodeId)> get_inode,
           ScrubOptions options);
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
  // Sweeps hand-off copies now, on the calling thread (tests; the scrub thread runs it every
  // ScrubOptions::handoff_sweep): lists this store's chunk versions whose PG position the
  // cluster map gives another server, lists that PG on each such target, and deletes each version
  // the target holds at the same or a newer version. Keeps everything when the map or a target
  // cannot be read. Returns how many versions it deleted.
  uint64_t SweepHandoffs();
  // Runs a backfill pass alone (no CRC walk) `delay` from now (the earliest request wins), once
  // the cluster map shows this server up; while it does not, retries every 2 s for up to a
  // minute. A pass left incomplete (a peer not listed, a file meta could not size) runs again
  // after ScrubOptions::backfill_retry, doubling up to kMaxBackfillRetry. Called after
  // (re)registration with aquifer-meta. See docs/repair.md "Backfill".
  void RequestBackfill(std::chrono::milliseconds delay);

  ScrubCounters counters() const;

 private:
  void Loop();
  // What a backfill pass got done.
  enum class BackfillResult {
    kNotUp,       // the map does not show this server up (or cannot be fetched): nothing done
    kIncomplete,  // some PG positions failed or some files were skipped: run again later
    kDone,        // every PG position this server holds was brought up to date
  };
  // A scrub pass; ends with a backfill pass, whose result it returns.
  BackfillResult Pass();
  // Reads `id` at `version` whole; on corruption counts it and repairs it. Returns false when
  // stopping.
  bool Check(const ChunkId& id, uint64_t version, const ChunkPlacement& placement,
             bool from_queue);
  Status Repair(const ChunkId& id, uint64_t version, const ChunkPlacement& placement);
  void DrainQueue();
  // The backfill pass: per PG position this server holds in the map, rebuilds the stripes the
  // others hold and this server has no version of, unless meta says the file is gone or the
  // stripe is past its size.
  BackfillResult Backfill(Throttle& throttle);
  // Waits up to d unless stopping; false when stopping.
  bool Sleep(std::chrono::nanoseconds d);

  ChunkStore* store_;
  PeerLink* peers_;
  std::function<Result<ClusterView>()> get_map_;
  std::function<ServerId()> self_;
  std::function<Result<InodeFacts>(InodeId)> get_inode_;
  const ScrubOptions options_;
  std::thread thread_;

  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  bool stopping_ = false;
  bool pass_requested_ = false;
  bool backfill_requested_ = false;
  std::chrono::steady_clock::time_point backfill_at_;
  int backfill_attempts_ = 0;
  std::chrono::milliseconds backfill_retry_;  // delay before re-running an incomplete backfill
  uint64_t backfill_gen_ = 0;  // bumped by RequestBackfill: wakes the loop to re-arm its timer  // of the requested backfill, while the map shows this server down
  std::deque<std::pair<ChunkId, uint64_t>> queue_;
  std::set<std::pair<ChunkId, uint64_t>> queued_;
  ScrubCounters counters_;
};

}  // namespace aquifer::server
