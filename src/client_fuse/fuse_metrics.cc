#include "client_fuse/fuse_metrics.h"

#include <string.h>

#include <array>
#include <string>

#include "common/metrics.h"

namespace aquifer::fuse {
namespace {

constexpr size_t kOps = static_cast<size_t>(FuseOp::kCount);
constexpr int kMaxErrno = 160;  // Linux's errnos end below 140

constexpr std::array<const char*, kOps> kNames = {
    "lookup",  "forget",   "getattr",    "setattr",     "readlink", "mknod",    "mkdir",
    "unlink",  "rmdir",    "symlink",    "rename",      "link",     "open",     "read",
    "write",   "flush",    "release",    "fsync",       "opendir",  "readdir",  "readdirplus",
    "releasedir", "fsyncdir", "statfs",  "setxattr",    "getxattr", "listxattr", "removexattr",
    "create",  "getlk",    "setlk",      "flock",       "fallocate"};

struct FuseFamilies {
  prometheus::Family<prometheus::Counter>& requests =
      metrics::CounterFamily("aquifer_fuse_requests_total", "FUSE requests handled, by op");
  prometheus::Family<prometheus::Histogram>& seconds = metrics::HistogramFamily(
      "aquifer_fuse_request_seconds", "time from a FUSE request's arrival to its reply, seconds");
  prometheus::Family<prometheus::Counter>& errors =
      metrics::CounterFamily("aquifer_fuse_errors_total", "FUSE error replies, by errno");
  prometheus::Family<prometheus::Counter>& bytes = metrics::CounterFamily(
      "aquifer_fuse_bytes_total", "data bytes read and written through the mount");
  std::array<prometheus::Counter*, kOps> request_count{};
  std::array<prometheus::Histogram*, kOps> latency{};
  std::array<metrics::LazyCounter, kMaxErrno> by_errno;
  prometheus::Counter* read_bytes = nullptr;
  prometheus::Counter* written_bytes = nullptr;

  FuseFamilies() {
    for (size_t i = 0; i < kOps; ++i) {
      request_count[i] = &requests.Add({{"op", kNames[i]}});
      latency[i] = &seconds.Add({{"op", kNames[i]}}, metrics::LatencyBuckets());
    }
    read_bytes = &bytes.Add({{"op", "read"}});
    written_bytes = &bytes.Add({{"op", "write"}});
  }
};

FuseFamilies& Families() {
  static FuseFamilies* f = new FuseFamilies();  // never destroyed: FUSE threads outlive exit
  return *f;
}

}  // namespace

const char* FuseOpName(FuseOp op) {
  const size_t i = static_cast<size_t>(op);
  return i < kOps ? kNames[i] : "unknown";
}

FuseOpTimer::FuseOpTimer(FuseOp op) : op_(op), start_(std::chrono::steady_clock::now()) {
  Families().request_count[static_cast<size_t>(op)]->Increment();
}

FuseOpTimer::~FuseOpTimer() {
  Families().latency[static_cast<size_t>(op_)]->Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
}

void CountFuseError(int err) {
  FuseFamilies& f = Families();
  const int slot = err > 0 && err < kMaxErrno ? err : 0;
  f.by_errno[slot]
      .Get(f.errors,
           [slot] {
             const char* name = slot == 0 ? nullptr : strerrorname_np(slot);
             return metrics::Labels{
                 {"errno", name != nullptr ? std::string(name) : "E" + std::to_string(slot)}};
           })
      .Increment();
}

void CountFuseBytes(FuseOp op, uint64_t bytes) {
  FuseFamilies& f = Families();
  (op == FuseOp::kWrite ? f.written_bytes : f.read_bytes)->Increment(static_cast<double>(bytes));
}

}  // namespace aquifer::fuse
