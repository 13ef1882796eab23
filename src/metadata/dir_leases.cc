// Exclusive directory leases and batched creates (docs/design.md "Exclusive directory leases").
#include <sys/stat.h>

#include <algorithm>

#include "common/logging.h"
#include "metadata/service_internal.h"

namespace aquifer::meta {

namespace {
constexpr size_t kKeptReservations = 8;  // per session (SessionRecord::reserved_inos)
}  // namespace

Result<DirLeaseGrant> MetadataService::AcquireDirLease(InodeId dir, SessionId session,
                                                       uint32_t want_inodes,
                                                       const Caller& caller) {
  const uint64_t s = session.value();
  want_inodes = std::min(want_inodes, kMaxReservedInodes);
  // Exclusive: no call that reads or changes a directory is between its check and its work.
  std::unique_lock gate(dl_gate_);
  std::unique_lock lock(mu_);
  if (s == 0 || !SessionAlive(s)) {
    return Status(Code::kStale, "session " + session.ToString() + " unknown or expired");
  }
  TouchSession(session);
  auto d = LoadInode(dir);
  if (!d.ok()) return d.status();
  if (!d->is_dir()) return Status(Code::kNotDirectory, "inode " + dir.ToString());
  if (d->nlink == 0) return NotFound("directory was removed");
  AQ_RETURN_IF_ERROR(CheckAccess(*d, caller, W_OK | X_OK));
  DirLeaseGrant out;
  out.dir = *d;
  out.generation = generation_;
  auto layout = NewFileLayout(*d, InodeId(0));
  if (!layout.ok()) return layout.status();
  out.file_layout = *layout;
  bool others_cache = false;
  if (options_.cache_lease_ms > 0) {
    MutexLock holders(lease_mu_);
    auto it = cache_holders_.find(dir.value());
    if (it != cache_holders_.end()) {
      // Sessions that ended cache nothing (their entries stay until the inode changes).
      std::erase_if(it->second, [&](uint64_t h) { return !sessions_.count(h); });
      others_cache = std::any_of(it->second.begin(), it->second.end(),
                                 [s](uint64_t h) { return h != s; });
    }
  }
  {
    std::lock_guard dl(dl_mu_);
    auto held = dir_leases_.find(dir.value());
    // A lease being recalled is not granted again, not even to its holder: the holder's
    // give-back may be on its way, and the call that recalled it waits for that.
    const bool taken = held != dir_leases_.end() &&
                       (held->second.session != s || held->second.recalled);
    if (options_.cache_lease_ms > 0 && !others_cache && !taken) {
      if (held == dir_leases_.end()) {
        dir_leases_[dir.value()] = DirLease{s, false};
        dir_lease_count_.store(dir_leases_.size());
      }
      dir_sessions_[s].broken.erase(dir.value());
      out.granted = true;
    }
  }
  if (want_inodes > 0) {
    Txn txn(this);
    txn.new_inos = want_inodes;
    // As many write versions: a file created for write under the lease starts writing at one
    // of them without waiting for its create's batch.
    out.version_first = next_version_;
    out.version_count = want_inodes;
    txn.new_versions = want_inodes;
    SessionRecord rec;
    rec.id = s;
    auto sess = sessions_.find(s);
    rec.client_name = sess->second->client_name;
    rec.caches = sess->second->caches.load();
    const uint64_t first = next_ino_;
    {
      std::lock_guard dl(dl_mu_);
      auto& reserved = dir_sessions_[s].reserved;
      rec.reserved_inos.assign(reserved.begin(), reserved.end());
    }
    rec.reserved_inos.emplace_back(first, first + want_inodes);
    if (rec.reserved_inos.size() > kKeptReservations) rec.reserved_inos.erase(rec.reserved_inos.begin());
    txn.batch.PutSession(rec);
    AQ_RETURN_IF_ERROR(Apply(txn, false));
    {
      std::lock_guard dl(dl_mu_);
      auto& reserved = dir_sessions_[s].reserved;
      reserved.assign(rec.reserved_inos.begin(), rec.reserved_inos.end());
    }
    out.ino_first = first;
    out.ino_count = want_inodes;
  }
  if (out.granted) GrantCache(session, {dir.value()});
  Logger("meta")->debug("dir lease dir={} session={} granted={} inodes={}+{}", dir.value(), s,
                        out.granted, out.ino_first, out.ino_count);
  return out;
}

void MetadataService::CollectUnusedReservations(Txn& txn, uint64_t session) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  uint64_t last_used = 0;
  {
    std::lock_guard dl(dl_mu_);
    auto it = dir_sessions_.find(session);
    if (it == dir_sessions_.end()) return;
    ranges.assign(it->second.reserved.begin(), it->second.reserved.end());
    last_used = it->second.last_used;
  }
  size_t tasks = 0;
  for (const auto& [first, end] : ranges) {
    for (uint64_t ino = std::max(first, last_used + 1); ino < end; ++ino) {
      if (txn.inodes.count(ino) || LoadInode(InodeId(ino)).status().code() != Code::kNotFound) {
        continue;
      }
      AddGcTask(txn, InodeId(ino), 0, UINT64_MAX, false);
      ++tasks;
    }
  }
  if (tasks > 0) {
    Logger("meta")->info("session={} ended: {} reserved inode numbers it did not use are collected",
                         session, tasks);
  }
}

