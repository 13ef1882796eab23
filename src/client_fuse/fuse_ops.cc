#include "client_fuse/fuse_ops.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "client_fuse/fuse_metrics.h"
#include "common/failpoint.h"
#include "common/logging.h"

namespace aquifer::fuse {
namespace {

constexpr uint32_t kMaxIoBytes = 1 << 20;       // max_write / max_read / max_pages * 4 KiB
constexpr uint64_t kStatfsBlockBytes = 4096;    // f_frsize reported to df
constexpr fuse_ino_t kUnknownIno = 0xffffffff;  // d_ino of ".." (the parent is not tracked)

Daemon& DaemonOf(fuse_req_t req) { return *static_cast<Daemon*>(fuse_req_userdata(req)); }
Client& ClientOf(fuse_req_t req) { return *DaemonOf(req).client; }
OpenDescription& DescriptionOf(fuse_file_info* fi) {
  return *reinterpret_cast<OpenDescription*>(fi->fh);
}
SharedFile& SharedOf(fuse_file_info* fi) { return *DescriptionOf(fi).shared; }
OpenFile& FileOf(fuse_file_info* fi) { return *SharedOf(fi).current.load(); }

spdlog::logger& Log() {
  static std::shared_ptr<spdlog::logger> logger = Logger("fuse");
  return *logger;
}

// The caller of a request. Supplementary groups cost a read of /proc/TID/status, so only the
// handlers whose outcome can depend on them (namespace changes, open, setattr, xattr) ask, and
// the answer is reused per thread for a second (group_cache.h says why that is safe).
Caller CallerOf(fuse_req_t req, bool with_groups = false) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  Caller c{.uid = ctx->uid, .gid = ctx->gid, .groups = {}, .pid = static_cast<uint32_t>(ctx->pid)};
  if (!with_groups) return c;
  GroupCache& cache = DaemonOf(req).groups;
  const auto now = GroupCache::Clock::now();
  if (std::optional<std::vector<uint32_t>> hit = cache.Find(c.pid, c.uid, c.gid, now)) {
    c.groups = std::move(*hit);
    return c;
  }
  gid_t groups[64];
  int n = fuse_req_getgroups(req, 64, groups);
  if (n > 64) {
    std::vector<gid_t> more(n);
    n = fuse_req_getgroups(req, n, more.data());
    if (n > 0) c.groups.assign(more.begin(), more.begin() + std::min<int>(n, more.size()));
  } else if (n > 0) {
    c.groups.assign(groups, groups + n);
  }
  // Only a successful read is remembered (n < 0: the thread exited, or /proc is not mounted).
  if (n >= 0) cache.Put(c.pid, c.uid, c.gid, c.groups, now);
  return c;
}

mode_t UmaskOf(fuse_req_t req) { return fuse_req_ctx(req)->umask; }

// Takes a reference on the SharedFile of `inode`, if this mount has one. With `want_write`, only
// a writable one qualifies.
SharedFile* PinShared(Daemon& d, InodeId inode, bool want_write) {
  std::lock_guard lock(d.open_mu);
  auto it = d.open_files.find(inode);
  if (it == d.open_files.end() || (want_write && !it->second->writable)) return nullptr;
  ++it->second->refs;
  return it->second;
}

// Adds a freshly opened library handle to the inode's SharedFile (creating it) and takes a
// reference. A writable handle becomes the current one.
SharedFile* AddShared(Daemon& d, InodeId inode, std::unique_ptr<OpenFile> file, bool writable) {
  std::lock_guard lock(d.open_mu);
  SharedFile*& sf = d.open_files[inode];
  if (sf == nullptr) {
    sf = new SharedFile;
    sf->inode = inode;
  }
  OpenFile* raw = file.get();
  sf->files.push_back(std::move(file));
  if (sf->current.load() == nullptr || (writable && !sf->writable)) {
    sf->current.store(raw);
    sf->writable = sf->writable || writable;
  }
  ++sf->refs;
  return sf;
}

// Drops a reference; the last one releases every library handle (flushing buffered data).
Status UnpinShared(Daemon& d, SharedFile* sf) {
  {
    std::lock_guard lock(d.open_mu);
    if (--sf->refs > 0) return OkStatus();
    d.open_files.erase(sf->inode);
  }
  Status first;
  // The writable handle last: a read-only handle's release does not touch data.
  std::vector<std::unique_ptr<OpenFile>> files = std::move(sf->files);
  OpenFile* current = sf->current.load();
  for (auto& f : files) {
    if (f.get() == current) continue;
    Status s = d.client->Release(std::move(f));
    if (first.ok() && !s.ok()) first = s;
  }
  for (auto& f : files) {
    if (f == nullptr) continue;
    Status s = d.client->Release(std::move(f));
    if (first.ok() && !s.ok()) first = s;
  }
  delete sf;
  return first;
}

// Replies with the errno of `status`. EIO means data or metadata really could not be reached, so
// it is logged (warn) with the library's status, which names the inode, stripe or server; other
// errnos are routine answers (ENOENT, EEXIST, EACCES...) and get one debug line.
void ReplyError(fuse_req_t req, const Status& status, const char* op) {
  int err = ToErrno(status);
  if (err == 0) err = EIO;  // an OK status never reaches here; be safe anyway
  if (err == EIO) {
    Log().warn("{} failed errno=EIO status={}", op, status.ToString());
  } else {
    SPDLOG_LOGGER_DEBUG(&Log(), "{} failed errno={} status={}", op, err, status.ToString());
  }
  CountFuseError(err);
  fuse_reply_err(req, err);
}

// Replies to an operation addressed to an inode the kernel resolved from a cached name. If that
// inode is gone (kNotFound), another client removed or replaced the name since (the usual
// "write a temporary file, rename it over the old one"): ESTALE, not ENOENT, makes the kernel
// look the path up again with LOOKUP_REVAL and retry once, as it does for NFS, so an open or
// stat of a path that always existed does not fail. A path that is really gone then fails with
// ENOENT from the fresh lookup.
void ReplyInodeError(fuse_req_t req, const Status& status, const char* op) {
  if (status.code() == Code::kNotFound) {
    SPDLOG_LOGGER_DEBUG(&Log(), "{} failed errno=ESTALE (inode gone) status={}", op,
                        status.ToString());
    CountFuseError(ESTALE);
    fuse_reply_err(req, ESTALE);
    return;
  }
  ReplyError(req, status, op);
}

struct stat ToStat(const Attributes& a) {
  struct stat st {};
  st.st_ino = a.inode.value();
  st.st_mode = a.mode;
  st.st_nlink = a.nlink;
  st.st_uid = a.uid;
  st.st_gid = a.gid;
  // off_t holds at most kMaxFileBytes, and the kernel calls an attribute with a larger size
  // invalid (EIO for stat, and so for unlink). The metadata server refuses such sizes now; a file
  // a store kept from before shows as kMaxFileBytes long, so it can still be seen and removed.
  st.st_size = static_cast<off_t>(std::min(a.size_bytes, kMaxFileBytes));
  st.st_rdev = a.rdev;
  st.st_blocks = static_cast<blkcnt_t>(a.blocks);
  st.st_blksize = S_ISREG(a.mode) ? kMaxIoBytes : 4096;  // cp/rsync size their I/O from this
  st.st_atim = {a.atime.sec, a.atime.nsec};
  st.st_mtim = {a.mtime.sec, a.mtime.nsec};
  st.st_ctim = {a.ctime.sec, a.ctime.nsec};
  return st;
}

// The longest the kernel may keep an answer, in seconds: under cache leases, what is left of the
// client's trust in them (Client::CacheTrustLeft). An entry the kernel kept longer could outlive a
// lease the server broke, or a server run that forgot it, and then no recall would reach it. The
// configured timeouts apply below it.
double KernelTimeoutCap(const Daemon& d) {
  if (!d.cache_leases) return std::numeric_limits<double>::infinity();
  return std::chrono::duration<double>(d.client->CacheTrustLeft()).count();
}

// `uncached`: a recall came while the answer was on its way (Daemon::recall_epoch); the kernel
// uses it once and asks again next time.
fuse_entry_param ToEntry(const Daemon& d, const Attributes& a, bool uncached = false) {
  fuse_entry_param e{};
  e.ino = a.inode.value();
  e.generation = a.generation;
  e.attr = ToStat(a);
  const double cap = uncached ? 0 : KernelTimeoutCap(d);
  e.attr_timeout = std::min(d.options.attr_timeout_s, cap);
  e.entry_timeout = std::min(d.options.entry_timeout_s, cap);
  return e;
}

// Replies with an entry and counts the lookup it hands to the kernel.
void ReplyEntry(fuse_req_t req, const Attributes& a, bool uncached = false) {
  Daemon& d = DaemonOf(req);
  fuse_entry_param e = ToEntry(d, a, uncached);
  d.inodes.AddLookup(a.inode, a);
  if (fuse_reply_entry(req, &e) != 0) d.inodes.Forget(a.inode, 1);  // the kernel never got it
}

void ReplyAttr(fuse_req_t req, const Attributes& a, bool uncached = false) {
  Daemon& d = DaemonOf(req);
  struct stat st = ToStat(a);
  d.inodes.NoteAttributes(a);
  const double cap = uncached ? 0 : KernelTimeoutCap(d);
  fuse_reply_attr(req, &st, std::min(d.options.attr_timeout_s, cap));
}

void ReplyStatus(fuse_req_t req, const Status& s, const char* op) {
  if (!s.ok()) return ReplyError(req, s, op);
  fuse_reply_err(req, 0);
}

void ReplyEntryResult(fuse_req_t req, const Result<Attributes>& a, const char* op) {
  if (!a.ok()) return ReplyError(req, a.status(), op);
  ReplyEntry(req, *a);
}

// ---------------------------------------------------------------------------------------------
// Session

void OnInit(void* userdata, fuse_conn_info* conn) {
  conn->max_write = kMaxIoBytes;  // libfuse sets FUSE_MAX_PAGES from this (256 pages)
  conn->max_read = kMaxIoBytes;   // equals the max_read= mount option
  conn->max_readahead = 4 << 20;  // the INIT reply caps the bdi window (main.cc raises it)
  conn->max_background = 64;      // async read-ahead requests in flight
  conn->congestion_threshold = 48;
  auto want = [conn](unsigned cap) {
    if (conn->capable & cap) conn->want |= cap;
  };
  want(FUSE_CAP_READDIRPLUS);
  want(FUSE_CAP_POSIX_LOCKS);
  want(FUSE_CAP_FLOCK_LOCKS);
  want(FUSE_CAP_DONT_MASK);
  want(FUSE_CAP_ATOMIC_O_TRUNC);
  want(FUSE_CAP_AUTO_INVAL_DATA);
  want(FUSE_CAP_ASYNC_READ);
  want(FUSE_CAP_PARALLEL_DIROPS);
  want(FUSE_CAP_CACHE_SYMLINKS);
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;  // write-through: close-to-open and the lease hold
  if (static_cast<Daemon*>(userdata)->options.transport != FuseTransport::kDev) {
    // Replies to ring requests go through the writer hook (fuse_uring.h); a spliced reply
    // would go around it.
    conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
  }
  Log().info("init fuse proto={}.{} max_write={} max_read={} want=0x{:x}", conn->proto_major,
             conn->proto_minor, conn->max_write, conn->max_read, conn->want);
}

void OnDestroy(void* userdata) { Log().info("destroy session"); }

// ---------------------------------------------------------------------------------------------
// Namespace

// Answers a LOOKUP (exactly once); `epoch` is the recall epoch when it arrived.
void LookupAnswer(fuse_req_t req, fuse_ino_t parent, const char* name, uint64_t epoch) {
  Daemon& d = DaemonOf(req);
  Result<Attributes> a = ClientOf(req).Lookup(InodeId(parent), name, CallerOf(req));
  if (!a.ok() && a.status().code() == Code::kNotFound && d.cache_leases &&
      d.recall_epoch.load() == epoch) {
    // A negative entry (inode 0): the kernel keeps "absent" for entry_timeout without asking
    // again. The answer was given under the parent's cache lease, so another host's create of
    // the name is recalled here (fuse_lowlevel_notify_inval_entry drops the negative dentry too)
    // before that create returns.
    fuse_entry_param e{};
    e.entry_timeout = std::min(d.options.entry_timeout_s, KernelTimeoutCap(d));
    if (e.entry_timeout > 0) {
      fuse_reply_entry(req, &e);
      return;
    }
  }
  if (!a.ok()) return ReplyError(req, a.status(), "lookup");
  d.stale_retries.LookedUp(static_cast<uint32_t>(fuse_req_ctx(req)->pid), a->inode.value());
  ReplyEntry(req, *a, d.recall_epoch.load() != epoch);
}

// After a reply that may have crossed recalls (the epoch moved since `epoch`), their
// notifications go to the kernel again once it has made what the reply described.
void ReplayRecallsAfter(Daemon& d, uint64_t epoch) {
  if (d.invalidator != nullptr && d.recall_epoch.load() != epoch) d.invalidator->Replay(epoch);
}

void OnLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Daemon& d = DaemonOf(req);
  // delay: a slow lookup of a name starting "failpoint-slow-lookup", which holds the kernel's
  // lock of `parent` (shared) meanwhile (tests/mount/recall_dir_lock_test.sh). Other names are
  // not slowed.
  if (std::string_view(name).starts_with("failpoint-slow-lookup")) {
    AQ_FAILPOINT("fuse.lookup.slow_name");
  }
  const uint64_t epoch = d.recall_epoch.load();
  LookupAnswer(req, parent, name, epoch);
  ReplayRecallsAfter(d, epoch);  // `req` is answered: only `d` may be used
}

