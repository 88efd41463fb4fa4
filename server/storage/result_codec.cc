#include "server/storage/result_codec.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace parity {
namespace {

// Version 2 names a known metric by its position in kMetricNames (one byte) and writes a golden
// name equal to the row's name as a flag; version 3 writes lengths, counts, integers and shapes
// as varints; version 4 appends the item's error figure (ItemError) as an f64. Versions 1 to 3
// still decode (their error figure is unknown, NaN).
constexpr uint8_t kVersion = 4;
constexpr uint8_t kVersion3 = 3;
constexpr uint8_t kVersion2 = 2;
constexpr uint8_t kVersion1 = 1;
// Append only: a stored blob refers to these by position.
constexpr absl::string_view kMetricNames[] = {
    "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio", "Max diff", "Min diff", "Mean diff", "L2norm diff",
    "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr", "PCC", "atol", "rtol",
    "Required atol", "Required rtol", "AllClose max excess", "Dissimilarity",
    "Greatest absolute difference", "Greatest relative difference", "Max absolute difference",
    "Max relative difference", "Mismatched elements", "Total elements",
    "Absolute difference index", "Relative difference index", "NPU MD5", "BENCH MD5",
    "Requires_grad Consistent", "Path"};
constexpr uint8_t kLiteralName = 0xff;  // the name follows as a str
constexpr uint8_t kGoldenNameLiteral = 0, kGoldenNameIsName = 1;

uint8_t MetricCode(absl::string_view name) {
  for (size_t i = 0; i < std::size(kMetricNames); ++i) {
    if (name == kMetricNames[i]) return static_cast<uint8_t>(i);
  }
  return kLiteralName;
}
// Versions 1 and 2: kInteger holds an integer as a double (what version 1 always wrote);
// kInteger64 an integer that kInteger cannot hold (KindIntegerHolds false), as its two's
// complement bits. Version 3: kInteger holds any integer as a zigzag varint; no kInteger64.
// Each integer has one encoding, so a decoded blob encodes back to the same bytes.
constexpr uint8_t kNumber = 0, kInteger = 1, kText = 2, kInteger64 = 3;
constexpr double kIntegerLimit = 9.2e18;  // kInteger decodes integral doubles within ±this
constexpr int kDTypeCount = static_cast<int>(DType::kFloat8E5M2) + 1;

// Whether kInteger holds x: a double equal to it, within kIntegerLimit.
bool KindIntegerHolds(int64_t x) {
  const double d = static_cast<double>(x);
  return d >= -kIntegerLimit && d <= kIntegerLimit && static_cast<int64_t>(d) == x;
}

uint64_t ZigZag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }
size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
size_t VstrSize(absl::string_view s) { return VarintSize(s.size()) + s.size(); }

