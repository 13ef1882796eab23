// Internals of aquifer::Client: the Impl behind the public API and the OpenFile handle.
// Lock order: OpenFile::mu before OpenFile::view_mu; Registry::mu is never held while taking
// another lock except OpenFile::view_mu. OpenFile::mu serializes one file's writes, flushes and
// its writer's own reads and is held across chunk I/O by design (one writer per file); no lock
// of the Impl is held across an RPC.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "aquifer/client.h"
#include "client/chunk_io.h"
#include "client/rpc/meta_client.h"
#include "client/stripe_cache.h"
#include "client/thread_pool.h"
#include "common/client_credential.h"
#include "common/thread_annotations.h"

namespace aquifer {

// Buffered, unwritten bytes of one stripe. `bytes` covers [0, bytes.size()) of the stripe;
// only the `extents` (sorted, disjoint, merged) hold written data; bytes between them are
// uninitialised and never read.
struct StripeBuffer {
  client::ByteVec bytes;
  std::vector<std::pair<uint64_t, uint64_t>> extents;  // [begin, end) inside the stripe
  void Add(uint64_t begin, uint64_t end);
  bool Covers(uint64_t begin, uint64_t end) const;
};

// What a handle reads under: size, version bound, and the stripe map that came with them (one
// attribute reply), so a reader never mixes a newer map with an older bound.
struct FileView {
  uint64_t size = 0;
  uint64_t version = 0;
  uint64_t floor = 0;  // the file's truncate floor: part of stripe cache keys
  std::shared_ptr<const StripeMap> stripes;  // null: unknown
  std::shared_ptr<const VersionRanges> abandoned;  // null: none
  // A view a shorter one replaced (OpenFile::ViewFor): a read under it that finds no
  // chunk falls back to the current view, so it neither logs nor reports a lost stripe.
  bool replaced = false;
  // Points into `abandoned`: the record is used while this view lives.
  StripeRecord Record(uint64_t stripe) const {
    StripeRecord r = stripes ? stripes->Find(stripe) : StripeRecord{};
    r.abandoned = abandoned.get();
    r.report_loss = !replaced;
    return r;
  }
};

// A read under a replaced view (OpenFile::ViewFor) failed: its version was pruned or its stripes
// collected since. Logged at debug; the caller reads under the current view instead.
void LogReplacedViewFallback(InodeId inode, const FileView& fv, const Status& s);

// The kernel's page size: the unit of its page-cache reads (x86-64 and arm64 Linux defaults).
inline constexpr uint64_t kKernelPageBytes = 4096;

// Read views of this client that a shorter view replaced, or that a released handle held, by
// inode, for OpenFile::ViewFor: the kernel may still hold their size (for up to
// attr_timeout) after the handle that had them moved on or went away, and a fresh handle has no
// history of its own. Thread-safe; its mutex is a leaf (taken under any other lock).
class ReplacedViews {
 public:
  // Remembers `view` (marked `replaced`) for `inode` as of now, unless a longer one noted less
  // than `keep` ago is kept. Views of size 0 serve nothing and are not kept.
  void Note(InodeId inode, FileView view, std::chrono::milliseconds keep);
  // The view noted for `inode` less than `keep` ago, if it is longer than `size`.
  std::optional<FileView> Longer(InodeId inode, uint64_t size,
                                 std::chrono::milliseconds keep) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    FileView view;
    Clock::time_point at;
  };
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> by_inode_;
  std::deque<std::pair<uint64_t, Clock::time_point>> order_;  // notes, oldest first
};

