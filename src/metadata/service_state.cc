// MetadataService: opens and commits, sessions, leases and locks, xattrs and layouts, statfs,
// data-server membership, placement-group tables and GC tasks.
#include <fcntl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "common/failpoint.h"
#include "common/hash.h"
#include "common/logging.h"
#include "metadata/service_internal.h"

namespace aquifer::meta {

namespace {
bool Overlaps(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) { return a0 <= b1 && b0 <= a1; }
}  // namespace

// --- opens and commits ------------------------------------------------------------------------
bool MetadataService::SessionAlive(uint64_t session) {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return false;
  return clocks_.mono_ms() - it->second->last_seen_ms.load() <= options_.session_ttl_ms;
}

void MetadataService::TouchSession(SessionId session) {
  auto it = sessions_.find(session.value());
  if (it != sessions_.end() && SessionAlive(session.value())) {
    it->second->last_seen_ms.store(clocks_.mono_ms());
  }
}

Result<OpenResult> MetadataService::Open(InodeId ino, uint32_t flags, SessionId session,
                                         const Caller& caller) {
  std::unique_lock lock(mu_);
  Txn txn(this);
  auto nr = txn.Get(ino);
  if (!nr.ok()) return nr.status();
  Inode* n = *nr;
  const uint32_t acc = flags & O_ACCMODE;
  if (acc == O_ACCMODE) return InvalidArgument("open: bad access mode");
  const bool write = acc == O_WRONLY || acc == O_RDWR;
  const bool trunc = write && (flags & O_TRUNC);
  if (n->is_dir() && write) return Status(Code::kIsDirectory, "open of a directory for write");
  int mask = (acc != O_WRONLY ? R_OK : 0) | (write ? W_OK : 0);
  AQ_RETURN_IF_ERROR(CheckAccess(*n, caller, mask));
  const uint64_t s = session.value();
  if (s != 0 && !SessionAlive(s)) {
    return Status(Code::kStale, "session " + session.ToString() + " unknown or expired");
  }
  const bool lease = write && n->is_reg();
  if (lease) {
    const InodeState* cur = txn.FindState(ino.value());
    if (cur != nullptr && cur->lease_holder != 0 && cur->lease_holder != s) {
      if (SessionAlive(cur->lease_holder)) {
        RecallLease(cur->lease_holder, ino.value());
        return Status(Code::kWouldBlock, "inode " + ino.ToString() +
                                             " is open for write by session " +
                                             std::to_string(cur->lease_holder));
      }
      // The holder's session is past its ttl but not reaped yet (the reaper would find the
      // lease gone and abandon nothing): what it wrote and never committed is abandoned now.
      InodeState& st = txn.State(ino.value());
      AbandonLeaseVersion(txn, ino, st.lease_version);
      st.lease_holder = 0;
      st.lease_version = 0;
    }
  }
  OpenResult out;
  if (lease) AbandonRestoredLeftovers(txn, n);
  if (trunc && n->is_reg() && n->size > 0) {
    AQ_RETURN_IF_ERROR(TruncateLocked(txn, n, 0, /*opening=*/true));
    n->mtime = n->ctime = clocks_.wall();
  }
  // After the truncate: the writer's version is above the floor the truncate set.
  if (lease) out.write_version = NextWriteVersion(txn);
  if (s != 0) {
    InodeState& st = txn.State(ino.value());
    OpenCount& oc = st.opens[s];
    oc.total++;
    if (lease) {
      oc.write++;
      st.lease_holder = s;
      st.lease_version = out.write_version;
    }
  }
  AQ_RETURN_IF_ERROR(Apply(txn, false));
  out.attr = *n;
  // An orphan (kept by a recall hold or another open) opened through a name this session was
  // told of before the unlink: see OpenResult::unlink_pending.
  if (n->nlink == 0 && n->is_reg()) out.unlink_pending = CacheRecallPending(s, ino.value());
  if (s != 0) TouchSession(session);
  return out;
}

// --- write-lease recall -----------------------------------------------------------------------
void MetadataService::RecallLease(uint64_t holder, uint64_t ino) {
  bool queued;
  {
    MutexLock lock(recall_mu_);
    queued = recalls_[holder].insert(ino).second;
  }
  if (!queued) return;
  recall_cv_.notify_all();
  Logger("meta")->debug("recall write lease inode={} holder={}", ino, holder);
}

Result<OpenResult> MetadataService::AcquireLease(InodeId ino, SessionId session) {
  std::unique_lock lock(mu_);
  Txn txn(this);
  auto nr = txn.Get(ino);
  if (!nr.ok()) return nr.status();
  Inode* n = *nr;
  if (!n->is_reg()) return InvalidArgument("acquire lease: inode " + ino.ToString() +
                                           " is not a regular file");
  const uint64_t s = session.value();
  if (s == 0 || !SessionAlive(s)) {
    return Status(Code::kStale, "session " + session.ToString() + " unknown or expired");
  }
  uint64_t holder = 0, holder_version = 0;
  {
    const InodeState* cur = txn.FindState(ino.value());
    const bool writing = cur != nullptr && cur->opens.count(s) && cur->opens.at(s).write > 0;
    if (!writing) {
      return InvalidArgument("acquire lease: inode " + ino.ToString() +
                             " is not open for write by session " + session.ToString());
    }
    holder = cur->lease_holder;
    holder_version = cur->lease_version;
  }
  OpenResult out;
  if (holder == s) {  // held already (a re-send, or a recall that never came)
    out.attr = *n;
    out.write_version = holder_version;
    TouchSession(session);
    return out;
  }
  if (holder != 0) {
    if (SessionAlive(holder)) {
      RecallLease(holder, ino.value());
      return Status(Code::kWouldBlock, "inode " + ino.ToString() +
                                           " is open for write by session " +
                                           std::to_string(holder));
    }
    AbandonLeaseVersion(txn, ino, holder_version);  // as in Open: a holder past its ttl
  }
  AbandonRestoredLeftovers(txn, n);
  out.write_version = NextWriteVersion(txn);
  InodeState& st = txn.State(ino.value());
  st.lease_holder = s;
  st.lease_version = out.write_version;
  AQ_RETURN_IF_ERROR(Apply(txn, false));
  out.attr = *n;
  TouchSession(session);
  return out;
}

Status MetadataService::ReturnLease(InodeId ino, SessionId session) {
  const uint64_t s = session.value();
  if (ReturnDirLease(ino.value(), s)) return OkStatus();  // an exclusive directory lease
  std::unique_lock lock(mu_);
  if (s == 0 || !sessions_.count(s)) {
    return Status(Code::kStale, "session " + session.ToString() + " unknown or expired");
  }
  TouchSession(session);
  Txn txn(this);
  const InodeState* cur = txn.FindState(ino.value());
  if (cur == nullptr || cur->lease_holder != s) return OkStatus();
  // The holder committed all it wrote (the client returns a lease only after a commit that
  // succeeded), and the version it was handed with that commit is unused: nothing to abandon.
  // Abandoning it anyway would fill the inode's 16 abandoned ranges with empty ones and push
  // out a dead writer's.
  InodeState& st = txn.State(ino.value());
  st.lease_holder = 0;
  st.lease_version = 0;
  return Apply(txn, false);
}

Result<std::vector<InodeId>> MetadataService::WaitRecall(SessionId session,
                                                         std::chrono::milliseconds wait) {
  Result<Recalls> r = WaitRecalls(session, wait, 0);
  if (!r.ok()) return r.status();
  return std::move(r->write_leases);
}

void MetadataService::StopRecallWaits() {
  {
    MutexLock lock(recall_mu_);
    recall_stop_ = true;
  }
  recall_cv_.notify_all();
  ack_cv_.notify_all();
}

Status MetadataService::Release(InodeId ino, SessionId session, bool was_write) {
  const uint64_t s = session.value();
  if (s == 0) return OkStatus();
  std::unique_lock lock(mu_);
  TouchSession(session);
  Txn txn(this);
  const InodeState* cur = txn.FindState(ino.value());
  if (cur == nullptr || !cur->opens.count(s)) return OkStatus();
  InodeState& st = txn.State(ino.value());
  auto oc = st.opens.find(s);
  if (oc->second.total > 0) oc->second.total--;
  if (was_write && oc->second.write > 0) oc->second.write--;
  if (oc->second.write == 0 && st.lease_holder == s) {
    st.lease_holder = 0;
    st.lease_version = 0;
  }
  if (oc->second.total == 0) {
    st.opens.erase(oc);
    auto& locks = st.locks;  // no descriptor of this session is left: its locks go
    locks.erase(std::remove_if(locks.begin(), locks.end(),
                               [s](const LockRecord& l) { return l.session == s; }),
                locks.end());
  }
  AQ_RETURN_IF_ERROR(MaybeDeleteOrphan(txn, ino));
  Status applied = Apply(txn, false);
  if (!applied.ok()) {
    Logger("meta")->error("release inode={} failed: {}", ino.value(), applied.ToString());
  }
  return applied;
}

Status MetadataService::CommitIn(Txn& txn, const CommitArgs& a, CommitResult* result) {
  CommitResult& out = *result;
  {
    auto nr = txn.Get(a.ino);
    if (!nr.ok()) return nr.status();
    Inode* n = *nr;
    if (n->is_dir()) return Status(Code::kIsDirectory, "commit on a directory");
    if (!n->is_reg()) return InvalidArgument("commit on a non-regular file");
    const uint64_t s = a.session.value();
    const InodeState* cur = txn.FindState(a.ino.value());
    if (cur != nullptr && cur->lease_holder != 0 && cur->lease_holder != s &&
        SessionAlive(cur->lease_holder)) {
      return Status(Code::kStale, "commit: the write lease of inode " + a.ino.ToString() +
                                      " is held by another session");
    }
    if (a.write_version == 0 || a.write_version >= next_version_) {
      return InvalidArgument("commit: write version " + std::to_string(a.write_version) +
                             " was never handed out");
    }
    if (a.write_version < n->data_version) {
      return Status(Code::kStale, "commit: write version " + std::to_string(a.write_version) +
                                      " is older than committed " +
                                      std::to_string(n->data_version));
    }
    if (a.mtime.nsec >= 1000000000u) return InvalidArgument("commit: mtime nsec");
    AQ_RETURN_IF_ERROR(CheckFileBytes(a.size, "commit size"));
    if (a.written_stripes.size() > kMaxCommitStripeRanges) {
      return InvalidArgument("commit: more than " + std::to_string(kMaxCommitStripeRanges) +
                             " written stripe ranges");
    }
    for (const auto& [b, e] : a.written_stripes) {
      if (b >= e) return InvalidArgument("commit: an empty written stripe range");
    }
    const Timespec now = clocks_.wall();
    Inode changed;  // what a.attrs makes of the inode's mode, owner, group and times
    if (a.attrs) {
      if (a.attrs->valid & kSetSize) return InvalidArgument("commit: attributes with a size");
      AQ_RETURN_IF_ERROR(ChangedAttrs(*n, *a.attrs, a.caller, now, &changed));
    }
    // Shrinking through a commit: chunks of committed versions past the new end are garbage.
    AQ_RETURN_IF_ERROR(TruncateLocked(txn, n, a.size));
    if (!a.records_stripes) {
      n->stripes = StripeMap::Unknown();  // a client that does not say what it wrote
    } else if (!n->layout.empty()) {
      const uint64_t width = n->layout.stripe_width_bytes();
      const uint64_t end = a.size / width + (a.size % width != 0 ? 1 : 0);
      // New stripes' chunks carry this writer's version, which is above this floor even when a
      // truncate since its open moved the file's floor past it.
      const uint64_t floor = std::min(n->truncate_floor, a.write_version - 1);
      for (const auto& [b, e] : a.written_stripes) {
        n->stripes.AddWritten(b, std::min(e, end), floor);
        // Rewritten: no longer lost.
        auto& lost = n->lost_stripes;
        lost.erase(std::lower_bound(lost.begin(), lost.end(), b),
                   std::lower_bound(lost.begin(), lost.end(), e));
      }
    }
    n->size = a.size;
    n->mtime = a.mtime;
    n->ctime = now;
    if (a.attrs) {
      n->mode = changed.mode;
      n->uid = changed.uid;
      n->gid = changed.gid;
      n->atime = changed.atime;
      if (a.attrs->valid & (kSetMtime | kSetMtimeNow)) n->mtime = changed.mtime;
    }
    n->data_version = std::max(n->data_version, a.write_version);
    txn.Dirty(n);
    out.next_write_version = NextWriteVersion(txn);
    // The version the holder writes next is part of its lease: the one abandoned if it dies.
    if (s != 0 && cur != nullptr && cur->lease_holder == s) {
      txn.State(a.ino.value()).lease_version = out.next_write_version;
    }
    out.attr = *n;
  }
  return OkStatus();
}

Result<CommitResult> MetadataService::Commit(const CommitArgs& a) {
  CommitResult out;
  {
    std::unique_lock lock(mu_);
    Txn txn(this);
    AQ_RETURN_IF_ERROR(CommitIn(txn, a, &out));
    AQ_RETURN_IF_ERROR(AQ_FAILPOINT_STATUS("meta.commit.before_apply"));
    AQ_RETURN_IF_ERROR(Apply(txn, false));
    AQ_FAILPOINT("meta.commit.after_apply");
    if (a.session.value() != 0) TouchSession(a.session);
  }
  // fsync: make it durable without holding the namespace lock across the disk flush.
  if (a.sync) AQ_RETURN_IF_ERROR(store_->Sync());
  if (!a.backfill_servers.empty()) {
    // Only now: a backfill skips stripes past the committed size, so it must not run before.
    MutexLock lock(cluster_mu_);
    DegradedWrite w;
    // 0: every chunk the servers missed went to a spare failure domain (the stripes keep k + m
    // chunks); the backfill is still wanted, but nothing is counted as degraded.
    w.stripes = a.degraded_stripes;
    w.epoch = ++degraded_epoch_;
    for (ServerId id : a.backfill_servers) {
      auto it = servers_.find(id.value());
      if (it == servers_.end()) continue;
      it->second.degraded_epoch = w.epoch;
      w.servers.push_back(id.value());
      if (it->second.backfill_wanted) continue;
      it->second.backfill_wanted = true;
      Logger("meta")->info("backfill wanted server={}: a client wrote inode={} without its chunks",
                           id.value(), a.ino.value());
    }
    if (!w.servers.empty()) {
      StoreBatch b;
      if (degraded_writes_.size() >= 65536) {
        // Keep the count: fold the oldest into the next one (which covers the same or later
        // epochs, so it is settled no earlier).
        DegradedWrite oldest = std::move(degraded_writes_.front());
        degraded_writes_.pop_front();
        b.DeleteDegradedWrite(oldest.epoch);
        w.stripes += oldest.stripes;
        for (uint32_t id : oldest.servers) {
          if (std::find(w.servers.begin(), w.servers.end(), id) == w.servers.end()) {
            w.servers.push_back(id);
          }
        }
      }
      // Persisted, so the backfill requests and the degraded count outlive a restart (unsynced:
      // a crash of this process keeps it; the hourly scrub's backfill covers a power loss).
      b.PutDegradedWrite(DegradedWriteRecord{w.epoch, w.stripes, w.servers});
      Status st = store_->Write(b, false);
      if (!st.ok()) Logger("meta")->error("persist degraded write failed: {}", st.ToString());
      degraded_writes_.push_back(std::move(w));
    }
  }
  return out;
}

void MetadataService::AbandonLeaseVersion(Txn& txn, InodeId ino, uint64_t version) {
  if (version == 0) return;
  auto nr = txn.Get(ino);
  if (!nr.ok()) return;
  Inode* n = *nr;
  if (!n->is_reg() || version <= n->data_version) return;
  auto& ranges = n->abandoned_versions;
  if (ranges.size() >= Inode::kMaxAbandonedRanges) ranges.erase(ranges.begin());
  ranges.emplace_back(n->data_version + 1, version);
  txn.Dirty(n);
  Logger("meta")->info("abandon versions ino={} from={} to={}: the writer's session ended before "
                       "it committed them",
                       ino.value(), n->data_version + 1, version);
}

void MetadataService::AbandonRestoredLeftovers(Txn& txn, Inode* n) {
  if (restore_version_floor_ == 0 || n->ino.value() >= restore_ino_floor_) return;
  // Committed since the restore: the range was added at that writer's open.
  if (n->data_version + 1 >= restore_version_floor_) return;
  const uint64_t first = n->data_version + 1, last = restore_version_floor_ - 1;
  auto& ranges = n->abandoned_versions;
  for (const auto& [a, b] : ranges) {
    if (a <= first && last <= b) return;
  }
  if (ranges.size() >= Inode::kMaxAbandonedRanges) ranges.erase(ranges.begin());
  ranges.emplace_back(first, last);
  txn.Dirty(n);
  Logger("meta")->info("abandon versions ino={} from={} to={}: written after the backup the "
                       "namespace was restored from",
                       n->ino.value(), first, last);
}

Result<uint64_t> MetadataService::ReportLost(InodeId ino, const std::vector<uint64_t>& stripes) {
  if (stripes.size() > Inode::kMaxLostStripesRecorded) {
    return InvalidArgument("report lost: more than " +
                           std::to_string(Inode::kMaxLostStripesRecorded) + " stripes");
  }
  std::unique_lock lock(mu_);
  Txn txn(this);
  auto nr = txn.Get(ino);
  if (!nr.ok()) return nr.status();
  Inode* n = *nr;
  if (!n->is_reg() || n->layout.empty()) return InvalidArgument("report lost: not a regular file");
  const uint64_t width = n->layout.stripe_width_bytes();
  const uint64_t end = n->size / width + (n->size % width != 0 ? 1 : 0);
  std::vector<uint64_t> added;
  for (uint64_t stripe : stripes) {
    // Only what the map says was written can be lost; holes, and unknown maps, are not taken.
    if (stripe >= end || !n->stripes.Find(stripe).written || !n->stripes.known()) continue;
    auto& lost = n->lost_stripes;
    auto at = std::lower_bound(lost.begin(), lost.end(), stripe);
    if (at != lost.end() && *at == stripe) continue;
    if (lost.size() >= Inode::kMaxLostStripesRecorded) break;
    lost.insert(at, stripe);
    added.push_back(stripe);
  }
  if (added.empty()) return uint64_t{n->lost_stripes.size()};
  txn.Dirty(n);
  AQ_RETURN_IF_ERROR(Apply(txn, true));
  std::string list;
  for (size_t i = 0; i < added.size() && i < 16; ++i) list += (i ? "," : "") + std::to_string(added[i]);
  Logger("meta")->error("data lost ino={} stripes={}{} (recorded: {}); reads of them fail with EIO",
                        ino.value(), list, added.size() > 16 ? ",..." : "",
                        n->lost_stripes.size());
  events_.Record(EventSeverity::kError,
                 fmt::format("data lost: inode {} stripes {}{} recorded lost (aquifer fsck lists "
                             "the file)", ino.value(), list, added.size() > 16 ? ",..." : ""));
  return uint64_t{n->lost_stripes.size()};
}

// --- sessions ---------------------------------------------------------------------------------
std::vector<SessionInfo> MetadataService::ListSessions() {
  const int64_t now = clocks_.mono_ms();
  std::shared_lock lock(mu_);
  std::vector<SessionInfo> out;
  out.reserve(sessions_.size());
  for (const auto& [id, s] : sessions_) {
    out.push_back(SessionInfo{SessionId(id), s->client_name, now - s->last_seen_ms.load(),
                              s->inodes.size(), s->caches.load()});
  }
  std::sort(out.begin(), out.end(),
            [](const SessionInfo& a, const SessionInfo& b) { return a.id < b.id; });
  return out;
}

HoldCounts MetadataService::CountHolds() {
  std::shared_lock lock(mu_);
  HoldCounts out;
  for (const auto& [ino, st] : states_) {
    out.open_files += st.opens.size();
    out.write_leases += st.lease_holder != 0 ? 1 : 0;
    out.locks += st.locks.size();
  }
  return out;
}

Result<SessionGrant> MetadataService::OpenSession(std::string_view client_name, bool caches) {
  std::unique_lock lock(mu_);
  // Ids never repeat across restarts: the boot epoch is in the high bits.
  uint64_t id = (generation_ << 32) | (next_session_ + 1);
  Txn txn(this);
  txn.new_sessions.push_back(
      SessionRecord{id, std::string(client_name), caches && options_.cache_lease_ms > 0, {}});
  AQ_RETURN_IF_ERROR(Apply(txn, false));
  ++next_session_;
  Logger("meta")->info("open session={} client={}", id, client_name);
  events_.Record(EventSeverity::kInfo,
                 fmt::format("session {} opened by {}", id, Printable(client_name)));
  return SessionGrant{SessionId(id), options_.session_ttl_ms, options_.cache_lease_ms};
}

Status MetadataService::KeepAlive(SessionId session) {
  std::shared_lock lock(mu_);
  if (!SessionAlive(session.value())) {
    return Status(Code::kStale, "session " + session.ToString() + " unknown or expired");
  }
  sessions_.at(session.value())->last_seen_ms.store(clocks_.mono_ms());
  return OkStatus();
}

void MetadataService::ReleaseAllOf(Txn& txn, uint64_t s) {
  auto it = sessions_.find(s);
  if (it == sessions_.end()) return;
  std::vector<uint64_t> inodes(it->second->inodes.begin(), it->second->inodes.end());
  txn.ended_sessions.push_back(s);
  for (uint64_t ino : inodes) {
    if (txn.FindState(ino) == nullptr) continue;
    InodeState& st = txn.State(ino);
    st.opens.erase(s);
    if (st.lease_holder == s) {
      // The session ended holding the write lease (a crash, or an unmount with the file still
      // open): the version it was last handed may have chunks that were never committed.
      AbandonLeaseVersion(txn, InodeId(ino), st.lease_version);
      st.lease_holder = 0;
      st.lease_version = 0;
    }
    auto& locks = st.locks;
    locks.erase(std::remove_if(locks.begin(), locks.end(),
                               [s](const LockRecord& l) { return l.session == s; }),
                locks.end());
    Status del = MaybeDeleteOrphan(txn, InodeId(ino));
    if (!del.ok()) {
      Logger("meta")->error("drop orphan inode={} failed: {}", ino, del.ToString());
    }
  }
}

Status MetadataService::CloseSession(SessionId session) {
  std::unique_lock lock(mu_);
  if (!sessions_.count(session.value())) {
    return Status(Code::kStale, "session " + session.ToString() + " unknown or expired");
  }
  Txn txn(this);
  const std::string client = sessions_.at(session.value())->client_name;
  ReleaseAllOf(txn, session.value());
  Logger("meta")->info("close session={}", session.value());
  events_.Record(EventSeverity::kInfo,
                 fmt::format("session {} of {} closed", session.value(), Printable(client)));
  return Apply(txn, false);
}

// --- locks ------------------------------------------------------------------------------------
Status MetadataService::SetLock(const LockArgs& a) {
  if (a.type != LockType::kRead && a.type != LockType::kWrite && a.type != LockType::kUnlock) {
    return InvalidArgument("lock: bad type");
  }
  AQ_RETURN_IF_ERROR(CheckLockRange(a.start, a.end));
  const uint64_t s = a.session.value();
  std::unique_lock lock(mu_);
  if (!SessionAlive(s)) {
    return Status(Code::kStale, "session " + a.session.ToString() + " unknown or expired");
  }
  auto n = LoadInode(a.ino);
  if (!n.ok()) return n.status();
  TouchSession(a.session);
  const uint64_t start = a.flock ? 0 : a.start;
  const uint64_t end = a.flock ? UINT64_MAX : a.end;
  Txn txn(this);
  InodeState& st = txn.State(a.ino.value());
  auto mine = [&](const LockRecord& l) {
    return l.session == s && l.owner == a.owner && l.flock == a.flock;
  };
  if (a.type != LockType::kUnlock) {
    for (const LockRecord& l : st.locks) {
      if (l.flock != a.flock || mine(l) || !Overlaps(l.start, l.end, start, end)) continue;
      if (l.type == LockType::kWrite || a.type == LockType::kWrite) {
        return Status(Code::kWouldBlock, "lock held by pid " + std::to_string(l.pid));
      }
    }
  }
  // Cut the owner's own locks out of [start, end], keeping the parts outside.
  std::vector<LockRecord> kept;
  for (const LockRecord& l : st.locks) {
    if (!mine(l) || !Overlaps(l.start, l.end, start, end)) {
      kept.push_back(l);
      continue;
    }
    if (l.start < start) {
      LockRecord left = l;
      left.end = start - 1;
      kept.push_back(left);
    }
    if (l.end > end) {
      LockRecord right = l;
      right.start = end + 1;
      kept.push_back(right);
    }
  }
  if (a.type != LockType::kUnlock) {
    kept.push_back(LockRecord{s, a.owner, a.type, start, end, a.pid, a.flock});
  }
  st.locks = std::move(kept);
  return Apply(txn, false);  // persisted: a held lock outlives a restart of this server
}

Result<LockInfo> MetadataService::GetLock(const LockArgs& a) {
  AQ_RETURN_IF_ERROR(CheckLockRange(a.start, a.end));
  std::shared_lock lock(mu_);
  auto n = LoadInode(a.ino);
  if (!n.ok()) return n.status();
  LockInfo info;
  auto st = states_.find(a.ino.value());
  if (st == states_.end() || a.type == LockType::kUnlock) return info;
  const uint64_t start = a.flock ? 0 : a.start;
  const uint64_t end = a.flock ? UINT64_MAX : a.end;
  for (const LockRecord& l : st->second.locks) {
    if (l.flock != a.flock) continue;
    if (l.session == a.session.value() && l.owner == a.owner) continue;
    if (!Overlaps(l.start, l.end, start, end)) continue;
    if (l.type == LockType::kWrite || a.type == LockType::kWrite) {
      return LockInfo{l.type, l.start, l.end, l.pid};
    }
  }
  return info;
}

// --- xattrs and layouts -----------------------------------------------------------------------
std::string MetadataService::LayoutText(const FileLayout& l) const {
  return "k=" + std::to_string(l.k) + " m=" + std::to_string(l.m) +
         " unit=" + std::to_string(l.unit_bytes);
}

Result<FileLayout> MetadataService::ParseLayoutText(std::string_view text, const FileLayout& base) {
  FileLayout l = base;
  bool any = false;
  std::vector<std::string_view> seen;  // keys given so far: each at most once
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' ||
                               text[i] == ',' || text[i] == '\0')) {
      ++i;
    }
    if (i >= text.size()) break;
    size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\t' && text[j] != '\n' &&
           text[j] != ',' && text[j] != '\0') {
      ++j;
    }
    std::string_view tok = text.substr(i, j - i);
    i = j;
    size_t eq = tok.find('=');
    if (eq == std::string_view::npos) return InvalidArgument("layout: expected key=value");
    std::string_view key = tok.substr(0, eq), val = tok.substr(eq + 1);
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
    if (val.empty() || ec != std::errc() || ptr != val.data() + val.size() || v > UINT32_MAX) {
      return InvalidArgument("layout: bad number for " + std::string(key));
    }
    const std::string_view canonical = key == "unit_bytes" ? std::string_view("unit") : key;
    if (std::find(seen.begin(), seen.end(), canonical) != seen.end()) {
      return InvalidArgument("layout: " + std::string(canonical) + " given twice");
    }
    seen.push_back(canonical);
    if (key == "k") {
      l.k = static_cast<uint32_t>(v);
    } else if (key == "m") {
      l.m = static_cast<uint32_t>(v);
    } else if (key == "unit" || key == "unit_bytes") {
      l.unit_bytes = static_cast<uint32_t>(v);
    } else {
      return InvalidArgument("layout: unknown key " + std::string(key));
    }
    any = true;
  }
  if (!any) return InvalidArgument("layout: empty value");
  MetaOptions check = options_;
  check.k = l.k;
  check.m = l.m;
  check.unit_bytes = l.unit_bytes;
  Status valid = ValidateMetaOptions(check);
  if (!valid.ok()) return InvalidArgument("layout: " + valid.message());
  l.pg_start = l.pg_count = 0;
  return l;
}

