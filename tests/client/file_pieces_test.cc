// FilePieces and FindTensorFileRange: the agent sends large .npy tensors from their files in
// pieces. Which files qualify, the pieces' bytes, order and bound, the CRC-32 and statistics on
// the last piece (the whole tensor's), and what a file that shrinks or a cancel does.
#include "client/file_pieces.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "common/base/crc32.h"
#include "common/formats/npy.h"
#include "common/base/sha256.h"
#include "common/checks/stats.h"
#include "common/base/tensor.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

class FilePiecesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("parity-file-pieces-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A float32 .npy of `n` elements (values i * 0.25 - 3, one NaN-free ramp) and its tensor.
  std::string WriteNpy(const std::string& name, int64_t n, Tensor* out = nullptr) {
    std::string data(static_cast<size_t>(n) * 4, '\0');
    for (int64_t i = 0; i < n; ++i) {
      const float f = static_cast<float>(i % 1000) * 0.25f - 3.0f;
      std::memcpy(&data[static_cast<size_t>(i) * 4], &f, 4);
    }
    Tensor t = *Tensor::Make(DType::kFloat32, {n}, data);
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << EncodeNpy(t);
    if (out != nullptr) *out = t;
    return path;
  }

  DumpItem Item(const std::string& path) {
    DumpItem it;
    it.name = "x";
    it.data_path = path;
    return it;
  }

  fs::path dir_;
};

TEST_F(FilePiecesTest, OnlyWholeNativeNpyFilesLargeEnoughQualify) {
  Tensor t;
  const std::string path = WriteNpy("a.npy", 3000, &t);
  std::optional<TensorFileRange> r = FindTensorFileRange(Item(path), 1024);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->length, 12000u);
  EXPECT_EQ(r->offset + r->length, fs::file_size(path));
  EXPECT_EQ(r->dtype, DType::kFloat32);
  EXPECT_EQ(r->shape, Shape{3000});

  EXPECT_FALSE(FindTensorFileRange(Item(path), 12001).has_value());  // too small
  DumpItem other_shape = Item(path);
  other_shape.has_shape = true;
  other_shape.shape = {2, 1500};  // dump.json disagrees: read whole, which names the mismatch
  EXPECT_FALSE(FindTensorFileRange(other_shape, 1024).has_value());
  DumpItem same_shape = Item(path);
  same_shape.has_shape = true;
  same_shape.shape = {3000};
  EXPECT_TRUE(FindTensorFileRange(same_shape, 1024).has_value());
  DumpItem safetensors = Item(path);
  safetensors.safetensors_key = "w";
  EXPECT_FALSE(FindTensorFileRange(safetensors, 1024).has_value());
  EXPECT_FALSE(FindTensorFileRange(Item((dir_ / "missing.npy").string()), 1024).has_value());

  // Fortran order (transposed when read) and big-endian (swapped) are not the tensor's bytes.
  for (const char* dict : {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 1500), }",
                           "{'descr': '>f4', 'fortran_order': False, 'shape': (3000,), }"}) {
    std::string header = dict;
    header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
    header.push_back('\n');
    std::string file = "\x93NUMPY\x01";
    file.push_back('\0');
    file.push_back(static_cast<char>(header.size() & 0xff));
    file.push_back(static_cast<char>(header.size() >> 8));
    file += header + std::string(12000, '\0');
    const std::string p = (dir_ / "f.npy").string();
    std::ofstream(p, std::ios::binary) << file;
    EXPECT_FALSE(FindTensorFileRange(Item(p), 1024).has_value()) << dict;
  }
}

// A .pt tensor qualifies when it is one run of bytes (not a strided view), with the dump's shape.
TEST_F(FilePiecesTest, PtTensorsQualifyUnlessStrided) {
  const std::string pt = std::string(PARITY_SOURCE_DIR) + "/tests/data/pt/";
  std::optional<TensorFileRange> r = FindTensorFileRange(Item(pt + "f32.pt"), 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->length, 24u);
  EXPECT_EQ(r->shape, (Shape{2, 3}));
  FilePieces pieces(*r, kStatsPieceBytes, 2);
  pieces.Fill();
  FilePieces::Piece p;
  bool more = false;
  ASSERT_TRUE(pieces.Next(&p, &more).ok());
  ASSERT_TRUE(more);
  float first = 0;
  std::memcpy(&first, p.bytes.data(), 4);
  EXPECT_EQ(first, 1.0f);
  EXPECT_FALSE(FindTensorFileRange(Item(pt + "f32.pt"), 25).has_value());
  EXPECT_FALSE(FindTensorFileRange(Item(pt + "transposed.pt"), 1).has_value());
  DumpItem other = Item(pt + "f32.pt");
  other.has_shape = true;
  other.shape = {6};
  EXPECT_FALSE(FindTensorFileRange(other, 1).has_value());
  DumpItem keyed = Item(pt + "state_dict.pt");
  keyed.pt_key = "weight";
  EXPECT_TRUE(FindTensorFileRange(keyed, 1).has_value());
}

