// The fused forge passes (common/checks/forge_kernel.cc): every instruction set gives the same bits,
// and ForgeCheck reports the same verdicts, tolerances and messages with the kernel as with the
// element-by-element path; the PCC may differ only by summation order (within 1e-12 relative,
// the bound for blocked accumulation), and then only in the digits of the message.
#include "common/checks/forge_kernel.h"
#include "common/checks/forge_masked_kernel.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/common/checks/isa.h"
#include "common/base/float_formats.h"
#include "common/checks/forge_policy.h"
#include "common/base/tensor.h"
#include "tests/test_util.h"

namespace parity {
namespace {

using testing::EncodeFloats;

// Golden and calculated of n elements. Flavours: 0 close noise, 1 large noise (PCC fails),
// 2 constant tensors (NaN PCC), 3 zeros in calculated, 4 a NaN, 5 an inf, 6 large offset.
std::pair<std::vector<float>, std::vector<float>> Make(int64_t n, int flavour, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = g(rng);
    b[i] = a[i] + (flavour == 1 ? 0.5f : 1e-3f) * g(rng);
    if (flavour == 2) a[i] = b[i] = 0.25f;
    if (flavour == 3 && i % 7 == 0) b[i] = 0.0f;
    if (flavour == 6) {
      a[i] += 1000.0f;
      b[i] += 1000.0f;
    }
  }
  if (flavour == 4) a[a.size() / 2] = std::numeric_limits<float>::quiet_NaN();
  if (flavour == 5) b[b.size() - 1] = std::numeric_limits<float>::infinity();
  return {a, b};
}

uint64_t Bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

TEST(ForgeKernel, InstructionSetsAgreeBitForBit) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (int64_t n : std::initializer_list<int64_t>{1, 7, 8, 9, 1023, 1024, 1025, 5000, kForgeChunk,
                                                     kForgeChunk + 9, 20000}) {
      for (int flavour : {0, 1, 3, 4, 5, 6}) {
        const auto [a, b] = Make(n, flavour, static_cast<uint32_t>(n + flavour));
        const std::string x = EncodeFloats(a, t), y = EncodeFloats(b, t);
        SCOPED_TRACE(::testing::Message() << DTypeName(t) << " n=" << n << " flavour=" << flavour);
        ForgeScanResult ref;
        ASSERT_TRUE(ForgeScanForIsa("portable", t, x.data(), y.data(), n, &ref));
        const ForgeCovarianceResult cref = ForgeCovariance(ref, 0.125, -0.5);
        EXPECT_EQ(ref.finite, flavour != 4 && flavour != 5);
        // A scan stops at the first chunk holding a NaN/inf.
        if (ref.finite) {
          EXPECT_EQ(static_cast<int64_t>(ref.chunks.size()), (n + kForgeChunk - 1) / kForgeChunk);
        }
        for (const char* isa : testing::VectorIsas()) {
          ForgeScanResult s;
          ASSERT_TRUE(ForgeScanForIsa(isa, t, x.data(), y.data(), n, &s)) << isa;
          const ForgeCovarianceResult c = ForgeCovariance(s, 0.125, -0.5);
          EXPECT_EQ(s.finite, ref.finite) << isa;
          if (!ref.finite) continue;
          EXPECT_EQ(Bits(s.sum_g), Bits(ref.sum_g)) << isa;
          EXPECT_EQ(Bits(s.sum_c), Bits(ref.sum_c)) << isa;
          EXPECT_EQ(s.max_abs, ref.max_abs) << isa;
          EXPECT_EQ(s.max_rel, ref.max_rel) << isa;
          EXPECT_EQ(Bits(c.aa), Bits(cref.aa)) << isa;
          EXPECT_EQ(Bits(c.ab), Bits(cref.ab)) << isa;
          EXPECT_EQ(Bits(c.bb), Bits(cref.bb)) << isa;
          ASSERT_EQ(s.chunks.size(), ref.chunks.size());
          for (size_t i = 0; i < s.chunks.size(); ++i) {
            EXPECT_EQ(s.chunks[i].n, ref.chunks[i].n);
            EXPECT_EQ(Bits(s.chunks[i].mean_g), Bits(ref.chunks[i].mean_g)) << isa;
            EXPECT_EQ(Bits(s.chunks[i].dx), Bits(ref.chunks[i].dx)) << isa;
            EXPECT_EQ(Bits(s.chunks[i].ab), Bits(ref.chunks[i].ab)) << isa;
          }
        }
      }
    }
  }
}

TEST(ForgeKernel, AllCloseMaxIsTheSameOnEveryInstructionSet) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (int64_t n : std::initializer_list<int64_t>{1, 7, 8, 9, 1023, 1025, 5000, 3 * kForgeChunk + 5}) {
      for (int flavour : {0, 1, 3, 6}) {
        const auto [a, b] = Make(n, flavour, static_cast<uint32_t>(n * 3 + flavour));
        const std::string x = EncodeFloats(a, t), y = EncodeFloats(b, t);
        for (const auto& [rtol, atol] : {std::pair<float, float>{1e-5f, 1e-8f}, {0.01f, 0.001f}, {0.5f, 2.0f}}) {
          SCOPED_TRACE(::testing::Message() << DTypeName(t) << " n=" << n << " flavour=" << flavour
                                            << " rtol=" << rtol);
          double ref = 0;
          ASSERT_TRUE(ForgeAllCloseMaxForIsa("portable", t, x.data(), y.data(), n, rtol, atol, &ref));
          for (const char* isa : testing::VectorIsas()) {
            double v = 0;
            ASSERT_TRUE(ForgeAllCloseMaxForIsa(isa, t, x.data(), y.data(), n, rtol, atol, &v)) << isa;
            EXPECT_EQ(v, ref) << isa;
          }
          // ForgeScan computes it chunk by chunk in its own pass: the same value.
          const ForgeAllCloseTolerance tol{rtol, atol};
          for (const char* isa : testing::AllIsas()) {
            ForgeScanResult scan;
            ASSERT_TRUE(ForgeScanForIsa(isa, t, x.data(), y.data(), n, &scan, &tol)) << isa;
            ASSERT_TRUE(scan.all_close_max.has_value()) << isa;
            EXPECT_EQ(*scan.all_close_max, ref) << isa;
            EXPECT_EQ(scan.all_close_rtol, rtol);
          }
        }
      }
    }
  }
}

const MetricValue* Metric(const CheckResult& r, const char* name) { return r.Find(name); }

