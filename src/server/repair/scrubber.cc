// The scrubber. See scrubber.h.
#include "server/repair/scrubber.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "common/logging.h"
#include "server/repair/pg_sync.h"
#include "server/repair/throttle.h"

namespace aquifer::server {
namespace {
constexpr size_t kMaxQueued = 10000;
constexpr uint32_t kScanPage = 256;
thread_local bool in_scrubber = false;  // reads by the scrubber do not queue repairs
}  // namespace

Scrubber::Scrubber(ChunkStore* store, PeerLink* peers,
                   std::function<Result<ClusterView>()> get_map, std::function<ServerId()> self,
                   std::function<Result<InodeFacts>(InodeId)> get_inode, ScrubOptions options)
    : store_(store),
      peers_(peers),
      get_map_(std::move(get_map)),
      self_(std::move(self)),
      get_inode_(std::move(get_inode)),
      options_(options),
      backfill_retry_(options.backfill_retry) {}

Scrubber::~Scrubber() { Stop(); }

void Scrubber::Start() {
  thread_ = std::thread([this] {
    in_scrubber = true;
    Loop();
  });
}

void Scrubber::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Scrubber::QueueRepair(const ChunkId& id, uint64_t version) {
  if (in_scrubber) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= kMaxQueued || !queued_.insert({id, version}).second) return;
    queue_.emplace_back(id, version);
  }
  cv_.notify_all();
}

void Scrubber::RequestPass() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pass_requested_ = true;
  }
  cv_.notify_all();
}

void Scrubber::RequestBackfill(std::chrono::milliseconds delay) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto at = std::chrono::steady_clock::now() + delay;
    backfill_at_ = backfill_requested_ ? std::min(backfill_at_, at) : at;
    backfill_requested_ = true;
    backfill_attempts_ = 0;
    ++backfill_gen_;
  }
  cv_.notify_all();
}

ScrubCounters Scrubber::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

bool Scrubber::Sleep(std::chrono::nanoseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  if (d.count() > 0) cv_.wait_for(lock, d, [this] { return stopping_; });
  return !stopping_;
}

void Scrubber::Loop() {
  using Clock = std::chrono::steady_clock;
  const bool periodic = options_.interval.count() > 0;
  auto next_pass = Clock::now() + options_.interval;
  const bool sweeps = options_.handoff_sweep.count() > 0;
  auto next_sweep = Clock::now() + options_.handoff_sweep;
  while (true) {
    if (sweeps && Clock::now() >= next_sweep) {
      SweepHandoffs();
      next_sweep = Clock::now() + options_.handoff_sweep;
    }
    bool run_pass = false;
    bool run_backfill = false;  // a backfill request is due (a scrub pass includes a backfill)
    {
      std::unique_lock<std::mutex> lock(mu_);
      const uint64_t gen = backfill_gen_;  // a new backfill request re-computes the deadline
      auto ready = [&] {
        return stopping_ || pass_requested_ || !queue_.empty() || backfill_gen_ != gen ||
               (periodic && Clock::now() >= next_pass) ||
               (backfill_requested_ && Clock::now() >= backfill_at_) ||
               (sweeps && Clock::now() >= next_sweep);
      };
      if (periodic || backfill_requested_ || sweeps) {
        Clock::time_point until = Clock::time_point::max();
        if (periodic) until = next_pass;
        if (backfill_requested_) until = std::min(until, backfill_at_);
        if (sweeps) until = std::min(until, next_sweep);
        cv_.wait_until(lock, until, ready);
      } else {
        cv_.wait(lock, ready);
      }
      if (stopping_) return;
      if (sweeps && Clock::now() >= next_sweep && !pass_requested_ && queue_.empty() &&
          !(periodic && Clock::now() >= next_pass) &&
          !(backfill_requested_ && Clock::now() >= backfill_at_)) {
        continue;  // only the sweep is due: the top of the loop runs it
      }
      run_pass = pass_requested_ || (periodic && Clock::now() >= next_pass);
      run_backfill = backfill_requested_ && (run_pass || Clock::now() >= backfill_at_);
      pass_requested_ = false;
      if (run_backfill) backfill_requested_ = false;
    }
    DrainQueue();
    BackfillResult backfilled = BackfillResult::kDone;
    if (run_pass) {
      next_pass = Clock::now() + options_.interval;
      backfilled = Pass();
    } else if (run_backfill) {
      Throttle throttle(options_.rate_bytes_per_s);
      backfilled = Backfill(throttle);
    }
    if (run_pass || run_backfill) {
      std::lock_guard<std::mutex> lock(mu_);
      if (backfilled == BackfillResult::kDone) {
        ++counters_.backfills_complete;  // the metadata server clears degraded writes on it
        backfill_attempts_ = 0;
        backfill_retry_ = options_.backfill_retry;
      } else if (backfilled == BackfillResult::kIncomplete) {
        // A peer was unreachable or meta could not answer: chunks may still be missing here,
        // and nothing else would write them before the next scrub pass. Try again, backing off.
        if (!backfill_requested_) {
          backfill_requested_ = true;
          backfill_at_ = Clock::now() + backfill_retry_;
          Logger("data")->info("backfill incomplete; next attempt in {} ms",
                               backfill_retry_.count());
          backfill_retry_ = std::min(backfill_retry_ * 2, kMaxBackfillRetry);
        }
      } else if (run_backfill && !backfill_requested_) {
        // kNotUp: the map does not show this server up yet (meta marks it up on a heartbeat).
        // (Found by a scrub pass instead, the next scrub pass retries.)
        if (++backfill_attempts_ < 30) {
          backfill_requested_ = true;
          backfill_at_ = Clock::now() + std::chrono::seconds(2);
        } else {
          Logger("data")->warn("backfill: the cluster map never showed this server up; the next "
                               "scrub pass will backfill");
        }
      }
    }
  }
}

