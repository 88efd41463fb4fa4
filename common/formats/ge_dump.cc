#include "common/formats/ge_dump.h"

#include <vector>

#include "common/formats/device_format.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_join.h"
#include "common/base/file_util.h"
#include "common/base/status_macros.h"

namespace parity {
namespace {

constexpr uint64_t kMaxHeader = 64u << 20;

// A protobuf wire-format reader over one message.
class Wire {
 public:
  Wire(absl::string_view data, const std::string& origin) : d_(data), origin_(origin) {}
  bool done() const { return p_ >= d_.size(); }

  absl::Status Next(uint32_t* field, uint32_t* type) {
    uint64_t key;
    PARITY_RETURN_IF_ERROR(Varint(&key));
    *field = static_cast<uint32_t>(key >> 3);
    *type = static_cast<uint32_t>(key & 7);
    return absl::OkStatus();
  }
  absl::Status Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= d_.size()) return Err("truncated varint");
      const uint8_t b = static_cast<uint8_t>(d_[p_++]);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return absl::OkStatus();
    }
    return Err("varint longer than 10 bytes");
  }
  absl::Status Bytes(absl::string_view* out) {
    uint64_t n;
    PARITY_RETURN_IF_ERROR(Varint(&n));
    if (n > d_.size() - p_) return Err("length-delimited field runs past its message");
    *out = d_.substr(p_, n);
    p_ += n;
    return absl::OkStatus();
  }
  absl::Status Skip(uint32_t type) {
    uint64_t v;
    absl::string_view s;
    switch (type) {
      case 0: return Varint(&v);
      case 1: return Advance(8);
      case 2: return Bytes(&s);
      case 5: return Advance(4);
      default: return Err(absl::StrCat("unsupported wire type ", type));
    }
  }
  absl::Status Err(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ": bad GE dump header: ", what));
  }

 private:
  absl::Status Advance(size_t n) {
    if (n > d_.size() - p_) return Err("truncated fixed-width field");
    p_ += n;
    return absl::OkStatus();
  }
  absl::string_view d_;
  const std::string& origin_;
  size_t p_ = 0;
};

struct RawTensor {
  uint64_t data_type = 0, format = 2, size = 0;
  Shape shape;
  Shape original_shape;
  bool has_original_shape = false;
  bool has_inline_data = false;
};

absl::Status ParseShape(absl::string_view msg, const std::string& origin, Shape* shape) {
  Wire w(msg, origin);
  while (!w.done()) {
    uint32_t f, t;
    PARITY_RETURN_IF_ERROR(w.Next(&f, &t));
    if (f == 1 && t == 0) {
      uint64_t d;
      PARITY_RETURN_IF_ERROR(w.Varint(&d));
      shape->push_back(static_cast<int64_t>(d));
    } else if (f == 1 && t == 2) {  // packed
      absl::string_view packed;
      PARITY_RETURN_IF_ERROR(w.Bytes(&packed));
      Wire pw(packed, origin);
      while (!pw.done()) {
        uint64_t d;
        PARITY_RETURN_IF_ERROR(pw.Varint(&d));
        shape->push_back(static_cast<int64_t>(d));
      }
    } else {
      PARITY_RETURN_IF_ERROR(w.Skip(t));
    }
    if (shape->size() > static_cast<size_t>(kMaxRank)) return w.Err("shape rank above 8");
  }
  return absl::OkStatus();
}

