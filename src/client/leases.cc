// Write-lease recall on the client side (docs/design.md "Write-lease recall"): the recall loop,
// giving a lease back, taking it again at the next write, and the cache coherence a lock gives.
#include <fcntl.h>

#include <algorithm>
#include <thread>

#include "client/client_impl.h"
#include "common/failpoint.h"
#include "common/logging.h"

namespace aquifer {

namespace {
// How long one WaitRecall waits on the metadata wire. Short enough that a client stopping with
// a file still open for write is not held long; over gRPC the call answers at once and the loop
// polls every kRecallPoll instead.
constexpr std::chrono::milliseconds kRecallWait{2000};
constexpr std::chrono::milliseconds kRecallPoll{200};
}  // namespace

std::vector<OpenFile*> Client::Impl::PinHandles(InodeId inode, bool writers_only) {
  std::vector<OpenFile*> out;
  MutexLock lock(registry_->mu);
  auto [begin, end] = registry_->files.equal_range(inode);
  for (auto it = begin; it != end; ++it) {
    if (writers_only && !it->second->writable) continue;
    ++it->second->pins;  // kept alive until Unpin
    out.push_back(it->second);
  }
  return out;
}

void Client::Impl::Unpin(const std::vector<OpenFile*>& files) {
  if (files.empty()) return;
  {
    MutexLock lock(registry_->mu);
    for (OpenFile* f : files) --f->pins;
  }
  registry_->unpinned.notify_all();
}

bool Client::Impl::HasWriters() {
  MutexLock lock(registry_->mu);
  return std::any_of(registry_->files.begin(), registry_->files.end(),
                     [](const auto& entry) { return entry.second->writable; });
}

void Client::Impl::RecallLoop() {
  using Clock = std::chrono::steady_clock;
  for (;;) {
    if (!cache_leases_on_) {
      // Only a client with a file open for write can hold a lease: the others ask nothing. An
      // open for write notifies; a notification missed between the check and the wait costs at
      // most the 1 s timeout. (registry_->mu, taken by HasWriters, is never held while taking
      // recall_mu_.) With cache leases on, every client is a holder and always asks.
      std::unique_lock lock(recall_mu_);
      while (!recall_stop_ && !HasWriters()) recall_cv_.wait_for(lock, std::chrono::seconds(1));
      if (recall_stop_) return;
    } else {
      std::lock_guard lock(recall_mu_);
      if (recall_stop_) return;
    }
    const auto start = Clock::now();
    // Well inside one RPC deadline, so a long poll never looks like a lost server.
    // With cache leases, also well inside the half lease the client trusts its name lists for
    // after each answer (client/rpc/dir_names.h).
    auto wait = std::min<std::chrono::milliseconds>(kRecallWait, options_.rpc_timeout / 2);
    if (cache_leases_on_) wait = std::min(wait, cache_lease_ / 4);
    const SessionId me = session();
    if (me.value() != acked_session_) {
      acked_session_ = me.value();  // a new session's recalls count from 1
      acked_seq_ = 0;
      // The first ask of a session does not wait: its answer starts the client's trust in what
      // it caches (client/rpc/dir_names.h, Heard), which a long poll would put off by `wait`.
      if (cache_leases_on_) wait = std::chrono::milliseconds(0);
    }
    Result<client::Recalls> recalls = meta_->WaitRecalls(me, wait, acked_seq_, recall_epoch_);
    Clock::time_point resync_not_before{};
    if (recalls.ok() && recalls->recall_epoch != recall_epoch_) {
      // A new server run: its seqs start again at 1 and it knows none of this client's leases
      // (the client dropped its own caches). The kernel may still hold answers of the old run,
      // which the new one cannot recall; their timeouts end by the old run's trust
      // (Client::CacheTrustLeft capped them), so the next ask, which tells the server this
      // client resynced and lets other hosts' changes go on, waits for that.
      if (recall_epoch_ != 0) {
        resync_not_before = recalls->old_run_trusted_until;
        Logger("client")->info(
            "metadata server restarted (recall epoch {} -> {}); cached names dropped, resync "
            "in {} ms", recall_epoch_, recalls->recall_epoch,
            std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                     resync_not_before - Clock::now()).count()));
      }
      recall_epoch_ = recalls->recall_epoch;
      acked_seq_ = 0;
      // The new run knows neither this client's leases nor its lazy opens; the resync (the next
      // ask) lets other hosts' changes go on, so they are told first.
      RegisterAllLazy();
    }
    if (!recalls.ok() && recalls.status().code() == Code::kNotSupported) {
      Logger("client")->info("metadata server has no write-lease recall; not asking again");
      return;
    }
    bool handled_cache = false;
    if (recalls.ok()) {
      for (const client::CacheRecall& r : recalls->cache_recalls) {
        if (r.seq <= acked_seq_) continue;
        HandleCacheRecall(r);
        acked_seq_ = r.seq;
        handled_cache = true;
      }
      if (cache_leases_on_) {
        if (!recalls->write_leases.empty()) {
          {
            std::lock_guard lock(recall_mu_);
            for (InodeId inode : recalls->write_leases) give_queue_.push_back(inode);
          }
          recall_cv_.notify_all();
        }
      } else {
        for (InodeId inode : recalls->write_leases) HandleRecall(inode);
      }
    } else if (!IsSessionLost(recalls.status()) &&
               recalls.status().code() != Code::kUnavailable) {
      Logger("client")->debug("wait for recalls failed status={}", recalls.status().ToString());
    }
    if (resync_not_before > Clock::now()) {
      std::unique_lock lock(recall_mu_);
      recall_cv_.wait_until(lock, resync_not_before, [this] { return recall_stop_; });
      continue;
    }
    if (handled_cache) continue;  // the acknowledgement goes out at once with the next ask
    // An answer that came at once (gRPC does not wait; an error) is followed by a pause, so
    // the loop polls rather than spins.
    if (!recalls.ok() ||
        (recalls->write_leases.empty() && Clock::now() - start < wait / 2)) {
      std::unique_lock lock(recall_mu_);
      recall_cv_.wait_for(lock, kRecallPoll, [this] { return recall_stop_; });
    }
  }
}

