// The vectorised msprobe kernel: every implementation this CPU runs gives bit-identical partials
// to the portable one, sums agree with a long-double reference within 1e-12, the relative-error
// maximum and threshold counts equal an element-by-element evaluation in msprobe's arithmetic,
// and a threaded run equals a serial one.
#include "common/checks/msprobe_kernel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/base/float_formats.h"
#include "common/checks/msprobe_policy.h"
#include "common/base/tensor.h"
#include "tests/common/checks/isa.h"

namespace parity {
namespace {

constexpr double kEps = 2.220446049250313e-16;

struct Pair {
  DType dtype;
  std::string a, b;  // raw bytes
  std::vector<double> va, vb;  // values as loaded
};

// n values in `dtype`, bench with ~10% exact zeros (the eps branch) and small noise elsewhere.
Pair MakePair(DType dtype, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 9);
  Pair p{dtype, std::string(n * DTypeSize(dtype), '\0'), std::string(n * DTypeSize(dtype), '\0'),
         {}, {}};
  for (int64_t i = 0; i < n; ++i) {
    float y = dist(rng);
    if (pick(rng) == 0) y = 0;
    float x = y + 1e-3f * dist(rng) * (pick(rng) < 3 ? 100.0f : 1.0f);
    if (y == 0 && pick(rng) < 3) x = 0;  // 0 vs 0: eps on both sides, or 0/0 in float16
    switch (dtype) {
      case DType::kFloat32:
        std::memcpy(&p.a[4 * i], &x, 4);
        std::memcpy(&p.b[4 * i], &y, 4);
        break;
      case DType::kFloat16: {
        const uint16_t hx = FloatToHalf(x), hy = FloatToHalf(y);
        std::memcpy(&p.a[2 * i], &hx, 2);
        std::memcpy(&p.b[2 * i], &hy, 2);
        break;
      }
      case DType::kBFloat16: {
        const uint16_t hx = FloatToBFloat16(x), hy = FloatToBFloat16(y);
        std::memcpy(&p.a[2 * i], &hx, 2);
        std::memcpy(&p.b[2 * i], &hy, 2);
        break;
      }
      case DType::kFloat64: {
        // Noise below float32's resolution, so that float64 arithmetic is what separates them.
        const double dy = y, dx = y == 0 ? static_cast<double>(x) : dy + (static_cast<double>(x) - dy) * 1e-4;
        std::memcpy(&p.a[8 * i], &dx, 8);
        std::memcpy(&p.b[8 * i], &dy, 8);
        break;
      }
      case DType::kInt32: {
        const int32_t ix = static_cast<int32_t>(y * 1000) + (pick(rng) == 0 ? 1 : 0);
        const int32_t iy = static_cast<int32_t>(y * 1000);
        std::memcpy(&p.a[4 * i], &ix, 4);
        std::memcpy(&p.b[4 * i], &iy, 4);
        break;
      }
      case DType::kInt64: {
        const int64_t ix = static_cast<int64_t>(y * 1000) + (pick(rng) == 0 ? 1 : 0);
        const int64_t iy = static_cast<int64_t>(y * 1000);
        std::memcpy(&p.a[8 * i], &ix, 8);
        std::memcpy(&p.b[8 * i], &iy, 8);
        break;
      }
      case DType::kUInt32: {  // a third near 2^32, where the top bit is set
        const uint32_t iy = static_cast<uint32_t>(std::fabs(y) * 1000) + (pick(rng) < 3 ? 0xf0000000u : 0u);
        const uint32_t ix = iy + (pick(rng) == 0 ? 1u : 0u);
        std::memcpy(&p.a[4 * i], &ix, 4);
        std::memcpy(&p.b[4 * i], &iy, 4);
        break;
      }
      case DType::kUInt64: {  // a third beyond 2^63, where the cast to float64 rounds
        const uint64_t iy = static_cast<uint64_t>(std::fabs(y) * 1000) +
                            (pick(rng) < 3 ? uint64_t{0xf000000000000000u} : 0u);
        const uint64_t ix = iy + (pick(rng) == 0 ? 1u : 0u);
        std::memcpy(&p.a[8 * i], &ix, 8);
        std::memcpy(&p.b[8 * i], &iy, 8);
        break;
      }
      case DType::kInt16: {
        const int16_t ix = static_cast<int16_t>(y * 100) + (pick(rng) == 0 ? 1 : 0);
        const int16_t iy = static_cast<int16_t>(y * 100);
        std::memcpy(&p.a[2 * i], &ix, 2);
        std::memcpy(&p.b[2 * i], &iy, 2);
        break;
      }
      case DType::kUInt16: {
        const uint16_t ix = static_cast<uint16_t>(std::fabs(y) * 100) + (pick(rng) == 0 ? 1 : 0);
        const uint16_t iy = static_cast<uint16_t>(std::fabs(y) * 100);
        std::memcpy(&p.a[2 * i], &ix, 2);
        std::memcpy(&p.b[2 * i], &iy, 2);
        break;
      }
      case DType::kInt8:
      case DType::kUInt8:
      case DType::kBool: {
        p.a[i] = static_cast<char>(static_cast<int>(y * 20) + (pick(rng) == 0 ? 1 : 0));
        p.b[i] = static_cast<char>(static_cast<int>(y * 20));
        break;
      }
      case DType::kFloat8E4M3FN:
      case DType::kFloat8E5M2: {
        // Finite bytes (e4m3fn: NaN is 0x7f/0xff; e5m2: exponent 31 is inf/NaN), npu one or two
        // steps from bench in a third of the elements, bench zero in a tenth.
        const bool e5m2 = dtype == DType::kFloat8E5M2;
        std::uniform_int_distribution<int> byte(0, e5m2 ? 0x7b : 0x7e);
        const int sign = pick(rng) < 5 ? 0x80 : 0;
        const int by = y == 0 ? 0 : byte(rng);
        const int ax = std::min(e5m2 ? 0x7b : 0x7e, by + (pick(rng) < 3 ? 1 + pick(rng) % 2 : 0));
        p.a[i] = static_cast<char>(ax | sign);
        p.b[i] = static_cast<char>(by | sign);
        break;
      }
      default: ADD_FAILURE() << "dtype not generated";
    }
  }
  auto ta = Tensor::Make(dtype, {n}, p.a), tb = Tensor::Make(dtype, {n}, p.b);
  p.va.resize(n);
  p.vb.resize(n);
  ta->ToDouble(0, n, p.va.data());
  tb->ToDouble(0, n, p.vb.data());
  return p;
}

// int64 (or uint64) pairs across the whole range (what hashed ids or byte offsets look like):
// magnitudes from 2^10 to 2^63 (uint64: 2^64), most beyond 2^53 so that the cast to float64
// rounds; bench zero in ~10 %, npu off by up to 2^20 in a third.
Pair MakeWideInt64Pair(int64_t n, uint64_t seed, DType dtype = DType::kInt64) {
  const bool is_unsigned = dtype == DType::kUInt64;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> bits(10, is_unsigned ? 64 : 63), pick(0, 9);
  Pair p{dtype, std::string(n * 8, '\0'), std::string(n * 8, '\0'), {}, {}};
  for (int64_t i = 0; i < n; ++i) {
    const int w = bits(rng);
    uint64_t y = rng() >> (64 - w);  // in [0, 2^w)
    if (!is_unsigned && pick(rng) < 5) y = 0 - y - (w == 63 ? 1 : 0);  // down to INT64_MIN
    if (pick(rng) == 0) y = 0;
    const uint64_t off = pick(rng) < 3 ? rng() >> 44 : 0;
    // Never overflows (int64: towards zero, or below it from a small positive value).
    const uint64_t x = is_unsigned ? (y >= off ? y - off : y + off)
                                   : (static_cast<int64_t>(y) > 0 ? y - off : y + off);
    std::memcpy(&p.a[8 * i], &x, 8);
    std::memcpy(&p.b[8 * i], &y, 8);
    p.va.push_back(is_unsigned ? static_cast<double>(x) : static_cast<double>(static_cast<int64_t>(x)));
    p.vb.push_back(is_unsigned ? static_cast<double>(y) : static_cast<double>(static_cast<int64_t>(y)));
  }
  return p;
}

const DType kDtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt32,
                         DType::kInt16,   DType::kUInt16,  DType::kInt8,     DType::kUInt8,
                         DType::kBool,    DType::kInt64,   DType::kFloat64,  DType::kFloat8E4M3FN,
                         DType::kFloat8E5M2, DType::kUInt32, DType::kUInt64};
