#include "server/storage/job_index.h"

#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace parity {

void JobIndexBuilder::SetNumber(int column, double value) {
  if (index_.rows.empty()) return;
  std::vector<double>& values = index_.columns[column];
  values.resize(index_.rows.size(), std::numeric_limits<double>::quiet_NaN());
  values.back() = value;
}

JobIndex JobIndexBuilder::Finish() && {
  for (auto& [column, values] : index_.columns) {
    values.resize(index_.rows.size(), std::numeric_limits<double>::quiet_NaN());
  }
  return std::move(index_);
}

JobIndexParts EncodeJobIndex(JobIndex index) {
  JobIndexParts parts;
  parts.emplace_back(kIndexRowsPart, EncodeIndexRows(index.rows));
  index.rows = {};
  for (auto& [column, values] : index.columns) {
    parts.emplace_back(column, EncodeIndexColumn(values));
    values = {};  // freed as it goes: the encoded form is what is kept
  }
  return parts;
}

std::string EncodeIndexRows(absl::Span<const IndexRow> rows) {
  std::string out(rows.size() * sizeof(IndexRow), '\0');
  if (!rows.empty()) std::memcpy(out.data(), rows.data(), out.size());
  return out;
}

absl::StatusOr<std::vector<IndexRow>> DecodeIndexRows(absl::string_view part) {
  if (part.size() % sizeof(IndexRow) != 0) {
    return absl::DataLossError(absl::StrCat("a job index's rows take ", part.size(),
                                            " bytes, not a multiple of ", sizeof(IndexRow)));
  }
  std::vector<IndexRow> rows(part.size() / sizeof(IndexRow));
  // The stored form is the struct's layout on a little-endian machine.
  if (!rows.empty()) std::memcpy(rows.data(), part.data(), part.size());
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].slot <= rows[i - 1].slot) {
      return absl::DataLossError(absl::StrCat("a job index's row ", i, " has slot ", rows[i].slot,
                                              ", not above the previous one's ", rows[i - 1].slot));
    }
  }
  return rows;
}

std::string EncodeIndexColumn(absl::Span<const double> values) {
  std::string out(values.size() * sizeof(double), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

absl::StatusOr<std::vector<double>> DecodeIndexColumn(absl::string_view part, size_t rows) {
  if (part.size() != rows * sizeof(double)) {
    return absl::DataLossError(absl::StrCat("a job index's column takes ", part.size(),
                                            " bytes for ", rows, " rows of 8"));
  }
  std::vector<double> values(rows);
  if (rows > 0) std::memcpy(values.data(), part.data(), part.size());
  return values;
}

}  // namespace parity
