// MetadataService: the metadata server's core. Namespace operations (POSIX rules, one atomic
// StoreBatch each), layouts, sessions with write leases, record locks and flock, open counts and
// orphans, commits of size and write versions, GC tasks, data-server membership and placement-
// group tables. It knows no protobuf; src/metadata/rpc/ adapts it to proto/meta.proto.
//
// Errors (aquifer::Code): kNotFound (ENOENT), kAlreadyExists, kNotDirectory, kIsDirectory,
// kNotEmpty, kInvalidArgument (bad name, rename into own subtree, bad layout text, ...),
// kNameTooLong (> 255 bytes), kPermissionDenied (mode bits vs the caller; uid 0 bypasses),
// kNotPermitted (hard link to a directory, chown by non-root, sticky directories), kNoData (no
// such xattr), kWouldBlock (write lease or lock held by another session/owner), kStale (unknown or
// expired session; commit after the write lease was lost), kUnavailable (no PG table can be built:
// too few data servers in distinct failure domains), kTooManyLinks, kFileTooLarge (a SetAttr or
// Commit size past kMaxFileBytes, 2^63 - 1; lock ranges past it are kInvalidArgument, end
// UINT64_MAX meaning "to end of file"), kInternal/kCorruption (store).
// A failed operation changes nothing.
//
// Threading: every method is thread-safe. Lock order: mu_ (namespace, opens, leases, locks,
// sessions; shared for reads) -> cluster_mu_ (servers, PG tables, GC tasks) -> cache_mu_.
// Reads run in parallel under mu_ shared; mutations are serialised under mu_ exclusive (each is
// one in-memory update plus one store batch, microseconds). Nothing blocks on the network.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "aquifer/ids.h"
#include "aquifer/status.h"
#include "common/thread_annotations.h"
#include "metadata/backup.h"
#include "metadata/events.h"
#include "metadata/namespace_store.h"
#include "metadata/options.h"
#include "metadata/types.h"

