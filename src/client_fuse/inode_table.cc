#include "client_fuse/inode_table.h"

namespace aquifer::fuse {

void InodeTable::AddLookup(InodeId inode, const Attributes& told, uint64_t n) {
  Shard& s = ShardOf(inode);
  std::lock_guard lock(s.mu);
  Record& r = s.records[inode];
  r.lookups += n;
  r.told_valid = true;
  r.told = FileVersion::Of(told);
}

void InodeTable::NoteAttributes(const Attributes& told) {
  Shard& s = ShardOf(told.inode);
  std::lock_guard lock(s.mu);
  auto it = s.records.find(told.inode);
  if (it == s.records.end()) return;  // the kernel holds no lookup: nothing to remember
  it->second.told_valid = true;
  it->second.told = FileVersion::Of(told);
}

void InodeTable::Forget(InodeId inode, uint64_t n) {
  Shard& s = ShardOf(inode);
  std::lock_guard lock(s.mu);
  auto it = s.records.find(inode);
  if (it == s.records.end()) return;
  if (it->second.lookups <= n) {
    s.records.erase(it);
  } else {
    it->second.lookups -= n;
  }
}

uint64_t InodeTable::LookupCount(InodeId inode) const {
  Shard& s = ShardOf(inode);
  std::lock_guard lock(s.mu);
  auto it = s.records.find(inode);
  return it == s.records.end() ? 0 : it->second.lookups;
}

InodeTable::OpenDecision InodeTable::RecordOpen(InodeId inode, const Attributes& now) {
  const FileVersion v = FileVersion::Of(now);
  Shard& s = ShardOf(inode);
  std::lock_guard lock(s.mu);
  Record& r = s.records[inode];
  OpenDecision d;
  d.keep_cache = r.opened && r.last_open == v;
  d.attrs_changed = !r.told_valid || r.told.size_bytes != v.size_bytes || r.told.mtime != v.mtime;
  r.opened = true;
  r.last_open = v;
  r.told_valid = true;
  r.told = v;
  return d;
}

void InodeTable::NotePosixLocks(InodeId inode) {
  Shard& s = ShardOf(inode);
  std::lock_guard lock(s.mu);
  s.records[inode].posix_locks = true;
}

bool InodeTable::HasPosixLocks(InodeId inode) const {
  Shard& s = ShardOf(inode);
  std::lock_guard lock(s.mu);
  auto it = s.records.find(inode);
  return it != s.records.end() && it->second.posix_locks;
}

}  // namespace aquifer::fuse
