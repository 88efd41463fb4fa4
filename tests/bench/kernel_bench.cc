// Google Benchmark for the per-tensor checkers: every policy, per dtype, sizes 1 Ki to 16 Mi
// elements (up to 256 Mi with --benchmark_filter and PARITY_BENCH_MAX_LOG2=28).
//
// Items are element pairs. BM_ReadBoth is the memory ceiling (a plain read of both arrays).
// Every run also measures BM_Baseline, one fused pass over two fp32
// arrays accumulating a.b, a.a and b.b in double (what a bandwidth-bound kernel does), and after
// the table prints each checker's throughput as a ratio to the baseline of the same size, taken in
// this same invocation, so that machine noise cancels out.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "common/base/crc32.h"
#include "common/base/float_formats.h"
#include "common/checks/forge_kernel.h"
#include "common/checks/forge_policy.h"
#include "common/checks/msprobe_policy.h"
#include "common/checks/stats.h"
#include "common/base/tensor.h"
#include "common/checks/torch_kernel.h"
#include "common/checks/torch_policy.h"

namespace parity {
namespace {

// A golden tensor of n normal values and a target with small noise, in `dtype`.
std::pair<Tensor, Tensor> MakePair(DType dtype, int64_t n) {
  std::mt19937_64 rng(42);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::string a(n * DTypeSize(dtype), '\0'), b(n * DTypeSize(dtype), '\0');
  for (int64_t i = 0; i < n; ++i) {
    float x = dist(rng), y = x + 1e-3f * dist(rng);
    switch (dtype) {
      case DType::kFloat32:
        std::memcpy(&a[i * 4], &x, 4);
        std::memcpy(&b[i * 4], &y, 4);
        break;
      case DType::kFloat16: {
        uint16_t hx = FloatToHalf(x), hy = FloatToHalf(y);
        std::memcpy(&a[i * 2], &hx, 2);
        std::memcpy(&b[i * 2], &hy, 2);
        break;
      }
      case DType::kBFloat16: {
        uint16_t hx = FloatToBFloat16(x), hy = FloatToBFloat16(y);
        std::memcpy(&a[i * 2], &hx, 2);
        std::memcpy(&b[i * 2], &hy, 2);
        break;
      }
      case DType::kFloat64: {
        const double dx = x, dy = dx + 1e-6 * static_cast<double>(dist(rng));
        std::memcpy(&a[i * 8], &dx, 8);
        std::memcpy(&b[i * 8], &dy, 8);
        break;
      }
      case DType::kInt32: {
        int32_t ix = static_cast<int32_t>(x * 1000), iy = ix + (i % 97 == 0 ? 1 : 0);
        std::memcpy(&a[i * 4], &ix, 4);
        std::memcpy(&b[i * 4], &iy, 4);
        break;
      }
      case DType::kInt64: {
        int64_t ix = static_cast<int64_t>(x * 1000), iy = ix + (i % 97 == 0 ? 1 : 0);
        std::memcpy(&a[i * 8], &ix, 8);
        std::memcpy(&b[i * 8], &iy, 8);
        break;
      }
      case DType::kUInt16: {
        const uint16_t ix = static_cast<uint16_t>(std::min(std::fabs(x) * 1000, 65535.0f));
        const uint16_t iy = static_cast<uint16_t>(ix + (i % 97 == 0 ? 1 : 0));
        std::memcpy(&a[i * 2], &ix, 2);
        std::memcpy(&b[i * 2], &iy, 2);
        break;
      }
      case DType::kUInt32: {  // up to 2^32 (a third of the values have the top bit set)
        const uint32_t ix = static_cast<uint32_t>(std::min(std::fabs(x) * 0x1p31, 0x1p32 - 256)),
                       iy = ix + (i % 97 == 0 ? 1 : 0);
        std::memcpy(&a[i * 4], &ix, 4);
        std::memcpy(&b[i * 4], &iy, 4);
        break;
      }
      case DType::kUInt64: {  // up to 2^64: the cast to float64 rounds
        const uint64_t ix = static_cast<uint64_t>(std::min(std::fabs(static_cast<double>(x)) * 0x1p63, 0x1p64 - 4096)),
                       iy = ix + (i % 97 == 0 ? 1 << 20 : 0);
        std::memcpy(&a[i * 8], &ix, 8);
        std::memcpy(&b[i * 8], &iy, 8);
        break;
      }
      case DType::kBool: {
        a[i] = x > 0 ? 1 : 0;
        b[i] = i % 97 == 0 ? 1 - a[i] : a[i];
        break;
      }
      case DType::kFloat8E4M3FN:
      case DType::kFloat8E5M2: {  // finite bytes, one in 97 a step away
        const int top = dtype == DType::kFloat8E5M2 ? 0x7b : 0x7e;
        const int v = static_cast<int>(rng() % static_cast<uint64_t>(top + 1)), sign = x < 0 ? 0x80 : 0;
        a[i] = static_cast<char>(v | sign);
        b[i] = static_cast<char>((i % 97 == 0 ? std::min(top, v + 1) : v) | sign);
        break;
      }
      default:
        std::abort();
    }
  }
  auto ta = Tensor::Make(dtype, {n}, std::move(a));
  auto tb = Tensor::Make(dtype, {n}, std::move(b));
  if (!ta.ok() || !tb.ok()) std::abort();
  return {*std::move(ta), *std::move(tb)};
}

const std::pair<Tensor, Tensor>& CachedPair(DType dtype, int64_t n) {
  static auto* cache = new std::map<std::pair<int, int64_t>, std::pair<Tensor, Tensor>>();
  auto key = std::make_pair(static_cast<int>(dtype), n);
  auto it = cache->find(key);
  if (it == cache->end()) {
    cache->clear();  // one size at a time: 16 Mi fp32 pairs are 128 MiB
    it = cache->emplace(key, MakePair(dtype, n)).first;
  }
  return it->second;
}

void BM_Baseline(benchmark::State& state) {
  const auto& [a, b] = CachedPair(DType::kFloat32, state.range(0));
  const float* x = reinterpret_cast<const float*>(a.data());
  const float* y = reinterpret_cast<const float*>(b.data());
  const int64_t n = a.numel();
  for (auto _ : state) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < n; ++i) {
      ab += static_cast<double>(x[i]) * y[i];
      aa += static_cast<double>(x[i]) * x[i];
      bb += static_cast<double>(y[i]) * y[i];
    }
    benchmark::DoNotOptimize(ab + aa + bb);
  }
  state.SetItemsProcessed(state.iterations() * n);
}

