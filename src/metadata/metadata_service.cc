// MetadataService: start-up, caches, transactions, and the namespace operations.
#include <fcntl.h>
#include <linux/fs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "common/failpoint.h"
#include "common/logging.h"
#include "metadata/service_internal.h"

namespace aquifer::meta {

Clocks Clocks::System() {
  Clocks c;
  c.wall = [] {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return Timespec{ts.tv_sec, static_cast<uint32_t>(ts.tv_nsec)};
  };
  c.mono_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  return c;
}

Status ValidateName(std::string_view name) {
  if (name.size() > kMaxNameBytes) return Status(Code::kNameTooLong, "name over 255 bytes");
  if (name.empty()) return InvalidArgument("empty name");
  if (name == "." || name == "..") return InvalidArgument("name '.' or '..' not allowed here");
  if (name.find('/') != std::string_view::npos) return InvalidArgument("name holds '/'");
  if (name.find('\0') != std::string_view::npos) return InvalidArgument("name holds NUL");
  return OkStatus();
}

bool InGroup(const Caller& caller, uint32_t gid) {
  if (caller.gid == gid) return true;
  return std::find(caller.groups.begin(), caller.groups.end(), gid) != caller.groups.end();
}

Status CheckAccess(const Inode& n, const Caller& c, int mask) {
  if (c.uid == 0) {
    if ((mask & X_OK) && !n.is_dir() && (n.mode & 0111) == 0) {
      return PermissionDenied("no execute bit for inode " + n.ino.ToString());
    }
    return OkStatus();
  }
  uint32_t bits;
  if (c.uid == n.uid) {
    bits = (n.mode >> 6) & 7;
  } else if (InGroup(c, n.gid)) {
    bits = (n.mode >> 3) & 7;
  } else {
    bits = n.mode & 7;
  }
  if ((bits & static_cast<uint32_t>(mask)) != static_cast<uint32_t>(mask)) {
    return PermissionDenied("uid " + std::to_string(c.uid) + " lacks access to inode " +
                            n.ino.ToString());
  }
  return OkStatus();
}

Status CheckSticky(const Inode& dir, const Inode& victim, const Caller& c) {
  if (!(dir.mode & S_ISVTX) || c.uid == 0 || c.uid == dir.uid || c.uid == victim.uid) {
    return OkStatus();
  }
  return Status(Code::kNotPermitted, "sticky directory: not the owner");
}

namespace {
std::string DentryCacheKey(InodeId parent, std::string_view name) {
  std::string k(8, '\0');
  uint64_t p = parent.value();
  std::memcpy(k.data(), &p, 8);
  k.append(name);
  return k;
}
}  // namespace

// --- start-up ---------------------------------------------------------------------------------
MetadataService::MetadataService(std::unique_ptr<NamespaceStore> store, const MetaOptions& options,
                                 Clocks clocks)
    : store_(std::move(store)),
      options_(options),
      clocks_(std::move(clocks)),
      default_layout_{options.k, options.m, options.unit_bytes, 0, 0},
      started_unix_ms_(std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count()) {}

MetadataService::~MetadataService() = default;

namespace {
// Sessions that hold anything on an inode: opens, its lease, locks.
std::set<uint64_t> HoldersOf(const InodeState& st) {
  std::set<uint64_t> out;
  for (const auto& [s, oc] : st.opens) out.insert(s);
  if (st.lease_holder != 0) out.insert(st.lease_holder);
  for (const LockRecord& l : st.locks) out.insert(l.session);
  return out;
}
}  // namespace

Result<std::unique_ptr<MetadataService>> MetadataService::Open(
    std::unique_ptr<NamespaceStore> store, const MetaOptions& options, Clocks clocks) {
  AQ_RETURN_IF_ERROR(ValidateMetaOptions(options));
  std::unique_ptr<MetadataService> svc(new MetadataService(std::move(store), options, clocks));
  AQ_RETURN_IF_ERROR(svc->Load());
  return svc;
}

Status MetadataService::Load() {
  auto log = Logger("meta");
  auto counter = [&](const char* name, uint64_t* out) -> Status {
    auto v = store_->GetCounter(name);
    if (!v.ok()) return v.status();
    *out = *v;
    return OkStatus();
  };
  uint64_t boot = 0, map_version = 0;
  AQ_RETURN_IF_ERROR(counter("next_ino", &next_ino_));
  AQ_RETURN_IF_ERROR(counter("inodes", &inode_count_));
  AQ_RETURN_IF_ERROR(counter("next_gc", &next_gc_id_));
  AQ_RETURN_IF_ERROR(counter("version_reserved", &version_reserved_));
  AQ_RETURN_IF_ERROR(counter("boot", &boot));
  AQ_RETURN_IF_ERROR(counter("map_version", &map_version));
  // Written by a restore from a backup (backup.h); all 0 otherwise.
  uint64_t id_floor = 0, server_id_floor = 0, restores = 0;
  AQ_RETURN_IF_ERROR(counter("restore_version_floor", &restore_version_floor_));
  AQ_RETURN_IF_ERROR(counter("restore_ino_floor", &restore_ino_floor_));
  AQ_RETURN_IF_ERROR(counter("id_floor", &id_floor));
  AQ_RETURN_IF_ERROR(counter("server_id_floor", &server_id_floor));
  AQ_RETURN_IF_ERROR(counter("restores", &restores));
  next_ino_ = std::max<uint64_t>(next_ino_, 2);
  next_gc_id_ = std::max<uint64_t>(next_gc_id_, 1);
  // Versions reserved before a restart may have been handed out: start past all of them.
  next_version_ = std::max<uint64_t>(version_reserved_, 1);
  generation_ = boot + 1;
  // Unique per run (a restore can bring an old boot count back): the random low bits.
  recall_epoch_ = (generation_ << 32) | (std::random_device{}() | 1u);
  map_version_ = map_version + 1;  // liveness is rebuilt, so clients must refetch

  StoreBatch batch;
  batch.PutCounter("boot", generation_);
  batch.PutCounter("map_version", map_version_);
  auto root = store_->GetInode(kRootInode);
  if (!root.ok()) return root.status();
  if (!root->has_value()) {
    Inode r;
    r.ino = kRootInode;
    r.generation = generation_;
    r.mode = S_IFDIR | 0755;
    r.nlink = 2;
    r.size = kDirSizeBytes;
    r.parent = kRootInode;
    r.atime = r.mtime = r.ctime = clocks_.wall();
    batch.PutInode(r);
    batch.PutCounter("next_ino", next_ino_);
    inode_count_ = 1;
    batch.PutCounter("inodes", inode_count_);
    log->info("create root inode=1 db={}", options_.db);
  }
  AQ_RETURN_IF_ERROR(store_->Write(batch, /*sync=*/true));

  auto servers = store_->LoadServers();
  if (!servers.ok()) return servers.status();
  int64_t now = clocks_.mono_ms();
  for (ServerRecord& s : *servers) {
    next_server_ = std::max(next_server_, s.id.value() + 1);
    ServerState st;
    st.record = std::move(s);
    st.up = true;  // grace: a server gets one heartbeat timeout to show up after our restart
    st.last_heartbeat_ms = now;
    servers_[st.record.id.value()] = std::move(st);
  }
  auto tables = store_->LoadPgTables();
  if (!tables.ok()) return tables.status();
  for (PgTable& t : *tables) pg_tables_[t.width] = std::move(t);
  ScheduleDefaultPgTable(now);  // known servers are up for their grace period
  AQ_RETURN_IF_ERROR(LoadMoves());
  // After a restore: ids the lost server may have handed out after the backup are skipped (a
  // data server still running such a move, or heartbeating with such a server id).
  next_move_id_ = std::max(next_move_id_, id_floor);
  next_pg_gc_id_ = std::max(next_pg_gc_id_, id_floor);
  next_server_ = static_cast<uint32_t>(std::max<uint64_t>(next_server_, server_id_floor));
  if (restores > 0) {
    log->info("restored namespace restores={} version_floor={} ino_floor={}", restores,
              restore_version_floor_, restore_ino_floor_);
  }
  // Degraded writes not yet backfilled: their servers are asked for a backfill again.
  auto degraded = store_->LoadDegradedWrites();
  if (!degraded.ok()) return degraded.status();
  for (DegradedWriteRecord& rec : *degraded) {
    DegradedWrite w;
    w.stripes = rec.stripes;
    w.epoch = rec.epoch;
    w.servers = std::move(rec.servers);
    degraded_epoch_ = std::max(degraded_epoch_, w.epoch);
    for (uint32_t id : w.servers) {
      auto it = servers_.find(id);
      if (it == servers_.end()) continue;
      it->second.degraded_epoch = std::max(it->second.degraded_epoch, w.epoch);
      it->second.backfill_wanted = true;
    }
    degraded_writes_.push_back(std::move(w));
  }
  if (!degraded_writes_.empty()) {
    log->info("restore degraded_writes={}: their servers are asked for a backfill again",
              degraded_writes_.size());
  }
  auto tasks = store_->LoadGcTasks();
  if (!tasks.ok()) return tasks.status();
  for (GcTask& t : *tasks) gc_tasks_[t.id] = std::move(t);

  auto lost = store_->LoadLostMarkers();
  if (!lost.ok()) return lost.status();
  for (InodeId ino : *lost) {
    auto n = store_->GetInode(ino);
    if (n.ok() && n->has_value() && !(*n)->lost_stripes.empty()) {
      lost_index_[ino.value()] = (*n)->lost_stripes.size();
    }
  }
  if (!lost_index_.empty()) {
    log->warn("data lost: {} files have stripes recorded as lost (aquifer fsck lists them)",
              lost_index_.size());
  }

  AQ_RETURN_IF_ERROR(LoadSessionState(now));
  // Orphans were open when the server stopped: those still open by a recorded session stay until
  // its last close or its end; the others are deleted.
  auto orphans = store_->LoadOrphans();
  if (!orphans.ok()) return orphans.status();
  if (!orphans->empty()) {
    std::unique_lock lock(mu_);
    Txn txn(this);
    for (InodeId ino : *orphans) AQ_RETURN_IF_ERROR(MaybeDeleteOrphan(txn, ino));
    AQ_RETURN_IF_ERROR(Apply(txn, /*sync=*/true));
    log->info("delete orphans count={}", orphans->size());
  }
  log->info("load inodes={} next_ino={} servers={} pg_tables={} gc_tasks={} boot={}",
            inode_count_, next_ino_, servers_.size(), pg_tables_.size(), gc_tasks_.size(),
            generation_);
  return OkStatus();
}

// Sessions, opens, leases and locks as the last run left them (docs/design.md "Metadata server
// restarts"). Each recorded session gets a full session ttl from now to call again; an inode state
// naming a session with no record (which no write leaves behind) gives that session an expired
// entry, so the next Tick ends it like any silent session: its opens, lease and locks go.
Status MetadataService::LoadSessionState(int64_t now) {
  auto sessions = store_->LoadSessions();
  if (!sessions.ok()) return sessions.status();
  auto states = store_->LoadInodeStates();
  if (!states.ok()) return states.status();
  std::unique_lock lock(mu_);
  std::set<uint64_t> resync;
  for (const SessionRecord& rec : *sessions) {
    auto sess = std::make_unique<Session>();
    sess->client_name = rec.client_name;
    sess->last_seen_ms.store(now);
    sess->caches.store(rec.caches);
    sessions_[rec.id] = std::move(sess);
    if (rec.caches && options_.cache_lease_ms > 0) resync.insert(rec.id);
    if (!rec.reserved_inos.empty()) {
      std::lock_guard dl(dl_mu_);
      dir_sessions_[rec.id].reserved.assign(rec.reserved_inos.begin(), rec.reserved_inos.end());
    }
  }
  {
    MutexLock recall_lock(recall_mu_);  // a leaf under mu_
    resync_ = std::move(resync);
    if (!resync_.empty()) {
      resync_deadline_ =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.cache_lease_ms);
      resync_open_.store(true);
      Logger("meta")->info("cache leases: {} sessions cached names before the restart; changes "
                           "wait up to {} ms for each to resync", resync_.size(),
                           options_.cache_lease_ms);
    }
  }
  size_t locks = 0, leases = 0, unknown = 0;
  for (auto& [ino, st] : *states) {
    for (uint64_t s : HoldersOf(st)) {
      auto& sess = sessions_[s];
      if (!sess) {
        sess = std::make_unique<Session>();
        sess->last_seen_ms.store(now - options_.session_ttl_ms - 1);
        ++unknown;
      }
      sess->inodes.insert(ino.value());
    }
    locks += st.locks.size();
    leases += st.lease_holder != 0 ? 1 : 0;
    states_[ino.value()] = std::move(st);
  }
  // Truncate GC of an inode still open waits for its last close, as before the restart.
  {
    MutexLock cluster(cluster_mu_);
    for (auto& [id, t] : gc_tasks_) {
      auto st = states_.find(t.ino.value());
      if (st == states_.end() || st->second.opens.empty()) continue;
      t.held = true;
      gc_held_[t.ino.value()].push_back(id);
    }
  }
  if (!sessions_.empty() || !states_.empty()) {
    Logger("meta")->info("restore sessions={} inode_states={} leases={} locks={} "
                         "unrecorded_sessions={}: each session has {} ms to call again",
                         sessions->size(), states_.size(), leases, locks, unknown,
                         options_.session_ttl_ms);
  }
  return OkStatus();
}