// ForgeCheck(g, c, o) with the kernel on and off: the same verdicts, metrics and (when the PCC
// agrees to the bit) messages; the PCC within 1e-12 relative. Counts PCCs compared and differing.
void ExpectSameWithAndWithoutKernel(const Tensor& g, const Tensor& c, const ForgeOptions& o,
                                    int* compared, int* differs, double* worst) {
  SetForgeKernelEnabled(true);
  const CheckResult fast = ForgeCheck(g, c, o);
  SetForgeKernelEnabled(false);
  const CheckResult slow = ForgeCheck(g, c, o);
  SetForgeKernelEnabled(true);
  EXPECT_EQ(fast.verdict, slow.verdict);
  EXPECT_EQ(fast.peer_verdict, slow.peer_verdict);
  ASSERT_EQ(fast.metrics.size(), slow.metrics.size());
  bool pcc_same = true;
  for (size_t i = 0; i < fast.metrics.size(); ++i) {
    const MetricValue& x = fast.metrics[i].value;
    const MetricValue& y = slow.metrics[i].value;
    EXPECT_EQ(fast.metrics[i].name, slow.metrics[i].name);
    if (fast.metrics[i].name != "PCC") {
      EXPECT_EQ(x.ToJson().Dump(), y.ToJson().Dump()) << fast.metrics[i].name;
      continue;
    }
    ++*compared;
    if (Bits(x.number()) != Bits(y.number())) {
      ++*differs;
      pcc_same = false;
      *worst = std::max(*worst, std::fabs(x.number() - y.number()) / std::fabs(y.number()));
    }
    EXPECT_NEAR(x.number(), y.number(), 1e-12 * std::fabs(y.number()));
  }
  if (pcc_same) {
    EXPECT_EQ(fast.message, slow.message);
  }
}

TEST(ForgeKernel, ForgeCheckIsTheSameWithAndWithoutTheKernel) {
  int pcc_differs = 0, compared = 0;
  double worst = 0;  // largest relative PCC difference seen
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (int64_t n : {2, 9, 1024, 4099, 100000}) {
      for (int flavour = 0; flavour <= 6; ++flavour) {
        for (ForgeChecker checker : {ForgeChecker::kAutomatic, ForgeChecker::kFull, ForgeChecker::kAllClose}) {
          const auto [a, b] = Make(n, flavour, static_cast<uint32_t>(n * 7 + flavour));
          const Tensor g = *Tensor::Make(t, {n}, EncodeFloats(a, t));
          const Tensor c = *Tensor::Make(t, {n}, EncodeFloats(b, t));
          ForgeOptions o;
          o.checker = checker;
          SCOPED_TRACE(::testing::Message() << DTypeName(t) << " n=" << n << " flavour=" << flavour
                                          << " checker=" << static_cast<int>(checker));
          ExpectSameWithAndWithoutKernel(g, c, o, &compared, &pcc_differs, &worst);
        }
      }
    }
  }
  EXPECT_GT(compared, 20);
  std::cout << "PCC compared " << compared << " times, " << pcc_differs
            << " differ in the last bits (summation order), by at most " << worst
            << " relative\n";
}

// The kernel path must still tell a good pair from a bad one.
TEST(ForgeKernel, VerdictsStillDiffer) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    const auto [a, b] = Make(10000, 0, 1);
    const auto [x, y] = Make(10000, 1, 2);
    const CheckResult good = ForgeCheck(*Tensor::Make(t, {10000}, EncodeFloats(a, t)),
                                        *Tensor::Make(t, {10000}, EncodeFloats(b, t)), ForgeOptions());
    const CheckResult bad = ForgeCheck(*Tensor::Make(t, {10000}, EncodeFloats(x, t)),
                                       *Tensor::Make(t, {10000}, EncodeFloats(y, t)), ForgeOptions());
    EXPECT_EQ(good.verdict, Verdict::kPass);
    EXPECT_EQ(bad.verdict, Verdict::kFail);
    EXPECT_NE(bad.message.find("Tensor mismatch. PCC = 0.8"), std::string::npos) << bad.message;
  }
}

// float64 pairs of n elements as bytes. Flavours 0-6 as Make (in float64); 7 noise of 1e-12
// relative (differences no float32 holds); 8 magnitudes near 2^290 (inside the chunked PCC's
// range; |g - c| still finite); 9 a value of 1e200 (beyond it), 10 every value near 1e-158
// (below it: squared deviations are subnormal), 11 two values of 1.7e308 in one chunk (finite,
// their sum overflows), 12 every value near 1e155 (beyond: squared deviations overflow, the
// element path's (x - m) / N * (x - m) does not).
std::pair<std::string, std::string> MakeF64(int64_t n, int flavour, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<double> a(static_cast<size_t>(n)), b(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = g(rng);
    b[i] = a[i] + (flavour == 1 ? 0.5 : flavour == 7 ? 1e-12 : 1e-3) * g(rng);
    if (flavour == 2) a[i] = b[i] = 0.25;
    if (flavour == 3 && i % 7 == 0) b[i] = 0.0;
    if (flavour == 6) {
      a[i] += 1000.0;
      b[i] += 1000.0;
    }
    if (flavour == 8) {
      a[i] *= 0x1p290;
      b[i] *= 0x1p290;
    }
    if (flavour == 10 || flavour == 12) {
      const double scale = flavour == 10 ? 1e-158 : 1e155;
      a[i] *= scale;
      b[i] *= scale;
    }
  }
  if (flavour == 4) a[a.size() / 2] = std::numeric_limits<double>::quiet_NaN();
  if (flavour == 5) b[b.size() - 1] = -std::numeric_limits<double>::infinity();
  if (flavour == 9) a[a.size() / 3] = 1e200;
  if (flavour == 11) a[0] = b[0] = a[a.size() - 1] = b[b.size() - 1] = 1.7e308;
  std::string x(a.size() * 8, '\0'), y = x;
  std::memcpy(x.data(), a.data(), x.size());
  std::memcpy(y.data(), b.data(), y.size());
  return {x, y};
}

TEST(ForgeF64Kernel, InstructionSetsAgreeBitForBit) {
  for (int64_t n : std::initializer_list<int64_t>{1, 7, 8, 9, 1023, kForgeChunk, kForgeChunk + 9, 20000}) {
    for (int flavour = 0; flavour <= 12; ++flavour) {
      const auto [x, y] = MakeF64(n, flavour, static_cast<uint32_t>(n * 5 + flavour));
      SCOPED_TRACE(::testing::Message() << "n=" << n << " flavour=" << flavour);
      const ForgeAllCloseTolerance tol{1e-5, 1e-8};
      ForgeScanResult ref;
      ASSERT_TRUE(ForgeScanForIsa("portable", DType::kFloat64, x.data(), y.data(), n, &ref, &tol));
      EXPECT_EQ(ref.finite, flavour != 4 && flavour != 5);
      EXPECT_EQ(ref.unsupported, flavour >= 9);
      // Against plain loops in element order (maxima exactly; sums within rounding).
      double sg = 0, max_abs = 0, max_rel = 0, excess = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < n; ++i) {
        double a, b;
        std::memcpy(&a, x.data() + 8 * i, 8);
        std::memcpy(&b, y.data() + 8 * i, 8);
        sg += a;
        max_abs = std::max(max_abs, std::fabs(a - b));
        if (b != 0) max_rel = std::max(max_rel, std::fabs(a - b) / std::fabs(b));
        excess = std::max(excess, (std::fabs(a - b) - 1e-8) - 1e-5 * std::fabs(b));
      }
      if (ref.finite) {
        EXPECT_EQ(ref.max_abs, max_abs);
        EXPECT_EQ(ref.max_rel, max_rel);
        EXPECT_EQ(*ref.all_close_max, excess);
        if (flavour != 11) {
          EXPECT_NEAR(ref.sum_g, sg, 1e-12 * std::max(1.0, std::fabs(sg)) * n);
        }
      }
      const ForgeCovarianceResult cref = ForgeCovariance(ref, 0.125, -0.5);
      for (const char* isa : testing::VectorIsas()) {
        ForgeScanResult s;
        ASSERT_TRUE(ForgeScanForIsa(isa, DType::kFloat64, x.data(), y.data(), n, &s, &tol)) << isa;
        EXPECT_EQ(s.finite, ref.finite) << isa;
        EXPECT_EQ(s.unsupported, ref.unsupported) << isa;
        if (!ref.finite) continue;
        const ForgeCovarianceResult cv = ForgeCovariance(s, 0.125, -0.5);
        EXPECT_EQ(Bits(s.sum_g), Bits(ref.sum_g)) << isa;
        EXPECT_EQ(Bits(s.sum_c), Bits(ref.sum_c)) << isa;
        EXPECT_EQ(Bits(s.max_abs), Bits(ref.max_abs)) << isa;
        EXPECT_EQ(Bits(s.max_rel), Bits(ref.max_rel)) << isa;
        EXPECT_EQ(Bits(*s.all_close_max), Bits(*ref.all_close_max)) << isa;
        EXPECT_EQ(Bits(cv.aa), Bits(cref.aa)) << isa;
        EXPECT_EQ(Bits(cv.ab), Bits(cref.ab)) << isa;
        EXPECT_EQ(Bits(cv.bb), Bits(cref.bb)) << isa;
        double v = 0;
        ASSERT_TRUE(ForgeAllCloseMaxForIsa(isa, DType::kFloat64, x.data(), y.data(), n, 1e-5, 1e-8, &v));
        EXPECT_EQ(Bits(v), Bits(*ref.all_close_max)) << isa;
      }
    }
  }
}