// OpInput: 1 data_type, 2 format, 3 shape, 4 data, 5 size, 6 original_shape. OpOutput:
// 1 data_type, 2 format, 3 shape, 4 original_op, 5 data, 6 size, 7 original_shape.
absl::Status ParseTensor(absl::string_view msg, bool output, const std::string& origin, RawTensor* t) {
  Wire w(msg, origin);
  const uint32_t data_field = output ? 5 : 4, size_field = output ? 6 : 5, original_field = output ? 7 : 6;
  while (!w.done()) {
    uint32_t f, type;
    PARITY_RETURN_IF_ERROR(w.Next(&f, &type));
    if (f == 1 && type == 0) {
      PARITY_RETURN_IF_ERROR(w.Varint(&t->data_type));
    } else if (f == 2 && type == 0) {
      PARITY_RETURN_IF_ERROR(w.Varint(&t->format));
    } else if (f == 3 && type == 2) {
      absl::string_view s;
      PARITY_RETURN_IF_ERROR(w.Bytes(&s));
      PARITY_RETURN_IF_ERROR(ParseShape(s, origin, &t->shape));
    } else if (f == data_field && type == 2) {
      absl::string_view s;
      PARITY_RETURN_IF_ERROR(w.Bytes(&s));
      if (!s.empty()) t->has_inline_data = true;
    } else if (f == size_field && type == 0) {
      PARITY_RETURN_IF_ERROR(w.Varint(&t->size));
    } else if (f == original_field && type == 2) {
      absl::string_view s;
      PARITY_RETURN_IF_ERROR(w.Bytes(&s));
      t->original_shape.clear();
      PARITY_RETURN_IF_ERROR(ParseShape(s, origin, &t->original_shape));
      t->has_original_shape = true;
    } else {
      PARITY_RETURN_IF_ERROR(w.Skip(type));
    }
  }
  return absl::OkStatus();
}

// toolkit.dumpdata.OutputDataType -> DType.
bool GeDType(uint64_t v, DType* out) {
  switch (v) {
    case 1: *out = DType::kFloat32; return true;
    case 2: *out = DType::kFloat16; return true;
    case 3: *out = DType::kInt8; return true;
    case 4: *out = DType::kUInt8; return true;
    case 5: *out = DType::kInt16; return true;
    case 6: *out = DType::kUInt16; return true;
    case 7: *out = DType::kInt32; return true;
    case 8: *out = DType::kInt64; return true;
    case 9: *out = DType::kUInt32; return true;
    case 10: *out = DType::kUInt64; return true;
    case 11: *out = DType::kBool; return true;
    case 12: *out = DType::kFloat64; return true;
    case 27: *out = DType::kBFloat16; return true;
    default: return false;
  }
}

const char* FormatName(uint64_t f) {
  switch (f) {
    case 5: return "NC1C0HWPAD";
    case 6: return "NHWC1C0";
    case 7: return "FSR_NCHW";
    case 8: return "FRACTAL_DECONV";
    case 9: return "C1HWNC0";
    case 13: return "FRACTAL_Z_C04";
    case 25: return "C1HWNCoC0";
    case 28: return "FRACTAL_ZZ";
    default:
      if (auto d = DeviceFormatOfGe(f)) return DeviceFormatName(*d);
      return "device-specific";
  }
}

// Host layouts whose bytes are the plain row-major tensor of `shape`: NCHW, NHWC, ND, NCDHW,
// NDHWC, and the other non-fractal formats GE reports for host tensors.
bool IsHostFormat(uint64_t f) { return f == 0 || f == 1 || f == 2 || f == 30 || f == 31 || f == 40; }

}  // namespace

