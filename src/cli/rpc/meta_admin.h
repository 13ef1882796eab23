// The CLI's view of the metadata server over gRPC. The only CLI file that sees protobuf types is
// meta_admin.cc.
#pragma once

#include <chrono>
#include <string>

#include "aquifer/status.h"
#include "cli/cluster_view.h"

namespace aquifer::cli {

// Calls GetClusterMap and StatFs on the metadata server at `address` (HOST:PORT), each with
// `timeout` as its deadline. Errors: kUnavailable when the server cannot be reached or times
// out; the server's own code when it answers with an error.
Result<ClusterView> FetchClusterView(const std::string& address,
                                     std::chrono::milliseconds timeout);

// GetMoves. Errors as FetchClusterView.
Result<MovesView> FetchMoves(const std::string& address, std::chrono::milliseconds timeout);

// GetActivity: sessions and the newest `max_events` (1..256) events. Errors as FetchClusterView.
Result<ActivityView> FetchActivity(const std::string& address, uint32_t max_events,
                                   std::chrono::milliseconds timeout);

// DrainServer: marks `id` draining and schedules moves of its positions. Errors: kNotFound
// (unknown id), kInvalidArgument (removed server), kUnavailable.
Result<ServerAdminResult> DrainServer(const std::string& address, ServerId id,
                                      std::chrono::milliseconds timeout);
// UndrainServer: the server is "in" again, its drain tasks cancelled. Errors as DrainServer.
Result<ServerAdminResult> UndrainServer(const std::string& address, ServerId id,
                                        std::chrono::milliseconds timeout);

// RemoveServer. Errors: kNotEmpty while it holds PG positions (unless `force`), kNotFound,
// kUnavailable.
Result<ServerAdminResult> RemoveServer(const std::string& address, ServerId id, bool force,
                                       std::chrono::milliseconds timeout);

// What the metadata server's Backup call made (docs/operations.md "Backing up and restoring").
struct MetaBackupView {
  std::string dir;              // on the metadata server's host
  uint64_t files = 0;
  uint64_t bytes = 0;
  int64_t created_unix_ms = 0;  // when the checkpoint was taken
  uint64_t inodes = 0;
  int64_t took_ms = 0;
  bool same_file_system = false;  // shares the RocksDB directory's disk (hard links)
};

// Backup: the metadata server at `address` writes a consistent copy of its namespace into
// `dest_dir` on its own host. Errors: the server's (kInvalidArgument, kNameTooLong, kNotFound,
// kNotDirectory, kAlreadyExists, kPermissionDenied for the destination; kWouldBlock while
// another backup runs), kUnavailable (unreachable or past `timeout`).
Result<MetaBackupView> BackupMeta(const std::string& address, const std::string& dest_dir,
                                  std::chrono::milliseconds timeout);

}  // namespace aquifer::cli
