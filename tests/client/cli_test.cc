// End-to-end tests of the real `parity` binary on the bundled sample and on files it writes.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "client/report_format.h"
#include "client/terminal.h"
#include "common/base/control_chars.h"
#include "common/base/file_util.h"
#include "common/base/json.h"
#include "common/formats/npy.h"
#include <cstring>

namespace parity {
namespace {

namespace fs = std::filesystem;

const std::string kParity = std::string(PARITY_BINARY_DIR) + "/client/parity";
const std::string kSample = std::string(PARITY_SOURCE_DIR) + "/tests/data/sample";

struct CliRun {
  int code;
  std::string out;  // stdout and stderr
};

CliRun Exec(const std::string& args, const std::string& env = "") {
  const std::string cmd = env + " " + kParity + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  CliRun r{-1, ""};
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// LinesTo (upload-pair's two sides printing at once): every line arrives whole, whatever the
// pieces it was written in; a last line without a newline goes out when the LinesTo goes.
TEST(Cli, LinesFromTwoThreadsDoNotInterleave) {
  std::ostringstream sink;
  absl::Mutex mu;
  auto write = [&](char c) {
    LinesTo out(sink, &mu);
    for (int i = 0; i < 2000; ++i) {
      out << std::string(1, c) << "-" << i << std::string(static_cast<size_t>(i % 7), c) << "\n";
    }
  };
  std::thread a(write, 'a'), b(write, 'b');
  a.join();
  b.join();
  std::istringstream lines(sink.str());
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    ASSERT_FALSE(line.empty());
    const char c = line[0];
    const size_t dash = line.find('-');
    ASSERT_EQ(dash, 1u) << line;
    const int i = std::stoi(line.substr(2));
    EXPECT_EQ(line, std::string(1, c) + "-" + std::to_string(i) + std::string(static_cast<size_t>(i % 7), c)) << line;
  }
  EXPECT_EQ(n, 4000);
  std::ostringstream last;
  {
    LinesTo out(last, &mu);
    out << "no newline";
    EXPECT_EQ(last.str(), "");
  }
  EXPECT_EQ(last.str(), "no newline");
}

TEST(Cli, SampleNamesTheInjectedCulpritAsFirstFailure) {
  CliRun r = Exec("compare " + kSample + "/golden " + kSample + "/target");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("First failure in dump order: Functional.linear.1.forward.output.0"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("12 pass, 0 warn, 5 fail"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("largest growth first:\n  Functional.linear.1.forward  (forward, growth "),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Noise floor: growth "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("an inner culprit): Functional.layer_norm.0.forward, Functional.softmax.0.forward"),
            std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\033["), std::string::npos) << "colours on a pipe";
  // Worst first: the first table row is a FAIL.
  const size_t header = r.out.find("VERDICT");
  ASSERT_NE(header, std::string::npos);
  EXPECT_EQ(r.out.substr(r.out.find('\n', header) + 1, 4), "FAIL");
}

// --limit formats only the rows it shows, and only they set the column widths: a long name
// among the hidden rows does not widen the table.
TEST(Cli, ALimitedTableIsSizedByTheRowsItShows) {
  CliRun all = Exec("compare " + kSample + "/golden " + kSample + "/target --no-color");
  CliRun one = Exec("compare " + kSample + "/golden " + kSample + "/target --no-color --limit 1");
  ASSERT_EQ(one.code, 1) << one.out;
  auto line_after = [](const std::string& out, const char* start, size_t skip) {
    size_t at = out.find(start);
    for (size_t i = 0; i < skip && at != std::string::npos; ++i) at = out.find('\n', at) + 1;
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  const std::string header = line_after(one.out, "VERDICT", 0);
  const std::string row = line_after(one.out, "VERDICT", 1);
  // VERDICT (10), POLICY (8) and CULPRIT (10) columns, two spaces after each, then the item's
  // name.
  ASSERT_GT(row.size(), 34u) << one.out;
  const std::string name = row.substr(34, row.find(' ', 34) - 34);
  EXPECT_EQ(header.find("METRICS"), 34 + name.size() + 2) << one.out;
  EXPECT_GT(line_after(all.out, "VERDICT", 0).find("METRICS"), header.find("METRICS")) << all.out;
  EXPECT_NE(one.out.find("... 16 more rows (use --limit)"), std::string::npos) << one.out;
  const std::string all_row = line_after(all.out, "VERDICT", 1);
  EXPECT_EQ(all_row.substr(0, 34 + name.size() + 1), row.substr(0, 34 + name.size()) + " ")
      << "the same worst row first";
}

TEST(Cli, JsonOutputIsMachineReadable) {
  CliRun r = Exec("compare --json " + kSample + "/golden " + kSample + "/target", "NO_COLOR=1");
  EXPECT_EQ(r.code, 1);
  auto j = ParseJson(r.out);
  ASSERT_TRUE(j.ok()) << j.status() << r.out.substr(0, 300);
  EXPECT_EQ(j->Find("summary")->Find("counts")->Find("FAIL")->as_int(), 5);
  EXPECT_EQ(j->Find("summary")->Find("first_failure")->as_string(),
            "Functional.linear.1.forward.output.0");
  EXPECT_EQ(j->Find("summary")->Find("first_culprit")->as_string(), "Functional.linear.1.forward");
  EXPECT_EQ(j->Find("summary")->Find("propagated")->as_array().size(), 2u);
  EXPECT_EQ(j->Find("items")->as_array().size(), 17u);
  const Json& first = j->Find("items")->as_array()[0];
  EXPECT_EQ(first.Find("verdict")->as_string(), "PASS");
  EXPECT_EQ(first.Find("metrics")->Find("Cosine")->as_double(), 1.0);
}

TEST(Cli, CsvHasMsprobeRealDataColumnsInOrder) {
  const std::string csv = (fs::temp_directory_path() / ("parity_cli_" + std::to_string(::getpid()) + ".csv")).string();
  CliRun r = Exec("compare " + kSample + "/golden " + kSample + "/target --csv " + csv);
  EXPECT_EQ(r.code, 1) << r.out;
  auto text = ReadFileToString(csv);
  ASSERT_TRUE(text.ok()) << text.status();
  const std::string header = text->substr(0, text->find('\n'));
  EXPECT_EQ(header,
            "NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,"
            "NPU Requires_grad,Bench Requires_grad,Cosine,EucDist,MaxAbsErr,MaxRelativeErr,"
            "One Thousandth Err Ratio,Five Thousandths Err Ratio,NPU max,NPU min,NPU mean,"
            "NPU l2norm,Bench max,Bench min,Bench mean,Bench l2norm,Requires_grad Consistent,"
            "Accuracy Reached or Not,Err_message,Data_name");
  EXPECT_NE(text->find("Functional.linear.1.forward.output.0,Functional.linear.1.forward.output.0,"
                       "Float32,Float32,\"[4, 16]\",\"[4, 16]\",False,False,0.98"),
            std::string::npos) << *text;
  fs::remove(csv);
  // The CSV is written as it is formatted: a device that fails is a system error (exit 2).
  CliRun full = Exec("compare " + kSample + "/golden " + kSample + "/target --csv /dev/full");
  EXPECT_EQ(full.code, 2) << full.out;
  EXPECT_NE(full.out.find("parity compare: cannot write /dev/full: No space left on device"),
            std::string::npos) << full.out;
}

TEST(Cli, IdenticalDumpsPassWithExitZero) {
  CliRun r = Exec("compare " + kSample + "/golden " + kSample + "/golden --policy torch");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("No failures."), std::string::npos);
}

TEST(Cli, NpyFilesWithEachPolicy) {
  const fs::path dir = fs::temp_directory_path() / ("parity_cli_npy_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // Reversed values: cosine 0.67, PCC -1, 4 mismatches: every policy fails.
  std::string a(16, '\0'), b(16, '\0');
  const float av[4] = {1, 2, 3, 4}, bv[4] = {4, 3, 2, 1};
  std::memcpy(a.data(), av, 16);
  std::memcpy(b.data(), bv, 16);
  ASSERT_TRUE(WriteStringToFile((dir / "g.npy").string(), EncodeNpy(*Tensor::Make(DType::kFloat32, {4}, a))).ok());
  ASSERT_TRUE(WriteStringToFile((dir / "t.npy").string(), EncodeNpy(*Tensor::Make(DType::kFloat32, {4}, b))).ok());
  for (const char* policy : {"msprobe", "forge", "torch"}) {
    CliRun r = Exec(std::string("compare ") + (dir / "g.npy").string() + " " + (dir / "t.npy").string() +
                 " --policy " + policy);
    EXPECT_EQ(r.code, 1) << policy << "\n" << r.out;
    EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.out;
  }
  CliRun torch = Exec("compare " + (dir / "g.npy").string() + " " + (dir / "t.npy").string() + " --policy torch");
  EXPECT_NE(torch.out.find("Mismatched elements=4"), std::string::npos) << torch.out;
  fs::remove_all(dir);
}

TEST(Cli, AnUnreadableFileInADirectoryIsAnErrorRowNotAFailedCompare) {
  const fs::path dir = fs::temp_directory_path() / ("parity_cli_bad_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "g");
  fs::create_directories(dir / "t");
  std::string v(16, '\0');
  const float fv[4] = {1, 2, 3, 4};
  std::memcpy(v.data(), fv, 16);
  const std::string npy = EncodeNpy(*Tensor::Make(DType::kFloat32, {4}, v));
  for (const char* side : {"g", "t"}) {
    ASSERT_TRUE(WriteStringToFile((dir / side / "a.npy").string(), npy).ok());
    ASSERT_TRUE(WriteStringToFile((dir / side / "b.npy").string(), npy).ok());
  }
  ASSERT_TRUE(WriteStringToFile((dir / "t" / "b.npy").string(), npy.substr(0, 40)).ok());
  CliRun r = Exec("compare " + (dir / "g").string() + " " + (dir / "t").string() + " --json");
  EXPECT_EQ(r.code, 1) << r.out;  // a failure row, not a usage or system error
  absl::StatusOr<Json> j = ParseJson(r.out);
  ASSERT_TRUE(j.ok()) << r.out;
  const Json* summary = j->Find("summary");
  ASSERT_NE(summary, nullptr);
  EXPECT_EQ(summary->Find("counts")->Find("PASS")->as_int(), 1) << r.out;
  EXPECT_EQ(summary->Find("counts")->Find("ERROR")->as_int(), 1) << r.out;
  EXPECT_NE(r.out.find("Dump file: b.npy not found or read failed."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("runs past the end of the file (40 bytes)"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

// A comparison that did not check everything it was asked to never exits 0: items without a
// counterpart make it incomplete (exit 3) unless --allow-unmatched; nothing compared is
// incomplete whatever the flag; a failure wins over incompleteness (exit 1); --limit 0 shows
// every row.
TEST(Cli, AnIncompleteComparisonExitsThree) {
  const fs::path dir = fs::temp_directory_path() / ("parity_cli_incomplete_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  for (const char* side : {"g", "t", "other", "bad"}) fs::create_directories(dir / side);
  std::string v(16, '\0'), w(16, '\0');
  const float fv[4] = {1, 2, 3, 4}, wv[4] = {4, 3, 2, 1};
  std::memcpy(v.data(), fv, 16);
  std::memcpy(w.data(), wv, 16);
  const std::string npy = EncodeNpy(*Tensor::Make(DType::kFloat32, {4}, v));
  const std::string reversed = EncodeNpy(*Tensor::Make(DType::kFloat32, {4}, w));
  ASSERT_TRUE(WriteStringToFile((dir / "g" / "a.npy").string(), npy).ok());
  ASSERT_TRUE(WriteStringToFile((dir / "g" / "b.npy").string(), npy).ok());
  ASSERT_TRUE(WriteStringToFile((dir / "t" / "a.npy").string(), npy).ok());  // b is missing
  ASSERT_TRUE(WriteStringToFile((dir / "other" / "c.npy").string(), npy).ok());
  ASSERT_TRUE(WriteStringToFile((dir / "bad" / "a.npy").string(), reversed).ok());

  CliRun missing = Exec("compare " + (dir / "g").string() + " " + (dir / "t").string());
  EXPECT_EQ(missing.code, 3) << missing.out;
  EXPECT_NE(missing.out.find("incomplete: 1 item(s) without a counterpart; exit code 3 (--allow-unmatched accepts them)"),
            std::string::npos)
      << missing.out;
  EXPECT_EQ(Exec("compare " + (dir / "g").string() + " " + (dir / "t").string() + " --allow-unmatched").code, 0);

  CliRun nothing = Exec("compare " + (dir / "g").string() + " " + (dir / "other").string() + " --allow-unmatched");
  EXPECT_EQ(nothing.code, 3) << nothing.out;
  EXPECT_NE(nothing.out.find("incomplete: nothing was compared"), std::string::npos) << nothing.out;

  EXPECT_EQ(Exec("compare " + (dir / "g").string() + " " + (dir / "bad").string()).code, 1);

  CliRun all = Exec("compare " + (dir / "g").string() + " " + (dir / "t").string() + " --limit 0");
  EXPECT_NE(all.out.find("msprobe               a "), std::string::npos) << all.out;  // both rows
  EXPECT_NE(all.out.find("msprobe               b "), std::string::npos) << all.out;
  EXPECT_EQ(all.out.find("more rows"), std::string::npos) << all.out;
  fs::remove_all(dir);
}

// The JSON report is written item by item in 64 KiB pieces: a report several pieces long is
// still one valid document with every item, in dump order.
TEST(Cli, ALongJsonReportIsOneDocumentWithEveryItem) {
  const fs::path dir = fs::temp_directory_path() / ("parity_cli_long_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "g");
  fs::create_directories(dir / "t");
  constexpr int kItems = 400;  // about 0.5 KB of JSON each
  for (int i = 0; i < kItems; ++i) {
    std::string v(16, '\0');
    const float fv[4] = {1, 2, 3, static_cast<float>(i)};
    std::memcpy(v.data(), fv, 16);
    const std::string npy = EncodeNpy(*Tensor::Make(DType::kFloat32, {4}, v));
    char name[32];
    std::snprintf(name, sizeof name, "t%04d.npy", i);
    ASSERT_TRUE(WriteStringToFile((dir / "g" / name).string(), npy).ok());
    ASSERT_TRUE(WriteStringToFile((dir / "t" / name).string(), npy).ok());
  }
  CliRun r = Exec("compare " + (dir / "g").string() + " " + (dir / "t").string() + " --json");
  EXPECT_EQ(r.code, 0) << r.out.substr(0, 300);
  EXPECT_GT(r.out.size(), size_t{2} * (64 << 10));  // three pieces at least
  EXPECT_EQ(r.out.back(), '\n');
  absl::StatusOr<Json> j = ParseJson(r.out);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->Find("summary")->Find("counts")->Find("PASS")->as_int(), kItems);
  const Json::Array& items = j->Find("items")->as_array();
  ASSERT_EQ(items.size(), static_cast<size_t>(kItems));
  for (int i = 0; i < kItems; i += 57) {
    char name[32];
    std::snprintf(name, sizeof name, "t%04d", i);
    EXPECT_EQ(items[static_cast<size_t>(i)].Find("name")->as_string(), name);
    EXPECT_EQ(items[static_cast<size_t>(i)].Find("metrics")->Find("Cosine")->as_double(), 1.0);
  }
  fs::remove_all(dir);
}

// WriteReportJson writes each item member by member: the document must be exactly the
// pretty-printed (indent 2) form of itself, with every kind of value in its place.
TEST(ReportJson, ItemsAreWrittenAsThePrettyPrintedDocument) {
  Dump golden, target;
  golden.root = "g";
  target.root = "t\"quoted\"";
  DumpItem a;
  a.name = "Functional.linear.0.forward.output.0";
  a.op_type = "linear";
  a.phase = Phase::kForward;
  a.role = Role::kOutput;
  target.items.push_back(a);
  golden.items.push_back(a);
  DumpItem only_target = a;
  only_target.name = "t.only";
  target.items.push_back(only_target);
  DumpItem only_golden = a;
  only_golden.name = "g.only\n";
  only_golden.role = Role::kInput;
  golden.items.push_back(only_golden);
  CompareReport rep;
  CompareRow both;
  both.target = 0;
  both.golden = 0;
  both.result.verdict = Verdict::kFail;
  both.result.policy = "msprobe";
  both.result.peer_verdict = "No";
  both.result.message = "tab\there \"and\" \\";
  both.result.Add("Cosine", MetricValue::Number(0.1));
  both.result.Add("MaxAbsErr", MetricValue::Number(NAN));
  both.result.Add("MaxRelativeErr", MetricValue::Number(-INFINITY));
  both.result.Add("Count", MetricValue::Integer(-9007199254740993));
  both.result.Add("Ratio", MetricValue::Text("12.5%"));
  both.result.Add("Tiny", MetricValue::Number(5e-324));
  CompareRow t_only;
  t_only.target = 1;
  t_only.result.verdict = Verdict::kUnmatched;
  CompareRow g_only;
  g_only.golden = 1;
  g_only.result.verdict = Verdict::kUnmatched;
  rep.rows = {both, t_only, g_only};
  rep.counts[static_cast<int>(Verdict::kFail)] = 1;
  rep.counts[static_cast<int>(Verdict::kUnmatched)] = 2;
  rep.first_failure = 0;
  std::ostringstream out;
  WriteReportJson({&golden, &target, &rep}, out);
  absl::StatusOr<Json> j = ParseJson(out.str());
  ASSERT_TRUE(j.ok()) << j.status() << "\n" << out.str();
  EXPECT_EQ(j->Dump(2) + "\n", out.str());
  const Json::Array& items = j->Find("items")->as_array();
  ASSERT_EQ(items.size(), 3u);
  const Json& first = items[0];
  std::vector<std::string> keys;
  for (const auto& [k, v] : first.as_object()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"name", "golden_name", "target_name", "api", "op_type", "phase",
                                            "role", "verdict", "policy", "peer_verdict", "message", "culprit",
                                            "metrics", "golden", "target"}));
  EXPECT_TRUE(first.Find("culprit")->is_null());
  EXPECT_TRUE(items[1].Find("golden")->is_null());  // the side that is missing
  EXPECT_TRUE(items[1].Find("target")->is_object());
  EXPECT_EQ(first.Find("message")->as_string(), "tab\there \"and\" \\");
  const Json& m = *first.Find("metrics");
  EXPECT_EQ(m.Find("Cosine")->as_double(), 0.1);
  EXPECT_EQ(m.Find("MaxAbsErr")->as_string(), "nan");
  EXPECT_EQ(m.Find("MaxRelativeErr")->as_string(), "-inf");
  EXPECT_TRUE(m.Find("Count")->is_integer());
  EXPECT_EQ(m.Find("Count")->as_int(), -9007199254740993);
  EXPECT_EQ(m.Find("Ratio")->as_string(), "12.5%");
  EXPECT_EQ(m.Find("Tiny")->as_double(), 5e-324);
  EXPECT_EQ(first.Find("phase")->as_string(), "forward");
  EXPECT_TRUE(items[1].Find("golden_name")->is_null());
  EXPECT_EQ(items[1].Find("target_name")->as_string(), "t.only");
  EXPECT_EQ(items[1].Find("metrics")->as_object().size(), 0u);
  EXPECT_EQ(items[2].Find("name")->as_string(), "g.only\n");
  EXPECT_TRUE(items[2].Find("target_name")->is_null());
  EXPECT_EQ(items[2].Find("role")->as_string(), "input");
  EXPECT_EQ(j->Find("summary")->Find("first_failure")->as_string(), a.name);
  EXPECT_EQ(j->Find("target")->as_string(), "t\"quoted\"");
}

TEST(Cli, UsageAndSystemErrorsExitTwo) {
  EXPECT_EQ(Exec("").code, 2);
  EXPECT_EQ(Exec("frobnicate").code, 2);
  EXPECT_EQ(Exec("compare onlyone").code, 2);
  CliRun bad_policy = Exec("compare " + kSample + "/golden " + kSample + "/target --policy numpy");
  EXPECT_EQ(bad_policy.code, 2);
  EXPECT_NE(bad_policy.out.find("--policy must be msprobe, forge or torch"), std::string::npos);
  CliRun missing = Exec("compare /nonexistent/a " + kSample + "/target");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.out.find("golden: /nonexistent/a: no such file or directory"), std::string::npos)
      << missing.out;
  CliRun bad_config = Exec("compare " + kSample + "/golden " + kSample + "/target --config /nonexistent.json");
  EXPECT_EQ(bad_config.code, 2);
  // A misspelt flag is named with the nearest real one, not answered with the whole help.
  CliRun typo = Exec("compare " + kSample + "/golden " + kSample + "/target --polcy torch");
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.out.find("parity compare: unknown option '--polcy'; did you mean --policy?"), std::string::npos)
      << typo.out;
  EXPECT_EQ(typo.out.find("examples:"), std::string::npos) << typo.out;
  CliRun remote_typo = Exec("results job-1 --verdicts fail");
  EXPECT_EQ(remote_typo.code, 2);
  EXPECT_NE(remote_typo.out.find("parity results: unknown option '--verdicts'; did you mean --verdict?"),
            std::string::npos)
      << remote_typo.out;
  CliRun far = Exec("runs --zzzzzzzz");
  EXPECT_EQ(far.code, 2);
  EXPECT_NE(far.out.find("parity runs: unknown option '--zzzzzzzz' (parity runs --help lists the options)"),
            std::string::npos)
      << far.out;
}

TEST(Cli, HelpAndOverridesFromConfig) {
  CliRun help = Exec("compare --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("examples:"), std::string::npos);
  EXPECT_EQ(Exec("--help").code, 0);
  const std::string cfg = (fs::temp_directory_path() / ("parity_cfg_" + std::to_string(::getpid()) + ".json")).string();
  // Loosen layer_norm (whose input is the culprit's output) and softmax: only the culprit
  // itself still fails.
  ASSERT_TRUE(WriteStringToFile(cfg, R"({"overrides": [
      {"op": "Functional.layer_norm.*", "policy": "torch", "torch": {"rtol": 10, "atol": 10}},
      {"op": "Functional.softmax.*", "msprobe": {"cos_threshold": 0.9, "mae_threshold": 1}}]})").ok());
  CliRun r = Exec("compare " + kSample + "/golden " + kSample + "/target --config " + cfg);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("16 pass, 0 warn, 1 fail"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("torch                 Functional.layer_norm.0.forward.output.0"), std::string::npos)
      << r.out;
  fs::remove(cfg);
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

TEST(Cli, RankTreesAreComparedRankByRank) {
  const fs::path dir = fs::temp_directory_path() / ("parity_cli_tree_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  for (const auto& [side, rank, src] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"golden", "rank0", "golden"}, {"golden", "rank1", "golden"},
           {"target", "rank0", "target"}, {"target", "rank1", "golden"}}) {
    fs::create_directories(dir / side / "step3");
    fs::copy(kSample + "/" + src, dir / side / "step3" / rank, fs::copy_options::recursive);
  }
  CliRun r = Exec("compare " + (dir / "golden").string() + " " + (dir / "target").string());
  EXPECT_EQ(r.code, 1) << r.out;
  const size_t r0 = r.out.find("== step 3 rank 0");
  const size_t r1 = r.out.find("== step 3 rank 1");
  ASSERT_NE(r0, std::string::npos) << r.out;
  ASSERT_NE(r1, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("12 pass, 0 warn, 5 fail"), std::string::npos);
  EXPECT_NE(r.out.find("Summary: 17 pass", r1), std::string::npos);
  fs::remove_all(dir / "target" / "step3" / "rank1");
  EXPECT_EQ(Exec("compare " + (dir / "golden").string() + " " + (dir / "target").string()).code, 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

// Item names a spreadsheet would run as formulas get a leading ' in the CSV (OWASP's rule for
// cells starting with =, +, -, @); numbers stay numbers, negative ones included.
TEST(Cli, CsvCellsASpreadsheetWouldEvaluateAreNeutralised) {
  const fs::path dir = fs::temp_directory_path() / ("parity_cli_csv_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "g");
  fs::create_directories(dir / "t");
  const std::vector<std::string> names = {"=HYPERLINK(\"evil\";\"x\")", "+plus", "@at", "-minus", "plain"};
  for (const std::string& name : names) {
    for (const char* side : {"g", "t"}) {
      const float fv[2] = {-1.5f, std::string(side) == "g" ? 2.0f : 2.5f};
      std::string v(8, '\0');
      std::memcpy(v.data(), fv, 8);
      ASSERT_TRUE(WriteStringToFile((dir / side / (name + ".npy")).string(),
                                    EncodeNpy(*Tensor::Make(DType::kFloat32, {2}, v)))
                      .ok());
    }
  }
  const fs::path csv = dir / "out.csv";
  Exec("compare " + (dir / "g").string() + " " + (dir / "t").string() + " --csv " + csv.string());
  const std::string text = ReadFileToString(csv.string()).value_or("");
  EXPECT_NE(text.find("\n\"'=HYPERLINK(\"\"evil\"\";\"\"x\"\")\",\"'=HYPERLINK("), std::string::npos) << text;
  EXPECT_NE(text.find("\n'+plus,'+plus,"), std::string::npos) << text;
  EXPECT_NE(text.find("\n'@at,'@at,"), std::string::npos) << text;
  EXPECT_NE(text.find("\n'-minus,'-minus,"), std::string::npos) << text;
  EXPECT_NE(text.find("\nplain,plain,"), std::string::npos) << text;
  // The statistics columns: NPU min -1.5 is a number, written as one.
  EXPECT_NE(text.find(",2.5,-1.5,"), std::string::npos) << text;
  EXPECT_EQ(text.find(",'-1.5"), std::string::npos) << text;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

TEST(Cli, TerminalSafeEscapesEveryControlCharacter) {
  EXPECT_EQ(TerminalSafe("plain Functional.relu.0 é"), "plain Functional.relu.0 é");
  EXPECT_EQ(TerminalSafe("a\x1b]0;T\x07\r\n\x7f"), "a\\x1b]0;T\\x07\\x0d\\x0a\\x7f");
  EXPECT_EQ(TerminalSafe("csi\xc2\x9b" "2J"), "csi\\u009b2J");
  EXPECT_EQ(FindControlCharacter("ok"), std::nullopt);
  EXPECT_EQ(FindControlCharacter("x\xc2\x85"), 0x85u);
  EXPECT_EQ(Pad("a\x07", 8), "a\\x07   ");
}

// A dump whose file names carry terminal escapes: the table shows them escaped, never raw.
TEST(Cli, NamesFromADumpCannotDriveTheTerminal) {
  const fs::path dir = fs::temp_directory_path() / ("parity_cli_esc_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string name = "t\x1b]0;OWNED\x07\x1b[2J";
  for (const char* side : {"g", "t"}) {
    fs::create_directories(dir / side);
    const float fv[2] = {1.0f, std::string(side) == "g" ? 2.0f : -2.0f};
    std::string v(8, '\0');
    std::memcpy(v.data(), fv, 8);
    ASSERT_TRUE(WriteStringToFile((dir / side / (name + ".npy")).string(),
                                  EncodeNpy(*Tensor::Make(DType::kFloat32, {2}, v)))
                    .ok());
  }
  CliRun r = Exec("compare " + (dir / "g").string() + " " + (dir / "t").string(), "NO_COLOR=1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x07'), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("t\\x1b]0;OWNED\\x07\\x1b[2J"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

// msprobe's stack.json and construct.json beside the target's dump.json: the NPU_Stack_Info
// column (the API's stack on its first row), each culprit's stack in the JSON, and the module
// tree with the culprit marked as PaDiff marks it. A malformed stack.json is refused by name.
TEST(Cli, StackAndModuleTreeOfTheTargetDump) {
  const fs::path dir = fs::temp_directory_path() / ("parity_cli_stack_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy(kSample + "/target", dir / "t", fs::copy_options::recursive);
  const std::string stack = "File train.py, line 12, in forward, \n self.fc2(x) \n";
  ASSERT_TRUE(WriteStringToFile((dir / "t" / "stack.json").string(),
                                R"js({"0": [["Functional.linear.1.forward"], "File train.py, line 12, in forward, \n self.fc2(x) \n"],
                                      "1": [["Functional.relu.0.forward"], "File train.py, line 11, in forward, \n relu(x) \n"]})js")
                  .ok());
  ASSERT_TRUE(WriteStringToFile((dir / "t" / "construct.json").string(),
                                R"js({"Module.mlp.MLP.forward.0": null,
                                      "Functional.linear.0.forward": "Module.mlp.MLP.forward.0",
                                      "Functional.relu.0.forward": "Module.mlp.MLP.forward.0",
                                      "Functional.linear.1.forward": "Module.mlp.MLP.forward.0",
                                      "Functional.layer_norm.0.forward": null,
                                      "Functional.softmax.0.forward": null})js")
                  .ok());
  const std::string args = "compare " + kSample + "/golden " + (dir / "t").string();
  const fs::path csv = dir / "out.csv";
  CliRun r = Exec(args + " --csv " + csv.string() + " --tree");
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string text = ReadFileToString(csv.string()).value_or("");
  EXPECT_NE(text.find(",Accuracy Reached or Not,Err_message,NPU_Stack_Info,Data_name\n"), std::string::npos) << text;
  // The first row of linear.1 (its input) holds the stack, quoted for its line breaks; the
  // others of the API hold nothing.
  const size_t first = text.find("\nFunctional.linear.1.forward.input.0,");
  ASSERT_NE(first, std::string::npos) << text;
  const std::string row = text.substr(first + 1, text.find("\nFunctional.linear.1.forward.input.1,") - first - 1);
  EXPECT_NE(row.find(",\"File train.py, line 12, in forward, \n self.fc2(x) \n\","), std::string::npos) << row;
  const size_t output = text.find("\nFunctional.linear.1.forward.output.0,");
  ASSERT_NE(output, std::string::npos);
  EXPECT_EQ(text.substr(output, text.find('\n', output + 1) - output).find("train.py"), std::string::npos);
  // The tree: the culprit marked under its module; the modules not in the dump plain.
  EXPECT_NE(r.out.find("Module tree:\nModule.mlp.MLP.forward.0\n  Functional.linear.0.forward\n"
                       "  Functional.relu.0.forward\n  Functional.linear.1.forward  <--- *** HERE ***\n"
                       "Functional.layer_norm.0.forward  (propagated)\n"),
            std::string::npos) << r.out;
  CliRun j = Exec(args + " --json --tree");
  absl::StatusOr<Json> doc = ParseJson(j.out);
  ASSERT_TRUE(doc.ok()) << j.out;
  const Json* ranked = doc->Find("summary")->Find("culprit_analysis")->Find("ranked");
  ASSERT_EQ(ranked->as_array().size(), 1u);
  EXPECT_EQ(ranked->as_array()[0].Find("stack")->as_string(), stack);
  EXPECT_EQ(doc->Find("summary")->Find("module_tree")->as_array().size(), 6u);
  // Without the files: no column, no tree.
  CliRun plain = Exec("compare " + kSample + "/golden " + kSample + "/target --tree");
  EXPECT_NE(plain.out.find("Module tree: none"), std::string::npos) << plain.out;
  ASSERT_TRUE(WriteStringToFile((dir / "t" / "stack.json").string(), "[]").ok());
  CliRun bad = Exec(args);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find((dir / "t" / "stack.json").string() + ": the outermost value is not an object"),
            std::string::npos) << bad.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace parity
