// ProcessCluster: a whole Aquifer cluster of real processes on 127.0.0.1 for tests and
// benchmarks: one aquifer-meta and N aquifer-data binaries, kernel-chosen ports, a scratch
// directory under /tmp, and handles to crash (kill -9), stop (SIGTERM) and restart any server.
// The destructor kills every process it started and removes the scratch directory. Also: extra
// daemon flags (repair delay, PG GC delay, scrub knobs), AddDataServer for scale-out, and a
// poll of GetMoves until repair/rebalance/drain finished.
//
// Binary paths come from CMake (AQUIFER_META_BIN, AQUIFER_DATA_BIN compile definitions).
// Not thread-safe: drive it from the test's thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "aquifer/client.h"
#include "aquifer/status.h"
#include "aquifer/units.h"
#include "client/cluster_map.h"
#include "client/rpc/move_admin.h"
#include "testing/test_util.h"  // RandomBytes, WaitUntil, ScratchDir for its users

namespace aquifer::testing {

struct ProcessClusterOptions {
  int data_servers = 6;                  // aquifer-data processes, each its own failure domain
  uint32_t k = 4;                        // default layout: data units per stripe
  uint32_t m = 2;                        // parity units per stripe
  uint32_t unit_bytes = 1 * kMiB;        // stripe unit, bytes
  uint32_t heartbeat_timeout_ms = 1500;  // meta marks a silent data server down after this
  uint32_t session_ttl_ms = 3000;        // client sessions expire after this silence
  std::string log_level = "warn";        // of the daemons; logs go to <scratch>/<name>.log
  std::chrono::milliseconds start_timeout{20000};  // for Start() and restarts
  // aquifer-meta knobs of repair (docs/repair.md); -1 keeps the daemon's default.
  int64_t repair_delay_ms = -1;        // --repair-delay-ms: a down server is repaired after this
  int64_t pg_gc_delay_ms = -1;         // --pg-gc-delay-ms: a moved position's source GC delay
  int64_t max_concurrent_moves = -1;   // --max-concurrent-moves, per destination
  int64_t move_rate_mib = -1;          // --move-rate-mib, MiB/s per task
  std::vector<std::string> meta_flags; // more aquifer-meta flags, appended as given
  std::vector<std::string> data_flags; // more flags for every aquifer-data (e.g. scrub knobs)
  // Make <scratch>/cluster.key, give it to every daemon (--key) and make it this process's key
  // (SetProcessClusterKey) for the clients it creates; false: daemons and clients run keyless.
  bool cluster_key = true;
  // Make <scratch>/tls (common/tls.h WriteNewTlsFiles), run every daemon with --tls and its
  // files, and make a client TLS with the CA this process's (SetProcessTls) for the clients it
  // creates; false: plain TCP.
  bool tls = false;
};

class ProcessCluster {
 public:
  explicit ProcessCluster(ProcessClusterOptions options = {});
  ~ProcessCluster();
  ProcessCluster(const ProcessCluster&) = delete;
  ProcessCluster& operator=(const ProcessCluster&) = delete;

  // Starts the metadata server, then every data server, and waits until all data servers are
  // registered and up in the cluster map. Errors: kUnavailable (a binary missing, a process
  // exiting, or the deadline passing), with the log file to read in the message.
  Status Start();

  // host:port of aquifer-meta.
  const std::string& meta_address() const { return meta_address_; }
  // The scratch directory (removed by the destructor).
  const std::string& scratch_dir() const { return root_; }
  // The cluster key file the daemons use; "" without options.cluster_key.
  const std::string& key_file() const { return key_file_; }
  // The TLS directory (ca.pem, server.pem, server.key); "" without options.tls.
  const std::string& tls_dir() const { return tls_dir_; }
  int data_server_count() const { return static_cast<int>(data_.size()); }
  // The chunk-store directory of data server i (chunk files live under <dir>/chunks/).
  std::string data_dir(int i) const;
  // host:port of data server i (its last start).
  std::string data_address(int i) const;

  // Starts one more aquifer-data (failure domain "fd<i>", its own directory) and waits until the
  // cluster map shows it up. Returns its index i. Errors: as Start().
  Result<int> AddDataServer();
  // The metadata server's id of data server i, looked up by address in the cluster map.
  // Errors: kNotFound when the map does not list it; kUnavailable when meta cannot be reached.
  Result<ServerId> DataServerId(int i);
  // The current cluster map (as a client sees it).
  Result<client::ClusterMap> GetClusterMap();
  // Repair/rebalance administration of this cluster's metadata server.
  client::MoveAdmin& admin();

  // Polls GetMoves until no move task is left (queued or running) and no PG is degraded, with
  // `timeout` as the deadline. With `allow_degraded`, only the tasks must be gone (for clusters
  // that cannot repair: no spare failure domain). Errors: kUnavailable at the deadline, with the
  // last GetMoves summary in the message.
  Status WaitForMovesDone(std::chrono::milliseconds timeout, bool allow_degraded = false);

  // kill -9 of data server i (0-based). The map marks it down after heartbeat_timeout_ms.
  Status CrashDataServer(int i);
  // SIGTERM of data server i; waits for it to exit.
  Status StopDataServer(int i);
  // SIGSTOP (pause) or SIGCONT (!pause) of data server i: a server that accepts connections and
  // answers nothing, as a slow one does. kill -9 and the destructor work on a paused server.
  Status PauseDataServer(int i, bool pause = true);
  // Starts data server i again on its old directory (so the same server id) and waits until the
  // cluster map shows it up.
  Status RestartDataServer(int i);
  // kill -9 / restart of the metadata server, on the same port and database.
  Status CrashMeta();
  Status RestartMeta();

  // Waits until exactly `up` data servers are up in the cluster map (deadline start_timeout).
  Status WaitForUpDataServers(int up);

  // A client connected to this cluster; `options.meta_address` is filled in.
  Result<std::unique_ptr<Client>> NewClient(ClientOptions options = {});

 private:
  struct Proc {
    std::string name;
    std::vector<std::string> args;  // argv[1..]
    std::string port_file;
    pid_t pid = -1;
    std::string address;
  };
  Status Spawn(Proc& proc, const std::string& binary);
  Status SpawnDataServer(int i);
  Status WaitPortFile(Proc& proc);
  void Kill(Proc& proc, int signal);

  ProcessClusterOptions options_;
  std::string root_;
  std::string key_file_;
  std::string tls_dir_;
  std::vector<std::string> tls_flags_;  // the daemons' --tls flags; empty without options.tls
  std::string meta_address_;
  Proc meta_;
  std::vector<Proc> data_;
  std::unique_ptr<client::MoveAdmin> admin_;
};

}  // namespace aquifer::testing
