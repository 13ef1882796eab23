// aquifer-data core: store, uuid, membership. See data_server.h.
#include "server/data_server.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "common/failpoint.h"
#include "common/logging.h"
#include "server/chunk_store/io_ring.h"

namespace aquifer::server {
namespace {

std::string NewUuid() {
  std::random_device rd;
  uint8_t b[16];
  for (auto& x : b) x = static_cast<uint8_t>(rd());
  b[6] = (b[6] & 0x0f) | 0x40;  // version 4
  b[8] = (b[8] & 0x3f) | 0x80;  // RFC 4122 variant
  char s[37];
  std::snprintf(s, sizeof s,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return s;
}

Status LoadOrCreateUuid(const std::string& dir, std::string* uuid) {
  const std::string path = dir + "/server_uuid";
  {
    std::ifstream in(path);
    if (in && std::getline(in, *uuid) && uuid->size() == 36) return OkStatus();
  }
  *uuid = NewUuid();
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("create " + tmp + ": " + std::strerror(errno));
  const std::string line = *uuid + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                  ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    return Internal("write " + path + ": " + std::strerror(errno));
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return OkStatus();
}

// Used when no PeerLink is given: every peer is unreachable.
class NoPeers final : public PeerLink {
 public:
  Result<std::vector<ChunkListEntry>> ListPg(const std::string& address, uint32_t, uint32_t,
                                             const ChunkId&, uint32_t, bool*) override {
    return Unavailable("no peer link to " + address);
  }
  Result<PeerChunk> Read(const std::string& address, const ChunkId&, uint64_t) override {
    return Unavailable("no peer link to " + address);
  }
};

}  // namespace

Result<std::unique_ptr<DataServer>> DataServer::Open(const DataServerOptions& options) {
  SetIoDepth(options.io_depth);
  std::unique_ptr<DataServer> s(new DataServer(options));
  auto store = ChunkStore::Open({.dir = options.dir,
                                 .capacity_bytes = options.capacity_bytes,
                                 .full_ratio = options.full_percent / 100.0,
                                 .block_bytes = options.block_bytes,
                                 .superseded_grace = std::chrono::milliseconds(
                                     options.superseded_grace_ms),
                                 .gc_tombstone_keep = std::chrono::milliseconds(
                                     options.gc_tombstone_ms)});
  if (!store.ok()) return store.status();
  s->store_ = std::move(*store);
  AQ_RETURN_IF_ERROR(LoadOrCreateUuid(options.dir, &s->uuid_));
  // A read that finds corruption queues the chunk for the scrubber's repair.
  DataServer* raw = s.get();
  s->store_->SetCorruptionListener([raw](const ChunkId& id, uint64_t version) {
    if (Scrubber* scrubber = raw->scrubber_for_reads_.load()) scrubber->QueueRepair(id, version);
  });
  return s;
}

DataServer::~DataServer() { StopMembership(); }

void DataServer::StartMembership(std::string address, std::unique_ptr<MetaLink> link,
                                 std::unique_ptr<PeerLink> peers) {
  address_ = std::move(address);
  link_ = std::move(link);
  peers_ = peers ? std::move(peers) : std::make_unique<NoPeers>();
  auto get_map = [this] { return link_->GetClusterMap(); };
  moves_ = std::make_unique<MoveWorker>(store_.get(), peers_.get(), get_map);
  scrubber_ = std::make_unique<Scrubber>(
      store_.get(), peers_.get(), get_map, [this] { return server_id(); },
      [this](InodeId ino) { return link_->GetInode(ino); },
      ScrubOptions{uint64_t{options_.scrub_rate_mib} * kMiB,
                   std::chrono::seconds(options_.scrub_interval_s),
                   // the retry of an incomplete backfill starts at the backfill delay (at
                   // least 1 ms, so that doubling it backs off)
                   std::max(std::chrono::milliseconds(options_.backfill_delay_ms),
                            std::chrono::milliseconds(1)),
                   std::chrono::milliseconds(options_.handoff_sweep_ms)});
  scrubber_->Start();
  scrubber_for_reads_ = scrubber_.get();
  thread_ = std::thread([this] { MembershipLoop(); });
}

void DataServer::StopMembership() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (moves_) moves_->Stop();
  scrubber_for_reads_ = nullptr;
  if (scrubber_) scrubber_->Stop();
}

uint64_t DataServer::pg_gc_tasks_applied() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pg_gc_applied_;
}
std::vector<MoveProgress> DataServer::move_progress() const {
  return moves_ ? moves_->Progress() : std::vector<MoveProgress>{};
}
uint64_t DataServer::move_catch_ups() const { return moves_ ? moves_->catch_ups_finished() : 0; }
ScrubCounters DataServer::scrub_counters() const {
  return scrubber_ ? scrubber_->counters() : ScrubCounters{};
}
void DataServer::RequestScrub() {
  if (scrubber_) scrubber_->RequestPass();
}

