// Allocator tuning for Aquifer's daemons (aquifer-meta, aquifer-data, aquifer-mount).
#pragma once

namespace aquifer {

// Sets glibc malloc so that the daemons' working buffers (stripe units and chunk payloads of
// 64 KiB to a few MiB, allocated and freed per request) are reused from the heap instead of being
// mmap'ed, page-faulted and unmapped on every request, and so that freeing them does not give
// pages back with madvise (a TLB shootdown on each free):
//   M_MMAP_THRESHOLD = 64 MiB (requests below it come from the heap),
//   M_TRIM_THRESHOLD = 512 MiB (free heap kept before trimming),
//   M_ARENA_MAX      = 4 * cores (bounds the per-thread arenas gRPC's thread pools would make).
// The cost is resident memory: freed buffers stay in the process (bounded by the daemons' own
// buffer limits, e.g. the client's dirty-byte and cache limits). Call once at process start,
// before threads are made. Measured in bench/mount (seq read and small files); see
// docs/design.md "Allocator".
void TuneAllocator();

}  // namespace aquifer
