// StripeMap: which stripes of a file some committed write stored, and below which chunk version
// a stripe's chunks are leftovers of a truncate. The metadata server keeps one per regular file
// (in its inode record) and sends it with the file's attributes; readers use it to tell a hole
// from lost data and to ignore chunks a truncate cut away (docs/design.md "Recorded holes").
//
// Shape: sorted, disjoint, non-adjacent-with-equal-floor extents [begin_stripe, end_stripe),
// each with a floor version: a chunk of a stripe in the extent is file data only if its version
// is > floor_version. A stripe in no extent was never written since its last truncate: a hole
// (zeros). At most kMaxExtents extents; a map that would need more becomes "unknown", and so is
// the map of an inode recorded before maps existed: holes are then inferred from the data
// servers' answers as before (docs/design.md "Known limits").
// A plain value type; not thread-safe (copy it, or share it const).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "aquifer/status.h"

namespace aquifer {

struct StripeExtent {
  uint64_t begin_stripe = 0;
  uint64_t end_stripe = 0;     // exclusive; > begin_stripe
  uint64_t floor_version = 0;  // chunks at or below this version are not this stripe's data
  bool operator==(const StripeExtent&) const = default;
};

// What a StripeMap says of one stripe.
// Inclusive ranges [first, last] of versions a writer was handed and never committed before its
// session ended (a crash): chunks at them are never file data (docs/design.md "Abandoned
// versions").
using VersionRanges = std::vector<std::pair<uint64_t, uint64_t>>;

struct StripeRecord {
  bool known = false;          // false: no record (legacy or overflowed map): infer holes
  bool written = true;         // known only: some committed write stored the stripe
  uint64_t floor_version = 0;  // written only: chunks at or below this version are leftovers
  const VersionRanges* abandoned = nullptr;  // the file's abandoned versions (null: none)
  // Whether a read that finds no chunk of a written stripe logs and reports it as lost. False
  // for a read that falls back to a newer view when it fails (a replaced read view).
  bool report_loss = true;
  // Whether a chunk at `version` may be this stripe's data.
  bool Usable(uint64_t version) const {
    if (known && version <= floor_version) return false;
    if (abandoned != nullptr) {
      for (const auto& [first, last] : *abandoned) {
        if (first <= version && version <= last) return false;
      }
    }
    return true;
  }
  // The highest usable version at or below `version` as far as abandoned ranges go (0: none).
  uint64_t SkipAbandoned(uint64_t version) const {
    for (bool moved = true; moved && version > 0;) {
      moved = false;
      if (abandoned == nullptr) break;
      for (const auto& [first, last] : *abandoned) {
        if (first <= version && version <= last) {
          version = first - 1;
          moved = true;
        }
      }
    }
    return version;
  }
};

class StripeMap {
 public:
  static constexpr size_t kMaxExtents = 1024;

  StripeMap() = default;  // known, nothing written: a new, empty file
  static StripeMap Unknown();
  // Validates extents from a disk record or the wire. Errors: kInvalidArgument when extents are
  // empty ranges, unsorted, overlapping, or more than kMaxExtents.
  static Result<StripeMap> FromExtents(std::vector<StripeExtent> extents, bool known);

  bool known() const { return known_; }
  const std::vector<StripeExtent>& extents() const { return extents_; }

  // Records stripes [begin, end) as written. Stripes already recorded keep their floor (their
  // chunks above it are still the data); new ones get `floor_version`. An empty range does
  // nothing. Past kMaxExtents the map becomes unknown.
  void AddWritten(uint64_t begin, uint64_t end, uint64_t floor_version);
  // Forgets every stripe >= `stripe` (a truncate that cut them).
  void CutFrom(uint64_t stripe);
  // Whether any stripe >= `stripe` is recorded.
  bool AnyFrom(uint64_t stripe) const;
  // The record of stripe `stripe`. O(log extents).
  StripeRecord Find(uint64_t stripe) const;
  // Recorded stripes in [begin, end), as extents clipped to it (for fsck).
  std::vector<StripeExtent> Within(uint64_t begin, uint64_t end) const;

  bool operator==(const StripeMap&) const = default;

 private:
  bool known_ = true;
  std::vector<StripeExtent> extents_;
};

}  // namespace aquifer