// --- caches -----------------------------------------------------------------------------------
Result<std::optional<Inode>> MetadataService::FindInode(InodeId ino) {
  {
    MutexLock lock(cache_mu_);
    auto it = inode_cache_.find(ino.value());
    if (it != inode_cache_.end()) {
      ++cache_counts_.inode_hits;
      return std::optional<Inode>(it->second);
    }
    ++cache_counts_.inode_misses;
  }
  auto n = store_->GetInode(ino);
  if (n.ok() && n->has_value()) CachePutInode(**n);
  return n;
}

Result<Inode> MetadataService::LoadInode(InodeId ino) {
  auto n = FindInode(ino);
  if (!n.ok()) return n.status();
  if (!n->has_value()) return NotFound("no inode " + ino.ToString());
  return std::move(**n);
}

Result<std::optional<Dentry>> MetadataService::FindDentryIn(const Txn& txn, InodeId parent,
                                                            std::string_view name) {
  for (auto it = txn.dentries.rbegin(); it != txn.dentries.rend(); ++it) {
    const auto& [p, n, d] = *it;
    if (p == parent && n == name) return d;  // this transaction's own change of the name
  }
  return FindDentry(parent, name);
}

Result<std::optional<Dentry>> MetadataService::FindDentry(InodeId parent, std::string_view name) {
  std::string key = DentryCacheKey(parent, name);
  {
    MutexLock lock(cache_mu_);
    auto it = dentry_cache_.find(key);
    if (it != dentry_cache_.end()) {
      ++cache_counts_.dentry_hits;
      if (it->second.ino.value() == 0) return std::optional<Dentry>();
      return std::optional<Dentry>(it->second);
    }
    ++cache_counts_.dentry_misses;
  }
  auto d = store_->GetDentry(parent, name);
  if (d.ok()) CachePutDentry(parent, name, *d);
  return d;
}

