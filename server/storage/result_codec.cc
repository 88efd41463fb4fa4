#include "server/storage/result_codec.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace parity {
namespace {

// Version 2 names a known metric by its position in kMetricNames (one byte) and writes a golden
// name equal to the row's name as a flag; version 1 blobs (names as strings) still decode.
constexpr uint8_t kVersion = 2;
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
// kInteger holds an integer as a double (what version 1 always wrote); kInteger64 an integer
// that kInteger cannot hold (KindIntegerHolds false), as its two's complement bits. Each
// integer has one encoding, so a decoded blob encodes back to the same bytes.
constexpr uint8_t kNumber = 0, kInteger = 1, kText = 2, kInteger64 = 3;
constexpr double kIntegerLimit = 9.2e18;  // kInteger decodes integral doubles within ±this
constexpr int kDTypeCount = static_cast<int>(DType::kFloat8E5M2) + 1;

// Whether kInteger holds x: a double equal to it, within kIntegerLimit.
bool KindIntegerHolds(int64_t x) {
  const double d = static_cast<double>(x);
  return d >= -kIntegerLimit && d <= kIntegerLimit && static_cast<int64_t>(d) == x;
}

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
  void PutShape(const Shape& s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    for (int64_t d : s) Put<int64_t>(d);
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
  absl::string_view Str(const char* what) {
    const uint32_t n = Get<uint32_t>(what);
    if (!Need(n, what)) return {};
    absl::string_view s(p_, n);
    p_ += n;
    return s;
  }
  // A metric's name: a str in version 1; a code (or kLiteralName and a str) in version 2.
  absl::string_view MetricName(uint8_t version) {
    if (version == kVersion1) return Str("metric name");
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
    const uint32_t rank = Get<uint32_t>(what);
    Shape s;
    if (!Need(static_cast<uint64_t>(rank) * 8, what)) return s;
    s.resize(rank);
    for (uint32_t i = 0; i < rank; ++i) s[i] = Get<int64_t>(what);
    return s;
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
  std::string error_;
};

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
  size_t n = 1 + 2 + 4 * 4 + r.op_type.size() + 1 + (golden_is_name ? 0 : 4 + r.golden_name.size()) +
             c.policy.size() + c.peer_verdict.size() + c.message.size() + 2 + 2 * 4 +
             8 * (r.golden_shape.size() + r.target_shape.size());
  absl::InlinedVector<uint8_t, 16> codes(count);
  for (size_t i = 0; i < count; ++i) {
    const Metric& m = c.metrics[i];
    codes[i] = MetricCode(m.name);
    n += 1 + (codes[i] == kLiteralName ? 4 + m.name.size() : 0) + 1 +
         (m.value.is_number() ? 8 : 4 + m.value.text().size());
  }
  std::string out(n, '\0');
  Writer w(out.data());
  w.Put<uint8_t>(kVersion);
  w.Put<uint16_t>(static_cast<uint16_t>(count));
  for (size_t i = 0; i < count; ++i) {
    const Metric& m = c.metrics[i];
    w.Put<uint8_t>(codes[i]);
    if (codes[i] == kLiteralName) w.PutStr(m.name);
    if (m.value.is_integer() && !KindIntegerHolds(m.value.integer())) {
      w.Put<uint8_t>(kInteger64);
      w.Put<int64_t>(m.value.integer());
    } else if (m.value.is_number()) {
      w.Put<uint8_t>(m.value.is_integer() ? kInteger : kNumber);
      w.Put<double>(m.value.number());
    } else {
      w.Put<uint8_t>(kText);
      w.PutStr(m.value.text());
    }
  }
  w.PutStr(r.op_type);
  if (golden_is_name) {
    w.Put<uint8_t>(kGoldenNameIsName);
  } else {
    w.Put<uint8_t>(kGoldenNameLiteral);
    w.PutStr(r.golden_name);
  }
  w.PutStr(c.policy);
  w.PutStr(c.peer_verdict);
  w.PutStr(c.message);
  w.Put<uint8_t>(DTypeByte(r.golden_dtype));
  w.Put<uint8_t>(DTypeByte(r.target_dtype));
  w.PutShape(r.golden_shape);
  w.PutShape(r.target_shape);
  assert(w.end() == out.data() + out.size());
  return out;
}

absl::Status DecodeResultBlob(absl::string_view blob, OpResultRecord* r) {
  Reader in(blob);
  const uint8_t version = in.Get<uint8_t>("version");
  if (in.ok() && version != kVersion && version != kVersion1) {
    in.Fail(absl::StrCat("unknown version ", int{version}));
  }
  const uint16_t count = in.Get<uint16_t>("metric count");
  std::vector<Metric> metrics;
  metrics.reserve(in.ok() ? count : 0);
  for (uint16_t i = 0; i < count && in.ok(); ++i) {
    Metric m;
    m.name = std::string(in.MetricName(version));
    const uint8_t kind = in.Get<uint8_t>("metric kind");
    if (kind == kInteger64) {
      const int64_t v = in.Get<int64_t>("metric value");
      if (!KindIntegerHolds(v)) {
        m.value = MetricValue::Integer(v);
      } else if (in.ok()) {
        in.Fail("a 64-bit integer metric that kind 1 holds");
      }
    } else if (kind == kNumber || kind == kInteger) {
      const double v = in.Get<double>("metric value");
      if (kind == kNumber) {
        m.value = MetricValue::Number(v);
      } else if (v >= -kIntegerLimit && v <= kIntegerLimit && v == std::trunc(v) &&
                 !(v == 0 && std::signbit(v))) {  // -0.0 would encode back as +0.0
        m.value = MetricValue::Integer(static_cast<int64_t>(v));
      } else if (in.ok()) {
        in.Fail("an integer metric that is not an integer");
      }
    } else if (kind == kText) {
      m.value = MetricValue::Text(std::string(in.Str("metric text")));
    } else if (in.ok()) {
      in.Fail(absl::StrCat("unknown metric kind ", int{kind}));
    }
    metrics.push_back(std::move(m));
  }
  const absl::string_view op_type = in.Str("op_type");
  absl::string_view golden_name;
  if (version == kVersion1) {
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
  return absl::OkStatus();
}

std::optional<double> BlobSortValue(absl::string_view blob, absl::string_view name) {
  Reader in(blob);
  const uint8_t version = in.Get<uint8_t>("version");
  if (version != kVersion && version != kVersion1) return std::nullopt;
  const uint16_t count = in.Get<uint16_t>("metric count");
  for (uint16_t i = 0; i < count && in.ok(); ++i) {
    const absl::string_view n = in.MetricName(version);
    const uint8_t kind = in.Get<uint8_t>("metric kind");
    if (kind == kText) {
      in.Str("metric text");
      if (n == name) return std::nullopt;
      continue;
    }
    const double v = kind == kInteger64 ? static_cast<double>(in.Get<int64_t>("metric value"))
                                        : in.Get<double>("metric value");
    if (!in.ok() || (kind != kNumber && kind != kInteger && kind != kInteger64)) return std::nullopt;
    if (n == name) return std::isnan(v) ? std::nullopt : std::optional<double>(v);
  }
  return std::nullopt;
}

}  // namespace parity
