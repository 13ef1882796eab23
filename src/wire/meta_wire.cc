// Call frames of the metadata wire (meta_wire.h).
#include "wire/meta_wire.h"

#include <algorithm>
#include <string>

namespace aquifer::wire {
namespace {

void Put32(std::byte* f, size_t at, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) f[at + i] = static_cast<std::byte>(v >> (8 * i));
}
uint32_t Get32(std::span<const std::byte> f, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v |= std::to_integer<uint32_t>(f[at + i]) << (8 * i);
  return v;
}
bool Zero(std::span<const std::byte> f, size_t at, size_t n) {
  return std::all_of(f.begin() + at, f.begin() + at + n, [](std::byte b) { return b == std::byte{0}; });
}
Status Bad(const char* frame, const std::string& what) {
  return InvalidArgument(std::string("metadata wire: bad ") + frame + ": " + what);
}

}  // namespace

std::array<std::byte, kCallHeaderBytes> EncodeCall(const CallHeader& h) {
  std::array<std::byte, kCallHeaderBytes> f{};
  Put32(f.data(), 0, kCallMagic);
  const auto method = static_cast<uint16_t>(h.method);
  f[4] = static_cast<std::byte>(method & 0xff);
  f[5] = static_cast<std::byte>(method >> 8);
  Put32(f.data(), 8, h.payload_bytes);
  return f;
}

std::array<std::byte, kCallHeaderBytes> EncodeCallReply(const CallReplyHeader& h) {
  std::array<std::byte, kCallHeaderBytes> f{};
  Put32(f.data(), 0, kCallReplyMagic);
  f[4] = static_cast<std::byte>(h.outcome);
  Put32(f.data(), 8, h.payload_bytes);
  return f;
}

Result<CallHeader> DecodeCall(std::span<const std::byte> f) {
  if (f.size() != kCallHeaderBytes) return Bad("call", "size " + std::to_string(f.size()));
  if (Get32(f, 0) != kCallMagic) return Bad("call", "magic");
  const uint16_t method = static_cast<uint16_t>(std::to_integer<uint16_t>(f[4]) |
                                                (std::to_integer<uint16_t>(f[5]) << 8));
  if (method == 0 || method >= static_cast<uint16_t>(MetaMethod::kEnd)) {
    return Bad("call", "method " + std::to_string(method));
  }
  if (!Zero(f, 6, 2) || !Zero(f, 12, 4)) return Bad("call", "reserved bytes");
  CallHeader h{static_cast<MetaMethod>(method), Get32(f, 8)};
  if (h.payload_bytes > kMaxCallPayloadBytes) {
    return Bad("call", "payload of " + std::to_string(h.payload_bytes) + " bytes");
  }
  return h;
}

Result<CallReplyHeader> DecodeCallReply(std::span<const std::byte> f) {
  if (f.size() != kCallHeaderBytes) return Bad("reply", "size " + std::to_string(f.size()));
  if (Get32(f, 0) != kCallReplyMagic) return Bad("reply", "magic");
  const uint8_t outcome = std::to_integer<uint8_t>(f[4]);
  if (outcome > static_cast<uint8_t>(CallOutcome::kBadRequest)) {
    return Bad("reply", "outcome " + std::to_string(outcome));
  }
  if (!Zero(f, 5, 3) || !Zero(f, 12, 4)) return Bad("reply", "reserved bytes");
  CallReplyHeader h{static_cast<CallOutcome>(outcome), Get32(f, 8)};
  if (h.payload_bytes > kMaxCallPayloadBytes) {
    return Bad("reply", "payload of " + std::to_string(h.payload_bytes) + " bytes");
  }
  if (h.outcome != CallOutcome::kOk && h.payload_bytes != 0) {
    return Bad("reply", "a payload with outcome " + std::to_string(outcome));
  }
  return h;
}

}  // namespace aquifer::wire
