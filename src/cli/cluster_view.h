// What `aquifer status` shows of a running cluster, in the CLI's own types (no protobuf): the
// metadata server's cluster map and file-system totals.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "aquifer/ids.h"

namespace aquifer::cli {

struct ServerView {
  ServerId id;
  std::string address;         // HOST:PORT
  std::string failure_domain;
  bool up = false;
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t chunk_count = 0;
  int64_t last_heartbeat_ms_ago = -1;  // -1 = never
  std::string state;             // "in" | "draining" | "removed" ("" from an older server)
  uint32_t pg_positions = 0;     // PG positions it is the target of, all widths
  uint64_t chunks_scrubbed = 0;  // scrub totals since the data server started
  uint64_t corrupt_found = 0;
  uint64_t corrupt_repaired = 0;
};

// One placement group: its width (k + m) and the server id of each position.
struct PgView {
  uint32_t width = 0;
  std::vector<uint32_t> targets;
};

struct ClusterView {
  uint64_t map_version = 0;
  std::vector<PgView> pgs;  // every PG of every width
  std::vector<ServerView> servers;
  std::map<uint32_t, uint32_t> pg_count_by_width;  // width k+m -> placement groups
  uint32_t pending_positions = 0;  // PG positions with a pending target (a move in flight)
  uint32_t default_k = 0;
  uint32_t default_m = 0;
  uint64_t default_unit_bytes = 0;
  // StatFs.
  uint64_t total_bytes = 0;  // raw capacity of up data servers
  uint64_t free_bytes = 0;
  uint64_t usable_total_bytes = 0;  // after the default layout's parity overhead
  uint64_t usable_free_bytes = 0;
  uint64_t files = 0;  // inodes in use
};

// One move task as GetMoves reports it (docs/repair.md).
struct MoveView {
  uint64_t id = 0;
  std::string kind;   // "repair" | "rebalance" | "drain"
  std::string state;  // "queued" | "running"
  uint32_t pg_width = 0;
  uint32_t pg_index = 0;
  uint32_t position = 0;
  ServerId from;
  ServerId to;
  uint64_t chunks_done = 0;  // last progress report (0 before the first)
  uint64_t chunks_total = 0;
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  bool done = false;
  std::string error;
  uint64_t rate_bytes_per_s = 0;
  int64_t eta_ms = -1;  // -1 unknown
  int64_t age_ms = 0;
};

struct DegradedPgView {
  uint32_t pg_width = 0;
  uint32_t pg_index = 0;
  std::vector<uint32_t> positions;  // missing positions
  std::string reason;  // "repairing" | "repair in N ms" | "waiting for a server"
};

// GetMoves: every move task, the degraded PGs and the summary.
struct MovesView {
  std::vector<MoveView> moves;
  std::vector<DegradedPgView> degraded;
  uint32_t running = 0;
  uint32_t queued = 0;
  uint32_t degraded_pgs = 0;
  bool waiting_for_server = false;
  uint64_t bytes_left = 0;
  int64_t eta_ms = -1;
  std::string message;
  uint32_t max_concurrent_moves = 0;
  uint64_t move_rate_bytes_per_s = 0;
  bool rebalance_paused = false;
  uint64_t moves_completed = 0;  // since the metadata server started
  uint64_t lost_stripes = 0;     // recorded as lost by readers or fsck, in lost_files files
  uint64_t lost_files = 0;
  uint64_t degraded_stripes = 0; // written below k + m, backfill pending
  // Moved by finished tasks since the metadata server started, by kind name ("repair",
  // "drain", "rebalance"); empty from an older server.
  std::map<std::string, uint64_t> completed_bytes, completed_chunks;
};

// GetActivity: the open sessions and the metadata server's recent events.
struct SessionView {
  uint64_t id = 0;
  std::string client_name;  // a mount's "host:mountpoint"; escaped by the server, still untrusted
  int64_t idle_ms = 0;
  uint64_t inodes = 0;
  bool caches = false;
};
struct EventView {
  uint64_t seq = 0;
  int64_t unix_ms = 0;
  std::string severity;  // "info" | "warning" | "error"
  std::string text;
};
struct ActivityView {
  std::vector<SessionView> sessions;
  std::vector<EventView> events;  // newest first
  std::string http_address;       // "" when the metadata server serves no HTTP
  int64_t started_unix_ms = 0;
};

// DrainServer / RemoveServer reply.
struct ServerAdminResult {
  uint32_t positions_held = 0;
  uint32_t moves_scheduled = 0;
  uint32_t moves_cancelled = 0;
};

}  // namespace aquifer::cli
