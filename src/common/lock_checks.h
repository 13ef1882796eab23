// Abseil's mutex deadlock detection, which gRPC's locks go through.
#pragma once

namespace aquifer {

// Turns off Abseil's lock-order (deadlock) detection for this process. Debian's Abseil is built
// without NDEBUG, so by default every absl::Mutex acquisition (gRPC takes several per call)
// records an edge in a process-wide lock graph under a global lock: 3-4% of all CPU in a profile
// of small-file creates through the mount. The check only reports lock-order cycles in debug
// builds; Aquifer's own locks are std::mutex and are not covered by it. Call once at process start,
// before threads are made. No inputs, no outputs, cannot fail.
void DisableMutexDeadlockDetection();

}  // namespace aquifer
