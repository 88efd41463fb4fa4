// The fused, vectorised pass behind msprobe's six real-data metrics for the common case: both
// tensors of the same dtype, and that dtype one of float64, float32, bfloat16, float16, bool,
// (u)int8, (u)int16, (u)int32 or (u)int64 ((u)int64 values are cast to float64 first, rounded as
// static_cast<double> and numpy's astype(float) round them, on every instruction set), or fp8
// (e4m3fn, e5m2: widened to float32 per 1024-element block, as msprobe widens them, and run as
// float32; the results are the float32 pair's).
//
// Two different dtypes that both load as float32 (float32 against bfloat16, the usual golden and
// target of a bf16 port) take the float32 pass on their widened values, block by block; so does
// float16 against one of those (an fp16 port), with msprobe's relative error of that pair: in
// float32, eps added where bench == 0 to the float32-loading side only (float16's eps is 0).
// float64 against a float32-loading dtype takes the float64 pass on the other side's values
// widened to float64 (the pair's arithmetic is float64; a float32 NPU side's eps is added in
// float32, as msprobe adds it in that side's dtype).
//
// Contract:
// - One pass over both inputs, no temporaries: a.b, a.a, b.b and (a-b)^2 accumulated in float64,
//   max |a-b| in float64, msprobe's relative error in the loaded dtype's arithmetic (float16
//   rounding for fp16, float32 for fp32/bf16, float64 for float64 and integers; eps added where
//   bench == 0, as msprobe's get_relative_err does) with its max, NaN flag and the two
//   threshold counts.
// - The float64 sums use 8 lanes (element i goes to lane i % 8), flushed every 1024 elements and
//   reduced in a fixed tree, and no FMA is used, so the AVX-512, AVX2 and portable paths give
//   bit-identical results on any machine; the instruction set is chosen at run time (cpuid),
//   never at build time.
// - Partials of consecutive ranges merge with Merge(); MsprobeKernelRun splits a tensor into
//   fixed 1 Mi-element chunks, so the result does not depend on how many threads ran them.
// - Non-finite inputs are not handled here: `nonfinite` reports that one was seen (float inputs
//   only; also a float64 value whose square overflows), and the caller then takes
//   MsprobeKernelRunZeroingSpecial for pairs that load as float32, or the general path, which
//   check inf/nan positions.
#ifndef PARITY_COMMON_MSPROBE_KERNEL_H_
#define PARITY_COMMON_MSPROBE_KERNEL_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "common/base/dtype.h"

namespace parity {

struct MsprobePartial {
  double dot[8] = {0}, nn[8] = {0}, bb[8] = {0}, euc[8] = {0};
  double max_abs = -1;  // |a-b| >= 0, so -1 means "no element yet"
  double max_re = -1;
  bool re_nan = false;
  bool nonfinite = false;
  bool special_mismatch = false;  // MsprobeKernelRunZeroingSpecial: inf/NaN positions differ
  int64_t c1 = 0, c5 = 0;

