// parity: the command-line interface. See `parity --help`.
#include <iostream>

#include "client/cli.h"
#include "common/base/memory.h"
#include "common/base/mutex_mode.h"

int main(int argc, char** argv) {
  parity::UseReleaseMutexMode();
  parity::KeepFreedTensorMemory(256 << 20);
  return parity::RunCli(argc, argv, std::cout, std::cerr);
}
