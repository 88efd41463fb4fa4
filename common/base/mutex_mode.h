// Abseil's mutex deadlock detection, per build.
#ifndef PARITY_COMMON_MUTEX_MODE_H_
#define PARITY_COMMON_MUTEX_MODE_H_

namespace parity {

// Debian 12's Abseil is built with its mutex deadlock detection on: every absl::Mutex lock
// records the locks held in a process-wide graph, under one global lock shared by all threads.
// An executable built with NDEBUG (the release build types) calls this first thing in main to
// turn that off; debug builds, and the tests, keep it. Call before any thread starts.
void UseReleaseMutexMode();

}  // namespace parity

#endif  // PARITY_COMMON_MUTEX_MODE_H_