const int64_t kSizes[] = {1, 7, 8, 15, 16, 17, 1023, 1024, 1025, 5000, 70001};

// msprobe's thresholds as the policy passes them: rounded to the relative error's dtype.
double Threshold(DType t, double v) {
  if (t == DType::kFloat16) return RoundToHalf(static_cast<float>(v));
  if (t == DType::kFloat32 || t == DType::kBFloat16 || t == DType::kFloat8E4M3FN ||
      t == DType::kFloat8E5M2) {
    return static_cast<float>(v);
  }
  return v;
}

void ExpectSame(const MsprobePartial& x, const MsprobePartial& y, const std::string& what) {
  EXPECT_EQ(0, std::memcmp(x.dot, y.dot, sizeof x.dot)) << what;
  EXPECT_EQ(0, std::memcmp(x.nn, y.nn, sizeof x.nn)) << what;
  EXPECT_EQ(0, std::memcmp(x.bb, y.bb, sizeof x.bb)) << what;
  EXPECT_EQ(0, std::memcmp(x.euc, y.euc, sizeof x.euc)) << what;
  EXPECT_EQ(x.max_abs, y.max_abs) << what;
  EXPECT_EQ(x.max_re, y.max_re) << what;
  EXPECT_EQ(x.re_nan, y.re_nan) << what;
  EXPECT_EQ(x.nonfinite, y.nonfinite) << what;
  EXPECT_EQ(x.c1, y.c1) << what;
  EXPECT_EQ(x.c5, y.c5) << what;
}

