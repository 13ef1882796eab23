// `aquifer client add|list|remove` (client_admin.h).
#include "cli/client_admin.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli/file_lock.h"
#include "common/cluster_key.h"
#include "common/printable.h"

namespace aquifer::cli {
namespace {

// Held while the registry is read, changed and replaced (REGISTRY.lock).
Result<FileLock> LockRegistry(const std::string& registry) {
  return FileLock::Acquire(registry + ".lock", 0600);
}

Result<std::vector<ClientExport>> LoadRegistry(const std::string& registry) {
  std::ifstream in(registry);
  if (!in) {
    if (errno == ENOENT) return std::vector<ClientExport>();
    return Internal("read " + registry + ": " + std::strerror(errno));
  }
  std::stringstream text;
  text << in.rdbuf();
  Result<std::vector<ClientExport>> parsed = ParseClientRegistry(text.str());
  if (!parsed.ok()) return InvalidArgument(registry + ": " + parsed.status().message());
  return parsed;
}

// Writes REGISTRY.tmp (0600), fsyncs it and renames it over the registry.
Status SaveRegistry(const std::string& registry, const std::vector<ClientExport>& exports) {
  const std::string tmp = registry + ".tmp";
  ::unlink(tmp.c_str());
  AQ_RETURN_IF_ERROR(WriteNewSecretFile(tmp, FormatClientRegistry(exports)));
  if (::rename(tmp.c_str(), registry.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Internal("rename " + tmp + " to " + registry + ": " + std::strerror(err));
  }
  return OkStatus();
}

}  // namespace

Status AddClient(const std::string& registry, const ClusterKey& cluster_key,
                 const ClientAddRequest& req, std::ostream& out) {
  AQ_RETURN_IF_ERROR(ValidateClientName(req.name));
  AQ_RETURN_IF_ERROR(ValidateExportPath(req.path));
  ClientExport e;
  e.who.name = req.name;
  e.who.read_only = req.read_only;
  e.path = req.path;
  e.root_squash = req.root_squash;
  if (req.allow.size() > kMaxAllowedNetworks) {
    return InvalidArgument("at most " + std::to_string(kMaxAllowedNetworks) + " --allow");
  }
  for (const std::string& a : req.allow) {
    Result<Network> n = ParseNetwork(a);
    if (!n.ok()) return n.status();
    e.allow.push_back(*n);
  }
  std::array<std::byte, kClientIdBytes> id;
  AQ_RETURN_IF_ERROR(RandomBytes(id));
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::byte b : id) {
    e.who.id_hex.push_back(kHex[static_cast<uint8_t>(b) >> 4]);
    e.who.id_hex.push_back(kHex[static_cast<uint8_t>(b) & 15]);
  }

  Result<FileLock> lock = LockRegistry(registry);
  if (!lock.ok()) return lock.status();
  Result<std::vector<ClientExport>> exports = LoadRegistry(registry);
  if (!exports.ok()) return exports.status();
  for (const ClientExport& x : *exports) {
    if (x.who.name == req.name) {
      return AlreadyExists("client " + req.name + " exists (aquifer client remove it first)");
    }
  }
  const ClientCredential credential{e.who, DeriveClientKey(cluster_key, e.who)};
  AQ_RETURN_IF_ERROR(WriteNewSecretFile(req.credential_file, FormatClientCredential(credential)));
  exports->push_back(e);
  if (Status saved = SaveRegistry(registry, *exports); !saved.ok()) {
    ::unlink(req.credential_file.c_str());
    return saved;
  }
  out << "added client " << e.who.name << " (" << (e.who.read_only ? "read-only" : "read-write")
      << (e.root_squash ? ", root squash" : "") << ", path " << Printable(e.path) << ")\n"
      << "credential " << Printable(req.credential_file)
      << " (0600; mount with aquifer-mount -o key=FILE)\n";
  return OkStatus();
}

Status ListClients(const std::string& registry, std::ostream& out) {
  Result<std::vector<ClientExport>> exports = LoadRegistry(registry);
  if (!exports.ok()) return exports.status();
  out << "NAME                 ACCESS  SQUASH  ALLOW                PATH\n";
  for (const ClientExport& e : *exports) {
    std::string allow;
    for (const Network& n : e.allow) allow += (allow.empty() ? "" : ",") + FormatNetwork(n);
    std::string name = Printable(e.who.name);
    name.resize(std::max<size_t>(name.size(), 20), ' ');
    if (allow.empty()) allow = "*";
    allow.resize(std::max<size_t>(allow.size(), 20), ' ');
    out << name << " " << (e.who.read_only ? "ro    " : "rw    ") << "  "
        << (e.root_squash ? "yes   " : "no    ") << "  " << allow << " " << Printable(e.path)
        << "\n";
  }
  return OkStatus();
}

Status RemoveClient(const std::string& registry, const std::string& name, std::ostream& out) {
  AQ_RETURN_IF_ERROR(ValidateClientName(name));
  Result<FileLock> lock = LockRegistry(registry);
  if (!lock.ok()) return lock.status();
  Result<std::vector<ClientExport>> exports = LoadRegistry(registry);
  if (!exports.ok()) return exports.status();
  const size_t before = exports->size();
  std::erase_if(*exports, [&](const ClientExport& e) { return e.who.name == name; });
  if (exports->size() == before) return NotFound("no client " + name + " in " + registry);
  AQ_RETURN_IF_ERROR(SaveRegistry(registry, *exports));
  out << "removed client " << name << ": its mounts fail within seconds\n";
  return OkStatus();
}

}  // namespace aquifer::cli