bool MetadataService::InoReservedFor(uint64_t session, uint64_t ino) {
  std::lock_guard dl(dl_mu_);
  auto it = dir_sessions_.find(session);
  if (it == dir_sessions_.end()) return false;
  return std::any_of(it->second.reserved.begin(), it->second.reserved.end(),
                     [ino](const auto& r) { return ino >= r.first && ino < r.second; });
}

Status MetadataService::CheckBatchDir(uint64_t session, InodeId dir) {
  std::lock_guard dl(dl_mu_);
  auto ds = dir_sessions_.find(session);
  if (ds != dir_sessions_.end() && ds->second.broken.count(dir.value())) {
    return Status(Code::kStale, "the lease of directory " + dir.ToString() + " was broken");
  }
  auto held = dir_leases_.find(dir.value());
  if (held != dir_leases_.end() && held->second.session != session) {
    return Status(Code::kStale, "directory " + dir.ToString() + " is leased by another session");
  }
  return OkStatus();
}

Result<std::vector<Result<OpenResult>>> MetadataService::ChangeBatch(
    SessionId session, const std::vector<BatchChange>& items, bool sync) {
  using Kind = BatchChange::Kind;
  const uint64_t s = session.value();
  if (items.size() > kMaxChangeBatchItems) {
    return InvalidArgument("change batch of " + std::to_string(items.size()) +
                           " items (at most " + std::to_string(kMaxChangeBatchItems) + ")");
  }
  std::unique_lock lock(mu_);
  if (s == 0 || !SessionAlive(s)) {
    return Status(Code::kStale, "session " + session.ToString() + " unknown or expired");
  }
  TouchSession(session);
  Txn txn(this);
  std::vector<Result<OpenResult>> out;
  out.reserve(items.size());
  std::set<uint64_t> used;                        // inode numbers this batch took
  std::vector<std::pair<size_t, uint64_t>> made;  // (item, ino) of the creates that apply
  std::vector<uint64_t> new_dirs;                 // directories made: leased to the session
  // A new inode `it` asks for: a number reserved for the session that nothing has.
  auto check_new_ino = [&](const BatchChange& it) -> Status {
    const uint64_t ino = it.ino.value();
    if (ino == 0 || !InoReservedFor(s, ino)) {
      return InvalidArgument("batched change: inode " + std::to_string(ino) +
                             " is not reserved for session " + session.ToString());
    }
    if (used.count(ino) || txn.inodes.count(ino)) {
      return AlreadyExists("batched change: inode " + std::to_string(ino) + " is taken");
    }
    {
      std::lock_guard dl(dl_mu_);
      if (ino <= dir_sessions_[s].last_used) {
        return InvalidArgument("batched change: inode " + std::to_string(ino) +
                               " was used before (numbers are taken in order)");
      }
    }
    auto existing = LoadInode(it.ino);
    if (existing.ok()) {
      return AlreadyExists("batched change: inode " + std::to_string(ino) + " is taken");
    }
    return existing.status().code() == Code::kNotFound ? OkStatus() : existing.status();
  };
  for (size_t i = 0; i < items.size(); ++i) {
    const BatchChange& it = items[i];
    auto one = [&]() -> Result<OpenResult> {
      if (it.kind == Kind::kUnknown) return InvalidArgument("batched change: unknown kind");
      if (it.time.nsec > 999999999) return InvalidArgument("batched change: time nsec past 999,999,999");
      if (it.kind == Kind::kSetAttr) {
        if (!it.attrs) return InvalidArgument("batched setattr: no attributes");
        if (it.attrs->valid & (kSetSize | kSetCtime)) {
          return InvalidArgument("batched setattr: a size or ctime goes in a SetAttr call");
        }
        auto nr = txn.Get(it.ino);
        if (!nr.ok()) return nr.status();
        Inode* n = *nr;
        Inode next;
        AQ_RETURN_IF_ERROR(ChangedAttrs(*n, *it.attrs, it.caller, it.time, &next));
        next.ctime = it.time;
        next.size = n->size;
        *n = next;
        txn.Dirty(n);
        OpenResult r;
        r.attr = *n;
        return r;
      }
      if (it.kind == Kind::kCommit) {
        // A commit names no directory: the write lease and the version are its checks.
        if (it.stripes_malformed) {
          return InvalidArgument("batched commit: written_stripes must be at most " +
                                 std::to_string(kMaxCommitStripeRanges) + " (begin, end) pairs");
        }
        CommitArgs a;
        a.ino = it.ino;
        a.session = session;
        a.size = it.size;
        a.mtime = it.time;
        a.write_version = it.write_version;
        a.written_stripes = it.written_stripes;
        a.records_stripes = true;
        a.caller = it.caller;
        CommitResult c;
        AQ_RETURN_IF_ERROR(CommitIn(txn, a, &c));
        OpenResult r;
        r.attr = std::move(c.attr);
        r.write_version = c.next_write_version;
        return r;
      }
      AQ_RETURN_IF_ERROR(ValidateName(it.name));
      AQ_RETURN_IF_ERROR(CheckBatchDir(s, it.parent));
      if (it.kind == Kind::kUnlink) {
        AQ_RETURN_IF_ERROR(UnlinkIn(txn, it.parent, it.name, it.caller, it.time));
        return OpenResult{};
      }
      if (it.kind == Kind::kRename) {
        AQ_RETURN_IF_ERROR(ValidateName(it.new_name));
        AQ_RETURN_IF_ERROR(CheckBatchDir(s, it.new_parent));
        AQ_RETURN_IF_ERROR(
            RenameIn(txn, it.parent, it.name, it.new_parent, it.new_name, 0, it.caller, it.time));
        return OpenResult{};
      }
      const bool dir = it.kind == Kind::kMkdir;
      if (!dir && it.kind != Kind::kCreate) return InvalidArgument("batched change: unknown kind");
      const uint32_t type = it.mode & S_IFMT;
      if (!dir && type != 0 && type != S_IFREG) {
        return InvalidArgument("batched create: only regular files");
      }
      AQ_RETURN_IF_ERROR(check_new_ino(it));
      auto pr = txn.Get(it.parent);
      if (!pr.ok()) return pr.status();
      Inode* p = *pr;
      if (!p->is_dir()) return Status(Code::kNotDirectory, "inode " + it.parent.ToString());
      if (p->nlink == 0) return NotFound("directory was removed");
      AQ_RETURN_IF_ERROR(CheckAccess(*p, it.caller, W_OK | X_OK));
      auto existing = FindDentryIn(txn, it.parent, it.name);
      if (!existing.ok()) return existing.status();
      if (existing->has_value()) {
        return AlreadyExists("'" + it.name + "' exists in inode " + it.parent.ToString());
      }
      if (dir && p->nlink >= kMaxLinks) {
        return Status(Code::kTooManyLinks, "too many subdirectories");
      }
      Inode n;
      n.ino = it.ino;
      // The generation the client was told with the number (and told its kernel): after a
      // restart this run's differs, and the kernel would take the inode for another one.
      n.generation = it.generation != 0 ? it.generation : generation_;
      n.mode = (dir ? S_IFDIR : S_IFREG) | (it.mode & 07777);
      n.uid = it.caller.uid;
      n.gid = it.caller.gid;
      if (p->mode & S_ISGID) {  // BSD group semantics on setgid directories
        n.gid = p->gid;
        if (dir) n.mode |= S_ISGID;
      }
      n.atime = n.mtime = n.ctime = it.time;
      OpenResult r;
      r.created = true;
      if (dir) {
        n.nlink = 2;
        n.size = kDirSizeBytes;
        n.parent = it.parent;
        n.dir_default = p->dir_default;
        p->nlink++;
      } else {
        n.nlink = 1;
        auto layout = NewFileLayout(*p, n.ino);
        if (!layout.ok()) return layout.status();
        n.layout = *layout;
        if (it.open_for_write && it.write_version != 0) {
          // The client's, from its grant: any version handed out is unique to this new inode.
          if (it.write_version >= next_version_) {
            return InvalidArgument("batched create: write version " +
                                   std::to_string(it.write_version) + " was never handed out");
          }
          r.write_version = it.write_version;
        } else if (it.open_for_write) {
          r.write_version = NextWriteVersion(txn);
        }
        InodeState& st = txn.State(n.ino.value());
        OpenCount& oc = st.opens[s];
        oc.total++;
        if (it.open_for_write) {
          oc.write++;
          st.lease_holder = s;
          st.lease_version = r.write_version;
        }
      }
      txn.inode_delta++;
      Dentry d{n.ino, n.mode & S_IFMT, p->next_entry_seq++};
      p->entry_count++;
      p->mtime = std::max(p->mtime, it.time);
      p->ctime = std::max(p->ctime, it.time);
      txn.Dirty(p);
      txn.PutDentry(it.parent, it.name, d);
      txn.Add(std::move(n));
      used.insert(it.ino.value());
      made.emplace_back(i, it.ino.value());
      if (dir) new_dirs.push_back(it.ino.value());
      return r;
    };
    out.push_back(one());
    if (!out.back().ok() && it.kind == Kind::kCreate && it.write_version != 0 &&
        it.ino.value() != 0 && InoReservedFor(s, it.ino.value()) &&
        !txn.inodes.count(it.ino.value()) && LoadInode(it.ino).status().code() == Code::kNotFound) {
      // Refused, and its writer may have stored chunks of this number already (it writes before
      // the batch is answered): they go, as an unlinked file's.
      AddGcTask(txn, it.ino, 0, UINT64_MAX, false);
    }
  }
  AQ_RETURN_IF_ERROR(Apply(txn, sync));
  if (!made.empty()) {
    std::lock_guard dl(dl_mu_);
    uint64_t& last = dir_sessions_[s].last_used;
    for (const auto& [i, ino] : made) last = std::max(last, ino);
  }
  for (const auto& [i, ino] : made) {
    auto n = txn.inodes.find(ino);
    if (n != txn.inodes.end() && out[i].ok()) out[i]->attr = n->second;
  }
  if (!new_dirs.empty()) {
    std::lock_guard dl(dl_mu_);
    for (uint64_t d : new_dirs) dir_leases_.emplace(d, DirLease{s, false});
    dir_lease_count_.store(dir_leases_.size());
  }
  return out;
}