void MetadataService::CachePutInode(const Inode& inode) {
  MutexLock lock(cache_mu_);
  // Crude bound: drop everything when full. The store is the truth; the cache refills.
  if (inode_cache_.size() >= options_.cache_entries) inode_cache_.clear();
  inode_cache_[inode.ino.value()] = inode;
}

void MetadataService::CacheEraseInode(InodeId ino) {
  MutexLock lock(cache_mu_);
  inode_cache_.erase(ino.value());
}

void MetadataService::CachePutDentry(InodeId parent, std::string_view name,
                                     const std::optional<Dentry>& d) {
  MutexLock lock(cache_mu_);
  if (dentry_cache_.size() >= options_.cache_entries) dentry_cache_.clear();
  dentry_cache_[DentryCacheKey(parent, name)] = d.value_or(Dentry{});
}

// --- replay ---------------------------------------------------------------------------------
namespace {
thread_local RequestTag current_request;
}  // namespace

// Defined in cache_leases.cc: the recall waits this thread's scope collected.
void BeginScopeWaits();
void EndScopeWaits();

MetadataService::RequestScope::RequestScope(RequestTag tag) {
  current_request = tag;
  BeginScopeWaits();
}
MetadataService::RequestScope::~RequestScope() {
  current_request = RequestTag{};
  EndScopeWaits();
}
RequestTag MetadataService::CurrentRequestTag() { return current_request; }

Result<bool> MetadataService::Replayed(const RequestTag& tag) {
  if (tag.session == 0 || tag.id == 0) return false;
  return store_->ReplayApplied(tag.session, tag.id);
}

uint64_t MetadataService::LeaseVersionFor(InodeId ino, SessionId session) {
  std::shared_lock lock(mu_);
  auto st = states_.find(ino.value());
  if (st == states_.end() || session.value() == 0 || st->second.lease_holder != session.value()) {
    return 0;
  }
  return st->second.lease_version;
}

// --- transactions -----------------------------------------------------------------------------
uint64_t MetadataService::NextWriteVersion(Txn& txn) {
  return next_version_ + txn.new_versions++;
}

void MetadataService::AddGcTask(Txn& txn, InodeId ino, uint64_t from_stripe,
                                uint64_t max_version, bool held) {
  GcTask t;
  t.held = held;
  t.id = next_gc_id_ + txn.new_gc++;
  t.ino = ino;
  t.from_stripe = from_stripe;
  t.max_version = max_version;
  txn.batch.PutGcTask(t);
  txn.gc.push_back(std::move(t));
}

Status MetadataService::Apply(Txn& txn, bool sync) {
  for (uint64_t ino : txn.dirty) txn.batch.PutInode(txn.inodes.at(ino));
  // Lost-stripe markers follow the inodes' lists (lost_index_ is guarded by mu_, held here).
  std::vector<std::pair<uint64_t, size_t>> lost_now;
  for (uint64_t ino : txn.dirty) {
    const size_t lost = txn.inodes.at(ino).lost_stripes.size();
    const bool had = lost_index_.count(ino) > 0;
    if (lost > 0 && !had) txn.batch.PutLostMarker(InodeId(ino));
    if (lost == 0 && had) txn.batch.DeleteLostMarker(InodeId(ino));
    if ((lost > 0) != had || (had && lost_index_.at(ino) != lost)) lost_now.emplace_back(ino, lost);
  }
  for (uint64_t ino : txn.deleted) {
    if (lost_index_.count(ino)) {
      txn.batch.DeleteLostMarker(InodeId(ino));
      lost_now.emplace_back(ino, 0);
    }
  }
  for (uint64_t ino : txn.deleted) txn.batch.DeleteInode(InodeId(ino));
  if (txn.new_inos) txn.batch.PutCounter("next_ino", next_ino_ + txn.new_inos);
  if (txn.inode_delta) txn.batch.PutCounter("inodes", inode_count_ + txn.inode_delta);
  if (txn.new_gc) txn.batch.PutCounter("next_gc", next_gc_id_ + txn.new_gc);
  uint64_t reserve = version_reserved_;
  if (next_version_ + txn.new_versions > version_reserved_) {
    reserve = next_version_ + txn.new_versions + kVersionReserveStep;
    txn.batch.PutCounter("version_reserved", reserve);
  }
  for (const auto& [ino, st] : txn.states) txn.batch.PutInodeState(InodeId(ino), st);
  for (const SessionRecord& rec : txn.new_sessions) txn.batch.PutSession(rec);
  for (uint64_t ended : txn.ended_sessions) txn.batch.DeleteSession(ended);
  // The call's tag, so that a retry of it is answered from this record (RequestScope).
  const RequestTag tag = CurrentRequestTag();
  if (tag.session != 0 && tag.id != 0 && !txn.batch.empty() && sessions_.count(tag.session) &&
      std::find(txn.ended_sessions.begin(), txn.ended_sessions.end(), tag.session) ==
          txn.ended_sessions.end()) {
    txn.batch.PutReplay(tag.session, tag.id);
  }
  if (!txn.batch.empty()) AQ_RETURN_IF_ERROR(store_->Write(txn.batch, sync));

  // The batch is in the store: now memory follows.
  version_reserved_ = reserve;
  next_version_ += txn.new_versions;
  next_ino_ += txn.new_inos;
  inode_count_ += txn.inode_delta;
  next_gc_id_ += txn.new_gc;
  for (uint64_t ino : txn.dirty) CachePutInode(txn.inodes.at(ino));
  for (uint64_t ino : txn.deleted) CacheEraseInode(InodeId(ino));
  for (const auto& [ino, lost] : lost_now) {
    if (lost == 0) {
      lost_index_.erase(ino);
    } else {
      lost_index_[ino] = lost;
    }
  }
  for (auto& [parent, name, d] : txn.dentries) CachePutDentry(parent, name, d);
  if (!txn.gc.empty()) {
    MutexLock lock(cluster_mu_);
    for (GcTask& t : txn.gc) {
      if (t.held) gc_held_[t.ino.value()].push_back(t.id);
      gc_tasks_[t.id] = std::move(t);
    }
  }
  for (const SessionRecord& rec : txn.new_sessions) {
    auto sess = std::make_unique<Session>();
    sess->client_name = rec.client_name;
    sess->last_seen_ms.store(clocks_.mono_ms());
    sess->caches.store(rec.caches);
    sessions_[rec.id] = std::move(sess);
  }
  for (auto& [ino, st] : txn.states) InstallState(ino, std::move(st));
  for (uint64_t ended : txn.ended_sessions) sessions_.erase(ended);
  if (!txn.ended_sessions.empty()) {
    EndDirLeases(txn.ended_sessions);
    {
      MutexLock lock(recall_mu_);
      for (uint64_t ended : txn.ended_sessions) {
        recalls_.erase(ended);
        cache_queues_.erase(ended);  // a change waiting for its ack goes on
        resync_.erase(ended);
      }
      if (resync_.empty()) resync_open_.store(false);
    }
    ack_cv_.notify_all();
  }
  RecallCaches(txn);
  return OkStatus();
}

