// MetadataService: repair, rebalance and drain as one mechanism, "move position i of PG p from
// server A to server B" (docs/repair.md). Planning runs under cluster_mu_; each round writes one
// StoreBatch (tasks, PG tables with their pending targets, PG GC tasks, counters).
#include <algorithm>
#include <cmath>
#include <set>

#include "aquifer/units.h"
#include "common/hash.h"
#include "common/logging.h"
#include "metadata/service_internal.h"

namespace aquifer::meta {

namespace {
// Rendezvous score of server `s` for one PG position: deterministic, spread evenly.
uint64_t Score(uint32_t width, uint32_t pg, uint32_t pos, uint32_t s) {
  return Mix64(Mix64((uint64_t{width} << 40) ^ (uint64_t{pg} << 8) ^ pos) ^ s);
}

ServerId PendingAt(const PgTable& t, uint32_t pg, uint32_t pos) {
  if (pg >= t.pending.size() || t.pending[pg].empty()) return ServerId();
  return t.pending[pg][pos];
}

std::string Bytes(uint64_t b) {
  char buf[32];
  if (b >= kGiB) {
    snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / kGiB);
  } else {
    snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / kMiB);
  }
  return buf;
}
}  // namespace

// --- loading ----------------------------------------------------------------------------------
Status MetadataService::LoadMoves() {
  max_concurrent_moves_ = options_.max_concurrent_moves;
  move_rate_mib_ = options_.move_rate_mib;
  auto counter = [&](const char* name, uint64_t* out) -> Status {
    auto v = store_->GetCounter(name);
    if (!v.ok()) return v.status();
    *out = std::max<uint64_t>(*v, 1);
    return OkStatus();
  };
  AQ_RETURN_IF_ERROR(counter("next_move", &next_move_id_));
  AQ_RETURN_IF_ERROR(counter("next_pg_gc", &next_pg_gc_id_));
  const int64_t now = clocks_.mono_ms();
  auto tasks = store_->LoadMoveTasks();
  if (!tasks.ok()) return tasks.status();
  for (const MoveTask& t : *tasks) {
    MoveState st;
    st.task = t;
    st.created_ms = now;
    moves_[t.id] = st;
    move_at_[PgPos{t.pg_width, t.pg_index, t.position}] = t.id;
    next_move_id_ = std::max(next_move_id_, t.id + 1);
  }
  auto gcs = store_->LoadPgGcTasks();
  if (!gcs.ok()) return gcs.status();
  for (const PgGcTask& g : *gcs) {
    pg_gc_[g.id] = g;
    // The finish time is not persisted: wait a whole delay again (never early).
    pg_gc_not_before_[g.id] = now + options_.pg_gc_delay_ms;
    next_pg_gc_id_ = std::max(next_pg_gc_id_, g.id + 1);
  }
  for (auto& [w, t] : pg_tables_) t.pending.resize(t.pgs.size());
  if (!moves_.empty() || !pg_gc_.empty()) {
    Logger("meta")->info("load moves={} pg_gc_tasks={}", moves_.size(), pg_gc_.size());
  }
  return OkStatus();
}

// --- small rules ------------------------------------------------------------------------------
bool MetadataService::Eligible(const ServerState& s) const {
  return s.up && s.record.state == MemberState::kIn;
}

bool MetadataService::Failed(const ServerState& s, int64_t now) const {
  if (s.record.state == MemberState::kRemoved) return true;
  return !s.up && now - s.down_since_ms >= static_cast<int64_t>(options_.repair_delay_ms);
}

std::string MetadataService::DomainOf(ServerId id) const {
  auto it = servers_.find(id.value());
  // An unknown id gets a domain of its own that no real server has.
  return it == servers_.end() ? "\x01unknown-" + id.ToString() : it->second.record.failure_domain;
}

double MetadataService::WeightOf(ServerId id) const {
  auto it = servers_.find(id.value());
  if (it == servers_.end() || it->second.record.capacity_bytes == 0) return 1.0;
  return static_cast<double>(it->second.record.capacity_bytes);
}

