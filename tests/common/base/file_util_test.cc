// File reads with real files: exact sizes, precise errors, and .npy headers read from disk
// (ReadNpyInfo reads one 4 KiB head and falls back to a second read for longer headers).
#include "common/base/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "common/formats/npy.h"
#include "tests/test_util.h"

namespace parity {
namespace {

using FileUtilTest = testing::ScratchTest;

std::string Write(const std::filesystem::path& p, const std::string& bytes) {
  EXPECT_TRUE(WriteStringToFile(p.string(), bytes).ok());
  return p.string();
}

// A .npy of `n` float32 zeros whose header is padded with spaces to `header_len` bytes.
std::string PaddedNpy(size_t header_len, int n) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(n) +
                     ",), }";
  dict.resize(header_len - 1, ' ');
  dict.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>(dict.size() >> 8));
  return out + dict + std::string(4 * n, '\0');
}

TEST_F(FileUtilTest, FileWriterWritesPiecesAndReportsEveryError) {
  const std::string path = (dir_ / "out.txt").string();
  Write(path, std::string(100, 'x'));  // truncated by Create
  {
    absl::StatusOr<std::unique_ptr<FileWriter>> w = FileWriter::Create(path);
    ASSERT_TRUE(w.ok()) << w.status();
    const std::string big(200000, 'b');  // past stdio's buffer
    ASSERT_TRUE((*w)->Append("a,").ok());
    ASSERT_TRUE((*w)->Append(big).ok());
    ASSERT_TRUE((*w)->Append("").ok());
    ASSERT_TRUE((*w)->Close().ok());
    EXPECT_EQ((*w)->Append("late").code(), absl::StatusCode::kFailedPrecondition);
    auto text = ReadFileToString(path);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, "a," + big);
  }
  absl::StatusOr<std::unique_ptr<FileWriter>> missing =
      FileWriter::Create((dir_ / "no" / "such.csv").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("cannot create " + (dir_ / "no" / "such.csv").string()),
            std::string::npos) << missing.status();
  // A full device: the error shows when stdio's buffer is flushed, by a large Append or by Close,
  // and every later call returns it again.
  absl::StatusOr<std::unique_ptr<FileWriter>> full = FileWriter::Create("/dev/full");
  ASSERT_TRUE(full.ok()) << full.status();
  (void)(*full)->Append("small");
  const absl::Status closed = (*full)->Close();
  ASSERT_FALSE(closed.ok());
  EXPECT_NE(closed.message().find("cannot write /dev/full: No space left on device"), std::string::npos)
      << closed;
  EXPECT_EQ((*full)->Close(), closed);
  EXPECT_EQ((*full)->Append("more"), closed);
  EXPECT_EQ(WriteStringToFile("/dev/full", "x"), closed);
}

TEST_F(FileUtilTest, ReadFileHeadReturnsPrefixAndSize) {
  const std::string p = Write(dir_ / "a", "0123456789");
  absl::StatusOr<FileHead> h = ReadFileHead(p, 4);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->bytes, "0123");
  EXPECT_EQ(h->file_size, 10u);
  h = ReadFileHead(p, 4096);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->bytes, "0123456789");
  const std::string empty = Write(dir_ / "empty", "");
  h = ReadFileHead(empty, 4096);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->bytes, "");
  EXPECT_EQ(h->file_size, 0u);
}

TEST_F(FileUtilTest, ReadsExactRangesAndNamesThePathInErrors) {
  const std::string p = Write(dir_ / "a", "0123456789");
  absl::StatusOr<std::string> r = ReadFileRange(p, 3, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "3456");
  r = ReadFileRange(p, 8, 4);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("wanted 4 bytes at offset 8, the file ends after 2"),
            std::string::npos) << r.status();
  r = ReadFileToString((dir_ / "missing").string());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("missing"), std::string::npos);
  r = ReadFileToString(p, 9);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  r = ReadFileToString(dir_.string());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  absl::StatusOr<SharedBytes> shared = ReadFileShared(p);
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_EQ(shared->bytes, "0123456789");
}

