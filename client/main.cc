// parity: the command-line interface. See `parity --help`.
#include <iostream>

#include "client/cli.h"

int main(int argc, char** argv) { return parity::RunCli(argc, argv, std::cout, std::cerr); }
