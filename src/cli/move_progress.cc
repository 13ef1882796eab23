#include "cli/move_progress.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "cli/status_report.h"

namespace aquifer::cli {

PositionEstimate EstimatePosition(const ClusterView& view) {
  double bytes = 0, chunks = 0, positions = 0;
  for (const ServerView& s : view.servers) {
    // A down server's last report stays while its positions move away, and a draining one
    // sheds data as it goes: only the up members' figures are steady.
    if (!s.up || s.state == "removed" || s.pg_positions == 0) continue;
    bytes += static_cast<double>(s.used_bytes);
    chunks += static_cast<double>(s.chunk_count);
    positions += s.pg_positions;
  }
  if (positions == 0) return {};
  return {bytes / positions, chunks / positions};
}

void MoveTally::Update(const std::vector<const MoveView*>& tasks, const ClusterView* view,
                       int64_t now_ms, std::optional<MovedSoFar> moved) {
  if (!first_seen_) {
    first_moved_ = moved;
    if (moved) last_moved_ = *moved;
  }
  const bool by_counter = moved.has_value() && first_moved_.has_value();
  const PositionEstimate per_position = view != nullptr ? EstimatePosition(*view)
                                                        : PositionEstimate{};
  std::set<uint64_t> present;
  running_ = queued_ = 0;
  reported_rate_ = 0;
  for (const MoveView* m : tasks) {
    present.insert(m->id);
    Seen& s = tasks_[m->id];
    s.finished = false;
    s.chunks_done = m->chunks_done;
    s.bytes_done = m->bytes_done;
    s.chunks_total = std::max(m->chunks_total, m->chunks_done);
    s.bytes_total = std::max(m->bytes_total, m->bytes_done);
    s.estimated = m->chunks_total == 0 && m->bytes_total == 0 && !m->done;
    if (m->state == "running") {
      ++running_;
      reported_rate_ += m->rate_bytes_per_s;
    } else {
      ++queued_;
    }
  }
  chunks_done_ = chunks_total_ = bytes_done_ = bytes_total_ = 0;
  finished_ = 0;
  estimated_ = false;
  double estimated_bytes = 0, estimated_chunks = 0;
  for (auto& [id, s] : tasks_) {
    if (!present.count(id)) {
      // Gone from the list: finished. An estimate is all it ever had; its done figures were
      // the real ones, so they are its total.
      if (s.estimated) {
        s.chunks_total = s.chunks_done;
        s.bytes_total = s.bytes_done;
        s.estimated = false;
      }
      s.finished = true;
    }
    if (s.finished) {
      ++finished_;
      if (by_counter) continue;  // counted below, from the server's counter
      chunks_done_ += s.chunks_total;
      bytes_done_ += s.bytes_total;
      chunks_total_ += s.chunks_total;
      bytes_total_ += s.bytes_total;
      continue;
    }
    chunks_done_ += s.chunks_done;
    bytes_done_ += s.bytes_done;
    if (s.estimated && view != nullptr) {
      estimated_ = true;
      estimated_bytes += std::max(per_position.bytes, static_cast<double>(s.bytes_done));
      estimated_chunks += std::max(per_position.chunks, static_cast<double>(s.chunks_done));
    } else {
      chunks_total_ += s.chunks_total;
      bytes_total_ += s.bytes_total;
    }
  }
  bytes_total_ += static_cast<uint64_t>(std::llround(estimated_bytes));
  chunks_total_ += static_cast<uint64_t>(std::llround(estimated_chunks));
  if (by_counter) {
    if (moved->bytes < last_moved_.bytes || moved->chunks < last_moved_.chunks) {
      // The metadata server restarted: its counters began again at 0. Keep what was counted.
      carried_.bytes += last_moved_.bytes - first_moved_->bytes;
      carried_.chunks += last_moved_.chunks - first_moved_->chunks;
      first_moved_ = MovedSoFar{};
    }
    last_moved_ = *moved;
    const uint64_t bytes = moved->bytes - first_moved_->bytes + carried_.bytes;
    const uint64_t chunks = moved->chunks - first_moved_->chunks + carried_.chunks;
    bytes_done_ += bytes;
    bytes_total_ += bytes;
    chunks_done_ += chunks;
    chunks_total_ += chunks;
  }
  // The rate counts from the last poll that saw no work (the work began after it): a repair
  // waits out its delay first (30 s by default), and that wait is not slowness.
  if (!first_seen_ || (tasks_.empty() && bytes_done_ == 0)) {
    first_seen_ = true;
    first_ms_ = now_ms;
    first_bytes_done_ = bytes_done_;
  }
  now_ms_ = now_ms;
}

uint64_t MoveTally::RateBytesPerS() const {
  const int64_t span_ms = now_ms_ - first_ms_;
  if (span_ms >= 2000) {
    const uint64_t moved = bytes_done_ > first_bytes_done_ ? bytes_done_ - first_bytes_done_ : 0;
    return static_cast<uint64_t>(static_cast<double>(moved) * 1000.0 /
                                 static_cast<double>(span_ms));
  }
  return reported_rate_;
}

int64_t MoveTally::EtaMs() const {
  const uint64_t left = bytes_total_ > bytes_done_ ? bytes_total_ - bytes_done_ : 0;
  if (left == 0) return 0;
  const uint64_t rate = RateBytesPerS();
  if (rate == 0) return -1;
  return static_cast<int64_t>(static_cast<double>(left) / static_cast<double>(rate) * 1000.0);
}

double MoveTally::Fraction() const {
  if (bytes_total_ == 0) return 1.0;
  return std::min(1.0, static_cast<double>(bytes_done_) / static_cast<double>(bytes_total_));
}

std::string MoveTally::Line() const {
  const std::string est = estimated_ ? "~" : "";
  std::ostringstream o;
  o << "chunks " << chunks_done_ << "/" << est << chunks_total_ << ", " << HumanBytes(bytes_done_)
    << "/" << est << HumanBytes(bytes_total_) << ", " << HumanBytes(RateBytesPerS())
    << "/s, eta " << HumanDuration(EtaMs()) << "; moves " << finished_ << " done, " << running_
    << " running, " << queued_ << " queued";
  return o.str();
}

std::string ProgressBar(double fraction, int width) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int fill = static_cast<int>(std::lround(fraction * width));
  return "[" + std::string(static_cast<size_t>(fill), '#') +
         std::string(static_cast<size_t>(width - fill), '-') + "] " +
         std::to_string(static_cast<int>(fraction * 100)) + "%";
}

}  // namespace aquifer::cli