namespace aquifer::meta {

// Time sources, injectable for tests. wall: file times. mono_ms: leases and heartbeats.
struct Clocks {
  std::function<Timespec()> wall;
  std::function<int64_t()> mono_ms;
  static Clocks System();
};

// SetAttr's `valid` bits (the same values as proto SetAttrField).
enum SetAttrBits : uint32_t {
  kSetMode = 1,
  kSetUid = 2,
  kSetGid = 4,
  kSetSize = 8,
  kSetAtime = 16,
  kSetMtime = 32,
  kSetAtimeNow = 64,
  kSetMtimeNow = 128,
  kSetCtime = 256,
};

struct SetAttrArgs {
  uint32_t valid = 0;  // OR of SetAttrBits
  uint32_t mode = 0;   // permission bits (and setuid/setgid/sticky); type bits ignored
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;  // bytes
  Timespec atime, mtime, ctime;
};

struct CreateArgs {
  InodeId parent;
  std::string name;
  uint32_t mode = 0;  // type bits (0 = regular) + permissions, umask applied by the client
  uint64_t rdev = 0;
  bool exclusive = false;  // O_EXCL
  SessionId session;       // non-zero: the create also opens the file for that session
  bool open_for_write = false;
};

struct OpenResult {
  Inode attr;
  uint64_t write_version = 0;  // for opens for write of regular files; > attr.data_version
  bool created = false;        // Create made this inode (so it has no extended attributes)
  // Open of an inode with no name left (nlink 0) whose unlink this session has not acknowledged
  // yet (a cache recall naming it is still queued for the session): the change that unlinked it
  // waits for that acknowledgement, so it has not returned to its caller and the open runs
  // concurrently with it. The opener may serve the old file (POSIX lets a concurrent open see
  // either); without this flag an nlink-0 open came from a name cached past the change.
  bool unlink_pending = false;
};

// One change made by a session under its exclusive directory leases (docs/design.md "Exclusive
// directory leases"), applied later in a ChangeBatch. `time` is the client's clock at the change
// (a new inode's times; ctime and the parents' mtime otherwise).
struct BatchChange {
  enum class Kind : uint8_t { kCreate, kMkdir, kUnlink, kRename, kCommit, kSetAttr, kUnknown };
  Kind kind = Kind::kCreate;
  InodeId parent;
  std::string name;
  uint32_t mode = 0;  // kCreate: S_IFREG (or 0) + permissions; kMkdir: permissions
  InodeId ino;        // kCreate, kMkdir: a number AcquireDirLease reserved for the session
  Caller caller;
  Timespec time;
  bool open_for_write = false;  // kCreate: opened for write by the session (takes the lease)
  InodeId new_parent;           // kRename
  std::string new_name;         // kRename
  uint64_t generation = 0;      // kCreate, kMkdir: DirLeaseGrant::generation (0: this run's)
  // kCommit: a Commit of `ino` by the session (its write lease's holder), without backfill
  // servers or attribute changes; `time` is its mtime. `parent` and `name` are not used. The
  // item's answer: the inode's attributes and the next write version, as Commit answers.
  uint64_t size = 0;            // bytes
  // kCommit: the version committed. kCreate with open_for_write: the write version the client
  // took from DirLeaseGrant's and already wrote chunks at (0: the server hands one out).
  uint64_t write_version = 0;
  std::vector<std::pair<uint64_t, uint64_t>> written_stripes;  // as CommitArgs
  bool stripes_malformed = false;  // the request's list was odd or too long: the item is refused
  // kSetAttr: a SetAttr of `ino` by `caller` (no size: that stays a call of its own), with
  // `time` as the server's clock for ctime and the *_NOW times. The answer: its attributes.
  std::optional<SetAttrArgs> attrs;
};

struct DirLeaseGrant {
  bool granted = false;
  uint64_t ino_first = 0;  // [ino_first, ino_first + ino_count) reserved for the session
  uint32_t ino_count = 0;
  Inode dir;
  FileLayout file_layout;  // what a file created in `dir` gets, pg_start 0
  uint64_t generation = 0;  // the reserved numbers' inodes get this generation
  // [version_first, version_first + version_count): write versions handed to the session with
  // the numbers, for the files it creates for write (BatchChange::write_version).
  uint64_t version_first = 0;
  uint32_t version_count = 0;
};

struct CommitArgs {
  InodeId ino;
  SessionId session;
  uint64_t size = 0;  // bytes
  Timespec mtime;
  uint64_t write_version = 0;
  bool sync = false;  // durable on disk before returning
  // Data servers that missed chunks of this file's writes (stripes accepted degraded): each is
  // told, in its next heartbeat reply, to run a backfill pass. Unknown ids are ignored.
  std::vector<ServerId> backfill_servers;
  // The stripes this writer stored since its last commit, as [begin, end) ranges (at most
  // kMaxCommitStripeRanges; past the committed size they are ignored). They join the file's
  // StripeMap. records_stripes == false (a client from before stripe maps) makes the file's map
  // unknown, so its holes are inferred as before.
  std::vector<std::pair<uint64_t, uint64_t>> written_stripes;
  bool records_stripes = false;
  uint64_t degraded_stripes = 0;  // stripes accepted below k + m (backfill_servers missed them)
  // A SetAttr of mode, owner, group or times (never size) applied in the same change, after the
  // commit's size and mtime, with `caller`'s rights checked as SetAttr checks them: a utimensat
  // or chmod on a file with buffered writes costs one call, not a commit and a SetAttr. A refused
  // change refuses the whole commit (nothing applied).
  std::optional<SetAttrArgs> attrs;
  Caller caller;
};

struct CommitResult {
  Inode attr;
  uint64_t next_write_version = 0;
};

struct SessionGrant {
  SessionId session;
  uint32_t lease_ttl_ms = 0;
  uint32_t cache_lease_ms = 0;  // options.cache_lease_ms: 0 = no cache leases
};


struct LockArgs {
  InodeId ino;
  SessionId session;
  uint64_t owner = 0;
  LockType type = LockType::kUnlock;
  uint64_t start = 0;
  uint64_t end = UINT64_MAX;  // inclusive
  uint32_t pid = 0;
  bool flock = false;  // flock(2): whole file; never conflicts with fcntl locks
};

// GetLock's answer: the first conflicting lock, or type kUnlock when none.
struct LockInfo {
  LockType type = LockType::kUnlock;
  uint64_t start = 0;
  uint64_t end = 0;
  uint32_t pid = 0;
};

struct FsStats {
  uint64_t total_bytes = 0;  // raw capacity of up data servers
  uint64_t free_bytes = 0;
  uint64_t files = 0;  // inodes in use
  uint64_t usable_total_bytes = 0;  // times k / (k + m) of the cluster default
  uint64_t usable_free_bytes = 0;
};

struct ServerRegistration {
  std::string address;
  std::string failure_domain;
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  std::string server_uuid;
  std::string fs_id;           // as HeartbeatArgs::fs_id
  uint64_t fs_free_bytes = 0;
};

struct HeartbeatArgs {
  ServerId server;
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t chunk_count = 0;
  std::vector<uint64_t> gc_done;
  std::vector<MoveProgress> moves;    // progress of the move tasks it runs as destination
  std::vector<uint64_t> pg_gc_done;   // PgGcTask ids applied
  uint64_t chunks_scrubbed = 0;       // scrub totals since the data server started
  uint64_t corrupt_found = 0;
  uint64_t corrupt_repaired = 0;
  uint64_t backfills_complete = 0;    // complete backfill passes since the data server started
  std::string fs_id;                  // its file system when capacity_bytes is that file
                                      // system's size ("" otherwise): shared disks count once
  uint64_t fs_free_bytes = 0;         // that file system's free bytes
};

// A move task handed to its destination, with the copy rate it must keep to.
struct MoveAssignment {
  MoveTask task;
  uint64_t rate_limit_bytes_per_s = 0;
};

struct HeartbeatReply {
  std::vector<GcTask> gc;  // acked unset
  uint64_t map_version = 0;
  // Every move task the server must run now as the destination (level-triggered: one it runs
  // that is not listed was cancelled or finished).
  std::vector<MoveAssignment> moves;
  std::vector<PgGcTask> pg_gc;  // PG positions to delete; resent until acked
  MemberState state = MemberState::kIn;
  bool backfill = false;  // a client committed writes that missed this server: backfill soon
};

struct ServerStatus {
  ServerRecord record;  // record.state: in, draining, removed
  bool up = false;      // false for removed servers
  uint64_t chunk_count = 0;
  int64_t last_heartbeat_ms_ago = 0;
  uint64_t chunks_scrubbed = 0;
  uint64_t corrupt_found = 0;
  uint64_t corrupt_repaired = 0;
  uint32_t pg_positions = 0;  // PG positions it is the target of, all widths
};

struct ServerAdminResult {
  uint32_t positions_held = 0;   // PG positions the server is still the target of
  uint32_t moves_scheduled = 0;  // move tasks this call created
  uint32_t moves_cancelled = 0;  // move tasks this call dropped (UndrainServer)
};

// One move task as GetMoves shows it.
struct MoveInfo {
  MoveTask task;
  bool running = false;  // false: queued behind --max-concurrent-moves at its destination
  MoveProgress progress;
  uint64_t rate_bytes_per_s = 0;  // measured from progress reports; 0 = unknown
  int64_t eta_ms = -1;            // -1 = unknown
  int64_t age_ms = 0;             // since created (or since the metadata server started)
};

// A PG with positions whose target is down or removed.
struct DegradedPg {
  uint32_t pg_width = 0;
  uint32_t pg_index = 0;
  std::vector<uint32_t> positions;
  std::string reason;  // "repairing", "repair in N ms", "waiting for a server"
};

// Lookups of the metadata server's in-memory caches (a miss reads RocksDB).
struct MetaCacheCounts {
  uint64_t inode_hits = 0, inode_misses = 0, dentry_hits = 0, dentry_misses = 0;
};

// What sessions hold now (CountHolds).
struct HoldCounts {
  uint64_t open_files = 0;    // (inode, session) pairs with the file open
  uint64_t write_leases = 0;  // inodes with a write lease holder
  uint64_t locks = 0;         // fcntl and flock locks held
};

// One open session as ListSessions reports it.
struct SessionInfo {
  SessionId id;
  std::string client_name;  // what the client sent at OpenSession (the mount's host and point)
  int64_t idle_ms = 0;      // since its last call or keep-alive
  uint64_t inodes = 0;      // inodes it has open, write-leased or locked
  bool caches = false;      // holds cache leases
};

struct MovesReport {
  std::vector<MoveInfo> moves;  // by id
  std::vector<DegradedPg> degraded;
  uint32_t moves_running = 0;
  uint32_t moves_queued = 0;
  bool waiting_for_server = false;  // a repair or drain found no spare failure domain
  uint64_t bytes_left = 0;          // over running tasks that reported totals
  int64_t eta_ms = -1;
  std::string message;              // one line for `aquifer status`
  uint32_t max_concurrent_moves = 0;
  uint64_t move_rate_bytes_per_s = 0;
  bool rebalance_paused = false;
  uint64_t moves_completed = 0;     // since this metadata server started
  uint64_t lost_stripes = 0;        // recorded lost (ReportLost), over lost_files files
  uint64_t lost_files = 0;
  uint64_t degraded_stripes = 0;    // written below k + m, backfill pending (persisted)
  // Bytes and chunks the finished tasks moved since this metadata server started (their
  // destinations' last reports), indexed by MoveKind.
  std::array<uint64_t, 3> completed_bytes{}, completed_chunks{};
};

// Runtime knobs for moves; zero / nullopt keeps the current value.
struct RebalanceKnobs {
  uint32_t max_concurrent_moves = 0;  // per destination server
  uint32_t move_rate_mib = 0;         // MiB/s per task
  std::optional<bool> paused;         // true: plan no new rebalance moves
};

struct ClusterMap {
  uint64_t version = 0;
  std::vector<ServerStatus> servers;
  std::vector<PgTable> pg_tables;
  uint32_t default_k = 0, default_m = 0, default_unit_bytes = 0;
  // 0 unless the namespace was restored from a backup (backup.h): the first write version and
  // inode number handed out after the last restore.
  uint64_t restore_version_floor = 0, restore_ino_floor = 0;
};

// Names the change a call makes, as the client tagged it (proto RequestTag): its session and a
// number the client never uses twice in that session.
struct RequestTag {
  uint64_t session = 0;
  uint64_t id = 0;
};

// Name of the virtual xattr that shows and sets layouts.
inline constexpr const char* kLayoutXattr = "aquifer.layout";
// Read-only, regular files: where the file's stripes go, "pg_width=6 pg_start=17 pg_count=64"
// (stripe s on PG (pg_start + s) % pg_count of the width's table). Never listed.
inline constexpr const char* kPlacementXattr = "aquifer.placement";

class MetadataService {
 public:
  // Loads state from `store` (creating the root on first start, deleting orphans left by a
  // crash). Errors: the store's errors; kInvalidArgument for bad options.
  static Result<std::unique_ptr<MetadataService>> Open(std::unique_ptr<NamespaceStore> store,
                                                       const MetaOptions& options,
                                                       Clocks clocks = Clocks::System());
  ~MetadataService();

