// Runs the move tasks aquifer-meta assigns to this data server (it is the destination), each in
// its own background thread, throttled by the task's rate. See docs/repair.md.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "aquifer/status.h"
#include "server/chunk_store/chunk_store.h"
#include "server/repair/cluster.h"
#include "server/repair/pg_sync.h"

namespace aquifer::server {

struct MoveWorkerOptions {
  std::chrono::milliseconds retry_backoff{500};  // wait after a failed pass, ms (doubles, to 8x)
  int max_failed_passes = 6;  // then the task is reported failed (meta re-plans it)
};

class MoveWorker {
 public:
  // `get_map` fetches the cluster map (called from task threads; must be thread-safe);
  // `store` and `peers` outlive the worker.
  MoveWorker(ChunkStore* store, PeerLink* peers, std::function<Result<ClusterView>()> get_map,
             MoveWorkerOptions options = {});
  ~MoveWorker();  // Stop()

  // Level-triggered: `tasks` is the complete set this server must run now (from a heartbeat
  // reply). Starts the new ones; cancels the ones no longer listed (what they wrote stays; a PG
  // GC cleans it up). A task that had finished (done) and is no longer listed was switched over
  // by meta: one catch-up pass runs for it (chunks written through the old map meanwhile).
  // Resuming after a restart is the same call: the pass skips chunk versions already here.
  void SetTasks(const std::vector<MoveTask>& tasks);

  // Progress of every listed task (for the next heartbeat).
  std::vector<MoveProgress> Progress() const;

  // Cancels every task and waits for the threads (each stops at its next chunk, or when its
  // in-flight peer call ends). Idempotent.
  void Stop();

  // Catch-up passes finished since start (tests).
  uint64_t catch_ups_finished() const;

 private:
  struct Job;
  void Run(Job* job);
  void Reap(std::vector<std::unique_ptr<Job>>* finished_out);

  ChunkStore* store_;
  PeerLink* peers_;
  std::function<Result<ClusterView>()> get_map_;
  const MoveWorkerOptions options_;

  mutable std::mutex mu_;  // guards jobs_, catch_ups_, catch_ups_finished_, stopped_
  std::map<uint64_t, std::unique_ptr<Job>> jobs_;  // by task id
  std::vector<std::unique_ptr<Job>> catch_ups_;
  uint64_t catch_ups_finished_ = 0;
  bool stopped_ = false;
};

}  // namespace aquifer::server
