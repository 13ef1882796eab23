#include "client_fuse/mount_options.h"

#include "common/http_endpoint.h"

#include <cerrno>
#include <cstdlib>
#include <string_view>

namespace aquifer::fuse {
namespace {

// mount(8)/fstab words that are not mount flags for FUSE and must not reach libfuse.
bool IsMountNoise(std::string_view opt) {
  static constexpr std::string_view kNoise[] = {
      "rw", "defaults", "_netdev", "auto", "noauto", "user", "nouser", "users", "owner",
      "group", "nofail", "relatime", "strictatime", "nodiratime", "loud", "silent"};
  for (std::string_view n : kNoise) {
    if (opt == n) return true;
  }
  return opt.starts_with("x-") || opt.starts_with("comment=") || opt.starts_with("helper=");
}

// Seconds, 0..max_s.
Result<double> ParseSeconds(std::string_view key, std::string_view value, int max_s = 86400) {
  std::string s(value);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || errno != 0 || *end != '\0' || !(v >= 0) || v > max_s) {
    return InvalidArgument("bad value '" + s + "' for " + std::string(key) + " (seconds, 0.." +
                           std::to_string(max_s) + ")");
  }
  return v;
}

Status AddOptionList(std::string_view list, MountOptions& opts) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view opt = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (opt.empty() || IsMountNoise(opt)) continue;
    size_t eq = opt.find('=');
    std::string_view key = opt.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? std::string_view() : opt.substr(eq + 1);
    if (key == "attr_timeout" || key == "entry_timeout") {
      Result<double> s = ParseSeconds(key, value);
      if (!s.ok()) return s.status();
      (key == "attr_timeout" ? opts.attr_timeout_s : opts.entry_timeout_s) = *s;
    } else if (key == "lease_wait") {
      Result<double> s = ParseSeconds(key, value);
      if (!s.ok()) return s.status();
      opts.lease_wait_s = *s;
    } else if (key == "meta_wait") {
      Result<double> s = ParseSeconds(key, value, 3600);
      if (!s.ok()) return s.status();
      opts.meta_wait_s = *s;
    } else if (key == "max_threads") {
      std::string v(value);
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 1024) {
        return InvalidArgument("bad value '" + v + "' for max_threads (1..1024)");
      }
      opts.max_threads = static_cast<unsigned>(n);
    } else if (key == "log_level") {
      opts.log_level = std::string(value);
    } else if (key == "log_file") {
      opts.log_file = std::string(value);
    } else if (key == "client_name") {
      opts.client_name = std::string(value);
    } else if (key == "http_listen") {
      if (!value.empty()) AQ_RETURN_IF_ERROR(ParseListenAddress(value).status());
      opts.http_listen = std::string(value);
    } else if (key == "http_port_file") {
      opts.http_port_file = std::string(value);
    } else if (key == "key") {
      opts.key_file = std::string(value);
    } else if (key == "tls_ca") {
      opts.tls_ca = std::string(value);
    } else if (key == "tls_server_name") {
      opts.tls_server_name = std::string(value);
    } else if (key == "transport") {
      if (value == "auto") {
        opts.transport = FuseTransport::kAuto;
      } else if (value == "uring") {
        opts.transport = FuseTransport::kUring;
      } else if (value == "dev") {
        opts.transport = FuseTransport::kDev;
      } else {
        return InvalidArgument("bad value '" + std::string(value) +
                               "' for transport (auto, uring or dev)");
      }
    } else if (key == "data_wire" || key == "meta_wire" || key == "cache_leases" ||
               key == "lazy_opens" || key == "dir_leases") {
      if (value != "0" && value != "1") {
        return InvalidArgument("bad value '" + std::string(value) + "' for " + std::string(key) +
                               " (0 or 1)");
      }
      bool& flag = key == "data_wire"      ? opts.data_wire
                   : key == "meta_wire"    ? opts.meta_wire
                   : key == "cache_leases" ? opts.cache_leases
                   : key == "dir_leases"   ? opts.dir_leases
                                           : opts.lazy_opens;
      flag = value == "1";
    } else {
      opts.fuse_options.emplace_back(opt);
    }
  }
  return OkStatus();
}

}  // namespace