// Files of 1 MiB and more are read into pooled buffers: exact bytes on either side of the
// threshold, and a released buffer serves the next read of its size class (no fresh pages).
TEST_F(FileUtilTest, LargeSharedReadsReuseAReleasedBuffer) {
  for (size_t n : {size_t{(1 << 20) - 1}, size_t{1 << 20}, size_t{(1 << 20) + 1}}) {
    std::string bytes(n, '\0');
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>(i * 131 + 7);
    const std::string p = Write(dir_ / ("s" + std::to_string(n)), bytes);
    absl::StatusOr<SharedBytes> r = ReadFileShared(p);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->bytes == bytes) << n;
  }
  // 12 MiB and 9 MiB: both in the 16 MiB class, which no other test here uses.
  const std::string a = Write(dir_ / "a", std::string(12 << 20, 'a'));
  const std::string b = Write(dir_ / "b", std::string((9 << 20) + 5, 'b'));
  const char* first = nullptr;
  const char* second = nullptr;
  const uint64_t mappings = PooledBufferMappings();
  {
    absl::StatusOr<SharedBytes> ra = ReadFileShared(a);
    ASSERT_TRUE(ra.ok()) << ra.status();
    EXPECT_EQ(ra->bytes, std::string(12 << 20, 'a'));
    first = ra->bytes.data();
    // While the first is held, the next read gets another buffer.
    absl::StatusOr<SharedBytes> rb = ReadFileShared(b);
    ASSERT_TRUE(rb.ok()) << rb.status();
    second = rb->bytes.data();
    EXPECT_NE(second, first);
    EXPECT_EQ(PooledBufferMappings(), mappings + 2);
  }
  // Both released (still mapped, idle): the next read takes one of them, not a fresh mapping.
  absl::StatusOr<SharedBytes> again = ReadFileShared(b);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->bytes.data() == first || again->bytes.data() == second);
  EXPECT_EQ(PooledBufferMappings(), mappings + 2);
  EXPECT_EQ(again->bytes, std::string((9 << 20) + 5, 'b'));
}

// The pool keeps what was released last: once its idle capacity is full of one size (a dump's
// large tensors), buffers of another size (its small ones that follow) are still reused, the
// oldest idle buffers making room, rather than unmapped on every release.
TEST_F(FileUtilTest, PooledBuffersMakeRoomForTheSizeNowInUse) {
  // Two 64 MiB buffers fill the 128 MiB of idle capacity (address space only: never touched).
  {
    std::shared_ptr<char> a = TakePooledBuffer(size_t{40} << 20);
    std::shared_ptr<char> b = TakePooledBuffer(size_t{40} << 20);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
  }
  const uint64_t mappings = PooledBufferMappings();
  char* first = nullptr;
  {
    std::shared_ptr<char> c = TakePooledBuffer(size_t{5} << 20);  // the 8 MiB class
    ASSERT_NE(c, nullptr);
    first = c.get();
    std::memset(first, 'x', size_t{5} << 20);
  }
  EXPECT_EQ(PooledBufferMappings(), mappings + 1);
  for (int i = 0; i < 3; ++i) {
    std::shared_ptr<char> again = TakePooledBuffer(size_t{6} << 20);
    ASSERT_NE(again, nullptr);
    EXPECT_EQ(again.get(), first) << i;
    EXPECT_EQ(again.get()[(size_t{5} << 20) - 1], 'x') << i;  // the same pages, not fresh ones
  }
  EXPECT_EQ(PooledBufferMappings(), mappings + 1);
  // A 64 MiB buffer was unmapped for it; the other is still idle and taken without a mapping.
  std::shared_ptr<char> big = TakePooledBuffer(size_t{64} << 20);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(PooledBufferMappings(), mappings + 1);
}

// SetPooledBufferLimits (parityd keeps up to --held-blob-bytes idle, within a total): more
// released buffers stay mapped for the next use when allowed, fewer when the buffers in use
// already take most of the total, and the defaults keep 128 MiB idle again.
TEST_F(FileUtilTest, PooledBufferLimitsBoundWhatStaysMapped) {
  // Three 128 MiB-class buffers (address space only: never touched) released at once; then
  // three again: how many of the second three needed a fresh mapping.
  auto cycle = [] {
    {
      std::vector<std::shared_ptr<char>> held;
      for (int i = 0; i < 3; ++i) held.push_back(TakePooledBuffer(size_t{100} << 20));
      for (const auto& h : held) EXPECT_NE(h, nullptr);
    }
    const uint64_t before = PooledBufferMappings();
    std::vector<std::shared_ptr<char>> again;
    for (int i = 0; i < 3; ++i) again.push_back(TakePooledBuffer(size_t{100} << 20));
    return PooledBufferMappings() - before;
  };
  EXPECT_EQ(cycle(), 2u);  // 128 MiB idle: one kept
  SetPooledBufferLimits(size_t{384} << 20, SIZE_MAX);
  cycle();  // fills the idle capacity
  EXPECT_EQ(cycle(), 0u);
  // A total of 256 MiB: with one 128 MiB buffer still in use, one more may stay idle.
  SetPooledBufferLimits(size_t{384} << 20, size_t{256} << 20);
  {
    std::shared_ptr<char> busy = TakePooledBuffer(size_t{100} << 20);
    cycle();
    EXPECT_EQ(cycle(), 2u);
  }
  SetPooledBufferLimits(size_t{128} << 20, SIZE_MAX);
  cycle();
  EXPECT_EQ(cycle(), 2u);
}

