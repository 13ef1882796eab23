#include "server/data_metrics.h"

#include <array>

#include "server/chunk_store/chunk_store.h"
#include "server/data_server.h"

namespace aquifer::server {
namespace {

constexpr size_t kCodes = static_cast<size_t>(Code::kDataLoss) + 1;

const char* OpName(ChunkOp op) { return op == ChunkOp::kRead ? "read" : "write"; }
const char* WireName(ChunkWire w) { return w == ChunkWire::kGrpc ? "grpc" : "chunk_wire"; }

// The families and the children looked up so far: Family::Add takes the family's mutex and
// hashes the labels, so each child is found once and its pointer kept.
struct ChunkFamilies {
  prometheus::Family<prometheus::Counter>& requests = metrics::CounterFamily(
      "aquifer_data_chunk_requests_total",
      "chunk reads and writes served, by op, wire and reply code");
  prometheus::Family<prometheus::Histogram>& seconds = metrics::HistogramFamily(
      "aquifer_data_chunk_seconds", "time to serve one chunk read or write, seconds");
  prometheus::Family<prometheus::Counter>& bytes = metrics::CounterFamily(
      "aquifer_data_chunk_bytes_total", "data bytes of the chunk reads and writes served");
  // [op][wire][code]
  std::array<std::array<std::array<metrics::LazyCounter, kCodes>, 2>, 2> by_code;
  std::array<prometheus::Histogram*, 2> latency{};
  std::array<prometheus::Counter*, 2> byte_count{};

  ChunkFamilies() {
    for (ChunkOp op : {ChunkOp::kRead, ChunkOp::kWrite}) {
      const size_t o = static_cast<size_t>(op);
      latency[o] = &seconds.Add({{"op", OpName(op)}}, metrics::LatencyBuckets());
      byte_count[o] = &bytes.Add({{"op", OpName(op)}});
      // The ok children exist from the start, so a scrape shows 0 before the first request.
      for (ChunkWire w : {ChunkWire::kGrpc, ChunkWire::kChunkWire}) {
        by_code[o][static_cast<size_t>(w)][0].Get(requests, [&] {
          return metrics::Labels{{"op", OpName(op)}, {"wire", WireName(w)}, {"code", "ok"}};
        });
      }
    }
  }
};

ChunkFamilies& Families() {
  static ChunkFamilies* f = new ChunkFamilies();  // never destroyed: serving threads outlive exit
  return *f;
}

}  // namespace

void CountChunkOp(ChunkOp op, ChunkWire wire, const Status& outcome, uint64_t bytes,
                  double seconds) {
  ChunkFamilies& f = Families();
  const size_t o = static_cast<size_t>(op);
  const size_t c = std::min(static_cast<size_t>(outcome.code()), kCodes - 1);
  f.by_code[o][static_cast<size_t>(wire)][c]
      .Get(f.requests,
           [&] {
             return metrics::Labels{
                 {"op", OpName(op)}, {"wire", WireName(wire)}, {"code", CodeName(outcome.code())}};
           })
      .Increment();
  if (bytes > 0) f.byte_count[o]->Increment(static_cast<double>(bytes));
  f.latency[o]->Observe(seconds);
}

metrics::Collector RegisterDataMetrics(DataServer* server) {
  Families();  // the request families are listed (at zero) from the first scrape
  return metrics::Collector([server] {
    using metrics::Counter;
    using metrics::Gauge;
    std::vector<prometheus::MetricFamily> out;
    const ChunkStoreStats st = server->store().Stats();
    auto one = [](double v) { return std::vector<metrics::Sample>{{{}, v}}; };
    out.push_back(Gauge("aquifer_data_capacity_bytes",
                        "bytes this server's chunk store may use (its file system's size when "
                        "no capacity was set)",
                        one(static_cast<double>(st.capacity_bytes))));
    out.push_back(Gauge("aquifer_data_used_bytes",
                        "header and data bytes of every stored chunk version",
                        one(static_cast<double>(st.used_bytes))));
    out.push_back(Gauge("aquifer_data_fs_free_bytes",
                        "free bytes of the file system holding the chunk store (statvfs "
                        "f_bavail)",
                        one(static_cast<double>(st.fs_free_bytes))));
    out.push_back(Gauge("aquifer_data_chunks", "distinct chunks stored",
                        one(static_cast<double>(st.chunk_count))));
    out.push_back(Gauge("aquifer_data_chunk_versions", "stored chunk versions (files)",
                        one(static_cast<double>(st.version_count))));
    out.push_back(Counter("aquifer_data_checksum_failures_total",
                          "chunk reads whose CRC32C did not match since start (the reader "
                          "decodes from other chunks and the scrubber rewrites this one)",
                          one(static_cast<double>(st.corruptions_found))));
    const ScrubCounters scrub = server->scrub_counters();
    out.push_back(Counter("aquifer_data_scrub_chunks_total", "chunk versions scrubbed",
                          one(static_cast<double>(scrub.chunks_scrubbed))));
    out.push_back(Counter("aquifer_data_scrub_corrupt_total",
                          "corrupt or stale chunk versions the scrubber found, and of those "
                          "rebuilt here",
                          {{{{"result", "found"}}, static_cast<double>(scrub.corrupt_found)},
                           {{{"result", "repaired"}}, static_cast<double>(scrub.corrupt_repaired)}}));
    out.push_back(Counter("aquifer_data_scrub_passes_total", "scrub passes completed",
                          one(static_cast<double>(scrub.passes))));
    out.push_back(Counter("aquifer_data_backfill_chunks_total",
                          "chunk versions this server lacked and rebuilt (backfill)",
                          one(static_cast<double>(scrub.chunks_backfilled))));
    out.push_back(Counter("aquifer_data_backfill_bytes_total", "bytes of those chunk versions",
                          one(static_cast<double>(scrub.bytes_backfilled))));
    double running = 0, bytes_done = 0, bytes_total = 0, failed = 0;
    for (const MoveProgress& m : server->move_progress()) {
      if (!m.error.empty()) {
        ++failed;
      } else if (!m.done) {
        ++running;
      }
      bytes_done += static_cast<double>(m.bytes_done);
      bytes_total += static_cast<double>(m.bytes_total);
    }
    out.push_back(Gauge("aquifer_data_move_tasks",
                        "repair, rebalance and drain tasks this server copies to, by state",
                        {{{{"state", "running"}}, running}, {{{"state", "failed"}}, failed}}));
    out.push_back(Gauge("aquifer_data_move_bytes",
                        "bytes copied and to copy by this server's current move tasks",
                        {{{{"what", "done"}}, bytes_done}, {{{"what", "total"}}, bytes_total}}));
    out.push_back(Counter("aquifer_data_heartbeats_total",
                          "heartbeats aquifer-meta acknowledged",
                          one(static_cast<double>(server->heartbeats()))));
    out.push_back(Counter("aquifer_data_registrations_total",
                          "registrations with aquifer-meta (more than 1: it forgot this server "
                          "or restarted)",
                          one(static_cast<double>(server->registrations()))));
    out.push_back(Gauge("aquifer_data_server_id", "the id aquifer-meta gave this server (0 "
                        "before the first registration)",
                        one(static_cast<double>(server->server_id().value()))));
    return out;
  });
}

}  // namespace aquifer::server