Status MetadataService::SetLayoutXattr(Txn& txn, Inode* n, std::string_view value,
                                       const Caller& caller) {
  if (caller.uid != 0 && caller.uid != n->uid) {
    return Status(Code::kNotPermitted, "layout: not the owner");
  }
  if (!n->is_dir() && !n->is_reg()) {
    return Status(Code::kNotSupported, "layout: only files and directories have one");
  }
  const FileLayout& base =
      n->is_reg() ? n->layout : (n->dir_default.empty() ? default_layout_ : n->dir_default);
  auto l = ParseLayoutText(value, base);
  if (!l.ok()) return l.status();
  if (n->is_reg() && l->k == n->layout.k && l->m == n->layout.m &&
      l->unit_bytes == n->layout.unit_bytes) {
    return OkStatus();  // the same value: cp -a / rsync -X copies succeed
  }
  // Refuse now what every later create would refuse (see docs/design.md, "Layout and
  // placement"): no redundancy, or more positions than the cluster has failure domains. Down
  // servers count (they come back); draining and removed ones do not.
  Status usable;
  const uint32_t width = l->k + l->m;
  if (l->m == 0) {
    usable = InvalidArgument("layout: m=0 leaves no parity or copy; m must be at least 1");
  } else {
    std::set<std::string> domains;
    {
      MutexLock lock(cluster_mu_);
      for (const auto& [id, s] : servers_) {
        if (s.record.state == MemberState::kIn) domains.insert(s.record.failure_domain);
      }
    }
    if (domains.size() < width) {
      usable = InvalidArgument("layout: k+m=" + std::to_string(width) + " needs " +
                               std::to_string(width) +
                               " data servers in distinct failure domains, the cluster has " +
                               std::to_string(domains.size()));
    }
  }
  if (!usable.ok()) {
    Logger("meta")->warn("refuse layout inode={} layout='{}' reason='{}'", n->ino.value(),
                         LayoutText(*l), usable.message());
    return usable;
  }
  if (n->is_dir()) {
    n->dir_default = *l;
  } else {
    if (n->size != 0) {
      return InvalidArgument("layout: a file's layout can change only while its size is 0");
    }
    FileLayout nl = *l;
    {
      MutexLock lock(cluster_mu_);
      AQ_RETURN_IF_ERROR(EnsurePgTable(nl.k + nl.m));
      nl.pg_count = static_cast<uint32_t>(pg_tables_.at(nl.k + nl.m).pgs.size());
    }
    nl.pg_start = static_cast<uint32_t>(n->ino.value() % nl.pg_count);
    n->layout = nl;
  }
  n->ctime = clocks_.wall();
  txn.Dirty(n);
  return OkStatus();
}