  // --- namespace ---
  // Lookup accepts "." and ".." (the directory itself, its parent). A non-zero `cacher` (a
  // session) will cache the answer: it gets a cache lease on the parent's names (also for a
  // kNotFound answer) and on the child's attributes; GetAttr's on the inode, ReadDir's on the
  // directory's names (and with plus each entry's attributes). See "cache leases" below.
  Result<Inode> Lookup(InodeId parent, std::string_view name, const Caller& caller,
                       SessionId cacher = {});
  Result<Inode> GetAttr(InodeId ino, SessionId cacher = {});
  Result<Inode> SetAttr(InodeId ino, const SetAttrArgs& args, const Caller& caller,
                        SessionId session);
  Result<OpenResult> Create(const CreateArgs& args, const Caller& caller);
  Result<Inode> Mkdir(InodeId parent, std::string_view name, uint32_t mode, const Caller& caller);
  Result<Inode> Symlink(InodeId parent, std::string_view name, std::string_view target,
                        const Caller& caller);
  Result<Inode> Link(InodeId ino, InodeId new_parent, std::string_view new_name,
                     const Caller& caller);
  Status Unlink(InodeId parent, std::string_view name, const Caller& caller);
  Status Rmdir(InodeId parent, std::string_view name, const Caller& caller);
  // flags: RENAME_NOREPLACE (1) | RENAME_EXCHANGE (2).
  Status Rename(InodeId parent, std::string_view name, InodeId new_parent,
                std::string_view new_name, uint32_t flags, const Caller& caller);
  Result<std::string> Readlink(InodeId ino);
  // Entries after `cookie` (0 = from the start), at most max_entries (capped at 1024); "." and
  // ".." are not returned. *eof is set when no entry follows the last one returned.
  Result<std::vector<DirEntry>> ReadDir(InodeId ino, uint64_t cookie, uint32_t max_entries,
                                        bool plus, const Caller& caller, bool* eof,
                                        SessionId cacher = {});
  Result<std::string> GetXattr(InodeId ino, std::string_view name, const Caller& caller);
  // flags: XATTR_CREATE (1) | XATTR_REPLACE (2).
  Status SetXattr(InodeId ino, std::string_view name, std::string_view value, uint32_t flags,
                  const Caller& caller);
  Result<std::vector<std::string>> ListXattr(InodeId ino, const Caller& caller);
  Status RemoveXattr(InodeId ino, std::string_view name, const Caller& caller);
  Result<FsStats> StatFs();
  // Makes every acknowledged operation durable on disk (fsync, fsyncdir).
  Status Sync();

  // --- opens, commits, sessions, locks ---
  Result<OpenResult> Open(InodeId ino, uint32_t flags, SessionId session, const Caller& caller);
  Status Release(InodeId ino, SessionId session, bool was_write);
  Result<CommitResult> Commit(const CommitArgs& args);
  // Records stripes of `ino` that a reader or fsck found with no readable chunk (data lost
  // beyond the layout's redundancy). Only stripes the file's stripe map records as written and
  // below its size are kept (at most Inode::kMaxLostStripesRecorded); each new one is logged at
  // error. A commit that rewrites a stripe, or a truncate that cuts it, forgets it; GetMoves and
  // `aquifer status` count them. Returns how many stripes are recorded for the inode now.
  // Errors: kNotFound, kInvalidArgument (not a regular file; more than 1024 stripes).
  Result<uint64_t> ReportLost(InodeId ino, const std::vector<uint64_t>& stripes);
  // `caches`: the client will ask for cache leases; recorded with the session, so that after a
  // restart the server holds other sessions' changes until this one resynced (WaitRecalls).
  Result<SessionGrant> OpenSession(std::string_view client_name, bool caches = false);
  Status KeepAlive(SessionId session);
  Status CloseSession(SessionId session);
  // --- write-lease recall (docs/design.md "Write-lease recall") ---
  // An Open for write, a Create that opens an existing file for write, an AcquireLease or a
  // SetAttr(size) refused with kWouldBlock because another live session holds the write lease
  // also queues a recall of that lease for the holder, which WaitRecall hands it. The holder
  // commits what it buffered and calls ReturnLease; its next write calls AcquireLease.
  //
  // Takes the write lease of `ino` for `session` again, for a session that still has it open
  // for write (the lease was given back after a recall). Returns the attributes and a fresh write
  // version (> attr.data_version); a session that holds the lease already gets the version it
  // was last handed. Errors: kStale (unknown or expired session), kWouldBlock (another live
  // session holds it: a recall is queued for it), kInvalidArgument (the session has `ino` open
  // for write no more, or it is not a regular file), kNotFound.
  Result<OpenResult> AcquireLease(InodeId ino, SessionId session);
  // Gives `ino`'s write lease back: the session committed everything it wrote under it, so
  // nothing is abandoned; its opens stay counted. Returning a lease the session does not hold is
  // OK (a recall that crossed a close or another return). Errors: kStale (unknown session).
  Status ReturnLease(InodeId ino, SessionId session);
  // The inodes whose write lease `session` is asked to give back, waiting up to `wait` (capped
  // at kMaxRecallWait) for the first; empty when none came. Each recall is handed out once (a
  // session asked again while the first is handled gets another). Errors: kStale (unknown or
  // expired session), kUnavailable (the server is stopping). WaitRecalls with nothing acked,
  // keeping only the write leases (callers that cache nothing).
  static constexpr std::chrono::milliseconds kMaxRecallWait{10000};
  Result<std::vector<InodeId>> WaitRecall(SessionId session, std::chrono::milliseconds wait);

