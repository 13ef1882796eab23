// The metadata server's recent events: what an operator looking at the status page (or
// `aquifer status --events`) wants to know happened lately, without reading the log: data
// servers registered, marked down and back up, sessions (mounts) opened, closed and expired,
// move tasks scheduled, finished, failed and cancelled, drains and removals, stripes recorded
// lost, cache leases broken, the server itself paused.
//
// Memory only: the last kEventLogCapacity events since this process started (the log file keeps
// everything). Thread-safe: Record and Recent take the log's own mutex and nothing else, so they
// may be called with any of the service's locks held.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/printable.h"  // Printable: what event texts are made of

namespace aquifer::meta {

inline constexpr size_t kEventLogCapacity = 256;

enum class EventSeverity : uint8_t { kInfo, kWarning, kError };
const char* EventSeverityName(EventSeverity severity);  // "info", "warning", "error"


struct ClusterEvent {
  uint64_t seq = 0;       // 1, 2, ... since this process started
  int64_t unix_ms = 0;    // wall-clock time it was recorded
  EventSeverity severity = EventSeverity::kInfo;
  std::string text;       // one line, e.g. "data server 3 (ds3) marked down: silent 1.6 s"
};

class EventLog {
 public:
  void Record(EventSeverity severity, std::string text);
  // The newest `max` events, newest first.
  std::vector<ClusterEvent> Recent(size_t max) const;
  // Events recorded since start, by severity (index: EventSeverity), including those the log
  // has since dropped.
  std::array<uint64_t, 3> CountsBySeverity() const;

 private:
  mutable std::mutex mu_;
  std::deque<ClusterEvent> events_;  // oldest first, at most kEventLogCapacity
  uint64_t next_seq_ = 1;
  std::array<uint64_t, 3> counts_{};
};

}  // namespace aquifer::meta
