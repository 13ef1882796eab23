// A whole Aquifer cluster on one machine, on loopback: one aquifer-meta, N aquifer-data (each
// its own failure domain "ds1".."dsN") on directories under a root, and an aquifer-mount FUSE
// mount. Everything it starts is recorded in ROOT/cluster.json (see cluster_state.h); logs go to
// ROOT/logs/*.log. Idempotent: `Up` on a root whose cluster is partly running starts only what
// is missing, on the same ports and directories, so no data is lost and the surviving daemons
// and the mount keep working.
//
// Directory shape: ROOT/cluster.json, ROOT/cluster.lock, ROOT/logs/{meta,ds1..,mount}.log,
// ROOT/run/*.port, ROOT/meta/db/, ROOT/data/ds1.., ROOT/mnt (default mount point), ROOT/cluster.key,
// and with --tls ROOT/tls/{ca.pem,ca.key,server.pem,server.key}.
// Not thread-safe; concurrent `aquifer` commands on one root serialize on ROOT/cluster.lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "aquifer/status.h"
#include "cli/cluster_state.h"

namespace aquifer::cli {

inline constexpr char kDefaultClusterRoot[] = "/tmp/aquifer-cluster";

struct UpOptions {
  std::string root = kDefaultClusterRoot;  // absolute or relative; made absolute
  int data_servers = 6;                    // used when the root has no cluster yet
  uint32_t k = 4;                          // default layout of a new cluster
  uint32_t m = 2;
  uint64_t unit_bytes = 1048576;           // stripe unit, bytes
  std::string mount_dir;                   // "" = ROOT/mnt
  bool no_mount = false;                   // start the daemons only
  std::string mount_options;               // passed as -o to aquifer-mount ("" = none)
  uint64_t capacity_bytes = 0;             // per data server; 0 = the disk's size
  std::string bin_dir;                     // "" = beside this executable / build tree / PATH
  std::string log_level = "info";
  std::string meta_config;                 // optional TOML passed to aquifer-meta --config
  std::string data_config;                 // optional TOML passed to aquifer-data --config
  // Extra aquifer-meta flags (`--meta-arg`, repeatable, e.g. "--repair-delay-ms=2000"), kept in
  // cluster.json so every later start of the metadata server gets them. Given on an existing
  // cluster, they replace the recorded ones (applied the next time aquifer-meta starts).
  std::vector<std::string> meta_args;
  std::chrono::milliseconds timeout{60000};  // per wait (serving, registration, mount)
  // TLS on every connection (common/tls.h): a new cluster gets a private CA and one server
  // certificate in ROOT/tls; every daemon starts with --tls and those files, the mount with
  // -o tls_ca=ROOT/tls/ca.pem. Recorded in cluster.json, so later starts keep it without the
  // flag; given to a stopped cluster without TLS, it turns TLS on (refused while one of its
  // daemons runs without it). Off by default (plain TCP on loopback).
  bool tls = false;
  // Which of the layout/size fields the user set explicitly; an existing cluster with other
  // values is an error rather than silently ignored.
  bool data_servers_given = false;
  bool layout_given = false;
};

// Starts what is missing of the cluster under options.root and prints one line per daemon to
// `out`. Returns the record as saved. Errors: kInvalidArgument for bad options or a
// conflicting existing cluster (also: --tls while daemons of a cluster without TLS run, or a
// ROOT/tls holding some of its files but not all); kNotFound when a binary is missing; kUnavailable (with the
// log's last lines) when a daemon exits or does not serve / register / mount in time.
Result<ClusterState> ClusterUp(const UpOptions& options, std::ostream& out);

// Unmounts (fusermount3 -u; lazily with -uz if busy after a few tries), then SIGTERMs the mount,
// the data servers and the metadata server, waiting up to `grace` for each before SIGKILL.
// Keeps cluster.json (with pids cleared) and all data, so `ClusterUp` brings it back.
// Errors: kNotFound when `root` has no cluster record.
Status ClusterDown(const std::string& root, std::chrono::milliseconds grace, std::ostream& out);

// Stops data server `index` (1..N) of the local cluster: SIGTERM with `grace`, or SIGKILL at
// once when `kill` (a crash). Errors: kNotFound (no record / no such index).
Status StopDataServer(const std::string& root, int index, bool kill,
                      std::chrono::milliseconds grace, std::ostream& out);

// Restarts data server `index` on its old port and directory (so it keeps its id and chunks)
// and waits until the metadata server reports it up. Errors as ClusterUp.
Status StartDataServer(const std::string& root, int index, const std::string& bin_dir,
                       std::chrono::milliseconds timeout, std::ostream& out);

// Adds `count` data servers to the local cluster (server add): new records dsN+1.. (their own
// failure domains, directories and logs, the capacity of ds1), started, recorded in cluster.json
// and waited for until the metadata server reports them up. The metadata server then plans a
// rebalance onto them. Errors: kNotFound (no record), kUnavailable (meta not running, or a new
// server does not come up), kInvalidArgument (count < 1 or more than 64 servers in all).
Status GrowCluster(const std::string& root, int count, const std::string& bin_dir,
                   std::chrono::milliseconds timeout, std::ostream& out);

// After `server remove`: stops the local data server listening at `address` (SIGTERM, `grace`)
// and marks its record removed so `cluster up` does not start it again (a restart would
// register it and make it rejoin). Errors: kNotFound when no record has that address.
Status MarkDataServerRemoved(const std::string& root, const std::string& address,
                             std::chrono::milliseconds grace, std::ostream& out);

// ROOT/cluster.json of `root` (made absolute).
std::string ClusterStatePath(const std::string& root);

// ROOT/cluster.key: the local cluster's key file, made 0600 by ClusterUp when missing and given
// to its daemons (--key) and its mount (-o key=).
std::string ClusterKeyPath(const std::string& root);
// ROOT/clients: the local cluster's client registry (common/client_credential.h), which its
// aquifer-meta reads (--clients) and `aquifer client add/list/remove` edit.
std::string ClientRegistryPath(const std::string& root);
// Sets this process's cluster key (common/cluster_key.h) for its calls to the cluster at ROOT:
// $AQUIFER_KEY_FILE when set, else ROOT/cluster.key when it exists, else none.
// Errors: ReadClusterKeyFile's.
Status UseLocalClusterKey(const std::string& root);

// ROOT/tls: the local cluster's TLS files as WriteNewTlsFiles (common/tls.h) names them
// (ca.pem, ca.key, server.pem, server.key), made by `cluster up --tls`. Its daemons get
// --tls-ca/--tls-cert/--tls-key of these, its mounts -o tls_ca=ROOT/tls/ca.pem.
std::string ClusterTlsDir(const std::string& root);
// Sets this process's TLS (common/tls.h, SetProcessTls) for its calls to the cluster at ROOT:
// $AQUIFER_TLS_CA when set (the explicit choice wins, as $AQUIFER_KEY_FILE for the key), else
// ROOT/tls/ca.pem when it exists, else none (plain TCP). Errors: Tls::Load's (kNotFound for a
// missing file, kInvalidArgument for one that is not a certificate), prefixed with the file.
Status UseLocalClusterTls(const std::string& root);
// Sets this process's TLS as a client of a cluster named by address (--meta): `ca_file` (the
// CLI's --tls-ca) when given, else $AQUIFER_TLS_CA, else none; the servers' certificates must
// name `server_name` ("" = "aquifer"). Errors as UseLocalClusterTls.
Status UseTlsCa(const std::string& ca_file, const std::string& server_name);

// `root` made absolute and normalized (no trailing slash).
std::string AbsoluteRoot(const std::string& root);

}  // namespace aquifer::cli
