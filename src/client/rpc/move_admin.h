// MoveAdmin: the client library's view of aquifer-meta's repair/rebalance/drain administration
// (GetMoves, DrainServer, RemoveServer, SetRebalance in proto/meta.proto; docs/repair.md), in the
// library's own types. Used by tests, benchmarks and tools; the file system API does not need it.
//
// Errors: the server's status, or kUnavailable when it cannot be reached before the deadline.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "aquifer/ids.h"
#include "aquifer/status.h"

namespace aquifer::client {

// One move task as GetMoves reports it.
struct MoveEntry {
  uint64_t id = 0;
  std::string kind;       // "repair" | "rebalance" | "drain"
  std::string state;      // "queued" | "running"
  uint32_t pg_width = 0;
  uint32_t pg_index = 0;
  uint32_t position = 0;
  ServerId from;
  ServerId to;
  uint64_t chunks_done = 0;   // last progress report (0 before the first)
  uint64_t chunks_total = 0;
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  bool done = false;
  std::string error;
  uint64_t rate_bytes_per_s = 0;  // measured by the metadata server
};

struct MovesStatus {
  std::vector<MoveEntry> moves;
  uint32_t running = 0;
  uint32_t queued = 0;
  uint32_t degraded_pgs = 0;
  bool waiting_for_server = false;
  uint64_t bytes_left = 0;
  uint64_t moves_completed = 0;  // since the metadata server started
  uint64_t lost_stripes = 0;     // recorded lost (ReportLost), in lost_files files
  uint64_t lost_files = 0;
  uint64_t degraded_stripes = 0; // written below k + m, backfill pending
  std::string message;           // one line, as `aquifer status` prints it
};

struct ServerAdminReply {
  uint32_t positions_held = 0;   // PG positions the server still holds
  uint32_t moves_scheduled = 0;  // move tasks created by the call
};

class MoveAdmin {
 public:
  virtual ~MoveAdmin() = default;
  virtual Result<MovesStatus> GetMoves() = 0;
  // kNotFound for an unknown id; kInvalidArgument for a removed server.
  virtual Result<ServerAdminReply> DrainServer(ServerId id) = 0;
  // kNotEmpty while it holds PG positions (unless force).
  virtual Result<ServerAdminReply> RemoveServer(ServerId id, bool force) = 0;
  // Pauses or resumes rebalance planning (repair and drain go on).
  virtual Status SetRebalancePaused(bool paused) = 0;
};

// Connects (lazily) to aquifer-meta at `address`; each call has deadline `timeout`.
std::unique_ptr<MoveAdmin> NewGrpcMoveAdmin(const std::string& address,
                                            std::chrono::milliseconds timeout);

}  // namespace aquifer::client
