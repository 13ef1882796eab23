// Chunk rebuild and PG-position sync. See pg_sync.h and docs/repair.md.
#include "server/repair/pg_sync.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <utility>

#include "aquifer/erasure.h"
#include "common/failpoint.h"
#include "common/handoff.h"
#include "common/logging.h"

namespace aquifer::server {
namespace {

constexpr uint32_t kListPage = 1000;

Result<const ErasureCodec*> CodecFor(int k, int m) {
  static std::mutex mu;  // guards codecs
  static std::map<std::pair<int, int>, std::unique_ptr<ErasureCodec>> codecs;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = codecs[{k, m}];
  if (!slot) {
    auto codec = ErasureCodec::Create(k, m);
    if (!codec.ok()) return codec.status();
    slot = std::move(*codec);
  }
  return slot.get();
}

}  // namespace

uint64_t ExpectedChunkBytes(const ChunkPlacement& p, uint32_t position) {
  if (p.replicated) return position <= p.m ? p.stripe_bytes : 0;
  if (position >= p.k) return p.unit_bytes;
  const uint64_t start = uint64_t{position} * p.unit_bytes;
  if (p.stripe_bytes <= start) return 0;
  return std::min<uint64_t>(p.stripe_bytes - start, p.unit_bytes);
}

Result<std::string> RebuildChunk(PeerLink& peers, const ChunkId& id, uint64_t version,
                                 const ChunkPlacement& p, const std::vector<std::string>& sources,
                                 uint64_t* bytes_read) {
  if (!p.known() || sources.size() != p.pg_width || id.position >= p.pg_width) {
    return InvalidArgument("rebuild " + id.ToString() + ": no usable placement");
  }
  uint64_t fetched = 0;
  struct Count {
    uint64_t* out;
    uint64_t* n;
    ~Count() {
      if (out) *out += *n;
    }
  } count{bytes_read, &fetched};
  Status last = Unavailable("no source holds it");
  if (p.replicated) {
    if (id.position > p.m) return NotFound("replicated stripe: position past m holds nothing");
    for (uint32_t j = 0; j <= p.m; ++j) {
      if (j == id.position || sources[j].empty()) continue;
      Result<PeerChunk> c = peers.Read(sources[j], ChunkId{id.inode, id.stripe, j}, version);
      if (!c.ok()) {
        last = c.status();
        continue;
      }
      fetched += c->data.size();
      if (c->version != version || c->data.size() != p.stripe_bytes) continue;
      return std::move(c->data);
    }
    return Unavailable("rebuild " + id.ToString() + " v" + std::to_string(version) +
                       ": no copy could be read: " + last.ToString());
  }
  Result<const ErasureCodec*> codec = CodecFor(p.k, p.m);
  if (!codec.ok()) return codec.status();
  const uint32_t width = p.pg_width;
  std::vector<std::string> units(width);
  std::vector<char> present(width, 0);
  uint32_t have = 0;
  // Data positions past the stripe's bytes hold no chunk (writers store nothing there): they are
  // known zeros, present for the decode without a read.
  for (uint32_t j = 0; j < p.k; ++j) {
    if (j != id.position && ExpectedChunkBytes(p, j) == 0) {
      units[j].assign(p.unit_bytes, '\0');
      present[j] = 1;
      ++have;
    }
  }
  for (uint32_t j = 0; j < width && have < p.k; ++j) {
    if (j == id.position || present[j] || sources[j].empty()) continue;
    Result<PeerChunk> c = peers.Read(sources[j], ChunkId{id.inode, id.stripe, j}, version);
    if (!c.ok()) {
      last = c.status();
      continue;
    }
    fetched += c->data.size();
    if (c->version != version || c->data.size() != ExpectedChunkBytes(p, j)) continue;
    units[j] = std::move(c->data);
    units[j].resize(p.unit_bytes, '\0');  // data chunks are zero-padded to a unit
    present[j] = 1;
    ++have;
  }
  if (have < p.k) {
    return Unavailable("rebuild " + id.ToString() + " v" + std::to_string(version) + ": only " +
                       std::to_string(have) + " of k=" + std::to_string(p.k) +
                       " chunks could be read: " + last.ToString());
  }
  std::vector<std::span<std::byte>> spans(width);
  std::unique_ptr<bool[]> flags(new bool[width]);
  for (uint32_t j = 0; j < width; ++j) {
    if (!present[j]) units[j].assign(p.unit_bytes, '\0');
    spans[j] = std::as_writable_bytes(std::span(units[j].data(), units[j].size()));
    flags[j] = present[j] != 0;
  }
  AQ_RETURN_IF_ERROR((*codec)->Reconstruct(spans, std::span<const bool>(flags.get(), width)));
  std::string out = std::move(units[id.position]);
  out.resize(ExpectedChunkBytes(p, id.position));
  return out;
}

Status SyncPgPosition(const PgSyncTask& task, const ClusterView& map, ChunkStore& store,
                      PeerLink& peers, Throttle& throttle, const Sleeper& sleep,
                      PgSyncStats* stats) {
  auto log = Logger("data");
  const PgTargets* pg = map.Pg(task.pg_width, task.pg_index);
  if (pg == nullptr || pg->targets.size() != task.pg_width || task.position >= task.pg_width) {
    return NotFound("cluster map v" + std::to_string(map.version) + " has no PG " +
                    std::to_string(task.pg_width) + "/" + std::to_string(task.pg_index));
  }
  // What the peers hold, per (inode, stripe), per version.
  struct VersionInfo {
    ChunkPlacement placement;
    std::vector<char> present;  // per position: listed on that position's target
    bool on_copy_source = false;
    uint64_t copy_bytes = 0;
    std::string copy_address;  // the copy source that listed it (copy_from or a hand-off holder)
  };
  std::map<std::pair<uint64_t, uint64_t>, std::map<uint64_t, VersionInfo>> stripes;
  std::vector<std::string> address(task.pg_width);  // of the server listed for each position

  auto list = [&](const std::string& addr, uint32_t position, bool copy_source) -> Status {
    ChunkId after;
    for (bool eof = false; !eof;) {
      Result<std::vector<ChunkListEntry>> page =
          peers.ListPg(addr, task.pg_width, task.pg_index, after, kListPage, &eof);
      if (!page.ok()) return page.status().WithPrefix("list PG on " + addr);
      for (const ChunkListEntry& e : *page) {
        after = e.id;
        if (e.id.position != position || !e.placement.known() ||
            e.placement.pg_width != task.pg_width) {
          continue;
        }
        stats->listed++;
        VersionInfo& v = stripes[{e.id.inode.value(), e.id.stripe}][e.version];
        if (v.present.empty()) {
          v.present.assign(task.pg_width, 0);
          v.placement = e.placement;
        }
        if (copy_source) {
          if (!v.on_copy_source) {
            v.on_copy_source = true;
            v.copy_bytes = e.length_bytes;
            v.copy_address = addr;
          }
        } else {
          v.present[position] = 1;
        }
      }
      if (page->empty()) break;
    }
    return OkStatus();
  };
  for (uint32_t j = 0; j < task.pg_width; ++j) {
    if (j == task.position) continue;
    const PeerInfo* s = map.Server(pg->targets[j]);
    if (s == nullptr || !s->usable()) continue;  // down: its chunks are the ones we rebuild around
    address[j] = s->address;
    AQ_RETURN_IF_ERROR(list(s->address, j, false));
  }
  if (task.copy_from.value() != 0) {
    const PeerInfo* s = map.Server(task.copy_from);
    if (s != nullptr && s->usable()) {
      AQ_RETURN_IF_ERROR(list(s->address, task.position, true));
    }
  }
  if (!task.only_newer) {
    // Hand-off copies of this position (docs/design.md "Hand-off to a spare failure domain"):
    // the servers a writer tried when the target could not take a chunk, in the writer's order.
    // Copied from like copy_from, so a stripe whose other targets keep fewer than k chunks is
    // rebuilt from them. A holder that cannot be listed is skipped (it only adds sources).
    std::vector<HandoffServer> all;
    for (const auto& [id, peer] : map.servers) {
      all.push_back({id, peer.failure_domain,
                     peer.usable() && (peer.state.empty() || peer.state == "in")});
    }
    std::vector<uint32_t> targets, pending;
    for (ServerId id : pg->targets) targets.push_back(id.value());
    for (ServerId id : pg->pending) pending.push_back(id.value());
    for (uint32_t id : HandoffOrder(task.pg_width, task.pg_index, task.position, all, targets,
                                    pending, {}, kMaxHandoffCandidates)) {
      if (ServerId(id) == task.copy_from) continue;
      const PeerInfo* s = map.Server(ServerId(id));
      Status listed = list(s->address, task.position, true);
      if (!listed.ok()) {
        log->info("hand-off holder not listed, skipping it: {}", listed.ToString());
      }
    }
  }

  // Plan: every (stripe, version) this position needs, oldest version first.
  struct Work {
    ChunkId id;
    uint64_t version;
    const VersionInfo* info;
    uint64_t bytes;
  };
  std::vector<Work> work;
  for (const auto& [key, versions] : stripes) {
    const ChunkId id{InodeId(key.first), key.second, task.position};
    const std::vector<ChunkVersion> local = store.Versions(id);
    const uint64_t local_newest = local.empty() ? 0 : local.back().version;
    int kept = task.keep ? -1 : 1;  // -1: not asked yet
    for (const auto& [version, info] : versions) {
      const ChunkPlacement& p = info.placement;
      if (p.replicated && task.position > p.m) continue;  // holds nothing for this stripe
      // Scrub: stale chunks only. A chunk absent here may have been deleted by a GC task that
      // the others have not applied yet: never bring it back.
      if (task.only_newer && (local.empty() || version <= local_newest)) continue;
      // Backfill: every version newer than the newest held here (all when none is): a write
      // that went degraded while this server was down, also over an older version of the
      // chunk. Older ones were pruned here or deleted by a GC task: never brought back.
      if (task.only_missing && version <= local_newest) continue;
      // An empty data chunk (past the stripe's bytes) is not stored by writers either.
      if (!info.on_copy_source && !p.replicated && task.position < p.k &&
          ExpectedChunkBytes(p, task.position) == 0) {
        continue;
      }
      const uint64_t bytes = info.on_copy_source ? info.copy_bytes
                                                 : ExpectedChunkBytes(p, task.position);
      if (std::any_of(local.begin(), local.end(),
                      [&](const ChunkVersion& v) { return v.version == version; })) {
        stats->chunks_total++;
        stats->chunks_done++;
        stats->bytes_total += bytes;
        stats->bytes_done += bytes;
        continue;
      }
      uint32_t holders = 0;
      for (uint32_t j = 0; j < task.pg_width; ++j) {
        if (info.present[j] && (!p.replicated || j <= p.m)) {
          ++holders;
        } else if (!p.replicated && j < p.k && j != task.position &&
                   ExpectedChunkBytes(p, j) == 0) {
          ++holders;  // an empty data position: known zeros, counts toward k
        }
      }
      const bool rebuildable = info.on_copy_source || (p.replicated ? holders >= 1 : holders >= p.k);
      if (!rebuildable) {
        // Too few chunks of this version anywhere: a write torn by a crash (never committed),
        // or more than m positions lost. Nothing to rebuild from.
        stats->unrebuildable++;
        log->warn("cannot rebuild chunk={} version={}: {} of the PG's other targets hold it",
                  id.ToString(), version, holders);
        continue;
      }
      if (kept < 0) {
        kept = task.keep(id, p) ? 1 : 0;
        if (!kept) stats->skipped++;
      }
      if (!kept) break;
      stats->chunks_total++;
      stats->bytes_total += bytes;
      work.push_back({id, version, &info, bytes});
    }
  }

  for (const Work& w : work) {
    if (!sleep(std::chrono::nanoseconds(0))) return Unavailable("cancelled");
    uint64_t fetched = 0;
    std::string data;
    bool have = false;
    if (w.info->on_copy_source) {
      Result<PeerChunk> c = peers.Read(w.info->copy_address, w.id, w.version);
      if (c.ok()) {
        fetched += c->data.size();
        if (c->version == w.version) {
          data = std::move(c->data);
          have = true;
          stats->copied++;
        }
      } else {
        log->info("copy chunk={} version={} from={} failed, rebuilding: {}", w.id.ToString(),
                  w.version, w.info->copy_address, c.status().ToString());
      }
    }
    if (!have) {
      std::vector<std::string> sources(task.pg_width);
      for (uint32_t j = 0; j < task.pg_width; ++j) {
        if (w.info->present[j]) sources[j] = address[j];
      }
      Result<std::string> rebuilt =
          RebuildChunk(peers, w.id, w.version, w.info->placement, sources, &fetched);
      if (!rebuilt.ok()) return rebuilt.status();
      data = std::move(*rebuilt);
      stats->rebuilt++;
    }
    const auto wait = throttle.Charge(fetched);
    if (wait.count() > 0 && !sleep(wait)) return Unavailable("cancelled");
    Status s = store.Write(w.id, w.version, /*committed_version=*/0, data, /*sync=*/true,
                           w.info->placement, /*if_absent=*/true);
    if (s.code() == Code::kNotFound) {
      // A GC task applied here since the listing covers it (the file was deleted, or the stripe
      // truncated away): garbage, not a chunk this position needs.
      log->debug("skip chunk={} version={}: garbage collected here", w.id.ToString(), w.version);
      stats->collected++;
      stats->chunks_total--;  // not needed after all
      stats->bytes_total -= w.bytes;
      continue;
    }
    if (!s.ok() && s.code() != Code::kAlreadyExists) return s;
    AQ_RETURN_IF_ERROR(AQ_FAILPOINT_STATUS("data.repair.after_chunk_write"));
    stats->chunks_done++;
    stats->bytes_done += data.size();
  }
  return OkStatus();
}

}  // namespace aquifer::server
