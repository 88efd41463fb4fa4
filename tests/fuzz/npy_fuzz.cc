// .npy parser: any bytes give a tensor whose byte count matches its shape, or an error.
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "common/formats/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<parity::Tensor> t =
      parity::ParseNpy(absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz.npy");
  if (t.ok()) {
    if (t->bytes().size() != static_cast<size_t>(t->numel()) * parity::DTypeSize(t->dtype())) std::abort();
    if (t->numel() > 0) (void)t->At(t->numel() - 1);
  } else if (t.status().message().empty()) {
    std::abort();  // every error says what is wrong
  }
  return 0;
}
