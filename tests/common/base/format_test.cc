// JSON, Python-compatible formatting, float conversions, globs and dtype names.
#include <cmath>
#include <algorithm>
#include <string>
#include <vector>
#include <random>
#include <cstring>
#include <cstdlib>
#include <cstdio>

#include "gtest/gtest.h"
#include "common/base/dtype.h"
#include "common/base/float_formats.h"
#include "common/base/glob.h"
#include "common/base/json.h"
#include "common/base/pyformat.h"
#include "common/base/tensor.h"

namespace parity {
namespace {

TEST(Json, ParsesPythonNonFiniteTokens) {
  auto j = ParseJson(R"({"a": NaN, "b": Infinity, "c": -Infinity, "d": [1, 2.5, "x", null, true]})");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_TRUE(std::isnan(j->Find("a")->as_double()));
  EXPECT_EQ(j->Find("b")->as_double(), INFINITY);
  EXPECT_EQ(j->Find("c")->as_double(), -INFINITY);
  const auto& d = j->Find("d")->as_array();
  EXPECT_TRUE(d[0].is_integer());
  EXPECT_FALSE(d[1].is_integer());
  EXPECT_EQ(d[2].as_string(), "x");
  EXPECT_TRUE(d[3].is_null());
  EXPECT_TRUE(d[4].as_bool());
}

TEST(Json, KeepsMemberOrder) {
  auto j = ParseJson(R"({"z": 1, "a": 2, "m": 3})");
  ASSERT_TRUE(j.ok());
  std::string keys;
  for (const auto& [k, v] : j->as_object()) keys += k;
  EXPECT_EQ(keys, "zam");
}

TEST(Json, ErrorsNameLineAndColumn) {
  auto j = ParseJson("{\n  \"a\": [1, 2,\n  ]\n}");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("line 3 column 3"), std::string::npos) << j.status();
  EXPECT_FALSE(ParseJson("{\"a\": 1} x").ok());
  EXPECT_FALSE(ParseJson("\"unterminated").ok());
  EXPECT_FALSE(ParseJson("01x").ok());
  EXPECT_FALSE(ParseJson(std::string(600, '[')).ok());  // depth limit, not a stack overflow
}

// ParseJsonObjectMembers: the split member's members one at a time, then the member itself with
// an empty object; every other member whole, in document order (duplicates too); a split member
// that is not an object goes whole; ParseJson's errors (line and column), FAILED_PRECONDITION for
// a document that is not an object; a callback's error ends the parse and comes back as is.
TEST(Json, ObjectMembersStreamTheSplitMember) {
  std::vector<std::string> seen;
  auto on_member = [&](std::string k, Json v) {
    seen.push_back(k + "=" + v.Dump());
    return absl::OkStatus();
  };
  auto on_split = [&](std::string k, Json v) {
    seen.push_back("data." + k + "=" + v.Dump());
    return absl::OkStatus();
  };
  const std::string doc = R"({"task": "t", "data": {"a": {"x": [1, 2.5]}, "b": 3}, "n": 12345678901234567.5, "task": 0})";
  ASSERT_TRUE(ParseJsonObjectMembers(doc, "data", on_member, on_split).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"task=\"t\"", "data.a={\"x\":[1,2.5]}", "data.b=3", "data={}",
                                            "n=1.2345678901234568e+16", "task=0"}));
  seen.clear();
  ASSERT_TRUE(ParseJsonObjectMembers(R"({"data": [1]})", "data", on_member, on_split).ok());
  EXPECT_EQ(seen, std::vector<std::string>{"data=[1]"});
  const absl::Status bad = ParseJsonObjectMembers("{\n \"data\": {\"a\": [1,\n ]}}", "data", on_member, on_split);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("line 3 column 2"), std::string::npos) << bad;
  EXPECT_EQ(ParseJsonObjectMembers("[1, 2]", "data", on_member, on_split).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ParseJsonObjectMembers("[1, 2", "data", on_member, on_split).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseJsonObjectMembers("[1] x", "data", on_member, on_split).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseJsonObjectMembers(R"({"a": 1} x)", "data", on_member, on_split).code(),
            absl::StatusCode::kInvalidArgument);
  seen.clear();
  const absl::Status stop = ParseJsonObjectMembers(
      R"({"data": {"a": 1, "b": 2, "c": 3}})", "data", on_member, [&](std::string k, Json) {
        seen.push_back(k);
        return k == "b" ? absl::NotFoundError("stop at b") : absl::OkStatus();
      });
  EXPECT_EQ(stop, absl::NotFoundError("stop at b"));
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));
}

