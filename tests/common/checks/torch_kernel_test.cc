// The vectorised block summary behind the torch policy (float32, float16, bfloat16, float64, the
// integer formats): the AVX2
// and portable versions agree bit for bit, and TorchAssertClose gives the same verdict, message
// and metrics with the kernel as with its element-by-element path, on data with the awkward
// cases (exact zeros in the expected tensor, equal elements, differences that overflow the
// dtype, NaN/inf, ragged sizes).
#include "common/checks/torch_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/common/checks/isa.h"
#include "common/base/float_formats.h"
#include "common/checks/msprobe_kernel.h"
#include "common/base/tensor.h"
#include "common/checks/torch_policy.h"
#include "tests/test_util.h"

namespace parity {
namespace {

struct Pair {
  std::vector<float> a, b;
};

// Noise and overflow magnitudes suited to each format's precision and range.
float Noise(TorchFormat f) { return f == TorchFormat::kF32 ? 1e-6f : f == TorchFormat::kF16 ? 2e-3f : 2e-2f; }
float Huge(TorchFormat f) { return f == TorchFormat::kF16 ? 60000.0f : 3e38f; }

Pair MakePair(int64_t n, uint32_t seed, int flavour, TorchFormat format = TorchFormat::kF32) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  Pair p;
  p.a.resize(static_cast<size_t>(n));
  p.b.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float b = g(rng);
    float a = b + Noise(format) * g(rng);
    const int r = pick(rng);
    if (r < 5) {                               // expected zero: actual zero, or (from a
      b = 0.0f;                                // quarter on) tiny and close, relative inf
      a = i > n / 4 && flavour != 5 ? 1e-7f * g(rng) : 0.0f;
    }
    if (r >= 5 && r < 15) a = b;               // equal
    if (r >= 15 && r < 20) a = b * 1.01f;      // close only under a loose rtol, large |a - b|
    if (r >= 20 && r < 25) {                   // never close, small |a - b| (growing along in
      b = 1e-3f * g(rng);                      // flavour 4)
      a = b + 0.01f * (flavour == 4 ? 1.0f + static_cast<float>(i) / static_cast<float>(n) : 1.0f);
    }
    if (flavour == 5 && i == n - 2) {          // one close element with relative inf, last
      b = 0.0f;
      a = 1e-7f;
    }
    if (flavour != 5 && r == 25 && i > n / 2) {                // expected zero, actual not: relative inf
      b = 0.0f;
      a = 2e-3f;
    }
    if (flavour == 1 && r == 26) {             // |a - b| overflows to inf
      a = Huge(format);
      b = -Huge(format);
    }
    if (flavour == 6) {                        // coarse values: many equal maxima of each kind
      b = std::round(b * 4.0f) / 4.0f + 1.0f;
      a = r % 3 == 0 ? b + 0.25f : b;
    }
    if (flavour == 2 && r == 27) a = std::numeric_limits<float>::quiet_NaN();
    if (flavour == 3 && r == 28) b = std::numeric_limits<float>::infinity();
    p.a[static_cast<size_t>(i)] = a;
    p.b[static_cast<size_t>(i)] = b;
  }
  return p;
}

DType ToDType(TorchFormat f) {
  return f == TorchFormat::kF32 ? DType::kFloat32
                                : f == TorchFormat::kF16 ? DType::kFloat16 : DType::kBFloat16;
}

Tensor ToTensor(const std::vector<float>& v, TorchFormat format = TorchFormat::kF32) {
  const DType t = ToDType(format);
  return *Tensor::Make(t, {static_cast<int64_t>(v.size())}, testing::EncodeFloats(v, t));
}

const char* Name(TorchFormat f) {
  return f == TorchFormat::kF32 ? "f32" : f == TorchFormat::kF16 ? "f16" : "bf16";
}

constexpr TorchFormat kFormats[] = {TorchFormat::kF32, TorchFormat::kF16, TorchFormat::kBF16};

uint64_t Bits(double f) {
  uint64_t u;
  std::memcpy(&u, &f, 8);
  return u;
}

// Integer pairs of dtype t (bool, uint8, int8, (u)int16, (u)int32, int64 within int32's range) as
// raw bytes: equal, near, far, zeros in the expected tensor, the dtype's extremes (|a - b| up to
// 2^32 - 1 for (u)int32 and int64), uint32 values with the top bit set, runs of
// equal maxima; bool bytes other than 0/1 stand for true.
struct IntPair {
  std::string a, b;
};

IntPair MakeIntPair(DType t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, 99);
  std::uniform_int_distribution<int64_t> any(-2147483648LL, 2147483647LL);
  int64_t lo = 0, hi = 1;
  if (t == DType::kUInt8) hi = 255;
  if (t == DType::kInt8) { lo = -128; hi = 127; }
  if (t == DType::kInt16) { lo = -32768; hi = 32767; }
  if (t == DType::kUInt16) hi = 65535;
  if (t == DType::kUInt32) hi = 4294967295LL;
  if (t == DType::kInt32 || t == DType::kInt64) { lo = -2147483648LL; hi = 2147483647LL; }
  auto clamp = [&](int64_t v) { return std::min(hi, std::max(lo, v)); };
  const size_t size = DTypeSize(t);
  IntPair p;
  p.a.resize(static_cast<size_t>(n) * size);
  p.b.resize(static_cast<size_t>(n) * size);
  for (int64_t i = 0; i < n; ++i) {
    int64_t raw = any(rng);
    if (t == DType::kUInt16 || t == DType::kUInt32) raw = std::llabs(raw);  // not half zeros
    int64_t b = clamp(raw % (t == DType::kInt32 || t == DType::kInt64 ? 100000 : hi + 1));
    int64_t a = b;
    const int r = pick(rng);
    if (r < 20) a = clamp(b + 1);                                   // near
    if (r >= 20 && r < 25) a = clamp(b * 2 + 3);                    // far
    if (r >= 25 && r < 30) b = 0;                                   // expected zero
    if (r == 30) { a = hi; b = lo; }                                // extremes
    if (r == 31) { a = lo; b = hi; }
    if (r >= 32 && r < 40) { b = 1000 % (hi + 1); a = clamp(b + 7); }  // equal maxima
    if (t == DType::kUInt32 && r >= 40 && r < 50) {                 // near 2^32
      b = hi - (b & 0xffff);
      a = clamp(b + r % 7 - 3);
    }
    if (t == DType::kBool) {
      a = (a & 1) ? (r % 2 ? 1 : 2 + r) : 0;                      // true as 1 or another byte
      b = (b & 1) ? 1 : 0;
    }
    std::memcpy(&p.a[static_cast<size_t>(i) * size], &a, size);     // little-endian low bytes
    std::memcpy(&p.b[static_cast<size_t>(i) * size], &b, size);
  }
  return p;
}

