#include "client/chunk_io.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <optional>
#include <thread>
#include <future>
#include <vector>

#include "client/stripe_cache.h"
#include "client/striping.h"
#include "common/client_credential.h"
#include "common/failpoint.h"
#include "common/handoff.h"
#include "common/logging.h"

namespace aquifer::client {

namespace {
using Clock = std::chrono::steady_clock;

// Probes of positions that are not needed read this many bytes at most: enough to learn the
// chunk's version cheaply, and to serve small degraded reads without a second round.
constexpr uint64_t kMaxProbeBytes = 64 * 1024;

// A stripe whose chunks are all newer than the reader's bound: written again, and the bound's
// version pruned, after the reader took its view (size, data_version) of the file.
Status Superseded(InodeId inode, uint64_t stripe, uint64_t bound) {
  return Status(Code::kStale, "stripe " + std::to_string(stripe) + " of inode " +
                                  inode.ToString() + " was rewritten above version " +
                                  std::to_string(bound) + " after the reader's view was taken");
}

// A stripe the stripe map says was written, of which no position holds a chunk above its floor:
// lost beyond the layout's redundancy. Logged (at most one line per 10 s, with a count).
Status Lost(InodeId inode, uint64_t stripe, const StripeRecord& record, std::string_view why) {
  static LogLimiter limiter;
  if (uint64_t held = 0; record.report_loss && limiter.Allow(&held)) {
    Logger("client")->error(
        "stripe lost ino={} stripe={}: {} (and {} more lost stripe reads since the last such "
        "line); run aquifer fsck",
        inode.value(), stripe, why, held);
  }
  return Status(Code::kDataLoss, "stripe " + std::to_string(stripe) + " of inode " +
                                     inode.ToString() + " is lost: " + std::string(why));
}

// A read that is all zeros (a hole): into *view when the caller takes one, else into `out`.
void Zeros(ChunkBytes* view, std::span<std::byte> out) {
  if (view != nullptr) {
    view->AppendZeros(out.size());
  } else {
    std::memset(out.data(), 0, out.size());
  }
}
}  // namespace

// One chunk read of a stripe and its outcome.
struct ChunkIo::Fetch {
  enum class State { kNotTried, kOk, kNotFound, kFailed };
  State state = State::kNotTried;
  Code failure = Code::kOk;  // kFailed: the code the server (or the connection) gave
  uint64_t version = 0;
  uint64_t stripe_bytes = 0;  // the stripe's length when `version` was written (0: not told)
  uint64_t range_begin = 0;  // requested range inside the chunk
  uint64_t range_end = 0;
  ChunkBytes bytes;          // returned bytes (clipped to the chunk's length)
  bool Covers(uint64_t b, uint64_t e) const {
    return state == State::kOk && range_begin <= b && range_end >= e;
  }
};

const char* ChunkIo::DegradedCauseName(DegradedCause cause) {
  switch (cause) {
    case DegradedCause::kUnavailable: return "unavailable";
    case DegradedCause::kChecksum: return "checksum";
    case DegradedCause::kMissing: return "missing_chunk";
    case DegradedCause::kStaleVersion: return "stale_version";
    case DegradedCause::kOther: return "other";
  }
  return "other";
}

void ChunkIo::CountDegraded(DegradedCause cause) {
  degraded_reads_.fetch_add(1, std::memory_order_relaxed);
  degraded_by_cause_[static_cast<size_t>(cause)].fetch_add(1, std::memory_order_relaxed);
}

ChunkIo::ChunkIo(MetaClient* meta, Options options)
    : meta_(meta), options_(options), pool_(std::max(1u, options.io_threads)) {}

ChunkIo::~ChunkIo() = default;

Status ChunkIo::RefreshMap() {
  std::lock_guard refresh(refresh_mu_);
  refresh_requested_.store(false);
  Result<ClusterMap> fetched = meta_->GetClusterMap(0);
  if (!fetched.ok()) return fetched.status();
  auto fresh = std::make_shared<const ClusterMap>(std::move(*fetched));
  std::lock_guard lock(mu_);
  map_ = std::move(fresh);
  return OkStatus();
}

bool ChunkIo::RefreshIfRequested() {
  if (!refresh_requested_.load()) return false;
  Status s = RefreshMap();
  if (!s.ok()) {
    Logger("client")->debug("refresh cluster_map failed status={}", s.ToString());
    refresh_requested_.store(true);
  }
  return true;
}

std::shared_ptr<const ClusterMap> ChunkIo::FreshMap() {
  const auto now = Clock::now();
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  int64_t last = last_sync_refresh_ms_.load();
  if (now_ms - last >= 1000 && last_sync_refresh_ms_.compare_exchange_strong(last, now_ms)) {
    Status s = RefreshMap();
    if (!s.ok()) Logger("client")->debug("refresh cluster_map failed status={}", s.ToString());
  }
  return map();
}

std::shared_ptr<const ClusterMap> ChunkIo::map() const {
  std::lock_guard lock(mu_);
  return map_;
}

Result<std::shared_ptr<DataClient>> ChunkIo::ClientFor(ServerId id, const ClusterMap& map) {
  const ServerEntry* entry = map.Find(id);
  if (entry == nullptr) {
    RequestRefresh();
    return Unavailable("data server " + id.ToString() + " is not in the cluster map");
  }
  if (!entry->up) return Unavailable("data server " + id.ToString() + " is down");
  std::lock_guard lock(mu_);
  auto& client = clients_[entry->address];
  if (!client) {
    // Only a client credential's chunk calls carry capabilities; a cluster-key holder's data
    // clients get no source, so their calls ask nothing per chunk.
    CapabilitySource capabilities;
    if (ProcessClientIdentity().has_value()) {
      capabilities = [meta = meta_](InodeId inode, bool write, bool fresh) {
        return meta->Capability(inode, write, fresh);
      };
    }
    client = NewDataClient(entry->address, options_.data_wire, std::move(capabilities));
  }
  return client;
}

Result<const ErasureCodec*> ChunkIo::CodecFor(uint32_t k, uint32_t m) {
  std::lock_guard lock(mu_);
  auto& codec = codecs_[{k, m}];
  if (!codec) {
    Result<std::unique_ptr<ErasureCodec>> made =
        ErasureCodec::Create(static_cast<int>(k), static_cast<int>(m));
    if (!made.ok()) return made.status();
    codec = std::move(*made);
  }
  return static_cast<const ErasureCodec*>(codec.get());
}

Status ChunkIo::WriteStripe(InodeId inode, const Layout& layout, uint64_t stripe,
                            std::span<const std::byte> bytes, uint64_t version,
                            uint64_t committed_version, bool sync) {
  const uint64_t len = bytes.size();
  const uint64_t unit = layout.unit_bytes;
  const bool replicated = IsReplicated(layout, len);

  // Chunks to write: (position, bytes).
  std::vector<std::pair<uint32_t, std::span<const std::byte>>> chunks;
  ByteVec padded;                   // the stripe's data zero-padded to k units (coded, short)
  ByteVec parity;                   // m units (uninitialised until encoded)
  uint32_t empty_landed = 0;        // empty data chunks: nothing to store, count as written
  if (replicated) {
    for (uint32_t p = 0; p <= layout.m; ++p) chunks.emplace_back(p, bytes);
  } else {
    Result<const ErasureCodec*> codec = CodecFor(layout.k, layout.m);
    if (!codec.ok()) return codec.status();
    std::span<const std::byte> data = bytes;
    if (len < layout.stripe_bytes()) {
      padded.resize(layout.stripe_bytes());
      std::memcpy(padded.data(), bytes.data(), len);
      std::memset(padded.data() + len, 0, padded.size() - len);
      data = padded;
    }
    parity.resize(uint64_t{layout.m} * unit);
    std::vector<std::span<const std::byte>> data_units;
    std::vector<std::span<std::byte>> parity_units;
    for (uint32_t i = 0; i < layout.k; ++i) data_units.push_back(data.subspan(i * unit, unit));
    for (uint32_t j = 0; j < layout.m; ++j) {
      parity_units.push_back(std::span<std::byte>(parity).subspan(j * unit, unit));
    }
    AQ_RETURN_IF_ERROR((*codec)->Encode(data_units, parity_units));
    for (uint32_t i = 0; i < layout.k; ++i) {
      const uint64_t clen = DataChunkLength(layout, len, i);
      if (clen == 0) {
        ++empty_landed;
        continue;
      }
      chunks.emplace_back(i, bytes.subspan(i * unit, clen));
    }
    for (uint32_t j = 0; j < layout.m; ++j) {
      chunks.emplace_back(layout.k + j, std::span<const std::byte>(parity_units[j]));
    }
  }

  ChunkPlacement placement;
  placement.pg_width = layout.k + layout.m;
  placement.k = layout.k;
  placement.m = layout.m;
  placement.unit_bytes = layout.unit_bytes;
  placement.stripe_bytes = len;
  placement.replicated = replicated;

  // A data server that is neither target nor pending target of a position answers kStale (its
  // map is newer than ours): refresh the map and write the stripe again (same version: the
  // chunks that landed are replaced by identical ones).
  constexpr int kMaxStaleRetries = 3;
  for (int attempt = 0;; ++attempt) {
    std::shared_ptr<const ClusterMap> map = this->map();
    if (!map) return Unavailable("no cluster map");
    Result<StripePlacement> where = map->PlacementOf(layout, stripe);
    if (!where.ok()) {
      AQ_RETURN_IF_ERROR(RefreshMap());
      map = this->map();
      where = map->PlacementOf(layout, stripe);
      if (!where.ok()) return where.status();
    }
    placement.pg_index = where->pg_index;
    bool stale = false;
    Status s = WriteChunks(inode, stripe, chunks, empty_landed, replicated ? 1 : layout.k,
                           *where, *map, placement, version, committed_version, sync, &stale);
    if (!stale || attempt >= kMaxStaleRetries) return s;
    Logger("client")->debug("write stripe stale map ino={} stripe={} map_version={}",
                            inode.value(), stripe, map->version);
    AQ_RETURN_IF_ERROR(RefreshMap());
  }
}

Status ChunkIo::WriteChunks(
    InodeId inode, uint64_t stripe,
    const std::vector<std::pair<uint32_t, std::span<const std::byte>>>& chunks,
    uint32_t empty_landed, uint32_t needed, const StripePlacement& where, const ClusterMap& map,
    const ChunkPlacement& placement, uint64_t version, uint64_t committed_version, bool sync,
    bool* stale) {
  const auto deadline = Clock::now() + options_.write_timeout;
  // One write per (position, destination): the current target, and the pending target of a
  // move in flight (docs/repair.md). A position counts as written when either landed.
  struct Dispatch {
    size_t chunk;  // index into chunks
    ServerId server;
    std::future<Status> result;
  };
  std::vector<bool> chunk_landed(chunks.size(), false);
  bool no_space = false;
  Status last_error;
  // A chunk write that fails to a server the map still shows up (a timeout under load, a
  // dropped connection) is retried before the stripe is accepted as degraded: a stripe that lands
  // on fewer than k + m targets while all are up would lose the promised tolerance of m failures.
  constexpr int kMaxRounds = 3;
  std::vector<std::pair<size_t, ServerId>> todo;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const uint32_t position = chunks[c].first;
    todo.emplace_back(c, where.targets[position]);
    const ServerId pending = where.pending[position];
    if (pending.value() != 0 && pending != where.targets[position]) todo.emplace_back(c, pending);
  }
  // Servers our map shows down may be back (the map is refreshed every 2 s in the background):
  // before a stripe is accepted with missing chunks, the map is fetched again (at most once a
  // second for all writers) and chunks for servers that are up now are written.
  std::shared_ptr<const ClusterMap> fresh;
  bool waited_for_down = false;
  for (int round = 0; round < kMaxRounds && !todo.empty(); ++round) {
    if (round > 0) {
      if (!waited_for_down) std::this_thread::sleep_for(std::chrono::milliseconds(100 << round));
      fresh = FreshMap();
    }
    const ClusterMap& current = fresh ? *fresh : map;
    std::vector<Dispatch> dispatches;
    dispatches.reserve(todo.size());
    // One write runs on this thread, which would otherwise only wait: a deferred task, run by
    // the first get() below, after every other write went to the pool. One hand-off to a pool
    // thread and back less per stripe (each costs a wake-up, ~0.1-0.3 ms on a busy VM).
    bool inline_taken = false;
    for (const auto& [c, server] : todo) {
      const auto& [position, chunk_bytes] = chunks[c];
      Result<std::shared_ptr<DataClient>> client = ClientFor(server, current);
      if (!client.ok()) {
        std::promise<Status> failed;
        failed.set_value(client.status());
        dispatches.push_back({c, server, failed.get_future()});
        continue;
      }
      ChunkId id{inode, stripe, position};
      std::span<const std::byte> payload = chunk_bytes;
      std::shared_ptr<DataClient> dc = *client;
      chunk_rpcs_.fetch_add(1);
      auto write = [dc, id, version, committed_version, payload, sync, placement, deadline] {
        return dc->WriteChunk(id, version, committed_version, payload, sync, placement, deadline);
      };
      dispatches.push_back({c, server, inline_taken
                                           ? pool_.Submit(std::move(write))
                                           : std::async(std::launch::deferred, std::move(write))});
      inline_taken = true;
    }
    todo.clear();
    waited_for_down = true;
    for (Dispatch& d : dispatches) {
      Status s = d.result.get();
      if (s.ok()) {
        chunk_landed[d.chunk] = true;
        if (round == 0 && &d == &dispatches[0]) AQ_FAILPOINT("client.stripe.after_some_chunks");
        continue;
      }
      if (s.code() == Code::kNoSpace) no_space = true;
      if (s.code() == Code::kUnavailable) RequestRefresh();
      if (s.code() == Code::kStale) *stale = true;
      last_error = s;
      Logger("client")->debug(
          "write chunk failed ino={} stripe={} position={} server={} round={} status={}",
          inode.value(), stripe, chunks[d.chunk].first, d.server.value(), round, s.ToString());
      const ServerEntry* entry = current.Find(d.server);
      const bool retryable = s.code() == Code::kUnavailable || s.code() == Code::kInternal;
      if (retryable && Clock::now() < deadline) {
        // Down in our map: retry only if a fresher map says it is up (checked next round).
        // Up in our map but failing: a timeout or reset under load; back off and retry.
        if (entry != nullptr && entry->up) waited_for_down = false;
        todo.emplace_back(d.chunk, d.server);
      }
    }
    // A retry is only worth it for a chunk that has not landed anywhere (dual writes count once).
    std::erase_if(todo, [&](const auto& t) { return chunk_landed[t.first]; });
  }
  // Targets (and pending targets) that missed their chunk: backfilled after the commit.
  std::set<ServerId> missed_targets;
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (chunk_landed[c]) continue;
    const uint32_t position = chunks[c].first;
    for (ServerId id : {where.targets[position], where.pending[position]}) {
      if (id.value() != 0) missed_targets.insert(id);
    }
  }
  // Hand-off (docs/design.md "Hand-off to a spare failure domain"): a chunk that landed on
  // neither its target nor its pending target goes to a server of a spare failure domain, so the
  // stripe keeps k + m chunks while its target is down or full. The chunk carries its own
  // placement; readers look there when the PG's targets cannot give k chunks, and the spare
  // server deletes its copy once the position's target holds that version.
  uint32_t handed_off = 0;
  {
    std::shared_ptr<const ClusterMap> latest = fresh ? fresh : this->map();
    const ClusterMap& current = latest ? *latest : map;
    std::vector<std::string> taken;  // domains of this stripe's hand-offs so far
    for (size_t c = 0; c < chunks.size(); ++c) {
      if (chunk_landed[c]) continue;
      const uint32_t position = chunks[c].first;
      const std::vector<ServerId> candidates = current.HandoffCandidates(
          placement.pg_width, where, position, kMaxHandoffCandidates, taken);
      for (ServerId server : candidates) {
        Result<std::shared_ptr<DataClient>> client = ClientFor(server, current);
        if (!client.ok()) continue;
        chunk_rpcs_.fetch_add(1);
        Status s = (*client)->WriteChunk(ChunkId{inode, stripe, position}, version,
                                         committed_version, chunks[c].second, sync, placement,
                                         Clock::now() + options_.write_timeout);
        if (!s.ok()) {
          Logger("client")->debug(
              "hand-off failed ino={} stripe={} position={} server={} status={}", inode.value(),
              stripe, position, server.value(), s.ToString());
          continue;
        }
        chunk_landed[c] = true;
        ++handed_off;
        taken.push_back(current.DomainOf(server));
        break;
      }
    }
  }
  uint32_t landed = empty_landed;
  for (bool l : chunk_landed) landed += l ? 1 : 0;
  if (landed < needed) {
    std::string what = "stripe " + std::to_string(stripe) + " of inode " + inode.ToString() +
                       ": " + std::to_string(landed) + " chunks written, need " +
                       std::to_string(needed) + "; last error: " + last_error.ToString();
    return no_space ? NoSpace(what) : Unavailable(what);
  }
  if (handed_off > 0 && landed == empty_landed + chunks.size()) {
    // Whole redundancy, but not where readers look first: the commit still has the targets
    // backfill (which makes the hand-off copies redundant), without counting the stripe as
    // degraded.
    std::vector<ServerId> missed_servers(missed_targets.begin(), missed_targets.end());
    AddMissedServers(inode, missed_servers, /*degraded_stripes=*/0);
    static LogLimiter limiter;  // at most one line per 10 s
    if (uint64_t held = 0; limiter.Allow(&held)) {
      Logger("client")->info(
          "stripe chunks handed off to spare servers ino={} stripe={} version={} chunks={} "
          "last_error={} (and {} more such stripes since the last such line)",
          inode.value(), stripe, version, handed_off, last_error.ToString(), held);
    }
  }
  if (landed < empty_landed + chunks.size()) {
    // Remembered for the commit, which has these servers backfill (docs/repair.md).
    std::vector<ServerId> missed_servers(missed_targets.begin(), missed_targets.end());
    AddMissedServers(inode, missed_servers, /*degraded_stripes=*/1);
    // Accepted with fewer chunks than positions: the stripe has less than its full redundancy
    // until the missing positions are rebuilt (the server's backfill when it was down; a move
    // of that PG position otherwise). Worth an operator's attention, so not a debug line.
    std::string missing;
    for (size_t c = 0; c < chunks.size(); ++c) {
      if (!chunk_landed[c]) missing += (missing.empty() ? "" : ",") + std::to_string(chunks[c].first);
    }
    // At most one line per 10 s (a server down for an hour degrades every stripe written).
    static LogLimiter limiter;
    if (uint64_t held = 0; limiter.Allow(&held)) {
      Logger("client")->warn(
          "stripe written degraded ino={} stripe={} version={} positions_missing={} landed={}/{} "
          "last_error={} (and {} more degraded stripes since the last such line)",
          inode.value(), stripe, version, missing, landed, empty_landed + chunks.size(),
          last_error.ToString(), held);
    }
  }
  return OkStatus();
}

