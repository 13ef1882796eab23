// The data server's chunk store: versioned, checksummed chunks in a local directory.
//
// A chunk is what one data server holds for one stripe position of one file, keyed by
// ChunkId (inode, stripe index, position). Each key has one or more versions; a version is written
// whole (copy-on-write: temp file, then rename into its versioned name), so a crash leaves the old
// or the new version of a chunk, never a torn one. Every block (block_bytes, default 64 KiB) of a
// chunk carries a CRC32C that is verified on every read; a mismatch is reported as kCorruption and
// counted, never returned as data.
//
// On disk (docs/design.md, "Data server"): one file per chunk version,
// DIR/chunks/XX/YY/c.<ino>.<stripe>.<pos>.<ver>.<len> (format 1, no placement) or
// c.<ino>.<stripe>.<pos>.<ver>.<len>.<width>.<pg>.<k>.<m>.<unit>.<stripe_bytes>.<replicated>
// (format 2, with the chunk's placement): a 64-byte header (key, version, length, block size,
// header CRC), for format 2 a 32-byte placement record, the CRC array (4 bytes per block), then
// the data. An in-memory index (ordered map from ChunkId to its versions, each with its
// placement, plus a set of chunks per placement group) is rebuilt by a directory scan in Open()
// from the file names alone.
//
// Threading: every method is safe to call concurrently. I/O runs on the calling thread's own
// io_uring (io_ring.h). Locks: a striped per-chunk mutex (held across one chunk's rename, index
// update and prune, never across an RPC) then the index mutex (held only for map updates), in
// that order.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "aquifer/ids.h"
#include "aquifer/status.h"
#include "aquifer/units.h"

