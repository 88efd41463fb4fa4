#include "common/formats/npy.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/file_util.h"

namespace parity {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct Header {
  std::string descr;
  bool fortran = false;
  Shape shape;
};

// Parses numpy's header: a Python dict literal with exactly the keys descr, fortran_order and
// shape, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }.
class HeaderParser {
 public:
  HeaderParser(absl::string_view text, absl::string_view origin) : t_(text), origin_(origin) {}

  absl::StatusOr<Header> Parse() {
    Header h;
    bool have_descr = false, have_fortran = false, have_shape = false;
    Ws();
    if (!Eat('{')) return Err("header does not start with '{'");
    while (true) {
      Ws();
      if (Eat('}')) break;
      absl::string_view key;
      if (!Str(&key)) return Err("expected a quoted key");
      Ws();
      if (!Eat(':')) return Err("expected ':' after key");
      Ws();
      if (key == "descr") {
        if (Peek() == '[') {
          return Err("structured dtypes (a list descr) are not supported");
        }
        absl::string_view descr;
        if (!Str(&descr)) return Err("'descr' is not a string");
        h.descr.assign(descr.data(), descr.size());
        have_descr = true;
      } else if (key == "fortran_order") {
        if (Word("True")) {
          h.fortran = true;
        } else if (Word("False")) {
          h.fortran = false;
        } else {
          return Err("'fortran_order' is not True or False");
        }
        have_fortran = true;
      } else if (key == "shape") {
        absl::Status s = Tuple(&h.shape);
        if (!s.ok()) return s;
        have_shape = true;
      } else {
        return Err(absl::StrCat("unexpected header key '", key, "'"));
      }
      Ws();
      if (Eat(',')) continue;
      Ws();
      if (Eat('}')) break;
      return Err("expected ',' or '}' in header");
    }
    if (!have_descr || !have_fortran || !have_shape) {
      return Err("header lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return h;
  }

 private:
  absl::Status Err(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ": bad .npy header: ", what));
  }
  char Peek() const { return p_ < t_.size() ? t_[p_] : '\0'; }
  bool Eat(char c) {
    if (Peek() == c) {
      ++p_;
      return true;
    }
    return false;
  }
  void Ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n')) ++p_;
  }
  bool Word(absl::string_view w) {
    if (t_.substr(p_, w.size()) == w) {
      p_ += w.size();
      return true;
    }
    return false;
  }
  // A quoted string, as a view into the header text.
  bool Str(absl::string_view* out) {
    const char q = Peek();
    if (q != '\'' && q != '"') return false;
    ++p_;
    const size_t end = t_.find(q, p_);
    if (end == absl::string_view::npos) return false;
    *out = t_.substr(p_, end - p_);
    p_ = end + 1;
    return true;
  }
  absl::Status Tuple(Shape* shape) {
    if (!Eat('(')) return Err("'shape' is not a tuple");
    while (true) {
      Ws();
      if (Eat(')')) return absl::OkStatus();
      bool neg = Eat('-');
      if (!(Peek() >= '0' && Peek() <= '9')) return Err("'shape' holds a non-integer");
      uint64_t v = 0;
      while (Peek() >= '0' && Peek() <= '9') {
        const uint64_t d = static_cast<uint64_t>(Peek() - '0');
        if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - d) / 10) {
          return Err("a dimension in 'shape' overflows int64");
        }
        v = v * 10 + d;
        ++p_;
      }
      Eat('L');  // Python 2 long suffix.
      if (neg) {
        return Err(absl::StrCat("negative dimension -", v, " in 'shape'"));
      }
      shape->push_back(static_cast<int64_t>(v));
      Ws();
      if (Eat(',')) continue;
      Ws();
      if (Eat(')')) return absl::OkStatus();
      return Err("expected ',' or ')' in 'shape'");
    }
  }

  absl::string_view t_;
  absl::string_view origin_;
  size_t p_ = 0;
};

struct DescrInfo {
  DType dtype;
  bool swap;
};

