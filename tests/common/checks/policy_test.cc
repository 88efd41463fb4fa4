// Policy behaviour beyond the conformance vectors: placeholders, error paths, verdict mapping,
// torch 2 semantics, forge VerifyConfig, config parsing and per-operator overrides.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

#include "gtest/gtest.h"
#include "common/checks/compare_config.h"
#include "common/compare/culprit.h"
#include "common/compare/engine.h"
#include "common/base/file_util.h"
#include "common/base/float_formats.h"
#include "common/checks/forge_policy.h"
#include "common/checks/msprobe_kernel.h"
#include "common/checks/msprobe_policy.h"
#include "common/formats/npy.h"
#include "common/checks/torch_policy.h"

namespace parity {
namespace {

Tensor F32(Shape shape, std::vector<float> v) {
  std::string b(v.size() * 4, '\0');
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return *Tensor::Make(DType::kFloat32, std::move(shape), std::move(b));
}
Tensor I32(Shape shape, std::vector<int32_t> v) {
  std::string b(v.size() * 4, '\0');
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return *Tensor::Make(DType::kInt32, std::move(shape), std::move(b));
}

// An integer (or bool) tensor of `t` from int64 values (truncated to the dtype's width).
Tensor Ints(DType t, Shape shape, const std::vector<int64_t>& v) {
  const size_t w = DTypeSize(t);
  std::string b(v.size() * w, '\0');
  for (size_t i = 0; i < v.size(); ++i) std::memcpy(b.data() + i * w, &v[i], w);  // little-endian
  return *Tensor::Make(t, std::move(shape), std::move(b));
}

// `n` values of dtype `t` (float64, float32, float16, bfloat16 or fp8) near sin(i + phase) * scale, every
// `zero_every`th zero (msprobe adds eps where bench is 0), as raw little-endian bytes.
std::string FloatLikeBytes(DType t, int64_t n, double phase, float scale, int zero_every = 97) {
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    const float v =
        i % zero_every == 0 ? 0.0f : static_cast<float>(std::sin(static_cast<double>(i) + phase)) * scale;
    switch (t) {
      case DType::kFloat32: out.append(reinterpret_cast<const char*>(&v), 4); break;
      case DType::kFloat64: {  // a value float32 cannot hold, unless zero
        const double d = v == 0.0f ? 0.0 : static_cast<double>(v) * (1.0 + 0x1p-40);
        out.append(reinterpret_cast<const char*>(&d), 8);
        break;
      }
      case DType::kFloat16: {
        const uint16_t h = FloatToHalf(v);
        out.append(reinterpret_cast<const char*>(&h), 2);
        break;
      }
      case DType::kBFloat16: {
        const uint16_t h = FloatToBFloat16(v);
        out.append(reinterpret_cast<const char*>(&h), 2);
        break;
      }
      case DType::kInt32: {  // whole numbers near v * 100
        const int32_t x = static_cast<int32_t>(std::lround(v * 100));
        out.append(reinterpret_cast<const char*>(&x), 4);
        break;
      }
      case DType::kInt64: {
        const int64_t x = std::lround(v * 100);
        out.append(reinterpret_cast<const char*>(&x), 8);
        break;
      }
      case DType::kUInt8: {
        out.push_back(static_cast<char>(static_cast<uint8_t>(std::lround(std::fabs(v) * 40))));
        break;
      }
      default: {  // fp8: the nearest code by search (a test helper; exact codes, no specials)
        uint8_t best = 0;
        float best_d = INFINITY;
        for (int c = 0; c < 256; ++c) {
          const float f = t == DType::kFloat8E5M2 ? Float8E5M2ToFloat(static_cast<uint8_t>(c))
                                                  : Float8E4M3FNToFloat(static_cast<uint8_t>(c));
          if (std::isfinite(f) && std::fabs(f - v) < best_d) {
            best_d = std::fabs(f - v);
            best = static_cast<uint8_t>(c);
          }
        }
        out.push_back(static_cast<char>(best));
      }
    }
  }
  return out;
}

// Two different dtypes that both load as float32, or float16 against one of those, take the
// vectorised kernel, widened block by block; every metric's text, the verdict and the message are
// the general path's, on sizes with partial blocks and chunks, zeros in bench (at the same places
// as the NPU's, then not: msprobe's per-side eps gives RE 1.0, inf or NaN there), close and
// distant pairs.
TEST(Msprobe, MixedFloat32PairsGiveTheGeneralPathsResults) {
  const DType f32 = DType::kFloat32, bf16 = DType::kBFloat16, e4 = DType::kFloat8E4M3FN,
              e5 = DType::kFloat8E5M2, f16 = DType::kFloat16, f64 = DType::kFloat64;
  const std::vector<std::pair<DType, DType>> pairs = {{f32, bf16}, {bf16, f32}, {f32, e4},   {e5, f32},
                                                      {bf16, e4},  {e5, bf16},  {e4, e5},    {f16, f32},
                                                      {f32, f16},  {f16, bf16}, {bf16, f16}, {f16, e4},
                                                      {f64, f32},  {f32, f64},  {f64, bf16}, {bf16, f64}};
  int compared = 0;
  for (const auto& [tn, tb] : pairs) {
    ASSERT_TRUE(MsprobeKernelSupports(tn, tb));
    const bool fp8 = tn == e4 || tn == e5 || tb == e4 || tb == e5;  // slow to encode: no second chunk
    for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{1024}, int64_t{1031}, int64_t{(1 << 20) + 4099}}) {
      if (fp8 && n > 4096) continue;
      for (const double phase : {0.0, 0.3}) {  // the same values, rounded apart; then distant
        SCOPED_TRACE(absl::StrCat(DTypeName(tn), " vs ", DTypeName(tb), " n=", n, " phase=", phase));
        const int npu_zeros = phase == 0.0 ? 97 : 89;
        const Tensor npu = *Tensor::Make(tn, {n}, FloatLikeBytes(tn, n, phase, 3.0f, npu_zeros));
        const Tensor bench = *Tensor::Make(tb, {n}, FloatLikeBytes(tb, n, 0.0, 3.0f));
        const CheckResult fast = MsprobeCompareReal(npu, bench, MsprobeOptions());
        const CheckResult general = MsprobeCompareRealGeneral(npu, bench, MsprobeOptions());
        ASSERT_EQ(fast.metrics.size(), general.metrics.size());
        for (size_t i = 0; i < fast.metrics.size(); ++i) {
          EXPECT_EQ(fast.metrics[i].name, general.metrics[i].name);
          EXPECT_EQ(fast.metrics[i].value.ToString(), general.metrics[i].value.ToString()) << fast.metrics[i].name;
        }
        EXPECT_EQ(fast.verdict, general.verdict);
        EXPECT_EQ(fast.peer_verdict, general.peer_verdict);
        EXPECT_EQ(fast.message, general.message);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 60 + 4 * 10 + 8 + 4 * 10);
  // Where bench is 0, msprobe adds eps to each side in that side's dtype: a float32 NPU side's
  // tiny values absorb it in float32 arithmetic, not in float64 (the largest RE shows it).
  for (const int64_t n : {int64_t{7}, int64_t{1031}}) {
    std::string tiny, zeros(static_cast<size_t>(n) * 8, '\0');
    for (int64_t i = 0; i < n; ++i) {
      const float v = 1e-9f * static_cast<float>(1 + i % 5);
      tiny.append(reinterpret_cast<const char*>(&v), 4);
    }
    const Tensor npu = *Tensor::Make(f32, {n}, tiny), bench = *Tensor::Make(f64, {n}, zeros);
    const CheckResult fast = MsprobeCompareReal(npu, bench, MsprobeOptions());
    const CheckResult general = MsprobeCompareRealGeneral(npu, bench, MsprobeOptions());
    EXPECT_EQ(fast.Find("MaxRelativeErr")->ToString(), general.Find("MaxRelativeErr")->ToString()) << n;
    EXPECT_EQ(fast.ToJson().Dump(), general.ToJson().Dump()) << n;
  }
  EXPECT_FALSE(MsprobeKernelSupports(DType::kFloat64, DType::kFloat16));  // float16's eps of 0 in float64
}

// Integer dtypes against floats and other integers (compared where no dtype gate pairs them
// apart: msprobe casts the integers to float64, each float side keeps its eps) take the widened
// float64 pass, with the general path's metrics, verdict and message.
TEST(Msprobe, IntegerAgainstFloatPairsGiveTheGeneralPathsResults) {
  const DType i32 = DType::kInt32, i64 = DType::kInt64, u8 = DType::kUInt8, f32 = DType::kFloat32,
              bf16 = DType::kBFloat16, f64 = DType::kFloat64;
  int compared = 0;
  for (const auto& [tn, tb] : std::vector<std::pair<DType, DType>>{
           {i32, f32}, {f32, i32}, {i64, f64}, {f64, i64}, {i32, i64}, {u8, bf16}, {bf16, u8}, {i64, f32}}) {
    ASSERT_TRUE(MsprobeKernelSupports(tn, tb)) << DTypeName(tn) << " " << DTypeName(tb);
    for (const int64_t n : {int64_t{7}, int64_t{1031}, int64_t{(1 << 20) + 4099}}) {
      for (const double phase : {0.0, 0.3}) {
        SCOPED_TRACE(absl::StrCat(DTypeName(tn), " vs ", DTypeName(tb), " n=", n, " phase=", phase));
        const Tensor npu = *Tensor::Make(tn, {n}, FloatLikeBytes(tn, n, phase, 3.0f, phase == 0.0 ? 97 : 89));
        const Tensor bench = *Tensor::Make(tb, {n}, FloatLikeBytes(tb, n, 0.0, 3.0f));
        const CheckResult fast = MsprobeCompareReal(npu, bench, MsprobeOptions());
        const CheckResult general = MsprobeCompareRealGeneral(npu, bench, MsprobeOptions());
        EXPECT_EQ(fast.ToJson().Dump(), general.ToJson().Dump());
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 8 * 3 * 2);
  // An integer NPU side takes eps in float64, where float32 would round 2^24 + 1.
  const std::vector<int32_t> nv = {(1 << 24) + 1, 3, 5, 7, 9, 11, 13, 15, 17};
  const std::vector<float> bv = {0, 3, 5, 7, 9, 11, 13, 15, 16};
  const Tensor npu = *Tensor::Make(i32, {9}, std::string(reinterpret_cast<const char*>(nv.data()), 36));
  const Tensor bench = *Tensor::Make(f32, {9}, std::string(reinterpret_cast<const char*>(bv.data()), 36));
  const CheckResult fast = MsprobeCompareReal(npu, bench, MsprobeOptions());
  EXPECT_EQ(fast.ToJson().Dump(), MsprobeCompareRealGeneral(npu, bench, MsprobeOptions()).ToJson().Dump());
  EXPECT_EQ(fast.Find("MaxRelativeErr")->number(), 16777217.0 / 2.220446049250313e-16);
  // A NaN on the float side (the integer side has none): the positions differ, the general
  // path's N/A. The values are the input tests/fuzz/checkers_fuzz.cc found when the zeroing pass
  // read the int16 side as float32 (bench: NaN, 6.2e-39, 2.3e-38, -411649.4).
  const char golden_bytes[] = "\x00\xc9\xc8\xff\xd5\x88\x43\x00\x00\x00\xff\x00\x2d\x00\xc9\xc8";
  const char npu_bytes[] = "\xff\xd5\x88\x43\x00\x00\x00\xff";
  const Tensor nan_bench = *Tensor::Make(f32, {4}, std::string(golden_bytes, 16));
  const Tensor npu16 = *Tensor::Make(DType::kInt16, {4}, std::string(npu_bytes, 8));
  const CheckResult mixed = MsprobeCompareReal(npu16, nan_bench, MsprobeOptions());
  EXPECT_EQ(mixed.ToJson().Dump(), MsprobeCompareRealGeneral(npu16, nan_bench, MsprobeOptions()).ToJson().Dump());
  EXPECT_EQ(mixed.Find("Cosine")->ToString(), "N/A");
  EXPECT_FALSE(MsprobeKernelSupports(DType::kInt32, DType::kFloat16));  // float16's eps of 0
}

// Inf and NaN at the same places on both sides (msprobe zeroes them and compares the rest; the
// sign of an inf is not compared) keep a pair that loads as float32 on the vectorised pass, with
// the general path's results to the last digit; inf or NaN at different places is the general
// path's N/A.
TEST(Msprobe, InfAndNanAtTheSamePlacesStayOnTheVectorisedPass) {
  const DType f32 = DType::kFloat32, bf16 = DType::kBFloat16;
  // Writes a special value at element i of an array of dtype t.
  auto put = [](DType t, std::string* bytes, int64_t i, float v) {
    if (t == DType::kFloat32) {
      std::memcpy(&(*bytes)[static_cast<size_t>(i) * 4], &v, 4);
    } else if (t == DType::kFloat64) {
      const double d = v;
      std::memcpy(&(*bytes)[static_cast<size_t>(i) * 8], &d, 8);
    } else if (t == DType::kFloat16) {
      const uint16_t h = FloatToHalf(v);  // inf and NaN keep their class
      std::memcpy(&(*bytes)[static_cast<size_t>(i) * 2], &h, 2);
    } else {
      uint32_t u;
      std::memcpy(&u, &v, 4);
      const uint16_t h = static_cast<uint16_t>(u >> 16);  // inf and NaN keep their class
      std::memcpy(&(*bytes)[static_cast<size_t>(i) * 2], &h, 2);
    }
  };
  const DType f16 = DType::kFloat16, f64 = DType::kFloat64;
  int compared = 0;
  for (const auto& [tn, tb] : std::vector<std::pair<DType, DType>>{{f32, f32},
                                                                   {f32, bf16},
                                                                   {bf16, f32},
                                                                   {bf16, bf16},
                                                                   {f16, f32},
                                                                   {f32, f16},
                                                                   {f16, bf16},
                                                                   {f16, f16},
                                                                   {f64, f64},
                                                                   {f64, f32},
                                                                   {f32, f64},
                                                                   {bf16, f64}}) {
    ASSERT_TRUE(MsprobeKernelZeroesSpecial(tn, tb));
    for (const int64_t n : {int64_t{7}, int64_t{1031}, int64_t{(1 << 20) + 4099}}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(tn), " vs ", DTypeName(tb), " n=", n));
      std::string nb = FloatLikeBytes(tn, n, 0.3, 3.0f), bb = FloatLikeBytes(tb, n, 0.0, 3.0f);
      for (int64_t i = 0; i < n; ++i) {
        if (i % 97 == 3) put(tn, &nb, i, INFINITY), put(tb, &bb, i, INFINITY);
        if (i % 89 == 5) put(tn, &nb, i, NAN), put(tb, &bb, i, NAN);
        if (i % 101 == 6) put(tn, &nb, i, -INFINITY), put(tb, &bb, i, INFINITY);
      }
      const Tensor npu = *Tensor::Make(tn, {n}, nb), bench = *Tensor::Make(tb, {n}, bb);
      double t1, t5;  // in the promoted relative error's dtype, as msprobe rounds them
      MsprobeThresholds(tn, tb, &t1, &t5);
      const MsprobePartial z =
          MsprobeKernelRunZeroingSpecial(tn, tb, npu.data(), bench.data(), n, t1, t5, /*parallel_for=*/nullptr);
      EXPECT_FALSE(z.special_mismatch);
      EXPECT_FALSE(z.nonfinite);
      const CheckResult zeroed = MsprobeRealFromPartial(n, z, MsprobeOptions());
      const CheckResult fast = MsprobeCompareReal(npu, bench, MsprobeOptions());
      const CheckResult general = MsprobeCompareRealGeneral(npu, bench, MsprobeOptions());
      ASSERT_EQ(zeroed.metrics.size(), general.metrics.size());
      for (size_t i = 0; i < general.metrics.size(); ++i) {
        EXPECT_EQ(zeroed.metrics[i].value.ToString(), general.metrics[i].value.ToString()) << general.metrics[i].name;
        EXPECT_EQ(fast.metrics[i].value.ToString(), general.metrics[i].value.ToString()) << general.metrics[i].name;
      }
      EXPECT_EQ(fast.verdict, general.verdict);
      EXPECT_EQ(fast.message, general.message);
      EXPECT_NE(general.Find("Cosine")->ToString(), "N/A");
      // Inf on one side against NaN on the other, inside a block's vector part and then in its
      // tail: the NaN positions differ.
      for (const int64_t at : {int64_t{16}, n - 1}) {
        if (at >= n) continue;
        std::string a = nb, b = bb;
        put(tn, &a, at, INFINITY);
        put(tb, &b, at, NAN);
        const Tensor x = *Tensor::Make(tn, {n}, a), y = *Tensor::Make(tb, {n}, b);
        EXPECT_TRUE(MsprobeKernelRunZeroingSpecial(tn, tb, x.data(), y.data(), n, t1, t5, nullptr).special_mismatch)
            << at;
      }
      // A NaN on one side only: the positions differ.
      put(tn, &nb, n - 1, NAN);
      const Tensor odd = *Tensor::Make(tn, {n}, nb);
      EXPECT_TRUE(MsprobeKernelRunZeroingSpecial(tn, tb, odd.data(), bench.data(), n, t1, t5, nullptr).special_mismatch);
      EXPECT_EQ(MsprobeCompareReal(odd, bench, MsprobeOptions()).Find("Cosine")->ToString(), "N/A");
      ++compared;
    }
  }
  EXPECT_EQ(compared, 36);
  EXPECT_FALSE(MsprobeKernelZeroesSpecial(f16, f64));  // not on the vectorised pass at all
}

TEST(Msprobe, VerdictMapping) {
  EXPECT_EQ(MsprobeCompareReal(F32({2}, {1, 2}), F32({2}, {1, 2}), {}).verdict, Verdict::kPass);
  CheckResult shape = MsprobeCompareReal(F32({2}, {1, 2}), F32({1, 2}, {1, 2}), {});
  EXPECT_EQ(shape.verdict, Verdict::kFail);
  EXPECT_EQ(shape.peer_verdict, "Unmatched");
  CheckResult empty = MsprobeCompareReal(F32({0}, {}), F32({0}, {}), {});
  EXPECT_EQ(empty.verdict, Verdict::kWarn);  // msprobe says "None": nothing to judge
  EXPECT_EQ(empty.Find("Cosine")->text(), "unsupported");
  CheckResult no_data = MsprobeNoData("Dump file: x.pt not found or read failed.");
  EXPECT_EQ(no_data.verdict, Verdict::kError);
  EXPECT_EQ(no_data.peer_verdict, "None");
  CheckResult nan_pos = MsprobeCompareReal(F32({2}, {NAN, 1}), F32({2}, {1, NAN}), {});
  EXPECT_EQ(nan_pos.verdict, Verdict::kFail);
  EXPECT_EQ(nan_pos.Find("MaxAbsErr")->text(), "N/A");
}

TEST(Msprobe, BenchAllZeroAndDtypeMessages) {
  CheckResult r = MsprobeCompareReal(F32({2}, {1, 2}), F32({2}, {0, 0}), {});
  EXPECT_EQ(r.Find("Cosine")->text(), "Nan");
  EXPECT_EQ(r.message, "Cannot compare by Cosine Similarity, All the data is Zero in Bench dump data.");
  CheckResult d = MsprobeCompareReal(F32({2}, {1, 2}), I32({2}, {1, 2}), {});
  EXPECT_EQ(d.message, "Dtype of NPU and bench tensor do not match.");
  EXPECT_EQ(d.peer_verdict, "Yes");
}

TEST(Msprobe, ThresholdsAreConfigurable) {
  MsprobeOptions strict;
  strict.cos_threshold = 1.0;
  strict.mae_threshold = 0.0;
  CheckResult r = MsprobeCompareReal(F32({2}, {1, 2.5f}), F32({2}, {1, 2}), strict);
  EXPECT_EQ(r.peer_verdict, "No");
  EXPECT_EQ(MsprobeCompareReal(F32({2}, {1, 2.5f}), F32({2}, {1, 2}), {}).peer_verdict, "Yes");
}

TEST(Msprobe, CheckAccuracyRules) {
  const MsprobeOptions o;
  auto N = MetricValue::Number;
  auto T = MetricValue::Text;
  EXPECT_EQ(MsprobeCheckAccuracy(T("shape unmatched"), T("shape unmatched"), o), "Unmatched");
  EXPECT_EQ(MsprobeCheckAccuracy(T("None"), N(0), o), "None");
  EXPECT_EQ(MsprobeCheckAccuracy(N(1), T("N/A"), o), "No");
  EXPECT_EQ(MsprobeCheckAccuracy(T("unsupported"), N(0), o), "None");
  EXPECT_EQ(MsprobeCheckAccuracy(T("Nan"), N(0.5), o), "Yes");  // NaN compares false
  EXPECT_EQ(MsprobeCheckAccuracy(T("Nan"), N(1.5), o), "No");
  EXPECT_EQ(MsprobeCheckAccuracy(N(0.95), N(0.001), o), "Yes");
  EXPECT_EQ(MsprobeCheckAccuracy(N(0.95), N(0.0011), o), "No");
  EXPECT_EQ(MsprobeCheckAccuracy(N(0.89), N(0.0), o), "No");
}

TEST(Msprobe, TorchairRuleTakesCosineAndMaxRelativeErr) {
  MsprobeOptions o;
  auto N = MetricValue::Number;
  auto T = MetricValue::Text;
  EXPECT_EQ(TorchairCheckAccuracy(N(0.99), N(0.0099), o), "Yes");
  EXPECT_EQ(TorchairCheckAccuracy(N(0.98999), N(0.0), o), "No");
  EXPECT_EQ(TorchairCheckAccuracy(N(1.0), N(0.01), o), "No");
  EXPECT_EQ(TorchairCheckAccuracy(T("Nan"), N(0.0), o), "No");  // an all-zero NPU tensor
  EXPECT_EQ(TorchairCheckAccuracy(T("shape unmatched"), T("shape unmatched"), o), "Unmatched");
  EXPECT_EQ(TorchairCheckAccuracy(N(1), T("N/A"), o), "No");
  EXPECT_EQ(TorchairCheckAccuracy(T("unsupported"), N(0), o), "None");
  // The rule decides MsprobeCompareReal's verdict: a 2 % error everywhere passes msprobe's
  // check_accuracy (cosine 1) but not the TorchAir rule.
  const Tensor npu = F32({4}, {1.02f, 2.04f, 3.06f, 4.08f}), bench = F32({4}, {1, 2, 3, 4});
  EXPECT_EQ(MsprobeCompareReal(npu, bench, o).verdict, Verdict::kPass);  // cosine 1, MaxAbsErr 0.08 < 1
  o.rule = MsprobeRule::kTorchair;
  const CheckResult r = MsprobeCompareReal(npu, bench, o);
  EXPECT_EQ(r.peer_verdict, "No");
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(MsprobeCompareReal(F32({4}, {1.005f, 2.01f, 3, 4}), bench, o).peer_verdict, "Yes");
}

TEST(Msprobe, StatsNonNumericAndRequiresGrad) {
  MsprobeStats a{Json::String("x"), Json(), Json::Bool(true), Json::Number(1), true};
  MsprobeStats b{Json::Number(1), Json::Number(1), Json::Bool(false), Json::Number(0), std::nullopt};
  CheckResult r = MsprobeCompareStats(a, b);
  EXPECT_EQ(r.Find("Max diff")->text(), "N/A");
  EXPECT_EQ(r.Find("Min diff")->text(), "N/A");
  EXPECT_EQ(r.Find("NormRelativeErr")->text(), "N/A");  // bench 0
  EXPECT_EQ(r.Find("L2norm diff")->number(), 1.0);
  EXPECT_EQ(r.peer_verdict, "Warning");  // |1-0| / (1 + 1e-10) > 0.5
  EXPECT_EQ(r.message, "Need double check api accuracy. Requires_grad inconsistent. ");
  EXPECT_EQ(r.verdict, Verdict::kWarn);
}

TEST(Msprobe, CrcAndPyStr) {
  EXPECT_EQ(MsprobeCompareCrc("00000000", "00000001").peer_verdict, "Different");
  EXPECT_EQ(MsprobeCompareCrc("00000000", "00000000").verdict, Verdict::kPass);
  EXPECT_EQ(PyStr(Json::Number(1e-05)), "1e-05");
  EXPECT_EQ(PyStr(Json::Bool(true)), "True");
  EXPECT_EQ(PyStr(*ParseJson(R"([1, "a", null, 2.5])")), "[1, 'a', None, 2.5]");
  EXPECT_EQ(PyStr(*ParseJson(R"({"k": "v"})")), "{'k': 'v'}");
}

TEST(Torch, ShapeDtypeAndDefaults) {
  CheckResult s = TorchAssertClose(F32({2}, {1, 2}), F32({3}, {1, 2, 3}), {});
  EXPECT_EQ(s.message, "The values for attribute 'shape' do not match: torch.Size([2]) != torch.Size([3]).");
  CheckResult d = TorchAssertClose(F32({2}, {1, 2}), I32({2}, {1, 2}), {});
  EXPECT_EQ(d.message, "The values for attribute 'dtype' do not match: torch.float32 != torch.int32.");
  TorchOptions no_dtype;
  no_dtype.check_dtype = false;
  EXPECT_EQ(TorchAssertClose(F32({2}, {1, 2}), I32({2}, {1, 2}), no_dtype).verdict, Verdict::kPass);
  EXPECT_EQ(TorchDefaultTolerances(DType::kFloat16, DType::kBFloat16), std::make_pair(0.016, 1e-05));
}

TEST(Torch, Torch2ScalarMessageHasExpectedLine) {
  CheckResult r = TorchAssertClose(F32({}, {1.0f}), F32({}, {2.0f}), {});
  EXPECT_EQ(r.message,
            "Scalars are not close!\n\nExpected 2.0 but got 1.0.\n"
            "Absolute difference: 1.0 (up to 1e-05 allowed)\n"
            "Relative difference: 0.5 (up to 1.3e-06 allowed)");
}

TEST(Torch, EqualNanAndCustomTolerances) {
  TorchOptions o;
  EXPECT_EQ(TorchAssertClose(F32({2}, {NAN, 1}), F32({2}, {NAN, 1}), o).verdict, Verdict::kFail);
  o.equal_nan = true;
  EXPECT_EQ(TorchAssertClose(F32({2}, {NAN, 1}), F32({2}, {NAN, 1}), o).verdict, Verdict::kPass);
  o.rtol = 0.1;
  o.atol = 0.0;
  EXPECT_EQ(TorchAssertClose(F32({1}, {1.05f}), F32({1}, {1.0f}), o).verdict, Verdict::kPass);
  EXPECT_EQ(TorchAssertClose(F32({1}, {1.2f}), F32({1}, {1.0f}), o).verdict, Verdict::kFail);
  CheckResult inf = TorchAssertClose(F32({1}, {INFINITY}), F32({1}, {INFINITY}), {});
  EXPECT_EQ(inf.verdict, Verdict::kPass);
}

// int64 beyond 2^53: equality and the reported differences are exact int64, as in torch,
// not the nearest doubles (2^53 + 1 and 2^53 are one double).
TEST(Torch, Int64IsComparedExactly) {
  const int64_t big = int64_t{1} << 53;
  CheckResult r = TorchAssertClose(Ints(DType::kInt64, {3}, {5, big + 1, big + 7}),
                                   Ints(DType::kInt64, {3}, {5, big, big}), {});
  ASSERT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.message,
            "Tensor-likes are not equal!\n\nMismatched elements: 2 / 3 (66.7%)\n"
            "Greatest absolute difference: 7 at index (2,)\n"
            // float32(7) / float32(2^53)
            "Greatest relative difference: 7.771561172376096e-16 at index (2,)");
  EXPECT_EQ(r.Find("Max absolute difference")->integer(), 7);
  // Differences beyond 2^53 are printed to the unit.
  const int64_t t0 = 1763900000123456789;  // a nanosecond timestamp
  CheckResult ts = TorchAssertClose(Ints(DType::kInt64, {2}, {t0, -t0}),
                                    Ints(DType::kInt64, {2}, {t0, t0 + 1}), {});
  EXPECT_NE(ts.message.find("Greatest absolute difference: 3527800000246913579 at index (1,)"),
            std::string::npos)
      << ts.message;
  // Through the kernel's int32 blocks and the element path in one tensor: same result as the
  // element path alone.
  std::vector<int64_t> a(3000), b(3000);
  for (int64_t i = 0; i < 3000; ++i) a[i] = b[i] = i * 1000;
  a[10] += 3;                 // in the first block, within int32
  a[2500] = big + 1;          // third block, beyond int32 and 2^53
  b[2500] = big;
  CheckResult mixed = TorchAssertClose(Ints(DType::kInt64, {3000}, a), Ints(DType::kInt64, {3000}, b), {});
  EXPECT_EQ(mixed.Find("Mismatched elements")->integer(), 2);
  EXPECT_NE(mixed.message.find("Greatest absolute difference: 3 at index (10,)"), std::string::npos)
      << mixed.message;
  EXPECT_EQ(TorchIsCloseMismatches(Ints(DType::kInt64, {3000}, a), Ints(DType::kInt64, {3000}, b), 0,
                                   0, false, TorchCompat::kTorch2),
            2);
}

