#include "common/formats/device_format.h"

#include <cstring>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace parity {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0); }  // a >= 0, b > 0; no overflow

// Where each element of the origin tensor sits in the device tensor: the offset (in elements) of
// origin coordinates `c` (row-major over the origin shape).
using OffsetFn = std::function<int64_t(const int64_t* c)>;

// The device shape the format gives `origin` with the block sizes of `device` (its C0, N0, M0),
// and how to find each origin element in it; an error when `origin` does not fit the format.
absl::StatusOr<std::pair<Shape, OffsetFn>> Tiling(DeviceFormat f, const Shape& device, const Shape& o) {
  auto bad = [&](const char* why) {
    return absl::InvalidArgumentError(absl::StrCat(DeviceFormatName(f), " tensor of shape ", ShapeToString(device),
                                                   " cannot hold original shape ", ShapeToString(o), ": ", why));
  };
  switch (f) {
    case DeviceFormat::kNC1HWC0:
    case DeviceFormat::kNC1HWC0_C04: {
      if (device.size() != 5 || o.size() != 4) return bad("expected 5 and 4 dimensions");
      const int64_t c0 = device[4];
      // NCHW unless only NHWC fits the device's N, H and W.
      const bool nhwc = !(o[2] == device[2] && o[3] == device[3]) && o[1] == device[2] && o[2] == device[3];
      const int64_t n = o[0], c = nhwc ? o[3] : o[1], h = nhwc ? o[1] : o[2], w = nhwc ? o[2] : o[3];
      const int64_t c1 = CeilDiv(c, c0);
      Shape want{n, c1, h, w, c0};
      return std::make_pair(want, OffsetFn([=](const int64_t* x) {
        const int64_t cc = nhwc ? x[3] : x[1], hh = nhwc ? x[1] : x[2], ww = nhwc ? x[2] : x[3];
        return (((x[0] * c1 + cc / c0) * h + hh) * w + ww) * c0 + cc % c0;
      }));
    }
    case DeviceFormat::kNDC1HWC0: {
      if (device.size() != 6 || o.size() != 5) return bad("expected 6 and 5 dimensions");
      const int64_t c0 = device[5], n = o[0], c = o[1], d = o[2], h = o[3], w = o[4], c1 = CeilDiv(c, c0);
      return std::make_pair(Shape{n, d, c1, h, w, c0}, OffsetFn([=](const int64_t* x) {
        return ((((x[0] * d + x[2]) * c1 + x[1] / c0) * h + x[3]) * w + x[4]) * c0 + x[1] % c0;
      }));
    }
    case DeviceFormat::kFractalZ:
    case DeviceFormat::kFractalZ3D: {
      const bool three_d = f == DeviceFormat::kFractalZ3D;
      if (device.size() != 4 || o.size() != (three_d ? 5u : 4u)) return bad("expected 4 dimensions and NC(D)HW");
      const int64_t n0 = device[2], c0 = device[3], n = o[0], c = o[1];
      const int64_t d = three_d ? o[2] : 1, h = o[three_d ? 3 : 2], w = o[three_d ? 4 : 3];
      const int64_t c1 = CeilDiv(c, c0), n1 = CeilDiv(n, n0);
      return std::make_pair(Shape{d * c1 * h * w, n1, n0, c0}, OffsetFn([=](const int64_t* x) {
        const int64_t dd = three_d ? x[2] : 0, hh = x[three_d ? 3 : 2], ww = x[three_d ? 4 : 3];
        const int64_t row = ((dd * c1 + x[1] / c0) * h + hh) * w + ww;
        return ((row * n1 + x[0] / n0) * n0 + x[0] % n0) * c0 + x[1] % c0;
      }));
    }
    case DeviceFormat::kFractalNZ: {
      if (device.size() < 4 || o.empty() || device.size() != std::max<size_t>(o.size(), 2) + 2) {
        return bad("expected [..., N1, M1, M0, N0] for [..., M, N]");
      }
      const size_t r = o.size();
      const int64_t m = r >= 2 ? o[r - 2] : 1, n = o[r - 1];
      const int64_t m0 = device[device.size() - 2], n0 = device.back(), m1 = CeilDiv(m, m0), n1 = CeilDiv(n, n0);
      Shape want(o.begin(), o.end() - std::min<size_t>(r, 2));
      for (int64_t v : {n1, m1, m0, n0}) want.push_back(v);
      const int64_t block = n1 * m1 * m0 * n0;
      return std::make_pair(want, OffsetFn([=](const int64_t* x) {
        int64_t batch = 0;
        for (size_t i = 0; i + 2 < r; ++i) batch = batch * o[i] + x[i];
        const int64_t mm = r >= 2 ? x[r - 2] : 0, nn = x[r - 1];
        return batch * block + (((nn / n0) * m1 + mm / m0) * m0 + mm % m0) * n0 + nn % n0;
      }));
    }
  }
  return bad("unknown format");
}

}  // namespace

