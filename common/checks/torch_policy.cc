#include "common/checks/torch_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/float_formats.h"
#include "common/base/pyformat.h"
#include "common/checks/simd.h"
#include "common/checks/torch_kernel.h"

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

// The tolerances as torch.isclose uses them: rtol == atol == 0 means equality only.
struct Tolerance {
  double rtol, atol;
  bool equal_nan;
  bool on() const { return !(rtol == 0 && atol == 0); }
};

// Element by element, for elements [s, s + k) of a pair: torch.isclose's verdict and the
// differences make_tensor_mismatch_msg reports (T = double for a floating arithmetic, int64_t
// for integer inputs). rel is 0 where abs is 0.
template <typename T>
struct Diffs {
  bool close[kBlock];
  T abs[kBlock];
  double rel[kBlock];
};

// Elements of `t` as they are after promotion to arithmetic `ar` (a floating one): floating
// dtypes are exact in it (ComputeArith takes the wider), integers convert as torch's .to()
// does: int64 straight to float32 or float64 (no double rounding), to float16/bfloat16 through
// float32; uint64 as unsigned.
void LoadArith(const Tensor& t, int64_t s, int64_t k, Arith ar, double* out) {
  if (IsFloating(t.dtype())) {
    t.ToDouble(s, k, out);
    return;
  }
  int64_t v[kBlock];
  t.ToInt64(s, k, v);
  const bool u64 = t.dtype() == DType::kUInt64;
  for (int64_t i = 0; i < k; ++i) {
    const uint64_t u = static_cast<uint64_t>(v[i]);
    if (ar == Arith::kF64) {
      out[i] = u64 ? static_cast<double>(u) : static_cast<double>(v[i]);
    } else {
      out[i] = Round(ar, u64 ? static_cast<float>(u) : static_cast<float>(v[i]));
    }
  }
}

void EvaluateFloat(const Tensor& x, const Tensor& y, int64_t s, int64_t k, Arith ar,
                   const Tolerance& t, Diffs<double>* out) {
  double a[kBlock], b[kBlock];
  LoadArith(x, s, k, ar, a);
  LoadArith(y, s, k, ar, b);
  const double at = Round(ar, t.atol), rt = Round(ar, t.rtol);
  for (int64_t i = 0; i < k; ++i) {
    bool close = a[i] == b[i] || (t.equal_nan && std::isnan(a[i]) && std::isnan(b[i]));
    const double d = std::fabs(Round(ar, a[i] - b[i]));
    if (!close && t.on()) {
      const double allowed = Round(ar, at + std::fabs(Round(ar, rt * b[i])));
      close = std::isfinite(d) && d <= allowed;
    }
    out->close[i] = close;
    out->abs[i] = d;
    out->rel[i] = d == 0 ? 0.0 : Round(ar, d / std::fabs(b[i]));
  }
}

// int64 arithmetic modulo 2^64, as torch's int64 tensors wrap.
int64_t WrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t WrapAbs(int64_t v) {  // abs(INT64_MIN) is INT64_MIN
  return v < 0 ? static_cast<int64_t>(0 - static_cast<uint64_t>(v)) : v;
}

