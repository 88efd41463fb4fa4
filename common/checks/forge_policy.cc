#include "common/checks/forge_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/float_formats.h"
#include "common/checks/forge_kernel.h"
#include "common/checks/forge_masked_kernel.h"
#include "common/base/pyformat.h"

namespace parity {
namespace {

constexpr int64_t kBlock = 1024;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kTiny = 2.2250738585072014e-308;  // np.finfo(float).tiny
constexpr int64_t kNumpyChunkThreshold = 100000000;  // TENSOR_SIZE_THRESHOLD
constexpr int64_t kNumpyChunk = 1000000;             // CHUNK_SIZE

std::string TorchSize(const Shape& s) { return absl::StrCat("torch.Size(", ShapeToString(s), ")"); }

// Calls f(i, x, y) for every element pair, converting in blocks.
template <typename F>
void ForEachPair(const Tensor& a, const Tensor& b, int64_t begin, int64_t end, F&& f) {
  double xa[kBlock], xb[kBlock];
  for (int64_t s = begin; s < end; s += kBlock) {
    const int64_t k = std::min(kBlock, end - s);
    a.ToDouble(s, k, xa);
    b.ToDouble(s, k, xb);
    for (int64_t i = 0; i < k; ++i) f(s + i, xa[i], xb[i]);
  }
}

// ForEachPair as numpy's masked path sees the values: calculate_or_estimate_pcc converts both
// tensors to float32 when either is bfloat16 (float64 and wide integers round; a float64 beyond
// float32's range becomes inf).
template <typename F>
void ForEachNumpyPair(const Tensor& a, const Tensor& b, int64_t begin, int64_t end, F&& f) {
  if (a.dtype() != DType::kBFloat16 && b.dtype() != DType::kBFloat16) return ForEachPair(a, b, begin, end, f);
  ForEachPair(a, b, begin, end, [&](int64_t i, double x, double y) {
    f(i, static_cast<double>(static_cast<float>(x)), static_cast<double>(static_cast<float>(y)));
  });
}

bool HasSpecial(const Tensor& t) {
  if (!IsFloating(t.dtype())) return false;
  double x[kBlock];
  for (int64_t s = 0; s < t.numel(); s += kBlock) {
    const int64_t k = std::min(kBlock, t.numel() - s);
    t.ToDouble(s, k, x);
    for (int64_t i = 0; i < k; ++i) {
      if (!std::isfinite(x[i])) return true;
    }
  }
  return false;
}

// Rounds a value to the arithmetic precision of dtype t (floating dtypes; ints use double).
double RoundTo(DType t, double v) {
  switch (t) {
    case DType::kFloat64: return v;
    case DType::kFloat16: return RoundToHalf(static_cast<float>(v));
    case DType::kBFloat16: return RoundToBFloat16(static_cast<float>(v));
    default: return static_cast<float>(v);  // float32 (and fp8, widened to float32)
  }
}

bool IsFloat8(DType t) { return t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2; }

bool IsKernelDType(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kBFloat16:
    case DType::kFloat16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kInt16:
      return true;
    default:
      return false;
  }
}

// np.ma true_divide: masked where |num| * tiny >= |den|.
std::optional<double> MaDivide(double num, double den) {
  if (std::fabs(num) * kTiny >= std::fabs(den)) return std::nullopt;
  return num / den;
}

std::optional<double> CorrcoefMin(double caa, double cab, double cbb);

// np.min(np.ma.corrcoef(masked a, masked b)) over [begin, end) with invalid (non-finite)
// positions masked; nullopt for numpy's MaskedConstant (everything masked).
std::optional<double> MaskedCorrcoefMin(const Tensor& a, const Tensor& b, int64_t begin,
                                        int64_t end) {
  int64_t n = 0;
  double sa = 0, sb = 0;
  ForEachNumpyPair(a, b, begin, end, [&](int64_t, double x, double y) {
    if (!std::isfinite(x) || !std::isfinite(y)) return;
    ++n;
    sa += x;
    sb += y;
  });
  if (n == 0) return std::nullopt;
  const double ma = sa / static_cast<double>(n), mb = sb / static_cast<double>(n);
  double caa = 0, cab = 0, cbb = 0;
  ForEachNumpyPair(a, b, begin, end, [&](int64_t, double x, double y) {
    if (!std::isfinite(x) || !std::isfinite(y)) return;
    const double dx = x - ma, dy = y - mb;
    caa += dx * dx;
    cab += dx * dy;
    cbb += dy * dy;
  });
  const double fact = static_cast<double>(n);
  return CorrcoefMin(caa / fact, cab / fact, cbb / fact);
}

// min(np.ma.corrcoef) from the population covariances (already divided by N).
std::optional<double> CorrcoefMin(double caa, double cab, double cbb) {
  const std::optional<double> r[4] = {
      MaDivide(caa, std::sqrt(caa * caa)), MaDivide(cab, std::sqrt(caa * cbb)),
      MaDivide(cab, std::sqrt(cbb * caa)), MaDivide(cbb, std::sqrt(cbb * cbb))};
  std::optional<double> best;
  for (const auto& v : r) {
    if (v && (!best || *v < *best)) best = v;
  }
  return best;
}

}  // namespace

