#include "client/cluster_map.h"

#include <algorithm>

#include "client/striping.h"
#include "common/hash.h"

namespace aquifer::client {

Result<std::vector<ServerId>> ClusterMap::TargetsOf(const Layout& layout, uint64_t stripe) const {
  const uint32_t width = layout.k + layout.m;
  auto it = pg_tables.find(width);
  if (it == pg_tables.end() || it->second.empty()) {
    return Unavailable("no placement groups of width " + std::to_string(width));
  }
  const auto& pg = it->second[PgIndexOf(layout, stripe, static_cast<uint32_t>(it->second.size()))];
  if (pg.size() != width) {
    return Unavailable("placement group has " + std::to_string(pg.size()) + " targets, want " +
                       std::to_string(width));
  }
  return pg;
}

Result<StripePlacement> ClusterMap::PlacementOf(const Layout& layout, uint64_t stripe) const {
  const uint32_t width = layout.k + layout.m;
  auto it = pg_tables.find(width);
  if (it == pg_tables.end() || it->second.empty()) {
    return Unavailable("no placement groups of width " + std::to_string(width));
  }
  StripePlacement out;
  out.pg_index = PgIndexOf(layout, stripe, static_cast<uint32_t>(it->second.size()));
  out.targets = it->second[out.pg_index];
  if (out.targets.size() != width) {
    return Unavailable("placement group has " + std::to_string(out.targets.size()) +
                       " targets, want " + std::to_string(width));
  }
  out.pending.assign(width, ServerId(0));
  auto pending = pg_pending.find(width);
  if (pending != pg_pending.end() && out.pg_index < pending->second.size() &&
      pending->second[out.pg_index].size() == width) {
    out.pending = pending->second[out.pg_index];
  }
  return out;
}

const ServerEntry* ClusterMap::Find(ServerId id) const {
  auto it = servers.find(id);
  return it == servers.end() ? nullptr : &it->second;
}

std::string ClusterMap::DomainOf(ServerId id) const {
  const ServerEntry* e = Find(id);
  if (e == nullptr) return "";
  return e->failure_domain.empty() ? "#" + std::to_string(id.value()) : e->failure_domain;
}

std::vector<ServerId> ClusterMap::HandoffCandidates(
    uint32_t width, const StripePlacement& where, uint32_t position, size_t max,
    const std::vector<std::string>& exclude_domains) const {
  std::vector<std::string> used = exclude_domains;
  for (uint32_t j = 0; j < where.targets.size(); ++j) {
    if (j == position) continue;  // the missing position's own domain may hold it
    used.push_back(DomainOf(where.targets[j]));
    if (j < where.pending.size() && where.pending[j].value() != 0) {
      used.push_back(DomainOf(where.pending[j]));
    }
  }
  // The same score as the metadata server's repair choice (moves.cc), so a repair of the
  // position tends to pick the server already holding its hand-offs.
  const uint64_t seed =
      Mix64((uint64_t{width} << 40) ^ (uint64_t{where.pg_index} << 8) ^ position);
  std::vector<std::pair<uint64_t, ServerId>> scored;
  for (const auto& [id, e] : servers) {
    if (!e.up || (!e.state.empty() && e.state != "in") || e.address.empty()) continue;
    if (std::find(where.targets.begin(), where.targets.end(), id) != where.targets.end() ||
        std::find(where.pending.begin(), where.pending.end(), id) != where.pending.end()) {
      continue;
    }
    if (std::find(used.begin(), used.end(), DomainOf(id)) != used.end()) continue;
    scored.emplace_back(Mix64(seed ^ id.value()), id);
  }
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<ServerId> out;
  for (const auto& [score, id] : scored) {
    if (out.size() >= max) break;
    out.push_back(id);
  }
  return out;
}

}  // namespace aquifer::client
