// The gRPC calls `aquifer fsck` makes, in the CLI's own types: the namespace (ReadDir with
// attributes, GetAttr) and the cluster map on the metadata server; ListChunks and DeleteChunks on
// data servers. Every call has a deadline; errors are kUnavailable (unreachable / timed out) or
// the server's own status.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aquifer/ids.h"
#include "aquifer/status.h"
#include "aquifer/stripe_map.h"

namespace aquifer::cli {

// What fsck needs of an inode.
struct FsckAttr {
  InodeId ino;
  uint32_t mode = 0;  // S_IFMT bits and permissions
  uint64_t size = 0;
  uint64_t data_version = 0;
  uint32_t k = 0;  // layout (regular files)
  uint32_t m = 0;
  uint32_t unit_bytes = 0;
  // Regular files: the stripes committed writes stored (unknown: an inode from before stripe
  // maps, whose holes cannot be told from lost stripes).
  bool stripes_known = false;
  std::vector<StripeExtent> stripes;
  VersionRanges abandoned;  // versions a crashed writer never committed: not data
};

struct FsckDirEntry {
  std::string name;
  uint64_t cookie = 0;
  FsckAttr attr;
};

struct FsckDirPage {
  std::vector<FsckDirEntry> entries;
  bool eof = false;
};

// One chunk version as ListChunks returns it.
struct FsckChunk {
  InodeId ino;
  uint64_t stripe = 0;
  uint32_t position = 0;
  uint64_t version = 0;
  uint64_t length = 0;
  bool has_placement = false;  // false: written without one (format 1)
  uint32_t pg_width = 0;
  uint32_t pg_index = 0;
  uint32_t k = 0;
  uint32_t m = 0;
  uint32_t unit_bytes = 0;
  uint64_t stripe_bytes = 0;
  bool replicated = false;
};

struct FsckChunkPage {
  std::vector<FsckChunk> chunks;  // key order (ino, stripe, position), versions oldest first
  bool eof = false;
};

// A data server as the cluster map lists it.
struct FsckServer {
  ServerId id;
  std::string address;
  bool up = false;
  std::string state;  // "in" | "draining" | "removed"
  uint32_t pg_positions = 0;  // PG positions it is the target of
  uint64_t chunk_count = 0;   // chunk versions it holds, as its last heartbeat said (progress)
  uint64_t used_bytes = 0;
};

// Set when the namespace was restored from a backup (GetClusterMap; docs/design.md "A second
// copy of the namespace"): the first write version and inode number handed out after the last
// restore. 0: never restored.
struct FsckRestoreFloors {
  uint64_t version = 0;
  uint64_t ino = 0;
};

// A GC task the metadata server holds until every data server has done it: the chunk versions
// of `ino` at stripes >= from_stripe with version <= max_version are being deleted (a deleted
// file: from_stripe 0, max_version UINT64_MAX; a truncate: its cut and the version it saw).
struct FsckGcTask {
  InodeId ino;
  uint64_t from_stripe = 0;
  uint64_t max_version = 0;
};

// The metadata server and data servers fsck talks to. Virtual so the checker can be tested with
// an in-memory cluster.
class FsckRpc {
 public:
  virtual ~FsckRpc() = default;
  virtual Result<std::vector<FsckServer>> Servers() = 0;
  // ReadDir(plus) of `dir` after `cookie` (0 = from the start), up to 1,000 entries.
  virtual Result<FsckDirPage> ReadDir(InodeId dir, uint64_t cookie) = 0;
  // GetAttr; std::nullopt when the inode does not exist (kNotFound).
  virtual Result<std::optional<FsckAttr>> GetAttr(InodeId ino) = 0;
  // ListChunks on `address` after (ino, stripe, position), up to `limit` chunks (all versions).
  virtual Result<FsckChunkPage> ListChunks(const std::string& address, InodeId after_ino,
                                           uint64_t after_stripe, uint32_t after_position,
                                           uint32_t limit) = 0;
  // DeleteChunks on `address`: every chunk of `ino` with stripe >= from_stripe and
  // min_version <= version <= max_version. Returns how many versions were deleted. Only pass a
  // min_version above 0 to a server for which DeletesVersionRanges said yes: an older one
  // ignores it and deletes down to version 0.
  virtual Result<uint64_t> DeleteChunks(const std::string& address, InodeId ino,
                                        uint64_t from_stripe, uint64_t max_version,
                                        uint64_t min_version) = 0;
  // Whether the data server at `address` honours DeleteChunks' min_version (its Info says so).
  // Default: yes (fakes).
  virtual Result<bool> DeletesVersionRanges(const std::string& address) {
    (void)address;
    return true;
  }
  // Inodes in use (StatFs), the walk's expected total for progress. Default: 0, unknown (fakes).
  virtual Result<uint64_t> InodesInUse() { return uint64_t{0}; }
  // The metadata server's restore floors. Default: never restored (fakes).
  virtual Result<FsckRestoreFloors> RestoreFloors() { return FsckRestoreFloors{}; }
  // Every GC task pending on the metadata server now (ListGcTasks, paged). A metadata server
  // without the call gives none. Default: none (fakes).
  virtual Result<std::vector<FsckGcTask>> PendingGc() { return std::vector<FsckGcTask>{}; }
  // ReportLost on the metadata server: stripes of `ino` found lost (at most 1024), so that
  // `aquifer status` says data is lost. Default: nothing (fakes).
  virtual Status ReportLost(InodeId ino, const std::vector<uint64_t>& stripes) {
    (void)ino;
    (void)stripes;
    return OkStatus();
  }
};

// The real one, over gRPC to the metadata server at `meta_address`; `timeout` per call.
std::unique_ptr<FsckRpc> MakeGrpcFsckRpc(const std::string& meta_address,
                                         std::chrono::milliseconds timeout);

}  // namespace aquifer::cli
