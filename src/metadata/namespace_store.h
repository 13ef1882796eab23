// NamespaceStore: where the metadata server persists inodes, directory entries, xattrs, GC tasks,
// data servers, placement-group tables and counters. One interface, two engines: RocksDB (the
// product) and an in-memory map (tests). Every mutation goes through one StoreBatch, applied
// atomically: all of it or nothing.
//
// Key schema (one ordered key space; integers big-endian so keys sort numerically):
//   'i' ino                 -> Inode
//   'd' parent name         -> Dentry {ino, mode, seq}
//   'e' parent seq          -> {name, ino, mode}   (readdir order; cookie = seq)
//   'x' ino name            -> xattr value
//   'o' ino                 -> ""   (orphan: nlink 0 but open when recorded)
//   'l' ino                 -> ""   (the inode records lost stripes: Inode::lost_stripes)
//   'g' gc_id               -> GcTask
//   's' server_id (32 bit)  -> ServerRecord (state appended; absent in old records = in)
//   'p' width (32 bit)      -> PgTable (pending targets appended; absent in old records = none)
//   'm' move_id             -> MoveTask
//   'q' pg_gc_id            -> PgGcTask
//   'c' name                -> counter (uint64)
//   'S' session             -> SessionRecord
//   'O' ino                 -> InodeState (opens by session, write lease, locks)
//   'R' session slot (32)   -> request id: the last tagged change applied in that slot
//   'D' epoch               -> DegradedWriteRecord
// Threading: every method is safe to call concurrently; a batch is applied atomically, but
// read-modify-write ordering is the caller's business (MetadataService serialises writers).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aquifer/status.h"
#include "metadata/types.h"

namespace aquifer::meta {

// Replay records per session (`R` keys): a tagged change with request id N is remembered in slot
// N % kReplaySlots until a later one of the same session takes the slot. A retry comes within
// one RPC deadline plus an outage; 65,536 later changes of one session (a ReleaseBatch takes one
// per item) in that time would be over 500 a second for two minutes. At most ~1.5 MB a session.
inline constexpr uint64_t kReplaySlots = 65536;

// One raw mutation of a StoreBatch.
struct StoreOp {
  enum class Kind : uint8_t { kPut, kDelete, kDeletePrefix };
  Kind kind;
  std::string key;    // for kDeletePrefix: every key starting with it
  std::string value;  // kPut only
};

// An ordered list of typed mutations, applied atomically by NamespaceStore::Write.
class StoreBatch {
 public:
  void PutInode(const Inode& inode);
  void DeleteInode(InodeId ino);
  // Writes both the name key and the readdir index key of the entry.
  void PutDentry(InodeId parent, std::string_view name, const Dentry& dentry);
  // Removes the name key and the readdir index key (`seq` is the entry's seq).
  void DeleteDentry(InodeId parent, std::string_view name, uint64_t seq);
  void PutXattr(InodeId ino, std::string_view name, std::string_view value);
  void DeleteXattr(InodeId ino, std::string_view name);
  void DeleteAllXattrs(InodeId ino);
  void PutOrphan(InodeId ino);
  void DeleteOrphan(InodeId ino);
  // `l ino`: the inode has lost stripes recorded (Inode::lost_stripes), so a restart finds them.
  void PutLostMarker(InodeId ino);
  void DeleteLostMarker(InodeId ino);
  void PutGcTask(const GcTask& task);
  void DeleteGcTask(uint64_t id);
  void PutServer(const ServerRecord& server);
  void PutPgTable(const PgTable& table);
  void PutMoveTask(const MoveTask& task);
  void DeleteMoveTask(uint64_t id);
  void PutPgGcTask(const PgGcTask& task);
  void DeletePgGcTask(uint64_t id);
  void PutCounter(std::string_view name, uint64_t value);
  // Session state (docs/design.md "Metadata server restarts"). DeleteSession also deletes the
  // session's replay records; PutInodeState of an empty state deletes the record.
  void PutSession(const SessionRecord& session);
  void DeleteSession(uint64_t session);
  void PutInodeState(InodeId ino, const InodeState& state);
  // Records that the change `request_id` of `session` was applied (slot request_id %
  // kReplaySlots; an earlier id in that slot is forgotten).
  void PutReplay(uint64_t session, uint64_t request_id);
  void PutDegradedWrite(const DegradedWriteRecord& write);
  void DeleteDegradedWrite(uint64_t epoch);
  // Every session, inode state and replay record (a restore: none of them is true any more).
  void DeleteSessionState();

