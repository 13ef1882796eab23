#include "metadata/options.h"

#include <CLI/CLI.hpp>
#include <toml++/toml.h>

#include <functional>

#include "aquifer/units.h"

namespace aquifer::meta {

Result<MetaOptions> ParseMetaOptions(int argc, char** argv, std::string* help_out) {
  MetaOptions o;
  CLI::App app("aquifer-meta: Aquifer's metadata server");
  app.add_option("--listen", o.listen, "HOST:PORT to serve gRPC on (port 0: kernel chooses)");
  app.add_option("--db", o.db, "RocksDB directory (required)");
  app.add_option("--port-file", o.port_file, "write the bound HOST:PORT here once serving");
  app.add_option("--config", o.config, "TOML file with the same keys as the flags");
  app.add_option("--k", o.k, "default data units per stripe");
  app.add_option("--m", o.m, "default parity units per stripe");
  app.add_option("--unit-bytes", o.unit_bytes, "default stripe unit, bytes");
  app.add_option("--pgs-per-table", o.pgs_per_table, "placement groups per PG table");
  app.add_option("--heartbeat-timeout-ms", o.heartbeat_timeout_ms,
                 "data server silent this long (ms) is marked down");
  app.add_option("--session-ttl-ms", o.session_ttl_ms, "client session lease, ms");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error, off");
  app.add_option("--cache-entries", o.cache_entries, "inodes and dentries cached in memory");
  app.add_option("--rpc-threads", o.rpc_threads, "most gRPC server threads");
  app.add_option("--repair-delay-ms", o.repair_delay_ms,
                 "data server down this long (ms) has its PG positions repaired elsewhere");
  app.add_option("--max-concurrent-moves", o.max_concurrent_moves,
                 "move tasks running at once per destination server");
  app.add_option("--move-rate-mib", o.move_rate_mib, "copy rate of each move task, MiB/s");
  app.add_option("--pg-gc-delay-ms", o.pg_gc_delay_ms,
                 "wait (ms) after a move finishes before the source deletes its chunks");
  app.set_version_flag("--version", std::string("aquifer-meta ") + AQUIFER_VERSION,
                       "print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    *help_out = app.help();
    return MetaOptions{};
  } catch (const CLI::CallForVersion& e) {
    *help_out = std::string(e.what()) + "\n";
    return MetaOptions{};
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
    // Each key: its flag name, and how to apply a TOML value unless the flag was given.
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
        {"db", str(&o.db)},
        {"port-file", str(&o.port_file)},
        {"k", u32(&o.k)},
        {"m", u32(&o.m)},
        {"unit-bytes", u32(&o.unit_bytes)},
        {"pgs-per-table", u32(&o.pgs_per_table)},
        {"heartbeat-timeout-ms", u32(&o.heartbeat_timeout_ms)},
        {"session-ttl-ms", u32(&o.session_ttl_ms)},
        {"log-level", str(&o.log_level)},
        {"cache-entries", u64(&o.cache_entries)},
        {"rpc-threads", u32(&o.rpc_threads)},
        {"repair-delay-ms", u32(&o.repair_delay_ms)},
        {"max-concurrent-moves", u32(&o.max_concurrent_moves)},
        {"move-rate-mib", u32(&o.move_rate_mib)},
        {"pg-gc-delay-ms", u32(&o.pg_gc_delay_ms)},
    };
    for (auto&& [key, node] : tbl) {
      std::string name(key.str());
      // Accept snake_case spellings too (port_file == port-file).
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
  if (o.db.empty()) return InvalidArgument("--db DIR is required");
  AQ_RETURN_IF_ERROR(ValidateMetaOptions(o));
  return o;
}

Status ValidateMetaOptions(const MetaOptions& o) {
  if (o.k < 1 || o.k > 64) return InvalidArgument("k must be in 1..64");
  if (o.m > 16) return InvalidArgument("m must be in 0..16");
  if (o.unit_bytes < 4096 || o.unit_bytes % 4096 != 0 || o.unit_bytes > kMaxStripeUnitBytes) {
    return InvalidArgument("unit-bytes must be a multiple of 4096 in 4096..16 MiB");
  }
  if (o.pgs_per_table < 1 || o.pgs_per_table > 65536) {
    return InvalidArgument("pgs-per-table must be in 1..65536");
  }
  if (o.heartbeat_timeout_ms < 10) return InvalidArgument("heartbeat-timeout-ms must be >= 10");
  if (o.session_ttl_ms < 10) return InvalidArgument("session-ttl-ms must be >= 10");
  if (o.rpc_threads < 1) return InvalidArgument("rpc-threads must be >= 1");
  if (o.max_concurrent_moves < 1) return InvalidArgument("max-concurrent-moves must be >= 1");
  return OkStatus();
}

}  // namespace aquifer::meta