namespace {
enum class XattrNs { kUser, kTrusted, kSecurity };

Result<XattrNs> XattrNamespace(std::string_view name) {
  if (name.empty()) return InvalidArgument("empty xattr name");
  if (name.size() > kMaxNameBytes) return Status(Code::kRange, "xattr name over 255 bytes");
  // A namespace prefix alone names nothing (the kernel's own handlers answer EINVAL).
  if (name == "user." || name == "trusted." || name == "security.") {
    return InvalidArgument("xattr name is only a namespace: " + std::string(name));
  }
  if (name.starts_with("user.")) return XattrNs::kUser;
  if (name.starts_with("trusted.")) return XattrNs::kTrusted;
  if (name.starts_with("security.")) return XattrNs::kSecurity;
  return Status(Code::kNotSupported, "xattr namespace not supported: " + std::string(name));
}
}  // namespace

Result<std::string> MetadataService::GetXattr(InodeId ino, std::string_view name,
                                              const Caller& caller) {
  std::shared_lock lock(mu_);
  auto n = LoadInode(ino);
  if (!n.ok()) return n.status();
  if (name == kLayoutXattr) {
    if (n->is_dir()) return LayoutText(n->dir_default.empty() ? default_layout_ : n->dir_default);
    if (n->is_reg()) return LayoutText(n->layout);
    return Status(Code::kNoData, "no layout on this file type");
  }
  if (name == kPlacementXattr) {
    if (!n->is_reg() || n->layout.empty()) return Status(Code::kNoData, "no placement");
    return fmt::format("pg_width={} pg_start={} pg_count={}", n->layout.k + n->layout.m,
                       n->layout.pg_start, n->layout.pg_count);
  }
  auto ns = XattrNamespace(name);
  if (!ns.ok()) return ns.status();
  if (*ns == XattrNs::kUser) AQ_RETURN_IF_ERROR(CheckAccess(*n, caller, R_OK));
  if (*ns == XattrNs::kTrusted && caller.uid != 0) {
    return Status(Code::kNoData, "trusted xattrs are root's");
  }
  auto v = store_->GetXattr(ino, name);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return Status(Code::kNoData, "no xattr " + std::string(name));
  return std::move(**v);
}