std::map<uint32_t, uint32_t> MetadataService::PlannedLoad(std::optional<uint32_t> width) const {
  std::map<uint32_t, uint32_t> load;
  for (const auto& [w, t] : pg_tables_) {
    if (width && *width != w) continue;
    for (uint32_t pg = 0; pg < t.pgs.size(); ++pg) {
      for (uint32_t pos = 0; pos < t.pgs[pg].size(); ++pos) {
        ServerId p = PendingAt(t, pg, pos);
        load[(p.value() != 0 ? p : t.pgs[pg][pos]).value()]++;
      }
    }
  }
  return load;
}

bool MetadataService::PgGcQueued(ServerId server, const PgPos& pos) const {
  for (const auto& [id, g] : pg_gc_) {
    if (g.server == server && PgPos{g.pg_width, g.pg_index, g.position} == pos) return true;
  }
  return false;
}

std::optional<ServerId> MetadataService::ChooseDestination(
    const PgTable& t, uint32_t pg, uint32_t pos, const std::set<uint32_t>& exclude,
    const std::map<uint32_t, uint32_t>& load) const {
  // Domains holding another position of this PG, now or after a move in flight.
  std::set<std::string> used;
  for (uint32_t j = 0; j < t.pgs[pg].size(); ++j) {
    if (j == pos) continue;
    used.insert(DomainOf(t.pgs[pg][j]));
    ServerId p = PendingAt(t, pg, j);
    if (p.value() != 0) used.insert(DomainOf(p));
  }
  const ServerState* best = nullptr;
  double best_load = 0;
  uint64_t best_score = 0;
  for (const auto& [id, s] : servers_) {
    if (!Eligible(s) || exclude.count(id) || used.count(s.record.failure_domain)) continue;
    // A GC of this position may be on its way to the server: never move the position back
    // there until it is acked (it would delete what the move copies).
    if (PgGcQueued(s.record.id, PgPos{t.width, pg, pos})) continue;
    auto l = load.find(id);
    double normalized = (l == load.end() ? 0.0 : l->second) / WeightOf(s.record.id);
    uint64_t score = Score(t.width, pg, pos, id);
    if (!best || normalized < best_load || (normalized == best_load && score > best_score)) {
      best = &s;
      best_load = normalized;
      best_score = score;
    }
  }
  if (!best) return std::nullopt;
  return best->record.id;
}

// --- task bookkeeping ---------------------------------------------------------------------------
void MetadataService::AddMove(MoveBatch& mb, uint32_t width, uint32_t pg, uint32_t pos,
                              ServerId from, ServerId to, MoveKind kind, int64_t now) {
  PgTable& t = pg_tables_.at(width);
  if (t.pending[pg].empty()) t.pending[pg].assign(t.pgs[pg].size(), ServerId());
  t.pending[pg][pos] = to;
  MoveState st;
  st.task = MoveTask{next_move_id_++, width, pg, pos, from, to, kind, map_version_ + 1};
  st.created_ms = now;
  mb.batch.PutMoveTask(st.task);
  mb.batch.PutCounter("next_move", next_move_id_);
  mb.dirty_tables.insert(width);
  mb.moves_created++;
  mb.created_by_kind[static_cast<size_t>(kind)]++;
  move_at_[PgPos{width, pg, pos}] = st.task.id;
  Logger("meta")->info("schedule move task={} kind={} pg={}/{} position={} from={} to={}",
                       st.task.id, MoveKindName(kind), width, pg, pos, from.value(), to.value());
  moves_[st.task.id] = std::move(st);
}

void MetadataService::QueuePgGc(MoveBatch& mb, ServerId server, const PgPos& pos,
                                int64_t not_before_ms) {
  if (server.value() == 0 || PgGcQueued(server, pos)) return;
  PgGcTask g{next_pg_gc_id_++, server, std::get<0>(pos), std::get<1>(pos), std::get<2>(pos)};
  mb.batch.PutPgGcTask(g);
  mb.batch.PutCounter("next_pg_gc", next_pg_gc_id_);
  pg_gc_[g.id] = g;
  pg_gc_not_before_[g.id] = not_before_ms;
}

