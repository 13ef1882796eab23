#include "cli/status_report.h"

#include <cstdio>
#include <sstream>

namespace aquifer::cli {

namespace {

std::string Pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

std::string Heartbeat(int64_t ms_ago) {
  if (ms_ago < 0) return "never";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s ago", static_cast<double>(ms_ago) / 1000.0);
  return buf;
}

}  // namespace

std::string HumanBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[u]);
  return buf;
}

std::string FormatStatus(const std::string& meta_address, const Result<ClusterView>& view,
                         const std::optional<LocalProcesses>& local,
                         const std::vector<std::string>& mounts) {
  std::ostringstream o;
  if (local) o << "cluster   local, root " << local->state.root << "\n";
  if (!view.ok()) {
    o << "meta      " << meta_address << "  UNREACHABLE: " << view.status().ToString() << "\n";
  } else {
    const ClusterView& v = *view;
    o << "meta      " << meta_address << "  up, cluster map version " << v.map_version
      << ", default layout RS " << v.default_k << "+" << v.default_m << ", stripe unit "
      << HumanBytes(v.default_unit_bytes) << "\n";
    int up = 0;
    for (const ServerView& s : v.servers) up += s.up ? 1 : 0;
    o << "servers   " << v.servers.size() << " registered, " << up << " up, "
      << v.servers.size() - static_cast<size_t>(up) << " down\n";
    if (!v.servers.empty()) {
      o << "  " << Pad("ID", 5) << Pad("ADDRESS", 22) << Pad("DOMAIN", 10) << Pad("STATE", 7)
        << Pad("CAPACITY", 12) << Pad("USED", 12) << Pad("CHUNKS", 10) << "HEARTBEAT\n";
      for (const ServerView& s : v.servers) {
        o << "  " << Pad(s.id.ToString(), 5) << Pad(s.address, 22) << Pad(s.failure_domain, 10)
          << Pad(s.up ? "up" : "DOWN", 7) << Pad(HumanBytes(s.capacity_bytes), 12)
          << Pad(HumanBytes(s.used_bytes), 12) << Pad(std::to_string(s.chunk_count), 10)
          << Heartbeat(s.last_heartbeat_ms_ago) << "\n";
      }
    }
    o << "pgs      ";
    if (v.pg_count_by_width.empty()) o << " none yet";
    for (const auto& [width, count] : v.pg_count_by_width) {
      o << " width " << width << ": " << count << " placement groups;";
    }
    o << "\n";
    o << "capacity  raw " << HumanBytes(v.total_bytes) << " (" << HumanBytes(v.free_bytes)
      << " free), usable after parity " << HumanBytes(v.usable_total_bytes) << " ("
      << HumanBytes(v.usable_free_bytes) << " free), " << v.files << " inodes\n";
    if (v.default_k > 0 && static_cast<uint32_t>(up) < v.default_k + v.default_m) {
      o << "WARNING   only " << up << " data servers up, fewer than k+m = "
        << v.default_k + v.default_m << ": the cluster is degraded and waiting for servers\n";
    }
  }
  if (local) {
    const ClusterState& s = local->state;
    o << "mount     ";
    if (s.mount.dir.empty()) {
      o << "none\n";
    } else {
      o << s.mount.dir << "  "
        << (local->mount_type.empty() ? "NOT MOUNTED" : "mounted (" + local->mount_type + ")")
        << ", aquifer-mount " << (local->mount_alive ? "pid " + std::to_string(s.mount.pid)
                                                     : std::string("not running"))
        << "\n";
    }
    o << "processes meta " << (local->meta_alive ? "pid " + std::to_string(s.meta.pid)
                                                 : std::string("NOT RUNNING"));
    for (size_t i = 0; i < s.data_servers.size(); ++i) {
      bool alive = i < local->data_alive.size() && local->data_alive[i];
      o << "; " << s.data_servers[i].failure_domain << " "
        << (alive ? "pid " + std::to_string(s.data_servers[i].pid) : std::string("NOT RUNNING"));
    }
    o << "\n";
  } else {
    o << "mounts    ";
    if (mounts.empty()) o << "no FUSE mounts on this host";
    for (size_t i = 0; i < mounts.size(); ++i) o << (i ? ", " : "") << mounts[i];
    o << "\n";
  }
  return o.str();
}

}  // namespace aquifer::cli
