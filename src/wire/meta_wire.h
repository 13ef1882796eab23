// The metadata wire: aquifer-meta's unary calls (proto/meta.proto MetaService) carried as
// protobuf bytes in small frames over the wire's connections (connection.h), beside gRPC.
// docs/design.md "The metadata wire" gives the reasons. This file holds the frames and the
// method numbers; the messages stay protobuf, encoded and decoded in the rpc/ folders.
//
// After the hello (chunk_wire.h), the client sends a 16-byte call header then `payload_bytes`
// of the serialized request; the server answers with a 16-byte reply header then
// `payload_bytes` of the serialized response (whose RpcStatus carries the call's own status).
// Call header: magic "AQWC" u32 @0, method u16 @4, reserved u16 @6, payload u32 @8, reserved u32
// @12. Reply header: magic "AQWS" u32 @0, outcome u8 @4, reserved 3 bytes @5, payload u32 @8,
// reserved u32 @12. Little-endian. A header that fails to decode ends the connection.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "aquifer/status.h"

namespace aquifer::wire {

inline constexpr uint32_t kCallMagic = 0x43575141;       // "AQWC"
inline constexpr uint32_t kCallReplyMagic = 0x53575141;  // "AQWS"
inline constexpr size_t kCallHeaderBytes = 16;
// Largest request or response, bytes (as for gRPC: kMaxRpcMessageBytes).
inline constexpr uint32_t kMaxCallPayloadBytes = 80u << 20;

// MetaService methods carried by the metadata wire. Numbers are the protocol: never reuse one.
enum class MetaMethod : uint16_t {
  kLookup = 1, kGetAttr, kSetAttr, kCreate, kMkdir, kSymlink, kLink, kUnlink, kRmdir, kRename,
  kReadlink, kReadDir, kGetXattr, kSetXattr, kListXattr, kRemoveXattr, kStatFs, kOpen, kRelease,
  kReleaseBatch, kCommit, kKeepAlive, kCloseSession, kSetLock, kGetLock, kGetClusterMap, kSync,
  kAcquireLease, kReturnLease, kWaitRecall, kAcquireDirLease, kChangeBatch,
  kEnd  // one past the last
};

enum class CallOutcome : uint8_t {
  kOk = 0,             // the payload is the method's response
  kUnknownMethod = 1,  // the server does not carry this method on the wire: use gRPC
  kBadRequest = 2,     // the payload did not parse as the method's request (no payload follows)
};

struct CallHeader {
  MetaMethod method = MetaMethod::kLookup;
  uint32_t payload_bytes = 0;
};

struct CallReplyHeader {
  CallOutcome outcome = CallOutcome::kOk;
  uint32_t payload_bytes = 0;
};

std::array<std::byte, kCallHeaderBytes> EncodeCall(const CallHeader& header);
std::array<std::byte, kCallHeaderBytes> EncodeCallReply(const CallReplyHeader& header);
// Errors (kInvalidArgument): wrong size or magic; a method outside 1..kEnd-1 (calls); an unknown
// outcome, or a payload with an outcome other than kOk (replies); nonzero reserved bytes; a
// payload over kMaxCallPayloadBytes.
Result<CallHeader> DecodeCall(std::span<const std::byte> bytes);
Result<CallReplyHeader> DecodeCallReply(std::span<const std::byte> bytes);

}  // namespace aquifer::wire
