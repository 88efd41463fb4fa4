#include "common/base/csv.h"

#include "gtest/gtest.h"

namespace parity {
namespace {

TEST(CsvField, FormulasGetAQuoteNumbersStayNumbers) {
  EXPECT_EQ(CsvField("=1+1"), "'=1+1");
  EXPECT_EQ(CsvField("@SUM(A1)"), "'@SUM(A1)");
  EXPECT_EQ(CsvField("+cmd"), "'+cmd");
  EXPECT_EQ(CsvField("-1+cmd|' /C calc'!A0"), "'-1+cmd|' /C calc'!A0");
  // A tab or carriage return first is refused even before a number (a spreadsheet may trim it).
  EXPECT_EQ(CsvField("\t1"), "'\t1");
  EXPECT_EQ(CsvField("\r=1"), "\"'\r=1\"");
  EXPECT_EQ(CsvField("-1 "), "'-1 ");
  // msprobe's numeric columns.
  EXPECT_EQ(CsvField("-0.25"), "-0.25");
  EXPECT_EQ(CsvField("+3"), "+3");
  EXPECT_EQ(CsvField("-inf"), "-inf");
  EXPECT_EQ(CsvField("-1e-07"), "-1e-07");
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField(""), "");
}

TEST(CsvField, QuotesCellsWithSeparatorsQuotesOrLineBreaks) {
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(CsvField("=HYPERLINK(\"evil\";\"x\")"), "\"'=HYPERLINK(\"\"evil\"\";\"\"x\"\")\"");
}

}  // namespace
}  // namespace parity