// float64 pairs through ForgeCheck: the scan's verdicts, tolerances and messages are the element
// path's (values out of the chunked PCC's range go that path both times).
TEST(ForgeF64Kernel, ForgeCheckIsTheSameWithAndWithoutTheKernel) {
  int compared = 0, pcc_differs = 0;
  double worst = 0;
  for (int64_t n : {1, 2, 9, 1024, 20000}) {
    for (int flavour = 0; flavour <= 12; ++flavour) {
      for (ForgeChecker checker : {ForgeChecker::kAutomatic, ForgeChecker::kFull, ForgeChecker::kAllClose}) {
        const auto [x, y] = MakeF64(n, flavour, static_cast<uint32_t>(n * 11 + flavour));
        const Tensor g = *Tensor::Make(DType::kFloat64, {n}, x), c = *Tensor::Make(DType::kFloat64, {n}, y);
        ForgeOptions o;
        o.checker = checker;
        SCOPED_TRACE(::testing::Message() << "n=" << n << " flavour=" << flavour
                                          << " checker=" << static_cast<int>(checker));
        ExpectSameWithAndWithoutKernel(g, c, o, &compared, &pcc_differs, &worst);
      }
    }
  }
  EXPECT_GT(compared, 60);
  std::cout << "float64 PCC compared " << compared << " times, " << pcc_differs
            << " differ in the last bits, by at most " << worst << " relative\n";
}

// What the float64 scan sees reaches the verdicts: noise of 1e-12 relative passes all_close and
// shows its tolerances in float64 (float32 arithmetic would report a float32 quotient), noise
// of 1e-3 fails all_close with forge's message.
TEST(ForgeF64Kernel, VerdictsComeFromTheScan) {
  ForgeOptions o;
  o.checker = ForgeChecker::kFull;
  const auto [x, y] = MakeF64(10000, 7, 3);
  const CheckResult good = ForgeCheck(*Tensor::Make(DType::kFloat64, {10000}, x),
                                      *Tensor::Make(DType::kFloat64, {10000}, y), o);
  EXPECT_EQ(good.verdict, Verdict::kPass) << good.message;
  const double atol = good.Find("Required atol")->number();
  EXPECT_GT(atol, 1e-13);
  EXPECT_LT(atol, 1e-10);
  const double rtol = good.Find("Required rtol")->number();  // a float64 quotient
  EXPECT_NE(rtol, static_cast<double>(static_cast<float>(rtol)));
  const auto [a, b] = MakeF64(10000, 0, 4);
  const CheckResult bad = ForgeCheck(*Tensor::Make(DType::kFloat64, {10000}, a),
                                     *Tensor::Make(DType::kFloat64, {10000}, b), o);
  EXPECT_EQ(bad.verdict, Verdict::kFail);
  EXPECT_NE(bad.message.find("Data mismatch -> FullChecker (all_close)"), std::string::npos) << bad.message;
}

// Integer and bool pairs of n elements, encoded as dtype t. Flavours: 0 close (a few elements
// off by one), 1 large noise (PCC fails), 2 constant and equal (NaN PCC), 3 zeros in calculated,
// 4 equal, 5 values at the dtype's extremes (int32: |g - c| up to 2^32 - 1, float32 rounds it),
// 6 constant and unequal (NaN PCC, all_close fails).
std::pair<std::string, std::string> MakeInts(DType t, int64_t n, int flavour, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  double lo = 0, hi = 1;
  switch (t) {
    case DType::kInt32:
    case DType::kInt64: lo = -2147483648.0, hi = 2147483647.0; break;  // int64: the scan's range
    case DType::kInt16: lo = -32768, hi = 32767; break;
    case DType::kUInt16: lo = 0, hi = 65535; break;
    case DType::kUInt32:
    case DType::kUInt64: lo = 0, hi = 4294967295.0; break;  // uint64: the exact sums' range
    case DType::kInt8: lo = -128, hi = 127; break;
    case DType::kUInt8: lo = 0, hi = 255; break;
    default: break;  // bool
  }
  const double scale = t == DType::kBool ? 1 : std::min(hi, 100.0);
  std::string a(static_cast<size_t>(n * DTypeSize(t)), '\0'), b = a;
  auto put = [&](std::string& s, int64_t i, double v) {
    v = std::clamp(std::round(v), lo, hi);
    if (t == DType::kBool) {
      s[i] = v != 0 ? static_cast<char>(1 + i % 3) : 0;  // any nonzero byte is true
    } else if (t == DType::kUInt64) {
      const uint64_t x = static_cast<uint64_t>(v);
      std::memcpy(&s[i * 8], &x, 8);
    } else if (DTypeSize(t) == 8) {
      const int64_t x = static_cast<int64_t>(v);
      std::memcpy(&s[i * 8], &x, 8);
    } else if (t == DType::kUInt32) {
      const uint32_t x = static_cast<uint32_t>(v);
      std::memcpy(&s[i * 4], &x, 4);
    } else if (DTypeSize(t) == 4) {
      const int32_t x = static_cast<int32_t>(v);
      std::memcpy(&s[i * 4], &x, 4);
    } else if (DTypeSize(t) == 2) {
      const uint16_t x = static_cast<uint16_t>(static_cast<int32_t>(v));
      std::memcpy(&s[i * 2], &x, 2);
    } else {
      s[i] = static_cast<char>(static_cast<int32_t>(v));
    }
  };
  for (int64_t i = 0; i < n; ++i) {
    double x = scale * std::fabs(g(rng)) * (t == DType::kBool ? 1 : (lo < 0 ? (i % 2 ? -1 : 1) : 1));
    if (t == DType::kBool) x = g(rng) > 0 ? 1 : 0;
    double y = x;
    if (flavour == 0 && i % 13 == 0) y = t == DType::kBool ? 1 - x : x + 1;
    if (flavour == 1) y = t == DType::kBool ? (g(rng) > 0 ? 1 : 0) : scale * g(rng);
    if (flavour == 2) x = y = t == DType::kBool ? 1 : 7;
    if (flavour == 6) x = 7, y = t == DType::kBool ? 0 : 8;
    if (flavour == 3 && i % 7 == 0) y = 0;
    if (flavour == 5) {
      x = i % 3 == 0 ? hi : lo;
      y = i % 5 == 0 ? lo : hi - static_cast<double>(i % 4);
    }
    put(a, i, x);
    put(b, i, y);
  }
  return {a, b};
}

