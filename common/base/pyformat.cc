#include "common/base/pyformat.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace parity {

std::string PyRepr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  // The shortest round-trip digits (what repr() prints), from to_chars' "-d.ddde+XX", laid out
  // as Python does: scientific when the decimal point falls before -4 or after 16 digits.
  char sci[40];
  const char* end = std::to_chars(sci, sci + sizeof(sci), x, std::chars_format::scientific).ptr;
  const char* p = sci;
  const bool negative = *p == '-';
  if (negative) ++p;
  char digits[24];
  int nd = 0;
  while (p < end && *p != 'e') {
    if (*p != '.') digits[nd++] = *p;
    ++p;
  }
  int exp = 0;
  const bool exp_negative = p + 1 < end && p[1] == '-';
  for (const char* q = p + 2; q < end; ++q) exp = exp * 10 + (*q - '0');
  if (exp_negative) exp = -exp;
  const int decpt = exp + 1;  // value = 0.digits * 10^decpt

  char out[48];
  int n = 0;
  if (negative) out[n++] = '-';
  if (decpt <= -4 || decpt > 16) {
    out[n++] = digits[0];
    if (nd > 1) {
      out[n++] = '.';
      for (int i = 1; i < nd; ++i) out[n++] = digits[i];
    }
    out[n++] = 'e';
    out[n++] = exp < 0 ? '-' : '+';
    const int a = exp < 0 ? -exp : exp;
    if (a >= 100) out[n++] = static_cast<char>('0' + a / 100);
    out[n++] = static_cast<char>('0' + a / 10 % 10);
    out[n++] = static_cast<char>('0' + a % 10);
  } else if (decpt <= 0) {
    out[n++] = '0';
    out[n++] = '.';
    for (int i = 0; i < -decpt; ++i) out[n++] = '0';
    for (int i = 0; i < nd; ++i) out[n++] = digits[i];
  } else if (decpt >= nd) {
    for (int i = 0; i < nd; ++i) out[n++] = digits[i];
    for (int i = nd; i < decpt; ++i) out[n++] = '0';
    out[n++] = '.';
    out[n++] = '0';
  } else {
    for (int i = 0; i < decpt; ++i) out[n++] = digits[i];
    out[n++] = '.';
    for (int i = decpt; i < nd; ++i) out[n++] = digits[i];
  }
  return std::string(out, static_cast<size_t>(n));
}

namespace {
// x printed with `ndigits` decimals (correctly rounded, as printf's "%.*f") and read back
// (correctly rounded, as strtod): Python's float(f"{x:.{n}f}"). std::to_chars/from_chars give the
// same bits as snprintf/strtod (format_test checks it on random values) without their locale
// and parsing overhead.
double FixedRoundTripByText(double x, int ndigits) {
  char buf[512];  // DBL_MAX in fixed notation: 309 digits and the decimals
  const auto printed = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::fixed, ndigits);
  double v = 0;
  std::from_chars(buf, printed.ptr, v);
  return v;
}

// The same without text, where it is exact in integers: |x| = m * 2^e, so |x| * 10^n is
// m * 5^n * 2^(e + n), rounded to an integer N half to even (printf's rounding of the exact
// binary value); when N < 2^53 and n <= 22, N and 10^n are exact doubles and N / 10^n is the
// correctly rounded value of the text "N * 10^-n" (Clinger's fast path), as strtod reads it.
// This runs for every metric of every msprobe result (about 600 instructions by text, 60 here).
constexpr int kMaxFastDigits = 22;
constexpr uint64_t kPow5[kMaxFastDigits + 1] = {
    1ull, 5ull, 25ull, 125ull, 625ull, 3125ull, 15625ull, 78125ull, 390625ull, 1953125ull,
    9765625ull, 48828125ull, 244140625ull, 1220703125ull, 6103515625ull, 30517578125ull,
    152587890625ull, 762939453125ull, 3814697265625ull, 19073486328125ull, 95367431640625ull,
    476837158203125ull, 2384185791015625ull};
constexpr double kPow10[kMaxFastDigits + 1] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                               1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                               1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

double FixedRoundTrip(double x, int ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits < 0 || ndigits > kMaxFastDigits) return FixedRoundTripByText(x, ndigits);
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  const bool negative = (bits >> 63) != 0;
  const int biased = static_cast<int>((bits >> 52) & 0x7ff);
  uint64_t m = bits & ((uint64_t{1} << 52) - 1);
  int e = -1074;  // subnormal: |x| = m * 2^-1074
  if (biased != 0) {
    m |= uint64_t{1} << 52;
    e = biased - 1075;
  }
  using u128 = unsigned __int128;
  const u128 p = static_cast<u128>(m) * kPow5[ndigits];  // < 2^53 * 5^22 < 2^105
  const int shift = -(e + ndigits);                       // |x| * 10^n = p * 2^-shift
  constexpr uint64_t kExactLimit = uint64_t{1} << 53;
  uint64_t n;
  if (shift <= 0) {
    if (-shift >= 53 || p >= (static_cast<u128>(kExactLimit) >> -shift)) {
      return FixedRoundTripByText(x, ndigits);
    }
    n = static_cast<uint64_t>(p << -shift);
  } else if (shift >= 106) {
    n = 0;  // p * 2^-shift < 2^105 * 2^-106 = 1/2
  } else {
    const u128 q = p >> shift;
    const u128 rest = p - (q << shift);
    const u128 half = static_cast<u128>(1) << (shift - 1);
    if (q >= kExactLimit) return FixedRoundTripByText(x, ndigits);
    n = static_cast<uint64_t>(q);
    if (rest > half || (rest == half && (n & 1) != 0)) ++n;
    if (n >= kExactLimit) return FixedRoundTripByText(x, ndigits);
  }
  const double v = static_cast<double>(n) / kPow10[ndigits];
  return negative ? -v : v;
}
}  // namespace

double FormatValue12(double x) { return FixedRoundTrip(x, 12); }

double PyRound(double x, int ndigits) { return FixedRoundTrip(x, ndigits); }

std::string PyPercent1(double x) {
  if (std::isnan(x)) return "nan%";
  if (std::isinf(x)) return x > 0 ? "inf%" : "-inf%";
  char buf[512];
  char* end = std::to_chars(buf, buf + sizeof(buf) - 1, x * 100.0, std::chars_format::fixed, 1).ptr;
  *end++ = '%';
  return std::string(buf, end);
}

std::string PyTuple(const std::vector<int64_t>& idx) {
  if (idx.size() == 1) return absl::StrCat("(", idx[0], ",)");
  return absl::StrCat("(", absl::StrJoin(idx, ", "), ")");
}

}  // namespace parity
