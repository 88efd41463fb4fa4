// Ascend device formats: the tiled layouts a GE dump stores a tensor in, and their conversion to
// the row-major tensor of the op's original shape. Definitions (C0 and N0 are the device shape's
// block sizes, the blocks zero-padded where C, N or M is not a multiple):
//   NC1HWC0, NC1HWC0_C04  [N, C1, H, W, C0]       from NCHW [N, C, H, W] or NHWC [N, H, W, C]
//   NDC1HWC0              [N, D, C1, H, W, C0]    from NCDHW [N, C, D, H, W]
//   FRACTAL_Z             [C1*H*W, N1, N0, C0]    from NCHW [N, C, H, W] (convolution weights)
//   FRACTAL_Z_3D          [D*C1*H*W, N1, N0, C0]  from NCDHW [N, C, D, H, W]
//   FRACTAL_NZ            [..., N1, M1, M0, N0]   from ND [..., M, N] ([N] as [1, N])
// where C1 = ceil(C / C0), N1 = ceil(N / N0), M1 = ceil(M / M0).
#ifndef PARITY_COMMON_FORMATS_DEVICE_FORMAT_H_
#define PARITY_COMMON_FORMATS_DEVICE_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/base/tensor.h"

namespace parity {

enum class DeviceFormat { kNC1HWC0, kNC1HWC0_C04, kNDC1HWC0, kFractalZ, kFractalZ3D, kFractalNZ };

// The device format of a GE dump's format number (toolkit.dumpdata.OutputFormat), if it is one
// these functions convert.
std::optional<DeviceFormat> DeviceFormatOfGe(uint64_t ge_format);
const char* DeviceFormatName(DeviceFormat f);

// OK when `device_shape` is the format's tiling of `origin_shape`; else InvalidArgument naming
// both shapes.
absl::Status CheckDeviceTiling(DeviceFormat format, const Shape& device_shape, const Shape& origin_shape);

// The row-major bytes of `origin_shape` from `data`, a tensor of `device_shape` in `format` with
// elements of `element_size` bytes. InvalidArgument (naming both shapes) when the device shape is
// not the format's tiling of the origin shape or `data` is not its size.
absl::StatusOr<std::string> FromDeviceFormat(DeviceFormat format, const Shape& device_shape,
                                             const Shape& origin_shape, size_t element_size,
                                             absl::string_view data);

}  // namespace parity

#endif  // PARITY_COMMON_FORMATS_DEVICE_FORMAT_H_