Status MetadataService::SetXattr(InodeId ino, std::string_view name, std::string_view value,
                                 uint32_t flags, const Caller& caller) {
  if (flags & ~uint32_t{XATTR_CREATE | XATTR_REPLACE}) return InvalidArgument("xattr: bad flags");
  if ((flags & XATTR_CREATE) && (flags & XATTR_REPLACE)) {
    return InvalidArgument("xattr: CREATE and REPLACE together");
  }
  std::unique_lock lock(mu_);
  Txn txn(this);
  auto nr = txn.Get(ino);
  if (!nr.ok()) return nr.status();
  Inode* n = *nr;
  if (name == kLayoutXattr) {
    AQ_RETURN_IF_ERROR(SetLayoutXattr(txn, n, value, caller));
    return Apply(txn, false);
  }
  if (name == kPlacementXattr) {
    return Status(Code::kNotPermitted, "aquifer.placement is read-only (set aquifer.layout)");
  }
  auto ns = XattrNamespace(name);
  if (!ns.ok()) return ns.status();
  if (*ns == XattrNs::kUser) {
    if (!n->is_reg() && !n->is_dir()) {
      return Status(Code::kNotPermitted, "user xattrs only on files and directories");
    }
    AQ_RETURN_IF_ERROR(CheckAccess(*n, caller, W_OK));
  } else if (caller.uid != 0) {
    return Status(Code::kNotPermitted, "trusted and security xattrs need root");
  }
  if (value.size() > kMaxXattrValueBytes) return Status(Code::kRange, "xattr value over 64 KiB");
  auto existing = store_->GetXattr(ino, name);
  if (!existing.ok()) return existing.status();
  if ((flags & XATTR_CREATE) && existing->has_value()) {
    return AlreadyExists("xattr " + std::string(name) + " exists");
  }
  if ((flags & XATTR_REPLACE) && !existing->has_value()) {
    return Status(Code::kNoData, "no xattr " + std::string(name));
  }
  txn.batch.PutXattr(ino, name, value);
  n->ctime = clocks_.wall();
  txn.Dirty(n);
  return Apply(txn, false);
}