absl::StatusOr<GeDump> ParseGeDumpHeader(const std::string& origin, absl::string_view header,
                                         uint64_t data_offset, uint64_t file_size) {
  Wire w(header, origin);
  GeDump dump;
  std::vector<RawTensor> inputs, outputs;
  while (!w.done()) {
    uint32_t f, t;
    PARITY_RETURN_IF_ERROR(w.Next(&f, &t));
    if ((f == 3 || f == 4) && t == 2) {
      absl::string_view msg;
      PARITY_RETURN_IF_ERROR(w.Bytes(&msg));
      RawTensor rt;
      PARITY_RETURN_IF_ERROR(ParseTensor(msg, f == 3, origin, &rt));
      (f == 3 ? outputs : inputs).push_back(std::move(rt));
    } else if (f == 6 && t == 2) {
      absl::string_view name;
      PARITY_RETURN_IF_ERROR(w.Bytes(&name));
      dump.op_name = std::string(name);
    } else {
      PARITY_RETURN_IF_ERROR(w.Skip(t));
    }
  }
  uint64_t offset = data_offset;
  auto add = [&](const RawTensor& rt, Role role, int index) -> absl::Status {
    const std::string what = absl::StrCat(role == Role::kInput ? "input " : "output ", index);
    DType dtype;
    if (!GeDType(rt.data_type, &dtype)) {
      return w.Err(absl::StrCat(what, " has unsupported data_type ", rt.data_type));
    }
    const std::optional<DeviceFormat> device = DeviceFormatOfGe(rt.format);
    if (!IsHostFormat(rt.format) && (!device || !rt.has_original_shape)) {
      return absl::UnimplementedError(absl::StrCat(
          origin, ": ", what, " is in device format ", rt.format, " (", FormatName(rt.format), ")",
          device ? " without the original_shape to convert it to" : ", which is not converted",
          "; dump in ND or convert with CANN's msaccucmp first"));
    }
    if (rt.has_inline_data) return w.Err(absl::StrCat(what, " carries inline data, expected it after the header"));
    PARITY_ASSIGN_OR_RETURN(int64_t numel, CheckedNumel(rt.shape));
    const uint64_t want = static_cast<uint64_t>(numel) * DTypeSize(dtype);
    if (rt.size != want) {
      return w.Err(absl::StrCat(what, " has size ", rt.size, " but shape ", ShapeToString(rt.shape), " of ",
                                DTypeName(dtype), " needs ", want));
    }
    if (device) {
      const absl::Status tiled = CheckDeviceTiling(*device, rt.shape, rt.original_shape);
      if (!tiled.ok()) return w.Err(absl::StrCat(what, ": ", tiled.message()));
    }
    if (rt.size > file_size - offset) {
      return absl::DataLossError(absl::StrCat(origin, ": ", what, " needs ", rt.size, " bytes at offset ",
                                              offset, ", the file has ", file_size));
    }
    GeTensorEntry e{role, index, dtype, device ? rt.original_shape : rt.shape, offset, rt.size};
    if (device) {
      e.device_format = device;
      e.device_shape = rt.shape;
    }
    dump.tensors.push_back(std::move(e));
    offset += rt.size;
    return absl::OkStatus();
  };
  for (size_t i = 0; i < inputs.size(); ++i) PARITY_RETURN_IF_ERROR(add(inputs[i], Role::kInput, static_cast<int>(i)));
  for (size_t i = 0; i < outputs.size(); ++i) PARITY_RETURN_IF_ERROR(add(outputs[i], Role::kOutput, static_cast<int>(i)));
  if (offset != file_size) {
    return w.Err(absl::StrCat(file_size - offset, " bytes after the last tensor are not described"));
  }
  return dump;
}

bool IsGeDumpFileName(absl::string_view filename) {
  const std::vector<absl::string_view> parts = absl::StrSplit(filename, '.');
  if (parts.size() < 5) return false;
  for (size_t i = parts.size() - 3; i < parts.size(); ++i) {
    if (parts[i].empty() || parts[i].find_first_not_of("0123456789") != absl::string_view::npos) return false;
  }
  return true;
}

std::string GeDumpFileOpName(absl::string_view filename) {
  const std::vector<absl::string_view> parts = absl::StrSplit(filename, '.');
  if (parts.size() < 5) return std::string(filename);
  return absl::StrJoin(parts.begin() + 1, parts.end() - 3, ".");
}

absl::StatusOr<GeDump> ReadGeDump(const std::string& path) {
  PARITY_ASSIGN_OR_RETURN(uint64_t size, FileSize(path));
  if (size < 8) return absl::DataLossError(absl::StrCat(path, ": too short for a GE dump (", size, " bytes)"));
  PARITY_ASSIGN_OR_RETURN(std::string prefix, ReadFileRange(path, 0, 8));
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(prefix[i])) << (8 * i);
  if (n > kMaxHeader || n > size - 8) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a GE dump: header length ", n,
                                                   " does not fit the file (", size, " bytes)"));
  }
  PARITY_ASSIGN_OR_RETURN(std::string header, ReadFileRange(path, 8, n));
  return ParseGeDumpHeader(path, header, 8 + n, size);
}

absl::StatusOr<Tensor> ReadGeTensor(const std::string& path, const GeTensorEntry& e) {
  PARITY_ASSIGN_OR_RETURN(std::string data, ReadFileRange(path, e.offset, e.size));
  if (e.device_format) {
    absl::StatusOr<std::string> plain =
        FromDeviceFormat(*e.device_format, e.device_shape, e.shape, DTypeSize(e.dtype), data);
    if (!plain.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", plain.status().message()));
    data = *std::move(plain);
  }
  return Tensor::Make(e.dtype, e.shape, std::move(data));
}

}  // namespace parity