// Open handles of this client, by inode, and the dirty-byte total. Shared by OpenFiles so a
// handle may outlive the Client without dangling.
struct Registry {
  // Guards files, recent_commits and every OpenFile's pins (not annotated: the analysis cannot
  // tell that a handle's registry is this one). Taken under Client::Impl::recall_mu_.
  Mutex mu;
  std::multimap<InodeId, OpenFile*> files GUARDED_BY(mu);
  std::condition_variable unpinned;  // an OpenFile's pins dropped to 0
  std::atomic<uint64_t> dirty_bytes{0};
  ReplacedViews replaced;
  std::chrono::milliseconds replaced_view_keep{0};  // ClientOptions::replaced_view_keep
  // This client's last commit of each inode (the reply's attributes), kept 10 s (at most 4,096):
  // a lookup, listing or getattr reply the metadata server made before that commit carries an
  // older data_version, and Client::Impl::Overlay gives it the committed size and times. Such a
  // reply was asked while the file was being written and answered after its close's commit
  // cleared `dirty`; the kernel took its size (0) for the file's although the write had moved
  // past it, and stat on the writer's own mount said 0 after close (the storm test).
  struct Committed {
    Attributes attr;
    std::chrono::steady_clock::time_point at;
  };
  std::unordered_map<InodeId, Committed> recent_commits GUARDED_BY(mu);
};

}  // namespace aquifer

namespace aquifer {

class OpenFile {
 public:
  OpenFile() = default;
  ~OpenFile();

  InodeId inode;
  int flags = 0;
  bool writable = false;
  Layout layout;
  // The attributes the open found (set once, before the handle is registered; read-only after):
  // what GetAttr answers, with nlink 0, once another host's unlink deleted the inode on the
  // metadata server while this handle still had it open (Client::GetAttr).
  Attributes opened_attr;
  std::shared_ptr<Registry> registry;
  // Borrowers found through the registry (a truncate by inode); the destructor waits for 0, so a
  // handle released concurrently (the kernel's asynchronous release) is not freed under them.
  int pins = 0;  // guarded by registry->mu

  // Read view of the handle: what a read-only handle reads under (refreshed by GetAttr), and a
  // writer's last commit (or open).
  mutable std::mutex view_mu;  // guards the view_* fields
  uint64_t view_size = 0;
  uint64_t view_version = 0;
  uint64_t view_floor = 0;
  std::shared_ptr<const StripeMap> view_stripes;
  std::shared_ptr<const VersionRanges> view_abandoned;  // null: none
  FileView View() const {
    std::lock_guard lock(view_mu);
    return ViewLocked();
  }
  FileView ViewLocked() const {
    return FileView{view_size, view_version, view_floor, view_stripes, view_abandoned};
  }
  // Takes `attr` (as the metadata server sent it) as the read view, except:
  // - after a truncate that cut stripes and no commit since (same data_version, another floor):
  //   the old view stays, and with it the old chunks it names (kept until the last close), so a
  //   reader gets the old bytes, not a short read in the middle of what the kernel still takes
  //   for the file;
  // - an older reply than the view (a lower data_version: two GetAttr replies crossing): views
  //   only move forward.
  void RefreshView(const Attributes& attr) {
    std::lock_guard lock(view_mu);
    if (attr.data_version < view_version) return;
    if (attr.data_version == view_version && attr.truncate_floor != view_floor) return;
    SetViewLocked(attr);
  }
  // Takes `attr` as the read view unconditionally (an open's or this writer's commit's reply).
  void SetView(const Attributes& attr) {
    std::lock_guard lock(view_mu);
    SetViewLocked(attr);
  }
  void SetViewLocked(const Attributes& attr) {
    if (attr.size_bytes < view_size && registry) {
      registry->replaced.Note(inode, ViewLocked(), registry->replaced_view_keep);
    }
    view_size = attr.size_bytes;
    view_version = attr.data_version;
    view_floor = attr.truncate_floor;
    view_stripes = attr.stripes;
    view_abandoned = AbandonedOf(attr);
  }
  static std::shared_ptr<const VersionRanges> AbandonedOf(const Attributes& attr) {
    if (attr.abandoned_versions.empty()) return nullptr;
    return std::make_shared<const VersionRanges>(attr.abandoned_versions);
  }

