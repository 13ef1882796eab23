// Aquifer's client library: the file-system API that the FUSE daemon, tests, benchmarks and a
// future native (zero-copy) API share. It talks to aquifer-meta for the namespace and to the data
// servers for chunks; it computes placement itself from the placement-group table.
//
// Threading: every method of Client is safe to call from many threads at once. An OpenFile may be
// used by several threads at once (FUSE sends concurrent reads); writes to one OpenFile are
// serialized inside the library.
// Errors: every method returns a Status whose code maps to errno with ToErrno() (status.h).
// kUnavailable means the metadata server or too many data servers could not be reached.
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aquifer/ids.h"
#include "aquifer/status.h"
#include "aquifer/stripe_map.h"
#include "aquifer/units.h"

namespace aquifer {

// A point in time: seconds and nanoseconds since the Unix epoch.
struct Timestamp {
  int64_t sec = 0;
  uint32_t nsec = 0;  // 0..999,999,999
  auto operator<=>(const Timestamp&) const = default;
};

// Who makes a request; the FUSE layer fills it from fuse_req_ctx and fuse_req_getgroups.
struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  // supplementary groups
  uint32_t pid = 0;
};

// How a file's bytes map onto servers (see docs/design.md, "Layout and placement").
struct Layout {
  uint32_t k = 0;              // data units per stripe, 1..16
  uint32_t m = 0;              // parity units per stripe, 1..4
  uint32_t unit_bytes = 0;     // stripe unit, bytes
  uint32_t pg_start = 0;       // first placement group of the file in the table of width k + m
  uint32_t pg_count = 0;       // placement groups the file spans
  uint64_t stripe_bytes() const { return uint64_t{k} * unit_bytes; }
};

// An inode's attributes, as stat(2) shows them.
struct Attributes {
  InodeId inode;
  uint64_t generation = 0;
  uint32_t mode = 0;           // S_IFMT type bits and permission bits
  uint32_t nlink = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size_bytes = 0;     // for an open file with unflushed writes on this client: the local size
  uint64_t rdev = 0;
  uint64_t blocks = 0;         // 512-byte blocks
  Timestamp atime, mtime, ctime;
  Layout layout;               // regular files only
  uint64_t data_version = 0;   // committed chunk version (regular files)
  // Regular files: which stripes were written, and their truncate floors (null: unknown, as
  // from a server without stripe maps). Shared, never changed after it is made.
  std::shared_ptr<const StripeMap> stripes;
  uint64_t truncate_floor = 0;  // the floor a stripe written anew gets at the next commit
  VersionRanges abandoned_versions;  // versions never committed by a crashed writer (usually none)
};

// Which attributes SetAttr changes; unset fields stay as they are.
struct AttrChanges {
  std::optional<uint32_t> mode;       // permission bits (type bits ignored)
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::optional<uint64_t> size_bytes; // truncate or extend; holes read as zeros
  std::optional<Timestamp> atime;
  std::optional<Timestamp> mtime;
  bool atime_now = false;             // set atime to the server's clock (UTIME_NOW)
  bool mtime_now = false;
};

// One directory entry. `cookie` resumes a listing after this entry.
struct DirEntry {
  std::string name;
  InodeId inode;
  uint32_t mode = 0;                  // type bits at least
  uint64_t cookie = 0;
  std::optional<Attributes> attr;     // set when listed with plus = true
};

struct DirPage {
  std::vector<DirEntry> entries;
  bool eof = false;                   // no entries after the last one
};

// File-system totals for statfs(2), in bytes of usable space (after parity overhead).
struct FsStats {
  uint64_t total_bytes = 0;           // after the parity overhead of the cluster's default layout
  uint64_t free_bytes = 0;            // likewise
  uint64_t files = 0;                 // inodes in use
  uint64_t raw_free_bytes = 0;        // free on the up data servers, before any parity overhead
};

