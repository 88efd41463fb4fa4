// msprobe dump.json parser (and the JSON parser under it, NaN/Infinity tokens included).
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "common/dump.h"
#include "common/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<parity::Dump> d =
      parity::ParseMsprobeDumpJson("/nonexistent-fuzz-root", "fuzz/dump.json", text);
  if (!d.ok() && d.status().message().empty()) std::abort();
  (void)parity::ParseJson(text);
  return 0;
}
