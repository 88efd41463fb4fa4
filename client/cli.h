// The `parity` command line: subcommand dispatch, help, exit codes.
// Exit codes: 0 all pass, 1 precision failures (FAIL or ERROR verdicts), 2 usage or system error.
#ifndef PARITY_CLIENT_CLI_H_
#define PARITY_CLIENT_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace parity {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailures = 1;
inline constexpr int kExitUsage = 2;

int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err);

// runs, jobs, submit, watch, results, show, diff, export; -1 for another command.
int RunRemoteCommand(const std::string& cmd, const std::vector<std::string>& args, std::ostream& out,
                     std::ostream& err);

// `parity compare ...` with the arguments after "compare".
int RunCompareCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace parity

#endif  // PARITY_CLIENT_CLI_H_
