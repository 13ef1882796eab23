// aquifer-meta's options: one struct, loaded from TOML (--config) and overridden by flags.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aquifer/status.h"

namespace aquifer::meta {

struct MetaOptions {
  std::string listen = "127.0.0.1:0";  // HOST:PORT to serve gRPC on; port 0 = kernel chooses
  std::string db;                      // RocksDB directory (required); created if missing
  std::string port_file;               // where to write the bound HOST:PORT once serving; "" = none
  std::string http_listen;             // HOST:PORT for /metrics and the status page; "" = none
  std::string http_port_file;          // where to write the bound HTTP HOST:PORT; "" = none
  std::string config;                  // TOML file with the same keys as the flags; "" = none
  std::string key;                     // cluster key file (0600, 64 hex digits); "" =
                                       // $AQUIFER_KEY_FILE, else none: serves anyone
  bool tls = false;                    // TLS on every port (docs/operations.md "TLS")
  std::string tls_ca;                  // PEM: the CA that signs the servers' certificates
  std::string tls_cert;                // PEM: this server's certificate
  std::string tls_key;                 // PEM: its key (0600)
  std::string tls_server_name = "aquifer";  // the name the certificates carry
  std::string clients;                 // client registry file (docs/operations.md "Client
                                       // credentials"); "" = cluster-key holders only
  uint32_t capability_lifetime_s = 600;  // chunk capabilities signed for client credentials
                                       // stay good this long, s, 2..600 (docs/design.md "Chunk
                                       // capabilities")
  uint32_t k = 4;                      // cluster default data units per stripe
  uint32_t m = 2;                      // cluster default parity units per stripe
  uint32_t unit_bytes = 1048576;       // cluster default stripe unit, bytes
  uint32_t pgs_per_table = 64;         // placement groups per PG table (one table per width)
  uint32_t heartbeat_timeout_ms = 6000;  // data server silent this long, ms -> marked down
  uint32_t session_ttl_ms = 10000;     // client session silent this long, ms -> expired
  uint32_t cache_lease_ms = 8000;      // a change waits at most this long, ms, for a cache
                                       // holder to acknowledge its recall; 0 = no cache leases
                                       // (docs/design.md "Cache leases")
  std::string log_level = "info";      // trace, debug, info, warn, error, off
  uint64_t cache_entries = 1000000;    // inodes (and as many dentries) cached in memory, entries
  uint32_t wire = 1;                   // 1: also serve the metadata wire (docs/design.md); 0: off
  uint32_t wire_port = 0;              // its TCP port on listen's host; 0 = kernel chooses
  uint32_t rpc_threads = 64;           // most gRPC server threads serving requests, threads
  uint32_t repair_delay_ms = 30000;    // data server down this long, ms -> its positions repaired
  uint32_t max_concurrent_moves = 2;   // move tasks running at once per destination server, tasks
  uint32_t move_rate_mib = 200;        // copy rate of each move task, MiB/s (sent in MoveTask)
  uint32_t pg_gc_delay_ms = 60000;     // after a move finishes, wait this long, ms, before the
                                       // source deletes its chunks (catch-up window, see repair.md)
  std::string backup_root;             // `aquifer meta backup` may write only under this absolute
                                       // directory; "" = any absolute path (operations.md)
};

// Parses argv into options: flags (--listen, --db, ...) as documented in `aquifer-meta --help`;
// keys of --config FILE.toml fill every option not given as a flag. Errors: kInvalidArgument
// with a message for an unknown flag, a bad value, an unreadable or malformed config file, or a
// missing --db. `help_out` receives the help text when --help is given, or "aquifer-meta X.Y.Z\n"
// (the project version) for --version (then the Result holds options with db empty and
// *help_out non-empty).
Result<MetaOptions> ParseMetaOptions(int argc, char** argv, std::string* help_out);

// Checks option values (k >= 1, unit_bytes a multiple of 4096, ...). Errors: kInvalidArgument.
Status ValidateMetaOptions(const MetaOptions& options);

}  // namespace aquifer::meta
