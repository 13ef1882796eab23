// Receive buffers for chunk-wire read replies (wire_data_client.cc), recycled.
//
// A reply's bytes are received once, into the buffer the read cache then keeps and the FUSE reply
// is written from. A buffer from operator new is memory the process has often never touched: on a
// fresh mount every 4 KiB of a stream's first pass took a page fault in recv (a fifth of the
// mount's samples in a cold 256 MiB read's profile, docs/design.md "Round trips and memory on the
// hot paths"). This pool hands out buffers of a few power-of-two size classes (64 KiB to 8 MiB),
// maps new ones with MAP_POPULATE (the kernel fills the pages in one call, no fault each) and
// takes them back when their last owner drops them, keeping at most 64 MiB of them (all classes)
// for reuse (the rest are unmapped). Smaller or larger requests get plain heap memory.
// Thread-safe; one mutex per class, never held across anything but a list push or pop.
#pragma once

#include <cstddef>
#include <memory>

namespace aquifer::client {

// A buffer of at least `bytes` (uninitialised), freed to the pool when the last copy goes.
std::shared_ptr<std::byte[]> RecvBuffer(size_t bytes);

// Buffers handed out by the pool so far that were new mappings (for tests and logs).
size_t RecvBuffersMapped();

}  // namespace aquifer::client