  // --- exclusive directory leases (docs/design.md "Exclusive directory leases") ---
  // Grants `session` the exclusive lease on directory `dir` when no other session caches it
  // (names or attributes) or holds it, and reserves `want_inodes` (at most kMaxReservedInodes)
  // inode numbers for the session's creates either way. While it holds the lease the session
  // may create, mkdir, unlink and rename in `dir` without asking, and sends those changes in
  // ChangeBatch; any other session's
  // call that reads or changes `dir` first recalls the lease (BreakDirLeases) and waits until
  // the holder sent its creates and gave it back (ReturnLease(dir)), its session ended, or
  // cache_lease_ms passed (then the lease is broken: the holder's later creates there fail).
  // Errors: kStale (unknown or expired session), kNotDirectory, kNotFound, kPermissionDenied
  // (the caller may not write `dir`).
  static constexpr uint32_t kMaxReservedInodes = 4096;
  static constexpr size_t kMaxChangeBatchItems = 1024;
  Result<DirLeaseGrant> AcquireDirLease(InodeId dir, SessionId session, uint32_t want_inodes,
                                        const Caller& caller);
  // Applies `items` in order in one store write (sync: durable on disk before returning). Each
  // gets its own answer (creates and mkdirs as Create's, with created set; unlinks and renames
  // an empty one; a commit its attributes and, in write_version, the next write version); the
  // call fails as a whole only for a bad session, more than
  // kMaxChangeBatchItems items, or a store error. An item fails as its own call would (Unlink,
  // Rename: kNotFound, kIsDirectory, kNotEmpty...), or with kInvalidArgument (a create that is
  // not a regular file; an inode number not reserved for the session), kStale (the session's
  // lease on a directory it names was broken, or another session holds it), kAlreadyExists
  // (the name or the inode number is taken); a commit as Commit would (kStale: the write lease
  // is another session's, or the version is older than the committed one).
  Result<std::vector<Result<OpenResult>>> ChangeBatch(SessionId session,
                                                      const std::vector<BatchChange>& items,
                                                      bool sync);
  // Held by a call while it reads or changes directories: no exclusive lease on them is granted
  // meanwhile. Move-only; releases at destruction.
  class DirLeaseGuard {
   public:
    DirLeaseGuard() = default;
    explicit DirLeaseGuard(std::shared_mutex* gate) : lock_(*gate) {}

   private:
    std::shared_lock<std::shared_mutex> lock_;
  };
  // Before a call of `caller` (0: unknown) reads or changes the directories `dirs` (inodes that
  // are not leased directories are passed over): recalls each one another session holds the
  // exclusive lease on and waits until it is given back, its holder's session ended, or
  // cache_lease_ms passed (then breaks it, logged). Returns a guard to hold for the call.
  DirLeaseGuard BreakDirLeases(std::initializer_list<uint64_t> dirs, uint64_t caller);
  // The child `name` of `parent` when it is a directory some session holds the exclusive lease
  // on; 0 otherwise (and at once while no lease is held).
  uint64_t LeasedChild(InodeId parent, std::string_view name);
  // The session holding the exclusive lease on `dir`, 0 when none (tests).
  uint64_t DirLeaseHolder(InodeId dir);

  // --- cache leases (docs/design.md "Cache leases") ---
  // A session that was answered a name, a negative lookup or attributes (Lookup, GetAttr,
  // ReadDir with a cacher; every change it made itself) holds a shared cache lease on the
  // inodes concerned until its session ends or the inode is deleted; each change by another
  // session recalls what it changed from it (the lease stays). A change (any store batch
  // of a namespace call: the inodes it wrote or deleted, the directories whose names it changed)
  // queues one CacheRecall per other holder and, when the change runs inside a RequestScope,
  // the scope's end waits (no lock held) until each holder acknowledged it, its session ended,
  // or options.cache_lease_ms passed. The holder drops what the recall names from its caches
  // and its kernel's, then acknowledges with its next WaitRecall (acked_seq).
  struct CacheRecall {
    uint64_t seq = 0;
    std::vector<InodeId> inodes;  // attributes changed (or the inode is gone)
    std::vector<std::pair<InodeId, std::string>> entries;  // names (parent, name) changed
  };
  struct Recalls {
    std::vector<InodeId> write_leases;       // as WaitRecall
    std::vector<CacheRecall> cache_recalls;  // every one above acked_seq, in seq order
    uint64_t recall_epoch = 0;               // this run's: seqs count in it
  };
  // As WaitRecall, and first records that `session` carried out every cache recall up to
  // `acked_seq`, counted in `recall_epoch` (the one a previous answer named; 0: none yet). An
  // epoch of another run acknowledges nothing: the holder must drop every cache it has (this run
  // knows none of its leases) and ask again with this run's epoch, which also ends the restart's
  // hold on other sessions' changes for it. Returns at once when a cache recall above acked_seq
  // is queued.
  Result<Recalls> WaitRecalls(SessionId session, std::chrono::milliseconds wait,
                              uint64_t acked_seq, uint64_t recall_epoch = 0);
  // How many sessions hold a cache lease on `ino` (tests).
  size_t CacheHolderCount(InodeId ino);
  // Wakes every WaitRecall and makes later ones return at once (server shutdown).
  void StopRecallWaits();

  // Non-blocking: kWouldBlock when a conflicting lock is held by another owner.
  Status SetLock(const LockArgs& args);
  Result<LockInfo> GetLock(const LockArgs& args);

  // --- replay of retried changes (docs/design.md "Metadata server restarts") ---
  // While a RequestScope lives on a thread, each store batch a method of this service writes on
  // that thread also records the scope's tag (when its session is known), in the same batch, so
  // that Replayed says the change was applied: a client that lost the reply (the connection broke,
  // this server was killed) sends the call again with retry set, and the RPC edge answers it from
  // what the first attempt did instead of running it twice. The RPC edge opens one scope per
  // tagged call; scopes do not nest.
  //
  // The scope's end also waits for the cache recalls its changes queued (see cache leases), so
  // the caller's reply goes out only once no other session caches what it changed.
  class RequestScope {
   public:
    explicit RequestScope(RequestTag tag);
    ~RequestScope();
    RequestScope(const RequestScope&) = delete;
    RequestScope& operator=(const RequestScope&) = delete;
  };
  // Whether the change `tag` names was applied (false once a later change of the session took
  // its replay slot: see kReplaySlots). Errors: the store's.
  Result<bool> Replayed(const RequestTag& tag);
  // The write version last handed to `session` as the holder of `ino`'s write lease (Open,
  // Create, Commit); 0 when the session does not hold it.
  uint64_t LeaseVersionFor(InodeId ino, SessionId session);