void OnForget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  DaemonOf(req).inodes.Forget(InodeId(ino), nlookup);
  fuse_reply_none(req);
}

void OnForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  Daemon& d = DaemonOf(req);
  for (size_t i = 0; i < count; ++i) d.inodes.Forget(InodeId(forgets[i].ino), forgets[i].nlookup);
  fuse_reply_none(req);
}

void OnGetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Daemon& d = DaemonOf(req);
  const uint64_t epoch = d.recall_epoch.load();
  Result<Attributes> a = ClientOf(req).GetAttr(InodeId(ino));
  if (!a.ok()) return ReplyInodeError(req, a.status(), "getattr");
  ReplyAttr(req, *a, d.recall_epoch.load() != epoch);
}

void OnSetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
  DirChanges::Scope changing(DaemonOf(req).dir_changes, ino);  // the kernel holds ino's lock
  AttrChanges ch;
  if (to_set & FUSE_SET_ATTR_MODE) ch.mode = attr->st_mode & 07777;
  if (to_set & FUSE_SET_ATTR_UID) ch.uid = attr->st_uid;
  if (to_set & FUSE_SET_ATTR_GID) ch.gid = attr->st_gid;
  if (to_set & FUSE_SET_ATTR_SIZE) ch.size_bytes = static_cast<uint64_t>(attr->st_size);
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
    ch.atime_now = true;
  } else if (to_set & FUSE_SET_ATTR_ATIME) {
    ch.atime = Timestamp{attr->st_atim.tv_sec, static_cast<uint32_t>(attr->st_atim.tv_nsec)};
  }
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
    ch.mtime_now = true;
  } else if (to_set & FUSE_SET_ATTR_MTIME) {
    ch.mtime = Timestamp{attr->st_mtim.tv_sec, static_cast<uint32_t>(attr->st_mtim.tv_nsec)};
  }
  // FUSE_SET_ATTR_CTIME alone: the metadata server sets ctime on every change it applies.
  // Times on a file open for write here: the library commits its buffered writes first, with
  // the change in the same call (Client::SetAttr).
  Result<Attributes> a = ClientOf(req).SetAttr(InodeId(ino), ch, CallerOf(req, true));
  if (!a.ok()) return ReplyInodeError(req, a.status(), "setattr");
  ReplyAttr(req, *a);
}

