#include "common/torch_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/float_formats.h"
#include "common/pyformat.h"
#include "common/torch_kernel.h"

namespace parity {
namespace {

constexpr int64_t kBlock = 1024;

std::string TorchSize(const Shape& s) { return absl::StrCat("torch.Size(", ShapeToString(s), ")"); }

// The arithmetic in which isclose and the reported differences are evaluated.
enum class Arith { kF16, kBF16, kF32, kF64, kInt64 };

double Round(Arith a, double v) {
  switch (a) {
    case Arith::kF16: return RoundToHalf(static_cast<float>(v));
    case Arith::kBF16: return RoundToBFloat16(static_cast<float>(v));
    case Arith::kF32: return static_cast<float>(v);
    default: return v;
  }
}

Arith FloatArith(DType t) {
  switch (t) {
    case DType::kFloat16: return Arith::kF16;
    case DType::kBFloat16: return Arith::kBF16;
    case DType::kFloat64: return Arith::kF64;
    default: return Arith::kF32;  // float32, fp8 (widened)
  }
}

Arith ComputeArith(DType a, DType b, TorchCompat compat) {
  const bool fa = IsFloating(a), fb = IsFloating(b);
  if (!fa && !fb) return Arith::kInt64;
  if (compat == TorchCompat::kTorch113) return Arith::kF64;
  if (fa && !fb) return FloatArith(a);
  if (fb && !fa) return FloatArith(b);
  const Arith x = FloatArith(a), y = FloatArith(b);
  if (x == y) return x;
  if ((x == Arith::kF16 && y == Arith::kBF16) || (x == Arith::kBF16 && y == Arith::kF16)) {
    return Arith::kF32;
  }
  return std::max(x, y);  // F16/BF16 < F32 < F64 in enum order
}

struct Element {
  bool close;
  double abs;  // |a - b| in the compute arithmetic
};

// torch.isclose for one element pair in arithmetic `ar`.
Element IsClose(double a, double b, Arith ar, double rtol, double atol, bool equal_nan) {
  Element e;
  e.close = a == b || (equal_nan && std::isnan(a) && std::isnan(b));
  if (ar == Arith::kInt64) {
    e.abs = std::fabs(a - b);
    if (!e.close && !(rtol == 0 && atol == 0)) {
      // Integer inputs are cast to the default dtype (float32) for the tolerance test.
      const float af = static_cast<float>(a), bf = static_cast<float>(b);
      const float ad = std::fabs(af - bf);
      const float allowed = static_cast<float>(atol) +
                            std::fabs(static_cast<float>(rtol) * bf);
      e.close = std::isfinite(ad) && ad <= allowed;
    }
    return e;
  }
  e.abs = std::fabs(Round(ar, a - b));
  if (!e.close && !(rtol == 0 && atol == 0)) {
    const double at = Round(ar, atol), rt = Round(ar, rtol);
    const double allowed = Round(ar, at + std::fabs(Round(ar, rt * b)));
    e.close = std::isfinite(e.abs) && e.abs <= allowed;
  }
  return e;
}

std::vector<int64_t> Unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] > 0) {
      idx[d] = flat % shape[d];
      flat /= shape[d];
    }
  }
  return idx;
}

std::string NumberText(double v, bool integer) {
  if (integer && std::isfinite(v)) return absl::StrCat(static_cast<int64_t>(v));
  return PyRepr(v);
}

// Running torch.max(x, 0): the first NaN wins, otherwise the first maximum.
struct MaxTracker {
  double value = -std::numeric_limits<double>::infinity();
  int64_t index = -1;
  bool nan = false;
  // Whether adding values of at most `max` could change it.
  bool CouldRise(double max) const { return !nan && (index < 0 || max > value); }
  void Add(double v, int64_t i) {
    if (nan) return;
    if (std::isnan(v)) {
      nan = true;
      value = v;
      index = i;
    } else if (index < 0 || v > value) {
      value = v;
      index = i;
    }
  }
};

// Both of one floating dtype and evaluated in it, or of one integer dtype: TorchBlock applies
// (for int64, to blocks whose values fit in int32).
std::optional<TorchFormat> BlockFormat(const Tensor& a, const Tensor& b, Arith ar) {
  if (a.dtype() != b.dtype()) return std::nullopt;
  if (ar == Arith::kInt64) {
    switch (a.dtype()) {
      case DType::kBool: return TorchFormat::kBool;
      case DType::kUInt8: return TorchFormat::kU8;
      case DType::kInt8: return TorchFormat::kI8;
      case DType::kInt16: return TorchFormat::kI16;
      case DType::kInt32: return TorchFormat::kI32;
      case DType::kInt64: return TorchFormat::kI64;  // the kernel declines values beyond int32
      default: return std::nullopt;
    }
  }
  if (a.dtype() == DType::kFloat32 && ar == Arith::kF32) return TorchFormat::kF32;
  if (a.dtype() == DType::kFloat16 && ar == Arith::kF16) return TorchFormat::kF16;
  if (a.dtype() == DType::kBFloat16 && ar == Arith::kBF16) return TorchFormat::kBF16;
  if (a.dtype() == DType::kFloat64 && ar == Arith::kF64) return TorchFormat::kF64;
  return std::nullopt;
}

