// aquifer-data option parsing. See options.h.
#include "server/options.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <toml++/toml.h>
#include <vector>

namespace aquifer::server {

Result<DataServerOptions> ParseDataServerOptions(int argc, char** argv, std::string* help_out) {
  DataServerOptions o;
  CLI::App app("aquifer-data: Aquifer's data server (chunk store)");
  app.add_option("--listen", o.listen, "HOST:PORT to serve gRPC on (port 0: kernel chooses)");
  app.add_option("--dir", o.dir, "chunk store directory (required)");
  app.add_option("--meta", o.meta, "aquifer-meta HOST:PORT (required)");
  app.add_option("--failure-domain", o.failure_domain, "failure domain label (default: hostname)");
  app.add_option("--capacity-bytes", o.capacity_bytes,
                 "bytes the store may use (default: the file system's size)");
  app.add_option("--port-file", o.port_file, "write the bound HOST:PORT here once serving");
  app.add_option("--config", o.config, "TOML file with the same keys as the flags");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error, off");
  app.add_option("--io-depth", o.io_depth, "io_uring entries per I/O thread");
  app.add_option("--heartbeat-interval-ms", o.heartbeat_interval_ms,
                 "ms between heartbeats until aquifer-meta says otherwise");
  app.add_option("--register-retry-ms", o.register_retry_ms,
                 "first wait before retrying registration, ms");
  app.add_option("--meta-rpc-timeout-ms", o.meta_rpc_timeout_ms, "deadline of one meta call, ms");
  app.add_option("--block-bytes", o.block_bytes, "CRC32C block of a new store, bytes");
  app.add_option("--scrub-rate-mib", o.scrub_rate_mib, "scrub read rate, MiB/s (0: unlimited)");
  app.add_option("--scrub-interval-s", o.scrub_interval_s,
                 "seconds between scrub passes (0: off)");
  app.add_option("--backfill-delay-ms", o.backfill_delay_ms,
                 "ms after (re)registering before backfilling chunks missed while down");
  app.set_version_flag("--version", std::string("aquifer-data ") + AQUIFER_VERSION,
                       "print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    *help_out = app.help();
    return DataServerOptions{};
  } catch (const CLI::CallForVersion& e) {
    *help_out = std::string(e.what()) + "\n";
    return DataServerOptions{};
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(std::string("bad command line: ") + e.what());
  }

  if (!o.config.empty()) {
    toml::table tbl;
    try {
      tbl = toml::parse_file(o.config);
    } catch (const toml::parse_error& e) {
      return InvalidArgument("config " + o.config + ": " + std::string(e.description()));
    }
    using Setter = std::function<bool(const toml::node&)>;
    auto str = [](std::string* f) {
      return Setter([f](const toml::node& n) {
        if (auto v = n.value<std::string>()) return *f = *v, true;
        return false;
      });
    };
    auto u32 = [](uint32_t* f) {
      return Setter([f](const toml::node& n) {
        auto v = n.value<int64_t>();
        if (!v || *v < 0 || *v > UINT32_MAX) return false;
        *f = static_cast<uint32_t>(*v);
        return true;
      });
    };
    auto u64 = [](uint64_t* f) {
      return Setter([f](const toml::node& n) {
        auto v = n.value<int64_t>();
        if (!v || *v < 0) return false;
        *f = static_cast<uint64_t>(*v);
        return true;
      });
    };
    const std::vector<std::pair<std::string, Setter>> keys = {
        {"listen", str(&o.listen)},
        {"dir", str(&o.dir)},
        {"meta", str(&o.meta)},
        {"failure-domain", str(&o.failure_domain)},
        {"capacity-bytes", u64(&o.capacity_bytes)},
        {"port-file", str(&o.port_file)},
        {"log-level", str(&o.log_level)},
        {"io-depth", u32(&o.io_depth)},
        {"heartbeat-interval-ms", u32(&o.heartbeat_interval_ms)},
        {"register-retry-ms", u32(&o.register_retry_ms)},
        {"meta-rpc-timeout-ms", u32(&o.meta_rpc_timeout_ms)},
        {"block-bytes", u32(&o.block_bytes)},
        {"scrub-rate-mib", u32(&o.scrub_rate_mib)},
        {"scrub-interval-s", u32(&o.scrub_interval_s)},
        {"backfill-delay-ms", u32(&o.backfill_delay_ms)},
    };
    for (auto&& [key, node] : tbl) {
      std::string name(key.str());
      for (char& c : name) {
        if (c == '_') c = '-';
      }
      bool known = false;
      for (const auto& [flag, set] : keys) {
        if (flag != name) continue;
        known = true;
        if (app.count("--" + flag) > 0) break;  // the flag wins
        if (!set(node)) return InvalidArgument("config " + o.config + ": bad value for " + flag);
      }
      if (!known) return InvalidArgument("config " + o.config + ": unknown key " + name);
    }
  }
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
  if (o.io_depth < 1 || o.io_depth > 4096) return InvalidArgument("io-depth must be in 1..4096");
  if (o.heartbeat_interval_ms < 1) return InvalidArgument("heartbeat-interval-ms must be >= 1");
  if (o.register_retry_ms < 1) return InvalidArgument("register-retry-ms must be >= 1");
  if (o.meta_rpc_timeout_ms < 1) return InvalidArgument("meta-rpc-timeout-ms must be >= 1");
  const uint32_t b = o.block_bytes;
  if (b < 4096 || b > 16 * 1024 * 1024 || (b & (b - 1)) != 0) {
    return InvalidArgument("block-bytes must be a power of 2 in 4096..16 MiB");
  }
  return OkStatus();
}

}  // namespace aquifer::server