// The memory ceiling: a plain read of both fp32 arrays (an AVX2 xor-and-add of their bits, about
// a cycle per eight pairs), no arithmetic worth the name. A checker near this rate is bound by
// memory, one well below it by its own work. Scalar where AVX2 is missing.
__attribute__((target("avx2"))) uint32_t ReadBothAvx2(const uint32_t* x, const uint32_t* y, int64_t n) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_add_epi32(s0, _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)),
                                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + i))));
    s1 = _mm256_add_epi32(s1, _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 8)),
                                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + i + 8))));
  }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi32(s0, s1));
  uint32_t sum = 0;
  for (uint32_t v : lanes) sum += v;
  for (; i < n; ++i) sum += x[i] ^ y[i];
  return sum;
}

void BM_ReadBoth(benchmark::State& state) {
  const auto& [a, b] = CachedPair(DType::kFloat32, state.range(0));
  const uint32_t* x = reinterpret_cast<const uint32_t*>(a.data());
  const uint32_t* y = reinterpret_cast<const uint32_t*>(b.data());
  const int64_t n = a.numel();
  const bool avx2 = __builtin_cpu_supports("avx2");
  for (auto _ : state) {
    uint32_t sum = 0;
    if (avx2) {
      sum = ReadBothAvx2(x, y, n);
    } else {
      for (int64_t i = 0; i < n; ++i) sum += x[i] ^ y[i];
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations() * n);
}

// Times fn(golden, target) on the cached pair of kDType; items are element pairs.
template <DType kDType, typename Fn>
void TimePair(benchmark::State& state, Fn fn) {
  const auto& [golden, target] = CachedPair(kDType, state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(fn(golden, target));
  state.SetItemsProcessed(state.iterations() * golden.numel());
}

template <DType kDType>
void BM_Msprobe(benchmark::State& state) {
  TimePair<kDType>(state, [](const Tensor& g, const Tensor& t) {
    return MsprobeCompareReal(t, g, MsprobeOptions());
  });
}

// One pair of a kind at a time, of the last size asked for: make(n) builds it.
template <typename Make>
const std::pair<Tensor, Tensor>& OneSizeCache(std::map<int64_t, std::pair<Tensor, Tensor>>* cache, int64_t n,
                                              Make make) {
  auto it = cache->find(n);
  if (it == cache->end()) {
    cache->clear();
    it = cache->emplace(n, make(n)).first;
  }
  return it->second;
}

// Two tensors from their dtype, length and bytes (aborts on a mismatch: a bug here).
std::pair<Tensor, Tensor> PairOf(DType ta, DType tb, int64_t n, std::string a, std::string b) {
  auto x = Tensor::Make(ta, {n}, std::move(a));
  auto y = Tensor::Make(tb, {n}, std::move(b));
  if (!x.ok() || !y.ok()) std::abort();
  return std::make_pair(*std::move(x), *std::move(y));
}

// A float32 golden tensor and its target narrowed to `t` (bfloat16 or float16: a model and its
// bf16 or fp16 port): the cached float32 pair with the target rounded to `t`.
const std::pair<Tensor, Tensor>& NarrowTargetPair(DType t, int64_t n) {
  static auto* bf16 = new std::map<int64_t, std::pair<Tensor, Tensor>>();
  static auto* f16 = new std::map<int64_t, std::pair<Tensor, Tensor>>();
  return OneSizeCache(t == DType::kFloat16 ? f16 : bf16, n, [t](int64_t n) {
    const auto& [golden, target] = CachedPair(DType::kFloat32, n);
    std::string b(static_cast<size_t>(n) * 2, '\0');
    for (int64_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, target.data() + 4 * i, 4);
      const uint16_t h = t == DType::kFloat16 ? FloatToHalf(f) : FloatToBFloat16(f);
      std::memcpy(&b[static_cast<size_t>(i) * 2], &h, 2);
    }
    return PairOf(DType::kFloat32, t, n, std::string(golden.bytes()), std::move(b));
  });
}

// A float64 golden tensor and its target as float32: the cached float64 pair with the target
// rounded to float32.
const std::pair<Tensor, Tensor>& Fp32TargetOfFp64Pair(int64_t n) {
  static auto* cache = new std::map<int64_t, std::pair<Tensor, Tensor>>();
  return OneSizeCache(cache, n, [](int64_t n) {
    const auto& [golden, target] = CachedPair(DType::kFloat64, n);
    std::string b(static_cast<size_t>(n) * 4, '\0');
    for (int64_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, target.data() + 8 * i, 8);
      const float f = static_cast<float>(d);
      std::memcpy(&b[static_cast<size_t>(i) * 4], &f, 4);
    }
    return PairOf(DType::kFloat64, DType::kFloat32, n, std::string(golden.bytes()), std::move(b));
  });
}