MetadataService::DirLeaseGuard MetadataService::BreakDirLeases(
    std::initializer_list<uint64_t> dirs, uint64_t caller) {
  for (;;) {
    DirLeaseGuard guard(&dl_gate_);
    if (dir_lease_count_.load() == 0) return guard;
    uint64_t wait_dir = 0, holder = 0;
    bool queue = false;
    {
      std::lock_guard dl(dl_mu_);
      for (uint64_t d : dirs) {
        auto it = dir_leases_.find(d);
        if (it == dir_leases_.end() || it->second.session == caller || d == 0) continue;
        wait_dir = d;
        holder = it->second.session;
        queue = !it->second.recalled;
        it->second.recalled = true;
        break;
      }
    }
    if (wait_dir == 0) return guard;
    guard = DirLeaseGuard();  // a grant may go on while this call waits for the give-back
    if (queue) {
      RecallLease(holder, wait_dir);  // the holder's WaitRecall names the directory
      Logger("meta")->debug("recall dir lease dir={} holder={} for session {}", wait_dir, holder,
                            caller);
    }
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(std::max<uint32_t>(options_.cache_lease_ms, 1));
    std::unique_lock dl(dl_mu_);
    const bool given = dl_cv_.wait_until(dl, deadline, [&] {
      auto it = dir_leases_.find(wait_dir);
      return it == dir_leases_.end() || it->second.session != holder;
    });
    if (!given) {
      auto it = dir_leases_.find(wait_dir);
      if (it != dir_leases_.end() && it->second.session == holder) {
        dir_leases_.erase(it);
        dir_lease_count_.store(dir_leases_.size());
        dir_sessions_[holder].broken.insert(wait_dir);
        Logger("meta")->warn("dir lease broken: dir={} holder={} did not give it back within {} "
                             "ms", wait_dir, holder, options_.cache_lease_ms);
        events_.Record(EventSeverity::kWarning,
                       "directory lease of inode " + std::to_string(wait_dir) +
                           " broken: session " + std::to_string(holder) + " did not answer");
      }
    }
  }
}