TEST(MsprobeKernel, EveryImplementationIsBitIdenticalToThePortableOne) {
  PARITY_SKIP_WITHOUT_VECTOR_ISA();
  int compared = 0;
  for (DType t : kDtypes) {
    for (int64_t n : kSizes) {
      const Pair p = MakePair(t, n, 7 + n);
      MsprobePartial portable;
      const double t1 = Threshold(t, 0.001), t5 = Threshold(t, 0.005);
      ASSERT_TRUE(
          MsprobeKernelForIsa("portable", t, p.a.data(), p.b.data(), 0, n, t1, t5, &portable));
      for (const char* isa : testing::VectorIsas()) {
        MsprobePartial other;
        ASSERT_TRUE(MsprobeKernelForIsa(isa, t, p.a.data(), p.b.data(), 0, n, t1, t5, &other)) << isa;
        ExpectSame(portable, other, std::string(isa) + " " + DTypeName(t) + " n=" + std::to_string(n));
        ++compared;
      }
    }
  }
  for (DType t : {DType::kInt64, DType::kUInt64}) {
    for (int64_t n : kSizes) {
      const Pair p = MakeWideInt64Pair(n, 3 + n, t);
      MsprobePartial portable;
      ASSERT_TRUE(MsprobeKernelForIsa("portable", t, p.a.data(), p.b.data(), 0, n, 0.001, 0.005, &portable));
      for (const char* isa : testing::VectorIsas()) {
        MsprobePartial other;
        ASSERT_TRUE(MsprobeKernelForIsa(isa, t, p.a.data(), p.b.data(), 0, n, 0.001, 0.005, &other)) << isa;
        ExpectSame(portable, other, std::string(isa) + " wide " + DTypeName(t) + " n=" + std::to_string(n));
        ++compared;
      }
    }
  }
  std::printf("implementation in use: %s; %d comparisons\n", MsprobeKernelIsa(), compared);
}

// int32 pairs where the AVX-512 integer relative error takes each of its paths: ratios exactly on
// the thresholds (1/1000, 5/1000), zeros in bench, |d| up to 2^32 - 1, equal maxima.
TEST(MsprobeKernel, IntegerRelativeErrorEdgeCasesAreExact) {
  PARITY_SKIP_WITHOUT_VECTOR_ISA();
  const int32_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  const std::vector<std::pair<int32_t, int32_t>> cases = {
      {1001, 1000}, {-1001, -1000}, {201, 200}, {1005, 1000}, {999, 1000}, {0, 0}, {7, 0},
      {-7, 0},      {hi, lo},       {lo, hi},   {lo, 1},      {hi, -1},    {3, 2}, {6, 4},
      {1, 1},       {2000001, 2000000}, {hi, hi}, {lo, lo}, {5, 1000}, {1000, 999}};
  for (int64_t n : {int64_t{16}, int64_t{40}, int64_t{1027}}) {
    std::string a(static_cast<size_t>(n) * 4, '\0'), b(static_cast<size_t>(n) * 4, '\0');
    for (int64_t i = 0; i < n; ++i) {
      // Every case in every lane position over the rounds; runs of one case fill whole vectors.
      const auto& [x, y] = cases[static_cast<size_t>((i / (n > 100 ? 16 : 1)) % cases.size())];
      std::memcpy(&a[static_cast<size_t>(i) * 4], &x, 4);
      std::memcpy(&b[static_cast<size_t>(i) * 4], &y, 4);
    }
    MsprobePartial portable;
    ASSERT_TRUE(MsprobeKernelForIsa("portable", DType::kInt32, a.data(), b.data(), 0, n, 0.001,
                                    0.005, &portable));
    for (const char* isa : testing::VectorIsas()) {
      MsprobePartial other;
      ASSERT_TRUE(MsprobeKernelForIsa(isa, DType::kInt32, a.data(), b.data(), 0, n, 0.001, 0.005, &other)) << isa;
      ExpectSame(portable, other, std::string(isa) + " n=" + std::to_string(n));
    }
  }
}