constexpr DType kIntTypes[] = {DType::kInt64, DType::kInt32, DType::kInt16, DType::kUInt16, DType::kInt8,
                               DType::kUInt8, DType::kBool,  DType::kUInt32, DType::kUInt64};

TEST(ForgeIntKernel, InstructionSetsAgreeBitForBitAndScanIsExact) {
  for (DType t : kIntTypes) {
    for (int64_t n : std::initializer_list<int64_t>{1, 7, 8, 9, 1023, kForgeChunk, kForgeChunk + 9, 20000}) {
      for (int flavour = 0; flavour <= 5; ++flavour) {
        const auto [x, y] = MakeInts(t, n, flavour, static_cast<uint32_t>(n + flavour));
        SCOPED_TRACE(::testing::Message() << DTypeName(t) << " n=" << n << " flavour=" << flavour);
        ForgeScanResult ref;
        ASSERT_TRUE(ForgeIntScanForIsa("portable", t, x.data(), y.data(), n, &ref));
        // The portable scan against a plain double loop over Tensor::ToDouble.
        const Tensor g = *Tensor::Make(t, {n}, x), c = *Tensor::Make(t, {n}, y);
        std::vector<double> gx(static_cast<size_t>(n)), cx(static_cast<size_t>(n));
        for (int64_t s = 0; s < n; s += 1024) {
          g.ToDouble(s, std::min<int64_t>(1024, n - s), gx.data() + s);
          c.ToDouble(s, std::min<int64_t>(1024, n - s), cx.data() + s);
        }
        double sg = 0, sc = 0, max_abs = 0;
        float max_rel = 0;
        int64_t dissimilar = 0;
        for (int64_t i = 0; i < n; ++i) {
          sg += gx[i];
          sc += cx[i];
          const double d = std::fabs(gx[i] - cx[i]);
          max_abs = std::max(max_abs, d);
          if (cx[i] != 0) max_rel = std::max(max_rel, static_cast<float>(static_cast<float>(d) / std::fabs(cx[i])));
          dissimilar += (gx[i] != 0) != (cx[i] != 0);
        }
        EXPECT_TRUE(ref.integer);
        EXPECT_TRUE(ref.finite);
        EXPECT_EQ(ref.sum_g, sg);
        EXPECT_EQ(ref.sum_c, sc);
        EXPECT_EQ(ref.max_abs, max_abs);
        EXPECT_EQ(ref.max_rel, max_rel);
        EXPECT_EQ(ref.dissimilar, dissimilar);
        const ForgeCovarianceResult cref = ForgeCovariance(ref, 0.125, -0.5);
        for (const char* isa : testing::VectorIsas()) {
          ForgeScanResult s;
          ASSERT_TRUE(ForgeIntScanForIsa(isa, t, x.data(), y.data(), n, &s)) << isa;
          const ForgeCovarianceResult cv = ForgeCovariance(s, 0.125, -0.5);
          EXPECT_EQ(Bits(s.sum_g), Bits(ref.sum_g)) << isa;
          EXPECT_EQ(Bits(s.sum_c), Bits(ref.sum_c)) << isa;
          EXPECT_EQ(Bits(s.max_abs), Bits(ref.max_abs)) << isa;
          EXPECT_EQ(s.max_rel, ref.max_rel) << isa;
          EXPECT_EQ(s.dissimilar, ref.dissimilar) << isa;
          EXPECT_EQ(Bits(cv.aa), Bits(cref.aa)) << isa;
          EXPECT_EQ(Bits(cv.ab), Bits(cref.ab)) << isa;
          EXPECT_EQ(Bits(cv.bb), Bits(cref.bb)) << isa;
          ASSERT_EQ(s.chunks.size(), ref.chunks.size());
          for (size_t i = 0; i < s.chunks.size(); ++i) {
            EXPECT_EQ(Bits(s.chunks[i].mean_c), Bits(ref.chunks[i].mean_c)) << isa;
            EXPECT_EQ(Bits(s.chunks[i].dy), Bits(ref.chunks[i].dy)) << isa;
            EXPECT_EQ(Bits(s.chunks[i].aa), Bits(ref.chunks[i].aa)) << isa;
            EXPECT_EQ(Bits(s.chunks[i].bb), Bits(ref.chunks[i].bb)) << isa;
          }
        }
      }
    }
  }
}

// ForgeCheck on integer and bool pairs: the same verdicts, metrics and messages with the scan as
// element by element; the PCC within 1e-12 relative (summation order).
TEST(ForgeIntKernel, ForgeCheckIsTheSameWithAndWithoutTheKernel) {
  int compared = 0, pcc_differs = 0;
  double worst = 0;
  for (DType t : kIntTypes) {
    for (int64_t n : {1, 2, 9, 1024, 10000}) {
      for (int flavour = 0; flavour <= 6; ++flavour) {
        for (ForgeChecker checker : {ForgeChecker::kAutomatic, ForgeChecker::kFull, ForgeChecker::kAllClose}) {
          const auto [x, y] = MakeInts(t, n, flavour, static_cast<uint32_t>(n * 3 + flavour));
          const Tensor g = *Tensor::Make(t, {n}, x), c = *Tensor::Make(t, {n}, y);
          ForgeOptions o;
          o.checker = checker;
          SCOPED_TRACE(::testing::Message() << DTypeName(t) << " n=" << n << " flavour=" << flavour
                                          << " checker=" << static_cast<int>(checker));
          ExpectSameWithAndWithoutKernel(g, c, o, &compared, &pcc_differs, &worst);
        }
      }
    }
  }
  EXPECT_GT(compared, 100);
  std::cout << "integer PCC compared " << compared << " times, " << pcc_differs
            << " differ in the last bits, by at most " << worst << " relative\n";
}

