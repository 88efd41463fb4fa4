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
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci looks like "-d.ddde+XX" or "de-XX".
  std::string sign;
  size_t p = 0;
  if (sci[0] == '-') {
    sign = "-";
    p = 1;
  }
  const size_t epos = sci.find('e');
  std::string mant = sci.substr(p, epos - p);
  const int exp = std::atoi(sci.c_str() + epos + 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits.push_back(c);
  }
  const int decpt = exp + 1;  // value = 0.digits * 10^decpt
  if (decpt <= -4 || decpt > 16) {
    std::string out = sign;
    out.push_back(digits[0]);
    if (digits.size() > 1) {
      out.push_back('.');
      out.append(digits, 1, std::string::npos);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out.append(ebuf);
    return out;
  }
  std::string out = sign;
  if (decpt <= 0) {
    out.append("0.");
    out.append(static_cast<size_t>(-decpt), '0');
    out.append(digits);
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out.append(digits);
    out.append(static_cast<size_t>(decpt) - digits.size(), '0');
    out.append(".0");
  } else {
    out.append(digits, 0, static_cast<size_t>(decpt));
    out.push_back('.');
    out.append(digits, static_cast<size_t>(decpt), std::string::npos);
  }
  return out;
}

double FormatValue12(double x) {
  if (!std::isfinite(x)) return x;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.12f", x);
  return std::strtod(buf, nullptr);
}

double PyRound(double x, int ndigits) {
  if (!std::isfinite(x)) return x;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", ndigits, x);
  return std::strtod(buf, nullptr);
}

std::string PyPercent1(double x) {
  if (std::isnan(x)) return "nan%";
  if (std::isinf(x)) return x > 0 ? "inf%" : "-inf%";
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.1f%%", x * 100.0);
  return buf;
}

std::string PyTuple(const std::vector<int64_t>& idx) {
  if (idx.size() == 1) return absl::StrCat("(", idx[0], ",)");
  return absl::StrCat("(", absl::StrJoin(idx, ", "), ")");
}

}  // namespace parity