namespace {

// What ForgeCheck scanned of (golden, calculated): the fused scan (same-dtype pairs, finite unless
// it says otherwise) or the masked scan (different dtypes, or NaN/inf), or neither. The functions
// below take their figures instead of reading the tensors element by element.
struct Scans {
  const ForgeScanResult* fused = nullptr;
  const ForgeMaskedScanResult* masked = nullptr;
};

bool CanUseKernel(const Tensor& a, const Tensor& b, const Scans& scan) {
  if (a.dtype() != b.dtype() || !IsKernelDType(a.dtype())) return false;
  if (scan.fused != nullptr) return scan.fused->finite;
  if (scan.masked != nullptr) return !scan.masked->special_g && !scan.masked->special_c;
  return !HasSpecial(a) && !HasSpecial(b);
}

double KernelPcc(const Tensor& a, const Tensor& b, const Scans& scan) {
  const int64_t n = a.numel();
  double suma = 0, sumb = 0;
  if (scan.fused != nullptr) {
    suma = scan.fused->sum_g;
    sumb = scan.fused->sum_c;
  } else {
    ForEachPair(a, b, 0, n, [&](int64_t, double x, double y) {
      suma += x;
      sumb += y;
    });
  }
  // tensor.mean() in the tensor's dtype (integer tensors use mean(kDouble)).
  const bool fl = IsFloating(a.dtype());
  const double nd = static_cast<double>(n);
  const double mx = fl ? RoundTo(a.dtype(), suma / nd) : suma / nd;
  const double my = fl ? RoundTo(b.dtype(), sumb / nd) : sumb / nd;
  double aa = 0, ab = 0, bb = 0;
  if (scan.fused != nullptr) {
    const ForgeCovarianceResult cov = ForgeCovariance(*scan.fused, mx, my);
    aa = cov.aa;
    ab = cov.ab;
    bb = cov.bb;
  } else {
    ForEachPair(a, b, 0, n, [&](int64_t, double x, double y) {
      const double dx = x - mx, dy = y - my;
      aa += dx / nd * dx;
      ab += dx / nd * dy;
      bb += dy / nd * dy;
    });
  }
  const double sa = std::sqrt(aa), sb = std::sqrt(bb);
  const double m[4] = {aa / (sa * sa), ab / (sa * sb), ab / (sb * sa), bb / (sb * sb)};
  double best = m[0];
  for (double v : m) {
    if (std::isnan(v)) return kNan;  // torch.min propagates NaN
    best = std::min(best, v);
  }
  if (n == 0) return kNan;
  return best;
}

}  // namespace

bool ForgeCanUseKernel(const Tensor& a, const Tensor& b) { return CanUseKernel(a, b, Scans()); }

double ForgeKernelPcc(const Tensor& a, const Tensor& b) { return KernelPcc(a, b, Scans()); }