void MetadataService::InstallState(uint64_t ino, InodeState st) {
  auto cur = states_.find(ino);
  const bool was_open = cur != states_.end() && !cur->second.opens.empty();
  const std::set<uint64_t> before =
      cur != states_.end() ? HoldersOf(cur->second) : std::set<uint64_t>{};
  const std::set<uint64_t> after = HoldersOf(st);
  for (uint64_t s : before) {
    auto sess = sessions_.find(s);
    if (!after.count(s) && sess != sessions_.end()) sess->second->inodes.erase(ino);
  }
  for (uint64_t s : after) {
    auto sess = sessions_.find(s);
    if (sess != sessions_.end()) sess->second->inodes.insert(ino);
  }
  const bool open = !st.opens.empty();
  if (st.empty()) {
    if (cur != states_.end()) states_.erase(cur);
  } else if (cur != states_.end()) {
    cur->second = std::move(st);
  } else {
    states_.emplace(ino, std::move(st));
  }
  if (was_open && !open) ReleaseGcHolds(ino);  // the last close: held truncate GC may go
}

void MetadataService::ReleaseGcHolds(uint64_t ino) {
  MutexLock lock(cluster_mu_);
  auto it = gc_held_.find(ino);
  if (it == gc_held_.end()) return;
  for (uint64_t id : it->second) {
    auto t = gc_tasks_.find(id);
    if (t != gc_tasks_.end()) t->second.held = false;
  }
  gc_held_.erase(it);
}

Status MetadataService::DropInode(Txn& txn, Inode* n) {
  const bool open =
      txn.IsOpen(n->ino.value()) || (n->is_reg() && HoldForRecall(txn, n->ino.value()));
  if (open && !n->is_dir()) {
    txn.Dirty(n);  // stays, nlink 0, until the last release or its session's end
    txn.batch.PutOrphan(n->ino);
    return OkStatus();
  }
  txn.Remove(n);
  txn.batch.DeleteAllXattrs(n->ino);
  txn.inode_delta--;
  if (n->is_reg() && !n->layout.empty()) AddGcTask(txn, n->ino, 0, UINT64_MAX);
  return OkStatus();
}

Status MetadataService::MaybeDeleteOrphan(Txn& txn, InodeId ino) {
  if (txn.IsOpen(ino.value())) return OkStatus();
  auto n = txn.Get(ino);
  if (!n.ok()) {
    if (n.status().code() != Code::kNotFound) return n.status();
    txn.batch.DeleteOrphan(ino);  // a stale marker
    return OkStatus();
  }
  if ((*n)->nlink != 0) return OkStatus();
  txn.batch.DeleteOrphan(ino);
  txn.Remove(*n);
  txn.batch.DeleteAllXattrs(ino);
  txn.inode_delta--;
  if ((*n)->is_reg() && !(*n)->layout.empty()) AddGcTask(txn, ino, 0, UINT64_MAX);
  return OkStatus();
}

Status MetadataService::TruncateLocked(Txn& txn, Inode* n, uint64_t new_size, bool opening) {
  if (new_size < n->size && n->is_reg() && !n->layout.empty()) {
    const uint64_t width = n->layout.stripe_width_bytes();
    const uint64_t from = (new_size + width - 1) / width;
    const uint64_t old_end = n->size / width + (n->size % width != 0 ? 1 : 0);
    if (from < old_end && (n->data_version > 0 || !n->stripes.known() ||
                           n->stripes.AnyFrom(from))) {
      // Every version handed out so far is at or below `floor`: this file's committed ones and
      // any a crashed writer used. Chunks of the cut stripes at those versions are never its
      // data again; a stripe written anew gets this floor (Commit).
      const uint64_t floor = next_version_ + txn.new_versions - 1;
      n->truncate_floor = std::max(n->truncate_floor, floor);
      n->stripes.CutFrom(from);
      auto cut = std::lower_bound(n->lost_stripes.begin(), n->lost_stripes.end(), from);
      n->lost_stripes.erase(cut, n->lost_stripes.end());
      // A reader that opened before the truncate still names the old chunks: the GC waits for
      // the inode's last close (Release, ReleaseAllOf).
      const bool open = opening || txn.IsOpen(n->ino.value()) || HoldForRecall(txn, n->ino.value());
      AddGcTask(txn, n->ino, from, floor, open);
    }
  }
  n->size = new_size;
  txn.Dirty(n);
  return OkStatus();
}