// Two implementations' summaries of the same block: bit for bit, and the indices when located.
void ExpectSameSummary(const TorchBlockSummary& x, const TorchBlockSummary& y, bool locate) {
  EXPECT_EQ(x.iabs, y.iabs);
  EXPECT_EQ(x.igabs, y.igabs);
  EXPECT_EQ(Bits(x.abs), Bits(y.abs));
  EXPECT_EQ(Bits(x.rel), Bits(y.rel));
  EXPECT_EQ(Bits(x.gabs), Bits(y.gabs));
  EXPECT_EQ(Bits(x.grel), Bits(y.grel));
  EXPECT_EQ(x.mismatches, y.mismatches);
  if (locate) {
    EXPECT_EQ(x.abs_index, y.abs_index);
    EXPECT_EQ(x.rel_index, y.rel_index);
    EXPECT_EQ(x.gabs_index, y.gabs_index);
    EXPECT_EQ(x.grel_index, y.grel_index);
  }
}

constexpr DType kIntDTypes[] = {DType::kBool,  DType::kUInt8,  DType::kInt8,  DType::kInt16,
                                DType::kInt32, DType::kInt64, DType::kUInt16, DType::kUInt32};

TorchFormat IntFormat(DType t) {
  switch (t) {
    case DType::kBool: return TorchFormat::kBool;
    case DType::kUInt8: return TorchFormat::kU8;
    case DType::kInt8: return TorchFormat::kI8;
    case DType::kInt16: return TorchFormat::kI16;
    case DType::kUInt16: return TorchFormat::kU16;
    case DType::kUInt32: return TorchFormat::kU32;
    case DType::kInt64: return TorchFormat::kI64;
    default: return TorchFormat::kI32;
  }
}

TEST(TorchKernel, VectorAndPortableVersionsAgreeBitForBit) {
  // A version this machine cannot run (or that PARITY_KERNEL rules out) must refuse to run.
  const std::string best = MsprobeKernelIsa();
  for (const std::string isa : {"avx2", "avx512"}) {
    const bool allowed = best == "avx512" || (isa == "avx2" && best == "avx2");
    for (TorchFormat format : kFormats) {
      const auto [rtol, atol] = TorchDTypePrecision(ToDType(format));
      for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 100, 1023, 1024}) {
        for (int flavour : {0, 1, 2, 6}) {
          const Pair p = MakePair(n, static_cast<uint32_t>(n * 10 + flavour), flavour, format);
          const std::string a = testing::EncodeFloats(p.a, ToDType(format));
          const std::string b = testing::EncodeFloats(p.b, ToDType(format));
          const Tensor ta = ToTensor(p.a, format), tb = ToTensor(p.b, format);
          for (bool tolerance : {true, false}) {
            for (bool locate : {false, true}) {
              SCOPED_TRACE(::testing::Message() << isa << " " << Name(format) << " n=" << n
                                                << " flavour=" << flavour << " tolerance="
                                                << tolerance << " locate=" << locate);
              TorchBlockSummary x, y;
              const bool ox = TorchBlockForIsa("portable", format, a.data(), b.data(), n,
                                               static_cast<float>(rtol), static_cast<float>(atol),
                                               tolerance, locate, &x);
              const bool oy = TorchBlockForIsa(isa, format, a.data(), b.data(), n,
                                               static_cast<float>(rtol), static_cast<float>(atol),
                                               tolerance, locate, &y);
              bool finite = true;
              for (int64_t i = 0; i < n; ++i) {
                finite = finite && std::isfinite(ta.At(i)) && std::isfinite(tb.At(i));
              }
              EXPECT_EQ(ox, finite);
              if (!allowed) {
                EXPECT_FALSE(oy);
                continue;
              }
              ASSERT_EQ(ox, oy);
              if (!ox) continue;
              ExpectSameSummary(x, y, locate);
            }
          }
        }
      }
    }
  }
}

// The located index is the first of several equal maxima.
TEST(TorchKernel, LocateFindsTheFirstOfEqualMaxima) {
  std::vector<float> a(100, 1.0f), b(100, 1.0f);
  for (int i : {37, 38, 90}) a[static_cast<size_t>(i)] = 1.5f;  // |a - b| = 0.5, rel 0.5 at each
  for (const std::string isa : {"portable", "avx2", "avx512"}) {
    TorchBlockSummary s;
    if (!TorchBlockForIsa(isa, TorchFormat::kF32, a.data(), b.data(), 100, 1e-5f, 1e-5f, true,
                          true, &s)) {
      continue;  // not runnable here
    }
    SCOPED_TRACE(isa);
    EXPECT_EQ(s.abs, 0.5f);
    EXPECT_EQ(s.abs_index, 37);
    EXPECT_EQ(s.rel_index, 37);
    EXPECT_EQ(s.gabs_index, 37);
    EXPECT_EQ(s.grel_index, 37);
    EXPECT_EQ(s.mismatches, 3);
  }
}

