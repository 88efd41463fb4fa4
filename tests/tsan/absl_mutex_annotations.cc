// ThreadSanitizer builds only (PARITY_SANITIZE=thread): tells TSan about absl::Mutex and
// absl::Status reference counts.
//
// Debian's Abseil is not built with TSan, so the happens-before that its Mutex creates is
// invisible and every access guarded by one would be reported as a race; likewise the atomic
// decrement in Status::UnrefNonInlined, so the thread dropping a shared error status's last
// reference seemed to free it under another thread's earlier read. This file, linked into
// every target of a TSan build, interposes those entry points: each calls the library's own
// implementation (found with dlsym(RTLD_NEXT)) and adds the edge TSan needs (__tsan_release
// before giving a lock or reference up, __tsan_acquire after getting a lock or before a
// possible delete). Nothing is suppressed here; races in this project's code are still
// reported.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

// Weak: a target built without TSan (a benchmark) links too, and then only forwards.
extern "C" __attribute__((weak)) void __tsan_acquire(void* addr);
extern "C" __attribute__((weak)) void __tsan_release(void* addr);

namespace {

void Acquire(void* addr) {
  if (__tsan_acquire != nullptr) __tsan_acquire(addr);
}
void Release(void* addr) {
  if (__tsan_release != nullptr) __tsan_release(addr);
}

template <typename Fn>
Fn Real(const char* mangled) {
  void* f = ::dlsym(RTLD_NEXT, mangled);
  if (f == nullptr) {
    std::fprintf(stderr, "absl_mutex_annotations: %s not found\n", mangled);
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static auto real = Real<void (*)(Mutex*)>("_ZN4absl7debian35Mutex4LockEv");
  real(this);
  Acquire(this);
}

void Mutex::Unlock() {
  static auto real = Real<void (*)(Mutex*)>("_ZN4absl7debian35Mutex6UnlockEv");
  Release(this);
  real(this);
}

void Mutex::ReaderLock() {
  static auto real = Real<void (*)(Mutex*)>("_ZN4absl7debian35Mutex10ReaderLockEv");
  real(this);
  Acquire(this);
}

void Mutex::ReaderUnlock() {
  static auto real = Real<void (*)(Mutex*)>("_ZN4absl7debian35Mutex12ReaderUnlockEv");
  Release(this);
  real(this);
}

bool Mutex::TryLock() {
  static auto real = Real<bool (*)(Mutex*)>("_ZN4absl7debian35Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) Acquire(this);
  return locked;
}

void Mutex::Await(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  Release(this);
  real(this, cond);
  Acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  Release(this);
  const bool met = real(this, cond, timeout);
  Acquire(this);
  return met;
}

void Mutex::LockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  real(this, cond);
  Acquire(this);
}

// CondVar::Wait releases and reacquires the mutex inside the library, not through Unlock and
// Lock.
void CondVar::Wait(Mutex* mu) {
  static auto real = Real<void (*)(CondVar*, Mutex*)>("_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  Release(mu);
  real(this, mu);
  Acquire(mu);
}

// A reference dropped: release into the rep, and acquire every earlier release in case this
// is the last one and the library deletes it (the acq_rel decrement, as TSan would see it).
void Status::UnrefNonInlined(uintptr_t rep) {
  static auto real = Real<void (*)(uintptr_t)>("_ZN4absl7debian36Status15UnrefNonInlinedEm");
  void* addr = reinterpret_cast<void*>(rep);
  Release(addr);
  Acquire(addr);
  real(rep);
}

ABSL_NAMESPACE_END
}  // namespace absl
