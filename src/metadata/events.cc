#include "metadata/events.h"

#include <chrono>

namespace aquifer::meta {

const char* EventSeverityName(EventSeverity severity) {
  switch (severity) {
    case EventSeverity::kInfo: return "info";
    case EventSeverity::kWarning: return "warning";
    case EventSeverity::kError: return "error";
  }
  return "info";
}

void EventLog::Record(EventSeverity severity, std::string text) {
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::lock_guard lock(mu_);
  if (events_.size() == kEventLogCapacity) events_.pop_front();
  events_.push_back(ClusterEvent{next_seq_++, now, severity, std::move(text)});
  counts_[static_cast<size_t>(severity)]++;
}

std::array<uint64_t, 3> EventLog::CountsBySeverity() const {
  std::lock_guard lock(mu_);
  return counts_;
}

std::vector<ClusterEvent> EventLog::Recent(size_t max) const {
  std::lock_guard lock(mu_);
  std::vector<ClusterEvent> out;
  for (auto it = events_.rbegin(); it != events_.rend() && out.size() < max; ++it) {
    out.push_back(*it);
  }
  return out;
}

}  // namespace aquifer::meta
