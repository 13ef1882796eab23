// MetaClient: the client library's view of aquifer-meta (proto/meta.proto), in the library's own
// types. The gRPC implementation lives in meta_client.cc; tests may substitute another.
//
// Every method returns the server's status (RpcStatus code mapped to aquifer::Code), or
// kUnavailable when the server cannot be reached before the deadline (see NewGrpcMetaClient for
// how long a call waits for a restarting server). Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <span>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aquifer/client.h"
#include "aquifer/ids.h"
#include "aquifer/status.h"
#include "client/cluster_map.h"

namespace aquifer::client {

// Reply of Open and Create: attributes and the chunk version the writer uses until it commits
// (0 when not opened for write).
struct OpenReply {
  Attributes attr;
  uint64_t write_version = 0;
  bool unlink_pending = false;  // nlink 0, and its unlink has not returned (OpenResponse)
  // Made by MetaClient::CreateLocally: the server has not heard of it yet. With write_version 0
  // the handle takes the one its batched create got with TakeCreatedLease before it writes;
  // otherwise it holds the write lease with that version from the start (a version the grant
  // reserved, which the create carries).
  bool created_locally = false;
};

struct CommitReply {
  Attributes attr;
  uint64_t next_write_version = 0;
};

struct SessionInfo {
  SessionId id;
  std::chrono::milliseconds lease_ttl{0};
  // Non-zero when the server recalls cached names and attributes (docs/design.md "Cache leases").
  std::chrono::milliseconds cache_lease{0};
};

// One cache recall (docs/design.md "Cache leases"): the attributes of `inodes` and the names
// (parent, name) changed; acknowledged by passing `seq` to the next WaitRecalls.
struct CacheRecall {
  uint64_t seq = 0;
  std::vector<InodeId> inodes;
  std::vector<std::pair<InodeId, std::string>> entries;
};
struct Recalls {
  std::vector<InodeId> write_leases;
  std::vector<CacheRecall> cache_recalls;  // in seq order
  uint64_t recall_epoch = 0;  // the server run's; the seqs count in it (0: no cache leases)
  // Set when this answer came from a new server run (a restart): until then the kernel may
  // still hold answers given under the old run's leases (CacheTrustedUntil capped their
  // timeouts), which the new run cannot recall.
  std::chrono::steady_clock::time_point old_run_trusted_until{};
};

class MetaClient {
 public:
  virtual ~MetaClient() = default;

