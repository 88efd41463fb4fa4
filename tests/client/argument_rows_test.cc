// msprobe's rows for non-tensor arguments, exactly: `parity compare --csv` of the dumps in
// tests/data/msprobe_args (written by tests/data/make_args.py: every kind of argument msprobe's
// dumper writes, for each dump task) against the rows msprobe's compare writes for them. The
// expected cells are read from msprobe's code — compare/utils.py (op_item_parse, gen_op_item:
// which leaves give rows, the Dtype and shape columns, the value taken as the four statistics,
// the MD5 column) and acc_compare.py (CalcStatsDiff: the differences of statistics that
// pandas.to_numeric reads as numbers, N/A otherwise, a relative error only against a non-zero
// bench value, Warning above half the larger value) — not computed by msprobe here: the suite
// runs without it.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/base/file_util.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

const std::string kArgs = std::string(PARITY_SOURCE_DIR) + "/tests/data/msprobe_args/";

// One CSV line's fields (RFC 4180 quoting, as Parity and pandas write it).
std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// The CSV `parity compare` writes for the task's pair: row name -> column -> cell, and the row
// names in order.
struct Table {
  std::vector<std::string> names;
  std::map<std::string, std::map<std::string, std::string>> rows;
};

Table CompareCsv(const std::string& task) {
  // Per process: ctest runs this file's tests in parallel, several of them over the same task.
  const fs::path csv = fs::temp_directory_path() / ("parity_args_" + task + "_" + std::to_string(::getpid()) + ".csv");
  testing::Run("client/parity", "compare " + kArgs + task + "/golden " + kArgs + task + "/target --csv " +
                                    csv.string());
  Table t;
  const std::string text = ReadFileToString(csv.string()).value_or("");
  fs::remove(csv);
  std::vector<std::string> header;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    const std::string line = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos = end == std::string::npos ? text.size() : end + 1;
    const std::vector<std::string> f = SplitCsvLine(line);
    if (header.empty()) {
      header = f;
      continue;
    }
    t.names.push_back(f[0]);
    for (size_t i = 0; i < f.size() && i < header.size(); ++i) t.rows[f[0]][header[i]] = f[i];
  }
  return t;
}

const char* const kConv = "Functional.conv2d.0.forward.";
const char* const kSend = "Distributed.isend.0.forward.";

// msprobe's rows, in its order: inputs (positional, then keyword arguments in the dump's order,
// lists and dicts flattened with .i and .key), then outputs; none for is_recompute, nor for a
// bare value in place of a leaf ("flag": true).
std::vector<std::string> ExpectedNames() {
  std::vector<std::string> n;
  for (const char* a : {"input.0", "input.stride", "input.padding.0", "input.padding.1", "input.dilation",
                        "input.groups", "input.bias", "input.scale", "input.eps", "input.transposed",
                        "input.padding_mode", "input.dtype", "input.size", "input.index", "input.rest",
                        "input.nested.a.0", "input.nested.a.1.b", "input.count", "output.0"}) {
    n.push_back(std::string(kConv) + a);
  }
  for (const char* a : {"input.0", "input.dst", "input.group", "input.tag", "output.0"}) {
    n.push_back(std::string(kSend) + a);
  }
  return n;
}

using Cells = std::map<std::string, std::string>;

void ExpectCells(const Table& t, const std::string& name, const Cells& want) {
  auto row = t.rows.find(name);
  ASSERT_NE(row, t.rows.end()) << name;
  for (const auto& [col, value] : want) {
    auto cell = row->second.find(col);
    ASSERT_NE(cell, row->second.end()) << name << ": no column " << col;
    EXPECT_EQ(cell->second, value) << name << ", column " << col;
  }
}

// The four statistics of one side, as msprobe shows an argument's value in them.
Cells Stats(const std::string& side, const std::string& v) {
  return {{side + " max", v}, {side + " min", v}, {side + " mean", v}, {side + " l2norm", v}};
}

