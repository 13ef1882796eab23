// ChunkIo: reads and writes whole stripes of files on the data servers, following the layout
// rules of docs/design.md. Owns the cluster-map cache and one DataClient per data server.
//
// Writes: a replicated stripe (< unit_bytes of data) goes as m + 1 copies to positions 0..m; an
// erasure-coded stripe is encoded (ISA-L via ErasureCodec) and its non-empty data chunks and m
// parity chunks are written in parallel. Reads: only the needed data chunks (byte ranges), plus
// enough other positions (at least m + 1 in all) that the highest version returned is the
// stripe's current one; chunks of lower versions count as missing; down, slow (chunk_timeout) or
// corrupt chunks are replaced by decoding from any k good ones. Every chunk write carries its
// ChunkPlacement; a position with a pending target (a move in flight) is written to both its
// target and the pending one, and counts as written if either landed (docs/repair.md).
// Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "aquifer/client.h"
#include "aquifer/erasure.h"
#include "aquifer/ids.h"
#include "aquifer/status.h"
#include "aquifer/stripe_map.h"
#include "client/cluster_map.h"
#include "client/rpc/data_client.h"
#include "client/rpc/meta_client.h"
#include "client/thread_pool.h"

namespace aquifer::client {

class ChunkIo {
 public:
  struct Options {
    std::chrono::milliseconds chunk_timeout{3000};  // a chunk read slower than this is missing
    std::chrono::milliseconds write_timeout{15000}; // deadline of one chunk write
    unsigned io_threads = 8;                        // parallel chunk RPCs
    bool data_wire = true;                          // chunk reads and writes on the chunk wire
  };

  // `meta` must outlive this object.
  ChunkIo(MetaClient* meta, Options options);
  ~ChunkIo();

  // Fetches the cluster map now. Errors: the metadata server's.
  Status RefreshMap();
  // Asks for a refresh soon (the client's background thread calls RefreshIfRequested).
  void RequestRefresh() { refresh_requested_.store(true); }
  // Refreshes when requested since the last refresh; returns whether it tried.
  bool RefreshIfRequested();
  std::shared_ptr<const ClusterMap> map() const;
  // The map, fetched again first unless some thread did so in the last second.
  std::shared_ptr<const ClusterMap> FreshMap();

  // Writes stripe `stripe` of `inode`, whose bytes are `bytes` (its whole length L, 0 < L <=
  // stripe_bytes), at `version`. Errors: kUnavailable when fewer than k (erasure-coded) or 1
  // (replicated) chunks were written; kNoSpace when that was because servers were full.
  Status WriteStripe(InodeId inode, const Layout& layout, uint64_t stripe,
                     std::span<const std::byte> bytes, uint64_t version,
                     uint64_t committed_version, bool sync);

  // Data servers that missed a chunk of `inode` in a stripe WriteStripe accepted with fewer
  // chunks than positions, since the last call; the call forgets them (at most
  // kMaxBackfillServers). The commit of those writes names them to the metadata server, which
  // has each run a backfill pass (nothing else would rebuild a chunk missed by a server that
  // stayed up). Memory: one small set per inode with such writes, at most 4096 inodes kept.
  // *degraded_stripes (if given) gets how many stripes were accepted so, and is forgotten too.
  std::vector<ServerId> TakeMissedServers(InodeId inode, uint64_t* degraded_stripes = nullptr);
  // Adds servers that missed chunks of `inode` (ids, duplicates ignored, at most
  // kMaxBackfillServers kept per inode): called by WriteStripe, and by a commit that failed to
  // put back what TakeMissedServers gave it.
  void AddMissedServers(InodeId inode, std::span<const ServerId> servers,
                        uint64_t degraded_stripes = 0);

  // Reads bytes [begin, begin + out.size()) of stripe `stripe` (offsets inside the stripe) whose
  // stored length is `stripe_len` (0 = nothing stored), newest version <= max_version. Bytes
  // past stripe_len, and never-written stripes, read as zeros.
  // bound_is_committed: max_version is the file's committed data_version (a reader's bound), so
  // chunks written by the last commit carry exactly it. Then, healthy case: a replicated stripe
  // asks one copy; an erasure-coded one asks only the data positions it needs. Other positions
  // are asked only when those fail, answer an older version, or (replicated) are slower than
  // kReplicaHedge. Without it (a writer's bound is its unused write version), every copy / m + 1
  // positions are asked at once.
  // A version of which fewer than k chunks exist after every position answered (a writer that
  // crashed mid-stripe) is skipped: the read retries below it (at most 4 times).
  // Errors: kUnavailable when the needed bytes cannot be read or decoded (after reading again,
  // backing off, for up to write_timeout: a holder may be merely down or stopped); kStale when the
  // stripe was written again and max_version's chunks pruned since the caller took its bound
  // (never zeros for it): take a fresh view of the file and read again.
  // `record` is what the file's stripe map says of this stripe (docs/design.md "Recorded
  // holes"). Known and not written: a hole, zeros, no data server asked. Known and written:
  // chunks at or below its floor are a truncate's leftovers and count as absent, and a stripe
  // with no chunk left is kDataLoss (logged and reported to the metadata server only when every
  // target and every hand-off candidate of its positions answered "not found"), never zeros. Unknown: holes are inferred (m + 1
  // positions, or every copy, say "never written").
  // With `view` (empty on entry) and begin + out.size() <= stripe_len: when the bytes need no
  // decoding, they come back in *view instead, as views of the received replies (and zeros for
  // holes), and `out` is not touched; otherwise *view stays empty and `out` holds them.
  Status ReadStripe(InodeId inode, const Layout& layout, uint64_t stripe, uint64_t stripe_len,
                    uint64_t max_version, uint64_t begin, std::span<std::byte> out,
                    bool bound_is_committed = false, ChunkBytes* view = nullptr,
                    const StripeRecord& record = StripeRecord{});