void OnReadlink(fuse_req_t req, fuse_ino_t ino) {
  Result<std::string> target = ClientOf(req).Readlink(InodeId(ino));
  if (!target.ok()) return ReplyInodeError(req, target.status(), "readlink");
  fuse_reply_readlink(req, target->c_str());
}

void OnMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  DirChanges::Scope changing(DaemonOf(req).dir_changes, parent);
  mode_t m = (mode & S_IFMT) | (mode & 07777 & ~UmaskOf(req));
  ReplyEntryResult(req, ClientOf(req).Mknod(InodeId(parent), name, m, rdev, CallerOf(req, true)),
                   "mknod");
}

void OnMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  DirChanges::Scope changing(DaemonOf(req).dir_changes, parent);
  // delay: a slow mkdir of a name starting "failpoint-slow-mkdir", a change of this mount that
  // holds the kernel's lock of `parent` meanwhile (tests/mount/recall_dir_lock_test.sh).
  if (std::string_view(name).starts_with("failpoint-slow-mkdir")) {
    AQ_FAILPOINT("fuse.mkdir.slow_name");
  }
  mode_t m = S_IFDIR | (mode & 07777 & ~UmaskOf(req));
  ReplyEntryResult(req, ClientOf(req).Mkdir(InodeId(parent), name, m, CallerOf(req, true)),
                   "mkdir");
}

void OnSymlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  DirChanges::Scope changing(DaemonOf(req).dir_changes, parent);
  ReplyEntryResult(req, ClientOf(req).Symlink(InodeId(parent), name, link, CallerOf(req, true)),
                   "symlink");
}

void OnLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  DirChanges::Scope changing(DaemonOf(req).dir_changes, newparent);
  ReplyEntryResult(
      req, ClientOf(req).Link(InodeId(ino), InodeId(newparent), newname, CallerOf(req, true)),
      "link");
}

void OnUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  DirChanges::Scope changing(DaemonOf(req).dir_changes, parent);
  ReplyStatus(req, ClientOf(req).Unlink(InodeId(parent), name, CallerOf(req, true)), "unlink");
}

void OnRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  DirChanges::Scope changing(DaemonOf(req).dir_changes, parent);
  ReplyStatus(req, ClientOf(req).Rmdir(InodeId(parent), name, CallerOf(req, true)), "rmdir");
}

void OnRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
              const char* newname, unsigned int flags) {
  DirChanges::Scope changing(DaemonOf(req).dir_changes, parent, newparent);
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) {  // RENAME_WHITEOUT: overlayfs only
    return ReplyError(req, Status(Code::kInvalidArgument, "rename flags"), "rename");
  }
  ReplyStatus(req,
              ClientOf(req).Rename(InodeId(parent), name, InodeId(newparent), newname, flags,
                                   CallerOf(req, true)),
              "rename");
}

void OnStatFs(fuse_req_t req, fuse_ino_t ino) {
  Result<FsStats> s = ClientOf(req).StatFs();
  if (!s.ok()) return ReplyError(req, s.status(), "statfs");
  struct statvfs st {};
  st.f_bsize = kMaxIoBytes;  // preferred I/O size
  st.f_frsize = kStatfsBlockBytes;
  st.f_blocks = s->total_bytes / kStatfsBlockBytes;
  st.f_bfree = s->free_bytes / kStatfsBlockBytes;
  st.f_bavail = st.f_bfree;
  st.f_files = s->files + (uint64_t{1} << 32);  // no fixed inode table: report plenty free
  st.f_ffree = uint64_t{1} << 32;
  st.f_favail = st.f_ffree;
  st.f_namemax = kMaxNameBytes;
  fuse_reply_statfs(req, &st);
}

// ---------------------------------------------------------------------------------------------
// Extended attributes

// Replies with `value` under the getxattr/listxattr size protocol: size 0 asks for the length.
void ReplyXattrValue(fuse_req_t req, const std::string& value, size_t size) {
  if (size == 0) {
    fuse_reply_xattr(req, value.size());
  } else if (size < value.size()) {
    CountFuseError(ERANGE);
    fuse_reply_err(req, ERANGE);
  } else {
    fuse_reply_buf(req, value.data(), value.size());
  }
}

// POSIX ACLs are not supported (mode bits only). Without FUSE_CAP_POSIX_ACL the kernel passes
// system.posix_acl_* through as plain xattrs; storing them would let `cp -a` "set" a mode through
// an ACL that nothing applies, so they fail with EOPNOTSUPP and tools fall back to chmod.
bool IsPosixAcl(const char* name) { return std::strncmp(name, "system.posix_acl_", 17) == 0; }

void OnSetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
                int flags) {
  DirChanges::Scope changing(DaemonOf(req).dir_changes, ino);
  if (IsPosixAcl(name)) {
    CountFuseError(EOPNOTSUPP);
    fuse_reply_err(req, EOPNOTSUPP);
    return;
  }
  Status s = ClientOf(req).SetXattr(InodeId(ino), name, std::string_view(value, size), flags,
                                    CallerOf(req, true));
  if (!s.ok()) return ReplyInodeError(req, s, "setxattr");
  fuse_reply_err(req, 0);
}

void OnGetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  if (IsPosixAcl(name)) {
    CountFuseError(EOPNOTSUPP);
    fuse_reply_err(req, EOPNOTSUPP);
    return;
  }
  Result<std::string> v = ClientOf(req).GetXattr(InodeId(ino), name, CallerOf(req));
  if (!v.ok()) return ReplyInodeError(req, v.status(), "getxattr");
  ReplyXattrValue(req, *v, size);
}

void OnListXattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  Result<std::vector<std::string>> names = ClientOf(req).ListXattr(InodeId(ino), CallerOf(req));
  if (!names.ok()) return ReplyInodeError(req, names.status(), "listxattr");
  std::string packed;
  for (const std::string& n : *names) {
    packed += n;
    packed.push_back('\0');
  }
  ReplyXattrValue(req, packed, size);
}

void OnRemoveXattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  DirChanges::Scope changing(DaemonOf(req).dir_changes, ino);
  Status s = ClientOf(req).RemoveXattr(InodeId(ino), name, CallerOf(req, true));
  if (!s.ok()) return ReplyInodeError(req, s, "removexattr");
  fuse_reply_err(req, 0);
}

// ---------------------------------------------------------------------------------------------
// Files

// Fills fi for an opened file and replies (open or create). If the reply does not reach the
// kernel (request interrupted), RELEASE will never come: drop the reference (and the open file
// description) here.
void ReplyOpened(fuse_req_t req, SharedFile* sf, const Attributes& attr, fuse_file_info* fi,
                 bool create) {
  Daemon& d = DaemonOf(req);
  const InodeId inode = attr.inode;
  InodeTable::OpenDecision dec = d.inodes.RecordOpen(inode, attr);
  if (!create && dec.attrs_changed && d.session != nullptr) {
    // Close-to-open: the file changed since the kernel last heard of it (another client wrote
    // it). Drop the kernel's cached size/mtime so reads see the new end; keep_cache = 0 below
    // drops its pages. Attribute-only invalidation (offset < 0) takes no inode lock.
    fuse_lowlevel_notify_inval_inode(d.session, inode.value(), -1, 0);
  }
  auto* description = new OpenDescription(sf);
  fi->fh = reinterpret_cast<uint64_t>(description);
  fi->keep_cache = dec.keep_cache ? 1 : 0;
  // Page cache on (needed for shared writable mmap), except for O_APPEND writers: the kernel
  // places an append at the size it has cached, which is stale when another host appended since
  // (attributes last up to attr_timeout), so OnWrite appends at the library's end of file
  // instead, and the page cache must not keep the bytes at the kernel's offset. Not for a
  // set-id file opened by a non-root user: the kernel clears set-id bits on a write only on the
  // page-cache path (with direct I/O it leaves that to handle_killpriv_v2, which we do not use).
  const bool set_id = (attr.mode & S_ISUID) || ((attr.mode & S_ISGID) && (attr.mode & S_IXGRP));
  const bool append_writer = (fi->flags & O_ACCMODE) != O_RDONLY && (fi->flags & O_APPEND);
  fi->direct_io = (append_writer && !(set_id && fuse_req_ctx(req)->uid != 0)) ? 1 : 0;
  int rc;
  if (create) {
    fuse_entry_param e = ToEntry(d, attr);
    d.inodes.AddLookup(inode, attr);
    rc = fuse_reply_create(req, &e, fi);
    if (rc != 0) d.inodes.Forget(inode, 1);
  } else {
    rc = fuse_reply_open(req, fi);
  }
  if (rc != 0) {
    delete description;
    Status s = UnpinShared(d, sf);
    if (!s.ok()) Log().warn("release after failed open reply inode={} status={}", inode.value(),
                            s.ToString());
  }
}