uint64_t Scrubber::SweepHandoffs() {
  const ServerId self = self_();
  if (self.value() == 0) return 0;
  Result<ClusterView> map = get_map_();
  if (!map.ok()) return 0;
  // (width, pg) -> versions here of positions another server holds.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<ChunkListEntry>> misplaced;
  ChunkId after;
  for (bool eof = false; !eof;) {
    std::vector<ChunkListEntry> page = store_->List(after, kScanPage, &eof);
    for (const ChunkListEntry& e : page) {
      after = e.id;
      if (!e.placement.known()) continue;
      const PgTargets* pg = map->Pg(e.placement.pg_width, e.placement.pg_index);
      const uint32_t pos = e.id.position;
      if (pg == nullptr || pos >= pg->targets.size() || pg->targets[pos] == self) continue;
      if (pos < pg->pending.size() && pg->pending[pos] == self) continue;
      misplaced[{e.placement.pg_width, e.placement.pg_index}].push_back(e);
    }
    if (page.empty()) break;
  }
  uint64_t deleted = 0;
  auto log = Logger("data");
  for (const auto& [key, entries] : misplaced) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return deleted;
    }
    const PgTargets* pg = map->Pg(key.first, key.second);
    // Newest version each target of this PG holds of each of our chunks' keys.
    std::map<uint32_t, std::map<ChunkId, uint64_t>> held;  // target id -> key -> newest version
    std::set<uint32_t> unlisted;
    for (const ChunkListEntry& e : entries) {
      const ServerId target = pg->targets[e.id.position];
      if (held.count(target.value()) || unlisted.count(target.value())) continue;
      const PeerInfo* peer = map->Server(target);
      if (peer == nullptr || !peer->usable()) {
        unlisted.insert(target.value());
        continue;
      }
      std::map<ChunkId, uint64_t>& newest = held[target.value()];
      ChunkId from;
      bool ok = true;
      for (bool eof = false; !eof;) {
        Result<std::vector<ChunkListEntry>> page =
            peers_->ListPg(peer->address, key.first, key.second, from, 1000, &eof);
        if (!page.ok()) {
          ok = false;
          break;
        }
        for (const ChunkListEntry& t : *page) {
          from = t.id;
          uint64_t& v = newest[t.id];
          v = std::max(v, t.version);
        }
        if (page->empty()) break;
      }
      if (!ok) {
        held.erase(target.value());
        unlisted.insert(target.value());
      }
    }
    for (const ChunkListEntry& e : entries) {
      auto t = held.find(pg->targets[e.id.position].value());
      if (t == held.end()) continue;
      auto v = t->second.find(e.id);
      if (v == t->second.end() || v->second < e.version) continue;  // not there yet: keep ours
      Result<uint64_t> gone = store_->DeleteVersion(e.id, e.version, /*sync=*/false);
      if (!gone.ok()) {
        log->warn("hand-off sweep: cannot delete chunk={} version={}: {}", e.id.ToString(),
                  e.version, gone.status().ToString());
        continue;
      }
      deleted += *gone;
    }
  }
  if (deleted > 0) {
    Status synced = store_->SyncDeletes();
    if (!synced.ok()) log->warn("hand-off sweep: sync: {}", synced.ToString());
    log->info("hand-off sweep: deleted {} chunk versions their targets hold", deleted);
  }
  return deleted;
}

void Scrubber::DrainQueue() {
  while (true) {
    std::pair<ChunkId, uint64_t> item;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ || queue_.empty()) return;
      item = queue_.front();
      queue_.pop_front();
      queued_.erase(item);
    }
    for (const ChunkVersion& v : store_->Versions(item.first)) {
      if (v.version == item.second) {
        if (!Check(item.first, v.version, v.placement, /*from_queue=*/true)) return;
      }
    }
  }
}

