// What this mount knows about the inodes the kernel holds: the kernel's lookup count, the
// attributes last handed to the kernel, and the file version seen at the last open (for the
// kernel's keep_cache decision).
//
// Lookup-count discipline (as in libfuse's passthrough_hp): every reply that hands an inode to
// the kernel (fuse_reply_entry, fuse_reply_create, each readdirplus entry other than "." and "..")
// adds one lookup; FORGET / BATCH_FORGET drop them. The client library keeps no per-inode kernel
// state, so nothing has to be freed in the library at zero; this table drops its own record then,
// which is also correct for keep_cache: a forgotten inode has no page cache left in the kernel.
//
// Threading: all methods are safe to call concurrently. One mutex per shard guards its map; no
// lock is held across an RPC or a FUSE reply.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "aquifer/client.h"
#include "aquifer/ids.h"

namespace aquifer::fuse {

// The bits of a regular file that decide whether cached pages are still valid.
struct FileVersion {
  Timestamp mtime;
  uint64_t size_bytes = 0;
  uint64_t data_version = 0;
  bool operator==(const FileVersion&) const = default;
  static FileVersion Of(const Attributes& a) { return {a.mtime, a.size_bytes, a.data_version}; }
};

class InodeTable {
 public:
  // Counts `n` lookups handed to the kernel for `inode`, and remembers the attributes it was told.
  void AddLookup(InodeId inode, const Attributes& told, uint64_t n = 1);
  // Remembers attributes handed to the kernel by GETATTR/SETATTR (no lookup counted).
  void NoteAttributes(const Attributes& told);
  // Drops `n` lookups (FORGET); removes the record when the count reaches zero. Unknown inodes
  // and counts larger than held are tolerated (counted as zero).
  void Forget(InodeId inode, uint64_t n);
  // The kernel's lookup count as this table knows it; 0 for unknown inodes.
  uint64_t LookupCount(InodeId inode) const;

  struct OpenDecision {
    bool keep_cache = false;       // the page cache holds exactly this version: keep it
    bool attrs_changed = false;    // the kernel's cached size/mtime differ from `now`
  };
  // Called at each open of a regular file with the attributes the open returned. keep_cache is
  // true only when `now` equals the version this mount recorded at its previous open of the inode
  // (so a file changed elsewhere, or never opened here, starts with an empty page cache).
  // Records `now` for the next open.
  OpenDecision RecordOpen(InodeId inode, const Attributes& now);

  // Marks that POSIX (fcntl) locks were taken on `inode` through this mount, so FLUSH must
  // release the closing owner's locks. Sticky until the inode is forgotten.
  void NotePosixLocks(InodeId inode);
  bool HasPosixLocks(InodeId inode) const;

 private:
  struct Record {
    uint64_t lookups = 0;
    bool told_valid = false;
    FileVersion told;          // size/mtime last handed to the kernel
    bool opened = false;
    FileVersion last_open;     // version seen at the previous open on this mount
    bool posix_locks = false;
  };
  struct Shard {
    mutable std::mutex mu;  // guards records
    std::unordered_map<InodeId, Record> records;
  };
  static constexpr size_t kShards = 16;
  Shard& ShardOf(InodeId inode) const { return shards_[inode.value() % kShards]; }

  mutable std::array<Shard, kShards> shards_;
};

}  // namespace aquifer::fuse
