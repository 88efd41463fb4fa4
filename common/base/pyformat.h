// Number formatting that reproduces Python's, so that peer placeholders and messages match
// byte for byte.
#ifndef PARITY_COMMON_PYFORMAT_H_
#define PARITY_COMMON_PYFORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace parity {

// Python repr(float): shortest round-trip digits; exponent notation when the decimal exponent
// is < -4 or >= 16 ("1e-05", "1e+16", "0.0001", "1.0"); "nan", "inf", "-inf".
std::string PyRepr(double x);

// float('{:.12f}'.format(x)): msprobe's format_value.
double FormatValue12(double x);

// Python round(x, ndigits) for floats (correctly rounded, ties to even on the binary value).
double PyRound(double x, int ndigits);

// '{:.1%}'.format(x).
std::string PyPercent1(double x);

// Python tuple notation of an index: "(5,)", "(2, 0, 2)", "()".
std::string PyTuple(const std::vector<int64_t>& idx);

}  // namespace parity

#endif  // PARITY_COMMON_PYFORMAT_H_