// fp16 pairs whose relative error lands next to both thresholds: the vector paths compare and
// maximise the unrounded float32 quotient against a precomputed bound instead of rounding each
// element to half; counts and maximum must be those of the rounded values. For each bench value
// (normal, subnormal, negative) one array of npu = bench + k ulps, k = -15 .. 16.
TEST(MsprobeKernel, HalfRelativeErrorAtTheThresholdsIsExact) {
  PARITY_SKIP_WITHOUT_VECTOR_ISA();
  int arrays = 0;
  for (uint16_t bh = 0x0001; bh < 0x7c00; bh = static_cast<uint16_t>(bh + 0x00f7)) {
    for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
      const uint16_t b = static_cast<uint16_t>(bh | sign);
      std::string a(64, '\0'), bb(64, '\0');
      for (int k = -15; k <= 16; ++k) {
        // Neighbouring bit patterns of the same sign, finite (non-finite input is the
        // caller's case: its sums are NaN).
        const int m = std::clamp(static_cast<int>(bh) + k, 0, 0x7bff);
        const uint16_t n = static_cast<uint16_t>(m | sign);
        const size_t i = static_cast<size_t>(k + 15);
        std::memcpy(&a[2 * i], &n, 2);
        std::memcpy(&bb[2 * i], &b, 2);
      }
      for (int64_t count : {int64_t{32}, int64_t{16}}) {
        const double t1 = Threshold(DType::kFloat16, 0.001), t5 = Threshold(DType::kFloat16, 0.005);
        MsprobePartial portable;
        ASSERT_TRUE(MsprobeKernelForIsa("portable", DType::kFloat16, a.data(), bb.data(), 0, count,
                                        t1, t5, &portable));
        for (const char* isa : testing::VectorIsas()) {
          MsprobePartial other;
          ASSERT_TRUE(MsprobeKernelForIsa(isa, DType::kFloat16, a.data(), bb.data(), 0, count, t1, t5,
                                   &other)) << isa;
          ExpectSame(portable, other, std::string(isa) + " bench 0x" + std::to_string(b));
          // Also against thresholds that are not half values.
          MsprobePartial p2, o2;
          ASSERT_TRUE(MsprobeKernelForIsa("portable", DType::kFloat16, a.data(), bb.data(), 0,
                                          count, 0.001, 0.005, &p2));
          ASSERT_TRUE(MsprobeKernelForIsa(isa, DType::kFloat16, a.data(), bb.data(), 0, count,
                                          0.001, 0.005, &o2));
          ExpectSame(p2, o2, std::string(isa) + " raw thresholds, bench 0x" + std::to_string(b));
          ++arrays;
        }
      }
    }
  }
  std::printf("%d arrays compared\n", arrays);
  EXPECT_GT(arrays, 0);
}

TEST(MsprobeKernel, SumsMatchLongDoubleAndRelativeErrorsMatchMsprobeArithmetic) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt32, DType::kFloat64,
                  DType::kInt64, DType::kFloat8E4M3FN, DType::kFloat8E5M2, DType::kUInt32,
                  DType::kUInt64}) {
    const int64_t n = 300001;
    const Pair p = t == DType::kInt64 || t == DType::kUInt64 ? MakeWideInt64Pair(n, 99, t) : MakePair(t, n, 99);
    MsprobePartial k;
    const double t1 = Threshold(t, 0.001), t5 = Threshold(t, 0.005);
    MsprobeKernel(t, p.a.data(), p.b.data(), 0, n, t1, t5, &k);
    long double dot = 0, nn = 0, bb = 0, euc = 0;
    double max_abs = -1, max_re = -1;
    int64_t c1 = 0, c5 = 0;
    bool re_nan = false;
    for (int64_t i = 0; i < n; ++i) {
      const double x = p.va[i], y = p.vb[i];
      dot += static_cast<long double>(x) * y;
      nn += static_cast<long double>(x) * x;
      bb += static_cast<long double>(y) * y;
      euc += static_cast<long double>(x - y) * (x - y);
      max_abs = std::max(max_abs, std::fabs(x - y));
      double re;
      if (t == DType::kFloat16) {  // numpy float16: each operation rounded to half
        re = std::fabs(RoundToHalf(RoundToHalf(static_cast<float>(x) - static_cast<float>(y)) /
                                   static_cast<float>(y)));
      } else if (t == DType::kInt32 || t == DType::kFloat64 || t == DType::kInt64 ||
                 t == DType::kUInt32 || t == DType::kUInt64) {
        // float64 (integers cast first), eps added where bench == 0
        const double yq = y == 0 ? kEps : y, xq = y == 0 ? x + kEps : x;
        re = std::fabs((xq - yq) / yq);
      } else {  // float32
        const float ef = static_cast<float>(kEps);
        const float yq = y == 0 ? ef : static_cast<float>(y);
        const float xq = y == 0 ? static_cast<float>(x) + ef : static_cast<float>(x);
        re = std::fabs((xq - yq) / yq);
      }
      if (std::isnan(re)) {
        re_nan = true;
      } else {
        max_re = std::max(max_re, re);
      }
      c1 += re < t1;
      c5 += re < t5;
    }
    const std::string name = DTypeName(t);
    EXPECT_NEAR(k.Dot(), static_cast<double>(dot), 1e-12 * std::fabs(static_cast<double>(dot))) << name;
    EXPECT_NEAR(k.NN(), static_cast<double>(nn), 1e-12 * static_cast<double>(nn)) << name;
    EXPECT_NEAR(k.BB(), static_cast<double>(bb), 1e-12 * static_cast<double>(bb)) << name;
    EXPECT_NEAR(k.Euc(), static_cast<double>(euc), 1e-12 * static_cast<double>(euc)) << name;
    EXPECT_EQ(k.max_abs, max_abs) << name;
    EXPECT_EQ(k.max_re, max_re) << name;
    EXPECT_EQ(k.re_nan, re_nan) << name;
    EXPECT_EQ(k.c1, c1) << name;
    EXPECT_EQ(k.c5, c5) << name;
    if (t != DType::kFloat8E4M3FN && t != DType::kFloat8E5M2) {  // fp8 steps exceed 0.5 %
      EXPECT_GT(c5, c1) << name;  // the data exercises both thresholds
    }
    EXPECT_LT(c5, n) << name;
    if (t == DType::kFloat16) {
      EXPECT_TRUE(re_nan);  // 0/0 where both sides are zero
    }
  }
}

