// File I/O of aquifer::Client: write buffers, stripe flushes, commits, truncate, reads with
// read-ahead. See docs/design.md for the rules this follows.
#include <fcntl.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "client/client_impl.h"
#include "client/striping.h"
#include "common/failpoint.h"
#include "common/logging.h"

namespace aquifer {

using client::StripeBytes;
using client::StripeKey;

namespace {
// Full stripes of one file being written at once, asynchronously.
constexpr size_t kMaxInflightStripes = 4;

Timestamp Now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return Timestamp{ts.tv_sec, static_cast<uint32_t>(ts.tv_nsec)};
}
}  // namespace

void LogReplacedViewFallback(InodeId inode, const FileView& fv, const Status& s) {
  Logger("client")->debug("read under a replaced view failed, current view used ino={} "
                          "version={} size={} status={}",
                          inode.value(), fv.version, fv.size, s.ToString());
}

// --- StripeBuffer -----------------------------------------------------------------------------

void StripeBuffer::Add(uint64_t begin, uint64_t end) {
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  merged.reserve(extents.size() + 1);
  bool placed = false;
  for (const auto& e : extents) {
    if (e.second < begin) {
      merged.push_back(e);
    } else if (end < e.first) {
      if (!placed) merged.emplace_back(begin, end), placed = true;
      merged.push_back(e);
    } else {
      begin = std::min(begin, e.first);
      end = std::max(end, e.second);
    }
  }
  if (!placed) merged.emplace_back(begin, end);
  std::sort(merged.begin(), merged.end());
  extents = std::move(merged);
}

bool StripeBuffer::Covers(uint64_t begin, uint64_t end) const {
  if (begin >= end) return true;
  for (const auto& e : extents) {
    if (e.first <= begin && e.second >= end) return true;
  }
  return false;
}

// --- OpenFile -----------------------------------------------------------------------------------

OpenFile::~OpenFile() {
  for (auto& [stripe, future] : inflight) {
    if (future.valid()) future.wait();
  }
  if (registry) {
    registry->dirty_bytes.fetch_sub(buffered_bytes);
    MutexLock lock(registry->mu);
    registry->unpinned.wait(lock.native(), [this] { return pins == 0; });
    auto [begin, end] = registry->files.equal_range(inode);
    for (auto it = begin; it != end; ++it) {
      if (it->second == this) {
        registry->files.erase(it);
        break;
      }
    }
  }
}

// --- open / release ---------------------------------------------------------------------------