// int64 and uint64 pairs beyond int32's range: one value past 2^40 (in a vector and in a tail),
// and values over the whole range (int64 up to 2^62, uint64 up to 2^64, which double rounds).
// Every implementation gives the same bits, and ForgeCheck the element path's verdicts and
// metrics (the PCC within 1e-12).
TEST(ForgeIntKernel, Int64BeyondInt32IsScannedAsDoubles) {
  int compared = 0, differs = 0;
  double worst = 0;
  for (DType t : {DType::kInt64, DType::kUInt64})
  for (int64_t n : {int64_t{5}, int64_t{40}, int64_t{10000}, kForgeChunk + 11}) {
    for (int64_t at : {int64_t{-1}, int64_t{2}, n - 1}) {
      auto [x, y] = MakeInts(t, n, 0, static_cast<uint32_t>(n + at));
      const int64_t big = (int64_t{1} << 40) + 5;
      if (at >= 0) {
        std::memcpy(&x[static_cast<size_t>(at) * 8], &big, 8);
      } else {  // the whole range: y = x + noise of 2^20
        std::mt19937_64 rng(static_cast<uint64_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          // uint64: the whole range, the noise wrapping at both ends.
          const uint64_t r = rng();
          const int64_t v = t == DType::kUInt64 ? static_cast<int64_t>(r)
                                                : static_cast<int64_t>(r >> 2) * (i % 2 ? 1 : -1);
          const int64_t w = static_cast<int64_t>(static_cast<uint64_t>(v) + rng() % (1 << 21) - (1 << 20));
          std::memcpy(&x[static_cast<size_t>(i) * 8], &v, 8);
          std::memcpy(&y[static_cast<size_t>(i) * 8], &w, 8);
        }
      }
      SCOPED_TRACE(::testing::Message() << DTypeName(t) << " n=" << n << " at=" << at);
      ForgeScanResult ref;
      ASSERT_TRUE(ForgeIntScanForIsa("portable", t, x.data(), y.data(), n, &ref));
      EXPECT_FALSE(ref.unsupported);
      const ForgeCovarianceResult cref = ForgeCovariance(ref, 0.125, -0.5);
      for (const char* isa : testing::VectorIsas()) {
        ForgeScanResult s;
        ASSERT_TRUE(ForgeIntScanForIsa(isa, t, x.data(), y.data(), n, &s)) << isa;
        const ForgeCovarianceResult cv = ForgeCovariance(s, 0.125, -0.5);
        EXPECT_EQ(Bits(s.sum_g), Bits(ref.sum_g)) << isa;
        EXPECT_EQ(Bits(s.max_abs), Bits(ref.max_abs)) << isa;
        EXPECT_EQ(s.max_rel, ref.max_rel) << isa;
        EXPECT_EQ(s.dissimilar, ref.dissimilar) << isa;
        EXPECT_EQ(Bits(cv.aa), Bits(cref.aa)) << isa;
        EXPECT_EQ(Bits(cv.ab), Bits(cref.ab)) << isa;
      }
      const Tensor g = *Tensor::Make(t, {n}, x), c = *Tensor::Make(t, {n}, y);
      for (ForgeChecker checker : {ForgeChecker::kAutomatic, ForgeChecker::kFull}) {
        ForgeOptions o;
        o.checker = checker;
        ExpectSameWithAndWithoutKernel(g, c, o, &compared, &differs, &worst);
      }
      const CheckResult r = ForgeCheck(g, c, ForgeOptions());
      EXPECT_GE(r.Find("Required atol")->number(), at >= 0 ? static_cast<double>(big) - 2147483648.0 : 1e5);
    }
  }
  EXPECT_GT(compared, 40);
  std::cout << "wide (u)int64 PCC compared " << compared << " times, " << differs
            << " differ in the last bits, by at most " << worst << " relative\n";
}

// The scan's figures reach the verdicts: a bool pair with many flipped elements fails the
// dissimilarity test, an int32 pair off by a constant passes the PCC and fails all_close.
TEST(ForgeIntKernel, VerdictsComeFromTheScan) {
  const int64_t n = 10000;
  std::string a(n, '\0'), b(n, '\0');
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<char>(i % 2);
    b[i] = static_cast<char>(i % 5 == 0 ? 1 - i % 2 : i % 2);
  }
  const CheckResult bools = ForgeCheck(*Tensor::Make(DType::kBool, {n}, a), *Tensor::Make(DType::kBool, {n}, b), ForgeOptions());
  EXPECT_EQ(bools.verdict, Verdict::kFail);
  EXPECT_NE(bools.message.find("dissimiliarity = 0.333"), std::string::npos) << bools.message;
  std::vector<int32_t> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<int32_t>(i * 7919 % 1000);
    y[i] = x[i] + 3;
  }
  std::string xs(reinterpret_cast<const char*>(x.data()), n * 4), ys(reinterpret_cast<const char*>(y.data()), n * 4);
  const CheckResult ints = ForgeCheck(*Tensor::Make(DType::kInt32, {n}, xs), *Tensor::Make(DType::kInt32, {n}, ys), ForgeOptions());
  EXPECT_EQ(ints.verdict, Verdict::kPass) << ints.message;
  const MetricValue* atol = Metric(ints, "Required atol");
  ASSERT_NE(atol, nullptr);
  EXPECT_EQ(atol->number(), 3.0);
  const CheckResult flat = ForgeCheck(*Tensor::Make(DType::kInt32, {4}, std::string(16, '\1')),
                                      *Tensor::Make(DType::kInt32, {4}, std::string(16, '\2')), ForgeOptions());
  EXPECT_EQ(flat.message, "AssertionError: PCC is nan, but tensors are not equal");
}

// calculate_rtol on integers rounds |g - c| to float32 before dividing (forge's float32
// arithmetic), which can move the quotient's last bit: an int32 pair where it does.
TEST(ForgeIntKernel, RelativeDifferenceRoundsTheDifferenceFirst) {
  int32_t g = 0, c = 0;
  float want = 0;
  for (int32_t y = 3; y < 100000 && want == 0; ++y) {
    for (int32_t k = 1; k < 64 && want == 0; ++k) {
      const int64_t d = (int64_t{1} << 30) + k * 7;
      const float once = static_cast<float>(static_cast<double>(d) / y);
      const float twice = static_cast<float>(static_cast<double>(static_cast<float>(d)) / y);
      if (once != twice) {
        g = static_cast<int32_t>(y + d);
        c = y;
        want = twice;
      }
    }
  }
  ASSERT_NE(want, 0.0f) << "no such pair found";
  std::vector<int32_t> x(16, g), y(16, c);  // whole vectors: no element goes through the portable tail
  for (const char* isa : testing::AllIsas()) {
    ForgeScanResult s;
    ASSERT_TRUE(ForgeIntScanForIsa(isa, DType::kInt32, reinterpret_cast<const char*>(x.data()),
                            reinterpret_cast<const char*>(y.data()), 16, &s)) << isa;
    EXPECT_EQ(s.max_rel, want) << isa;
  }
}

// fp8 bytes nearest to v (e5m2 or e4m3fn); non-finite values become the format's NaN, or e5m2's
// infinity for an infinity.
std::string EncodeF8(const std::vector<float>& v, bool e5m2) {
  std::vector<std::pair<float, uint8_t>> codes;  // finite codes by value (-0 left out)
  for (int b = 0; b < 256; ++b) {
    const float f = e5m2 ? Float8E5M2ToFloat(static_cast<uint8_t>(b)) : Float8E4M3FNToFloat(static_cast<uint8_t>(b));
    if (std::isfinite(f) && b != 0x80) codes.emplace_back(f, static_cast<uint8_t>(b));
  }
  std::sort(codes.begin(), codes.end());
  std::string out(v.size(), '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) {
      out[i] = static_cast<char>(std::isinf(v[i]) && e5m2 ? (v[i] > 0 ? 0x7c : 0xfc) : (e5m2 ? 0x7e : 0x7f));
      continue;
    }
    auto it = std::lower_bound(codes.begin(), codes.end(), std::pair<float, uint8_t>{v[i], 0});
    if (it == codes.end() || (it != codes.begin() && v[i] - std::prev(it)->first < it->first - v[i])) --it;
    out[i] = static_cast<char>(it->second);
  }
  return out;
}