// With a tolerance, isclose casts integers to float32 directly: 2^60 + 2^36 + 1 rounds up to
// 2^60 + 2^37 (through a double it would tie to 2^60 and pass).
TEST(Torch, IntegerToleranceUsesFloat32OfTheInt64) {
  const int64_t base = int64_t{1} << 60;
  TorchOptions o;
  o.rtol = 0.0;
  o.atol = 1e11;
  CheckResult r = TorchAssertClose(Ints(DType::kInt64, {1}, {base + (int64_t{1} << 36) + 1}),
                                   Ints(DType::kInt64, {1}, {base}), o);
  ASSERT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.message,
            "Tensor-likes are not close!\n\nMismatched elements: 1 / 1 (100.0%)\n"
            "Greatest absolute difference: 68719476737 at index (0,) (up to 100000000000.0 allowed)\n"
            "Greatest relative difference: 5.960464477539063e-08 at index (0,) (up to 0.0 allowed)");
  EXPECT_EQ(TorchAssertClose(Ints(DType::kInt64, {1}, {base + (int64_t{1} << 36)}),
                             Ints(DType::kInt64, {1}, {base}), o)
                .verdict,
            Verdict::kPass);  // 2^60 + 2^36 is a tie: float32 rounds it to 2^60
}

// 0-d inputs go through .item(): Python ints (exact, uint64 unsigned), bools print as such.
TEST(Torch, IntegerScalarsArePythonInts) {
  CheckResult u = TorchAssertClose(Ints(DType::kUInt64, {}, {-1}), Ints(DType::kUInt64, {}, {3}), {});
  EXPECT_EQ(u.message,
            "Scalars are not equal!\n\nExpected 3 but got 18446744073709551615.\n"
            "Absolute difference: 18446744073709551612\n"
            "Relative difference: 6.148914691236517e+18");  // 18446744073709551612 / 3 in Python
  EXPECT_FALSE(u.Find("Greatest absolute difference")->is_integer());
  CheckResult big = TorchAssertClose(Ints(DType::kInt64, {}, {(int64_t{1} << 53) + 1}),
                                     Ints(DType::kInt64, {}, {int64_t{1} << 53}), {});
  EXPECT_EQ(big.message,
            "Scalars are not equal!\n\nExpected 9007199254740992 but got 9007199254740993.\n"
            "Absolute difference: 1\nRelative difference: 1.1102230246251565e-16");
  CheckResult b = TorchAssertClose(Ints(DType::kBool, {}, {0}), Ints(DType::kBool, {}, {1}), {});
  EXPECT_EQ(b.message,
            "Scalars are not equal!\n\nExpected True but got False.\n"
            "Absolute difference: 1\nRelative difference: 1.0");
}