// O_APPEND is not passed to the library: without writeback cache the kernel computes each
// append's offset from the inode size it maintains, and every descriptor shares one handle.
int LibraryFlags(int flags) { return flags & ~O_APPEND; }
bool WantsWrite(int flags) { return (flags & O_ACCMODE) != O_RDONLY; }

void OnOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Daemon& d = DaemonOf(req);
  const InodeId inode(ino);
  // Every open of the thread ends what an earlier ESTALE of it allowed (one retry).
  const auto tid = static_cast<uint32_t>(fuse_req_ctx(req)->pid);
  const bool stale_retry = d.stale_retries.IsFreshRetry(tid, ino, std::chrono::steady_clock::now());
  if (SharedFile* sf = PinShared(d, inode, WantsWrite(fi->flags))) {
    // Another descriptor of this mount has the file open: share its handle.
    Result<Attributes> a = (WantsWrite(fi->flags) && (fi->flags & O_TRUNC))
                               ? d.client->SetAttr(inode, AttrChanges{.size_bytes = 0},
                                                   CallerOf(req, true))
                               : d.client->GetAttr(inode);
    if (!a.ok()) {
      Status s = UnpinShared(d, sf);
      (void)s;
      return ReplyInodeError(req, a.status(), "open");
    }
    return ReplyOpened(req, sf, *a, fi, /*create=*/false);
  }
  Result<Client::Opened> o = d.client->Open(inode, LibraryFlags(fi->flags), CallerOf(req, true));
  if (!o.ok()) {
    if (o.status().code() == Code::kNotFound) {
      d.stale_retries.AnsweredStale(tid, ino, std::chrono::steady_clock::now());
      d.stale_opens.fetch_add(1, std::memory_order_relaxed);
    }
    return ReplyInodeError(req, o.status(), "open");
  }
  if (o->attr.nlink == 0 && !o->unlink_pending && !stale_retry) {
    // Unlinked and not open on this mount (PinShared found no handle): a name the kernel still
    // caches after another host replaced or removed it (and that change returned) leads here.
    // The inode lives on as an orphan while something (a close of this very mount, its release
    // still queued) holds it open, so the open would succeed and read the old file's bytes.
    // ESTALE makes the kernel look the name up again and retry once (as for an inode that is
    // gone). A reopen of an open unlinked file (/proc/PID/fd/N) has a handle here, so it gets in
    // above. Two cases are served instead, both opens concurrent with the change that unlinked
    // the inode (docs/design.md "A name replaced on another host"): unlink_pending (that change
    // has not returned on the other host yet), and the kernel's retry after an ESTALE of this
    // thread, of the inode its fresh lookup found (StaleRetries): a second ESTALE would reach
    // the application when the name was replaced twice within the retry.
    Status released = d.client->Release(std::move(o->file));
    (void)released;
    d.stale_retries.AnsweredStale(tid, ino, std::chrono::steady_clock::now());
    d.stale_opens.fetch_add(1, std::memory_order_relaxed);
    SPDLOG_LOGGER_DEBUG(&Log(), "open failed errno=ESTALE (unlinked, not open here) inode={}",
                        inode.value());
    CountFuseError(ESTALE);
    return (void)fuse_reply_err(req, ESTALE);
  }
  if (o->attr.nlink == 0) {
    (o->unlink_pending ? d.orphan_opens_pending : d.orphan_opens_retry)
        .fetch_add(1, std::memory_order_relaxed);
  }
  SharedFile* sf = AddShared(d, inode, std::move(o->file), WantsWrite(fi->flags));
  ReplyOpened(req, sf, o->attr, fi, /*create=*/false);
}

void OnCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
              fuse_file_info* fi) {
  Daemon& d = DaemonOf(req);
  DirChanges::Scope changing(d.dir_changes, parent);
  mode_t m = S_IFREG | (mode & 07777 & ~UmaskOf(req));
  Result<Client::Opened> o =
      d.client->Create(InodeId(parent), name, m, LibraryFlags(fi->flags), CallerOf(req, true));
  if (!o.ok()) return ReplyError(req, o.status(), "create");
  SharedFile* sf = AddShared(d, o->attr.inode, std::move(o->file), WantsWrite(fi->flags));
  ReplyOpened(req, sf, o->attr, fi, /*create=*/true);
}

// The reply is written to the kernel straight from the library's view (a cached stripe during
// sequential reads), without a copy into a buffer of our own first.
void OnRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  // The kernel names the reading process's lock owner (FUSE_READ_LOCKOWNER) only on O_DIRECT
  // requests (fs/fuse/file.c, fuse_send_read); page-cache reads carry none, also those it makes
  // to finish a short O_DIRECT read of an O_DIRECT descriptor.
  const Client::ReadFor reader = fi->lock_owner != 0 ? Client::ReadFor::kKernelDirect
                                                     : Client::ReadFor::kKernelPageCache;
  Result<Client::ReadView> view =
      ClientOf(req).ReadShared(FileOf(fi), static_cast<uint64_t>(off), size, reader);
  if (!view.ok()) return ReplyError(req, view.status(), "read");
  if (view->pieces.empty()) {  // at or past the end of the file
    fuse_reply_buf(req, nullptr, 0);
    return;
  }
  std::vector<iovec> iov;
  iov.reserve(view->pieces.size());
  uint64_t bytes = 0;
  for (const auto& piece : view->pieces) {
    iov.push_back({const_cast<std::byte*>(piece.data()), piece.size()});
    bytes += piece.size();
  }
  CountFuseBytes(FuseOp::kRead, bytes);
  fuse_reply_iov(req, iov.data(), static_cast<int>(iov.size()));
}