std::vector<float> WidenF8(const std::string& bytes, bool e5m2) {
  std::vector<float> out(bytes.size());
  Float8ToFloats(e5m2, bytes.data(), static_cast<int64_t>(bytes.size()), out.data());
  return out;
}

// fp8 pairs (flavours of Make; 7: e5m2's largest value against its smallest subnormal, whose
// difference float32 does not hold). The scan is the float32 scan of the widened values but for
// max |g - c|, which is the float64 one; every instruction set agrees bit for bit.
TEST(ForgeF8Kernel, ScanIsTheFloat32ScanOfTheWidenedValues) {
  for (DType t : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    const bool e5m2 = t == DType::kFloat8E5M2;
    for (int64_t n : std::initializer_list<int64_t>{1, 7, 9, 1025, kForgeChunk, kForgeChunk + 9, 20000}) {
      for (int flavour : {0, 1, 3, 4, 5, 6, 7}) {
        auto [a, b] = Make(n, flavour == 7 ? 0 : flavour, static_cast<uint32_t>(n + flavour));
        if (flavour == 7) {
          a[a.size() / 2] = e5m2 ? 57344.0f : 448.0f;
          b[b.size() / 2] = e5m2 ? 0x1p-16f : 0x1p-9f;
        }
        const std::string x = EncodeF8(a, e5m2), y = EncodeF8(b, e5m2);
        const std::vector<float> wx = WidenF8(x, e5m2), wy = WidenF8(y, e5m2);
        const std::string fx = EncodeFloats(wx, DType::kFloat32), fy = EncodeFloats(wy, DType::kFloat32);
        SCOPED_TRACE(::testing::Message() << DTypeName(t) << " n=" << n << " flavour=" << flavour);
        const ForgeAllCloseTolerance tol{1e-2, 1e-3};
        for (const char* isa : testing::AllIsas()) {
          ForgeScanResult s, f;
          ASSERT_TRUE(ForgeScanForIsa(isa, t, x.data(), y.data(), n, &s, &tol)) << isa;
          ASSERT_TRUE(ForgeScanForIsa(isa, DType::kFloat32, fx.data(), fy.data(), n, &f, &tol));
          EXPECT_EQ(s.finite, flavour != 4 && flavour != 5) << isa;
          EXPECT_EQ(s.finite, f.finite) << isa;
          if (!s.finite) continue;
          double exact = 0;
          for (int64_t i = 0; i < n; ++i) {
            exact = std::max(exact, std::fabs(static_cast<double>(wx[i]) - static_cast<double>(wy[i])));
          }
          EXPECT_EQ(Bits(s.max_abs), Bits(exact)) << isa;
          if (flavour == 7 && e5m2) {
            EXPECT_NE(exact, f.max_abs) << isa;  // float32 rounds this difference
          }
          EXPECT_EQ(Bits(s.max_rel), Bits(f.max_rel)) << isa;
          EXPECT_EQ(Bits(s.sum_g), Bits(f.sum_g)) << isa;
          EXPECT_EQ(Bits(s.sum_c), Bits(f.sum_c)) << isa;
          EXPECT_EQ(Bits(*s.all_close_max), Bits(*f.all_close_max)) << isa;
          double v = 0;
          ASSERT_TRUE(ForgeAllCloseMaxForIsa(isa, t, x.data(), y.data(), n, 1e-2, 1e-3, &v));
          EXPECT_EQ(Bits(v), Bits(*f.all_close_max)) << isa;
          ASSERT_EQ(s.chunks.size(), f.chunks.size());
          for (size_t i = 0; i < s.chunks.size(); ++i) {
            EXPECT_EQ(s.chunks[i].n, f.chunks[i].n);
            EXPECT_EQ(Bits(s.chunks[i].mean_g), Bits(f.chunks[i].mean_g)) << isa;
            EXPECT_EQ(Bits(s.chunks[i].dy), Bits(f.chunks[i].dy)) << isa;
            EXPECT_EQ(Bits(s.chunks[i].aa), Bits(f.chunks[i].aa)) << isa;
            EXPECT_EQ(Bits(s.chunks[i].ab), Bits(f.chunks[i].ab)) << isa;
            EXPECT_EQ(Bits(s.chunks[i].bb), Bits(f.chunks[i].bb)) << isa;
          }
        }
      }
    }
  }
}

// fp8 pairs through ForgeCheck: the scan's verdicts, tolerances and messages are the element
// path's (its PCC is numpy's corrcoef: fp8 is not one of the PCC kernel's dtypes).
TEST(ForgeF8Kernel, ForgeCheckIsTheSameWithAndWithoutTheKernel) {
  int compared = 0, pcc_differs = 0;
  double worst = 0;
  for (DType t : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    const bool e5m2 = t == DType::kFloat8E5M2;
    for (int64_t n : {1, 2, 9, 1024, 20000}) {
      for (int flavour = 0; flavour <= 7; ++flavour) {
        for (ForgeChecker checker : {ForgeChecker::kAutomatic, ForgeChecker::kFull, ForgeChecker::kAllClose}) {
          auto [a, b] = Make(n, flavour == 7 ? 0 : flavour, static_cast<uint32_t>(n * 13 + flavour));
          if (flavour == 7) {
            a[0] = e5m2 ? 57344.0f : 448.0f;
            b[0] = e5m2 ? 0x1p-16f : 0x1p-9f;
          }
          const Tensor g = *Tensor::Make(t, {n}, EncodeF8(a, e5m2)), c = *Tensor::Make(t, {n}, EncodeF8(b, e5m2));
          ForgeOptions o;
          o.checker = checker;
          SCOPED_TRACE(::testing::Message() << DTypeName(t) << " n=" << n << " flavour=" << flavour
                                            << " checker=" << static_cast<int>(checker));
          ExpectSameWithAndWithoutKernel(g, c, o, &compared, &pcc_differs, &worst);
        }
      }
    }
  }
  EXPECT_GT(compared, 60);
  std::cout << "fp8 PCC compared " << compared << " times, " << pcc_differs
            << " differ in the last bits, by at most " << worst << " relative\n";
}

// e5m2's extremes: Required atol is the float64 difference (57344 - 2^-16), not float32's 57344.
TEST(ForgeF8Kernel, RequiredAtolIsTheFloat64Difference) {
  const Tensor g = *Tensor::Make(DType::kFloat8E5M2, {2}, std::string("\x7b\x3c", 2));  // 57344, 1
  const Tensor c = *Tensor::Make(DType::kFloat8E5M2, {2}, std::string("\x01\x3c", 2));  // 2^-16, 1
  const CheckResult r = ForgeCheck(g, c, ForgeOptions());
  ASSERT_NE(r.Find("Required atol"), nullptr);
  EXPECT_EQ(r.Find("Required atol")->number(), 57344.0 - 0x1p-16);
  EXPECT_EQ(r.verdict, Verdict::kFail);
}

// ---- The masked pass: pairs of different dtypes, and pairs holding NaN/inf ----------------------

