// Status propagation helpers. Abseil 20220623 (Debian 12) has no status macros; these use a
// project prefix so they can later be swapped for ABSL_RETURN_IF_ERROR / ABSL_ASSIGN_OR_RETURN.
#ifndef PARITY_COMMON_STATUS_MACROS_H_
#define PARITY_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PARITY_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status parity_status_ = (expr);          \
    if (!parity_status_.ok()) return parity_status_; \
  } while (0)

#define PARITY_CONCAT_INNER_(a, b) a##b
#define PARITY_CONCAT_(a, b) PARITY_CONCAT_INNER_(a, b)

#define PARITY_ASSIGN_OR_RETURN(lhs, expr) \
  PARITY_ASSIGN_OR_RETURN_IMPL_(PARITY_CONCAT_(parity_statusor_, __LINE__), lhs, expr)

#define PARITY_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()

#endif  // PARITY_COMMON_STATUS_MACROS_H_
