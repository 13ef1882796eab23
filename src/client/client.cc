// aquifer::Client: connection, session, namespace calls and path helpers. File I/O is in
// file_io.cc.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <thread>

#include "aquifer/client.h"
#include "client/client_impl.h"
#include "client/rpc/meta_client.h"
#include "common/failpoint.h"
#include "common/logging.h"

namespace aquifer {

namespace {
constexpr std::chrono::milliseconds kMapRefreshPeriod{2000};
constexpr std::chrono::milliseconds kBackgroundTick{200};

Status CheckName(std::string_view name) {
  if (name.empty() || name == "." || name == "..") return InvalidArgument("bad name");
  if (name.size() > kMaxNameBytes) return Status(Code::kNameTooLong, "name over 255 bytes");
  if (name.find('/') != std::string_view::npos || name.find('\0') != std::string_view::npos) {
    return InvalidArgument("name contains '/' or NUL");
  }
  return OkStatus();
}
}  // namespace

Client::Impl::Impl(const ClientOptions& options) : options_(options) {
  registry_->replaced_view_keep = options.replaced_view_keep;
}

// --- ReplacedViews --------------------------------------------------------------------------

void ReplacedViews::Note(InodeId inode, FileView view, std::chrono::milliseconds keep) {
  if (view.size == 0 || keep.count() <= 0) return;
  view.replaced = true;
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(mu_);
  // Expired notes go first (an entry noted again since stays: its time is newer).
  while (!order_.empty() && now - order_.front().second >= keep) {
    auto it = by_inode_.find(order_.front().first);
    if (it != by_inode_.end() && it->second.at == order_.front().second) by_inode_.erase(it);
    order_.pop_front();
  }
  auto [it, fresh] = by_inode_.try_emplace(inode.value(), Entry{view, now});
  if (!fresh) {
    // A longer view noted within `keep` may still be the kernel's: keep it (its time too).
    if (now - it->second.at < keep && it->second.view.size > view.size) return;
    it->second = Entry{std::move(view), now};
  }
  order_.emplace_back(inode.value(), now);
}

std::optional<FileView> ReplacedViews::Longer(InodeId inode, uint64_t size,
                                              std::chrono::milliseconds keep) const {
  std::lock_guard lock(mu_);
  auto it = by_inode_.find(inode.value());
  if (it == by_inode_.end() || it->second.view.size <= size ||
      Clock::now() - it->second.at >= keep) {
    return std::nullopt;
  }
  return it->second.view;
}


Client::Impl::~Impl() {
  if (lazy_opened_.load() != 0) {
    Logger("client")->info("lazy opens: {} read-only opens answered from kept attributes, {} of "
                           "them later told to the metadata server",
                           lazy_opened_.load(), lazy_told_.load());
  }
  {
    std::lock_guard lock(recall_mu_);
    recall_stop_ = true;
  }
  recall_cv_.notify_all();
  if (recaller_.joinable()) recaller_.join();
  if (giver_.joinable()) giver_.join();
  {
    std::lock_guard lock(release_mu_);
    release_stop_ = true;
  }
  release_cv_.notify_all();
  if (releaser_.joinable()) releaser_.join();  // sends every queued release first
  {
    std::lock_guard lock(bg_mu_);
    stop_ = true;
  }
  bg_cv_.notify_all();
  if (bg_.joinable()) bg_.join();
  stripe_pool_.reset();  // read-ahead tasks use cache_ and io_
  if (session_.load() != 0) {
    Status s = meta_->CloseSession(session());
    if (!s.ok()) Logger("client")->debug("close session failed status={}", s.ToString());
  }
}

Status Client::Impl::Start() {
  meta_ = client::NewGrpcMetaClient(options_.meta_address, options_.rpc_timeout,
                                     options_.attr_cache_ttl, options_.meta_wire,
                                     options_.meta_outage_wait);
  client::ChunkIo::Options io_options;
  io_options.chunk_timeout = options_.chunk_timeout;
  io_options.write_timeout = options_.rpc_timeout;
  io_options.io_threads = options_.io_threads;
  io_options.data_wire = options_.data_wire;
  io_ = std::make_unique<client::ChunkIo>(meta_.get(), io_options);
  stripe_pool_ = std::make_unique<client::ThreadPool>(
      std::max<unsigned>(2, options_.readahead_stripes + 2));
  cache_ = std::make_unique<client::StripeCache>(options_.read_cache_bytes);

  Result<client::SessionInfo> session =
      meta_->OpenSession(options_.client_name, options_.cache_leases);
  if (!session.ok()) return session.status().WithPrefix("open session");
  session_.store(session->id.value());
  lease_ttl_ = session->lease_ttl;
  if (options_.cache_leases && session->cache_lease.count() > 0) {
    cache_leases_on_ = true;
    cache_lease_ = session->cache_lease;
    meta_->SetCacheSession(session->id, cache_lease_);
    if (options_.dir_leases && !client_credential_) {
      dir_leases_on_ = true;
      meta_->EnableDirLeases(options_.on_name_recalled, options_.on_attrs_recalled);
      Logger("client")->info("exclusive directory leases on: creates are sent in batches");
    }
    Logger("client")->info("cache leases on (the server recalls within {} ms)",
                           session->cache_lease.count());
  } else if (options_.cache_leases) {
    Logger("client")->info("cache leases asked for, but the metadata server offers none");
  }
  AQ_RETURN_IF_ERROR(io_->RefreshMap().WithPrefix("fetch cluster map"));
  bg_ = std::thread([this] { BackgroundLoop(); });
  releaser_ = std::thread([this] { ReleaseLoop(); });
  recaller_ = std::thread([this] { RecallLoop(); });
  if (cache_leases_on_) giver_ = std::thread([this] { GiveLoop(); });
  return OkStatus();
}

void Client::Impl::QueueRelease(InodeId inode, bool was_write, bool committed) {
  bool wake;
  {
    std::lock_guard lock(release_mu_);
    release_queue_.push_back({inode, was_write, committed});
    // Wake the releaser for the first item (it then lingers) and for a full batch; not for
    // each item in between, which would cost a wake-up per close.
    wake = release_queue_.size() == 1 || release_queue_.size() == kReleaseBatchItems;
  }
  if (wake) release_cv_.notify_one();
}

void Client::Impl::ReleaseLoop() {
  std::unique_lock lock(release_mu_);
  std::vector<client::MetaClient::ReleaseItem> batch;
  for (;;) {
    release_cv_.wait(lock, [this] { return release_stop_ || !release_queue_.empty(); });
    if (release_queue_.empty()) return;  // stopping, and nothing left to send
    // Let the closes of a burst (cp -r, a create loop, a DataLoader epoch) gather into one call.
    release_cv_.wait_for(lock, kReleaseLinger, [this] {
      return release_stop_ || release_queue_.size() >= kReleaseBatchItems;
    });
    batch.clear();
    while (!release_queue_.empty() && batch.size() < kReleaseBatchItems) {
      batch.push_back(release_queue_.front());
      release_queue_.pop_front();
    }
    lock.unlock();
    Result<std::vector<Status>> results = WithSession(
        [&](SessionId session) { return meta_->ReleaseBatch(session, batch); });
    for (size_t i = 0; i < batch.size(); ++i) {
      const Status& s = !results.ok() ? results.status() : (*results)[i];
      if (!s.ok()) {
        Logger("client")->warn("release inode={} failed status={}", batch[i].inode.value(),
                               s.ToString());
      }
    }
    lock.lock();
  }
}

void Client::Impl::BackgroundLoop() {
  using Clock = std::chrono::steady_clock;
  std::chrono::milliseconds keepalive_period =
      lease_ttl_.count() > 0 ? lease_ttl_ / 3 : std::chrono::milliseconds(3000);
  keepalive_period = std::max(keepalive_period, std::chrono::milliseconds(50));
  auto next_keepalive = Clock::now() + keepalive_period;
  auto next_refresh = Clock::now() + kMapRefreshPeriod;
  std::unique_lock lock(bg_mu_);
  while (!stop_) {
    bg_cv_.wait_for(lock, std::min<std::chrono::milliseconds>(kBackgroundTick, keepalive_period),
                    [this] { return stop_; });
    if (stop_) break;
    lock.unlock();
    const auto now = Clock::now();
    if (now >= next_keepalive) {
      next_keepalive = now + keepalive_period;
      const SessionId used = session();
      Status s = meta_->KeepAlive(used);
      if (IsSessionLost(s)) {
        // The metadata server no longer knows the session (it expired while this client was cut
        // off longer than its TTL): open a new one.
        Logger("client")->warn("keepalive failed status={}; reopening session", s.ToString());
        RenewSession(used);
      } else if (!s.ok() && s.code() != Code::kUnavailable) {
        // Any other refusal keeps the session: a new one would drop its leases and locks.
        Logger("client")->warn("keepalive failed status={}; keeping session", s.ToString());
      }
      // kUnavailable (the metadata server is restarting; it restores sessions) is ignored: the
      // next keep-alive, a third of a TTL later, tries again.
    }
    if (now >= next_refresh) {
      next_refresh = now + kMapRefreshPeriod;
      io_->RequestRefresh();
    }
    // The fail point (error) keeps this client's map as it is, for a test of a reader whose
    // map is older than a file (the read and write paths still fetch one when they need it).
    if (AQ_FAILPOINT_STATUS("client.map.background_refresh").ok()) io_->RefreshIfRequested();
    lock.lock();
  }
}

bool Client::Impl::IsSessionLost(const Status& s) {
  return s.code() == Code::kStale && s.message().find("unknown or expired") != std::string::npos;
}

void Client::Impl::RenewSession(SessionId lost) {
  std::lock_guard lock(renew_mu_);
  if (session() != lost) return;  // another thread renewed it already
  Result<client::SessionInfo> fresh =
      meta_->OpenSession(options_.client_name, cache_leases_on_.load());
  if (!fresh.ok()) {
    Logger("client")->warn("reopen session failed status={}", fresh.status().ToString());
    return;
  }
  session_.store(fresh->id.value());
  if (cache_leases_on_) meta_->SetCacheSession(fresh->id, cache_lease_);
  Logger("client")->info("session renewed old={} new={}", lost.value(), fresh->id.value());
  RegisterAllLazy();  // the new session holds no lease the server would recall them through
}

Attributes Client::Impl::Overlay(Attributes attr) {
  MutexLock lock(registry_->mu);
  auto recent = registry_->recent_commits.find(attr.inode);
  if (recent != registry_->recent_commits.end() && attr.mode != 0 && S_ISREG(attr.mode) &&
      attr.data_version < recent->second.attr.data_version) {
    // The reply predates this client's own commit (see Registry::recent_commits).
    const Attributes& c = recent->second.attr;
    attr.size_bytes = c.size_bytes;
    attr.blocks = c.blocks;
    attr.mtime = c.mtime;
    attr.ctime = c.ctime;
    attr.data_version = c.data_version;
    attr.stripes = c.stripes;
    attr.truncate_floor = c.truncate_floor;
    attr.abandoned_versions = c.abandoned_versions;
  }
  const Attributes committed = attr;  // read views take what the metadata server said
  auto [begin, end] = registry_->files.equal_range(attr.inode);
  for (auto it = begin; it != end; ++it) {
    OpenFile* f = it->second;
    if (f->writable) {
      if (f->dirty.load() || f->commit_queued.load()) attr.size_bytes = f->local_size.load();
    } else {
      // Close-to-open: a read handle sees what the metadata server now says.
      f->RefreshView(committed);
    }
  }
  return attr;
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

bool Client::CachesUnderLeases() const { return impl_->cache_leases_on_.load(); }

const std::array<const char*, 5>& DegradedCauseNames() {
  static const std::array<const char*, 5> names = [] {
    std::array<const char*, 5> n{};
    for (size_t i = 0; i < n.size(); ++i) {
      n[i] = client::ChunkIo::DegradedCauseName(static_cast<client::ChunkIo::DegradedCause>(i));
    }
    return n;
  }();
  return names;
}

ClientCounters Client::Counters() const {
  ClientCounters c;
  impl_->meta_->AddCallCounts(&c);
  const client::ChunkIo& io = *impl_->io_;
  c.chunk_reads = io.chunk_rpcs();
  for (size_t i = 0; i < c.degraded_reads_by_cause.size(); ++i) {
    c.degraded_reads_by_cause[i] =
        io.degraded_reads(static_cast<client::ChunkIo::DegradedCause>(i));
  }
  c.lost_stripe_reads = io.lost_stripe_reads();
  return c;
}

std::chrono::steady_clock::duration Client::CacheTrustLeft() const {
  using Clock = std::chrono::steady_clock;
  if (!impl_->cache_leases_on_.load()) return Clock::duration::max();
  const Clock::time_point until = impl_->meta_->CacheTrustedUntil();
  if (until == Clock::time_point::max()) return Clock::duration::max();
  return std::max(until - Clock::now(), Clock::duration::zero());
}

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  if (options.meta_address.empty()) return InvalidArgument("meta_address is required");
  if (options.io_threads == 0) return InvalidArgument("io_threads must be > 0");
  if (options.meta_outage_wait.count() < 0) {
    return InvalidArgument("meta_outage_wait must be >= 0");
  }
  auto impl = std::make_unique<Impl>(options);
  AQ_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

// --- namespace ---------------------------------------------------------------------------

Result<Attributes> Client::Lookup(InodeId parent, std::string_view name, const Caller& caller) {
  if (name.size() > kMaxNameBytes) return Status(Code::kNameTooLong, "name over 255 bytes");
  Result<Attributes> attr = impl_->meta_->Lookup(parent, name, caller);
  if (!attr.ok()) return attr;
  return impl_->Overlay(std::move(*attr));
}

Result<Attributes> Client::GetAttr(InodeId inode) {
  Result<Attributes> attr = impl_->meta_->GetAttr(inode);
  if (!attr.ok() && attr.status().code() == Code::kNotFound) {
    // Deleted on the metadata server while this client has it open: another host unlinked or
    // replaced the name, and the server no longer counted this open (a read-only open it was
    // never told of, Impl::OpenLazily). POSIX keeps an open unlinked file alive for its holders,
    // so fstat answers what the open found, with no links left, not ESTALE.
    MutexLock lock(impl_->registry_->mu);
    auto it = impl_->registry_->files.find(inode);
    if (it != impl_->registry_->files.end()) {
      const OpenFile& f = *it->second;
      Attributes orphan = f.opened_attr;
      orphan.nlink = 0;
      orphan.size_bytes = f.writable ? f.local_size.load() : f.View().size;
      return orphan;
    }
  }
  if (!attr.ok()) return attr;
  return impl_->Overlay(std::move(*attr));
}

Result<Attributes> Client::SetAttr(InodeId inode, const AttrChanges& changes,
                                   const Caller& caller) {
  if (changes.size_bytes) {
    if (*changes.size_bytes > kMaxFileBytes) {
      return Status(Code::kFileTooLarge, "size past the largest file size");
    }
    AQ_RETURN_IF_ERROR(impl_->TruncateInode(inode, *changes.size_bytes, caller));
  }
  AttrChanges rest = changes;
  rest.size_bytes.reset();
  if (rest.mode || rest.uid || rest.gid || rest.atime || rest.mtime || rest.atime_now ||
      rest.mtime_now) {
    if (rest.atime || rest.mtime || rest.atime_now || rest.mtime_now) {
      // Times on a file this client writes: its buffered writes are committed first, with the
      // change in the same call (Impl::CommitWithAttrs).
      Result<std::optional<Attributes>> merged = impl_->CommitWithAttrs(inode, rest, caller);
      if (!merged.ok()) return merged.status();
      if (merged->has_value()) return impl_->Overlay(std::move(**merged));
    }
    Result<Attributes> attr = impl_->WithSession(
        [&](SessionId session) { return impl_->meta_->SetAttr(inode, rest, caller, session); });
    if (!attr.ok()) return attr;
    return impl_->Overlay(std::move(*attr));
  }
  return GetAttr(inode);
}

Result<Attributes> Client::Mkdir(InodeId parent, std::string_view name, uint32_t mode,
                                 const Caller& caller) {
  AQ_RETURN_IF_ERROR(CheckName(name));
  return impl_->meta_->Mkdir(parent, name, (mode & ~S_IFMT) | S_IFDIR, caller);
}

Result<Attributes> Client::Mknod(InodeId parent, std::string_view name, uint32_t mode,
                                 uint64_t rdev, const Caller& caller) {
  AQ_RETURN_IF_ERROR(CheckName(name));
  if ((mode & S_IFMT) == 0) mode |= S_IFREG;
  Result<client::OpenReply> r = impl_->meta_->Create(parent, name, mode, rdev, /*exclusive=*/true,
                                                     caller, SessionId(0), false);
  if (!r.ok()) return r.status();
  return r->attr;
}

Result<Attributes> Client::Symlink(InodeId parent, std::string_view name,
                                   std::string_view target, const Caller& caller) {
  AQ_RETURN_IF_ERROR(CheckName(name));
  if (target.empty() || target.size() > kMaxSymlinkBytes) {
    return InvalidArgument("symlink target must be 1..4096 bytes");
  }
  return impl_->meta_->Symlink(parent, name, target, caller);
}

Result<Attributes> Client::Link(InodeId inode, InodeId new_parent, std::string_view new_name,
                                const Caller& caller) {
  AQ_RETURN_IF_ERROR(CheckName(new_name));
  Result<Attributes> attr = impl_->meta_->Link(inode, new_parent, new_name, caller);
  if (!attr.ok()) return attr;
  return impl_->Overlay(std::move(*attr));
}

Status Client::Unlink(InodeId parent, std::string_view name, const Caller& caller) {
  if (name.size() > kMaxNameBytes) return Status(Code::kNameTooLong, "name over 255 bytes");
  impl_->RegisterAllLazy();  // the server keeps an inode open here only if it knows of the open
  return impl_->meta_->Unlink(parent, name, caller);
}

Status Client::Rmdir(InodeId parent, std::string_view name, const Caller& caller) {
  if (name.size() > kMaxNameBytes) return Status(Code::kNameTooLong, "name over 255 bytes");
  return impl_->meta_->Rmdir(parent, name, caller);
}

Status Client::Rename(InodeId parent, std::string_view name, InodeId new_parent,
                      std::string_view new_name, uint32_t flags, const Caller& caller) {
  AQ_RETURN_IF_ERROR(CheckName(new_name));
  if (name.size() > kMaxNameBytes) return Status(Code::kNameTooLong, "name over 255 bytes");
  impl_->RegisterAllLazy();  // a rename over a file open here: as Unlink
  return impl_->meta_->Rename(parent, name, new_parent, new_name, flags, caller);
}

Result<std::string> Client::Readlink(InodeId inode) { return impl_->meta_->Readlink(inode); }

Result<DirPage> Client::ReadDir(InodeId dir, uint64_t cookie, uint32_t max_entries, bool plus,
                                const Caller& caller) {
  Result<DirPage> page = impl_->meta_->ReadDir(dir, cookie, max_entries, plus, caller);
  if (!page.ok() || !plus) return page;
  for (DirEntry& e : page->entries) {
    if (e.attr) e.attr = impl_->Overlay(std::move(*e.attr));
  }
  return page;
}

Result<std::string> Client::GetXattr(InodeId inode, std::string_view name,
                                     const Caller& caller) {
  return impl_->meta_->GetXattr(inode, name, caller);
}

Status Client::SetXattr(InodeId inode, std::string_view name, std::string_view value, int flags,
                        const Caller& caller) {
  return impl_->meta_->SetXattr(inode, name, value, flags, caller);
}

Result<std::vector<std::string>> Client::ListXattr(InodeId inode, const Caller& caller) {
  return impl_->meta_->ListXattr(inode, caller);
}

Status Client::RemoveXattr(InodeId inode, std::string_view name, const Caller& caller) {
  return impl_->meta_->RemoveXattr(inode, name, caller);
}

Result<FsStats> Client::StatFs() { return impl_->meta_->StatFs(); }

uint64_t Client::ReadCacheBytes() const { return impl_->cache_->used_bytes(); }

// --- files ---------------------------------------------------------------------------------

Result<Client::Opened> Client::Open(InodeId inode, int flags, const Caller& caller) {
  if (std::optional<Opened> lazy = impl_->OpenLazily(inode, flags, caller)) return std::move(*lazy);
  // An O_TRUNC cuts stripes a lazy reader of this client may still read: the server must know
  // of it first, to hold them (MetadataService::TruncateLocked).
  if (flags & O_TRUNC) impl_->RegisterLazy(&inode);
  std::shared_lock<std::shared_mutex> taking;
  Result<client::OpenReply> reply = impl_->OpenWithLeaseWait(inode, flags, caller, &taking);
  const bool gone = reply.ok() ? reply->attr.nlink == 0
                               : reply.status().code() == Code::kNotFound ||
                                     reply.status().code() == Code::kStale;
  if (gone) {
    // The inode lost its last name (or is gone) while something here still named it: a kernel
    // dentry, or attributes this client kept under a cache lease whose recall is on its way
    // (another host's rename-over has not returned yet). The caller will look the name up again
    // (the kernel does on ESTALE): that lookup must ask the server, not find the kept copy.
    impl_->meta_->ForgetCached(inode);
  }
  if (!reply.ok()) return reply.status();
  return impl_->OpenWith(std::move(*reply), flags, std::move(taking));
}

Result<Client::Opened> Client::Create(InodeId parent, std::string_view name, uint32_t mode,
                                      int flags, const Caller& caller) {
  AQ_RETURN_IF_ERROR(CheckName(name));
  const bool writable = (flags & O_ACCMODE) != O_RDONLY;
  mode = (mode & ~S_IFMT) | S_IFREG;
  if (impl_->dir_leases_on_) {
    // Under an exclusive lease on `parent`, a name known to be free is created here, and sent
    // to the metadata server later in a batch (docs/design.md "Exclusive directory leases").
    if (std::optional<client::OpenReply> local =
            impl_->meta_->CreateLocally(parent, name, mode, caller, writable)) {
      return impl_->OpenWith(std::move(*local), flags);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + impl_->options_.lease_wait;
  std::chrono::milliseconds backoff(10);
  if (flags & O_TRUNC) impl_->RegisterAllLazy();  // it may truncate an existing file: as Open
  for (;;) {
    // A create for write takes the lease: as an open (Impl::OpenWithLeaseWait).
    std::shared_lock<std::shared_mutex> taking;
    if (writable) taking = std::shared_lock(impl_->give_mu_);
    Result<client::OpenReply> reply = impl_->WithSession([&](SessionId session) {
      return impl_->meta_->Create(parent, name, mode, 0, (flags & O_EXCL) != 0, caller, session,
                                  writable);
    });
    if (reply.ok()) return impl_->OpenWith(std::move(*reply), flags, std::move(taking));
    taking = {};
    if (reply.status().code() != Code::kWouldBlock ||
        std::chrono::steady_clock::now() + backoff > deadline) {
      return reply.status();
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

namespace {
// Reads of a read-only handle whose view is out of date (kStale: a stripe was written again and
// the view's version pruned) are tried again this many times in all, each after a fresh view.
constexpr int kStaleReadTries = 4;
}  // namespace

bool Client::Impl::RefreshViewAfterStale(const OpenFile& f, const FileView& before,
                                         const Status& s, bool* lost) {
  if (s.code() != Code::kStale || f.writable) return false;
  // The server's own answer, not attributes kept under a cache lease: this path exists for
  // when what the client holds turned out wrong.
  meta_->ForgetCached(f.inode);
  Result<Attributes> attr = meta_->GetAttr(f.inode);
  if (!attr.ok()) return false;
  if (attr->data_version == before.version && attr->size_bytes == before.size &&
      attr->truncate_floor == before.floor) {
    // Nothing was committed since the view: the bound's chunks should be there, and are not.
    *lost = true;
    return false;
  }
  Overlay(*attr);  // sets the view of every read handle of the inode
  Logger("client")->debug("read view refreshed after a superseded stripe ino={} version={}",
                          f.inode.value(), attr->data_version);
  return true;
}

template <class Fn>
auto Client::Impl::ReadWithFreshViews(OpenFile& file, Fn&& read) -> decltype(read()) {
  if (lazy_count_.load() != 0 && meta_->CacheTrustedUntil() <= std::chrono::steady_clock::now()) {
    // Cut off from the server past the lease's trust: it may have stopped holding inodes for
    // this client's recalls. Opens it knows of keep the inodes.
    RegisterAllLazy();
  }
  for (int attempt = 1;; ++attempt) {
    // The view the read goes by (or an older one): a view refreshed by another thread during
    // the read is a reason to read again, not a sign of lost chunks.
    const FileView before = file.View();
    auto result = read();
    bool lost = false;
    if (result.ok() || attempt == kStaleReadTries ||
        !RefreshViewAfterStale(file, before, result.status(), &lost)) {
      // A stripe "rewritten after the view" when nothing was committed since: its committed
      // chunks are gone. Never ESTALE for that (the kernel would look the name up again, for
      // nothing): it is lost data, EIO.
      if (lost) return Status(Code::kDataLoss, result.status().message());
      return result;
    }
  }
}

Result<size_t> Client::Read(OpenFile& file, uint64_t offset_bytes, std::span<std::byte> out) {
  return impl_->ReadWithFreshViews(file, [&] { return impl_->Read(file, offset_bytes, out); });
}

Result<Client::ReadView> Client::ReadShared(OpenFile& file, uint64_t offset_bytes,
                                            uint64_t size_bytes, ReadFor reader) {
  return impl_->ReadWithFreshViews(
      file, [&] { return impl_->ReadShared(file, offset_bytes, size_bytes, reader); });
}

Result<Client::ReadView> Client::Impl::ReadShared(OpenFile& file, uint64_t offset_bytes,
                                                  uint64_t size_bytes, ReadFor reader) {
  if (!file.writable) {
    FileView fv = file.ViewFor(reader, offset_bytes, offset_bytes + size_bytes, std::nullopt);
    if (fv.replaced) {
      Result<ReadView> r = ReadSharedAt(file, fv, offset_bytes, size_bytes);
      if (r.ok()) return r;
      LogReplacedViewFallback(file.inode, fv, r.status());
      fv = file.View();
    }
    return ReadSharedAt(file, fv, offset_bytes, size_bytes);
  }
  // A writer's reads must see its buffers: Read.
  auto buffer = std::make_shared<client::ByteVec>(size_bytes);  // Read fills what it returns
  Result<size_t> n = Read(file, offset_bytes, std::span<std::byte>(*buffer), reader);
  if (!n.ok()) return n.status();
  ReadView view;
  view.pieces.assign(1, std::span<const std::byte>(buffer->data(), *n));
  view.keep = std::move(buffer);
  return view;
}

Result<Client::ReadView> Client::Impl::ReadSharedAt(OpenFile& file, const FileView& fv,
                                                    uint64_t offset_bytes, uint64_t size_bytes) {
  ReadView view;
  Result<bool> cached = ReadFromCache(file, fv, offset_bytes, size_bytes, &view);
  if (!cached.ok()) return cached.status();
  if (*cached) return view;
  auto buffer = std::make_shared<client::ByteVec>(size_bytes);  // ReadAt fills what it returns
  Result<size_t> n = ReadAt(file, fv, offset_bytes, std::span<std::byte>(*buffer));
  if (!n.ok()) return n.status();
  view.pieces.assign(1, std::span<const std::byte>(buffer->data(), *n));
  view.keep = std::move(buffer);
  return view;
}

uint64_t Client::ReadView::size() const {
  uint64_t n = 0;
  for (const auto& piece : pieces) n += piece.size();
  return n;
}

Result<size_t> Client::Write(OpenFile& file, uint64_t offset_bytes,
                             std::span<const std::byte> data) {
  return impl_->Write(file, offset_bytes, data);
}

Result<size_t> Client::Append(OpenFile& file, std::span<const std::byte> data) {
  return impl_->Write(file, 0, data, /*append=*/true);
}

Status Client::Flush(OpenFile& file) {
  if (!file.writable) return OkStatus();
  std::lock_guard lock(file.mu);
  AQ_RETURN_IF_ERROR(impl_->Commit(file, /*sync=*/false));
  // A local create the server already refused (known without waiting: close does not wait
  // for the batch).
  return file.made_here ? impl_->meta_->CreateError(file.inode) : OkStatus();
}

Status Client::Fsync(OpenFile& file, bool datasync) {
  if (impl_->dir_leases_on_) {
    // The file's create may still be in a batch: durable first, with its answer.
    AQ_RETURN_IF_ERROR(impl_->meta_->FlushChanges(/*sync=*/true));
    AQ_RETURN_IF_ERROR(impl_->meta_->CreateError(file.inode));
  }
  if (!file.writable) return OkStatus();
  std::lock_guard lock(file.mu);
  return impl_->Commit(file, /*sync=*/true);
}

Status Client::SyncNamespace() {
  AQ_RETURN_IF_ERROR(impl_->meta_->FlushChanges(/*sync=*/true));
  return impl_->meta_->TakeChangeError();
}

Status Client::Fallocate(OpenFile& file, int mode, uint64_t offset_bytes,
                         uint64_t length_bytes) {
  if (mode != 0) return Status(Code::kNotSupported, "fallocate mode other than 0");
  if (!file.writable) return PermissionDenied("file not open for writing");
  if (offset_bytes + length_bytes < offset_bytes) return InvalidArgument("range overflows");
  const uint64_t end = offset_bytes + length_bytes;
  if (end > kMaxFileBytes) return Status(Code::kFileTooLarge, "range past the largest file size");
  const uint64_t size_now = file.local_size.load();
  if (end > size_now) {
    // Nothing is reserved, but a range the cluster could never store is refused at once, from
    // one StatFs answer (raw free bytes) and this file's overhead (k + m) / k: no cost per byte
    // or stripe. Asked before file.mu is taken, so no lock is held across the call.
    Result<FsStats> fs = impl_->meta_->StatFs();
    if (!fs.ok()) return fs.status().WithPrefix("fallocate");
    const Layout& l = file.layout;
    const long double raw = static_cast<long double>(end - size_now) * (l.k + l.m) /
                            std::max<uint32_t>(l.k, 1);
    if (raw > static_cast<long double>(fs->raw_free_bytes)) {
      return Status(Code::kNoSpace, "fallocate: " + std::to_string(end - size_now) +
                                        " bytes need more than the cluster's " +
                                        std::to_string(fs->raw_free_bytes) + " free raw bytes");
    }
  }
  std::lock_guard lock(file.mu);
  AQ_RETURN_IF_ERROR(impl_->SettleQueuedCommit(file));  // its reply moves the write version
  if (end > file.size) {
    AQ_RETURN_IF_ERROR(impl_->EnsureLease(file));
  }
  if (end > file.size) {  // the lease may bring a larger size
    file.size = end;
    file.local_size.store(file.size);
    file.dirty.store(true);
  }
  return OkStatus();
}

Status Client::Release(std::unique_ptr<OpenFile> file) {
  return impl_->Release(std::move(file));
}

InodeId Client::InodeOf(const OpenFile& file) { return file.inode; }

// --- locks ---------------------------------------------------------------------------------

Status Client::SetLock(InodeId inode, uint64_t owner, const LockRange& range, bool flock,
                       bool wait, OnCommitError on_commit_error) {
  // The server drops a session's locks of an inode at its last release there, which it counts
  // only for opens it was told of.
  if (range.type != F_UNLCK && impl_->lazy_count_.load() != 0) impl_->RegisterLazy(&inode);
  Status committed;
  if (range.type == F_UNLCK) {
    // What this client wrote under the lock is committed before another holder can read it. If
    // it cannot be, the lock stays: an unlock that hands the lock on anyway lets the next holder
    // read the file without it, and write over it (lost updates).
    committed = impl_->CommitForUnlock(inode);
    if (!committed.ok()) {
      Logger("client")->warn("commit before unlock inode={} status={}{}", inode.value(),
                             committed.ToString(),
                             on_commit_error == OnCommitError::kKeepLock ? "; lock kept"
                                                                         : "; unlocked (close)");
      if (on_commit_error == OnCommitError::kKeepLock) {
        return committed.WithPrefix("commit before unlock");
      }
    }
  }
  std::chrono::milliseconds backoff(5);
  for (;;) {
    Status s = impl_->WithSession([&](SessionId session) {
      return impl_->meta_->SetLock(inode, session, owner, range, flock);
    });
    if (s.ok() && range.type != F_UNLCK && impl_->RevalidateForLock(inode) &&
        impl_->options_.on_changed_at_lock) {
      impl_->options_.on_changed_at_lock(inode);
    }
    if (s.ok() && !committed.ok()) return committed.WithPrefix("commit before unlock");
    if (s.code() != Code::kWouldBlock || !wait) return s;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
}

Result<LockRange> Client::GetLock(InodeId inode, uint64_t owner, const LockRange& range) {
  return impl_->WithSession(
      [&](SessionId session) { return impl_->meta_->GetLock(inode, session, owner, range); });
}

// --- path helpers ----------------------------------------------------------------------------

Result<Attributes> Client::Resolve(std::string_view path, const Caller& caller) {
  if (path.empty() || path[0] != '/') return InvalidArgument("path must be absolute");
  Result<Attributes> at = GetAttr(kRootInode);
  size_t pos = 1;
  while (at.ok() && pos < path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view part = path.substr(pos, slash - pos);
    pos = slash + 1;
    if (part.empty() || part == ".") continue;
    at = Lookup(at->inode, part, caller);
  }
  return at;
}

Status Client::WriteFile(std::string_view path, std::string_view bytes, const Caller& caller) {
  const size_t slash = path.rfind('/');
  if (path.empty() || path[0] != '/' || slash == std::string_view::npos) {
    return InvalidArgument("path must be absolute");
  }
  Result<Attributes> parent = Resolve(slash == 0 ? "/" : path.substr(0, slash), caller);
  if (!parent.ok()) return parent.status();
  Result<Opened> opened =
      Create(parent->inode, path.substr(slash + 1), 0644, O_WRONLY | O_CREAT | O_TRUNC, caller);
  if (!opened.ok()) return opened.status();
  std::span<const std::byte> data(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size());
  Result<size_t> written = Write(*opened->file, 0, data);
  Status released = Release(std::move(opened->file));
  if (!written.ok()) return written.status();
  return released;
}

Result<std::string> Client::ReadFile(std::string_view path, const Caller& caller) {
  Result<Attributes> attr = Resolve(path, caller);
  if (!attr.ok()) return attr.status();
  Result<Opened> opened = Open(attr->inode, O_RDONLY, caller);
  if (!opened.ok()) return opened.status();
  std::string out;
  const size_t step = 4 * kMiB;
  for (;;) {
    const size_t at = out.size();
    out.resize(at + step);
    Result<size_t> n = Read(*opened->file, at,
                            std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()) + at,
                                                 step));
    if (!n.ok()) {
      Status ignored = Release(std::move(opened->file));
      (void)ignored;
      return n.status();
    }
    out.resize(at + *n);
    if (*n < step) break;
  }
  AQ_RETURN_IF_ERROR(Release(std::move(opened->file)));
  return out;
}

}  // namespace aquifer