TEST(TorchKernel, IntegerVersionsAgreeBitForBit) {
  const bool avx512 = std::string(MsprobeKernelIsa()) == "avx512";
  for (DType t : kIntDTypes) {
    for (int64_t n : {1, 15, 16, 17, 100, 1024}) {
      const IntPair p = MakeIntPair(t, n, static_cast<uint32_t>(n) * 31 + static_cast<uint32_t>(t));
      for (const auto& [rtol, atol, tolerance] :
           {std::tuple<float, float, bool>{0.0f, 0.0f, false}, {0.02f, 1.0f, true}, {1.3e-6f, 1e-5f, true}}) {
        for (bool locate : {false, true}) {
          SCOPED_TRACE(::testing::Message() << DTypeName(t) << " n=" << n << " rtol=" << rtol
                                            << " locate=" << locate);
          TorchBlockSummary x, y;
          ASSERT_TRUE(TorchBlockForIsa("portable", IntFormat(t), p.a.data(), p.b.data(), n, rtol,
                                       atol, tolerance, locate, &x));
          const bool oy = TorchBlockForIsa("avx512", IntFormat(t), p.a.data(), p.b.data(), n,
                                           rtol, atol, tolerance, locate, &y);
          ASSERT_EQ(oy, avx512);
          if (!oy) continue;
          ExpectSameSummary(x, y, locate);
        }
      }
    }
  }
}

TEST(TorchKernel, IntegerAssertCloseIsTheSameWithAndWithoutTheKernel) {
  for (DType t : kIntDTypes) {
    for (int64_t n : {1, 5, 1000, 1024, 1025, 4096 + 3, 50000}) {
      const IntPair p = MakeIntPair(t, n, static_cast<uint32_t>(n) + static_cast<uint32_t>(t));
      const Tensor a = *Tensor::Make(t, {n}, p.a), b = *Tensor::Make(t, {n}, p.b);
      for (int tol = 0; tol < 3; ++tol) {
        TorchOptions o;
        if (tol == 1) {
          o.rtol = 0.02;
          o.atol = 1.0;
        } else if (tol == 2) {
          o.rtol = 0.5;
          o.atol = 1e6;
        }
        SetTorchKernelEnabled(true);
        const CheckResult fast = TorchAssertClose(a, b, o);
        const int64_t fast_mism = TorchIsCloseMismatches(a, b, 0.02, 1.0, false, TorchCompat::kTorch2);
        SetTorchKernelEnabled(false);
        const CheckResult slow = TorchAssertClose(a, b, o);
        const int64_t slow_mism = TorchIsCloseMismatches(a, b, 0.02, 1.0, false, TorchCompat::kTorch2);
        SetTorchKernelEnabled(true);
        SCOPED_TRACE(::testing::Message() << DTypeName(t) << " n=" << n << " tol=" << tol);
        EXPECT_EQ(fast.verdict, slow.verdict);
        EXPECT_EQ(fast.message, slow.message);
        EXPECT_EQ(fast.ToJson().Dump(), slow.ToJson().Dump());
        EXPECT_EQ(fast_mism, slow_mism);
      }
    }
  }
}

// `v` as a tensor of dtype `t`: rounded to it (float16, bfloat16), or widened for float64 (plus
// 1e-9 at every seventh element with `off_grid`, values float32 cannot hold).
Tensor FloatTensor(DType t, const std::vector<float>& v, bool off_grid) {
  const int64_t n = static_cast<int64_t>(v.size());
  if (t != DType::kFloat64) return *Tensor::Make(t, {n}, testing::EncodeFloats(v, t));
  std::string bytes(v.size() * 8, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const double d = static_cast<double>(v[i]) + (off_grid && i % 7 == 0 ? 1e-9 : 0.0);
    std::memcpy(&bytes[i * 8], &d, 8);
  }
  return *Tensor::Make(t, {n}, std::move(bytes));
}

// assert_close of (x, y) under `o`, and isclose's mismatch count, are the same with the kernel
// as on the element path alone.
void ExpectSameWithAndWithoutKernel(const Tensor& x, const Tensor& y, const TorchOptions& o) {
  SetTorchKernelEnabled(true);
  const CheckResult fast = TorchAssertClose(x, y, o);
  const int64_t fast_mism = TorchIsCloseMismatches(x, y, 1e-5, 1e-8, o.equal_nan, TorchCompat::kTorch2);
  SetTorchKernelEnabled(false);
  const CheckResult slow = TorchAssertClose(x, y, o);
  const int64_t slow_mism = TorchIsCloseMismatches(x, y, 1e-5, 1e-8, o.equal_nan, TorchCompat::kTorch2);
  SetTorchKernelEnabled(true);
  EXPECT_EQ(fast.verdict, slow.verdict);
  EXPECT_EQ(fast.message, slow.message);
  EXPECT_EQ(fast.ToJson().Dump(), slow.ToJson().Dump());
  EXPECT_EQ(fast_mism, slow_mism);
}