TEST(MsprobeKernel, ThreadedRunEqualsSerialRun) {
  const int64_t n = (int64_t{3} << 20) + 12345;  // four chunks, the last one partial
  const Pair p = MakePair(DType::kFloat32, n, 5);
  const MsprobePartial serial =
      MsprobeKernelRun(DType::kFloat32, p.a.data(), p.b.data(), n, 0.001f, 0.005f, nullptr);
  int calls = 0;
  ParallelFor threads = [&calls](int64_t jobs, const std::function<void(int64_t)>& fn) {
    ++calls;
    std::vector<std::thread> pool;
    for (int64_t j = jobs - 1; j >= 0; --j) pool.emplace_back(fn, j);  // reversed on purpose
    for (std::thread& th : pool) th.join();
  };
  const MsprobePartial threaded =
      MsprobeKernelRun(DType::kFloat32, p.a.data(), p.b.data(), n, 0.001f, 0.005f, threads);
  EXPECT_EQ(calls, 1);
  ExpectSame(serial, threaded, "threaded");
}

// Read in pieces, a pair gives the held run's partial bit for bit: for every dtype (pieces of
// 32 Ki to 256 Ki elements), sizes that end inside a piece and inside a chunk, serially and on
// threads that take the chunks in reverse order.
TEST(MsprobeKernel, PiecesGiveTheHeldRunBitForBit) {
  ParallelFor reversed = [](int64_t jobs, const std::function<void(int64_t)>& fn) {
    std::vector<std::thread> pool;
    for (int64_t j = jobs - 1; j >= 0; --j) pool.emplace_back(fn, j);
    for (std::thread& th : pool) th.join();
  };
  for (DType t : kDtypes) {
    for (int64_t n : {int64_t{5}, int64_t{1030}, (int64_t{1} << 20) + 8191}) {
      const Pair p = MakePair(t, n, 11 + n);
      const double t1 = Threshold(t, 0.001), t5 = Threshold(t, 0.005);
      const MsprobePartial held = MsprobeKernelRun(t, p.a.data(), p.b.data(), n, t1, t5, nullptr);
      const size_t esize = DTypeSize(t);
      int64_t reads = 0, widest = 0;
      ReadPiece read = [&](int side, int64_t begin, int64_t count, char* buf) {
        EXPECT_LE(static_cast<size_t>(count) * esize, kMsprobePieceBytes);
        EXPECT_EQ(begin % 1024, 0);  // whole blocks, as the held run flushes them
        std::memcpy(buf, (side == 0 ? p.a : p.b).data() + begin * esize, count * esize);
        return absl::OkStatus();
      };
      const std::string what = std::string(DTypeName(t)) + " n=" + std::to_string(n);
      absl::StatusOr<MsprobePartial> serial = MsprobeKernelRunPieces(
          t, n, t1, t5,
          [&](int side, int64_t begin, int64_t count, char* buf) {
            ++reads;
            widest = std::max(widest, count);
            return read(side, begin, count, buf);
          },
          nullptr);
      ASSERT_TRUE(serial.ok()) << serial.status();
      ExpectSame(held, *serial, what + " serial");
      // Every element read once per side, in pieces of kMsprobePieceBytes.
      const int64_t piece = static_cast<int64_t>(kMsprobePieceBytes / esize);
      EXPECT_EQ(widest, std::min(n, piece)) << what;
      EXPECT_GE(reads, 2 * ((n + piece - 1) / piece)) << what;
      absl::StatusOr<MsprobePartial> threaded = MsprobeKernelRunPieces(t, n, t1, t5, read, reversed);
      ASSERT_TRUE(threaded.ok()) << threaded.status();
      ExpectSame(held, *threaded, what + " threaded");
    }
  }
}