// Fills a buffer sized beforehand (EncodeResultBlob computes the exact size): plain copies,
// no capacity checks per field.
class Writer {
 public:
  explicit Writer(char* p) : p_(p) {}
  template <typename T>
  void Put(T v) {
    std::memcpy(p_, &v, sizeof(T));  // x86-64 and aarch64 are little-endian; so is the format
    p_ += sizeof(T);
  }
  void PutStr(absl::string_view s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    if (!s.empty()) std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void PutVarint(uint64_t v) {
    while (v >= 0x80) {
      *p_++ = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    *p_++ = static_cast<char>(v);
  }
  void PutVstr(absl::string_view s) {
    PutVarint(s.size());
    if (!s.empty()) std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void PutShape(const Shape& s) {
    PutVarint(s.size());
    for (int64_t d : s) PutVarint(ZigZag(d));
  }
  const char* end() const { return p_; }

 private:
  char* p_;
};
uint8_t DTypeByte(const std::optional<DType>& t) { return t ? static_cast<uint8_t>(static_cast<int>(*t) + 1) : 0; }

// Reads fields in order; the first failure sticks and names the field.
class Reader {
 public:
  explicit Reader(absl::string_view b) : p_(b.data()), end_(b.data() + b.size()) {}
  template <typename T>
  T Get(const char* what) {
    T v{};
    if (!Need(sizeof(T), what)) return v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  // A varint: LEB128, at most 10 bytes, without a redundant (zero) last byte, so that each
  // value has one encoding.
  uint64_t Varint(const char* what) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t b = Get<uint8_t>(what);
      if (!ok()) return 0;
      if (shift == 63 && b > 1) {
        Fail(absl::StrCat("varint beyond 64 bits at ", what));
        return 0;
      }
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        if (b == 0 && shift > 0) Fail(absl::StrCat("overlong varint at ", what));
        return v;
      }
    }
    return 0;  // not reached: the tenth byte either ends the varint or fails
  }
  // A str: u32 length (versions 1 and 2) or varint length (version 3), then the bytes.
  absl::string_view Str(const char* what) {
    const uint64_t n = version_ >= kVersion3 ? Varint(what) : Get<uint32_t>(what);
    if (!Need(n, what)) return {};
    absl::string_view s(p_, n);
    p_ += n;
    return s;
  }
  void set_version(uint8_t v) { version_ = v; }
  uint8_t version() const { return version_; }
  // A metric's name: a str in version 1; a code (or kLiteralName and a str) in versions 2 and 3.
  absl::string_view MetricName() {
    if (version_ == kVersion1) return Str("metric name");
    const uint8_t code = Get<uint8_t>("metric name");
    if (code == kLiteralName) {
      // One encoding per record: a name with a code is written as its code.
      const absl::string_view name = Str("metric name");
      if (ok() && MetricCode(name) != kLiteralName) {
        Fail(absl::StrCat("metric name '", name, "' written out though it has a code"));
      }
      return name;
    }
    if (code >= std::size(kMetricNames)) {
      if (ok()) Fail(absl::StrCat("unknown metric name code ", int{code}));
      return {};
    }
    return kMetricNames[code];
  }
  Shape GetShape(const char* what) {
    Shape s;
    if (version_ >= kVersion3) {
      const uint64_t rank = Varint(what);
      if (!Need(rank, what)) return s;  // at least a byte per dimension
      s.resize(rank);
      for (uint64_t i = 0; i < rank; ++i) s[i] = UnZigZag(Varint(what));
      return s;
    }
    const uint32_t rank = Get<uint32_t>(what);
    if (!Need(static_cast<uint64_t>(rank) * 8, what)) return s;
    s.resize(rank);
    for (uint32_t i = 0; i < rank; ++i) s[i] = Get<int64_t>(what);
    return s;
  }
  // The metric count: u16 (versions 1 and 2) or varint (version 3).
  uint64_t Count() {
    if (version_ < kVersion3) return Get<uint16_t>("metric count");
    const uint64_t n = Varint("metric count");
    if (ok() && n > UINT16_MAX) Fail(absl::StrCat("metric count ", n, " above ", UINT16_MAX));
    return ok() ? n : 0;
  }
  void Fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
  }
  bool ok() const { return error_.empty(); }
  bool at_end() const { return p_ == end_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  const std::string& error() const { return error_; }

 private:
  bool Need(uint64_t n, const char* what) {
    if (!ok()) return false;
    if (n > static_cast<uint64_t>(end_ - p_)) {
      Fail(absl::StrCat("truncated at ", what));
      return false;
    }
    return true;
  }
  const char* p_;
  const char* end_;
  uint8_t version_ = kVersion;
  std::string error_;
};

// Reads the version byte and sets the reader to it; false (and the reader failed) when it is
// not one this file reads.
bool ReadVersion(Reader& in) {
  const uint8_t version = in.Get<uint8_t>("version");
  if (!in.ok()) return false;
  if (version != kVersion && version != kVersion3 && version != kVersion2 && version != kVersion1) {
    in.Fail(absl::StrCat("unknown version ", int{version}));
    return false;
  }
  in.set_version(version);
  return true;
}

std::optional<DType> GetDType(Reader& r, const char* what) {
  const uint8_t b = r.Get<uint8_t>(what);
  if (b == 0) return std::nullopt;
  if (b > kDTypeCount) {
    r.Fail(absl::StrCat("unknown ", what, " ", int{b} - 1));
    return std::nullopt;
  }
  return static_cast<DType>(b - 1);
}

}  // namespace