namespace aquifer::server {

class ChunkStore;

struct ChunkStoreOptions {
  std::string dir;                  // required: root directory (created if missing)
  uint64_t capacity_bytes = 0;      // bytes the store may use; 0 = the file system's size
  // Client writes stop (kNoSpace) once used + in-flight bytes would pass this fraction of the
  // capacity; repair and backfill writes (if_absent) may use the rest, so a nearly full server
  // can still take back the chunks it is missing. 1.0: no reserve.
  double full_ratio = 0.95;
  uint32_t block_bytes = 64 * kKiB; // CRC block size, bytes (4 KiB..16 MiB, power of 2); fixed
                                    // when the store is created (kept in DIR/FORMAT)
  // How long a version that a newer committed one supersedes (Write's prune) stays readable
  // before it is deleted: a reader whose view still names it (a mount's view is at most about
  // attr_timeout old, plus the read itself) reads those bytes instead of failing over to a newer
  // view, which may be shorter than the size its kernel holds (docs/design.md "Reads that race
  // a truncate"). 0: deleted at once. Not kept across a restart (the next write prunes again).
  std::chrono::milliseconds superseded_grace{0};
  // How long an applied GC task is remembered (a tombstone, CollectGarbage): while it is, a
  // write of a chunk version the task covers is refused. Covers the chunks that arrive after
  // the GC that should have deleted them: a backfill or move that read a peer before the peer
  // applied the task, a client write queued on a stopped server (docs/design.md "Garbage
  // collection"). 0: none kept. Not kept across a restart.
  std::chrono::milliseconds gc_tombstone_keep{std::chrono::minutes(5)};
  // At most this many tombstones (about 100 bytes each); past it the oldest go first.
  size_t gc_tombstones_max = 200000;
};

// Where a chunk belongs (docs/repair.md): its placement group and the stripe's shape, so a data
// server can find every chunk of a PG and rebuild any one chunk by itself. Sent with each write,
// kept in the chunk's file name and header. Compact (24 bytes): it sits in the index of every
// chunk version.
struct ChunkPlacement {
  uint16_t pg_width = 0;      // k + m: which PG table; 0 = unknown (written without placement)
  uint8_t k = 0;              // data units per stripe
  uint8_t m = 0;              // parity units per stripe
  uint32_t pg_index = 0;      // index of the stripe's PG in the table of pg_width
  uint32_t unit_bytes = 0;    // stripe unit, bytes
  bool replicated = false;    // true: positions 0..m hold copies; false: erasure coded
  uint64_t stripe_bytes = 0;  // file bytes in this stripe (clips data chunks when rebuilding)
  bool known() const { return pg_width != 0; }
  bool operator==(const ChunkPlacement&) const = default;
};

// One stored version of a chunk.
struct ChunkVersion {
  uint64_t version = 0;
  uint64_t length_bytes = 0;
  ChunkPlacement placement;  // unknown for chunks written without one (format 1 files)
  // Steady-clock ms after which a pruned (superseded) version is deleted; 0: not superseded.
  int64_t superseded_until_ms = 0;
};

// One ListChunks row.
struct ChunkListEntry {
  ChunkId id;
  uint64_t version = 0;
  uint64_t length_bytes = 0;
  ChunkPlacement placement;
};

// Restricts List() to the chunks of one placement group (all positions).
struct PgFilter {
  uint32_t pg_width = 0;
  uint32_t pg_index = 0;
};

struct ChunkStoreStats {
  uint64_t capacity_bytes = 0;
  // When the capacity is the file system's size (no capacity_bytes given): an id of that file
  // system, the same for every store on it (its device and statvfs f_fsid), and its free bytes
  // (f_bavail), so the metadata server counts a disk shared by several servers once. "" and 0
  // with a configured capacity.
  std::string fs_id;
  uint64_t fs_free_bytes = 0;
  uint64_t used_bytes = 0;         // header + data bytes of every stored version
  uint64_t chunk_count = 0;        // distinct ChunkIds
  uint64_t version_count = 0;      // stored chunk versions (files)
  uint64_t corruptions_found = 0;  // checksum mismatches seen by reads since Open()
  uint64_t temp_files_removed = 0; // left by a crash, removed by Open()
  uint64_t torn_files_removed = 0; // versioned files shorter than their name says, removed
};

// What Read() found.
struct ChunkReadInfo {
  uint64_t version = 0;
  uint64_t chunk_length_bytes = 0;  // the whole chunk's length
  ChunkPlacement placement;         // as written with the chunk (unknown for format 1)
};

// A version of one chunk opened for several range reads (ReadChunkStream): every Read() sees
// the same version even if it is pruned or deleted meanwhile. Not thread-safe; move-only.
class ChunkReader {
 public:
  ChunkReader(ChunkReader&&) noexcept;
  ChunkReader& operator=(ChunkReader&&) noexcept;
  ~ChunkReader();
  uint64_t version() const { return version_; }
  uint64_t length_bytes() const { return length_; }
  const ChunkPlacement& placement() const { return placement_; }
  // Replaces *out with bytes [offset, offset + length) clipped to the chunk's end.
  // Errors: kInvalidArgument when offset > length_bytes() or offset + length overflows;
  // kCorruption when a block covering the range fails its CRC; kInternal on I/O errors.
  Status Read(uint64_t offset, uint64_t length, std::string* out);

 private:
  friend class ChunkStore;
  ChunkReader() = default;
  ChunkStore* store_ = nullptr;
  int fd_ = -1;
  ChunkId id_;
  uint64_t version_ = 0;
  uint64_t length_ = 0;
  ChunkPlacement placement_;
  uint32_t block_bytes_ = 0;
  std::vector<uint32_t> crcs_;
};

class ChunkStore {
 public:
  // Largest chunk accepted by Write(), bytes.
  static constexpr uint64_t kMaxChunkBytes = kMaxStripeUnitBytes;

  // Opens (creating if needed) the store in options.dir: removes temp files left by a crash,
  // removes versioned files whose size disagrees with their name (a non-durable write torn by a
  // crash), and rebuilds the index. Cost: one readdir per fan-out directory and one fstatat per
  // chunk file.
  // Errors: kInvalidArgument for bad options; kInternal when the dir is unusable.
  static Result<std::unique_ptr<ChunkStore>> Open(const ChunkStoreOptions& options);
  ~ChunkStore();