TEST_F(FilePiecesTest, PiecesAreTheBytesInOrderWithTheWholeCrcAndStatistics) {
  Tensor t;
  const int64_t n = 5 * 2048 + 7;  // ragged last piece
  const std::string path = WriteNpy("a.npy", n, &t);
  std::optional<TensorFileRange> r = FindTensorFileRange(Item(path), 1);
  ASSERT_TRUE(r.has_value());
  FilePieces pieces(*r, kStatsPieceBytes, 3, /*stats=*/true);
  std::thread filler([&] { pieces.Fill(); });
  std::string got;
  int count = 0;
  FilePieces::Piece last;
  while (true) {
    FilePieces::Piece p;
    bool more = false;
    ASSERT_TRUE(pieces.Next(&p, &more).ok());
    if (!more) break;
    EXPECT_EQ(p.offset, got.size());
    EXPECT_LE(p.bytes.size(), kStatsPieceBytes);
    EXPECT_NE(p.owner, nullptr);
    EXPECT_EQ(p.crc32.has_value(), got.size() + p.bytes.size() == r->length);
    got.append(p.bytes.data(), p.bytes.size());
    last = std::move(p);
    ++count;
  }
  filler.join();
  EXPECT_EQ(count, 6);
  EXPECT_EQ(got, std::string(t.bytes()));
  ASSERT_TRUE(last.crc32.has_value());
  EXPECT_EQ(*last.crc32, Crc32(0, t.data(), t.bytes().size()));
  ASSERT_TRUE(last.stats.has_value());
  const TensorStats whole = ComputeStats(t);
  EXPECT_EQ(last.stats->max, whole.max);
  EXPECT_EQ(last.stats->min, whole.min);
  EXPECT_EQ(std::memcmp(&*last.stats->mean, &*whole.mean, 8), 0);
  EXPECT_EQ(std::memcmp(&*last.stats->norm, &*whole.norm, 8), 0);

  uint32_t crc = 0;
  std::string sha;
  ASSERT_TRUE(ScanTensorFileRange(*r, 4096, &crc, &sha).ok());
  EXPECT_EQ(crc, *last.crc32);
  EXPECT_EQ(sha, Sha256Hex(t.bytes()));
}

// Fill reads no further than `max_queued` pieces ahead of the sender; Cancel releases it.
TEST_F(FilePiecesTest, ReadingWaitsForTheSenderAndStopsWhenCancelled) {
  const std::string path = WriteNpy("a.npy", 64 * 1024);  // 32 pieces of 8 KiB
  std::optional<TensorFileRange> r = FindTensorFileRange(Item(path), 1);
  ASSERT_TRUE(r.has_value());
  FilePieces pieces(*r, kStatsPieceBytes, 2);
  std::atomic<bool> filled{false};
  std::thread filler([&] {
    pieces.Fill();
    filled = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(filled.load());  // waiting: two pieces queued, none taken
  FilePieces::Piece p;
  bool more = false;
  ASSERT_TRUE(pieces.Next(&p, &more).ok());
  ASSERT_TRUE(more);
  pieces.Cancel();
  filler.join();
  // What was read comes out, then the cancellation, and nothing after it.
  absl::Status s;
  int taken = 1;
  while ((s = pieces.Next(&p, &more)).ok() && more) ++taken;
  EXPECT_LE(taken, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
}

// A file that shrinks while it is read ends the pieces with the read's error, naming it.
TEST_F(FilePiecesTest, AFileThatShrinksEndsWithItsError) {
  const std::string path = WriteNpy("a.npy", 64 * 1024);
  std::optional<TensorFileRange> r = FindTensorFileRange(Item(path), 1);
  ASSERT_TRUE(r.has_value());
  fs::resize_file(path, r->offset + r->length / 2 + 100);
  FilePieces pieces(*r, kStatsPieceBytes, 64);
  pieces.Fill();
  FilePieces::Piece p;
  bool more = false;
  uint64_t bytes = 0;
  absl::Status s;
  while ((s = pieces.Next(&p, &more)).ok() && more) bytes += p.bytes.size();
  EXPECT_EQ(bytes, r->length / 2);  // the whole pieces before the end
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), absl::string_view::npos) << s;
  uint32_t crc = 0;
  EXPECT_FALSE(ScanTensorFileRange(*r, 4096, &crc, nullptr).ok());
}

}  // namespace
}  // namespace parity
