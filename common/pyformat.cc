#include "common/pyformat.h"

#include <charconv>
#include <cmath>
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
// and parsing overhead; this runs for every metric of every msprobe result.
double FixedRoundTrip(double x, int ndigits) {
  if (!std::isfinite(x)) return x;
  char buf[512];  // DBL_MAX in fixed notation: 309 digits and the decimals
  const auto printed = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::fixed, ndigits);
  double v = 0;
  std::from_chars(buf, printed.ptr, v);
  return v;
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
