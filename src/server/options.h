// aquifer-data's options: one struct, loaded from TOML (--config) and overridden by flags.
#pragma once

#include <cstdint>
#include <string>

#include "aquifer/status.h"

namespace aquifer::server {

struct DataServerOptions {
  std::string listen = "127.0.0.1:0";  // HOST:PORT to serve gRPC on; port 0 = kernel chooses
  std::string dir;                     // chunk store directory (required); created if missing
  std::string meta;                    // aquifer-meta's HOST:PORT (required)
  std::string failure_domain;          // label for placement; "" = this host's name
  uint64_t capacity_bytes = 0;         // bytes the store may use; 0 = the file system's size
  uint32_t full_percent = 95;          // client writes stop above this % of capacity, 1..100
  uint32_t superseded_grace_ms = 3000; // ms a pruned chunk version stays readable, 0..600000
  uint32_t gc_tombstone_ms = 300000;   // ms an applied GC task keeps refusing writes of the
                                       // chunks it deleted, 0..3600000 (0: off; docs/design.md
                                       // "Garbage collection")
  std::string port_file;               // where to write the bound HOST:PORT once serving; "" = none
  std::string http_listen;             // HOST:PORT for /metrics (port 0: kernel chooses); "" = none
  std::string http_port_file;          // where to write the bound HTTP HOST:PORT; "" = none
  std::string config;                  // TOML file with the same keys as the flags; "" = none
  std::string key;                     // cluster key file (0600, 64 hex digits); "" =
                                       // $AQUIFER_KEY_FILE, else none: serves anyone
  bool tls = false;                    // TLS on every port (docs/operations.md "TLS")
  std::string tls_ca;                  // PEM: the CA that signs the servers' certificates
  std::string tls_cert;                // PEM: this server's certificate
  std::string tls_key;                 // PEM: its key (0600)
  std::string tls_server_name = "aquifer";  // the name the certificates carry
  std::string log_level = "info";      // trace, debug, info, warn, error, off
  uint32_t io_depth = 32;              // io_uring submission entries per I/O thread, entries
  uint32_t heartbeat_interval_ms = 1000;  // ms between heartbeats until meta's reply sets it
  uint32_t register_retry_ms = 500;    // first wait before retrying registration, ms (doubles
                                       // up to 10x this while aquifer-meta is unreachable)
  uint32_t meta_rpc_timeout_ms = 5000; // deadline of one RegisterServer/Heartbeat call, ms
  uint32_t block_bytes = 65536;        // CRC32C block of new stores, bytes (power of 2)
  uint32_t scrub_rate_mib = 20;        // scrub read rate, MiB/s (0 = unlimited)
  uint32_t scrub_interval_s = 3600;    // s from one scrub pass's start to the next; 0 = off
  uint32_t wire = 1;                   // 1: also serve chunk reads and writes on the chunk wire
                                       // (docs/design.md "The chunk wire"); 0: gRPC only
  uint32_t wire_port = 0;              // the chunk wire's TCP port on listen's host; 0 = kernel
                                       // chooses (clients learn it from the Info call)
  uint32_t wire_max_connections = 1024;  // chunk wire connections served at once (a thread
                                         // each); more are closed at accept, and clients
                                         // then use gRPC
  uint32_t backfill_delay_ms = 3000;   // ms after (re)registering, or after heartbeats resume,
                                       // before the backfill pass (docs/repair.md "Backfill")
  uint32_t handoff_sweep_ms = 20000;   // ms between sweeps of hand-off copies (chunks of PG
                                       // positions this server does not hold) that their target
                                       // now holds; 0 = off (docs/design.md "Hand-off ...")
};

// Parses argv into options: flags (--listen, --dir, --meta, ...) as documented in
// `aquifer-data --help`; keys of --config FILE.toml (hyphen or underscore spelling) fill every
// option not given as a flag. Fills in failure_domain with the host name when empty.
// Errors: kInvalidArgument with a message for an unknown flag or key, a bad value, an unreadable
// config file, or a missing --dir or --meta. When --help is given, *help_out receives the help
// text (for --version, "aquifer-data X.Y.Z\n", the project version) and the result holds
// default options.
Result<DataServerOptions> ParseDataServerOptions(int argc, char** argv, std::string* help_out);

// Checks option values. Errors: kInvalidArgument.
Status ValidateDataServerOptions(const DataServerOptions& options);

}  // namespace aquifer::server