  // Stores `data` (<= 16 MiB) as version `version` (> 0) of chunk `id` with `placement` (may be
  // unknown: then the chunk is stored in format 1 and no PG listing finds it), replacing that
  // version atomically if it exists. With `sync`, the data and the rename are durable (fdatasync
  // of the file, fsync of its directory, batched with concurrent writers) before this returns.
  // Then prunes per docs/design.md: keeps the newest version <= committed_version and all newer
  // ones, deletes older ones (committed_version 0 prunes nothing) once they have been superseded
  // for options.superseded_grace (SweepSuperseded, or a later Write, deletes them).
  // With `if_absent` (repair and rebalance writes), the version is stored only if it is not
  // there yet, checked atomically with the rename, so a rebuilt copy never replaces what a
  // client wrote meanwhile.
  // Errors: kInvalidArgument for version 0, data over 16 MiB, or a known placement that is
  // inconsistent (pg_width != k + m, k == 0, unit_bytes == 0, position >= pg_width) (nothing
  // changed); kAlreadyExists with `if_absent` when the version exists (nothing changed); kNoSpace
  // when the capacity would be exceeded (without `if_absent`: full_ratio of it) or the disk is
  // full (nothing changed); kNotFound when a GC task applied here (CollectGarbage, within
  // options.gc_tombstone_keep) covers the version: it belongs to a deleted file or to stripes
  // truncated away, so it is garbage (nothing stored; the caller drops it); kInternal.
  Status Write(const ChunkId& id, uint64_t version, uint64_t committed_version,
               std::string_view data, bool sync, const ChunkPlacement& placement = {},
               bool if_absent = false);

  // Replaces *out with bytes [offset, offset + length) of the newest version <= max_version
  // (0 = newest of all), clipped to the chunk's end; length 0 = to the end.
  // Errors: kNotFound when no such version; kStale when the chunk has versions but all are
  // above max_version (those at or below it were pruned: the reader's bound is out of date);
  // kInvalidArgument when offset > chunk length or
  // offset + length overflows; kCorruption when a covering block fails its CRC (counted);
  // kInternal on I/O errors.
  Result<ChunkReadInfo> Read(const ChunkId& id, uint64_t max_version, uint64_t offset,
                             uint64_t length, std::string* out);

  // Opens the newest version <= max_version (0 = newest) for repeated range reads and verifies
  // its header. Errors: kNotFound; kStale (as Read); kCorruption for a bad header; kInternal.
  Result<ChunkReader> OpenReader(const ChunkId& id, uint64_t max_version);

  // Deletes every version in [min_version, max_version] of every chunk of `inode` with
  // stripe >= from_stripe. With `sync`, the removals are durable (directory fsync) before this
  // returns. Returns how many versions were deleted. Errors: kInternal.
  Result<uint64_t> DeleteRange(InodeId inode, uint64_t from_stripe, uint64_t max_version,
                               bool sync, uint64_t min_version = 0);

  // Applies a GC task of the metadata server: deletes what DeleteRange(inode, from_stripe,
  // max_version, sync) deletes, and first records the task as a tombstone that makes Write refuse
  // (kNotFound) any version it covers (stripe >= from_stripe, version <= max_version) for
  // options.gc_tombstone_keep (at most options.gc_tombstones_max kept, oldest dropped first).
  // Such a version is garbage whenever it arrives: neither write versions nor inode numbers are
  // ever reused (docs/design.md "Garbage collection"). A Write racing this call either lands
  // first (then this deletes it) or is refused. Returns how many versions were deleted.
  // Errors: kInternal (the tombstone stays).
  Result<uint64_t> CollectGarbage(InodeId inode, uint64_t from_stripe, uint64_t max_version,
                                  bool sync);
  // Writes refused since Open because a tombstone covered them.
  uint64_t writes_refused_by_gc() const { return writes_refused_by_gc_.load(); }

  // Deletes version `version` of chunk `id` if stored (a hand-off copy its target now holds).
  // Returns 1 when it was deleted, 0 when absent. Errors: kInternal.
  Result<uint64_t> DeleteVersion(const ChunkId& id, uint64_t version, bool sync);

