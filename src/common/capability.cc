// Chunk capabilities: minting and verification (capability.h).
#include "common/capability.h"

#include <algorithm>
#include <cstring>
#include <span>

namespace aquifer {
namespace {

constexpr uint8_t kVersion = 1;
constexpr size_t kSignedBytes = 40;  // everything before the MAC
constexpr std::string_view kMacLabel = "aquifer-cap-1\n";

void PutU64(std::byte* at, uint64_t v) {
  for (size_t i = 0; i < 8; ++i) at[i] = static_cast<std::byte>(v >> (8 * i));
}

uint64_t GetU64(std::string_view bytes, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v |= uint64_t{static_cast<uint8_t>(bytes[at + i])} << (8 * i);
  return v;
}

Mac SignatureOf(const ClusterKey& capability_key, std::string_view signed_part) {
  std::string msg(kMacLabel);
  msg.append(signed_part);
  return Hmac(capability_key, std::as_bytes(std::span(msg)));
}

Status Denied(std::string_view why) { return Status(Code::kPermissionDenied, why); }

}  // namespace

ClusterKey DeriveCapabilityKey(const ClusterKey& cluster_key) {
  constexpr std::string_view kLabel = "aquifer-capability-key-1";
  const Mac mac = Hmac(cluster_key, std::as_bytes(std::span(kLabel)));
  ClusterKey out;
  static_assert(sizeof(out.bytes) == sizeof(mac));
  std::memcpy(out.bytes.data(), mac.data(), mac.size());
  return out;
}

Result<std::array<std::byte, kClientIdBytes>> ClientIdBytes(std::string_view id_hex) {
  std::array<std::byte, kClientIdBytes> out{};
  if (id_hex.size() != kClientIdBytes * 2) return InvalidArgument("client id: wrong length");
  for (size_t i = 0; i < out.size(); ++i) {
    int v = 0;
    for (char c : id_hex.substr(2 * i, 2)) {
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) return InvalidArgument("client id: not hex");
      v = v << 4 | d;
    }
    out[i] = static_cast<std::byte>(v);
  }
  return out;
}

std::string MintCapability(const ClusterKey& capability_key, const Capability& cap) {
  std::array<std::byte, kCapabilityBytes> f{};
  f[0] = std::byte{kVersion};
  f[1] = static_cast<std::byte>(cap.mode);
  PutU64(f.data() + 8, cap.inode.value());
  PutU64(f.data() + 16, cap.expiry_unix_seconds);
  std::memcpy(f.data() + 24, cap.client_id.data(), kClientIdBytes);
  const std::string_view signed_part(reinterpret_cast<const char*>(f.data()), kSignedBytes);
  const Mac mac = SignatureOf(capability_key, signed_part);
  std::memcpy(f.data() + kSignedBytes, mac.data(), mac.size());
  return std::string(reinterpret_cast<const char*>(f.data()), f.size());
}

Result<Capability> DecodeCapability(std::string_view bytes) {
  static_assert(kSignedBytes + kMacBytes == kCapabilityBytes);
  if (bytes.size() != kCapabilityBytes) {
    return InvalidArgument("capability of " + std::to_string(bytes.size()) + " bytes");
  }
  if (static_cast<uint8_t>(bytes[0]) != kVersion) return InvalidArgument("capability version");
  const uint8_t mode = static_cast<uint8_t>(bytes[1]);
  if (mode != static_cast<uint8_t>(CapabilityMode::kRead) &&
      mode != static_cast<uint8_t>(CapabilityMode::kWrite)) {
    return InvalidArgument("capability mode " + std::to_string(mode));
  }
  if (!std::all_of(bytes.begin() + 2, bytes.begin() + 8, [](char c) { return c == 0; })) {
    return InvalidArgument("capability reserved bytes");
  }
  Capability cap;
  cap.mode = static_cast<CapabilityMode>(mode);
  cap.inode = InodeId(GetU64(bytes, 8));
  cap.expiry_unix_seconds = GetU64(bytes, 16);
  std::memcpy(cap.client_id.data(), bytes.data() + 24, kClientIdBytes);
  return cap;
}

Status VerifyCapability(const ClusterKey& capability_key, std::string_view bytes, InodeId inode,
                        CapabilityMode want, std::string_view client_id_hex,
                        std::chrono::system_clock::time_point now) {
  if (bytes.empty()) return Denied("no capability");
  if (bytes.size() != kCapabilityBytes) return Denied("malformed capability");
  // The MAC first, so a forger learns nothing from which check failed.
  const Mac want_mac = SignatureOf(capability_key, bytes.substr(0, kSignedBytes));
  if (!MacEqual(want_mac, std::as_bytes(std::span(bytes.substr(kSignedBytes))))) {
    return Denied("bad capability MAC");
  }
  Result<Capability> cap = DecodeCapability(bytes);
  if (!cap.ok()) return Denied("malformed capability");
  if (cap->inode != inode) {
    return Denied("capability for inode " + std::to_string(cap->inode.value()));
  }
  if (want == CapabilityMode::kWrite && cap->mode != CapabilityMode::kWrite) {
    return Denied("read capability for a write");
  }
  Result<std::array<std::byte, kClientIdBytes>> id = ClientIdBytes(client_id_hex);
  if (!id.ok() || !MacEqual(*id, cap->client_id)) return Denied("capability of another client");
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  if (now_s < 0 || cap->expiry_unix_seconds <= static_cast<uint64_t>(now_s)) {
    return Denied("expired capability");
  }
  if (cap->expiry_unix_seconds >
      static_cast<uint64_t>(now_s + kCapabilityLifetime.count() + kTokenWindow.count())) {
    return Denied("capability from the future");
  }
  return OkStatus();
}

}  // namespace aquifer