Result<std::vector<std::string>> MetadataService::ListXattr(InodeId ino, const Caller& caller) {
  std::shared_lock lock(mu_);
  auto n = LoadInode(ino);
  if (!n.ok()) return n.status();
  auto names = store_->ListXattrNames(ino);
  if (!names.ok()) return names.status();
  // aquifer.layout is never listed (see docs/design.md): copies never carry it along.
  if (caller.uid != 0) {
    std::erase_if(*names, [](const std::string& s) { return s.starts_with("trusted."); });
  }
  return names;
}

Status MetadataService::RemoveXattr(InodeId ino, std::string_view name, const Caller& caller) {
  std::unique_lock lock(mu_);
  Txn txn(this);
  auto nr = txn.Get(ino);
  if (!nr.ok()) return nr.status();
  Inode* n = *nr;
  if (name == kLayoutXattr) {
    if (!n->is_dir()) return Status(Code::kNotPermitted, "a file's layout cannot be removed");
    if (caller.uid != 0 && caller.uid != n->uid) {
      return Status(Code::kNotPermitted, "layout: not the owner");
    }
    if (n->dir_default.empty()) return Status(Code::kNoData, "no default layout set here");
    n->dir_default = FileLayout{};
    n->ctime = clocks_.wall();
    txn.Dirty(n);
    return Apply(txn, false);
  }
  auto ns = XattrNamespace(name);
  if (!ns.ok()) return ns.status();
  if (*ns == XattrNs::kUser) {
    AQ_RETURN_IF_ERROR(CheckAccess(*n, caller, W_OK));
  } else if (caller.uid != 0) {
    return Status(Code::kNotPermitted, "trusted and security xattrs need root");
  }
  auto existing = store_->GetXattr(ino, name);
  if (!existing.ok()) return existing.status();
  if (!existing->has_value()) return Status(Code::kNoData, "no xattr " + std::string(name));
  txn.batch.DeleteXattr(ino, name);
  n->ctime = clocks_.wall();
  txn.Dirty(n);
  return Apply(txn, false);
}