// What the client has done since it connected, for /metrics (docs/metrics.md). Counters only
// grow.
struct ClientCounters {
  uint64_t meta_calls = 0;           // metadata calls sent (a retried call counts once)
  uint64_t lookups_answered_absent = 0;  // lookups answered "no such name" from a complete
                                         // name list held under a cache lease (no call)
  uint64_t lookups_answered_found = 0;   // lookups answered from kept attributes (no call)
  uint64_t getattrs_answered = 0;        // getattrs answered from kept attributes (no call)
  uint64_t dir_listings = 0;         // directory name lists fetched to answer lookups
  uint64_t creates_local = 0;        // creates answered under an exclusive directory lease
  uint64_t change_batches = 0;       // ChangeBatch calls that sent them
  uint64_t chunk_reads = 0;          // chunk read RPCs sent
  // Stripe reads decoded from other chunks, by cause: unavailable, checksum, missing_chunk,
  // stale_version, other (in this order; DegradedCauseNames gives the names).
  std::array<uint64_t, 5> degraded_reads_by_cause{};
  uint64_t lost_stripe_reads = 0;    // reads of stripes with fewer than k chunks left (EIO)
};
// "unavailable", "checksum", "missing_chunk", "stale_version", "other".
const std::array<const char*, 5>& DegradedCauseNames();

// A POSIX record lock (fcntl) or flock range. Bytes [start, end], end inclusive;
// end == UINT64_MAX means to the end of the file.
struct LockRange {
  int type = 0;                       // F_RDLCK, F_WRLCK or F_UNLCK (<fcntl.h> values)
  uint64_t start = 0;
  uint64_t end = UINT64_MAX;
  uint32_t pid = 0;
};

// Options of the client library. Defaults suit one FUSE mount on a GPU host.
struct ClientOptions {
  std::string meta_address;                          // host:port of aquifer-meta (required)
  std::string client_name = "aquifer-client";        // shown in the metadata server's logs
  uint64_t max_dirty_bytes_per_file = 64 * kMiB;     // buffered, unwritten bytes per open file
  uint64_t max_dirty_bytes_total = 512 * kMiB;       // across all open files of this client
  uint64_t read_cache_bytes = 256 * kMiB;            // cached stripes for read-ahead and small reads
  uint32_t readahead_stripes = 4;                    // stripes fetched ahead of a sequential reader
  std::chrono::milliseconds chunk_timeout{3000};     // a chunk read slower than this goes degraded
  std::chrono::milliseconds rpc_timeout{15000};      // deadline of one metadata RPC
  // How long a metadata call waits out an unreachable (restarting) metadata server, sending
  // itself again, before it fails with kUnavailable (docs/design.md "Metadata server
  // restarts"); each attempt still has rpc_timeout. 0: rpc_timeout. See NewGrpcMetaClient.
  std::chrono::milliseconds meta_outage_wait{120000};
  // How long a directory's attributes, as the last metadata reply about it gave them (namespace
  // changes return their directories' new attributes), answer GetAttr without a round trip.
  // 0 = always ask. The mount sets attr_timeout / 2, so an answer is at most 1.5 x attr_timeout
  // old when the kernel's cache of it ends, as with the kernel's own attribute cache. The same
  // bound applies to extended attributes known to be absent (the kernel asks for
  // security.capability before every write(2)); see NewGrpcMetaClient.
  std::chrono::milliseconds attr_cache_ttl{0};
  std::chrono::milliseconds lease_wait{30000};       // how long an open for write waits for a lease
  // How long a read view that a shorter one replaced (a truncate, here or on another host) still
  // answers page-cache reads past the new end (ReadShared). The mount sets attr_timeout + 1 s:
  // the kernel asks for a file's size again once its attributes are attr_timeout old. 0: never.
  std::chrono::milliseconds replaced_view_keep{0};
  // Called on the thread that took an fcntl or flock lock (Client::SetLock), before SetLock
  // returns, when the file changed on another client since this client's handles last looked:
  // the mount drops the kernel's cached pages and attributes of it, so the lock holder reads
  // what the previous holder wrote (as NFS revalidates its cache at a lock). Must not call back
  // into the Client's lock methods. Null: nothing.
  std::function<void(InodeId)> on_changed_at_lock;
  // Cache leases (docs/design.md "Cache leases"): when true and the metadata server offers them,
  // this client's lookups, getattrs and readdirs make its session a holder, and a change by
  // another host is recalled to it before that change's call returns there: the client drops
  // what it cached of it and calls on_attrs_recalled(inode) for each inode whose attributes
  // changed (or that is gone) and on_name_recalled(parent, name) for each name that changed,
  // then acknowledges. Both run on the recall thread and must return promptly (a change on
  // another host waits for them; the mount bounds its kernel call). Null: nothing to call.
  bool cache_leases = false;
  // Opens without a round trip (docs/design.md "Opens without a round trip"): with cache leases
  // on, a read-only open of a regular file whose attributes this client keeps under the lease
  // is answered from them; the metadata server learns of the open only when it recalls the
  // inode (another host changes or deletes it), when this client itself unlinks, renames or
  // truncates, or when the server restarts. An open and close that meet none of these cost no
  // metadata call.
  bool lazy_opens = true;
  // Namespace changes without a round trip (docs/design.md "Exclusive directory leases"): with
  // cache leases on, the client asks for the exclusive lease on a directory it changes and,
  // while it holds it, answers creates and mkdirs of names it knows are free (inode numbers from
  // a range the server reserved) and unlinks and renames of one-link files it keeps attributes
  // of itself, and sends those changes in ordered batches: 2 ms after the first, before any
  // other metadata call of this client, at an fsync, and when another host's call recalls the
  // lease. Not on credential mounts.
  bool dir_leases = false;
  std::function<void(InodeId)> on_attrs_recalled;
  std::function<void(InodeId parent, const std::string& name)> on_name_recalled;
  uint32_t io_threads = 8;                           // threads doing parallel chunk I/O
  // Chunk reads and writes go over the chunk wire (docs/design.md "The chunk wire") to data
  // servers that serve it; false: every call over gRPC.
  bool data_wire = true;
  // Metadata calls go over the metadata wire (docs/design.md "The metadata wire") when the
  // server serves it; false: every call over gRPC.
  bool meta_wire = true;
};

