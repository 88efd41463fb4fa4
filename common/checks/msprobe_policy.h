// The msprobe policy: msprobe's (Ascend mstt) compare, reproduced to the letter.
//
// Real-data ("ALL") mode follows core/compare/npy_compare.py: pre-checks, inf/NaN zeroing,
// relative error in the loaded dtype (fp16 arithmetic for fp16, float32 for fp32, float64 for
// ints and bool), format_value rounding, the 0.9999 cosine rounding, placeholders and the exact
// Err_message texts (including the doubling of the 0-d message, which is msprobe's own
// behaviour), and check_accuracy's "Accuracy Reached or Not". Statistics ("SUMMARY") and MD5
// (really CRC-32) modes follow acc_compare.py. See shared/reference/msprobe-semantics.md.
#ifndef PARITY_COMMON_MSPROBE_POLICY_H_
#define PARITY_COMMON_MSPROBE_POLICY_H_

#include <optional>
#include <string>

#include "common/base/json.h"
#include "common/checks/msprobe_kernel.h"
#include "common/base/tensor.h"
#include "common/checks/verdict.h"

namespace parity {

// Which rule decides "Accuracy Reached or Not" (and the verdict).
enum class MsprobeRule {
  kAccuracy,  // msprobe's check_accuracy(Cosine, MaxAbsErr) (§4.1 of the reference)
  kTorchair,  // TorchAir graph mode: Yes when Cosine >= cos_threshold and MaxRelativeErr < mre_threshold
};

struct MsprobeOptions {
  double cos_threshold = 0.99;      // COS_THRESHOLD
  double mae_threshold = 0.001;     // MAX_ABS_ERR_THRESHOLD
  double cos_max_threshold = 0.9;   // COS_MAX_THRESHOLD
  double mae_max_threshold = 1.0;   // MAX_ABS_ERR_MAX_THRESHOLD
  double mre_threshold = 0.01;      // MaxRelativeErr limit of the TorchAir rule
  MsprobeRule rule = MsprobeRule::kAccuracy;
};

// Column names, in msprobe's order.
inline constexpr const char* kMsprobeRealColumns[] = {
    "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio"};
inline constexpr const char* kMsprobeStatsColumns[] = {
    "Max diff",       "Min diff",       "Mean diff",       "L2norm diff",
    "MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr"};

// Placeholders.
inline constexpr char kUnsupported[] = "unsupported";
inline constexpr char kShapeUnmatched[] = "shape unmatched";
inline constexpr char kNotApplicable[] = "N/A";
inline constexpr char kNanText[] = "Nan";

// Real-data compare of one loaded pair. The tensors are taken as msprobe's readers load them:
// bfloat16 and fp8 are treated as float32 (read_pt_data upcasts), everything else as stored.
// The result holds the six metrics, Err_message as `message` and "Accuracy Reached or Not" as
// `peer_verdict`.
CheckResult MsprobeCompareReal(const Tensor& npu, const Tensor& bench, const MsprobeOptions& opts);
// The same without the vectorised kernel's fast path (for tests that hold the two equal).
CheckResult MsprobeCompareRealGeneral(const Tensor& npu, const Tensor& bench, const MsprobeOptions& opts);

// The relative-error thresholds (0.001 and 0.005 in the relative error's dtype) that the fused
// pass (MsprobeKernelRun, MsprobeKernelRunPieces) takes for a pair of `dtype` on both sides.
void MsprobeThresholds(DType dtype, double* t1, double* t5);
// The same for a pair of two dtypes (the thresholds in the promoted relative error's dtype), and
// whether msprobe's loaded dtypes differ (its dtype message; MsprobeRealFromPartial).
void MsprobeThresholds(DType npu, DType bench, double* t1, double* t5);
bool MsprobeLoadedDtypesDiffer(DType npu, DType bench);
// What MsprobeCompareReal returns for a pair of one shape (rank >= 1, `numel` >= 1 elements)
// whose fused pass with MsprobeThresholds gave `p`, `p.nonfinite` false; `loaded_dtypes_differ`
// (float16 against a dtype that loads as float32) adds msprobe's dtype message.
CheckResult MsprobeRealFromPartial(int64_t numel, const MsprobePartial& p, const MsprobeOptions& opts,
                                   bool loaded_dtypes_differ = false);

// Real-data row for a pair whose data could not be loaded or does not exist: every metric is
// "unsupported", Err_message is `err_message`, the verdict is ERROR.
CheckResult MsprobeNoData(const std::string& err_message);

// msprobe's check_accuracy(cos, max_abs_err) on the (already formatted) metric values.
std::string MsprobeCheckAccuracy(const MetricValue& cos, const MetricValue& mae,
                                 const MsprobeOptions& opts);
// The TorchAir rule on the formatted Cosine and MaxRelativeErr: the placeholders as
// MsprobeCheckAccuracy reads them, then "Yes" when cos >= opts.cos_threshold and
// mre < opts.mre_threshold, else "No" (a NaN cosine, an all-zero NPU tensor, is "No").
std::string TorchairCheckAccuracy(const MetricValue& cos, const MetricValue& mre, const MsprobeOptions& opts);

// One side of a statistics-mode row as dump.json gives it.
struct MsprobeStats {
  Json max, min, mean, norm;  // numbers (NaN/inf allowed), null, bool or string
  std::optional<bool> requires_grad;
};

// SUMMARY mode: the 8 diff columns, Result ("" or "Warning") as peer_verdict and Err_message.
CheckResult MsprobeCompareStats(const MsprobeStats& npu, const MsprobeStats& bench);

// How msprobe shows a statistic in the NPU/Bench max... columns: the number, "Nan" for NaN,
// "None" for null, "True"/"False" for booleans.
MetricValue MsprobeStatDisplay(const Json& v);

// "True", "False" or "N/A", as msprobe compares requires_grad.
std::string MsprobeRequiresGradText(const std::optional<bool>& rg);

// MD5 mode: Result "pass" / "Different" from the two CRC-32 strings.
CheckResult MsprobeCompareCrc(const std::string& npu_md5, const std::string& bench_md5);

// CRC-32 (zlib) of a tensor's raw contiguous bytes as 8 lower-case hex digits, as msprobe's
// PyTorch dumper writes it; with fp32_upcast, bfloat16 is widened to float32 first (MindSpore).
std::string TensorCrc32(const Tensor& t, bool fp32_upcast = false);
// CRC-32 of Python str(value) of a non-tensor argument, as the comparer fills it.
std::string NonTensorCrc32(const Json& value);
// Python str() of a JSON value ("3", "0.1", "True", "None", "[1, 2]", "{'a': 1}").
std::string PyStr(const Json& value);

}  // namespace parity

#endif  // PARITY_COMMON_MSPROBE_POLICY_H_