absl::StatusOr<DescrInfo> ParseDescr(absl::string_view descr, absl::string_view origin) {
  auto unsupported = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": unsupported .npy dtype '", descr, "'", why));
  };
  if (descr.size() < 2) return unsupported("");
  const char order = descr[0];
  const absl::string_view code = descr.substr(1);
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    return unsupported(": no byte-order mark");
  }
  if (code[0] == 'O') return unsupported(": object arrays cannot be read without pickle");
  struct Entry {
    absl::string_view code;
    DType t;
  };
  static constexpr Entry kCodes[] = {
      {"b1", DType::kBool},     {"u1", DType::kUInt8},   {"i1", DType::kInt8},
      {"i2", DType::kInt16},    {"u2", DType::kUInt16},  {"i4", DType::kInt32},
      {"u4", DType::kUInt32},   {"i8", DType::kInt64},   {"u8", DType::kUInt64},
      {"f2", DType::kFloat16},  {"f4", DType::kFloat32}, {"f8", DType::kFloat64},
  };
  for (const Entry& e : kCodes) {
    if (code == e.code) return DescrInfo{e.t, order == '>' && DTypeSize(e.t) > 1};
  }
  if (code[0] == 'c') return unsupported(": complex tensors are not supported");
  if (code[0] == 'U' || code[0] == 'S') return unsupported(": string arrays are not tensors");
  return unsupported("");
}

void ByteSwapInPlace(std::string* data, size_t esize) {
  for (size_t i = 0; i + esize <= data->size(); i += esize) {
    std::reverse(data->begin() + static_cast<std::ptrdiff_t>(i),
                 data->begin() + static_cast<std::ptrdiff_t>(i + esize));
  }
}

// Reorders Fortran (column-major) element order into C (row-major) order.
// Not inlined: GCC 12 reports a false free-nonheap-object when it is.
[[gnu::noinline]] std::string FortranToC(const std::string& src, const Shape& shape, size_t esize) {
  const size_t rank = shape.size();
  std::string dst(src.size(), '\0');
  int64_t numel = static_cast<int64_t>(src.size() / esize);
  std::vector<int64_t> idx(rank, 0);
  // Strides of the Fortran source.
  std::vector<int64_t> fstride(rank, 1);
  for (size_t d = 1; d < rank; ++d) fstride[d] = fstride[d - 1] * shape[d - 1];
  for (int64_t c = 0; c < numel; ++c) {
    int64_t f = 0;
    for (size_t d = 0; d < rank; ++d) f += idx[d] * fstride[d];
    std::memcpy(&dst[static_cast<size_t>(c) * esize], &src[static_cast<size_t>(f) * esize], esize);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return dst;
}

// The fixed part of the file: magic, version and header length.
struct Preamble {
  size_t prefix;  // bytes before the header text
  uint64_t header_len;
};

// `head` holds at least the first 12 bytes of the file (or all of a shorter one).
absl::StatusOr<Preamble> ParsePreamble(absl::string_view head, uint64_t file_size,
                                       absl::string_view origin) {
  if (file_size < 10 || head.size() < 10) {
    return absl::DataLossError(absl::StrCat(origin, ": truncated .npy file (", file_size, " bytes)"));
  }
  if (head.substr(0, 6) != absl::string_view(kMagic, 6)) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": bad magic, not a .npy file"));
  }
  const int major = static_cast<unsigned char>(head[6]);
  const int minor = static_cast<unsigned char>(head[7]);
  Preamble p;
  if (major == 1) {
    p.header_len = static_cast<unsigned char>(head[8]) |
                   (static_cast<uint64_t>(static_cast<unsigned char>(head[9])) << 8);
    p.prefix = 10;
  } else if (major == 2 || major == 3) {
    if (head.size() < 12) {
      return absl::DataLossError(absl::StrCat(origin, ": truncated .npy header"));
    }
    p.header_len = 0;
    for (int i = 0; i < 4; ++i) {
      p.header_len |= static_cast<uint64_t>(static_cast<unsigned char>(head[8 + i])) << (8 * i);
    }
    p.prefix = 12;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": unsupported .npy format version ", major, ".", minor));
  }
  if (p.header_len > file_size - p.prefix) {
    return absl::DataLossError(absl::StrCat(origin, ": header length ", p.header_len,
                                            " runs past the end of the file (", file_size,
                                            " bytes)"));
  }
  return p;
}

struct Layout {
  Header header;
  DescrInfo descr;
};

