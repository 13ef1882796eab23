// aquifer-mount's metrics for /metrics (docs/metrics.md lists them):
//   aquifer_fuse_requests_total{op}      counter: FUSE requests handled, by operation
//   aquifer_fuse_request_seconds{op}     histogram: handler time, seconds (a request's time in
//                                        the daemon; a blocking lock's wait is not in it)
//   aquifer_fuse_errors_total{errno}     counter: error replies, by errno name ("ENOENT")
//   aquifer_fuse_bytes_total{op}         counter: data bytes read and written through the mount
// Client-library counts (metadata calls, cache answers, degraded reads by cause) are read at
// scrape time from the client (RegisterClientMetrics in main.cc).
//
// No FUSE types: the handlers in fuse_ops.cc wrap themselves with a FuseOpTimer. Thread-safe;
// a timer costs one atomic add and one histogram observation (children are made at start-up).
#pragma once

#include <chrono>
#include <cstdint>

namespace aquifer::fuse {

enum class FuseOp : uint8_t {
  kLookup, kForget, kGetAttr, kSetAttr, kReadlink, kMknod, kMkdir, kUnlink, kRmdir, kSymlink,
  kRename, kLink, kOpen, kRead, kWrite, kFlush, kRelease, kFsync, kOpenDir, kReadDir,
  kReadDirPlus, kReleaseDir, kFsyncDir, kStatFs, kSetXattr, kGetXattr, kListXattr,
  kRemoveXattr, kCreate, kGetLk, kSetLk, kFlock, kFallocate,
  kCount  // not an operation: the number of them
};

// "lookup", "getattr", ... (the FUSE opcode's name in lower case).
const char* FuseOpName(FuseOp op);

// Counts one request of `op` at construction and observes its duration at destruction.
class FuseOpTimer {
 public:
  explicit FuseOpTimer(FuseOp op);
  ~FuseOpTimer();
  FuseOpTimer(const FuseOpTimer&) = delete;
  FuseOpTimer& operator=(const FuseOpTimer&) = delete;

 private:
  FuseOp op_;
  std::chrono::steady_clock::time_point start_;
};

// Counts an error reply with errno `err` (> 0).
void CountFuseError(int err);
// Counts data bytes read (FuseOp::kRead) or written (FuseOp::kWrite).
void CountFuseBytes(FuseOp op, uint64_t bytes);

}  // namespace aquifer::fuse