void MetadataService::DropMove(MoveBatch& mb, uint64_t id, bool gc_destination, int64_t now) {
  auto it = moves_.find(id);
  if (it == moves_.end()) return;
  const MoveTask task = it->second.task;
  PgTable& t = pg_tables_.at(task.pg_width);
  if (PendingAt(t, task.pg_index, task.position) == task.to) {
    t.pending[task.pg_index][task.position] = ServerId();
    auto& p = t.pending[task.pg_index];
    if (std::all_of(p.begin(), p.end(), [](ServerId s) { return s.value() == 0; })) p.clear();
  }
  mb.dirty_tables.insert(task.pg_width);
  mb.batch.DeleteMoveTask(id);
  mb.cancelled_by_kind[static_cast<size_t>(task.kind)]++;
  move_at_.erase(PgPos{task.pg_width, task.pg_index, task.position});
  moves_.erase(it);
  // What the destination copied (and what clients dual-wrote there) is garbage now; a GC sent
  // right away is safe because nobody reads a pending target.
  if (gc_destination) {
    QueuePgGc(mb, task.to, PgPos{task.pg_width, task.pg_index, task.position}, now);
  }
  Logger("meta")->info("cancel move task={} pg={}/{} position={} to={}", id, task.pg_width,
                       task.pg_index, task.position, task.to.value());
}

void MetadataService::CompleteMove(MoveBatch& mb, uint64_t id, int64_t now) {
  auto it = moves_.find(id);
  if (it == moves_.end()) return;
  const MoveTask task = it->second.task;
  PgTable& t = pg_tables_.at(task.pg_width);
  t.pgs[task.pg_index][task.position] = task.to;
  auto& p = t.pending[task.pg_index];
  if (!p.empty()) {
    p[task.position] = ServerId();
    if (std::all_of(p.begin(), p.end(), [](ServerId s) { return s.value() == 0; })) p.clear();
  }
  mb.dirty_tables.insert(task.pg_width);
  mb.batch.DeleteMoveTask(id);
  move_at_.erase(PgPos{task.pg_width, task.pg_index, task.position});
  moved_bytes_[static_cast<size_t>(task.kind)] += it->second.progress.bytes_done;
  moved_chunks_[static_cast<size_t>(task.kind)] += it->second.progress.chunks_done;
  moves_.erase(it);
  moves_completed_++;
  mb.completed_by_kind[static_cast<size_t>(task.kind)]++;
  // The source keeps its chunks for the catch-up window (docs/repair.md), then deletes them;
  // a source that is down or removed gets the GC whenever it heartbeats again.
  if (task.from != task.to) {
    QueuePgGc(mb, task.from, PgPos{task.pg_width, task.pg_index, task.position},
              now + options_.pg_gc_delay_ms);
  }
  Logger("meta")->info("finish move task={} kind={} pg={}/{} position={} from={} to={}", id,
                       MoveKindName(task.kind), task.pg_width, task.pg_index, task.position,
                       task.from.value(), task.to.value());
}