namespace {
double NumpyPcc(const Tensor& a, const Tensor& b, const Scans& scan) {
  const int64_t n = std::min(a.numel(), b.numel());
  if (scan.fused != nullptr && scan.fused->finite && (scan.fused->integer || IsFloat8(a.dtype())) && n > 0 &&
      n <= kNumpyChunkThreshold) {
    // Integers and finite fp8 values are all valid (no mask); the means as the element path
    // forms them, sum / n (exact sums for integers; for fp8 the sums of widened values, exact
    // unless a chunk's partial sums pass 2^53 units of the smallest subnormal).
    const double nd = static_cast<double>(n);
    const ForgeCovarianceResult cov = ForgeCovariance(*scan.fused, scan.fused->sum_g / nd, scan.fused->sum_c / nd);
    std::optional<double> r = CorrcoefMin(cov.aa, cov.ab, cov.bb);
    return r ? *r : 1.0;
  }
  if (scan.masked != nullptr && n <= kNumpyChunkThreshold) {
    // numpy's masks (or masked values) differ: 0.0; nothing valid: MaskedConstant, 1.0; else the
    // corrcoef of the finite pairs about their means, sum / count.
    const ForgeMaskedScanResult& m = *scan.masked;
    if (m.mismatch) return 0.0;
    if (m.valid == 0) return 1.0;
    const double nd = static_cast<double>(m.valid);
    const ForgeCovarianceResult cov = ForgeCovariance(m.moments, m.moments.sum_g / nd, m.moments.sum_c / nd);
    std::optional<double> r = CorrcoefMin(cov.aa, cov.ab, cov.bb);
    return r ? *r : 1.0;
  }
  return ForgeNumpyPcc(a, b);
}
}  // namespace

double ForgeNumpyPcc(const Tensor& a, const Tensor& b) {
  int64_t inv_a = 0, inv_b = 0;
  bool masks_equal = true;
  ForEachNumpyPair(a, b, 0, std::min(a.numel(), b.numel()), [&](int64_t, double x, double y) {
    const bool ia = !std::isfinite(x), ib = !std::isfinite(y);
    inv_a += ia;
    inv_b += ib;
    if (ia != ib) {
      masks_equal = false;
    } else if (ia && !(x == y || (std::isnan(x) && std::isnan(y)))) {
      masks_equal = false;  // invalid values differ (+inf vs -inf, inf vs nan)
    }
  });
  if (inv_a != inv_b || !masks_equal) return 0.0;
  const int64_t n = std::min(a.numel(), b.numel());
  if (n <= kNumpyChunkThreshold) {
    std::optional<double> r = MaskedCorrcoefMin(a, b, 0, n);
    return r ? *r : 1.0;
  }
  // Estimate: the unweighted mean of 1e6-element chunk PCCs; one fully masked chunk makes the
  // masked sum, and so the result, 1.0 (the peer's behaviour).
  double sum = 0;
  int64_t chunks = 0;
  for (int64_t s = 0; s < n; s += kNumpyChunk) {
    std::optional<double> r = MaskedCorrcoefMin(a, b, s, std::min(n, s + kNumpyChunk));
    if (!r) return 1.0;
    sum += *r;
    ++chunks;
  }
  return sum / static_cast<double>(chunks);
}