std::string EncodeResultBlob(const OpResultRecord& r) {
  const CheckResult& c = r.result;
  const size_t count = std::min<size_t>(c.metrics.size(), UINT16_MAX);
  const bool golden_is_name = !r.name.empty() && r.golden_name == r.name;
  size_t n = 1 + VarintSize(count) + VstrSize(r.op_type) + 1 + (golden_is_name ? 0 : VstrSize(r.golden_name)) +
             VstrSize(c.policy) + VstrSize(c.peer_verdict) + VstrSize(c.message) + 2 +
             VarintSize(r.golden_shape.size()) + VarintSize(r.target_shape.size()) + 8;
  for (int64_t d : r.golden_shape) n += VarintSize(ZigZag(d));
  for (int64_t d : r.target_shape) n += VarintSize(ZigZag(d));
  absl::InlinedVector<uint8_t, 16> codes(count);
  for (size_t i = 0; i < count; ++i) {
    const Metric& m = c.metrics[i];
    codes[i] = MetricCode(m.name);
    n += 1 + (codes[i] == kLiteralName ? VstrSize(m.name) : 0) + 1 +
         (m.value.is_integer() ? VarintSize(ZigZag(m.value.integer()))
          : m.value.is_number() ? 8
                                : VstrSize(m.value.text()));
  }
  std::string out(n, '\0');
  Writer w(out.data());
  w.Put<uint8_t>(kVersion);
  w.PutVarint(count);
  for (size_t i = 0; i < count; ++i) {
    const Metric& m = c.metrics[i];
    w.Put<uint8_t>(codes[i]);
    if (codes[i] == kLiteralName) w.PutVstr(m.name);
    if (m.value.is_integer()) {
      w.Put<uint8_t>(kInteger);
      w.PutVarint(ZigZag(m.value.integer()));
    } else if (m.value.is_number()) {
      w.Put<uint8_t>(kNumber);
      w.Put<double>(m.value.number());
    } else {
      w.Put<uint8_t>(kText);
      w.PutVstr(m.value.text());
    }
  }
  w.PutVstr(r.op_type);
  if (golden_is_name) {
    w.Put<uint8_t>(kGoldenNameIsName);
  } else {
    w.Put<uint8_t>(kGoldenNameLiteral);
    w.PutVstr(r.golden_name);
  }
  w.PutVstr(c.policy);
  w.PutVstr(c.peer_verdict);
  w.PutVstr(c.message);
  w.Put<uint8_t>(DTypeByte(r.golden_dtype));
  w.Put<uint8_t>(DTypeByte(r.target_dtype));
  w.PutShape(r.golden_shape);
  w.PutShape(r.target_shape);
  w.Put<double>(r.error);
  assert(w.end() == out.data() + out.size());
  return out;
}

namespace {
// One metric's value, after its name, in the reader's version; a malformed value fails the
// reader (which holds why).
MetricValue ReadMetricValue(Reader& in) {
  const uint8_t kind = in.Get<uint8_t>("metric kind");
  if (!in.ok()) return MetricValue();
  if (in.version() >= kVersion3) {
    if (kind == kInteger) return MetricValue::Integer(UnZigZag(in.Varint("metric value")));
    if (kind == kNumber) return MetricValue::Number(in.Get<double>("metric value"));
    if (kind == kText) return MetricValue::Text(std::string(in.Str("metric text")));
    in.Fail(absl::StrCat("unknown metric kind ", int{kind}));
    return MetricValue();
  }
  if (kind == kInteger64) {
    const int64_t v = in.Get<int64_t>("metric value");
    if (!KindIntegerHolds(v)) return MetricValue::Integer(v);
    if (in.ok()) in.Fail("a 64-bit integer metric that kind 1 holds");
  } else if (kind == kNumber || kind == kInteger) {
    const double v = in.Get<double>("metric value");
    if (kind == kNumber) return MetricValue::Number(v);
    if (v >= -kIntegerLimit && v <= kIntegerLimit && v == std::trunc(v) &&
        !(v == 0 && std::signbit(v))) {  // -0.0 would encode back as +0.0
      return MetricValue::Integer(static_cast<int64_t>(v));
    }
    if (in.ok()) in.Fail("an integer metric that is not an integer");
  } else if (kind == kText) {
    return MetricValue::Text(std::string(in.Str("metric text")));
  } else {
    in.Fail(absl::StrCat("unknown metric kind ", int{kind}));
  }
  return MetricValue();
}
}  // namespace