bool MetadataService::ReturnDirLease(uint64_t dir, uint64_t session) {
  {
    std::lock_guard dl(dl_mu_);
    auto it = dir_leases_.find(dir);
    if (it == dir_leases_.end() || it->second.session != session) return false;
    dir_leases_.erase(it);
    dir_lease_count_.store(dir_leases_.size());
  }
  dl_cv_.notify_all();
  return true;
}

void MetadataService::EndDirLeases(const std::vector<uint64_t>& sessions) {
  {
    std::lock_guard dl(dl_mu_);
    for (uint64_t s : sessions) {
      dir_sessions_.erase(s);
      for (auto it = dir_leases_.begin(); it != dir_leases_.end();) {
        it = it->second.session == s ? dir_leases_.erase(it) : std::next(it);
      }
    }
    dir_lease_count_.store(dir_leases_.size());
  }
  dl_cv_.notify_all();
}

uint64_t MetadataService::LeasedChild(InodeId parent, std::string_view name) {
  if (dir_lease_count_.load() == 0 || ValidateName(name).code() != Code::kOk) return 0;
  uint64_t child = 0;
  {
    std::shared_lock lock(mu_);
    auto d = FindDentry(parent, name);
    if (!d.ok() || !d->has_value()) return 0;
    child = (*d)->ino.value();
  }
  std::lock_guard dl(dl_mu_);
  return dir_leases_.count(child) ? child : 0;
}

uint64_t MetadataService::DirLeaseHolder(InodeId dir) {
  std::lock_guard dl(dl_mu_);
  auto it = dir_leases_.find(dir.value());
  return it == dir_leases_.end() ? 0 : it->second.session;
}

}  // namespace aquifer::meta
