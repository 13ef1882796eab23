// Striping arithmetic of the client: where a file byte lives, which rule (replicated or
// erasure-coded) a stripe follows, and which placement group holds it. Pure functions, no I/O.
// See docs/design.md, "Layout and placement" and "Stripes: erasure-coded or replicated".
#pragma once

#include <cstdint>
#include <vector>

#include "aquifer/client.h"
#include "aquifer/ids.h"
#include "aquifer/status.h"

namespace aquifer::client {

// A file byte offset split into (stripe index, byte offset inside the stripe).
struct StripeOffset {
  uint64_t stripe = 0;
  uint64_t offset_in_stripe_bytes = 0;  // 0..stripe_bytes-1
};

// Splits `offset_bytes` of a file with `layout` (stripe_bytes() > 0).
StripeOffset LocateStripe(const Layout& layout, uint64_t offset_bytes);

// A byte offset inside a stripe split into (position of the data chunk, offset inside it).
struct UnitOffset {
  uint32_t position = 0;         // data position 0..k-1
  uint64_t offset_in_unit_bytes = 0;
};
UnitOffset LocateUnit(const Layout& layout, uint64_t offset_in_stripe_bytes);

// Bytes of a file of `file_size_bytes` that fall inside stripe `stripe` (0 past the end;
// stripe_bytes() for every stripe before the last).
uint64_t StripeLength(const Layout& layout, uint64_t file_size_bytes, uint64_t stripe);

// Number of stripes a file of `file_size_bytes` spans (ceil(size / stripe_bytes)).
uint64_t StripeCount(const Layout& layout, uint64_t file_size_bytes);

// The rule of docs/design.md: a stripe holding fewer than unit_bytes bytes is replicated
// (m + 1 copies at positions 0..m); otherwise it is erasure coded. `stripe_len_bytes` > 0.
bool IsReplicated(const Layout& layout, uint64_t stripe_len_bytes);

// Length of the chunk stored at data position `position` (< k) of an erasure-coded stripe of
// `stripe_len_bytes`: the unit clipped to the stripe's bytes (may be 0 at a file's tail).
uint64_t DataChunkLength(const Layout& layout, uint64_t stripe_len_bytes, uint32_t position);

// Index of the placement group of stripe `stripe` in the table of width k + m that has
// `table_size` entries (> 0): (pg_start + stripe) % pg_count (pg_count 0, a legacy layout:
// the table's size). Errors: kUnavailable when pg_count > table_size: the table is older than
// the file (tables only grow, docs/repair.md), and the PG the file names is not in it yet;
// the caller fetches a fresh cluster map. (Folding the index into the smaller table sent a
// reader with a map from before a PG table grew to another PG's servers, which found nothing
// and called a whole file lost.)
Result<uint32_t> PgIndexOf(const Layout& layout, uint64_t stripe, uint32_t table_size);

// Checks a layout: 1 <= k <= 16, 1 <= m <= 4, 0 < unit_bytes <= 16 MiB, pg_count > 0.
Status ValidateLayout(const Layout& layout);

}  // namespace aquifer::client