// The float32 pair with NaN at the same places on both sides, one element in 997 (an op that
// masks with NaN): msprobe zeroes them.
template <DType kT = DType::kFloat32>
const std::pair<Tensor, Tensor>& NanPair(int64_t n) {
  static_assert(kT == DType::kFloat32 || kT == DType::kFloat64, "float32 or float64");
  using Value = std::conditional_t<kT == DType::kFloat32, float, double>;
  static auto* cache = new std::map<int64_t, std::pair<Tensor, Tensor>>();
  return OneSizeCache(cache, n, [](int64_t n) {
    const auto& [golden, target] = CachedPair(kT, n);
    std::string g(golden.bytes()), t(target.bytes());
    const Value nan = std::numeric_limits<Value>::quiet_NaN();
    for (int64_t i = 0; i < n; i += 997) {
      std::memcpy(&g[static_cast<size_t>(i) * sizeof(Value)], &nan, sizeof(Value));
      std::memcpy(&t[static_cast<size_t>(i) * sizeof(Value)], &nan, sizeof(Value));
    }
    return PairOf(kT, kT, n, std::move(g), std::move(t));
  });
}

// The float16 pair with -inf at the same places on both sides, one element in 997 (attention
// scores under a mask): msprobe zeroes them.
const std::pair<Tensor, Tensor>& Fp16MaskedPair(int64_t n) {
  static auto* cache = new std::map<int64_t, std::pair<Tensor, Tensor>>();
  return OneSizeCache(cache, n, [](int64_t n) {
    const auto& [golden, target] = CachedPair(DType::kFloat16, n);
    std::string g(golden.bytes()), t(target.bytes());
    const uint16_t minus_inf = 0xfc00;
    for (int64_t i = 0; i < n; i += 997) {
      std::memcpy(&g[static_cast<size_t>(i) * 2], &minus_inf, 2);
      std::memcpy(&t[static_cast<size_t>(i) * 2], &minus_inf, 2);
    }
    return PairOf(DType::kFloat16, DType::kFloat16, n, std::move(g), std::move(t));
  });
}

// msprobe on a cached pair: the vectorised kernel (kGeneral false), or the general path (the
// ratio's baseline).
template <bool kGeneral>
void MsprobeFastOrGeneral(benchmark::State& state, const std::pair<Tensor, Tensor>& pair) {
  const auto& [golden, target] = pair;
  for (auto _ : state) {
    benchmark::DoNotOptimize(kGeneral ? MsprobeCompareRealGeneral(target, golden, MsprobeOptions())
                                      : MsprobeCompareReal(target, golden, MsprobeOptions()));
  }
  state.SetItemsProcessed(state.iterations() * golden.numel());
}