// Without check_dtype, integers meet floats after promotion: int32 16777217 becomes float32
// 16777216 and equals it; the scalar message shows the promoted (float) values.
TEST(Torch, MixedIntegerAndFloatArePromotedFirst) {
  TorchOptions o;
  o.check_dtype = false;
  TorchOptions exact = o;  // equality only: the rounding of the int32 alone decides
  exact.rtol = 0.0;
  exact.atol = 0.0;
  EXPECT_EQ(TorchAssertClose(I32({2}, {16777217, 5}), F32({2}, {16777216.0f, 5.0f}), exact).verdict,
            Verdict::kPass);
  EXPECT_EQ(TorchAssertClose(I32({1}, {16777219}), F32({1}, {16777216.0f}), exact).verdict,
            Verdict::kFail);  // 16777219 rounds to 16777220
  CheckResult s = TorchAssertClose(I32({}, {3}), F32({}, {2.0f}), o);
  EXPECT_EQ(s.message,
            "Scalars are not close!\n\nExpected 2.0 but got 3.0.\n"
            "Absolute difference: 1.0 (up to 1e-05 allowed)\n"
            "Relative difference: 0.5 (up to 1.3e-06 allowed)");
}

TEST(Forge, VerifyConfigSwitches) {
  ForgeOptions off;
  off.enabled = false;
  EXPECT_EQ(ForgeCheck(F32({2}, {1, 2}), F32({2}, {5, 6}), off).verdict, Verdict::kSkipped);
  CheckResult dt = ForgeCheck(F32({2}, {1, 2}), I32({2}, {1, 2}), {});
  EXPECT_EQ(dt.verdict, Verdict::kFail);
  EXPECT_EQ(dt.message, "Dtype mismatch: framework_model.dtype=torch.float32, compiled_model.dtype=torch.int32");
  CheckResult sh = ForgeCheck(F32({2}, {1, 2}), F32({1, 2}, {1, 2}), {});
  EXPECT_EQ(sh.message,
            "Shape mismatch: framework_model.shape=torch.Size([2]), compiled_model.shape=torch.Size([1, 2])");
  ForgeOptions no_values;
  no_values.verify_values = false;
  EXPECT_EQ(ForgeCheck(F32({2}, {1, 2}), F32({2}, {5, 6}), no_values).verdict, Verdict::kSkipped);
}

