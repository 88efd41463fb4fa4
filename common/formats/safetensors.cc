#include "common/formats/safetensors.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/file_util.h"
#include "common/base/json.h"

namespace parity {
namespace {
constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit

const char* SafetensorsCode(DType t) {
  switch (t) {
    case DType::kBool: return "BOOL";
    case DType::kUInt8: return "U8";
    case DType::kInt8: return "I8";
    case DType::kInt16: return "I16";
    case DType::kUInt16: return "U16";
    case DType::kInt32: return "I32";
    case DType::kUInt32: return "U32";
    case DType::kInt64: return "I64";
    case DType::kUInt64: return "U64";
    case DType::kFloat16: return "F16";
    case DType::kBFloat16: return "BF16";
    case DType::kFloat32: return "F32";
    case DType::kFloat64: return "F64";
    case DType::kFloat8E4M3FN: return "F8_E4M3";
    case DType::kFloat8E5M2: return "F8_E5M2";
  }
  return "?";
}
}  // namespace

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  absl::StatusOr<uint64_t> size = FileSize(path);
  if (!size.ok()) return size.status();
  if (*size < 8) {
    return absl::DataLossError(absl::StrCat(path, ": truncated .safetensors file (", *size,
                                            " bytes, the header size alone needs 8)"));
  }
  absl::StatusOr<std::string> prefix = ReadFileRange(path, 0, 8);
  if (!prefix.ok()) return prefix.status();
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>((*prefix)[i])) << (8 * i);
  if (n > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header size ", n,
                                                   " exceeds the format's 100 MiB limit"));
  }
  if (n > *size - 8) {
    return absl::DataLossError(absl::StrCat(path, ": header size ", n,
                                            " runs past the end of the file (", *size, " bytes)"));
  }
  absl::StatusOr<std::string> header = ReadFileRange(path, 8, n);
  if (!header.ok()) return header.status();
  absl::StatusOr<SafetensorsFile> f = FromHeader(path, *header, 8 + n, *size);
  if (!f.ok()) return f.status();
  f->path_ = path;
  return f;
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::FromHeader(const std::string& origin,
                                                            absl::string_view header_json,
                                                            uint64_t data_offset,
                                                            uint64_t file_size) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": bad .safetensors header: ", what));
  };
  absl::StatusOr<Json> header = ParseJson(header_json);
  if (!header.ok()) return bad(std::string(header.status().message()));
  if (!header->is_object()) return bad("the header is not a JSON object");
  const uint64_t data_size = file_size - data_offset;
  SafetensorsFile f;
  f.data_offset_ = data_offset;
  for (const auto& [name, v] : header->as_object()) {
    if (name == "__metadata__") continue;
    if (name.empty()) return bad("a tensor has an empty name");
    if (!v.is_object()) return bad(absl::StrCat("entry '", name, "' is not an object"));
    const Json* dt = v.Find("dtype");
    const Json* shape = v.Find("shape");
    const Json* off = v.Find("data_offsets");
    if (!dt || !dt->is_string() || !shape || !shape->is_array() || !off || !off->is_array()) {
      return bad(absl::StrCat("entry '", name, "' needs string 'dtype', array 'shape' and 'data_offsets'"));
    }
    std::optional<DType> dtype = ParseSafetensorsDType(dt->as_string());
    if (!dtype) {
      return bad(absl::StrCat("entry '", name, "' has unsupported dtype '", dt->as_string(), "'"));
    }
    Entry e;
    e.name = name;
    e.dtype = *dtype;
    for (const Json& d : shape->as_array()) {
      if (!d.is_integer()) return bad(absl::StrCat("entry '", name, "' has a non-integer dimension"));
      e.shape.push_back(d.as_int());
    }
    absl::StatusOr<int64_t> numel = CheckedNumel(e.shape);
    if (!numel.ok()) return bad(absl::StrCat("entry '", name, "': ", numel.status().message()));
    if (off->as_array().size() != 2 || !off->as_array()[0].is_integer() ||
        !off->as_array()[1].is_integer() || off->as_array()[0].as_int() < 0 ||
        off->as_array()[1].as_int() < off->as_array()[0].as_int()) {
      return bad(absl::StrCat("entry '", name, "' needs data_offsets [begin, end] with 0 <= begin <= end"));
    }
    e.begin = static_cast<uint64_t>(off->as_array()[0].as_int());
    e.end = static_cast<uint64_t>(off->as_array()[1].as_int());
    if (e.end > data_size) {
      return bad(absl::StrCat("entry '", name, "' ends at byte ", e.end,
                              " but the data section has ", data_size, " bytes"));
    }
    const uint64_t esize = DTypeSize(e.dtype);
    if (static_cast<uint64_t>(*numel) > (e.end - e.begin) / esize ||
        static_cast<uint64_t>(*numel) * esize != e.end - e.begin) {
      return bad(absl::StrCat("entry '", name, "' spans ", e.end - e.begin, " bytes but shape ",
                              ShapeToString(e.shape), " of ", DTypeName(e.dtype), " needs ",
                              static_cast<uint64_t>(*numel) * esize));
    }
    f.entries_.push_back(std::move(e));
  }
  std::sort(f.entries_.begin(), f.entries_.end(),
            [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  uint64_t cursor = 0;
  for (const Entry& e : f.entries_) {
    if (e.begin < cursor) return bad(absl::StrCat("entry '", e.name, "' overlaps the previous tensor"));
    if (e.begin > cursor) {
      return bad(absl::StrCat("hole of ", e.begin - cursor, " bytes before entry '", e.name, "'"));
    }
    cursor = e.end;
  }
  if (cursor != data_size) {
    return bad(absl::StrCat(data_size - cursor, " bytes after the last tensor are not indexed"));
  }
  return f;
}

absl::StatusOr<Tensor> SafetensorsFile::Read(const Entry& e) const {
  // A pooled buffer the tensor views (no zero fill, no copy).
  absl::StatusOr<SharedBytes> data = ReadFileRangeShared(path_, data_offset_ + e.begin, e.end - e.begin);
  if (!data.ok()) return data.status();
  return Tensor::MakeView(e.dtype, e.shape, std::move(data->owner), data->bytes);
}

std::string EncodeSafetensors(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  Json header = Json::MakeObject();
  uint64_t offset = 0;
  std::string data;
  for (const auto& [name, t] : tensors) {
    Json e = Json::MakeObject();
    e.Set("dtype", Json::String(SafetensorsCode(t.dtype())));
    Json shape = Json::MakeArray();
    for (int64_t d : t.shape()) shape.Append(Json::Integer(d));
    e.Set("shape", std::move(shape));
    Json off = Json::MakeArray();
    off.Append(Json::Integer(static_cast<int64_t>(offset)));
    offset += t.bytes().size();
    off.Append(Json::Integer(static_cast<int64_t>(offset)));
    e.Set("data_offsets", std::move(off));
    header.Set(name, std::move(e));
    data.append(t.bytes().data(), t.bytes().size());
  }
  std::string h = header.Dump();
  while (h.size() % 8 != 0) h.push_back(' ');
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((h.size() >> (8 * i)) & 0xff));
  out += h;
  out += data;
  return out;
}

}  // namespace parity