// --- planning ---------------------------------------------------------------------------------
void MetadataService::PlanRebalance(MoveBatch& mb, PgTable& t, int64_t now) {
  std::vector<const ServerState*> eligible;
  for (const auto& [id, s] : servers_) {
    if (Eligible(s)) eligible.push_back(&s);
  }
  if (eligible.empty()) return;
  std::set<uint32_t> members;
  for (const auto& pg : t.pgs) {
    for (ServerId s : pg) members.insert(s.value());
  }
  std::map<uint32_t, uint32_t> load = PlannedLoad(t.width);

  // 1. New servers: append PGs so positions per server stay what they were (existing files keep
  // their pg_count, new files span the grown table). Built least-loaded first. Only for servers
  // past the most the table was sized for: a server that comes back with no positions (repair
  // rebuilt them elsewhere while it was down) is not new, step 2 moves positions back to it.
  size_t grown = 0;
  const size_t sized_for = std::max<size_t>(t.sized_for, members.size());
  if (eligible.size() > sized_for && !members.empty()) {
    const size_t desired = std::min<size_t>(
        65536, (t.pgs.size() * eligible.size() + sized_for - 1) / sized_for);
    while (t.pgs.size() < desired) {
      const uint32_t pg = static_cast<uint32_t>(t.pgs.size());
      std::vector<const ServerState*> order = eligible;
      std::sort(order.begin(), order.end(),
                [&](const ServerState* a, const ServerState* b) REQUIRES(cluster_mu_) {
        double la = load[a->record.id.value()] / WeightOf(a->record.id);
        double lb = load[b->record.id.value()] / WeightOf(b->record.id);
        if (la != lb) return la < lb;
        return Score(t.width, pg, 0, a->record.id.value()) >
               Score(t.width, pg, 0, b->record.id.value());
      });
      std::set<std::string> used;
      std::vector<ServerId> targets;
      for (const ServerState* s : order) {
        if (targets.size() == t.width) break;
        if (!used.insert(s->record.failure_domain).second) continue;
        targets.push_back(s->record.id);
      }
      if (targets.size() < t.width) break;  // not enough domains among eligible servers
      for (ServerId s : targets) load[s.value()]++;
      t.pgs.push_back(std::move(targets));
      t.pending.emplace_back();
      grown++;
    }
    if (grown > 0) {
      t.sized_for = static_cast<uint32_t>(eligible.size());
      mb.dirty_tables.insert(t.width);
      Logger("meta")->info("grow pg_table width={} added_pgs={} pgs={}", t.width, grown,
                           t.pgs.size());
    }
  }

  // 2. Even out positions by capacity weight: move a position from the most loaded server to the
  // least loaded one while that lowers the total deviation; among the source's positions the
  // destination's rendezvous score picks which (deterministic, spread over PGs).
  double total = 0, weight = 0;
  for (const ServerState* s : eligible) {
    total += load[s->record.id.value()];
    weight += WeightOf(s->record.id);
  }
  auto deviation = [&](const ServerState* s) REQUIRES(cluster_mu_) {
    return load[s->record.id.value()] - total * WeightOf(s->record.id) / weight;
  };
  const size_t max_rounds = t.pgs.size() * t.width;
  for (size_t round = 0; round < max_rounds; ++round) {
    std::vector<const ServerState*> over = eligible, under = eligible;
    std::sort(over.begin(), over.end(),
              [&](auto* a, auto* b) REQUIRES(cluster_mu_) { return deviation(a) > deviation(b); });
    std::sort(under.begin(), under.end(),
              [&](auto* a, auto* b) REQUIRES(cluster_mu_) { return deviation(a) < deviation(b); });
    bool moved = false;
    for (const ServerState* src : over) {
      if (moved || deviation(src) <= 0) break;
      const ServerId s = src->record.id;
      for (const ServerState* dst : under) {
        if (deviation(src) - deviation(dst) <= 1.0 + 1e-9 || deviation(dst) >= 0) break;
        const ServerId d = dst->record.id;
        int64_t best_pg = -1;
        uint32_t best_pos = 0;
        uint64_t best_score = 0;
        for (uint32_t pg = 0; pg < t.pgs.size(); ++pg) {
          const auto& targets = t.pgs[pg];
          auto at = std::find(targets.begin(), targets.end(), s);
          if (at == targets.end()) continue;
          const uint32_t pos = static_cast<uint32_t>(at - targets.begin());
          if (move_at_.count(PgPos{t.width, pg, pos})) continue;
          if (PendingAt(t, pg, pos).value() != 0) continue;
          bool clash = false;
          for (uint32_t j = 0; j < targets.size() && !clash; ++j) {
            if (j == pos) continue;
            clash = DomainOf(targets[j]) == dst->record.failure_domain;
            ServerId p = PendingAt(t, pg, j);
            if (p.value() != 0 && DomainOf(p) == dst->record.failure_domain) clash = true;
          }
          if (clash || PgGcQueued(d, PgPos{t.width, pg, pos})) continue;
          uint64_t score = Score(t.width, pg, pos, d.value());
          if (best_pg < 0 || score > best_score) {
            best_pg = pg;
            best_pos = pos;
            best_score = score;
          }
        }
        if (best_pg < 0) continue;
        AddMove(mb, t.width, static_cast<uint32_t>(best_pg), best_pos, s, d, MoveKind::kRebalance,
                now);
        load[s.value()]--;
        load[d.value()]++;
        moved = true;
        break;
      }
    }
    if (!moved) break;
  }
}

