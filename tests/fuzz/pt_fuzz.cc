// .pt reader (zip container + the restricted pickle subset): never executes, never crashes.
#include <cstdint>
#include <cstdlib>

#include "common/formats/pt_reader.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = parity::FuzzInputFile(data, size, ".pt");
  auto tensors = parity::ReadPtTensors(path);
  if (tensors.ok()) {
    for (const auto& [name, t] : *tensors) {
      if (t.bytes().size() != static_cast<size_t>(t.numel()) * parity::DTypeSize(t.dtype())) std::abort();
    }
  } else if (tensors.status().message().empty()) {
    std::abort();
  }
  (void)parity::ReadPtIndex(path);
  return 0;
}