std::vector<ServerId> ChunkIo::TakeMissedServers(InodeId inode, uint64_t* degraded_stripes) {
  std::lock_guard lock(missed_mu_);
  auto d = degraded_.find(inode.value());
  if (degraded_stripes != nullptr) *degraded_stripes = d != degraded_.end() ? d->second : 0;
  if (d != degraded_.end()) degraded_.erase(d);
  auto it = missed_.find(inode.value());
  if (it == missed_.end()) return {};
  std::vector<ServerId> out = std::move(it->second);
  missed_.erase(it);
  return out;
}

void ChunkIo::AddMissedServers(InodeId inode, std::span<const ServerId> servers,
                               uint64_t degraded_stripes) {
  if (servers.empty()) return;
  std::lock_guard lock(missed_mu_);
  constexpr size_t kMaxInodesTracked = 4096;
  if (missed_.size() >= kMaxInodesTracked && !missed_.contains(inode.value())) {
    missed_.clear();
    degraded_.clear();
  }
  degraded_[inode.value()] += degraded_stripes;
  std::vector<ServerId>& kept = missed_[inode.value()];
  for (ServerId id : servers) {
    if (std::find(kept.begin(), kept.end(), id) == kept.end() &&
        kept.size() < static_cast<size_t>(kMaxBackfillServers)) {
      kept.push_back(id);
    }
  }
}

