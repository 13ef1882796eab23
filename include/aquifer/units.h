// Byte-size constants and helpers. Sizes are uint64_t bytes unless a name says otherwise.
#pragma once

#include <cstdint>

namespace aquifer {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * kKiB;
inline constexpr uint64_t kGiB = 1024 * kMiB;

// Longest name of one directory entry, in bytes (POSIX NAME_MAX on Linux).
inline constexpr uint64_t kMaxNameBytes = 255;
// Longest symlink target, in bytes (PATH_MAX).
inline constexpr uint64_t kMaxSymlinkBytes = 4096;
// Largest size a file may have, and the largest offset + length any call may reach, in bytes:
// 2^63 - 1, the kernel's MAX_LFS_FILESIZE (what off_t can hold). The metadata server refuses
// sizes, offsets and lock ranges past it with kFileTooLarge (EFBIG); the client library refuses
// writes and fallocates that would end past it before any I/O.
inline constexpr uint64_t kMaxFileBytes = (uint64_t{1} << 63) - 1;
// Largest stripe unit a layout may have, in bytes.
inline constexpr uint64_t kMaxStripeUnitBytes = 16 * kMiB;
// Largest gRPC message any Aquifer service accepts, in bytes.
inline constexpr uint64_t kMaxRpcMessageBytes = 80 * kMiB;
// How long one gRPC connection attempt (the TCP connect and the HTTP/2 handshake) may take, in
// milliseconds. gRPC reads it from GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, whose name says backoff but
// which is the minimum connect timeout of its connection-backoff protocol (doc/connection-
// backoff.md, MIN_CONNECT_TIMEOUT). At 100 ms, attempts on a loaded 2-core machine were cut
// ("tcp handshaker shutdown") and a healthy data server missed a stripe's chunk.
inline constexpr int kRpcConnectTimeoutMs = 5000;
// Most closes one ReleaseBatch call may carry (the metadata server refuses more).
inline constexpr uint64_t kMaxReleaseBatchItems = 1024;
// Most data servers one Commit may name as having missed chunks (CommitRequest.backfill_servers).
inline constexpr int kMaxBackfillServers = 256;
// Most written-stripe ranges one Commit may carry (CommitRequest.written_stripes, in pairs).
inline constexpr uint64_t kMaxCommitStripeRanges = 65536;

constexpr uint64_t operator""_KiB(unsigned long long v) { return v * kKiB; }
constexpr uint64_t operator""_MiB(unsigned long long v) { return v * kMiB; }

}  // namespace aquifer