// An open file: created by Client::Open or Client::Create, ended by Client::Release.
// Opaque; holds the write buffer, the write version and read-ahead state.
class OpenFile;

}  // namespace aquifer

// OpenFile is opaque, so std::unique_ptr<OpenFile> deletes through this out-of-line deleter
// (defined in the library); callers never need OpenFile's definition.
template <>
struct std::default_delete<aquifer::OpenFile> {
  void operator()(aquifer::OpenFile* file) const;
};

namespace aquifer {

class Client {
 public:
  // Connects to aquifer-meta at options.meta_address, opens a session (kept alive in the
  // background) and fetches the cluster map. Errors: kInvalidArgument for bad options;
  // kUnavailable when the metadata server cannot be reached within options.rpc_timeout.
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options);

  // Flushes nothing (Release every OpenFile first); closes the session.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // True when this client caches under cache leases (options.cache_leases and a server that
  // grants them): the metadata server then recalls what it caches, names found absent included,
  // before another session's change of them returns. Fixed after Connect. Thread-safe.
  bool CachesUnderLeases() const;
  // How much longer what this client answered under cache leases stays trusted: a kernel
  // caching those answers must not keep them longer (a lease the server broke, a server run
  // that forgot it). duration::max() when not CachesUnderLeases(). Thread-safe.
  std::chrono::steady_clock::duration CacheTrustLeft() const;