Status MetadataService::Reconcile(int64_t now, MoveBatch& mb, bool rebalance) {
  waiting_.clear();
  // 1. A task whose destination died, was removed or is draining goes elsewhere (a rebalance
  // task is just dropped: the next rebalance plans again).
  std::vector<uint64_t> ids;
  for (const auto& [id, m] : moves_) ids.push_back(id);
  for (uint64_t id : ids) {
    const MoveTask task = moves_.at(id).task;
    auto dest = servers_.find(task.to.value());
    bool dead = dest == servers_.end() || Failed(dest->second, now) ||
                dest->second.record.state == MemberState::kDraining;
    if (!dead) continue;
    DropMove(mb, id, /*gc_destination=*/true, now);
    if (task.kind == MoveKind::kRebalance) {
      rebalance_wanted_ = true;
      continue;
    }
    const PgTable& t = pg_tables_.at(task.pg_width);
    auto to = ChooseDestination(t, task.pg_index, task.position,
                                {task.to.value(), task.from.value()}, PlannedLoad(std::nullopt));
    if (to) {
      AddMove(mb, task.pg_width, task.pg_index, task.position, task.from, *to, task.kind, now);
    }
  }

  // 2. Positions on failed servers are repaired; positions on draining servers are drained.
  std::map<uint32_t, uint32_t> load = PlannedLoad(std::nullopt);
  for (auto& [width, t] : pg_tables_) {
    for (uint32_t pg = 0; pg < t.pgs.size(); ++pg) {
      for (uint32_t pos = 0; pos < t.pgs[pg].size(); ++pos) {
        const PgPos key{width, pg, pos};
        if (move_at_.count(key)) continue;
        const ServerId owner = t.pgs[pg][pos];
        auto it = servers_.find(owner.value());
        MoveKind kind;
        if (it == servers_.end() || Failed(it->second, now)) {
          kind = MoveKind::kRepair;
        } else if (it->second.record.state == MemberState::kDraining && it->second.up) {
          kind = MoveKind::kDrain;
        } else {
          continue;
        }
        auto to = ChooseDestination(t, pg, pos, {owner.value()}, load);
        if (!to) {
          waiting_.insert(key);
          continue;
        }
        AddMove(mb, width, pg, pos, owner, *to, kind, now);
        load[to->value()]++;
        if (load[owner.value()] > 0) load[owner.value()]--;
      }
    }
  }

  // 3. Rebalance after membership grew or a server came back (from Tick only, so servers that
  // register together are planned together).
  if (rebalance && rebalance_wanted_ && !rebalance_paused_) {
    rebalance_wanted_ = false;
    for (auto& [width, t] : pg_tables_) PlanRebalance(mb, t, now);
  }

  // 4. Throttle: at most max_concurrent_moves_ running per destination; repair first, then
  // drain, then rebalance, oldest first.
  std::map<uint32_t, uint32_t> running;
  std::vector<MoveState*> queued;
  for (auto& [id, m] : moves_) {
    if (m.running) {
      running[m.task.to.value()]++;
    } else {
      queued.push_back(&m);
    }
  }
  std::sort(queued.begin(), queued.end(), [](const MoveState* a, const MoveState* b) {
    if (a->task.kind != b->task.kind) return a->task.kind < b->task.kind;
    return a->task.id < b->task.id;
  });
  for (MoveState* m : queued) {
    uint32_t& r = running[m->task.to.value()];
    if (r >= max_concurrent_moves_) continue;
    r++;
    m->running = true;
  }
  return FlushMoves(mb, /*sync=*/false);
}