namespace {
// The lowest finite value of a floating dtype: where all_close's max excess starts.
double LowestFinite(DType t) {
  switch (t) {
    case DType::kFloat64: return std::numeric_limits<double>::lowest();
    case DType::kFloat16: return -65504.0;
    case DType::kBFloat16: return static_cast<double>(BFloat16ToFloat(0xff7f));
    default: return std::numeric_limits<float>::lowest();
  }
}

// all_close's dtype for a pair of dtypes: the wider floating one (a's when they are as wide).
DType AllCloseDType(DType a, DType b) {
  if (!IsFloating(a) || (IsFloating(b) && DTypeSize(b) > DTypeSize(a))) return b;
  return a;
}

AllCloseOutcome AllClose(const Tensor& a, const Tensor& b, double rtol, double atol, const Scans& scan) {
  AllCloseOutcome out;
  if (scan.fused != nullptr && scan.fused->finite && a.dtype() == b.dtype() && ForgeKernelSupports(a.dtype())) {
    const DType t = a.dtype();
    const int64_t n = std::min(a.numel(), b.numel());
    const double rt = RoundTo(t, rtol), at = RoundTo(t, atol);
    double m = LowestFinite(t);
    if (n > 0) {  // the element path starts its max at the dtype's lowest finite value
      const bool scanned = scan.fused->all_close_max && scan.fused->all_close_rtol == rt && scan.fused->all_close_atol == at;
      m = std::max(m, scanned ? *scan.fused->all_close_max : ForgeAllCloseMax(t, a.data(), b.data(), n, rt, at));
    }
    out.max_excess = m;
    out.pass = m <= 0;
    return out;
  }
  if (scan.fused != nullptr && scan.fused->integer) {  // integers: all_close is equality
    out.pass = scan.fused->max_abs == 0;
    return out;
  }
  if (scan.masked != nullptr) {
    const ForgeMaskedScanResult& m = *scan.masked;
    if (m.special_g || m.special_c) {
      out.raise = {"RuntimeError", absl::StrCat("TT_ASSERT: Tensor ", m.special_g ? "a" : "b", " contains NaN/Inf values")};
      return out;
    }
    if (!IsFloating(a.dtype()) && !IsFloating(b.dtype())) {
      out.pass = !m.unequal;
      return out;
    }
    const DType t = AllCloseDType(a.dtype(), b.dtype());
    if (m.all_close_max && m.all_close_rtol == RoundTo(t, rtol) && m.all_close_atol == RoundTo(t, atol)) {
      out.max_excess = std::max(LowestFinite(t), *m.all_close_max);
      out.pass = *out.max_excess <= 0;
      return out;
    }
  }
  if (HasSpecial(a)) {
    out.raise = {"RuntimeError", "TT_ASSERT: Tensor a contains NaN/Inf values"};
    return out;
  }
  if (HasSpecial(b)) {
    out.raise = {"RuntimeError", "TT_ASSERT: Tensor b contains NaN/Inf values"};
    return out;
  }
  const int64_t n = std::min(a.numel(), b.numel());
  if (!IsFloating(a.dtype()) && !IsFloating(b.dtype())) {
    bool eq = true;
    ForEachPair(a, b, 0, n, [&](int64_t, double x, double y) { eq = eq && x == y; });
    out.pass = eq;
    return out;
  }
  // Arithmetic in the tensor dtype (the wider one if they differ).
  const DType t = AllCloseDType(a.dtype(), b.dtype());
  const double at = RoundTo(t, atol), rt = RoundTo(t, rtol);
  double m = LowestFinite(t);
  ForEachPair(a, b, 0, n, [&](int64_t, double x, double y) {
    const double d = std::fabs(RoundTo(t, x - y));
    const double e = RoundTo(t, RoundTo(t, d - at) - RoundTo(t, rt * std::fabs(y)));
    m = std::max(m, e);
  });
  out.max_excess = m;
  out.pass = m <= 0;
  return out;
}

}  // namespace

AllCloseOutcome ForgeAllClose(const Tensor& a, const Tensor& b, double rtol, double atol,
                              const ForgeScanResult* scan) {
  Scans scans;
  scans.fused = scan;
  return AllClose(a, b, rtol, atol, scans);
}

