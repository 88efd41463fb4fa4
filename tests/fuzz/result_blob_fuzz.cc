// Stored op result blobs: any bytes decode to a record, or to DATA_LOSS naming the problem; a
// decoded record encodes back to the same bytes; the sort value never reads past the end.
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "server/storage/result_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  (void)parity::BlobSortValue(in, "Cosine");
  parity::OpResultRecord r;
  absl::Status s = parity::DecodeResultBlob(in, &r);
  if (s.ok()) {
    if (parity::EncodeResultBlob(r) != in) std::abort();
  } else if (s.code() != absl::StatusCode::kDataLoss || s.message().empty()) {
    std::abort();
  }
  return 0;
}
