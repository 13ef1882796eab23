// Chunk capabilities (docs/design.md "Chunk capabilities"): a short-lived proof, signed by the
// metadata server, that one client credential may read, or read and write, the chunks of one
// inode. A data server checks it on every chunk call such a client makes, with nothing but the
// cluster key: as Ceph OSDs check the caps in a cephx ticket and 3FS storage servers the token a
// client got from its meta service. Cluster-key holders (daemons, admin tools, mounts with the
// cluster key) need none: they hold the key capabilities are signed with, so a check would prove
// nothing about them.
//
// A capability is kCapabilityBytes opaque bytes on the network:
//   version u8 @0 (= 1), mode u8 @1 (1 read, 2 write), reserved 6 bytes @2 (zero),
//   inode u64 @8, expiry u64 @16 (unix seconds, the data server's clock decides),
//   client id 16 bytes @24 (the credential's id, client_credential.h),
//   MAC 32 bytes @40 = HMAC-SHA256(capability key, "aquifer-cap-1\n" || bytes [0, 40)).
// Integers little-endian. The capability key is HMAC-SHA256(cluster key,
// "aquifer-capability-key-1"), so a capability MAC never doubles as any other proof.
//
// Pure functions, no sockets, no gRPC; thread-safe (no state).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "aquifer/ids.h"
#include "aquifer/status.h"
#include "common/client_credential.h"
#include "common/cluster_key.h"

namespace aquifer {

inline constexpr size_t kCapabilityBytes = 72;
// How long a capability the metadata server signs is good for. Short, so a revoked credential
// (whose metadata calls fail at once) keeps chunk access for at most this long; long enough
// that renewing costs a long-open file one metadata call per ~8 minutes.
inline constexpr std::chrono::seconds kCapabilityLifetime{600};
// A client renews a capability this long before it expires (covers clock skew up to
// kTokenWindow, the same bound the gRPC tokens need, and a slow renewal).
inline constexpr std::chrono::seconds kCapabilityRenewMargin{150};

enum class CapabilityMode : uint8_t {
  kRead = 1,   // ReadChunk / ReadChunkStream
  kWrite = 2,  // WriteChunk, and reads (a writer reads back partial stripes)
};

struct Capability {
  InodeId inode;
  CapabilityMode mode = CapabilityMode::kRead;
  uint64_t expiry_unix_seconds = 0;
  std::array<std::byte, kClientIdBytes> client_id{};
};

// The key capabilities are signed with, derived from the cluster key. Pure.
ClusterKey DeriveCapabilityKey(const ClusterKey& cluster_key);

// The credential id's bytes from its hex form. Errors: kInvalidArgument unless exactly
// kClientIdBytes * 2 hex digits.
Result<std::array<std::byte, kClientIdBytes>> ClientIdBytes(std::string_view id_hex);

// The kCapabilityBytes bytes of `cap`, signed with `capability_key`. Pure.
std::string MintCapability(const ClusterKey& capability_key, const Capability& cap);

// The fields of `bytes` without checking the MAC (a client reads its own capabilities' expiry
// and mode this way; a server must use VerifyCapability). Errors: kInvalidArgument for a length
// other than kCapabilityBytes, another version, an unknown mode or nonzero reserved bytes.
Result<Capability> DecodeCapability(std::string_view bytes);

// OK when `bytes` is a capability signed with `capability_key` for `inode`, in a mode that
// allows `want` (kWrite allows both), of the client whose id is `client_id_hex`, and `now` is
// before its expiry (and its expiry is at most kCapabilityLifetime + kTokenWindow after `now`,
// so a metadata server with a clock far ahead cannot hand out long-lived ones).
// Errors, all kPermissionDenied with the reason: "no capability" (empty), "malformed
// capability", "bad capability MAC" (a wrong key or changed bytes: checked before any field, so
// a forger learns nothing from the reason), "capability for inode N", "read capability for a
// write", "capability of another client", "expired capability", "capability from the future".
Status VerifyCapability(const ClusterKey& capability_key, std::string_view bytes, InodeId inode,
                        CapabilityMode want, std::string_view client_id_hex,
                        std::chrono::system_clock::time_point now);

}  // namespace aquifer
