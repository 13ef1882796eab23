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

// DrainServer: marks `id` draining and schedules moves of its positions. Errors: kNotFound
// (unknown id), kInvalidArgument (removed server), kUnavailable.
Result<ServerAdminResult> DrainServer(const std::string& address, ServerId id,
                                      std::chrono::milliseconds timeout);

// RemoveServer. Errors: kNotEmpty while it holds PG positions (unless `force`), kNotFound,
// kUnavailable.
Result<ServerAdminResult> RemoveServer(const std::string& address, ServerId id, bool force,
                                       std::chrono::milliseconds timeout);

}  // namespace aquifer::cli