  // Kernel reads past the end of a shortened view.
  //
  // The kernel keeps one size per inode, told by our attribute replies (or by its own writes and
  // truncates on the writer's mount), for up to attr_timeout. A read it sends is within that
  // size. When our view shrinks first (another host's truncate seen by a GetAttr; this writer's
  // O_TRUNC between the metadata server's truncate and the kernel's own at the end of the open;
  // a fresh handle opened while an attribute reply of the old size was still on its way to the
  // kernel), the kernel may still ask for bytes past the new end. Answered short, those bytes
  // are zero-filled by the kernel (fs/fuse/file.c, fuse_short_read: the pages are marked up to
  // date) and, when another attribute reply for the inode crossed the read, kept as file data
  // under the old size: zeros nobody wrote. Such a read is answered from the longer view
  // instead (Registry::replaced): the file as it was before the truncate, a valid answer for a
  // read that raced it. The kernel copies out only up to the size it holds.
  //
  // Returns the view a kernel read of [begin, end) goes by: the replaced view (marked
  // `replaced`) when the read is past the kernel page holding `current_size` (the kernel must
  // hold a larger size than that) and a longer view was replaced less than
  // registry->replaced_view_keep ago; else the handle's view. "Past": a page-cache read ends past
  // that page (it never passes the page of the kernel's end); an O_DIRECT one starts past it
  // (the kernel rounds an O_DIRECT request up past its size, so only the start says the kernel
  // still holds more, and then finishes a short answer through the page cache). Reads for a
  // program (kCaller) always use the handle's view.
  // `current_size`: the local size of a writer (f.mu held); read-only handles use their view's.
  FileView ViewFor(Client::ReadFor reader, uint64_t begin, uint64_t end,
                   std::optional<uint64_t> current_size) const {
    FileView v = View();
    if (reader == Client::ReadFor::kCaller || !registry) return v;
    const uint64_t size = current_size.value_or(v.size);
    const uint64_t page_end = (size + kKernelPageBytes - 1) / kKernelPageBytes * kKernelPageBytes;
    const bool past = reader == Client::ReadFor::kKernelDirect ? begin >= page_end && end > begin
                                                               : end > page_end;
    if (past) {
      std::optional<FileView> longer =
          registry->replaced.Longer(inode, size, registry->replaced_view_keep);
      if (longer) return *longer;
    }
    return v;
  }

  // A writer holds its client's write lease of the file from its open until a recall makes it
  // commit and give the lease back (Client::Impl::HandleRecall); its next write, truncate or
  // fallocate takes it again first (EnsureLease). Changed with mu held; read without it by the
  // recall loop to pass over handles that gave the lease back already.
  std::atomic<bool> lease_held{false};

  std::mutex mu;  // guards everything below; held across chunk I/O of writes
  // Created by this client under an exclusive directory lease (MetaClient::CreateLocally) and
  // not written yet: its first write takes the lease its batched create got (EnsureLease).
  bool created_locally = false;
  // Created by this client under an exclusive directory lease (stays set): its close and release
  // report the error the server gave its batched create, once answered.
  bool made_here = false;
  // A commit is queued and its answer not taken (SettleQueuedCommit): the handle's state is
  // still its writer state from before that commit. Read without mu by Overlay.
  std::atomic<bool> commit_queued{false};
  uint64_t write_version = 0;      // version of chunks this writer writes until it commits
  uint64_t committed_version = 0;  // the file's committed data_version
  uint64_t size = 0;               // local size, bytes (committed + buffered writes)
  std::atomic<uint64_t> local_size{0};  // mirror of size, read without mu by GetAttr
  std::atomic<bool> dirty{false};       // size or data changed since the last commit
  uint64_t stored_size = 0;        // the size stored stripes not in written_len are laid out for
  std::map<uint64_t, uint64_t> written_len;  // stripe -> length written at write_version
  // The stripe map and truncate floor of the last commit (or the open): what the writer's reads
  // of stripes it did not write since then go by.
  std::shared_ptr<const StripeMap> committed_stripes;
  std::shared_ptr<const VersionRanges> committed_abandoned;
  uint64_t truncate_floor = 0;
  std::map<uint64_t, StripeBuffer> buffers;  // stripe -> buffered bytes
  uint64_t buffered_bytes = 0;     // sum of buffers' sizes (counted in registry->dirty_bytes)
  std::deque<std::pair<uint64_t, std::future<Status>>> inflight;  // full stripes being written
  Status sticky_error;             // first failure of an asynchronous stripe write
  Timestamp mtime;

