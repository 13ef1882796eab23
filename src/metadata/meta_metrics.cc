#include "metadata/meta_metrics.h"

#include <map>

namespace aquifer::meta {

metrics::Collector RegisterMetaMetrics(MetadataService* service) {
  return metrics::Collector([service] {
    using metrics::Counter;
    using metrics::Gauge;
    using metrics::Sample;
    std::vector<prometheus::MetricFamily> out;
    const ClusterMap map = service->GetClusterMap();
    std::vector<Sample> up, capacity, used, chunks, positions, corrupt;
    for (const ServerStatus& s : map.servers) {
      if (s.record.state == MemberState::kRemoved) continue;  // history, not capacity
      const metrics::Labels who{{"server", std::to_string(s.record.id.value())},
                                {"name", s.record.failure_domain}};
      metrics::Labels with_state = who;
      with_state["state"] = MemberStateName(s.record.state);
      up.push_back({with_state, s.up ? 1.0 : 0.0});
      capacity.push_back({who, static_cast<double>(s.record.capacity_bytes)});
      used.push_back({who, static_cast<double>(s.record.used_bytes)});
      chunks.push_back({who, static_cast<double>(s.chunk_count)});
      positions.push_back({who, static_cast<double>(s.pg_positions)});
      corrupt.push_back({who, static_cast<double>(s.corrupt_found)});
    }
    out.push_back(Gauge("aquifer_meta_data_server_up",
                        "1 while the data server heartbeats, 0 when marked down or removed",
                        up));
    out.push_back(Gauge("aquifer_meta_data_server_capacity_bytes",
                        "capacity the data server reports, bytes", capacity));
    out.push_back(Gauge("aquifer_meta_data_server_used_bytes",
                        "bytes used on the data server's disk", used));
    out.push_back(Gauge("aquifer_meta_data_server_chunks", "chunks the data server holds",
                        chunks));
    out.push_back(Gauge("aquifer_meta_data_server_pg_positions",
                        "placement group positions that target the data server", positions));
    out.push_back(Gauge("aquifer_meta_data_server_corrupt_chunks_found",
                        "chunks the data server's scrub found corrupt since it started",
                        corrupt));
    out.push_back(Gauge("aquifer_meta_map_version", "cluster map version",
                        {{{}, static_cast<double>(map.version)}}));
    if (auto fs = service->StatFs(); fs.ok()) {
      out.push_back(Gauge("aquifer_meta_capacity_bytes",
                          "capacity of the up data servers: raw, and usable after parity",
                          {{{{"kind", "raw"}}, static_cast<double>(fs->total_bytes)},
                           {{{"kind", "usable"}}, static_cast<double>(fs->usable_total_bytes)}}));
      out.push_back(Gauge("aquifer_meta_free_bytes",
                          "free space of the up data servers: raw, and usable after parity",
                          {{{{"kind", "raw"}}, static_cast<double>(fs->free_bytes)},
                           {{{"kind", "usable"}}, static_cast<double>(fs->usable_free_bytes)}}));
      out.push_back(Gauge("aquifer_meta_inodes", "inodes in use (files, directories, links)",
                          {{{}, static_cast<double>(fs->files)}}));
    }
    const std::vector<SessionInfo> sessions = service->ListSessions();
    double caching = 0;
    for (const SessionInfo& s : sessions) caching += s.caches ? 1 : 0;
    out.push_back(Gauge("aquifer_meta_sessions", "open client sessions (mounts and others)",
                        {{{{"caches", "yes"}}, caching},
                         {{{"caches", "no"}}, static_cast<double>(sessions.size()) - caching}}));
    const HoldCounts holds = service->CountHolds();
    out.push_back(Gauge("aquifer_meta_open_files", "(file, session) pairs open",
                        {{{}, static_cast<double>(holds.open_files)}}));
    out.push_back(Gauge("aquifer_meta_write_leases", "files with a write lease held",
                        {{{}, static_cast<double>(holds.write_leases)}}));
    out.push_back(Gauge("aquifer_meta_locks", "fcntl and flock locks held",
                        {{{}, static_cast<double>(holds.locks)}}));

    const MovesReport moves = service->GetMoves();
    std::map<std::pair<std::string, std::string>, double> by_kind_state;
    std::map<std::string, double> rate_by_kind;
    for (const char* kind : {"repair", "rebalance", "drain"}) {
      by_kind_state[{kind, "running"}] = 0;
      by_kind_state[{kind, "queued"}] = 0;
      rate_by_kind[kind] = 0;
    }
    for (const MoveInfo& m : moves.moves) {
      const std::string kind = MoveKindName(m.task.kind);
      by_kind_state[{kind, m.running ? "running" : "queued"}] += 1;
      if (m.running) rate_by_kind[kind] += static_cast<double>(m.rate_bytes_per_s);
    }
    std::vector<Sample> tasks, rates;
    for (const auto& [ks, n] : by_kind_state) {
      tasks.push_back({{{"kind", ks.first}, {"state", ks.second}}, n});
    }
    for (const auto& [kind, r] : rate_by_kind) rates.push_back({{{"kind", kind}}, r});
    out.push_back(Gauge("aquifer_meta_move_tasks",
                        "repair, rebalance and drain tasks, by kind and state", tasks));
    out.push_back(Gauge("aquifer_meta_move_rate_bytes_per_second",
                        "copy rate of the running move tasks, summed by kind", rates));
    out.push_back(Gauge("aquifer_meta_move_bytes_left",
                        "bytes the running move tasks still have to copy",
                        {{{}, static_cast<double>(moves.bytes_left)}}));
    out.push_back(Counter("aquifer_meta_move_tasks_completed_total",
                          "move tasks finished since the metadata server started",
                          {{{}, static_cast<double>(moves.moves_completed)}}));
    std::vector<Sample> moved;
    for (MoveKind k : {MoveKind::kRepair, MoveKind::kDrain, MoveKind::kRebalance}) {
      moved.push_back({{{"kind", MoveKindName(k)}},
                       static_cast<double>(moves.completed_bytes[static_cast<size_t>(k)])});
    }
    out.push_back(Counter("aquifer_meta_moved_bytes_total",
                          "bytes the finished move tasks copied or rebuilt, by kind", moved));
    // Every reason is always listed (0 when none), so the series do not come and go.
    std::map<std::string, double> degraded_by_reason = {
        {"repairing", 0}, {"repair pending", 0}, {"waiting for a server", 0}};
    for (const DegradedPg& d : moves.degraded) {
      // "repair in 1234 ms" counts down: one label value for all of them.
      degraded_by_reason[d.reason.rfind("repair in", 0) == 0 ? "repair pending" : d.reason] += 1;
    }
    std::vector<Sample> degraded;
    for (const auto& [reason, n] : degraded_by_reason) degraded.push_back({{{"reason", reason}}, n});
    out.push_back(Gauge("aquifer_meta_degraded_pgs",
                        "placement groups with positions on servers that are down or removed "
                        "(their stripes are below k+m), by reason",
                        degraded));
    out.push_back(Gauge("aquifer_meta_degraded_stripes",
                        "stripes written below k+m whose backfill is pending",
                        {{{}, static_cast<double>(moves.degraded_stripes)}}));
    out.push_back(Gauge("aquifer_meta_lost_stripes",
                        "stripes recorded lost (no k units readable), in lost_files files",
                        {{{}, static_cast<double>(moves.lost_stripes)}}));
    out.push_back(Gauge("aquifer_meta_lost_files", "files with stripes recorded lost",
                        {{{}, static_cast<double>(moves.lost_files)}}));
    out.push_back(Gauge("aquifer_meta_rebalance_paused", "1 while rebalance is paused",
                        {{{}, moves.rebalance_paused ? 1.0 : 0.0}}));

    const MetaCacheCounts cache = service->CacheCounts();
    out.push_back(Counter("aquifer_meta_cache_lookups_total",
                          "lookups of the in-memory inode and dentry caches (a miss reads the "
                          "store)",
                          {{{{"cache", "inode"}, {"result", "hit"}},
                            static_cast<double>(cache.inode_hits)},
                           {{{"cache", "inode"}, {"result", "miss"}},
                            static_cast<double>(cache.inode_misses)},
                           {{{"cache", "dentry"}, {"result", "hit"}},
                            static_cast<double>(cache.dentry_hits)},
                           {{{"cache", "dentry"}, {"result", "miss"}},
                            static_cast<double>(cache.dentry_misses)}}));
    const auto events = service->EventCounts();
    out.push_back(Counter("aquifer_meta_events_total",
                          "events recorded (the status page's list), by severity",
                          {{{{"severity", "info"}}, static_cast<double>(events[0])},
                           {{{"severity", "warning"}}, static_cast<double>(events[1])},
                           {{{"severity", "error"}}, static_cast<double>(events[2])}}));
    return out;
  });
}

}  // namespace aquifer::meta