Status MetadataService::FlushMoves(MoveBatch& mb, bool sync) {
  if (!mb.dirty_tables.empty()) {
    for (uint32_t w : mb.dirty_tables) mb.batch.PutPgTable(pg_tables_.at(w));
    BumpMapVersion();
    mb.batch.PutCounter("map_version", map_version_);
  }
  Status st = mb.batch.empty() ? OkStatus() : store_->Write(mb.batch, sync);
  if (st.ok()) RecordMoveEvents(mb);
  mb = MoveBatch{};
  if (!st.ok()) Logger("meta")->error("persist moves failed: {}", st.ToString());
  return st;
}

void MetadataService::RecordMoveEvents(const MoveBatch& mb) {
  // One event per kind and outcome of a batch: a repair of a lost server schedules its
  // positions in one Tick, and a line per task would push every other event out of the log.
  auto record = [&](const std::array<uint32_t, 3>& counts, const char* what)
                    REQUIRES(cluster_mu_) {
    for (size_t k = 0; k < counts.size(); ++k) {
      if (counts[k] == 0) continue;
      const auto kind = static_cast<MoveKind>(k);
      events_.Record(EventSeverity::kInfo,
                     fmt::format("{} {} task{} {} ({} running or queued now)", counts[k],
                                 MoveKindName(kind), counts[k] == 1 ? "" : "s", what,
                                 moves_.size()));
    }
  };
  record(mb.created_by_kind, "scheduled");
  record(mb.completed_by_kind, "finished");
  record(mb.cancelled_by_kind, "cancelled");
}

// --- admin --------------------------------------------------------------------------------------
uint32_t MetadataService::PositionsHeld(ServerId id) const {
  uint32_t held = 0;
  for (const auto& [w, t] : pg_tables_) {
    for (const auto& pg : t.pgs) held += std::count(pg.begin(), pg.end(), id);
  }
  return held;
}

Result<ServerAdminResult> MetadataService::DrainServer(ServerId id) {
  return SetDraining(id, /*draining=*/true);
}

Result<ServerAdminResult> MetadataService::UndrainServer(ServerId id) {
  return SetDraining(id, /*draining=*/false);
}

Result<ServerAdminResult> MetadataService::SetDraining(ServerId id, bool draining) {
  MutexLock lock(cluster_mu_);
  auto it = servers_.find(id.value());
  if (it == servers_.end()) return NotFound("no data server " + id.ToString());
  ServerState& s = it->second;
  if (s.record.state == MemberState::kRemoved) {
    return InvalidArgument("data server " + id.ToString() + " is removed");
  }
  const uint64_t before = next_move_id_;
  const MemberState want = draining ? MemberState::kDraining : MemberState::kIn;
  MoveBatch mb;
  uint32_t cancelled = 0;
  if (s.record.state != want) {
    s.record.state = want;
    mb.batch.PutServer(s.record);
    BumpMapVersion();
    mb.batch.PutCounter("map_version", map_version_);
    if (!draining) {
      // Its drain tasks stop; what their destinations copied is garbage (the positions stay).
      std::vector<uint64_t> drains;
      for (const auto& [task_id, m] : moves_) {
        if (m.task.kind == MoveKind::kDrain && m.task.from == id) drains.push_back(task_id);
      }
      const int64_t now = clocks_.mono_ms();
      for (uint64_t task_id : drains) DropMove(mb, task_id, /*gc_destination=*/true, now);
      cancelled = static_cast<uint32_t>(drains.size());
    }
    Logger("meta")->info("{} server={} drain_tasks_cancelled={}", draining ? "drain" : "undrain",
                         id.value(), cancelled);
    events_.Record(EventSeverity::kInfo,
                   draining ? fmt::format("data server {} draining", id.value())
                            : fmt::format("data server {} no longer draining ({} drain tasks "
                                          "cancelled)", id.value(), cancelled));
  }
  // Reconcile schedules the drain's moves (and writes the batch).
  AQ_RETURN_IF_ERROR(Reconcile(clocks_.mono_ms(), mb, /*rebalance=*/false));
  AQ_RETURN_IF_ERROR(store_->Sync());
  ServerAdminResult out;
  out.moves_scheduled = static_cast<uint32_t>(next_move_id_ - before);
  out.moves_cancelled = cancelled;
  out.positions_held = PositionsHeld(id);
  return out;
}

