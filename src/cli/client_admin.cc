// `aquifer client add|list|remove` (client_admin.h).
#include "cli/client_admin.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/printable.h"

namespace aquifer::cli {
namespace {

// Holds flock(LOCK_EX) on REGISTRY.lock while the registry is read, changed and replaced.
class RegistryLock {
 public:
  static Result<RegistryLock> Take(const std::string& registry) {
    const std::string path = registry + ".lock";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return Internal("open " + path + ": " + std::strerror(errno));
    if (::flock(fd, LOCK_EX) != 0) {
      const int err = errno;
      ::close(fd);
      return Internal("lock " + path + ": " + std::strerror(err));
    }
    return RegistryLock(fd);
  }
  RegistryLock(RegistryLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  RegistryLock& operator=(RegistryLock&&) = delete;
  ~RegistryLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }

 private:
  explicit RegistryLock(int fd) : fd_(fd) {}
  int fd_;
};

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
  const std::string text = FormatClientRegistry(exports);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Internal("create " + tmp + ": " + std::strerror(errno));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), registry.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Internal("write " + registry + ": " + std::strerror(ok ? errno : err));
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

  Result<RegistryLock> lock = RegistryLock::Take(registry);
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
  Result<RegistryLock> lock = RegistryLock::Take(registry);
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
