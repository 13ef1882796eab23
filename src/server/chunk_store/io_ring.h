// Disk I/O for the chunk store through io_uring (liburing): one ring per calling thread.
//
// Every function here uses the calling thread's own ring (thread_local), created on first use
// with `SetIoDepth()` submission-queue entries, so no lock is taken and no ring is shared.
// A call submits its requests, waits for all their completions and returns; at most io_depth
// requests of one thread are in flight at once (larger batches are submitted in waves).
// Short reads and writes are resubmitted for the remainder. Buffers belong to the caller and
// must stay valid for the call. Errors carry the errno text; ENOSPC/EDQUOT map to kNoSpace,
// everything else to kInternal (kUnavailable would invite a retry that cannot help).
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <span>

#include "aquifer/status.h"

namespace aquifer::server {

// Sets the ring size (submission-queue entries, 1..4096) used by rings created after this call.
// Call once at start, before I/O threads run. Default 32.
void SetIoDepth(uint32_t entries);
uint32_t IoDepth();

// One positioned vectored transfer.
struct IoRequest {
  int fd = -1;
  std::span<const iovec> iov;  // the buffers, in file order; total <= 2 GiB
  uint64_t offset = 0;         // bytes into the file
};

// Writes every request fully; when `datasync` is set, then fdatasyncs each distinct fd (one
// more submission once the writes completed). Errors: kNoSpace on ENOSPC/EDQUOT; kInternal otherwise.
Status RingWrite(std::span<const IoRequest> requests, bool datasync);

// Reads every request fully. Errors: kInternal on an I/O error or an unexpected end of file.
Status RingRead(std::span<const IoRequest> requests);

// fsyncs each fd (e.g. directories after renames) in one submission. Errors: kInternal.
Status RingFsync(std::span<const int> fds);

}  // namespace aquifer::server