void Client::Impl::GiveLoop() {
  for (;;) {
    InodeId inode;
    {
      std::unique_lock lock(recall_mu_);
      recall_cv_.wait(lock, [this] { return recall_stop_ || !give_queue_.empty(); });
      if (recall_stop_) return;
      inode = give_queue_.front();
      give_queue_.pop_front();
    }
    HandleRecall(inode);
  }
}

void Client::Impl::HandleCacheRecall(const client::CacheRecall& recall) {
  for (InodeId inode : recall.inodes) {
    meta_->ForgetCached(inode);
    // Before the acknowledgement: the server holds the inode until it comes.
    if (lazy_count_.load() != 0) RegisterLazy(&inode);
    if (options_.on_attrs_recalled) options_.on_attrs_recalled(inode);
  }
  if (options_.on_name_recalled) {
    for (const auto& [parent, name] : recall.entries) options_.on_name_recalled(parent, name);
  }
}

void Client::Impl::HandleRecall(InodeId inode) {
  // An exclusive directory lease: the creates made under it go out, then it goes back.
  if (meta_->GiveBackDirLease(inode, session())) return;
  // First the commits, which may flush much, with only the committing writer held.
  std::vector<OpenFile*> writers = PinHandles(inode, /*writers_only=*/true);
  bool kept = false;
  for (OpenFile* f : writers) {
    if (!f->lease_held.load()) continue;  // gave it back already (a recall asked twice)
    std::lock_guard lock(f->mu);
    if (!f->lease_held.load()) continue;
    Status s = Commit(*f, /*sync=*/false);
    if (!s.ok()) {
      // Its bytes are not safe yet: keep the lease (the other client's open waits, at most its
      // lease_wait) rather than return a lease with uncommitted chunks under it.
      Logger("client")->warn("recall inode={}: commit failed, lease kept status={}",
                             inode.value(), s.ToString());
      kept = true;
    }
  }
  Unpin(writers);
  if (kept) return;
  // Then the return, with the file's writers kept still from their last commit until the
  // metadata server has the lease back. A write in between would otherwise take the lease again
  // at once (this session still holds it) and an open for write be answered with it, and the
  // return would give it away with their bytes uncommitted under it: their commit then fails
  // with kStale and, had an unlock come first, the next holder of the lock read the file
  // without them (the soak test's lost increments). give_mu_ keeps out opens for write and
  // EnsureLease (the only ways a handle comes to hold the lease); the holders' mutexes keep out
  // their writes.
  std::unique_lock giving(give_mu_);
  // A file created here under a directory lease took the write lease with its batched create;
  // a handle that has not written yet has not claimed it (EnsureLease), so it goes back as is.
  const bool unclaimed = meta_->DropCreatedLease(inode);
  writers = PinHandles(inode, /*writers_only=*/true);
  std::vector<std::unique_lock<std::mutex>> held;
  held.reserve(writers.size());
  bool holding = false;
  for (OpenFile* f : writers) {
    // A handle without the lease cannot take it now (give_mu_), and may be waiting in
    // EnsureLease for another client's lease with its mutex held: not waited for.
    if (!f->lease_held.load()) continue;
    held.emplace_back(f->mu);
    holding = true;
    Status s = Commit(*f, /*sync=*/false);  // what it wrote since the first pass, if anything
    if (!s.ok()) {
      Logger("client")->warn("recall inode={}: commit failed, lease kept status={}",
                             inode.value(), s.ToString());
      kept = true;
    }
  }
  if ((holding || unclaimed) && !kept) {
    AQ_FAILPOINT("client.recall.before_return");
    // Cleared before the return, not after: once the metadata server has it back, another
    // client may write the file and unlock, and a lock taken here next must see that
    // (RevalidateForLock trusts a handle holding the lease). The reply can be late by a whole
    // metadata server restart (WithSession waits it out). Until the return ends, the holders'
    // mutexes (held) keep out their writes and RevalidateForLock's refresh.
    for (OpenFile* f : writers) f->lease_held.store(false);
    Status s = WithSession([&](SessionId session) { return meta_->ReturnLease(inode, session); });
    AQ_FAILPOINT("client.recall.after_return");
    if (!s.ok()) {
      // Still this session's at the server, at worst: the next write takes it again.
      Logger("client")->warn("return lease inode={} failed status={}", inode.value(),
                             s.ToString());
    }
  }
  held.clear();
  giving.unlock();
  Unpin(writers);
}