// A read error ends the run with that error; a non-finite value ends it early, reported.
TEST(MsprobeKernel, PiecesReturnTheFirstReadErrorAndStopAtANonFiniteValue) {
  const int64_t n = (int64_t{3} << 20) + 100;
  Pair p = MakePair(DType::kFloat32, n, 3);
  absl::StatusOr<MsprobePartial> failed = MsprobeKernelRunPieces(
      DType::kFloat32, n, 0.001, 0.005,
      [&](int side, int64_t begin, int64_t count, char* buf) -> absl::Status {
        if (side == 1 && begin >= (int64_t{2} << 20)) return absl::DataLossError("bench.npy shrank");
        std::memcpy(buf, (side == 0 ? p.a : p.b).data() + begin * 4, count * 4);
        return absl::OkStatus();
      },
      nullptr);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(failed.status().message(), "bench.npy shrank");

  const float inf = std::numeric_limits<float>::infinity();
  std::memcpy(&p.a[4 * 70000], &inf, 4);  // in the first chunk's second piece
  int64_t last_begin = -1;
  absl::StatusOr<MsprobePartial> stopped = MsprobeKernelRunPieces(
      DType::kFloat32, n, 0.001, 0.005,
      [&](int side, int64_t begin, int64_t count, char* buf) {
        last_begin = std::max(last_begin, begin);
        std::memcpy(buf, (side == 0 ? p.a : p.b).data() + begin * 4, count * 4);
        return absl::OkStatus();
      },
      nullptr);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_TRUE(stopped->nonfinite);
  EXPECT_EQ(last_begin, 65536);  // nothing read after the piece that held it
  EXPECT_TRUE(MsprobeKernelRun(DType::kFloat32, p.a.data(), p.b.data(), n, 0.001, 0.005, nullptr).nonfinite);
}

// int64 pairs: values within int32's range give exactly the int32 pair's partial and policy
// result (the cast to float64 is exact there).
TEST(MsprobeKernel, Int64WithinInt32RangeIsTheInt32Result) {
  for (int64_t n : {int64_t{5}, int64_t{40}, int64_t{1030}}) {
    const Pair p32 = MakePair(DType::kInt32, n, 99 + n);
    std::string a(static_cast<size_t>(n) * 8, '\0'), b = a;
    for (int64_t i = 0; i < n; ++i) {
      int32_t x, y;
      std::memcpy(&x, &p32.a[4 * i], 4);
      std::memcpy(&y, &p32.b[4 * i], 4);
      const int64_t wx = x, wy = y;
      std::memcpy(&a[8 * i], &wx, 8);
      std::memcpy(&b[8 * i], &wy, 8);
    }
    SCOPED_TRACE(n);
    for (const char* isa : testing::AllIsas()) {
      MsprobePartial p64, ref;
      ASSERT_TRUE(MsprobeKernelForIsa(isa, DType::kInt64, a.data(), b.data(), 0, n, 0.001, 0.005, &p64)) << isa;
      ASSERT_TRUE(MsprobeKernelForIsa(isa, DType::kInt32, p32.a.data(), p32.b.data(), 0, n, 0.001, 0.005, &ref));
      ExpectSame(ref, p64, isa);
    }
    const CheckResult r32 = MsprobeCompareReal(*Tensor::Make(DType::kInt32, {n}, p32.a),
                                               *Tensor::Make(DType::kInt32, {n}, p32.b), {});
    const CheckResult r64 = MsprobeCompareReal(*Tensor::Make(DType::kInt64, {n}, a),
                                               *Tensor::Make(DType::kInt64, {n}, b), {});
    ASSERT_EQ(r32.metrics.size(), r64.metrics.size());
    for (size_t i = 0; i < r32.metrics.size(); ++i) {
      EXPECT_EQ(r32.metrics[i].value.ToJson().Dump(), r64.metrics[i].value.ToJson().Dump()) << r32.metrics[i].name;
    }
  }
}

// uint32 pairs, and uint64 pairs below 2^63, hold values int64 holds: the policy's result is the
// int64 pair's (both cast to float64 first), through the kernel or not.
TEST(MsprobeKernel, UnsignedIsTheInt64PairOfTheSameValues) {
  for (DType t : {DType::kUInt32, DType::kUInt64}) {
    for (int64_t n : {int64_t{5}, int64_t{40}, int64_t{1030}}) {
      Pair p = MakePair(t, n, 17 + n);
      if (t == DType::kUInt64) {  // below 2^63 (MakePair's values go beyond it)
        for (int64_t i = 0; i < n; ++i) {
          for (std::string* side : {&p.a, &p.b}) (*side)[8 * i + 7] = static_cast<char>((*side)[8 * i + 7] & 0x7f);
        }
      }
      std::string a(static_cast<size_t>(n) * 8, '\0'), b = a;
      for (int64_t i = 0; i < n; ++i) {
        int64_t x = 0, y = 0;
        std::memcpy(&x, &p.a[DTypeSize(t) * i], DTypeSize(t));  // little-endian: zero-extended
        std::memcpy(&y, &p.b[DTypeSize(t) * i], DTypeSize(t));
        std::memcpy(&a[8 * i], &x, 8);
        std::memcpy(&b[8 * i], &y, 8);
      }
      const CheckResult ru = MsprobeCompareReal(*Tensor::Make(t, {n}, p.a), *Tensor::Make(t, {n}, p.b), {});
      const CheckResult r64 = MsprobeCompareReal(*Tensor::Make(DType::kInt64, {n}, a),
                                                 *Tensor::Make(DType::kInt64, {n}, b), {});
      ASSERT_EQ(ru.metrics.size(), r64.metrics.size());
      ASSERT_FALSE(ru.metrics.empty());
      for (size_t i = 0; i < ru.metrics.size(); ++i) {
        EXPECT_EQ(ru.metrics[i].value.ToJson().Dump(), r64.metrics[i].value.ToJson().Dump())
            << DTypeName(t) << " n=" << n << " " << ru.metrics[i].name;
      }
    }
  }
}

