// One rule for every field of a query or job request (Jobs, Query and Admin RPCs; uploads are
// validated field by field in core/upload_session): each string at most kMaxRequestStringBytes
// (kMaxConfigJsonBytes for a config_json) and free of control characters, each repeated field and map at most kMaxRequestEntries
// entries, nested messages alike. Applied by reflection, so a field added to the proto later is
// bounded too.
#ifndef PARITY_SERVER_REQUEST_LIMITS_H_
#define PARITY_SERVER_REQUEST_LIMITS_H_

#include <cstddef>

#include <google/protobuf/message.h>

#include "absl/status/status.h"
#include "server/core/core.h"

namespace parity {

inline constexpr size_t kMaxRequestStringBytes = 1024;
// JobConfig.config_json takes up to kMaxConfigJsonBytes (server/core/core.h), as in UploadStart.
inline constexpr int kMaxRequestEntries = 64;

// OK, or INVALID_ARGUMENT naming the field ("ListRunsRequest.labels: 100 entries, the limit is
// 64").
absl::Status CheckRequestLimits(const google::protobuf::Message& request);

}  // namespace parity

#endif  // PARITY_SERVER_REQUEST_LIMITS_H_