// float32 golden against bfloat16 target: the kernel on widened blocks, or the general path.
template <bool kGeneral>
void BM_MsprobeFp32VsBf16(benchmark::State& state) {
  MsprobeFastOrGeneral<kGeneral>(state, NarrowTargetPair(DType::kBFloat16, state.range(0)));
}

// float32 golden against float16 target: the kernel on widened blocks, or the general path.
template <bool kGeneral>
void BM_MsprobeFp32VsFp16(benchmark::State& state) {
  MsprobeFastOrGeneral<kGeneral>(state, NarrowTargetPair(DType::kFloat16, state.range(0)));
}

// float64 golden against float32 target: the float64 kernel on widened blocks, or the general path.
template <bool kGeneral>
void BM_MsprobeFp64VsFp32(benchmark::State& state) {
  MsprobeFastOrGeneral<kGeneral>(state, Fp32TargetOfFp64Pair(state.range(0)));
}

// float16 with -inf at the same places: the zeroing vectorised pass, or the general path.
template <bool kGeneral>
void BM_MsprobeFp16InfAtTheSamePlaces(benchmark::State& state) {
  MsprobeFastOrGeneral<kGeneral>(state, Fp16MaskedPair(state.range(0)));
}

// NaN at the same places: the zeroing vectorised pass, or the general path.
template <bool kGeneral>
void BM_MsprobeNanAtTheSamePlaces(benchmark::State& state) {
  MsprobeFastOrGeneral<kGeneral>(state, NanPair(state.range(0)));
}

// The same for a float64 pair.
template <bool kGeneral>
void BM_MsprobeFp64NanAtTheSamePlaces(benchmark::State& state) {
  MsprobeFastOrGeneral<kGeneral>(state, NanPair<DType::kFloat64>(state.range(0)));
}

// int64 pairs beyond int32's range (hashed ids, byte offsets): normal values scaled by 2^40,
// every 1,000th near ±2^62 (rounded when cast to float64), one in 97 off by 2^20.
const std::pair<Tensor, Tensor>& WideInt64Pair(int64_t n) {
  static auto* cache = new std::map<int64_t, std::pair<Tensor, Tensor>>();
  return OneSizeCache(cache, n, [](int64_t n) {
    std::mt19937_64 rng(43);
    std::normal_distribution<double> dist(0.0, 1.0);
    std::string a(n * 8, '\0'), b(n * 8, '\0');
    for (int64_t i = 0; i < n; ++i) {
      const double scale = i % 1000 == 0 ? 0x1p61 : 0x1p40;
      const int64_t x = static_cast<int64_t>(dist(rng) * scale);
      const int64_t y = x + (i % 97 == 0 ? int64_t{1} << 20 : 0);
      std::memcpy(&a[i * 8], &x, 8);
      std::memcpy(&b[i * 8], &y, 8);
    }
    return PairOf(DType::kInt64, DType::kInt64, n, std::move(a), std::move(b));
  });
}

