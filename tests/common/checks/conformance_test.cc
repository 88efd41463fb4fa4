// Conformance: every case of tests/conformance (computed by the peers' own code) must pass to
// the tolerance its README states. The copy must equal ../shared/conformance when present.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "common/formats/dump.h"
#include "common/compare/engine.h"
#include "common/base/file_util.h"
#include "common/checks/forge_policy.h"
#include "common/base/json.h"
#include "common/checks/msprobe_policy.h"
#include "common/formats/npy.h"
#include "common/base/pyformat.h"
#include "common/checks/torch_policy.h"
#include "client/report_format.h"
#include "absl/strings/str_split.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = fs::path(PARITY_SOURCE_DIR) / "tests" / "conformance";

std::vector<fs::path> Cases(const std::string& family) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kRoot / family)) {
    if (e.is_directory()) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Json LoadJson(const fs::path& p) {
  absl::StatusOr<std::string> text = ReadFileToString(p.string());
  EXPECT_TRUE(text.ok()) << text.status();
  absl::StatusOr<Json> j = ParseJson(*text);
  EXPECT_TRUE(j.ok()) << p << ": " << j.status();
  return *j;
}

// Loads input `name` of a case, reinterpreting uint16 storage as bfloat16 when stated.
Tensor LoadInput(const fs::path& dir, const Json& expected, const std::string& name) {
  for (const Json& in : expected.Find("inputs")->as_array()) {
    if (in.Find("name")->as_string() != name) continue;
    absl::StatusOr<Tensor> t = ReadNpyFile((dir / in.Find("file")->as_string()).string());
    EXPECT_TRUE(t.ok()) << t.status();
    const Json* storage = in.Find("storage_dtype");
    if (storage && in.Find("dtype")->as_string() == "bfloat16") {
      return *Tensor::Make(DType::kBFloat16, t->shape(), std::string(t->bytes()));
    }
    return *t;
  }
  ADD_FAILURE() << "no input " << name << " in " << dir;
  return Tensor();
}

bool IsNonFiniteText(const Json& e, double* v) {
  if (!e.is_string()) return false;
  const std::string& s = e.as_string();
  if (s == "nan") *v = NAN;
  else if (s == "inf") *v = INFINITY;
  else if (s == "-inf") *v = -INFINITY;
  else return false;
  return true;
}

// Compares a peer value with ours: placeholders byte for byte, numbers within `abs_tol` or
// `rel_tol` (0, 0 = exact), non-finite numbers by class.
void ExpectMetric(const Json& e, const MetricValue& got, double abs_tol, double rel_tol,
                  const std::string& what) {
  double ev;
  if (IsNonFiniteText(e, &ev) || e.is_number()) {
    if (e.is_number()) ev = e.as_double();
    ASSERT_TRUE(got.is_number()) << what << ": expected " << e.Dump() << ", got '" << got.text() << "'";
    const double g = got.number();
    if (std::isnan(ev)) {
      EXPECT_TRUE(std::isnan(g)) << what << ": expected nan, got " << PyRepr(g);
    } else if (std::isinf(ev)) {
      EXPECT_EQ(ev, g) << what;
    } else if (abs_tol == 0 && rel_tol == 0) {
      EXPECT_EQ(ev, g) << what << ": expected " << PyRepr(ev) << ", got " << PyRepr(g);
    } else {
      const double tol = std::max(abs_tol, rel_tol * std::fabs(ev));
      EXPECT_NEAR(ev, g, tol) << what << ": expected " << PyRepr(ev) << ", got " << PyRepr(g);
    }
    return;
  }
  ASSERT_TRUE(e.is_string()) << what << ": unexpected JSON " << e.Dump();
  EXPECT_FALSE(got.is_number()) << what << ": expected '" << e.as_string() << "', got " << got.ToString();
  EXPECT_EQ(e.as_string(), got.text()) << what;
}

void ExpectDouble(const Json& e, double got, double abs_tol, double rel_tol, const std::string& what) {
  ExpectMetric(e, MetricValue::Number(got), abs_tol, rel_tol, what);
}

TEST(ConformanceCopy, MatchesSharedWhenPresent) {
  const fs::path shared = fs::path(PARITY_SOURCE_DIR) / ".." / "shared" / "conformance";
  if (!fs::exists(shared)) {
    // Standalone clone: nothing to compare against, but the copy itself must be complete.
    EXPECT_TRUE(fs::exists(kRoot / "README.md"));
    return;
  }
  std::map<std::string, std::string> ours, theirs;
  for (const auto& e : fs::recursive_directory_iterator(kRoot)) {
    if (e.is_regular_file()) ours[fs::relative(e.path(), kRoot).string()] = e.path().string();
  }
  for (const auto& e : fs::recursive_directory_iterator(shared)) {
    if (e.is_regular_file()) theirs[fs::relative(e.path(), shared).string()] = e.path().string();
  }
  ASSERT_EQ(ours.size(), theirs.size()) << "tests/conformance and shared/conformance differ in file count";
  for (const auto& [rel, path] : theirs) {
    auto it = ours.find(rel);
    ASSERT_NE(it, ours.end()) << rel << " is missing from tests/conformance";
    EXPECT_EQ(*ReadFileToString(path), *ReadFileToString(it->second)) << rel << " differs";
  }
}

TEST(Conformance, MsprobeReal) {
  const auto cases = Cases("msprobe_real");
  ASSERT_EQ(cases.size(), 27u);
  int rounded = 0;  // cases with a cosine other than 0 and 1, whose rounding the check sees
  for (const fs::path& dir : cases) {
    SCOPED_TRACE(dir.filename().string());
    const Json e = LoadJson(dir / "expected.json");
    const Json& x = *e.Find("expected");
    Tensor npu = LoadInput(dir, e, "npu");
    Tensor bench = LoadInput(dir, e, "bench");
    CheckResult r = MsprobeCompareReal(npu, bench, MsprobeOptions());
    ExpectMetric(*x.Find("Cosine"), *r.Find("Cosine"), 1e-12, 0, "Cosine");
    // msprobe writes float('{:.12f}'.format(cos)): a 12-decimal number, which the 1e-12
    // tolerance above cannot tell from the unrounded cosine.
    if (const MetricValue* cos = r.Find("Cosine"); cos->is_number() && std::isfinite(cos->number())) {
      EXPECT_EQ(cos->number(), FormatValue12(cos->number())) << PyRepr(cos->number());
      const Json* xc = x.Find("Cosine");
      if (xc->is_number() && xc->as_double() != 1.0 && xc->as_double() != 0.0) ++rounded;
    }
    ExpectMetric(*x.Find("EucDist"), *r.Find("EucDist"), 0, 1e-9, "EucDist");
    ExpectMetric(*x.Find("MaxAbsErr"), *r.Find("MaxAbsErr"), 0, 0, "MaxAbsErr");
    ExpectMetric(*x.Find("MaxRelativeErr"), *r.Find("MaxRelativeErr"), 0, 0, "MaxRelativeErr");
    ExpectMetric(*x.Find("One Thousandth Err Ratio"), *r.Find("One Thousandth Err Ratio"), 0, 0,
                 "One Thousandth Err Ratio");
    ExpectMetric(*x.Find("Five Thousandths Err Ratio"), *r.Find("Five Thousandths Err Ratio"), 0,
                 0, "Five Thousandths Err Ratio");
    EXPECT_EQ(x.Find("Err_message")->as_string(), r.message);
    EXPECT_EQ(x.Find("Accuracy Reached or Not")->as_string(), r.peer_verdict);
  }
  EXPECT_GE(rounded, 5);  // the rounding check above had cosines to round
}

Dump ParseDumpFile(const fs::path& p) {
  absl::StatusOr<std::string> text = ReadFileToString(p.string());
  EXPECT_TRUE(text.ok());
  absl::StatusOr<Dump> d = ParseMsprobeDumpJson(p.parent_path().string(), p.string(), *text);
  EXPECT_TRUE(d.ok()) << d.status();
  return *d;
}

TEST(Conformance, MsprobeStats) {
  const auto cases = Cases("msprobe_stats");
  ASSERT_EQ(cases.size(), 13u);
  for (const fs::path& dir : cases) {
    SCOPED_TRACE(dir.filename().string());
    const Json e = LoadJson(dir / "expected.json");
    const Json& x = *e.Find("expected");
    Dump npu = ParseDumpFile(dir / "npu_dump.json");
    Dump bench = ParseDumpFile(dir / "bench_dump.json");
    ASSERT_EQ(npu.mode, DumpMode::kStatistics);
    ASSERT_EQ(npu.items.size(), 1u);
    EXPECT_EQ(npu.items[0].name, "Functional.linear.0.forward.input.0");
    CompareConfig config;
    absl::StatusOr<CompareReport> rep = CompareDumps(&bench, &npu, config);
    ASSERT_TRUE(rep.ok()) << rep.status();
    ASSERT_EQ(rep->rows.size(), 1u);
    const CheckResult& r = rep->rows[0].result;
    for (const char* col : kMsprobeStatsColumns) ExpectMetric(*x.Find(col), *r.Find(col), 0, 0, col);
    const std::pair<const char*, const Json DumpItem::*> stats[] = {
        {"max", &DumpItem::max}, {"min", &DumpItem::min}, {"mean", &DumpItem::mean},
        {"l2norm", &DumpItem::norm}};
    for (const auto& [col, field] : stats) {
      ExpectMetric(*x.Find(std::string("NPU ") + col), MsprobeStatDisplay(npu.items[0].*field), 0,
                   0, std::string("NPU ") + col);
      ExpectMetric(*x.Find(std::string("Bench ") + col), MsprobeStatDisplay(bench.items[0].*field),
                   0, 0, std::string("Bench ") + col);
    }
    EXPECT_EQ(x.Find("Requires_grad Consistent")->as_bool() ? "True" : "False",
              r.Find("Requires_grad Consistent")->text());
    EXPECT_EQ(x.Find("Result")->as_string(), r.peer_verdict);
    EXPECT_EQ(x.Find("Err_message")->as_string(), r.message);
  }
}

TEST(Conformance, MsprobeCrc) {
  const auto cases = Cases("msprobe_crc");
  ASSERT_EQ(cases.size(), 9u);
  for (const fs::path& dir : cases) {
    SCOPED_TRACE(dir.filename().string());
    const Json e = LoadJson(dir / "expected.json");
    const Json& x = *e.Find("expected");
    Dump npu = ParseDumpFile(dir / "npu_dump.json");
    Dump bench = ParseDumpFile(dir / "bench_dump.json");
    ASSERT_EQ(npu.items.size(), 1u);
    if (fs::exists(dir / "npu.npy")) {
      // The CRC we compute from the tensor bytes equals what msprobe's dumper wrote.
      Tensor nt = LoadInput(dir, e, "npu");
      Tensor bt = LoadInput(dir, e, "bench");
      EXPECT_EQ(x.Find("NPU MD5")->as_string(), TensorCrc32(nt));
      EXPECT_EQ(x.Find("BENCH MD5")->as_string(), TensorCrc32(bt));
      if (const Json* up = x.Find("npu_crc32_fp32_upcast")) {
        EXPECT_EQ(up->as_string(), TensorCrc32(nt, /*fp32_upcast=*/true));
        EXPECT_EQ(x.Find("bench_crc32_fp32_upcast")->as_string(), TensorCrc32(bt, true));
      }
      ASSERT_EQ(npu.mode, DumpMode::kMd5);
    } else {
      EXPECT_FALSE(npu.items[0].is_tensor);
      EXPECT_EQ(x.Find("npu_hashed_text")->as_string(), PyStr(npu.items[0].value));
      EXPECT_EQ(x.Find("bench_hashed_text")->as_string(), PyStr(bench.items[0].value));
      npu.mode = bench.mode = DumpMode::kMd5;  // non-tensor-only dumps carry no md5 key
    }
    absl::StatusOr<CompareReport> rep = CompareDumps(&bench, &npu, CompareConfig());
    ASSERT_TRUE(rep.ok()) << rep.status();
    const CheckResult& r = rep->rows[0].result;
    EXPECT_EQ(x.Find("NPU MD5")->as_string(), r.Find("NPU MD5")->text());
    EXPECT_EQ(x.Find("BENCH MD5")->as_string(), r.Find("BENCH MD5")->text());
    EXPECT_EQ(x.Find("Result")->as_string(), r.peer_verdict);
    EXPECT_EQ(r.verdict, x.Find("Result")->as_string() == "pass" ? Verdict::kPass : Verdict::kFail);
    // The md5 table as Parity writes it: its last four columns are msprobe's.
    std::string csv;
    ASSERT_TRUE(WriteCsv(ReportContext{&bench, &npu, &*rep}, [&](absl::string_view s) {
                  csv.append(s.data(), s.size());
                  return absl::OkStatus();
                }).ok());
    const std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
    ASSERT_EQ(lines.size(), 2u) << csv;
    const std::vector<std::string> header = absl::StrSplit(lines[0], ',');
    const std::vector<std::string> cells = absl::StrSplit(lines[1], ',');
    ASSERT_GE(cells.size(), 4u);  // earlier cells may hold quoted commas; these four cannot
    const std::vector<std::string> tail(cells.end() - 4, cells.end());
    EXPECT_EQ(std::vector<std::string>(header.end() - 4, header.end()),
              (std::vector<std::string>{"NPU MD5", "BENCH MD5", "Requires_grad Consistent", "Result"}));
    EXPECT_EQ(tail, (std::vector<std::string>{
                        x.Find("NPU MD5")->as_string(), x.Find("BENCH MD5")->as_string(),
                        x.Find("Requires_grad Consistent")->as_bool() ? "True" : "False",
                        x.Find("Result")->as_string()}));
    // msprobe's md5 table has no message; Parity says why non-tensor values fail.
    if (npu.items[0].is_tensor || r.peer_verdict == "pass") {
      EXPECT_EQ(r.message, "");
    } else {
      EXPECT_EQ(r.message.rfind("Non-tensor values differ: ", 0), 0u) << r.message;
    }
  }
}

TEST(Conformance, TorchAssertClose) {
  const auto cases = Cases("torch_assert_close");
  ASSERT_EQ(cases.size(), 13u);
  // The table the vectors were computed with equals ours.
  const Json table = LoadJson(kRoot / "torch_assert_close" / "torch_default_tolerances.json");
  for (const auto& [name, tol] : table.Find("table")->as_object()) {
    std::optional<DType> t = ParseDType(name);
    if (!t) continue;  // complex and quantized dtypes are not tensor dtypes here
    EXPECT_EQ(tol.Find("rtol")->as_double(), TorchDTypePrecision(*t).first) << name;
    EXPECT_EQ(tol.Find("atol")->as_double(), TorchDTypePrecision(*t).second) << name;
  }
  for (const fs::path& dir : cases) {
    SCOPED_TRACE(dir.filename().string());
    const Json e = LoadJson(dir / "expected.json");
    const Json& x = *e.Find("expected");
    Tensor actual = LoadInput(dir, e, "actual");
    Tensor expected = LoadInput(dir, e, "expected");
    TorchOptions o;
    o.compat = TorchCompat::kTorch113;  // the vectors come from torch 1.13.0a0
    for (const auto& [k, v] : e.Find("params")->Find("kwargs")->as_object()) {
      if (k == "check_dtype") o.check_dtype = v.as_bool();
      else if (k == "equal_nan") o.equal_nan = v.as_bool();
      else if (k == "rtol") o.rtol = v.as_double();
      else if (k == "atol") o.atol = v.as_double();
      else FAIL() << "unhandled kwarg " << k;
    }
    const auto defaults = TorchDefaultTolerances(actual.dtype(), expected.dtype());
    EXPECT_EQ(x.Find("default_tolerances")->as_array()[0].as_double(), defaults.first);
    EXPECT_EQ(x.Find("default_tolerances")->as_array()[1].as_double(), defaults.second);
    CheckResult r = TorchAssertClose(actual, expected, o);
    const bool passed = x.Find("passed")->as_bool();
    EXPECT_EQ(passed, r.verdict == Verdict::kPass);
    if (!passed) {
      EXPECT_EQ(x.Find("exception_type")->as_string(), r.peer_verdict);
      EXPECT_EQ(x.Find("message")->as_string(), r.message);
    }
    // torch 2 semantics (isclose in the native dtype) agree with torch's own native count.
    if (const Json* native = x.Find("native_dtype_isclose_mismatches")) {
      EXPECT_EQ(native->as_int(),
                TorchIsCloseMismatches(actual, expected, defaults.first, defaults.second, false,
                                       TorchCompat::kTorch2));
    }
  }
}

TEST(Conformance, TorchVersionSensitiveCaseUnderTorch2) {
  // case_013 fails under torch 1.13 (float64 promotion) and passes in the native-dtype
  // semantics of the default kTorch2 policy; both are reproduced.
  const fs::path dir = kRoot / "torch_assert_close" / "case_013_f16_boundary_version_sensitive";
  const Json e = LoadJson(dir / "expected.json");
  CheckResult r = TorchAssertClose(LoadInput(dir, e, "actual"), LoadInput(dir, e, "expected"),
                                   TorchOptions());
  EXPECT_EQ(r.verdict, Verdict::kPass) << r.message;
}

TEST(Conformance, PccAllClose) {
  const auto cases = Cases("pcc_allclose");
  ASSERT_EQ(cases.size(), 12u);
  for (const fs::path& dir : cases) {
    SCOPED_TRACE(dir.filename().string());
    const Json e = LoadJson(dir / "expected.json");
    const Json& x = *e.Find("expected");
    Tensor golden = LoadInput(dir, e, "golden");
    Tensor calc = LoadInput(dir, e, "calculated");
    // Both inputs widened to double, for the float64 references below.
    std::vector<double> g64(golden.numel()), c64(calc.numel());
    golden.ToDouble(0, golden.numel(), g64.data());
    calc.ToDouble(0, calc.numel(), c64.data());
    ForgeOptions opts;
    if (const Json* d = x.Find("dissimilarity")) {
      const double dis = ForgeDissimilarity(golden, calc);
      ExpectDouble(*d->Find("peer_value"), dis, 0, 0, "dissimilarity");
      EXPECT_EQ(d->Find("pass")->as_bool(), dis <= opts.dissimilarity_threshold) << "dissimilarity.pass";
    }
    // The float64 references. numpy's plain corrcoef is the masked path's PCC wherever it is a
    // number; it is nan exactly where the inputs hold a NaN or a constant side, the cases the
    // forge path replaces by its own rule (pcc_forge_numpy_path above). The population
    // covariance in double is the kernel's PCC (which keeps the mean in the tensor dtype:
    // 1e-12). A null is a value numpy could not give (an exception): nothing to compare.
    if (const Json* c = x.Find("pcc_numpy_corrcoef_f64"); c != nullptr && !c->is_null()) {
      auto constant = [](const std::vector<double>& v) {
        return std::all_of(v.begin(), v.end(), [&](double e) { return e == v[0]; });
      };
      auto has_nan = [](const std::vector<double>& v) {
        return std::any_of(v.begin(), v.end(), [](double e) { return std::isnan(e); });
      };
      const bool degenerate = has_nan(g64) || has_nan(c64) || constant(g64) || constant(c64);
      double raw;
      EXPECT_EQ(IsNonFiniteText(*c, &raw) && std::isnan(raw), degenerate) << "pcc_numpy_corrcoef_f64";
      if (!degenerate) ExpectDouble(*c, ForgeNumpyPcc(golden, calc), 1e-12, 0, "pcc_numpy_corrcoef_f64");
    }
    if (const Json* c = x.Find("pcc_population_cov_f64"); c != nullptr && !c->is_null()) {
      ExpectDouble(*c, ForgeKernelPcc(golden, calc), 1e-12, 0, "pcc_population_cov_f64");
    }
    if (const Json* p = x.Find("pcc_forge_numpy_path")) {
      ExpectDouble(*p, ForgeNumpyPcc(golden, calc), 1e-12, 0, "pcc_forge_numpy_path");
    }
    if (const Json* k = x.Find("custom_kernel_path")) {
      EXPECT_EQ(k->as_bool(), ForgeCanUseKernel(golden, calc));
    }
    if (const Json* k = x.Find("pcc_forge_kernel_emulated")) {
      ExpectDouble(*k, ForgeKernelPcc(golden, calc), 1e-12, 0, "pcc_forge_kernel_emulated");
    }
    if (const Json* f = x.Find("forge_calculate_pcc")) {
      PccOutcome p = ForgeCalculatePcc(golden, calc);
      if (f->Find("value")->is_null()) {
        EXPECT_FALSE(p.value.has_value());
        EXPECT_EQ(f->Find("raises")->Find("type")->as_string(), p.raise.type);
        EXPECT_EQ(f->Find("raises")->Find("message")->as_string(), p.raise.message);
      } else {
        ASSERT_TRUE(p.value.has_value()) << p.raise.message;
        ExpectDouble(*f->Find("value"), *p.value, 1e-12, 0, "forge_calculate_pcc");
      }
    }
    if (const Json* ac = x.Find("allclose")) {
      AllCloseOutcome o = ForgeAllClose(golden, calc, 1e-05, 1e-08);
      if (const Json* k = ac->Find("kernel_dtype_result")) {
        if (k->Find("raises")->is_null()) {
          ASSERT_TRUE(o.pass.has_value()) << o.raise.message;
          EXPECT_EQ(k->Find("value")->as_bool(), *o.pass);
        } else {
          EXPECT_EQ(k->Find("raises")->Find("type")->as_string(), o.raise.type);
          EXPECT_EQ(k->Find("raises")->Find("message")->as_string(), o.raise.message);
        }
      }
      if (const Json* m = ac->Find("max_excess_kernel_dtype")) {
        ASSERT_TRUE(o.max_excess.has_value());
        ExpectDouble(*m, *o.max_excess, 0, 0, "max_excess_kernel_dtype");
      }
      // The same in float64, over the widened inputs. NaN in either: all_close raises, and the
      // reference has no pass (null) and a nan excess.
      auto wide = [](const std::vector<double>& v, const Shape& shape) {
        std::string bytes(v.size() * sizeof(double), '\0');
        std::memcpy(bytes.data(), v.data(), bytes.size());
        return *Tensor::Make(DType::kFloat64, shape, std::move(bytes));
      };
      AllCloseOutcome o64 = ForgeAllClose(wide(g64, golden.shape()), wide(c64, calc.shape()), 1e-05, 1e-08);
      if (const Json* p = ac->Find("pass_f64"); p != nullptr && !p->is_null()) {
        ASSERT_TRUE(o64.pass.has_value()) << o64.raise.message;
        EXPECT_EQ(p->as_bool(), *o64.pass) << "pass_f64";
        ExpectDouble(*ac->Find("max_excess_f64"), *o64.max_excess, 0, 1e-15, "max_excess_f64");
      } else if (p != nullptr) {
        EXPECT_FALSE(o64.pass.has_value()) << "pass_f64 is null: all_close raises on NaN";
        EXPECT_EQ(o64.raise.type, "RuntimeError");
      }
    }
    if (const Json* rt = x.Find("required_tolerances_atol_rtol")) {
      const auto [atol, rtol] = ForgeRequiredTolerances(golden, calc);
      ExpectDouble(rt->as_array()[0], atol, 0, 0, "required atol");
      ExpectDouble(rt->as_array()[1], rtol, 0, 0, "required rtol");
    }
    if (const Json* cg = x.Find("compare_with_golden")) {
      GoldenOutcome o = ForgeCompareWithGolden(golden, calc, opts);
      EXPECT_EQ(cg->Find("path")->as_string(), o.path);
      if (cg->Find("raises")->is_null()) {
        ASSERT_TRUE(o.result.has_value()) << o.raise.message;
        EXPECT_EQ(cg->Find("result")->as_bool(), *o.result);
      } else {
        EXPECT_EQ(cg->Find("raises")->Find("type")->as_string(), o.raise.type);
        EXPECT_EQ(cg->Find("raises")->Find("message")->as_string(), o.raise.message);
      }
      // Log lines match byte for byte, except the PCC value inside "PCC = x", which matches to
      // the PCC tolerance (1e-12: summation order).
      const auto& log = cg->Find("log")->as_array();
      ASSERT_EQ(log.size(), o.log.size());
      const std::string kPcc = "ERROR: Tensor mismatch. PCC = ";
      for (size_t i = 0; i < log.size(); ++i) {
        const std::string& want = log[i].as_string();
        if (want.rfind(kPcc, 0) == 0 && o.log[i].rfind(kPcc, 0) == 0) {
          const size_t wend = want.find(','), gend = o.log[i].find(',');
          EXPECT_NEAR(std::stod(want.substr(kPcc.size())), std::stod(o.log[i].substr(kPcc.size())), 1e-12);
          EXPECT_EQ(want.substr(wend), o.log[i].substr(gend));
        } else {
          EXPECT_EQ(want, o.log[i]);
        }
      }
    }
    if (const Json* av = x.Find("automatic_value_checker")) {
      CheckResult r = ForgeCheck(golden, calc, opts);
      EXPECT_EQ(av->Find("passed")->as_bool(), r.verdict == Verdict::kPass) << r.message;
      if (!av->Find("raises")->is_null()) {
        const std::string type = av->Find("raises")->Find("type")->as_string();
        const std::string prefix = av->Find("raises")->Find("message_prefix")->as_string();
        EXPECT_EQ(type, r.peer_verdict);
        const std::string shown = type == "AssertionError" ? r.message.substr(type.size() + 2) : r.message;
        EXPECT_EQ(prefix, shown.substr(0, prefix.size()));
      }
    }
  }
}

}  // namespace
}  // namespace parity
