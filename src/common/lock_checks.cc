#include "common/lock_checks.h"

#include <absl/synchronization/mutex.h>

namespace aquifer {

void DisableMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace aquifer