  // Adds `o`, the partial of the range that follows this one.
  void Merge(const MsprobePartial& o);
  // Lane sums reduced in a fixed tree.
  double Dot() const;
  double NN() const;
  double BB() const;
  double Euc() const;
};

// True when MsprobeKernel handles tensors of dtype `t` on both sides.
bool MsprobeKernelSupports(DType t);
// True for dtype `t` on both sides as above, and for two different dtypes that both load as
// float32 in msprobe (float32, bfloat16, fp8 e4m3fn and e5m2), or float16 against one of those:
// those are widened exactly to float32 a 1024-element block at a time, in registers and an L1
// buffer, and compared as a float32 pair (msprobe compares the widened values in float32
// arithmetic); and for float64 or an integer dtype against float64, an integer dtype or one of
// those loading as float32: widened to float64 (integers as msprobe casts them) and compared in
// float64. Either way the results are the general path's.
bool MsprobeKernelSupports(DType npu, DType bench);

// Which implementation runs on this machine: "avx512", "avx2" or "portable", the best the CPU
// supports. PARITY_KERNEL=portable or =avx2 in the environment caps it (tests compare them).
const char* MsprobeKernelIsa();

// Accumulates elements [begin, begin + count) of two arrays of dtype `t` into *p. Elements go
// to lane (i - begin) % 8, so callers pass ranges that start at multiples of 8 to merge.
// t1/t5 are the thresholds already rounded to the relative error's dtype.
void MsprobeKernel(DType t, const char* npu, const char* bench, int64_t begin, int64_t count,
                   double t1, double t5, MsprobePartial* p);
// The same for a pair of dtypes MsprobeKernelSupports(npu_dtype, bench_dtype) accepts.
void MsprobeKernel(DType npu_dtype, DType bench_dtype, const char* npu, const char* bench, int64_t begin,
                   int64_t count, double t1, double t5, MsprobePartial* p);

// MsprobeKernel with a given implementation ("portable", "avx2", "avx512"); false when this
// machine (or PARITY_KERNEL) does not allow it. For tests comparing the implementations.
bool MsprobeKernelForIsa(const std::string& isa, DType t, const char* npu, const char* bench,
                         int64_t begin, int64_t count, double t1, double t5, MsprobePartial* p);
bool MsprobeKernelForIsa(const std::string& isa, DType npu_dtype, DType bench_dtype, const char* npu,
                         const char* bench, int64_t begin, int64_t count, double t1, double t5,
                         MsprobePartial* p);

// Process-wide number of threads MsprobeKernelRun may use for one large tensor (default 1: the
// calling thread only). Set once from the executables' flags.
void SetKernelThreads(int threads);
int KernelThreads();

// While one lives, its thread counts as one of several threads comparing pairs side by side
// (CompareDumps on several threads): a tensor split across threads by SetKernelThreads' count
// then starts one helper fewer for each other such thread, so that N threads comparing pairs
// do not each split a large tensor N ways. Results do not depend on it.
class ScopedPairWorker {
 public:
  ScopedPairWorker();
  ~ScopedPairWorker();
  ScopedPairWorker(const ScopedPairWorker&) = delete;
  ScopedPairWorker& operator=(const ScopedPairWorker&) = delete;
};

// Runs one tensor pair of `numel` elements as fixed chunks; `parallel_for(n, fn)` may run
// fn(0..n-1) on several threads (nullptr: SetKernelThreads' count). Results are independent of
// the threads, except that once `nonfinite` is seen the remaining chunks may be skipped (the
// other fields are then partial: callers take another path).
using ParallelFor = std::function<void(int64_t n, const std::function<void(int64_t)>& fn)>;
MsprobePartial MsprobeKernelRun(DType t, const char* npu, const char* bench, int64_t numel,
                                double t1, double t5, const ParallelFor& parallel_for);
MsprobePartial MsprobeKernelRun(DType npu_dtype, DType bench_dtype, const char* npu, const char* bench,
                                int64_t numel, double t1, double t5, const ParallelFor& parallel_for);

// True when both dtypes load as float32 in msprobe (float32, bfloat16, fp8), or one is float16
// and the other loads as float32, or both are float16, or float64 against float64 or a dtype that
// loads as float32: such pairs holding inf or NaN stay on the vectorised pass with
// MsprobeKernelRunZeroingSpecial.
bool MsprobeKernelZeroesSpecial(DType npu, DType bench);
// MsprobeKernelRun for such a pair with msprobe's handle_inf_nan: positions where either side is
// inf or NaN count as 0 on both sides, block by block in the L1 buffers the widening uses (a
// float16 pair's blocks copied there as float16, float64 pairs' as float64). `special_mismatch` is set when the inf positions or the NaN positions of the two sides differ
// (msprobe then reports N/A; the other fields are not meaningful and the caller takes the
// general path). The results are the general path's for the zeroed values, bit for bit.
MsprobePartial MsprobeKernelRunZeroingSpecial(DType npu_dtype, DType bench_dtype, const char* npu,
                                              const char* bench, int64_t numel, double t1, double t5,
                                              const ParallelFor& parallel_for);

// MsprobeKernelRun over arrays read in pieces instead of held whole: read(side, begin, count,
// buf) fills `buf` with elements [begin, begin + count) of side 0 (npu) or 1 (bench), count at
// most kMsprobePieceBytes / element size, on the threads parallel_for runs. The pieces go into
// per-thread buffers small enough to still be in cache when the pass reads them (a whole large
// tensor read first is written to memory and read back). The result is MsprobeKernelRun's for
// the same arrays, bit for bit, except that once `nonfinite` is seen the run stops early (the
// other fields are then partial: callers take the general path). The first read error is
// returned.
inline constexpr size_t kMsprobePieceBytes = size_t{256} << 10;
using ReadPiece = std::function<absl::Status(int side, int64_t begin, int64_t count, char* buf)>;
absl::StatusOr<MsprobePartial> MsprobeKernelRunPieces(DType t, int64_t numel, double t1, double t5,
                                                      const ReadPiece& read,
                                                      const ParallelFor& parallel_for);
// The same for two dtypes MsprobeKernelSupports(npu_dtype, bench_dtype) accepts (each side's
// pieces of its own element size; MsprobeKernelRun's result for the pair, bit for bit).
absl::StatusOr<MsprobePartial> MsprobeKernelRunPieces(DType npu_dtype, DType bench_dtype, int64_t numel, double t1,
                                                      double t5, const ReadPiece& read,
                                                      const ParallelFor& parallel_for);

}  // namespace parity

#endif  // PARITY_COMMON_MSPROBE_KERNEL_H_