  // --- namespace -------------------------------------------------------------------------
  // `name` is one path component: 1..255 bytes, no '/' or NUL, not "." or "..".
  // Errors: kNotFound, kNotDirectory, kNameTooLong, kInvalidArgument, kPermissionDenied.
  Result<Attributes> Lookup(InodeId parent, std::string_view name, const Caller& caller);
  // Errors: kNotFound (also kStale for a deleted inode).
  Result<Attributes> GetAttr(InodeId inode);
  // Changes attributes. A size change on a regular file first writes or discards this client's
  // buffered data and rewrites the stripe the new end falls in, so bytes past the new size read as
  // zeros after a later extension. A change of times on a file this client holds open for write
  // first commits its buffered writes (a later commit would set mtime again), carrying the whole
  // change in that one Commit call. Errors: as Lookup, plus kNotPermitted, kIsDirectory (size on
  // a dir), kFileTooLarge (size past kMaxFileBytes, 2^63 - 1; refused before any I/O).
  Result<Attributes> SetAttr(InodeId inode, const AttrChanges& changes, const Caller& caller);
  // `mode` carries type bits (S_IFDIR implied for Mkdir) and permissions with umask applied.
  Result<Attributes> Mkdir(InodeId parent, std::string_view name, uint32_t mode,
                           const Caller& caller);
  // Creates a FIFO, socket, device or empty regular file. Errors: kAlreadyExists, ...
  Result<Attributes> Mknod(InodeId parent, std::string_view name, uint32_t mode, uint64_t rdev,
                           const Caller& caller);
  Result<Attributes> Symlink(InodeId parent, std::string_view name, std::string_view target,
                             const Caller& caller);
  // Errors: kNotPermitted for a directory, kAlreadyExists, kTooManyLinks.
  Result<Attributes> Link(InodeId inode, InodeId new_parent, std::string_view new_name,
                          const Caller& caller);
  // An unlinked file that is still open stays readable until its last Release.
  Status Unlink(InodeId parent, std::string_view name, const Caller& caller);
  // Errors: kNotEmpty, kNotDirectory.
  Status Rmdir(InodeId parent, std::string_view name, const Caller& caller);
  // `flags`: 0, RENAME_NOREPLACE (1) or RENAME_EXCHANGE (2). Errors: kAlreadyExists (NOREPLACE),
  // kInvalidArgument (a directory into its own subtree), kNotEmpty, kIsDirectory, kNotDirectory.
  Status Rename(InodeId parent, std::string_view name, InodeId new_parent,
                std::string_view new_name, uint32_t flags, const Caller& caller);
  Result<std::string> Readlink(InodeId inode);
  // Lists up to `max_entries` entries after `cookie` (0 = from the start), without "." and "..";
  // with plus = true each entry carries its attributes (readdirplus).
  Result<DirPage> ReadDir(InodeId dir, uint64_t cookie, uint32_t max_entries, bool plus,
                          const Caller& caller);
  // Extended attributes. Values are raw bytes. "aquifer.layout" is virtual: the layout as text
  // "k=4 m=2 unit=1048576" (settable on directories, and on empty files).
  // Errors: kNoData (no such attribute), kAlreadyExists/kNoData for XATTR_CREATE/XATTR_REPLACE.
  Result<std::string> GetXattr(InodeId inode, std::string_view name, const Caller& caller);
  Status SetXattr(InodeId inode, std::string_view name, std::string_view value, int flags,
                  const Caller& caller);
  Result<std::vector<std::string>> ListXattr(InodeId inode, const Caller& caller);
  Status RemoveXattr(InodeId inode, std::string_view name, const Caller& caller);
  Result<FsStats> StatFs();
  // This client's counters (ClientCounters). Thread-safe, lock-free.
  ClientCounters Counters() const;

