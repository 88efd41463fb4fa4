// Ascend GE dump files (fixtures: tests/data/make_ge.py).
#include "common/formats/ge_dump.h"

#include "gtest/gtest.h"
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

}  // namespace
}  // namespace parity
