// .safetensors reader: header validation and every entry's read.
#include <cstdint>
#include <cstdlib>

#include "common/formats/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = parity::FuzzInputFile(data, size, ".safetensors");
  absl::StatusOr<parity::SafetensorsFile> f = parity::SafetensorsFile::Open(path);
  if (!f.ok()) {
    if (f.status().message().empty()) std::abort();
    return 0;
  }
  for (const auto& e : f->entries()) {
    absl::StatusOr<parity::Tensor> t = f->Read(e);
    if (t.ok() && t->bytes().size() != e.end - e.begin) std::abort();
  }
  return 0;
}
