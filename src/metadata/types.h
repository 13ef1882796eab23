// The metadata server's own records: inodes, directory entries, GC tasks, data servers and
// placement-group tables. No protobuf here; src/metadata/rpc/ converts to and from the wire.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "aquifer/ids.h"
#include "aquifer/stripe_map.h"

namespace aquifer::meta {

// Wall-clock time with nanoseconds (as in struct timespec).
struct Timespec {
  int64_t sec = 0;
  uint32_t nsec = 0;
  auto operator<=>(const Timespec&) const = default;
};

// Who asks: the FUSE request's credentials. uid 0 bypasses permission checks as root does.
struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  // supplementary groups
  uint32_t pid = 0;
};

// How a file's bytes map onto servers. k == 0 means "no layout" (non-regular files, or a
// directory without its own default). Stripe s lives on PG table(k+m)[(pg_start + s) % pg_count].
struct FileLayout {
  uint32_t k = 0;
  uint32_t m = 0;
  uint32_t unit_bytes = 0;  // stripe unit, bytes
  uint32_t pg_start = 0;
  uint32_t pg_count = 0;
  bool empty() const { return k == 0; }
  uint64_t stripe_width_bytes() const { return uint64_t{k} * unit_bytes; }
  bool operator==(const FileLayout&) const = default;
};

// One inode: POSIX attributes plus Aquifer's per-file state.
struct Inode {
  InodeId ino;
  uint64_t generation = 0;
  uint32_t mode = 0;  // S_IFMT type bits and permission bits
  uint32_t nlink = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;  // bytes: committed size (files), target length (symlinks), 4096 (dirs)
  uint64_t rdev = 0;
  Timespec atime, mtime, ctime;
  FileLayout layout;          // regular files: the file's layout
  uint64_t data_version = 0;  // regular files: newest committed chunk version (0 = none)
  // Regular files: the stripes committed writes stored, each with its truncate floor
  // (docs/design.md "Recorded holes"), and the floor a stripe gets when it is first written
  // again: the highest version handed out when a truncate last cut stripes (0: never).
  StripeMap stripes;
  uint64_t truncate_floor = 0;
  // Regular files: recorded stripes a reader or fsck found with no readable chunk (lost beyond
  // the layout's redundancy), sorted, at most kMaxLostStripesRecorded. A commit that rewrites
  // one, or a truncate that cuts it, takes it out; `aquifer status` counts them.
  std::vector<uint64_t> lost_stripes;
  static constexpr size_t kMaxLostStripesRecorded = 1024;
  // Regular files: versions handed to a writer whose session ended (a crash) before it committed
  // them, as inclusive ranges; readers never take chunks at them. At most kMaxAbandonedRanges
  // (the oldest goes first).
  VersionRanges abandoned_versions;
  static constexpr size_t kMaxAbandonedRanges = 16;
  // Directories only.
  InodeId parent;               // ".."; the root's parent is itself
  uint64_t next_entry_seq = 1;  // next readdir cookie to hand out in this directory
  uint64_t entry_count = 0;     // entries, without "." and ".."
  FileLayout dir_default;       // default layout for new files and subdirectories (k == 0: none)
  // Symlinks only.
  std::string symlink_target;

  bool is_dir() const;
  bool is_reg() const;
  bool is_symlink() const;
  // 512-byte blocks allocated, for st_blocks (du): a regular file with a known stripe map counts
  // the data bytes (below `size`) of the stripes committed writes stored, so a hole (never
  // written, or a truncate that extended the file) counts nothing, as on a local file system;
  // stripes are counted whole (up to the size), parity not at all, like df's usable space.
  // Anything else: ceil(size / 512).
  uint64_t blocks() const;
};

// A directory entry as stored: which inode a name points at.
struct Dentry {
  InodeId ino;
  uint32_t mode = 0;  // the target's type bits (for readdir without loading the inode)
  uint64_t seq = 0;   // position in the directory; the readdir cookie of this entry
};

// One entry returned by ReadDir.
struct DirEntry {
  std::string name;
  InodeId ino;
  uint32_t mode = 0;
  uint64_t cookie = 0;
  std::optional<Inode> attr;  // when asked with plus
};

// Deletes chunks of `ino` with stripe >= from_stripe and version <= max_version on every server.
struct GcTask {
  uint64_t id = 0;
  InodeId ino;
  uint64_t from_stripe = 0;
  uint64_t max_version = 0;
  std::vector<uint32_t> acked;  // server ids that reported it done
  bool held = false;  // memory only: waits for the inode's last close (truncates)
};

// A data server's membership. kIn: takes new PG positions. kDraining: its positions move away
// and it takes no new ones. kRemoved: no longer a member; clients never use it; its positions
// are repaired from the other targets. Persisted.
enum class MemberState : uint8_t { kIn = 0, kDraining = 1, kRemoved = 2 };
// "in", "draining", "removed" (the wire words).
const char* MemberStateName(MemberState state);

// A registered data server as persisted (liveness and usage are kept in memory).
struct ServerRecord {
  ServerId id;
  std::string uuid;
  std::string address;
  std::string failure_domain;
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  MemberState state = MemberState::kIn;
};

