#include "common/allocator.h"

#include <malloc.h>

#include <algorithm>
#include <thread>

namespace aquifer {

void TuneAllocator() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  mallopt(M_ARENA_MAX, static_cast<int>(4 * cores));
}

}  // namespace aquifer