  // Takes `a` (attributes as the metadata server sent them) as the file this writer last
  // committed, with nothing written since (mu held, or the handle not shared yet), and
  // `next_version` as the version it writes next, or reads below while it does not hold the
  // lease: at open, when it takes the lease back, and at a lock grant without the lease.
  void AdoptCommitted(const Attributes& a, uint64_t next_version) {
    SetView(a);
    committed_stripes = a.stripes;
    committed_abandoned = AbandonedOf(a);
    truncate_floor = a.truncate_floor;
    write_version = next_version;
    committed_version = a.data_version;
    size = a.size_bytes;
    local_size.store(size);
    stored_size = a.size_bytes;
    written_len.clear();
    mtime = a.mtime;
  }

  // A read-only handle opened without telling the metadata server (Client::Impl::OpenLazily):
  // kLazy until RegisterLazy told it (kRegistering during that call), then kTold; kLost when
  // that open was refused (the inode is gone). Guarded by Client::Impl::lazy_mu_.
  enum class Lazy : uint8_t { kNo, kLazy, kRegistering, kTold, kLost };
  Lazy lazy = Lazy::kNo;
  Caller lazy_caller;  // whose open it is (the server checks the rights again when told)

  // Sequential-read detection.
  std::mutex seq_mu;  // guards next_offset, sequential, random_bytes
  uint64_t next_offset = 0;
  uint32_t sequential = 0;
  // Bytes read from each stripe by reads that were neither sequential nor served from the stripe
  // cache, since the handle opened (Client::Impl::NoteRandomRead). At most kMaxRandomStripes
  // entries: a reader spread thinner than that starts counting again.
  static constexpr size_t kMaxRandomStripes = 16384;
  std::unordered_map<uint64_t, uint64_t> random_bytes;
};

class Client::Impl {
 public:
  explicit Impl(const ClientOptions& options);
  ~Impl();

  Status Start();

  ClientOptions options_;
  std::unique_ptr<client::MetaClient> meta_;
  std::unique_ptr<client::ChunkIo> io_;
  std::unique_ptr<client::ThreadPool> stripe_pool_;  // read-ahead and asynchronous stripe writes
  std::unique_ptr<client::StripeCache> cache_;
  std::shared_ptr<Registry> registry_ = std::make_shared<Registry>();

  std::atomic<uint64_t> session_{0};
  std::chrono::milliseconds lease_ttl_{0};

  // Background thread: KeepAlive every ttl/3, cluster-map refresh every 2 s or when requested.
  std::mutex bg_mu_;  // guards stop_
  std::condition_variable bg_cv_;
  bool stop_ = false;
  std::thread bg_;
  void BackgroundLoop();

  SessionId session() const { return SessionId(session_.load()); }

  // Opens a new session in place of `lost` (the metadata server restarted or expired it), unless
  // another thread already did. Leases and locks of the lost session are gone; open files keep
  // working (a commit is accepted while no other session holds the write lease).
  void RenewSession(SessionId lost);
  // True when `s` says the session is unknown or expired at the metadata server.
  static bool IsSessionLost(const Status& s);
  static const Status& StatusOf(const Status& s) { return s; }
  template <class T>
  static const Status& StatusOf(const Result<T>& r) { return r.status(); }
  // Runs call(session); when the session turns out to be lost, renews it and runs call once more.
  template <class F>
  auto WithSession(F&& call) -> decltype(call(SessionId{})) {
    const SessionId used = session();
    auto result = call(used);
    if (!IsSessionLost(StatusOf(result))) return result;
    RenewSession(used);
    return call(session());
  }
  std::mutex renew_mu_;  // serializes RenewSession

  // Releases at the metadata server run on one background thread, in order, so a close(2)
  // waits for its commit (close-to-open) but not for the release round trip. Open counts at the
  // metadata server are per session and commutative, so a later open of the same inode need not
  // wait; the lease of a released writer is freed a round trip later. ~Impl drains the queue.
  // The releaser waits kReleaseLinger after the first queued close, then sends every queued
  // close (up to kReleaseBatchItems) in one ReleaseBatch call: one round trip per burst instead
  // of one per close. A released writer's lease is thus freed up to ~5 ms later.
  static constexpr std::chrono::milliseconds kReleaseLinger{5};
  static constexpr size_t kReleaseBatchItems = 256;  // <= kMaxReleaseBatchItems
  std::mutex release_mu_;  // guards release_queue_, release_stop_
  std::condition_variable release_cv_;
  std::deque<client::MetaClient::ReleaseItem> release_queue_;
  bool release_stop_ = false;
  std::thread releaser_;
  void ReleaseLoop();
  // `committed`: a writer whose last commit succeeded (MetaClient::ReleaseItem).
  void QueueRelease(InodeId inode, bool was_write, bool committed = false);

