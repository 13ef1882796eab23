// Bad frames made from good ones, for the wire's fuzz tests (wire_fuzz_test.cc) and the live
// flood (wire_flood.cc): truncations, extensions, bit flips, random bytes, and length fields set
// past their limits. Deterministic for a given std::mt19937_64 state, so a seed replays a run.
// Header-only; no gtest.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace aquifer::wire::testing {

using Bytes = std::vector<std::byte>;

enum class Mutation : uint8_t {
  kTruncated,     // a prefix of the frame, 0..size-1 bytes
  kExtended,      // the frame plus 1..size random bytes
  kBitFlips,      // 1..4 random bits flipped
  kByteSet,       // 1..4 random bytes set to 0x00, 0xff, 0x80 or a random value
  kRandom,        // random bytes of the frame's size
  kRandomLength,  // random bytes of 0..2*size bytes
  kCount
};

inline const char* MutationName(Mutation m) {
  switch (m) {
    case Mutation::kTruncated: return "truncated";
    case Mutation::kExtended: return "extended";
    case Mutation::kBitFlips: return "bit-flips";
    case Mutation::kByteSet: return "byte-set";
    case Mutation::kRandom: return "random";
    case Mutation::kRandomLength: return "random-length";
    case Mutation::kCount: break;
  }
  return "?";
}

inline std::byte RandomByte(std::mt19937_64& random) { return static_cast<std::byte>(random()); }

// `valid` changed by `m`. kBitFlips and kByteSet may, rarely, give back a frame that is still
// valid (a flip of a field where every value is legal); callers judge by decoding.
inline Bytes Mutate(std::span<const std::byte> valid, Mutation m, std::mt19937_64& random) {
  Bytes f(valid.begin(), valid.end());
  const size_t n = f.size();
  switch (m) {
    case Mutation::kTruncated:
      f.resize(n == 0 ? 0 : random() % n);
      break;
    case Mutation::kExtended: {
      const size_t extra = 1 + random() % std::max<size_t>(n, 1);
      for (size_t i = 0; i < extra; ++i) f.push_back(RandomByte(random));
      break;
    }
    case Mutation::kBitFlips:
      for (int i = 0, k = 1 + static_cast<int>(random() % 4); i < k && n > 0; ++i) {
        f[random() % n] ^= static_cast<std::byte>(1u << (random() % 8));
      }
      break;
    case Mutation::kByteSet:
      for (int i = 0, k = 1 + static_cast<int>(random() % 4); i < k && n > 0; ++i) {
        static constexpr uint8_t kValues[] = {0x00, 0xff, 0x80, 0x7f};
        const uint64_t pick = random() % 5;
        f[random() % n] = pick < 4 ? std::byte{kValues[pick]} : RandomByte(random);
      }
      break;
    case Mutation::kRandom:
      for (auto& b : f) b = RandomByte(random);
      break;
    case Mutation::kRandomLength:
      f.resize(random() % (2 * n + 1));
      for (auto& b : f) b = RandomByte(random);
      break;
    case Mutation::kCount:
      break;
  }
  return f;
}

inline Mutation RandomMutation(std::mt19937_64& random) {
  return static_cast<Mutation>(random() % static_cast<uint64_t>(Mutation::kCount));
}

// Little-endian store of the low `bytes` bytes of `value` at `at` (for length fields).
inline void PutLe(Bytes& f, size_t at, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes && at + i < f.size(); ++i) {
    f[at + i] = static_cast<std::byte>(value >> (8 * i));
  }
}

inline std::string Hex(std::span<const std::byte> f) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::byte b : f) {
    out += kHex[std::to_integer<uint8_t>(b) >> 4];
    out += kHex[std::to_integer<uint8_t>(b) & 15];
  }
  return out;
}

}  // namespace aquifer::wire::testing