  const std::vector<StoreOp>& ops() const { return ops_; }
  bool empty() const { return ops_.empty(); }

 private:
  std::vector<StoreOp> ops_;
};

class NamespaceStore {
 public:
  virtual ~NamespaceStore() = default;

  // Typed reads. A missing record is std::nullopt (not an error). Errors: kCorruption for a
  // record that does not decode; kInternal for engine failures.
  Result<std::optional<Inode>> GetInode(InodeId ino);
  Result<std::optional<Dentry>> GetDentry(InodeId parent, std::string_view name);
  // Entries of `dir` with seq > after_seq, in seq order, at most `max` of them. attr unset.
  Result<std::vector<DirEntry>> ListDir(InodeId dir, uint64_t after_seq, size_t max);
  Result<std::optional<std::string>> GetXattr(InodeId ino, std::string_view name);
  Result<std::vector<std::string>> ListXattrNames(InodeId ino);
  // 0 when the counter was never written.
  Result<uint64_t> GetCounter(std::string_view name);
  Result<std::vector<InodeId>> LoadOrphans();
  Result<std::vector<InodeId>> LoadLostMarkers();
  Result<std::vector<GcTask>> LoadGcTasks();
  Result<std::vector<ServerRecord>> LoadServers();
  Result<std::vector<PgTable>> LoadPgTables();
  Result<std::vector<MoveTask>> LoadMoveTasks();
  Result<std::vector<PgGcTask>> LoadPgGcTasks();
  Result<std::vector<SessionRecord>> LoadSessions();
  Result<std::vector<std::pair<InodeId, InodeState>>> LoadInodeStates();
  // Whether PutReplay(session, request_id) was written and its slot not taken since.
  Result<bool> ReplayApplied(uint64_t session, uint64_t request_id);
  Result<std::vector<DegradedWriteRecord>> LoadDegradedWrites();

  // Applies `batch` atomically. sync: durable on disk (fsync) before returning; otherwise it
  // survives a crash of the process (WAL in the page cache) but maybe not a power loss.
  Status Write(const StoreBatch& batch, bool sync) { return WriteRaw(batch.ops(), sync); }
  // Makes every write applied so far durable on disk.
  virtual Status Sync() = 0;

  // Writes a consistent copy of the whole store, as of one instant, into directory `dir`, which
  // must not exist (its parent must); writes keep going meanwhile. The copy is a store that
  // OpenRocksStore opens. RocksDB: a checkpoint (SST files hard-linked when `dir` is on the same
  // file system, else copied; the WAL copied), fsynced. Errors: kNotSupported for engines that
  // cannot (the in-memory store); kInternal with the engine's message.
  virtual Status Checkpoint(const std::string& dir) {
    (void)dir;
    return Status(Code::kNotSupported, "this store cannot be checkpointed");
  }

 protected:
  virtual Result<std::optional<std::string>> GetRaw(std::string_view key) = 0;
  // Calls fn(key, value) for each key that starts with `prefix` and is >= `start`, in key
  // order, until fn returns false.
  virtual Status ScanRaw(std::string_view prefix, std::string_view start,
                         const std::function<bool(std::string_view, std::string_view)>& fn) = 0;
  virtual Status WriteRaw(const std::vector<StoreOp>& ops, bool sync) = 0;
};

// Opens (creating if missing) a RocksDB store in directory `dir`. Errors: kInternal with
// RocksDB's message (e.g. the directory is locked by another process).
Result<std::unique_ptr<NamespaceStore>> OpenRocksStore(const std::string& dir);

// A store held in memory only; for tests.
std::unique_ptr<NamespaceStore> NewMemoryStore();

}  // namespace aquifer::meta