TEST(Forge, AllCloseAndFullCheckers) {
  ForgeOptions ac;
  ac.checker = ForgeChecker::kAllClose;
  CheckResult ints = ForgeCheck(I32({2}, {1, 2}), I32({2}, {1, 2}), ac);
  EXPECT_EQ(ints.verdict, Verdict::kError);
  EXPECT_EQ(ints.message, "AssertionError: all_close doesn't make sense for integer/bool types");
  CheckResult f = ForgeCheck(F32({2}, {1, 2}), F32({2}, {1, 2.5f}), ac);
  EXPECT_EQ(f.verdict, Verdict::kFail);
  EXPECT_EQ(f.message.rfind("Data mismatch -> AllCloseValueChecker (all_close):\n- Tensor mismatch. "
                            "Required rtol=1e-05, atol=1e-08\n- Observed maximum relative diff: 0.20000000298023224, "
                            "maximum absolute diff: 0.5", 0), 0u) << f.message;
  CheckResult nan = ForgeCheck(F32({2}, {NAN, 2}), F32({2}, {NAN, 2}), ac);
  EXPECT_EQ(nan.verdict, Verdict::kError);
  EXPECT_EQ(nan.message, "RuntimeError: TT_ASSERT: Tensor a contains NaN/Inf values");
  ForgeOptions full;
  full.checker = ForgeChecker::kFull;
  // PCC passes (perfectly correlated) but all_close fails: Full catches the scale error.
  CheckResult scaled = ForgeCheck(F32({3}, {1, 2, 3}), F32({3}, {2, 4, 6}), full);
  EXPECT_EQ(scaled.verdict, Verdict::kFail);
  EXPECT_NE(scaled.message.find("FullChecker (all_close)"), std::string::npos);
  EXPECT_EQ(ForgeCheck(F32({3}, {1, 2, 3}), F32({3}, {2, 4, 6}), {}).verdict, Verdict::kPass);
}

