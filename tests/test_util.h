// Helpers for tests that run the real binaries: a parityd child process and command capture.
#ifndef PARITY_TESTS_TEST_UTIL_H_
#define PARITY_TESTS_TEST_UTIL_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "common/base/file_util.h"
#include "common/base/float_formats.h"
#include "common/formats/npy.h"
#include "common/base/tensor.h"

namespace parity::testing {

// Whether the file system holding `dir` accepts O_DIRECT (tmpfs does not).
inline bool DirectIoWorksIn(const std::filesystem::path& dir) {
  const std::string probe = (dir / "direct-probe").string();
  const int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_DIRECT, 0644);
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  return fd >= 0;
}

inline const std::string kBin = PARITY_BINARY_DIR;
inline const std::string kSample = std::string(PARITY_SOURCE_DIR) + "/tests/data/sample";

// parityd as a child process on 127.0.0.1 with a port chosen by the kernel.
class Daemon {
 public:
  explicit Daemon(std::filesystem::path dir, std::vector<std::string> extra = {})
      : dir_(std::move(dir)), extra_(std::move(extra)) {}
  ~Daemon() { Kill(SIGKILL); }

  // Sets an environment variable for the next Start()s (empty value: unset it).
  void SetEnv(std::string name, std::string value) { env_[std::move(name)] = std::move(value); }

  // Starts parityd; after a first start it listens on the same port again (agents reconnect).
  void Start() {
    std::filesystem::create_directories(dir_);
    const std::string port_file = (dir_ / "port").string();
    const std::string listen = "--listen=127.0.0.1:" + std::to_string(port_);
    std::filesystem::remove(port_file);
    pid_ = ::fork();
    if (pid_ == 0) {
      // Dies with the test: a crashed test must not leave a daemon holding ctest's output pipe
      // (ctest would wait for its timeout instead of reporting the crash).
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const std::string log = (dir_ / "parityd.log").string();
      if (FILE* f = std::fopen(log.c_str(), "a")) ::dup2(::fileno(f), 2);
      for (const auto& [name, value] : env_) {
        if (value.empty()) {
          ::unsetenv(name.c_str());
        } else {
          ::setenv(name.c_str(), value.c_str(), 1);
        }
      }
      std::vector<std::string> args = {kBin + "/server/parityd", "--data-dir=" + (dir_ / "data").string(),
                                       listen, "--port-file=" + port_file,
                                       "--shutdown-grace-seconds=5"};
      args.insert(args.end(), extra_.begin(), extra_.end());
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 200 && !std::filesystem::exists(port_file); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::ifstream in(port_file);
    int port = 0;
    in >> port;
    port_ = port;
    ASSERT_GT(port_, 0) << "parityd did not start; log:\n" << Log();
  }

  // Sends `sig` and waits; returns the exit status (or -signal).
  int Kill(int sig) {
    if (pid_ <= 0) return 0;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }

  std::string Address() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  std::string Log() const {
    std::ifstream f(dir_ / "parityd.log");
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

 private:
  std::filesystem::path dir_;
  std::vector<std::string> extra_;
  std::map<std::string, std::string> env_;
  pid_t pid_ = -1;
  int port_ = 0;
};

struct Output {
  int code;
  std::string text;  // stdout and stderr
};

// Runs `kBin/<binary> args` through the shell; stderr is merged into the output unless
// `stderr_too` is false (then it is discarded).
inline Output Run(const std::string& binary, const std::string& args, const std::string& env = "",
                  bool stderr_too = true) {
  const std::string cmd = env + " " + kBin + "/" + binary + " " + args + (stderr_too ? " 2>&1" : " 2>/dev/null");
  FILE* p = ::popen(cmd.c_str(), "r");
  Output o{-1, ""};
  if (p == nullptr) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) o.text.append(buf.data(), n);
  const int status = ::pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

// Runs parity-agent. An upload gives up 20 s after losing the daemon unless `args` sets
// --retry-seconds (the agent's default is 300 s of reconnecting): a daemon that crashes fails
// the test quickly instead of stalling it until the test's timeout.
inline Output RunAgent(const std::string& args, const std::string& env = "", bool stderr_too = true) {
  const bool upload = args.rfind("upload ", 0) == 0;
  const bool retry_set = args.find("--retry-seconds") != std::string::npos;
  return Run("client/parity-agent", upload && !retry_set ? args + " --retry-seconds 20" : args, env, stderr_too);
}

// Writes `count` float32 tensors of `elements` each (t00.npy .. t39.npy by default: 40 of
// 64 KiB, sine waves); tensor `bad` (if >= 0) has every other element negated; a non-zero `salt`
// nudges one value so that contents differ between dumps (no dedup between them).
inline void WriteNpyDump(const std::filesystem::path& dir, int bad, int salt = 0, int count = 40,
                         int64_t elements = 16384) {
  std::filesystem::create_directories(dir);
  for (int i = 0; i < count; ++i) {
    std::vector<float> v(static_cast<size_t>(elements));
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(std::sin(0.001 * (k + 97 * i)));
    if (i == bad) {
      for (size_t k = 0; k < v.size(); k += 2) v[k] = -v[k];
    }
    v[0] += 1e-7f * static_cast<float>(salt);
    std::string bytes(v.size() * 4, '\0');
    std::memcpy(bytes.data(), v.data(), bytes.size());
    char name[24];  // "t" + any int + ".npy"
    std::snprintf(name, sizeof(name), "t%02d.npy", i);
    ASSERT_TRUE(WriteStringToFile((dir / name).string(),
                                  EncodeNpy(*Tensor::Make(DType::kFloat32, {elements}, bytes))).ok());
  }
}

// The raw little-endian bytes of `v` as float32, float16 or bfloat16 (rounded to nearest even).
inline std::string EncodeFloats(const std::vector<float>& v, DType t) {
  if (t == DType::kFloat32) {
    std::string bytes(v.size() * 4, '\0');
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return bytes;
  }
  std::string bytes(v.size() * 2, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = t == DType::kFloat16 ? FloatToHalf(v[i]) : FloatToBFloat16(v[i]);
    std::memcpy(&bytes[i * 2], &h, 2);
  }
  return bytes;
}

inline std::string ReadFirstWord(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::string w;
  f >> w;
  return w;
}

// A per-test scratch directory, removed afterwards.
class ScratchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("parity_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name() + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

}  // namespace parity::testing

#endif  // PARITY_TESTS_TEST_UTIL_H_
