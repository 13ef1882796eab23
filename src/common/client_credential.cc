// Client credentials, the export registry and the decisions on them (client_credential.h).
#include "common/client_credential.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <mutex>
#include <set>

namespace aquifer {
namespace {

constexpr std::string_view kCredentialTag = "aquifer-client-1";
constexpr char kHex[] = "0123456789abcdef";

std::string ToHex(std::span<const std::byte> in) {
  std::string out;
  for (std::byte b : in) {
    out.push_back(kHex[static_cast<uint8_t>(b) >> 4]);
    out.push_back(kHex[static_cast<uint8_t>(b) & 15]);
  }
  return out;
}

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool FromHex(std::string_view in, std::span<std::byte> out) {
  if (in.size() != out.size() * 2 || !IsLowerHex(in)) return false;
  for (size_t i = 0; i < out.size(); ++i) {
    auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    out[i] = static_cast<std::byte>(digit(in[2 * i]) << 4 | digit(in[2 * i + 1]));
  }
  return true;
}

// Splits on runs of spaces and tabs.
std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

std::string_view TrimEnd(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' ||
                        s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

Status ValidateIdHex(std::string_view id) {
  if (id.size() != kClientIdBytes * 2 || !IsLowerHex(id)) {
    return InvalidArgument("client id must be " + std::to_string(kClientIdBytes * 2) +
                           " lowercase hex digits");
  }
  return OkStatus();
}

Result<bool> ParseAccess(std::string_view s) {
  if (s == "ro") return true;
  if (s == "rw") return false;
  return InvalidArgument("access must be ro or rw");
}

std::mutex process_client_mu;
std::optional<ClientIdentity> process_client;  // guarded by process_client_mu

}  // namespace

std::optional<ClientIdentity> ProcessClientIdentity() {
  std::lock_guard lock(process_client_mu);
  return process_client;
}

void SetProcessClientIdentity(std::optional<ClientIdentity> who) {
  std::lock_guard lock(process_client_mu);
  process_client = std::move(who);
}

Status LoadKeyOrCredentialForProcess(const std::string& path, bool* is_client) {
  *is_client = false;
  SetProcessClientIdentity(std::nullopt);
  if (path.empty()) return LoadKeyForProcess(path);
  ClusterKey key;
  Result<std::optional<ClientCredential>> c = ReadKeyOrCredentialFile(path, &key);
  if (!c.ok()) return c.status();
  if (!c->has_value()) {
    SetProcessClusterKey(key);
    return OkStatus();
  }
  SetProcessClusterKey((*c)->key);
  SetProcessClientIdentity((*c)->who);
  *is_client = true;
  return OkStatus();
}

Status ValidateClientName(std::string_view name) {
  if (name.empty() || name.size() > kMaxClientNameBytes) {
    return InvalidArgument("client name must be 1.." + std::to_string(kMaxClientNameBytes) +
                           " bytes");
  }
  if (name.front() == '.') return InvalidArgument("client name must not start with '.'");
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return InvalidArgument("client name may hold only letters, digits, '_', '-', '.'");
  }
  return OkStatus();
}

std::string FormatClientIdentity(const ClientIdentity& who) {
  return "1:" + who.name + ":" + who.id_hex + ":" + (who.read_only ? "ro" : "rw");
}

Result<ClientIdentity> ParseClientIdentity(std::string_view text) {
  if (text.size() > 2 + kMaxClientNameBytes + 1 + kClientIdBytes * 2 + 3 ||
      text.substr(0, 2) != "1:") {
    return InvalidArgument("malformed client identity");
  }
  text.remove_prefix(2);
  const size_t a = text.find(':');
  if (a == std::string_view::npos) return InvalidArgument("malformed client identity");
  const size_t b = text.find(':', a + 1);
  if (b == std::string_view::npos) return InvalidArgument("malformed client identity");
  ClientIdentity who;
  who.name = std::string(text.substr(0, a));
  who.id_hex = std::string(text.substr(a + 1, b - a - 1));
  AQ_RETURN_IF_ERROR(ValidateClientName(who.name));
  AQ_RETURN_IF_ERROR(ValidateIdHex(who.id_hex));
  Result<bool> ro = ParseAccess(text.substr(b + 1));
  if (!ro.ok()) return ro.status();
  who.read_only = *ro;
  return who;
}

ClusterKey DeriveClientKey(const ClusterKey& cluster_key, const ClientIdentity& who) {
  const std::string msg = "aquifer-client-key-1\n" + who.name + "\n" + who.id_hex + "\n" +
                          (who.read_only ? "ro" : "rw");
  const Mac mac = Hmac(cluster_key, std::as_bytes(std::span(msg)));
  ClusterKey out;
  static_assert(sizeof(out.bytes) == sizeof(mac));
  std::memcpy(out.bytes.data(), mac.data(), mac.size());
  return out;
}

bool IsClientCredentialText(std::string_view text) {
  return text.substr(0, kCredentialTag.size()) == kCredentialTag;
}

std::string FormatClientCredential(const ClientCredential& c) {
  return std::string(kCredentialTag) + " " + c.who.name + " " + c.who.id_hex + " " +
         (c.who.read_only ? "ro" : "rw") + " " + ToHex(c.key.bytes) + "\n";
}

Result<ClientCredential> ParseClientCredential(std::string_view text) {
  text = TrimEnd(text);
  if (text.find('\n') != std::string_view::npos) {
    return InvalidArgument("client credential: more than one line");
  }
  const std::vector<std::string_view> f = Fields(text);
  if (f.size() != 5 || f[0] != kCredentialTag) {
    return InvalidArgument("client credential: expected '" + std::string(kCredentialTag) +
                           " NAME ID ro|rw KEY'");
  }
  ClientCredential c;
  c.who.name = std::string(f[1]);
  c.who.id_hex = std::string(f[2]);
  if (Status s = ValidateClientName(c.who.name); !s.ok()) {
    return InvalidArgument("client credential: " + s.message());
  }
  if (Status s = ValidateIdHex(c.who.id_hex); !s.ok()) {
    return InvalidArgument("client credential: " + s.message());
  }
  Result<bool> ro = ParseAccess(f[3]);
  if (!ro.ok()) return InvalidArgument("client credential: " + ro.status().message());
  c.who.read_only = *ro;
  if (!FromHex(f[4], c.key.bytes)) {
    return InvalidArgument("client credential: key must be 64 lowercase hex digits");
  }
  return c;
}

Result<std::optional<ClientCredential>> ReadKeyOrCredentialFile(const std::string& path,
                                                                ClusterKey* cluster_key) {
  Result<std::string> text = ReadSecretFile(path, 4096);
  if (!text.ok()) {
    if (text.status().code() == Code::kInvalidArgument) {
      return InvalidArgument("key file " + path + ": longer than a credential");
    }
    return text.status();
  }
  if (!IsClientCredentialText(*text)) {
    Result<ClusterKey> key = ParseClusterKeyText(*text, path);
    if (!key.ok()) return key.status();
    *cluster_key = *key;
    return std::optional<ClientCredential>();
  }
  Result<ClientCredential> c = ParseClientCredential(*text);
  if (!c.ok()) return InvalidArgument("key file " + path + ": " + c.status().message());
  return std::optional<ClientCredential>(*c);
}

Result<Network> ParseNetwork(std::string_view text) {
  const auto bad = [&] { return InvalidArgument("bad network '" + std::string(text) + "'"); };
  if (text.empty() || text.size() > 64) return bad();
  std::string_view addr = text;
  std::optional<uint32_t> bits;
  if (const size_t slash = text.find('/'); slash != std::string_view::npos) {
    addr = text.substr(0, slash);
    const std::string_view b = text.substr(slash + 1);
    uint32_t v = 0;
    const auto [end, ec] = std::from_chars(b.data(), b.data() + b.size(), v);
    if (b.empty() || ec != std::errc() || end != b.data() + b.size()) return bad();
    bits = v;
  }
  Network net;
  const std::string a(addr);
  if (::inet_pton(AF_INET, a.c_str(), net.addr.data()) == 1) {
    net.v6 = false;
    net.bits = bits.value_or(32);
    if (net.bits > 32) return bad();
  } else if (::inet_pton(AF_INET6, a.c_str(), net.addr.data()) == 1) {
    net.v6 = true;
    net.bits = bits.value_or(128);
    if (net.bits > 128) return bad();
  } else {
    return bad();
  }
  return net;
}

std::string FormatNetwork(const Network& net) {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(net.v6 ? AF_INET6 : AF_INET, net.addr.data(), buf, sizeof buf);
  return std::string(buf) + "/" + std::to_string(net.bits);
}

std::optional<Network> PeerAddress(std::string_view peer) {
  std::string host;
  if (peer.substr(0, 5) == "ipv4:") {
    peer.remove_prefix(5);
    const size_t colon = peer.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = std::string(peer.substr(0, colon));
  } else if (peer.substr(0, 5) == "ipv6:") {
    peer.remove_prefix(5);
    std::string s(peer);
    for (std::string_view enc : {"%5B", "%5b"}) {
      if (size_t p = s.find(enc); p != std::string::npos) s.replace(p, 3, "[");
    }
    for (std::string_view enc : {"%5D", "%5d"}) {
      if (size_t p = s.find(enc); p != std::string::npos) s.replace(p, 3, "]");
    }
    if (s.empty() || s.front() != '[') return std::nullopt;
    const size_t close = s.find(']');
    if (close == std::string::npos) return std::nullopt;
    host = s.substr(1, close - 1);
    if (const size_t zone = host.find('%'); zone != std::string::npos) host.resize(zone);
  } else {
    return std::nullopt;
  }
  Result<Network> n = ParseNetwork(host);
  if (!n.ok() || n->bits != (n->v6 ? 128u : 32u)) return std::nullopt;
  // ::ffff:a.b.c.d is the IPv4 peer a.b.c.d.
  static constexpr std::array<uint8_t, 12> kMapped = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (n->v6 && std::equal(kMapped.begin(), kMapped.end(), n->addr.begin())) {
    Network v4;
    std::copy(n->addr.begin() + 12, n->addr.end(), v4.addr.begin());
    v4.bits = 32;
    return v4;
  }
  return *n;
}

bool NetworkContains(const Network& net, const Network& address) {
  if (net.v6 != address.v6) return false;
  uint32_t bits = net.bits;
  for (size_t i = 0; bits > 0; ++i, bits = bits >= 8 ? bits - 8 : 0) {
    const uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
    if ((net.addr[i] & mask) != (address.addr[i] & mask)) return false;
  }
  return true;
}

Status ValidateExportPath(std::string_view path) {
  if (path.empty() || path.front() != '/' || path.size() > kMaxExportPathBytes) {
    return InvalidArgument("export path must be absolute, at most " +
                           std::to_string(kMaxExportPathBytes) + " bytes");
  }
  for (char c : path) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == ' ' || c == '\t') {
      return InvalidArgument("export path must hold no control bytes or blanks");
    }
  }
  if (path == "/") return OkStatus();
  std::string_view rest = path.substr(1);
  while (true) {
    const size_t slash = rest.find('/');
    const std::string_view part = rest.substr(0, slash);
    if (part.empty() || part == "." || part == "..") {
      return InvalidArgument("export path must have no empty, '.' or '..' components");
    }
    if (part.size() > 255) return InvalidArgument("export path component over 255 bytes");
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  return OkStatus();
}

