#include "client/striping.h"

#include <algorithm>

#include "aquifer/units.h"

namespace aquifer::client {

StripeOffset LocateStripe(const Layout& layout, uint64_t offset_bytes) {
  const uint64_t sb = layout.stripe_bytes();
  return StripeOffset{offset_bytes / sb, offset_bytes % sb};
}

UnitOffset LocateUnit(const Layout& layout, uint64_t offset_in_stripe_bytes) {
  return UnitOffset{static_cast<uint32_t>(offset_in_stripe_bytes / layout.unit_bytes),
                    offset_in_stripe_bytes % layout.unit_bytes};
}

uint64_t StripeLength(const Layout& layout, uint64_t file_size_bytes, uint64_t stripe) {
  const uint64_t sb = layout.stripe_bytes();
  const uint64_t begin = stripe * sb;
  if (file_size_bytes <= begin) return 0;
  return std::min(sb, file_size_bytes - begin);
}

uint64_t StripeCount(const Layout& layout, uint64_t file_size_bytes) {
  const uint64_t sb = layout.stripe_bytes();
  return (file_size_bytes + sb - 1) / sb;
}

bool IsReplicated(const Layout& layout, uint64_t stripe_len_bytes) {
  return stripe_len_bytes < layout.unit_bytes;
}

uint64_t DataChunkLength(const Layout& layout, uint64_t stripe_len_bytes, uint32_t position) {
  const uint64_t begin = uint64_t{position} * layout.unit_bytes;
  if (stripe_len_bytes <= begin) return 0;
  return std::min<uint64_t>(layout.unit_bytes, stripe_len_bytes - begin);
}

Result<uint32_t> PgIndexOf(const Layout& layout, uint64_t stripe, uint32_t table_size) {
  if (table_size == 0) return Unavailable("no placement groups");
  if (layout.pg_count > table_size) {
    return Unavailable("the cluster map has " + std::to_string(table_size) +
                       " placement groups of width " + std::to_string(layout.k + layout.m) +
                       ", the file's layout names " + std::to_string(layout.pg_count) +
                       " (the map is older than the file)");
  }
  const uint64_t count = layout.pg_count == 0 ? table_size : layout.pg_count;
  return static_cast<uint32_t>((uint64_t{layout.pg_start} + stripe % count) % count);
}

Status ValidateLayout(const Layout& layout) {
  if (layout.k < 1 || layout.k > 16) return InvalidArgument("layout k must be 1..16");
  if (layout.m < 1 || layout.m > 4) return InvalidArgument("layout m must be 1..4");
  if (layout.unit_bytes == 0 || layout.unit_bytes > kMaxStripeUnitBytes) {
    return InvalidArgument("layout unit_bytes must be 1..16 MiB");
  }
  if (layout.pg_count == 0) return InvalidArgument("layout pg_count must be > 0");
  return OkStatus();
}

}  // namespace aquifer::client
