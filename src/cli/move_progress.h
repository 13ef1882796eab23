// Progress of the move tasks one command follows (`aquifer repair wait`, `rebalance wait`,
// `server drain --wait`, `cluster grow --wait`) across polls of GetMoves. Pure: the caller polls
// and passes a monotonic clock in milliseconds; no I/O, not thread-safe (one caller).
//
// Why estimates: a task's totals come from its destination's heartbeats once it has listed its
// source's chunks, so a queued task reports 0/0. Summing only the reported totals made a wait's
// first lines say "0 B/0 B, eta 0 s" for a repair that went on for minutes. A task with no
// report yet is counted at what one PG position holds on average over the up servers (a down
// source's last report stays while its positions move away, so its own figures drift); the
// line marks such totals with "~".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/cluster_view.h"

namespace aquifer::cli {

// What one PG position holds on average: the up members' used bytes and chunks over the PG
// positions they hold. {0, 0} when no such server reports any.
struct PositionEstimate {
  double bytes = 0;
  double chunks = 0;
};
PositionEstimate EstimatePosition(const ClusterView& view);

// What finished tasks of the followed kinds moved since the metadata server started
// (MovesView::completed_bytes / completed_chunks summed over those kinds).
struct MovedSoFar {
  uint64_t bytes = 0;
  uint64_t chunks = 0;
};

class MoveTally {
 public:
  // One poll: `tasks` are the tasks of the followed kinds now listed, `view` the cluster map of
  // the same moment (nullptr: no estimates), `now_ms` a monotonic clock, `moved` the server's
  // count of what finished tasks moved (std::nullopt from a server without it). A task seen
  // before that is no longer listed finished. What finished tasks moved is the growth of
  // `moved` since the first poll: a task finishes and leaves the list between two polls, often
  // within one, so its last listed figures are mostly 0/0 (the bug: "203 finished, 0 B" after
  // a repair that moved 200 MiB). Without `moved`, a finished task counts its last totals.
  void Update(const std::vector<const MoveView*>& tasks, const ClusterView* view, int64_t now_ms,
              std::optional<MovedSoFar> moved = std::nullopt);

  uint64_t chunks_done() const { return chunks_done_; }
  uint64_t chunks_total() const { return chunks_total_; }
  uint64_t bytes_done() const { return bytes_done_; }
  uint64_t bytes_total() const { return bytes_total_; }
  bool estimated() const { return estimated_; }  // some totals are estimates
  uint32_t running() const { return running_; }
  uint32_t queued() const { return queued_; }
  uint32_t finished() const { return finished_; }

  // Bytes per second: moved since the first poll over the time since it, once 2 s passed (the
  // bytes done before the first poll are not this command's: counting them inflated the first
  // rates); before that, the sum of the running tasks' own rates as the metadata server
  // computed them from their heartbeats.
  uint64_t RateBytesPerS() const;
  // Milliseconds until bytes_total at RateBytesPerS; 0 when nothing is left, -1 unknown.
  int64_t EtaMs() const;
  // Done over total, 0..1 (1 when nothing is known to be left).
  double Fraction() const;
  // "chunks 10/40, 12.0 MiB/~48.0 MiB, 30.2 MiB/s, eta 2 s; moves 3 done, 2 running, 1 queued"
  std::string Line() const;

 private:
  struct Seen {
    uint64_t chunks_done = 0, chunks_total = 0, bytes_done = 0, bytes_total = 0;
    bool estimated = false;
    bool finished = false;
    uint64_t rate = 0;
  };
  std::map<uint64_t, Seen> tasks_;
  uint64_t chunks_done_ = 0, chunks_total_ = 0, bytes_done_ = 0, bytes_total_ = 0;
  bool estimated_ = false;
  uint32_t running_ = 0, queued_ = 0, finished_ = 0;
  bool first_seen_ = false;
  int64_t first_ms_ = 0, now_ms_ = 0;
  uint64_t first_bytes_done_ = 0;
  uint64_t reported_rate_ = 0;  // sum over running tasks
  std::optional<MovedSoFar> first_moved_;  // `moved` at the first poll (0 after a restart)
  MovedSoFar last_moved_;                  // `moved` at the last poll
  MovedSoFar carried_;                     // counted before the metadata server restarted
};

// A text progress bar: "[#########---------------------] 30%", `width` cells.
std::string ProgressBar(double fraction, int width = 30);

}  // namespace aquifer::cli