Result<Inode> MetadataService::MakeInode(Txn& txn, const Inode& parent, uint32_t mode,
                                         const Caller& caller) {
  Inode n;
  n.ino = InodeId(next_ino_ + txn.new_inos++);
  n.generation = generation_;
  n.mode = mode;
  n.uid = caller.uid;
  n.gid = caller.gid;
  if (parent.mode & S_ISGID) {  // BSD group semantics on setgid directories
    n.gid = parent.gid;
    if (S_ISDIR(mode)) n.mode |= S_ISGID;
  }
  n.atime = n.mtime = n.ctime = clocks_.wall();
  txn.inode_delta++;
  return n;
}

Result<FileLayout> MetadataService::NewFileLayout(const Inode& parent, InodeId ino) {
  FileLayout l = parent.dir_default.empty() ? default_layout_ : parent.dir_default;
  MutexLock lock(cluster_mu_);
  AQ_RETURN_IF_ERROR(EnsurePgTable(l.k + l.m));
  const PgTable& t = pg_tables_.at(l.k + l.m);
  l.pg_count = static_cast<uint32_t>(t.pgs.size());
  l.pg_start = static_cast<uint32_t>(ino.value() % l.pg_count);
  return l;
}

// --- namespace reads --------------------------------------------------------------------------
Result<Inode> MetadataService::Lookup(InodeId parent, std::string_view name,
                                      const Caller& caller, SessionId cacher) {
  if (name != "." && name != "..") AQ_RETURN_IF_ERROR(ValidateName(name));
  std::shared_lock lock(mu_);
  auto p = LoadInode(parent);
  if (!p.ok()) return p.status();
  if (!p->is_dir()) return Status(Code::kNotDirectory, "inode " + parent.ToString());
  AQ_RETURN_IF_ERROR(CheckAccess(*p, caller, X_OK));
  if (name == ".") {
    GrantCache(cacher, {parent.value()});
    return p;
  }
  if (name == "..") {
    auto up = LoadInode(p->parent);
    if (up.ok()) GrantCache(cacher, {parent.value(), up->ino.value()});
    return up;
  }
  auto d = FindDentry(parent, name);
  if (!d.ok()) return d.status();
  if (!d->has_value()) {
    GrantCache(cacher, {parent.value()});  // the negative answer is cached under the parent's
    return NotFound("no entry '" + std::string(name) + "' in inode " + parent.ToString());
  }
  auto child = LoadInode((*d)->ino);
  if (child.ok()) GrantCache(cacher, {parent.value(), child->ino.value()});
  return child;
}

Result<Inode> MetadataService::GetAttr(InodeId ino, SessionId cacher) {
  std::shared_lock lock(mu_);
  auto n = LoadInode(ino);
  if (n.ok()) GrantCache(cacher, {ino.value()});
  return n;
}

Result<std::string> MetadataService::Readlink(InodeId ino) {
  std::shared_lock lock(mu_);
  auto n = LoadInode(ino);
  if (!n.ok()) return n.status();
  if (!n->is_symlink()) return InvalidArgument("inode " + ino.ToString() + " is not a symlink");
  return n->symlink_target;
}

Result<std::vector<DirEntry>> MetadataService::ReadDir(InodeId ino, uint64_t cookie,
                                                       uint32_t max_entries, bool plus,
                                                       const Caller& caller, bool* eof,
                                                       SessionId cacher) {
  std::shared_lock lock(mu_);
  auto d = LoadInode(ino);
  if (!d.ok()) return d.status();
  if (!d->is_dir()) return Status(Code::kNotDirectory, "inode " + ino.ToString());
  AQ_RETURN_IF_ERROR(CheckAccess(*d, caller, R_OK));
  uint32_t max = max_entries == 0 ? kMaxReadDirEntries : std::min(max_entries, kMaxReadDirEntries);
  auto entries = store_->ListDir(ino, cookie, max + 1);
  if (!entries.ok()) return entries.status();
  *eof = entries->size() <= max;
  if (entries->size() > max) entries->resize(max);
  if (plus) {
    for (DirEntry& e : *entries) {
      auto n = LoadInode(e.ino);
      if (!n.ok()) return n.status();
      e.attr = std::move(*n);
    }
  }
  std::vector<uint64_t> cached{ino.value()};
  if (plus) {
    for (const DirEntry& e : *entries) cached.push_back(e.ino.value());
  }
  GrantCache(cacher, cached);
  return entries;
}

// --- namespace mutations ----------------------------------------------------------------------
Result<Inode> MetadataService::CreateNonFile(InodeId parent, std::string_view name, uint32_t mode,
                                             uint64_t rdev, std::string_view symlink_target,
                                             const Caller& caller) {
  AQ_RETURN_IF_ERROR(ValidateName(name));
  std::unique_lock lock(mu_);
  Txn txn(this);
  auto pr = txn.Get(parent);
  if (!pr.ok()) return pr.status();
  Inode* p = *pr;
  if (!p->is_dir()) return Status(Code::kNotDirectory, "inode " + parent.ToString());
  if (p->nlink == 0) return NotFound("directory was removed");
  AQ_RETURN_IF_ERROR(CheckAccess(*p, caller, W_OK | X_OK));
  auto existing = FindDentry(parent, name);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) {
    return AlreadyExists("'" + std::string(name) + "' exists in inode " + parent.ToString());
  }
  bool dir = S_ISDIR(mode);
  if (dir && p->nlink >= kMaxLinks) return Status(Code::kTooManyLinks, "too many subdirectories");
  auto made = MakeInode(txn, *p, mode, caller);
  if (!made.ok()) return made.status();
  Inode n = std::move(*made);
  n.rdev = rdev;
  if (dir) {
    n.nlink = 2;
    n.size = kDirSizeBytes;
    n.parent = parent;
    n.dir_default = p->dir_default;
    p->nlink++;
  } else {
    n.nlink = 1;
    n.symlink_target = std::string(symlink_target);
    if (S_ISLNK(mode)) n.size = symlink_target.size();
  }
  Dentry d{n.ino, n.mode & S_IFMT, p->next_entry_seq++};
  p->entry_count++;
  p->mtime = p->ctime = n.ctime;
  txn.Dirty(p);
  txn.PutDentry(parent, name, d);
  Inode* added = txn.Add(std::move(n));
  AQ_RETURN_IF_ERROR(Apply(txn, false));
  return *added;
}

Result<Inode> MetadataService::Mkdir(InodeId parent, std::string_view name, uint32_t mode,
                                     const Caller& caller) {
  return CreateNonFile(parent, name, S_IFDIR | (mode & 07777), 0, {}, caller);
}

Result<Inode> MetadataService::Symlink(InodeId parent, std::string_view name,
                                       std::string_view target, const Caller& caller) {
  if (target.empty()) return NotFound("empty symlink target");
  if (target.size() > kMaxSymlinkBytes) {
    return Status(Code::kNameTooLong, "symlink target over 4096 bytes");
  }
  if (target.find('\0') != std::string_view::npos) {
    return InvalidArgument("symlink target holds NUL");
  }
  return CreateNonFile(parent, name, S_IFLNK | 0777, 0, target, caller);
}

