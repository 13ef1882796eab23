// Fail points. See failpoint.h.
#include "common/failpoint.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace aquifer::failpoint {

namespace internal {
std::atomic<uint8_t> g_state{kNotLoaded};
}  // namespace internal

namespace {

constexpr size_t kMaxNameChars = 128;
constexpr uint32_t kMaxDelayMs = 3'600'000;
constexpr int kCrashExitCode = 86;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameChars) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// A decimal integer in [lo, hi], the whole of `s`.
std::optional<uint64_t> ParseNumber(std::string_view s, uint64_t lo, uint64_t hi) {
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

struct Point {
  Spec spec;
  uint64_t hits = 0;
};

struct Registry {
  std::mutex mu;  // guards points
  std::map<std::string, Point, std::less<>> points;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: hits may come during exit
  return *r;
}

// Caller holds registry().mu.
void PublishStateLocked() {
  internal::g_state.store(registry().points.empty() ? internal::kNoneArmed : internal::kSomeArmed,
                          std::memory_order_relaxed);
}

void WriteStderr(const std::string& line) {
  // write(2), not stdio: nothing buffered elsewhere is flushed with it.
  size_t off = 0;
  while (off < line.size()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + off, line.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

const char* ActionName(Action a) {
  switch (a) {
    case Action::kCrash: return "crash";
    case Action::kError: return "error";
    case Action::kDelay: return "delay";
  }
  return "?";
}

void LoadEnvOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("AQ_FAILPOINT");
    ParsedSpecs parsed = env ? ParseSpecs(env) : ParsedSpecs{};
    for (const std::string& e : parsed.errors) WriteStderr("AQ_FAILPOINT: " + e + " (ignored)\n");
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    for (Spec& s : parsed.specs) {
      WriteStderr("AQ_FAILPOINT: armed " + s.name + ":" + ActionName(s.action) +
                  (s.action == Action::kDelay ? "=" + std::to_string(s.delay_ms) : "") +
                  (s.nth_hit ? "@" + std::to_string(s.nth_hit) : "") + " pid " +
                  std::to_string(::getpid()) + "\n");
      std::string name = s.name;
      r.points[name] = Point{std::move(s), 0};
    }
    PublishStateLocked();
  });
}

// Read at start-up, so that the first hit already takes the fast path.
[[maybe_unused]] const bool kLoadedAtStart = (LoadEnvOnce(), true);

}  // namespace

Result<Spec> ParseSpec(std::string_view entry) {
  entry = Trim(entry);
  auto bad = [&](const std::string& why) {
    return InvalidArgument("bad fail point '" + std::string(entry) + "': " + why);
  };
  const size_t colon = entry.find(':');
  if (colon == std::string_view::npos) return bad("expected name:action");
  Spec spec;
  const std::string_view name = Trim(entry.substr(0, colon));
  if (!ValidName(name)) return bad("a name is 1..128 characters of [A-Za-z0-9._-]");
  spec.name = std::string(name);
  std::string_view action = Trim(entry.substr(colon + 1));
  if (const size_t at = action.rfind('@'); at != std::string_view::npos) {
    std::optional<uint64_t> n = ParseNumber(Trim(action.substr(at + 1)), 1, UINT64_MAX);
    if (!n) return bad("@N needs a whole number N >= 1");
    spec.nth_hit = *n;
    action = Trim(action.substr(0, at));
  }
  if (action == "crash") {
    spec.action = Action::kCrash;
  } else if (action == "error") {
    spec.action = Action::kError;
  } else if (action.starts_with("delay=")) {
    std::optional<uint64_t> ms = ParseNumber(action.substr(6), 0, kMaxDelayMs);
    if (!ms) return bad("delay=MS needs whole milliseconds, 0.." + std::to_string(kMaxDelayMs));
    spec.action = Action::kDelay;
    spec.delay_ms = static_cast<uint32_t>(*ms);
  } else {
    return bad("unknown action '" + std::string(action) + "' (crash, error, delay=MS)");
  }
  return spec;
}

ParsedSpecs ParseSpecs(std::string_view text) {
  ParsedSpecs out;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view entry = Trim(text.substr(0, comma));
    if (!entry.empty()) {
      Result<Spec> spec = ParseSpec(entry);
      if (spec.ok()) {
        out.specs.push_back(std::move(*spec));
      } else {
        out.errors.push_back(spec.status().message());
      }
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

void Arm(const Spec& spec) {
  LoadEnvOnce();
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.points[spec.name] = Point{spec, 0};
  PublishStateLocked();
}

void Disarm(std::string_view name) {
  LoadEnvOnce();
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (auto it = r.points.find(name); it != r.points.end()) r.points.erase(it);
  PublishStateLocked();
}

namespace {
Spec ParseOrDie(std::string_view text) {
  Result<Spec> spec = ParseSpec(text);
  if (!spec.ok()) {
    WriteStderr("ScopedFailPoint: " + spec.status().message() + "\n");
    std::abort();
  }
  return std::move(*spec);
}
}  // namespace

ScopedFailPoint::ScopedFailPoint(std::string_view spec_text) : ScopedFailPoint(ParseOrDie(spec_text)) {}

ScopedFailPoint::ScopedFailPoint(const Spec& spec) : name_(spec.name) {
  LoadEnvOnce();
  {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    if (auto it = r.points.find(name_); it != r.points.end()) {
      had_previous_ = true;
      previous_ = it->second.spec;
    }
  }
  Arm(spec);
}

ScopedFailPoint::~ScopedFailPoint() {
  if (had_previous_) {
    Arm(previous_);
  } else {
    Disarm(name_);
  }
}

uint64_t ScopedFailPoint::hits() const {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.points.find(name_);
  return it == r.points.end() ? 0 : it->second.hits;
}

Status internal::HitSlow(std::string_view name, bool want_status) {
  LoadEnvOnce();
  Spec spec;
  uint64_t hit = 0;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    auto it = r.points.find(name);
    if (it == r.points.end()) return Status();
    hit = ++it->second.hits;
    if (it->second.spec.nth_hit != 0 && hit != it->second.spec.nth_hit) return Status();
    spec = it->second.spec;
  }
  switch (spec.action) {
    case Action::kCrash:
      WriteStderr("AQ_FAILPOINT: crash at " + spec.name + " (hit " + std::to_string(hit) +
                  ") pid " + std::to_string(::getpid()) + "\n");
      ::_exit(kCrashExitCode);
    case Action::kDelay:
      std::this_thread::sleep_for(std::chrono::milliseconds(spec.delay_ms));
      return Status();
    case Action::kError:
      if (!want_status) return Status();
      return Internal("fail point " + spec.name);
  }
  return Status();
}

}  // namespace aquifer::failpoint