namespace {

std::pair<double, double> RequiredTolerances(const Tensor& g, const Tensor& c, const Scans& scan) {
  const int64_t n = std::min(g.numel(), c.numel());
  if (scan.fused != nullptr && scan.fused->finite) {
    // Finite same-dtype floats: atol is the kernel's max |g-c| in the arithmetic's dtype (0 when
    // the tensors are equal), rtol the max of |g-c| / |c| in it with zeros of c ignored.
    return {scan.fused->max_abs, n == 0 ? 0.0 : scan.fused->max_rel};
  }
  if (scan.masked != nullptr && !CanUseKernel(g, c, scan)) {
    // The general branch: 0 for equal tensors, else max |g-c| (inf when NaN/inf differ); rtol's
    // maximum, NaN when any quotient is.
    const ForgeMaskedScanResult& m = *scan.masked;
    const double atol = g.shape() == c.shape() && !m.unequal ? 0.0
                        : m.mismatch                         ? std::numeric_limits<double>::infinity()
                                                             : m.max_abs;
    return {atol, n == 0 ? 0.0 : m.rel_nan ? kNan : m.max_rel};
  }
  bool equal = g.shape() == c.shape();
  if (equal) {
    ForEachPair(g, c, 0, n, [&](int64_t, double x, double y) { equal = equal && x == y; });
  }
  double atol;
  if (equal) {
    atol = 0;
  } else if (g.dtype() == DType::kBool && c.dtype() == DType::kBool) {
    atol = 1.0;
  } else if (ForgeCanUseKernel(g, c)) {
    // Kernel max|g-c| in the dtype (bf16 upcast to f32 first).
    const DType t = g.dtype() == DType::kBFloat16 ? DType::kFloat32 : g.dtype();
    atol = 0;
    ForEachPair(g, c, 0, n, [&](int64_t, double x, double y) {
      atol = std::max(atol, std::fabs(IsFloating(t) ? RoundTo(t, x - y) : x - y));
    });
  } else {
    bool mismatch = false;
    double m = -std::numeric_limits<double>::infinity();
    ForEachPair(g, c, 0, n, [&](int64_t, double x, double y) {
      const bool ix = !std::isfinite(x), iy = !std::isfinite(y);
      if (ix != iy || (ix && !(x == y || (std::isnan(x) && std::isnan(y))))) mismatch = true;
      const double d = std::fabs(x - y);
      if (!std::isnan(d)) m = std::max(m, d);
    });
    atol = mismatch ? std::numeric_limits<double>::infinity() : m;
  }
  // rtol = max(|g-c| / |c|) with c == 0 -> +inf denominator; NaN propagates.
  const DType t = g.dtype() == DType::kFloat64 ? DType::kFloat64
                  : g.dtype() == DType::kFloat16 ? DType::kFloat16
                                                 : DType::kFloat32;
  double rtol = -std::numeric_limits<double>::infinity();
  bool nan = false;
  ForEachPair(g, c, 0, n, [&](int64_t, double x, double y) {
    const double d = std::fabs(RoundTo(t, x - y));
    const double den = y == 0 ? std::numeric_limits<double>::infinity() : std::fabs(y);
    const double r = RoundTo(t, d / den);
    if (std::isnan(r)) nan = true;
    rtol = std::max(rtol, r);
  });
  if (nan) rtol = kNan;
  if (n == 0) rtol = 0;
  return {atol, rtol};
}

}  // namespace

std::pair<double, double> ForgeRequiredTolerances(const Tensor& g, const Tensor& c) {
  return RequiredTolerances(g, c, Scans());
}

namespace {
// The dissimilarity of n elements of which k differ in truth value.
double Dissimilarity(int64_t n, int64_t k) {
  return (2.0 * static_cast<double>(k)) /
         (static_cast<double>(n - k) + 2.0 * static_cast<double>(k));
}
}  // namespace

double ForgeDissimilarity(const Tensor& g, const Tensor& c) {
  int64_t k = 0;
  const int64_t n = std::min(g.numel(), c.numel());
  ForEachPair(g, c, 0, n, [&](int64_t, double x, double y) {
    const bool bx = x != 0 || std::isnan(x);
    const bool by = y != 0 || std::isnan(y);
    k += bx != by;
  });
  return Dissimilarity(n, k);
}