absl::Status DecodeResultBlob(absl::string_view blob, OpResultRecord* r) {
  Reader in(blob);
  ReadVersion(in);
  const uint64_t count = in.Count();
  std::vector<Metric> metrics;
  metrics.reserve(in.ok() ? std::min<uint64_t>(count, in.left() / 3) : 0);  // >= 3 bytes each
  for (uint64_t i = 0; i < count && in.ok(); ++i) {
    Metric m;
    m.name = std::string(in.MetricName());
    if (in.ok()) m.value = ReadMetricValue(in);
    metrics.push_back(std::move(m));
  }
  const absl::string_view op_type = in.Str("op_type");
  absl::string_view golden_name;
  if (in.version() == kVersion1) {
    golden_name = in.Str("golden_name");
  } else {
    const uint8_t how = in.Get<uint8_t>("golden_name");
    // One encoding per record here too: the flag exactly when the golden name is the row's.
    if (how == kGoldenNameLiteral) {
      golden_name = in.Str("golden_name");
      if (in.ok() && !r->name.empty() && golden_name == r->name) {
        in.Fail("golden_name written out though it is the row's name");
      }
    } else if (how == kGoldenNameIsName) {
      golden_name = r->name;
      if (in.ok() && r->name.empty()) in.Fail("golden_name given as the row's name, which is empty");
    } else if (in.ok()) {
      in.Fail(absl::StrCat("unknown golden_name form ", int{how}));
    }
  }
  const absl::string_view policy = in.Str("policy"), peer_verdict = in.Str("peer_verdict"),
                          message = in.Str("message");
  const std::optional<DType> golden_dtype = GetDType(in, "golden dtype");
  const std::optional<DType> target_dtype = GetDType(in, "target dtype");
  Shape golden_shape = in.GetShape("golden shape");
  Shape target_shape = in.GetShape("target shape");
  const double error = in.version() >= kVersion ? in.Get<double>("error") : std::numeric_limits<double>::quiet_NaN();
  if (in.ok() && !in.at_end()) in.Fail(absl::StrCat(in.left(), " trailing bytes"));
  if (!in.ok()) return absl::DataLossError(absl::StrCat("stored op result: ", in.error()));
  r->result.metrics = std::move(metrics);
  r->op_type = std::string(op_type);
  r->golden_name = std::string(golden_name);
  r->result.policy = std::string(policy);
  r->result.peer_verdict = std::string(peer_verdict);
  r->result.message = std::string(message);
  r->golden_dtype = golden_dtype;
  r->target_dtype = target_dtype;
  r->golden_shape = std::move(golden_shape);
  r->target_shape = std::move(target_shape);
  r->error = error;
  return absl::OkStatus();
}

void ForEachBlobNumber(absl::string_view blob,
                       absl::FunctionRef<bool(absl::string_view name, double value)> visit) {
  Reader in(blob);
  if (!ReadVersion(in)) return;
  const uint64_t count = in.Count();
  for (uint64_t i = 0; i < count && in.ok(); ++i) {
    const absl::string_view n = in.MetricName();
    if (!in.ok()) return;
    const MetricValue v = ReadMetricValue(in);  // a text is read for nothing; texts are rare
    if (!in.ok()) return;
    if (v.is_number() && !std::isnan(v.number()) && !visit(n, v.number())) return;
  }
}

std::optional<double> BlobSortValue(absl::string_view blob, absl::string_view name) {
  std::optional<double> out;
  ForEachBlobNumber(blob, [&](absl::string_view n, double v) {
    if (n != name) return true;
    out = v;
    return false;
  });
  return out;
}

}  // namespace parity