  // Why a degraded read (a decode from other chunks) was needed: the first reason found among
  // the positions the read wanted. kUnavailable: the server was down, slow past the chunk
  // deadline or unreachable; kChecksum: it answered with a CRC32C mismatch; kMissing: it did not
  // hold the chunk (a write that missed it, a repair not done yet); kStaleVersion: it held only
  // an older version; kOther: anything else.
  enum class DegradedCause : uint8_t { kUnavailable, kChecksum, kMissing, kStaleVersion, kOther };
  static constexpr size_t kDegradedCauses = 5;
  static const char* DegradedCauseName(DegradedCause cause);  // "unavailable", "checksum", ...

  // Counters for tests, benchmarks and /metrics.
  uint64_t degraded_reads() const { return degraded_reads_.load(); }
  uint64_t degraded_reads(DegradedCause cause) const {
    return degraded_by_cause_[static_cast<size_t>(cause)].load();
  }
  uint64_t chunk_rpcs() const { return chunk_rpcs_.load(); }
  uint64_t version_fallbacks() const { return version_fallbacks_.load(); }
  uint64_t lost_stripe_reads() const { return lost_stripe_reads_.load(); }

  // How long a replicated read waits for its first copy (asked on the caller's thread) before
  // asking every copy from the pool.
  static constexpr std::chrono::milliseconds kReplicaHedge{100};

 private:
  struct Fetch;
  // Per position of a stripe, the servers that may hold a hand-off copy of its chunk, in the
  // order writers try them (ClusterMap::HandoffCandidates).
  using Handoffs = std::vector<std::vector<ServerId>>;
  // The hand-off candidates of every position of `stripe` in `map`, whatever their state (the
  // writer chose among those up in its map then); empty when there are none.
  static Handoffs HandoffsOf(const Layout& layout, uint64_t stripe, const ClusterMap& map);
  // One read of ReadStripe (which reads again, for up to write_timeout, while it is kUnavailable).
  Status ReadStripeOnce(InodeId inode, const Layout& layout, uint64_t stripe,
                        uint64_t stripe_len, uint64_t max_version, uint64_t begin,
                        std::span<std::byte> out, bool bound_is_committed, ChunkBytes* view,
                        const StripeRecord& record);

  void CountDegraded(DegradedCause cause);
  // Counts a read of a lost stripe and tells the metadata server, once per (inode, stripe).
  void NoteLost(InodeId inode, uint64_t stripe);
  Result<std::shared_ptr<DataClient>> ClientFor(ServerId id, const ClusterMap& map);
  Result<const ErasureCodec*> CodecFor(uint32_t k, uint32_t m);
  Status ReadReplicated(InodeId inode, const Layout& layout, uint64_t stripe,
                        const std::vector<ServerId>& targets, const ClusterMap& map,
                        uint64_t stripe_len, uint64_t max_version, uint64_t begin,
                        std::span<std::byte> out, bool bound_is_committed, ChunkBytes* view,
                        const StripeRecord& record, uint64_t* abandoned_seen,
                        const Handoffs* handoffs);
  Status ReadCoded(InodeId inode, const Layout& layout, uint64_t stripe,
                   const std::vector<ServerId>& targets, const ClusterMap& map,
                   uint64_t stripe_len, uint64_t max_version, uint64_t begin,
                   std::span<std::byte> out, bool bound_is_committed, uint64_t* unusable_version,
                   ChunkBytes* view, const StripeRecord& record, uint64_t* abandoned_seen,
                   const Handoffs* handoffs);
  // Writes `chunks` (position, bytes) of one stripe to each position's target and pending
  // target; fails unless `needed` positions (counting `empty_landed`) landed somewhere. Sets
  // *stale when a server answered kStale.
  Status WriteChunks(InodeId inode, uint64_t stripe,
                     const std::vector<std::pair<uint32_t, std::span<const std::byte>>>& chunks,
                     uint32_t empty_landed, uint32_t needed, const StripePlacement& where,
                     const ClusterMap& map, const ChunkPlacement& placement, uint64_t version,
                     uint64_t committed_version, bool sync, bool* stale);

  MetaClient* meta_;
  Options options_;
  ThreadPool pool_;

  mutable std::mutex mu_;  // guards map_, clients_, codecs_
  std::mutex missed_mu_;   // guards missed_
  std::map<uint64_t, std::vector<ServerId>> missed_;  // inode -> servers that missed chunks
  std::map<uint64_t, uint64_t> degraded_;  // inode -> stripes accepted below k + m (missed_mu_)
  std::shared_ptr<const ClusterMap> map_;
  std::map<std::string, std::shared_ptr<DataClient>> clients_;  // by address
  std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<ErasureCodec>> codecs_;

  std::mutex refresh_mu_;  // serializes map fetches
  std::atomic<int64_t> last_sync_refresh_ms_{0};  // steady clock, of FreshMap's last fetch
  std::atomic<bool> refresh_requested_{false};
  std::atomic<uint64_t> degraded_reads_{0};
  std::array<std::atomic<uint64_t>, kDegradedCauses> degraded_by_cause_{};
  std::atomic<uint64_t> chunk_rpcs_{0};
  std::atomic<uint64_t> version_fallbacks_{0};
  std::atomic<uint64_t> lost_stripe_reads_{0};
  std::mutex lost_mu_;  // guards reported_lost_
  std::set<std::pair<uint64_t, uint64_t>> reported_lost_;  // (inode, stripe) told to meta
};

}  // namespace aquifer::client
