#include "common/formats/npy.h"

#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"

namespace parity {
namespace {

// Builds a .npy file with the given header dict and data bytes.
std::string MakeNpy(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  if (major == 1) {
    out.push_back(static_cast<char>(header.size() & 0xff));
    out.push_back(static_cast<char>(header.size() >> 8));
  } else {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  }
  return out + header + data;
}

std::string Floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.begin(), s.size());
  return s;
}

TEST(Npy, ReadsVersion1LittleEndian) {
  auto t = ParseNpy(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                            Floats({1, 2, 3, 4})), "x.npy");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kFloat32);
  EXPECT_EQ(t->shape(), (Shape{2, 2}));
  EXPECT_EQ(t->At(3), 4.0);
}

TEST(Npy, ReadsVersions2And3) {
  for (int major : {2, 3}) {
    auto t = ParseNpy(MakeNpy("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }",
                              std::string("\x07\0\0\0\0\0\0\0", 8), major), "x.npy");
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->At(0), 7.0);
  }
}

TEST(Npy, ConvertsBigEndian) {
  auto t = ParseNpy(MakeNpy("{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }",
                            std::string("\0\0\x01\x02", 4)), "x.npy");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->At(0), 258.0);
}

TEST(Npy, TransposesFortranOrder) {
  // Column-major [[1, 2, 3], [4, 5, 6]] is stored as 1 4 2 5 3 6.
  auto t = ParseNpy(MakeNpy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                            Floats({1, 4, 2, 5, 3, 6})), "x.npy");
  ASSERT_TRUE(t.ok()) << t.status();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t->At(i), i + 1.0);
}

TEST(Npy, ZeroDAndEmpty) {
  auto z = ParseNpy(MakeNpy("{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
                            std::string(8, '\0')), "x.npy");
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(z->rank(), 0);
  EXPECT_EQ(z->numel(), 1);
  auto e = ParseNpy(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }", ""), "x.npy");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->numel(), 0);
}

TEST(Npy, RoundTripsEncode) {
  auto t = Tensor::Make(DType::kInt16, {3}, std::string("\x01\0\x02\0\xff\xff", 6));
  ASSERT_TRUE(t.ok());
  auto back = ParseNpy(EncodeNpy(*t), "x.npy");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->bytes(), t->bytes());
  EXPECT_EQ(back->At(2), -1.0);
}

struct BadCase {
  const char* name;
  std::string bytes;
  absl::StatusCode code;
  const char* needle;
};

TEST(Npy, RejectsMalformedFilesWithPreciseErrors) {
  const std::string good_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  std::string bad_magic = MakeNpy(good_dict, Floats({1, 2}));
  bad_magic[1] = 'X';
  std::string lying_len = MakeNpy(good_dict, Floats({1, 2}));
  lying_len[8] = '\xff';
  lying_len[9] = '\x7f';
  const BadCase cases[] = {
      {"truncated", "\x93NUM", absl::StatusCode::kDataLoss, "truncated"},
      {"bad magic", bad_magic, absl::StatusCode::kInvalidArgument, "bad magic"},
      {"version", MakeNpy(good_dict, Floats({1, 2}), 4), absl::StatusCode::kInvalidArgument,
       "format version 4"},
      {"header length lies", lying_len, absl::StatusCode::kDataLoss, "runs past the end"},
      {"data truncated", MakeNpy(good_dict, Floats({1})), absl::StatusCode::kDataLoss,
       "only 4 data bytes follow"},
      {"trailing bytes", MakeNpy(good_dict, Floats({1, 2, 3})), absl::StatusCode::kInvalidArgument,
       "4 unexpected bytes"},
      {"object array",
       MakeNpy("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", std::string(16, '\0')),
       absl::StatusCode::kInvalidArgument, "object arrays"},
      {"complex", MakeNpy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')),
       absl::StatusCode::kInvalidArgument, "complex"},
      {"strings", MakeNpy("{'descr': '<U3', 'fortran_order': False, 'shape': (1,), }", std::string(12, '\0')),
       absl::StatusCode::kInvalidArgument, "string arrays"},
      {"structured",
       MakeNpy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", Floats({1})),
       absl::StatusCode::kInvalidArgument, "structured"},
      {"negative dim", MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", ""),
       absl::StatusCode::kInvalidArgument, "negative dimension -2"},
      {"overflowing dims",
       MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", ""),
       absl::StatusCode::kInvalidArgument, "overflows"},
      {"huge dim", MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", ""),
       absl::StatusCode::kInvalidArgument, "overflows int64"},
      {"rank 9", MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", Floats({1})),
       absl::StatusCode::kInvalidArgument, "rank 9 exceeds"},
      {"missing key", MakeNpy("{'descr': '<f4', 'shape': (1,), }", Floats({1})),
       absl::StatusCode::kInvalidArgument, "lacks one of"},
      {"extra key", MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", Floats({1})),
       absl::StatusCode::kInvalidArgument, "unexpected header key 'x'"},
      {"no byte order", MakeNpy("{'descr': 'f4', 'fortran_order': False, 'shape': (1,), }", Floats({1})),
       absl::StatusCode::kInvalidArgument, "no byte-order mark"},
      {"not a dict", MakeNpy("['descr']", ""), absl::StatusCode::kInvalidArgument, "does not start with"},
  };
  for (const BadCase& c : cases) {
    auto t = ParseNpy(c.bytes, "bad.npy");
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_EQ(t.status().code(), c.code) << c.name << ": " << t.status();
    EXPECT_NE(t.status().message().find(c.needle), std::string::npos)
        << c.name << ": '" << t.status().message() << "' lacks '" << c.needle << "'";
    EXPECT_NE(t.status().message().find("bad.npy"), std::string::npos) << c.name;
  }
}

}  // namespace
}  // namespace parity