void BM_MsprobeInt64Wide(benchmark::State& state) {
  const auto& [golden, target] = WideInt64Pair(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(MsprobeCompareReal(target, golden, MsprobeOptions()));
  state.SetItemsProcessed(state.iterations() * golden.numel());
}

// Forge on the same pairs; with kElementwise, the element-by-element path.
template <bool kElementwise>
void BM_ForgeInt64Wide(benchmark::State& state) {
  const auto& [golden, target] = WideInt64Pair(state.range(0));
  SetForgeKernelEnabled(!kElementwise);
  for (auto _ : state) benchmark::DoNotOptimize(ForgeCheck(golden, target, ForgeOptions()));
  SetForgeKernelEnabled(true);
  state.SetItemsProcessed(state.iterations() * golden.numel());
}

// The torch policy (exact int64 differences) on the same pairs; with kElementwise, its
// element-by-element path.
template <bool kElementwise>
void BM_TorchInt64Wide(benchmark::State& state) {
  const auto& [golden, target] = WideInt64Pair(state.range(0));
  SetTorchKernelEnabled(!kElementwise);
  for (auto _ : state) benchmark::DoNotOptimize(TorchAssertClose(target, golden, TorchOptions()));
  SetTorchKernelEnabled(true);
  state.SetItemsProcessed(state.iterations() * golden.numel());
}

template <DType kDType>
void BM_Forge(benchmark::State& state) {
  TimePair<kDType>(state, [](const Tensor& g, const Tensor& t) {
    return ForgeCheck(g, t, ForgeOptions());
  });
}

// Forge's "full" checker: PCC and tolerances (as BM_Forge) and verif.all_close.
template <DType kDType>
void BM_ForgeFull(benchmark::State& state) {
  ForgeOptions o;
  o.checker = ForgeChecker::kFull;
  TimePair<kDType>(state, [&](const Tensor& g, const Tensor& t) { return ForgeCheck(g, t, o); });
}

template <DType kDType>
void BM_ForgeFullElementwise(benchmark::State& state) {
  SetForgeKernelEnabled(false);
  BM_ForgeFull<kDType>(state);
  SetForgeKernelEnabled(true);
}

template <DType kDType>
void BM_Torch(benchmark::State& state) {
  TimePair<kDType>(state, [](const Tensor& g, const Tensor& t) {
    return TorchAssertClose(t, g, TorchOptions());
  });
}

// The torch policy's element-by-element path alone (kernel off): the in-run baseline for the
// torch kernel.
template <DType kDType>
void BM_TorchElementwise(benchmark::State& state) {
  SetTorchKernelEnabled(false);
  TimePair<kDType>(state, [](const Tensor& g, const Tensor& t) {
    return TorchAssertClose(t, g, TorchOptions());
  });
  SetTorchKernelEnabled(true);
}

// The torch policy with check_dtype off (and equal_nan as given) on a pair: the kernel (on blocks
// brought to the promoted dtype for two dtypes; on the finite runs of blocks holding NaN or inf)
// when kGeneral is false, or the element path.
template <bool kGeneral>
void TorchMixedPair(benchmark::State& state, const std::pair<Tensor, Tensor>& pair, bool equal_nan = false) {
  const auto& [golden, target] = pair;
  TorchOptions o;
  o.check_dtype = false;
  o.equal_nan = equal_nan;
  SetTorchKernelEnabled(!kGeneral);
  for (auto _ : state) benchmark::DoNotOptimize(TorchAssertClose(target, golden, o));
  SetTorchKernelEnabled(true);
  state.SetItemsProcessed(state.iterations() * golden.numel());
}

// A float32 golden against its bfloat16 target (blocks widened to float32).
template <bool kGeneral>
void BM_TorchFp32VsBf16(benchmark::State& state) {
  TorchMixedPair<kGeneral>(state, NarrowTargetPair(DType::kBFloat16, state.range(0)));
}

// A float32 golden tensor of whole numbers (the cached golden scaled by 1000, rounded) against an
// int32 target holding them, one in 97 off by one (an integer-valued output a port computes in
// int32).
const std::pair<Tensor, Tensor>& Int32TargetPair(int64_t n) {
  static auto* cache = new std::map<int64_t, std::pair<Tensor, Tensor>>();
  return OneSizeCache(cache, n, [](int64_t n) {
    const auto& [golden, target] = CachedPair(DType::kFloat32, n);
    std::string g(static_cast<size_t>(n) * 4, '\0'), t(static_cast<size_t>(n) * 4, '\0');
    for (int64_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, golden.data() + 4 * i, 4);
      const float whole = std::nearbyint(f * 1000.0f);
      const int32_t v = static_cast<int32_t>(whole) + (i % 97 == 0 ? 1 : 0);
      std::memcpy(&g[static_cast<size_t>(i) * 4], &whole, 4);
      std::memcpy(&t[static_cast<size_t>(i) * 4], &v, 4);
    }
    return PairOf(DType::kFloat32, DType::kInt32, n, std::move(g), std::move(t));
  });
}

// The torch policy on that pair (the integers converted to the promoted float32).
template <bool kGeneral>
void BM_TorchFp32VsInt32(benchmark::State& state) {
  TorchMixedPair<kGeneral>(state, Int32TargetPair(state.range(0)));
}

// msprobe on that pair (an int32 NPU side against a float32 bench, compared where no dtype gate
// pairs them apart): the widened float64 pass, or the general path.
template <bool kGeneral>
void BM_MsprobeFp32VsInt32(benchmark::State& state) {
  MsprobeFastOrGeneral<kGeneral>(state, Int32TargetPair(state.range(0)));
}

// NaN at the same places (msprobe's benchmark pair), under the torch policy with equal_nan.
template <bool kGeneral>
void BM_TorchNanAtTheSamePlaces(benchmark::State& state) {
  TorchMixedPair<kGeneral>(state, NanPair(state.range(0)), /*equal_nan=*/true);
}

// float16 with -inf at the same places (masked attention scores), under the torch policy.
template <bool kGeneral>
void BM_TorchFp16InfAtTheSamePlaces(benchmark::State& state) {
  TorchMixedPair<kGeneral>(state, Fp16MaskedPair(state.range(0)));
}

// The forge policy with verify_dtype off on a pair: the masked pass (different dtypes, or NaN/inf:
// numpy's masked corrcoef) when kGeneral is false, or the element path.
template <bool kGeneral>
void ForgeMaskedPair(benchmark::State& state, const std::pair<Tensor, Tensor>& pair) {
  const auto& [golden, target] = pair;
  ForgeOptions o;
  o.verify_dtype = false;
  SetForgeKernelEnabled(!kGeneral);
  for (auto _ : state) benchmark::DoNotOptimize(ForgeCheck(golden, target, o));
  SetForgeKernelEnabled(true);
  state.SetItemsProcessed(state.iterations() * golden.numel());
}