  // Deletes every version, of any inode, whose placement is PG (pg_width, pg_index) and whose
  // key's position is `position` (the GC of a PG position that moved away). With `sync`, the
  // removals are durable before this returns. Returns how many versions were deleted.
  // Cost: proportional to the PG's chunks (a per-PG index), not the store's. Errors: kInternal.
  Result<uint64_t> DeletePgPosition(uint32_t pg_width, uint32_t pg_index, uint32_t position,
                                    bool sync);

  // Makes durable every removal made so far by DeleteRange/DeletePgPosition with sync = false:
  // one fsync per fan-out directory they touched (each once however many deletes touched it),
  // batched with concurrent syncs. Lets a caller apply many deletes (a heartbeat's GC tasks)
  // for a single round of fsyncs instead of one per call. Errors: kInternal (the directories
  // stay pending and the next call retries them).
  Status SyncDeletes();

  // Up to `limit_chunks` chunks with key > after, in key order, each with all its versions
  // (newest last); *eof says whether the listing reached the end. With `pg`, only chunks whose
  // placement is that PG (and of those, only the versions with that placement); the cost is
  // then proportional to the rows returned.
  std::vector<ChunkListEntry> List(const ChunkId& after, uint32_t limit_chunks, bool* eof,
                                   const PgFilter* pg = nullptr) const;

  // The versions of `id`, oldest first (empty when unknown).
  std::vector<ChunkVersion> Versions(const ChunkId& id) const;

  // Called (on the reading thread, after the read failed) with every chunk version a read found
  // corrupt, e.g. to queue it for repair. Set once, before the store is shared; must be cheap
  // and must not call back into the store.
  void SetCorruptionListener(std::function<void(const ChunkId&, uint64_t version)> listener) {
    corruption_listener_ = std::move(listener);
  }

  ChunkStoreStats Stats() const;
  // Deletes the versions whose superseded_grace has passed (at most `max_chunks` chunks' worth
  // per call). The data server calls it every heartbeat; Write calls it too. Returns how many
  // versions were deleted. Thread-safe. Errors: as DeleteRange.
  Result<uint64_t> SweepSuperseded(size_t max_chunks = 4096);
  const std::string& dir() const { return options_.dir; }
  // Path of one chunk version's file (for tests and tools).
  std::string ChunkPath(const ChunkId& id, uint64_t version, uint64_t length_bytes,
                        const ChunkPlacement& placement = {}) const;

 private:
  friend class ChunkReader;
  explicit ChunkStore(ChunkStoreOptions options);
  Status Scan();
  // The file system's free bytes (statvfs f_bavail), read again at most every 200 ms; only
  // when capacity_from_fs_.
  uint64_t FsFreeBytes() const;
  Status EnsureDir(uint32_t fanout);
  Status SyncDirs(std::vector<uint32_t> fanouts);
  // The shared body of DeleteRange and DeletePgPosition: for each chunk in `ids` (under its
  // chunk lock), removes from the index every version `doomed_if` selects (adjusting used bytes,
  // version count and by_pg_), unlinks their files (one already gone is fine) and, with `sync`,
  // makes the removals durable (fsync of the fan-out directories touched). `doomed_if` runs
  // under index_mu_ and must not call into the store. Returns how many versions were deleted.
  // Errors: kInternal for a failed unlink (the chunks before it, and that version's index entry,
  // are already gone) or directory fsync.
  Result<uint64_t> DeleteVersions(const std::vector<ChunkId>& ids,
                                  const std::function<bool(const ChunkVersion&)>& doomed_if,
                                  bool sync);
  std::mutex& ChunkLock(const ChunkId& id);
  // Keeps by_pg_ in step with index_[id] after its versions changed from `before` (PG keys).
  // Caller holds index_mu_ exclusively.
  void ReindexPgLocked(const ChunkId& id, const std::vector<std::pair<uint32_t, uint32_t>>& before);
  Status LoadFormat();
  // Looks up the newest version <= max_version, opens it and reads its header, plus (when
  // `out` is non-null) bytes [offset, offset + length) in the same submission.
  Result<ChunkReader> OpenAndRead(const ChunkId& id, uint64_t max_version, uint64_t offset,
                                  uint64_t length, std::string* out);
  Status VerifyBlocks(const ChunkReader& r, uint64_t first_block, std::string_view blocks);
  void CountCorruption(const ChunkReader& r, const std::string& what);

