// Recycled receive buffers for chunk-wire read replies (recv_buffers.h).
#include "client/rpc/recv_buffers.h"

#include <sys/mman.h>

#include <array>
#include <atomic>
#include <mutex>
#include <vector>

namespace aquifer::client {

namespace {

constexpr size_t kMinClassBytes = size_t{64} << 10;
constexpr size_t kClasses = 8;                    // 64 KiB, 128 KiB, ..., 8 MiB
constexpr size_t kKeptBytes = size_t{64} << 20;   // free bytes kept, all classes together

struct SizeClass {
  std::mutex mu;  // guards free
  std::vector<std::byte*> free;
};

std::array<SizeClass, kClasses>& Classes() {
  static auto* classes = new std::array<SizeClass, kClasses>();  // outlives every owner
  return *classes;
}

std::atomic<size_t> mapped{0};
std::atomic<size_t> kept{0};  // bytes in the free lists

size_t ClassBytes(size_t c) { return kMinClassBytes << c; }

void Give(size_t c, std::byte* p) {
  SizeClass& sc = Classes()[c];
  {
    std::lock_guard lock(sc.mu);
    if (kept.load(std::memory_order_relaxed) + ClassBytes(c) <= kKeptBytes) {
      kept.fetch_add(ClassBytes(c), std::memory_order_relaxed);
      sc.free.push_back(p);
      return;
    }
  }
  ::munmap(p, ClassBytes(c));
}

}  // namespace

std::shared_ptr<std::byte[]> RecvBuffer(size_t bytes) {
  size_t c = 0;
  while (c < kClasses && ClassBytes(c) < bytes) ++c;
  if (bytes < kMinClassBytes / 2 || c == kClasses) {
    return std::shared_ptr<std::byte[]>(new std::byte[bytes]);
  }
  std::byte* p = nullptr;
  {
    SizeClass& sc = Classes()[c];
    std::lock_guard lock(sc.mu);
    if (!sc.free.empty()) {
      p = sc.free.back();
      sc.free.pop_back();
      kept.fetch_sub(ClassBytes(c), std::memory_order_relaxed);
    }
  }
  if (p == nullptr) {
    void* m = ::mmap(nullptr, ClassBytes(c), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (m == MAP_FAILED) return std::shared_ptr<std::byte[]>(new std::byte[bytes]);
    p = static_cast<std::byte*>(m);
    mapped.fetch_add(1, std::memory_order_relaxed);
  }
  return std::shared_ptr<std::byte[]>(p, [c](std::byte* q) { Give(c, q); });
}

size_t RecvBuffersMapped() { return mapped.load(std::memory_order_relaxed); }

}  // namespace aquifer::client