  // --- membership ---
  // Returns the server's id (stable per server_uuid) and the heartbeat interval in ms.
  Result<std::pair<ServerId, uint32_t>> RegisterServer(const ServerRegistration& reg);
  Result<HeartbeatReply> Heartbeat(const HeartbeatArgs& args);
  ClusterMap GetClusterMap();

  // --- repair, rebalance, drain (moves.cc; docs/repair.md) ---
  // Marks the server draining (no new PG positions) and schedules moves of all its positions.
  // Errors: kNotFound (unknown id), kInvalidArgument (removed server), store errors.
  Result<ServerAdminResult> DrainServer(ServerId id);
  // Ends a drain: the server is "in" again (it may take new PG positions) and its drain tasks are
  // cancelled (their destinations' copies are collected); positions already moved stay moved.
  // A server that is not draining is left as it is. Errors as DrainServer.
  Result<ServerAdminResult> UndrainServer(ServerId id);
  // Removes the server. kNotEmpty while it is the target of PG positions, unless `force`: then it
  // is treated as failed and its positions are repaired at once. Removing a removed server is OK.
  Result<ServerAdminResult> RemoveServer(ServerId id, bool force);
  MovesReport GetMoves();
  Status SetRebalance(const RebalanceKnobs& knobs);

  // --- what the status page shows besides the map and the moves ---
  // Every open session (a mount or another client), by id. Thread-safe (takes mu_ shared).
  std::vector<SessionInfo> ListSessions();
  // The newest `max` events (events.h), newest first. Thread-safe.
  std::vector<ClusterEvent> RecentEvents(size_t max) const { return events_.Recent(max); }
  std::array<uint64_t, 3> EventCounts() const { return events_.CountsBySeverity(); }
  // Where the process serves /metrics and the status page (main sets it once serving; "" until
  // then or when it serves none). Thread-safe.
  void set_http_address(std::string address) EXCLUDES(http_mu_) {
    MutexLock lock(http_mu_);
    http_address_ = std::move(address);
  }
  std::string http_address() const EXCLUDES(http_mu_) {
    MutexLock lock(http_mu_);
    return http_address_;
  }
  // Lookups of the in-memory inode and dentry caches since start. Thread-safe.
  MetaCacheCounts CacheCounts() EXCLUDES(cache_mu_) {
    MutexLock lock(cache_mu_);
    return cache_counts_;
  }
  // Opens, write leases and locks held now, over all sessions. Thread-safe (mu_ shared).
  HoldCounts CountHolds();
  // Wall-clock time, ms since the epoch, of this object's construction (the process's start).
  int64_t started_unix_ms() const { return started_unix_ms_; }

  // Expires silent sessions, marks silent data servers down, and plans moves (repair after
  // --repair-delay-ms, drain, rebalance, re-planning, throttling). The server calls it from a
  // background thread; tests call it after moving their clock.
  void Tick();

  // Called when this process was itself stopped or starved for `pause_ms` (its periodic ticks
  // came that late; SIGSTOP, a stalled VM): moves every data server's last heartbeat and every
  // session's last call forward by pause_ms, so the silence it caused is not counted against
  // them (otherwise every data server is marked down on resume, and writes fail until their next
  // heartbeats). A server or client that really died meanwhile is found pause_ms later.
  void DiscountPause(int64_t pause_ms);

  // --- backup (backup.cc) ---
  // Writes a consistent copy of the namespace into `dest_dir` on this host while every other
  // call goes on: a store checkpoint into a hidden sibling directory, the manifest, then a
  // rename onto dest_dir. dest_dir is checked by CheckBackupDestination (backup.h) against
  // options.db and options.backup_root; errors as there, plus kWouldBlock while another backup
  // runs, kNotSupported for the in-memory store, kInternal (I/O; nothing is left at dest_dir).
  Result<BackupResult> Backup(std::string_view dest_dir);

  // For tests and tools: pending GC tasks, and how many inodes exist.
  std::vector<GcTask> PendingGcTasks();
  // Up to `limit` pending GC tasks with an id above `after_id`, in id order; *eof when none
  // further exists (ListGcTasks, for fsck). Takes cluster_mu_.
  std::vector<GcTask> GcTasksAfter(uint64_t after_id, size_t limit, bool* eof);
  uint64_t InodeCount();

 private:
  struct Txn;
  // A live session: persisted as a SessionRecord; last_seen_ms restarts at load, and inodes is
  // an index rebuilt from the inode states.
  struct Session {
    std::string client_name;
    std::atomic<int64_t> last_seen_ms{0};
    std::unordered_set<uint64_t> inodes;  // inodes it has open, leased or locked
    std::atomic<bool> caches{false};      // holds cache leases (asked at OpenSession, or named
                                          // itself in a read; recorded only at OpenSession)
  };
  struct ServerState {
    ServerRecord record;
    bool up = false;
    int64_t last_heartbeat_ms = 0;
    int64_t down_since_ms = 0;  // when it was marked down (valid while !up)
    uint64_t chunk_count = 0;
    uint64_t chunks_scrubbed = 0, corrupt_found = 0, corrupt_repaired = 0;
    std::string fs_id;           // from its last heartbeat (HeartbeatArgs::fs_id)
    uint64_t fs_free_bytes = 0;
    bool backfill_wanted = false;  // told in the next heartbeat reply (set again at load for
                                   // the servers of persisted degraded writes)
    // Degraded writes (memory; rebuilt at load from the persisted ones): the epoch of the last commit that named this server as
    // having missed chunks, the epoch its last backfill request covered, the backfills_complete
    // count it had reported when asked, and the epoch its completed backfills cover.
    uint64_t degraded_epoch = 0, asked_epoch = 0, done_epoch = 0;
    uint64_t complete_at_ask = 0, backfills_complete = 0;
  };
  // Stripes written below k + m by one commit, until every server that missed their chunks
  // completed a backfill asked after it (or left the cluster). Persisted ('D' keys).
  struct DegradedWrite {
    uint64_t stripes = 0;
    uint64_t epoch = 0;
    std::vector<uint32_t> servers;
  };
  struct MoveState {  // a persisted MoveTask plus what is known in memory only
    MoveTask task;
    bool running = false;
    MoveProgress progress;
    int64_t created_ms = 0;
    int64_t first_report_ms = -1;
    uint64_t first_report_bytes = 0;
    uint64_t rate_bytes_per_s = 0;
  };
  using PgPos = std::tuple<uint32_t, uint32_t, uint32_t>;  // (width, pg index, position)
  // Collects one planning round's store writes and which PG tables changed (moves.cc).
  struct MoveBatch {
    StoreBatch batch;
    std::set<uint32_t> dirty_tables;
    uint32_t moves_created = 0;
    // For the event log (FlushMoves): moves scheduled, finished and cancelled by this batch,
    // by MoveKind.
    std::array<uint32_t, 3> created_by_kind{}, completed_by_kind{}, cancelled_by_kind{};
  };