TEST(Config, ParsesAndRejectsPreciselyNamedKeys) {
  auto c = ParseCompareConfig(*ParseJson(R"({
    "policy": "forge", "forge": {"pcc": 0.95},
    "torch": {"rtol": 0.001, "atol": 0.001, "compat": "1.13"},
    "match": {"fuzzy": true, "mapping": {"a": "b"}},
    "overrides": [{"op": "Functional.softmax.*", "policy": "torch", "torch": {"rtol": 0.1, "atol": 0.1}},
                  {"op_type": "layer_norm", "forge": {"pcc": 0.5}}]})"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->base.kind, PolicyKind::kForge);
  EXPECT_EQ(c->base.forge.pcc, 0.95);
  EXPECT_TRUE(c->fuzzy_match);
  const PolicyConfig& sm = c->PolicyFor("Functional.softmax.0.forward.output.0", "Functional.softmax.0.forward", "softmax");
  EXPECT_EQ(sm.kind, PolicyKind::kTorch);
  EXPECT_EQ(*sm.torch.rtol, 0.1);
  EXPECT_EQ(sm.torch.compat, TorchCompat::kTorch113);  // inherited from the base section
  const PolicyConfig& ln = c->PolicyFor("x", "Functional.layer_norm.0.forward", "layer_norm");
  EXPECT_EQ(ln.kind, PolicyKind::kForge);
  EXPECT_EQ(ln.forge.pcc, 0.5);
  EXPECT_EQ(c->PolicyFor("y", "Functional.relu.0.forward", "relu").forge.pcc, 0.95);

  struct Bad {
    const char* json;
    const char* needle;
  } bad[] = {
      {R"({"polcy": "x"})", "config polcy: unknown key"},
      {R"({"policy": "numpy"})", "must be msprobe, forge or torch"},
      {R"({"forge": {"pcc": -1}})", "forge.pcc: must be >= 0"},
      {R"({"forge": {"checker": "fast"}})", "forge.checker: must be automatic, allclose or full"},
      {R"({"torch": {"rtol": 0.1}})", "rtol and atol must be given together"},
      {R"({"torch": {"compat": "3"}})", "torch.compat"},
      {R"({"overrides": [{"policy": "torch"}]})", "overrides[0]: needs \"op\" or \"op_type\""},
      {R"({"overrides": [{"op": "x", "color": 1}]})", "overrides[0].color: unknown key"},
      {R"({"msprobe": {"cos_threshold": "high"}})", "msprobe.cos_threshold: must be a number"},
      {R"({"default": {"cosine": 2}})",
       "config default: unknown key (the document takes policy, msprobe, forge, torch, match, "
       "overrides)"},
      {R"({"msprobe": {"cosine": 0.9}})",
       "msprobe.cosine: unknown key (msprobe takes cos_threshold"},
      {R"({"torch": {"tol": 0.1}})", "torch.tol: unknown key (torch takes rtol, atol"},
      {R"({"forge": {"pc": 0.9}})", "forge.pc: unknown key (forge takes checker, pcc"},
      {R"({"match": {"fuzz": true}})", "match.fuzz: unknown key (match takes fuzzy, mapping)"},
  };
  for (const Bad& b : bad) {
    auto r = ParseCompareConfig(*ParseJson(b.json));
    ASSERT_FALSE(r.ok()) << b.json;
    EXPECT_NE(r.status().message().find(b.needle), std::string::npos) << r.status();
  }
}

