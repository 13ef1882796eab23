#include "client/cluster_map.h"

#include <algorithm>

#include "client/striping.h"
#include "common/handoff.h"

namespace aquifer::client {

Result<std::vector<ServerId>> ClusterMap::TargetsOf(const Layout& layout, uint64_t stripe) const {
  const uint32_t width = layout.k + layout.m;
  auto it = pg_tables.find(width);
  if (it == pg_tables.end() || it->second.empty()) {
    return Unavailable("no placement groups of width " + std::to_string(width));
  }
  Result<uint32_t> index = PgIndexOf(layout, stripe, static_cast<uint32_t>(it->second.size()));
  if (!index.ok()) return index.status();
  const auto& pg = it->second[*index];
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
  Result<uint32_t> index = PgIndexOf(layout, stripe, static_cast<uint32_t>(it->second.size()));
  if (!index.ok()) return index.status();
  out.pg_index = *index;
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
  return e == nullptr ? "" : HandoffDomain(id.value(), e->failure_domain);
}

std::vector<ServerId> ClusterMap::HandoffCandidates(
    uint32_t width, const StripePlacement& where, uint32_t position, size_t max,
    const std::vector<std::string>& exclude_domains, bool whatever_state) const {
  std::vector<HandoffServer> all;
  all.reserve(servers.size());
  for (const auto& [id, e] : servers) {
    all.push_back({id.value(), e.failure_domain,
                   whatever_state ? e.state != "removed"
                                  : e.up && (e.state.empty() || e.state == "in") &&
                                        !e.address.empty()});
  }
  std::vector<uint32_t> targets, pending;
  for (ServerId id : where.targets) targets.push_back(id.value());
  for (ServerId id : where.pending) pending.push_back(id.value());
  std::vector<ServerId> out;
  for (uint32_t id : HandoffOrder(width, where.pg_index, position, all, targets, pending,
                                  exclude_domains, max)) {
    out.push_back(ServerId(id));
  }
  return out;
}

}  // namespace aquifer::client