// The cast of int64 to float64 rounds to nearest, ties to even, on every implementation (the
// AVX2 path builds it from two 32-bit halves): each value fills a whole array on one side, the
// other side zero, so MaxAbsErr is the cast value itself. The policy's MaxAbsErr of a pair
// beyond 2^53 is |double(x) - double(y)|, msprobe's astype(float) first, not |x - y|.
TEST(MsprobeKernel, Int64CastToFloat64RoundsAsStaticCast) {
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  const int64_t p53 = int64_t{1} << 53, p62 = int64_t{1} << 62;
  const std::vector<int64_t> values = {
      p53 + 1,  p53 + 3,       -(p53 + 1),    -(p53 + 3),   hi,          lo,
      lo + 1,   p62 + 512,     p62 + 513,     p62 + 1536,   -(p62 + 1536), (int64_t{1} << 32) - 1,
      int64_t{1} << 32, -(int64_t{1} << 32), (int64_t{1} << 31), -(int64_t{1} << 31) - 1,
      int64_t{0x123456789abcdefLL}, -int64_t{0x7edcba9876543210LL}, 1, -1};
  for (int64_t v : values) {
    for (int64_t n : {int64_t{16}, int64_t{21}}) {  // whole vectors, and a tail
      std::string x(static_cast<size_t>(n) * 8, '\0'), zeros = x;
      for (int64_t i = 0; i < n; ++i) std::memcpy(&x[8 * i], &v, 8);
      for (const char* isa : testing::AllIsas()) {
        MsprobePartial npu_side, bench_side;
        ASSERT_TRUE(MsprobeKernelForIsa(isa, DType::kInt64, x.data(), zeros.data(), 0, n, 0.001, 0.005,
                                 &npu_side)) << isa;
        ASSERT_TRUE(MsprobeKernelForIsa(isa, DType::kInt64, zeros.data(), x.data(), 0, n, 0.001,
                                        0.005, &bench_side));
        const double want = std::fabs(static_cast<double>(v));
        EXPECT_EQ(npu_side.max_abs, want) << isa << " " << v;
        EXPECT_EQ(bench_side.max_abs, want) << isa << " " << v;
      }
    }
  }
  // uint64: the AVX2 path's high half is unsigned; vcvtuqq2pd on AVX-512.
  const uint64_t u63 = uint64_t{1} << 63, umax = std::numeric_limits<uint64_t>::max();
  for (uint64_t v : {umax, umax - 1024, umax - 1025, u63, u63 + 1024, u63 + 1025, u63 + 3072,
                     u63 - 1, (uint64_t{1} << 53) + 1, uint64_t{0xfedcba9876543210u},
                     (uint64_t{1} << 32) - 1, uint64_t{1} << 32, uint64_t{1}}) {
    for (int64_t n : {int64_t{16}, int64_t{21}}) {
      std::string x(static_cast<size_t>(n) * 8, '\0'), zeros = x;
      for (int64_t i = 0; i < n; ++i) std::memcpy(&x[8 * i], &v, 8);
      for (const char* isa : testing::AllIsas()) {
        MsprobePartial npu_side;
        ASSERT_TRUE(MsprobeKernelForIsa(isa, DType::kUInt64, x.data(), zeros.data(), 0, n, 0.001, 0.005,
                                 &npu_side)) << isa;
        EXPECT_EQ(npu_side.max_abs, static_cast<double>(v)) << isa << " " << v;
      }
    }
  }
  // Beyond 2^53 the two differ: x = 2^62 + 1536 and y = 2^62 + 513 are 1,023 apart, but cast
  // to float64 they are 2^62 + 2048 and 2^62 + 1024.
  const int64_t n = 40;
  std::string a(n * 8, '\0'), b(n * 8, '\0');
  for (int64_t i = 0; i < n; ++i) {
    const int64_t x = p62 + 1536 - (i == 7 ? 0 : 1536), y = p62 + 513 - (i == 7 ? 0 : 513);
    std::memcpy(&a[8 * i], &x, 8);
    std::memcpy(&b[8 * i], &y, 8);
  }
  const CheckResult r = MsprobeCompareReal(*Tensor::Make(DType::kInt64, {n}, a),
                                           *Tensor::Make(DType::kInt64, {n}, b), {});
  const MetricValue* mae = r.Find("MaxAbsErr");
  ASSERT_NE(mae, nullptr);
  EXPECT_EQ(mae->number(), 1024.0);
}

