// The packed op result blob: round trips, and every malformed blob is DATA_LOSS with a reason.
#include "server/storage/result_codec.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace parity {
namespace {

OpResultRecord Sample() {
  OpResultRecord r;
  r.op_type = "linear";
  r.golden_name = "Functional.linear.1.forward.output.0";
  r.result.policy = "msprobe";
  r.result.peer_verdict = "No";
  r.result.message = "cosine below 0.99";
  r.result.Add("Cosine", MetricValue::Number(0.25));
  r.result.Add("EucDist", MetricValue::Number(std::numeric_limits<double>::infinity()));
  r.result.Add("MaxAbsErr", MetricValue::Number(std::nan("")));
  r.result.Add("MaxRelativeErr", MetricValue::Text("Nan"));
  r.result.Add("Mismatched elements", MetricValue::Integer(-7));
  r.result.Add("Max diff", MetricValue::Number(-0.0));
  r.golden_dtype = DType::kBFloat16;
  r.golden_shape = {2, 3, 4};
  r.target_shape = {};
  return r;
}

TEST(ResultCodec, RoundTripsEveryField) {
  const OpResultRecord in = Sample();
  const std::string blob = EncodeResultBlob(in);
  OpResultRecord out;
  ASSERT_TRUE(DecodeResultBlob(blob, &out).ok());
  EXPECT_EQ(out.op_type, in.op_type);
  EXPECT_EQ(out.golden_name, in.golden_name);
  EXPECT_EQ(out.result.policy, "msprobe");
  EXPECT_EQ(out.result.peer_verdict, "No");
  EXPECT_EQ(out.result.message, in.result.message);
  ASSERT_EQ(out.result.metrics.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(out.result.metrics[i].name, in.result.metrics[i].name);
    EXPECT_EQ(out.result.metrics[i].value.ToString(), in.result.metrics[i].value.ToString()) << i;
    EXPECT_EQ(out.result.metrics[i].value.is_integer(), in.result.metrics[i].value.is_integer());
  }
  EXPECT_TRUE(std::signbit(out.result.metrics[5].value.number()));
  EXPECT_EQ(out.golden_dtype, DType::kBFloat16);
  EXPECT_FALSE(out.target_dtype.has_value());
  EXPECT_EQ(out.golden_shape, (Shape{2, 3, 4}));
  EXPECT_TRUE(out.target_shape.empty());
  EXPECT_EQ(EncodeResultBlob(out), blob);
}

// The bytes themselves, pinned (stored blobs must keep decoding): version 3 writes a known
// metric name as its code, a golden name equal to the row's name as a flag, and lengths,
// counts, integers and dimensions as varints.
TEST(ResultCodec, FormatIsPinnedByteForByte) {
  OpResultRecord r;
  r.name = "n";
  r.op_type = "mm";
  r.golden_name = "n";
  r.result.policy = "torch";
  r.result.peer_verdict = "ok";
  r.result.message = "";
  r.result.Add("Cosine", MetricValue::Number(0.5));
  r.result.Add("b", MetricValue::Text("Nan"));
  r.result.Add("Mismatched elements", MetricValue::Integer(std::numeric_limits<int64_t>::max()));
  r.result.Add("d", MetricValue::Integer(-2));
  r.target_dtype = DType::kUInt8;
  r.golden_shape = {3};
  r.error = 0.25;
  const std::string want(
      "\x04" "\x04"                                              // version 4, 4 metrics
      "\x00" "\x00" "\x00\x00\x00\x00\x00\x00\xe0\x3f"              // Cosine (code 0): 0.5
      "\xff" "\x01" "b" "\x02" "\x03" "Nan"                          // a name without a code
      "\x18" "\x01" "\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01"      // code 24: zigzag(int64 max)
      "\xff" "\x01" "d" "\x01" "\x03"                                // zigzag(-2)
      "\x02" "mm"
      "\x01"                                                      // golden name: the row's name
      "\x05" "torch" "\x02" "ok" "\x00"
      "\x00" "\x02"                                              // golden unset, uint8
      "\x01" "\x06"                                              // golden shape (3)
      "\x00"                                                      // target shape ()
      "\x00\x00\x00\x00\x00\x00\xd0\x3f",                              // error figure 0.25
      64);
  EXPECT_EQ(EncodeResultBlob(r), want);
  OpResultRecord out;
  out.name = "n";
  ASSERT_TRUE(DecodeResultBlob(want, &out).ok());
  EXPECT_EQ(out.golden_name, "n");
  EXPECT_EQ(out.result.metrics[2].name, "Mismatched elements");
  EXPECT_EQ(out.result.metrics[2].value.integer(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(out.result.metrics[3].value.integer(), -2);
  EXPECT_EQ(out.golden_shape, (Shape{3}));
  EXPECT_EQ(out.error, 0.25);
  // Another golden name is written out.
  r.golden_name = "g";
  const std::string other = EncodeResultBlob(r);
  EXPECT_NE(other.find(std::string("mm\x00\x01g", 5)), std::string::npos);
  ASSERT_TRUE(DecodeResultBlob(other, &out).ok());
  EXPECT_EQ(out.golden_name, "g");
}

// Version 3 blobs (the same record without its error figure) still decode, with an unknown
// error figure.
TEST(ResultCodec, Version3BlobsStillDecode) {
  const std::string v3(
      "\x03" "\x04"
      "\x00" "\x00" "\x00\x00\x00\x00\x00\x00\xe0\x3f"
      "\xff" "\x01" "b" "\x02" "\x03" "Nan"
      "\x18" "\x01" "\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01"
      "\xff" "\x01" "d" "\x01" "\x03"
      "\x02" "mm"
      "\x01"
      "\x05" "torch" "\x02" "ok" "\x00"
      "\x00" "\x02"
      "\x01" "\x06"
      "\x00",
      56);
  OpResultRecord r;
  r.name = "n";
  ASSERT_TRUE(DecodeResultBlob(v3, &r).ok());
  EXPECT_EQ(r.result.metrics[3].value.integer(), -2);
  EXPECT_EQ(r.golden_shape, (Shape{3}));
  EXPECT_TRUE(std::isnan(r.error));
  EXPECT_EQ(BlobSortValue(v3, "Cosine"), 0.5);
  // A version 3 blob with a trailing error figure is not one.
  EXPECT_EQ(DecodeResultBlob(v3 + std::string(8, '\0'), &r).code(), absl::StatusCode::kDataLoss);
}

// Version 2 blobs, as sessions 21 to 22 stored them (the same record as above), still decode,
// give their sort values, and encode again as version 4.
TEST(ResultCodec, Version2BlobsStillDecode) {
  const std::string v2(
      "\x02" "\x04\x00"
      "\x00" "\x00" "\x00\x00\x00\x00\x00\x00\xe0\x3f"
      "\xff" "\x01\x00\x00\x00" "b" "\x02" "\x03\x00\x00\x00" "Nan"
      "\x18" "\x03" "\xff\xff\xff\xff\xff\xff\xff\x7f"
      "\xff" "\x01\x00\x00\x00" "d" "\x01" "\x00\x00\x00\x00\x00\x00\x00\xc0"
      "\x02\x00\x00\x00" "mm"
      "\x01"
      "\x05\x00\x00\x00" "torch" "\x02\x00\x00\x00" "ok" "\x00\x00\x00\x00"
      "\x00" "\x02"
      "\x01\x00\x00\x00" "\x03\x00\x00\x00\x00\x00\x00\x00"
      "\x00\x00\x00\x00",
      96);
  OpResultRecord r;
  r.name = "n";
  ASSERT_TRUE(DecodeResultBlob(v2, &r).ok());
  ASSERT_EQ(r.result.metrics.size(), 4u);
  EXPECT_EQ(r.result.metrics[0].name, "Cosine");
  EXPECT_EQ(r.result.metrics[0].value.number(), 0.5);
  EXPECT_EQ(r.result.metrics[1].value.text(), "Nan");
  EXPECT_EQ(r.result.metrics[2].value.integer(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(r.result.metrics[3].value.integer(), -2);
  EXPECT_EQ(r.op_type, "mm");
  EXPECT_EQ(r.golden_name, "n");
  EXPECT_EQ(r.result.policy, "torch");
  EXPECT_EQ(r.result.peer_verdict, "ok");
  EXPECT_EQ(r.target_dtype, DType::kUInt8);
  EXPECT_EQ(r.golden_shape, (Shape{3}));
  EXPECT_TRUE(r.target_shape.empty());
  EXPECT_EQ(BlobSortValue(v2, "Cosine"), 0.5);
  EXPECT_EQ(BlobSortValue(v2, "d"), -2.0);
  EXPECT_EQ(BlobSortValue(v2, "Mismatched elements"), 9223372036854775807.0);
  const std::string v4 = EncodeResultBlob(r);
  EXPECT_EQ(v4[0], 4);
  EXPECT_EQ(v4.size(), 64u);
  // Version 2's own rules still hold for version 2 blobs.
  std::string b = v2;
  b[1 + 2 + 1] = 1;  // Cosine's 0.5 as a kind 1 integer
  EXPECT_NE(DecodeResultBlob(b, &r).message().find("not an integer"), std::string::npos);
  b = v2;
  b[1 + 2 + 10 + 14 + 1] = 1;  // int64 max as kind 1: its bits are a NaN, not an integer
  EXPECT_NE(DecodeResultBlob(b, &r).message().find("not an integer"), std::string::npos);
}

// Version 1 blobs (every name as a string), as sessions before 21 stored them, still decode and
// still give their sort values.
TEST(ResultCodec, Version1BlobsStillDecode) {
  const std::string v1(
      "\x01" "\x04\x00"
      "\x01\x00\x00\x00" "a" "\x00" "\x00\x00\x00\x00\x00\x00\xe0\x3f"
      "\x01\x00\x00\x00" "b" "\x02" "\x03\x00\x00\x00" "Nan"
      "\x01\x00\x00\x00" "c" "\x03" "\xff\xff\xff\xff\xff\xff\xff\x7f"
      "\x01\x00\x00\x00" "d" "\x01" "\x00\x00\x00\x00\x00\x00\x00\xc0"
      "\x02\x00\x00\x00" "mm" "\x01\x00\x00\x00" "g" "\x05\x00\x00\x00" "torch"
      "\x02\x00\x00\x00" "ok" "\x00\x00\x00\x00"
      "\x00" "\x02"
      "\x01\x00\x00\x00" "\x03\x00\x00\x00\x00\x00\x00\x00"
      "\x00\x00\x00\x00",
      106);
  OpResultRecord r;
  r.name = "g";  // the row's name: version 1 wrote the golden name out whatever it was
  ASSERT_TRUE(DecodeResultBlob(v1, &r).ok());
  ASSERT_EQ(r.result.metrics.size(), 4u);
  EXPECT_EQ(r.result.metrics[0].name, "a");
  EXPECT_EQ(r.result.metrics[0].value.number(), 0.5);
  EXPECT_EQ(r.result.metrics[1].value.text(), "Nan");
  EXPECT_EQ(r.result.metrics[2].value.integer(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(r.result.metrics[3].value.integer(), -2);
  EXPECT_EQ(r.op_type, "mm");
  EXPECT_EQ(r.golden_name, "g");
  EXPECT_EQ(r.result.policy, "torch");
  EXPECT_EQ(r.result.peer_verdict, "ok");
  EXPECT_FALSE(r.golden_dtype.has_value());
  EXPECT_EQ(r.target_dtype, DType::kUInt8);
  EXPECT_EQ(r.golden_shape, (Shape{3}));
  EXPECT_EQ(BlobSortValue(v1, "a"), 0.5);
  EXPECT_EQ(BlobSortValue(v1, "d"), -2.0);
  EXPECT_EQ(BlobSortValue(v1.substr(0, 20), "d"), std::nullopt);
}

TEST(ResultCodec, SortValueIsTheNumberOfTheNamedMetric) {
  const std::string blob = EncodeResultBlob(Sample());
  EXPECT_EQ(BlobSortValue(blob, "Cosine"), 0.25);
  EXPECT_EQ(BlobSortValue(blob, "EucDist"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(BlobSortValue(blob, "Mismatched elements"), -7.0);
  EXPECT_FALSE(BlobSortValue(blob, "MaxAbsErr").has_value());       // NaN
  EXPECT_FALSE(BlobSortValue(blob, "MaxRelativeErr").has_value());  // text
  EXPECT_FALSE(BlobSortValue(blob, "PCC").has_value());             // absent
  EXPECT_FALSE(BlobSortValue(blob.substr(0, 12), "EucDist").has_value());  // truncated
}

// Integers beyond 2^53 (torch's int64 differences) keep every digit.
TEST(ResultCodec, IntegersBeyondTwoToThe53AreExact) {
  OpResultRecord in = Sample();
  in.result.metrics.clear();
  const int64_t big = (int64_t{1} << 53) + 1;
  in.result.Add("Greatest absolute difference", MetricValue::Integer(big));
  in.result.Add("Max absolute difference", MetricValue::Integer(std::numeric_limits<int64_t>::min()));
  in.result.Add("Mismatched elements", MetricValue::Integer(int64_t{1} << 53));
  in.result.Add("Total elements", MetricValue::Integer(0));
  const std::string blob = EncodeResultBlob(in);
  OpResultRecord out;
  ASSERT_TRUE(DecodeResultBlob(blob, &out).ok());
  ASSERT_EQ(out.result.metrics.size(), 4u);
  EXPECT_EQ(out.result.metrics[0].value.integer(), big);
  EXPECT_EQ(out.result.metrics[0].value.ToString(), "9007199254740993");
  EXPECT_EQ(out.result.metrics[1].value.integer(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(out.result.metrics[2].value.integer(), int64_t{1} << 53);
  EXPECT_EQ(out.result.metrics[3].value.integer(), 0);
  EXPECT_TRUE(out.result.metrics[3].value.is_integer());
  EXPECT_EQ(BlobSortValue(blob, "Greatest absolute difference"), 9007199254740992.0);
  EXPECT_EQ(BlobSortValue(blob, "Max absolute difference"), -9223372036854775808.0);
  // Small integers take one byte: code, kind 1, zigzag(0).
  OpResultRecord zero;
  zero.result.Add("Total elements", MetricValue::Integer(0));
  EXPECT_EQ(EncodeResultBlob(zero).substr(0, 5), std::string("\x04\x01\x19\x01\x00", 5));
}

TEST(ResultCodec, EveryTruncationAndTrailingByteIsDataLoss) {
  const std::string blob = EncodeResultBlob(Sample());
  for (size_t n = 0; n < blob.size(); ++n) {
    OpResultRecord r;
    absl::Status s = DecodeResultBlob(blob.substr(0, n), &r);
    ASSERT_EQ(s.code(), absl::StatusCode::kDataLoss) << n;
    EXPECT_NE(s.message().find("truncated at "), std::string::npos) << s;
  }
  OpResultRecord r;
  absl::Status s = DecodeResultBlob(blob + "x", &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("1 trailing bytes"), std::string::npos) << s;
}

TEST(ResultCodec, UnknownVersionKindDtypeAndOverlongVarintsAreRefused) {
  const std::string blob = EncodeResultBlob(Sample());
  OpResultRecord r;
  std::string b = blob;
  b[0] = 9;
  EXPECT_NE(DecodeResultBlob(b, &r).message().find("unknown version 9"), std::string::npos);
  // The first metric's kind byte follows u8 version, the count's varint and Cosine's code.
  const size_t kind_at = 1 + 1 + 1;
  b = blob;
  b[kind_at] = 5;
  EXPECT_NE(DecodeResultBlob(b, &r).message().find("unknown metric kind 5"), std::string::npos);
  b[kind_at] = 3;  // version 2's 64-bit integer kind: not in versions 3 and 4
  EXPECT_NE(DecodeResultBlob(b, &r).message().find("unknown metric kind 3"), std::string::npos);
  // One encoding per value, so that a decoded blob encodes back to its bytes: a varint with a
  // redundant zero byte is refused, as is one beyond 64 bits.
  OpResultRecord ints;
  ints.result.Add("Cosine", MetricValue::Integer(1));
  b = EncodeResultBlob(ints);
  ASSERT_EQ(b.substr(kind_at, 2), std::string("\x01\x02", 2));
  std::string overlong = b;
  overlong.replace(kind_at + 1, 1, std::string("\x82\x00", 2));
  EXPECT_NE(DecodeResultBlob(overlong, &r).message().find("overlong varint at metric value"), std::string::npos);
  std::string wide = b;
  wide.replace(kind_at + 1, 1, std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 10));
  EXPECT_NE(DecodeResultBlob(wide, &r).message().find("varint beyond 64 bits"), std::string::npos);
  std::string count = b;  // a count of 65536 (three bytes)
  count.replace(1, 1, std::string("\x80\x80\x04", 3));
  EXPECT_NE(DecodeResultBlob(count, &r).message().find("metric count 65536 above 65535"), std::string::npos);
  // The golden shape's rank 5 with no dims (the blob cut after the shapes).
  std::string rank = EncodeResultBlob(OpResultRecord());
  rank.resize(rank.size() - 8);  // without the error figure
  rank[rank.size() - 2] = 5;
  EXPECT_NE(DecodeResultBlob(rank, &r).message().find("truncated at golden shape"), std::string::npos);
  // The golden dtype byte sits right after the message (after the count, op_type, the
  // golden-name form and four vstrs: golden name, policy, peer verdict, message; all empty).
  OpResultRecord plain;
  plain.golden_dtype = DType::kFloat32;
  b = EncodeResultBlob(plain);
  const size_t dtype_at = 1 + 1 + 1 + 1 + 4;
  ASSERT_EQ(b[dtype_at], static_cast<char>(static_cast<int>(DType::kFloat32) + 1));
  b[dtype_at] = 100;
  EXPECT_NE(DecodeResultBlob(b, &r).message().find("unknown golden dtype 99"), std::string::npos);
  // Codes beyond the table; a coded name written out; the golden-name forms where the other one
  // applies (one encoding per record, as the fuzzer checks).
  b = EncodeResultBlob(Sample());
  b[1 + 1] = 0x40;
  EXPECT_NE(DecodeResultBlob(b, &r).message().find("unknown metric name code 64"), std::string::npos);
  OpResultRecord named;
  named.result.Add("Cosin", MetricValue::Number(1));
  b = EncodeResultBlob(named);
  ASSERT_EQ(b.substr(1 + 1 + 1 + 1, 5), "Cosin");
  b.insert(1 + 1 + 1 + 1 + 5, "e");
  b[1 + 1 + 1] = 6;  // "Cosine", written out
  EXPECT_NE(DecodeResultBlob(b, &r).message().find("'Cosine' written out though it has a code"),
            std::string::npos);
  OpResultRecord golden;
  golden.name = "x";
  golden.golden_name = "y";
  b = EncodeResultBlob(golden);
  OpResultRecord row;
  row.name = "y";  // a row named as its golden item, whose blob wrote the name out
  EXPECT_NE(DecodeResultBlob(b, &row).message().find("written out though it is the row's name"),
            std::string::npos);
  golden.golden_name = "x";
  b = EncodeResultBlob(golden);
  row.name = "";
  EXPECT_NE(DecodeResultBlob(b, &row).message().find("the row's name, which is empty"),
            std::string::npos);
}

}  // namespace
}  // namespace parity