// fi->flags are the writing descriptor's open flags: an O_APPEND descriptor's write goes at the
// library's end of file, not at the kernel's offset (see ReplyOpened). The kernel drops its
// cached size after every write, so the next stat asks for the real one. A page-cache
// write-back (mmap) is never an append, whichever descriptor the kernel sends it through.
void OnWrite(fuse_req_t req, fuse_ino_t ino, const char* data, size_t size, off_t off,
             fuse_file_info* fi) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const bool append = (fi->flags & O_APPEND) != 0 && !fi->writepage;
  Result<size_t> n = append ? ClientOf(req).Append(FileOf(fi), bytes)
                            : ClientOf(req).Write(FileOf(fi), static_cast<uint64_t>(off), bytes);
  if (!n.ok()) return ReplyError(req, n.status(), "write");
  CountFuseBytes(FuseOp::kWrite, *n);
  fuse_reply_write(req, *n);
}

constexpr LockRange kWholeFileUnlock{.type = F_UNLCK, .start = 0, .end = UINT64_MAX, .pid = 0};

// Called at every close(2) of a descriptor, also by a process's exit (kill -9 included): writes
// buffered data and commits (close-to-open), and drops the POSIX locks of the closing owner (its
// process), whichever descriptor set them (the kernel leaves that to a file system that handles
// locks itself).
void OnFlush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Daemon& d = DaemonOf(req);
  SharedFile& sf = SharedOf(fi);
  Status s = d.client->Flush(*sf.current.load());
  if (d.inodes.HasPosixLocks(sf.inode)) {
    // The owner closed: its locks go even if the commit fails (close(2) reports that, from
    // the Flush above).
    Status u = d.client->SetLock(sf.inode, fi->lock_owner, kWholeFileUnlock, /*flock=*/false,
                                 /*wait=*/false, Client::OnCommitError::kUnlockAnyway);
    if (!u.ok()) Log().warn("unlock posix locks at close inode={} status={}", sf.inode.value(),
                            u.ToString());
    OpenDescription& od = DescriptionOf(fi);
    std::lock_guard lock(od.mu);
    std::erase(od.lock_owners, fi->lock_owner);
  }
  ReplyStatus(req, s, "flush");
}

// The last close of an open file description: frees its flock lock (the kernel names that
// owner) and the fcntl locks of the owners recorded on it (OFD locks; see OpenDescription).
void OnRelease(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Daemon& d = DaemonOf(req);
  OpenDescription* od = &DescriptionOf(fi);
  SharedFile* sf = od->shared;
  if (fi->flock_release) {
    Status u = d.client->SetLock(sf->inode, fi->lock_owner, kWholeFileUnlock, /*flock=*/true,
                                 /*wait=*/false, Client::OnCommitError::kUnlockAnyway);
    if (!u.ok()) Log().warn("unlock flock at release inode={} status={}", sf->inode.value(),
                            u.ToString());
  }
  // No lock request of this description can be in flight: each holds a reference to it.
  std::vector<uint64_t> owners;
  {
    std::lock_guard lock(od->mu);
    owners.swap(od->lock_owners);
  }
  for (uint64_t owner : owners) {
    Status u = d.client->SetLock(sf->inode, owner, kWholeFileUnlock, /*flock=*/false,
                                 /*wait=*/false, Client::OnCommitError::kUnlockAnyway);
    if (!u.ok()) Log().warn("unlock fcntl locks at release inode={} owner={:x} status={}",
                            sf->inode.value(), owner, u.ToString());
  }
  delete od;
  ReplyStatus(req, UnpinShared(d, sf), "release");
}

void OnFsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
  ReplyStatus(req, ClientOf(req).Fsync(FileOf(fi), datasync != 0), "fsync");
}

void OnFallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                 fuse_file_info* fi) {
  ReplyStatus(req,
              ClientOf(req).Fallocate(FileOf(fi), mode, static_cast<uint64_t>(offset),
                                      static_cast<uint64_t>(length)),
              "fallocate");
}

// ---------------------------------------------------------------------------------------------
// Directories

// A listing in progress. The kernel's offsets are ours: 1 after ".", 2 after "..", and i + 3
// after the i-th library entry, whose library cookie is cookies[i] (so seekdir/telldir work
// within one open directory). Entries fetched but not yet returned wait in `pending`.
struct DirHandle {
  std::mutex mu;                  // guards the fields below (readdir of one handle is serial anyway)
  std::vector<uint64_t> cookies;  // library cookie after entry i
  std::vector<DirEntry> pending;  // fetched entries following entry cookies.size() - 1
  uint64_t pending_epoch = 0;     // Daemon::recall_epoch before `pending` was asked for
  bool eof = false;               // the library has no entries after `pending`
};

void OnOpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  fi->fh = reinterpret_cast<uint64_t>(new DirHandle);
  fi->cache_readdir = 0;
  if (fuse_reply_open(req, fi) != 0) delete reinterpret_cast<DirHandle*>(fi->fh);
}

void OnReleaseDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  delete reinterpret_cast<DirHandle*>(fi->fh);
  fuse_reply_err(req, 0);
}

void OnFsyncDir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
  // Creates this mount made under an exclusive directory lease go out now, and the metadata
  // server makes its namespace durable on disk before the reply.
  ReplyStatus(req, ClientOf(req).SyncNamespace(), "fsyncdir");
}

// Adds one entry to `buf` at `used`; returns false when it does not fit. With plus, an entry
// with attributes counts one kernel lookup.
bool AddDirEntry(fuse_req_t req, bool plus, std::vector<char>& buf, size_t& used,
                 const char* name, const struct stat& st, const Attributes* attr, off_t next,
                 bool uncached = false) {
  const size_t room = buf.size() - used;
  size_t need;
  if (plus) {
    Daemon& d = DaemonOf(req);
    fuse_entry_param e{};
    if (attr != nullptr) {
      e = ToEntry(d, *attr, uncached);
    } else {
      e.attr = st;  // no attributes: ino 0 tells the kernel not to instantiate the entry
    }
    need = fuse_add_direntry_plus(req, buf.data() + used, room, name, &e, next);
    if (need > room) return false;
    if (attr != nullptr) d.inodes.AddLookup(attr->inode, *attr);
  } else {
    need = fuse_add_direntry(req, buf.data() + used, room, name, &st, next);
    if (need > room) return false;
  }
  used += need;
  return true;
}

