// aquifer-data option parsing. See options.h.
#include "server/options.h"

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "common/config_file.h"
#include "common/http_endpoint.h"

namespace aquifer::server {

Result<DataServerOptions> ParseDataServerOptions(int argc, char** argv, std::string* help_out) {
  DataServerOptions o;
  CLI::App app("aquifer-data: Aquifer's data server (chunk store)");
  ConfigFileOptions options(app);
  options.Add("--listen", &o.listen, "HOST:PORT to serve gRPC on (port 0: kernel chooses)");
  options.Add("--dir", &o.dir, "chunk store directory (required)");
  options.Add("--meta", &o.meta, "aquifer-meta HOST:PORT (required)");
  options.Add("--failure-domain", &o.failure_domain, "failure domain label (default: hostname)");
  options.Add("--capacity-bytes", &o.capacity_bytes,
              "bytes the store may use (default: the file system's size)");
  options.Add("--full-percent", &o.full_percent,
              "percent of the capacity above which client chunk writes are refused (ENOSPC); "
              "the rest is kept for repair and backfill (1..100)");
  options.Add("--superseded-grace-ms", &o.superseded_grace_ms,
              "ms a chunk version superseded by a newer committed one stays readable before it "
              "is deleted, for readers whose view still names it (0..600000)");
  options.Add("--gc-tombstone-ms", &o.gc_tombstone_ms,
              "ms an applied GC task keeps refusing writes of the chunk versions it covers "
              "(a backfill or late write of a deleted file's chunk), 0..3600000 (0: off)");
  options.Add("--port-file", &o.port_file, "write the bound HOST:PORT here once serving");
  options.Add("--http-listen", &o.http_listen,
              "HOST:PORT to serve /metrics on (port 0: kernel chooses; empty: no HTTP)");
  options.Add("--http-port-file", &o.http_port_file,
              "write the bound HTTP HOST:PORT here once serving");
  options.Add("--key", &o.key,
              "cluster key file (0600; `aquifer cluster key new FILE` makes one); default "
              "$AQUIFER_KEY_FILE; none: every connection is served (warned)");
  options.Add("--tls", &o.tls,
              "TLS on every gRPC and wire port (needs --tls-ca, --tls-cert, --tls-key)");
  options.Add("--tls-ca", &o.tls_ca, "PEM file: the CA that signs the servers' certificates");
  options.Add("--tls-cert", &o.tls_cert, "PEM file: this server's certificate");
  options.Add("--tls-key", &o.tls_key, "PEM file: its private key (mode 0600)");
  options.Add("--tls-server-name", &o.tls_server_name,
              "the DNS name every server's certificate carries (clients check it)");
  options.AddConfigFileFlag("--config", &o.config, "TOML file with the same keys as the flags");
  options.Add("--log-level", &o.log_level, "trace, debug, info, warn, error, off");
  options.Add("--io-depth", &o.io_depth, "io_uring entries per I/O thread");
  options.Add("--heartbeat-interval-ms", &o.heartbeat_interval_ms,
              "ms between heartbeats until aquifer-meta says otherwise");
  options.Add("--register-retry-ms", &o.register_retry_ms,
              "first wait before retrying registration, ms");
  options.Add("--meta-rpc-timeout-ms", &o.meta_rpc_timeout_ms, "deadline of one meta call, ms");
  options.Add("--block-bytes", &o.block_bytes, "CRC32C block of a new store, bytes");
  options.Add("--scrub-rate-mib", &o.scrub_rate_mib, "scrub read rate, MiB/s (0: unlimited)");
  options.Add("--scrub-interval-s", &o.scrub_interval_s, "seconds between scrub passes (0: off)");
  options.Add("--backfill-delay-ms", &o.backfill_delay_ms,
              "ms after (re)registering before backfilling chunks missed while down");
  options.Add("--handoff-sweep-ms", &o.handoff_sweep_ms,
              "ms between sweeps deleting hand-off copies their target holds (0: off)");
  options.Add("--wire", &o.wire, "1: serve chunk reads and writes on the chunk wire too; 0: off");
  options.Add("--wire-port", &o.wire_port, "chunk wire TCP port (0: kernel chooses)");
  options.Add("--wire-max-connections", &o.wire_max_connections,
              "chunk wire connections served at once (more are refused; clients use gRPC)");
  app.set_version_flag("--version", std::string("aquifer-data ") + AQUIFER_VERSION,
                       "print the version and exit");
  AQ_RETURN_IF_ERROR(options.Parse(argc, argv, help_out));
  if (!help_out->empty()) return DataServerOptions{};  // --help or --version
  if (o.failure_domain.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0) o.failure_domain = host;
    if (o.failure_domain.empty()) o.failure_domain = "localhost";
  }
  AQ_RETURN_IF_ERROR(ValidateDataServerOptions(o));
  return o;
}

Status ValidateDataServerOptions(const DataServerOptions& o) {
  if (o.dir.empty()) return InvalidArgument("--dir DIR is required");
  if (o.meta.empty()) return InvalidArgument("--meta HOST:PORT is required");
  if (o.listen.find(':') == std::string::npos) return InvalidArgument("--listen needs HOST:PORT");
  // The listen address is registered as this server's address, which clients and other data
  // servers connect to: a wildcard would send them to their own host.
  const std::string host = o.listen.substr(0, o.listen.rfind(':'));
  if (host == "0.0.0.0" || host == "[::]" || host == "::" || host.empty()) {
    return InvalidArgument("--listen " + o.listen +
                           ": name an address clients can reach (it is registered with the "
                           "metadata server as this server's address), not a wildcard");
  }
  if (!o.http_listen.empty()) AQ_RETURN_IF_ERROR(ParseListenAddress(o.http_listen).status());
  if (o.io_depth < 1 || o.io_depth > 4096) return InvalidArgument("io-depth must be in 1..4096");
  if (o.superseded_grace_ms > 600000) {
    return InvalidArgument("superseded-grace-ms must be in 0..600000");
  }
  if (o.gc_tombstone_ms > 3600000) return InvalidArgument("gc-tombstone-ms must be in 0..3600000");
  if (o.full_percent < 1 || o.full_percent > 100) {
    return InvalidArgument("full-percent must be in 1..100");
  }
  if (o.heartbeat_interval_ms < 1) return InvalidArgument("heartbeat-interval-ms must be >= 1");
  if (o.register_retry_ms < 1) return InvalidArgument("register-retry-ms must be >= 1");
  if (o.meta_rpc_timeout_ms < 1) return InvalidArgument("meta-rpc-timeout-ms must be >= 1");
  if (o.wire > 1) return InvalidArgument("wire must be 0 or 1");
  if (o.wire_port > 65535) return InvalidArgument("wire-port must be in 0..65535");
  if (o.wire_max_connections < 1) return InvalidArgument("wire-max-connections must be >= 1");
  const uint32_t b = o.block_bytes;
  if (b < 4096 || b > 16 * 1024 * 1024 || (b & (b - 1)) != 0) {
    return InvalidArgument("block-bytes must be a power of 2 in 4096..16 MiB");
  }
  return OkStatus();
}

}  // namespace aquifer::server
