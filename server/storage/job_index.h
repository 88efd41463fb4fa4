// A finished job's results packed for reading: what its listings in any order and its plot are
// cut from. Stored beside the job's final record (table job_index, one blob per part), so that
// the first view of a big job reads a few bytes per result instead of decoding every row.
//
// Parts, little-endian (as x86-64 and aarch64 are): the rows (part kIndexRowsPart), in dump
// order (ascending slot, the low 32 bits of op_results.k), 8 bytes each: u32 slot, u8 verdict,
// u8 phase, u8 role, u8 culprit; and one part per sortable metric (its kSortableMetrics
// position) that some row holds a number for: an f64 per row in the rows' order, NaN where the
// row has none. A metric without a part has no number in any row.
#ifndef PARITY_SERVER_STORAGE_JOB_INDEX_H_
#define PARITY_SERVER_STORAGE_JOB_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace parity {

inline constexpr int kIndexRowsPart = -1;

struct IndexRow {
  uint32_t slot;
  uint8_t verdict, phase, role, culprit;
};
static_assert(sizeof(IndexRow) == 8 && offsetof(IndexRow, verdict) == 4 && offsetof(IndexRow, culprit) == 7,
              "IndexRow's layout is the stored form");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "job indexes are stored in the machine's byte order, which must be little-endian"
#endif

struct JobIndex {
  std::vector<IndexRow> rows;                  // ascending slot
  std::map<int, std::vector<double>> columns;  // metric position -> a value per row
};

// Builds a JobIndex row by row, in ascending slot order.
class JobIndexBuilder {
 public:
  void AddRow(const IndexRow& row) { index_.rows.push_back(row); }
  // The last added row's number for the metric at `column` (the row has NaN otherwise).
  void SetNumber(int column, double value);
  JobIndex Finish() &&;

 private:
  JobIndex index_;
};

// A JobIndex in its stored form: (part, bytes), the rows first.
using JobIndexParts = std::vector<std::pair<int, std::string>>;
JobIndexParts EncodeJobIndex(JobIndex index);

std::string EncodeIndexRows(absl::Span<const IndexRow> rows);
// DATA_LOSS for a length that is not a whole number of rows or slots that do not ascend.
absl::StatusOr<std::vector<IndexRow>> DecodeIndexRows(absl::string_view part);
std::string EncodeIndexColumn(absl::Span<const double> values);
// DATA_LOSS unless the part holds exactly `rows` values.
absl::StatusOr<std::vector<double>> DecodeIndexColumn(absl::string_view part, size_t rows);

}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_JOB_INDEX_H_
