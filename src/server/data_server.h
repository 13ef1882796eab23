// aquifer-data's core: the chunk store plus membership (registration, heartbeats, GC tasks),
// the move worker (repair, rebalance, drain: docs/repair.md) and the scrubber. Knows no protobuf
// or gRPC: the adapter in rpc/ serves the DataService over this, and talks to aquifer-meta and
// other data servers through the MetaLink and PeerLink interfaces.
#pragma once

#include <chrono>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "aquifer/ids.h"
#include "aquifer/status.h"
#include "server/chunk_store/chunk_store.h"
#include "server/options.h"
#include "server/repair/cluster.h"
#include "server/repair/move_worker.h"
#include "server/repair/scrubber.h"

namespace aquifer::server {

// What a data server tells aquifer-meta when it registers.
struct RegisterInfo {
  std::string address;         // bound HOST:PORT clients reach this server at
  std::string failure_domain;  // placement label
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  std::string server_uuid;     // stable across restarts
  std::string fs_id;           // ChunkStoreStats::fs_id
  uint64_t fs_free_bytes = 0;
};
struct Registration {
  ServerId server_id;
  std::chrono::milliseconds heartbeat_interval{0};  // 0 = keep the configured interval
};
struct HeartbeatInfo {
  ServerId server_id;
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t chunk_count = 0;
  std::vector<uint64_t> gc_done;  // ids of GC tasks applied since the last acknowledged heartbeat
  std::vector<MoveProgress> moves;   // every move task of the last reply
  std::vector<uint64_t> pg_gc_done;  // ids of PG GC tasks applied, not yet acknowledged
  ScrubCounters scrub;
  std::string fs_id;           // ChunkStoreStats::fs_id
  uint64_t fs_free_bytes = 0;  // ChunkStoreStats::fs_free_bytes
};
// Delete every chunk of `inode` with stripe >= from_stripe and version <= max_version.
struct GcTask {
  uint64_t id = 0;
  InodeId inode;
  uint64_t from_stripe = 0;
  uint64_t max_version = 0;
};

// What a heartbeat reply asks of this server.
struct HeartbeatReply {
  std::vector<GcTask> gc;        // apply, then ack in gc_done
  std::vector<MoveTask> moves;   // the complete set of move tasks to run (level-triggered)
  std::vector<PgGcTask> pg_gc;   // PG positions to delete, then ack in pg_gc_done
  std::string state;             // "in", "draining", "removed" ("" from an older meta)
  uint64_t map_version = 0;
  bool backfill = false;         // a client wrote stripes without this server's chunks: backfill
};

// aquifer-meta as seen by a data server. Implementations: gRPC (rpc/), fakes in tests.
// Register and Heartbeat are called from the membership thread only; GetClusterMap from the
// move and scrub threads too (implementations must make it thread-safe).
class MetaLink {
 public:
  virtual ~MetaLink() = default;
  // Errors: kUnavailable when meta cannot be reached; meta's own codes otherwise.
  virtual Result<Registration> Register(const RegisterInfo& info) = 0;
  // Returns what meta wants done. Errors: kUnavailable when meta cannot be reached; any other
  // code (e.g. kNotFound for a server id meta forgot) makes the server register again.
  virtual Result<HeartbeatReply> Heartbeat(const HeartbeatInfo& info) = 0;
  // The current cluster map. Errors: kUnavailable when meta cannot be reached.
  virtual Result<ClusterView> GetClusterMap() = 0;
  // The committed size and layout of file `ino` (backfill's guard against resurrecting deleted
  // or truncated chunks). Called from the scrub thread (must be thread-safe).
  // Errors: kNotFound when meta has no such inode; kUnavailable when meta cannot be reached (or
  // an implementation has no such call: this default).
  virtual Result<InodeFacts> GetInode(InodeId ino) {
    return Unavailable("GetInode " + std::to_string(ino.value()) + ": not supported");
  }
};

class DataServer {
 public:
  // Opens the chunk store in options.dir and loads (or creates, once) DIR/server_uuid.
  // Errors: those of ChunkStore::Open; kInternal when the uuid file cannot be made.
  static Result<std::unique_ptr<DataServer>> Open(const DataServerOptions& options);
  ~DataServer();  // stops membership

  // Starts the membership thread: registers `address` with meta through `link` (retrying with
  // backoff while meta is unreachable or refuses), then heartbeats every interval with usage,
  // move progress and scrub counters; applies the GC and PG GC tasks in each reply (durably) and
  // acks them in the next heartbeat; hands the reply's move tasks to the move worker. If a
  // heartbeat is refused (not merely unreachable) it registers again. Also starts the scrubber.
  // `peers` reaches other data servers (moves and repairs; null: none can be reached). Chunks
  // are served throughout. Call at most once.
  void StartMembership(std::string address, std::unique_ptr<MetaLink> link,
                       std::unique_ptr<PeerLink> peers = nullptr);
  // Stops the membership thread, the move worker and the scrubber (waits for in-flight calls,
  // bounded by their deadlines). Idempotent.
  void StopMembership();

  ChunkStore& store() { return *store_; }
  const std::string& server_uuid() const { return uuid_; }
  // The id meta assigned; ServerId(0) until the first registration succeeded.
  ServerId server_id() const;
  // How many registrations and acknowledged heartbeats happened, and GC tasks applied (tests,
  // Info).
  uint64_t registrations() const;
  uint64_t heartbeats() const;
  uint64_t gc_tasks_applied() const;
  uint64_t pg_gc_tasks_applied() const;
  // Move tasks of the last heartbeat reply, with progress.
  std::vector<MoveProgress> move_progress() const;
  ScrubCounters scrub_counters() const;
  // Catch-up passes of switched move tasks finished since start (tests).
  uint64_t move_catch_ups() const;
  // Starts a scrub pass now (tests, operators); no-op before StartMembership.
  void RequestScrub();

 private:
  explicit DataServer(DataServerOptions options) : options_(std::move(options)) {}
  void MembershipLoop();
  // Waits up to `d` unless stopping; returns false when stopping.
  bool WaitFor(std::chrono::milliseconds d);

  const DataServerOptions options_;
  std::unique_ptr<ChunkStore> store_;
  std::string uuid_;

  std::unique_ptr<MetaLink> link_;  // Register/Heartbeat from the membership thread only
  std::unique_ptr<PeerLink> peers_;
  std::unique_ptr<MoveWorker> moves_;
  std::unique_ptr<Scrubber> scrubber_;
  std::atomic<Scrubber*> scrubber_for_reads_{nullptr};  // set once the scrubber exists
  std::string address_;
  std::thread thread_;

  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  bool stopping_ = false;
  ServerId server_id_;
  uint64_t registrations_ = 0;
  uint64_t heartbeats_ = 0;
  uint64_t gc_applied_ = 0;
  uint64_t pg_gc_applied_ = 0;
};

}  // namespace aquifer::server