  // Write-lease recall (leases.cc; docs/design.md "Write-lease recall"). One thread asks the
  // metadata server which leases to give back (WaitRecall, a long poll on the metadata wire), and
  // only while this client has a file open for write; for each, every writer of the inode
  // commits and the lease is returned. Writers take it again in EnsureLease.
  std::mutex recall_mu_;  // guards recall_stop_
  std::condition_variable recall_cv_;  // a writer opened, or stopping
  bool recall_stop_ = false;
  std::thread recaller_;
  // Cache leases (docs/design.md "Cache leases"): on when options_.cache_leases and the server
  // offers them. With them on, write-lease recalls are given back on giver_ (a commit there
  // waits for other hosts' acknowledgements, which must not hold up this client's own acks).
  std::atomic<bool> cache_leases_on_{false};
  // Exclusive directory leases (options_.dir_leases with cache leases, not on a credential
  // mount): Create asks MetaClient::CreateLocally first. Set before any call.
  bool dir_leases_on_ = false;
  // The process calls with a client credential (fixed before any client connects): root's
  // opens then go to the metadata server, which alone knows a root squash (OpenLazily).
  const bool client_credential_ = ProcessClientIdentity().has_value();
  uint64_t acked_seq_ = 0;        // RecallLoop only: highest cache recall handled
  uint64_t recall_epoch_ = 0;     // RecallLoop only: the server run acked_seq_ counts in
  std::chrono::milliseconds cache_lease_{0};  // the server's, set before the threads start
  uint64_t acked_session_ = 0;    // the session acked_seq_ counts for
  std::deque<InodeId> give_queue_;  // guarded by recall_mu_
  std::thread giver_;
  void GiveLoop();
  void HandleCacheRecall(const client::CacheRecall& recall);
  void RecallLoop();
  // Commits every writer of `inode`, then returns the lease, with every writer's mu and
  // give_mu_ (exclusively) held from the last commit to the return: no writer can take the
  // lease again (its session still holds it) and no open for write be answered with it, only
  // to lose it to the return with bytes uncommitted under it. A failed commit keeps the lease.
  void HandleRecall(InodeId inode);
  // Held shared by an open or create for write from its metadata call until its handle is in
  // the registry (so a give-back pins it), exclusively by HandleRecall's return. Taken before
  // any OpenFile::mu.
  std::shared_mutex give_mu_;
  // Takes the write lease again for the writer `f` (f.mu held) when a recall took it: waits up
  // to options_.lease_wait while another client holds it (then kWouldBlock), and adopts the
  // file as the metadata server has it now (size, version, stripe map).
  Status EnsureLease(OpenFile& f);
  // Handles of `inode` (writers only with `writers_only`), each pinned until Unpin.
  std::vector<OpenFile*> PinHandles(InodeId inode, bool writers_only);
  void Unpin(const std::vector<OpenFile*>& files);
  bool HasWriters();
  // At a lock grant: refreshes every handle of `inode` that does not hold the write lease (a
  // writer that gave it back, read-only handles) from the metadata server. Returns whether the
  // file changed since those handles last looked (the caller then drops the kernel's pages).
  bool RevalidateForLock(InodeId inode);
  // Before an unlock: commits what writers of `inode` buffered, so the next holder of the lock,
  // on any host, reads it.
  Status CommitForUnlock(InodeId inode);

