// Cache leases on the metadata server (docs/design.md "Cache leases"): who caches which inode's
// attributes and directory names, the recalls a change queues for them, their acknowledgements,
// and the wait of the change's caller until they came.
#include <algorithm>
#include <map>
#include <set>

#include "common/logging.h"
#include "metadata/service_internal.h"

namespace aquifer::meta {

namespace {
// The recalls the changes of this thread's RequestScope queued, as (holder session, seq), and
// the service they belong to. Empty outside a scope: Tick's changes (expired sessions) and
// direct calls in tests queue recalls but wait for none.
struct ScopeWaits {
  bool active = false;
  MetadataService* service = nullptr;
  std::vector<std::pair<uint64_t, uint64_t>> waits;
  bool resync = false;  // a change ran while restored sessions had not resynced
  uint64_t self = 0;    // the scope's session
  std::vector<uint64_t> holds;  // inodes HoldForRecall kept for the recalls' duration
};
thread_local ScopeWaits scope_waits;
}  // namespace

void BeginScopeWaits() {
  scope_waits.active = true;
  scope_waits.service = nullptr;
  scope_waits.waits.clear();
}

void EndScopeWaits() {
  ScopeWaits done = std::move(scope_waits);
  scope_waits = ScopeWaits{};
  if (done.service != nullptr && (!done.waits.empty() || done.resync)) {
    done.service->AwaitCacheRecalls(done.waits, done.resync, done.self);
  }
  if (done.service != nullptr && !done.holds.empty()) done.service->ReleaseRecallHolds(done.holds);
}

bool MetadataService::HoldForRecall(Txn& txn, uint64_t ino) {
  if (options_.cache_lease_ms == 0 || !scope_waits.active) return false;
  const uint64_t self = CurrentRequestTag().session;
  bool cached_elsewhere = resync_open_.load();
  if (!cached_elsewhere) {
    MutexLock lock(lease_mu_);
    auto it = cache_holders_.find(ino);
    if (it != cache_holders_.end()) {
      for (uint64_t h : it->second) {
        if (h != self && sessions_.count(h)) {
          cached_elsewhere = true;
          break;
        }
      }
    }
  }
  if (!cached_elsewhere) return false;
  if (std::find(scope_waits.holds.begin(), scope_waits.holds.end(), ino) ==
      scope_waits.holds.end()) {
    txn.State(ino).opens[kRecallHoldSession].total++;
    scope_waits.holds.push_back(ino);
  }
  scope_waits.service = this;
  scope_waits.self = self;
  return true;
}

void MetadataService::ReleaseRecallHolds(const std::vector<uint64_t>& inodes) {
  std::unique_lock lock(mu_);
  Txn txn(this);
  for (uint64_t ino : inodes) {
    const InodeState* cur = txn.FindState(ino);
    if (cur == nullptr || !cur->opens.count(kRecallHoldSession)) continue;
    InodeState& st = txn.State(ino);
    auto hold = st.opens.find(kRecallHoldSession);
    if (--hold->second.total == 0) st.opens.erase(hold);
    Status s = MaybeDeleteOrphan(txn, InodeId(ino));
    if (!s.ok()) Logger("meta")->error("drop held inode={} failed: {}", ino, s.ToString());
  }
  Status applied = Apply(txn, false);
  if (!applied.ok()) {
    Logger("meta")->error("release recall holds of {} inodes failed: {}", inodes.size(),
                          applied.ToString());
  }
}

void MetadataService::GrantCache(SessionId session, std::initializer_list<uint64_t> inodes) {
  GrantCache(session, std::vector<uint64_t>(inodes));
}

void MetadataService::GrantCache(SessionId session, const std::vector<uint64_t>& inodes) {
  const uint64_t s = session.value();
  if (options_.cache_lease_ms == 0 || s == 0) return;
  auto sess = sessions_.find(s);
  if (sess == sessions_.end()) return;  // unknown: the caller's next call renews its session
  sess->second->caches.store(true);
  MutexLock lock(lease_mu_);
  for (uint64_t ino : inodes) {
    if (ino == 0) continue;
    std::vector<uint64_t>& holders = cache_holders_[ino];
    if (std::find(holders.begin(), holders.end(), s) == holders.end()) holders.push_back(s);
  }
}

bool MetadataService::CacheRecallPending(uint64_t session, uint64_t ino) {
  if (options_.cache_lease_ms == 0 || session == 0) return false;
  MutexLock lock(recall_mu_);
  auto q = cache_queues_.find(session);
  if (q == cache_queues_.end()) return false;
  for (const CacheRecall& r : q->second.pending) {
    for (InodeId i : r.inodes) {
      if (i.value() == ino) return true;
    }
  }
  return false;
}

void MetadataService::RecallCaches(const Txn& txn) {
  if (options_.cache_lease_ms == 0) return;
  std::set<uint64_t> changed(txn.dirty.begin(), txn.dirty.end());
  changed.insert(txn.deleted.begin(), txn.deleted.end());
  for (const auto& [parent, name, d] : txn.dentries) changed.insert(parent.value());
  if (changed.empty()) return;
  const uint64_t self = CurrentRequestTag().session;
  if (resync_open_.load() && scope_waits.active) {
    scope_waits.service = this;
    scope_waits.resync = true;
    scope_waits.self = self;
  }

  // A recall tells each holder what changed; it keeps its lease (it drops only what the recall
  // names, and its kernel keeps the inode's other names), so the holders stay until their session
  // ends or the inode is deleted.
  std::map<uint64_t, std::vector<uint64_t>> taken;
  {
    MutexLock lock(lease_mu_);
    for (uint64_t ino : changed) {
      auto it = cache_holders_.find(ino);
      if (it == cache_holders_.end()) continue;
      if (txn.deleted.count(ino)) {
        taken[ino] = std::move(it->second);
        cache_holders_.erase(it);
      } else {
        taken[ino] = it->second;
      }
    }
  }
  std::map<uint64_t, CacheRecall> out;  // by holder
  for (const auto& [ino, holders] : taken) {
    for (uint64_t h : holders) {
      if (h == self || !sessions_.count(h)) continue;  // a session that ended caches nothing
      out[h].inodes.push_back(InodeId(ino));
    }
  }
  for (const auto& [parent, name, d] : txn.dentries) {
    auto it = taken.find(parent.value());
    if (it == taken.end()) continue;
    for (uint64_t h : it->second) {
      if (h == self || !sessions_.count(h)) continue;
      auto& entries = out[h].entries;
      std::pair<InodeId, std::string> key(parent, name);
      if (std::find(entries.begin(), entries.end(), key) == entries.end()) entries.push_back(key);
    }
  }
  // The caller caches what its reply tells it (the new entry, the directories' attributes).
  auto me = sessions_.find(self);
  if (self != 0 && me != sessions_.end() && me->second->caches.load()) {
    std::vector<uint64_t> mine;
    for (uint64_t ino : changed) {
      if (!txn.deleted.count(ino)) mine.push_back(ino);
    }
    GrantCache(SessionId(self), mine);
  }
  if (out.empty()) return;
  {
    MutexLock lock(recall_mu_);
    for (auto& [h, recall] : out) {
      CacheQueue& q = cache_queues_[h];
      recall.seq = q.next_seq++;
      if (scope_waits.active) {
        scope_waits.service = this;
        scope_waits.waits.emplace_back(h, recall.seq);
      }
      SPDLOG_LOGGER_TRACE(Logger("meta"), "cache recall session={} seq={} inodes={} names={}", h,
                          recall.seq, recall.inodes.size(), recall.entries.size());
      q.pending.push_back(std::move(recall));
    }
  }
  recall_cv_.notify_all();
}

void MetadataService::AwaitCacheRecalls(const std::vector<std::pair<uint64_t, uint64_t>>& waits,
                                        bool resync, uint64_t self) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.cache_lease_ms);
  MutexLock lock(recall_mu_);
  if (resync) {
    // Sessions restored from the last run may trust names and attributes this change made
    // stale; none of their leases is known here, so wait for each to drop its caches.
    const bool synced = ack_cv_.wait_until(lock.native(), resync_deadline_, [&]() REQUIRES(recall_mu_) {
      return recall_stop_ || resync_.empty() || (resync_.size() == 1 && resync_.count(self));
    });
    if (!synced && !resync_.empty() && resync_open_.exchange(false)) {
      Logger("meta")->warn("cache leases: {} sessions did not resync within {} ms of the "
                           "restart; their leases are broken", resync_.size(),
                           options_.cache_lease_ms);
      resync_.clear();
    }
  }
  for (const auto& [h, seq] : waits) {
    const bool acked = ack_cv_.wait_until(lock.native(), deadline, [&, h = h, seq = seq]() REQUIRES(recall_mu_) {
      auto it = cache_queues_.find(h);
      return recall_stop_ || it == cache_queues_.end() || it->second.acked >= seq;
    });
    if (!acked) {
      // The holder neither answered nor expired (hung, cut off, or stopped): its cached names
      // and attributes are past their own bound by now (the client stops trusting its cache
      // cache_lease_ms after it last heard from this server, minus its kernel timeouts).
      Logger("meta")->warn("cache recall session={} seq={} not acknowledged in {} ms; lease broken",
                           h, seq, options_.cache_lease_ms);
      events_.Record(EventSeverity::kWarning,
                     fmt::format("session {} did not acknowledge a cache recall in {} ms: its "
                                 "cache lease was broken", h, options_.cache_lease_ms));
    }
  }
}