bool Scrubber::Check(const ChunkId& id, uint64_t version, const ChunkPlacement& placement,
                     bool from_queue) {
  std::string data;
  Result<ChunkReadInfo> r = store_->Read(id, version, 0, 0, &data);
  if (!r.ok() && (r.status().code() == Code::kNotFound || r.status().code() == Code::kStale)) {
    return true;  // deleted, or pruned below a newer version, meanwhile
  }
  if (r.ok() && r->version != version) return true;                    // pruned meanwhile
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!from_queue) ++counters_.chunks_scrubbed;
    if (r.ok() || r.status().code() != Code::kCorruption) return !stopping_;
    ++counters_.corrupt_found;
  }
  Status s = Repair(id, version, placement);
  auto log = Logger("data");
  if (s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.corrupt_repaired;
    log->info("repair corrupt chunk={} version={}", id.ToString(), version);
  } else {
    log->error("cannot repair corrupt chunk={} version={}: {}", id.ToString(), version,
               s.ToString());
  }
  std::lock_guard<std::mutex> lock(mu_);
  return !stopping_;
}

Status Scrubber::Repair(const ChunkId& id, uint64_t version, const ChunkPlacement& p) {
  if (!p.known()) return Unavailable("chunk was written without placement: no stripe to rebuild from");
  Result<ClusterView> map = get_map_();
  if (!map.ok()) return map.status().WithPrefix("get cluster map");
  const PgTargets* pg = map->Pg(p.pg_width, p.pg_index);
  if (pg == nullptr || pg->targets.size() != p.pg_width) return NotFound("PG not in the cluster map");
  const ServerId self = self_();
  std::vector<std::string> sources(p.pg_width);
  for (uint32_t j = 0; j < p.pg_width; ++j) {
    if (j == id.position || pg->targets[j] == self) continue;
    const PeerInfo* s = map->Server(pg->targets[j]);
    if (s != nullptr && s->usable()) sources[j] = s->address;
  }
  Result<std::string> data = RebuildChunk(*peers_, id, version, p, sources, nullptr);
  if (!data.ok()) return data.status();
  // Rewrite in place at its version (the corrupt file is replaced atomically), unless the
  // version went away meanwhile (pruned or deleted: then there is nothing to repair).
  const std::vector<ChunkVersion> now = store_->Versions(id);
  if (std::none_of(now.begin(), now.end(), [&](const ChunkVersion& v) { return v.version == version; })) {
    return OkStatus();
  }
  Status written = store_->Write(id, version, /*committed_version=*/0, *data, /*sync=*/true, p);
  if (written.code() == Code::kNotFound) return OkStatus();  // garbage collected meanwhile
  return written;
}

Scrubber::BackfillResult Scrubber::Pass() {
  auto log = Logger("data");
  const auto start = std::chrono::steady_clock::now();
  Throttle throttle(options_.rate_bytes_per_s);
  auto sleep = [this](std::chrono::nanoseconds d) { return Sleep(d); };
  std::set<std::pair<uint32_t, uint32_t>> pgs;  // PGs this server holds chunks of
  ChunkId after;
  const ScrubCounters before = counters();
  for (bool eof = false; !eof;) {
    std::vector<ChunkListEntry> page = store_->List(after, kScanPage, &eof);
    for (const ChunkListEntry& e : page) {
      after = e.id;
      if (e.placement.known()) pgs.insert({e.placement.pg_width, e.placement.pg_index});
      const auto wait = throttle.Charge(e.length_bytes);
      if (!Sleep(wait)) return BackfillResult::kDone;  // stopping
      if (!Check(e.id, e.version, e.placement, /*from_queue=*/false)) {
        return BackfillResult::kDone;  // stopping
      }
      DrainQueue();
    }
    if (page.empty()) break;
  }
  // Stale chunks: per PG this server holds a position of, versions newer than ours elsewhere.
  uint64_t stale = 0, stale_repaired = 0;
  const ServerId self = self_();
  Result<ClusterView> map = self.value() != 0 && !pgs.empty() ? get_map_() : Result<ClusterView>(Unavailable("skip"));
  if (map.ok()) {
    for (const auto& [width, index] : pgs) {
      const PgTargets* pg = map->Pg(width, index);
      if (pg == nullptr) continue;
      for (uint32_t pos = 0; pos < pg->targets.size(); ++pos) {
        if (pg->targets[pos] != self) continue;
        PgSyncStats st;
        PgSyncTask task;
        task.pg_width = width;
        task.pg_index = index;
        task.position = pos;
        task.only_newer = true;
        Status s = SyncPgPosition(task, *map, *store_, *peers_, throttle, sleep, &st);
        const uint64_t fixed = st.copied + st.rebuilt;
        stale += fixed;  // unrebuildable ones are torn, uncommitted writes: not defects here
        stale_repaired += fixed;
        if (!s.ok()) {
          if (!Sleep(std::chrono::nanoseconds(0))) return BackfillResult::kDone;  // stopping
          log->warn("scrub stale check pg={}/{} position={} failed: {}", width, index, pos,
                    s.ToString());
        }
      }
    }
  }
  // Chunks this server has no version of at all (written degraded while it was down).
  const BackfillResult backfilled = Backfill(throttle);
  ScrubCounters now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    counters_.corrupt_found += stale;
    counters_.corrupt_repaired += stale_repaired;
    ++counters_.passes;
    now = counters_;
  }
  log->info("finish scrub pass chunks={} corrupt_found={} repaired={} stale={} seconds={:.2f}",
            now.chunks_scrubbed - before.chunks_scrubbed,
            now.corrupt_found - before.corrupt_found,
            now.corrupt_repaired - before.corrupt_repaired, stale,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return backfilled;
}