// ReadFileDirect reads whole blocks into an aligned buffer: every size round a block boundary
// comes back exact, and errors name the path as the other readers' do.
TEST_F(FileUtilTest, ReadFileDirectReturnsExactlyTheFile) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{4097},
                   size_t{(5 << 20) + 3}}) {
    std::string bytes(n, '\0');
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>(i * 131 + 7);
    const std::string p = Write(dir_ / ("f" + std::to_string(n)), bytes);
    auto r = ReadFileDirect(p);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->bytes.size(), n);
    EXPECT_TRUE(r->bytes == bytes) << n;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r->bytes.data()) % 4096, 0u);
  }
  // A released buffer serves the next read of its size class: its pages are not faulted in again.
  const std::string a = Write(dir_ / "a", std::string(3 << 20, 'a'));
  const std::string b = Write(dir_ / "b", std::string((3 << 20) + 5, 'b'));
  const char* first = nullptr;
  {
    auto ra = ReadFileDirect(a);
    ASSERT_TRUE(ra.ok());
    first = ra->bytes.data();
  }
  auto rb = ReadFileDirect(b);
  ASSERT_TRUE(rb.ok());
  // (Where the file system refuses O_DIRECT, e.g. a tmpfs TMPDIR, both were mapped instead.)
  const int probe = ::open(a.c_str(), O_RDONLY | O_DIRECT);
  if (probe >= 0) {
    ::close(probe);
    EXPECT_EQ(rb->bytes.data(), first);
  }
  EXPECT_EQ(rb->bytes, std::string((3 << 20) + 5, 'b'));
  auto missing = ReadFileDirect((dir_ / "nope").string());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  auto directory = ReadFileDirect(dir_.string());
  EXPECT_FALSE(directory.ok());
}