namespace {

PccOutcome CalculatePcc(const Tensor& a, const Tensor& b, const Scans& scan) {
  PccOutcome out;
  if (CanUseKernel(a, b, scan)) {
    out.kernel_path = true;
    if (a.numel() != b.numel()) {
      out.raise = {"RuntimeError", "TT_ASSERT: tensors must have the same number of elements"};
      return out;
    }
    const double p = KernelPcc(a, b, scan);
    if (std::isnan(p)) {
      AllCloseOutcome ac = AllClose(a, b, 1e-05, 1e-09, scan);
      if (ac.pass.value_or(false)) {
        out.value = 1.0;
      } else {
        out.raise = {"AssertionError", "PCC is nan, but tensors are not equal"};
      }
      return out;
    }
    out.value = p;
    return out;
  }
  out.value = NumpyPcc(a, b, scan);
  return out;
}

GoldenOutcome CompareWithGolden(const Tensor& g, const Tensor& c, const ForgeOptions& o,
                                const Scans& scan) {
  GoldenOutcome out;
  auto shapes_log = [&](const Shape& gs, const Shape& cs) {
    out.log.push_back(absl::StrCat("ERROR: Golden: (shape = ", TorchSize(gs)));
    out.log.push_back(absl::StrCat("ERROR: Calculated: (shape = ", TorchSize(cs)));
  };
  if (g.dtype() == DType::kBool) {
    out.path = "dissimilarity";
    const double d = scan.fused != nullptr && scan.fused->integer ? Dissimilarity(std::min(g.numel(), c.numel()), scan.fused->dissimilar)
                                                      : ForgeDissimilarity(g, c);
    out.dissimilarity = d;
    out.result = d <= o.dissimilarity_threshold;
    if (*out.result) {
      out.log.push_back(
          absl::StrCat("TRACE: Bool vectors are not dissimilar. Dissimiliarity = ", PyRepr(d)));
    } else {
      out.log.push_back(absl::StrCat("ERROR: Tensor mismatch calculated dissimiliarity = ",
                                     PyRepr(d), " dissimilarity_threshold = ",
                                     PyRepr(o.dissimilarity_threshold)));
      shapes_log(g.shape(), c.shape());
    }
    return out;
  }
  if (g.numel() != 1) {
    out.path = "pcc";
    if (o.pcc < 0) {
      out.raise = {"AssertionError", "PCC threshold must be >= 0"};
      return out;
    }
    PccOutcome p = CalculatePcc(g, c, scan);
    if (p.raise.raised()) {
      out.raise = p.raise;
      return out;
    }
    out.pcc = p.value;
    out.result = *p.value >= o.pcc;
    if (*out.result) {
      out.log.push_back("TRACE: PCC is correct");
    } else {
      out.log.push_back(absl::StrCat("ERROR: Tensor mismatch. PCC = ", PyRepr(*p.value),
                                     ", but required = ", PyRepr(o.pcc)));
      shapes_log(g.shape(), c.shape());
    }
    return out;
  }
  out.path = "scalar_allclose";
  // Element 0 of each, as 0-d tensors of the same dtype.
  Tensor g0 = *Tensor::Make(g.dtype(), {}, std::string(g.bytes().substr(0, DTypeSize(g.dtype()))));
  Tensor c0 = c.numel() >= 1
                  ? *Tensor::Make(c.dtype(), {}, std::string(c.bytes().substr(0, DTypeSize(c.dtype()))))
                  : c;
  AllCloseOutcome ac = ForgeAllClose(g0, c0, o.rtol, o.atol);
  if (ac.raise.raised()) {
    out.raise = ac.raise;
    return out;
  }
  out.result = *ac.pass;
  if (!*out.result) {
    const auto [atol_obs, rtol_obs] = ForgeRequiredTolerances(g0, c0);
    out.log.push_back(absl::StrCat("ERROR: Tensor mismatch. Required rtol=", PyRepr(o.rtol),
                                   ", atol=", PyRepr(o.atol)));
    out.log.push_back(absl::StrCat("ERROR: Observed maximum relative diff: ", PyRepr(rtol_obs),
                                   ", maximum absolute diff: ", PyRepr(atol_obs)));
    shapes_log(g0.shape(), c0.shape());
  }
  return out;
}

}  // namespace

PccOutcome ForgeCalculatePcc(const Tensor& a, const Tensor& b) {
  return CalculatePcc(a, b, Scans());
}

GoldenOutcome ForgeCompareWithGolden(const Tensor& g, const Tensor& c, const ForgeOptions& o) {
  return CompareWithGolden(g, c, o, Scans());
}

namespace {

// Forge DataFormat round trip (convert_to_supported_pytorch_dtype).
DType ForgeRoundTrip(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kInt64:
      return DType::kInt32;
    default:
      return t;
  }
}

bool IsIntOrBool(DType t) { return !IsFloating(t); }

std::string LogText(const std::vector<std::string>& log) {
  std::vector<std::string> lines;
  for (const std::string& l : log) {
    const size_t p = l.find(": ");
    lines.push_back(p == std::string::npos ? l : l.substr(p + 2));
  }
  return absl::StrJoin(lines, "\n");
}

void AddGoldenMetrics(const GoldenOutcome& o, CheckResult* r) {
  r->Add("Path", MetricValue::Text(o.path));
  if (o.pcc) r->Add("PCC", MetricValue::Number(*o.pcc));
  if (o.dissimilarity) r->Add("Dissimilarity", MetricValue::Number(*o.dissimilarity));
}

