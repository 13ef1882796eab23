// Typed ids that cross module boundaries. A raw integer id between modules is a review finding.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <string>

namespace aquifer {

// A strong wrapper over an integer id. `Tag` makes each id its own type.
template <class Tag, class Rep = uint64_t>
class StrongId {
 public:
  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep value) : value_(value) {}
  constexpr Rep value() const { return value_; }
  constexpr auto operator<=>(const StrongId&) const = default;
  std::string ToString() const { return std::to_string(value_); }

 private:
  Rep value_ = 0;
};

struct InodeTag {};
struct ServerTag {};
struct PgTag {};
struct SessionTag {};

// An inode number. 1 is the root directory (as FUSE expects); 0 is never a valid inode.
using InodeId = StrongId<InodeTag>;
// A data server's id, assigned by the metadata server at first registration; 0 is invalid.
using ServerId = StrongId<ServerTag, uint32_t>;
// An index into the placement-group table of one width (k + m).
using PgId = StrongId<PgTag, uint32_t>;
// A client session (one mount) at the metadata server; leases and locks belong to it.
using SessionId = StrongId<SessionTag>;

inline constexpr InodeId kRootInode{1};

// What one data server stores for one stripe position of one file.
struct ChunkId {
  InodeId inode;
  uint64_t stripe = 0;    // stripe index within the file
  uint32_t position = 0;  // 0..k-1 data units, k..k+m-1 parity units (or copy index)
  auto operator<=>(const ChunkId&) const = default;
  std::string ToString() const {
    return inode.ToString() + "/" + std::to_string(stripe) + "/" + std::to_string(position);
  }
};

}  // namespace aquifer

template <class Tag, class Rep>
struct std::hash<aquifer::StrongId<Tag, Rep>> {
  size_t operator()(const aquifer::StrongId<Tag, Rep>& id) const noexcept {
    return std::hash<Rep>()(id.value());
  }
};

template <>
struct std::hash<aquifer::ChunkId> {
  size_t operator()(const aquifer::ChunkId& c) const noexcept {
    uint64_t h = c.inode.value() * 0x9E3779B97F4A7C15ull;
    h ^= c.stripe + 0x7F4A7C15ull + (h << 6) + (h >> 2);
    h ^= c.position + (h << 6) + (h >> 2);
    return static_cast<size_t>(h);
  }
};