  // --- files -----------------------------------------------------------------------------
  // `flags` are open(2) flags; O_TRUNC truncates, O_APPEND makes every Write append at the
  // current size. Opening for write takes the file's write lease, waiting up to
  // options.lease_wait while another client holds it (then kWouldBlock); the holder is asked to
  // give it back (a recall: it commits what it buffered), and takes it again at its next write,
  // truncate or fallocate, waiting the same way (docs/design.md "Write-lease recall").
  // Returns the file's attributes at open (for the kernel's keep_cache decision) and the handle.
  // attr.nlink 0 means another client unlinked the file (or replaced its name) since this
  // client named it; `unlink_pending` then says that change has not returned to its caller yet
  // (the metadata server still waits for this client's acknowledgement), so the open ran
  // concurrently with it and may be served; otherwise the name was stale (the mount answers
  // ESTALE and its kernel looks the name up again).
  struct Opened {
    Attributes attr;
    std::unique_ptr<OpenFile> file;
    bool unlink_pending = false;
  };
  Result<Opened> Open(InodeId inode, int flags, const Caller& caller);
  // Creates and opens a regular file in one metadata round trip. O_EXCL gives kAlreadyExists.
  Result<Opened> Create(InodeId parent, std::string_view name, uint32_t mode, int flags,
                        const Caller& caller);
  // Reads up to out.size() bytes at `offset_bytes` into `out`; returns bytes read (short only at
  // end of file; holes read as zeros). Sees this client's own buffered writes. With up to m
  // targets of a stripe down, slow or corrupt, decodes from the others (degraded read).
  // A read-only handle whose view is out of date (a stripe written again by another client and
  // the view's version pruned on the data servers) takes a fresh view and reads again: it returns
  // the newer bytes, never zeros for them (kStale if that keeps happening 4 times).
  // Errors: kUnavailable when more than m chunks of a needed stripe cannot be read.
  Result<size_t> Read(OpenFile& file, uint64_t offset_bytes, std::span<std::byte> out);
  // The same bytes as Read(file, offset_bytes, a buffer of size_bytes), as a view: `pieces`, in
  // order, are the bytes read (short only at end of file), in memory that `keep` holds alive.
  // When the range lies inside one stripe of the read cache (sequential reads, after
  // read-ahead) the pieces are the cached stripe's own bytes, which are usually the data
  // servers' replies as they arrived, so the caller (the mount's reply to the kernel, one iovec
  // per piece) makes the only copy in the client; otherwise one piece, a buffer Read filled.
  // At most kMaxViewPieces pieces. Errors: as Read.
  static constexpr size_t kMaxViewPieces = 256;
  struct ReadView {
    std::shared_ptr<const void> keep;
    std::vector<std::span<const std::byte>> pieces;
    uint64_t size() const;  // bytes in all pieces
  };
  // Who asks: a program through the library, or a mount's kernel. A kernel read past the end
  // of a view that a truncate just shortened, which the kernel can only send while it still
  // holds the longer size, is answered from the longer view for up to
  // options.replaced_view_keep (docs/design.md "Reads that race a truncate"): the kernel would
  // zero-fill a short answer and may keep the zeros as file data. For a page-cache read that is
  // one ending past the page of the current end; for an O_DIRECT one (whose short answer the
  // kernel finishes through the page cache, mm/filemap.c generic_file_read_iter), one starting
  // there, since the kernel rounds an O_DIRECT request up past the size it holds.
  enum class ReadFor : uint8_t { kCaller, kKernelPageCache, kKernelDirect };
  Result<ReadView> ReadShared(OpenFile& file, uint64_t offset_bytes, uint64_t size_bytes,
                              ReadFor reader = ReadFor::kCaller);
  // Bytes of stripes the read cache holds now (at most options.read_cache_bytes). A sequential
  // reader keeps only a window of about readahead_stripes + 2 stripes of its file there.
  uint64_t ReadCacheBytes() const;
  // Buffers `data` at `offset_bytes` (ignored with O_APPEND); full stripes are encoded and written
  // as they fill. Returns bytes accepted (all of them). Errors: kNoSpace, kUnavailable (fewer than
  // k targets reachable), kInvalidArgument (offset + size overflows), kFileTooLarge (it would end
  // past kMaxFileBytes, 2^63 - 1; nothing is buffered), kPermissionDenied (not open for write).
  Result<size_t> Write(OpenFile& file, uint64_t offset_bytes, std::span<const std::byte> data);
  // Buffers `data` at the file's end as this client knows it (the committed size at open plus
  // this client's writes; authoritative while it holds the write lease), whatever the handle's
  // flags: a write of an O_APPEND descriptor whose caller's idea of the size may be stale (a
  // kernel's cached size after another host appended). Returns bytes accepted. Errors: as Write.
  Result<size_t> Append(OpenFile& file, std::span<const std::byte> data);
  // Writes all buffered data and commits size and mtime (close-to-open: a later Open anywhere
  // sees it). Called on every close(2) of a descriptor.
  Status Flush(OpenFile& file);
  // As Flush, durably: data chunks are fdatasync'ed on the data servers and the commit synced on
  // the metadata server before return.
  Status Fsync(OpenFile& file, bool datasync);
  // fsync of a directory, and what syncfs would ask: every namespace change this client made
  // (the batched ones included) is durable on the metadata server's disk on return. Errors:
  // kUnavailable (the metadata server did not answer within meta_wait), or the first batched
  // change the server refused since the last call (kStale for a broken lease, kAlreadyExists,
  // kNotFound...), reported once.
  Status SyncNamespace();
  // Allocates [offset, offset + length): mode 0 extends the size like a write of zeros.
  // Errors: kNotSupported for other modes; kFileTooLarge when the range ends past kMaxFileBytes
  // (2^63 - 1); kNoSpace when the bytes it adds past the file's end, times the layout's overhead
  // (k + m) / k, are more than the cluster's free bytes (one StatFs call, whatever the length);
  // StatFs's errors.
  Status Fallocate(OpenFile& file, int mode, uint64_t offset_bytes, uint64_t length_bytes);
  // Flushes and commits, then releases the write lease and the open count (an unlinked file is
  // deleted at its last release). The release message to the metadata server is sent in the
  // background, in order, after this returns (the returned Status is the flush's and commit's);
  // destroying the Client sends every queued release first. The handle is consumed whatever the
  // result.
  Status Release(std::unique_ptr<OpenFile> file);
  // Inode of an open file.
  static InodeId InodeOf(const OpenFile& file);