// Numbers longer than any a dump writes (parsed from a heap copy) read the same as short ones.
TEST(Json, LongNumbersParseExactly) {
  const std::string digits = "0." + std::string(80, '0') + "125e82";
  auto j = ParseJson("[" + digits + ", -" + std::string(70, '9') + ", 1.5]");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->as_array()[0].as_double(), 12.5);
  EXPECT_EQ(j->as_array()[1].as_double(), -1e70);
  EXPECT_FALSE(j->as_array()[1].is_integer());  // out of int64's range
  EXPECT_EQ(j->as_array()[2].as_double(), 1.5);
}

TEST(Json, DecodesEscapesAndDumps) {
  auto j = ParseJson(R"(["\u00e9\n\"", "\ud83d\ude00"])");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->as_array()[0].as_string(), "\xc3\xa9\n\"");
  EXPECT_EQ(j->as_array()[1].as_string(), "\xf0\x9f\x98\x80");
  Json o = Json::MakeObject();
  o.Set("x", Json::Number(0.1));
  o.Set("n", Json::Number(NAN));
  o.Set("i", Json::Integer(-3));
  EXPECT_EQ(o.Dump(), R"({"x":0.1,"n":"nan","i":-3})");
}

TEST(Json, StringsEscapeExactlyWhatJsonRequires) {
  std::string out;
  AppendJsonString(std::string("a\"b\\c\n\r\t\b\f\x01\x1f\x7f \xc3\xa9/", 17), &out);
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\x7f \xc3\xa9/\"");
  out.clear();
  AppendJsonString("", &out);
  EXPECT_EQ(out, "\"\"");
  out.clear();
  AppendJsonString("\"", &out);
  EXPECT_EQ(out, "\"\\\"\"");
  // Every byte, alone and between plain runs, parses back to itself.
  for (int c = 0; c < 256; ++c) {
    for (const std::string& s : {std::string(1, static_cast<char>(c)), "ab" + std::string(1, static_cast<char>(c)) + "cd"}) {
      out.clear();
      AppendJsonString(s, &out);
      absl::StatusOr<Json> back = ParseJson(out);
      ASSERT_TRUE(back.ok()) << c << ": " << back.status();
      EXPECT_EQ(back->as_string(), s) << c;
    }
  }
}

TEST(PyFormat, ReprMatchesPython) {
  EXPECT_EQ(PyRepr(1.0), "1.0");
  EXPECT_EQ(PyRepr(0.1), "0.1");
  EXPECT_EQ(PyRepr(1e-05), "1e-05");
  EXPECT_EQ(PyRepr(0.0001), "0.0001");
  EXPECT_EQ(PyRepr(1e16), "1e+16");
  EXPECT_EQ(PyRepr(1e15), "1000000000000000.0");
  EXPECT_EQ(PyRepr(1e22), "1e+22");
  EXPECT_EQ(PyRepr(1.000000082740371e-07), "1.000000082740371e-07");
  EXPECT_EQ(PyRepr(12.500000000000002), "12.500000000000002");
  EXPECT_EQ(PyRepr(-0.0), "-0.0");
  EXPECT_EQ(PyRepr(NAN), "nan");
  EXPECT_EQ(PyRepr(-INFINITY), "-inf");
  EXPECT_EQ(PyRepr(1.3e-06), "1.3e-06");
  EXPECT_EQ(PyRepr(123456789.125), "123456789.125");
}

TEST(PyFormat, FormatValueAndRound) {
  EXPECT_EQ(FormatValue12(0.20000000298023224), 0.20000000298);
  EXPECT_EQ(FormatValue12(0.0007102489471435547), 0.000710248947);
  EXPECT_EQ(PyRound(0.99997149, 6), 0.999971);
  EXPECT_EQ(PyRound(2.5, 0), 2.0);  // ties to even
  EXPECT_TRUE(std::isinf(FormatValue12(INFINITY)));
}

