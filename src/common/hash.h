// Small non-cryptographic hash helpers shared by the modules.
#pragma once

#include <cstdint>

namespace aquifer {

// The splitmix64 finaliser: maps a 64-bit value to a well-spread 64-bit value, deterministically
// (the same input gives the same output on every machine and run). Bijective, so distinct
// inputs never collide. Not cryptographic. Pure, no allocation; safe to call concurrently.
// Used for rendezvous placement scores, where the result must not change between releases.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace aquifer
