#include "client/cluster_map.h"

#include "client/striping.h"

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

const ServerEntry* ClusterMap::Find(ServerId id) const {
  auto it = servers.find(id);
  return it == servers.end() ? nullptr : &it->second;
}

}  // namespace aquifer::client
