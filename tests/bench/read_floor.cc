// The floor under any comparer of a dump of many files: reads every regular file in the given
// directories (not below them) once, with plain openat / pread / close into one reused 256 KiB
// buffer, and does nothing with the bytes. Prints the seconds taken (one line: "SECONDS FILES
// BYTES"). tests/bench/vs_numpy.sh runs it beside `parity compare` and numpy: the time it takes
// is kernel work (path lookup, opening, copying out of the page cache) that any reader of these
// files pays, so parity's time can approach it but not go below it.
//   build/tests/read_floor DIR...
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: read_floor DIR...\n");
    return 2;
  }
  // Listed first (names only, as `parity compare` lists a directory), then timed.
  std::vector<std::vector<std::string>> names(argc - 1);
  std::vector<int> dirs;
  for (int d = 1; d < argc; ++d) {
    DIR* dir = ::opendir(argv[d]);
    if (dir == nullptr) {
      std::fprintf(stderr, "read_floor: cannot list %s: %s\n", argv[d], std::strerror(errno));
      return 2;
    }
    for (const dirent* e; (e = ::readdir(dir)) != nullptr;) {
      if (e->d_type == DT_REG) names[d - 1].emplace_back(e->d_name);
    }
    ::closedir(dir);
    dirs.push_back(::open(argv[d], O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  constexpr size_t kPiece = size_t{256} << 10;
  std::vector<char> buf(kPiece, 1);
  const auto start = std::chrono::steady_clock::now();
  long files = 0;
  long long bytes = 0;
  for (size_t d = 0; d < dirs.size(); ++d) {
    for (const std::string& name : names[d]) {
      const int fd = ::openat(dirs[d], name.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        std::fprintf(stderr, "read_floor: cannot open %s: %s\n", name.c_str(), std::strerror(errno));
        return 2;
      }
      for (off_t off = 0;;) {
        const ssize_t n = ::pread(fd, buf.data(), kPiece, off);
        if (n <= 0) break;
        off += n;
        bytes += n;
      }
      ::close(fd);
      ++files;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%.6f %ld %lld\n", s, files, bytes);
  return 0;
}