Result<FsStats> MetadataService::StatFs() {
  FsStats out;
  {
    std::shared_lock lock(mu_);
    out.files = inode_count_;
  }
  MutexLock lock(cluster_mu_);
  // A file system several data servers share (the local cluster's one disk) counts once, with
  // its own free space (whoever used it); a server with a configured capacity counts that.
  std::set<std::string> disks;
  for (const auto& [id, s] : servers_) {
    if (!s.up || s.record.state == MemberState::kRemoved) continue;
    if (!s.fs_id.empty()) {
      if (!disks.insert(s.fs_id).second) continue;
      out.total_bytes += s.record.capacity_bytes;
      out.free_bytes += std::min(s.fs_free_bytes, s.record.capacity_bytes);
      continue;
    }
    out.total_bytes += s.record.capacity_bytes;
    out.free_bytes += s.record.capacity_bytes - std::min(s.record.used_bytes,
                                                         s.record.capacity_bytes);
  }
  const uint64_t k = options_.k, w = options_.k + options_.m;
  out.usable_total_bytes = static_cast<uint64_t>(static_cast<long double>(out.total_bytes) * k / w);
  out.usable_free_bytes = static_cast<uint64_t>(static_cast<long double>(out.free_bytes) * k / w);
  return out;
}

// --- membership -------------------------------------------------------------------------------
void MetadataService::BumpMapVersion() { ++map_version_; }

Result<std::pair<ServerId, uint32_t>> MetadataService::RegisterServer(
    const ServerRegistration& reg) {
  if (reg.server_uuid.empty()) return InvalidArgument("register: empty server_uuid");
  if (reg.address.empty()) return InvalidArgument("register: empty address");
  MutexLock lock(cluster_mu_);
  ServerState* found = nullptr;
  for (auto& [id, s] : servers_) {
    if (s.record.uuid == reg.server_uuid) found = &s;
  }
  ServerState next;
  if (found) {
    next = *found;
  } else {
    next.record.id = ServerId(next_server_);
    next.record.uuid = reg.server_uuid;
  }
  bool changed = !found || !found->up || found->record.address != reg.address ||
                 found->record.failure_domain != reg.failure_domain;
  // A new server, a removed one coming back (it rejoins "in"), or one that was down (its
  // positions may have been repaired away): plan a rebalance.
  const bool rejoin = found && found->record.state == MemberState::kRemoved;
  if (rejoin) next.record.state = MemberState::kIn;
  if (!found || rejoin || !found->up) rebalance_wanted_ = true;
  next.record.address = reg.address;
  next.record.failure_domain = reg.failure_domain;
  next.record.capacity_bytes = reg.capacity_bytes;
  next.record.used_bytes = reg.used_bytes;
  next.fs_id = reg.fs_id;
  next.fs_free_bytes = reg.fs_free_bytes;
  next.up = true;
  next.last_heartbeat_ms = clocks_.mono_ms();
  StoreBatch b;
  b.PutServer(next.record);
  if (changed) b.PutCounter("map_version", map_version_ + 1);
  AQ_RETURN_IF_ERROR(store_->Write(b, true));
  if (!found) next_server_++;
  if (changed) BumpMapVersion();
  ServerId id = next.record.id;
  Logger("meta")->info("register server={} uuid={} address={} domain={} new={}", id.value(),
                       reg.server_uuid, reg.address, reg.failure_domain, found == nullptr);
  events_.Record(EventSeverity::kInfo,
                 fmt::format("data server {} ({}, {}) {}", id.value(),
                             Printable(reg.failure_domain), Printable(reg.address),
                             found == nullptr ? "joined" : "registered again"));
  servers_[id.value()] = std::move(next);
  ScheduleDefaultPgTable(clocks_.mono_ms());
  MoveBatch mb;
  Status planned = Reconcile(clocks_.mono_ms(), mb, /*rebalance=*/false);
  if (!planned.ok()) Logger("meta")->error("plan moves failed: {}", planned.ToString());
  uint32_t interval = std::max<uint32_t>(10, options_.heartbeat_timeout_ms / 3);
  return std::make_pair(id, interval);
}