ServerId DataServer::server_id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return server_id_;
}
uint64_t DataServer::registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_;
}
uint64_t DataServer::heartbeats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return heartbeats_;
}
uint64_t DataServer::gc_tasks_applied() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gc_applied_;
}

bool DataServer::WaitFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stopping_; });
}

void DataServer::MembershipLoop() {
  auto log = Logger("data");
  const auto base_retry = std::chrono::milliseconds(options_.register_retry_ms);
  auto retry = base_retry;
  auto interval = std::chrono::milliseconds(options_.heartbeat_interval_ms);
  bool registered = false;
  ServerId id;
  std::vector<uint64_t> gc_done;  // applied, not yet acknowledged by a successful heartbeat
  std::vector<uint64_t> pg_gc_done;
  uint64_t failures_logged = 0;
  const auto backfill_delay = std::chrono::milliseconds(options_.backfill_delay_ms);
  // Heartbeats failing this long may have got this server marked down (and writes degraded).
  const auto down_gap = std::chrono::seconds(5);
  auto last_ok = std::chrono::steady_clock::now();
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    const ChunkStoreStats stats = store_->Stats();
    if (!registered) {
      Result<Registration> r = link_->Register({address_, options_.failure_domain,
                                                stats.capacity_bytes, stats.used_bytes, uuid_,
                                                stats.fs_id, stats.fs_free_bytes});
      if (!r.ok()) {
        // Meta may not be up yet: keep serving chunks and retry with backoff.
        if (failures_logged++ % 20 == 0) {
          log->warn("register with meta={} failed, retrying: {}", options_.meta,
                    r.status().ToString());
        }
        if (!WaitFor(retry)) return;
        retry = std::min(retry * 2, base_retry * 10);
        continue;
      }
      registered = true;
      failures_logged = 0;
      retry = base_retry;
      id = r->server_id;
      if (r->heartbeat_interval.count() > 0) interval = r->heartbeat_interval;
      {
        std::lock_guard<std::mutex> lock(mu_);
        server_id_ = id;
        ++registrations_;
      }
      log->info("registered with meta={} server_id={} uuid={} address={} domain={} "
                "heartbeat_ms={}",
                options_.meta, id.value(), uuid_, address_, options_.failure_domain,
                interval.count());
      // Writes made while this server was down (or before it restarted) skipped its positions:
      // rebuild those chunks once the map shows it up again (docs/repair.md "Backfill").
      scrubber_->RequestBackfill(backfill_delay);
      last_ok = std::chrono::steady_clock::now();
    }
    if (!WaitFor(interval)) return;
    if (Result<uint64_t> swept = store_->SweepSuperseded(); !swept.ok()) {
      log->warn("sweep superseded chunk versions: {}", swept.status().ToString());
    }
    const ChunkStoreStats now = store_->Stats();
    Result<HeartbeatReply> hb =
        link_->Heartbeat({id, now.capacity_bytes, now.used_bytes, now.chunk_count, gc_done,
                          moves_->Progress(), pg_gc_done, scrubber_->counters(), now.fs_id,
                          now.fs_free_bytes});
    if (!hb.ok()) {
      if (hb.status().code() != Code::kUnavailable) {
        log->warn("heartbeat refused by meta, registering again: {}", hb.status().ToString());
        registered = false;
      } else if (failures_logged++ % 20 == 0) {
        log->warn("heartbeat to meta={} failed: {}", options_.meta, hb.status().ToString());
      }
      continue;
    }
    failures_logged = 0;
    if (std::chrono::steady_clock::now() - last_ok > std::max<std::chrono::nanoseconds>(
                                                         down_gap, 5 * interval)) {
      log->info("heartbeats resumed after a gap: backfill requested");
      scrubber_->RequestBackfill(backfill_delay);
    }
    last_ok = std::chrono::steady_clock::now();
    gc_done.clear();
    pg_gc_done.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++heartbeats_;
    }
    moves_->SetTasks(hb->moves);
    if (hb->backfill) {
      // The stripes are committed already (meta passes the hint on only after the commit), so
      // there is no reason to wait the post-registration delay.
      log->info("a client wrote stripes without this server's chunks: backfill requested");
      scrubber_->RequestBackfill(
          std::min<std::chrono::milliseconds>(backfill_delay, std::chrono::seconds(1)));
    }
    // Every task of this reply is applied without its own fsync, then one round of directory
    // fsyncs makes them all durable before any is acknowledged (next heartbeat). Thousands of
    // per-task fsyncs after an `rm -rf` used to hold the journal for seconds and slow the
    // metadata server's own synced writes (renames 4x slower).
    std::vector<uint64_t> pg_applied;
    std::vector<uint64_t> applied;
    for (const PgGcTask& task : hb->pg_gc) {
      Result<uint64_t> deleted =
          store_->DeletePgPosition(task.pg_width, task.pg_index, task.position, /*sync=*/false);
      if (!deleted.ok()) {
        log->error("apply pg gc task={} pg={}/{} position={} failed, will retry when resent: {}",
                   task.id, task.pg_width, task.pg_index, task.position,
                   deleted.status().ToString());
        continue;
      }
      log->info("applied pg gc task={} pg={}/{} position={} deleted={}", task.id, task.pg_width,
                task.pg_index, task.position, *deleted);
      pg_applied.push_back(task.id);
    }
    // Armed with `error`, no GC task of this reply is applied (they are resent): a test's way
    // to hold a GC backlog (tests/mount/fsck_gc_test.sh).
    const bool gc_held = !hb->gc.empty() && !AQ_FAILPOINT_STATUS("data.gc.before_apply").ok();
    const std::vector<GcTask> none;
    for (const GcTask& task : gc_held ? none : hb->gc) {  // both lvalues: no copy
      Result<uint64_t> deleted =
          store_->CollectGarbage(task.inode, task.from_stripe, task.max_version, /*sync=*/false);
      if (!deleted.ok()) {
        log->error("apply gc task={} ino={} failed, will retry when resent: {}", task.id,
                   task.inode.value(), deleted.status().ToString());
        continue;
      }
      log->debug("applied gc task={} ino={} from_stripe={} max_version={} deleted={}", task.id,
                 task.inode.value(), task.from_stripe, task.max_version, *deleted);
      applied.push_back(task.id);
    }
    if (pg_applied.empty() && applied.empty()) continue;
    if (Status synced = store_->SyncDeletes(); !synced.ok()) {
      log->error("gc: fsync of {} applied tasks failed, will apply again when resent: {}",
                 pg_applied.size() + applied.size(), synced.ToString());
      continue;
    }
    if (!applied.empty() && !AQ_FAILPOINT_STATUS("data.gc.before_ack").ok()) continue;  // resent
    for (uint64_t task_id : pg_applied) {
      if (std::find(pg_gc_done.begin(), pg_gc_done.end(), task_id) == pg_gc_done.end()) {
        pg_gc_done.push_back(task_id);
      }
    }
    for (uint64_t task_id : applied) {
      if (std::find(gc_done.begin(), gc_done.end(), task_id) == gc_done.end()) {
        gc_done.push_back(task_id);
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    pg_gc_applied_ += pg_applied.size();
    gc_applied_ += applied.size();
  }
}

}  // namespace aquifer::server
