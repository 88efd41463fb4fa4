// Ascend GE dump files (fixtures: tests/data/make_ge.py).
#include "common/formats/ge_dump.h"

#include <cstring>

#include "gtest/gtest.h"
#include "common/base/file_util.h"
#include "common/formats/dump.h"

namespace parity {
namespace {

const std::string kDir = std::string(PARITY_SOURCE_DIR) + "/tests/data/ge/";

TEST(Ge, ReadsInputsThenOutputsWithTheirShapesAndDtypes) {
  auto ge = ReadGeDump(kDir + "golden/Add.add_1.3.2.1700000000000001");
  ASSERT_TRUE(ge.ok()) << ge.status();
  EXPECT_EQ(ge->op_name, "add_1");
  ASSERT_EQ(ge->tensors.size(), 3u);
  EXPECT_EQ(ge->tensors[0].role, Role::kInput);
  EXPECT_EQ(ge->tensors[2].role, Role::kOutput);
  EXPECT_EQ(ge->tensors[2].shape, (Shape{2, 3}));
  auto out = ReadGeTensor(kDir + "golden/Add.add_1.3.2.1700000000000001", ge->tensors[2]);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->At(5), 6.5);
  auto cast = ReadGeDump(kDir + "golden/Cast.cast_2.4.2.1700000000000002");
  ASSERT_TRUE(cast.ok()) << cast.status();
  EXPECT_EQ(cast->tensors[1].dtype, DType::kBFloat16);
}

TEST(Ge, DirectoriesBecomeDumpsNamedByOpAndOccurrence) {
  auto d = OpenDump(kDir + "target");
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->items.size(), 5u);
  EXPECT_EQ(d->items[0].name, "add_1.0.input.0");
  EXPECT_EQ(d->items[2].name, "add_1.0.output.0");
  EXPECT_EQ(d->items[2].op_type, "Add");
  EXPECT_EQ(d->items[2].role, Role::kOutput);
  auto t = LoadItemTensor(d->items[2]);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->At(5), 6.75);
  auto bf = LoadItemTensor(d->items[4]);
  ASSERT_TRUE(bf.ok());
  EXPECT_EQ(bf->At(1), -2.0);
}

TEST(Ge, RefusesDeviceFormatsAndInconsistentFilesPrecisely) {
  struct Case {
    const char* file;
    absl::StatusCode code;
    const char* needle;
  } cases[] = {
      {"Conv2D.conv.1.2.1700000000000003", absl::StatusCode::kUnimplemented, "device format 3 (NC1HWC0)"},
      {"Add.wrong_size.1.2.1700000000000004", absl::StatusCode::kInvalidArgument, "has size 20 but shape [2, 3]"},
      {"Add.truncated.1.2.1700000000000005", absl::StatusCode::kDataLoss, "needs 16 bytes"},
      {"Add.lying_header.1.2.1700000000000006", absl::StatusCode::kInvalidArgument, "does not fit the file"},
  };
  for (const Case& c : cases) {
    auto ge = ReadGeDump(kDir + "bad/" + c.file);
    ASSERT_FALSE(ge.ok()) << c.file;
    EXPECT_EQ(ge.status().code(), c.code) << ge.status();
    EXPECT_NE(ge.status().message().find(c.needle), std::string::npos) << ge.status();
  }
  // Garbage protobuf.
  auto g = ParseGeDumpHeader("x", std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11), 19, 19);
  EXPECT_FALSE(g.ok());
}

// Protobuf wire format, enough to write a DumpData header by hand.
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string Field(uint32_t f, uint64_t v) { return Varint(f << 3) + Varint(v); }
std::string Field(uint32_t f, const std::string& bytes) { return Varint((f << 3) | 2) + Varint(bytes.size()) + bytes; }
std::string ShapeMsg(const Shape& s) {
  std::string out;
  for (int64_t d : s) out += Field(1, static_cast<uint64_t>(d));
  return out;
}

// An NC1HWC0 output with its original_shape is read as the NCHW tensor; one without it is
// refused as before.
TEST(Ge, ConvertsADeviceFormatToTheOriginalShape) {
  const Shape device{1, 2, 2, 2, 16}, origin{1, 19, 2, 2};
  std::string data(1 * 2 * 2 * 2 * 16 * 4, '\0');
  for (int64_t c = 0; c < 19; ++c) {
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t w = 0; w < 2; ++w) {
        const float v = static_cast<float>(((c * 2 + h) * 2 + w) + 1);
        const int64_t at = (((c / 16) * 2 + h) * 2 + w) * 16 + c % 16;
        std::memcpy(&data[static_cast<size_t>(at) * 4], &v, 4);
      }
    }
  }
  const std::string out = Field(1, 1) + Field(2, 3) + Field(3, ShapeMsg(device)) + Field(6, data.size()) +
                          Field(7, ShapeMsg(origin));
  const std::string header = Field(3, out) + Field(6, std::string("conv_1"));
  const std::string path = ::testing::TempDir() + "/Conv2D.conv_1.1.2.1700000000000009";
  {
    std::string file;
    for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
    file += header + data;
    ASSERT_TRUE(WriteStringToFile(path, file).ok());
  }
  auto ge = ReadGeDump(path);
  ASSERT_TRUE(ge.ok()) << ge.status();
  ASSERT_EQ(ge->tensors.size(), 1u);
  EXPECT_EQ(ge->tensors[0].shape, origin);
  EXPECT_EQ(ge->tensors[0].device_shape, device);
  // An original shape the stored shape is not the tiling of is refused when the header is read.
  const std::string bad_out = Field(1, 1) + Field(2, 3) + Field(3, ShapeMsg(device)) + Field(6, data.size()) +
                              Field(7, ShapeMsg({1, 40, 2, 2}));
  auto bad = ParseGeDumpHeader("bad", Field(3, bad_out), 0, data.size());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not the tiling of original shape [1, 40, 2, 2]"), std::string::npos)
      << bad.status();
  auto t = ReadGeTensor(path, ge->tensors[0]);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), origin);
  for (int64_t i = 0; i < 19 * 4; ++i) EXPECT_EQ(t->At(i), static_cast<double>(i + 1)) << i;
}

}  // namespace
}  // namespace parity