Scrubber::BackfillResult Scrubber::Backfill(Throttle& throttle) {
  auto log = Logger("data");
  const auto start = std::chrono::steady_clock::now();
  const ServerId self = self_();
  if (self.value() == 0) return BackfillResult::kNotUp;
  Result<ClusterView> map = get_map_();
  if (!map.ok()) {
    log->info("backfill: cannot get the cluster map: {}", map.status().ToString());
    return BackfillResult::kNotUp;
  }
  const PeerInfo* me = map->Server(self);
  if (me == nullptr || !me->up) return BackfillResult::kNotUp;
  auto sleep = [this](std::chrono::nanoseconds d) { return Sleep(d); };
  // One GetAttr per inode per pass. Not found: deleted (its chunks await GC: never rebuild
  // them); meta unreachable: skipped this pass.
  std::map<uint64_t, std::optional<InodeFacts>> inodes;
  uint64_t inodes_unknown = 0;  // files meta could not tell us about this pass
  auto keep = [&](const ChunkId& id, const ChunkPlacement& p) {
    auto it = inodes.find(id.inode.value());
    if (it == inodes.end()) {
      Result<InodeFacts> f = get_inode_ ? get_inode_(id.inode)
                                        : Result<InodeFacts>(Unavailable("no meta link"));
      if (!f.ok() && f.status().code() != Code::kNotFound) {
        log->warn("backfill: cannot get ino={} from meta, skipping it this pass: {}",
                  id.inode.value(), f.status().ToString());
        ++inodes_unknown;
      }
      it = inodes.emplace(id.inode.value(),
                          f.ok() ? std::optional<InodeFacts>(*f) : std::nullopt).first;
    }
    if (!it->second) return false;
    const InodeFacts& facts = *it->second;
    const uint64_t k = facts.k != 0 ? facts.k : p.k;
    const uint64_t unit = facts.unit_bytes != 0 ? facts.unit_bytes : p.unit_bytes;
    const uint64_t span = k * unit;  // file bytes per stripe
    if (span == 0) return false;
    return id.stripe < (facts.size + span - 1) / span;  // else truncated away
  };
  uint64_t chunks = 0, bytes = 0, skipped = 0, collected = 0, positions = 0, failed = 0;
  for (const auto& [width, table] : map->tables) {
    for (uint32_t index = 0; index < table.size(); ++index) {
      const PgTargets& pg = table[index];
      for (uint32_t pos = 0; pos < pg.targets.size(); ++pos) {
        if (pg.targets[pos] != self) continue;
        if (!Sleep(std::chrono::nanoseconds(0))) return BackfillResult::kDone;  // stopping
        ++positions;
        PgSyncTask task;
        task.pg_width = width;
        task.pg_index = index;
        task.position = pos;
        task.only_missing = true;
        task.keep = keep;
        PgSyncStats st;
        Status s = SyncPgPosition(task, *map, *store_, *peers_, throttle, sleep, &st);
        chunks += st.chunks_done;
        bytes += st.bytes_done;
        skipped += st.skipped;
        collected += st.collected;
        if (!s.ok()) {
          if (!Sleep(std::chrono::nanoseconds(0))) return BackfillResult::kDone;  // stopping
          ++failed;
          log->warn("backfill pg={}/{} position={} failed: {}", width, index, pos, s.ToString());
        }
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    counters_.chunks_backfilled += chunks;
    counters_.bytes_backfilled += bytes;
    ++counters_.backfill_passes;
  }
  log->info("backfill done chunks={} bytes={} pg_positions={} failed={} skipped_stripes={} "
            "collected={} inodes_checked={} inodes_unknown={} seconds={:.2f}",
            chunks, bytes, positions, failed, skipped, collected, inodes.size(), inodes_unknown,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return failed > 0 || inodes_unknown > 0 ? BackfillResult::kIncomplete : BackfillResult::kDone;
}

}  // namespace aquifer::server