Result<HeartbeatReply> MetadataService::Heartbeat(const HeartbeatArgs& a) {
  MutexLock lock(cluster_mu_);
  auto it = servers_.find(a.server.value());
  if (it == servers_.end()) {
    return NotFound("unknown server id " + a.server.ToString() + ": register again");
  }
  ServerState& s = it->second;
  s.record.capacity_bytes = a.capacity_bytes;
  s.record.used_bytes = a.used_bytes;
  s.fs_id = a.fs_id;
  s.fs_free_bytes = a.fs_free_bytes;
  s.chunk_count = a.chunk_count;
  s.chunks_scrubbed = a.chunks_scrubbed;
  s.corrupt_found = a.corrupt_found;
  s.corrupt_repaired = a.corrupt_repaired;
  if (a.backfills_complete < s.backfills_complete) {
    // It restarted: the backfill it runs after registering covers every write before now.
    s.complete_at_ask = 0;
    s.asked_epoch = s.degraded_epoch;
  }
  s.backfills_complete = a.backfills_complete;
  if (s.backfills_complete > s.complete_at_ask && s.done_epoch < s.asked_epoch) {
    s.done_epoch = s.asked_epoch;
    SettleDegradedWrites();
  }
  const int64_t now = clocks_.mono_ms();
  s.last_heartbeat_ms = now;
  StoreBatch b;
  if (!s.up && s.record.state != MemberState::kRemoved) {
    s.up = true;
    rebalance_wanted_ = true;  // its positions may have been repaired away meanwhile
    BumpMapVersion();
    b.PutCounter("map_version", map_version_);
    Logger("meta")->info("server up server={}", a.server.value());
    events_.Record(EventSeverity::kInfo,
                   fmt::format("data server {} ({}) is up again", a.server.value(),
                               Printable(s.record.failure_domain)));
    ScheduleDefaultPgTable(now);
  }
  std::vector<uint64_t> finished;
  for (uint64_t id : a.gc_done) {
    auto t = gc_tasks_.find(id);
    if (t == gc_tasks_.end()) continue;
    auto& acked = t->second.acked;
    if (std::find(acked.begin(), acked.end(), a.server.value()) == acked.end()) {
      acked.push_back(a.server.value());
    }
    bool all = true;
    for (const auto& [sid, other] : servers_) {
      if (other.record.state == MemberState::kRemoved) continue;  // never answers again
      if (std::find(acked.begin(), acked.end(), sid) == acked.end()) all = false;
    }
    if (all) {
      b.DeleteGcTask(id);
      finished.push_back(id);
    } else {
      b.PutGcTask(t->second);
    }
  }
  // An ack lost to a crash is harmless: the task is resent and GC is idempotent.
  if (!b.empty()) AQ_RETURN_IF_ERROR(store_->Write(b, false));
  for (uint64_t id : finished) gc_tasks_.erase(id);

  // Moves: progress and completion reported by the destination; PG GCs applied.
  MoveBatch mb;
  for (const MoveProgress& p : a.moves) {
    auto m = moves_.find(p.task_id);
    if (m == moves_.end() || m->second.task.to != a.server) continue;  // stale or re-planned
    MoveState& ms = m->second;
    ms.progress = p;
    if (ms.first_report_ms < 0) {
      ms.first_report_ms = now;
      ms.first_report_bytes = p.bytes_done;
    } else if (now > ms.first_report_ms && p.bytes_done >= ms.first_report_bytes) {
      ms.rate_bytes_per_s = (p.bytes_done - ms.first_report_bytes) * 1000 /
                            static_cast<uint64_t>(now - ms.first_report_ms);
    }
    if (p.done) {
      CompleteMove(mb, p.task_id, now);
    } else if (!p.error.empty()) {
      // Failed at the destination: try another server; else the same one again under a new id
      // (a new id restarts the destination's worker).
      const MoveTask task = ms.task;
      Logger("meta")->warn("move failed task={} to={} error={}", task.id, task.to.value(),
                           p.error);
      events_.Record(EventSeverity::kWarning,
                     fmt::format("move task {} to data server {} failed: {}", task.id,
                                 task.to.value(), Printable(p.error)));
      DropMove(mb, task.id, /*gc_destination=*/false, now);
      auto to = ChooseDestination(pg_tables_.at(task.pg_width), task.pg_index, task.position,
                                  {task.to.value(), task.from.value()}, PlannedLoad(std::nullopt));
      if (to) QueuePgGc(mb, task.to, PgPos{task.pg_width, task.pg_index, task.position}, now);
      AddMove(mb, task.pg_width, task.pg_index, task.position, task.from, to ? *to : task.to,
              task.kind, now);
    }
  }
  for (uint64_t id : a.pg_gc_done) {
    auto g = pg_gc_.find(id);
    if (g == pg_gc_.end() || g->second.server != a.server) continue;
    mb.batch.DeletePgGcTask(id);
    pg_gc_.erase(g);
    pg_gc_not_before_.erase(id);
  }
  Status planned = Reconcile(now, mb, /*rebalance=*/false);
  if (!planned.ok()) return planned;

  HeartbeatReply reply;
  reply.map_version = map_version_;
  reply.state = s.record.state;
  reply.backfill = std::exchange(s.backfill_wanted, false);
  if (reply.backfill) {
    s.asked_epoch = s.degraded_epoch;  // a pass that completes after now covers these writes
    s.complete_at_ask = s.backfills_complete;
  }
  for (const auto& [id, m] : moves_) {
    if (!m.running || m.task.to != a.server) continue;
    reply.moves.push_back(MoveAssignment{m.task, uint64_t{move_rate_mib_} * kMiB});
  }
  std::vector<uint64_t> obsolete;
  for (const auto& [id, g] : pg_gc_) {
    if (g.server != a.server || pg_gc_not_before_[id] > now) continue;
    // The server holds (or receives) that position again: deleting would lose data.
    const PgTable* t = pg_tables_.count(g.pg_width) ? &pg_tables_.at(g.pg_width) : nullptr;
    if (t && g.pg_index < t->pgs.size() && g.position < t->pgs[g.pg_index].size() &&
        (t->pgs[g.pg_index][g.position] == a.server ||
         (!t->pending[g.pg_index].empty() && t->pending[g.pg_index][g.position] == a.server))) {
      obsolete.push_back(id);
      continue;
    }
    if (reply.pg_gc.size() < 4096) reply.pg_gc.push_back(g);
  }
  if (!obsolete.empty()) {
    for (uint64_t id : obsolete) {
      mb.batch.DeletePgGcTask(id);
      pg_gc_.erase(id);
      pg_gc_not_before_.erase(id);
    }
    AQ_RETURN_IF_ERROR(FlushMoves(mb, false));
  }
  for (const auto& [id, t] : gc_tasks_) {
    if (t.held) continue;  // a truncate of a file still open: after its last close
    if (std::find(t.acked.begin(), t.acked.end(), a.server.value()) != t.acked.end()) continue;
    GcTask copy = t;
    copy.acked.clear();
    reply.gc.push_back(std::move(copy));
    if (reply.gc.size() >= 4096) break;
  }
  if (!reply.gc.empty()) AQ_RETURN_IF_ERROR(AQ_FAILPOINT_STATUS("meta.heartbeat.before_gc_reply"));
  return reply;
}

Status MetadataService::EnsurePgTable(uint32_t width) {
  if (pg_tables_.count(width)) return OkStatus();
  std::vector<const ServerState*> up;
  std::set<std::string> domains;
  for (const auto& [id, s] : servers_) {
    if (!Eligible(s)) continue;  // up and "in": draining and removed servers take no new PGs
    up.push_back(&s);
    domains.insert(s.record.failure_domain);
  }
  if (domains.size() < width) {
    return Unavailable("need " + std::to_string(width) +
                       " data servers in distinct failure domains, " +
                       std::to_string(domains.size()) + " are up");
  }
  // Each PG takes, per failure domain, at most one server; servers with the fewest targets so
  // far first, ties broken by a hash of (width, pg, server) (rendezvous order), so load spreads
  // evenly and the choice is deterministic.
  PgTable table;
  table.width = width;
  table.sized_for = static_cast<uint32_t>(up.size());
  table.pending.resize(options_.pgs_per_table);
  std::map<uint32_t, uint32_t> load;
  for (uint32_t pg = 0; pg < options_.pgs_per_table; ++pg) {
    std::vector<const ServerState*> order = up;
    auto score = [&](const ServerState* s) {
      return Mix64((uint64_t{width} << 48) ^ (uint64_t{pg} << 20) ^ s->record.id.value());
    };
    std::sort(order.begin(), order.end(), [&](const ServerState* a, const ServerState* b) {
      uint32_t la = load[a->record.id.value()], lb = load[b->record.id.value()];
      if (la != lb) return la < lb;
      return score(a) > score(b);
    });
    std::set<std::string> used;
    std::vector<ServerId> targets;
    for (const ServerState* s : order) {
      if (targets.size() == width) break;
      if (!used.insert(s->record.failure_domain).second) continue;
      targets.push_back(s->record.id);
      load[s->record.id.value()]++;
    }
    table.pgs.push_back(std::move(targets));
  }
  StoreBatch b;
  b.PutPgTable(table);
  b.PutCounter("map_version", map_version_ + 1);
  AQ_RETURN_IF_ERROR(store_->Write(b, true));
  BumpMapVersion();
  Logger("meta")->info("build pg_table width={} pgs={} servers={}", width, table.pgs.size(),
                       up.size());
  pg_tables_[width] = std::move(table);
  return OkStatus();
}