// The kernel's summary of elements [s, s + k), or false (kernel off, not applicable, or a
// non-finite input).
bool SummariseBlock(const std::optional<TorchFormat>& format, const Tensor& a, const Tensor& b,
                    int64_t s, int64_t k, Arith ar, double rtol, double atol, bool locate,
                    TorchBlockSummary* out) {
  if (!format) return false;
  const size_t offset = static_cast<size_t>(s) * DTypeSize(a.dtype());
  return TorchBlock(*format, a.data() + offset, b.data() + offset, k, Round(ar, rtol),
                    Round(ar, atol), !(rtol == 0 && atol == 0), locate, out);
}

}  // namespace

std::pair<double, double> TorchDTypePrecision(DType t) {
  switch (t) {
    case DType::kFloat16: return {0.001, 1e-05};
    case DType::kBFloat16: return {0.016, 1e-05};
    case DType::kFloat32: return {1.3e-06, 1e-05};
    case DType::kFloat64: return {1e-07, 1e-07};
    default: return {0.0, 0.0};
  }
}

std::pair<double, double> TorchDefaultTolerances(DType actual, DType expected) {
  const auto a = TorchDTypePrecision(actual), e = TorchDTypePrecision(expected);
  return {std::max(a.first, e.first), std::max(a.second, e.second)};
}

int64_t TorchIsCloseMismatches(const Tensor& actual, const Tensor& expected, double rtol,
                               double atol, bool equal_nan, TorchCompat compat) {
  const Arith ar = ComputeArith(actual.dtype(), expected.dtype(), compat);
  int64_t mism = 0;
  double xa[kBlock], xb[kBlock];
  const int64_t n = std::min(actual.numel(), expected.numel());
  const std::optional<TorchFormat> format = BlockFormat(actual, expected, ar);
  for (int64_t s = 0; s < n; s += kBlock) {
    const int64_t k = std::min(kBlock, n - s);
    TorchBlockSummary sum;
    if (SummariseBlock(format, actual, expected, s, k, ar, rtol, atol, /*locate=*/false, &sum)) {
      mism += sum.mismatches;
      continue;
    }
    actual.ToDouble(s, k, xa);
    expected.ToDouble(s, k, xb);
    for (int64_t i = 0; i < k; ++i) mism += !IsClose(xa[i], xb[i], ar, rtol, atol, equal_nan).close;
  }
  return mism;
}

