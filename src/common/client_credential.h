// Client credentials and exports (docs/design.md "Client credentials and exports"): a mount that
// holds a client credential instead of the cluster key, the registry of exports on the metadata
// host that says what each credential may do, and the pure decisions the servers take on it.
//
// A credential is (name, id, access) plus a 32-byte key derived from the cluster key:
// HMAC-SHA256(cluster key, "aquifer-client-key-1\n" name "\n" id "\n" access). A server that
// holds the cluster key recomputes the key from what the call names, so data servers need no
// registry to check a client's token, and the access ("ro" or "rw") is bound into the key: a
// read-only client cannot claim "rw" without forging an HMAC. The registry (one line per
// client) adds what only the metadata server enforces: the exported subtree, root squash, the
// allowed networks, and whether the credential still exists (revocation).
//
// No sockets, no gRPC; file I/O only in the Read/Write functions. Thread-safe (no state).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aquifer/status.h"
#include "common/cluster_key.h"

namespace aquifer {

inline constexpr size_t kMaxClientNameBytes = 64;   // [A-Za-z0-9_.-], not starting with '.'
inline constexpr size_t kClientIdBytes = 16;        // random, hex in files and headers
inline constexpr size_t kMaxExportPathBytes = 1024;  // absolute, no "." or ".." components
inline constexpr size_t kMaxAllowedNetworks = 16;
inline constexpr uint32_t kNobodyId = 65534;  // root squash maps uid and gid 0 to this

// What a client is: the part every server can check with the cluster key alone.
struct ClientIdentity {
  std::string name;
  std::string id_hex;      // kClientIdBytes * 2 lowercase hex digits
  bool read_only = false;  // "ro" / "rw", bound into the derived key
  bool operator==(const ClientIdentity&) const = default;
};

// The identity as it rides in a call's metadata: "1:<name>:<id hex>:<ro|rw>".
std::string FormatClientIdentity(const ClientIdentity& who);
// Errors: kInvalidArgument for anything but that exact shape with a valid name.
Result<ClientIdentity> ParseClientIdentity(std::string_view text);

// OK for 1..kMaxClientNameBytes bytes of [A-Za-z0-9_.-] not starting with '.'.
// Errors: kInvalidArgument saying why.
Status ValidateClientName(std::string_view name);

// The key a client proves: HMAC(cluster key, "aquifer-client-key-1\n" name "\n" id "\n" ro|rw).
ClusterKey DeriveClientKey(const ClusterKey& cluster_key, const ClientIdentity& who);

// The credential file: one line "aquifer-client-1 <name> <id hex> <ro|rw> <64 hex key>\n",
// mode 0600. IsClientCredentialText says whether `text` starts with the format's tag (so
// `-o key=FILE` can take either a cluster key or a credential). ParseClientCredential refuses
// anything else (kInvalidArgument, naming the field). Pure.
struct ClientCredential {
  ClientIdentity who;
  ClusterKey key;
};
bool IsClientCredentialText(std::string_view text);
std::string FormatClientCredential(const ClientCredential& credential);
Result<ClientCredential> ParseClientCredential(std::string_view text);
// Reads a key file (cluster key or credential; 0600 enforced as ReadClusterKeyFile does, at
// most 4 KiB): the credential when it is one, else nullopt with *cluster_key set.
// Errors: as ReadClusterKeyFile, and ParseClientCredential's.
Result<std::optional<ClientCredential>> ReadKeyOrCredentialFile(const std::string& path,
                                                                ClusterKey* cluster_key);
// (A new credential file is written with WriteNewSecretFile, common/cluster_key.h.)

// An IPv4 or IPv6 network "ADDR/BITS" (a bare address is /32 or /128).
struct Network {
  bool v6 = false;
  std::array<uint8_t, 16> addr{};  // v4 in the first 4 bytes
  uint32_t bits = 0;
  bool operator==(const Network&) const = default;
};
// Errors: kInvalidArgument.
Result<Network> ParseNetwork(std::string_view text);
std::string FormatNetwork(const Network& net);
// The address of a gRPC peer string ("ipv4:1.2.3.4:5", "ipv6:[::1]:5", "ipv6:%5B::1%5D:5");
// an IPv4-mapped IPv6 address counts as IPv4. nullopt for anything else (unix sockets...).
std::optional<Network> PeerAddress(std::string_view grpc_peer);
bool NetworkContains(const Network& net, const Network& address);

// One registry entry: what the metadata server lets this credential do.
struct ClientExport {
  ClientIdentity who;
  std::string path = "/";  // the subtree it sees as its root
  bool root_squash = false;
  std::vector<Network> allow;  // empty = any peer address
  bool operator==(const ClientExport&) const = default;
};

// The registry file (the metadata server's --clients FILE): "#" comments, blank lines, and one
// line per client: "<name> <id hex> <ro|rw> <squash|nosquash> <allow: CIDR[,CIDR...] or *>
// <path>". Names are unique. Errors: kInvalidArgument with the line number. Pure.
Result<std::vector<ClientExport>> ParseClientRegistry(std::string_view text);
std::string FormatClientRegistry(const std::vector<ClientExport>& exports);

// OK for an absolute path of at most kMaxExportPathBytes without empty, "." or ".."
// components and without control bytes; "/" is the whole namespace. Errors: kInvalidArgument.
Status ValidateExportPath(std::string_view path);
// The path's components ("/a/b" -> {"a", "b"}); the path must be valid.
std::vector<std::string> ExportPathComponents(std::string_view path);

// What a call asks for, as the metadata server classifies its RPCs.
enum class ClientAccess : uint8_t {
  kSession,  // sessions, cluster map, statfs, recalls: no inode named, allowed to every client
  kRead,     // reads of the namespace, opens for reading, releases, locks
  kWrite,    // anything that changes the namespace, attributes, xattrs or a file's data
  kAdmin,    // server membership, backups, moves, activity: cluster-key holders only
};

// The decision for one call by a client whose registry entry is `entry` (nullopt: revoked or
// never added), whose call proved `who`, from `peer` (nullopt: unknown). OK when allowed.
// Errors: kPermissionDenied (revoked, a different id, a peer outside `allow`, an admin call),
// kReadOnly (a write by a read-only credential). Pure.
Status AuthorizeClientCall(const std::optional<ClientExport>& entry, const ClientIdentity& who,
                           const std::optional<Network>& peer, ClientAccess access);

// The credential this process calls with (the mount's main() sets it from -o key=FILE): its
// identity rides beside each gRPC token (common/rpc/rpc_auth.h), and ProcessClusterKey() is then
// the derived key. nullopt: the process holds the cluster key itself (or none). Thread-safe.
std::optional<ClientIdentity> ProcessClientIdentity();
void SetProcessClientIdentity(std::optional<ClientIdentity> who);
// The mount's -o key=FILE: a cluster key file sets the process key as LoadKeyForProcess does; a
// client credential sets its derived key and its identity (*is_client = true). "" sets neither.
// Errors: as ReadKeyOrCredentialFile.
Status LoadKeyOrCredentialForProcess(const std::string& path, bool* is_client);

// Root squash of one id: 0 becomes kNobodyId, others stay.
inline uint32_t SquashId(uint32_t id) { return id == 0 ? kNobodyId : id; }

}  // namespace aquifer
