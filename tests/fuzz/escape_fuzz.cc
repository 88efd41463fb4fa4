// Output escaping of uploaded text: for any bytes, TerminalSafe leaves no control character
// (and changes nothing in text that has none), and CsvField gives one RFC 4180 cell that reads
// back as the text (or the text after a protective ') and that no spreadsheet evaluates.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "common/base/control_chars.h"
#include "common/base/csv.h"

namespace parity {
namespace {

// Reads one cell written by CsvField back; aborts on what RFC 4180 does not allow.
std::string ReadCell(const std::string& f) {
  if (f.empty() || f[0] != '"') {
    if (f.find_first_of(",\"\n\r") != std::string::npos) std::abort();  // unquoted separator
    return f;
  }
  if (f.size() < 2 || f.back() != '"') std::abort();
  std::string out;
  for (size_t i = 1; i + 1 < f.size(); ++i) {
    if (f[i] == '"') {
      if (i + 2 >= f.size() || f[i + 1] != '"') std::abort();  // a lone quote inside
      ++i;
    }
    out.push_back(f[i]);
  }
  return out;
}

void CheckTerminal(const std::string& s) {
  const std::string safe = TerminalSafe(s);
  if (FindControlCharacter(safe)) std::abort();
  if (!FindControlCharacter(s) && safe != s) std::abort();
}

void CheckCsv(const std::string& s) {
  const std::string cell = ReadCell(CsvField(s));
  if (cell != s && cell != "'" + s) std::abort();
  if (cell.empty()) return;
  const char c = cell[0];
  if (c == '=' || c == '@' || c == '\t' || c == '\r') std::abort();
  if (c == '+' || c == '-') {
    double unused;
    if (cell.find_first_of(" \t\r\n\f\v") != std::string::npos || !absl::SimpleAtod(cell, &unused)) std::abort();
  }
}

}  // namespace
}  // namespace parity

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string s(reinterpret_cast<const char*>(data), size);
  parity::CheckTerminal(s);
  parity::CheckCsv(s);
  return 0;
}
