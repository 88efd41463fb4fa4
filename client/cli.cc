#include "client/cli.h"

#include "absl/strings/str_cat.h"

namespace parity {
namespace {

constexpr char kVersion[] = "parity 0.1.0";

constexpr char kUsage[] =
    "usage: parity <command> [options]\n"
    "\n"
    "Operator-by-operator precision comparison of a target run (NPU) against a golden run.\n"
    "\n"
    "commands:\n"
    "  compare GOLDEN TARGET   compare two dumps on this machine (msprobe dump directories,\n"
    "                          .npy / .safetensors files, or directories of them)\n"
    "  runs                    list uploaded runs\n"
    "  jobs                    list comparison jobs\n"
    "  submit                  compare two uploaded runs (--golden RUN --target RUN)\n"
    "  watch JOB               follow a job to the end\n"
    "  cancel JOB              stop a running job\n"
    "  summary JOB             counts, culprit operators, worst operators per metric\n"
    "  results JOB             per-operator results (filters, sorting)\n"
    "  show JOB ITEM           everything stored for one result\n"
    "  diff BASE_JOB JOB       operators that got worse between two jobs\n"
    "  export JOB              csv (msprobe columns), json or model-explorer overlays\n"
    "  token create|list|revoke  API tokens (servers started with --auth=tokens)\n"
    "  status                  parityd's queues, buffers, disk and memory against their limits\n"
    "  admin migrate-store     move a stopped daemon's store to PostgreSQL (and its blobs to S3)\n"
    "\n"
    "The commands other than compare talk to parityd (--server ADDR or $PARITY_SERVER).\n"
    "\n"
    "options:\n"
    "  -h, --help              show this help (also: parity <command> --help)\n"
    "  --version               print the version\n"
    "\n"
    "exit codes: 0 everything compared and passed, 1 precision failures, 2 usage or system\n"
    "error, 3 incomplete (a job cancelled or unfinished, nothing compared, or items without a\n"
    "counterpart: --allow-unmatched accepts those)\n";

}  // namespace

int OutcomeExitCode(const CheckOutcome& o, bool allow_unmatched) {
  if (o.fail > 0 || o.error > 0) return kExitFailures;
  const int64_t compared = o.pass + o.warn;
  if (!o.finished || compared == 0 || (o.unmatched > 0 && !allow_unmatched)) return kExitIncomplete;
  return kExitOk;
}

int ErrorExitCode(absl::string_view program, const absl::Status& s, std::ostream& err) {
  err << program << ": " << s.message() << "\n";
  return kExitUsage;
}

int WorseExitCode(int a, int b) {
  auto rank = [](int c) {
    return c == kExitOk ? 0 : c == kExitIncomplete ? 1 : c == kExitFailures ? 2 : 3;
  };
  return rank(a) >= rank(b) ? a : b;
}

std::string IncompleteNote(const CheckOutcome& o, bool allow_unmatched) {
  if (OutcomeExitCode(o, allow_unmatched) != kExitIncomplete) return "";
  if (!o.finished) return "incomplete: the job did not finish; exit code 3";
  if (o.pass + o.warn == 0) return "incomplete: nothing was compared; exit code 3";
  return absl::StrCat("incomplete: ", o.unmatched,
                      " item(s) without a counterpart; exit code 3 (--allow-unmatched accepts them)");
}

int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    err << kUsage;
    return kExitUsage;
  }
  const std::string cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    out << kUsage;
    return kExitOk;
  }
  if (cmd == "--version") {
    out << kVersion << "\n";
    return kExitOk;
  }
  if (cmd == "compare") return RunCompareCommand(rest, out, err);
  if (cmd == "admin") return RunAdminCommand(rest, out, err);
  if (int rc = RunRemoteCommand(cmd, rest, out, err); rc >= 0) return rc;
  err << "parity: unknown command '" << cmd << "'\n\n" << kUsage;
  return kExitUsage;
}

}  // namespace parity