// The placement groups of one width (k + m): each PG lists `width` server ids on distinct
// failure domains. pending[pg] is empty, or `width` entries: pending[pg][i] is the server
// receiving position i through a move (ServerId(0) = none). The tables only grow (files name PGs
// by index), so pending.size() == pgs.size().
struct PgTable {
  uint32_t width = 0;
  std::vector<std::vector<ServerId>> pgs;
  std::vector<std::vector<ServerId>> pending;
  // The most servers that were eligible when the table was built or last grown (0: not
  // recorded, a table persisted before this field: the servers it names count). The table grows
  // only for servers past that count, so that a server coming back after repair rebuilt its
  // positions elsewhere gets positions back by rebalance moves, not new PGs (each return grew
  // the table by 1/7 in the storm, 64 to 147 PGs in 30 minutes).
  uint32_t sized_for = 0;
};

// Why a PG position moves. Repair: its target failed (down past the repair delay, or removed
// with force). Rebalance: spreading positions over new servers. Drain: its target is draining.
enum class MoveKind : uint8_t { kRepair = 0, kDrain = 1, kRebalance = 2 };  // also priority
// "repair", "drain", "rebalance".
const char* MoveKindName(MoveKind kind);

// Move position `position` of PG (pg_width, pg_index) from `from` to `to` (docs/repair.md).
// Persisted; the position's pending target is `to` while the task exists.
struct MoveTask {
  uint64_t id = 0;
  uint32_t pg_width = 0;
  uint32_t pg_index = 0;
  uint32_t position = 0;
  ServerId from;
  ServerId to;
  MoveKind kind = MoveKind::kRepair;
  uint64_t map_version = 0;  // the cluster map version that first showed `to` as pending
};

// What the destination reports about a move task in its heartbeats.
struct MoveProgress {
  uint64_t task_id = 0;
  uint64_t chunks_done = 0;
  uint64_t chunks_total = 0;
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  bool done = false;
  std::string error;  // non-empty: the task failed at the destination
};

// Delete every chunk of PG (pg_width, pg_index) at `position` on `server`: sent once the server
// no longer holds that position (a finished move's source, a cancelled move's destination).
// Persisted until acked.
struct PgGcTask {
  uint64_t id = 0;
  ServerId server;
  uint32_t pg_width = 0;
  uint32_t pg_index = 0;
  uint32_t position = 0;
};

// --- state of sessions, kept across restarts (docs/design.md "Metadata server restarts") ---

// A client session as persisted: its id and the name the client gave. Liveness (the last call's
// time) is memory only: a restart gives every recorded session a fresh session ttl.
struct SessionRecord {
  uint64_t id = 0;
  std::string client_name;
  bool caches = false;  // asked for cache leases: after a restart it must resync before changes
                        // of other sessions return (docs/design.md "Cache leases")
  // Inode numbers [first, end) reserved for the session's batched creates (docs/design.md
  // "Exclusive directory leases"), newest last, at most 8; appended to the record (absent in
  // older records: none).
  std::vector<std::pair<uint64_t, uint64_t>> reserved_inos;
};

// F_RDLCK, F_WRLCK, F_UNLCK as numbered in proto LockRequest.
enum class LockType : uint32_t { kRead = 0, kWrite = 1, kUnlock = 2 };

// Opens of one inode by one session: all of them, and how many are for write.
struct OpenCount {
  uint32_t total = 0;
  uint32_t write = 0;
};

// One held fcntl (POSIX or OFD) or flock lock. [start, end] inclusive, end UINT64_MAX = to the
// end of the file; flock locks are whole-file and never conflict with fcntl ones.
struct LockRecord {
  uint64_t session = 0;
  uint64_t owner = 0;
  LockType type = LockType::kRead;
  uint64_t start = 0, end = 0;
  uint32_t pid = 0;
  bool flock = false;
};

// The pseudo-session whose open keeps an inode (and its truncated chunks) while another session
// that may have opened it without a round trip answers a recall (MetadataService::HoldForRecall).
// Never a real session's id; after a restart it counts as an unknown session, reaped as expired.
inline constexpr uint64_t kRecallHoldSession = UINT64_MAX;

// What sessions hold on one inode: opens by session, the write lease, locks. Persisted with every
// change, in the batch of the operation that made it.
struct InodeState {
  std::unordered_map<uint64_t, OpenCount> opens;  // by session
  uint64_t lease_holder = 0;                      // session; 0 = none
  uint64_t lease_version = 0;  // the last write version handed to the lease holder
  std::vector<LockRecord> locks;
  bool empty() const { return opens.empty() && lease_holder == 0 && locks.empty(); }
};

// Stripes one commit wrote below k + m, and the data servers that missed their chunks (each asked
// for a backfill), persisted until all of those servers completed one asked after it.
struct DegradedWriteRecord {
  uint64_t epoch = 0;  // orders them; > every earlier one's
  uint64_t stripes = 0;
  std::vector<uint32_t> servers;
};

}  // namespace aquifer::meta