Result<ServerAdminResult> MetadataService::RemoveServer(ServerId id, bool force) {
  MutexLock lock(cluster_mu_);
  auto it = servers_.find(id.value());
  if (it == servers_.end()) return NotFound("no data server " + id.ToString());
  ServerState& s = it->second;
  const uint32_t held = PositionsHeld(id);
  ServerAdminResult out;
  out.positions_held = held;
  if (s.record.state == MemberState::kRemoved) return out;
  if (held > 0 && !force) {
    return Status(Code::kNotEmpty,
                  "data server " + id.ToString() + " still holds " + std::to_string(held) +
                      " PG positions: drain it first (aquifer server drain " + id.ToString() +
                      "), or remove it with --force to rebuild them from the other targets");
  }
  const uint64_t before = next_move_id_;
  MoveBatch mb;
  s.record.state = MemberState::kRemoved;
  s.up = false;  // clients never use it again; its heartbeats no longer bring it up
  mb.batch.PutServer(s.record);
  BumpMapVersion();
  mb.batch.PutCounter("map_version", map_version_);
  Logger("meta")->warn("remove server={} positions_held={} force={}", id.value(), held, force);
  events_.Record(EventSeverity::kWarning,
                 fmt::format("data server {} removed{} ({} PG positions held)", id.value(),
                             force ? " by force" : "", held));
  AQ_RETURN_IF_ERROR(Reconcile(clocks_.mono_ms(), mb, /*rebalance=*/false));
  out.moves_scheduled = static_cast<uint32_t>(next_move_id_ - before);
  AQ_RETURN_IF_ERROR(store_->Sync());
  return out;
}

Status MetadataService::SetRebalance(const RebalanceKnobs& k) {
  MutexLock lock(cluster_mu_);
  if (k.max_concurrent_moves > 0) max_concurrent_moves_ = k.max_concurrent_moves;
  if (k.move_rate_mib > 0) move_rate_mib_ = k.move_rate_mib;
  if (k.paused) rebalance_paused_ = *k.paused;
  Logger("meta")->info("set rebalance max_concurrent_moves={} move_rate_mib={} paused={}",
                       max_concurrent_moves_, move_rate_mib_, rebalance_paused_);
  MoveBatch mb;
  return Reconcile(clocks_.mono_ms(), mb, /*rebalance=*/true);
}

