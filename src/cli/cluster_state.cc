#include "cli/cluster_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace aquifer::cli {

namespace {

using Json = nlohmann::json;

Status Bad(const std::string& field, const std::string& what) {
  return InvalidArgument("cluster.json: " + field + ": " + what);
}

// Reads an integer field in [lo, hi]. A missing field keeps *out unless `required`.
Status GetInt(const Json& obj, const std::string& key, const std::string& where, int64_t lo,
              int64_t hi, bool required, int64_t* out) {
  auto it = obj.find(key);
  const std::string field = where.empty() ? key : where + "." + key;
  if (it == obj.end()) return required ? Bad(field, "missing") : OkStatus();
  if (!it->is_number_integer()) return Bad(field, "expected an integer");
  // Compare in the unsigned domain when the stored value is a large unsigned integer.
  if (it->is_number_unsigned()) {
    uint64_t v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(hi)) return Bad(field, "out of range");
    *out = static_cast<int64_t>(v);
  } else {
    int64_t v = it->get<int64_t>();
    if (v < lo || v > hi) {
      return Bad(field, lo == 0 ? "expected a non-negative integer" : "out of range");
    }
    *out = v;
  }
  if (*out < lo) return Bad(field, "out of range");
  return OkStatus();
}

Status GetString(const Json& obj, const std::string& key, const std::string& where,
                 bool required, std::string* out) {
  auto it = obj.find(key);
  const std::string field = where.empty() ? key : where + "." + key;
  if (it == obj.end()) return required ? Bad(field, "missing") : OkStatus();
  if (!it->is_string()) return Bad(field, "expected a string");
  *out = it->get<std::string>();
  return OkStatus();
}

Status CheckAddress(const std::string& address, const std::string& field) {
  if (address.empty()) return OkStatus();
  Result<uint16_t> port = PortOf(address);
  if (!port.ok()) return Bad(field, port.status().message());
  return OkStatus();
}

Status CheckAbsolute(const std::string& path, const std::string& field, bool required) {
  if (path.empty()) return required ? Bad(field, "missing") : OkStatus();
  if (path[0] != '/') return Bad(field, "expected an absolute path, got '" + path + "'");
  return OkStatus();
}

}  // namespace

Result<uint16_t> PortOf(std::string_view address) {
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidArgument("expected HOST:PORT, got '" + std::string(address) + "'");
  }
  std::string_view digits = address.substr(colon + 1);
  if (digits.empty() || digits.size() > 5) {
    return InvalidArgument("bad port in '" + std::string(address) + "'");
  }
  uint32_t port = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return InvalidArgument("bad port in '" + std::string(address) + "'");
    port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  if (port == 0 || port > 65535) {
    return InvalidArgument("port out of range in '" + std::string(address) + "'");
  }
  return static_cast<uint16_t>(port);
}

Result<ClusterState> ParseClusterState(std::string_view json_text) {
  Json j = Json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("cluster.json: not valid JSON");
  if (!j.is_object()) return InvalidArgument("cluster.json: expected a JSON object");
  ClusterState s;
  int64_t v = 0;
  AQ_RETURN_IF_ERROR(GetInt(j, "version", "", 0, INT32_MAX, true, &v));
  if (v != ClusterState::kVersion) {
    return Bad("version", "unsupported version " + std::to_string(v) + " (this aquifer reads " +
                              std::to_string(ClusterState::kVersion) + ")");
  }
  AQ_RETURN_IF_ERROR(GetString(j, "root", "", true, &s.root));
  AQ_RETURN_IF_ERROR(CheckAbsolute(s.root, "root", true));
  v = s.k;
  AQ_RETURN_IF_ERROR(GetInt(j, "k", "", 1, 255, false, &v));
  s.k = static_cast<uint32_t>(v);
  v = s.m;
  AQ_RETURN_IF_ERROR(GetInt(j, "m", "", 0, 255, false, &v));
  s.m = static_cast<uint32_t>(v);
  v = static_cast<int64_t>(s.unit_bytes);
  AQ_RETURN_IF_ERROR(GetInt(j, "unit_bytes", "", 1, INT64_MAX, false, &v));
  s.unit_bytes = static_cast<uint64_t>(v);
  if (auto tls = j.find("tls"); tls != j.end()) {
    if (!tls->is_boolean()) return Bad("tls", "expected true or false");
    s.tls = tls->get<bool>();
  }

  auto meta = j.find("meta");
  if (meta == j.end() || !meta->is_object()) return Bad("meta", "expected an object");
  v = 0;
  AQ_RETURN_IF_ERROR(GetInt(*meta, "pid", "meta", 0, INT32_MAX, false, &v));
  s.meta.pid = static_cast<int>(v);
  AQ_RETURN_IF_ERROR(GetString(*meta, "address", "meta", false, &s.meta.address));
  AQ_RETURN_IF_ERROR(CheckAddress(s.meta.address, "meta.address"));
  AQ_RETURN_IF_ERROR(GetString(*meta, "db", "meta", true, &s.meta.db));
  AQ_RETURN_IF_ERROR(CheckAbsolute(s.meta.db, "meta.db", true));
  AQ_RETURN_IF_ERROR(GetString(*meta, "log", "meta", false, &s.meta.log));
  if (auto extra = meta->find("extra_args"); extra != meta->end()) {
    if (!extra->is_array()) return Bad("meta.extra_args", "expected an array of strings");
    for (const Json& a : *extra) {
      if (!a.is_string()) return Bad("meta.extra_args", "expected an array of strings");
      s.meta.extra_args.push_back(a.get<std::string>());
    }
  }

  auto servers = j.find("data_servers");
  if (servers == j.end() || !servers->is_array()) {
    return Bad("data_servers", "expected an array");
  }
  std::set<int> seen;
  for (size_t i = 0; i < servers->size(); ++i) {
    const Json& d = (*servers)[i];
    const std::string where = "data_servers[" + std::to_string(i) + "]";
    if (!d.is_object()) return Bad(where, "expected an object");
    DataServerRecord r;
    v = 0;
    AQ_RETURN_IF_ERROR(GetInt(d, "index", where, 1, 65535, true, &v));
    r.index = static_cast<int>(v);
    if (!seen.insert(r.index).second) {
      return Bad(where + ".index", "duplicate index " + std::to_string(r.index));
    }
    AQ_RETURN_IF_ERROR(GetString(d, "failure_domain", where, true, &r.failure_domain));
    if (r.failure_domain.empty()) return Bad(where + ".failure_domain", "empty");
    AQ_RETURN_IF_ERROR(GetString(d, "dir", where, true, &r.dir));
    AQ_RETURN_IF_ERROR(CheckAbsolute(r.dir, where + ".dir", true));
    v = 0;
    AQ_RETURN_IF_ERROR(GetInt(d, "pid", where, 0, INT32_MAX, false, &v));
    r.pid = static_cast<int>(v);
    AQ_RETURN_IF_ERROR(GetString(d, "address", where, false, &r.address));
    AQ_RETURN_IF_ERROR(CheckAddress(r.address, where + ".address"));
    v = 0;
    AQ_RETURN_IF_ERROR(GetInt(d, "capacity_bytes", where, 0, INT64_MAX, false, &v));
    r.capacity_bytes = static_cast<uint64_t>(v);
    AQ_RETURN_IF_ERROR(GetString(d, "log", where, false, &r.log));
    if (auto rm = d.find("removed"); rm != d.end()) {
      if (!rm->is_boolean()) return Bad(where + ".removed", "expected true or false");
      r.removed = rm->get<bool>();
    }
    s.data_servers.push_back(std::move(r));
  }

  auto mount = j.find("mount");
  if (mount != j.end()) {
    if (!mount->is_object()) return Bad("mount", "expected an object");
    AQ_RETURN_IF_ERROR(GetString(*mount, "dir", "mount", false, &s.mount.dir));
    AQ_RETURN_IF_ERROR(CheckAbsolute(s.mount.dir, "mount.dir", false));
    v = 0;
    AQ_RETURN_IF_ERROR(GetInt(*mount, "pid", "mount", 0, INT32_MAX, false, &v));
    s.mount.pid = static_cast<int>(v);
    AQ_RETURN_IF_ERROR(GetString(*mount, "log", "mount", false, &s.mount.log));
  }
  return s;
}

