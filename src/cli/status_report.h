// Text of `aquifer status`: servers, placement groups, capacity, the mount and (for a local
// cluster) its processes. Pure formatting; no I/O except what the caller passes in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "aquifer/status.h"
#include "cli/cluster_state.h"
#include "cli/cluster_view.h"

namespace aquifer::cli {

// What is known about the local processes of a `--root` cluster.
struct LocalProcesses {
  ClusterState state;
  bool meta_alive = false;
  std::vector<bool> data_alive;  // per state.data_servers entry
  bool mount_alive = false;
  std::string mount_type;        // fs type at state.mount.dir, "" when not mounted
};

// "1.5 GiB", "512 B", "20.0 MiB" (binary units, one decimal above bytes).
std::string HumanBytes(uint64_t bytes);

// "7 s", "2 min 5 s", "1 h 3 min"; "?" for a negative (unknown) value.
std::string HumanDuration(int64_t ms);

// One line of move progress: "chunks 10/40, 12.0 MiB/48.0 MiB, 30.2 MiB/s, eta 2 s".
std::string FormatMoveProgress(uint64_t chunks_done, uint64_t chunks_total, uint64_t bytes_done,
                               uint64_t bytes_total, uint64_t rate_bytes_per_s, int64_t eta_ms);

// The moves part of the report: summary line, the tasks (at most `max_rows`, running first),
// the degraded PGs (grouped by reason) and the health line.
std::string FormatMoves(const MovesView& moves, const ClusterView* view, size_t max_rows);
// "7(ds3)": server `id` with its failure domain as `view` names it ("7" when it does not, "-"
// for id 0). Pure.
std::string ServerName(ServerId id, const ClusterView* view);
// The move tasks of `moves`, running ones first, each group in its given order. Pure; the
// pointers point into `moves`.
std::vector<const MoveView*> RunningFirst(const MovesView& moves);

// The table of data servers: id, address, failure domain, up/DOWN, membership (in/draining/
// removed), PG positions held, used/capacity, chunks, scrub counters, last heartbeat.
std::string FormatServerTable(const ClusterView& view);

// What removing server `server_id` by force would do, judged from the PG tables: a position is
// missing when its target is down, removed, or the server being removed. m is the default
// layout's. Pure.
struct RemovalRisk {
  uint32_t m = 0;
  uint32_t servers_missing = 0;  // other servers already down or removed
  uint32_t pgs_lost = 0;         // PGs with more than m positions missing: their stripes are lost
  uint32_t pgs_at_risk = 0;      // PGs with exactly m missing: one more failure loses data
};
RemovalRisk RemovalRiskOf(const ClusterView& view, uint32_t server_id);

// The cluster's health as `aquifer status` reports it on its first line and in its exit code
// (docs/operations.md "Health and exit codes"). States from the least to the most serious; the
// report names the most serious one and every reason found.
enum class HealthState {
  kOk,                // nothing below
  kMountDown,         // a local cluster's mount is not mounted or its aquifer-mount is dead
  kNearlyFull,        // an up data server is at or above kNearlyFullPercent of its capacity
  kDegraded,          // a data server down, PG positions missing (repair pending or running),
                      // or stripes written below k + m awaiting backfill
  kWaitingForServer,  // missing positions with no spare failure domain to rebuild them on
  kDataAtRisk,        // PGs with exactly m positions missing: one more failure loses data
  kDataLost,          // stripes recorded lost, or PGs with more than m positions missing
  kUnreachable,       // the metadata server did not answer
};
inline constexpr uint32_t kNearlyFullPercent = 90;  // data servers refuse writes at 95 (default)

struct Health {
  HealthState state = HealthState::kOk;
  std::vector<std::string> reasons;  // every condition found, most serious first
};

// Judges health from what the report shows. `moves` may be null (not fetched). Pure.
Health HealthOf(const Result<ClusterView>& view, const Result<MovesView>* moves,
                const std::optional<LocalProcesses>& local);
// "ok", "mount down", "nearly full", "degraded", "waiting for a server", "data at risk",
// "data lost", "unreachable".
const char* HealthName(HealthState state);
// `aquifer status` exit code: ok 0, unreachable 1, waiting for a server 3, degraded 4, nearly
// full 5, mount down 6, data at risk 7, data lost 8 (2 is a usage error, as for every command).
int HealthExitCode(HealthState state);
// "health    ok" or "health    DEGRADED: reason; reason".
std::string FormatHealth(const Health& health);

// The whole report; its first line is FormatHealth(HealthOf(view, moves, local)). `view` is the metadata server's answer, or its error (then the report says
// the metadata server is unreachable and shows what else it knows). `local` is set for --root.
// `mounts` lists the mounts of this cluster found on this host (shown when `local` is not set).
std::string FormatStatus(const std::string& meta_address, const Result<ClusterView>& view,
                         const std::optional<LocalProcesses>& local,
                         const std::vector<std::string>& mounts,
                         const Result<MovesView>* moves = nullptr);

}  // namespace aquifer::cli