  virtual Result<Attributes> Lookup(InodeId parent, std::string_view name, const Caller& c) = 0;
  virtual Result<Attributes> GetAttr(InodeId inode) = 0;
  virtual Result<Attributes> SetAttr(InodeId inode, const AttrChanges& changes, const Caller& c,
                                     SessionId session) = 0;
  // Regular files (open_for_write takes the lease for `session`) and mknod.
  virtual Result<OpenReply> Create(InodeId parent, std::string_view name, uint32_t mode,
                                   uint64_t rdev, bool exclusive, const Caller& c,
                                   SessionId session, bool open_for_write) = 0;
  virtual Result<Attributes> Mkdir(InodeId parent, std::string_view name, uint32_t mode,
                                   const Caller& c) = 0;
  virtual Result<Attributes> Symlink(InodeId parent, std::string_view name,
                                     std::string_view target, const Caller& c) = 0;
  virtual Result<Attributes> Link(InodeId inode, InodeId new_parent, std::string_view new_name,
                                  const Caller& c) = 0;
  virtual Status Unlink(InodeId parent, std::string_view name, const Caller& c) = 0;
  virtual Status Rmdir(InodeId parent, std::string_view name, const Caller& c) = 0;
  virtual Status Rename(InodeId parent, std::string_view name, InodeId new_parent,
                        std::string_view new_name, uint32_t flags, const Caller& c) = 0;
  virtual Result<std::string> Readlink(InodeId inode) = 0;
  virtual Result<DirPage> ReadDir(InodeId dir, uint64_t cookie, uint32_t max_entries, bool plus,
                                  const Caller& c) = 0;
  virtual Result<std::string> GetXattr(InodeId inode, std::string_view name, const Caller& c) = 0;
  virtual Status SetXattr(InodeId inode, std::string_view name, std::string_view value,
                          int flags, const Caller& c) = 0;
  virtual Result<std::vector<std::string>> ListXattr(InodeId inode, const Caller& c) = 0;
  virtual Status RemoveXattr(InodeId inode, std::string_view name, const Caller& c) = 0;
  // Usable (after parity overhead) totals.
  virtual Result<FsStats> StatFs() = 0;
  virtual Result<OpenReply> Open(InodeId inode, int flags, SessionId session,
                                 const Caller& c) = 0;
  virtual Status Release(InodeId inode, SessionId session, bool was_write) = 0;
  // The chunk capability (docs/design.md "Chunk capabilities") this client's chunk calls for
  // `inode` carry: "" when the process holds the cluster key (no capability needed). A client
  // credential gets one from its cache (filled by the Lookup, GetAttr, Create, Open and
  // AcquireLease replies that carried one) while it has more than kCapabilityRenewMargin (or a
  // quarter of the life it was handed out with, if less) left, else (or with `fresh`) from a
  // GetCapability call: a write capability for `write`, which also serves reads. Errors: the
  // metadata server's (kReadOnly: a write by a read-only credential; kNotFound: outside the
  // export or gone; kUnavailable). Thread-safe.
  virtual Result<std::string> Capability(InodeId inode, bool write, bool fresh) {
    (void)inode, (void)write, (void)fresh;
    return std::string();
  }
  // Several closes of one session, applied in order as if by Release each. `items` holds at most
  // kMaxReleaseBatchItems entries. Returns one status per item, or an error for the whole call
  // (transport, or more items than allowed). This default sends one Release per item.
  struct ReleaseItem {
    InodeId inode;
    bool was_write = false;
    // A writer whose last commit succeeded: its release changes none of the inode's attributes
    // (what this client keeps of them stays).
    bool committed = false;
  };
  virtual Result<std::vector<Status>> ReleaseBatch(SessionId session,
                                                   std::span<const ReleaseItem> items) {
    std::vector<Status> out;
    out.reserve(items.size());
    for (const ReleaseItem& item : items) {
      Status s = Release(item.inode, session, item.was_write);
      if (s.code() == Code::kUnavailable) return s;  // the server is unreachable: stop
      out.push_back(std::move(s));
    }
    return out;
  }
  // Commits size (bytes), mtime and the data version written. `backfill_servers`: data servers
  // that missed chunks of those writes (at most kMaxBackfillServers); the metadata server tells
  // each to run a backfill pass. `written_stripes`: the stripes written since the last commit,
  // as [begin, end) ranges (at most kMaxCommitStripeRanges), which join the file's stripe map;
  // null makes the map unknown. `degraded_stripes`: how many of those stripes were accepted with
  // fewer chunks than positions (status counts them until backfill_servers rebuilt them).
  // `attrs` (no size): a SetAttr by `caller` applied in the same change, after size and mtime;
  // the reply's attributes include it. Errors: kStale (another session holds the write lease, or
  // the version is older than the committed one), kInvalidArgument, kUnavailable, and with
  // `attrs` SetAttr's (kNotPermitted, kPermissionDenied), which refuse the whole commit.
  virtual Result<CommitReply> Commit(
      InodeId inode, SessionId session, uint64_t size_bytes, Timestamp mtime,
      uint64_t write_version, bool sync, std::span<const ServerId> backfill_servers = {},
      const std::vector<std::pair<uint64_t, uint64_t>>* written_stripes = nullptr,
      uint64_t degraded_stripes = 0, const AttrChanges* attrs = nullptr,
      const Caller& caller = {}) = 0;
  // Tells the metadata server that stripes of `inode` were found lost (the stripe map records
  // them as written and no chunk is readable), for `aquifer status`. At most 1024 stripes.
  // Errors: kUnavailable, the server's. Default (fakes): nothing.
  virtual Status ReportLost(InodeId inode, std::span<const uint64_t> stripes) {
    (void)inode;
    (void)stripes;
    return OkStatus();
  }
  // `cache_leases`: this client will cache under cache leases (SetCacheSession); the server
  // records it with the session, so that after a restart it waits for this client to resync.
  virtual Result<SessionInfo> OpenSession(std::string_view client_name, bool cache_leases) = 0;
  Result<SessionInfo> OpenSession(std::string_view client_name) {
    return OpenSession(client_name, false);
  }
  virtual Status KeepAlive(SessionId session) = 0;
  virtual Status CloseSession(SessionId session) = 0;
  // Write-lease recall (docs/design.md "Write-lease recall"). AcquireLease takes the lease of a
  // file `session` has open for write again (after ReturnLease); replies as Open does. Errors:
  // kWouldBlock (another session holds it; it is asked to give it back), kStale, kNotFound.
  // ReturnLease gives it back after everything written under it was committed. WaitRecall: the
  // inodes whose lease the session is asked to return; over the metadata wire it waits up to
  // `wait` (at most 10 s) for the first, over gRPC it answers at once. Defaults (fakes):
  // kNotSupported.
  virtual Result<OpenReply> AcquireLease(InodeId inode, SessionId session) {
    (void)inode;
    (void)session;
    return Status(Code::kNotSupported, "AcquireLease");
  }
  virtual Status ReturnLease(InodeId inode, SessionId session) {
    (void)inode;
    (void)session;
    return Status(Code::kNotSupported, "ReturnLease");
  }
  virtual Result<std::vector<InodeId>> WaitRecall(SessionId session,
                                                  std::chrono::milliseconds wait) {
    (void)session;
    (void)wait;
    return Status(Code::kNotSupported, "WaitRecall");
  }
  // Exclusive directory leases (docs/design.md "Exclusive directory leases"). Defaults (fakes):
  // nothing is created locally.
  // EnableDirLeases: from now on CreateLocally may answer (needs a cache session).
  // `on_refused(parent, name)` is called for each name a batched change the server refused had
  // made or removed here (the caller drops it from its kernel's cache); `on_attrs_stale(inode)`
  // for each file whose attributes SetAttr answered itself while a commit of it was still
  // queued (the answer's blocks predate that commit: the kernel must ask again); from any
  // thread, no lock held.
  virtual void EnableDirLeases(
      std::function<void(InodeId parent, const std::string& name)> on_refused = {},
      std::function<void(InodeId inode)> on_attrs_stale = {}) {
    (void)on_refused;
    (void)on_attrs_stale;
  }
  // Creates regular file `name` in `parent` without a round trip when this client holds the
  // exclusive lease on `parent` (asked for here, one round trip, the first time) and knows the
  // name is free under its cache lease; the create goes to the server later, in order, in a
  // ChangeBatch (opened for write by `session` when open_for_write). nullopt when it cannot:
  // the caller then calls Create.
  virtual std::optional<OpenReply> CreateLocally(InodeId parent, std::string_view name,
                                                 uint32_t mode, const Caller& c,
                                                 bool open_for_write) {
    (void)parent;
    (void)name;
    (void)mode;
    (void)c;
    (void)open_for_write;
    return std::nullopt;
  }
  // Sends every change made locally so far (CreateLocally, and Mkdir, Unlink and Rename when
  // they were answered under a directory lease), in order, and waits for the answer; with sync,
  // the server makes its namespace durable on disk before answering (fsync). Fails only when a
  // batch call failed as a whole; changes the server refused are logged and remembered for
  // CreateError (creates) and TakeChangeError (the first of any kind). Every other call of this
  // client that goes to the server runs it first (so the server sees this client's changes in
  // the order it made them).
  virtual Status FlushChanges(bool sync) {
    (void)sync;
    return OkStatus();
  }
  // The first batched change the server refused since the last call (OK: none); it is then
  // forgotten.
  virtual Status TakeChangeError() { return OkStatus(); }
  // After the locally created `inode`'s batch was answered (flushed first here): its attributes
  // and the write version its create took with the write lease, once. nullopt when there is
  // none (not opened for write, failed, taken, or dropped by DropCreatedLease).
  virtual std::optional<OpenReply> TakeCreatedLease(InodeId inode) {
    (void)inode;
    return std::nullopt;
  }
  // Forgets what TakeCreatedLease would answer for `inode` (its lease was recalled, or its
  // handle released); true when there was something.
  virtual bool DropCreatedLease(InodeId inode) {
    (void)inode;
    return false;
  }
  // Whether `inode` is a file only this client knows: created here under a directory lease it
  // has held since (see QueueCommit). Its commits, chmods, chowns and utimes then go in the
  // change batch (SetAttr answers those itself, from the attributes it keeps).
  virtual bool LocalFile(InodeId inode) {
    (void)inode;
    return false;
  }
  // Queues a commit of `inode` (as Commit: no backfill servers, no attribute changes, not sync)
  // in the change batch instead of sending it now, when `inode` was created here under a
  // directory lease this client has held since (no other session can have looked at it: any
  // call that could would recall the lease, and the give-back sends the batch first). True when
  // queued: the caller's handle takes the answer with TakeQueuedCommit before it writes or
  // commits again, and at the latest at its release. Until the answer, a local answer of the
  // inode's attributes (Lookup, GetAttr, KeptAttr) sends the batch first. False: not queued
  // (send the Commit).
  virtual bool QueueCommit(InodeId inode, uint64_t size_bytes, Timestamp mtime,
                           uint64_t write_version,
                           const std::vector<std::pair<uint64_t, uint64_t>>& written_stripes) {
    (void)inode;
    (void)size_bytes;
    (void)mtime;
    (void)write_version;
    (void)written_stripes;
    return false;
  }
  // The answer of `inode`'s queued commit (its batch sent and answered first, waiting for it),
  // once; nullopt when none is queued. `soon`: a caller that need not hurry (a release) first
  // waits briefly for the batch's own sender, so that commits of several files share a batch.
  virtual std::optional<Result<CommitReply>> TakeQueuedCommit(InodeId inode, bool soon) {
    (void)inode;
    (void)soon;
    return std::nullopt;
  }
  // The error the server gave the locally created `inode`'s batched create; OK when none (or not
  // sent yet).
  virtual Status CreateError(InodeId inode) {
    (void)inode;
    return OkStatus();
  }
  // When this client holds the exclusive lease on `dir`: stops creating there, sends what it
  // created, gives the lease back (a recall) and returns true. False: it holds none there.
  virtual bool GiveBackDirLease(InodeId dir, SessionId session) {
    (void)dir;
    (void)session;
    return false;
  }
  // Cache leases (docs/design.md "Cache leases"). SetCacheSession: later Lookup, GetAttr and
  // ReadDir calls name `session` (0: none), so the server recalls what they answered before
  // another session changes it within `lease` (the server's cache_lease_ms); it drops every
  // cache of the previous session. WaitRecalls: WaitRecall, and the cache recalls above
  // `acked_seq`, counted in `recall_epoch` (the one the last answer named; acknowledging every
  // one up to it); an answer naming a new epoch (the server restarted) makes this client drop
  // every cache first, and the caller must ack from 0 in it. ForgetCached drops what this client
  // caches of the inode itself (directory attributes, known-absent xattrs). Thread-safe.
  // Defaults (fakes): no cache session, WaitRecall's answer, nothing cached.
  virtual void SetCacheSession(SessionId session, std::chrono::milliseconds lease) {
    (void)session;
    (void)lease;
  }
  virtual Result<Recalls> WaitRecalls(SessionId session, std::chrono::milliseconds wait,
                                      uint64_t acked_seq, uint64_t recall_epoch) {
    (void)acked_seq;
    (void)recall_epoch;
    Result<std::vector<InodeId>> r = WaitRecall(session, wait);
    if (!r.ok()) return r.status();
    return Recalls{std::move(*r), {}};
  }
  virtual void ForgetCached(InodeId inode) { (void)inode; }
  // The attributes of `inode` this client keeps under its cache lease (DirNames::CachedAttr):
  // current as of the last recall handled, while the lease is trusted. Nothing otherwise.
  virtual std::optional<Attributes> KeptAttr(InodeId inode) {
    (void)inode;
    return std::nullopt;
  }
  // Until when what this client caches under cache leases is trusted (DirNames::Heard): what
  // it hands on (the kernel's timeouts) must not outlive it. time_point::max() without cache
  // leases (nothing is recalled; the caller's own timeouts rule). Thread-safe.
  virtual std::chrono::steady_clock::time_point CacheTrustedUntil() {
    return std::chrono::steady_clock::time_point::max();
  }
  virtual Status SetLock(InodeId inode, SessionId session, uint64_t owner,
                         const LockRange& range, bool flock) = 0;
  virtual Result<LockRange> GetLock(InodeId inode, SessionId session, uint64_t owner,
                                    const LockRange& range) = 0;
  virtual Result<ClusterMap> GetClusterMap(uint64_t known_version) = 0;
  // Calls sent and lookups answered without one (ClientCounters' first five fields); an
  // implementation that counts nothing leaves them 0. Thread-safe.
  virtual void AddCallCounts(ClientCounters* out) const { (void)out; }
};

// Connects (lazily) to aquifer-meta at `address` ("host:port"); each call has deadline `timeout`.
// With `attr_cache_ttl` > 0, GetAttr of a directory is answered from the attributes the last
// reply about it carried (a GetAttr/Lookup/SetAttr reply, or the directory attributes the
// metadata server returns with each namespace change) while they are younger than attr_cache_ttl;
// SetAttr and SetXattr of an inode drop its entry first. The same bound keeps what replies
// said about missing extended attributes (ENODATA for a name, an empty ListXattr, a Create that
// made the inode): GetXattr of such a name answers kNoData without a round trip while that is
// younger than attr_cache_ttl; this client's SetXattr/RemoveXattr drop it. 0 (the default)
// caches nothing.
// With `use_wire`, calls go over the metadata wire (src/wire/meta_wire.h) once an OpenSession
// reply named its port, else (and whenever a wire connection cannot be made) over gRPC.
//
// A metadata server restart (docs/design.md "Metadata server restarts"). Once an OpenSession
// through this client succeeded, every request that carries a RequestTag (namespace changes,
// opens, releases, commits, locks) is tagged with that session and a number this client never
// uses twice; a tagged call, and every call that is safe to repeat (lookups, reads of the
// namespace, the cluster map), is sent again (a tagged one with retry set, so the server answers
// from what a first attempt that got through did) after the server was unreachable (UNAVAILABLE,
// DEADLINE_EXCEEDED, a lost metadata-wire connection), after 10 ms doubling to 1 s, until
// `outage_wait` has passed since the call began; then kUnavailable. Each attempt's deadline is
// the smaller of `timeout` and what is left of `outage_wait`. 0 (the default) makes the budget
// `timeout`. KeepAlive and CloseSession, and every call before the first session, keep one
// deadline `timeout` (the client's keep-alive runs again anyway; a client that never reached the
// server, e.g. a mount, fails after one timeout rather than waiting). A call that is not safe to
// repeat and carries no tag (before the first session) is sent once. One warn line when calls
// start waiting, one info line when the server answers again.
std::unique_ptr<MetaClient> NewGrpcMetaClient(const std::string& address,
                                              std::chrono::milliseconds timeout,
                                              std::chrono::milliseconds attr_cache_ttl =
                                                  std::chrono::milliseconds(0),
                                              bool use_wire = false,
                                              std::chrono::milliseconds outage_wait =
                                                  std::chrono::milliseconds(0));

}  // namespace aquifer::client