  MetadataService(std::unique_ptr<NamespaceStore> store, const MetaOptions& options,
                  Clocks clocks);
  // Not analysed (NO_THREAD_SAFETY_ANALYSIS): runs inside Open, before the service is shared, so
  // no other thread can hold or want its locks; Apply and MaybeDeleteOrphan, which it calls,
  // take cluster_mu_ themselves, so it cannot simply hold it throughout.
  Status Load() NO_THREAD_SAFETY_ANALYSIS;
  Status LoadSessionState(int64_t now);

  // Cache and store access (mu_ held, shared or exclusive).
  Result<std::optional<Inode>> FindInode(InodeId ino);
  Result<Inode> LoadInode(InodeId ino);
  Result<std::optional<Dentry>> FindDentry(InodeId parent, std::string_view name);
  // As FindDentry, seeing the names `txn` changed already (a batch of several changes).
  Result<std::optional<Dentry>> FindDentryIn(const Txn& txn, InodeId parent,
                                             std::string_view name);
  // Unlink and Rename into `txn` (mu_ held exclusively; the caller applies it), with `now` as
  // the changed inodes' ctime and the parents' mtime. Every check comes before any change.
  Status UnlinkIn(Txn& txn, InodeId parent, std::string_view name, const Caller& caller,
                  Timespec now);
  Status RenameIn(Txn& txn, InodeId parent, std::string_view name, InodeId new_parent,
                  std::string_view new_name, uint32_t flags, const Caller& caller, Timespec now);
  // Commit into `txn` (as UnlinkIn): a plain Commit and a batch's COMMIT item. Sets
  // result->attr to the inode as this change leaves it. a.sync and a.backfill_servers are the
  // caller's (the Commit RPC acts on them after the write).
  Status CommitIn(Txn& txn, const CommitArgs& a, CommitResult* result);
  void CachePutInode(const Inode& inode);
  void CacheEraseInode(InodeId ino);
  void CachePutDentry(InodeId parent, std::string_view name, const std::optional<Dentry>& d);

  // Writes the transaction's batch (with its inode states, sessions and the current call's
  // replay record), then makes memory follow.
  Status Apply(Txn& txn, bool sync);
  // Puts `st` in states_ (erasing it when empty), keeps the sessions' inode index, and releases
  // GC holds at the last close (mu_ exclusive).
  void InstallState(uint64_t ino, InodeState st);
  static RequestTag CurrentRequestTag();
  // Removes the inode now, or keeps it as an orphan while a session has it open (mu_ exclusive).
  Status DropInode(Txn& txn, Inode* inode);
  // held: the task waits for the inode's last close (see gc_held_).
  void AddGcTask(Txn& txn, InodeId ino, uint64_t from_stripe, uint64_t max_version,
                 bool held = false);
  // Sets the size; a cut of stripes moves the file's truncate floor to the highest version
  // handed out so far and queues their GC, held until the last close (docs/design.md "Recorded
  // holes"). `opening`: the caller is opening the file (O_TRUNC), so it counts as open.
  Status TruncateLocked(Txn& txn, Inode* inode, uint64_t new_size, bool opening = false);
  // The lease holder of `ino` went away (session ended) after being handed `version`: when it is
  // above the committed data_version, the range since becomes abandoned (Inode).
  void AbandonLeaseVersion(Txn& txn, InodeId ino, uint64_t version);
  // The inode has no open left: its held GC tasks may go out (takes cluster_mu_).
  void ReleaseGcHolds(uint64_t ino) EXCLUDES(cluster_mu_);
  // After a restore: a file from the backup about to be opened for write gets its versions
  // between its restored data_version and the restore floor as an abandoned range (they were
  // written after the backup), so neither its writer nor readers after its commit take them.
  void AbandonRestoredLeftovers(Txn& txn, Inode* inode);
  uint64_t NextWriteVersion(Txn& txn);
  Result<FileLayout> NewFileLayout(const Inode& parent, InodeId ino);
  Result<Inode> MakeInode(Txn& txn, const Inode& parent, uint32_t mode, const Caller& caller);
  Result<Inode> CreateNonFile(InodeId parent, std::string_view name, uint32_t mode,
                              uint64_t rdev, std::string_view symlink_target,
                              const Caller& caller);
  Result<FileLayout> ParseLayoutText(std::string_view text, const FileLayout& base);
  std::string LayoutText(const FileLayout& layout) const;
  Status SetLayoutXattr(Txn& txn, Inode* inode, std::string_view value, const Caller& caller);

  // Sessions (mu_ held).
  bool SessionAlive(uint64_t session);
  void ReleaseAllOf(Txn& txn, uint64_t session);
  // A session that expired (its client died) may have written chunks of files it created under
  // a directory lease whose batch never arrived: their inode numbers are the reserved ones
  // above the last it used (numbers are taken in order). Each such number no inode has gets a
  // GcTask{0, UINT64_MAX}, as an unlinked file's. (A session closed cleanly sent its batches
  // first; its refused creates were collected when refused.)
  void CollectUnusedReservations(Txn& txn, uint64_t session);
  Status MaybeDeleteOrphan(Txn& txn, InodeId ino);
  void TouchSession(SessionId session);

  // Membership (cluster_mu_ held).
  Status EnsurePgTable(uint32_t width) REQUIRES(cluster_mu_);
  void BumpMapVersion() REQUIRES(cluster_mu_);
  // The default layout's PG table is built once k + m failure domains are eligible, not at the
  // first create (docs/design.md "The default PG table is built when the servers are there"):
  // ScheduleDefaultPgTable (after a registration or a server coming up) sets the build for one
  // heartbeat interval later, so servers starting together all get PGs; Tick builds it then.
  void ScheduleDefaultPgTable(int64_t now) REQUIRES(cluster_mu_);
  void BuildDueDefaultPgTable(int64_t now) REQUIRES(cluster_mu_);