// Values of a golden/calculated pair (flavours: 0 close noise, 1 large noise, 2 zeros in
// calculated, 3 NaN at the same places (one in 97), 4 a NaN on one side only, 5 +inf against -inf
// at one place, 6 -inf at the same places (a mask), 7 whole numbers (for integer sides), 8 values
// a float32 does not hold (for a float64 side), 9 constant tensors).
std::pair<std::vector<double>, std::vector<double>> MakeMixed(int64_t n, int flavour, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<double> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = g(rng);
    b[i] = a[i] + (flavour == 1 ? 0.5 : 1e-3) * g(rng);
    if (flavour == 2 && i % 7 == 0) b[i] = 0.0;
    if ((flavour == 3 || flavour == 6) && i % 97 == 5) a[i] = b[i] = flavour == 3 ? nan : -inf;
    if (flavour == 7) {
      a[i] = std::round(a[i] * 100);
      b[i] = std::round(b[i] * 100 + (i % 5 == 0 ? 1 : 0));
    }
    if (flavour == 8) {
      a[i] *= 1 + 1e-12;
      b[i] *= 1 - 1e-13;
    }
    if (flavour == 9) a[i] = b[i] = 0.5;
  }
  if (flavour == 4) b[b.size() / 3] = nan;
  if (flavour == 5) {
    a[a.size() - 1] = inf;
    b[b.size() - 1] = -inf;
  }
  return {a, b};
}

// v as elements of dtype t (nearest; integers from whole values).
std::string EncodeAs(const std::vector<double>& v, DType t) {
  std::vector<float> f(v.begin(), v.end());
  switch (t) {
    case DType::kFloat64: {
      std::string out(v.size() * 8, '\0');
      std::memcpy(out.data(), v.data(), out.size());
      return out;
    }
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
      return EncodeFloats(f, t);
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2:
      return EncodeF8(f, t == DType::kFloat8E5M2);
    case DType::kInt32: {
      std::vector<int32_t> x(v.size());
      for (size_t i = 0; i < v.size(); ++i) x[i] = std::isfinite(v[i]) ? static_cast<int32_t>(v[i]) : 7;
      return std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4);
    }
    default: {  // int64
      std::vector<int64_t> x(v.size());
      for (size_t i = 0; i < v.size(); ++i) x[i] = std::isfinite(v[i]) ? static_cast<int64_t>(v[i]) : 7;
      return std::string(reinterpret_cast<const char*>(x.data()), x.size() * 8);
    }
  }
}

struct MixedPair {
  DType g, c;
};

const MixedPair kMixedPairs[] = {
    {DType::kFloat32, DType::kBFloat16}, {DType::kFloat32, DType::kFloat16}, {DType::kBFloat16, DType::kFloat32},
    {DType::kFloat16, DType::kFloat32},  {DType::kBFloat16, DType::kFloat16}, {DType::kFloat64, DType::kFloat32},
    {DType::kFloat32, DType::kFloat64},  {DType::kFloat16, DType::kFloat64},  {DType::kFloat64, DType::kBFloat16},
    {DType::kFloat32, DType::kInt32},    {DType::kInt64, DType::kFloat32},    {DType::kInt64, DType::kInt32},
    {DType::kFloat8E4M3FN, DType::kFloat32}, {DType::kFloat8E5M2, DType::kFloat8E4M3FN},
    // Same dtypes with NaN/inf (the fused pass leaves them to this one).
    {DType::kFloat32, DType::kFloat32},  {DType::kFloat16, DType::kFloat16},  {DType::kBFloat16, DType::kBFloat16},
    {DType::kFloat64, DType::kFloat64},
};

bool IsIntegerDType(DType t) { return t == DType::kInt32 || t == DType::kInt64; }

TEST(ForgeMaskedKernel, InstructionSetsAgreeBitForBit) {
  int checked = 0;
  for (const MixedPair& p : kMixedPairs) {
    for (int64_t n : std::initializer_list<int64_t>{1, 7, 8, 9, 1023, kForgeChunk, kForgeChunk + 9, 20000}) {
      for (int flavour : {0, 2, 3, 4, 5, 6, 7, 8}) {
        auto [a, b] = MakeMixed(n, flavour, static_cast<uint32_t>(n * 3 + flavour));
        const std::string x = EncodeAs(a, p.g), y = EncodeAs(b, p.c);
        SCOPED_TRACE(::testing::Message() << DTypeName(p.g) << "/" << DTypeName(p.c) << " n=" << n
                                          << " flavour=" << flavour);
        const ForgeMaskedAllClose tol{IsFloating(p.g) ? p.g : p.c, 1e-5, 1e-8};
        ForgeMaskedScanResult ref;
        ASSERT_TRUE(ForgeMaskedScanForIsa("portable", p.g, x.data(), p.c, y.data(), n, &tol, &ref));
        for (const char* isa : testing::VectorIsas()) {
          ForgeMaskedScanResult s;
          ASSERT_TRUE(ForgeMaskedScanForIsa(isa, p.g, x.data(), p.c, y.data(), n, &tol, &s)) << isa;
          EXPECT_EQ(s.mismatch, ref.mismatch) << isa;
          EXPECT_EQ(s.unequal, ref.unequal) << isa;
          EXPECT_EQ(s.special_g, ref.special_g) << isa;
          EXPECT_EQ(s.special_c, ref.special_c) << isa;
          EXPECT_EQ(s.rel_nan, ref.rel_nan) << isa;
          EXPECT_EQ(Bits(s.max_abs), Bits(ref.max_abs)) << isa;
          EXPECT_EQ(Bits(s.max_rel), Bits(ref.max_rel)) << isa;
          EXPECT_EQ(s.valid, ref.valid) << isa;
          EXPECT_EQ(Bits(s.moments.sum_g), Bits(ref.moments.sum_g)) << isa;
          EXPECT_EQ(Bits(s.moments.sum_c), Bits(ref.moments.sum_c)) << isa;
          ASSERT_EQ(s.moments.chunks.size(), ref.moments.chunks.size()) << isa;
          for (size_t i = 0; i < s.moments.chunks.size(); ++i) {
            const ForgeChunkMoments &u = s.moments.chunks[i], &v = ref.moments.chunks[i];
            EXPECT_EQ(u.n, v.n) << isa;
            for (auto [l, r] : {std::pair{u.mean_g, v.mean_g}, {u.mean_c, v.mean_c}, {u.dx, v.dx}, {u.dy, v.dy},
                                {u.aa, v.aa}, {u.ab, v.ab}, {u.bb, v.bb}}) {
              EXPECT_EQ(Bits(l), Bits(r)) << isa << " chunk " << i;
            }
          }
          ASSERT_EQ(s.all_close_max.has_value(), ref.all_close_max.has_value()) << isa;
          if (ref.all_close_max) {
            EXPECT_EQ(Bits(*s.all_close_max), Bits(*ref.all_close_max)) << isa;
          }
          ++checked;
        }
        // What the flavour makes, whatever the dtypes (an integer side holds no NaN/inf).
        const bool ints = IsIntegerDType(p.g) || IsIntegerDType(p.c);
        const bool e4m3 = p.g == DType::kFloat8E4M3FN || p.c == DType::kFloat8E4M3FN;  // -inf becomes NaN
        if (!ints && n > 5 && (flavour == 3 || (flavour == 6 && !e4m3))) {
          EXPECT_TRUE(ref.special_g && ref.special_c && !ref.mismatch);
          EXPECT_EQ(ref.valid, n - (n + 91) / 97);
          EXPECT_FALSE(ref.all_close_max.has_value());
        }
        if (!ints && (flavour == 4 || flavour == 5)) {
          EXPECT_TRUE(ref.mismatch);
        }
        if (flavour == 0 && !ints) {
          EXPECT_TRUE(ref.all_close_max.has_value() && ref.valid == n);
        }
      }
    }
  }
  if (!testing::VectorIsas().empty()) {
    EXPECT_GT(checked, 1000);
  }
}

