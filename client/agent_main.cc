// parity-agent: uploads tensor dumps to parityd. See `parity-agent --help`.
#include <iostream>
#include <string>
#include <vector>

#include "client/agent.h"

int main(int argc, char** argv) {
  return parity::RunAgentCli(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
