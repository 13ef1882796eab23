// The client's copy of the cluster map: data servers (address, up/down) and the placement-group
// tables, as fetched from aquifer-meta's GetClusterMap. Plain data plus lookups; no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "aquifer/client.h"
#include "aquifer/ids.h"
#include "aquifer/status.h"

namespace aquifer::client {

struct ServerEntry {
  ServerId id;
  std::string address;          // host:port of the data server
  std::string failure_domain;
  bool up = false;              // the metadata server hears its heartbeats
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  std::string state;            // "in", "draining" or "removed" (empty from an older server)
  uint32_t pg_positions = 0;    // PG positions it is the target of, all widths
  uint64_t chunks_scrubbed = 0; // scrub totals from its heartbeats (since it started)
  uint64_t corrupt_found = 0;
  uint64_t corrupt_repaired = 0;
};

// Where one stripe lives: its placement group's index in the table of width k + m, the current
// target of each position (readers use these) and the pending target of each position (a move
// in flight: writers also write there; ServerId 0 = none). Both have k + m entries.
struct StripePlacement {
  uint32_t pg_index = 0;
  std::vector<ServerId> targets;
  std::vector<ServerId> pending;
};

struct ClusterMap {
  uint64_t version = 0;
  std::map<ServerId, ServerEntry> servers;
  // width (k + m) -> placement groups, each an ordered list of width target server ids.
  std::map<uint32_t, std::vector<std::vector<ServerId>>> pg_tables;
  // width -> per placement group: empty, or width entries, each 0 or the pending target of that
  // position (docs/repair.md). Same shape as pg_tables.
  std::map<uint32_t, std::vector<std::vector<ServerId>>> pg_pending;
  uint32_t default_k = 0;
  uint32_t default_m = 0;
  uint32_t default_unit_bytes = 0;

  // The k + m targets of stripe `stripe` of a file with `layout`, position i at index i.
  // Errors: kUnavailable when the map has no table of width k + m, a PG of the wrong width, or
  // fewer PGs than the layout's pg_count (a map older than the file: fetch a fresh one).
  Result<std::vector<ServerId>> TargetsOf(const Layout& layout, uint64_t stripe) const;

  // Targets and pending targets of stripe `stripe`. Errors: as TargetsOf.
  Result<StripePlacement> PlacementOf(const Layout& layout, uint64_t stripe) const;

  // The server's entry, or nullptr when unknown.
  const ServerEntry* Find(ServerId id) const;

  // Hand-off targets for position `position` of a stripe placed at `where` in the table of
  // width `width` (docs/design.md "Hand-off to a spare failure domain"): servers up and "in",
  // neither a target nor a pending target of that PG, in a failure domain that no other
  // position's target or pending target uses, and not in `exclude_domains` (domains already
  // taken by other hand-offs of the same stripe). Ordered by the rendezvous score of
  // (width, pg, position, server), highest first, so writers and readers agree on the order;
  // at most `max` of them. Empty when the cluster has no spare failure domain.
  // `whatever_state`: servers down, draining or without an address count too, removed ones do
  // not (a reader's search: the writer chose among the servers up in its map then, which the
  // reader cannot know).
  std::vector<ServerId> HandoffCandidates(uint32_t width, const StripePlacement& where,
                                          uint32_t position, size_t max,
                                          const std::vector<std::string>& exclude_domains = {},
                                          bool whatever_state = false) const;
  // The failure domain of server `id` (its id when the map gives none; "" when unknown).
  std::string DomainOf(ServerId id) const;
};

}  // namespace aquifer::client