// FormatValue12 and PyRound compute in integers where the result is exact (|x| * 10^n rounds to
// below 2^53) and fall back to text beyond: both against snprintf + strtod in the domain of
// msprobe's metrics ([0, 1], small errors), across the 2^53 boundary, at exact ties (printf
// rounds them to even), on subnormals and signed zeros, for every ndigits from 0 to 24.
TEST(PyFormat, RoundingInIntegersMatchesPrintfAndStrtod) {
  std::mt19937_64 rng(29);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_real_distribution<double> exp2(-80, 14);
  std::vector<double> xs = {0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 0.5, 1.5, 2.5,
                            9007.199254740991, 9007.199254740992, 9007.199254740993,
                            0.0001220703125, 3 * 0.0001220703125, 0.0078125, 0.0234375,
                            9007199254740991.0, 9007199254740993.0, 1e22, 123456.789};
  for (int i = 0; i < 20000; ++i) {
    xs.push_back(unit(rng));
    xs.push_back(-unit(rng) * 1e-6);
    xs.push_back(std::ldexp(unit(rng) + 1.0, static_cast<int>(exp2(rng))));
    // Ties of 12 and 6 decimals: odd multiples of 2^-13 and 2^-7.
    xs.push_back(std::ldexp(static_cast<double>(2 * (rng() % 100000000) + 1), -13));
    xs.push_back(std::ldexp(static_cast<double>(2 * (rng() % 1000000) + 1), -7));
    // Just around 2^53 / 10^12.
    xs.push_back(std::nextafter(9007.199254740992, (i % 2) ? 0.0 : 1e9) + (i % 7) * 1e-12);
  }
  const size_t fixed = 19;  // the values above: every ndigits; the random ones: 6, 12 and one more
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i];
    std::vector<int> ns = {6, 12, static_cast<int>(rng() % 25)};
    if (i < fixed) {
      ns.clear();
      for (int n = 0; n <= 24; ++n) ns.push_back(n);
    }
    for (int n : ns) {
      char buf[512];
      std::snprintf(buf, sizeof(buf), "%.*f", n, x);
      const double want = std::strtod(buf, nullptr);
      const double got = n == 12 ? FormatValue12(x) : PyRound(x, n);
      ASSERT_EQ(std::memcmp(&got, &want, sizeof(double)), 0)
          << buf << " from " << std::hexfloat << x << " got " << got;
    }
  }
}

// The to_chars/from_chars implementations against their definitions (snprintf + strtod, as
// Python's float(f"{x:.12f}") and "{:.1%}" are), and PyRepr against repr()'s rule (the shortest
// digits that read back to x), on random bit patterns (subnormals, huge values) and on
// 10^[-30, 30].
TEST(PyFormat, FastFormattingMatchesItsDefinitionOnRandomValues) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> exp10(-30, 30);
  for (int i = 0; i < 40000; ++i) {
    double x;
    if (i % 2 == 0) {
      const uint64_t u = rng();
      std::memcpy(&x, &u, 8);
      if (!std::isfinite(x)) continue;
    } else {
      x = std::pow(10.0, exp10(rng)) * (i % 4 == 1 ? 1 : -1);
    }
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.12f", x);
    ASSERT_EQ(FormatValue12(x), std::strtod(buf, nullptr)) << buf;
    std::snprintf(buf, sizeof(buf), "%.6f", x);
    ASSERT_EQ(PyRound(x, 6), std::strtod(buf, nullptr)) << buf;
    std::snprintf(buf, sizeof(buf), "%.1f%%", x * 100.0);
    ASSERT_EQ(PyPercent1(x), buf);
    // repr: reads back to x, with as many significant digits as the shortest "%.*e" that does.
    const std::string r = PyRepr(x);
    ASSERT_EQ(std::strtod(r.c_str(), nullptr), x) << r;
    int shortest = 1;
    for (; shortest < 17; ++shortest) {
      std::snprintf(buf, sizeof(buf), "%.*e", shortest - 1, x);
      if (std::strtod(buf, nullptr) == x) break;
    }
    const std::string mantissa = r.substr(0, r.find('e'));
    int digits = 0;
    bool leading = true;
    for (char c : mantissa) {
      if (c < '0' || c > '9') continue;
      if (leading && c == '0') continue;  // "0.000123"
      leading = false;
      ++digits;
    }
    // Trailing zeros of an integer-valued repr ("1200.0") are layout, not digits.
    int trailing = 0;
    const std::string int_part = mantissa.substr(0, mantissa.find('.'));
    if (mantissa.size() >= 2 && mantissa.compare(mantissa.size() - 2, 2, ".0") == 0) {
      ++trailing;  // the ".0"
      for (size_t k = int_part.size(); k-- > 1 && int_part[k] == '0';) ++trailing;
    }
    ASSERT_EQ(std::max(1, digits - trailing), shortest) << r;
  }
}

