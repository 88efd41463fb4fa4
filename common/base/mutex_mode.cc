#include "common/base/mutex_mode.h"

#include "absl/synchronization/mutex.h"

namespace parity {

void UseReleaseMutexMode() {
#ifdef NDEBUG
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
}

}  // namespace parity
