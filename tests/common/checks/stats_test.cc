// ComputeStats (the agent's statistics for dumps that carry none): known values, the dtypes and
// shapes with special rules, and the vectorised pass: every instruction set gives the same bits,
// max/min equal the element-by-element path exactly, mean/norm within 1e-12 relative.
#include "common/checks/stats.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "common/base/float_formats.h"
#include "common/base/tensor.h"
#include "tests/test_util.h"

namespace parity {
namespace {

Tensor Make(DType t, const std::vector<float>& v) {
  return *Tensor::Make(t, {static_cast<int64_t>(v.size())}, testing::EncodeFloats(v, t));
}

uint64_t Bits(std::optional<double> d) {
  uint64_t u = 0;
  if (d) std::memcpy(&u, &*d, 8);
  return u;
}

constexpr DType kFloats[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

TEST(Stats, KnownValues) {
  for (DType t : kFloats) {
    for (bool kernel : {true, false}) {
      SetStatsKernelEnabled(kernel);
      const TensorStats s = ComputeStats(Make(t, {1, -2, 3, 4, 0.5f, 2, 2, 2, 1}));
      EXPECT_EQ(*s.max, 4.0);
      EXPECT_EQ(*s.min, -2.0);
      EXPECT_DOUBLE_EQ(*s.mean, 13.5 / 9);
      EXPECT_DOUBLE_EQ(*s.norm, std::sqrt(43.25));
      const TensorStats n = ComputeStats(Make(t, {1, std::nanf(""), 3}));
      EXPECT_TRUE(std::isnan(*n.max));
      EXPECT_TRUE(std::isnan(*n.min));
      EXPECT_TRUE(std::isnan(*n.mean));
      const TensorStats i = ComputeStats(Make(t, {1, std::numeric_limits<float>::infinity(), -5}));
      EXPECT_EQ(*i.max, std::numeric_limits<double>::infinity());
      EXPECT_EQ(*i.min, -5.0);
    }
  }
  SetStatsKernelEnabled(true);
  EXPECT_FALSE(ComputeStats(*Tensor::Make(DType::kFloat32, {0}, "")).max.has_value());
  const std::string one("\x00\x00\x40\x40", 4);  // 3.0f
  const TensorStats z = ComputeStats(*Tensor::Make(DType::kFloat32, {}, one));
  EXPECT_EQ(*z.max, 3.0);
  EXPECT_EQ(*z.norm, 3.0);  // a 0-d tensor: all four are its value
  const TensorStats b = ComputeStats(*Tensor::Make(DType::kBool, {3}, std::string("\x00\x01\x00", 3)));
  EXPECT_EQ(*b.max, 1.0);
  EXPECT_EQ(*b.min, 0.0);
  EXPECT_FALSE(b.mean.has_value());
}

std::vector<float> Random(int64_t n, uint32_t seed, int flavour) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = g(rng) + (flavour == 3 ? 100.0f : 0.0f);
  if (flavour == 1) v[v.size() / 2] = std::nanf("");
  if (flavour == 2) v[v.size() - 1] = -std::numeric_limits<float>::infinity();
  return v;
}

TEST(Stats, InstructionSetsAgreeAndMatchTheElementPath) {
  for (DType t : kFloats) {
    for (int64_t n : {1, 7, 8, 9, 1023, 1025, 5000, 100003}) {
      for (int flavour : {0, 1, 2, 3}) {
        const Tensor x = Make(t, Random(n, static_cast<uint32_t>(n + flavour), flavour));
        SCOPED_TRACE(::testing::Message() << DTypeName(t) << " n=" << n << " flavour=" << flavour);
        TensorStats ref;
        ASSERT_TRUE(ComputeStatsForIsa("portable", x, &ref));
        for (const char* isa : {"avx2", "avx512"}) {
          TensorStats s;
          if (!ComputeStatsForIsa(isa, x, &s)) continue;  // not on this CPU
          EXPECT_EQ(Bits(s.max), Bits(ref.max)) << isa;
          EXPECT_EQ(Bits(s.min), Bits(ref.min)) << isa;
          EXPECT_EQ(Bits(s.mean), Bits(ref.mean)) << isa;
          EXPECT_EQ(Bits(s.norm), Bits(ref.norm)) << isa;
        }
        SetStatsKernelEnabled(false);
        const TensorStats slow = ComputeStats(x);
        SetStatsKernelEnabled(true);
        const TensorStats fast = ComputeStats(x);
        EXPECT_EQ(Bits(fast.mean), Bits(ref.mean));
        EXPECT_EQ(Bits(fast.max), Bits(slow.max));
        EXPECT_EQ(Bits(fast.min), Bits(slow.min));
        for (auto [a, b] : {std::pair{*fast.mean, *slow.mean}, std::pair{*fast.norm, *slow.norm}}) {
          if (std::isnan(b) || std::isinf(b)) {
            EXPECT_EQ(Bits(a), Bits(b));
          } else {
            EXPECT_NEAR(a, b, 1e-12 * std::fabs(b) + 1e-300);
          }
        }
      }
    }
  }
}

// The agent computes a large tensor's statistics as it reads the file in pieces: the same bits
// as ComputeStats of the whole, on both paths, for every dtype, with NaN and infinities, however
// the pieces are cut (whole blocks of kStatsPieceElements, the last ragged).
TEST(Stats, PiecesGiveTheWholeTensorsBits) {
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,
                          DType::kUInt8,   DType::kInt32,   DType::kInt64,    DType::kBool};
  std::mt19937 rng(11);
  for (DType t : dtypes) {
    for (int64_t n : {int64_t{1}, int64_t{1023}, int64_t{1024}, int64_t{3000}, int64_t{5 * 1024 + 17}}) {
      for (int flavour : {0, 1, 2, 3}) {
        const size_t size = DTypeSize(t);
        std::string bytes;
        if (t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16) {
          bytes = testing::EncodeFloats(Random(n, static_cast<uint32_t>(n + flavour), flavour), t);
        } else if (t == DType::kFloat64) {
          for (float f : Random(n, static_cast<uint32_t>(n + flavour), flavour)) {
            const double d = static_cast<double>(f) * 1.000000123;
            bytes.append(reinterpret_cast<const char*>(&d), 8);
          }
        } else {
          for (int64_t i = 0; i < n * static_cast<int64_t>(size); ++i) {
            bytes.push_back(static_cast<char>(t == DType::kBool ? rng() % 2 : rng()));
          }
        }
        const Tensor x = *Tensor::Make(t, {n}, bytes);
        for (bool kernel : {true, false}) {
          SetStatsKernelEnabled(kernel);
          const TensorStats whole = ComputeStats(x);
          for (int64_t piece : {kStatsPieceElements, 2 * kStatsPieceElements}) {
            SCOPED_TRACE(::testing::Message() << DTypeName(t) << " n=" << n << " flavour=" << flavour
                                              << " kernel=" << kernel << " piece=" << piece);
            StatsAccumulator a(t);
            for (int64_t b = 0; b < n; b += piece) {
              a.Add(x.data() + b * static_cast<int64_t>(size), std::min(piece, n - b));
            }
            const TensorStats s = a.Finish();
            EXPECT_EQ(Bits(s.max), Bits(whole.max));
            EXPECT_EQ(Bits(s.min), Bits(whole.min));
            EXPECT_EQ(Bits(s.mean), Bits(whole.mean));
            EXPECT_EQ(Bits(s.norm), Bits(whole.norm));
            EXPECT_EQ(s.mean.has_value(), t != DType::kBool);
          }
        }
        SetStatsKernelEnabled(true);
      }
    }
  }
  EXPECT_FALSE(StatsAccumulator(DType::kFloat32).Finish().max.has_value());  // no elements
}

}  // namespace
}  // namespace parity