  // Opens without a round trip (lazy_opens.cc; docs/design.md "Opens without a round trip").
  // lazy_ lists the read-only handles of this client the metadata server does not know are
  // open, by inode. The server keeps an inode cached by another session from deletion (and its
  // truncated chunks from GC) until that session acknowledged the recall of it
  // (MetadataService::HoldForRecall), so each is told before any acknowledgement that covers
  // it: HandleCacheRecall, a new server run, a new session, this client's own unlink, rename or
  // truncate, and a read after the lease stopped being trusted. lazy_mu_ is a leaf; RPCs run
  // without it (a handle being told is kRegistering: Release waits on lazy_cv_).
  std::mutex lazy_mu_;
  std::condition_variable lazy_cv_;
  std::unordered_map<InodeId, std::vector<OpenFile*>> lazy_;
  std::atomic<size_t> lazy_count_{0};  // handles in lazy_, read without lazy_mu_
  // Lazy opens so far, and how many of them the server was told of; logged by ~Impl.
  std::atomic<uint64_t> lazy_opened_{0}, lazy_told_{0};
  // A read-only open answered from the attributes kept under the cache lease; nothing when it
  // cannot be (no kept attributes, not a plain read-only open of a regular file, no read right
  // by the kept mode; the caller then opens at the server).
  std::optional<Opened> OpenLazily(InodeId inode, int flags, const Caller& caller);
  // Tells the metadata server of the lazy opens of `inode` (every inode when null), one Open
  // each, before returning. Refused opens leave their handle kLost (its reads go on under the
  // view it had; its release sends nothing).
  void RegisterLazy(const InodeId* inode);
  void RegisterAllLazy() {
    if (lazy_count_.load() != 0) RegisterLazy(nullptr);
  }
  // At release: true when the server never heard of this open (nothing to release there).
  bool ForgetLazy(OpenFile& f);

  // File I/O (file_io.cc).
  // Makes the handle of an open the metadata server answered. `taking` (give_mu_, shared, for
  // an open for write) is released once the handle is in the registry.
  Result<Opened> OpenWith(client::OpenReply reply, int flags,
                          std::shared_lock<std::shared_mutex> taking = {});
  // `reader`: as Client::ReadShared (OpenFile::ViewFor).
  Result<size_t> Read(OpenFile& f, uint64_t offset, std::span<std::byte> out,
                      Client::ReadFor reader = Client::ReadFor::kCaller);
  // Reads under `fv` by the read-only rules (a read-only handle's view, or a replaced one).
  Result<size_t> ReadAt(OpenFile& f, const FileView& fv, uint64_t offset,
                        std::span<std::byte> out);
  // Sets *view to the cached stripe's bytes for [offset, offset + size) under `fv` when that
  // range is inside one stripe that is cached (or, for a sequential stream, fetched into the
  // cache now); returns false (and leaves *view) otherwise. Read-only rules, as ReadAt.
  Result<bool> ReadFromCache(OpenFile& f, const FileView& fv, uint64_t offset, uint64_t size,
                             Client::ReadView* view);
  Result<size_t> Write(OpenFile& f, uint64_t offset, std::span<const std::byte> data,
                       bool append = false);
  // f.mu held. `attrs` (no size): a SetAttr by `caller` sent in the same Commit call (see
  // MetaClient::Commit); *committed then holds the inode's attributes after both. With nothing
  // buffered or uncommitted, sends nothing (and leaves *committed).
  // f.mu held. Takes the answer of a commit of f queued in the change batch (sending the batch
  // first when it was not answered yet) and moves f's state as a sent commit's reply does; on
  // the commit's error, f keeps it as its sticky error and returns it.
  Status SettleQueuedCommit(OpenFile& f, bool soon = false);
  // f.mu held. f's state after its commit was answered with `reply`.
  void AdoptCommitReply(OpenFile& f, const client::CommitReply& reply);
  Status Commit(OpenFile& f, bool sync, const AttrChanges* attrs = nullptr,
                const Caller& caller = {}, std::optional<Attributes>* committed = nullptr);
  // A SetAttr of times (and mode, owner, group; never size) of `inode` while this client holds
  // it open for write with writes not committed: they must be committed first (a later commit
  // would set mtime again), so the change rides on that commit, one call instead of two
  // (tar's futimens after writing a file). Returns the attributes after it, or nothing when no
  // open file of the inode had anything to commit (the caller sends a plain SetAttr). A change
  // the server refuses is committed without it and nothing is returned, so the plain SetAttr
  // gives the error.
  Result<std::optional<Attributes>> CommitWithAttrs(InodeId inode, const AttrChanges& changes,
                                                    const Caller& caller);
  Status Truncate(OpenFile& f, uint64_t new_size);  // f.mu held
  Status Release(std::unique_ptr<OpenFile> f);
  Status TruncateInode(InodeId inode, uint64_t new_size, const Caller& caller);
  // An Open that waits (up to lease_wait) for another client's write lease. For a write open,
  // *taking holds give_mu_ (shared) on success: pass it to OpenWith.
  Result<client::OpenReply> OpenWithLeaseWait(InodeId inode, int flags, const Caller& caller,
                                              std::shared_lock<std::shared_mutex>* taking);
  Attributes Overlay(Attributes attr);  // local size of dirty writers; refreshes read views
  // After a read of the read-only handle `f` failed with `s`: if `s` is kStale (a stripe was
  // written again and the view's version pruned), takes a fresh view from the metadata server
  // and returns true (read again); false otherwise or when the metadata server cannot answer.
  // Sets *lost when the fresh view is the one the read used (nothing committed since): the
  // chunks its bound names are gone, which is data loss, not a stale view.
  bool RefreshViewAfterStale(const OpenFile& f, const FileView& before, const Status& s,
                             bool* lost);
  // Runs `read` (returning a Result) and, while it fails with kStale, refreshes the view of
  // `file` and runs it again: at most kStaleReadTries runs. Returns the last result.
  template <class Fn>
  auto ReadWithFreshViews(OpenFile& file, Fn&& read) -> decltype(read());
  Result<Client::ReadView> ReadShared(OpenFile& file, uint64_t offset_bytes, uint64_t size_bytes,
                                      Client::ReadFor reader);
  Result<Client::ReadView> ReadSharedAt(OpenFile& file, const FileView& fv, uint64_t offset_bytes,
                                        uint64_t size_bytes);

