// The record of a local cluster that `aquifer cluster up` keeps in ROOT/cluster.json: which
// daemons it started, their pids, ports, directories and logs, so a second `cluster up` restarts
// only what is missing (on the same ports and directories, so all data is kept), `cluster down`
// stops them, and `status --root` finds the metadata server.
//
// File shape (version 1):
//   {"version": 1, "root": "/tmp/aquifer-cluster", "k": 4, "m": 2, "unit_bytes": 1048576,
//    "meta": {"pid": 123, "address": "127.0.0.1:40001", "db": "...", "log": "...",
//             "extra_args": ["--repair-delay-ms", "2000"]},
//    "data_servers": [{"index": 1, "failure_domain": "ds1", "dir": "...", "pid": 124,
//                      "address": "127.0.0.1:40002", "capacity_bytes": 0, "log": "..."}, ...],
//    "mount": {"dir": "/tmp/aquifer-cluster/mnt", "pid": 130, "log": "..."},
//    "tls": true}
// A pid of 0 means "not running as far as this record knows"; an empty address means "never
// started" (the daemon then binds port 0 and the kernel picks one).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "aquifer/status.h"

namespace aquifer::cli {

struct MetaRecord {
  int pid = 0;              // 0 = not running
  std::string address;      // "127.0.0.1:PORT" once it has been bound; empty before
  std::string db;           // RocksDB directory
  std::string log;          // log file (stdout and stderr)
  // Extra flags passed to every start of aquifer-meta (`cluster up --meta-arg`), e.g.
  // {"--repair-delay-ms", "2000"}. Optional in the file ("extra_args"; absent = none).
  std::vector<std::string> extra_args;
};

struct DataServerRecord {
  int index = 0;                // 1..N, the local name "dsN"; also its failure domain label
  std::string failure_domain;   // "ds1"..
  std::string dir;              // chunk directory
  int pid = 0;
  std::string address;          // "127.0.0.1:PORT" once bound
  uint64_t capacity_bytes = 0;  // 0 = let the data server measure its disk
  std::string log;
  // `aquifer server remove` removed it from the cluster (and stopped it): `cluster up` does not
  // start it again. Optional in the file ("removed", default false).
  bool removed = false;
};

struct MountRecord {
  std::string dir;  // mount point; empty = no mount
  int pid = 0;      // the aquifer-mount process (run in the foreground, -f)
  std::string log;
};

struct ClusterState {
  static constexpr int kVersion = 1;
  std::string root;
  uint32_t k = 4;
  uint32_t m = 2;
  uint64_t unit_bytes = 1048576;
  // `cluster up --tls` made ROOT/tls and every daemon and mount of the cluster runs with it
  // (local_cluster.h). Optional in the file ("tls", default false: plain TCP).
  bool tls = false;
  MetaRecord meta;
  std::vector<DataServerRecord> data_servers;
  MountRecord mount;
};

// The port of "HOST:PORT". Errors: kInvalidArgument when there is no ':' or the port is not an
// integer in 1..65535.
Result<uint16_t> PortOf(std::string_view address);

// Parses the JSON text of a cluster.json. Every field is type- and range-checked: version must be
// 1; k >= 1; m >= 0; unit_bytes > 0; pids >= 0; addresses empty or HOST:PORT; data server indexes
// unique and >= 1; directories absolute. Errors: kInvalidArgument naming the field, e.g.
// "cluster.json: data_servers[1].pid: expected a non-negative integer".
Result<ClusterState> ParseClusterState(std::string_view json_text);

// The JSON text of `state` (indented, newline-terminated). ParseClusterState(Serialize(s)) == s.
std::string SerializeClusterState(const ClusterState& state);

// Reads and parses `path`. Errors: kNotFound when the file does not exist; kInvalidArgument
// (from ParseClusterState, message prefixed with the path) when it is malformed; kInternal for
// other I/O errors.
Result<ClusterState> LoadClusterState(const std::string& path);

// Writes `state` to `path` atomically (temporary file, fsync, rename). Errors: kInternal with
// the errno text.
Status SaveClusterState(const std::string& path, const ClusterState& state);

bool operator==(const MetaRecord&, const MetaRecord&);
bool operator==(const DataServerRecord&, const DataServerRecord&);
bool operator==(const MountRecord&, const MountRecord&);
bool operator==(const ClusterState&, const ClusterState&);

}  // namespace aquifer::cli