Status ChunkIo::ReadStripe(InodeId inode, const Layout& layout, uint64_t stripe,
                           uint64_t stripe_len, uint64_t max_version, uint64_t begin,
                           std::span<std::byte> out, bool bound_is_committed,
                           ChunkBytes* view, const StripeRecord& record) {
  // A stripe that no server can give now (its copies or chunks are on servers down, stopped or
  // slow) is read again, with a fresh map and backing off, for as long as a chunk write waits:
  // a holder that is merely unreachable may be back, and slowness beats an invented EIO.
  const bool view_empty = view != nullptr && view->size() == 0;
  const auto patience = Clock::now() + options_.write_timeout;
  auto backoff = std::chrono::milliseconds(100);
  for (int attempt = 1;; ++attempt) {
    Status s = ReadStripeOnce(inode, layout, stripe, stripe_len, max_version, begin, out,
                              bound_is_committed, view, record);
    if (s.code() != Code::kUnavailable || Clock::now() + backoff >= patience) return s;
    Logger("client")->debug("read stripe again ino={} stripe={} attempt={} status={}",
                            inode.value(), stripe, attempt, s.ToString());
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    (void)FreshMap();
    if (view_empty) *view = ChunkBytes();
  }
}

Status ChunkIo::ReadStripeOnce(InodeId inode, const Layout& layout, uint64_t stripe,
                               uint64_t stripe_len, uint64_t max_version, uint64_t begin,
                               std::span<std::byte> out, bool bound_is_committed,
                               ChunkBytes* view, const StripeRecord& record) {
  // Every byte of `out` is written on success (unless *view holds them): read bytes, or zeros
  // for holes and the part past stripe_len (the buffers are not zeroed beforehand).
  if (view != nullptr && (view->size() != 0 || begin + out.size() > stripe_len)) view = nullptr;
  if (stripe_len == 0 || begin >= stripe_len || out.empty()) {
    std::memset(out.data(), 0, out.size());
    return OkStatus();
  }
  const uint64_t end = std::min<uint64_t>(begin + out.size(), stripe_len);
  std::memset(out.data() + (end - begin), 0, out.size() - (end - begin));
  std::span<std::byte> wanted = out.subspan(0, end - begin);
  if (record.known && !record.written) {
    Zeros(view, wanted);  // a recorded hole: never written since its last truncate
    return OkStatus();
  }
  std::shared_ptr<const ClusterMap> map = this->map();
  if (!map) return Unavailable("no cluster map");
  Result<std::vector<ServerId>> targets = map->TargetsOf(layout, stripe);
  if (!targets.ok()) {
    AQ_RETURN_IF_ERROR(RefreshMap());
    map = this->map();
    targets = map->TargetsOf(layout, stripe);
    if (!targets.ok()) return targets.status();
  }
  const bool replicated = IsReplicated(layout, stripe_len);
  // A writer that crashed mid-stripe leaves fewer than k chunks of its version, which a later
  // commit (of another stripe) may make <= data_version. Those chunks can never decode; the
  // servers still keep the version before them (the newest <= committed): read that one.
  // Chunks at a crashed writer's abandoned version hide the older whole version on the same
  // servers (a server answers its newest <= the bound): read again below the abandoned range.
  // A replicated stripe has no other reason to fall back (any one copy is whole).
  constexpr int kMaxVersionFallbacks = 4;
  for (int fallback = 0;; ++fallback) {
    uint64_t unusable_version = 0;
    uint64_t abandoned_seen = 0;
    // After a fallback the bound is below the committed version: no longer a hint.
    auto attempt = [&](const Handoffs* handoffs) {
      return replicated
                 ? ReadReplicated(inode, layout, stripe, *targets, *map, stripe_len, max_version,
                                  begin, wanted, bound_is_committed && fallback == 0, view,
                                  record, &abandoned_seen, handoffs)
                 : ReadCoded(inode, layout, stripe, *targets, *map, stripe_len, max_version,
                             begin, wanted, bound_is_committed && fallback == 0,
                             &unusable_version, view, record, &abandoned_seen, handoffs);
    };
    Status s = attempt(nullptr);
    if (s.code() == Code::kUnavailable || s.code() == Code::kDataLoss) {
      // The targets cannot give the stripe: ask the servers a writer hands chunks off to when a
      // target is down or full (docs/design.md "Hand-off to a spare failure domain").
      Handoffs handoffs = HandoffsOf(layout, stripe, *map);
      if (!handoffs.empty()) {
        unusable_version = 0;
        abandoned_seen = 0;
        if (view != nullptr) *view = ChunkBytes();
        // The targets are asked again too, so this answer knows at least what the first did.
        s = attempt(&handoffs);
      }
    }
    if (!s.ok() && abandoned_seen > 0) unusable_version = std::max(unusable_version, abandoned_seen);
    if (s.code() == Code::kDataLoss && abandoned_seen == 0 && record.report_loss) {
      NoteLost(inode, stripe);
    }
    if (s.ok() || unusable_version <= 1 || fallback >= kMaxVersionFallbacks) return s;
    // Versions at or below the floor are a truncate's leftovers: nothing to fall back to.
    const uint64_t below = record.SkipAbandoned(unusable_version - 1);
    if (below == 0 || (record.known && below <= record.floor_version)) return s;
    Logger("client")->debug(
        "read stripe skips partial version ino={} stripe={} version={} fallback={}",
        inode.value(), stripe, unusable_version, fallback + 1);
    version_fallbacks_.fetch_add(1);
    max_version = below;
  }
}

