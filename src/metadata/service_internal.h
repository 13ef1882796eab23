// Private to MetadataService's .cc files: the transaction helper and small shared rules.
#pragma once

#include <sys/stat.h>

#include <map>
#include <set>
#include <tuple>

#include "aquifer/units.h"
#include "metadata/metadata_service.h"

namespace aquifer::meta {

inline constexpr uint32_t kMaxLinks = 65000;          // nlink limit (as ext4)
inline constexpr uint32_t kMaxReadDirEntries = 1024;  // per ReadDir call
inline constexpr uint64_t kMaxXattrValueBytes = 64 * 1024;
inline constexpr uint64_t kVersionReserveStep = 1 << 20;  // write versions reserved per disk write
inline constexpr uint32_t kDirSizeBytes = 4096;

// One namespace mutation being built under mu_ exclusive: inodes it loaded (each at most once,
// so two names for one directory alias correctly), dentries it changed, and the batch. Nothing
// in memory changes until MetadataService::Apply wrote the batch.
struct MetadataService::Txn {
  explicit Txn(MetadataService* s) : svc(s) {}

  // The inode as this transaction sees it. Errors: kNotFound, store errors.
  Result<Inode*> Get(InodeId ino) {
    auto it = inodes.find(ino.value());
    if (it != inodes.end()) return &it->second;
    auto n = svc->LoadInode(ino);
    if (!n.ok()) return n.status();
    return &inodes.emplace(ino.value(), std::move(*n)).first->second;
  }
  Inode* Add(Inode inode) {
    uint64_t ino = inode.ino.value();
    Inode* p = &(inodes[ino] = std::move(inode));
    dirty.insert(ino);
    return p;
  }
  void Dirty(const Inode* n) { dirty.insert(n->ino.value()); }
  void Remove(const Inode* n) {
    deleted.insert(n->ino.value());
    dirty.erase(n->ino.value());
  }
  void PutDentry(InodeId parent, std::string_view name, const Dentry& d) {
    batch.PutDentry(parent, name, d);
    dentries.emplace_back(parent, std::string(name), d);
  }
  void DeleteDentry(InodeId parent, std::string_view name, uint64_t seq) {
    batch.DeleteDentry(parent, name, seq);
    dentries.emplace_back(parent, std::string(name), std::nullopt);
  }
  // The inode's session state as this transaction changes it: a copy of the service's, which
  // Apply persists and then installs (so opens, leases and locks are in the same batch as the
  // change that made them, and a failed write leaves memory as it was).
  InodeState& State(uint64_t ino) {
    auto it = states.find(ino);
    if (it != states.end()) return it->second;
    auto cur = svc->states_.find(ino);
    return states.emplace(ino, cur != svc->states_.end() ? cur->second : InodeState{})
        .first->second;
  }
  // The state as this transaction sees it, or null when the inode has none.
  const InodeState* FindState(uint64_t ino) const {
    auto it = states.find(ino);
    if (it != states.end()) return &it->second;
    auto cur = svc->states_.find(ino);
    return cur != svc->states_.end() ? &cur->second : nullptr;
  }
  bool IsOpen(uint64_t ino) const {
    const InodeState* st = FindState(ino);
    return st != nullptr && !st->opens.empty();
  }

  MetadataService* svc;
  StoreBatch batch;
  std::unordered_map<uint64_t, Inode> inodes;
  std::set<uint64_t> dirty;
  std::set<uint64_t> deleted;
  std::vector<std::tuple<InodeId, std::string, std::optional<Dentry>>> dentries;
  std::vector<GcTask> gc;
  std::map<uint64_t, InodeState> states;       // staged (State)
  std::vector<SessionRecord> new_sessions;     // OpenSession
  std::vector<uint64_t> ended_sessions;        // closed or expired (ReleaseAllOf)
  uint64_t new_inos = 0;     // inode numbers taken from next_ino_
  int64_t inode_delta = 0;   // change of inode_count_
  uint64_t new_gc = 0;       // ids taken from next_gc_id_
  uint64_t new_versions = 0; // write versions taken from next_version_
};

// Checks a name for a new or removed entry: kNameTooLong over 255 bytes; kInvalidArgument for
// "", ".", "..", or a name holding '/' or NUL.
Status ValidateName(std::string_view name);

// Whether `caller` may access `inode` with `mask` (R_OK 4 | W_OK 2 | X_OK 1). Root passes,
// except X on a non-directory without any x bit. Error: kPermissionDenied.
Status CheckAccess(const Inode& inode, const Caller& caller, int mask);

// Whether the caller's gid or supplementary groups include `gid`.
bool InGroup(const Caller& caller, uint32_t gid);

// The attributes a SetAttr of mode, owner, group and times (not size) gives `n`, in `*next` (a
// copy of `n` with those changed; ctime untouched), checking the caller's rights as chmod(2),
// chown(2) and utimensat(2) do. `now` is the time of the *_NOW bits. Errors: kNotPermitted,
// kPermissionDenied, kInvalidArgument (nsec past 999,999,999).
Status ChangedAttrs(const Inode& n, const SetAttrArgs& a, const Caller& caller, Timespec now,
                    Inode* next);

// Checks a file size or an offset carried by a call: kFileTooLarge (EFBIG) past kMaxFileBytes
// (2^63 - 1), naming `what` ("set size", "commit size") in the message.
inline Status CheckFileBytes(uint64_t bytes, std::string_view what) {
  if (bytes <= kMaxFileBytes) return OkStatus();
  return Status(Code::kFileTooLarge, std::string(what) + " " + std::to_string(bytes) +
                                         " is past the largest file size " +
                                         std::to_string(kMaxFileBytes));
}

// Checks an fcntl lock range [start, end] (inclusive): end UINT64_MAX means "to end of file";
// otherwise both ends must be at most kMaxFileBytes and start <= end. Error: kInvalidArgument.
inline Status CheckLockRange(uint64_t start, uint64_t end) {
  if (start > end) return InvalidArgument("lock: start past end");
  if (start > kMaxFileBytes || (end != UINT64_MAX && end > kMaxFileBytes)) {
    return InvalidArgument("lock: range past the largest file size");
  }
  return OkStatus();
}

// Sticky directories: only the owner of the entry, of the directory, or root may remove or
// rename it. Error: kNotPermitted.
Status CheckSticky(const Inode& dir, const Inode& victim, const Caller& caller);

}  // namespace aquifer::meta