// Runs compare_with_golden as checker `name`; returns false (with r filled) on failure.
bool RunGolden(const Tensor& g, const Tensor& c, const ForgeOptions& opts, const char* name,
               const Scans& scan, CheckResult* r) {
  GoldenOutcome o = CompareWithGolden(g, c, opts, scan);
  AddGoldenMetrics(o, r);
  if (o.raise.raised()) {
    r->peer_verdict = o.raise.type;
    r->message = absl::StrCat(o.raise.type, ": ", o.raise.message);
    r->verdict = o.raise.type == "RuntimeError" ? Verdict::kError : Verdict::kFail;
    return false;
  }
  if (!*o.result) {
    r->peer_verdict = "ValueError";
    r->message = absl::StrCat("Data mismatch -> ", name, " (compare_with_golden): ", LogText(o.log));
    r->verdict = Verdict::kFail;
    return false;
  }
  r->message = LogText(o.log);
  return true;
}

bool RunAllClose(const Tensor& g, const Tensor& c, const ForgeOptions& opts, const char* name,
                 const Scans& scan, CheckResult* r) {
  AllCloseOutcome ac = AllClose(g, c, opts.rtol, opts.atol, scan);
  if (ac.max_excess) r->Add("AllClose max excess", MetricValue::Number(*ac.max_excess));
  if (ac.raise.raised()) {
    r->peer_verdict = ac.raise.type;
    r->message = absl::StrCat(ac.raise.type, ": ", ac.raise.message);
    r->verdict = Verdict::kError;
    return false;
  }
  if (!*ac.pass) {
    const auto [atol_obs, rtol_obs] = RequiredTolerances(g, c, scan);
    r->peer_verdict = "ValueError";
    r->message = absl::StrCat("Data mismatch -> ", name,
                              " (all_close):\n- Tensor mismatch. Required rtol=", PyRepr(opts.rtol),
                              ", atol=", PyRepr(opts.atol), "\n- Observed maximum relative diff: ",
                              PyRepr(rtol_obs), ", maximum absolute diff: ", PyRepr(atol_obs));
    r->verdict = Verdict::kFail;
    return false;
  }
  return true;
}

// Whether every value of dtype t is a float32 value.
bool ExactInFloat32(DType t) {
  switch (t) {
    case DType::kFloat64:
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kInt64:
    case DType::kUInt64:
      return false;
    default:
      return true;
  }
}

// The passes ForgeCheck runs before its checkers, their results in *fused or *masked:
// - same-dtype floats: one fused pass gives the tolerances, the NaN/inf check and the sums and
//   chunk moments of the PCC kernel (ForgeCovariance combines them), and the all_close
//   checkers' max excess;
// - same-dtype integers and bools of one shape (the element path's equality test needs equal
//   shapes): the tolerances, the PCC's sums and moments and the bool dissimilarity;
// - pairs of different dtypes, and floats the fused pass found NaN/inf in: the masked pass
//   (numpy's masked corrcoef, the tolerances' general branch, all_close in the wider dtype).
// A float64 side beyond the chunked PCC's range leaves the element path to it.
Scans ScanPair(const Tensor& g, const Tensor& c, const ForgeOptions& opts, ForgeScanResult* fused,
               ForgeMaskedScanResult* masked) {
  Scans scans;
  const bool all_close = opts.checker == ForgeChecker::kAllClose || opts.checker == ForgeChecker::kFull;
  if (g.dtype() == c.dtype() && ForgeKernelSupports(g.dtype())) {
    ForgeAllCloseTolerance tol;
    if (all_close) {
      tol.rtol = RoundTo(g.dtype(), opts.rtol);
      tol.atol = RoundTo(g.dtype(), opts.atol);
    }
    *fused = ForgeScan(g.dtype(), g.data(), c.data(), g.numel(), all_close ? &tol : nullptr);
    if (fused->finite) {
      if (!fused->unsupported) scans.fused = fused;
      return scans;
    }
  } else if (g.dtype() == c.dtype() && g.shape() == c.shape() && ForgeIntKernelSupports(g.dtype())) {
    *fused = ForgeIntScan(g.dtype(), g.data(), c.data(), g.numel());
    scans.fused = fused;
    return scans;
  } else if (g.dtype() == c.dtype()) {
    return scans;
  }
  if (g.dtype() == DType::kBool || !ForgeMaskedKernelSupports(g.dtype(), c.dtype())) return scans;
  // numpy's path sees a bfloat16 pair's other side rounded to float32: the masked pass takes the
  // values as they are, so it runs only where that rounding is exact.
  const bool bf16 = g.dtype() == DType::kBFloat16 || c.dtype() == DType::kBFloat16;
  if (bf16 && !(ExactInFloat32(g.dtype()) && ExactInFloat32(c.dtype()))) return scans;
  ForgeMaskedAllClose tol;
  const bool floating = IsFloating(g.dtype()) || IsFloating(c.dtype());
  if (all_close && floating) {
    tol.dtype = AllCloseDType(g.dtype(), c.dtype());
    tol.rtol = RoundTo(tol.dtype, opts.rtol);
    tol.atol = RoundTo(tol.dtype, opts.atol);
  }
  *masked = ForgeMaskedScan(g.dtype(), g.data(), c.dtype(), c.data(), g.numel(),
                            all_close && floating ? &tol : nullptr);
  if (!masked->moments.unsupported) scans.masked = masked;
  return scans;
}

}  // namespace

