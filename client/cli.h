// The `parity` command line: subcommand dispatch, help, exit codes.
// Exit codes: 0 everything asked for was compared and passed; 1 precision failures (FAIL or
// ERROR verdicts); 2 usage or system error; 3 incomplete: not everything was compared (a job
// cancelled or still running, nothing compared, items without a counterpart).
#ifndef PARITY_CLIENT_CLI_H_
#define PARITY_CLIENT_CLI_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace parity {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailures = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitIncomplete = 3;

// What a comparison (a local compare or a job) checked, for its exit code.
struct CheckOutcome {
  int64_t pass = 0, warn = 0, fail = 0, error = 0, unmatched = 0, skipped = 0;
  bool finished = true;  // false: a job cancelled or not done yet
};

// kExitFailures when anything failed (FAIL or ERROR); else kExitIncomplete when the comparison
// did not check everything it was asked to: it did not finish, compared nothing, or left items
// without a counterpart (unless `allow_unmatched`); else kExitOk.
int OutcomeExitCode(const CheckOutcome& o, bool allow_unmatched);

// The more serious of two exit codes: usage or system error, then failures, then incomplete,
// then success. (Not std::max: 3 is less serious than 1 and 2.)
int WorseExitCode(int a, int b);

// The line a command prints (to stderr) when its exit code is kExitIncomplete: what was not
// checked, and how to accept unmatched items.
std::string IncompleteNote(const CheckOutcome& o, bool allow_unmatched);

// The one place a command's error becomes its exit code: prints "<program>: <message>" to `err`
// and returns kExitUsage (a usage or system error; never a verdict).
int ErrorExitCode(absl::string_view program, const absl::Status& s, std::ostream& err);

int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err);

// runs, jobs, submit, watch, results, show, diff, export; -1 for another command.
int RunRemoteCommand(const std::string& cmd, const std::vector<std::string>& args, std::ostream& out,
                     std::ostream& err);

// `parity admin migrate-store ...` with the arguments after "admin".
int RunAdminCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// `parity compare ...` with the arguments after "compare".
int RunCompareCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace parity

#endif  // PARITY_CLIENT_CLI_H_
