// The checkers' vectorised paths against their element-by-element paths, on two tensors of
// fuzzed dtypes and bytes (any NaN, inf, subnormal or extreme value the bytes spell):
// - msprobe: MsprobeCompareReal and MsprobeCompareRealGeneral give the same JSON;
// - torch (check_dtype off, equal_nan from the input): the same JSON with the kernel on and off;
// - forge (verify_dtype off; its PCC checker or all_close, from the input): with its kernels on
//   and off, the same required tolerances, all_close excess and all_close exception (its full
//   checker runs all_close only after the PCC passes). Its PCC is left out: the
//   kernels sum in another order than the element path, which fuzzed values of wide range can
//   make differ beyond any fixed bound (unit tests hold it within 1e-12 on measured data).
// Input: dtype of golden, dtype of target, an options byte, then the golden's elements followed
// by the target's (as many pairs as the rest holds).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/base/tensor.h"
#include "common/checks/forge_kernel.h"
#include "common/checks/forge_policy.h"
#include "common/checks/msprobe_policy.h"
#include "common/checks/torch_kernel.h"
#include "common/checks/torch_policy.h"

namespace {

using parity::CheckResult;
using parity::DType;

constexpr DType kDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                             DType::kInt32,   DType::kInt64,   DType::kUInt8,    DType::kBool,
                             DType::kInt8,    DType::kInt16,   DType::kFloat8E4M3FN, DType::kFloat8E5M2};

std::string Json(const CheckResult& r) { return r.ToJson().Dump(); }

// The metrics of a forge result that do not depend on its PCC's summation order, and its
// all_close exception, as one string.
std::string ForgeOrderFree(const CheckResult& r) {
  std::string out = r.peer_verdict == "RuntimeError" ? r.message : "";
  for (const char* name : {"Required atol", "Required rtol", "AllClose max excess"}) {
    if (const parity::MetricValue* v = r.Find(name)) out += std::string("|") + name + "=" + v->ToJson().Dump();
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kTypes = sizeof(kDTypes) / sizeof(kDTypes[0]);
  if (size < 3) return 0;
  const DType tg = kDTypes[data[0] % kTypes], tc = kDTypes[data[1] % kTypes];
  const uint8_t options = data[2];
  const size_t wg = parity::DTypeSize(tg), wc = parity::DTypeSize(tc);
  const size_t n = (size - 3) / (wg + wc);
  const char* p = reinterpret_cast<const char*>(data + 3);
  absl::StatusOr<parity::Tensor> g = parity::Tensor::Make(tg, {static_cast<int64_t>(n)}, std::string(p, n * wg));
  absl::StatusOr<parity::Tensor> c =
      parity::Tensor::Make(tc, {static_cast<int64_t>(n)}, std::string(p + n * wg, n * wc));
  if (!g.ok() || !c.ok()) std::abort();

  // msprobe: the target is the NPU side.
  if (Json(parity::MsprobeCompareReal(*c, *g, parity::MsprobeOptions())) !=
      Json(parity::MsprobeCompareRealGeneral(*c, *g, parity::MsprobeOptions()))) {
    std::abort();
  }

  parity::TorchOptions to;
  to.check_dtype = false;
  to.equal_nan = (options & 1) != 0;
  parity::SetTorchKernelEnabled(true);
  const std::string torch_fast = Json(parity::TorchAssertClose(*c, *g, to));
  parity::SetTorchKernelEnabled(false);
  const std::string torch_slow = Json(parity::TorchAssertClose(*c, *g, to));
  parity::SetTorchKernelEnabled(true);
  if (torch_fast != torch_slow) std::abort();

  parity::ForgeOptions fo;
  fo.verify_dtype = false;
  fo.checker = (options & 2) != 0 ? parity::ForgeChecker::kAllClose : parity::ForgeChecker::kAutomatic;
  parity::SetForgeKernelEnabled(true);
  const std::string forge_fast = ForgeOrderFree(parity::ForgeCheck(*g, *c, fo));
  parity::SetForgeKernelEnabled(false);
  const std::string forge_slow = ForgeOrderFree(parity::ForgeCheck(*g, *c, fo));
  parity::SetForgeKernelEnabled(true);
  if (forge_fast != forge_slow) std::abort();
  return 0;
}
