// parity-agent: uploads tensor dumps to parityd. See `parity-agent --help`.
#include <iostream>
#include <string>
#include <vector>

#include "client/agent.h"
#include "common/base/memory.h"
#include "common/base/mutex_mode.h"

int main(int argc, char** argv) {
  parity::UseReleaseMutexMode();
  parity::KeepFreedTensorMemory(128 << 20);
  return parity::RunAgentCli(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