// Integer (and bool) inputs: equality on the exact values; with a tolerance, isclose casts to
// float32 (uint64 as unsigned when both inputs are uint64, the only case torch leaves it
// unpromoted); make_tensor_mismatch_msg upcasts to int64 and subtracts there (wrapping), and
// its relative difference is a float32 true division of the int64 values.
void EvaluateInt(const Tensor& x, const Tensor& y, int64_t s, int64_t k, const Tolerance& t,
                 bool u64, Diffs<int64_t>* out) {
  int64_t a[kBlock], b[kBlock];
  x.ToInt64(s, k, a);
  y.ToInt64(s, k, b);
  const float rt = static_cast<float>(t.rtol), at = static_cast<float>(t.atol);
  auto to_float = [u64](int64_t v) {
    return u64 ? static_cast<float>(static_cast<uint64_t>(v)) : static_cast<float>(v);
  };
  for (int64_t i = 0; i < k; ++i) {
    bool close = a[i] == b[i];
    if (!close && t.on()) {
      const float af = to_float(a[i]), bf = to_float(b[i]);
      const float ad = std::fabs(af - bf);
      close = std::isfinite(ad) && ad <= at + std::fabs(rt * bf);
    }
    const int64_t d = WrapAbs(WrapSub(a[i], b[i]));
    out->close[i] = close;
    out->abs[i] = d;
    out->rel[i] = d == 0 ? 0.0f : static_cast<float>(d) / static_cast<float>(WrapAbs(b[i]));
  }
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

// Running torch.max(x, 0): the first NaN wins, otherwise the first maximum.
template <typename T>
struct MaxTracker {
  T value = std::numeric_limits<T>::lowest();
  int64_t index = -1;
  bool nan = false;
  // Whether adding values of at most `max` could change it.
  bool CouldRise(T max) const { return !nan && (index < 0 || max > value); }
  void Add(T v, int64_t i) {
    if (nan) return;
    if (IsNan(v)) {
      nan = true;
      value = v;
      index = i;
    } else if (index < 0 || v > value) {
      value = v;
      index = i;
    }
  }
  static bool IsNan(T v) {
    if constexpr (std::is_floating_point_v<T>) {
      return std::isnan(v);
    } else {
      return false;
    }
  }
};

// What the block loop gathers: the mismatch count and torch.max's four (value, first index).
template <typename T>
struct Scan {
  int64_t mismatches = 0;
  MaxTracker<T> all_abs, gabs;
  MaxTracker<double> all_rel, grel;
};

// Both of one floating dtype and evaluated in it, or of one integer dtype (or bool): TorchBlock
// applies.
std::optional<TorchFormat> BlockFormat(const Tensor& a, const Tensor& b, Arith ar) {
  if (a.dtype() != b.dtype()) return std::nullopt;
  if (ar == Arith::kInt64) {
    switch (a.dtype()) {
      case DType::kBool: return TorchFormat::kBool;
      case DType::kUInt8: return TorchFormat::kU8;
      case DType::kInt8: return TorchFormat::kI8;
      case DType::kInt16: return TorchFormat::kI16;
      case DType::kInt32: return TorchFormat::kI32;
      case DType::kUInt16: return TorchFormat::kU16;
      case DType::kUInt32: return TorchFormat::kU32;
      case DType::kInt64: return TorchFormat::kI64;
      case DType::kUInt64: return TorchFormat::kU64;
      default: return std::nullopt;
    }
  }
  if (a.dtype() == DType::kFloat32 && ar == Arith::kF32) return TorchFormat::kF32;
  if (a.dtype() == DType::kFloat16 && ar == Arith::kF16) return TorchFormat::kF16;
  if (a.dtype() == DType::kBFloat16 && ar == Arith::kBF16) return TorchFormat::kBF16;
  if (a.dtype() == DType::kFloat64 && ar == Arith::kF64) return TorchFormat::kF64;
  if (a.dtype() == DType::kFloat8E4M3FN && ar == Arith::kF32) return TorchFormat::kF8E4M3;
  if (a.dtype() == DType::kFloat8E5M2 && ar == Arith::kF32) return TorchFormat::kF8E5M2;
  return std::nullopt;
}

// How the kernel reads a pair: as stored (one dtype, BlockFormat), or, for two floating dtypes
// evaluated in float32 or float64 (their promoted dtype), each block widened exactly to it first
// (every float16, bfloat16 and fp8 value is a float32, every float32 a float64): the kernel then
// sees the values the element path evaluates.
struct BlockPlan {
  std::optional<TorchFormat> format;
  bool widen = false;
};

BlockPlan PlanBlocks(const Tensor& a, const Tensor& b, Arith ar) {
  if (std::optional<TorchFormat> f = BlockFormat(a, b, ar)) return {f, false};
  // Two different dtypes, at least one floating (the promoted arithmetic is then floating).
  if (a.dtype() == b.dtype() || (!IsFloating(a.dtype()) && !IsFloating(b.dtype()))) return {};
  const bool f64 = a.dtype() == DType::kFloat64 || b.dtype() == DType::kFloat64;
  if (ar == Arith::kF32 && !f64) return {TorchFormat::kF32, true};
  if (ar == Arith::kF64) return {TorchFormat::kF64, true};
  return {};
}

// Elements [s, s + k) of an integer tensor converted to float32 as LoadArith converts them for
// Arith::kF32 (each value rounded once, to nearest even), in a loop the compiler vectorises; false
// for dtypes it leaves to LoadArith (bool).
template <typename I>
void ConvertToFloat32(const char* p, int64_t k, float* out) {
  const I* v = reinterpret_cast<const I*>(p);
  for (int64_t i = 0; i < k; ++i) out[i] = static_cast<float>(v[i]);
}

bool IntegersToFloat32(const Tensor& t, int64_t s, int64_t k, float* out) {
  const char* p = t.data() + DTypeSize(t.dtype()) * s;
  switch (t.dtype()) {
    case DType::kInt8: ConvertToFloat32<int8_t>(p, k, out); return true;
    case DType::kUInt8: ConvertToFloat32<uint8_t>(p, k, out); return true;
    case DType::kInt16: ConvertToFloat32<int16_t>(p, k, out); return true;
    case DType::kUInt16: ConvertToFloat32<uint16_t>(p, k, out); return true;
    case DType::kInt32: ConvertToFloat32<int32_t>(p, k, out); return true;
    case DType::kUInt32: ConvertToFloat32<uint32_t>(p, k, out); return true;
    case DType::kInt64: ConvertToFloat32<int64_t>(p, k, out); return true;
    case DType::kUInt64: ConvertToFloat32<uint64_t>(p, k, out); return true;
    default: return false;
  }
}

// The kernel's summary of elements [s, s + k), or false (kernel off, not applicable, or a
// non-finite input).
bool SummariseBlock(const BlockPlan& plan, const Tensor& a, const Tensor& b, int64_t s, int64_t k, Arith ar,
                    double rtol, double atol, bool locate, TorchBlockSummary* out) {
  if (!plan.format) return false;
  const bool tolerance = !(rtol == 0 && atol == 0);
  if (!plan.widen) {
    const size_t offset = static_cast<size_t>(s) * DTypeSize(a.dtype());
    return TorchBlock(*plan.format, a.data() + offset, b.data() + offset, k, Round(ar, rtol), Round(ar, atol),
                      tolerance, locate, out);
  }
  if (*plan.format == TorchFormat::kF64) {
    double wa[kBlock], wb[kBlock];
    LoadArith(a, s, k, ar, wa);
    LoadArith(b, s, k, ar, wb);
    return TorchBlock(TorchFormat::kF64, wa, wb, k, Round(ar, rtol), Round(ar, atol), tolerance, locate, out);
  }
  // Each side's block in float32: a floating one widened exactly, an integer one converted as
  // torch's .to(float32) converts it (LoadArith's rounding: one, to nearest even).
  float fa[kBlock], fb[kBlock];
  const simd::Isa isa = simd::Selected();
  auto widen = [&](const Tensor& t, float* buf) -> const float* {
    if (IsFloating(t.dtype())) return simd::WidenToFloat32(isa, t.dtype(), t.data() + DTypeSize(t.dtype()) * s, k, buf);
    if (IntegersToFloat32(t, s, k, buf)) return buf;
    double d[kBlock];
    LoadArith(t, s, k, ar, d);
    for (int64_t i = 0; i < k; ++i) buf[i] = static_cast<float>(d[i]);  // float32 values: exact
    return buf;
  };
  const float* wa = widen(a, fa);
  const float* wb = widen(b, fb);
  return TorchBlock(TorchFormat::kF32, wa, wb, k, Round(ar, rtol), Round(ar, atol), tolerance, locate, out);
}

// Sets in `words` (bit i of word w: element 64 w + i) the elements [0, k) of an array of a
// floating dtype whose bits (of unsigned type U) have the exponent all ones (not finite). Whole
// words are tested 16 bytes at a time (SSE2's vectors, which every x86-64 build has) and looked
// at element by element only when they hold one.
template <typename U>
void MarkNonFiniteBits(const char* p, int64_t k, U exponent, uint64_t* words) {
  typedef U V __attribute__((vector_size(16)));
  const V e = V{} + exponent;
  for (int64_t base = 0; base < k; base += 64) {
    const int64_t m = std::min<int64_t>(64, k - base);
    const char* q = p + base * static_cast<int64_t>(sizeof(U));
    if (m == 64) {
      V any = {};
      for (int64_t j = 0; j < 4 * static_cast<int64_t>(sizeof(U)); ++j) {  // 64 elements
        V v;
        std::memcpy(&v, q + j * 16, sizeof v);
        any |= (V)((v & e) == e);
      }
      uint64_t lanes[2];
      std::memcpy(lanes, &any, sizeof lanes);
      if ((lanes[0] | lanes[1]) == 0) continue;
    }
    uint64_t bits = 0;
    for (int64_t i = 0; i < m; ++i) {
      U v;
      std::memcpy(&v, q + i * static_cast<int64_t>(sizeof(U)), sizeof(U));
      bits |= static_cast<uint64_t>((v & exponent) == exponent) << i;
    }
    words[base / 64] |= bits;
  }
}

// The same for elements [s, s + k) of `t`: from the bits for the floating dtypes, from
// LoadArith's values otherwise.
void MarkNonFinite(const Tensor& t, int64_t s, int64_t k, Arith ar, uint64_t* words) {
  const char* p = t.data() + DTypeSize(t.dtype()) * s;
  switch (t.dtype()) {
    case DType::kFloat32: return MarkNonFiniteBits<uint32_t>(p, k, 0x7f800000u, words);
    case DType::kFloat64: return MarkNonFiniteBits<uint64_t>(p, k, 0x7ff0000000000000ull, words);
    case DType::kFloat16: return MarkNonFiniteBits<uint16_t>(p, k, 0x7c00, words);
    case DType::kBFloat16: return MarkNonFiniteBits<uint16_t>(p, k, 0x7f80, words);
    default: {
      double v[kBlock];
      LoadArith(t, s, k, ar, v);
      for (int64_t i = 0; i < k; ++i) words[i / 64] |= static_cast<uint64_t>(!std::isfinite(v[i])) << (i % 64);
    }
  }
}

// The positions in [s, s + k) where either side is not finite, into `out`; false when there
// are none or more than kMaxOddPerBlock (the whole block then takes the element path).
constexpr int64_t kMaxOddPerBlock = kBlock / 16;
bool FewNonFinite(const Tensor& a, const Tensor& b, int64_t s, int64_t k, Arith ar, int64_t* out, int64_t* n) {
  uint64_t words[kBlock / 64] = {};
  MarkNonFinite(a, s, k, ar, words);
  MarkNonFinite(b, s, k, ar, words);
  *n = 0;
  for (int64_t w = 0; w < kBlock / 64; ++w) {
    for (uint64_t bits = words[w]; bits != 0; bits &= bits - 1) {
      if (*n == kMaxOddPerBlock) return false;
      out[(*n)++] = s + 64 * w + __builtin_ctzll(bits);
    }
  }
  return *n > 0;
}

// The block loop: kernel summaries where they apply (pairs of one dtype, finite spans), the
// element path elsewhere. A floating block holding a few non-finite elements is split: the
// kernel on the finite runs between them, the element path on those elements alone (torch's
// NaN and inf rules); spans are added in index order, so the result is the element path's.
// With `track` false only mismatches are counted.
template <typename T>
Scan<T> ScanPair(const Tensor& actual, const Tensor& expected, int64_t n, Arith ar,
                 const Tolerance& tol, bool track) {
  Scan<T> sc;
  const BlockPlan plan = PlanBlocks(actual, expected, ar);
  const bool u64 = actual.dtype() == DType::kUInt64 && expected.dtype() == DType::kUInt64;
  Diffs<T> e;
  // Elements [s, s + k) by the kernel, or false (nothing added).
  auto kernel_span = [&](int64_t s, int64_t k) {
    // When the span could move one of the first-index maxima, the kernel also locates them (at
    // once in the first span, where every maximum moves; a second call elsewhere, which is
    // rare: a running maximum rises in O(log n) blocks).
    TorchBlockSummary sum;
    const bool first = sc.all_abs.index < 0;
    if (!SummariseBlock(plan, actual, expected, s, k, ar, tol.rtol, tol.atol, track && first, &sum)) return false;
    if (!track) {
      sc.mismatches += sum.mismatches;
      return true;
    }
    T abs, gabs;
    if constexpr (std::is_same_v<T, int64_t>) {
      abs = sum.iabs;
      gabs = sum.igabs;
    } else {
      abs = sum.abs;
      gabs = sum.gabs;
    }
    const bool rises = sc.all_abs.CouldRise(abs) || sc.all_rel.CouldRise(sum.rel) ||
                       sc.gabs.CouldRise(gabs) || sc.grel.CouldRise(sum.grel);
    if (rises && !first && !SummariseBlock(plan, actual, expected, s, k, ar, tol.rtol, tol.atol, true, &sum)) {
      return false;
    }
    // Adding the span's maximum at its first index moves a tracker exactly as adding every
    // element in order would.
    sc.all_abs.Add(abs, s + sum.abs_index);
    sc.all_rel.Add(sum.rel, s + sum.rel_index);
    sc.gabs.Add(gabs, s + sum.gabs_index);
    sc.grel.Add(sum.grel, s + sum.grel_index);
    sc.mismatches += sum.mismatches;
    return true;
  };
  auto element_span = [&](int64_t s, int64_t k) {
    if constexpr (std::is_same_v<T, int64_t>) {
      EvaluateInt(actual, expected, s, k, tol, u64, &e);
    } else {
      EvaluateFloat(actual, expected, s, k, ar, tol, &e);
    }
    for (int64_t i = 0; i < k; ++i) {
      if (!track) {
        sc.mismatches += !e.close[i];
        continue;
      }
      sc.all_abs.Add(e.abs[i], s + i);
      sc.all_rel.Add(e.rel[i], s + i);
      if (e.close[i]) {
        sc.gabs.Add(0, s + i);
        sc.grel.Add(0, s + i);
      } else {
        ++sc.mismatches;
        sc.gabs.Add(e.abs[i], s + i);
        sc.grel.Add(e.rel[i], s + i);
      }
    }
  };
  auto span = [&](int64_t s, int64_t k) {
    if (k > 0 && !kernel_span(s, k)) element_span(s, k);
  };
  int64_t odd[kMaxOddPerBlock];
  // Once a block held non-finite elements, the next ones are searched for them before the
  // kernel runs (a kernel pass over a block it then refuses is wasted).
  bool search_first = false;
  for (int64_t s = 0; s < n; s += kBlock) {
    const int64_t k = std::min(kBlock, n - s);
    const bool floating = std::is_same_v<T, double> && plan.format.has_value();
    int64_t n_odd = 0;
    bool few = false;
    if (floating && search_first) {
      few = FewNonFinite(actual, expected, s, k, ar, odd, &n_odd);
      if (!few && n_odd == 0) {
        search_first = false;  // finite again
        span(s, k);
        continue;
      }
    } else {
      if (kernel_span(s, k)) continue;
      few = floating && FewNonFinite(actual, expected, s, k, ar, odd, &n_odd);
      search_first = floating && (few || n_odd > 0);
    }
    if (!few) {
      element_span(s, k);
      continue;
    }
    int64_t at = s;
    for (int64_t j = 0; j < n_odd; ++j) {
      span(at, odd[j] - at);
      element_span(odd[j], 1);
      at = odd[j] + 1;
    }
    span(at, s + k - at);
  }
  return sc;
}

// The scan in the form the report needs.
struct Report {
  int64_t mismatches = 0;
  MetricValue max_abs, gabs;
  std::string gabs_text;
  double max_rel = 0, grel = 0;
  int64_t gabs_index = 0, grel_index = 0;
};

template <typename T>
Report ToReport(const Scan<T>& sc, int64_t n) {
  Report r;
  r.mismatches = sc.mismatches;
  auto metric = [](T v) {
    if constexpr (std::is_same_v<T, int64_t>) {
      return MetricValue::Integer(v);
    } else {
      return MetricValue::Number(v);
    }
  };
  r.max_abs = metric(n ? sc.all_abs.value : 0);
  r.max_rel = n ? sc.all_rel.value : 0;
  r.gabs = metric(sc.gabs.value);
  if constexpr (std::is_same_v<T, int64_t>) {
    r.gabs_text = absl::StrCat(sc.gabs.value);  // max_abs_diff.item(): a Python int
  } else {
    r.gabs_text = PyRepr(sc.gabs.value);
  }
  r.grel = sc.grel.value;
  r.gabs_index = sc.gabs.index;
  r.grel_index = sc.grel.index;
  return r;
}

// A 0-d integer tensor's .item(): a Python int (uint64 as unsigned when both inputs are uint64).
__int128 ScalarInt(const Tensor& t, bool u64) {
  int64_t v;
  t.ToInt64(0, 1, &v);
  return u64 ? static_cast<__int128>(static_cast<uint64_t>(v)) : static_cast<__int128>(v);
}

std::string IntText(__int128 v) {
  return v < 0 ? absl::StrCat(static_cast<int64_t>(v)) : absl::StrCat(static_cast<uint64_t>(v));
}

// num / den correctly rounded to double, as Python's int / int is (den > 0).
double IntRatio(uint64_t num, uint64_t den) {
  constexpr uint64_t kExact = uint64_t{1} << 53;
  if (num < kExact && den < kExact) return static_cast<double>(num) / static_cast<double>(den);
  if (num == 0) return 0;
  // Quotient of num·2^shift (top bit at 127) by den: at least 64 significant bits, so with the
  // remainder as a sticky bit one conversion rounds it correctly.
  const int shift = 64 + __builtin_clzll(num);
  const unsigned __int128 n = static_cast<unsigned __int128>(num) << shift;
  const unsigned __int128 q = n / den, rem = n % den;
  return std::ldexp(static_cast<double>(q | (rem != 0 ? 1 : 0)), -shift);
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
  const Tolerance tol{rtol, atol, equal_nan};
  const int64_t n = std::min(actual.numel(), expected.numel());
  if (ar == Arith::kInt64) return ScanPair<int64_t>(actual, expected, n, ar, tol, false).mismatches;
  return ScanPair<double>(actual, expected, n, ar, tol, false).mismatches;
}

namespace {

// One line of torch's mismatch message: "Greatest absolute difference: D at index I (up to T
// allowed)", without the index for scalars, without the tolerance when it asks for equality.
std::string DiffLine(const char* type, const std::string& diff, const std::string* idx, double tol, bool equality) {
  std::string line;
  if (idx == nullptr) {
    line = absl::StrCat(type[0] == 'a' ? "Absolute" : "Relative", " difference: ", diff);
  } else {
    line = absl::StrCat("Greatest ", type, " difference: ", diff, " at index ", *idx);
  }
  if (!equality) absl::StrAppend(&line, " (up to ", PyRepr(tol), " allowed)");
  return line;
}

// make_scalar_mismatch_msg on Python scalars (.item()): ints exact, floats as doubles of the
// promoted values; adds the greatest differences to `r`.
std::string ScalarMismatch(const Tensor& actual, const Tensor& expected, Arith ar, const TorchOptions& o,
                           double rtol, double atol, CheckResult* r_out) {
  CheckResult& r = *r_out;
  const bool int_diffs = ar == Arith::kInt64;
  const bool equality = rtol == 0 && atol == 0;
  std::string msg;
  std::string a_text, b_text, abs_text;
  double reld;
  if (int_diffs) {
    const bool u64 = actual.dtype() == DType::kUInt64 && expected.dtype() == DType::kUInt64;
    const __int128 a = ScalarInt(actual, u64), b = ScalarInt(expected, u64);
    const uint64_t absd = static_cast<uint64_t>(a > b ? a - b : b - a);  // < 2^64
    const uint64_t absb = static_cast<uint64_t>(b < 0 ? -b : b);
    reld = absb == 0 ? std::numeric_limits<double>::infinity() : IntRatio(absd, absb);
    if (actual.dtype() == DType::kBool && expected.dtype() == DType::kBool) {
      a_text = a != 0 ? "True" : "False";
      b_text = b != 0 ? "True" : "False";
    } else {
      a_text = IntText(a);
      b_text = IntText(b);
    }
    abs_text = absl::StrCat(absd);
    r.Add("Greatest absolute difference",
          absd <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
              ? MetricValue::Integer(static_cast<int64_t>(absd))
              : MetricValue::Number(static_cast<double>(absd)));
  } else {
    double a, b;
    LoadArith(actual, 0, 1, ar, &a);
    LoadArith(expected, 0, 1, ar, &b);
    const double absd = std::fabs(a - b);
    reld = b == 0 ? std::numeric_limits<double>::infinity() : absd / std::fabs(b);
    a_text = PyRepr(a);
    b_text = PyRepr(b);
    abs_text = PyRepr(absd);
    r.Add("Greatest absolute difference", MetricValue::Number(absd));
  }
  msg = absl::StrCat("Scalars are not ", equality ? "equal" : "close", "!\n\n");
  if (o.compat == TorchCompat::kTorch2) {
    absl::StrAppend(&msg, "Expected ", b_text, " but got ", a_text, ".\n");
  }
  absl::StrAppend(&msg, DiffLine("absolute", abs_text, nullptr, atol, equality), "\n",
                  DiffLine("relative", PyRepr(reld), nullptr, rtol, equality));
  r.Add("Greatest relative difference", MetricValue::Number(reld));
  return msg;
}

// The tensor message: mismatched elements and where the greatest differences are; adds them to
// `r`.
std::string TensorMismatch(const Tensor& actual, const Report& rep, int64_t mismatches, int64_t n, double rtol,
                           double atol, CheckResult* r_out) {
  CheckResult& r = *r_out;
  const bool equality = rtol == 0 && atol == 0;
  std::string msg;
  const std::string abs_idx = PyTuple(Unravel(rep.gabs_index, actual.shape()));
  const std::string rel_idx = PyTuple(Unravel(rep.grel_index, actual.shape()));
  msg = absl::StrCat("Tensor-likes are not ", equality ? "equal" : "close", "!\n\n",
                     "Mismatched elements: ", mismatches, " / ", n, " (",
                     PyPercent1(static_cast<double>(mismatches) / static_cast<double>(n)),
                     ")\n",
                     DiffLine("absolute", rep.gabs_text, &abs_idx, atol, equality),
                     "\n", DiffLine("relative", PyRepr(rep.grel), &rel_idx, rtol, equality));
  r.Add("Greatest absolute difference", rep.gabs);
  r.Add("Absolute difference index", MetricValue::Text(abs_idx));
  r.Add("Greatest relative difference", MetricValue::Number(rep.grel));
  r.Add("Relative difference index", MetricValue::Text(rel_idx));
  return msg;
}

}  // namespace

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

  const Tolerance tol{rtol, atol, o.equal_nan};
  const int64_t n = actual.numel();
  const Report rep = int_diffs ? ToReport(ScanPair<int64_t>(actual, expected, n, ar, tol, true), n)
                               : ToReport(ScanPair<double>(actual, expected, n, ar, tol, true), n);
  const int64_t mismatches = rep.mismatches;
  r.Add("Mismatched elements", MetricValue::Integer(mismatches));
  r.Add("Total elements", MetricValue::Integer(n));
  r.Add("Max absolute difference", rep.max_abs);
  r.Add("Max relative difference", MetricValue::Number(rep.max_rel));
  r.Add("rtol", MetricValue::Number(rtol));
  r.Add("atol", MetricValue::Number(atol));
  if (mismatches == 0) {
    r.verdict = Verdict::kPass;
    r.peer_verdict = "passed";
    return r;
  }
  return fail(actual.rank() == 0 ? ScalarMismatch(actual, expected, ar, o, rtol, atol, &r)
                                 : TensorMismatch(actual, rep, mismatches, n, rtol, atol, &r));
}

}  // namespace parity
