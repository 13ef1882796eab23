// Logging setup: one spdlog logger per component ("meta", "data", "client", "fuse", "cli").
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "aquifer/status.h"

namespace aquifer {

// Sets the default level for all Aquifer loggers from `level` ("trace", "debug", "info", "warn",
// "error", "off"); unknown names give "info". Logs go to stderr. Call once at process start;
// thread-safe afterwards.
void SetupLogging(const std::string& level);
// The same, with every logger made afterwards writing to `log_file` (appended; "" = stderr)
// instead of stderr, each line flushed. Errors: kInvalidArgument when the file cannot be opened.
Status SetupLogging(const std::string& level, const std::string& log_file);

// Returns the logger named `component`, creating it (stderr, colour off) on first use.
// Never null; thread-safe.
std::shared_ptr<spdlog::logger> Logger(const std::string& component);

// Lets one log line through per `interval` and counts the ones it holds back, for lines that can
// come thousands of times a second (a server down degrades every stripe written). Usage:
//   static LogLimiter limiter;
//   if (uint64_t held = 0; limiter.Allow(&held)) log->warn("... ({} more since)", ..., held);
// Allow() returns true at most once per interval and then sets *held_back to the calls refused
// since the last line. Lock-free; safe from any thread.
class LogLimiter {
 public:
  explicit LogLimiter(std::chrono::milliseconds interval = std::chrono::seconds(10))
      : interval_ms_(interval.count()) {}
  bool Allow(uint64_t* held_back) {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now().time_since_epoch()).count();
    int64_t last = last_ms_.load();
    if (now_ms - last >= interval_ms_ && last_ms_.compare_exchange_strong(last, now_ms)) {
      *held_back = held_.exchange(0);
      return true;
    }
    held_.fetch_add(1);
    return false;
  }

 private:
  const int64_t interval_ms_;
  std::atomic<int64_t> last_ms_{INT64_MIN / 2};
  std::atomic<uint64_t> held_{0};
};

}  // namespace aquifer