std::optional<DeviceFormat> DeviceFormatOfGe(uint64_t ge_format) {
  switch (ge_format) {
    case 3: return DeviceFormat::kNC1HWC0;
    case 4: return DeviceFormat::kFractalZ;
    case 12: return DeviceFormat::kNC1HWC0_C04;
    case 29: return DeviceFormat::kFractalNZ;
    case 32: return DeviceFormat::kNDC1HWC0;
    case 33: return DeviceFormat::kFractalZ3D;
    default: return std::nullopt;
  }
}

const char* DeviceFormatName(DeviceFormat f) {
  switch (f) {
    case DeviceFormat::kNC1HWC0: return "NC1HWC0";
    case DeviceFormat::kNC1HWC0_C04: return "NC1HWC0_C04";
    case DeviceFormat::kNDC1HWC0: return "NDC1HWC0";
    case DeviceFormat::kFractalZ: return "FRACTAL_Z";
    case DeviceFormat::kFractalZ3D: return "FRACTAL_Z_3D";
    case DeviceFormat::kFractalNZ: return "FRACTAL_NZ";
  }
  return "?";
}

namespace {

// The tiling of `origin_shape` when `device_shape` is exactly it (with both shapes' element
// counts checked), else why not.
absl::StatusOr<std::pair<Shape, OffsetFn>> CheckedTiling(DeviceFormat format, const Shape& device_shape,
                                                          const Shape& origin_shape) {
  for (int64_t v : device_shape) {
    if (v <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("device shape ", ShapeToString(device_shape), " has an empty or negative dimension"));
    }
  }
  PARITY_RETURN_IF_ERROR(CheckedNumel(origin_shape).status());
  PARITY_RETURN_IF_ERROR(CheckedNumel(device_shape).status());
  PARITY_ASSIGN_OR_RETURN(auto tiling, Tiling(format, device_shape, origin_shape));
  if (tiling.first != device_shape) {
    return absl::InvalidArgumentError(absl::StrCat(DeviceFormatName(format), " tensor of shape ",
                                                   ShapeToString(device_shape), " is not the tiling of original shape ",
                                                   ShapeToString(origin_shape), " (", ShapeToString(tiling.first), ")"));
  }
  return tiling;
}

}  // namespace

absl::Status CheckDeviceTiling(DeviceFormat format, const Shape& device_shape, const Shape& origin_shape) {
  return CheckedTiling(format, device_shape, origin_shape).status();
}

absl::StatusOr<std::string> FromDeviceFormat(DeviceFormat format, const Shape& device_shape,
                                             const Shape& origin_shape, size_t element_size,
                                             absl::string_view data) {
  PARITY_ASSIGN_OR_RETURN(auto tiling, CheckedTiling(format, device_shape, origin_shape));
  const int64_t origin_numel = CheckedNumel(origin_shape).value();
  const int64_t device_numel = CheckedNumel(device_shape).value();
  if (data.size() != static_cast<uint64_t>(device_numel) * element_size) {
    return absl::InvalidArgumentError(absl::StrCat(DeviceFormatName(format), " tensor of shape ", ShapeToString(device_shape),
                                                   " needs ", device_numel * static_cast<int64_t>(element_size),
                                                   " bytes, has ", data.size()));
  }
  std::string out(static_cast<size_t>(origin_numel) * element_size, '\0');
  std::vector<int64_t> c(origin_shape.size(), 0);
  for (int64_t i = 0; i < origin_numel; ++i) {
    const int64_t from = tiling.second(c.data());
    std::memcpy(&out[static_cast<size_t>(i) * element_size], data.data() + from * static_cast<int64_t>(element_size), element_size);
    for (size_t d = c.size(); d-- > 0;) {  // the next coordinates, row-major
      if (++c[d] < origin_shape[d]) break;
      c[d] = 0;
    }
  }
  return out;
}

}  // namespace parity
