// The metadata server's state as Prometheus gauges, read at each scrape of /metrics
// (docs/metrics.md lists them): data servers (up, capacity, used, chunks, PG positions), file
// system capacity, sessions, opens, leases and locks, move tasks (repair, rebalance, drain) and
// their rate, degraded and lost data, cache hits and misses, events by severity. Requests and
// their latency are counted where they are served (common/rpc/rpc_metrics.h).
#pragma once

#include "common/metrics.h"
#include "metadata/metadata_service.h"

namespace aquifer::meta {

// Registers the collector; `service` must outlive the returned handle. Each scrape takes the
// service's locks briefly (shared where it can), as GetClusterMap and GetMoves do.
metrics::Collector RegisterMetaMetrics(MetadataService* service);

}  // namespace aquifer::meta
