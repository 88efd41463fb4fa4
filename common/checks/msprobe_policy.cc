#include "common/checks/msprobe_policy.h"


#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/crc32.h"
#include "common/base/float_formats.h"
#include "common/checks/msprobe_kernel.h"
#include "common/base/pyformat.h"

namespace parity {
namespace {

constexpr double kEps = 2.220446049250313e-16;  // np.finfo(float).eps
constexpr double kCosineRoundThreshold = 0.9999;
constexpr int64_t kBlock = 1024;

constexpr char kMsgEmpty[] = "This is empty data, can not compare.";
constexpr char kMsgZeroD[] =
    "This is type of 0-d tensor, can not calculate 'Cosine', 'EucDist', 'One Thousandth Err "
    "Ratio' and 'Five Thousandths Err Ratio'. ";
constexpr char kMsgShape[] = "Shape of NPU and bench tensor do not match. Skipped.";
constexpr char kMsgInfNan[] = "The position of inf or nan in NPU and bench Tensor do not match.";
constexpr char kMsgDtype[] = "Dtype of NPU and bench tensor do not match.";
constexpr char kMsgLen1[] = "This is a 1-d tensor of length 1.";
constexpr char kMsgCosNpuZero[] =
    "Cannot compare by Cosine Similarity, All the data is Zero in npu dump data.";
constexpr char kMsgCosBenchZero[] =
    "Cannot compare by Cosine Similarity, All the data is Zero in Bench dump data.";
constexpr char kMsgCosNan[] = "Cannot compare by Cosine Similarity, the dump data has NaN.";
constexpr char kMsgMaxAbsNan[] =
    "Cannot compare by MaxAbsError, the data contains nan/inf/-inf in dump data.";
constexpr char kMsgMaxRelNan[] =
    "Cannot compare by MaxRelativeError, the data contains nan/inf/-inf in dump data.";

// The dtype in which msprobe evaluates the relative error of one side.
enum class ReCat { kF16 = 0, kF32 = 1, kF64 = 2 };

// read_pt_data upcasts bf16 to float32; fp8 has no numpy type and is widened the same way.
DType LoadedDType(DType t) {
  if (t == DType::kBFloat16 || t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2) {
    return DType::kFloat32;
  }
  return t;
}

ReCat CatOf(DType loaded) {
  switch (loaded) {
    case DType::kFloat16: return ReCat::kF16;
    case DType::kFloat32: return ReCat::kF32;
    default: return ReCat::kF64;  // float64, and ints/bool cast to float64 first
  }
}

double AddEps(double v, ReCat c) {
  switch (c) {
    case ReCat::kF16: return v;  // eps rounds to 0 in float16
    case ReCat::kF32: return static_cast<double>(static_cast<float>(v) + static_cast<float>(kEps));
    case ReCat::kF64: return v + kEps;
  }
  return v;
}

// |(N' - B') / B'| in numpy arithmetic of the loaded dtypes (see get_relative_err).
inline double RelErr(double n, double b, ReCat cn, ReCat cb, ReCat cp) {
  if (b == 0) {
    b = AddEps(b, cb);
    n = AddEps(n, cn);
  }
  switch (cp) {
    case ReCat::kF16: {
      const float d = RoundToHalf(static_cast<float>(n) - static_cast<float>(b));
      return std::fabs(RoundToHalf(d / static_cast<float>(b)));
    }
    case ReCat::kF32: {
      const float d = static_cast<float>(n) - static_cast<float>(b);
      return std::fabs(static_cast<double>(d / static_cast<float>(b)));
    }
    case ReCat::kF64: return std::fabs((n - b) / b);
  }
  return 0;
}

// A Python float threshold compared against an array of the promoted dtype (value-based
// casting turns the scalar into that dtype).
double ThresholdIn(double t, ReCat c) {
  switch (c) {
    case ReCat::kF16: return RoundToHalf(static_cast<float>(t));
    case ReCat::kF32: return static_cast<float>(t);
    case ReCat::kF64: return t;
  }
  return t;
}

bool IsNumericText(const MetricValue& v, double* out) {
  if (v.is_number()) {
    *out = v.number();
    return true;
  }
  // Python float() of the text: accepts "nan", "inf", numbers; rejects placeholders.
  const std::string t = absl::AsciiStrToLower(v.text());
  if (t == "nan") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (t == "inf" || t == "infinity") {
    *out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (t == "-inf" || t == "-infinity") {
    *out = -std::numeric_limits<double>::infinity();
    return true;
  }
  char* end = nullptr;
  const double d = std::strtod(v.text().c_str(), &end);
  if (!v.text().empty() && end && *end == '\0') {
    *out = d;
    return true;
  }
  return false;
}

Verdict VerdictFromAccuracy(const std::string& acc, bool partial) {
  if (acc == "Yes") return Verdict::kPass;
  if (acc == "No" || acc == "Unmatched") return Verdict::kFail;
  return partial ? Verdict::kWarn : Verdict::kError;
}

// The six real-data metrics' verdict text under the options' rule.
std::string PeerAccuracy(const CheckResult& r, const MsprobeOptions& opts) {
  return opts.rule == MsprobeRule::kTorchair ? TorchairCheckAccuracy(r.metrics[0].value, r.metrics[3].value, opts)
                                             : MsprobeCheckAccuracy(r.metrics[0].value, r.metrics[2].value, opts);
}

}  // namespace

std::string TorchairCheckAccuracy(const MetricValue& cos, const MetricValue& mre, const MsprobeOptions& opts) {
  if (!cos.is_number() && cos.text() == kShapeUnmatched) return "Unmatched";
  if ((!cos.is_number() && cos.text() == "None") || (!mre.is_number() && mre.text() == "None")) return "None";
  if ((!cos.is_number() && cos.text() == kNotApplicable) || (!mre.is_number() && mre.text() == kNotApplicable)) {
    return "No";
  }
  double c, m;
  if (!IsNumericText(cos, &c) || !IsNumericText(mre, &m)) return "None";
  return c >= opts.cos_threshold && m < opts.mre_threshold ? "Yes" : "No";
}

std::string MsprobeCheckAccuracy(const MetricValue& cos, const MetricValue& mae,
                                 const MsprobeOptions& opts) {
  if (!cos.is_number() && cos.text() == kShapeUnmatched) return "Unmatched";
  if ((!cos.is_number() && cos.text() == "None") || (!mae.is_number() && mae.text() == "None")) {
    return "None";
  }
  if ((!cos.is_number() && cos.text() == kNotApplicable) ||
      (!mae.is_number() && mae.text() == kNotApplicable)) {
    return "No";
  }
  double c, m;
  if (!IsNumericText(cos, &c) || !IsNumericText(mae, &m)) return "None";
  if (c < opts.cos_threshold && m > opts.mae_threshold) return "No";
  if (c < opts.cos_max_threshold || m > opts.mae_max_threshold) return "No";
  return "Yes";
}

CheckResult MsprobeNoData(const std::string& err_message) {
  CheckResult r;
  r.policy = "msprobe";
  for (const char* col : kMsprobeRealColumns) r.Add(col, MetricValue::Text(kUnsupported));
  r.message = err_message;
  r.peer_verdict = "None";
  r.verdict = Verdict::kError;
  return r;
}

namespace {
// The six metrics of msprobe's compare_ops_apply from the fused pass's sums over `count`
// elements, with Err_message `err` so far, and the verdict.
struct RealSums {
  double dot, nn, bbsum, euc, max_abs, max_re;
  bool abs_nan, re_nan;
  int64_t c1, c5;
};
CheckResult FinishReal(CheckResult r, std::string err, bool zero_d, int64_t count,
                       const RealSums& sums, const MsprobeOptions& opts) {
  const double dot = sums.dot, nn = sums.nn, bbsum = sums.bbsum, euc = sums.euc;
  const double max_abs = sums.max_abs, max_re = sums.max_re;
  const bool abs_nan = sums.abs_nan, re_nan = sums.re_nan;
  const int64_t c1 = sums.c1, c5 = sums.c5;
  // compare_ops_apply: err_msg += msg after each metric; the metrics that cannot handle a 0-d
  // tensor return the accumulated err_msg itself, which doubles it (msprobe's behaviour).
  size_t column = 0;
  auto emit = [&](MetricValue v, const char* msg) {
    if (*msg != '\0') err += msg;
    r.Add(kMsprobeRealColumns[column++], std::move(v));
  };
  auto emit_err = [&] {  // a 0-d tensor: unsupported, and err_msg doubled
    err += std::string(err);  // err += err, without appending a string to itself
    r.Add(kMsprobeRealColumns[column++], MetricValue::Text(kUnsupported));
  };
  // Cosine.
  if (zero_d) {
    emit_err();
  } else if (count == 1) {
    emit(MetricValue::Text(kUnsupported), kMsgLen1);
  } else {
    const double a = std::sqrt(nn), c = std::sqrt(bbsum);
    if (a <= kEps && c <= kEps) {
      emit(MetricValue::Number(1.0), "");
    } else if (a <= kEps) {
      emit(MetricValue::Text(kNanText), kMsgCosNpuZero);
    } else if (c <= kEps) {
      emit(MetricValue::Text(kNanText), kMsgCosBenchZero);
    } else {
      double cos = dot / (a * c);
      if (std::isnan(cos)) {
        emit(MetricValue::Text(kNanText), kMsgCosNan);
      } else {
        cos = FormatValue12(cos);
        if (cos > kCosineRoundThreshold) cos = PyRound(cos, 6);
        emit(MetricValue::Number(cos), "");
      }
    }
  }
  // EucDist.
  if (zero_d) {
    emit_err();
  } else {
    emit(MetricValue::Number(std::sqrt(euc)), "");
  }
  // MaxAbsErr and MaxRelativeErr (also for 0-d).
  if (count == 0) {
    emit(MetricValue::Text(kUnsupported), "");
    emit(MetricValue::Text(kUnsupported), "");
  } else {
    if (abs_nan) {
      emit(MetricValue::Text(kNanText), kMsgMaxAbsNan);
    } else {
      emit(MetricValue::Number(FormatValue12(max_abs)), "");
    }
    if (re_nan) {
      emit(MetricValue::Text(kNanText), kMsgMaxRelNan);
    } else {
      emit(MetricValue::Number(FormatValue12(max_re)), "");
    }
  }
  // The two ratios.
  for (int64_t cnt : {c1, c5}) {
    if (zero_d) {
      emit_err();
    } else if (count == 0) {
      emit(MetricValue::Text(kNanText), "");
    } else {
      emit(MetricValue::Number(FormatValue12(static_cast<double>(cnt) / static_cast<double>(count))), "");
    }
  }
  r.message = err;
  r.peer_verdict = PeerAccuracy(r, opts);
  r.verdict = VerdictFromAccuracy(r.peer_verdict, /*partial=*/true);
  return r;
}
}  // namespace

void MsprobeThresholds(DType dtype, double* t1, double* t5) { MsprobeThresholds(dtype, dtype, t1, t5); }

void MsprobeThresholds(DType npu, DType bench, double* t1, double* t5) {
  const ReCat c = std::max(CatOf(LoadedDType(npu)), CatOf(LoadedDType(bench)));
  *t1 = ThresholdIn(0.001, c);
  *t5 = ThresholdIn(0.005, c);
}

bool MsprobeLoadedDtypesDiffer(DType npu, DType bench) { return LoadedDType(npu) != LoadedDType(bench); }

CheckResult MsprobeRealFromPartial(int64_t numel, const MsprobePartial& p, const MsprobeOptions& opts,
                                   bool loaded_dtypes_differ) {
  CheckResult r;
  r.policy = "msprobe";
  return FinishReal(std::move(r), loaded_dtypes_differ ? kMsgDtype : "", /*zero_d=*/false, numel,
                    RealSums{p.Dot(), p.NN(), p.BB(), p.Euc(), p.max_abs, p.max_re, false,
                             p.re_nan, p.c1, p.c5},
                    opts);
}

namespace {

// msprobe's get_error_flag_and_msg: the message, and the placeholder that stops the compare
// (null when it goes on); a 0-d NPU tensor is broadcast, inf/nan at the same places are zeroed.
struct RealPreCheck {
  std::string err;
  const char* placeholder = nullptr;
  bool zero_d = false;
  bool zero_special = false;
};

// Whether either tensor holds inf or nan, and whether they hold them at the same places.
void SpecialValueMasks(const Tensor& npu, const Tensor& bench, bool* has_special, bool* masks_equal) {
  *has_special = false;
  *masks_equal = true;
  double nb[kBlock], bb[kBlock];
  for (int64_t s = 0; s < npu.numel(); s += kBlock) {
    const int64_t k = std::min(kBlock, npu.numel() - s);
    npu.ToDouble(s, k, nb);
    bench.ToDouble(s, k, bb);
    for (int64_t i = 0; i < k; ++i) {
      if (std::isfinite(nb[i]) && std::isfinite(bb[i])) continue;
      *has_special = true;
      if (std::isinf(nb[i]) != std::isinf(bb[i]) || std::isnan(nb[i]) != std::isnan(bb[i])) {
        *masks_equal = false;
        return;
      }
    }
  }
}

RealPreCheck PreCheckReal(const Tensor& npu, const Tensor& bench, DType nd, DType bd) {
  RealPreCheck c;
  if (npu.numel() == 0) {
    c.err = kMsgEmpty;
    c.placeholder = kUnsupported;
  } else if (npu.rank() == 0) {
    c.zero_d = true;
    c.err += kMsgZeroD;
  } else if (npu.shape() != bench.shape()) {
    c.err = kMsgShape;
    c.placeholder = kShapeUnmatched;
  } else {
    if (IsFloating(nd) || IsFloating(bd)) {
      bool has_special, masks_equal;
      SpecialValueMasks(npu, bench, &has_special, &masks_equal);
      if (has_special && !masks_equal) {
        c.err = kMsgInfNan;
        c.placeholder = kNotApplicable;
      }
      c.zero_special = has_special;
    }
    if (c.placeholder == nullptr && nd != bd) c.err += kMsgDtype;
  }
  return c;
}

// One fused pass: dot products and norms in float64, |n-b|, relative error in the loaded dtype,
// and the counts under thresholds t1 and t5. The float64 sums are added as the vectorised kernel
// adds them (element i to lane i % 8, a lane's 1024-element block summed apart and then added to
// its 1 Mi-element chunk's, chunks merged in order, lanes reduced in MsprobePartial's tree), so
// that both paths give the same bits for the same values.
RealSums GeneralRealPass(const Tensor& npu, const Tensor& bench, const RealPreCheck& pre, ReCat cn, ReCat cb,
                         ReCat cp, double t1, double t5) {
  constexpr int64_t kChunkElements = int64_t{1} << 20;
  RealSums r{0, 0, 0, 0, -std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
             false, false, 0, 0};
  const int64_t count = pre.zero_d ? bench.numel() : npu.numel();
  const double n0 = pre.zero_d ? npu.At(0) : 0;
  MsprobePartial total;
  double nbuf[kBlock], bbuf[kBlock];
  for (int64_t c = 0; c < count; c += kChunkElements) {
    MsprobePartial chunk;
    for (int64_t s = c; s < std::min(count, c + kChunkElements); s += kBlock) {
      const int64_t k = std::min(kBlock, count - s);
      if (pre.zero_d) {
        std::fill(nbuf, nbuf + k, n0);
      } else {
        npu.ToDouble(s, k, nbuf);
      }
      bench.ToDouble(s, k, bbuf);
      double bdot[8] = {0}, bnn[8] = {0}, bbb[8] = {0}, beuc[8] = {0};
      for (int64_t i = 0; i < k; ++i) {
        double n = nbuf[i], b = bbuf[i];
        if (pre.zero_special && (!std::isfinite(n) || !std::isfinite(b))) n = b = 0;
        const int l = static_cast<int>(i % 8);
        bdot[l] += n * b;
        bnn[l] += n * n;
        bbb[l] += b * b;
        const double d = n - b;
        beuc[l] += d * d;
        const double ad = std::fabs(d);
        if (std::isnan(ad)) {
          r.abs_nan = true;
        } else if (ad > r.max_abs) {
          r.max_abs = ad;
        }
        const double re = RelErr(n, b, cn, cb, cp);
        if (std::isnan(re)) {
          r.re_nan = true;
        } else if (re > r.max_re) {
          r.max_re = re;
        }
        r.c1 += re < t1;
        r.c5 += re < t5;
      }
      for (int l = 0; l < 8; ++l) {
        chunk.dot[l] += bdot[l];
        chunk.nn[l] += bnn[l];
        chunk.bb[l] += bbb[l];
        chunk.euc[l] += beuc[l];
      }
    }
    total.Merge(chunk);
  }
  r.dot = total.Dot();
  r.nn = total.NN();
  r.bbsum = total.BB();
  r.euc = total.Euc();
  return r;
}

}  // namespace

CheckResult MsprobeCompareRealGeneral(const Tensor& npu, const Tensor& bench, const MsprobeOptions& opts) {
  CheckResult r;
  r.policy = "msprobe";
  const DType nd = LoadedDType(npu.dtype());
  const DType bd = LoadedDType(bench.dtype());
  const ReCat cn = CatOf(nd), cb = CatOf(bd);
  const ReCat cp = static_cast<ReCat>(std::max(static_cast<int>(cn), static_cast<int>(cb)));
  const double t1 = ThresholdIn(0.001, cp), t5 = ThresholdIn(0.005, cp);
  RealPreCheck pre = PreCheckReal(npu, bench, nd, bd);
  if (pre.placeholder != nullptr) {
    for (const char* col : kMsprobeRealColumns) r.Add(col, MetricValue::Text(pre.placeholder));
    r.message = pre.err;
    r.peer_verdict = PeerAccuracy(r, opts);
    r.verdict = VerdictFromAccuracy(r.peer_verdict, pre.placeholder == kUnsupported);
    return r;
  }
  const int64_t count = pre.zero_d ? bench.numel() : npu.numel();
  const RealSums sums = GeneralRealPass(npu, bench, pre, cn, cb, cp, t1, t5);
  return FinishReal(std::move(r), std::move(pre.err), pre.zero_d, count, sums, opts);
}

CheckResult MsprobeCompareReal(const Tensor& npu, const Tensor& bench, const MsprobeOptions& opts) {
  // Fast path: one shape of rank >= 1 and dtypes the vectorised kernel reads (the same dtype, or
  // two it widens to float32). Inf/NaN: the kernel reports them; pairs MsprobeKernelZeroesSpecial
  // accepts then take the zeroing pass (msprobe's handle_inf_nan), others the general path, which
  // also reports inf/NaN positions that differ. Such a pair gets no message.
  if (npu.numel() > 0 && npu.rank() > 0 && npu.shape() == bench.shape() &&
      MsprobeKernelSupports(npu.dtype(), bench.dtype())) {
    double t1, t5;
    MsprobeThresholds(npu.dtype(), bench.dtype(), &t1, &t5);
    // msprobe's message for a float16 side against a float32-loading one.
    const bool differ = MsprobeLoadedDtypesDiffer(npu.dtype(), bench.dtype());
    const MsprobePartial p = MsprobeKernelRun(npu.dtype(), bench.dtype(), npu.data(), bench.data(),
                                              npu.numel(), t1, t5, /*parallel_for=*/nullptr);
    if (!p.nonfinite) return MsprobeRealFromPartial(npu.numel(), p, opts, differ);
    if (MsprobeKernelZeroesSpecial(npu.dtype(), bench.dtype())) {
      const MsprobePartial z = MsprobeKernelRunZeroingSpecial(npu.dtype(), bench.dtype(), npu.data(), bench.data(),
                                                              npu.numel(), t1, t5, /*parallel_for=*/nullptr);
      if (!z.special_mismatch) return MsprobeRealFromPartial(npu.numel(), z, opts, differ);
    }
  }
  return MsprobeCompareRealGeneral(npu, bench, opts);
}

MetricValue MsprobeStatDisplay(const Json& v) {
  switch (v.type()) {
    case Json::Type::kNumber:
      if (v.is_integer()) return MetricValue::Integer(v.as_int());
      if (std::isnan(v.as_double())) return MetricValue::Text(kNanText);
      return MetricValue::Number(v.as_double());
    case Json::Type::kNull: return MetricValue::Text("None");
    case Json::Type::kBool: return MetricValue::Text(v.as_bool() ? "True" : "False");
    case Json::Type::kString: return MetricValue::Text(v.as_string());
    default: return MetricValue::Text(PyStr(v));
  }
}

std::string MsprobeRequiresGradText(const std::optional<bool>& rg) {
  if (!rg.has_value()) return kNotApplicable;
  return *rg ? "True" : "False";
}

namespace {
bool StatNumber(const Json& v, double* out) {
  if (v.is_number()) {
    *out = v.as_double();
    return true;
  }
  // pandas.to_numeric of the text: "nan", "3", "1e-05", "inf" (a src/dst rank is its str()).
  if (!v.is_string()) return false;
  const absl::string_view text = absl::StripAsciiWhitespace(v.as_string());
  if (absl::AsciiStrToLower(text) == "nan") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  return absl::SimpleAtod(text, out);
}
}  // namespace

CheckResult MsprobeCompareStats(const MsprobeStats& npu, const MsprobeStats& bench) {
  CheckResult r;
  r.policy = "msprobe";
  const Json* xs[4] = {&npu.max, &npu.min, &npu.mean, &npu.norm};
  const Json* ys[4] = {&bench.max, &bench.min, &bench.mean, &bench.norm};
  MetricValue diffs[4], rels[4];
  bool warning = false;
  for (int i = 0; i < 4; ++i) {
    double x, y;
    if (!StatNumber(*xs[i], &x) || !StatNumber(*ys[i], &y)) {
      diffs[i] = rels[i] = MetricValue::Text(kNotApplicable);
      continue;
    }
    const double diff = x - y;
    if (std::isnan(diff)) {
      diffs[i] = rels[i] = MetricValue::Text(kNanText);
    } else {
      diffs[i] = MetricValue::Number(diff);
      if (y == 0) {
        rels[i] = MetricValue::Text(kNotApplicable);
      } else {
        rels[i] = MetricValue::Text(PyRepr(std::fabs(diff / y * 100)) + "%");
      }
    }
    // |diff| / (|np.maximum(x, y)| + 1e-10) > 0.5; np.maximum propagates NaN.
    const double m = (std::isnan(x) || std::isnan(y)) ? std::numeric_limits<double>::quiet_NaN()
                                                      : std::max(x, y);
    const double magnitude = std::fabs(diff) / (std::fabs(m) + 1e-10);
    if (magnitude > 0.5) warning = true;
  }
  r.metrics.reserve(9);  // Add's first reservation holds 8
  for (int i = 0; i < 4; ++i) r.Add(kMsprobeStatsColumns[i], diffs[i]);
  for (int i = 0; i < 4; ++i) r.Add(kMsprobeStatsColumns[4 + i], rels[i]);
  const bool rg_consistent =
      MsprobeRequiresGradText(npu.requires_grad) == MsprobeRequiresGradText(bench.requires_grad);
  r.Add("Requires_grad Consistent", MetricValue::Text(rg_consistent ? "True" : "False"));
  r.peer_verdict = warning ? "Warning" : "";
  if (warning) r.message += "Need double check api accuracy. ";
  if (!rg_consistent) r.message += "Requires_grad inconsistent. ";
  r.verdict = warning ? Verdict::kWarn : Verdict::kPass;
  return r;
}

CheckResult MsprobeCompareCrc(const std::string& npu_md5, const std::string& bench_md5) {
  CheckResult r;
  r.policy = "msprobe";
  r.Add("NPU MD5", MetricValue::Text(npu_md5));
  r.Add("BENCH MD5", MetricValue::Text(bench_md5));
  const bool same = npu_md5 == bench_md5;
  r.peer_verdict = same ? "pass" : "Different";
  r.verdict = same ? Verdict::kPass : Verdict::kFail;
  return r;
}

namespace {
std::string Hex8(uint32_t crc) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08lx", static_cast<unsigned long>(crc));
  return buf;
}
}  // namespace

std::string TensorCrc32(const Tensor& t, bool fp32_upcast) {
  if (fp32_upcast && t.dtype() == DType::kBFloat16) {
    std::string buf;
    buf.resize(static_cast<size_t>(t.numel()) * 4);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float f = static_cast<float>(t.At(i));
      std::memcpy(&buf[static_cast<size_t>(i) * 4], &f, 4);
    }
    return Hex8(Crc32(0, buf.data(), buf.size()));
  }
  return Hex8(Crc32(0, t.data(), t.bytes().size()));
}

namespace {
std::string PyReprString(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  out.push_back(q);
  return out;
}
std::string PyReprJson(const Json& v) {
  if (v.is_string()) return PyReprString(v.as_string());
  return PyStr(v);
}
}  // namespace

std::string PyStr(const Json& v) {
  switch (v.type()) {
    case Json::Type::kNull: return "None";
    case Json::Type::kBool: return v.as_bool() ? "True" : "False";
    case Json::Type::kNumber:
      if (v.is_integer()) return absl::StrCat(v.as_int());
      return PyRepr(v.as_double());
    case Json::Type::kString: return v.as_string();
    case Json::Type::kArray: {
      std::string out = "[";
      bool first = true;
      for (const Json& e : v.as_array()) {
        if (!first) out += ", ";
        first = false;
        out += PyReprJson(e);
      }
      return out + "]";
    }
    case Json::Type::kObject: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, e] : v.as_object()) {
        if (!first) out += ", ";
        first = false;
        out += PyReprString(k) + ": " + PyReprJson(e);
      }
      return out + "}";
    }
  }
  return "";
}

std::string NonTensorCrc32(const Json& value) {
  const std::string s = PyStr(value);
  return Hex8(Crc32(0, s.data(), s.size()));
}

}  // namespace parity