ChunkIo::Handoffs ChunkIo::HandoffsOf(const Layout& layout, uint64_t stripe,
                                      const ClusterMap& map) {
  Result<StripePlacement> where = map.PlacementOf(layout, stripe);
  if (!where.ok()) return {};
  const uint32_t width = layout.k + layout.m;
  Handoffs out(width);
  bool any = false;
  for (uint32_t p = 0; p < width; ++p) {
    // Every server that may hold one, not only the first kMaxHandoffCandidates up now: the
    // writer tried the first ones up in its map at the time, which may have been others.
    out[p] = map.HandoffCandidates(width, *where, p, map.servers.size(), {},
                                   /*whatever_state=*/true);
    any |= !out[p].empty();
  }
  if (!any) out.clear();
  return out;
}

Status ChunkIo::ReadReplicated(InodeId inode, const Layout& layout, uint64_t stripe,
                               const std::vector<ServerId>& targets, const ClusterMap& map,
                               uint64_t stripe_len, uint64_t max_version, uint64_t begin,
                               std::span<std::byte> out, bool bound_is_committed,
                               ChunkBytes* view, const StripeRecord& record,
                               uint64_t* abandoned_seen, const Handoffs* handoffs) {
  // The highest version any copy returns is the current one (a copy whose server was down during
  // the last write holds an older version). A copy whose version equals the reader's bound (the
  // usual case: the file's data_version) is current at once, since servers return nothing above
  // the bound. So with a bound, one copy is asked first (chosen by inode and stripe, spreading
  // readers over the copies); the others only when it fails, is stale, or is slower than
  // kReplicaHedge. Without a bound every copy is asked at once.
  const auto deadline = Clock::now() + options_.chunk_timeout;
  const uint32_t copies = layout.m + 1;
  struct Gather {
    std::mutex mu;  // guards results, done
    std::condition_variable cv;
    std::vector<std::optional<Result<ChunkData>>> results;
    uint32_t done = 0;
  };
  auto gather = std::make_shared<Gather>();
  gather->results.resize(copies);
  auto submit = [&](uint32_t p) {
    Result<std::shared_ptr<DataClient>> client = ClientFor(targets[p], map);
    if (!client.ok()) {
      std::lock_guard lock(gather->mu);
      gather->results[p].emplace(client.status());
      ++gather->done;
      return;
    }
    std::shared_ptr<DataClient> dc = *client;
    ChunkId id{inode, stripe, p};
    const uint64_t length = out.size();
    chunk_rpcs_.fetch_add(1);
    // The task owns what it touches (gather is shared): the read may return before it ends.
    (void)pool_.Submit([gather, p, dc, id, max_version, begin, length, deadline] {
      Result<ChunkData> r = dc->ReadChunk(id, max_version, begin, length, deadline);
      {
        std::lock_guard lock(gather->mu);
        gather->results[p].emplace(std::move(r));
        ++gather->done;
      }
      gather->cv.notify_all();
      return 0;
    });
  };
  auto fill = [&](const ChunkData& chunk) {
    const uint64_t n = std::min<uint64_t>(out.size(), chunk.bytes.size());
    if (view != nullptr) {
      view->Append(chunk.bytes, 0, n);
      view->AppendZeros(out.size() - n);
      return;
    }
    chunk.bytes.CopyTo(0, out.subspan(0, n));
    std::memset(out.data() + n, 0, out.size() - n);
  };
  if (bound_is_committed && max_version != 0 && copies > 1) {
    // The first copy is asked on the caller's thread, with the hedge as its deadline: a small
    // file's read costs no hand-off to a pool thread and back. When it fails or is late, every
    // copy is asked from the pool, the first again (a late answer is not lost, only asked twice).
    const uint32_t first = static_cast<uint32_t>((inode.value() + stripe) % copies);
    Result<std::shared_ptr<DataClient>> client = ClientFor(targets[first], map);
    if (client.ok()) {
      chunk_rpcs_.fetch_add(1);
      Result<ChunkData> r = (*client)->ReadChunk(
          ChunkId{inode, stripe, first}, max_version, begin, out.size(),
          std::min(deadline, Clock::now() + kReplicaHedge));
      if (r.ok() && r->version == max_version) {
        fill(*r);
        return OkStatus();
      }
      if (r.ok() || r.status().code() != Code::kUnavailable) {
        std::lock_guard lock(gather->mu);
        gather->results[first].emplace(std::move(r));  // an answer: not asked again
        ++gather->done;
      }
    }
    for (uint32_t p = 0; p < copies; ++p) {
      if (p != first || !gather->results[first]) submit(p);
    }
  } else {
    for (uint32_t p = 0; p < copies; ++p) submit(p);
  }
  std::optional<ChunkData> best;
  uint32_t not_found = 0;
  bool superseded = false;  // a copy holds only versions above the bound
  Status last_error;
  {
    std::vector<bool> seen(copies, false);
    std::unique_lock lock(gather->mu);
    for (;;) {
      for (uint32_t p = 0; p < copies; ++p) {
        if (seen[p] || !gather->results[p]) continue;
        seen[p] = true;
        Result<ChunkData>& r = *gather->results[p];
        if (r.ok() && !record.Usable(r->version)) {
          ++not_found;  // from before a truncate, or a crashed writer's: not this stripe's data
          if (!(record.known && r->version <= record.floor_version)) {
            *abandoned_seen = std::max(*abandoned_seen, r->version);
          }
        } else if (r.ok()) {
          if (max_version != 0 && r->version == max_version) {
            ChunkData current = std::move(*r);
            lock.unlock();
            fill(current);
            return OkStatus();
          }
          if (!best || r->version > best->version) best = std::move(*r);
        } else if (r.status().code() == Code::kNotFound) {
          ++not_found;
        } else if (r.status().code() == Code::kStale) {
          superseded = true;
        } else {
          if (r.status().code() == Code::kUnavailable) RequestRefresh();
          last_error = r.status();
        }
      }
      if (gather->done == copies) break;
      gather->cv.wait(lock);
    }
  }
  // A hand-off candidate that could not answer (down, stopped, slow) may hold the only copy:
  // then "not found" from every target proves nothing.
  bool candidate_unreachable = false;
  if (!best && handoffs != nullptr) {
    // No copy on the targets: a hand-off copy of any position will do. Asked one at a time (a
    // rare path: a stripe whose targets cannot answer).
    for (uint32_t p = 0; p < copies && p < handoffs->size() && !best; ++p) {
      for (ServerId server : (*handoffs)[p]) {
        Result<std::shared_ptr<DataClient>> client = ClientFor(server, map);
        if (!client.ok()) {
          candidate_unreachable = true;
          last_error = client.status();
          continue;
        }
        chunk_rpcs_.fetch_add(1);
        Result<ChunkData> r = (*client)->ReadChunk(ChunkId{inode, stripe, p}, max_version, begin,
                                                   out.size(), Clock::now() + options_.chunk_timeout);
        if (r.ok() && record.Usable(r->version)) {
          best = std::move(*r);
          break;
        }
        if (r.ok()) {
          if (!(record.known && r->version <= record.floor_version)) {
            *abandoned_seen = std::max(*abandoned_seen, r->version);
          }
        } else if (r.status().code() == Code::kStale) {
          superseded = true;
        } else if (r.status().code() != Code::kNotFound) {
          candidate_unreachable = true;
          last_error = r.status();
        }
      }
    }
  }
  if (best) {
    fill(*best);
    return OkStatus();
  }
  // A hole only when every copy says so: a stripe written while some of its targets were down
  // has its copies on the others, and a target that came back empty must not turn it into zeros.
  // Nor lost: that needs every target and every hand-off candidate to have said "not found".
  if (not_found == copies && !candidate_unreachable) {
    if (*abandoned_seen > 0) {
      return Unavailable("every copy of stripe " + std::to_string(stripe) +
                         " answered an abandoned version");  // ReadStripe reads below it
    }
    if (record.known && record.written) {
      return Lost(inode, stripe, record, "no copy on any of its " + std::to_string(copies) + " targets");
    }
    Zeros(view, out);
    return OkStatus();
  }
  if (superseded) return Superseded(inode, stripe, max_version);
  return Unavailable("no copy of stripe " + std::to_string(stripe) + " of inode " +
                     inode.ToString() + " readable: " + last_error.ToString());
}