template <bool kGeneral>
void BM_ForgeFp32VsBf16(benchmark::State& state) {
  ForgeMaskedPair<kGeneral>(state, NarrowTargetPair(DType::kBFloat16, state.range(0)));
}

template <bool kGeneral>
void BM_ForgeFp32VsFp16(benchmark::State& state) {
  ForgeMaskedPair<kGeneral>(state, NarrowTargetPair(DType::kFloat16, state.range(0)));
}

template <bool kGeneral>
void BM_ForgeFp64VsFp32(benchmark::State& state) {
  ForgeMaskedPair<kGeneral>(state, Fp32TargetOfFp64Pair(state.range(0)));
}

template <bool kGeneral>
void BM_ForgeFp32VsInt32(benchmark::State& state) {
  ForgeMaskedPair<kGeneral>(state, Int32TargetPair(state.range(0)));
}

template <bool kGeneral>
void BM_ForgeNanAtTheSamePlaces(benchmark::State& state) {
  ForgeMaskedPair<kGeneral>(state, NanPair(state.range(0)));
}

template <bool kGeneral>
void BM_ForgeFp16InfAtTheSamePlaces(benchmark::State& state) {
  ForgeMaskedPair<kGeneral>(state, Fp16MaskedPair(state.range(0)));
}

// The forge policy's element-by-element path alone (fused kernel off): its in-run baseline.
template <DType kDType>
void BM_ForgeElementwise(benchmark::State& state) {
  SetForgeKernelEnabled(false);
  TimePair<kDType>(state, [](const Tensor& g, const Tensor& t) {
    return ForgeCheck(g, t, ForgeOptions());
  });
  SetForgeKernelEnabled(true);
}

template <DType kDType>
void BM_Stats(benchmark::State& state) {
  TimePair<kDType>(state, [](const Tensor&, const Tensor& t) { return ComputeStats(t); });
}

// CRC-32 of the target tensor's bytes (what the agent sends and parityd checks per data item):
// this project's VPCLMULQDQ and PCLMULQDQ folding against zlib's crc32() in the same run.
// Bytes per second.
template <Crc32Impl kImpl>
void BM_Crc32(benchmark::State& state) {
  const auto& [golden, target] = CachedPair(DType::kFloat32, state.range(0));
  (void)golden;
  if (!Crc32Supports(kImpl)) {
    state.SkipWithError("this processor lacks the instructions");
    return;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(Crc32Using(kImpl, 0, target.data(), target.bytes().size()));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(target.bytes().size()));
}