TEST(PyFormat, PercentAndTuple) {
  EXPECT_EQ(PyPercent1(1.0 / 16), "6.2%");  // round half even on the binary value
  EXPECT_EQ(PyPercent1(3.0 / 32), "9.4%");
  EXPECT_EQ(PyPercent1(2.0 / 3), "66.7%");
  EXPECT_EQ(PyTuple({5}), "(5,)");
  EXPECT_EQ(PyTuple({2, 0, 2}), "(2, 0, 2)");
  EXPECT_EQ(PyTuple({}), "()");
}

TEST(FloatFormats, HalfRoundTripsEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToHalf(f), h) << h;
  }
}

TEST(FloatFormats, HalfRoundsToNearestEven) {
  EXPECT_EQ(RoundToHalf(65519.0f), 65504.0f);
  EXPECT_TRUE(std::isinf(RoundToHalf(65520.0f)));
  EXPECT_EQ(RoundToHalf(1.0f + 1.0f / 2048), 1.0f);           // tie -> even
  EXPECT_EQ(RoundToHalf(1.0f + 3.0f / 2048), 1.0f + 2.0f / 1024);
  EXPECT_EQ(RoundToHalf(2.220446e-16f), 0.0f);                 // msprobe's eps vanishes
  EXPECT_EQ(RoundToHalf(0.001f), 0.00100040435791015625f);
  EXPECT_EQ(HalfToFloat(0x0001), 5.9604644775390625e-08f);     // smallest subnormal
}

TEST(FloatFormats, BFloat16AndFp8) {
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(FloatToBFloat16(1.0f + 1.0f / 256), 0x3f80);  // tie -> even
  EXPECT_EQ(Float8E4M3FNToFloat(0x38), 1.0f);
  EXPECT_EQ(Float8E4M3FNToFloat(0x7e), 448.0f);
  EXPECT_TRUE(std::isnan(Float8E4M3FNToFloat(0x7f)));
  EXPECT_EQ(Float8E5M2ToFloat(0x3c), 1.0f);
  EXPECT_TRUE(std::isinf(Float8E5M2ToFloat(0x7c)));
}

TEST(Glob, Matches) {
  EXPECT_TRUE(GlobMatch("Functional.softmax.*", "Functional.softmax.0.forward.output.0"));
  EXPECT_FALSE(GlobMatch("Functional.softmax.*", "Functional.relu.0.forward"));
  EXPECT_TRUE(GlobMatch("*.output.?", "a.output.0"));
  EXPECT_FALSE(GlobMatch("*.output.?", "a.output.10"));
  EXPECT_TRUE(GlobMatch("[lL]inear", "Linear"));
  EXPECT_TRUE(GlobMatch("[!a-c]x", "dx"));
  EXPECT_FALSE(GlobMatch("[!a-c]x", "bx"));
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("a*b*c", "aXXbYYc"));
}

TEST(DTypes, ParseEveryNaming) {
  EXPECT_EQ(ParseDType("torch.float32"), DType::kFloat32);
  EXPECT_EQ(ParseDType("Float16"), DType::kFloat16);
  EXPECT_EQ(ParseDType("BFloat16"), DType::kBFloat16);
  EXPECT_EQ(ParseDType("torch.bool"), DType::kBool);
  EXPECT_EQ(ParseDType("torch.float8_e4m3fn"), DType::kFloat8E4M3FN);
  EXPECT_FALSE(ParseDType("torch.complex64").has_value());
  EXPECT_EQ(ParseSafetensorsDType("BF16"), DType::kBFloat16);
  EXPECT_EQ(TorchDTypeName(DType::kInt64), "torch.int64");
}

TEST(Tensors, MakeRejectsByteCountMismatchNamingTheNumbers) {
  auto t = Tensor::Make(DType::kFloat32, {2, 3}, std::string(20, '\0'));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "tensor byte length 20 does not match shape [2, 3] (6 elements) x 4 bytes per float32 = 24");
  EXPECT_FALSE(Tensor::Make(DType::kFloat32, {-1}, "").ok());
  EXPECT_FALSE(Tensor::Make(DType::kFloat32, {1, 1, 1, 1, 1, 1, 1, 1, 1}, std::string(4, '\0')).ok());
  EXPECT_FALSE(Tensor::Make(DType::kFloat64, {int64_t{1} << 62, 4}, "").ok());
}

}  // namespace
}  // namespace parity
