#include "common/base/thread_name.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>

namespace parity {

void NameCurrentThread(absl::string_view name) {
  char buf[16];
  const size_t n = std::min(name.size(), sizeof(buf) - 1);
  std::memcpy(buf, name.data(), n);
  buf[n] = '\0';
  ::pthread_setname_np(::pthread_self(), buf);
}

std::string CurrentThreadName() {
  char buf[16] = {};
  if (::pthread_getname_np(::pthread_self(), buf, sizeof(buf)) != 0) return "";
  return buf;
}

}  // namespace parity