CheckResult ForgeCheck(const Tensor& g, const Tensor& c, const ForgeOptions& opts) {
  CheckResult r;
  r.policy = "forge";
  if (!opts.enabled) {
    r.verdict = Verdict::kSkipped;
    r.peer_verdict = "skipped";
    r.message = "Verification is disabled (VerifyConfig.enabled=False)";
    return r;
  }
  if (opts.verify_dtype && ForgeRoundTrip(g.dtype()) != ForgeRoundTrip(c.dtype())) {
    r.verdict = Verdict::kFail;
    r.peer_verdict = "ValueError";
    r.message = absl::StrCat("Dtype mismatch: framework_model.dtype=", TorchDTypeName(g.dtype()),
                             ", compiled_model.dtype=", TorchDTypeName(c.dtype()));
    return r;
  }
  if (opts.verify_shape && g.shape() != c.shape()) {
    r.verdict = Verdict::kFail;
    r.peer_verdict = "ValueError";
    r.message = absl::StrCat("Shape mismatch: framework_model.shape=", TorchSize(g.shape()),
                             ", compiled_model.shape=", TorchSize(c.shape()));
    return r;
  }
  if (!opts.verify_values) {
    r.verdict = Verdict::kSkipped;
    r.peer_verdict = "skipped";
    r.message = "Values are not verified (VerifyConfig.verify_values=False)";
    return r;
  }
  if (g.numel() != c.numel()) {
    r.verdict = Verdict::kError;
    r.peer_verdict = "RuntimeError";
    r.message = absl::StrCat("RuntimeError: TT_ASSERT: element counts differ (", g.numel(),
                             " vs ", c.numel(), ")");
    return r;
  }
  ForgeScanResult fused;
  ForgeMaskedScanResult masked;
  const Scans scan = ScanPair(g, c, opts, &fused, &masked);
  const auto [atol_obs, rtol_obs] = RequiredTolerances(g, c, scan);
  switch (opts.checker) {
    case ForgeChecker::kAutomatic:
      if (!RunGolden(g, c, opts, "AutomaticValueChecker", scan, &r)) break;
      r.verdict = Verdict::kPass;
      r.peer_verdict = "passed";
      break;
    case ForgeChecker::kAllClose:
      if (IsIntOrBool(g.dtype())) {
        r.verdict = Verdict::kError;
        r.peer_verdict = "AssertionError";
        r.message = "AssertionError: all_close doesn't make sense for integer/bool types";
        break;
      }
      if (!RunAllClose(g, c, opts, "AllCloseValueChecker", scan, &r)) break;
      r.verdict = Verdict::kPass;
      r.peer_verdict = "passed";
      break;
    case ForgeChecker::kFull:
      if (!RunGolden(g, c, opts, "FullChecker", scan, &r)) break;
      if (!IsIntOrBool(g.dtype()) && !RunAllClose(g, c, opts, "FullChecker", scan, &r)) break;
      r.verdict = Verdict::kPass;
      r.peer_verdict = "passed";
      break;
  }
  r.Add("Required atol", MetricValue::Number(atol_obs));
  r.Add("Required rtol", MetricValue::Number(rtol_obs));
  return r;
}

}  // namespace parity
