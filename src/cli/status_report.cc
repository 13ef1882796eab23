#include "cli/status_report.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "common/printable.h"

namespace aquifer::cli {

namespace {

// A string from the wire or the file system (addresses, failure domains, names, messages) as
// the report shows it: control bytes escaped (common/printable.h), never cut.
std::string Shown(const std::string& text) { return Printable(text, SIZE_MAX); }

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

std::string ServerName(ServerId id, const ClusterView* view) {
  if (id.value() == 0) return "-";
  if (view != nullptr) {
    for (const ServerView& s : view->servers) {
      if (s.id == id) return id.ToString() + "(" + Shown(s.failure_domain) + ")";
    }
  }
  return id.ToString();
}

std::vector<const MoveView*> RunningFirst(const MovesView& moves) {
  std::vector<const MoveView*> rows;
  for (const MoveView& m : moves.moves) rows.push_back(&m);
  std::stable_sort(rows.begin(), rows.end(), [](const MoveView* a, const MoveView* b) {
    return (a->state == "running") > (b->state == "running");
  });
  return rows;
}

std::string HumanDuration(int64_t ms) {
  if (ms < 0) return "?";
  int64_t s = (ms + 999) / 1000;
  if (s < 60) return std::to_string(s) + " s";
  if (s < 3600) return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
  return std::to_string(s / 3600) + " h " + std::to_string((s % 3600) / 60) + " min";
}

std::string FormatMoveProgress(uint64_t chunks_done, uint64_t chunks_total, uint64_t bytes_done,
                               uint64_t bytes_total, uint64_t rate_bytes_per_s, int64_t eta_ms) {
  std::ostringstream o;
  o << "chunks " << chunks_done << "/" << chunks_total << ", " << HumanBytes(bytes_done) << "/"
    << HumanBytes(bytes_total) << ", " << HumanBytes(rate_bytes_per_s) << "/s, eta "
    << HumanDuration(eta_ms);
  return o.str();
}

std::string FormatMoves(const MovesView& mv, const ClusterView* view, size_t max_rows) {
  std::ostringstream o;
  o << "moves     " << mv.running << " running, " << mv.queued << " queued, "
    << HumanBytes(mv.bytes_left) << " left, eta " << HumanDuration(mv.eta_ms) << "; "
    << mv.moves_completed << " completed since meta start (max " << mv.max_concurrent_moves
    << " per destination, " << HumanBytes(mv.move_rate_bytes_per_s) << "/s per task"
    << (mv.rebalance_paused ? ", rebalance PAUSED" : "") << ")\n";
  if (!mv.moves.empty()) {
    const std::vector<const MoveView*> rows = RunningFirst(mv);
    o << "  " << Pad("TASK", 7) << Pad("KIND", 10) << Pad("STATE", 8) << Pad("PG", 8)
      << Pad("FROM -> TO", 20) << "PROGRESS\n";
    for (size_t i = 0; i < rows.size() && i < max_rows; ++i) {
      const MoveView& m = *rows[i];
      o << "  " << Pad(std::to_string(m.id), 7) << Pad(Shown(m.kind), 10) << Pad(Shown(m.state), 8)
        << Pad(std::to_string(m.pg_width) + "/" + std::to_string(m.pg_index) + "." +
                   std::to_string(m.position),
               8)
        << Pad(ServerName(m.from, view) + " -> " + ServerName(m.to, view), 20)
        << FormatMoveProgress(m.chunks_done, m.chunks_total, m.bytes_done, m.bytes_total,
                              m.rate_bytes_per_s, m.eta_ms)
        << (m.error.empty() ? "" : "  ERROR " + Shown(m.error)) << "\n";
    }
    if (rows.size() > max_rows) o << "  ... " << rows.size() - max_rows << " more\n";
  }
  if (!mv.degraded.empty()) {
    std::map<std::string, std::vector<const DegradedPgView*>> by_reason;
    for (const DegradedPgView& d : mv.degraded) by_reason[d.reason].push_back(&d);
    o << "degraded  " << mv.degraded.size() << " PGs with missing positions";
    if (mv.waiting_for_server) o << ", WAITING FOR A SERVER (no spare failure domain)";
    o << "\n";
    for (const auto& [reason, pgs] : by_reason) {
      o << "  " << pgs.size() << " " << Shown(reason) << ":";
      for (size_t i = 0; i < pgs.size() && i < 8; ++i) {
        o << " " << pgs[i]->pg_width << "/" << pgs[i]->pg_index << "[";
        for (size_t j = 0; j < pgs[i]->positions.size(); ++j) {
          o << (j ? "," : "") << pgs[i]->positions[j];
        }
        o << "]";
      }
      if (pgs.size() > 8) o << " ...";
      o << "\n";
    }
  }
  o << "meta says " << (mv.message.empty() ? "healthy" : Shown(mv.message)) << "\n";
  return o.str();
}

std::string FormatServerTable(const ClusterView& v) {
  std::ostringstream o;
  if (!v.servers.empty()) {
      o << "  " << Pad("ID", 5) << Pad("ADDRESS", 22) << Pad("DOMAIN", 10) << Pad("STATE", 7)
        << Pad("MEMBER", 10) << Pad("PGS", 6) << Pad("USED / CAPACITY", 24) << Pad("CHUNKS", 9)
        << Pad("SCRUBBED", 10) << Pad("CORRUPT", 9) << "HEARTBEAT\n";
      for (const ServerView& s : v.servers) {
        o << "  " << Pad(s.id.ToString(), 5) << Pad(Shown(s.address), 22)
          << Pad(Shown(s.failure_domain), 10)
          << Pad(s.up ? "up" : "DOWN", 7) << Pad(s.state.empty() ? "in" : Shown(s.state), 10)
          << Pad(std::to_string(s.pg_positions), 6)
          << Pad(HumanBytes(s.used_bytes) + " / " + HumanBytes(s.capacity_bytes), 24)
          << Pad(std::to_string(s.chunk_count), 9) << Pad(std::to_string(s.chunks_scrubbed), 10)
          << Pad(std::to_string(s.corrupt_found) + "/" + std::to_string(s.corrupt_repaired), 9)
          << Heartbeat(s.last_heartbeat_ms_ago) << "\n";
      }
    }
  return o.str();
}

RemovalRisk RemovalRiskOf(const ClusterView& view, uint32_t server_id) {
  RemovalRisk r;
  r.m = view.default_m;
  std::set<uint32_t> missing{server_id};
  for (const ServerView& s : view.servers) {
    if (s.id.value() == server_id) continue;
    if (!s.up || s.state == "removed") {
      missing.insert(s.id.value());
      ++r.servers_missing;
    }
  }
  for (const PgView& pg : view.pgs) {
    if (std::find(pg.targets.begin(), pg.targets.end(), server_id) == pg.targets.end()) continue;
    uint32_t gone = 0;
    for (uint32_t t : pg.targets) gone += missing.count(t) ? 1 : 0;
    if (gone > r.m) {
      ++r.pgs_lost;
    } else if (gone == r.m) {
      ++r.pgs_at_risk;
    }
  }
  return r;
}

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

const char* HealthName(HealthState state) {
  switch (state) {
    case HealthState::kOk: return "ok";
    case HealthState::kMountDown: return "mount down";
    case HealthState::kNearlyFull: return "nearly full";
    case HealthState::kDegraded: return "degraded";
    case HealthState::kWaitingForServer: return "waiting for a server";
    case HealthState::kDataAtRisk: return "data at risk";
    case HealthState::kDataLost: return "data lost";
    case HealthState::kUnreachable: return "unreachable";
  }
  return "?";
}

int HealthExitCode(HealthState state) {
  switch (state) {
    case HealthState::kOk: return 0;
    case HealthState::kUnreachable: return 1;
    // 2 is every command's usage error.
    case HealthState::kWaitingForServer: return 3;  // as `repair wait`
    case HealthState::kDegraded: return 4;
    case HealthState::kNearlyFull: return 5;
    case HealthState::kMountDown: return 6;
    case HealthState::kDataAtRisk: return 7;
    case HealthState::kDataLost: return 8;
  }
  return 1;
}

Health HealthOf(const Result<ClusterView>& view, const Result<MovesView>* moves,
                const std::optional<LocalProcesses>& local) {
  std::vector<std::pair<HealthState, std::string>> found;
  auto add = [&](HealthState st, std::string why) { found.emplace_back(st, std::move(why)); };
  if (!view.ok()) {
    add(HealthState::kUnreachable,
        "the metadata server did not answer: " + Shown(view.status().ToString()));
  } else {
    const ClusterView& v = *view;
    const uint32_t width = v.default_k + v.default_m;
    std::set<uint32_t> missing;  // down or removed
    std::string down_holding, down_empty;
    uint32_t n_down_holding = 0, n_down_empty = 0;
    for (const ServerView& sv : v.servers) {
      if (sv.state == "removed") {
        missing.insert(sv.id.value());
        continue;
      }
      if (!sv.up) {
        missing.insert(sv.id.value());
        std::string& list = sv.pg_positions > 0 ? down_holding : down_empty;
        list += (list.empty() ? "" : ",") + sv.id.ToString();
        ++(sv.pg_positions > 0 ? n_down_holding : n_down_empty);
        continue;
      }
      if (sv.capacity_bytes > 0 && sv.used_bytes * 100 >= sv.capacity_bytes * kNearlyFullPercent) {
        add(HealthState::kNearlyFull,
            "server " + sv.id.ToString() + " (" + Shown(sv.failure_domain) + ") is " +
                std::to_string(sv.used_bytes * 100 / sv.capacity_bytes) + "% full (" +
                HumanBytes(sv.used_bytes) + " of " + HumanBytes(sv.capacity_bytes) +
                "; client writes are refused above its full percent, 95 by default)");
      }
    }
    // PGs of the default width by how many positions sit on missing servers.
    uint32_t pgs_lost = 0, pgs_at_risk = 0, pgs_missing = 0;
    for (const PgView& pg : v.pgs) {
      if (pg.width != width || width == 0) continue;
      uint32_t gone = 0;
      for (uint32_t t : pg.targets) gone += missing.count(t) ? 1 : 0;
      if (gone > v.default_m) {
        ++pgs_lost;
      } else if (gone == v.default_m && gone > 0) {
        ++pgs_at_risk;
      } else if (gone > 0) {
        ++pgs_missing;
      }
    }
    if (moves != nullptr && moves->ok() && (*moves)->lost_stripes > 0) {
      add(HealthState::kDataLost, std::to_string((*moves)->lost_stripes) + " stripes in " +
                                      std::to_string((*moves)->lost_files) +
                                      " files cannot be read (EIO); `aquifer fsck` lists them");
    }
    if (pgs_lost > 0) {
      add(HealthState::kDataLost,
          std::to_string(pgs_lost) + " PGs have more than m = " + std::to_string(v.default_m) +
              " positions on down or removed servers: their stripes cannot be read until "
              "those servers return");
    }
    if (pgs_at_risk > 0) {
      add(HealthState::kDataAtRisk,
          std::to_string(pgs_at_risk) + " PGs have m = " + std::to_string(v.default_m) +
              " positions missing: one more failure there loses data");
    }
    if (moves != nullptr && moves->ok()) {
      const MovesView& mv = **moves;
      if (mv.waiting_for_server) {
        add(HealthState::kWaitingForServer,
            "missing positions have no spare failure domain to be rebuilt on: add a server");
      }
      if (mv.degraded_stripes > 0) {
        add(HealthState::kDegraded, std::to_string(mv.degraded_stripes) +
                                        " stripes written below k+m, backfill pending");
      }
      uint32_t repairs = 0;
      for (const MoveView& m : mv.moves) repairs += m.kind == "repair" ? 1 : 0;
      if (repairs > 0) {
        add(HealthState::kDegraded,
            "repairing: " + std::to_string(repairs) + " repair moves, " +
                HumanBytes(mv.bytes_left) + " left" +
                (mv.eta_ms >= 0 ? ", eta " + HumanDuration(mv.eta_ms) : std::string()));
      }
    }
    if (n_down_holding > 0) {
      add(HealthState::kDegraded,
          std::to_string(n_down_holding) +
              (n_down_holding == 1 ? " data server" : " data servers") +
              " down holding PG positions (" +
              down_holding + ")" +
              (pgs_missing + pgs_at_risk + pgs_lost > 0
                   ? ", " + std::to_string(pgs_missing + pgs_at_risk + pgs_lost) +
                         " PGs with positions missing"
                   : std::string()));
    }
    if (n_down_empty > 0) {
      add(HealthState::kDegraded,
          std::to_string(n_down_empty) +
              (n_down_empty == 1 ? " data server" : " data servers") +
              " down holding no PG positions (" +
              down_empty + "): nothing to repair; `aquifer server remove ID` forgets them");
    }
  }
  if (local && !local->state.mount.dir.empty()) {
    if (local->mount_type.empty()) {
      add(HealthState::kMountDown,
          "the mount " + Shown(local->state.mount.dir) + " is not mounted");
    } else if (!local->mount_alive) {
      add(HealthState::kMountDown, "aquifer-mount of " + Shown(local->state.mount.dir) +
                                       " is not running (the mount point answers nothing)");
    }
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  Health h;
  if (!found.empty()) h.state = found.front().first;
  for (auto& [st, why] : found) h.reasons.push_back(std::move(why));
  return h;
}

std::string FormatHealth(const Health& health) {
  std::string out = "health    ";
  if (health.state == HealthState::kOk) return out + "ok\n";
  std::string name = HealthName(health.state);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  out += name + ":";
  for (size_t i = 0; i < health.reasons.size(); ++i) {
    out += (i ? "; " : " ") + health.reasons[i];
  }
  return out + "\n";
}

std::string FormatStatus(const std::string& meta_address, const Result<ClusterView>& view,
                         const std::optional<LocalProcesses>& local,
                         const std::vector<std::string>& mounts,
                         const Result<MovesView>* moves) {
  std::ostringstream o;
  o << FormatHealth(HealthOf(view, moves, local));
  if (local) o << "cluster   local, root " << Shown(local->state.root) << "\n";
  if (!view.ok()) {
    o << "meta      " << Shown(meta_address) << "  UNREACHABLE: " << Shown(view.status().ToString())
      << "\n";
  } else {
    const ClusterView& v = *view;
    o << "meta      " << Shown(meta_address) << "  up, cluster map version " << v.map_version
      << ", default layout RS " << v.default_k << "+" << v.default_m << ", stripe unit "
      << HumanBytes(v.default_unit_bytes) << "\n";
    int up = 0;
    for (const ServerView& s : v.servers) up += s.up ? 1 : 0;
    o << "servers   " << v.servers.size() << " registered, " << up << " up, "
      << v.servers.size() - static_cast<size_t>(up) << " down\n";
    o << FormatServerTable(v);
    o << "pgs      ";
    if (v.pg_count_by_width.empty()) o << " none yet";
    for (const auto& [width, count] : v.pg_count_by_width) {
      o << " width " << width << ": " << count << " placement groups;";
    }
    if (v.pending_positions > 0) o << " " << v.pending_positions << " positions moving";
    o << "\n";
    o << "capacity  raw " << HumanBytes(v.total_bytes) << " (" << HumanBytes(v.free_bytes)
      << " free), usable after parity " << HumanBytes(v.usable_total_bytes) << " ("
      << HumanBytes(v.usable_free_bytes) << " free), " << v.files << " inodes\n";
    if (moves != nullptr) {
      if (moves->ok()) {
        o << FormatMoves(**moves, &v, 20);
      } else {
        o << "moves     unknown: " << Shown(moves->status().ToString()) << "\n";
      }
    }
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
      o << Shown(s.mount.dir) << "  "
        << (local->mount_type.empty() ? "NOT MOUNTED"
                                       : "mounted (" + Shown(local->mount_type) + ")")
        << ", aquifer-mount " << (local->mount_alive ? "pid " + std::to_string(s.mount.pid)
                                                     : std::string("not running"))
        << "\n";
    }
    o << "processes meta " << (local->meta_alive ? "pid " + std::to_string(s.meta.pid)
                                                 : std::string("NOT RUNNING"));
    for (size_t i = 0; i < s.data_servers.size(); ++i) {
      bool alive = i < local->data_alive.size() && local->data_alive[i];
      o << "; " << Shown(s.data_servers[i].failure_domain) << " "
        << (alive ? "pid " + std::to_string(s.data_servers[i].pid) : std::string("NOT RUNNING"));
    }
    o << "\n";
  } else {
    o << "mounts    ";
    if (mounts.empty()) o << "no mount of this cluster on this host";
    for (size_t i = 0; i < mounts.size(); ++i) o << (i ? ", " : "") << Shown(mounts[i]);
    o << "\n";
  }
  return o.str();
}

}  // namespace aquifer::cli