// A chunk without NaN/inf gives the same bits through the unmasked passes (the usual case) and the
// masked ones (taken for the chunk after one holding a NaN): here chunk 1 follows a chunk with a
// NaN in one scan and a finite chunk in the other.
TEST(ForgeMaskedKernel, FiniteChunksGiveTheSameBitsThroughEitherPass) {
  const int64_t n = 2 * kForgeChunk + 77;
  for (const MixedPair& p : kMixedPairs) {
    for (const char* isa : testing::AllIsas()) {
      auto [a, b] = MakeMixed(n, 2, 17);
      std::vector<double> a_nan = a, b_nan = b;
      a_nan[3] = b_nan[3] = std::numeric_limits<double>::quiet_NaN();
      const std::string x = EncodeAs(a, p.g), y = EncodeAs(b, p.c);
      const std::string xn = EncodeAs(a_nan, p.g), yn = EncodeAs(b_nan, p.c);
      SCOPED_TRACE(::testing::Message() << DTypeName(p.g) << "/" << DTypeName(p.c) << " " << isa);
      ForgeMaskedScanResult plain, after_nan;
      ASSERT_TRUE(ForgeMaskedScanForIsa(isa, p.g, x.data(), p.c, y.data(), n, nullptr, &plain));
      ASSERT_TRUE(ForgeMaskedScanForIsa(isa, p.g, xn.data(), p.c, yn.data(), n, nullptr, &after_nan));
      ASSERT_EQ(plain.moments.chunks.size(), 3u);
      ASSERT_EQ(after_nan.moments.chunks.size(), 3u);
      for (size_t i : {size_t{1}, size_t{2}}) {
        const ForgeChunkMoments &u = plain.moments.chunks[i], &v = after_nan.moments.chunks[i];
        EXPECT_EQ(u.n, v.n);
        for (auto [l, r] : {std::pair{u.mean_g, v.mean_g}, {u.mean_c, v.mean_c}, {u.dx, v.dx}, {u.dy, v.dy},
                            {u.aa, v.aa}, {u.ab, v.ab}, {u.bb, v.bb}}) {
          EXPECT_EQ(Bits(l), Bits(r)) << "chunk " << i;
        }
      }
      const bool ints = IsIntegerDType(p.g) && IsIntegerDType(p.c);  // no NaN on either side
      EXPECT_EQ(after_nan.moments.chunks[0].n, ints ? kForgeChunk : kForgeChunk - 1);
    }
  }
}

// ForgeCheck on mixed-dtype pairs (verify_dtype off) and on pairs holding NaN/inf: the masked pass
// gives the element path's verdicts, metrics and messages; its PCC within 1e-12 relative.
TEST(ForgeMaskedKernel, ForgeCheckIsTheSameWithAndWithoutTheKernel) {
  int compared = 0, pcc_differs = 0;
  double worst = 0;
  for (const MixedPair& p : kMixedPairs) {
    for (int64_t n : {2, 9, 1024, 20000}) {
      for (int flavour = 0; flavour <= 9; ++flavour) {
        for (ForgeChecker checker : {ForgeChecker::kAutomatic, ForgeChecker::kFull, ForgeChecker::kAllClose}) {
          auto [a, b] = MakeMixed(n, flavour, static_cast<uint32_t>(n * 11 + flavour));
          const Tensor g = *Tensor::Make(p.g, {n}, EncodeAs(a, p.g));
          const Tensor c = *Tensor::Make(p.c, {n}, EncodeAs(b, p.c));
          ForgeOptions o;
          o.verify_dtype = false;
          o.checker = checker;
          SCOPED_TRACE(::testing::Message() << DTypeName(p.g) << "/" << DTypeName(p.c) << " n=" << n
                                            << " flavour=" << flavour << " checker=" << static_cast<int>(checker));
          ExpectSameWithAndWithoutKernel(g, c, o, &compared, &pcc_differs, &worst);
        }
      }
    }
  }
  EXPECT_GT(compared, 500);
  std::cout << "masked PCC compared " << compared << " times, " << pcc_differs
            << " differ in the last bits, by at most " << worst << " relative\n";
}

// The masked pass still tells pairs apart, and follows numpy's masks.
TEST(ForgeMaskedKernel, VerdictsComeFromTheMaskedPass) {
  ForgeOptions o;
  o.verify_dtype = false;
  auto check = [&](int flavour, DType tg, DType tc) {
    auto [a, b] = MakeMixed(5000, flavour, 3);
    return ForgeCheck(*Tensor::Make(tg, {5000}, EncodeAs(a, tg)), *Tensor::Make(tc, {5000}, EncodeAs(b, tc)), o);
  };
  EXPECT_EQ(check(0, DType::kFloat32, DType::kBFloat16).verdict, Verdict::kPass);
  EXPECT_EQ(check(1, DType::kFloat32, DType::kBFloat16).verdict, Verdict::kFail);
  // NaN at the same places: the PCC of the other pairs.
  const CheckResult same_nan = check(3, DType::kFloat32, DType::kFloat32);
  EXPECT_EQ(same_nan.verdict, Verdict::kPass);
  EXPECT_GT(same_nan.Find("PCC")->number(), 0.99);
  // A NaN on one side: the masks differ, PCC 0.0; Required atol inf.
  const CheckResult one_nan = check(4, DType::kFloat32, DType::kFloat16);
  EXPECT_EQ(one_nan.verdict, Verdict::kFail);
  EXPECT_EQ(one_nan.Find("PCC")->number(), 0.0);
  EXPECT_TRUE(std::isinf(one_nan.Find("Required atol")->number()));
  // numpy sees a bfloat16 pair in float32: a float64 golden beyond float32's range is inf there,
  // so the masks differ (PCC 0.0), though both values are finite and large together.
  {
    auto [a, b] = MakeMixed(5000, 0, 3);
    a[10] = 1e300;
    b[10] = 1e30;
    const CheckResult r = ForgeCheck(*Tensor::Make(DType::kFloat64, {5000}, EncodeAs(a, DType::kFloat64)),
                                     *Tensor::Make(DType::kBFloat16, {5000}, EncodeAs(b, DType::kBFloat16)), o);
    EXPECT_EQ(r.Find("PCC")->number(), 0.0);
    auto [x, y] = MakeMixed(5000, 0, 3);
    x[10] = 1e300;
    y[10] = 1e30;
    const CheckResult wide = ForgeCheck(*Tensor::Make(DType::kFloat64, {5000}, EncodeAs(x, DType::kFloat64)),
                                        *Tensor::Make(DType::kFloat32, {5000}, EncodeAs(y, DType::kFloat32)), o);
    EXPECT_GT(wide.Find("PCC")->number(), 0.99);  // no conversion without a bfloat16 side
  }
  // all_close on NaN: RuntimeError, an ERROR.
  o.checker = ForgeChecker::kAllClose;
  const CheckResult ac = check(3, DType::kFloat32, DType::kFloat32);
  EXPECT_EQ(ac.verdict, Verdict::kError);
  EXPECT_EQ(ac.message, "RuntimeError: TT_ASSERT: Tensor a contains NaN/Inf values");
}

}  // namespace
}  // namespace parity