int MaxLog2() {
  const char* v = std::getenv("PARITY_BENCH_MAX_LOG2");
  int m = v ? std::atoi(v) : 24;
  return m < 10 ? 10 : (m > 28 ? 28 : m);
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int l = 10; l <= MaxLog2(); l += 2) b->Arg(int64_t{1} << l);
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Baseline)->Apply(Sizes);
BENCHMARK(BM_ReadBoth)->Apply(Sizes);
BENCHMARK(BM_Msprobe<DType::kFloat32>)->Apply(Sizes);
// The per-tensor cost of a small tensor's check (ingest_bench's items hold 16 values).
BENCHMARK(BM_Msprobe<DType::kFloat32>)->Arg(16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Msprobe<DType::kFloat16>)->Apply(Sizes);
BENCHMARK(BM_Msprobe<DType::kBFloat16>)->Apply(Sizes);
BENCHMARK(BM_MsprobeFp32VsBf16<false>)->Apply(Sizes);
BENCHMARK(BM_MsprobeFp32VsBf16<true>)->Apply(Sizes);
BENCHMARK(BM_MsprobeFp32VsFp16<false>)->Apply(Sizes);
BENCHMARK(BM_MsprobeFp32VsFp16<true>)->Apply(Sizes);
BENCHMARK(BM_MsprobeFp64VsFp32<false>)->Apply(Sizes);
BENCHMARK(BM_MsprobeFp64VsFp32<true>)->Apply(Sizes);
BENCHMARK(BM_MsprobeFp32VsInt32<false>)->Apply(Sizes);
BENCHMARK(BM_MsprobeFp32VsInt32<true>)->Apply(Sizes);
BENCHMARK(BM_MsprobeFp16InfAtTheSamePlaces<false>)->Apply(Sizes);
BENCHMARK(BM_MsprobeFp16InfAtTheSamePlaces<true>)->Apply(Sizes);
BENCHMARK(BM_MsprobeNanAtTheSamePlaces<false>)->Apply(Sizes);
BENCHMARK(BM_MsprobeNanAtTheSamePlaces<true>)->Apply(Sizes);
BENCHMARK(BM_MsprobeFp64NanAtTheSamePlaces<false>)->Apply(Sizes);
BENCHMARK(BM_MsprobeFp64NanAtTheSamePlaces<true>)->Apply(Sizes);
BENCHMARK(BM_TorchNanAtTheSamePlaces<false>)->Apply(Sizes);
BENCHMARK(BM_TorchNanAtTheSamePlaces<true>)->Apply(Sizes);
BENCHMARK(BM_TorchFp16InfAtTheSamePlaces<false>)->Apply(Sizes);
BENCHMARK(BM_TorchFp16InfAtTheSamePlaces<true>)->Apply(Sizes);
BENCHMARK(BM_ForgeFp32VsBf16<false>)->Apply(Sizes);
BENCHMARK(BM_ForgeFp32VsBf16<true>)->Apply(Sizes);
BENCHMARK(BM_ForgeFp32VsFp16<false>)->Apply(Sizes);
BENCHMARK(BM_ForgeFp32VsFp16<true>)->Apply(Sizes);
BENCHMARK(BM_ForgeFp64VsFp32<false>)->Apply(Sizes);
BENCHMARK(BM_ForgeFp64VsFp32<true>)->Apply(Sizes);
BENCHMARK(BM_ForgeFp32VsInt32<false>)->Apply(Sizes);
BENCHMARK(BM_ForgeFp32VsInt32<true>)->Apply(Sizes);
BENCHMARK(BM_ForgeNanAtTheSamePlaces<false>)->Apply(Sizes);
BENCHMARK(BM_ForgeNanAtTheSamePlaces<true>)->Apply(Sizes);
BENCHMARK(BM_ForgeFp16InfAtTheSamePlaces<false>)->Apply(Sizes);
BENCHMARK(BM_ForgeFp16InfAtTheSamePlaces<true>)->Apply(Sizes);
BENCHMARK(BM_Msprobe<DType::kInt32>)->Apply(Sizes);
BENCHMARK(BM_Msprobe<DType::kBool>)->Apply(Sizes);
BENCHMARK(BM_Msprobe<DType::kInt64>)->Apply(Sizes);
BENCHMARK(BM_MsprobeInt64Wide)->Apply(Sizes);
BENCHMARK(BM_Msprobe<DType::kUInt32>)->Apply(Sizes);
BENCHMARK(BM_Msprobe<DType::kUInt64>)->Apply(Sizes);
BENCHMARK(BM_Msprobe<DType::kFloat64>)->Apply(Sizes);
BENCHMARK(BM_Msprobe<DType::kFloat8E4M3FN>)->Apply(Sizes);
BENCHMARK(BM_Msprobe<DType::kFloat8E5M2>)->Apply(Sizes);
BENCHMARK(BM_Forge<DType::kFloat32>)->Apply(Sizes);
BENCHMARK(BM_ForgeElementwise<DType::kFloat32>)->Apply(Sizes);
BENCHMARK(BM_Forge<DType::kFloat16>)->Apply(Sizes);
BENCHMARK(BM_Forge<DType::kBFloat16>)->Apply(Sizes);
BENCHMARK(BM_ForgeElementwise<DType::kBFloat16>)->Apply(Sizes);
BENCHMARK(BM_Forge<DType::kInt32>)->Apply(Sizes);
BENCHMARK(BM_Forge<DType::kInt64>)->Apply(Sizes);
BENCHMARK(BM_ForgeInt64Wide<false>)->Apply(Sizes);
BENCHMARK(BM_ForgeInt64Wide<true>)->Apply(Sizes);
BENCHMARK(BM_TorchInt64Wide<false>)->Apply(Sizes);
BENCHMARK(BM_TorchInt64Wide<true>)->Apply(Sizes);
BENCHMARK(BM_Forge<DType::kBool>)->Apply(Sizes);
BENCHMARK(BM_Forge<DType::kUInt32>)->Apply(Sizes);
BENCHMARK(BM_Forge<DType::kUInt64>)->Apply(Sizes);
BENCHMARK(BM_ForgeFull<DType::kFloat32>)->Apply(Sizes);
BENCHMARK(BM_ForgeFullElementwise<DType::kFloat32>)->Apply(Sizes);
BENCHMARK(BM_Forge<DType::kFloat64>)->Apply(Sizes);
BENCHMARK(BM_ForgeElementwise<DType::kFloat64>)->Apply(Sizes);
BENCHMARK(BM_ForgeFull<DType::kFloat64>)->Apply(Sizes);
BENCHMARK(BM_ForgeFullElementwise<DType::kFloat64>)->Apply(Sizes);
BENCHMARK(BM_Forge<DType::kFloat8E4M3FN>)->Apply(Sizes);
BENCHMARK(BM_ForgeElementwise<DType::kFloat8E4M3FN>)->Apply(Sizes);
BENCHMARK(BM_Forge<DType::kFloat8E5M2>)->Apply(Sizes);
BENCHMARK(BM_ForgeFull<DType::kFloat8E4M3FN>)->Apply(Sizes);
BENCHMARK(BM_Torch<DType::kFloat32>)->Apply(Sizes);
BENCHMARK(BM_TorchElementwise<DType::kFloat32>)->Apply(Sizes);
BENCHMARK(BM_TorchFp32VsBf16<false>)->Apply(Sizes);
BENCHMARK(BM_TorchFp32VsBf16<true>)->Apply(Sizes);
BENCHMARK(BM_TorchFp32VsInt32<false>)->Apply(Sizes);
BENCHMARK(BM_TorchFp32VsInt32<true>)->Apply(Sizes);
BENCHMARK(BM_Torch<DType::kFloat16>)->Apply(Sizes);
BENCHMARK(BM_TorchElementwise<DType::kFloat16>)->Apply(Sizes);
BENCHMARK(BM_Torch<DType::kBFloat16>)->Apply(Sizes);
BENCHMARK(BM_TorchElementwise<DType::kBFloat16>)->Apply(Sizes);
BENCHMARK(BM_Torch<DType::kInt32>)->Apply(Sizes);
BENCHMARK(BM_TorchElementwise<DType::kInt32>)->Apply(Sizes);
BENCHMARK(BM_Torch<DType::kInt64>)->Apply(Sizes);
BENCHMARK(BM_TorchElementwise<DType::kInt64>)->Apply(Sizes);
BENCHMARK(BM_Torch<DType::kFloat64>)->Apply(Sizes);
BENCHMARK(BM_TorchElementwise<DType::kFloat64>)->Apply(Sizes);
BENCHMARK(BM_Torch<DType::kUInt16>)->Apply(Sizes);
BENCHMARK(BM_TorchElementwise<DType::kUInt16>)->Apply(Sizes);
BENCHMARK(BM_Torch<DType::kUInt32>)->Apply(Sizes);
BENCHMARK(BM_TorchElementwise<DType::kUInt32>)->Apply(Sizes);
BENCHMARK(BM_Torch<DType::kUInt64>)->Apply(Sizes);
BENCHMARK(BM_TorchElementwise<DType::kUInt64>)->Apply(Sizes);
BENCHMARK(BM_Torch<DType::kBool>)->Apply(Sizes);
BENCHMARK(BM_TorchElementwise<DType::kBool>)->Apply(Sizes);
BENCHMARK(BM_Torch<DType::kFloat8E4M3FN>)->Apply(Sizes);
BENCHMARK(BM_Torch<DType::kFloat8E5M2>)->Apply(Sizes);
BENCHMARK(BM_TorchElementwise<DType::kFloat8E4M3FN>)->Apply(Sizes);
BENCHMARK(BM_Stats<DType::kFloat32>)->Apply(Sizes);
BENCHMARK(BM_Stats<DType::kBFloat16>)->Apply(Sizes);
BENCHMARK(BM_Crc32<Crc32Impl::kVpclmul>)->Apply(Sizes);
BENCHMARK(BM_Crc32<Crc32Impl::kPclmul>)->Apply(Sizes);
BENCHMARK(BM_Crc32<Crc32Impl::kZlib>)->Apply(Sizes);

// Console output as usual, plus items/s per (benchmark, size) kept for the ratio table.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration) continue;
      auto it = r.counters.find("items_per_second");
      if (it == r.counters.end()) continue;
      std::string name = r.benchmark_name();
      size_t slash = name.rfind('/');
      rates_[std::stoll(name.substr(slash + 1))][name.substr(0, slash)] = it->second.value;
    }
  }
  void PrintRatios() const {
    std::cout << "\nRatio to BM_Baseline (fused fp32 pass, double accumulation), same run:\n";
    for (const auto& [size, by_name] : rates_) {
      auto base = by_name.find("BM_Baseline");
      if (base == by_name.end() || base->second <= 0) continue;
      std::cout << "  n=" << size << "  baseline " << base->second / 1e9 << " G pairs/s\n";
      for (const auto& [name, rate] : by_name) {
        if (name == "BM_Baseline") continue;
        std::cout << "    " << name << ": " << rate / 1e9 << " G pairs/s ("
                  << rate / base->second << "x)\n";
      }
    }
  }

 private:
  std::map<int64_t, std::map<std::string, double>> rates_;
};

}  // namespace
}  // namespace parity

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  parity::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  benchmark::Shutdown();
  return 0;
}