// Two floating dtypes compared without check_dtype: the kernel on both sides' blocks widened to
// the promoted dtype (float32, or float64 with a float64 side) gives the element path's result,
// message and metrics, with close, mismatching and equal elements, zeros in the expected tensor,
// partial blocks, and NaN at one place (the element path then takes that block).
TEST(TorchKernel, MixedFloatPairsAreTheSameWithAndWithoutTheKernel) {
  const DType f32 = DType::kFloat32, f16 = DType::kFloat16, bf16 = DType::kBFloat16, f64 = DType::kFloat64;
  int compared = 0;
  for (const auto& [ta, tb] : std::vector<std::pair<DType, DType>>{
           {f32, bf16}, {bf16, f32}, {f32, f16}, {f16, f32}, {bf16, f16}, {f64, f32}, {f32, f64}, {f16, f64}}) {
    for (const int64_t n : {int64_t{7}, int64_t{1031}, int64_t{70000}}) {
      for (const bool nan : {false, true}) {
        std::mt19937 rng(static_cast<uint32_t>(n) + 7 * static_cast<uint32_t>(ta) + static_cast<uint32_t>(tb));
        std::normal_distribution<float> dist(0.0f, 1.0f);
        std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          b[i] = i % 101 == 0 ? 0.0f : dist(rng);
          a[i] = i % 3 == 0 ? b[i] : b[i] + (i % 53 == 0 ? 0.5f : 1e-6f) * dist(rng);
        }
        if (nan) a[static_cast<size_t>(n / 2)] = b[static_cast<size_t>(n / 2)] = NAN;
        const Tensor x = FloatTensor(ta, a, true), y = FloatTensor(tb, b, true);
        for (const bool equal_nan : {false, true}) {
          TorchOptions o;
          o.check_dtype = false;
          o.equal_nan = equal_nan;
          SCOPED_TRACE(::testing::Message() << DTypeName(ta) << " vs " << DTypeName(tb) << " n=" << n
                                            << " nan=" << nan << " equal_nan=" << equal_nan);
          ExpectSameWithAndWithoutKernel(x, y, o);
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 8 * 3 * 2 * 2);
}

// An integer (or bool) tensor against a floating one, without check_dtype: the kernel on blocks in
// the promoted float32 or float64 (the integers converted as torch's .to() converts them, rounded
// beyond 2^24 in float32) gives the element path's result, message and metrics. Against float16
// or bfloat16 (arithmetic in that dtype) the element path runs either way.
TEST(TorchKernel, IntegerAgainstFloatPairsAreTheSameWithAndWithoutTheKernel) {
  const DType f32 = DType::kFloat32, f64 = DType::kFloat64, f16 = DType::kFloat16, bf16 = DType::kBFloat16;
  int compared = 0;
  for (const DType ti : {DType::kInt32, DType::kInt64, DType::kInt16, DType::kUInt8, DType::kBool, DType::kUInt64}) {
    for (const DType tf : {f32, f64, f16, bf16}) {
      for (const bool int_actual : {true, false}) {
        for (const int64_t n : {int64_t{7}, int64_t{1031}, int64_t{70000}}) {
          std::mt19937_64 rng(static_cast<uint64_t>(n) * 31 + static_cast<uint64_t>(ti) * 7 + static_cast<uint64_t>(tf));
          std::uniform_int_distribution<int64_t> small(-300, 300), big(-(int64_t{1} << 40), int64_t{1} << 40);
          const bool wide = ti == DType::kInt32 || ti == DType::kInt64 || ti == DType::kUInt64;
          std::vector<int64_t> iv(static_cast<size_t>(n));
          std::vector<float> fv(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i) {
            int64_t v = wide && i % 17 == 0 ? big(rng) : small(rng);
            if (ti == DType::kUInt8 || ti == DType::kUInt64) v = v < 0 ? -v : v;
            if (ti == DType::kUInt8) v %= 256;
            if (ti == DType::kInt16) v %= 30000;
            if (ti == DType::kBool) v = v & 1;
            iv[static_cast<size_t>(i)] = v;
            const float off = i % 3 == 0 ? 0.0f : i % 53 == 0 ? 0.75f : 1e-6f * static_cast<float>(v);
            fv[static_cast<size_t>(i)] = static_cast<float>(v) + off;
          }
          std::string ib(static_cast<size_t>(n) * DTypeSize(ti), '\0');
          for (int64_t i = 0; i < n; ++i) {
            std::memcpy(&ib[static_cast<size_t>(i) * DTypeSize(ti)], &iv[static_cast<size_t>(i)], DTypeSize(ti));
          }
          const Tensor it = *Tensor::Make(ti, {n}, ib);
          std::string fb;
          if (tf == f64) {
            fb.assign(static_cast<size_t>(n) * 8, '\0');
            for (int64_t i = 0; i < n; ++i) {
              const double d = static_cast<double>(iv[static_cast<size_t>(i)]) + (i % 5 == 0 ? 0.0 : 1e-9);
              std::memcpy(&fb[static_cast<size_t>(i) * 8], &d, 8);
            }
          } else {
            fb = testing::EncodeFloats(fv, tf);
          }
          const Tensor ft = *Tensor::Make(tf, {n}, fb);
          const Tensor& x = int_actual ? it : ft;
          const Tensor& y = int_actual ? ft : it;
          TorchOptions o;
          o.check_dtype = false;
          SetTorchKernelEnabled(true);
          const CheckResult fast = TorchAssertClose(x, y, o);
          SetTorchKernelEnabled(false);
          const CheckResult slow = TorchAssertClose(x, y, o);
          SetTorchKernelEnabled(true);
          SCOPED_TRACE(::testing::Message() << DTypeName(x.dtype()) << " vs " << DTypeName(y.dtype()) << " n=" << n);
          EXPECT_EQ(fast.verdict, slow.verdict);
          EXPECT_EQ(fast.message, slow.message);
          EXPECT_EQ(fast.ToJson().Dump(), slow.ToJson().Dump());
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 6 * 4 * 2 * 3);
}

// float64 pairs as raw bytes, with float64's own awkward cases: differences around the default
// tolerances (1e-7), exact zeros in the expected tensor (relative inf), equal elements, |a - b|
// overflowing to inf, runs of equal maxima (flavour 6), NaN (flavour 2) and inf (flavour 3).
std::string F64Bytes(const std::vector<double>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8);
}

std::pair<std::vector<double>, std::vector<double>> MakeF64Pair(int64_t n, uint32_t seed, int flavour) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<double> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double y = g(rng);
    double x = y + 1e-7 * g(rng);                  // about half within the default tolerances
    const int r = pick(rng);
    if (r < 5) {                                   // expected zero: actual zero or tiny
      y = 0;
      x = i > n / 4 ? 1e-9 * g(rng) : 0.0;
    }
    if (r >= 5 && r < 15) x = y;                   // equal
    if (r >= 15 && r < 20) x = y * (1 + 1e-3);     // far under the defaults
    if (flavour == 1 && r == 26) {                 // |a - b| overflows to inf
      x = 1.5e308;
      y = -1.5e308;
    }
    if (flavour == 6) {                            // coarse: many equal maxima of each kind
      y = std::round(y * 4.0) / 4.0 + 1.0;
      x = r % 3 == 0 ? y + 0.25 : y;
    }
    if (flavour == 2 && r == 27) x = std::numeric_limits<double>::quiet_NaN();
    if (flavour == 3 && r == 28) y = std::numeric_limits<double>::infinity();
    a[static_cast<size_t>(i)] = x;
    b[static_cast<size_t>(i)] = y;
  }
  return {a, b};
}

TEST(TorchKernel, Float64VersionsAgreeBitForBit) {
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 100, 1023, 1024}) {
    for (int flavour : {0, 1, 2, 6}) {
      const auto [va, vb] = MakeF64Pair(n, static_cast<uint32_t>(n * 10 + flavour), flavour);
      const std::string a = F64Bytes(va), b = F64Bytes(vb);
      bool finite = true;
      for (int64_t i = 0; i < n; ++i) finite = finite && std::isfinite(va[i]) && std::isfinite(vb[i]);
      for (const auto& [rtol, atol, tolerance] :
           {std::tuple<double, double, bool>{1e-7, 1e-7, true}, {0.0, 0.0, false}, {2e-3, 1e-6, true}}) {
        for (bool locate : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "f64 n=" << n << " flavour=" << flavour << " rtol="
                                            << rtol << " locate=" << locate);
          TorchBlockSummary x, y;
          const bool ox = TorchBlockForIsa("portable", TorchFormat::kF64, a.data(), b.data(), n,
                                           rtol, atol, tolerance, locate, &x);
          EXPECT_EQ(ox, finite);
          for (const char* isa : testing::VectorIsas()) {
            const bool oy = TorchBlockForIsa(isa, TorchFormat::kF64, a.data(), b.data(), n, rtol,
                                             atol, tolerance, locate, &y);
            ASSERT_EQ(ox, oy) << isa;
            if (ox) ExpectSameSummary(x, y, locate);
          }
        }
      }
    }
  }
}

