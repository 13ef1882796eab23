// Hand-off candidate order (docs/design.md "Hand-off to a spare failure domain"): where a
// writer puts a chunk whose target could not take it, where readers and repair look for it.
// Shared by the client (ClusterMap) and the data server (pg_sync), which must agree.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/hash.h"

namespace aquifer {

// One server of the cluster map as the ranking sees it.
struct HandoffServer {
  uint32_t id = 0;
  std::string failure_domain;  // "" = its own domain
  bool eligible = false;       // up, state "in" (or unknown), with an address
};

// The failure domain a ranking compares: the label, or "#<id>" for a server without one.
inline std::string HandoffDomain(uint32_t id, const std::string& failure_domain) {
  return failure_domain.empty() ? "#" + std::to_string(id) : failure_domain;
}

// How many hand-off candidates a writer tries for one chunk, and readers, backfill and moves ask.
inline constexpr size_t kMaxHandoffCandidates = 3;

// Servers that may hold a hand-off copy of position `position` of PG `pg` in the table of width
// `width`, best first, at most `max` ids: eligible, neither in `targets` (the PG's width target
// ids) nor in `pending` (empty, or width ids, 0 = none), and in no failure domain of another
// position's target or pending target, nor in `exclude_domains` (earlier hand-offs of the same
// stripe). Domains come from `servers` (an id it does not list is its own domain). Ranked by the
// rendezvous score the metadata server's repair uses (moves.cc), ties by id. Pure; cost
// O(servers * width).
inline std::vector<uint32_t> HandoffOrder(uint32_t width, uint32_t pg, uint32_t position,
                                          std::span<const HandoffServer> servers,
                                          std::span<const uint32_t> targets,
                                          std::span<const uint32_t> pending,
                                          std::span<const std::string> exclude_domains,
                                          size_t max) {
  auto domain_of = [&](uint32_t id) {
    for (const HandoffServer& s : servers) {
      if (s.id == id) return HandoffDomain(id, s.failure_domain);
    }
    return HandoffDomain(id, "");
  };
  std::vector<uint32_t> members(targets.begin(), targets.end());
  std::vector<std::string> used(exclude_domains.begin(), exclude_domains.end());
  for (uint32_t j = 0; j < targets.size(); ++j) {
    const uint32_t p = j < pending.size() ? pending[j] : 0;
    if (p != 0) members.push_back(p);
    if (j == position) continue;  // the missing position's own domain may hold it
    used.push_back(domain_of(targets[j]));
    if (p != 0) used.push_back(domain_of(p));
  }
  const uint64_t seed = Mix64((uint64_t{width} << 40) ^ (uint64_t{pg} << 8) ^ position);
  std::vector<std::pair<uint64_t, uint32_t>> scored;
  for (const HandoffServer& s : servers) {
    if (!s.eligible) continue;
    if (std::find(members.begin(), members.end(), s.id) != members.end()) continue;
    if (std::find(used.begin(), used.end(), HandoffDomain(s.id, s.failure_domain)) != used.end()) {
      continue;
    }
    scored.emplace_back(Mix64(seed ^ s.id), s.id);
  }
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<uint32_t> out;
  for (const auto& [score, id] : scored) {
    if (out.size() >= max) break;
    out.push_back(id);
  }
  return out;
}

}  // namespace aquifer
