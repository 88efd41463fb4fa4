// Device formats from their definitions: each test packs a known array into the format with its
// own loops (device position -> original element, zero padding), written apart from the reader
// (which maps the other way), and checks the reader gives the array back exactly, for channel,
// N and M counts that are not multiples of the block.
#include "common/formats/device_format.h"

#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace parity {
namespace {

// The origin tensor: float32 values 1, 2, 3, ... (none zero, so padding cannot pass for data).
std::string Origin(const Shape& shape) {
  const int64_t n = CheckedNumel(shape).value();
  std::string out(static_cast<size_t>(n) * 4, '\0');
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(i + 1);
    std::memcpy(&out[static_cast<size_t>(i) * 4], &v, 4);
  }
  return out;
}

int64_t Linear(const Shape& shape, const std::vector<int64_t>& c) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + c[d];
  return i;
}

// Packs `origin` into `device`: `where` maps device coordinates to origin coordinates, or to
// nothing for a padding position (stored as zero).
std::string Pack(const Shape& device, const Shape& origin, const std::string& data,
                 const std::function<std::optional<std::vector<int64_t>>(const std::vector<int64_t>&)>& where) {
  const int64_t n = CheckedNumel(device).value();
  std::string out(static_cast<size_t>(n) * 4, '\0');
  std::vector<int64_t> c(device.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    if (auto o = where(c)) {
      bool inside = true;
      for (size_t d = 0; d < o->size(); ++d) inside = inside && (*o)[d] < origin[d];
      if (inside) std::memcpy(&out[static_cast<size_t>(i) * 4], &data[static_cast<size_t>(Linear(origin, *o)) * 4], 4);
    }
    for (size_t d = c.size(); d-- > 0;) {
      if (++c[d] < device[d]) break;
      c[d] = 0;
    }
  }
  return out;
}

void ExpectRoundTrip(DeviceFormat f, const Shape& device, const Shape& origin,
                     const std::function<std::optional<std::vector<int64_t>>(const std::vector<int64_t>&)>& where) {
  const std::string data = Origin(origin);
  const std::string packed = Pack(device, origin, data, where);
  auto back = FromDeviceFormat(f, device, origin, 4, packed);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == data) << DeviceFormatName(f) << " " << ShapeToString(origin);
}

TEST(DeviceFormat, Nc1hwc0FromNchwAndNhwc) {
  // NCHW [2, 19, 3, 5], C0 16: C1 2, channels 19..31 padding.
  ExpectRoundTrip(DeviceFormat::kNC1HWC0, {2, 2, 3, 5, 16}, {2, 19, 3, 5}, [](const std::vector<int64_t>& d) {
    return std::vector<int64_t>{d[0], d[1] * 16 + d[4], d[2], d[3]};
  });
  // NHWC [2, 3, 5, 19]: the same device layout, the origin's channel last.
  ExpectRoundTrip(DeviceFormat::kNC1HWC0, {2, 2, 3, 5, 16}, {2, 3, 5, 19}, [](const std::vector<int64_t>& d) {
    return std::vector<int64_t>{d[0], d[2], d[3], d[1] * 16 + d[4]};
  });
  // C04: C0 4, three channels.
  ExpectRoundTrip(DeviceFormat::kNC1HWC0_C04, {1, 1, 4, 4, 4}, {1, 3, 4, 4}, [](const std::vector<int64_t>& d) {
    return std::vector<int64_t>{d[0], d[1] * 4 + d[4], d[2], d[3]};
  });
}

TEST(DeviceFormat, Ndc1hwc0FromNcdhw) {
  ExpectRoundTrip(DeviceFormat::kNDC1HWC0, {2, 3, 2, 4, 5, 16}, {2, 19, 3, 4, 5}, [](const std::vector<int64_t>& d) {
    return std::vector<int64_t>{d[0], d[2] * 16 + d[5], d[1], d[3], d[4]};
  });
}

TEST(DeviceFormat, FractalZFromConvolutionWeights) {
  // NCHW [33, 19, 3, 3]: C1 2, N1 3, rows C1*H*W = 18.
  ExpectRoundTrip(DeviceFormat::kFractalZ, {18, 3, 16, 16}, {33, 19, 3, 3}, [](const std::vector<int64_t>& d) {
    const int64_t c1 = d[0] / 9, h = d[0] / 3 % 3, w = d[0] % 3;
    return std::vector<int64_t>{d[1] * 16 + d[2], c1 * 16 + d[3], h, w};
  });
  // FRACTAL_Z_3D, NCDHW [17, 5, 2, 3, 3]: rows D*C1*H*W = 2*1*3*3, N1 2.
  ExpectRoundTrip(DeviceFormat::kFractalZ3D, {18, 2, 16, 16}, {17, 5, 2, 3, 3}, [](const std::vector<int64_t>& d) {
    const int64_t dd = d[0] / 9, h = d[0] / 3 % 3, w = d[0] % 3;  // C1 is 1
    return std::vector<int64_t>{d[1] * 16 + d[2], d[3], dd, h, w};
  });
}

TEST(DeviceFormat, FractalNzFromMatrices) {
  // [2, 37, 21]: N1 2, M1 3, a batch of two.
  ExpectRoundTrip(DeviceFormat::kFractalNZ, {2, 2, 3, 16, 16}, {2, 37, 21}, [](const std::vector<int64_t>& d) {
    return std::vector<int64_t>{d[0], d[2] * 16 + d[3], d[1] * 16 + d[4]};
  });
  // A vector [21] is one row.
  ExpectRoundTrip(DeviceFormat::kFractalNZ, {2, 1, 16, 16}, {21}, [](const std::vector<int64_t>& d) -> std::optional<std::vector<int64_t>> {
    if (d[2] != 0) return std::nullopt;
    return std::vector<int64_t>{d[0] * 16 + d[3]};
  });
}

TEST(DeviceFormat, ShapesThatAreNotTheTilingAreRefusedNamingBoth) {
  const std::string data(2 * 2 * 3 * 5 * 16 * 4, '\0');
  auto wrong_c1 = FromDeviceFormat(DeviceFormat::kNC1HWC0, {2, 3, 3, 5, 16}, {2, 19, 3, 5}, 4, data);
  ASSERT_FALSE(wrong_c1.ok());
  EXPECT_EQ(wrong_c1.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_c1.status().message().find("[2, 3, 3, 5, 16]"), std::string::npos) << wrong_c1.status();
  EXPECT_NE(wrong_c1.status().message().find("[2, 19, 3, 5]"), std::string::npos) << wrong_c1.status();
  auto short_data = FromDeviceFormat(DeviceFormat::kNC1HWC0, {2, 2, 3, 5, 16}, {2, 19, 3, 5}, 4, data.substr(4));
  ASSERT_FALSE(short_data.ok());
  EXPECT_NE(short_data.status().message().find("needs 3840 bytes"), std::string::npos) << short_data.status();
  auto zero_block = FromDeviceFormat(DeviceFormat::kFractalNZ, {2, 1, 16, 0}, {21}, 4, "");
  EXPECT_FALSE(zero_block.ok());
  auto rank = FromDeviceFormat(DeviceFormat::kFractalZ, {18, 3, 16, 16}, {33, 19, 9}, 4, data);
  EXPECT_FALSE(rank.ok());
  EXPECT_EQ(DeviceFormatOfGe(3), DeviceFormat::kNC1HWC0);
  EXPECT_EQ(DeviceFormatOfGe(12), DeviceFormat::kNC1HWC0_C04);
  EXPECT_EQ(DeviceFormatOfGe(2), std::nullopt);  // ND is a host format
}

}  // namespace
}  // namespace parity