std::vector<std::string> ExportPathComponents(std::string_view path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    const size_t start = i;
    while (i < path.size() && path[i] != '/') ++i;
    if (i > start) out.emplace_back(path.substr(start, i - start));
  }
  return out;
}

Result<std::vector<ClientExport>> ParseClientRegistry(std::string_view text) {
  std::vector<ClientExport> out;
  std::set<std::string> names;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    line = TrimEnd(line);
    const std::vector<std::string_view> f = Fields(line);
    if (f.empty() || f[0].front() == '#') continue;
    const auto bad = [&](const std::string& why) {
      return InvalidArgument("client registry line " + std::to_string(line_no) + ": " + why);
    };
    if (f.size() != 6) return bad("expected NAME ID ro|rw squash|nosquash ALLOW PATH");
    ClientExport e;
    e.who.name = std::string(f[0]);
    e.who.id_hex = std::string(f[1]);
    if (Status s = ValidateClientName(e.who.name); !s.ok()) return bad(s.message());
    if (Status s = ValidateIdHex(e.who.id_hex); !s.ok()) return bad(s.message());
    Result<bool> ro = ParseAccess(f[2]);
    if (!ro.ok()) return bad(ro.status().message());
    e.who.read_only = *ro;
    if (f[3] != "squash" && f[3] != "nosquash") return bad("expected squash or nosquash");
    e.root_squash = f[3] == "squash";
    if (f[4] != "*") {
      std::string_view nets = f[4];
      while (!nets.empty()) {
        const size_t comma = nets.find(',');
        Result<Network> n = ParseNetwork(nets.substr(0, comma));
        if (!n.ok()) return bad(n.status().message());
        e.allow.push_back(*n);
        if (e.allow.size() > kMaxAllowedNetworks) {
          return bad("more than " + std::to_string(kMaxAllowedNetworks) + " networks");
        }
        nets.remove_prefix(comma == std::string_view::npos ? nets.size() : comma + 1);
      }
    }
    e.path = std::string(f[5]);
    if (Status s = ValidateExportPath(e.path); !s.ok()) return bad(s.message());
    if (!names.insert(e.who.name).second) return bad("client " + e.who.name + " listed twice");
    out.push_back(std::move(e));
  }
  return out;
}

