// parity: the command-line interface. See `parity --help`.
#include <iostream>

#include "client/cli.h"
#include "common/memory.h"

#ifdef PARITY_WITH_JEMALLOC
// jemalloc's options, read when it starts (MALLOC_CONF still overrides them): its memory in
// transparent huge pages where the kernel allows them (its "madvise" mode included). A large
// compare's item lists and report take tens of MiB of fresh memory, a page fault per 4 KiB
// otherwise, and a page fault is a trip to the host on a VM (tests/bench/vs_numpy.sh 256:
// 13.0 k -> 1.2 k faults, 0.46-0.48 -> 0.31-0.37 s).
extern "C" {
const char* malloc_conf = "thp:always,metadata_thp:always";
}
#endif

int main(int argc, char** argv) {
  parity::KeepFreedTensorMemory(256 << 20);
  return parity::RunCli(argc, argv, std::cout, std::cerr);
}
