// CSV cells for spreadsheets: RFC 4180 quoting, and OWASP's rule against formula injection.
#ifndef PARITY_COMMON_BASE_CSV_H_
#define PARITY_COMMON_BASE_CSV_H_

#include <string>

#include "absl/strings/string_view.h"

namespace parity {

// `s` as one CSV cell. A cell a spreadsheet would evaluate gets a leading ' (one that starts
// with =, @, a tab or a carriage return; or with + or - unless it is a number, such as "-0.25"
// or "-inf", so that msprobe's numeric columns stay numbers). Then RFC 4180: a cell holding a
// comma, a quote or a line break is quoted, its quotes doubled.
std::string CsvField(absl::string_view s);

}  // namespace parity

#endif  // PARITY_COMMON_BASE_CSV_H_