TEST(TorchKernel, Float64AssertCloseIsTheSameWithAndWithoutTheKernel) {
  int passed = 0, failed = 0;
  for (int64_t n : {1, 5, 1000, 1024, 1025, 4096 + 3, 100000}) {
    for (int flavour : {0, 1, 2, 3, 6}) {
      const auto [va, vb] = MakeF64Pair(n, static_cast<uint32_t>(n + flavour), flavour);
      const Tensor a = *Tensor::Make(DType::kFloat64, {n}, F64Bytes(va));
      const Tensor b = *Tensor::Make(DType::kFloat64, {n}, F64Bytes(vb));
      for (int tol = 0; tol < 3; ++tol) {
        TorchOptions o;
        if (tol == 1) {
          o.rtol = 0.0;
          o.atol = 0.0;
        } else if (tol == 2) {
          o.rtol = 2e-3;
          o.atol = 1e-6;
        }
        SetTorchKernelEnabled(true);
        const CheckResult fast = TorchAssertClose(a, b, o);
        const int64_t fast_mism = TorchIsCloseMismatches(a, b, 1e-7, 1e-7, false, TorchCompat::kTorch2);
        SetTorchKernelEnabled(false);
        const CheckResult slow = TorchAssertClose(a, b, o);
        const int64_t slow_mism = TorchIsCloseMismatches(a, b, 1e-7, 1e-7, false, TorchCompat::kTorch2);
        SetTorchKernelEnabled(true);
        SCOPED_TRACE(::testing::Message() << "f64 n=" << n << " flavour=" << flavour << " tol=" << tol);
        EXPECT_EQ(fast.verdict, slow.verdict);
        EXPECT_EQ(fast.message, slow.message);
        EXPECT_EQ(fast.ToJson().Dump(), slow.ToJson().Dump());
        EXPECT_EQ(fast_mism, slow_mism);
        (fast.verdict == Verdict::kPass ? passed : failed)++;
      }
    }
  }
  // The data gives both verdicts (n = 1 passes under the loose tolerances).
  EXPECT_GT(passed, 0);
  EXPECT_GT(failed, 0);
}

// int64 pairs over the whole range: values around 2^40 and 2^62, pairs one apart beyond 2^53
// (one double), the extremes (INT64_MAX against INT64_MIN differ by -1 modulo 2^64), zeros in
// the expected tensor, runs of equal maxima, values that a double would round twice on their
// way to float32. No a - b is -2^63 modulo 2^64.
std::vector<int64_t> WideInt64(int64_t n, uint32_t seed, std::vector<int64_t>* expected) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, 99);
  std::uniform_int_distribution<int64_t> any(std::numeric_limits<int64_t>::min() / 2,
                                             std::numeric_limits<int64_t>::max() / 2);
  const int64_t two53 = int64_t{1} << 53;
  std::vector<int64_t> a(static_cast<size_t>(n));
  expected->assign(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t x = any(rng) >> (pick(rng) < 50 ? 20 : 0), y = x;
    const int r = pick(rng);
    if (r < 20) x = y + 1 + r;                                          // near
    if (r >= 20 && r < 25) x = y / 3;                                   // far
    if (r >= 25 && r < 30) y = 0;                                       // expected zero
    if (r == 30) { x = std::numeric_limits<int64_t>::max(); y = std::numeric_limits<int64_t>::min(); }
    if (r == 31) { x = two53 + 1; y = two53; }                          // one double apart from equal
    if (r >= 32 && r < 40) { y = two53 * 3; x = y + (int64_t{1} << 40); }  // equal maxima
    // 2^60 + 2^36 + 1 rounds to float32 2^60 + 2^37 directly but to 2^60 through a double.
    if (r == 41) { y = int64_t{1} << 60; x = y + (int64_t{1} << 36) + 1; }
    if (r == 42) { y = -((int64_t{1} << 60) + (int64_t{1} << 36) + 1); x = y + 3; }
    a[static_cast<size_t>(i)] = x;
    (*expected)[static_cast<size_t>(i)] = y;
  }
  return a;
}

// The int64 values' bits as a tensor of `dtype` (int64, or uint64: negative values are then
// 2^64 + v, beyond 2^63).
Tensor I64Tensor(const std::vector<int64_t>& v, DType dtype = DType::kInt64) {
  return *Tensor::Make(dtype, {static_cast<int64_t>(v.size())},
                       std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8));
}