// Parses the header text and checks it against the `available` data bytes that follow it.
absl::StatusOr<Layout> ParseLayout(absl::string_view text, uint64_t available,
                                   absl::string_view origin) {
  absl::StatusOr<Header> header = HeaderParser(text, origin).Parse();
  if (!header.ok()) return header.status();
  absl::StatusOr<DescrInfo> descr = ParseDescr(header->descr, origin);
  if (!descr.ok()) return descr.status();
  absl::StatusOr<int64_t> numel = CheckedNumel(header->shape);
  if (!numel.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", numel.status().message()));
  }
  const size_t esize = DTypeSize(descr->dtype);
  if (static_cast<uint64_t>(*numel) > available / esize) {
    return absl::DataLossError(absl::StrCat(
        origin, ": header promises shape ", ShapeToString(header->shape), " of ",
        header->descr, " (", *numel, " elements), but only ", available, " data bytes follow"));
  }
  const uint64_t need = static_cast<uint64_t>(*numel) * esize;
  if (need != available) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": ", available - need, " unexpected bytes after the data of shape ",
        ShapeToString(header->shape), " of ", header->descr));
  }
  return Layout{std::move(*header), *descr};
}

}  // namespace

namespace {
// Parses `bytes`; when `owner` holds them and the data needs no byte swap or transposition, the
// tensor references them instead of copying.
absl::StatusOr<Tensor> ParseNpyShared(absl::string_view bytes, absl::string_view origin,
                                      std::shared_ptr<const void> owner) {
  absl::StatusOr<Preamble> pre = ParsePreamble(bytes, bytes.size(), origin);
  if (!pre.ok()) return pre.status();
  const uint64_t data_start = pre->prefix + pre->header_len;
  absl::StatusOr<Layout> layout = ParseLayout(bytes.substr(pre->prefix, pre->header_len),
                                              bytes.size() - data_start, origin);
  if (!layout.ok()) return layout.status();
  const size_t esize = DTypeSize(layout->descr.dtype);
  const bool fortran = layout->header.fortran && layout->header.shape.size() > 1;
  absl::StatusOr<Tensor> t;
  if (owner != nullptr && !layout->descr.swap && !fortran) {
    t = Tensor::MakeView(layout->descr.dtype, layout->header.shape, std::move(owner),
                         bytes.substr(data_start));
  } else {
    std::string data(bytes.substr(data_start));
    if (layout->descr.swap) ByteSwapInPlace(&data, esize);
    if (fortran) data = FortranToC(data, layout->header.shape, esize);
    t = Tensor::Make(layout->descr.dtype, layout->header.shape, std::move(data));
  }
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(origin, ": ", t.status().message()));
  return t;
}
}  // namespace

absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, absl::string_view origin) {
  return ParseNpyShared(bytes, origin, nullptr);
}

absl::StatusOr<NpyInfo> ReadNpyInfo(const std::string& path) {
  return ReadNpyInfo(path, 0, nullptr, nullptr);
}

absl::StatusOr<NpyInfo> ReadNpyInfo(const std::string& path, size_t keep_max_bytes,
                                    SmallFileArena* arena, SharedBytes* kept) {
  // numpy pads its headers to 64 bytes and writes short ones: one 4 KiB read covers nearly all.
  SharedBytes whole;
  absl::StatusOr<FileHead> head = kept != nullptr
                                      ? ReadFileHeadOrWhole(path, 4096, keep_max_bytes, arena, &whole)
                                      : ReadFileHead(path, 4096);
  if (!head.ok()) return head.status();
  const absl::string_view bytes = whole.owner != nullptr ? whole.bytes : absl::string_view(head->bytes);
  absl::StatusOr<Preamble> pre = ParsePreamble(bytes, head->file_size, path);
  if (!pre.ok()) return pre.status();
  absl::string_view text;
  std::string long_text;
  if (pre->prefix + pre->header_len <= bytes.size()) {
    text = bytes.substr(pre->prefix, pre->header_len);
  } else {
    absl::StatusOr<std::string> rest = ReadFileRange(path, pre->prefix, pre->header_len);
    if (!rest.ok()) return rest.status();
    long_text = std::move(*rest);
    text = long_text;
  }
  absl::StatusOr<Layout> layout =
      ParseLayout(text, head->file_size - pre->prefix - pre->header_len, path);
  if (!layout.ok()) return layout.status();
  if (kept != nullptr) *kept = std::move(whole);
  return NpyInfo{layout->descr.dtype, layout->header.shape};
}

