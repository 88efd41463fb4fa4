#include "common/base/csv.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace parity {
namespace {

// A signed number as a spreadsheet reads one: no spaces anywhere (absl::SimpleAtod would take
// "-1 " too, and a leading tab).
bool IsSignedNumber(absl::string_view s) {
  if (s.find_first_of(" \t\r\n\f\v") != absl::string_view::npos) return false;
  double unused;
  return absl::SimpleAtod(s, &unused);
}

}  // namespace

std::string CsvField(absl::string_view s) {
  std::string cell(s);
  if (!cell.empty()) {
    const char c = cell[0];
    const bool formula = c == '=' || c == '@' || c == '\t' || c == '\r' ||
                         ((c == '+' || c == '-') && !IsSignedNumber(cell));
    if (formula) cell.insert(cell.begin(), '\'');
  }
  if (cell.find_first_of(",\"\n\r") == std::string::npos) return cell;
  return absl::StrCat("\"", absl::StrReplaceAll(cell, {{"\"", "\"\""}}), "\"");
}

}  // namespace parity
