#include "common/formats/safetensors.h"

#include <filesystem>

#include "gtest/gtest.h"
#include "common/base/file_util.h"

namespace parity {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (std::string("parity_st_") + std::to_string(::getpid()) + "_" + name)).string();
}

std::string WithHeader(const std::string& header, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return out + header + data;
}

TEST(Safetensors, RoundTrip) {
  Tensor a = *Tensor::Make(DType::kFloat32, {2}, std::string("\0\0\x80\x3f\0\0\0\x40", 8));
  Tensor b = *Tensor::Make(DType::kBFloat16, {1, 1}, std::string("\x80\x3f", 2));
  const std::string path = TempPath("rt.safetensors");
  ASSERT_TRUE(WriteStringToFile(path, EncodeSafetensors({{"w", a}, {"b", b}})).ok());
  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->entries().size(), 2u);
  EXPECT_EQ(f->entries()[0].name, "w");
  auto rb = f->Read(f->entries()[1]);
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(rb->dtype(), DType::kBFloat16);
  EXPECT_EQ(rb->At(0), 1.0);
  std::filesystem::remove(path);
}

TEST(Safetensors, RejectsBadHeaders) {
  struct Case {
    const char* header;
    uint64_t data;
    const char* needle;
  } cases[] = {
      {"[]", 0, "not a JSON object"},
      {"{\"a\": 3}", 0, "'a' is not an object"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, "needs string 'dtype'"},
      {"{\"a\": {\"dtype\": \"C64\", \"shape\": [1], \"data_offsets\": [0, 8]}}", 8, "unsupported dtype 'C64'"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 4, "spans 4 bytes but shape [2]"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 8]}}", 4, "ends at byte 8"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4, "negative"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 0]}}", 4, "0 <= begin <= end"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
       " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [2, 6]}}", 6, "overlaps"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8, "hole of 4 bytes"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 12, "8 bytes after the last"},
      {"{\"a\": ", 0, "JSON parse error"},
  };
  for (const Case& c : cases) {
    auto f = SafetensorsFile::FromHeader("m.safetensors", c.header, 8 + std::string(c.header).size(),
                                         8 + std::string(c.header).size() + c.data);
    ASSERT_FALSE(f.ok()) << c.header;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(f.status().message().find(c.needle), std::string::npos) << f.status();
    EXPECT_NE(f.status().message().find("m.safetensors"), std::string::npos);
  }
}

TEST(Safetensors, RejectsTruncatedFiles) {
  const std::string path = TempPath("trunc.safetensors");
  ASSERT_TRUE(WriteStringToFile(path, "\x05\0\0").ok());
  auto f = SafetensorsFile::Open(path);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss) << f.status();
  ASSERT_TRUE(WriteStringToFile(path, WithHeader("{}", "").substr(0, 8) + "{").ok());
  f = SafetensorsFile::Open(path);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss) << f.status();
  EXPECT_NE(f.status().message().find("runs past the end"), std::string::npos);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace parity