  // --- locks (held by this client's session; freed when it ends) ------------------------
  // Sets or clears (type F_UNLCK) a lock of `owner` on `inode`. `flock` = true for flock(2).
  // With wait = true, retries until granted (a blocking F_SETLKW or LOCK_EX). Errors:
  // kWouldBlock when a conflicting lock is held and wait is false.
  // Coherence with the lock, as NFS gives it: an unlock first commits what this client's writers
  // of the file buffered; a grant refreshes the handles that do not hold the write lease and, if
  // the file changed, calls options.on_changed_at_lock before returning.
  // When that commit fails, the unlock returns its error and, with kKeepLock, does not unlock:
  // the next holder must not read the file without what was written under the lock (the
  // writes stay buffered; a later unlock, fsync or close commits them or reports the error).
  // kUnlockAnyway is for a close or an exit, where the owner is going and its locks must go.
  // Threading: may block on the file's writer (its commit) and on the metadata server.
  enum class OnCommitError : uint8_t { kKeepLock, kUnlockAnyway };
  Status SetLock(InodeId inode, uint64_t owner, const LockRange& range, bool flock, bool wait,
                 OnCommitError on_commit_error = OnCommitError::kKeepLock);
  // Returns the first lock conflicting with `range` (F_GETLK), or type F_UNLCK when none.
  Result<LockRange> GetLock(InodeId inode, uint64_t owner, const LockRange& range);

  // --- path helpers for tests, benchmarks and tools -------------------------------------
  // Resolves an absolute path ("/a/b") from the root, following no symlinks.
  Result<Attributes> Resolve(std::string_view path, const Caller& caller);
  // Creates or truncates `path` (parent must exist), writes `bytes`, closes.
  Status WriteFile(std::string_view path, std::string_view bytes, const Caller& caller);
  // Reads all of `path`.
  Result<std::string> ReadFile(std::string_view path, const Caller& caller);

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace aquifer
