#include "aquifer/stripe_map.h"

#include <algorithm>
#include <string>

namespace aquifer {

StripeMap StripeMap::Unknown() {
  StripeMap map;
  map.known_ = false;
  return map;
}

Result<StripeMap> StripeMap::FromExtents(std::vector<StripeExtent> extents, bool known) {
  if (extents.size() > kMaxExtents) {
    return InvalidArgument("stripe map has " + std::to_string(extents.size()) +
                           " extents, more than " + std::to_string(kMaxExtents));
  }
  if (!known && !extents.empty()) return InvalidArgument("an unknown stripe map has extents");
  for (size_t i = 0; i < extents.size(); ++i) {
    const StripeExtent& e = extents[i];
    if (e.begin_stripe >= e.end_stripe) {
      return InvalidArgument("stripe map extent " + std::to_string(i) + " is empty");
    }
    if (i > 0 && extents[i - 1].end_stripe > e.begin_stripe) {
      return InvalidArgument("stripe map extents " + std::to_string(i - 1) + " and " +
                             std::to_string(i) + " overlap or are out of order");
    }
  }
  StripeMap map;
  map.known_ = known;
  map.extents_ = std::move(extents);
  return map;
}

void StripeMap::AddWritten(uint64_t begin, uint64_t end, uint64_t floor_version) {
  if (!known_ || begin >= end) return;
  std::vector<StripeExtent> out;
  out.reserve(extents_.size() + 2);
  uint64_t at = begin;  // [at, end) is what is still to place
  for (const StripeExtent& e : extents_) {
    if (at < end && e.begin_stripe > at) {
      out.push_back({at, std::min(end, e.begin_stripe), floor_version});
    }
    out.push_back(e);
    if (e.end_stripe > at) at = std::max(at, e.end_stripe);
  }
  if (at < end) out.push_back({at, end, floor_version});
  // Merge neighbours that touch and share a floor.
  std::vector<StripeExtent> merged;
  merged.reserve(out.size());
  for (const StripeExtent& e : out) {
    if (!merged.empty() && merged.back().end_stripe == e.begin_stripe &&
        merged.back().floor_version == e.floor_version) {
      merged.back().end_stripe = e.end_stripe;
    } else {
      merged.push_back(e);
    }
  }
  if (merged.size() > kMaxExtents) {
    *this = Unknown();
    return;
  }
  extents_ = std::move(merged);
}

void StripeMap::CutFrom(uint64_t stripe) {
  while (!extents_.empty() && extents_.back().begin_stripe >= stripe) extents_.pop_back();
  if (!extents_.empty() && extents_.back().end_stripe > stripe) extents_.back().end_stripe = stripe;
}

bool StripeMap::AnyFrom(uint64_t stripe) const {
  return !extents_.empty() && extents_.back().end_stripe > stripe;
}

StripeRecord StripeMap::Find(uint64_t stripe) const {
  if (!known_) return StripeRecord{};
  // The first extent ending after `stripe`.
  auto it = std::upper_bound(extents_.begin(), extents_.end(), stripe,
                             [](uint64_t s, const StripeExtent& e) { return s < e.end_stripe; });
  if (it == extents_.end() || it->begin_stripe > stripe) {
    return StripeRecord{.known = true, .written = false, .floor_version = 0};
  }
  return StripeRecord{.known = true, .written = true, .floor_version = it->floor_version};
}

std::vector<StripeExtent> StripeMap::Within(uint64_t begin, uint64_t end) const {
  std::vector<StripeExtent> out;
  for (const StripeExtent& e : extents_) {
    const uint64_t b = std::max(begin, e.begin_stripe), x = std::min(end, e.end_stripe);
    if (b < x) out.push_back({b, x, e.floor_version});
  }
  return out;
}

}  // namespace aquifer
