#include "metadata/options.h"

#include <CLI/CLI.hpp>

#include "aquifer/units.h"
#include "common/config_file.h"
#include "common/http_endpoint.h"

namespace aquifer::meta {

Result<MetaOptions> ParseMetaOptions(int argc, char** argv, std::string* help_out) {
  MetaOptions o;
  CLI::App app("aquifer-meta: Aquifer's metadata server");
  ConfigFileOptions options(app);
  options.Add("--listen", &o.listen, "HOST:PORT to serve gRPC on (port 0: kernel chooses)");
  options.Add("--db", &o.db, "RocksDB directory (required)");
  options.Add("--port-file", &o.port_file, "write the bound HOST:PORT here once serving");
  options.Add("--http-listen", &o.http_listen,
              "HOST:PORT to serve /metrics and the status page on (port 0: kernel chooses; "
              "empty: no HTTP)");
  options.Add("--http-port-file", &o.http_port_file,
              "write the bound HTTP HOST:PORT here once serving");
  options.Add("--key", &o.key,
              "cluster key file (0600; `aquifer cluster key new FILE` makes one); default "
              "$AQUIFER_KEY_FILE; none: every connection is served (warned)");
  options.Add("--clients", &o.clients,
              "client registry file (`aquifer client add` writes it; re-read when it changes); "
              "empty: no client credential is accepted");
  options.Add("--capability-lifetime-s", &o.capability_lifetime_s,
              "chunk capabilities for client credentials are good this long, s (2..600)");
  options.Add("--tls", &o.tls,
              "TLS on every gRPC and wire port (needs --tls-ca, --tls-cert, --tls-key)");
  options.Add("--tls-ca", &o.tls_ca, "PEM file: the CA that signs the servers' certificates");
  options.Add("--tls-cert", &o.tls_cert, "PEM file: this server's certificate");
  options.Add("--tls-key", &o.tls_key, "PEM file: its private key (mode 0600)");
  options.Add("--tls-server-name", &o.tls_server_name,
              "the DNS name every server's certificate carries (clients check it)");
  options.AddConfigFileFlag("--config", &o.config, "TOML file with the same keys as the flags");
  options.Add("--k", &o.k, "default data units per stripe");
  options.Add("--m", &o.m, "default parity units per stripe");
  options.Add("--unit-bytes", &o.unit_bytes, "default stripe unit, bytes");
  options.Add("--pgs-per-table", &o.pgs_per_table, "placement groups per PG table");
  options.Add("--heartbeat-timeout-ms", &o.heartbeat_timeout_ms,
              "data server silent this long (ms) is marked down");
  options.Add("--session-ttl-ms", &o.session_ttl_ms, "client session lease, ms");
  options.Add("--cache-lease-ms", &o.cache_lease_ms,
              "longest wait (ms) of a change for a cache holder's recall acknowledgement; 0: off");
  options.Add("--log-level", &o.log_level, "trace, debug, info, warn, error, off");
  options.Add("--cache-entries", &o.cache_entries, "inodes and dentries cached in memory");
  options.Add("--rpc-threads", &o.rpc_threads, "most gRPC server threads");
  options.Add("--wire", &o.wire, "1: serve the metadata wire too; 0: gRPC only");
  options.Add("--wire-port", &o.wire_port, "metadata wire TCP port (0: kernel chooses)");
  options.Add("--repair-delay-ms", &o.repair_delay_ms,
              "data server down this long (ms) has its PG positions repaired elsewhere");
  options.Add("--max-concurrent-moves", &o.max_concurrent_moves,
              "move tasks running at once per destination server");
  options.Add("--move-rate-mib", &o.move_rate_mib, "copy rate of each move task, MiB/s");
  options.Add("--pg-gc-delay-ms", &o.pg_gc_delay_ms,
              "wait (ms) after a move finishes before the source deletes its chunks");
  options.Add("--backup-root", &o.backup_root,
              "backups (the Backup RPC) may be written only under this absolute directory");
  app.set_version_flag("--version", std::string("aquifer-meta ") + AQUIFER_VERSION,
                       "print the version and exit");
  AQ_RETURN_IF_ERROR(options.Parse(argc, argv, help_out));
  if (!help_out->empty()) return MetaOptions{};  // --help or --version
  if (o.db.empty()) return InvalidArgument("--db DIR is required");
  AQ_RETURN_IF_ERROR(ValidateMetaOptions(o));
  return o;
}

Status ValidateMetaOptions(const MetaOptions& o) {
  // The erasure codec's range (include/aquifer/erasure.h); a wider layout could be set but no
  // client could read or write its files.
  if (o.k < 1 || o.k > 16) return InvalidArgument("k must be in 1..16");
  if (o.m == 0) return InvalidArgument("m=0 leaves no parity or copy; m must be at least 1");
  if (o.m > 4) return InvalidArgument("m must be in 1..4");
  if (o.unit_bytes < 4096 || o.unit_bytes % 4096 != 0 || o.unit_bytes > kMaxStripeUnitBytes) {
    return InvalidArgument("unit-bytes must be a multiple of 4096 in 4096..16 MiB");
  }
  if (o.pgs_per_table < 1 || o.pgs_per_table > 65536) {
    return InvalidArgument("pgs-per-table must be in 1..65536");
  }
  if (o.heartbeat_timeout_ms < 10) return InvalidArgument("heartbeat-timeout-ms must be >= 10");
  if (o.session_ttl_ms < 10) return InvalidArgument("session-ttl-ms must be >= 10");
  // Data servers refuse a capability that expires more than 600 s (+ clock skew) ahead.
  if (o.capability_lifetime_s < 2 || o.capability_lifetime_s > 600) {
    return InvalidArgument("capability-lifetime-s must be within 2..600");
  }
  if (o.cache_lease_ms != 0 && (o.cache_lease_ms < 3000 || o.cache_lease_ms > 600000)) {
    return InvalidArgument("cache-lease-ms must be 0 (off) or in 3000..600000");
  }
  if (!o.http_listen.empty()) AQ_RETURN_IF_ERROR(ParseListenAddress(o.http_listen).status());
  if (o.rpc_threads < 1) return InvalidArgument("rpc-threads must be >= 1");
  if (o.wire > 1) return InvalidArgument("wire must be 0 or 1");
  if (o.wire_port > 65535) return InvalidArgument("wire-port must be in 0..65535");
  if (o.max_concurrent_moves < 1) return InvalidArgument("max-concurrent-moves must be >= 1");
  if (!o.backup_root.empty() && o.backup_root[0] != '/') {
    return InvalidArgument("backup-root must be an absolute path");
  }
  return OkStatus();
}

}  // namespace aquifer::meta