  ChunkStoreOptions options_;
  static constexpr size_t kChunkLocks = 256;
  std::unique_ptr<std::mutex[]> chunk_locks_;

  // Guards index_, by_pg_, used_bytes_, version_count_.
  mutable std::shared_mutex index_mu_;
  std::map<ChunkId, std::vector<ChunkVersion>> index_;  // versions oldest first
  // (pg_width, pg_index, chunk) for every chunk with a version of that placement.
  std::set<std::tuple<uint32_t, uint32_t, ChunkId>> by_pg_;
  uint64_t used_bytes_ = 0;
  uint64_t version_count_ = 0;
  std::atomic<uint64_t> reserved_bytes_{0};  // writes in flight, counted against capacity
  // Set by Open when the capacity is the file system's size (see ChunkStoreStats::fs_id).
  bool capacity_from_fs_ = false;
  std::string fs_id_;
  mutable std::atomic<uint64_t> fs_free_bytes_{0};
  mutable std::atomic<int64_t> fs_checked_ms_{0};  // steady clock

  // Fan-out directories touched by deletes made with sync = false, not yet synced.
  std::mutex unsynced_deletes_mu_;
  std::vector<uint32_t> unsynced_deletes_;

  // Per fan-out directory: missing, exists (its entry maybe not durable), durable.
  static constexpr uint8_t kDirMissing = 0, kDirExists = 1, kDirDurable = 2;
  std::mutex dirs_mu_;  // guards dir_state_; never held together with sync_mu_
  std::vector<uint8_t> dir_state_;

  // Directory-fsync batching (group commit): guards sync_*.
  std::mutex sync_mu_;
  std::condition_variable sync_cv_;
  std::vector<uint32_t> sync_pending_;
  uint64_t sync_requested_ = 0;
  uint64_t sync_completed_ = 0;
  bool sync_running_ = false;
  Status sync_last_status_;

  // GC tombstones (CollectGarbage), guarded by index_mu_: per inode the ranges of applied tasks,
  // and every task by expiry (steady ms), oldest first, for the lifetime and count bounds.
  struct GcTombstone {
    uint64_t from_stripe = 0;
    uint64_t max_version = 0;
    int64_t expires_ms = 0;
  };
  // Whether an unexpired tombstone covers version `version` of `id`. Caller holds index_mu_.
  bool BuriedLocked(const ChunkId& id, uint64_t version) const;
  std::map<uint64_t, std::vector<GcTombstone>> gc_tombstones_;  // inode -> its tasks' ranges
  std::deque<std::pair<int64_t, uint64_t>> gc_tombstone_order_;  // (expires_ms, inode)
  std::atomic<uint64_t> writes_refused_by_gc_{0};

  // Chunks with versions marked superseded, by deadline (steady ms), oldest first.
  std::mutex superseded_mu_;  // a leaf: taken under index_mu_
  std::deque<std::pair<int64_t, ChunkId>> superseded_;

  std::function<void(const ChunkId&, uint64_t)> corruption_listener_;
  std::atomic<uint64_t> corruptions_{0};
  std::atomic<uint64_t> temp_seq_{0};
  uint64_t temp_removed_ = 0;
  uint64_t torn_removed_ = 0;
};

// Fan-out directory count and index of a chunk (0..kFanoutDirs-1); the chunk lives in
// DIR/chunks/<index / 64 as 2 hex>/<index % 64 as 2 hex>/.
inline constexpr uint32_t kFanoutDirs = 4096;
uint32_t FanoutOf(const ChunkId& id);

}  // namespace aquifer::server
