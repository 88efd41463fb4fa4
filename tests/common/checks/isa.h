// The instruction sets a kernel test compares, so that a vector path this machine cannot run is
// skipped by name rather than passed over in silence.
#ifndef PARITY_TESTS_COMMON_CHECKS_ISA_H_
#define PARITY_TESTS_COMMON_CHECKS_ISA_H_

#include <cstdlib>
#include <string>
#include <vector>

#include "common/checks/msprobe_kernel.h"

namespace parity {
namespace testing {

// The vector instruction sets this process runs its kernels with (MsprobeKernelIsa(): cpuid,
// capped by PARITY_KERNEL): each must run when asked for.
inline std::vector<const char*> VectorIsas() {
  const std::string best = MsprobeKernelIsa();
  if (best == "avx512") return {"avx2", "avx512"};
  if (best == "avx2") return {"avx2"};
  return {};
}

// "portable", then VectorIsas().
inline std::vector<const char*> AllIsas() {
  std::vector<const char*> isas = {"portable"};
  for (const char* isa : VectorIsas()) isas.push_back(isa);
  return isas;
}

}  // namespace testing
}  // namespace parity

// In a test whose point is comparing vector paths with the portable one: skips it, saying why,
// where no vector path runs.
#define PARITY_SKIP_WITHOUT_VECTOR_ISA()                                                        \
  if (::parity::testing::VectorIsas().empty())                                                   \
  GTEST_SKIP() << "this CPU (or PARITY_KERNEL=" << (std::getenv("PARITY_KERNEL") ? std::getenv("PARITY_KERNEL") : "") \
               << ") runs no AVX2 or AVX-512 kernel: only the portable path exists here"

#endif  // PARITY_TESTS_COMMON_CHECKS_ISA_H_