// Values in [-1000, 1000]: within int32 as int64, near 2^64 (the negative ones) as uint64, where
// the int32-lane path must not take them.
std::vector<int64_t> SmallSigned(int64_t n, uint32_t seed, std::vector<int64_t>* expected) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> v(-1000, 1000);
  std::vector<int64_t> a(static_cast<size_t>(n));
  expected->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    (*expected)[static_cast<size_t>(i)] = v(rng);
    a[static_cast<size_t>(i)] = (*expected)[static_cast<size_t>(i)] + (i % 3 == 0 ? v(rng) % 7 : 0);
  }
  return a;
}

constexpr std::tuple<float, float, bool> kIntTolerances[] = {
    {0.0f, 0.0f, false}, {0.02f, 1.0f, true}, {1.3e-6f, 1e-5f, true}, {1e-9f, 1e10f, true}};

// Every element a - b = 3 with |b| = 2^60 + 2^36 + 1 + i·2^38 (i < 16): the largest relative
// difference is 3 / f(|b|), whose float32 |b| a double would round twice.
std::vector<int64_t> RelativeRounding(int64_t n, std::vector<int64_t>* expected) {
  std::vector<int64_t> a(static_cast<size_t>(n));
  expected->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = -((int64_t{1} << 60) + (int64_t{1} << 36) + 1 + (15 - i % 16) * (int64_t{1} << 38));
    (*expected)[static_cast<size_t>(i)] = b;
    a[static_cast<size_t>(i)] = b + 3;
  }
  return a;
}

// int64, and the same bits as uint64.
TEST(TorchKernel, Int64VersionsAgreeOverTheWholeRange) {
  const bool avx512 = std::string(MsprobeKernelIsa()) == "avx512";
  for (TorchFormat format : {TorchFormat::kI64, TorchFormat::kU64}) {
    for (int64_t n : {1, 7, 8, 9, 100, 1024}) {
      for (int data = 0; data < 3; ++data) {
        std::vector<int64_t> b;
        const uint32_t seed = static_cast<uint32_t>(n) * 7 + 1;
        const std::vector<int64_t> a = data == 0   ? WideInt64(n, seed, &b)
                                       : data == 1 ? RelativeRounding(n, &b)
                                                   : SmallSigned(n, seed, &b);
        for (const auto& [rtol, atol, tolerance] : kIntTolerances) {
          for (bool locate : {false, true}) {
            SCOPED_TRACE(::testing::Message() << (format == TorchFormat::kU64 ? "uint64" : "int64")
                                              << " data=" << data << " n=" << n << " rtol=" << rtol
                                              << " locate=" << locate);
            TorchBlockSummary x, y;
            ASSERT_TRUE(TorchBlockForIsa("portable", format, a.data(), b.data(), n, rtol, atol,
                                         tolerance, locate, &x));
            if (n == 1024 && data == 0) {
              EXPECT_GT(x.iabs, int64_t{1} << 53);  // the data reach beyond doubles
            }
            EXPECT_EQ(x.abs, static_cast<double>(x.iabs));
            const bool oy = TorchBlockForIsa("avx512", format, a.data(), b.data(), n, rtol, atol,
                                             tolerance, locate, &y);
            ASSERT_EQ(oy, avx512);
            if (oy) ExpectSameSummary(x, y, locate);
          }
        }
      }
    }
  }
}

TEST(TorchKernel, Int64AssertCloseIsTheSameWithAndWithoutTheKernel) {
  for (DType dtype : {DType::kInt64, DType::kUInt64})
  for (bool small : {false, true})
  for (int64_t n : {1, 5, 1024, 1025, 4096 + 3, 50000}) {
    std::vector<int64_t> bv;
    const std::vector<int64_t> av = small ? SmallSigned(n, static_cast<uint32_t>(n) + 5, &bv)
                                          : WideInt64(n, static_cast<uint32_t>(n) + 5, &bv);
    const Tensor a = I64Tensor(av, dtype), b = I64Tensor(bv, dtype);
    for (const auto& [rtol, atol, tolerance] : kIntTolerances) {
      TorchOptions o;
      if (tolerance) {
        o.rtol = rtol;
        o.atol = atol;
      }
      SetTorchKernelEnabled(true);
      const CheckResult fast = TorchAssertClose(a, b, o);
      const int64_t fast_mism = TorchIsCloseMismatches(a, b, rtol, atol, false, TorchCompat::kTorch2);
      SetTorchKernelEnabled(false);
      const CheckResult slow = TorchAssertClose(a, b, o);
      const int64_t slow_mism = TorchIsCloseMismatches(a, b, rtol, atol, false, TorchCompat::kTorch2);
      SetTorchKernelEnabled(true);
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " small=" << small << " n=" << n
                                        << " rtol=" << rtol);
      EXPECT_EQ(fast.verdict, slow.verdict);
      EXPECT_EQ(fast.message, slow.message);
      EXPECT_EQ(fast.ToJson().Dump(), slow.ToJson().Dump());
      EXPECT_EQ(fast_mism, slow_mism);
      if (n >= 1024 && (!small || atol < 1e10f)) {  // atol 1e10 holds every small pair
        EXPECT_GT(fast_mism, 0);
      }
    }
  }
}