 private:
  uint64_t StoredLen(const OpenFile& f, uint64_t stripe) const;
  Status FlushStripe(OpenFile& f, uint64_t stripe, bool sync);
  Status DrainInflight(OpenFile& f);
  Status FlushBuffers(OpenFile& f, bool sync);
  void ReleaseBufferBytes(OpenFile& f, uint64_t bytes);
  // Reads stripe `stripe` (stripe_len bytes) of `inode` at `version` from the data servers:
  // views of the replies when no decoding was needed, else a buffer filled by decoding.
  Result<client::StripeBytes> FetchStripe(InodeId inode, const Layout& layout, uint64_t stripe,
                                          uint64_t stripe_len, uint64_t version,
                                          const StripeRecord& record);
  Result<client::StripeBytes> CachedStripe(const OpenFile& f, const FileView& view,
                                           uint64_t stripe, uint64_t stripe_len);
  void Prefetch(const OpenFile& f, const FileView& view, uint64_t stripe, uint64_t stripe_len);
  // A random reader that comes back to a stripe gets it whole in the stripe cache (docs/design.md
  // "Stripes random readers come back to"): counts `bytes` read from `stripe` of `f` past the
  // cache, and once a stripe's count reaches stripe_bytes / kRandomPromoteDivisor, fetches the
  // whole stripe in the background (Prefetch), so later reads there are served from memory. The
  // bytes fetched per byte read stay under kRandomPromoteDivisor even if the reader never
  // comes back again.
  static constexpr uint64_t kRandomPromoteDivisor = 16;
  void NoteRandomRead(OpenFile& f, const FileView& view, uint64_t stripe, uint64_t stripe_len,
                      uint64_t bytes);
  // What the writer `f` (f.mu held) knows of `stripe`: its committed map, plus the stripes it
  // wrote since, which its next commit records with the floor the metadata server will give.
  StripeRecord WriterRecord(const OpenFile& f, uint64_t stripe) const;

  // Prefetches the readahead_stripes stripes after `stripe` (those below the end of a file of
  // file_size bytes) at `version`, for a sequential stream, and drops the stripe two behind
  // `stripe` from the cache: the stream has passed it (reads still in flight may reach back one
  // stripe), and the kernel's page cache keeps what it read.
  void ReadAhead(const OpenFile& f, const FileView& view, uint64_t stripe);
};

}  // namespace aquifer