  // Moves (cluster_mu_ held; moves.cc).
  Status LoadMoves() REQUIRES(cluster_mu_);
  bool Eligible(const ServerState& s) const;
  bool Failed(const ServerState& s, int64_t now) const;
  std::string DomainOf(ServerId id) const REQUIRES(cluster_mu_);
  double WeightOf(ServerId id) const REQUIRES(cluster_mu_);
  std::map<uint32_t, uint32_t> PlannedLoad(std::optional<uint32_t> width) const
      REQUIRES(cluster_mu_);
  bool PgGcQueued(ServerId server, const PgPos& pos) const REQUIRES(cluster_mu_);
  std::optional<ServerId> ChooseDestination(const PgTable& t, uint32_t pg, uint32_t pos,
                                            const std::set<uint32_t>& exclude,
                                            const std::map<uint32_t, uint32_t>& load) const
      REQUIRES(cluster_mu_);
  void AddMove(MoveBatch& mb, uint32_t width, uint32_t pg, uint32_t pos, ServerId from,
               ServerId to, MoveKind kind, int64_t now) REQUIRES(cluster_mu_);
  void DropMove(MoveBatch& mb, uint64_t id, bool gc_destination, int64_t now)
      REQUIRES(cluster_mu_);
  void CompleteMove(MoveBatch& mb, uint64_t id, int64_t now) REQUIRES(cluster_mu_);
  void QueuePgGc(MoveBatch& mb, ServerId server, const PgPos& pos, int64_t not_before_ms)
      REQUIRES(cluster_mu_);
  void PlanRebalance(MoveBatch& mb, PgTable& t, int64_t now) REQUIRES(cluster_mu_);
  // One planning round: re-plans tasks whose destination died, schedules repair and drain
  // moves, rebalances when wanted and `rebalance`, promotes queued tasks; writes the batch.
  Status Reconcile(int64_t now, MoveBatch& mb, bool rebalance) REQUIRES(cluster_mu_);
  Status FlushMoves(MoveBatch& mb, bool sync) REQUIRES(cluster_mu_);
  void RecordMoveEvents(const MoveBatch& mb) REQUIRES(cluster_mu_);
  // DrainServer (draining) and UndrainServer; takes cluster_mu_.
  Result<ServerAdminResult> SetDraining(ServerId id, bool draining) EXCLUDES(cluster_mu_);
  // PG positions that target `id`, over every table. cluster_mu_ held.
  uint32_t PositionsHeld(ServerId id) const REQUIRES(cluster_mu_);

  std::unique_ptr<NamespaceStore> store_;
  const MetaOptions options_;
  const Clocks clocks_;
  const FileLayout default_layout_;
  EventLog events_;  // its own lock: recorded under any of the locks below
  const int64_t started_unix_ms_;
  mutable Mutex http_mu_;
  std::string http_address_ GUARDED_BY(http_mu_);

  std::shared_mutex mu_;  // guards the namespace, next_* counters, states_, sessions_
  uint64_t next_ino_ = 0;         // next inode number to hand out
  uint64_t inode_count_ = 0;      // inodes in use
  uint64_t next_gc_id_ = 0;
  uint64_t next_version_ = 0;     // next write version to hand out (global, monotonic)
  uint64_t version_reserved_ = 0; // versions below this are reserved on disk
  uint64_t generation_ = 0;       // this start's epoch; new inodes carry it
  // Set by Load from the counters a restore wrote (backup.h), 0 when never restored; constant
  // afterwards (read without a lock).
  uint64_t restore_version_floor_ = 0;
  uint64_t restore_ino_floor_ = 0;
  std::mutex backup_mu_;  // held while a backup runs (one at a time)
  uint64_t next_session_ = 0;
  std::unordered_map<uint64_t, InodeState> states_;
  std::unordered_map<uint64_t, std::unique_ptr<Session>> sessions_;
  // Write-lease recalls not yet handed out, by holder session (memory only: a refused opener
  // asks again at its next try, which queues the recall again after a restart). recall_mu_ is a
  // leaf, taken under mu_.
  Mutex recall_mu_;
  std::condition_variable recall_cv_;
  std::unordered_map<uint64_t, std::set<uint64_t>> recalls_ GUARDED_BY(recall_mu_);
  bool recall_stop_ GUARDED_BY(recall_mu_) = false;
  // Queues a recall of `ino`'s lease for `holder` (mu_ held) and wakes its WaitRecall.
  void RecallLease(uint64_t holder, uint64_t ino);

  // Cache leases (cache_leases.cc). cache_holders_: inode -> sessions caching its attributes
  // (and, for a directory, its names); guarded by lease_mu_, a leaf taken under mu_ (shared for
  // grants by reads, exclusive in Apply). cache_queues_: per session, the recalls not yet
  // acknowledged; guarded by recall_mu_ (acks wake ack_cv_).
  struct CacheQueue {
    uint64_t next_seq = 1;
    uint64_t acked = 0;
    std::deque<CacheRecall> pending;  // seq order, all above acked
  };
  Mutex lease_mu_;
  std::unordered_map<uint64_t, std::vector<uint64_t>> cache_holders_ GUARDED_BY(lease_mu_);
  std::unordered_map<uint64_t, CacheQueue> cache_queues_ GUARDED_BY(recall_mu_);
  std::condition_variable ack_cv_;
  // This run's recall epoch (random, non-zero). After a restart, the restored sessions that asked
  // for cache leases (resync_) may still trust caches of the last run, whose leases this run never
  // saw: every change waits until each of them asked with this epoch, ended, or resync_deadline_
  // passed (start + cache_lease_ms). Guarded by recall_mu_; resync_open_ mirrors !resync_.empty().
  uint64_t recall_epoch_ GUARDED_BY(recall_mu_) = 0;
  std::set<uint64_t> resync_ GUARDED_BY(recall_mu_);
  std::chrono::steady_clock::time_point resync_deadline_ GUARDED_BY(recall_mu_);
  std::atomic<bool> resync_open_{false};
  // A change in a RequestScope is about to delete `ino` (its last name went) or drop chunks of
  // it (a truncate): when another session caches its attributes, that session may have opened
  // it without telling this server (a lazy open: docs/design.md "Opens without a round trip"),
  // and tells it in its answer to the recall this change sends. So the inode counts as open, by
  // the pseudo-session kRecallHoldSession, until the scope's recalls were acknowledged or their
  // leases broken (ReleaseRecallHolds); then the registered opens decide. Also while sessions of
  // the last run have not resynced. True when held (mu_ exclusive; takes lease_mu_).
  bool HoldForRecall(Txn& txn, uint64_t ino);
  // Records `session` as a cache holder of each inode (mu_ held, shared or exclusive).
  void GrantCache(SessionId session, std::initializer_list<uint64_t> inodes);
  void GrantCache(SessionId session, const std::vector<uint64_t>& inodes);
  // True when a cache recall naming `ino`'s attributes is queued for `session` and not yet
  // acknowledged: the change that made it is still waiting for this session (mu_ held; takes
  // recall_mu_).
  bool CacheRecallPending(uint64_t session, uint64_t ino);
  // After Apply wrote `txn`: recalls other sessions' cache leases on what it changed, grants the
  // calling session's, and notes the recalls the current RequestScope must wait for (mu_
  // exclusive).
  void RecallCaches(const Txn& txn);
 public:
  // After the recalls of a RequestScope were acknowledged (or their leases broken): drops the
  // holds HoldForRecall took on `inodes`, deleting those left unlinked and unopened and letting
  // their held truncate GC go (takes mu_). Called by ~RequestScope.
  void ReleaseRecallHolds(const std::vector<uint64_t>& inodes);
  // Waits for the recalls noted on this thread (no lock held). Called by ~RequestScope.
  // `resync`: also wait for the restart's resync (resync_) of every session but `self`.
  void AwaitCacheRecalls(const std::vector<std::pair<uint64_t, uint64_t>>& waits, bool resync,
                         uint64_t self);
 private:

