// Move tasks in background threads. See move_worker.h.
#include "server/repair/move_worker.h"

#include <algorithm>
#include <set>

#include "common/logging.h"

namespace aquifer::server {

struct MoveWorker::Job {
  MoveTask task;
  bool catch_up = false;
  PgSyncStats stats;
  std::thread thread;
  std::mutex mu;  // guards the fields below
  std::condition_variable cv;
  bool cancel = false;
  bool finished = false;
  bool done = false;
  std::string error;

  // Waits up to d unless cancelled; false when cancelled.
  bool Sleep(std::chrono::nanoseconds d) {
    std::unique_lock<std::mutex> lock(mu);
    if (d.count() > 0) cv.wait_for(lock, d, [this] { return cancel; });
    return !cancel;
  }
  void Cancel() {
    {
      std::lock_guard<std::mutex> lock(mu);
      cancel = true;
    }
    cv.notify_all();
  }
};

MoveWorker::MoveWorker(ChunkStore* store, PeerLink* peers,
                       std::function<Result<ClusterView>()> get_map, MoveWorkerOptions options)
    : store_(store), peers_(peers), get_map_(std::move(get_map)), options_(options) {}

MoveWorker::~MoveWorker() { Stop(); }

void MoveWorker::Run(Job* job) {
  auto log = Logger("data");
  const MoveTask& t = job->task;
  Throttle throttle(t.rate_limit_bytes_per_s);
  auto sleep = [job](std::chrono::nanoseconds d) { return job->Sleep(d); };
  auto backoff = options_.retry_backoff;
  log->info("start move task={} kind={} pg={}/{} position={} from={} rate_bytes_per_s={}{}",
            t.id, t.kind, t.pg_width, t.pg_index, t.position, t.from.value(),
            t.rate_limit_bytes_per_s, job->catch_up ? " (catch-up pass)" : "");
  const auto start = std::chrono::steady_clock::now();
  Status status;
  for (int failures = 0;;) {
    for (auto* c : {&job->stats.chunks_done, &job->stats.chunks_total, &job->stats.bytes_done,
                    &job->stats.bytes_total}) {
      c->store(0);
    }
    Result<ClusterView> map = get_map_();
    PgSyncTask sync;
    sync.pg_width = t.pg_width;
    sync.pg_index = t.pg_index;
    sync.position = t.position;
    sync.copy_from = t.from;
    status = map.ok() ? SyncPgPosition(sync, *map, *store_, *peers_, throttle, sleep, &job->stats)
                      : map.status().WithPrefix("get cluster map");
    if (status.ok() || !job->Sleep(std::chrono::nanoseconds(0))) break;
    if (++failures >= options_.max_failed_passes) break;
    log->warn("move task={} pass failed ({} of {}), retrying: {}", t.id, failures,
              options_.max_failed_passes, status.ToString());
    if (!job->Sleep(backoff)) break;
    backoff = std::min(backoff * 2, options_.retry_backoff * 8);
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(job->mu);
  job->finished = true;
  if (job->cancel) {
    log->info("stop move task={} (cancelled) chunks_done={}", t.id, job->stats.chunks_done.load());
  } else if (status.ok()) {
    job->done = true;
    log->info("finish move task={}{} chunks={} bytes={} copied={} rebuilt={} unrebuildable={} "
              "collected={} seconds={:.2f}",
              t.id, job->catch_up ? " catch-up" : "", job->stats.chunks_done.load(),
              job->stats.bytes_done.load(), job->stats.copied.load(), job->stats.rebuilt.load(),
              job->stats.unrebuildable.load(), job->stats.collected.load(), secs);
  } else {
    job->error = status.ToString();
    log->error("fail move task={} error={}", t.id, job->error);
  }
}

void MoveWorker::SetTasks(const std::vector<MoveTask>& tasks) {
  std::vector<std::unique_ptr<Job>> to_join;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    std::set<uint64_t> listed;
    for (const MoveTask& t : tasks) {
      listed.insert(t.id);
      if (jobs_.count(t.id)) continue;
      auto job = std::make_unique<Job>();
      job->task = t;
      Job* raw = job.get();
      jobs_[t.id] = std::move(job);
      raw->thread = std::thread([this, raw] { Run(raw); });
    }
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      if (listed.count(it->first)) {
        ++it;
        continue;
      }
      Job* job = it->second.get();
      bool was_done;
      {
        std::lock_guard<std::mutex> job_lock(job->mu);
        was_done = job->done;
      }
      job->Cancel();
      if (was_done) {
        auto c = std::make_unique<Job>();
        c->task = job->task;
        c->catch_up = true;
        Job* raw = c.get();
        catch_ups_.push_back(std::move(c));
        raw->thread = std::thread([this, raw] { Run(raw); });
      }
      to_join.push_back(std::move(it->second));
      it = jobs_.erase(it);
    }
    Reap(&to_join);
  }
  for (auto& job : to_join) {
    if (job->thread.joinable()) job->thread.join();
  }
}

// Moves finished catch-up jobs to *finished_out. Caller holds mu_.
void MoveWorker::Reap(std::vector<std::unique_ptr<Job>>* finished_out) {
  for (auto it = catch_ups_.begin(); it != catch_ups_.end();) {
    bool finished;
    {
      std::lock_guard<std::mutex> job_lock((*it)->mu);
      finished = (*it)->finished;
    }
    if (!finished) {
      ++it;
      continue;
    }
    ++catch_ups_finished_;
    finished_out->push_back(std::move(*it));
    it = catch_ups_.erase(it);
  }
}

std::vector<MoveProgress> MoveWorker::Progress() const {
  std::vector<MoveProgress> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, job] : jobs_) {
    MoveProgress p;
    p.task_id = id;
    p.chunks_done = job->stats.chunks_done.load();
    p.chunks_total = std::max(job->stats.chunks_total.load(), p.chunks_done);
    p.bytes_done = job->stats.bytes_done.load();
    p.bytes_total = std::max(job->stats.bytes_total.load(), p.bytes_done);
    std::lock_guard<std::mutex> job_lock(job->mu);
    p.done = job->done;
    p.error = job->error;
    out.push_back(std::move(p));
  }
  return out;
}

uint64_t MoveWorker::catch_ups_finished() const {
  std::vector<std::unique_ptr<Job>> finished;
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const_cast<MoveWorker*>(this)->Reap(&finished);
    n = catch_ups_finished_;
  }
  for (auto& job : finished) job->thread.join();
  return n;
}

void MoveWorker::Stop() {
  std::vector<std::unique_ptr<Job>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    for (auto& [id, job] : jobs_) all.push_back(std::move(job));
    jobs_.clear();
    for (auto& job : catch_ups_) all.push_back(std::move(job));
    catch_ups_.clear();
  }
  for (auto& job : all) job->Cancel();
  for (auto& job : all) {
    if (job->thread.joinable()) job->thread.join();
  }
}

}  // namespace aquifer::server
