// Ascend GE dump reader: the hand-decoded DumpData header and every tensor's read.
#include <cstdint>
#include <cstdlib>

#include "common/formats/ge_dump.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = parity::FuzzInputFile(data, size, ".ge");
  absl::StatusOr<parity::GeDump> d = parity::ReadGeDump(path);
  if (!d.ok()) {
    if (d.status().message().empty()) std::abort();
    return 0;
  }
  for (const parity::GeTensorEntry& e : d->tensors) (void)parity::ReadGeTensor(path, e);
  return 0;
}