// Fills `buf` with entries from offset `off`; returns the bytes used. Errors: the library's, or
// kInvalidArgument for an offset this handle never returned. An error after some entries were
// added is dropped (the entries go out; the next call meets the error again).
Result<size_t> FillDirBuffer(fuse_req_t req, fuse_ino_t ino, off_t off, bool plus, DirHandle& dh,
                             std::vector<char>& buf) {
  size_t used = 0;
  if (off < 0) return InvalidArgument("negative directory offset");
  if (off < 2) {
    struct stat st {};
    st.st_mode = S_IFDIR;
    if (off == 0) {
      st.st_ino = ino;
      if (!AddDirEntry(req, plus, buf, used, ".", st, nullptr, 1)) return used;
    }
    st.st_ino = kUnknownIno;
    if (!AddDirEntry(req, plus, buf, used, "..", st, nullptr, 2)) return used;
    off = 2;
  }
  const size_t index = static_cast<size_t>(off) - 2;  // library entries already returned
  if (index > dh.cookies.size()) return InvalidArgument("directory offset from another handle");
  if (index < dh.cookies.size()) {  // seekdir backwards (or rewind): refetch from there
    dh.cookies.resize(index);
    dh.pending.clear();
    dh.eof = false;
  }
  const uint32_t max_entries =
      static_cast<uint32_t>(std::max<size_t>(8, buf.size() / (plus ? 160 : 32)));
  while (true) {
    if (dh.pending.empty()) {
      if (dh.eof) break;
      const uint64_t cookie = dh.cookies.empty() ? 0 : dh.cookies.back();
      dh.pending_epoch = DaemonOf(req).recall_epoch.load();
      Result<DirPage> page =
          ClientOf(req).ReadDir(InodeId(ino), cookie, max_entries, plus, CallerOf(req));
      if (!page.ok()) {
        if (used > 0) break;
        return page.status();
      }
      dh.pending = std::move(page->entries);
      std::reverse(dh.pending.begin(), dh.pending.end());  // consumed from the back
      dh.eof = page->eof || dh.pending.empty();
      if (dh.pending.empty()) break;
    }
    const DirEntry& e = dh.pending.back();
    struct stat st {};
    st.st_ino = e.inode.value();
    st.st_mode = e.mode;
    const off_t next = static_cast<off_t>(dh.cookies.size() + 3);
    if (!AddDirEntry(req, plus, buf, used, e.name.c_str(), st,
                     e.attr.has_value() ? &*e.attr : nullptr, next,
                     DaemonOf(req).recall_epoch.load() != dh.pending_epoch)) {
      break;
    }
    dh.cookies.push_back(e.cookie);
    dh.pending.pop_back();
  }
  return used;
}

void ReadDirCommon(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi,
                   bool plus) {
  auto& dh = *reinterpret_cast<DirHandle*>(fi->fh);
  Daemon& d = DaemonOf(req);
  std::vector<char> buf(size);
  Result<size_t> used = InvalidArgument("unset");
  uint64_t epoch = 0;  // the recall epoch before the oldest page this reply draws on was asked
  {
    // Unlocked before the reply: once the kernel has the reply, RELEASEDIR may free `dh`.
    std::lock_guard lock(dh.mu);
    epoch = dh.pending.empty() ? d.recall_epoch.load() : dh.pending_epoch;
    used = FillDirBuffer(req, ino, off, plus, dh, buf);
  }
  if (!used.ok()) return ReplyError(req, used.status(), plus ? "readdirplus" : "readdir");
  fuse_reply_buf(req, buf.data(), *used);
  if (plus) ReplayRecallsAfter(d, epoch);  // the kernel makes the entries' inodes and dentries
}

void OnReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  ReadDirCommon(req, ino, size, off, fi, /*plus=*/false);
}

void OnReadDirPlus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  ReadDirCommon(req, ino, size, off, fi, /*plus=*/true);
}

// ---------------------------------------------------------------------------------------------
// Locks. Every request is tried once here; a blocking one (F_SETLKW, F_OFD_SETLKW, flock without
// LOCK_NB) that meets a conflicting lock is then parked in the mount's LockWaiters, which retries
// it off the worker threads and ends the wait with EINTR when the waiting process gets a signal
// (FUSE_INTERRUPT), kill -9 included. The kernel names the owner: for a POSIX lock the process
// (its files_struct), for an OFD or flock lock the open file description.

LockRange ToLockRange(const struct flock& l, uint32_t pid) {
  LockRange r;
  r.type = l.l_type;
  r.start = static_cast<uint64_t>(l.l_start);
  r.end = l.l_len == 0 ? UINT64_MAX : static_cast<uint64_t>(l.l_start + l.l_len - 1);
  r.pid = pid;
  return r;
}

// Replies to the lock request, or parks it (blocking, and a conflicting lock is held).
void SetLockOrWait(fuse_req_t req, InodeId inode, uint64_t owner, const LockRange& range,
                   bool flock, bool wait, const char* op) {
  Daemon& d = DaemonOf(req);
  Status s = d.client->SetLock(inode, owner, range, flock, /*wait=*/false);
  if (wait && s.code() == Code::kWouldBlock) {
    d.lock_waiters->Park(req, inode, owner, range, flock);  // it replies from now on
    return;
  }
  ReplyStatus(req, s, op);
}

void OnGetLk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock) {
  Result<LockRange> r = ClientOf(req).GetLock(
      InodeId(ino), fi->lock_owner, ToLockRange(*lock, static_cast<uint32_t>(fuse_req_ctx(req)->pid)));
  if (!r.ok()) return ReplyError(req, r.status(), "getlk");
  struct flock out = *lock;
  out.l_type = static_cast<short>(r->type);
  if (r->type != F_UNLCK) {
    out.l_whence = SEEK_SET;
    out.l_start = static_cast<off_t>(r->start);
    // A range ending at the largest offset is "to end of file" too (its length overflows off_t).
    out.l_len = r->end >= kMaxFileBytes ? 0 : static_cast<off_t>(r->end - r->start + 1);
    out.l_pid = static_cast<pid_t>(r->pid);
  }
  fuse_reply_lock(req, &out);
}