Result<MountOptions> ParseMountArgs(int argc, const char* const* argv) {
  MountOptions opts;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto next = [&](std::string_view flag) -> Result<std::string> {
      if (i + 1 >= argc) return InvalidArgument(std::string(flag) + " needs a value");
      return std::string(argv[++i]);
    };
    if (arg == "-h" || arg == "--help") {
      opts.help = true;
    } else if (arg == "-V" || arg == "--version") {
      opts.version = true;
    } else if (arg == "-f") {
      opts.foreground = true;
    } else if (arg == "-d" || arg == "--debug") {
      opts.fuse_debug = true;
      opts.foreground = true;
    } else if (arg == "-s" || arg == "-n" || arg == "-v") {
      // mount(8) helper flags (sloppy, no mtab, verbose): nothing to do.
    } else if (arg == "-t") {
      Result<std::string> v = next(arg);  // mount(8) passes the type, e.g. fuse.aquifer
      if (!v.ok()) return v.status();
    } else if (arg == "-o") {
      Result<std::string> v = next(arg);
      if (!v.ok()) return v.status();
      AQ_RETURN_IF_ERROR(AddOptionList(*v, opts));
    } else if (arg.starts_with("-o")) {
      AQ_RETURN_IF_ERROR(AddOptionList(arg.substr(2), opts));
    } else if (arg == "--log-level" || arg == "--log-file") {
      Result<std::string> v = next(arg);
      if (!v.ok()) return v.status();
      (arg == "--log-level" ? opts.log_level : opts.log_file) = *v;
    } else if (arg.starts_with("--log-level=")) {
      opts.log_level = std::string(arg.substr(12));
    } else if (arg.starts_with("--log-file=")) {
      opts.log_file = std::string(arg.substr(11));
    } else if (arg.size() > 1 && arg[0] == '-') {
      return InvalidArgument("unknown flag '" + std::string(arg) + "'");
    } else {
      positional.emplace_back(arg);
    }
  }
  if (opts.help || opts.version) return opts;
  if (positional.size() != 2) {
    return InvalidArgument(positional.size() < 2 ? "need META_ADDR and MOUNTPOINT"
                                                 : "too many arguments: '" + positional[2] + "'");
  }
  opts.meta_address = positional[0];
  opts.mountpoint = positional[1];
  if (opts.meta_address.find(':') == std::string::npos) {
    return InvalidArgument("META_ADDR must be host:port, got '" + opts.meta_address + "'");
  }
  return opts;
}

std::string FuseOptionString(const MountOptions& opts, bool as_root) {
  std::string s = "default_permissions,subtype=aquifer,max_read=1048576,fsname=aquifer:" +
                  opts.meta_address;
  if (as_root) s += ",allow_other";
  for (const std::string& o : opts.fuse_options) s += "," + o;
  return s;
}

const char* UsageText() {
  return "usage: aquifer-mount META_ADDR MOUNTPOINT [-f] [-d] [-o opt,...] [--log-level L] "
         "[--log-file F]\n"
         "  Aquifer options: attr_timeout=S entry_timeout=S (seconds, default 1), max_threads=N,\n"
         "  log_level=L, log_file=F, client_name=NAME, data_wire=0|1, meta_wire=0|1,\n"
         "  http_listen=HOST:PORT (serve /metrics there; port 0: kernel chooses), http_port_file=F\n"
         "  (write the bound HOST:PORT there), key=FILE (the cluster key file or a client\n"
         "  credential from `aquifer client add`, 0600), tls_ca=FILE (TLS to every server,\n"
         "  trusting this CA's certificates; default $AQUIFER_TLS_CA), tls_server_name=NAME\n"
         "  (the name the servers' certificates carry, aquifer),\n"
         "  cache_leases=0|1 (other hosts' changes reach this kernel before they return, 1),\n"
         "  lazy_opens=0|1 (read-only opens of files known under the cache lease cost no\n"
         "  metadata call, 1), dir_leases=0|1 (creates in a directory this mount holds the\n"
         "  exclusive lease on cost no round trip each; sent in batches, 0),\n"
         "  transport=auto|uring|dev (FUSE over io_uring or /dev/fuse;\n"
         "  auto takes io_uring when the kernel offers it),\n"
         "  lease_wait=S (seconds an open or write waits for another host to give back its\n"
         "  write lease, default 30, then EAGAIN), meta_wait=S (seconds a metadata call waits\n"
         "  for an unreachable or restarting aquifer-meta, 0..3600, default 120, then EIO);\n"
         "  other -o options go to FUSE (ro, allow_other, ...). mount(8) words (rw, defaults,\n"
         "  _netdev, noauto, nofail, x-*) are ignored.\n";
}

}  // namespace aquifer::fuse