std::string SerializeClusterState(const ClusterState& s) {
  Json j;
  j["version"] = ClusterState::kVersion;
  j["root"] = s.root;
  j["k"] = s.k;
  j["m"] = s.m;
  j["unit_bytes"] = s.unit_bytes;
  j["meta"] = {{"pid", s.meta.pid}, {"address", s.meta.address}, {"db", s.meta.db},
               {"log", s.meta.log}};
  if (!s.meta.extra_args.empty()) j["meta"]["extra_args"] = s.meta.extra_args;
  Json servers = Json::array();
  for (const DataServerRecord& r : s.data_servers) {
    servers.push_back({{"index", r.index}, {"failure_domain", r.failure_domain}, {"dir", r.dir},
                       {"pid", r.pid}, {"address", r.address},
                       {"capacity_bytes", r.capacity_bytes}, {"log", r.log}});
    if (r.removed) servers.back()["removed"] = true;
  }
  j["data_servers"] = std::move(servers);
  j["mount"] = {{"dir", s.mount.dir}, {"pid", s.mount.pid}, {"log", s.mount.log}};
  if (s.tls) j["tls"] = true;
  return j.dump(2) + "\n";
}

Result<ClusterState> LoadClusterState(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return NotFound("no cluster record at " + path);
    return Internal("cannot read " + path + ": " + std::strerror(errno));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  Result<ClusterState> s = ParseClusterState(ss.str());
  if (!s.ok()) return s.status().WithPrefix(path);
  return s;
}

Status SaveClusterState(const std::string& path, const ClusterState& state) {
  const std::string tmp = path + ".tmp";
  const std::string text = SerializeClusterState(state);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("cannot create " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return Internal("cannot write " + tmp + ": " + std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    return Internal("cannot sync " + tmp + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return Internal("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  }
  return OkStatus();
}

bool operator==(const MetaRecord& a, const MetaRecord& b) {
  return a.pid == b.pid && a.address == b.address && a.db == b.db && a.log == b.log &&
         a.extra_args == b.extra_args;
}
bool operator==(const DataServerRecord& a, const DataServerRecord& b) {
  return a.index == b.index && a.failure_domain == b.failure_domain && a.dir == b.dir &&
         a.pid == b.pid && a.address == b.address && a.capacity_bytes == b.capacity_bytes &&
         a.log == b.log && a.removed == b.removed;
}
bool operator==(const MountRecord& a, const MountRecord& b) {
  return a.dir == b.dir && a.pid == b.pid && a.log == b.log;
}
bool operator==(const ClusterState& a, const ClusterState& b) {
  return a.root == b.root && a.k == b.k && a.m == b.m && a.unit_bytes == b.unit_bytes &&
         a.tls == b.tls && a.meta == b.meta && a.data_servers == b.data_servers && a.mount == b.mount;
}

}  // namespace aquifer::cli