// a - b = -2^63 modulo 2^64 (INT64_MAX against -1): torch's abs of it stays -2^63, a negative
// "difference". Every implementation declines such a block (either tensor's lanes, any lane, the
// tail included) and the element path reports it as torch's max does.
TEST(TorchKernel, Int64DifferenceOfMinus2To63IsLeftToTheCaller) {
  for (int64_t n : {1, 7, 8, 9, 40, 1024}) {
    for (int64_t pos : {int64_t{0}, n / 2, n - 1}) {
      std::vector<int64_t> a(static_cast<size_t>(n), 5), b(static_cast<size_t>(n), 5);
      a[static_cast<size_t>(pos)] = std::numeric_limits<int64_t>::max();
      b[static_cast<size_t>(pos)] = -1;
      SCOPED_TRACE(::testing::Message() << "n=" << n << " pos=" << pos);
      for (const std::string isa : {"portable", "avx2", "avx512"}) {
        TorchBlockSummary s;
        EXPECT_FALSE(TorchBlockForIsa(isa, TorchFormat::kI64, a.data(), b.data(), n, 0.0f, 0.0f,
                                      false, true, &s))
            << isa;
      }
      const CheckResult r = TorchAssertClose(I64Tensor(a), I64Tensor(b), TorchOptions());
      EXPECT_EQ(r.verdict, Verdict::kFail);
      EXPECT_EQ(TorchIsCloseMismatches(I64Tensor(a), I64Tensor(b), 0, 0, false, TorchCompat::kTorch2), 1);
      // Matching elements count 0 in torch.max, so the -2^63 shows only when it is alone.
      const std::string want = n == 1 ? "Greatest absolute difference: -9223372036854775808 at index (0,)"
                                      : absl::StrCat("Greatest absolute difference: 0 at index (",
                                                     pos == 0 ? 1 : 0, ",)");
      EXPECT_NE(r.message.find(want), std::string::npos) << r.message;
    }
  }
}

// fp8 pairs: the summary of the float32 pair of their values (any count: pieces of 1024 merge
// keeping the first index of equal maxima), and TorchAssertClose the same with and without the
// kernel, NaN bytes included.
TEST(TorchKernel, Float8IsTheFloat32PairOfItsValues) {
  for (const auto& [t, format] : {std::pair{DType::kFloat8E4M3FN, TorchFormat::kF8E4M3},
                                  std::pair{DType::kFloat8E5M2, TorchFormat::kF8E5M2}}) {
    const bool e5m2 = t == DType::kFloat8E5M2;
    for (int64_t n : {1, 17, 1024, 1025, 3000}) {
      std::mt19937 rng(static_cast<uint32_t>(n) + (e5m2 ? 100 : 0));
      std::uniform_int_distribution<int> byte(0, e5m2 ? 0x7b : 0x7e), pick(0, 9);
      std::string a(static_cast<size_t>(n), '\0'), b = a;
      for (int64_t i = 0; i < n; ++i) {
        const int sign = pick(rng) < 5 ? 0x80 : 0, v = i % 700 == 0 ? 0x40 : byte(rng);  // equal maxima
        b[i] = static_cast<char>(v | sign);
        a[i] = static_cast<char>(std::min(e5m2 ? 0x7b : 0x7e, v + (pick(rng) < 3 ? 1 : 0)) | sign);
      }
      std::vector<float> fa(n), fb(n);
      Float8ToFloats(e5m2, a.data(), n, fa.data());
      Float8ToFloats(e5m2, b.data(), n, fb.data());
      for (const auto& [rtol, atol, tolerance] :
           {std::tuple<float, float, bool>{0.0f, 0.0f, false}, {0.1f, 0.01f, true}}) {
        for (bool locate : {false, true}) {
          for (const std::string isa : {"portable", "avx2", "avx512"}) {
            TorchBlockSummary x, y;
            if (!TorchBlockForIsa(isa, TorchFormat::kF32, fa.data(), fb.data(), n, rtol, atol,
                                  tolerance, locate, &x)) {
              continue;  // not on this machine
            }
            ASSERT_TRUE(TorchBlockForIsa(isa, format, a.data(), b.data(), n, rtol, atol, tolerance,
                                         locate, &y));
            SCOPED_TRACE(::testing::Message() << DTypeName(t) << " n=" << n << " " << isa
                                              << " locate=" << locate);
            ExpectSameSummary(x, y, locate);
          }
        }
      }
      a[n / 2] = b[n / 2] = static_cast<char>(e5m2 ? 0x7e : 0x7f);  // NaN on both sides
      for (bool equal_nan : {false, true}) {
        TorchOptions o;
        o.equal_nan = equal_nan;
        const Tensor ta = *Tensor::Make(t, {n}, a), tb = *Tensor::Make(t, {n}, b);
        const CheckResult fast = TorchAssertClose(ta, tb, o);
        SetTorchKernelEnabled(false);
        const CheckResult slow = TorchAssertClose(ta, tb, o);
        SetTorchKernelEnabled(true);
        EXPECT_EQ(fast.ToJson().Dump(), slow.ToJson().Dump());
        EXPECT_EQ(fast.message, slow.message);
      }
    }
  }
}

// Every fp8 byte, at every position of a vector and of a tail, widens to the table's float32
// bits (signed zeros included; NaNs to a NaN of the same sign) in every implementation.
TEST(TorchKernel, EveryImplementationWidensFloat8AsTheTable) {
  std::string bytes;
  for (int rep = 0; rep < 3; ++rep) {
    for (int v = 0; v < 256; ++v) bytes.push_back(static_cast<char>((v * 37 + rep) & 0xff));
  }
  for (bool e5m2 : {false, true}) {
    for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{767}, int64_t{768}}) {
      for (int64_t offset : {0, 1, 7}) {
        const int64_t k = std::min<int64_t>(n, static_cast<int64_t>(bytes.size()) - offset);
        std::vector<float> want(k);
        Float8ToFloats(e5m2, bytes.data() + offset, k, want.data());
        for (const std::string isa : {"portable", "avx2", "avx512"}) {
          std::vector<float> got(k, 12345.0f);
          if (!WidenFloat8ForIsa(isa, e5m2, bytes.data() + offset, k, got.data())) continue;
          for (int64_t i = 0; i < k; ++i) {
            if (std::isnan(want[i])) {  // F16C quiets e5m2's signalling NaN (0x7d): NaN either way
              ASSERT_TRUE(std::isnan(got[i])) << isa;
              ASSERT_EQ(std::signbit(got[i]), std::signbit(want[i])) << isa;
              continue;
            }
            ASSERT_EQ(FloatBits(got[i]), FloatBits(want[i]))
                << isa << (e5m2 ? " e5m2" : " e4m3fn") << " byte 0x" << std::hex
                << (static_cast<int>(bytes[offset + i]) & 0xff);
          }
        }
      }
    }
  }
}