Cells Merge(std::initializer_list<Cells> parts) {
  Cells out;
  for (const Cells& p : parts) out.insert(p.begin(), p.end());
  return out;
}

// The eight difference columns of the statistics task, one diff and one relative error for all.
Cells Diffs(const std::string& diff, const std::string& rel) {
  Cells c;
  for (const char* d : {"Max diff", "Min diff", "Mean diff", "L2norm diff"}) c[d] = diff;
  for (const char* r : {"MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr"}) c[r] = rel;
  return c;
}

TEST(ArgumentRows, EachDumpTaskHasExactlyMsprobesRows) {
  for (const char* task : {"tensor", "statistics", "md5"}) {
    EXPECT_EQ(CompareCsv(task).names, ExpectedNames()) << task;
  }
}

// Dtype and shape columns: the Python type of the value ("<class 'int'>"), "[]"; a torch.Size
// or slice keeps its type name with the size or the slice's shape; a rank (dst) and a process
// group keep their type name; a null argument is None in both.
TEST(ArgumentRows, DtypeAndShapeColumnsAreMsprobes) {
  const Table t = CompareCsv("statistics");
  auto both = [](const std::string& dtype, const std::string& shape) {
    return Cells{{"NPU Dtype", dtype}, {"Bench Dtype", dtype}, {"NPU Tensor Shape", shape},
                 {"Bench Tensor Shape", shape}};
  };
  const std::string c = kConv, s = kSend;
  ExpectCells(t, c + "input.stride", both("<class 'int'>", "[]"));
  ExpectCells(t, c + "input.scale", both("<class 'float'>", "[]"));
  ExpectCells(t, c + "input.transposed", both("<class 'bool'>", "[]"));
  ExpectCells(t, c + "input.padding_mode", both("<class 'str'>", "[]"));
  ExpectCells(t, c + "input.dtype", both("<class 'str'>", "[]"));
  ExpectCells(t, c + "input.bias", both("None", "None"));
  ExpectCells(t, c + "input.size", both("torch.Size", "[2, 3]"));
  ExpectCells(t, c + "input.index", both("slice", "(3,)"));
  ExpectCells(t, c + "input.rest", both("ellipsis", "[]"));
  ExpectCells(t, c + "input.nested.a.1.b", both("<class 'float'>", "[]"));
  ExpectCells(t, s + "input.dst", both("int", "[]"));
  ExpectCells(t, s + "input.group", both("torch.ProcessGroup", "[]"));
  ExpectCells(t, s + "output.0", both("None", "None"));
}