Result<MetadataService::Recalls> MetadataService::WaitRecalls(SessionId session,
                                                              std::chrono::milliseconds wait,
                                                              uint64_t acked_seq,
                                                              uint64_t recall_epoch) {
  const uint64_t s = session.value();
  {
    std::shared_lock lock(mu_);
    if (s == 0 || !SessionAlive(s)) {
      return Status(Code::kStale, "session " + session.ToString() + " unknown or expired");
    }
  }
  wait = std::clamp(wait, std::chrono::milliseconds(0), kMaxRecallWait);
  MutexLock lock(recall_mu_);
  if (recall_epoch != recall_epoch_) {
    acked_seq = 0;  // counted in another run's seqs (or none yet): acknowledges nothing here
  } else if (resync_.erase(s) != 0) {
    // It saw this run's epoch in an earlier answer and dropped its caches then.
    if (resync_.empty()) resync_open_.store(false);
    ack_cv_.notify_all();
  }
  auto q = cache_queues_.find(s);
  if (q != cache_queues_.end() && acked_seq > q->second.acked) {
    // An ack past what was handed out is a confused client: it acknowledges what it was sent.
    q->second.acked = std::min(acked_seq, q->second.next_seq - 1);
    auto& pending = q->second.pending;
    while (!pending.empty() && pending.front().seq <= q->second.acked) pending.pop_front();
    ack_cv_.notify_all();
  }
  recall_cv_.wait_for(lock.native(), wait, [&]() REQUIRES(recall_mu_) {
    if (recall_stop_ || recalls_.count(s) != 0) return true;
    auto it = cache_queues_.find(s);
    return it != cache_queues_.end() && !it->second.pending.empty();
  });
  if (recall_stop_) return Unavailable("metadata server stopping");
  Recalls out;
  out.recall_epoch = recall_epoch_;
  auto it = recalls_.find(s);
  if (it != recalls_.end()) {
    for (uint64_t ino : it->second) out.write_leases.push_back(InodeId(ino));
    recalls_.erase(it);
  }
  auto cq = cache_queues_.find(s);
  if (cq != cache_queues_.end()) {
    out.cache_recalls.assign(cq->second.pending.begin(), cq->second.pending.end());
  }
  return out;
}

size_t MetadataService::CacheHolderCount(InodeId ino) {
  MutexLock lock(lease_mu_);
  auto it = cache_holders_.find(ino.value());
  return it == cache_holders_.end() ? 0 : it->second.size();
}

}  // namespace aquifer::meta