// float64 values whose squares overflow make the kernel report `nonfinite` on every
// implementation, and the policy's general path answers (as it did before float64 had a kernel).
TEST(MsprobeKernel, Float64OverflowIsLeftToTheGeneralPath) {
  for (const int64_t n : {int64_t{5}, int64_t{40}, int64_t{1030}}) {
    std::vector<double> a(n), b(n);
    for (int64_t i = 0; i < n; ++i) {
      a[i] = 1.0 + 0.001 * static_cast<double>(i);
      b[i] = a[i] * (1 + 1e-9);
    }
    a[n / 2] = 1e200;  // its square is inf in float64
    b[n / 2] = 0.5e200;
    for (const char* isa : testing::AllIsas()) {
      MsprobePartial k;
      ASSERT_TRUE(MsprobeKernelForIsa(isa, DType::kFloat64, reinterpret_cast<const char*>(a.data()),
                               reinterpret_cast<const char*>(b.data()), 0, n, 0.001, 0.005, &k)) << isa;
      EXPECT_TRUE(k.nonfinite) << isa << " n=" << n;
    }
    auto mk = [n](const std::vector<double>& v) {
      return *Tensor::Make(DType::kFloat64, {n}, std::string(reinterpret_cast<const char*>(v.data()), n * 8));
    };
    const CheckResult r = MsprobeCompareReal(mk(a), mk(b), {});
    ASSERT_EQ(r.metrics[2].name, "MaxAbsErr");
    EXPECT_EQ(r.metrics[2].value.number(), 0.5e200) << n;
  }
}

TEST(MsprobeKernel, NonFiniteInputIsReportedAndThePolicyStillChecksPositions) {
  std::vector<float> a = {1, 2, INFINITY, 4, 5, 6, 7, 8, 9}, b = a;
  MsprobePartial k;
  MsprobeKernel(DType::kFloat32, reinterpret_cast<const char*>(a.data()),
                reinterpret_cast<const char*>(b.data()), 0, 9, 0.001, 0.005, &k);
  EXPECT_TRUE(k.nonfinite);
  auto mk = [](const std::vector<float>& v) {
    return *Tensor::Make(DType::kFloat32, {static_cast<int64_t>(v.size())},
                         std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  };
  // Same positions: compared with the specials zeroed (msprobe), a perfect match.
  CheckResult same = MsprobeCompareReal(mk(a), mk(b), {});
  EXPECT_EQ(same.peer_verdict, "Yes");
  b[2] = 3;
  CheckResult moved = MsprobeCompareReal(mk(a), mk(b), {});
  EXPECT_EQ(moved.metrics[0].value.text(), "N/A");
}

// fp8 pairs take the kernel as the float32 pairs of their values (msprobe widens fp8 to float32):
// every metric and the message are those of the widened pair, bit for bit; a NaN byte still
// goes to the general path, which checks positions.
TEST(MsprobeKernel, Float8IsTheFloat32PairOfItsValues) {
  for (DType t : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    for (int64_t n : {int64_t{9}, int64_t{1025}, int64_t{70001}}) {
      const Pair p = MakePair(t, n, 11 + n);
      std::vector<float> fa(n), fb(n);
      Float8ToFloats(t == DType::kFloat8E5M2, p.a.data(), n, fa.data());
      Float8ToFloats(t == DType::kFloat8E5M2, p.b.data(), n, fb.data());
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(fa[i], p.va[i]);  // the table is Tensor::ToDouble's conversion
        ASSERT_EQ(fb[i], p.vb[i]);
      }
      auto f32 = [n](const std::vector<float>& v) {
        return *Tensor::Make(DType::kFloat32, {n}, std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
      };
      const CheckResult r8 = MsprobeCompareReal(*Tensor::Make(t, {n}, p.a), *Tensor::Make(t, {n}, p.b), {});
      const CheckResult r32 = MsprobeCompareReal(f32(fa), f32(fb), {});
      SCOPED_TRACE(::testing::Message() << DTypeName(t) << " n=" << n);
      EXPECT_EQ(r8.ToJson().Dump(), r32.ToJson().Dump());
      EXPECT_EQ(r8.message, r32.message);
      EXPECT_EQ(r8.peer_verdict, r32.peer_verdict);
    }
  }
  // NaN (e4m3fn 0x7f) at the same position on both sides: msprobe zeroes it and matches.
  std::string a(16, '\x38'), b = a;  // 1.0
  a[3] = b[3] = '\x7f';
  b[5] = '\x39';  // 1.125
  const CheckResult nan = MsprobeCompareReal(*Tensor::Make(DType::kFloat8E4M3FN, {16}, a),
                                             *Tensor::Make(DType::kFloat8E4M3FN, {16}, b), {});
  std::vector<float> fa = std::vector<float>(16, 1.0f), fb = fa;
  fa[3] = fb[3] = NAN;
  fb[5] = 1.125f;
  const CheckResult nan32 = MsprobeCompareReal(
      *Tensor::Make(DType::kFloat32, {16}, std::string(reinterpret_cast<const char*>(fa.data()), 64)),
      *Tensor::Make(DType::kFloat32, {16}, std::string(reinterpret_cast<const char*>(fb.data()), 64)), {});
  EXPECT_EQ(nan.ToJson().Dump(), nan32.ToJson().Dump());
}

}  // namespace
}  // namespace parity
