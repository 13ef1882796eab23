// A byte-rate limiter (token bucket) for background work: moves and scrub.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>

namespace aquifer::server {

// Lets `bytes_per_s` through on average, with bursts of up to `burst` worth of time
// (default 100 ms of rate). Charge() books bytes and says how long the caller must wait before
// using them; the caller waits (cancellably) itself. 0 bytes/s = unlimited. Thread-safe.
class Throttle {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Throttle(uint64_t bytes_per_s,
                    std::chrono::nanoseconds burst = std::chrono::milliseconds(100))
      : rate_(bytes_per_s), burst_(burst), next_(Clock::now()) {}

  // Books `bytes`; returns the time to wait before they may be used (zero when within rate).
  std::chrono::nanoseconds Charge(uint64_t bytes) {
    if (rate_ == 0) return std::chrono::nanoseconds(0);
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Clock::now();
    next_ = std::max(next_, now - burst_);
    next_ += std::chrono::nanoseconds(static_cast<int64_t>(bytes * 1e9 / double(rate_)));
    return next_ > now ? std::chrono::duration_cast<std::chrono::nanoseconds>(next_ - now)
                       : std::chrono::nanoseconds(0);
  }
  uint64_t rate() const { return rate_; }

 private:
  const uint64_t rate_;
  const std::chrono::nanoseconds burst_;
  std::mutex mu_;  // guards next_
  Clock::time_point next_;  // when the bucket is empty again (GCRA's theoretical arrival time)
};

}  // namespace aquifer::server