absl::StatusOr<NpyInfo> ParseNpyInfo(absl::string_view file, const std::string& path) {
  absl::StatusOr<Preamble> pre = ParsePreamble(file, file.size(), path);
  if (!pre.ok()) return pre.status();
  if (pre->prefix + pre->header_len > file.size()) {
    return absl::DataLossError(absl::StrCat(path, ": the header runs past the end of the file"));
  }
  absl::StatusOr<Layout> layout = ParseLayout(file.substr(pre->prefix, pre->header_len),
                                              file.size() - pre->prefix - pre->header_len, path);
  if (!layout.ok()) return layout.status();
  return NpyInfo{layout->descr.dtype, std::move(layout->header.shape)};
}

absl::StatusOr<NpyLayout> ReadNpyLayout(const RandomAccessFile& file, absl::string_view head) {
  const std::string& path = file.path();
  std::string read_head;
  if (head.empty()) {
    read_head.resize(static_cast<size_t>(std::min<uint64_t>(file.size(), 4096)));
    size_t got = 0;
    absl::Status s = file.ReadUpTo(0, read_head.size(), read_head.data(), &got);
    if (!s.ok()) return s;
    read_head.resize(got);
    head = read_head;
  }
  head = head.substr(0, static_cast<size_t>(std::min<uint64_t>(head.size(), file.size())));
  absl::StatusOr<Preamble> pre = ParsePreamble(head, file.size(), path);
  if (!pre.ok()) return pre.status();
  absl::string_view text;
  std::string long_text;
  if (pre->prefix + pre->header_len <= head.size()) {
    text = head.substr(pre->prefix, pre->header_len);
  } else {
    long_text.resize(pre->header_len);
    absl::Status s = file.ReadExact(pre->prefix, long_text.size(), long_text.data());
    if (!s.ok()) return s;
    text = long_text;
  }
  const uint64_t data_offset = pre->prefix + pre->header_len;
  absl::StatusOr<Layout> layout = ParseLayout(text, file.size() - data_offset, path);
  if (!layout.ok()) return layout.status();
  NpyLayout out{layout->descr.dtype, std::move(layout->header.shape)};
  out.data_offset = data_offset;
  out.native = !layout->descr.swap && !(layout->header.fortran && out.shape.size() > 1);
  return out;
}

absl::StatusOr<Tensor> ParseNpyFile(const SharedBytes& file, const std::string& path) {
  return ParseNpyShared(file.bytes, path, file.owner);
}

absl::StatusOr<Tensor> ReadNpyFile(const std::string& path) {
  absl::StatusOr<SharedBytes> file = ReadFileShared(path);
  if (!file.ok()) return file.status();
  return ParseNpyShared(file->bytes, path, std::move(file->owner));
}

std::string EncodeNpy(const Tensor& t) {
  const char* descr = "<f4";
  switch (t.dtype()) {
    case DType::kBool: descr = "|b1"; break;
    case DType::kUInt8: descr = "|u1"; break;
    case DType::kInt8: descr = "|i1"; break;
    case DType::kInt16: descr = "<i2"; break;
    case DType::kUInt16: descr = "<u2"; break;
    case DType::kInt32: descr = "<i4"; break;
    case DType::kUInt32: descr = "<u4"; break;
    case DType::kInt64: descr = "<i8"; break;
    case DType::kUInt64: descr = "<u8"; break;
    case DType::kFloat16: descr = "<f2"; break;
    case DType::kBFloat16: descr = "<u2"; break;
    case DType::kFloat32: descr = "<f4"; break;
    case DType::kFloat64: descr = "<f8"; break;
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2: descr = "|u1"; break;
  }
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i) {
    absl::StrAppend(&shape, t.shape()[i], t.shape().size() == 1 ? "," : (i + 1 < t.shape().size() ? ", " : ""));
  }
  shape += ")";
  std::string header =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad so that magic + len + header + '\n' is a multiple of 64.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic, 6);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>((header.size() >> 8) & 0xff));
  out += header;
  out.append(t.bytes().data(), t.bytes().size());
  return out;
}

}  // namespace parity
