// msprobe dump.json parser (and the JSON parser under it, NaN/Infinity tokens included).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "common/formats/dump.h"
#include "common/base/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<parity::Dump> d =
      parity::ParseMsprobeDumpJson("/nonexistent-fuzz-root", "fuzz/dump.json", text);
  if (!d.ok() && d.status().message().empty()) std::abort();
  // The member-by-member parse accepts exactly what the whole-document parse accepts: an object
  // (FAILED_PRECONDITION for any other well-formed document, INVALID_ARGUMENT for malformed ones).
  const absl::StatusOr<parity::Json> whole = parity::ParseJson(text);
  auto keep = [](std::string, parity::Json) { return absl::OkStatus(); };
  const absl::Status members = parity::ParseJsonObjectMembers(text, "data", keep, keep);
  const absl::StatusCode want = !whole.ok()            ? absl::StatusCode::kInvalidArgument
                                : whole->is_object()   ? absl::StatusCode::kOk
                                                       : absl::StatusCode::kFailedPrecondition;
  if (members.code() != want) std::abort();
  return 0;
}