std::string FormatClientRegistry(const std::vector<ClientExport>& exports) {
  std::string out =
      "# Aquifer client registry (aquifer client add/list/remove; docs/operations.md).\n"
      "# NAME ID ro|rw squash|nosquash ALLOW(CIDR,...|*) PATH\n";
  for (const ClientExport& e : exports) {
    std::string allow;
    for (const Network& n : e.allow) allow += (allow.empty() ? "" : ",") + FormatNetwork(n);
    out += e.who.name + " " + e.who.id_hex + " " + (e.who.read_only ? "ro" : "rw") + " " +
           (e.root_squash ? "squash" : "nosquash") + " " + (allow.empty() ? "*" : allow) + " " +
           e.path + "\n";
  }
  return out;
}

Status AuthorizeClientCall(const std::optional<ClientExport>& entry, const ClientIdentity& who,
                           const std::optional<Network>& peer, ClientAccess access) {
  if (!entry) {
    return Status(Code::kPermissionDenied, "client " + who.name + " is not registered (revoked)");
  }
  if (entry->who != who) {
    return Status(Code::kPermissionDenied,
                  "client " + who.name + ": credential replaced or revoked");
  }
  if (!entry->allow.empty()) {
    bool inside = false;
    for (const Network& n : entry->allow) inside = inside || (peer && NetworkContains(n, *peer));
    if (!inside) {
      return Status(Code::kPermissionDenied,
                    "client " + who.name + ": peer address outside its allowed networks");
    }
  }
  switch (access) {
    case ClientAccess::kSession:
    case ClientAccess::kRead:
      return OkStatus();
    case ClientAccess::kWrite:
      if (who.read_only) {
        return Status(Code::kReadOnly, "client " + who.name + " has a read-only credential");
      }
      return OkStatus();
    case ClientAccess::kAdmin:
      return Status(Code::kPermissionDenied,
                    "client " + who.name + ": administrative calls need the cluster key");
  }
  return Internal("unknown access");
}

}  // namespace aquifer
