// parity runs | jobs | submit | watch | cancel | summary | results | show | diff | export | token |
// status: the CLI over parityd's Jobs, Query and Admin APIs (one file per command group:
// job_commands.cc, result_commands.cc, admin_commands.cc; shared pieces in remote_common.h).
#include "client/cli.h"
#include "client/remote_common.h"

namespace parity {

int RunRemoteCommand(const std::string& cmd, const std::vector<std::string>& args, std::ostream& out,
                     std::ostream& err) {
  static const struct {
    const char* name;
    remote::Command run;
  } kCommands[] = {
      {"runs", remote::Runs},       {"jobs", remote::Jobs},       {"submit", remote::Submit},
      {"watch", remote::Watch},     {"results", remote::Results}, {"show", remote::Show},
      {"diff", remote::Diff},       {"export", remote::Export},   {"token", remote::Token},
      {"status", remote::Status},   {"cancel", remote::Cancel},   {"summary", remote::Summary},
  };
  for (const auto& c : kCommands) {
    if (cmd == c.name) return c.run(args, out, err);
  }
  return -1;
}

}  // namespace parity
