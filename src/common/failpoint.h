// Named fail points: crash, fail or slow a process at a chosen line, to test what a crash there
// leaves behind (issue 16 item 6). The points in the code are listed in docs/design.md
// "Fail points".
//
//   AQ_FAILPOINT("data.write.before_rename");                        // crash or delay here
//   AQ_RETURN_IF_ERROR(AQ_FAILPOINT_STATUS("client.commit.before"));  // ... or return an error
//
// Compiled in always. Unarmed, a point costs one relaxed load of a global byte and a compare.
// Points are armed from the environment variable AQ_FAILPOINT, read once (at start-up, or at
// the first hit if that comes first): a comma-separated list of `name:action[@N]`, where action
// is `crash` (one line on stderr naming the point, then _exit(86): nothing else is flushed,
// as for kill -9 there), `error` (AQ_FAILPOINT_STATUS gives Internal("fail point NAME"); a
// plain AQ_FAILPOINT ignores it) or `delay=MS` (sleeps MS milliseconds, at most 3,600,000), and
// `@N` (N >= 1) fires only the Nth hit of that point instead of every hit. Example:
//   AQ_FAILPOINT=client.commit.before:crash@3,data.write.before_rename:delay=200
// Names are not checked against the points compiled in (an unknown one never fires). A malformed
// entry is reported once on stderr and ignored; the other entries still apply. A name given
// twice: the last entry wins.
// Thread-safe: hits, arming and disarming may race; the hit count of a point is exact.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "aquifer/status.h"

namespace aquifer::failpoint {

enum class Action : uint8_t {
  kCrash,  // _exit(86) after one stderr line
  kError,  // AQ_FAILPOINT_STATUS returns Internal("fail point NAME")
  kDelay,  // sleep delay_ms
};

// One armed point, as parsed from `name:action[@N]`.
struct Spec {
  std::string name;
  Action action = Action::kCrash;
  uint32_t delay_ms = 0;  // kDelay only: milliseconds to sleep
  uint64_t nth_hit = 0;   // 0: every hit fires; N: only the Nth hit (counted from arming)
  bool operator==(const Spec&) const = default;
};

// What ParseSpecs makes of a list: the well-formed entries, and one message per malformed one
// ("bad fail point 'x:boom': unknown action 'boom' (crash, error, delay=MS)").
struct ParsedSpecs {
  std::vector<Spec> specs;
  std::vector<std::string> errors;
};

// Parses the AQ_FAILPOINT syntax above. Entries are separated by ',', surrounding spaces are
// ignored, empty entries are skipped. A name is 1..128 characters of [A-Za-z0-9._-]. Pure.
ParsedSpecs ParseSpecs(std::string_view text);

// Parses exactly one `name:action[@N]` entry. Errors: kInvalidArgument saying what is wrong.
Result<Spec> ParseSpec(std::string_view entry);

// Arms (or re-arms, resetting its hit count) one point in this process; disarms it. For tests;
// the environment's points are loaded first, so these override them.
void Arm(const Spec& spec);
void Disarm(std::string_view name);

// Arms a point for the lifetime of the guard, then restores what was armed under that name
// before (nothing, or the environment's spec). Not copyable. Example:
//   failpoint::ScopedFailPoint fp("data.write.before_rename:error");
// A malformed spec aborts the test process (a test bug), with the parse error on stderr.
class ScopedFailPoint {
 public:
  explicit ScopedFailPoint(std::string_view spec_text);
  explicit ScopedFailPoint(const Spec& spec);
  ~ScopedFailPoint();
  ScopedFailPoint(const ScopedFailPoint&) = delete;
  ScopedFailPoint& operator=(const ScopedFailPoint&) = delete;

  // Hits of the point since the guard armed it (fired or not).
  uint64_t hits() const;

 private:
  std::string name_;
  bool had_previous_ = false;
  Spec previous_;
};

namespace internal {
enum : uint8_t { kNotLoaded = 0, kNoneArmed = 1, kSomeArmed = 2 };
// kNotLoaded until AQ_FAILPOINT was read; then kNoneArmed or kSomeArmed.
extern std::atomic<uint8_t> g_state;
// The slow path: loads the environment once, counts the hit, and crashes, sleeps or (when
// `want_status`) returns the error the point is armed with.
Status HitSlow(std::string_view name, bool want_status);
}  // namespace internal

inline void Hit(std::string_view name) {
  if (internal::g_state.load(std::memory_order_relaxed) != internal::kNoneArmed) {
    (void)internal::HitSlow(name, /*want_status=*/false);
  }
}

inline Status HitStatus(std::string_view name) {
  if (internal::g_state.load(std::memory_order_relaxed) != internal::kNoneArmed) {
    return internal::HitSlow(name, /*want_status=*/true);
  }
  return Status();
}

}  // namespace aquifer::failpoint

// A fail point that may crash or delay; an `error` arming is ignored here.
#define AQ_FAILPOINT(name) ::aquifer::failpoint::Hit(name)
// A fail point as a Status: OK unless armed with `error` (after a crash or delay as armed).
#define AQ_FAILPOINT_STATUS(name) ::aquifer::failpoint::HitStatus(name)
