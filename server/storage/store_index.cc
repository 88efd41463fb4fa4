// Finished jobs' packed indexes (job_index.h): built from the stored rows when a job finishes,
// written with its final record, read by its listings and series.
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "server/storage/result_codec.h"
#include "server/storage/store.h"
#include "server/storage/store_rows.h"

namespace parity {

using store_internal::FirstKey;
using store_internal::JobSeq;
using store_internal::LastKey;
using store_internal::ResultKey;

namespace {
// kSortableMetrics positions by name (the rows' metric names repeat in every row).
int MetricPosition(absl::string_view name) {
  static const auto* const positions = [] {
    auto* m = new absl::flat_hash_map<absl::string_view, int>();
    for (size_t i = 0; i < std::size(kSortableMetrics); ++i) (*m)[kSortableMetrics[i]] = static_cast<int>(i);
    return m;
  }();
  auto it = positions->find(name);
  return it == positions->end() ? -1 : it->second;
}
}  // namespace

absl::StatusOr<std::shared_ptr<const JobIndexParts>> Store::BuildJobIndex(
    const std::string& job_id, const std::vector<std::pair<int64_t, CulpritStatus>>& marks) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(int64_t seq, JobSeq(r.db(), job_id));
  absl::flat_hash_map<uint32_t, uint8_t> marked;
  for (const auto& [index, status] : marks) {
    PARITY_ASSIGN_OR_RETURN(int64_t key, ResultKey(seq, index));
    marked[static_cast<uint32_t>(key & 0xffffffff)] = static_cast<uint8_t>(status);
  }
  PARITY_ASSIGN_OR_RETURN(
      Statement st, r.db().Prepare("SELECT k, verdict, phase, role, culprit, rec FROM op_results "
                                   "WHERE k BETWEEN ? AND ? ORDER BY k"));
  st.Bind(1, FirstKey(seq)).Bind(2, LastKey(seq));
  JobIndexBuilder b;
  size_t rows = 0;
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    if (++rows > kMaxIndexedResults) return nullptr;
    IndexRow ir;
    ir.slot = static_cast<uint32_t>(st.ColumnInt(0) & 0xffffffff);
    ir.verdict = static_cast<uint8_t>(st.ColumnInt(1));
    ir.phase = static_cast<uint8_t>(st.ColumnInt(2));
    ir.role = static_cast<uint8_t>(st.ColumnInt(3));
    auto mark = marked.find(ir.slot);
    ir.culprit = mark != marked.end() ? mark->second : static_cast<uint8_t>(st.ColumnInt(4));
    b.AddRow(ir);
    ForEachBlobNumber(st.ColumnBlob(5), [&b](absl::string_view name, double v) {
      const int column = MetricPosition(name);
      if (column >= 0) b.SetNumber(column, v);
      return true;
    });
  }
  return std::make_shared<const JobIndexParts>(EncodeJobIndex(std::move(b).Finish()));
}

Store::WriteFn Store::StoreJobIndex(std::string job_id, std::shared_ptr<const JobIndexParts> index) {
  return [job_id = std::move(job_id), index = std::move(index)](Database& db) -> absl::Status {
    if (index == nullptr) return absl::OkStatus();
    PARITY_ASSIGN_OR_RETURN(Statement st,
                            db.Prepare(store_internal::ReplaceInto(db.dialect(), "job_index", "job_id, col, data",
                                                                   "job_id, col")));
    for (const auto& [part, bytes] : *index) {
      st.Reset();
      st.BindStatic(1, job_id).Bind(2, int64_t{part}).BindBlobStatic(3, bytes);
      PARITY_RETURN_IF_ERROR(st.Run());
    }
    return absl::OkStatus();
  };
}

absl::StatusOr<std::optional<Store::IndexedColumn>> Store::ReadIndex(Database& db, const std::string& job_id,
                                                                     int column) {
  PARITY_ASSIGN_OR_RETURN(Statement st, db.Prepare("SELECT data FROM job_index WHERE job_id=? AND col=?"));
  st.Bind(1, job_id).Bind(2, int64_t{kIndexRowsPart});
  PARITY_ASSIGN_OR_RETURN(bool have, st.Step());
  if (!have) return std::optional<IndexedColumn>();
  IndexedColumn out;
  PARITY_ASSIGN_OR_RETURN(out.rows, DecodeIndexRows(st.ColumnBlob(0)));
  if (column < 0) return std::optional<IndexedColumn>(std::move(out));
  st.Reset();
  st.Bind(1, job_id).Bind(2, int64_t{column});
  PARITY_ASSIGN_OR_RETURN(have, st.Step());
  if (have) {
    PARITY_ASSIGN_OR_RETURN(out.values, DecodeIndexColumn(st.ColumnBlob(0), out.rows.size()));
  } else {
    out.values.assign(out.rows.size(), std::numeric_limits<double>::quiet_NaN());
  }
  return std::optional<IndexedColumn>(std::move(out));
}

}  // namespace parity