CheckResult TorchAssertClose(const Tensor& actual, const Tensor& expected, const TorchOptions& o) {
  CheckResult r;
  r.policy = "torch";
  auto fail = [&](std::string msg) {
    r.verdict = Verdict::kFail;
    r.peer_verdict = "AssertionError";
    r.message = std::move(msg);
    return r;
  };
  if (actual.shape() != expected.shape()) {
    return fail(absl::StrCat("The values for attribute 'shape' do not match: ",
                             TorchSize(actual.shape()), " != ", TorchSize(expected.shape()), "."));
  }
  if (o.check_dtype && actual.dtype() != expected.dtype()) {
    return fail(absl::StrCat("The values for attribute 'dtype' do not match: ",
                             TorchDTypeName(actual.dtype()), " != ",
                             TorchDTypeName(expected.dtype()), "."));
  }
  double rtol, atol;
  if (o.rtol && o.atol) {
    rtol = *o.rtol;
    atol = *o.atol;
  } else {
    std::tie(rtol, atol) = TorchDefaultTolerances(actual.dtype(), expected.dtype());
  }
  const Arith ar = ComputeArith(actual.dtype(), expected.dtype(), o.compat);
  const bool int_diffs = ar == Arith::kInt64;
  const bool equality = rtol == 0 && atol == 0;

  int64_t mismatches = 0;
  MaxTracker gabs, grel, all_abs, all_rel;
  double xa[kBlock], xb[kBlock];
  const int64_t n = actual.numel();
  const std::optional<TorchFormat> format = BlockFormat(actual, expected, ar);
  for (int64_t s = 0; s < n; s += kBlock) {
    const int64_t k = std::min(kBlock, n - s);
    // Pairs of one dtype (BlockFormat): a vectorised summary of the block. When it could move one of
    // the first-index maxima, the kernel also locates them (at once in the first block, where
    // every maximum moves; a second call elsewhere, which is rare: a running maximum rises in
    // O(log n) blocks). The element loop below runs only for NaN/inf or without the kernel.
    TorchBlockSummary sum;
    const bool first = all_abs.index < 0;
    if (SummariseBlock(format, actual, expected, s, k, ar, rtol, atol, first, &sum)) {
      const bool rises = all_abs.CouldRise(sum.abs) || all_rel.CouldRise(sum.rel) ||
                         gabs.CouldRise(sum.gabs) || grel.CouldRise(sum.grel);
      if (!rises || first ||
          SummariseBlock(format, actual, expected, s, k, ar, rtol, atol, true, &sum)) {
        // Adding the block's maximum at its first index moves a tracker exactly as adding
        // every element in order would.
        all_abs.Add(sum.abs, s + sum.abs_index);
        all_rel.Add(sum.rel, s + sum.rel_index);
        gabs.Add(sum.gabs, s + sum.gabs_index);
        grel.Add(sum.grel, s + sum.grel_index);
        mismatches += sum.mismatches;
        continue;
      }
    }
    actual.ToDouble(s, k, xa);
    expected.ToDouble(s, k, xb);
    for (int64_t i = 0; i < k; ++i) {
      const Element e = IsClose(xa[i], xb[i], ar, rtol, atol, o.equal_nan);
      const double den = std::fabs(xb[i]);
      double rel;
      if (int_diffs) {
        rel = static_cast<float>(e.abs) / static_cast<float>(den);  // true division in float32
      } else {
        rel = Round(ar, e.abs / den);
      }
      all_abs.Add(e.abs, s + i);
      all_rel.Add(std::isnan(rel) && e.abs == 0 ? 0.0 : rel, s + i);
      if (e.close) {
        gabs.Add(0, s + i);
        grel.Add(0, s + i);
      } else {
        ++mismatches;
        gabs.Add(e.abs, s + i);
        grel.Add(rel, s + i);
      }
    }
  }
  r.Add("Mismatched elements", MetricValue::Integer(mismatches));
  r.Add("Total elements", MetricValue::Integer(n));
  r.Add("Max absolute difference",
        int_diffs ? MetricValue::Integer(static_cast<int64_t>(n ? all_abs.value : 0))
                  : MetricValue::Number(n ? all_abs.value : 0));
  r.Add("Max relative difference", MetricValue::Number(n ? all_rel.value : 0));
  r.Add("rtol", MetricValue::Number(rtol));
  r.Add("atol", MetricValue::Number(atol));
  if (mismatches == 0) {
    r.verdict = Verdict::kPass;
    r.peer_verdict = "passed";
    return r;
  }

  auto diff_line = [&](const char* type, const std::string& diff, const std::string* idx,
                       double tol) {
    std::string line;
    if (idx == nullptr) {
      line = absl::StrCat(type[0] == 'a' ? "Absolute" : "Relative", " difference: ", diff);
    } else {
      line = absl::StrCat("Greatest ", type, " difference: ", diff, " at index ", *idx);
    }
    if (!equality) absl::StrAppend(&line, " (up to ", PyRepr(tol), " allowed)");
    return line;
  };

  std::string msg;
  if (actual.rank() == 0) {
    // make_scalar_mismatch_msg on Python scalars (.item()).
    const double a = actual.At(0), b = expected.At(0);
    const double absd = std::fabs(a - b);
    const double reld = b == 0 ? std::numeric_limits<double>::infinity() : absd / std::fabs(b);
    msg = absl::StrCat("Scalars are not ", equality ? "equal" : "close", "!\n\n");
    if (o.compat == TorchCompat::kTorch2) {
      absl::StrAppend(&msg, "Expected ", NumberText(b, !IsFloating(expected.dtype())),
                      " but got ", NumberText(a, !IsFloating(actual.dtype())), ".\n");
    }
    absl::StrAppend(&msg, diff_line("absolute", NumberText(absd, int_diffs), nullptr, atol), "\n",
                    diff_line("relative", PyRepr(reld), nullptr, rtol));
    r.Add("Greatest absolute difference",
          int_diffs ? MetricValue::Integer(static_cast<int64_t>(absd)) : MetricValue::Number(absd));
    r.Add("Greatest relative difference", MetricValue::Number(reld));
  } else {
    const std::string abs_idx = PyTuple(Unravel(gabs.index, actual.shape()));
    const std::string rel_idx = PyTuple(Unravel(grel.index, actual.shape()));
    msg = absl::StrCat("Tensor-likes are not ", equality ? "equal" : "close", "!\n\n",
                       "Mismatched elements: ", mismatches, " / ", n, " (",
                       PyPercent1(static_cast<double>(mismatches) / static_cast<double>(n)),
                       ")\n",
                       diff_line("absolute", NumberText(gabs.value, int_diffs), &abs_idx, atol),
                       "\n", diff_line("relative", PyRepr(grel.value), &rel_idx, rtol));
    r.Add("Greatest absolute difference",
          int_diffs ? MetricValue::Integer(static_cast<int64_t>(gabs.value))
                    : MetricValue::Number(gabs.value));
    r.Add("Absolute difference index", MetricValue::Text(abs_idx));
    r.Add("Greatest relative difference", MetricValue::Number(grel.value));
    r.Add("Relative difference index", MetricValue::Text(rel_idx));
  }
  return fail(std::move(msg));
}

}  // namespace parity
