#include "testing/test_util.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>
#include <thread>
#include <utility>

#include "common/hash.h"

namespace aquifer::testing {

std::string RandomBytes(size_t bytes, uint64_t seed) {
  std::string out(bytes, '\0');
  uint64_t x = seed;
  for (size_t i = 0; i < bytes; i += 8, x += 0x9E3779B97F4A7C15ull) {
    const uint64_t z = Mix64(x);
    for (size_t j = 0; j < 8 && i + j < bytes; ++j) out[i + j] = static_cast<char>(z >> (8 * j));
  }
  return out;
}

bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // poll interval, not a wait
  }
  return pred();
}

ScratchDir::ScratchDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + ".XXXXXX";
  if (::mkdtemp(tmpl.data()) != nullptr) path_ = std::move(tmpl);
}

ScratchDir::ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)) {
  other.path_.clear();
}

ScratchDir::~ScratchDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace aquifer::testing