TEST(Engine, StatisticsDumpWithDataPolicyIsAnError) {
  DumpItem t;
  t.name = "x";
  t.max = Json::Number(1);
  PolicyConfig p;
  p.kind = PolicyKind::kTorch;
  CheckResult r = CompareItems(&t, &t, DumpMode::kStatistics, p, "");
  EXPECT_EQ(r.verdict, Verdict::kError);
  EXPECT_NE(r.message.find("needs tensor data"), std::string::npos);
  CheckResult u = CompareItems(&t, nullptr, DumpMode::kTensor, p, "no golden item named 'x'");
  EXPECT_EQ(u.verdict, Verdict::kUnmatched);
  EXPECT_EQ(u.message, "No bench data matched. (no golden item named 'x')");
  CheckResult missing = CompareItems(nullptr, &t, DumpMode::kTensor, p, "no target item with this name");
  EXPECT_EQ(missing.verdict, Verdict::kUnmatched);
  EXPECT_EQ(missing.message, "No target data matched. (no target item with this name)");
}

// Large .npy pairs are compared from pieces of the files, never loaded whole: every pair gives
// what the loaded pair gives (bit for bit), and the pairs that piece-wise reading does not cover
// (other dtypes, shapes, byte order, Fortran order, inf/nan, a file cut short after the listing)
// still give the loaded path's result and messages.
TEST(Engine, NpyFilesReadInPiecesGiveTheLoadedPairsResult) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "parity_npy_pieces";
  fs::remove_all(dir);
  fs::create_directories(dir / "golden");
  fs::create_directories(dir / "target");
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  // A pair of float32 tensors of `n` values (the target noisy), each converted to `t` if asked.
  auto write = [&](const std::string& name, DType gt, Shape gs, DType tt, Shape ts, int64_t n,
                   const std::string& from = "", const std::string& to = "") {
    std::vector<double> g(n), t(n);
    for (int64_t i = 0; i < n; ++i) {
      g[i] = dist(rng);
      t[i] = g[i] + 1e-3 * dist(rng);
    }
    auto encode = [&](const std::vector<double>& v, DType d, const Shape& shape) {
      std::string bytes(n * DTypeSize(d), '\0');
      for (int64_t i = 0; i < n; ++i) {
        if (d == DType::kFloat64) {
          std::memcpy(&bytes[8 * i], &v[i], 8);
        } else if (d == DType::kInt64) {
          const int64_t x = static_cast<int64_t>(v[i] * 1000);
          std::memcpy(&bytes[8 * i], &x, 8);
        } else {
          const float f = static_cast<float>(v[i]);
          if (d == DType::kFloat32) std::memcpy(&bytes[4 * i], &f, 4);
          const uint16_t h = FloatToHalf(f);
          if (d == DType::kFloat16) std::memcpy(&bytes[2 * i], &h, 2);
        }
      }
      std::string file = EncodeNpy(*Tensor::Make(d, shape, std::move(bytes)));
      if (!from.empty()) file = absl::StrReplaceAll(file, {{from, to}});
      return file;
    };
    ASSERT_TRUE(WriteStringToFile((dir / "golden" / (name + ".npy")).string(), encode(g, gt, gs)).ok());
    ASSERT_TRUE(WriteStringToFile((dir / "target" / (name + ".npy")).string(), encode(t, tt, ts)).ok());
  };
  const int64_t big = (int64_t{1} << 20) + 4099;  // two chunks, the second partial
  write("big", DType::kFloat32, {big}, DType::kFloat32, {big}, big);
  write("matrix", DType::kFloat32, {600, 700}, DType::kFloat32, {600, 700}, 420000);
  write("half", DType::kFloat16, {300001}, DType::kFloat16, {300001}, 300001);
  write("int64", DType::kInt64, {70000}, DType::kInt64, {70000}, 70000);
  write("small", DType::kFloat32, {100}, DType::kFloat32, {100}, 100);
  write("dtype", DType::kFloat64, {70000}, DType::kFloat32, {70000}, 70000);
  // Mixed pairs the vectorised kernel takes: an fp16 port's (two chunks), and the reverse.
  write("fp16_target", DType::kFloat32, {big}, DType::kFloat16, {big}, big);
  write("fp16_golden", DType::kFloat16, {70000}, DType::kFloat32, {70000}, 70000);
  write("shape", DType::kFloat32, {700, 600}, DType::kFloat32, {600, 700}, 420000);
  write("fortran", DType::kFloat32, {600, 700}, DType::kFloat32, {600, 700}, 420000,
        "'fortran_order': False", "'fortran_order': True ");
  write("swapped", DType::kFloat32, {70000}, DType::kFloat32, {70000}, 70000, "'<f4'", "'>f4'");
  write("inf", DType::kFloat32, {70000}, DType::kFloat32, {70000}, 70000);
  for (const char* side : {"golden", "target"}) {  // inf at the same place on both sides
    const std::string path = (dir / side / "inf.npy").string();
    std::string file = *ReadFileToString(path);
    const float inf = std::numeric_limits<float>::infinity();
    std::memcpy(&file[file.size() - 4 * 1000], &inf, 4);
    ASSERT_TRUE(WriteStringToFile(path, file).ok());
  }
  // Nothing kept by the listing: every pair is read from its files when compared.
  absl::StatusOr<Dump> golden = OpenDump((dir / "golden").string(), /*keep_budget_bytes=*/0);
  absl::StatusOr<Dump> target = OpenDump((dir / "target").string(), 0);
  ASSERT_TRUE(golden.ok()) << golden.status();
  ASSERT_TRUE(target.ok()) << target.status();
  ASSERT_EQ(golden->items.size(), 12u);
  PolicyConfig msprobe;
  auto loaded = [&](const DumpItem& t, const DumpItem& g) {
    absl::StatusOr<Tensor> tt = LoadItemTensor(t);
    absl::StatusOr<Tensor> gt = LoadItemTensor(g);
    EXPECT_TRUE(tt.ok() && gt.ok()) << t.name;
    return MsprobeCompareReal(*tt, *gt, msprobe.msprobe).ToJson().Dump();
  };
  std::map<std::string, std::string> got;
  for (size_t i = 0; i < golden->items.size(); ++i) {
    const DumpItem& g = golden->items[i];
    const DumpItem& t = target->items[i];
    ASSERT_EQ(g.name, t.name);
    ASSERT_EQ(t.npy_file.owner, nullptr);
    got[t.name] = CompareItems(&t, &g, DumpMode::kTensor, msprobe, "").ToJson().Dump();
    EXPECT_EQ(got[t.name], loaded(t, g)) << t.name;
  }
  // What the loaded path says about the pairs pieces do not cover.
  EXPECT_NE(got["dtype"].find("Dtype of NPU and bench tensor do not match."), std::string::npos);
  EXPECT_NE(got["fp16_target"].find("Dtype of NPU and bench tensor do not match."), std::string::npos);
  EXPECT_NE(got["shape"].find("shape unmatched"), std::string::npos);
  EXPECT_NE(got["inf"].find("\"PASS\""), std::string::npos) << got["inf"];
  EXPECT_NE(got["big"].find("\"PASS\""), std::string::npos) << got["big"];

  // A file cut short after the listing: the read error, as when the pair is loaded.
  const DumpItem& g = golden->items[0];
  ASSERT_EQ(g.name, "big");
  fs::resize_file(g.data_path, fs::file_size(g.data_path) - 4);
  CheckResult cut = CompareItems(&target->items[0], &g, DumpMode::kTensor, msprobe, "");
  EXPECT_EQ(cut.verdict, Verdict::kError);
  EXPECT_EQ(cut.message.rfind("Dump file: big.npy not found or read failed. (", 0), 0u) << cut.message;
  EXPECT_NE(cut.message.find("data bytes follow"), std::string::npos) << cut.message;
  fs::remove_all(dir);
}

