// A second copy of the namespace: online backups of the metadata server's RocksDB directory and
// their offline restore (docs/design.md "A second copy of the namespace"; the procedure is in
// docs/operations.md "Backing up and restoring the metadata server").
//
// A backup is a directory: a RocksDB checkpoint (a consistent copy of the whole store as of one
// instant, taken while the server keeps serving) plus the manifest file kBackupManifest. The
// metadata server writes it on its own host (MetadataService::Backup, the Backup RPC).
//
// A restore copies a backup into an empty metadata directory (the server stopped) and moves the
// counters past anything the lost server may have handed out after the backup, because data
// servers still hold chunks it wrote then: the next inode number by a margin (by default
// max(2^24, 100,000 x seconds since the backup)), the write-version counter by 2^48, GC, move
// and PG-GC ids by 2^32, server ids by 4,096, the boot epoch (session ids) by 2^16 and the map
// version by 2^20; it records the restore floors that `aquifer fsck` uses to list the chunks
// written after the backup as orphans.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "aquifer/status.h"

namespace aquifer::meta {

// The manifest's file name inside a backup directory. Its presence marks an Aquifer backup.
inline constexpr char kBackupManifest[] = "AQUIFER-BACKUP";

// Margins a restore adds (see the file comment).
inline constexpr uint64_t kRestoreMinInoMargin = uint64_t{1} << 24;
inline constexpr uint64_t kRestoreCreatesPerSecond = 100000;  // far above the ~4,000/s measured
inline constexpr uint64_t kRestoreVersionMargin = uint64_t{1} << 48;
inline constexpr uint64_t kRestoreIdMargin = uint64_t{1} << 32;
inline constexpr uint32_t kRestoreServerIdMargin = 4096;
inline constexpr uint64_t kRestoreBootMargin = uint64_t{1} << 16;
inline constexpr uint64_t kRestoreMapVersionMargin = uint64_t{1} << 20;

// What a backup's manifest records. Times are wall-clock milliseconds since the Unix epoch.
struct BackupManifest {
  uint32_t format = 1;
  int64_t created_unix_ms = 0;  // taken just before the checkpoint (so the age is not short)
  std::string source_db;        // the RocksDB directory it was taken from
  std::string source_host;      // the metadata server's host name
  uint64_t inodes = 0;          // inodes in use then (informational)
};

// What MetadataService::Backup made.
struct BackupResult {
  std::string dir;
  BackupManifest manifest;
  uint64_t files = 0;  // files in the backup directory, the manifest included
  uint64_t bytes = 0;  // their total size
  int64_t took_ms = 0;
  bool same_file_system = false;  // on the RocksDB directory's file system (hard-linked files)
};

// Checks a backup destination as it arrives from another process: not empty, at most 4095
// bytes, no NUL byte, absolute, no "." or ".." component, neither inside `db_dir` nor holding
// it, and under `root` when `root` is not empty (compared after resolving symlinks in the
// parent). The parent must be an existing directory; the destination must not exist, or be an
// empty directory. Errors, each naming the path: kInvalidArgument (the shape),
// kNameTooLong (over 4095 bytes), kNotFound (no parent), kNotDirectory (the parent, or the
// destination, is not a directory), kAlreadyExists (the destination is not empty),
// kPermissionDenied (outside `root`). Reads the file system; no side effects.
Status CheckBackupDestination(std::string_view dest, const std::string& db_dir,
                              const std::string& root);

// Reads `dir`/kBackupManifest. Errors: kNotFound (no manifest: not an Aquifer backup),
// kCorruption (a line that does not parse, an unknown format), kInternal (read error).
Result<BackupManifest> ReadBackupManifest(const std::string& dir);

// Writes `dir`/kBackupManifest and fsyncs it and `dir`. Errors: kInternal.
Status WriteBackupManifest(const std::string& dir, const BackupManifest& manifest);

struct RestoreOptions {
  std::string from;      // the backup directory
  std::string meta_dir;  // the metadata server's RocksDB directory (aquifer-meta --db)
  bool force = false;    // meta_dir is not empty: move its contents aside (meta_dir.pre-restore-T)
  uint64_t ino_margin = 0;  // inode numbers to skip; 0: max(2^24, 100,000 x backup age in s)
  std::function<int64_t()> now_unix_ms;  // wall clock, ms; null: the system clock
};

struct RestoreResult {
  BackupManifest manifest;
  std::string moved_aside;  // where --force moved meta_dir's old contents ("" when it was empty)
  uint64_t files = 0;       // files copied
  uint64_t bytes = 0;
  uint64_t ino_margin = 0;
  uint64_t ino_floor = 0;      // the first inode number the restored server hands out
  uint64_t version_floor = 0;  // the first write version it hands out
  uint64_t inodes = 0;         // inodes in the restored namespace
  uint64_t restores = 0;       // restores this namespace has been through, this one included
};

// Restores `from` into `meta_dir` with the metadata server stopped: checks that `from` is a
// backup, that meta_dir is not in use (RocksDB's LOCK file free) and is absent or empty (else
// kAlreadyExists unless `force`), copies the backup's files in (fsynced), opens the store once
// and writes the moved counters and the restore floors in one synced batch. Errors:
// kNotFound / kCorruption (not a backup), kUnavailable (a process holds meta_dir's lock: stop
// aquifer-meta), kAlreadyExists (not empty, no force), kInvalidArgument (meta_dir inside the
// backup or the other way round; a margin that would overflow), kInternal (I/O; meta_dir may
// then hold a partial copy, which a later restore with `force` replaces). Not thread-safe with
// itself on the same meta_dir.
Result<RestoreResult> RestoreBackup(const RestoreOptions& options);

}  // namespace aquifer::meta
