// BatchReader: both ways (io_uring where this kernel allows it, and plain system calls) read the
// same bytes and report the same errors, across batches.
#include "common/base/batch_read.h"

#include <fcntl.h>
#include <linux/io_uring.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "common/base/file_util.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

class BatchReadTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("parity_batch_read_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

std::string Content(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + static_cast<size_t>(seed)) & 0xff);
  return s;
}

// A request per name, relative to dir_fd, each reading up to `len` bytes into (*bufs)[i].
std::vector<BatchReader::Request> Requests(int dir_fd, const std::vector<std::string>& names,
                                           std::vector<std::vector<char>>* bufs, size_t len) {
  std::vector<BatchReader::Request> reqs;
  for (size_t i = 0; i < names.size(); ++i) {
    BatchReader::Request r;
    r.dir_fd = dir_fd;
    r.name = names[i].c_str();
    r.buf = (*bufs)[i].data();
    r.len = len;
    reqs.push_back(r);
  }
  return reqs;
}

size_t OpenDescriptors() {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) n += e.path().empty() ? 0 : 1;
  return n;
}

TEST_P(BatchReadTest, ReadsTheFirstBytesOfEveryFileAndReportsErrors) {
  std::unique_ptr<BatchReader> reader = BatchReader::Create(GetParam());
  if (!GetParam()) {
    EXPECT_FALSE(reader->uses_io_uring());
  } else {
    // Where this process may set up a ring, the reader must use it.
    io_uring_params p{};
    const long fd = ::syscall(__NR_io_uring_setup, 4, &p);
    if (fd >= 0) ::close(static_cast<int>(fd));
    EXPECT_EQ(reader->uses_io_uring(), fd >= 0);
  }
  RecordProperty("uses_io_uring", reader->uses_io_uring() ? "yes" : "no");
  constexpr size_t kLen = 1000;
  // 150 files (three batches of io_uring's 64): empty, shorter than kLen, exactly kLen, longer.
  std::vector<std::string> names, contents;
  for (int i = 0; i < 150; ++i) {
    const size_t sizes[] = {0, 1, 999, kLen, kLen + 1, 5000};
    names.push_back("f" + std::to_string(i));
    contents.push_back(Content(sizes[i % 6], i));
    ASSERT_TRUE(WriteStringToFile((dir_ / names.back()).string(), contents.back()).ok());
  }
  fs::create_directory(dir_ / "sub");
  const size_t open_before = OpenDescriptors();
  const int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir_fd, 0);
  const std::string absolute = (dir_ / "f7").string();
  std::vector<std::vector<char>> bufs(names.size() + 3, std::vector<char>(kLen, 'x'));
  std::vector<BatchReader::Request> reqs = Requests(dir_fd, names, &bufs, kLen);
  // A missing file mid-batch, a directory, and an absolute path with AT_FDCWD.
  reqs.insert(reqs.begin() + 30, BatchReader::Request{dir_fd, "missing", bufs[150].data(), kLen});
  reqs.push_back(BatchReader::Request{dir_fd, "sub", bufs[151].data(), kLen});
  reqs.push_back(BatchReader::Request{AT_FDCWD, absolute.c_str(), bufs[152].data(), kLen});
  reader->Read(absl::MakeSpan(reqs));
  EXPECT_EQ(reqs[30].result, -ENOENT);
  EXPECT_EQ(reqs[151].result, -EISDIR);
  EXPECT_EQ(reqs[152].result, static_cast<int64_t>(contents[7].size()));
  EXPECT_EQ(std::string(bufs[152].data(), contents[7].size()), contents[7]);
  for (size_t i = 0; i < names.size(); ++i) {
    const BatchReader::Request& r = reqs[i < 30 ? i : i + 1];
    const size_t want = std::min(kLen, contents[i].size());
    ASSERT_EQ(r.result, static_cast<int64_t>(want)) << names[i];
    EXPECT_EQ(std::string(r.buf, want), contents[i].substr(0, want)) << names[i];
  }
  ::close(dir_fd);
  EXPECT_EQ(OpenDescriptors(), open_before) << "a file was left open";
}

TEST_P(BatchReadTest, KeepsAFileThatFillsItsBufferOpenForTheCaller) {
  std::unique_ptr<BatchReader> reader = BatchReader::Create(GetParam());
  constexpr size_t kLen = 1000;
  // 100 files (two io_uring batches), each asked to be kept open if longer; every other one not.
  const size_t sizes[] = {0, 999, kLen, kLen + 1, 5000};
  std::vector<std::string> names, contents;
  for (int i = 0; i < 100; ++i) {
    names.push_back("g" + std::to_string(i));
    contents.push_back(Content(sizes[i % 5], i));
    ASSERT_TRUE(WriteStringToFile((dir_ / names.back()).string(), contents.back()).ok());
  }
  const size_t open_before = OpenDescriptors();
  const int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir_fd, 0);
  std::vector<std::vector<char>> bufs(names.size() + 1, std::vector<char>(kLen, 'x'));
  std::vector<BatchReader::Request> reqs = Requests(dir_fd, names, &bufs, kLen);
  for (size_t i = 0; i < names.size(); ++i) {
    reqs[i].keep_open_if_longer = (i / 5) % 2 == 0;
    reqs[i].fd = 1234;  // overwritten whatever happens
  }
  BatchReader::Request missing{dir_fd, "missing", bufs[100].data(), kLen};
  missing.keep_open_if_longer = true;
  reqs.insert(reqs.begin() + 40, missing);
  reader->Read(absl::MakeSpan(reqs));
  EXPECT_EQ(reqs[40].result, -ENOENT);
  EXPECT_EQ(reqs[40].fd, -1);
  size_t kept = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const BatchReader::Request& r = reqs[i < 40 ? i : i + 1];
    const size_t want = std::min(kLen, contents[i].size());
    ASSERT_EQ(r.result, static_cast<int64_t>(want)) << names[i];
    EXPECT_EQ(std::string(r.buf, want), contents[i].substr(0, want)) << names[i];
    if (!r.keep_open_if_longer || contents[i].size() < kLen) {
      EXPECT_EQ(r.fd, -1) << names[i];
      continue;
    }
    ASSERT_GE(r.fd, 0) << names[i];
    ++kept;
    // The caller's descriptor: the same file, readable past the first bytes.
    std::string rest(contents[i].size() - kLen + 1, '\0');
    const ssize_t n = ::pread(r.fd, rest.data(), rest.size(), kLen);
    ASSERT_EQ(n, static_cast<ssize_t>(contents[i].size() - kLen)) << names[i];
    EXPECT_EQ(rest.substr(0, static_cast<size_t>(n)), contents[i].substr(kLen)) << names[i];
    ::close(r.fd);
  }
  EXPECT_EQ(kept, 30u);  // sizes kLen, kLen + 1 and 5000 in the 10 groups of 5 that keep
  ::close(dir_fd);
  EXPECT_EQ(OpenDescriptors(), open_before) << "a file was left open";
}

INSTANTIATE_TEST_SUITE_P(Ways, BatchReadTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? std::string("IoUringWhereAllowed") : std::string("Plain");
                         });

}  // namespace
}  // namespace parity
