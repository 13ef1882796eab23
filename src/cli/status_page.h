// aquifer-meta's web status page (GET / and /status on its HTTP port): the same health as
// `aquifer status` (HealthOf), every data server, the placement groups being repaired with
// progress and ETA, rebalance and drain tasks, the mounts (sessions) and the recent events.
// Pure rendering: the caller fetches the three views (from the metadata server's own gRPC port,
// so page and `aquifer status` read the same answers) and passes them in.
//
// The page is one self-contained HTML5 document (inline CSS, no scripts, no external
// resources) that reloads itself every `refresh_seconds`. Every text that comes from a data
// server, a client or the namespace is HTML-escaped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "aquifer/status.h"
#include "cli/cluster_view.h"

namespace aquifer::cli {

struct StatusPageInput {
  std::string meta_address;        // HOST:PORT of the metadata server's gRPC
  Result<ClusterView> view = Status(Code::kUnavailable, "not fetched");
  Result<MovesView> moves = Status(Code::kUnavailable, "not fetched");
  Result<ActivityView> activity = Status(Code::kUnavailable, "not fetched");
  int64_t now_unix_ms = 0;         // for event ages and the page's own time stamp
  uint32_t refresh_seconds = 3;    // 0: no self-refresh
};

// `text` with &, <, >, " and ' replaced by entities.
std::string HtmlEscape(std::string_view text);

// The whole page.
std::string RenderStatusPage(const StatusPageInput& input);

}  // namespace aquifer::cli
