// The fused forge passes (common/forge_kernel.cc): every instruction set gives the same bits,
// and ForgeCheck reports the same verdicts, tolerances and messages with the kernel as with the
// element-by-element path; the PCC may differ only by summation order (within 1e-12 relative,
// the bound for blocked accumulation), and then only in the digits of the message.
#include "common/forge_kernel.h"

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "common/float_formats.h"
#include "common/forge_policy.h"
#include "common/tensor.h"
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
        EXPECT_EQ(static_cast<int64_t>(ref.chunks.size()), (n + kForgeChunk - 1) / kForgeChunk);
        for (const char* isa : {"avx2", "avx512"}) {
          ForgeScanResult s;
          if (!ForgeScanForIsa(isa, t, x.data(), y.data(), n, &s)) continue;  // not this CPU
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
          float ref = 0;
          ASSERT_TRUE(ForgeAllCloseMaxForIsa("portable", t, x.data(), y.data(), n, rtol, atol, &ref));
          for (const char* isa : {"avx2", "avx512"}) {
            float v = 0;
            if (!ForgeAllCloseMaxForIsa(isa, t, x.data(), y.data(), n, rtol, atol, &v)) continue;
            EXPECT_EQ(v, ref) << isa;
          }
          // ForgeScan computes it chunk by chunk in its own pass: the same value.
          const ForgeAllCloseTolerance tol{rtol, atol};
          for (const char* isa : {"portable", "avx2", "avx512"}) {
            ForgeScanResult scan;
            if (!ForgeScanForIsa(isa, t, x.data(), y.data(), n, &scan, &tol)) continue;
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
          SetForgeKernelEnabled(true);
          const CheckResult fast = ForgeCheck(g, c, o);
          SetForgeKernelEnabled(false);
          const CheckResult slow = ForgeCheck(g, c, o);
          SetForgeKernelEnabled(true);
          SCOPED_TRACE(::testing::Message() << DTypeName(t) << " n=" << n << " flavour=" << flavour
                                          << " checker=" << static_cast<int>(checker));
          EXPECT_EQ(fast.verdict, slow.verdict);
          EXPECT_EQ(fast.peer_verdict, slow.peer_verdict);
          ASSERT_EQ(fast.metrics.size(), slow.metrics.size());
          for (size_t i = 0; i < fast.metrics.size(); ++i) {
            const MetricValue& x = fast.metrics[i].value;
            const MetricValue& y = slow.metrics[i].value;
            EXPECT_EQ(fast.metrics[i].name, slow.metrics[i].name);
            if (fast.metrics[i].name != "PCC") {
              EXPECT_EQ(x.ToJson().Dump(), y.ToJson().Dump()) << fast.metrics[i].name;
              continue;
            }
            ++compared;
            if (Bits(x.number()) != Bits(y.number())) {
              ++pcc_differs;
              worst = std::max(worst, std::fabs(x.number() - y.number()) / std::fabs(y.number()));
            }
            EXPECT_NEAR(x.number(), y.number(), 1e-12 * std::fabs(y.number()));
          }
          const MetricValue* p = Metric(fast, "PCC");
          const MetricValue* q = Metric(slow, "PCC");
          if (p == nullptr || Bits(p->number()) == Bits(q->number())) {
            EXPECT_EQ(fast.message, slow.message);
          }
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

}  // namespace
}  // namespace parity