// Statistics task: the value is each of the four statistics (an int without a fraction, a bool
// as True/False, a rank and a group as their str()); numbers differ as numbers (pandas' float
// column: 0.0), anything else is N/A; no relative error against a zero; Warning when the
// difference exceeds half the larger value.
TEST(ArgumentRows, StatisticsTaskTakesTheValueAsItsStatistics) {
  const Table t = CompareCsv("statistics");
  const std::string c = kConv, s = kSend;
  ExpectCells(t, c + "input.stride", Merge({Stats("NPU", "2"), Stats("Bench", "2"), Diffs("0.0", "0.0%"),
                                            {{"Result", ""}, {"Err_message", ""}}}));
  ExpectCells(t, c + "input.groups", Merge({Stats("NPU", "0"), Diffs("0.0", "N/A")}));
  ExpectCells(t, c + "input.eps", Merge({Stats("NPU", "1e-05"), Diffs("0.0", "0.0%")}));
  ExpectCells(t, c + "input.transposed", Merge({Stats("NPU", "False"), Diffs("N/A", "N/A")}));
  ExpectCells(t, c + "input.dtype", Merge({Stats("NPU", "torch.float32"), Diffs("N/A", "N/A")}));
  ExpectCells(t, c + "input.bias", Merge({Stats("NPU", "None"), Stats("Bench", "None"), Diffs("N/A", "N/A")}));
  ExpectCells(t, c + "input.size", Merge({Stats("NPU", "None"), Diffs("N/A", "N/A")}));
  ExpectCells(t, c + "input.index", Merge({Stats("NPU", "None"), Diffs("N/A", "N/A")}));
  ExpectCells(t, c + "input.rest", Merge({Stats("NPU", "..."), Diffs("N/A", "N/A")}));
  ExpectCells(t, s + "input.dst", Merge({Stats("NPU", "1"), Diffs("0.0", "0.0%")}));
  ExpectCells(t, s + "input.group", Merge({Stats("NPU", "[0, 1]"), Diffs("N/A", "N/A")}));
  // Values that differ: 3 against 1 is a Warning (|2| > 3 / 2); 0.25 against 0.5 is not (0.25 is
  // not above 0.5 / 2); text cannot differ numerically. Parity fails each and says why after
  // msprobe's own message.
  ExpectCells(t, c + "input.dilation",
              Merge({Stats("NPU", "3"), Stats("Bench", "1"), Diffs("2.0", "200.0%"),
                     {{"Result", "Warning"},
                      {"Err_message", "Need double check api accuracy. Non-tensor values differ: golden int 1, "
                                      "target int 3"}}}));
  ExpectCells(t, c + "input.scale",
              Merge({Stats("NPU", "0.25"), Stats("Bench", "0.5"), Diffs("-0.25", "50.0%"), {{"Result", ""}}}));
  ExpectCells(t, c + "input.padding_mode",
              Merge({Stats("NPU", "reflect"), Stats("Bench", "zeros"), Diffs("N/A", "N/A")}));
}

// md5 task: the CRC-32 of str(value); a rank and a process group show str() itself, a null
// argument None.
TEST(ArgumentRows, Md5TaskHasTheCrcOfTheValuesText) {
  const Table t = CompareCsv("md5");
  const std::string c = kConv, s = kSend;
  auto md5 = [](const std::string& npu, const std::string& bench, const std::string& result) {
    return Cells{{"NPU MD5", npu}, {"BENCH MD5", bench}, {"Result", result}};
  };
  ExpectCells(t, c + "input.stride", md5("1ad5be0d", "1ad5be0d", "pass"));           // "2"
  ExpectCells(t, c + "input.transposed", md5("ea0c4734", "ea0c4734", "pass"));       // "False"
  ExpectCells(t, c + "input.eps", md5("effb4679", "effb4679", "pass"));              // "1e-05"
  ExpectCells(t, c + "input.size", md5("3f72ac6e", "3f72ac6e", "pass"));             // "[2, 3]"
  ExpectCells(t, c + "input.index", md5("06aa4530", "06aa4530", "pass"));            // "[0, 3, None]"
  ExpectCells(t, c + "input.dilation", md5("6dd28e9b", "83dcefb7", "Different"));    // "3", "1"
  ExpectCells(t, c + "input.bias", md5("None", "None", "pass"));
  ExpectCells(t, s + "input.dst", md5("1", "1", "pass"));
  ExpectCells(t, s + "input.group", md5("[0, 1]", "[0, 1]", "pass"));
}

// Tensor task: every argument row is msprobe's "no data file" row, with the value in the
// statistics columns.
TEST(ArgumentRows, TensorTaskRowsAreNoDataRowsWithTheValue) {
  const Table t = CompareCsv("tensor");
  const std::string c = kConv;
  Cells unsupported;
  for (const char* m : {"Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                        "Five Thousandths Err Ratio"}) {
    unsupported[m] = "unsupported";
  }
  ExpectCells(t, c + "input.stride",
              Merge({unsupported, Stats("NPU", "2"), Stats("Bench", "2"),
                     {{"Accuracy Reached or Not", "None"}, {"Err_message", "NPU does not have data file."},
                      {"Data_name", "['-1', '-1']"}}}));
  ExpectCells(t, c + "input.transposed", Merge({unsupported, Stats("NPU", "False")}));
  ExpectCells(t, c + "input.bias", Merge({unsupported, Stats("NPU", "None")}));
}

}  // namespace
}  // namespace parity