void OnSetLk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock, int sleep) {
  DaemonOf(req).inodes.NotePosixLocks(InodeId(ino));
  if (lock->l_type != F_UNLCK) {
    // Before the lock can be granted, so that the description's RELEASE always sees the owner.
    OpenDescription& od = DescriptionOf(fi);
    std::lock_guard guard(od.mu);
    if (std::find(od.lock_owners.begin(), od.lock_owners.end(), fi->lock_owner) ==
        od.lock_owners.end()) {
      od.lock_owners.push_back(fi->lock_owner);
    }
  }
  LockRange range = ToLockRange(*lock, static_cast<uint32_t>(fuse_req_ctx(req)->pid));
  SetLockOrWait(req, InodeId(ino), fi->lock_owner, range, /*flock=*/false, sleep != 0, "setlk");
}

void OnFlock(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, int op) {
  LockRange range;
  range.type = (op & LOCK_UN) ? F_UNLCK : (op & LOCK_EX) ? F_WRLCK : F_RDLCK;
  range.pid = static_cast<uint32_t>(fuse_req_ctx(req)->pid);
  SetLockOrWait(req, InodeId(ino), fi->lock_owner, range, /*flock=*/true,
                (op & LOCK_NB) == 0 && range.type != F_UNLCK, "flock");
}

// A handler wrapped so that /metrics counts its requests and times it (fuse_metrics.h).
template <FuseOp Op, auto Fn>
struct Timed;
template <FuseOp Op, class... Args, void (*Fn)(Args...)>
struct Timed<Op, Fn> {
  static void Call(Args... args) {
    FuseOpTimer timer(Op);
    Fn(args...);
  }
};

fuse_lowlevel_ops MakeOperations() {
  fuse_lowlevel_ops ops{};
  ops.init = OnInit;
  ops.destroy = OnDestroy;
  ops.lookup = Timed<FuseOp::kLookup, OnLookup>::Call;
  ops.forget = Timed<FuseOp::kForget, OnForget>::Call;
  ops.forget_multi = Timed<FuseOp::kForget, OnForgetMulti>::Call;
  ops.getattr = Timed<FuseOp::kGetAttr, OnGetAttr>::Call;
  ops.setattr = Timed<FuseOp::kSetAttr, OnSetAttr>::Call;
  ops.readlink = Timed<FuseOp::kReadlink, OnReadlink>::Call;
  ops.mknod = Timed<FuseOp::kMknod, OnMknod>::Call;
  ops.mkdir = Timed<FuseOp::kMkdir, OnMkdir>::Call;
  ops.unlink = Timed<FuseOp::kUnlink, OnUnlink>::Call;
  ops.rmdir = Timed<FuseOp::kRmdir, OnRmdir>::Call;
  ops.symlink = Timed<FuseOp::kSymlink, OnSymlink>::Call;
  ops.rename = Timed<FuseOp::kRename, OnRename>::Call;
  ops.link = Timed<FuseOp::kLink, OnLink>::Call;
  ops.open = Timed<FuseOp::kOpen, OnOpen>::Call;
  ops.read = Timed<FuseOp::kRead, OnRead>::Call;
  ops.write = Timed<FuseOp::kWrite, OnWrite>::Call;
  ops.flush = Timed<FuseOp::kFlush, OnFlush>::Call;
  ops.release = Timed<FuseOp::kRelease, OnRelease>::Call;
  ops.fsync = Timed<FuseOp::kFsync, OnFsync>::Call;
  ops.opendir = Timed<FuseOp::kOpenDir, OnOpenDir>::Call;
  ops.readdir = Timed<FuseOp::kReadDir, OnReadDir>::Call;
  ops.readdirplus = Timed<FuseOp::kReadDirPlus, OnReadDirPlus>::Call;
  ops.releasedir = Timed<FuseOp::kReleaseDir, OnReleaseDir>::Call;
  ops.fsyncdir = Timed<FuseOp::kFsyncDir, OnFsyncDir>::Call;
  ops.statfs = Timed<FuseOp::kStatFs, OnStatFs>::Call;
  ops.setxattr = Timed<FuseOp::kSetXattr, OnSetXattr>::Call;
  ops.getxattr = Timed<FuseOp::kGetXattr, OnGetXattr>::Call;
  ops.listxattr = Timed<FuseOp::kListXattr, OnListXattr>::Call;
  ops.removexattr = Timed<FuseOp::kRemoveXattr, OnRemoveXattr>::Call;
  ops.create = Timed<FuseOp::kCreate, OnCreate>::Call;
  ops.getlk = Timed<FuseOp::kGetLk, OnGetLk>::Call;
  ops.setlk = Timed<FuseOp::kSetLk, OnSetLk>::Call;
  ops.flock = Timed<FuseOp::kFlock, OnFlock>::Call;
  ops.fallocate = Timed<FuseOp::kFallocate, OnFallocate>::Call;
  return ops;
}

}  // namespace

const fuse_lowlevel_ops& Operations() {
  static const fuse_lowlevel_ops ops = MakeOperations();
  return ops;
}

int ReleaseAllOpenFiles(Daemon& d) {
  std::vector<SharedFile*> left;
  {
    std::lock_guard lock(d.open_mu);
    for (auto& [inode, sf] : d.open_files) {
      sf->refs = 1;  // the kernel is gone: only this release remains
      left.push_back(sf);
    }
  }
  int failed = 0;
  for (SharedFile* sf : left) {
    const InodeId inode = sf->inode;
    Status s = UnpinShared(d, sf);
    if (!s.ok()) {
      ++failed;
      Log().error("release open file at exit inode={} status={}", inode.value(), s.ToString());
    }
  }
  if (!left.empty()) Log().info("released open files at exit count={} failed={}", left.size(), failed);
  return failed;
}

}  // namespace aquifer::fuse