void MetadataService::ScheduleDefaultPgTable(int64_t now) {
  const uint32_t width = default_layout_.k + default_layout_.m;
  if (pg_tables_.count(width) || default_pg_due_ms_ >= 0) return;
  std::set<std::string> domains;
  for (const auto& [id, s] : servers_) {
    if (Eligible(s)) domains.insert(s.record.failure_domain);
  }
  if (domains.size() < width) return;
  // One heartbeat interval: servers started together register within it and all get PGs (a
  // table built on the first k + m alone would give the rest only appended PGs). It is shorter
  // than the heartbeat timeout, so a server that dies meanwhile is still up at the build and
  // gets its positions (degraded, then repaired), and creates work without it.
  default_pg_due_ms_ = now + std::max<int64_t>(10, options_.heartbeat_timeout_ms / 3);
}

void MetadataService::BuildDueDefaultPgTable(int64_t now) {
  if (default_pg_due_ms_ < 0 || now < default_pg_due_ms_) return;
  default_pg_due_ms_ = -1;
  const uint32_t width = default_layout_.k + default_layout_.m;
  if (pg_tables_.count(width)) return;  // a create built it first
  Status built = EnsurePgTable(width);
  if (built.code() == Code::kUnavailable) {
    // Servers went down since the schedule; the next one to come up schedules it again.
    Logger("meta")->info("defer default pg_table width={}: {}", width, built.message());
  } else if (!built.ok()) {
    Logger("meta")->error("build default pg_table width={} failed: {}", width, built.ToString());
    default_pg_due_ms_ = now + std::max<int64_t>(10, options_.heartbeat_timeout_ms / 3);
  }
}

ClusterMap MetadataService::GetClusterMap() {
  MutexLock lock(cluster_mu_);
  ClusterMap map;
  map.version = map_version_;
  int64_t now = clocks_.mono_ms();
  std::map<uint32_t, uint32_t> held;
  for (const auto& [w, t] : pg_tables_) {
    for (const auto& pg : t.pgs) {
      for (ServerId s : pg) held[s.value()]++;
    }
  }
  for (const auto& [id, s] : servers_) {
    ServerStatus st{s.record, s.up && s.record.state != MemberState::kRemoved, s.chunk_count,
                    now - s.last_heartbeat_ms};
    st.chunks_scrubbed = s.chunks_scrubbed;
    st.corrupt_found = s.corrupt_found;
    st.corrupt_repaired = s.corrupt_repaired;
    st.pg_positions = held[id];
    map.servers.push_back(std::move(st));
  }
  for (const auto& [w, t] : pg_tables_) map.pg_tables.push_back(t);
  map.default_k = options_.k;
  map.default_m = options_.m;
  map.default_unit_bytes = options_.unit_bytes;
  map.restore_version_floor = restore_version_floor_;
  map.restore_ino_floor = restore_ino_floor_;
  return map;
}

void MetadataService::DiscountPause(int64_t pause_ms) {
  if (pause_ms <= 0) return;
  Logger("meta")->warn("this server was paused for {} ms: not counted as silence of data servers "
                       "or sessions", pause_ms);
  events_.Record(EventSeverity::kWarning,
                 fmt::format("the metadata server was paused for {} ms", pause_ms));
  const int64_t now = clocks_.mono_ms();
  {
    std::lock_guard lock(mu_);
    for (auto& [id, s] : sessions_) {
      s->last_seen_ms.store(std::min(now, s->last_seen_ms.load() + pause_ms));
    }
  }
  MutexLock lock(cluster_mu_);
  for (auto& [id, s] : servers_) s.last_heartbeat_ms = std::min(now, s.last_heartbeat_ms + pause_ms);
}

void MetadataService::Tick() {
  const int64_t now = clocks_.mono_ms();
  {
    std::unique_lock lock(mu_);
    std::vector<uint64_t> expired;
    for (const auto& [id, s] : sessions_) {
      if (now - s->last_seen_ms.load() > options_.session_ttl_ms) expired.push_back(id);
    }
    if (!expired.empty()) {
      Txn txn(this);
      for (uint64_t id : expired) {
        const std::string client = sessions_.at(id)->client_name;
        ReleaseAllOf(txn, id);
        CollectUnusedReservations(txn, id);
        Logger("meta")->info("expire session={}", id);
        events_.Record(EventSeverity::kWarning,
                       fmt::format("session {} of {} expired: silent over {} ms", id,
                                   Printable(client), options_.session_ttl_ms));
      }
      Status st = Apply(txn, false);
      if (!st.ok()) Logger("meta")->error("expire sessions failed: {}", st.ToString());
    }
  }
  MutexLock lock(cluster_mu_);
  bool changed = false;
  for (auto& [id, s] : servers_) {
    if (s.up && now - s.last_heartbeat_ms > options_.heartbeat_timeout_ms) {
      s.up = false;
      s.down_since_ms = now;
      changed = true;
      // A removed server is not expected to answer (after a restart it was loaded as up until
      // its first missed heartbeat): no warning for it.
      if (s.record.state == MemberState::kRemoved) continue;
      Logger("meta")->warn("server down server={} silent_ms={}", id, now - s.last_heartbeat_ms);
      events_.Record(EventSeverity::kWarning,
                     fmt::format("data server {} ({}) marked down: silent {} ms", id,
                                 Printable(s.record.failure_domain), now - s.last_heartbeat_ms));
    }
  }
  if (changed) {
    BumpMapVersion();
    StoreBatch b;
    b.PutCounter("map_version", map_version_);
    Status st = store_->Write(b, false);
    if (!st.ok()) Logger("meta")->error("persist map version failed: {}", st.ToString());
  }
  BuildDueDefaultPgTable(now);
  MoveBatch mb;
  Status planned = Reconcile(now, mb, /*rebalance=*/true);  // logs its own failure
  (void)planned;
}

void MetadataService::SettleDegradedWrites() {
  StoreBatch b;
  for (auto it = degraded_writes_.begin(); it != degraded_writes_.end();) {
    auto& ids = it->servers;
    const size_t before = ids.size();
    ids.erase(std::remove_if(ids.begin(), ids.end(),
                             [&](uint32_t id) REQUIRES(cluster_mu_) {
                               auto s = servers_.find(id);
                               // A removed server's positions are rebuilt elsewhere by repair.
                               return s == servers_.end() ||
                                      s->second.record.state == MemberState::kRemoved ||
                                      s->second.done_epoch >= it->epoch;
                             }),
              ids.end());
    if (ids.empty()) {
      b.DeleteDegradedWrite(it->epoch);
    } else if (ids.size() != before) {
      b.PutDegradedWrite(DegradedWriteRecord{it->epoch, it->stripes, ids});
    }
    it = ids.empty() ? degraded_writes_.erase(it) : std::next(it);
  }
  if (b.empty()) return;
  Status st = store_->Write(b, false);
  if (!st.ok()) Logger("meta")->error("persist settled degraded writes failed: {}", st.ToString());
}

std::vector<GcTask> MetadataService::PendingGcTasks() {
  bool eof = false;
  return GcTasksAfter(0, SIZE_MAX, &eof);
}

std::vector<GcTask> MetadataService::GcTasksAfter(uint64_t after_id, size_t limit, bool* eof) {
  MutexLock lock(cluster_mu_);
  std::vector<GcTask> out;
  auto it = gc_tasks_.upper_bound(after_id);
  for (; it != gc_tasks_.end() && out.size() < limit; ++it) out.push_back(it->second);
  *eof = it == gc_tasks_.end();
  return out;
}

uint64_t MetadataService::InodeCount() {
  std::shared_lock lock(mu_);
  return inode_count_;
}

}  // namespace aquifer::meta