Status ChunkIo::ReadCoded(InodeId inode, const Layout& layout, uint64_t stripe,
                          const std::vector<ServerId>& targets, const ClusterMap& map,
                          uint64_t stripe_len, uint64_t max_version, uint64_t begin,
                          std::span<std::byte> out, bool bound_is_committed,
                          uint64_t* unusable_version, ChunkBytes* view,
                          const StripeRecord& record, uint64_t* abandoned_seen,
                          const Handoffs* handoffs) {
  const uint32_t k = layout.k;
  const uint32_t width = layout.k + layout.m;
  const uint64_t unit = layout.unit_bytes;
  const uint64_t end = begin + out.size();

  // Per position: its stored length (0 for empty data chunks: known zeros, never read).
  std::vector<uint64_t> base_len(width);
  for (uint32_t p = 0; p < width; ++p) {
    base_len[p] = p < k ? DataChunkLength(layout, stripe_len, p) : unit;
  }
  std::vector<uint64_t> chunk_len = base_len;
  // Needed data positions and their ranges inside the unit; [ua, ub) is their union.
  struct Need {
    uint32_t position;
    uint64_t b, e;  // inside the unit
  };
  std::vector<Need> needs;
  uint64_t ua = unit, ub = 0;
  for (uint32_t p = static_cast<uint32_t>(begin / unit); p < k && p * unit < end; ++p) {
    const uint64_t b = std::max(begin, p * unit) - p * unit;
    const uint64_t e = std::min(end, (p + 1) * unit) - p * unit;
    needs.push_back({p, b, e});
    ua = std::min(ua, b);
    ub = std::max(ub, e);
  }

  std::vector<Fetch> fetches(width);
  const uint32_t confident = layout.m + 1;
  bool superseded = false;  // a position holds only versions above the bound
  auto fetch_all = [&](const std::vector<std::tuple<uint32_t, uint64_t, uint64_t>>& plan) {
    const auto deadline = Clock::now() + options_.chunk_timeout;
    std::vector<std::pair<uint32_t, std::future<Result<ChunkData>>>> futures;
    // As with writes, the first chunk read runs on the caller (a deferred task, run by the first
    // get() below, after the others went to the pool): a read needing one chunk, such as a small
    // random read, costs no hand-off to a pool thread and back.
    bool inline_taken = false;
    for (const auto& [p, b, e] : plan) {
      fetches[p].range_begin = b;
      fetches[p].range_end = e;
      Result<std::shared_ptr<DataClient>> client = ClientFor(targets[p], map);
      if (!client.ok()) {
        fetches[p].state = Fetch::State::kFailed;
        fetches[p].failure = client.status().code();
        continue;
      }
      std::shared_ptr<DataClient> dc = *client;
      ChunkId id{inode, stripe, p};
      const uint64_t offset = b, length = e - b;
      chunk_rpcs_.fetch_add(1);
      auto read = [dc, id, max_version, offset, length, deadline] {
        return dc->ReadChunk(id, max_version, offset, length, deadline);
      };
      futures.emplace_back(p, inline_taken ? pool_.Submit(std::move(read))
                                           : std::async(std::launch::deferred, std::move(read)));
      inline_taken = true;
    }
    auto absorb = [&](uint32_t p, Result<ChunkData> r) {
      Fetch& fetch = fetches[p];
      if (r.ok() && !record.Usable(r->version)) {
        // From before a truncate, or a crashed writer's: not this stripe's data.
        fetch.state = Fetch::State::kNotFound;
        if (!(record.known && r->version <= record.floor_version)) {
          *abandoned_seen = std::max(*abandoned_seen, r->version);
        }
      } else if (r.ok()) {
        fetch.state = Fetch::State::kOk;
        fetch.version = r->version;
        fetch.stripe_bytes = r->stripe_bytes;
        fetch.bytes = std::move(r->bytes);
      } else if (r.status().code() == Code::kNotFound) {
        fetch.state = Fetch::State::kNotFound;
      } else if (r.status().code() == Code::kStale) {
        fetch.state = Fetch::State::kFailed;
        fetch.failure = Code::kStale;
        superseded = true;
      } else {
        fetch.failure = r.status().code();
        if (r.status().code() == Code::kUnavailable) RequestRefresh();
        Logger("client")->debug("read chunk failed ino={} stripe={} position={} status={}",
                                inode.value(), stripe, p, r.status().ToString());
        fetch.state = Fetch::State::kFailed;
      }
    };
    for (auto& [p, f] : futures) absorb(p, f.get());
    if (handoffs == nullptr) return;
    // A position its target could not give: its hand-off copy, if a writer made one. Asked one
    // at a time (a rare path: a stripe whose targets cannot give k chunks).
    for (const auto& [p, b, e] : plan) {
      if (p >= handoffs->size()) continue;
      bool unreachable = false;  // a candidate that could not answer
      for (ServerId server : (*handoffs)[p]) {
        if (fetches[p].state == Fetch::State::kOk) break;
        Result<std::shared_ptr<DataClient>> client = ClientFor(server, map);
        if (!client.ok()) {
          unreachable = true;
          continue;
        }
        chunk_rpcs_.fetch_add(1);
        Result<ChunkData> r = (*client)->ReadChunk(ChunkId{inode, stripe, p}, max_version, b,
                                                   e - b, Clock::now() + options_.chunk_timeout);
        if (r.ok() || r.status().code() == Code::kStale) {
          absorb(p, std::move(r));
        } else if (r.status().code() != Code::kNotFound) {
          unreachable = true;
        }
      }
      // The target's "not found" proves nothing while a candidate may hold the chunk: the
      // position counts as unreachable, never towards a hole or a loss.
      if (unreachable && fetches[p].state == Fetch::State::kNotFound) {
        fetches[p].state = Fetch::State::kFailed;
        fetches[p].failure = Code::kUnavailable;
      }
    }
  };

  // Probes of untried positions (the whole range if small, else one byte: enough to learn a
  // version) until m + 1 positions are tried in all.
  auto add_probes = [&](std::vector<std::tuple<uint32_t, uint64_t, uint64_t>>& plan) {
    uint32_t tried = 0;
    for (uint32_t p = 0; p < width; ++p) tried += fetches[p].state != Fetch::State::kNotTried;
    const bool small = ub - ua <= kMaxProbeBytes;
    for (uint32_t p = width; p-- > 0 && tried + plan.size() < confident;) {
      if (chunk_len[p] == 0 || fetches[p].state != Fetch::State::kNotTried) continue;
      bool planned = false;
      for (const auto& t : plan) planned |= std::get<0>(t) == p;
      if (planned) continue;
      plan.emplace_back(p, ua, small ? ub : ua + 1);
    }
  };

  // Round 1: the needed data ranges, plus probes so that m + 1 positions answer in all. When
  // the bound is the committed version, the needed ranges alone first: answered at the bound,
  // they are the read (see needed_at_bound below); otherwise the probes follow.
  bool probed = !bound_is_committed;
  {
    std::vector<std::tuple<uint32_t, uint64_t, uint64_t>> plan;
    for (const Need& n : needs) {
      if (chunk_len[n.position] > 0) plan.emplace_back(n.position, n.b, n.e);
    }
    if (probed) add_probes(plan);
    fetch_all(plan);
  }

  // Why the first needed position that has no good range at `vmax` lacks it (DegradedCause).
  auto degraded_cause = [&](uint64_t vmax) {
    for (const Need& n : needs) {
      const Fetch& f = fetches[n.position];
      if (chunk_len[n.position] == 0 || (f.Covers(n.b, n.e) && f.version == vmax)) continue;
      switch (f.state) {
        case Fetch::State::kNotFound: return DegradedCause::kMissing;
        case Fetch::State::kOk:
          return f.version != vmax ? DegradedCause::kStaleVersion : DegradedCause::kOther;
        case Fetch::State::kFailed:
          if (f.failure == Code::kCorruption) return DegradedCause::kChecksum;
          if (f.failure == Code::kStale) return DegradedCause::kStaleVersion;
          if (f.failure == Code::kUnavailable || f.failure == Code::kInternal) {
            return DegradedCause::kUnavailable;
          }
          return DegradedCause::kOther;
        case Fetch::State::kNotTried: return DegradedCause::kOther;
      }
    }
    return DegradedCause::kOther;
  };
  bool degraded = false;
  DegradedCause cause = DegradedCause::kOther;  // set when `degraded` is
  for (;;) {
    uint32_t answered = 0;
    uint64_t vmax = 0;
    for (uint32_t p = 0; p < width; ++p) {
      const Fetch& f = fetches[p];
      if (f.state == Fetch::State::kOk || f.state == Fetch::State::kNotFound) ++answered;
      if (f.state == Fetch::State::kOk) vmax = std::max(vmax, f.version);
    }
    // A data chunk that was empty when vmax was written (the stripe was shorter then: a file
    // truncated up, or a write that stopped short of the stripe's end) was never stored; it is
    // zeros, like the empty chunks of the current length, not a missing chunk.
    chunk_len = base_len;
    for (uint32_t p = 0; p < width; ++p) {
      const Fetch& f = fetches[p];
      if (f.state != Fetch::State::kOk || f.version != vmax || f.stripe_bytes == 0) continue;
      for (uint32_t q = 0; q < k; ++q) {
        if (DataChunkLength(layout, f.stripe_bytes, q) == 0) chunk_len[q] = 0;
      }
      break;
    }
    bool untried = false;
    for (uint32_t p = 0; p < width; ++p) {
      untried |= chunk_len[p] > 0 && fetches[p].state == Fetch::State::kNotTried;
    }
    // Every needed range came back at the reader's bound: servers return nothing above it, so
    // that is the newest version, and it was committed, so it is whole. No probe is needed.
    bool needed_at_bound = bound_is_committed && max_version != 0 && !needs.empty();
    for (const Need& n : needs) {
      const Fetch& f = fetches[n.position];
      needed_at_bound &= chunk_len[n.position] == 0 ||
                         (f.Covers(n.b, n.e) && f.version == max_version);
    }
    if (!probed && !needed_at_bound) {
      // An older version (the last commit did not rewrite this stripe) or a missing chunk: go
      // on as a read without the hint would have started.
      probed = true;
      std::vector<std::tuple<uint32_t, uint64_t, uint64_t>> plan;
      add_probes(plan);
      if (!plan.empty()) {
        fetch_all(plan);
        continue;
      }
    }
    if (answered >= confident || !untried || needed_at_bound) {
      // A position whose versions are all above the bound: the stripe was rewritten and the
      // bound's version pruned since the reader took it. Neither a hole nor lost: look again.
      if (vmax == 0 && superseded) return Superseded(inode, stripe, max_version);
      // Never written (a hole, zeros) only when m + 1 positions say so: a written stripe has
      // chunks on >= k positions, so at most m can lack it. Fewer "not found" answers with the
      // rest unreachable (e.g. servers that missed a degraded write, the others down) is a stripe
      // that cannot be read now, never zeros.
      if (vmax == 0 && answered >= confident) {
        if (*abandoned_seen > 0) {
          return Unavailable("stripe " + std::to_string(stripe) +
                             ": only abandoned versions answered");  // ReadStripe reads below
        }
        if (record.known && record.written) {
          return Lost(inode, stripe, record, std::to_string(answered) + " of " + std::to_string(width) +
                                         " positions answered and none holds a chunk");
        }
        Zeros(view, out);
        return OkStatus();
      }
      if (vmax == 0 && !untried) {
        return Unavailable("stripe " + std::to_string(stripe) + " of inode " + inode.ToString() +
                           ": no chunk readable (" + std::to_string(answered) +
                           " positions answered, none holds it)");
      }
      // Is vmax a whole version? The one the reader's bound names was committed, so its writer
      // landed >= k chunks of every stripe it wrote. An older one may be what a crashed writer
      // left (< k chunks) below a later commit: believe it once k positions (empty data
      // chunks count) show it; probe the positions not tried yet to find out.
      uint32_t at_vmax = 0, failed = 0;
      for (uint32_t p = 0; p < width; ++p) {
        if (chunk_len[p] == 0) {
          ++at_vmax;
        } else if (fetches[p].state == Fetch::State::kOk && fetches[p].version == vmax) {
          ++at_vmax;
        } else if (fetches[p].state == Fetch::State::kFailed) {
          ++failed;
        }
      }
      const bool whole = (max_version != 0 && vmax == max_version) || at_vmax >= k;
      if (!whole && untried) {
        std::vector<std::tuple<uint32_t, uint64_t, uint64_t>> plan;
        const uint64_t probe_end = ub - ua <= kMaxProbeBytes ? ub : ua + 1;
        for (uint32_t p = 0; p < width; ++p) {
          if (chunk_len[p] > 0 && fetches[p].state == Fetch::State::kNotTried) {
            plan.emplace_back(p, ua, probe_end);
          }
        }
        fetch_all(plan);
        continue;
      }
      if (!whole && at_vmax + failed < k) {
        // Even if every failed position held vmax it would have fewer than k chunks.
        *unusable_version = vmax;
        return Unavailable("stripe " + std::to_string(stripe) + " of inode " +
                           inode.ToString() + ": version " + std::to_string(vmax) +
                           " has fewer than k chunks");
      }
      auto good = [&](uint32_t p, uint64_t b, uint64_t e) {
        return chunk_len[p] == 0 || (fetches[p].Covers(b, e) && fetches[p].version == vmax);
      };
      // Fast path: every needed data range came back at the current version.
      bool all_needed = vmax > 0;
      for (const Need& n : needs) all_needed &= good(n.position, n.b, n.e);
      if (all_needed) {
        for (const Need& n : needs) {
          const Fetch& f = fetches[n.position];
          const uint64_t at = n.position * unit + n.b - begin;
          const uint64_t skip = n.b - f.range_begin;
          uint64_t count = 0;
          // An empty chunk at vmax is zeros even when an older version of it answered.
          if (chunk_len[n.position] > 0 && f.bytes.size() > skip) {
            count = std::min<uint64_t>(n.e - n.b, f.bytes.size() - skip);
            if (view != nullptr) {
              view->Append(f.bytes, skip, count);
            } else {
              f.bytes.CopyTo(skip, out.subspan(at, count));
            }
          }
          // Past the chunk's stored end (and empty data chunks): zeros.
          if (view != nullptr) {
            view->AppendZeros(n.e - n.b - count);
          } else {
            std::memset(out.data() + at + count, 0, n.e - n.b - count);
          }
        }
        if (degraded) CountDegraded(cause);
        return OkStatus();
      }
      // Degraded: decode [ua, ub) of every unit from any k good positions.
      uint32_t good_count = 0;
      for (uint32_t p = 0; p < width; ++p) good_count += good(p, ua, ub) ? 1 : 0;
      if (vmax > 0 && good_count >= k) {
        Result<const ErasureCodec*> codec = CodecFor(layout.k, layout.m);
        if (!codec.ok()) return codec.status();
        const uint64_t span_len = ub - ua;
        std::vector<std::byte> buffers(span_len * width, std::byte{0});
        std::vector<std::span<std::byte>> units;
        std::unique_ptr<bool[]> present(new bool[width]);
        uint32_t used = 0;
        for (uint32_t p = 0; p < width; ++p) {
          units.emplace_back(buffers.data() + p * span_len, span_len);
          present[p] = false;
          if (used < k && good(p, ua, ub)) {
            present[p] = true;
            ++used;
            if (chunk_len[p] > 0) {
              const Fetch& f = fetches[p];
              const uint64_t skip = ua - f.range_begin;
              if (f.bytes.size() > skip) {
                f.bytes.CopyTo(skip, units[p].subspan(0, std::min<uint64_t>(
                                               span_len, f.bytes.size() - skip)));
              }
            }
          }
        }
        AQ_RETURN_IF_ERROR((*codec)->Reconstruct(
            units, std::span<const bool>(present.get(), width)));
        for (const Need& n : needs) {
          std::memcpy(out.data() + n.position * unit + n.b - begin,
                      units[n.position].data() + (n.b - ua), n.e - n.b);
        }
        CountDegraded(degraded ? cause : degraded_cause(vmax));
        return OkStatus();
      }
    }
    // Fetch [ua, ub) from every position not yet holding it at a usable version.
    if (!degraded) cause = degraded_cause(vmax);
    degraded = true;
    std::vector<std::tuple<uint32_t, uint64_t, uint64_t>> plan;
    for (uint32_t p = 0; p < width; ++p) {
      if (chunk_len[p] == 0) continue;
      const Fetch& f = fetches[p];
      if (f.state == Fetch::State::kNotTried ||
          (f.state == Fetch::State::kOk && !f.Covers(ua, ub))) {
        plan.emplace_back(p, ua, ub);
      }
    }
    if (plan.empty()) {
      if (superseded) return Superseded(inode, stripe, max_version);
      // Every position answered or failed. If even the failed ones could not make k chunks of
      // vmax, vmax was never written whole (a committed write lands >= k): an older version
      // may be readable.
      uint32_t good_count = 0, failed = 0;
      for (uint32_t p = 0; p < width; ++p) {
        if (chunk_len[p] == 0 || (fetches[p].Covers(ua, ub) && fetches[p].version == vmax)) {
          ++good_count;
        } else if (fetches[p].state == Fetch::State::kFailed) {
          ++failed;
        }
      }
      if (vmax > 0 && good_count + failed < k) *unusable_version = vmax;
      return Unavailable("stripe " + std::to_string(stripe) + " of inode " + inode.ToString() +
                         " cannot be read: fewer than k chunks of one version available");
    }
    fetch_all(plan);
  }
}

void ChunkIo::NoteLost(InodeId inode, uint64_t stripe) {
  lost_stripe_reads_.fetch_add(1);
  {
    std::lock_guard lock(lost_mu_);
    if (!reported_lost_.insert({inode.value(), stripe}).second) return;  // told already
    if (reported_lost_.size() > 4096) reported_lost_.clear();
  }
  const uint64_t stripes[] = {stripe};
  Status s = meta_->ReportLost(inode, stripes);
  if (!s.ok()) {
    Logger("client")->warn("report lost stripe ino={} stripe={} failed status={}", inode.value(),
                           stripe, s.ToString());
    std::lock_guard lock(lost_mu_);
    reported_lost_.erase({inode.value(), stripe});
  }
}

}  // namespace aquifer::client