Result<OpenResult> MetadataService::Create(const CreateArgs& a, const Caller& caller) {
  AQ_RETURN_IF_ERROR(ValidateName(a.name));
  uint32_t type = a.mode & S_IFMT;
  if (type == 0) type = S_IFREG;
  if (type != S_IFREG && type != S_IFIFO && type != S_IFSOCK && type != S_IFCHR &&
      type != S_IFBLK) {
    return InvalidArgument("create: file type must be regular, fifo, socket or device");
  }
  uint32_t mode = type | (a.mode & 07777);
  if (type != S_IFREG) {
    if (a.open_for_write) return InvalidArgument("create: only regular files open for write");
    auto n = CreateNonFile(a.parent, a.name, mode, a.rdev, {}, caller);
    if (!n.ok()) return n.status();
    return OpenResult{std::move(*n), 0, true};
  }

  std::unique_lock lock(mu_);
  Txn txn(this);
  auto pr = txn.Get(a.parent);
  if (!pr.ok()) return pr.status();
  Inode* p = *pr;
  if (!p->is_dir()) return Status(Code::kNotDirectory, "inode " + a.parent.ToString());
  if (p->nlink == 0) return NotFound("directory was removed");
  if (a.session.value() != 0 && !SessionAlive(a.session.value())) {
    return Status(Code::kStale, "session " + a.session.ToString() + " unknown or expired");
  }
  auto existing = FindDentry(a.parent, a.name);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) {
    if (a.exclusive) {
      return AlreadyExists("'" + a.name + "' exists in inode " + a.parent.ToString());
    }
    // O_CREAT without O_EXCL on an existing name opens it.
    if (S_ISDIR((*existing)->mode)) return Status(Code::kIsDirectory, "create over a directory");
    if (!S_ISREG((*existing)->mode)) {
      // A symlink, FIFO or device made since the caller found the name free (another client):
      // opening it here would hand back a non-regular inode where a created file is expected
      // (the kernel fails that with EIO). kStale has the caller look the name up again, and
      // then follow the symlink or open the node as a local open(O_CREAT) would.
      return Status(Code::kStale, "'" + a.name + "' is no longer free and not a regular file: "
                                  "look it up again");
    }
    AQ_RETURN_IF_ERROR(CheckAccess(*p, caller, X_OK));
    lock.unlock();
    return Open((*existing)->ino, a.open_for_write ? O_RDWR : O_RDONLY, a.session, caller);
  }
  AQ_RETURN_IF_ERROR(CheckAccess(*p, caller, W_OK | X_OK));
  auto made = MakeInode(txn, *p, mode, caller);
  if (!made.ok()) return made.status();
  Inode n = std::move(*made);
  n.nlink = 1;
  auto layout = NewFileLayout(*p, n.ino);
  if (!layout.ok()) return layout.status();
  n.layout = *layout;
  Dentry d{n.ino, S_IFREG, p->next_entry_seq++};
  p->entry_count++;
  p->mtime = p->ctime = n.ctime;
  txn.Dirty(p);
  txn.PutDentry(a.parent, a.name, d);
  OpenResult out;
  out.created = true;
  if (a.open_for_write) out.write_version = NextWriteVersion(txn);
  if (a.session.value() != 0) {
    const uint64_t s = a.session.value();
    InodeState& st = txn.State(n.ino.value());
    OpenCount& oc = st.opens[s];
    oc.total++;
    if (a.open_for_write) {
      oc.write++;
      st.lease_holder = s;
      st.lease_version = out.write_version;
    }
  }
  Inode* added = txn.Add(std::move(n));
  AQ_RETURN_IF_ERROR(Apply(txn, false));
  out.attr = *added;
  if (a.session.value() != 0) TouchSession(a.session);
  return out;
}

Result<Inode> MetadataService::Link(InodeId ino, InodeId new_parent, std::string_view new_name,
                                    const Caller& caller) {
  AQ_RETURN_IF_ERROR(ValidateName(new_name));
  std::unique_lock lock(mu_);
  Txn txn(this);
  auto nr = txn.Get(ino);
  if (!nr.ok()) return nr.status();
  Inode* n = *nr;
  if (n->is_dir()) return Status(Code::kNotPermitted, "hard link to a directory");
  if (n->nlink == 0) return NotFound("inode " + ino.ToString() + " was unlinked");
  auto pr = txn.Get(new_parent);
  if (!pr.ok()) return pr.status();
  Inode* p = *pr;
  if (!p->is_dir()) return Status(Code::kNotDirectory, "inode " + new_parent.ToString());
  if (p->nlink == 0) return NotFound("directory was removed");
  AQ_RETURN_IF_ERROR(CheckAccess(*p, caller, W_OK | X_OK));
  auto existing = FindDentry(new_parent, new_name);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) return AlreadyExists("'" + std::string(new_name) + "' exists");
  if (n->nlink >= kMaxLinks) return Status(Code::kTooManyLinks, "too many links");
  Timespec now = clocks_.wall();
  n->nlink++;
  n->ctime = now;
  txn.Dirty(n);
  txn.PutDentry(new_parent, new_name, Dentry{ino, n->mode & S_IFMT, p->next_entry_seq++});
  p->entry_count++;
  p->mtime = p->ctime = now;
  txn.Dirty(p);
  AQ_RETURN_IF_ERROR(Apply(txn, false));
  return *n;
}

Status MetadataService::Unlink(InodeId parent, std::string_view name, const Caller& caller) {
  AQ_RETURN_IF_ERROR(ValidateName(name));
  std::unique_lock lock(mu_);
  Txn txn(this);
  AQ_RETURN_IF_ERROR(UnlinkIn(txn, parent, name, caller, clocks_.wall()));
  return Apply(txn, false);
}

Status MetadataService::UnlinkIn(Txn& txn, InodeId parent, std::string_view name,
                                 const Caller& caller, Timespec now) {
  auto pr = txn.Get(parent);
  if (!pr.ok()) return pr.status();
  Inode* p = *pr;
  if (!p->is_dir()) return Status(Code::kNotDirectory, "inode " + parent.ToString());
  AQ_RETURN_IF_ERROR(CheckAccess(*p, caller, W_OK | X_OK));
  auto d = FindDentryIn(txn, parent, name);
  if (!d.ok()) return d.status();
  if (!d->has_value()) return NotFound("no entry '" + std::string(name) + "'");
  auto nr = txn.Get((*d)->ino);
  if (!nr.ok()) return nr.status();
  Inode* n = *nr;
  if (n->is_dir()) return Status(Code::kIsDirectory, "unlink of a directory");
  AQ_RETURN_IF_ERROR(CheckSticky(*p, *n, caller));
  txn.DeleteDentry(parent, name, (*d)->seq);
  p->entry_count--;
  p->mtime = p->ctime = now;
  txn.Dirty(p);
  n->nlink--;
  n->ctime = now;
  if (n->nlink == 0) {
    AQ_RETURN_IF_ERROR(DropInode(txn, n));
  } else {
    txn.Dirty(n);
  }
  return OkStatus();
}