  // Exclusive directory leases (dir_leases.cc). dl_gate_: held shared by every call that
  // reads or changes a directory (BreakDirLeases), exclusively by a grant, so no grant lands
  // between a call's check and its work. dl_mu_ guards the rest; it is a leaf, taken under mu_
  // or alone (a recall is queued after it is let go).
  std::shared_mutex dl_gate_;
  std::mutex dl_mu_;
  std::condition_variable dl_cv_;  // a lease was given back, broken or its session ended
  struct DirLease {
    uint64_t session = 0;
    bool recalled = false;
  };
  std::unordered_map<uint64_t, DirLease> dir_leases_;  // dir -> lease (guarded by dl_mu_)
  std::atomic<size_t> dir_lease_count_{0};              // dir_leases_.size()
  // Per session: inode number ranges [first, end) reserved for its creates (the last 8), and
  // the directories whose lease was broken (its creates there are refused). Guarded by dl_mu_.
  struct SessionDirState {
    std::deque<std::pair<uint64_t, uint64_t>> reserved;
    std::set<uint64_t> broken;
    // The largest reserved number a batched create or mkdir of this run took: the client takes
    // them in order, so a number at or below it is one used before (its inode may be gone, and
    // a number must never name two inodes: GC of the first would take the second's chunks).
    uint64_t last_used = 0;
  };
  std::unordered_map<uint64_t, SessionDirState> dir_sessions_;
  // Drops every exclusive directory lease and reservation of the ended sessions (dl_mu_ free).
  void EndDirLeases(const std::vector<uint64_t>& sessions);
  // Gives `session`'s lease on `dir` back; false when it held none there (dl_mu_ free).
  bool ReturnDirLease(uint64_t dir, uint64_t session);
  // Whether `ino` was reserved for `session`'s batched creates (kept in its session record, so
  // a restart keeps them).
  bool InoReservedFor(uint64_t session, uint64_t ino);
  // kStale when `session`'s lease on `dir` was broken or another session holds it.
  Status CheckBatchDir(uint64_t session, InodeId dir);

  Mutex cluster_mu_;  // guards servers_, pg_tables_, gc_tasks_, map_version_, next_server_
  std::map<uint32_t, ServerState> servers_ GUARDED_BY(cluster_mu_);
  std::map<uint32_t, PgTable> pg_tables_ GUARDED_BY(cluster_mu_);
  std::map<uint64_t, GcTask> gc_tasks_ GUARDED_BY(cluster_mu_);
  // Truncate GC tasks of inodes still open somewhere, by inode: not sent to data servers until
  // the inode's last close, so a reader's view never loses the chunks it names. Rebuilt at load
  // from the persisted opens (every GC task of an inode still open is held).
  std::map<uint64_t, std::vector<uint64_t>> gc_held_ GUARDED_BY(cluster_mu_);
  // Inodes with lost stripes recorded, and how many (guarded by mu_; rebuilt at start from the
  // store's 'l' markers).
  std::map<uint64_t, size_t> lost_index_;
  std::deque<DegradedWrite> degraded_writes_ GUARDED_BY(cluster_mu_);  // at most 65536
  uint64_t degraded_epoch_ GUARDED_BY(cluster_mu_) = 0;
  // Drops degraded writes whose servers all completed a backfill since (cluster_mu_ held).
  void SettleDegradedWrites() REQUIRES(cluster_mu_);
  uint64_t map_version_ GUARDED_BY(cluster_mu_) = 0;
  uint32_t next_server_ GUARDED_BY(cluster_mu_) = 1;
  // Mono ms the default PG table is due to be built; -1: not scheduled.
  int64_t default_pg_due_ms_ GUARDED_BY(cluster_mu_) = -1;
  // Moves (also under cluster_mu_).
  std::map<uint64_t, MoveState> moves_ GUARDED_BY(cluster_mu_);
  std::map<PgPos, uint64_t> move_at_ GUARDED_BY(cluster_mu_);  // position -> its task id
  std::map<uint64_t, PgGcTask> pg_gc_ GUARDED_BY(cluster_mu_);
  // In memory: mono ms before which not sent.
  std::map<uint64_t, int64_t> pg_gc_not_before_ GUARDED_BY(cluster_mu_);
  uint64_t next_move_id_ GUARDED_BY(cluster_mu_) = 1;
  uint64_t next_pg_gc_id_ GUARDED_BY(cluster_mu_) = 1;
  uint32_t max_concurrent_moves_ GUARDED_BY(cluster_mu_) = 2;
  uint32_t move_rate_mib_ GUARDED_BY(cluster_mu_) = 200;
  bool rebalance_paused_ GUARDED_BY(cluster_mu_) = false;
  bool rebalance_wanted_ GUARDED_BY(cluster_mu_) = false;
  uint64_t moves_completed_ GUARDED_BY(cluster_mu_) = 0;
  // By MoveKind, finished tasks.
  std::array<uint64_t, 3> moved_bytes_ GUARDED_BY(cluster_mu_){};
  std::array<uint64_t, 3> moved_chunks_ GUARDED_BY(cluster_mu_){};
  // Positions that need a move but have no spare failure domain.
  std::set<PgPos> waiting_ GUARDED_BY(cluster_mu_);

  Mutex cache_mu_ ACQUIRED_AFTER(cluster_mu_);  // guards the caches and cache_counts_
  MetaCacheCounts cache_counts_ GUARDED_BY(cache_mu_);
  std::unordered_map<uint64_t, Inode> inode_cache_ GUARDED_BY(cache_mu_);
  // ino 0 = known absent.
  std::unordered_map<std::string, Dentry> dentry_cache_ GUARDED_BY(cache_mu_);
};

}  // namespace aquifer::meta
