// Small helpers shared by the tests and benchmarks of every module: deterministic random bytes,
// a polled wait with a deadline (never a bare sleep), and a scratch directory under /tmp that is
// removed on destruction. Depends only on aquifer_common; no gtest, no gRPC.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace aquifer::testing {

// `bytes` pseudo-random bytes from `seed` (splitmix64), the same on every run and machine.
std::string RandomBytes(size_t bytes, uint64_t seed);

// Calls `pred` every 5 ms until it returns true or `timeout` has passed; returns its last result
// (so a condition that comes true right at the deadline still counts). Runs `pred` on the
// calling thread.
bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

// A new, empty directory /tmp/<prefix>.XXXXXX (mkdtemp), removed with all it holds when the
// ScratchDir is destroyed (errors while removing are ignored). When mkdtemp fails, ok() is
// false and path() is empty: a fixture should ASSERT_TRUE(scratch.ok()) in SetUp. Declare it
// before the members that use files in it, so they are destroyed first. Move-only.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(ScratchDir&& other) noexcept;
  ScratchDir& operator=(ScratchDir&&) = delete;
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace aquifer::testing