Status Client::Impl::EnsureLease(OpenFile& f) {
  if (f.lease_held.load()) return OkStatus();
  const auto deadline = std::chrono::steady_clock::now() + options_.lease_wait;
  std::chrono::milliseconds backoff(2);
  for (;;) {
    // Not while this client returns a lease (HandleRecall holds give_mu_): the metadata server
    // would answer from the lease the session still holds, which the return then takes away.
    // Tried, not waited for, as f.mu is held: no give-back waits for this handle (it holds no
    // lease), so give_mu_ is free again within one ReturnLease.
    std::shared_lock taking(give_mu_, std::try_to_lock);
    if (!taking.owns_lock()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (f.created_locally) {
      // Created here under a directory lease: its batched create took the lease (and a write
      // version) for this session. A recall since gave it back (then AcquireLease below).
      f.created_locally = false;
      std::optional<client::OpenReply> created = meta_->TakeCreatedLease(f.inode);
      if (created) {
        f.layout = created->attr.layout;
        f.AdoptCommitted(created->attr, created->write_version);
        f.lease_held.store(true);
        return OkStatus();
      }
      AQ_RETURN_IF_ERROR(meta_->CreateError(f.inode));
    }
    Result<client::OpenReply> reply = WithSession(
        [&](SessionId session) { return meta_->AcquireLease(f.inode, session); });
    if (reply.ok()) {
      // The file as the metadata server has it now: another client may have written, appended
      // or truncated since this writer's last commit (which left nothing buffered).
      f.AdoptCommitted(reply->attr, reply->write_version);
      f.lease_held.store(true);
      return OkStatus();
    }
    if (reply.status().code() == Code::kInvalidArgument) {
      // The session this handle was opened in expired (this client was cut off longer than its
      // ttl) and a new one holds no open of the file: only a new open can write it.
      return Status(Code::kStale, "take the write lease of inode " + f.inode.ToString() +
                                      " back: its open went with an expired session; " +
                                      reply.status().message());
    }
    if (reply.status().code() != Code::kWouldBlock ||
        std::chrono::steady_clock::now() + backoff > deadline) {
      return reply.status().WithPrefix("take the write lease back");
    }
    taking.unlock();
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
}

bool Client::Impl::RevalidateForLock(InodeId inode) {
  const std::vector<OpenFile*> files = PinHandles(inode, /*writers_only=*/false);
  // A writer holding the lease knows the file: no one else can have written it.
  const bool stale = std::any_of(files.begin(), files.end(), [](const OpenFile* f) {
    return !f->writable || !f->lease_held.load();
  });
  bool changed = false;
  if (stale) {
    // The server's own answer (as for a stale read), not attributes kept under a cache lease.
    meta_->ForgetCached(inode);
    Result<Attributes> attr = meta_->GetAttr(inode);
    if (attr.ok()) {
      for (OpenFile* f : files) {
        if (!f->writable) {
          const FileView before = f->View();
          f->RefreshView(*attr);
          changed = changed || before.version != attr->data_version ||
                    before.size != attr->size_bytes;
          continue;
        }
        std::lock_guard lock(f->mu);
        if (f->lease_held.load() || f->dirty.load()) continue;
        changed = changed || f->committed_version != attr->data_version ||
                  f->size != attr->size_bytes;
        // A writer reads below its write version: without the lease that is the committed one
        // (EnsureLease hands it a new one before it writes).
        f->AdoptCommitted(*attr, attr->data_version);
      }
    } else {
      Logger("client")->warn("refresh at lock inode={} failed status={}", inode.value(),
                             attr.status().ToString());
      changed = true;  // cannot tell: let the kernel ask again
    }
  }
  Unpin(files);
  return changed;
}

Status Client::Impl::CommitForUnlock(InodeId inode) {
  const std::vector<OpenFile*> writers = PinHandles(inode, /*writers_only=*/true);
  Status result;
  for (OpenFile* f : writers) {
    if (!f->dirty.load()) continue;
    std::lock_guard lock(f->mu);
    Status s = Commit(*f, /*sync=*/false);
    if (result.ok()) result = s;
  }
  Unpin(writers);
  return result;
}

}  // namespace aquifer