TEST(Engine, DifferentModesCannotBeCompared) {
  Dump a, b;
  a.mode = DumpMode::kTensor;
  b.mode = DumpMode::kStatistics;
  auto r = CompareDumps(&a, &b, CompareConfig());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("different modes"), std::string::npos);
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

TEST(Culprit, FirstFailingOpWithPassingInputsIsTheCulprit) {
  using V = Verdict;
  std::vector<CulpritInput> items = {
      {"a", Role::kInput, V::kPass},     {"a", Role::kOutput, V::kPass},
      {"b", Role::kInput, V::kPass},     {"b", Role::kParameter, V::kUnmatched},
      {"b", Role::kOutput, V::kFail},    {"c", Role::kInput, V::kFail},
      {"c", Role::kOutput, V::kError},   {"d", Role::kInput, V::kFail},
      {"d", Role::kOutput, V::kPass},    {"e", Role::kInput, V::kPass},
      {"e", Role::kOutput, V::kFail},    {"f", Role::kInput, V::kPass},
      {"f", Role::kOutput, V::kError},   {"g", Role::kInput, V::kError},
      {"g", Role::kOutput, V::kFail},
  };
  std::vector<OpAnalysis> ops = AnalyzeCulprits(items);
  ASSERT_EQ(ops.size(), 7u);
  EXPECT_EQ(ops[0].status, OpStatus::kNone);
  EXPECT_EQ(ops[1].status, OpStatus::kCulprit);      // unmatched parameter does not count
  EXPECT_EQ(ops[2].status, OpStatus::kNone);         // failing input, an output that could not be read
  EXPECT_EQ(ops[3].status, OpStatus::kNone);         // failing input, passing output
  EXPECT_EQ(ops[4].status, OpStatus::kCulprit);      // a second, independent culprit
  // An unreadable file (ERROR) is no precision failure: not a culprit, and an ERROR input does
  // not make a failing output a consequence.
  EXPECT_EQ(ops[5].status, OpStatus::kNone);
  EXPECT_EQ(ops[6].status, OpStatus::kCulprit);
  // Of three culprits, the first in dump order is the one summaries report.
  EXPECT_EQ(FirstCulprit(ops), ops[1].api);
  EXPECT_EQ(FirstCulprit({{"a", OpStatus::kPropagated}, {"b", OpStatus::kNone}}), "");
}

TEST(Culprit, EachItemIsMappedToItsOperatorWhereverItAppears) {
  using V = Verdict;
  // "a" comes back after "b": its items share one entry, found again by name.
  std::vector<CulpritInput> items = {
      {"a", Role::kInput, V::kPass}, {"b", Role::kInput, V::kPass}, {"b", Role::kOutput, V::kFail},
      {"a", Role::kOutput, V::kFail}, {"c", Role::kOutput, V::kPass}, {"a", Role::kInput, V::kFail},
  };
  std::vector<size_t> op_of_item = {99};  // replaced, not appended to
  std::vector<OpAnalysis> ops = AnalyzeCulprits(items, &op_of_item);
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].api, "a");
  EXPECT_EQ(ops[1].api, "b");
  EXPECT_EQ(ops[2].api, "c");
  EXPECT_EQ(op_of_item, (std::vector<size_t>{0, 1, 1, 0, 2, 0}));
  EXPECT_EQ(ops[0].status, OpStatus::kPropagated);  // its late failing input counts
  EXPECT_EQ(ops[1].status, OpStatus::kCulprit);
  EXPECT_EQ(ops[2].status, OpStatus::kNone);
}

}  // namespace
}  // namespace parity