Status MetadataService::Rmdir(InodeId parent, std::string_view name, const Caller& caller) {
  AQ_RETURN_IF_ERROR(ValidateName(name));
  std::unique_lock lock(mu_);
  Txn txn(this);
  auto pr = txn.Get(parent);
  if (!pr.ok()) return pr.status();
  Inode* p = *pr;
  if (!p->is_dir()) return Status(Code::kNotDirectory, "inode " + parent.ToString());
  AQ_RETURN_IF_ERROR(CheckAccess(*p, caller, W_OK | X_OK));
  auto d = FindDentry(parent, name);
  if (!d.ok()) return d.status();
  if (!d->has_value()) return NotFound("no entry '" + std::string(name) + "'");
  auto nr = txn.Get((*d)->ino);
  if (!nr.ok()) return nr.status();
  Inode* n = *nr;
  if (!n->is_dir()) return Status(Code::kNotDirectory, "rmdir of a non-directory");
  if (n->entry_count > 0) return Status(Code::kNotEmpty, "directory not empty");
  AQ_RETURN_IF_ERROR(CheckSticky(*p, *n, caller));
  Timespec now = clocks_.wall();
  txn.DeleteDentry(parent, name, (*d)->seq);
  p->entry_count--;
  p->nlink--;
  p->mtime = p->ctime = now;
  txn.Dirty(p);
  n->nlink = 0;
  AQ_RETURN_IF_ERROR(DropInode(txn, n));
  return Apply(txn, false);
}

Status MetadataService::Rename(InodeId parent, std::string_view name, InodeId new_parent,
                               std::string_view new_name, uint32_t flags, const Caller& caller) {
  AQ_RETURN_IF_ERROR(ValidateName(name));
  AQ_RETURN_IF_ERROR(ValidateName(new_name));
  if (flags & ~uint32_t{RENAME_NOREPLACE | RENAME_EXCHANGE}) {
    return InvalidArgument("rename: unknown flags");
  }
  if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE)) {
    return InvalidArgument("rename: NOREPLACE and EXCHANGE together");
  }
  std::unique_lock lock(mu_);
  Txn txn(this);
  AQ_RETURN_IF_ERROR(RenameIn(txn, parent, name, new_parent, new_name, flags, caller,
                              clocks_.wall()));
  return Apply(txn, false);
}

Status MetadataService::RenameIn(Txn& txn, InodeId parent, std::string_view name,
                                 InodeId new_parent, std::string_view new_name, uint32_t flags,
                                 const Caller& caller, Timespec now) {
  const bool exchange = flags & RENAME_EXCHANGE;
  auto pr = txn.Get(parent);
  if (!pr.ok()) return pr.status();
  auto npr = txn.Get(new_parent);
  if (!npr.ok()) return npr.status();
  Inode* p = *pr;
  Inode* np = *npr;  // may equal p
  if (!p->is_dir() || !np->is_dir()) return Status(Code::kNotDirectory, "rename: parent");
  if (np->nlink == 0) return NotFound("rename: target directory was removed");
  AQ_RETURN_IF_ERROR(CheckAccess(*p, caller, W_OK | X_OK));
  AQ_RETURN_IF_ERROR(CheckAccess(*np, caller, W_OK | X_OK));
  auto sd = FindDentryIn(txn, parent, name);
  if (!sd.ok()) return sd.status();
  if (!sd->has_value()) return NotFound("no entry '" + std::string(name) + "'");
  auto dd = FindDentryIn(txn, new_parent, new_name);
  if (!dd.ok()) return dd.status();
  const Dentry src = **sd;
  const std::optional<Dentry> dst = *dd;
  if (exchange && !dst) return NotFound("rename exchange: no entry '" + std::string(new_name) + "'");
  if ((flags & RENAME_NOREPLACE) && dst) {
    return AlreadyExists("'" + std::string(new_name) + "' exists");
  }
  if (dst && dst->ino == src.ino) return OkStatus();  // same inode: POSIX says do nothing

  auto snr = txn.Get(src.ino);
  if (!snr.ok()) return snr.status();
  Inode* sn = *snr;
  Inode* dn = nullptr;
  if (dst) {
    auto dnr = txn.Get(dst->ino);
    if (!dnr.ok()) return dnr.status();
    dn = *dnr;
  }
  AQ_RETURN_IF_ERROR(CheckSticky(*p, *sn, caller));
  if (dn) AQ_RETURN_IF_ERROR(CheckSticky(*np, *dn, caller));

  // A directory may not move below itself: walk up from the destination.
  auto moves_into_itself = [&](InodeId dir, InodeId dest) -> Result<bool> {
    InodeId cur = dest;
    for (int depth = 0; depth < 4096; ++depth) {
      if (cur == dir) return true;
      if (cur == kRootInode) return false;
      auto c = txn.Get(cur);
      if (!c.ok()) return c.status();
      cur = (*c)->parent;
    }
    return Internal("directory chain too deep or cyclic");
  };
  if (sn->is_dir() && parent != new_parent) {
    auto bad = moves_into_itself(sn->ino, new_parent);
    if (!bad.ok()) return bad.status();
    if (*bad) return InvalidArgument("rename of a directory into its own subtree");
    AQ_RETURN_IF_ERROR(CheckAccess(*sn, caller, W_OK));  // its ".." changes
  }
  if (exchange && dn->is_dir() && parent != new_parent) {
    auto bad = moves_into_itself(dn->ino, parent);
    if (!bad.ok()) return bad.status();
    if (*bad) return InvalidArgument("rename exchange of a directory into its own subtree");
    AQ_RETURN_IF_ERROR(CheckAccess(*dn, caller, W_OK));
  }
  if (dn && !exchange) {
    if (sn->is_dir()) {
      if (!dn->is_dir()) return Status(Code::kNotDirectory, "rename: directory over a file");
      if (dn->entry_count > 0) return Status(Code::kNotEmpty, "rename: target not empty");
    } else if (dn->is_dir()) {
      return Status(Code::kIsDirectory, "rename: file over a directory");
    }
  }
  if (!dn && sn->is_dir() && parent != new_parent && np->nlink >= kMaxLinks) {
    return Status(Code::kTooManyLinks, "too many subdirectories");
  }

  if (exchange) {
    txn.PutDentry(parent, name, Dentry{dn->ino, dn->mode & S_IFMT, src.seq});
    txn.PutDentry(new_parent, new_name, Dentry{sn->ino, sn->mode & S_IFMT, dst->seq});
    if (parent != new_parent) {
      if (sn->is_dir()) {
        sn->parent = new_parent;
        p->nlink--;
        np->nlink++;
      }
      if (dn->is_dir()) {
        dn->parent = parent;
        np->nlink--;
        p->nlink++;
      }
    }
    dn->ctime = now;
    txn.Dirty(dn);
  } else {
    txn.DeleteDentry(parent, name, src.seq);
    p->entry_count--;
    if (dn) {
      // Keep the target's readdir position; it now names the source inode.
      txn.PutDentry(new_parent, new_name, Dentry{sn->ino, sn->mode & S_IFMT, dst->seq});
      dn->ctime = now;
      if (dn->is_dir()) {
        np->nlink--;
        dn->nlink = 0;
        AQ_RETURN_IF_ERROR(DropInode(txn, dn));
      } else {
        dn->nlink--;
        if (dn->nlink == 0) {
          AQ_RETURN_IF_ERROR(DropInode(txn, dn));
        } else {
          txn.Dirty(dn);
        }
      }
    } else {
      txn.PutDentry(new_parent, new_name,
                    Dentry{sn->ino, sn->mode & S_IFMT, np->next_entry_seq++});
      np->entry_count++;
    }
    if (sn->is_dir() && parent != new_parent) {
      sn->parent = new_parent;
      p->nlink--;
      np->nlink++;
    }
  }
  sn->ctime = now;
  txn.Dirty(sn);
  p->mtime = p->ctime = now;
  np->mtime = np->ctime = now;
  txn.Dirty(p);
  txn.Dirty(np);
  return OkStatus();
}