// Blocks holding a few NaN or inf elements: the kernel runs on the finite runs between them and
// the element path on those elements alone; the result, message and metrics are the element
// path's for every dtype (and a mixed pair), NaN or inf at the same places or not, with and
// without equal_nan, and with the greatest difference before, between or after them.
TEST(TorchKernel, SparseNonFiniteElementsGiveTheElementPathsResult) {
  const DType f32 = DType::kFloat32, f16 = DType::kFloat16, bf16 = DType::kBFloat16, f64 = DType::kFloat64;
  int compared = 0;
  for (const auto& [ta, tb] : std::vector<std::pair<DType, DType>>{{f32, f32}, {f16, f16}, {bf16, bf16},
                                                                    {f64, f64}, {f32, bf16}}) {
    for (const int64_t n : {int64_t{1000}, int64_t{70000}}) {
      for (int pattern = 0; pattern < 5; ++pattern) {
        std::mt19937 rng(static_cast<uint32_t>(n) + 31 * static_cast<uint32_t>(pattern));
        std::normal_distribution<float> dist(0.0f, 1.0f);
        std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          b[i] = dist(rng);
          a[i] = i % 3 == 0 ? b[i] : b[i] + (i % 211 == 0 ? 0.5f : 1e-6f) * dist(rng);
        }
        for (int64_t i = 5; i < n; i += 997) {
          const size_t k = static_cast<size_t>(i);
          switch (pattern) {
            case 0: a[k] = b[k] = NAN; break;                              // NaN at the same places
            case 1: a[k] = b[k] = -INFINITY; break;                        // masked scores
            case 2: a[k] = INFINITY; b[k] = -INFINITY; break;              // opposite infinities
            case 3: a[k] = NAN; break;                                     // NaN on one side
            case 4: a[k] = b[k] = (i / 997) % 2 ? NAN : INFINITY; break;  // both kinds
          }
        }
        a[static_cast<size_t>(n / 2)] += 3.0f;  // the greatest difference, between two of them
        const Tensor x = FloatTensor(ta, a, false), y = FloatTensor(tb, b, false);
        for (const bool equal_nan : {false, true}) {
          TorchOptions o;
          o.check_dtype = false;
          o.equal_nan = equal_nan;
          SCOPED_TRACE(::testing::Message() << DTypeName(ta) << " vs " << DTypeName(tb) << " n=" << n
                                            << " pattern=" << pattern << " equal_nan=" << equal_nan);
          ExpectSameWithAndWithoutKernel(x, y, o);
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 5 * 2 * 5 * 2);
}

TEST(TorchKernel, NonFiniteInputsAreLeftToTheCaller) {
  const Pair p = MakePair(1024, 7, 2);
  TorchBlockSummary s;
  EXPECT_FALSE(TorchBlock(TorchFormat::kF32, p.a.data(), p.b.data(), 1024, 1e-5f, 1e-5f, true, false, &s));
}

TEST(TorchKernel, AssertCloseIsTheSameWithAndWithoutTheKernel) {
  for (TorchFormat format : kFormats) {
    for (int64_t n : {1, 5, 1000, 1024, 1025, 4096 + 3, 100000}) {
      for (int flavour : {0, 1, 2, 3, 4, 5, 6}) {
        const Pair p = MakePair(n, static_cast<uint32_t>(n + flavour), flavour, format);
        const Tensor a = ToTensor(p.a, format), b = ToTensor(p.b, format);
        for (int tol = 0; tol < 3; ++tol) {
          TorchOptions o;
          if (tol == 1) {
            o.rtol = 0.0;
            o.atol = 0.0;
          } else if (tol == 2) {
            o.rtol = 0.02;
            o.atol = 1e-3;
          }
          SetTorchKernelEnabled(true);
          const CheckResult fast = TorchAssertClose(a, b, o);
          const int64_t fast_mism = TorchIsCloseMismatches(a, b, 1e-5, 1e-8, false, TorchCompat::kTorch2);
          SetTorchKernelEnabled(false);
          const CheckResult slow = TorchAssertClose(a, b, o);
          const int64_t slow_mism = TorchIsCloseMismatches(a, b, 1e-5, 1e-8, false, TorchCompat::kTorch2);
          SetTorchKernelEnabled(true);
          SCOPED_TRACE(::testing::Message() << Name(format) << " n=" << n << " flavour=" << flavour
                                          << " tol=" << tol);
          EXPECT_EQ(fast.verdict, slow.verdict);
          EXPECT_EQ(fast.message, slow.message);
          EXPECT_EQ(fast.ToJson().Dump(), slow.ToJson().Dump());
          EXPECT_EQ(fast_mism, slow_mism);
        }
      }
    }
  }
}

// The kernel must not make every pair look alike: on half-precision data it still tells a
// pass from a failure, and counts the mismatches the element loop counts.
TEST(TorchKernel, HalfPrecisionVerdictsStillDiffer) {
  std::vector<float> g(5000), close(5000), far(5000);
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = 1.0f + static_cast<float>(i % 100) / 64.0f;
    close[i] = g[i];
    far[i] = i % 10 == 0 ? g[i] * 1.5f : g[i];
  }
  for (TorchFormat format : {TorchFormat::kF16, TorchFormat::kBF16}) {
    const Tensor tg = ToTensor(g, format), tc = ToTensor(close, format), tf = ToTensor(far, format);
    EXPECT_EQ(TorchAssertClose(tc, tg, TorchOptions()).verdict, Verdict::kPass);
    const CheckResult r = TorchAssertClose(tf, tg, TorchOptions());
    EXPECT_EQ(r.verdict, Verdict::kFail);
    EXPECT_NE(r.message.find("Mismatched elements: 500 / 5000 (10.0%)"), std::string::npos)
        << r.message;
  }
}

}  // namespace
}  // namespace parity