TEST_F(FileUtilTest, AFifoIsRefusedWithoutWaitingForAWriter) {
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Each of these would block forever in open() if the FIFO were opened for reading.
  EXPECT_EQ(ReadFileHead(fifo, 16).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadFileRange(fifo, 0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadFileShared(fifo).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MapFileShared(fifo).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadNpyInfo(fifo).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(FileUtilTest, ReadNpyInfoReadsShortAndLongHeaders) {
  // 118 + 10 bytes fit the first read; 8,182 + 10 need the second one.
  for (size_t header_len : {118u, 4086u, 4087u, 8182u}) {
    SCOPED_TRACE(header_len);
    const std::string p = Write(dir_ / "t.npy", PaddedNpy(header_len, 3));
    absl::StatusOr<NpyInfo> info = ReadNpyInfo(p);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->dtype, DType::kFloat32);
    EXPECT_EQ(info->shape, Shape{3});
    absl::StatusOr<Tensor> t = ReadNpyFile(p);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->numel(), 3);
  }
}

TEST_F(FileUtilTest, ReadNpyInfoReportsTruncationPrecisely) {
  std::string npy = PaddedNpy(8182, 3);
  // The header runs past the end of the file.
  std::string p = Write(dir_ / "cut_header.npy", npy.substr(0, 5000));
  absl::StatusOr<NpyInfo> info = ReadNpyInfo(p);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(info.status().message().find("runs past the end of the file (5000 bytes)"),
            std::string::npos) << info.status();
  // The data is short by one element.
  p = Write(dir_ / "cut_data.npy", npy.substr(0, npy.size() - 4));
  info = ReadNpyInfo(p);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(info.status().message().find("only 8 data bytes follow"), std::string::npos)
      << info.status();
  p = Write(dir_ / "tiny.npy", "\x93NUM");
  EXPECT_EQ(ReadNpyInfo(p).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(FileUtilTest, ListDirectoryIsSortedAndFollowsLinksForTypes) {
  namespace fs = std::filesystem;
  Write(dir_ / "b.npy", "x");
  Write(dir_ / "a.npy", "x");
  Write(dir_ / "B", "x");  // byte order: upper case first
  fs::create_directory(dir_ / "sub");
  fs::create_symlink(dir_ / "a.npy", dir_ / "link_to_file");
  fs::create_directory_symlink(dir_ / "sub", dir_ / "link_to_dir");
  fs::create_symlink(dir_ / "missing", dir_ / "dangling");
  absl::StatusOr<std::vector<DirEntry>> l = ListDirectory(dir_.string());
  ASSERT_TRUE(l.ok()) << l.status();
  std::vector<std::string> names;
  for (const DirEntry& e : *l) names.push_back(e.name + (e.is_regular ? ":f" : "") + (e.is_directory ? ":d" : ""));
  EXPECT_EQ(names, (std::vector<std::string>{"B:f", "a.npy:f", "b.npy:f", "dangling", "link_to_dir:d",
                                             "link_to_file:f", "sub:d"}));
  l = ListDirectory((dir_ / "sub").string());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_TRUE(l->empty());

  l = ListDirectory((dir_ / "nope").string());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(l.status().message().find("cannot list directory " + (dir_ / "nope").string()), std::string::npos)
      << l.status();
  l = ListDirectory((dir_ / "a.npy").string());
  EXPECT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("Not a directory"), std::string::npos) << l.status();
}

// With an arena, files up to kProbeReadBytes are read whole by one read (no fstat): every size
// around that boundary and around whole_max_bytes gives the file's exact bytes and size, and
// non-regular files still get their precise errors.
TEST_F(FileUtilTest, ReadFileHeadOrWholeKeepsExactBytesAroundTheProbeSize) {
  SmallFileArena arena;
  std::vector<SharedBytes> kept;  // all alive at once: buffers from one chunk must not overlap
  std::vector<std::string> contents;
  const size_t whole_max = 3 * kProbeReadBytes;
  const size_t sizes[] = {1, 63, 64, 4096, kProbeReadBytes - 1, kProbeReadBytes,
                          kProbeReadBytes + 1, whole_max, whole_max + 1, 5 * kProbeReadBytes};
  for (size_t i = 0; i < std::size(sizes); ++i) {
    const size_t n = sizes[i];
    SCOPED_TRACE(n);
    std::string bytes(n, '\0');
    for (size_t k = 0; k < n; ++k) bytes[k] = static_cast<char>('a' + (k * 7 + i) % 26);
    const std::string p = Write(dir_ / ("f" + std::to_string(i)), bytes);
    SharedBytes whole;
    absl::StatusOr<FileHead> h = ReadFileHeadOrWhole(p, 4096, whole_max, &arena, &whole);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(h->file_size, n);
    if (n <= whole_max) {
      ASSERT_NE(whole.owner, nullptr);
      EXPECT_TRUE(h->bytes.empty());
      kept.push_back(whole);
      contents.push_back(bytes);
    } else {
      EXPECT_EQ(whole.owner, nullptr);
      EXPECT_EQ(h->bytes, bytes.substr(0, 4096));
    }
  }
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(kept[i].bytes, contents[i]) << i;

  SharedBytes whole;
  absl::StatusOr<FileHead> empty =
      ReadFileHeadOrWhole(Write(dir_ / "empty", ""), 4096, whole_max, &arena, &whole);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->file_size, 0u);
  EXPECT_TRUE(whole.bytes.empty());
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& p : {fifo, dir_.string(), std::string("/dev/null")}) {
    absl::StatusOr<FileHead> h = ReadFileHeadOrWhole(p, 4096, whole_max, &arena, &whole);
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << p << ": " << h.status();
    EXPECT_NE(h.status().message().find(p + " is not a regular file"), std::string::npos)
        << h.status();
  }
  EXPECT_EQ(ReadFileHeadOrWhole((dir_ / "nope").string(), 4096, whole_max, &arena, &whole)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

// Buffers carved from shared chunks stay distinct and intact across chunk boundaries, and
// outlive the arena; a request larger than a chunk is refused.
TEST(SmallFileArena, BuffersAreDistinctAcrossChunksAndOutliveTheArena) {
  std::vector<std::shared_ptr<char>> bufs;
  {
    SmallFileArena arena;
    for (int i = 0; i < 100; ++i) {  // 100 x 50,000 bytes: three chunks
      std::shared_ptr<char> b = arena.Take(50000);
      ASSERT_NE(b, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(b.get()) % 64, 0u);
      std::memset(b.get(), i, 50000);
      bufs.push_back(std::move(b));
    }
    EXPECT_EQ(arena.Take(SmallFileArena::kChunkBytes + 1), nullptr);
    EXPECT_NE(arena.Take(0), nullptr);
  }
  for (int i = 0; i < 100; ++i) {
    const char* p = bufs[static_cast<size_t>(i)].get();
    EXPECT_EQ(p[0], static_cast<char>(i));
    EXPECT_EQ(p[49999], static_cast<char>(i));
  }
}

}  // namespace
}  // namespace parity
