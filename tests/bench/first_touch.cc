// What this machine charges for memory a process touches for the first time: maps SIZE_MB
// (default 512) of anonymous memory ROUNDS times (default 3), in huge pages (MADV_HUGEPAGE) and
// then in 4 KiB pages (MADV_NOHUGEPAGE), writes one byte per 4 KiB page, then rewrites it all
// with memset, and unmaps it. Prints ms per MiB of the first touch and GB/s of the rewrite per
// round. On a VM that reports free memory to its host (virtio-balloon free page reporting),
// the first round pays for pages the host discarded; later rounds reuse pages just freed.
//   build/tests/first_touch [SIZE_MB] [ROUNDS]
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 512;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  if (mib == 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: first_touch [SIZE_MB>0] [ROUNDS>0]\n");
    return 2;
  }
  const size_t n = mib << 20;
  for (int huge : {1, 0}) {
    for (int r = 0; r < rounds; ++r) {
      void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) {
        std::perror("mmap");
        return 2;
      }
      char* p = static_cast<char*>(m);
      madvise(p, n, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
      const double t0 = Seconds();
      for (size_t i = 0; i < n; i += 4096) p[i] = 1;
      const double t1 = Seconds();
      std::memset(p, 2, n);
      const double t2 = Seconds();
      std::printf("%s pages, round %d: first touch %.3f ms per MiB (%.2f GB/s), rewrite %.1f GB/s\n",
                  huge ? "huge" : "4 KiB", r + 1, (t1 - t0) * 1e3 / static_cast<double>(mib),
                  static_cast<double>(n) / (t1 - t0) / 1e9, static_cast<double>(n) / (t2 - t1) / 1e9);
      munmap(p, n);
    }
  }
  return 0;
}
