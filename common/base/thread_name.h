// Names for long-lived threads, as `top -H`, `ps -L`, perf and gdb show them.
#ifndef PARITY_COMMON_THREAD_NAME_H_
#define PARITY_COMMON_THREAD_NAME_H_

#include <string>

#include "absl/strings/string_view.h"

namespace parity {

// Names the calling thread. Linux keeps at most 15 bytes: a longer name is cut. Best effort:
// a failure leaves the inherited name.
void NameCurrentThread(absl::string_view name);

// The calling thread's name ("" when it cannot be read).
std::string CurrentThreadName();

}  // namespace parity

#endif  // PARITY_COMMON_THREAD_NAME_H_
