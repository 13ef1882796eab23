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
};

struct ClusterView {
  uint64_t map_version = 0;
  std::vector<ServerView> servers;
  std::map<uint32_t, uint32_t> pg_count_by_width;  // width k+m -> placement groups
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

}  // namespace aquifer::cli
