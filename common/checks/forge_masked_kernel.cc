#include "common/checks/forge_masked_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "common/base/tensor.h"
#include "common/checks/simd.h"

// 64-byte vectors in functions built without AVX-512 (the AVX2 and portable versions): GCC notes
// that their ABI would differ; every such function here is inlined or takes references.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace parity {
namespace {

// Per chunk of kChunk pairs, each side is read in place (float32, float64) or widened exactly into
// a buffer (float16, bfloat16 and fp8 to float32, integers to float64), and the passes run over it
// while it is in cache: pass 1 (flags, maxima, the chunk's sums of the finite pairs), pass 2
// (moments about the chunk's means), and all_close's excess when asked. A chunk without NaN/inf
// takes versions of passes 1 and 2 without masks (the usual case; after a chunk holding some,
// the next goes straight to the masked ones); both give the same bits for such a chunk. The passes
// (forge_masked_passes.inc) are built three times: AVX-512, AVX2 and portable.

using simd::Isa;

constexpr int kLanes = 8;
constexpr int64_t kChunk = kForgeChunk;
constexpr double kInf = std::numeric_limits<double>::infinity();

typedef double D8 __attribute__((vector_size(64)));
typedef int64_t M8 __attribute__((vector_size(64)));  // lane masks: -1 true, 0 false
typedef float F8 __attribute__((vector_size(32)));
typedef uint32_t U8 __attribute__((vector_size(32)));
typedef int32_t N8 __attribute__((vector_size(32)));  // masks of float32 lanes

// The roundings of forge's arithmetic: float64 (none), float32, float16, bfloat16 (each through
// float32, as the element path's RoundTo does).
enum class Round { kF64, kF32, kF16, kBF16 };

Round RoundFor(DType t) {
  switch (t) {
    case DType::kFloat64: return Round::kF64;
    case DType::kFloat16: return Round::kF16;
    case DType::kBFloat16: return Round::kBF16;
    default: return Round::kF32;
  }
}

// calculate_rtol's arithmetic for a golden of dtype t: bfloat16 is upcast to float32.
Round RtolRoundFor(DType t) { return t == DType::kBFloat16 ? Round::kF32 : RoundFor(t); }

// One value rounded by `r` (RoundTo's rounding of one value).
double RoundOnce(Round r, double v) {
  switch (r) {
    case Round::kF64: return v;
    case Round::kF16: return RoundToHalf(static_cast<float>(v));
    case Round::kBF16: return RoundToBFloat16(static_cast<float>(v));
    default: return static_cast<float>(v);
  }
}

inline bool Any(const M8& m) {
  int64_t r = 0;
  for (int j = 0; j < kLanes; ++j) r |= m[j];
  return r != 0;
}

inline double LaneSum(const D8& v) {
  double s = 0;
  for (int j = 0; j < kLanes; ++j) s += v[j];
  return s;
}

// Pass 1's lanes: the chunk's sums of finite pairs and minus their count (reset per chunk), flags,
// maxima. Pass 2's: sums of the deviations from the chunk's means and of their products.
struct Pass1Lanes {
  D8 sg, sc;
  M8 valid;
  M8 special_g, special_c, mismatch, unequal, rel_nan;
  D8 mabs, mrel, mag_g, mag_c;
  F8 mrel32;  // calculate_rtol's maximum when it is float32 arithmetic
  N8 rel_nan32;
};

struct Moments8 {
  D8 dx, dy, aa, ab, bb;
};

// The passes of one instruction set.
struct Kernels {
  void (*init)(Pass1Lanes*);
  // x and y: arrays of float32 or float64, as the Kernels were chosen for.
  void (*pass1)(const void* x, const void* y, int64_t, Pass1Lanes*);
  bool (*pass1_finite)(const void* x, const void* y, int64_t, Pass1Lanes*);  // false: not finite
  void (*pass2)(const void* x, const void* y, int64_t, double, double, Moments8*);
  void (*pass2_finite)(const void* x, const void* y, int64_t, double, double, Moments8*);
  double (*all_close)(const void* x, const void* y, int64_t, double, double);
  void (*int32_to_f64)(const char*, int64_t, double*);
};

// The passes, built once per instruction set: every function in the included file takes its
// target (GCC: `#pragma GCC target`; clang: the same attribute pushed onto each function), so the
// vector code (comparisons as masks) is generated for it throughout.
#if defined(__clang__)
#define PARITY_MASKED_TARGET(isa) \
  _Pragma(PARITY_MASKED_STR(clang attribute push(__attribute__((target(isa))), apply_to = function)))
#define PARITY_MASKED_TARGET_END _Pragma("clang attribute pop")
#else
#define PARITY_MASKED_TARGET(isa) _Pragma("GCC push_options") _Pragma(PARITY_MASKED_STR(GCC target(isa)))
#define PARITY_MASKED_TARGET_END _Pragma("GCC pop_options")
#endif
#define PARITY_MASKED_STR(x) #x

PARITY_MASKED_TARGET("avx512f,avx512dq,avx512bw,avx512vl,avx2,f16c,popcnt")
namespace forge_masked_avx512 {
#define PARITY_MASKED_WIDTH 8
#define PARITY_MASKED_F16C 1
#define PARITY_MASKED_AVX512 1
#include "common/checks/forge_masked_passes.inc"
#undef PARITY_MASKED_AVX512
#undef PARITY_MASKED_F16C
#undef PARITY_MASKED_WIDTH
}  // namespace forge_masked_avx512
PARITY_MASKED_TARGET_END

PARITY_MASKED_TARGET("avx2,f16c,popcnt")
namespace forge_masked_avx2 {
#define PARITY_MASKED_WIDTH 4
#define PARITY_MASKED_F16C 1
#include "common/checks/forge_masked_passes.inc"
#undef PARITY_MASKED_F16C
#undef PARITY_MASKED_WIDTH
}  // namespace forge_masked_avx2
PARITY_MASKED_TARGET_END

namespace forge_masked_portable {
#define PARITY_MASKED_WIDTH 2
#include "common/checks/forge_masked_passes.inc"
#undef PARITY_MASKED_WIDTH
}  // namespace forge_masked_portable

// The passes for instruction set `isa`, roundings r (calculate_rtol) and r2 (all_close), and
// sides read as float32 (f32x, f32y) or float64: one instantiation of kKernels, chosen one
// argument at a time.
template <Round... kArgs>
struct RoundsChosen {
  template <bool... kF32>
  static Kernels Get(Isa isa) {
    return isa == Isa::kAvx512 ? forge_masked_avx512::kKernels<kArgs..., kF32...>
           : isa == Isa::kAvx2 ? forge_masked_avx2::kKernels<kArgs..., kF32...>
                               : forge_masked_portable::kKernels<kArgs..., kF32...>;
  }
};

template <Round R, Round R2>
Kernels KernelsFor(Isa isa, bool f32x, bool f32y) {
  using C = RoundsChosen<R, R2>;
  if (f32x) return f32y ? C::template Get<true, true>(isa) : C::template Get<true, false>(isa);
  return f32y ? C::template Get<false, true>(isa) : C::template Get<false, false>(isa);
}

template <Round R>
Kernels KernelsFor(Isa isa, Round r2, bool f32x, bool f32y) {
  switch (r2) {
    case Round::kF64: return KernelsFor<R, Round::kF64>(isa, f32x, f32y);
    case Round::kF16: return KernelsFor<R, Round::kF16>(isa, f32x, f32y);
    case Round::kBF16: return KernelsFor<R, Round::kBF16>(isa, f32x, f32y);
    default: return KernelsFor<R, Round::kF32>(isa, f32x, f32y);
  }
}

Kernels KernelsFor(Isa isa, Round r, Round r2, bool f32x, bool f32y) {
  switch (r) {
    case Round::kF64: return KernelsFor<Round::kF64>(isa, r2, f32x, f32y);
    case Round::kF16: return KernelsFor<Round::kF16>(isa, r2, f32x, f32y);
    default: return KernelsFor<Round::kF32>(isa, r2, f32x, f32y);  // RtolRoundFor: never bfloat16
  }
}

// Whether the passes read a side of dtype t as float32 (float32 in place; float16, bfloat16 and fp8
// widened exactly into a float32 buffer) rather than float64 (in place, or integers converted
// into a float64 buffer).
bool ReadsAsFloat32(DType t) { return IsFloating(t) && t != DType::kFloat64; }

// Room for one chunk of a side (or the whole of a smaller tensor), uninitialised.
struct SideBuffer {
  explicit SideBuffer(int64_t n) : bytes(new char[static_cast<size_t>(n) * 8]) {}
  const std::unique_ptr<char[]> bytes;
};

// Elements [s, s + k) of dtype t at p as the passes read them: float32 or float64 in place, else
// widened into `buf`.
const void* Side(Isa isa, const Kernels& kr, DType t, const char* p, int64_t s, int64_t k, char* buf) {
  const int64_t size = static_cast<int64_t>(DTypeSize(t));
  if (t == DType::kFloat64 || t == DType::kFloat32) return p + s * size;
  if (ReadsAsFloat32(t)) return simd::WidenToFloat32(isa, t, p + s * size, k, reinterpret_cast<float*>(buf));
  if (t == DType::kInt32) {
    kr.int32_to_f64(p + s * size, k, reinterpret_cast<double*>(buf));
  } else {
    ElementsToDouble(t, p, s, k, reinterpret_cast<double*>(buf));
  }
  return buf;
}

ForgeMaskedScanResult Scan(Isa isa, DType tg, const char* g, DType tc, const char* c, int64_t n,
                           const ForgeMaskedAllClose* all_close) {
  const Kernels kr = KernelsFor(isa, RtolRoundFor(tg),
                                all_close != nullptr ? RoundFor(all_close->dtype) : Round::kF64,
                                ReadsAsFloat32(tg), ReadsAsFloat32(tc));
  const int64_t room = std::max<int64_t>(1, std::min(kChunk, n));
  SideBuffer bg(room), bc(room);
  ForgeMaskedScanResult out;
  Pass1Lanes l;
  kr.init(&l);
  double excess = -kInf;
  bool after_nonfinite = false;
  for (int64_t s = 0; s < n; s += kChunk) {
    const int64_t k = std::min(kChunk, n - s);
    const void* x = Side(isa, kr, tg, g, s, k, bg.bytes.get());
    const void* y = Side(isa, kr, tc, c, s, k, bc.bytes.get());
    l.sg = l.sc = D8{};
    l.valid = M8{};
    // Chunks without NaN/inf take the passes without masks; after a chunk with some, the next
    // one goes straight to the masked passes.
    const bool finite = !after_nonfinite && kr.pass1_finite(x, y, k, &l);
    if (!finite) kr.pass1(x, y, k, &l);
    int64_t valid = 0;
    for (int j = 0; j < kLanes; ++j) valid -= l.valid[j];
    after_nonfinite = valid < k;
    const double sg = LaneSum(l.sg), sc = LaneSum(l.sc);
    out.moments.sum_g += sg;
    out.moments.sum_c += sc;
    out.valid += valid;
    if (valid > 0) {
      ForgeChunkMoments cm;
      cm.n = valid;
      cm.mean_g = sg / static_cast<double>(valid);
      cm.mean_c = sc / static_cast<double>(valid);
      Moments8 m;
      (finite ? kr.pass2_finite : kr.pass2)(x, y, k, cm.mean_g, cm.mean_c, &m);
      cm.dx = LaneSum(m.dx);
      cm.dy = LaneSum(m.dy);
      cm.aa = LaneSum(m.aa);
      cm.ab = LaneSum(m.ab);
      cm.bb = LaneSum(m.bb);
      out.moments.chunks.push_back(cm);
    }
    if (all_close != nullptr) excess = std::max(excess, kr.all_close(x, y, k, all_close->rtol, all_close->atol));
  }
  out.special_g = Any(l.special_g);
  out.special_c = Any(l.special_c);
  out.mismatch = Any(l.mismatch);
  out.unequal = Any(l.unequal);
  int32_t nan32 = 0;
  for (int j = 0; j < kLanes; ++j) nan32 |= l.rel_nan32[j];
  out.rel_nan = Any(l.rel_nan) || nan32 != 0;
  double mabs = -kInf, mrel = -kInf, mag_g = 0, mag_c = 0;
  for (int j = 0; j < kLanes; ++j) {
    mabs = std::max(mabs, l.mabs[j]);
    mrel = std::max({mrel, l.mrel[j], static_cast<double>(l.mrel32[j])});
    mag_g = std::max(mag_g, l.mag_g[j]);
    mag_c = std::max(mag_c, l.mag_c[j]);
  }
  out.max_abs = mabs;
  // Rounding is monotonic: the rounded maximum is the maximum of the rounded quotients.
  out.max_rel = RoundOnce(RtolRoundFor(tg), mrel);
  out.moments.finite = !out.special_g && !out.special_c;
  out.moments.unsupported = !(ForgeF64RangeForPcc(mag_g) && ForgeF64RangeForPcc(mag_c));
  if (all_close != nullptr && out.moments.finite) {
    out.all_close_max = excess;
    out.all_close_rtol = all_close->rtol;
    out.all_close_atol = all_close->atol;
  }
  return out;
}

bool Handled(DType t) { return t != DType::kBool && (IsFloating(t) || IsInteger(t)); }

}  // namespace

bool ForgeMaskedKernelSupports(DType g, DType c) {
  return ForgeKernelSupports(DType::kFloat32) && Handled(g) && (Handled(c) || c == DType::kBool);
}

ForgeMaskedScanResult ForgeMaskedScan(DType tg, const char* g, DType tc, const char* c, int64_t n,
                                      const ForgeMaskedAllClose* all_close) {
  return Scan(simd::Selected(), tg, g, tc, c, n, all_close);
}

bool ForgeMaskedScanForIsa(const std::string& isa, DType tg, const char* g, DType tc, const char* c,
                           int64_t n, const ForgeMaskedAllClose* all_close, ForgeMaskedScanResult* out) {
  Isa i;
  if (!Handled(tg) || !(Handled(tc) || tc == DType::kBool) || !simd::Allowed(isa, &i)) return false;
  *out = Scan(i, tg, g, tc, c, n, all_close);
  return true;
}

}  // namespace parity