MovesReport MetadataService::GetMoves() {
  MovesReport r;
  {
    std::shared_lock ns(mu_);  // lock order: namespace before cluster
    r.lost_files = lost_index_.size();
    for (const auto& [ino, n] : lost_index_) r.lost_stripes += n;
  }
  MutexLock lock(cluster_mu_);
  const int64_t now = clocks_.mono_ms();
  SettleDegradedWrites();
  std::set<uint32_t> backfill_pending;
  for (const DegradedWrite& w : degraded_writes_) {
    r.degraded_stripes += w.stripes;
    backfill_pending.insert(w.servers.begin(), w.servers.end());
  }
  r.max_concurrent_moves = max_concurrent_moves_;
  r.move_rate_bytes_per_s = uint64_t{move_rate_mib_} * kMiB;
  r.rebalance_paused = rebalance_paused_;
  r.moves_completed = moves_completed_;
  r.completed_bytes = moved_bytes_;
  r.completed_chunks = moved_chunks_;
  for (const auto& [id, m] : moves_) {
    MoveInfo info;
    info.task = m.task;
    info.running = m.running;
    info.progress = m.progress;
    info.rate_bytes_per_s = m.rate_bytes_per_s;
    info.age_ms = now - m.created_ms;
    const uint64_t left = m.progress.bytes_total > m.progress.bytes_done
                              ? m.progress.bytes_total - m.progress.bytes_done
                              : 0;
    if (m.rate_bytes_per_s > 0) info.eta_ms = static_cast<int64_t>(left * 1000 / m.rate_bytes_per_s);
    if (m.running) {
      r.moves_running++;
      r.bytes_left += left;
    } else {
      r.moves_queued++;
    }
    r.moves.push_back(std::move(info));
  }
  // ETA of the whole set: bytes left over the summed rates of tasks that report one (queued
  // tasks are not known yet, so this is a lower bound while some are queued).
  uint64_t rate = 0;
  for (const MoveInfo& m : r.moves) rate += m.running ? m.rate_bytes_per_s : 0;
  if (rate > 0) r.eta_ms = static_cast<int64_t>(r.bytes_left * 1000 / rate);

  bool drain_waiting = false;
  for (const auto& [width, t] : pg_tables_) {
    for (uint32_t pg = 0; pg < t.pgs.size(); ++pg) {
      DegradedPg d{width, pg, {}, {}};
      bool waiting = false, scheduled_later = false;
      int64_t soonest = INT64_MAX;
      for (uint32_t pos = 0; pos < t.pgs[pg].size(); ++pos) {
        const PgPos key{width, pg, pos};
        auto it = servers_.find(t.pgs[pg][pos].value());
        bool missing = it == servers_.end() || !it->second.up ||
                       it->second.record.state == MemberState::kRemoved;
        if (!missing) {
          if (waiting_.count(key)) drain_waiting = true;
          continue;
        }
        d.positions.push_back(pos);
        if (move_at_.count(key)) continue;
        if (waiting_.count(key) || it == servers_.end() || Failed(it->second, now)) {
          waiting = true;
        } else {
          scheduled_later = true;
          soonest = std::min<int64_t>(
              soonest, options_.repair_delay_ms - (now - it->second.down_since_ms));
        }
      }
      if (d.positions.empty()) continue;
      if (waiting) {
        d.reason = "waiting for a server";
        r.waiting_for_server = true;
      } else if (scheduled_later) {
        d.reason = "repair in " + std::to_string(std::max<int64_t>(soonest, 0)) + " ms";
      } else {
        d.reason = "repairing";
      }
      r.degraded.push_back(std::move(d));
    }
  }
  if (drain_waiting) r.waiting_for_server = true;

  std::string msg;
  if (r.lost_stripes > 0) {
    msg = "DATA LOST: " + std::to_string(r.lost_stripes) + " stripes in " +
          std::to_string(r.lost_files) +
          " files cannot be read (EIO); `aquifer fsck` lists them";
  }
  if (r.degraded_stripes > 0) {
    if (!msg.empty()) msg += "; ";
    std::string ids;
    for (uint32_t id : backfill_pending) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    msg += "degraded: " + std::to_string(r.degraded_stripes) +
           " stripes written below k+m, backfill pending on server" +
           (backfill_pending.size() > 1 ? "s " : " ") + ids;
  }
  if (!r.degraded.empty()) {
    if (!msg.empty()) msg += "; ";
    msg += "degraded: " + std::to_string(r.degraded.size()) + " PGs with missing targets";
    if (r.waiting_for_server) msg += ", waiting for a server (no spare failure domain)";
  } else if (drain_waiting) {
    if (!msg.empty()) msg += "; ";
    msg += "drain waiting for a server (no spare failure domain)";
  }
  if (!r.moves.empty()) {
    if (!msg.empty()) msg += "; ";
    msg += "moves: " + std::to_string(r.moves_running) + " running, " +
           std::to_string(r.moves_queued) + " queued, " + Bytes(r.bytes_left) + " left";
    if (r.eta_ms >= 0) msg += ", eta " + std::to_string((r.eta_ms + 999) / 1000) + " s";
  }
  r.message = msg.empty() ? "healthy" : msg;
  return r;
}

}  // namespace aquifer::meta