Status ChangedAttrs(const Inode& n, const SetAttrArgs& a, const Caller& caller, Timespec now,
                    Inode* next) {
  const bool root = caller.uid == 0;
  const bool owner = root || caller.uid == n.uid;
  *next = n;
  if (a.valid & kSetMode) {
    const uint32_t old_bits = n.mode & 07777;
    const uint32_t new_bits = a.mode & 07777;
    if (owner) {
      next->mode = (n.mode & S_IFMT) | new_bits;
      if (!root && !next->is_dir() && !InGroup(caller, n.gid)) next->mode &= ~S_ISGID;
    } else {
      // A write, truncate or chown by a non-owner makes the kernel clear S_ISUID (and S_ISGID
      // with group exec): FUSE sends that as a mode change from the writer itself
      // (file_remove_privs). Anyone who may write the file may do that much, and nothing more.
      const bool only_clears_set_id = (new_bits & ~old_bits) == 0 &&
                                      ((old_bits ^ new_bits) & ~uint32_t{S_ISUID | S_ISGID}) == 0;
      if (!only_clears_set_id || !CheckAccess(n, caller, W_OK).ok()) {
        return Status(Code::kNotPermitted, "chmod: not the owner");
      }
      next->mode = (n.mode & S_IFMT) | new_bits;
    }
  }
  if (a.valid & kSetUid) {
    if (!root && a.uid != n.uid) return Status(Code::kNotPermitted, "chown: not root");
    next->uid = a.uid;
  }
  if (a.valid & kSetGid) {
    if (!root && (caller.uid != n.uid || !InGroup(caller, a.gid))) {
      return Status(Code::kNotPermitted, "chgrp: not the owner or not a member of the group");
    }
    next->gid = a.gid;
  }
  if ((a.valid & (kSetUid | kSetGid)) && !(a.valid & kSetMode) && next->is_reg() &&
      (next->uid != n.uid || next->gid != n.gid)) {
    next->mode &= ~S_ISUID;
    if (next->mode & S_IXGRP) next->mode &= ~S_ISGID;
  }
  auto time_rights = [&](bool explicit_time) -> Status {
    if (owner) return OkStatus();
    if (explicit_time) return Status(Code::kNotPermitted, "utimes: not the owner");
    return CheckAccess(n, caller, W_OK);
  };
  if (a.valid & (kSetAtime | kSetAtimeNow)) {
    AQ_RETURN_IF_ERROR(time_rights(!(a.valid & kSetAtimeNow)));
    next->atime = (a.valid & kSetAtimeNow) ? now : a.atime;
  }
  if (a.valid & (kSetMtime | kSetMtimeNow)) {
    AQ_RETURN_IF_ERROR(time_rights(!(a.valid & kSetMtimeNow)));
    next->mtime = (a.valid & kSetMtimeNow) ? now : a.mtime;
  }
  if ((a.valid & kSetAtime) && a.atime.nsec >= 1000000000u) return InvalidArgument("atime nsec");
  if ((a.valid & kSetMtime) && a.mtime.nsec >= 1000000000u) return InvalidArgument("mtime nsec");
  return OkStatus();
}

Result<Inode> MetadataService::SetAttr(InodeId ino, const SetAttrArgs& a, const Caller& caller,
                                       SessionId session) {
  std::unique_lock lock(mu_);
  Txn txn(this);
  auto nr = txn.Get(ino);
  if (!nr.ok()) return nr.status();
  Inode* n = *nr;
  Timespec now = clocks_.wall();
  Inode next;
  AQ_RETURN_IF_ERROR(ChangedAttrs(*n, a, caller, now, &next));
  bool size_change = a.valid & kSetSize;
  if (size_change) {
    if (n->is_dir()) return Status(Code::kIsDirectory, "truncate of a directory");
    if (!n->is_reg()) return InvalidArgument("truncate of a non-regular file");
    if (caller.uid != 0) AQ_RETURN_IF_ERROR(CheckAccess(*n, caller, W_OK));
    AQ_RETURN_IF_ERROR(CheckFileBytes(a.size, "set size"));
    auto st = states_.find(ino.value());
    if (st != states_.end() && st->second.lease_holder != 0 &&
        st->second.lease_holder != session.value() && SessionAlive(st->second.lease_holder)) {
      RecallLease(st->second.lease_holder, ino.value());
      return Status(Code::kWouldBlock, "truncate: file is open for write by another session");
    }
    next.mtime = (a.valid & (kSetMtime | kSetMtimeNow)) ? next.mtime : now;
  }
  next.ctime = (a.valid & kSetCtime) ? a.ctime : now;
  uint64_t old_size = n->size;
  *n = next;
  n->size = old_size;
  if (size_change) AQ_RETURN_IF_ERROR(TruncateLocked(txn, n, a.size));
  txn.Dirty(n);
  if (session.value() != 0) TouchSession(session);
  AQ_RETURN_IF_ERROR(Apply(txn, false));
  if (size_change) AQ_FAILPOINT("meta.truncate.after_apply");
  return *n;
}

Status MetadataService::Sync() { return store_->Sync(); }

}  // namespace aquifer::meta