Result<client::OpenReply> Client::Impl::OpenWithLeaseWait(
    InodeId inode, int flags, const Caller& caller, std::shared_lock<std::shared_mutex>* taking) {
  const auto deadline = std::chrono::steady_clock::now() + options_.lease_wait;
  const bool write = (flags & O_ACCMODE) != O_RDONLY;
  // Short first waits: the holder is asked to give the lease back (a recall), which takes it
  // about a round trip and a commit.
  std::chrono::milliseconds backoff(2);
  for (;;) {
    // Not across the waits: this client's own give-backs (of any file) go on meanwhile.
    std::shared_lock<std::shared_mutex> lock;
    if (write) lock = std::shared_lock(give_mu_);
    Result<client::OpenReply> reply =
        WithSession([&](SessionId session) { return meta_->Open(inode, flags, session, caller); });
    if (reply.ok()) *taking = std::move(lock);
    if (reply.ok() || reply.status().code() != Code::kWouldBlock ||
        std::chrono::steady_clock::now() + backoff > deadline) {
      return reply;
    }
    lock = {};
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
}

Result<Client::Opened> Client::Impl::OpenWith(client::OpenReply reply, int flags,
                                              std::shared_lock<std::shared_mutex> taking) {
  auto file = std::make_unique<OpenFile>();
  file->inode = reply.attr.inode;
  file->flags = flags;
  file->writable = (flags & O_ACCMODE) != O_RDONLY;
  file->layout = reply.attr.layout;
  file->opened_attr = reply.attr;
  file->registry = registry_;
  file->AdoptCommitted(reply.attr, reply.write_version);
  // An open for write took the lease; a local create took it with a reserved version, or takes
  // it at its first write.
  const bool claim_later = reply.created_locally && reply.write_version == 0;
  file->lease_held.store(file->writable && !claim_later);
  file->created_locally = claim_later;
  file->made_here = reply.created_locally;
  const bool regular = (reply.attr.mode & S_IFMT) == S_IFREG;
  if (regular) {
    Status valid = client::ValidateLayout(file->layout);
    if (!valid.ok()) return valid.WithPrefix("inode " + file->inode.ToString());
  }
  if (file->writable && regular && file->write_version == 0 && !reply.created_locally) {
    return Internal("metadata server gave no write_version for a write open");
  }
  {
    MutexLock lock(registry_->mu);
    if (file->writable) {
      // A mount serves every descriptor of a file with one handle, the writer's once there is
      // one: this handle will answer the readers of a read-only handle opened before it, whose
      // kernel may still hold the size that handle's view had (the open truncated: O_TRUNC).
      auto [begin, end] = registry_->files.equal_range(file->inode);
      for (auto it = begin; it != end; ++it) {
        if (!it->second->writable) {
          registry_->replaced.Note(file->inode, it->second->View(), options_.replaced_view_keep);
        }
      }
    }
    registry_->files.emplace(file->inode, file.get());
  }
  if (taking.owns_lock()) taking.unlock();  // a give-back from now on pins this handle
  // Without cache leases the recall loop asks only while writers are open: wake it. With them it
  // always asks, and a notification here only woke the give-back thread for nothing (a futex
  // wake-up, a hypercall on a VM, for every create).
  if (file->writable && !cache_leases_on_) recall_cv_.notify_all();
  if (file->writable && regular && (flags & O_TRUNC)) {
    std::lock_guard lock(file->mu);
    // The metadata server truncated already (the old chunks stay until the last close, for
    // readers that still name them; the stripe map keeps them from ever reading as data).
    if (file->size > 0) AQ_RETURN_IF_ERROR(Truncate(*file, 0));
  }
  Opened opened;
  opened.attr = reply.attr;
  opened.attr.size_bytes = file->size;
  opened.unlink_pending = reply.unlink_pending;
  opened.file = std::move(file);
  return opened;
}

Status Client::Impl::Release(std::unique_ptr<OpenFile> f) {
  Status result;
  if (f->writable) {
    std::lock_guard lock(f->mu);
    result = SettleQueuedCommit(*f, /*soon=*/true);  // the last close's, sent with its batch
    if (result.ok()) result = Commit(*f, /*sync=*/false);
    if (f->created_locally) {
      // Never written: the lease its batched create took goes with the release.
      (void)meta_->DropCreatedLease(f->inode);
    }
    if (result.ok() && f->made_here) result = meta_->CreateError(f->inode);
  }
  const InodeId inode = f->inode;
  const bool was_write = f->writable;
  const bool untold = !was_write && ForgetLazy(*f);  // the server never counted this open
  // The kernel may hold this handle's size a while longer; the next handle may start shorter.
  registry_->replaced.Note(inode, f->View(), options_.replaced_view_keep);
  f.reset();  // after the commit, before the release: no one uses this handle's state any more
  if (!untold) QueueRelease(inode, was_write, was_write && result.ok());
  return result;
}

// --- writes -------------------------------------------------------------------------------------

StripeRecord Client::Impl::WriterRecord(const OpenFile& f, uint64_t stripe) const {
  StripeRecord r = f.committed_stripes ? f.committed_stripes->Find(stripe) : StripeRecord{};
  r.abandoned = f.committed_abandoned.get();
  if (r.known && !r.written && f.written_len.count(stripe)) {
    r.written = true;
    r.floor_version = std::min(f.truncate_floor, f.write_version - 1);
  }
  return r;
}

uint64_t Client::Impl::StoredLen(const OpenFile& f, uint64_t stripe) const {
  auto it = f.written_len.find(stripe);
  if (it != f.written_len.end()) return it->second;
  return client::StripeLength(f.layout, f.stored_size, stripe);
}

void Client::Impl::ReleaseBufferBytes(OpenFile& f, uint64_t bytes) {
  f.buffered_bytes -= bytes;
  registry_->dirty_bytes.fetch_sub(bytes);
}

Status Client::Impl::DrainInflight(OpenFile& f) {
  while (!f.inflight.empty()) {
    Status s = f.inflight.front().second.get();
    f.inflight.pop_front();
    if (!s.ok() && f.sticky_error.ok()) f.sticky_error = s;
  }
  return f.sticky_error;
}

// Writes stripe `stripe` from its buffer (read-modify-write when the buffer does not cover the
// stripe's new length), at the writer's version, with the length the local size gives it.
Status Client::Impl::FlushStripe(OpenFile& f, uint64_t stripe, bool sync) {
  const Layout& layout = f.layout;
  const uint64_t new_len = client::StripeLength(layout, f.size, stripe);
  auto it = f.buffers.find(stripe);
  const uint64_t buffer_bytes = it != f.buffers.end() ? it->second.bytes.size() : 0;
  client::ByteVec bytes;
  bool moved = false;
  if (new_len > 0) {
    if (it != f.buffers.end() && it->second.Covers(0, new_len)) {
      bytes = std::move(it->second.bytes);  // the buffer is dropped below: no copy
      bytes.resize(new_len);
      moved = true;
    } else {
      bytes.resize(new_len);
      const uint64_t stored = StoredLen(f, stripe);
      const uint64_t kept = std::min(stored, new_len);  // ReadStripe fills [0, kept)
      std::memset(bytes.data() + kept, 0, new_len - kept);
      if (stored > 0) {
        AQ_RETURN_IF_ERROR(io_->ReadStripe(f.inode, layout, stripe, stored, f.write_version, 0,
                                           std::span<std::byte>(bytes.data(),
                                                                std::min(stored, new_len)),
                                           /*bound_is_committed=*/false, nullptr,
                                           WriterRecord(f, stripe)));
      }
      if (it != f.buffers.end()) {
        for (const auto& [b, e] : it->second.extents) {
          if (b >= new_len) continue;
          const uint64_t end = std::min(e, new_len);
          std::memcpy(bytes.data() + b, it->second.bytes.data() + b, end - b);
        }
      }
    }
    cache_->Invalidate(f.inode, stripe);
    Status written = io_->WriteStripe(f.inode, layout, stripe, bytes, f.write_version,
                                      f.committed_version, sync);
    if (!written.ok()) {
      if (moved) {  // keep the buffer whole for a later retry
        bytes.resize(buffer_bytes);
        it->second.bytes = std::move(bytes);
      }
      return written;
    }
    f.written_len[stripe] = new_len;
  }
  if (it != f.buffers.end()) {
    ReleaseBufferBytes(f, buffer_bytes);
    f.buffers.erase(it);
  }
  return OkStatus();
}

Status Client::Impl::FlushBuffers(OpenFile& f, bool sync) {
  AQ_RETURN_IF_ERROR(DrainInflight(f));
  while (!f.buffers.empty()) {
    AQ_RETURN_IF_ERROR(FlushStripe(f, f.buffers.begin()->first, sync));
  }
  return OkStatus();
}

Result<size_t> Client::Impl::Write(OpenFile& f, uint64_t offset,
                                   std::span<const std::byte> data, bool append) {
  if (!f.writable) return PermissionDenied("file not open for writing");
  std::lock_guard lock(f.mu);
  if (!f.sticky_error.ok()) return f.sticky_error;
  AQ_RETURN_IF_ERROR(SettleQueuedCommit(f));  // its reply moves the write version
  AQ_RETURN_IF_ERROR(EnsureLease(f));  // before the append offset: the lease brings the end
  if (append || (f.flags & O_APPEND)) offset = f.size;
  if (offset + data.size() < offset) return InvalidArgument("offset + size overflows");
  if (offset + data.size() > kMaxFileBytes) {
    return Status(Code::kFileTooLarge, "write past the largest file size");
  }
  if (data.empty()) return size_t{0};
  const Layout& layout = f.layout;
  const uint64_t sb = layout.stripe_bytes();
  uint64_t done = 0;
  while (done < data.size()) {
    const uint64_t at = offset + done;
    const client::StripeOffset loc = client::LocateStripe(layout, at);
    const uint64_t n = std::min<uint64_t>(data.size() - done, sb - loc.offset_in_stripe_bytes);
    const uint64_t b = loc.offset_in_stripe_bytes, e = b + n;
    // A stripe still being written asynchronously must land before it is buffered again.
    for (const auto& [s, fut] : f.inflight) {
      if (s == loc.stripe) {
        AQ_RETURN_IF_ERROR(DrainInflight(f));
        break;
      }
    }
    StripeBuffer& buf = f.buffers[loc.stripe];
    if (buf.bytes.size() < e) {
      const uint64_t grow = e - buf.bytes.size();
      if (buf.bytes.capacity() < e) {
        // Large writes reserve the whole stripe at once: no regrowth copies of buffered bytes.
        buf.bytes.reserve(e >= layout.unit_bytes
                              ? sb
                              : std::min<uint64_t>(sb, std::max<uint64_t>(e, 2 * buf.bytes.capacity())));
      }
      buf.bytes.resize(e);  // uninitialised: only extents are ever read
      f.buffered_bytes += grow;
      registry_->dirty_bytes.fetch_add(grow);
    }
    std::memcpy(buf.bytes.data() + b, data.data() + done, n);
    buf.Add(b, e);
    done += n;
    if (at + n > f.size) f.size = at + n;
    if (buf.Covers(0, sb)) {
      // A full stripe: encode and write it in the background, keeping a few in flight.
      auto bytes = std::make_shared<client::ByteVec>(std::move(buf.bytes));
      const uint64_t stripe = loc.stripe;
      f.buffers.erase(stripe);
      cache_->Invalidate(f.inode, stripe);
      f.written_len[stripe] = sb;
      while (f.inflight.size() >= kMaxInflightStripes) {
        Status s = f.inflight.front().second.get();
        f.inflight.pop_front();
        if (!s.ok() && f.sticky_error.ok()) f.sticky_error = s;
      }
      if (!f.sticky_error.ok()) return f.sticky_error;
      OpenFile* file = &f;
      auto registry = registry_;
      const uint64_t version = f.write_version, committed = f.committed_version;
      f.inflight.emplace_back(stripe, stripe_pool_->Submit([this, file, registry, bytes, stripe,
                                                            version, committed] {
        Status s = io_->WriteStripe(file->inode, file->layout, stripe, *bytes, version,
                                    committed, /*sync=*/false);
        // The buffer's bytes stop counting once written (f.mu is held by whoever waits on us,
        // so only the atomic total is touched here).
        registry->dirty_bytes.fetch_sub(bytes->size());
        return s;
      }));
      f.buffered_bytes -= bytes->size();
    }
  }
  f.local_size.store(f.size);
  f.dirty.store(true);
  f.mtime = Now();
  if (f.buffered_bytes > options_.max_dirty_bytes_per_file ||
      registry_->dirty_bytes.load() > options_.max_dirty_bytes_total) {
    AQ_RETURN_IF_ERROR(FlushBuffers(f, /*sync=*/false));
  }
  return static_cast<size_t>(data.size());
}

Status Client::Impl::Commit(OpenFile& f, bool sync, const AttrChanges* attrs,
                            const Caller& caller, std::optional<Attributes>* committed) {
  if (f.commit_queued.load()) {
    // Nothing was written since it was queued (a write, truncate or fallocate takes its answer
    // first): a close, unlock or recall has nothing more to send (the batch goes before any
    // other call of this client); fsync takes its answer and error.
    if (!sync && attrs == nullptr) return OkStatus();
    AQ_RETURN_IF_ERROR(SettleQueuedCommit(f));
  }
  AQ_RETURN_IF_ERROR(FlushBuffers(f, sync));
  if (!f.dirty.load()) return OkStatus();
  // A stripe stored with fewer than unit_bytes (replicated copies) that the new size makes
  // erasure coded must be rewritten as data + parity chunks before the size is committed.
  std::vector<uint64_t> candidates;
  for (const auto& [stripe, len] : f.written_len) candidates.push_back(stripe);
  if (f.stored_size > 0) candidates.push_back((f.stored_size - 1) / f.layout.stripe_bytes());
  for (uint64_t stripe : candidates) {
    const uint64_t stored = StoredLen(f, stripe);
    const uint64_t want = client::StripeLength(f.layout, f.size, stripe);
    if (stored > 0 && client::IsReplicated(f.layout, stored) &&
        !client::IsReplicated(f.layout, want)) {
      AQ_RETURN_IF_ERROR(FlushStripe(f, stripe, sync));
    }
  }
  AQ_RETURN_IF_ERROR(AQ_FAILPOINT_STATUS("client.commit.before"));
  uint64_t degraded = 0;
  const std::vector<ServerId> missed = io_->TakeMissedServers(f.inode, &degraded);
  // The stripes written since the last commit, as ranges: they join the file's stripe map, so
  // a reader tells a hole (never written) from a stripe whose chunks are lost.
  std::vector<std::pair<uint64_t, uint64_t>> written;
  for (const auto& [stripe, len] : f.written_len) {
    if (!written.empty() && written.back().second == stripe) {
      written.back().second = stripe + 1;
    } else {
      written.emplace_back(stripe, stripe + 1);
    }
  }
  if (written.size() > kMaxCommitStripeRanges) {
    return Internal("commit: " + std::to_string(written.size()) + " written stripe ranges");
  }
  if (!sync && attrs == nullptr && committed == nullptr && missed.empty() &&
      degraded == 0 &&
      meta_->QueueCommit(f.inode, f.size, f.mtime, f.write_version, written)) {
    // A file only this client knows (docs/design.md "Commits in the batch"): its chunks
    // are written, the commit goes with the batch, and close does not wait for it.
    f.commit_queued.store(true);
    f.dirty.store(false);
    return OkStatus();
  }
  Result<client::CommitReply> reply = WithSession([&](SessionId session) {
    return meta_->Commit(f.inode, session, f.size, f.mtime, f.write_version, sync, missed,
                         &written, degraded, attrs, caller);
  });
  if (!reply.ok()) {
    io_->AddMissedServers(f.inode, missed, degraded);
    return reply.status().WithPrefix("commit");
  }
  AdoptCommitReply(f, *reply);
  if (committed != nullptr) *committed = reply->attr;
  return OkStatus();
}

Status Client::Impl::SettleQueuedCommit(OpenFile& f, bool soon) {
  if (!f.commit_queued.load()) return OkStatus();
  std::optional<Result<client::CommitReply>> answer = meta_->TakeQueuedCommit(f.inode, soon);
  f.commit_queued.store(false);
  if (!answer) {
    f.sticky_error = Internal("the queued commit of inode " + f.inode.ToString() + " is lost");
    return f.sticky_error;
  }
  if (!answer->ok()) {
    // Its bytes are not the file's: this handle's later calls fail (close, fsync).
    f.sticky_error = answer->status().WithPrefix("commit");
    return f.sticky_error;
  }
  AdoptCommitReply(f, **answer);
  return OkStatus();
}

void Client::Impl::AdoptCommitReply(OpenFile& f, const client::CommitReply& reply) {
  f.committed_version = f.write_version;
  if (reply.next_write_version > f.write_version) f.write_version = reply.next_write_version;
  f.stored_size = f.size;
  f.written_len.clear();
  f.dirty.store(false);
  f.committed_stripes = reply.attr.stripes;
  f.committed_abandoned = OpenFile::AbandonedOf(reply.attr);
  f.truncate_floor = reply.attr.truncate_floor;
  f.SetView(reply.attr);  // the committed size and version: f.size, f.committed_version
  {
    const auto now = std::chrono::steady_clock::now();
    MutexLock lock(registry_->mu);
    auto& recent = registry_->recent_commits;
    if (recent.size() >= 4096) {
      std::erase_if(recent, [now](const auto& kv) {
        return now - kv.second.at > std::chrono::seconds(10);
      });
      if (recent.size() >= 4096) recent.clear();
    }
    Registry::Committed& c = recent[f.inode];
    if (reply.attr.data_version >= c.attr.data_version) c = Registry::Committed{reply.attr, now};
  }
}

Result<std::optional<Attributes>> Client::Impl::CommitWithAttrs(InodeId inode,
                                                               const AttrChanges& changes,
                                                               const Caller& caller) {
  std::vector<OpenFile*> writers;
  {
    MutexLock lock(registry_->mu);
    auto [begin, end] = registry_->files.equal_range(inode);
    for (auto it = begin; it != end; ++it) {
      if (it->second->writable && it->second->dirty.load()) writers.push_back(it->second);
    }
    for (OpenFile* w : writers) ++w->pins;  // kept alive until unpinned below
  }
  Status s;
  std::optional<Attributes> after;
  // A file only this client knows: the commits are queued in the change batch, and the change
  // follows them there (MetaClient::SetAttr answers it itself).
  const bool local = !writers.empty() && meta_->LocalFile(inode);
  for (size_t i = 0; i < writers.size() && s.ok(); ++i) {
    std::lock_guard lock(writers[i]->mu);
    if (local || i + 1 < writers.size()) {
      s = Commit(*writers[i], /*sync=*/false);  // the last one carries the change
      continue;
    }
    s = Commit(*writers[i], /*sync=*/false, &changes, caller, &after);
    const Code code = s.code();
    if (code == Code::kNotPermitted || code == Code::kPermissionDenied ||
        code == Code::kInvalidArgument) {
      after.reset();
      s = Commit(*writers[i], /*sync=*/false);  // the writes, without the refused change
    }
  }
  {
    MutexLock lock(registry_->mu);
    for (OpenFile* w : writers) --w->pins;
  }
  if (!writers.empty()) registry_->unpinned.notify_all();
  if (!s.ok()) return s;
  return after;
}

Status Client::Impl::Truncate(OpenFile& f, uint64_t new_size) {
  AQ_RETURN_IF_ERROR(SettleQueuedCommit(f));  // its reply moves the write version
  AQ_RETURN_IF_ERROR(EnsureLease(f));
  AQ_RETURN_IF_ERROR(Commit(f, /*sync=*/false));
  const Layout& layout = f.layout;
  const uint64_t sb = layout.stripe_bytes();
  const uint64_t old_size = f.size;
  if (new_size < old_size && new_size % sb != 0) {
    // Rewrite the stripe the new end falls in, so bytes past the new end read as zeros later.
    const uint64_t stripe = new_size / sb;
    const uint64_t new_len = new_size - stripe * sb;
    client::ByteVec bytes(new_len);  // ReadStripe fills every byte
    AQ_RETURN_IF_ERROR(io_->ReadStripe(f.inode, layout, stripe, StoredLen(f, stripe),
                                       f.write_version, 0, bytes, /*bound_is_committed=*/false,
                                       nullptr, WriterRecord(f, stripe)));
    cache_->Invalidate(f.inode, stripe);
    AQ_RETURN_IF_ERROR(io_->WriteStripe(f.inode, layout, stripe, bytes, f.write_version,
                                        f.committed_version, /*sync=*/false));
    f.written_len[stripe] = new_len;
  }
  f.size = new_size;
  f.local_size.store(new_size);
  f.dirty.store(true);
  f.mtime = Now();
  AQ_RETURN_IF_ERROR(Commit(f, /*sync=*/false));
  // The metadata server records the size, cuts the stripes past the end from the file's stripe
  // map (so they read as holes, whatever chunks remain), moves its truncate floor, and queues
  // their GC for after the last close: a reader that opened before still reads the old bytes.
  AttrChanges size_change;
  size_change.size_bytes = new_size;
  AQ_RETURN_IF_ERROR(AQ_FAILPOINT_STATUS("client.truncate.before_setattr"));
  Result<Attributes> attr = WithSession(
      [&](SessionId session) { return meta_->SetAttr(f.inode, size_change, Caller{}, session); });
  if (!attr.ok()) return attr.status().WithPrefix("set size");
  if (new_size < old_size) {
    cache_->InvalidateFrom(f.inode, new_size / sb);
    // The floor is now at or above this writer's version: a commit gives it a version above the
    // floor (and the new map), so stripes it writes next count as data.
    f.dirty.store(true);
    AQ_RETURN_IF_ERROR(Commit(f, /*sync=*/false));
  }
  return OkStatus();
}

Status Client::Impl::TruncateInode(InodeId inode, uint64_t new_size, const Caller& caller) {
  RegisterLazy(&inode);  // as Client::Open with O_TRUNC
  OpenFile* writer = nullptr;
  {
    MutexLock lock(registry_->mu);
    auto [begin, end] = registry_->files.equal_range(inode);
    for (auto it = begin; it != end; ++it) {
      if (it->second->writable) writer = it->second;
    }
    if (writer != nullptr) ++writer->pins;  // kept alive until unpinned below
  }
  if (writer != nullptr) {
    Status s;
    {
      std::lock_guard lock(writer->mu);
      s = Truncate(*writer, new_size);
    }
    {
      MutexLock lock(registry_->mu);
      --writer->pins;
    }
    registry_->unpinned.notify_all();
    return s;
  }
  std::shared_lock<std::shared_mutex> taking;
  Result<client::OpenReply> reply = OpenWithLeaseWait(inode, O_WRONLY, caller, &taking);
  if (!reply.ok()) return reply.status();
  Result<Opened> opened = OpenWith(std::move(*reply), O_WRONLY, std::move(taking));
  if (!opened.ok()) return opened.status();
  Status s;
  {
    std::lock_guard lock(opened->file->mu);
    s = Truncate(*opened->file, new_size);
  }
  Status released = Release(std::move(opened->file));
  return s.ok() ? released : s;
}

// --- reads --------------------------------------------------------------------------------------

Result<StripeBytes> Client::Impl::FetchStripe(InodeId inode, const Layout& layout,
                                              uint64_t stripe, uint64_t stripe_len,
                                              uint64_t version, const StripeRecord& record) {
  // The buffer is only written (its pages only touched) when the read has to decode.
  auto buffer = std::make_shared<client::ByteVec>(stripe_len);
  client::ChunkBytes view;
  AQ_RETURN_IF_ERROR(io_->ReadStripe(inode, layout, stripe, stripe_len, version, 0, *buffer,
                                     /*bound_is_committed=*/true, &view, record));
  if (view.size() == stripe_len) return std::make_shared<const client::ChunkBytes>(std::move(view));
  std::vector<std::span<const std::byte>> all{{buffer->data(), buffer->size()}};
  return std::make_shared<const client::ChunkBytes>(std::move(all), std::move(buffer));
}

Result<StripeBytes> Client::Impl::CachedStripe(const OpenFile& f, const FileView& view,
                                               uint64_t stripe, uint64_t stripe_len) {
  const StripeKey key{f.inode, stripe, view.version, stripe_len, view.floor};
  if (StripeBytes hit = cache_->Get(key)) return hit;
  Result<StripeBytes> fetched =
      FetchStripe(f.inode, f.layout, stripe, stripe_len, view.version, view.Record(stripe));
  if (fetched.ok()) cache_->Put(key, *fetched);
  return fetched;
}

void Client::Impl::Prefetch(const OpenFile& f, const FileView& view, uint64_t stripe,
                            uint64_t stripe_len) {
  const StripeKey key{f.inode, stripe, view.version, stripe_len, view.floor};
  if (cache_->Get(key) || !cache_->BeginFetch(key)) return;
  InodeId inode = f.inode;
  Layout layout = f.layout;
  const uint64_t version = view.version;
  StripeRecord record = view.Record(stripe);
  // The task may outlive the caller's view: it keeps what record.abandoned points into.
  std::shared_ptr<const VersionRanges> abandoned = view.abandoned;
  stripe_pool_->Submit([this, key, inode, layout, stripe, stripe_len, version, record,
                        abandoned] {
    Result<StripeBytes> fetched = FetchStripe(inode, layout, stripe, stripe_len, version, record);
    if (fetched.ok()) cache_->Put(key, std::move(*fetched));
    cache_->EndFetch(key);
    return 0;
  });
}

void Client::Impl::NoteRandomRead(OpenFile& f, const FileView& view, uint64_t stripe,
                                  uint64_t stripe_len, uint64_t bytes) {
  if (options_.read_cache_bytes == 0) return;
  const uint64_t threshold = std::max<uint64_t>(1, f.layout.stripe_bytes() / kRandomPromoteDivisor);
  {
    std::lock_guard seq(f.seq_mu);
    if (f.random_bytes.size() >= OpenFile::kMaxRandomStripes) f.random_bytes.clear();
    uint64_t& seen = f.random_bytes[stripe];
    seen += bytes;
    if (seen < threshold) return;
    f.random_bytes.erase(stripe);  // counted again should the cache drop it
  }
  Prefetch(f, view, stripe, stripe_len);
}

void Client::Impl::ReadAhead(const OpenFile& f, const FileView& view, uint64_t stripe) {
  // A stream's stripes would otherwise fill the whole cache once (read_cache_bytes of freshly
  // touched memory: on a VM, the costliest part of a cold sequential read) and push out the
  // small files' stripes that random readers come back to.
  if (stripe >= 2) cache_->Invalidate(f.inode, stripe - 2);
  const uint64_t stripes = client::StripeCount(f.layout, view.size);
  for (uint64_t s = stripe + 1; s <= stripe + options_.readahead_stripes && s < stripes; ++s) {
    Prefetch(f, view, s, client::StripeLength(f.layout, view.size, s));
  }
}

Result<bool> Client::Impl::ReadFromCache(OpenFile& f, const FileView& fv, uint64_t offset,
                                         uint64_t size, Client::ReadView* view) {
  if (size == 0) return false;
  const Layout& layout = f.layout;
  const uint64_t sb = layout.stripe_bytes();
  const uint64_t file_size = fv.size;
  if (offset >= file_size) return false;
  const uint64_t n = std::min<uint64_t>(size, file_size - offset);
  const client::StripeOffset loc = client::LocateStripe(layout, offset);
  const uint64_t b = loc.offset_in_stripe_bytes;
  if (b + n > sb) return false;  // spans two stripes: Read copies the pieces
  const uint64_t stripe_len = client::StripeLength(layout, file_size, loc.stripe);
  const StripeKey key{f.inode, loc.stripe, fv.version, stripe_len, fv.floor};
  StripeBytes cached = cache_->Get(key);
  bool sequential;
  {
    // The same stream detection as Read; the state changes only if this call serves the read.
    std::lock_guard seq(f.seq_mu);
    const uint64_t run = (offset == f.next_offset && offset != 0) ? f.sequential + 1 : 0;
    sequential = run > 0 || n >= sb;
    if (!cached && !sequential) return false;
    f.sequential = run;
    f.next_offset = offset + n;
  }
  if (!cached) {
    Result<StripeBytes> fetched = CachedStripe(f, fv, loc.stripe, stripe_len);
    if (!fetched.ok()) return fetched.status();
    cached = *fetched;
  }
  if (b + n > cached->size()) return false;  // not expected: the stripe holds stripe_len bytes
  view->pieces.clear();
  cached->Slice(b, n, &view->pieces);
  if (view->pieces.size() > Client::kMaxViewPieces) {
    // Too many pieces for one reply to the kernel (an iovec each): gather them.
    auto gathered = std::make_shared<client::ByteVec>(n);
    cached->CopyTo(b, std::span<std::byte>(*gathered));
    view->pieces.assign(1, std::span<const std::byte>(gathered->data(), n));
    view->keep = std::move(gathered);
  } else {
    view->keep = std::move(cached);
  }
  if (sequential) ReadAhead(f, fv, loc.stripe);
  return true;
}

Result<size_t> Client::Impl::Read(OpenFile& f, uint64_t offset, std::span<std::byte> out,
                                  Client::ReadFor reader) {
  const Layout& layout = f.layout;
  const uint64_t sb = layout.stripe_bytes();
  if (f.writable) {
    // The writer sees its own buffered and in-flight data: serialize with its writes.
    std::unique_lock lock(f.mu);
    AQ_RETURN_IF_ERROR(DrainInflight(f));
    if (reader != Client::ReadFor::kCaller) {
      // Past the end this writer's truncate set, in a window where the kernel may not know it.
      const FileView fv = f.ViewFor(reader, offset, offset + out.size(), f.size);
      if (fv.replaced) {
        lock.unlock();
        Result<size_t> n = ReadAt(f, fv, offset, out);
        if (n.ok()) return n;
        LogReplacedViewFallback(f.inode, fv, n.status());
        lock.lock();
        AQ_RETURN_IF_ERROR(DrainInflight(f));
      }
    }
    if (offset >= f.size) return size_t{0};
    const uint64_t n = std::min<uint64_t>(out.size(), f.size - offset);
    uint64_t done = 0;
    while (done < n) {
      const client::StripeOffset loc = client::LocateStripe(layout, offset + done);
      const uint64_t len = std::min<uint64_t>(n - done, sb - loc.offset_in_stripe_bytes);
      const uint64_t b = loc.offset_in_stripe_bytes, e = b + len;
      std::span<std::byte> piece = out.subspan(done, len);
      auto it = f.buffers.find(loc.stripe);
      if (it == f.buffers.end() || !it->second.Covers(b, e)) {
        AQ_RETURN_IF_ERROR(io_->ReadStripe(f.inode, layout, loc.stripe, StoredLen(f, loc.stripe),
                                           f.write_version, b, piece,
                                           /*bound_is_committed=*/false, nullptr,
                                           WriterRecord(f, loc.stripe)));
      }
      if (it != f.buffers.end()) {
        for (const auto& [xb, xe] : it->second.extents) {
          const uint64_t ob = std::max(xb, b), oe = std::min(xe, e);
          if (ob < oe) std::memcpy(piece.data() + (ob - b), it->second.bytes.data() + ob, oe - ob);
        }
      }
      done += len;
    }
    return static_cast<size_t>(n);
  }
  FileView fv = f.ViewFor(reader, offset, offset + out.size(), std::nullopt);
  if (fv.replaced) {
    Result<size_t> n = ReadAt(f, fv, offset, out);
    if (n.ok()) return n;
    LogReplacedViewFallback(f.inode, fv, n.status());
    fv = f.View();
  }
  return ReadAt(f, fv, offset, out);
}

Result<size_t> Client::Impl::ReadAt(OpenFile& f, const FileView& fv, uint64_t offset,
                                    std::span<std::byte> out) {
  const Layout& layout = f.layout;
  const uint64_t sb = layout.stripe_bytes();
  const uint64_t size = fv.size, version = fv.version;
  if (offset >= size) return size_t{0};
  const uint64_t n = std::min<uint64_t>(out.size(), size - offset);
  bool sequential;
  {
    std::lock_guard seq(f.seq_mu);
    f.sequential = (offset == f.next_offset && offset != 0) ? f.sequential + 1 : 0;
    f.next_offset = offset + n;
    sequential = f.sequential > 0 || n >= sb;
  }
  uint64_t done = 0;
  uint64_t last_stripe = 0;
  while (done < n) {
    const client::StripeOffset loc = client::LocateStripe(layout, offset + done);
    const uint64_t len = std::min<uint64_t>(n - done, sb - loc.offset_in_stripe_bytes);
    const uint64_t b = loc.offset_in_stripe_bytes;
    const uint64_t stripe_len = client::StripeLength(layout, size, loc.stripe);
    std::span<std::byte> piece = out.subspan(done, len);
    last_stripe = loc.stripe;
    const StripeKey key{f.inode, loc.stripe, version, stripe_len, fv.floor};
    StripeBytes cached = cache_->Get(key);
    if (!cached && sequential) {
      Result<StripeBytes> fetched = CachedStripe(f, fv, loc.stripe, stripe_len);
      if (!fetched.ok()) return fetched.status();
      cached = *fetched;
    }
    if (cached) {
      const uint64_t have = b < cached->size() ? std::min<uint64_t>(len, cached->size() - b) : 0;
      if (have > 0) cached->CopyTo(b, piece.subspan(0, have));
      if (have < len) std::memset(piece.data() + have, 0, len - have);
    } else {
      AQ_RETURN_IF_ERROR(
          io_->ReadStripe(f.inode, layout, loc.stripe, stripe_len, version, b, piece,
                          /*bound_is_committed=*/true, nullptr, fv.Record(loc.stripe)));
      NoteRandomRead(f, fv, loc.stripe, stripe_len, len);
    }
    done += len;
  }
  if (sequential) ReadAhead(f, fv, last_stripe);
  return static_cast<size_t>(n);
}

}  // namespace aquifer

void std::default_delete<aquifer::OpenFile>::operator()(aquifer::OpenFile* file) const {
  delete file;
}
