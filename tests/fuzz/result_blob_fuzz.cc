// Stored op result blobs: any bytes decode to a record, or to DATA_LOSS naming the problem; a
// record decoded from a current (version 4) blob encodes back to the same bytes, one decoded from
// a version 1, 2 or 3 blob to a version 4 blob that does; the sort value never reads past the end. The
// row's name is "n" when the input's last byte is odd, empty otherwise (both golden-name forms).
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "server/storage/result_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  (void)parity::BlobSortValue(in, "Cosine");
  parity::OpResultRecord r;
  r.name = size > 0 && (data[size - 1] & 1) ? "n" : "";
  absl::Status s = parity::DecodeResultBlob(in, &r);
  if (s.ok()) {
    const std::string again = parity::EncodeResultBlob(r);
    if (data[0] == 4 && again != in) std::abort();
    parity::OpResultRecord r2;
    r2.name = r.name;
    if (!parity::DecodeResultBlob(again, &r2).ok() || parity::EncodeResultBlob(r2) != again) {
      std::abort();
    }
  } else if (s.code() != absl::StatusCode::kDataLoss || s.message().empty()) {
    std::abort();
  }
  return 0;
}
