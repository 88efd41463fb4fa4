// The store's reads: runs, items, jobs, op results (filtered, sorted, paged), tokens and
// blob references.
#include "server/storage/store.h"

#include <sys/stat.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/base/glob.h"
#include "common/base/json.h"
#include "common/base/pyformat.h"
#include "common/base/status_macros.h"
#include "common/base/thread_name.h"
#include "server/storage/result_codec.h"

#include "server/storage/store_rows.h"

namespace parity {

using store_internal::FirstColumnOfEachRow;
using store_internal::IndexedBy;
using store_internal::ReplaceInto;
using store_internal::FirstKey;
using store_internal::LastKey;
using store_internal::ParseShape;
using store_internal::ParseStat;
using store_internal::ReadJob;
using store_internal::ReadResult;
using store_internal::ReadRun;
using store_internal::ResultKey;
using store_internal::kJobColumns;
using store_internal::kResultColumns;
using store_internal::kRunColumns;

absl::StatusOr<RunRecord> Store::GetRun(const std::string& run_id) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare(absl::StrCat("SELECT ", kRunColumns, " FROM runs WHERE run_id=?")));
  st.Bind(1, run_id);
  PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return RunNotFound(run_id);
  RunRecord run = ReadRun(st);
  PARITY_ASSIGN_OR_RETURN(Statement l, r.db().Prepare("SELECT key, value FROM run_labels WHERE run_id=? ORDER BY key"));
  l.Bind(1, run_id);
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool more, l.Step());
    if (!more) break;
    run.labels[l.ColumnText(0)] = l.ColumnText(1);
  }
  return run;
}

absl::StatusOr<std::vector<RunRecord>> Store::ListRuns(const RunFilter& f, int64_t offset, int64_t limit) {
  std::vector<std::string> where;
  std::vector<std::string> args;
  if (!f.project.empty()) { where.push_back("project=?"); args.push_back(f.project); }
  if (!f.model.empty()) { where.push_back("model=?"); args.push_back(f.model); }
  if (!f.structure_hash.empty()) { where.push_back("structure_hash=?"); args.push_back(f.structure_hash); }
  if (f.side) where.push_back(absl::StrCat("side=", f.side));
  if (f.complete_only) where.push_back("complete=1");
  if (f.created_after_ms) where.push_back(absl::StrCat("created_at_ms>=", f.created_after_ms));
  if (f.created_before_ms) where.push_back(absl::StrCat("created_at_ms<", f.created_before_ms));
  for (const auto& [k, v] : f.labels) {
    where.push_back("run_id IN (SELECT run_id FROM run_labels WHERE key=? AND value=?)");
    args.push_back(k);
    args.push_back(v);
  }
  std::vector<std::string> ids;
  {
    PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
    PARITY_ASSIGN_OR_RETURN(
        Statement st,
        r.db().Prepare(absl::StrCat("SELECT run_id FROM runs", where.empty() ? "" : " WHERE ",
                                    absl::StrJoin(where, " AND "),
                                    " ORDER BY created_at_ms DESC, run_id DESC LIMIT ? OFFSET ?")));
    int i = 1;
    for (const std::string& a : args) st.Bind(i++, a);
    st.Bind(i, limit).Bind(i + 1, offset);
    while (true) {
      PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      ids.push_back(st.ColumnText(0));
    }
  }
  std::vector<RunRecord> out;
  for (const std::string& id : ids) {
    PARITY_ASSIGN_OR_RETURN(RunRecord run, GetRun(id));
    out.push_back(std::move(run));
  }
  return out;
}

namespace {
constexpr char kItemColumns[] =
    "run_id, name, api, op_type, phase, role, idx, dtype, shape, data_mode, byte_length, stat_max, "
    "stat_min, stat_mean, stat_norm, crc32, requires_grad, scalar_value, scalar_type, blob, read_error, "
    "data, dtype_text, data_name, shape_text, in_run_golden";

// Reads the row into *it, reusing its strings' storage.
void ReadItemInto(const Statement& st, ItemRecord* it) {
  auto text = [&st](int col, std::string* out) {
    const absl::string_view v = st.ColumnBlob(col);
    out->assign(v.data(), v.size());
  };
  text(0, &it->run_id);
  text(1, &it->name);
  text(2, &it->api);
  text(3, &it->op_type);
  it->phase = static_cast<Phase>(st.ColumnInt(4));
  it->role = static_cast<Role>(st.ColumnInt(5));
  it->index = st.ColumnInt(6);
  it->dtype.reset();
  if (!st.ColumnIsNull(7)) it->dtype = static_cast<DType>(st.ColumnInt(7));
  it->shape = ParseShape(st.ColumnBlob(8));
  it->data_mode = static_cast<DataMode>(st.ColumnInt(9));
  it->byte_length = static_cast<uint64_t>(st.ColumnInt(10));
  it->max = ParseStat(st, 11);
  it->min = ParseStat(st, 12);
  it->mean = ParseStat(st, 13);
  it->norm = ParseStat(st, 14);
  it->crc32.reset();
  if (!st.ColumnIsNull(15)) it->crc32 = static_cast<uint32_t>(st.ColumnInt(15));
  it->requires_grad.reset();
  if (!st.ColumnIsNull(16)) it->requires_grad = st.ColumnInt(16) != 0;
  it->scalar_value.reset();
  if (!st.ColumnIsNull(17)) it->scalar_value = st.ColumnText(17);
  text(18, &it->scalar_type);
  text(19, &it->blob);
  text(20, &it->read_error);
  it->inline_data.reset();
  if (!st.ColumnIsNull(21)) {
    const absl::string_view v = st.ColumnBlob(21);
    it->inline_data = std::make_shared<const std::string>(v.data(), v.size());
  }
  text(22, &it->dtype_text);
  text(23, &it->data_name);
  text(24, &it->shape_text);
  text(25, &it->in_run_golden);
}

ItemRecord ReadItem(const Statement& st) {
  ItemRecord it;
  ReadItemInto(st, &it);
  return it;
}
}  // namespace

absl::StatusOr<std::vector<ItemRecord>> Store::ListItems(const std::string& run_id) {
  std::vector<ItemRecord> out;
  PARITY_RETURN_IF_ERROR(VisitItems(run_id, [&out](const ItemRecord& it) { out.push_back(it); }));
  return out;
}

absl::Status Store::VisitItems(const std::string& run_id, const std::function<void(const ItemRecord&)>& visit,
                               int64_t from_index) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare(absl::StrCat(
                                            "SELECT ", kItemColumns, " FROM items WHERE run_id=?",
                                            from_index > 0 ? " AND idx>=?" : "", " ORDER BY idx")));
  st.Bind(1, run_id);
  if (from_index > 0) st.Bind(2, from_index);
  ItemRecord it;
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    ReadItemInto(st, &it);
    visit(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<ItemRecord> Store::GetItem(const std::string& run_id, const std::string& name) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare(absl::StrCat(
                                            "SELECT ", kItemColumns, " FROM items WHERE run_id=? AND name=?")));
  st.Bind(1, run_id).Bind(2, name);
  PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("run ", run_id, " has no item '", name, "'"));
  return ReadItem(st);
}

absl::StatusOr<std::vector<std::string>> Store::QueryStrings(const char* sql, const std::string& arg) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare(sql));
  if (!arg.empty()) st.Bind(1, arg);
  return FirstColumnOfEachRow(st);
}

absl::StatusOr<std::vector<std::string>> Store::ListItemNames(const std::string& run_id) {
  return QueryStrings("SELECT name FROM items WHERE run_id=? ORDER BY idx", run_id);
}

absl::StatusOr<JobRecord> Store::GetJob(const std::string& job_id) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare(absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE job_id=?")));
  st.Bind(1, job_id);
  PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return JobNotFound(job_id);
  return ReadJob(st);
}

absl::StatusOr<std::vector<JobRecord>> Store::ListJobs(const JobFilter& f, int64_t offset, int64_t limit) {
  std::vector<std::string> where;
  std::vector<std::string> args;
  if (!f.project.empty()) { where.push_back("project=?"); args.push_back(f.project); }
  if (!f.run_id.empty()) {
    where.push_back("(golden_run_id=? OR target_run_id=?)");
    args.push_back(f.run_id);
    args.push_back(f.run_id);
  }
  if (f.state) where.push_back(absl::StrCat("state=", f.state));
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(
      Statement st,
      r.db().Prepare(absl::StrCat("SELECT ", kJobColumns, " FROM jobs", where.empty() ? "" : " WHERE ",
                                  absl::StrJoin(where, " AND "),
                                  " ORDER BY created_at_ms DESC, job_id DESC LIMIT ? OFFSET ?")));
  int i = 1;
  for (const std::string& a : args) st.Bind(i++, a);
  st.Bind(i, limit).Bind(i + 1, offset);
  std::vector<JobRecord> out;
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(ReadJob(st));
  }
  return out;
}

int SortableMetricColumn(absl::string_view name) {
  for (size_t i = 0; i < std::size(kSortableMetrics); ++i) {
    if (name == kSortableMetrics[i]) return static_cast<int>(i);
  }
  return -1;
}

// A row of "SELECT k, verdict, phase, role, rec-or-NULL, culprit": its place in a listing.
Store::SortedRow Store::SortRow(const Statement& st, int column) {
  SortedRow r;
  r.key = st.ColumnInt(0);
  r.verdict = static_cast<uint8_t>(st.ColumnInt(1));
  r.phase = static_cast<uint8_t>(st.ColumnInt(2));
  r.role = static_cast<uint8_t>(st.ColumnInt(3));
  r.culprit = static_cast<uint8_t>(st.ColumnInt(5));
  r.value = std::numeric_limits<double>::quiet_NaN();
  if (column >= 0) {
    const std::optional<double> v = BlobSortValue(st.ColumnBlob(4), kSortableMetrics[column]);
    if (v) r.value = *v;
  }
  return r;
}

// Orders rows by value (rows without one last, in both directions), then dump order; by dump
// order alone when column < 0.
namespace {
struct RowBefore {
  int column;
  bool descending;
  template <typename Row>
  bool operator()(const Row& a, const Row& b) const {
    if (column >= 0) {
      const bool an = std::isnan(a.value), bn = std::isnan(b.value);
      if (an != bn) return bn;
      if (!an && a.value != b.value) return descending ? a.value > b.value : a.value < b.value;
      return a.key < b.key;
    }
    return descending ? a.key > b.key : a.key < b.key;
  }
};

// Whether a row passes f's verdict, culprit, phase and role filters (not its glob).
class RowFilter {
 public:
  explicit RowFilter(const OpResultFilter& f) : f_(f) {
    for (int v : f.verdicts) {
      if (v >= 0 && v < 256) verdict_[v] = true;
    }
    for (CulpritStatus c : f.culprits) culprit_[static_cast<uint8_t>(c)] = true;
  }
  bool operator()(uint8_t verdict, uint8_t culprit, uint8_t phase, uint8_t role) const {
    return (f_.verdicts.empty() || verdict_[verdict]) && (f_.culprits.empty() || culprit_[culprit]) &&
           (!f_.phase || phase == f_.phase - 1) && (!f_.role || role == f_.role - 1);
  }

 private:
  const OpResultFilter& f_;
  bool verdict_[256] = {false}, culprit_[256] = {false};
};
}  // namespace

void Store::SortRows(int column, bool descending, std::vector<SortedRow>* rows) {
  std::sort(rows->begin(), rows->end(), RowBefore{column, descending});
}

absl::StatusOr<std::optional<std::vector<int64_t>>> Store::PickFromIndex(Database& db, const std::string& job_id,
                                                                         int64_t seq, int column,
                                                                         const OpResultFilter& f, int64_t offset,
                                                                         int64_t limit, int64_t* total) {
  PARITY_ASSIGN_OR_RETURN(std::optional<IndexedColumn> index, ReadIndex(db, job_id, column));
  if (!index) return std::optional<std::vector<int64_t>>();
  struct Candidate {
    double value;
    int64_t key;
  };
  const RowFilter keep(f);
  const RowBefore before{column, f.descending};
  // The first offset + limit kept rows: in a heap of that many (its top the last of them) when
  // that is few, else from all kept rows, partially sorted.
  const size_t wanted = static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(offset, INT64_MAX - limit) + limit));
  const bool heap = wanted <= 4096;
  std::vector<Candidate> kept;
  *total = 0;
  for (size_t i = 0; i < index->rows.size(); ++i) {
    const IndexRow& ir = index->rows[i];
    if (!keep(ir.verdict, ir.culprit, ir.phase, ir.role)) continue;
    ++*total;
    const Candidate c{column < 0 ? 0.0 : index->values[i], FirstKey(seq) | ir.slot};
    if (!heap) {
      kept.push_back(c);
    } else if (kept.size() < wanted) {
      kept.push_back(c);
      std::push_heap(kept.begin(), kept.end(), before);
    } else if (wanted > 0 && before(c, kept.front())) {
      std::pop_heap(kept.begin(), kept.end(), before);
      kept.back() = c;
      std::push_heap(kept.begin(), kept.end(), before);
    }
  }
  const size_t first = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(kept.size()), offset));
  const size_t end = std::min(kept.size(), wanted);
  if (heap) {
    std::sort_heap(kept.begin(), kept.end(), before);
  } else {
    std::partial_sort(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(end), kept.end(), before);
  }
  std::vector<int64_t> keys;
  for (size_t i = first; i < end; ++i) keys.push_back(kept[i].key);
  return std::optional<std::vector<int64_t>>(std::move(keys));
}

absl::StatusOr<std::shared_ptr<const Store::SortedJob>> Store::Sorted(Database& db,
                                                                      const std::string& job_id,
                                                                      int64_t seq, int column,
                                                                      bool descending,
                                                                      int64_t finished_at_ms,
                                                                      const std::string& glob) {
  auto lookup = [&]() -> std::shared_ptr<const SortedJob> {
    absl::MutexLock l(&cache_mu_);
    for (auto it = sort_cache_.begin(); it != sort_cache_.end(); ++it) {
      const SortedJob& e = **it;
      if (e.job_id == job_id && e.column == column && e.descending == descending &&
          e.finished_at_ms == finished_at_ms && e.glob == glob) {
        std::shared_ptr<const SortedJob> hit = *it;
        sort_cache_.erase(it);
        sort_cache_.push_front(hit);
        return hit;
      }
    }
    return nullptr;
  };
  if (std::shared_ptr<const SortedJob> hit = lookup()) return hit;
  // One build at a time: a request for the order being built waits for it, then finds it.
  absl::MutexLock building(&build_mu_);
  if (std::shared_ptr<const SortedJob> hit = lookup()) return hit;
  auto built = std::make_shared<SortedJob>();
  built->job_id = job_id;
  built->column = column;
  built->descending = descending;
  built->finished_at_ms = finished_at_ms;
  built->glob = glob;
  std::optional<IndexedColumn> index;
  if (glob.empty()) {
    PARITY_ASSIGN_OR_RETURN(index, ReadIndex(db, job_id, column));
  }
  if (index) {
    OrderIndexRows(*index, seq, column, descending, &built->rows);
    index.reset();
  } else {
    PARITY_RETURN_IF_ERROR(SortRowsFromResults(db, seq, column, glob, &built->rows));
    // Read in dump order: only another order needs sorting.
    if (column >= 0 || descending) SortRows(column, descending, &built->rows);
  }
  std::shared_ptr<const SortedJob> entry = std::move(built);
  absl::MutexLock l(&cache_mu_);
  sort_cache_.push_front(entry);
  while (static_cast<int>(sort_cache_.size()) > options_.sort_cache_entries) sort_cache_.pop_back();
  return entry;
}

namespace {
// An order-preserving map of doubles other than NaN to unsigned integers (-0 as +0, which
// compares equal to it), reversed for a descending order; and back.
uint64_t OrderKey(double v, bool descending) {
  if (v == 0) v = 0.0;
  uint64_t u;
  std::memcpy(&u, &v, sizeof(u));
  u = (u >> 63) ? ~u : (u | (uint64_t{1} << 63));
  return descending ? ~u : u;
}
double OrderKeyValue(uint64_t u, bool descending) {
  if (descending) u = ~u;
  u = (u >> 63) ? (u & ~(uint64_t{1} << 63)) : ~u;
  double v;
  std::memcpy(&v, &u, sizeof(v));
  return v;
}

// A row of an index to order by `key`, carrying what its SortedRow needs.
struct Ranked {
  uint64_t key;
  IndexRow row;
};

// Sorts by key, stably: a least-significant-digit radix sort, 11 bits a pass (the digits
// counted in one read), passes in which every key has the same digit skipped. For a million
// rows, about twice as fast as std::sort.
void RadixSortByKey(std::vector<Ranked>* v) {
  constexpr int kBits = 11, kPasses = (64 + kBits - 1) / kBits;
  constexpr uint64_t kMask = (uint64_t{1} << kBits) - 1;
  std::vector<size_t> count(kPasses * (kMask + 1));
  for (const Ranked& r : *v) {
    for (int p = 0; p < kPasses; ++p) ++count[p * (kMask + 1) + ((r.key >> (p * kBits)) & kMask)];
  }
  std::vector<Ranked> out(v->size());
  for (int p = 0; p < kPasses; ++p) {
    size_t* c = count.data() + p * (kMask + 1);
    if (std::find(c, c + kMask + 1, v->size()) != c + kMask + 1) continue;
    size_t next = 0;
    for (size_t d = 0; d <= kMask; ++d) next += std::exchange(c[d], next);
    for (const Ranked& r : *v) out[c[(r.key >> (p * kBits)) & kMask]++] = r;
    v->swap(out);
  }
}
}  // namespace

void Store::OrderIndexRows(const IndexedColumn& index, int64_t seq, int column, bool descending,
                           std::vector<SortedRow>* rows) {
  const size_t n = index.rows.size();
  auto sorted_row = [&](const IndexRow& ir, double value) {
    return SortedRow{value, FirstKey(seq) | ir.slot, ir.verdict, ir.phase, ir.role, ir.culprit};
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  rows->clear();
  rows->reserve(n);
  if (column < 0) {  // dump order, or its reverse
    for (size_t i = 0; i < n; ++i) rows->push_back(sorted_row(index.rows[descending ? n - 1 - i : i], nan));
    return;
  }
  // Rows with a value by (value, dump order): their keys stably sorted from dump order; then the
  // rows without one, in dump order.
  std::vector<Ranked> ranked;
  ranked.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!std::isnan(index.values[i])) ranked.push_back({OrderKey(index.values[i], descending), index.rows[i]});
  }
  RadixSortByKey(&ranked);
  for (const Ranked& r : ranked) rows->push_back(sorted_row(r.row, OrderKeyValue(r.key, descending)));
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(index.values[i])) rows->push_back(sorted_row(index.rows[i], nan));
  }
}

absl::Status Store::SortRowsFromResults(Database& db, int64_t seq, int column, const std::string& glob,
                                        std::vector<SortedRow>* rows) {
  PARITY_ASSIGN_OR_RETURN(
      Statement st,
      db.Prepare(absl::StrCat("SELECT k, verdict, phase, role, ", column < 0 ? "NULL" : "rec",
                              ", culprit", glob.empty() ? "" : ", name, api",
                              " FROM op_results WHERE k BETWEEN ? AND ? ORDER BY k")));
  st.Bind(1, FirstKey(seq)).Bind(2, LastKey(seq));
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    if (!glob.empty() && !GlobMatch(glob, st.ColumnText(6)) && !GlobMatch(glob, st.ColumnText(7))) {
      continue;
    }
    rows->push_back(SortRow(st, column));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<OpResultRecord>> Store::ListOpResults(const std::string& job_id,
                                                                 const OpResultFilter& f,
                                                                 int64_t offset, int64_t limit,
                                                                 int64_t* total) {
  int column = -1;
  if (!f.sort_metric.empty()) {
    column = SortableMetricColumn(f.sort_metric);
    if (column < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot sort by '", f.sort_metric, "': not a numeric metric of any policy; one of: ",
          absl::StrJoin(kSortableMetrics, ", ")));
    }
  }
  offset = std::max<int64_t>(offset, 0);
  limit = std::max<int64_t>(limit, 0);
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  std::vector<int64_t> page;  // keys, in order
  PARITY_ASSIGN_OR_RETURN(
      Statement js, r.db().Prepare("SELECT state, finished_at_ms, seq FROM jobs WHERE job_id=?"));
  js.Bind(1, job_id);
  PARITY_ASSIGN_OR_RETURN(bool have_job, js.Step());
  *total = 0;
  if (!have_job) return std::vector<OpResultRecord>();
  const bool finished = IsFinal(static_cast<JobState>(js.ColumnInt(0)));
  const int64_t seq = js.ColumnInt(2);
  std::optional<std::vector<int64_t>> picked;
  if (finished && f.one_off && f.glob.empty()) {
    PARITY_ASSIGN_OR_RETURN(picked, PickFromIndex(r.db(), job_id, seq, column, f, offset, limit, total));
  }
  if (picked) {
    page = *std::move(picked);
  } else if (finished && options_.sort_cache_entries > 0) {
    // Finished jobs do not change: filter and page an in-memory order (of the glob's rows).
    PARITY_ASSIGN_OR_RETURN(std::shared_ptr<const SortedJob> sorted,
                            Sorted(r.db(), job_id, seq, column, f.descending, js.ColumnInt(1), f.glob));
    const RowFilter keep(f);
    int64_t matched = 0;
    for (const SortedRow& row : sorted->rows) {
      if (!keep(row.verdict, row.culprit, row.phase, row.role)) continue;
      if (matched >= offset && static_cast<int64_t>(page.size()) < limit) page.push_back(row.key);
      ++matched;
    }
    *total = matched;
  } else {
    std::vector<std::string> where = {"k BETWEEN ? AND ?"};
    if (!f.verdicts.empty()) where.push_back(absl::StrCat("verdict IN (", absl::StrJoin(f.verdicts, ","), ")"));
    if (f.phase) where.push_back(absl::StrCat("phase=", f.phase - 1));
    if (f.role) where.push_back(absl::StrCat("role=", f.role - 1));
    if (!f.culprits.empty()) {
      std::vector<int> cs;
      for (CulpritStatus c : f.culprits) cs.push_back(static_cast<int>(c));
      where.push_back(absl::StrCat("culprit IN (", absl::StrJoin(cs, ","), ")"));
    }
    PARITY_ASSIGN_OR_RETURN(
        Statement st, r.db().Prepare(absl::StrCat("SELECT k, verdict, phase, role, ",
                                                  column < 0 ? "NULL" : "rec", ", culprit, name, api FROM op_results WHERE ",
                                                  absl::StrJoin(where, " AND "), " ORDER BY k")));
    st.Bind(1, FirstKey(seq)).Bind(2, LastKey(seq));
    std::vector<SortedRow> rows;
    while (true) {
      PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      if (!f.glob.empty() && !GlobMatch(f.glob, st.ColumnText(6)) && !GlobMatch(f.glob, st.ColumnText(7))) {
        continue;
      }
      rows.push_back(SortRow(st, column));
    }
    if (column >= 0 || f.descending) SortRows(column, f.descending, &rows);
    for (int64_t i = offset; i < static_cast<int64_t>(rows.size()) && static_cast<int64_t>(page.size()) < limit; ++i) {
      page.push_back(rows[i].key);
    }
    *total = static_cast<int64_t>(rows.size());
  }
  // The page's rows, up to 256 keys per query (one round trip each with PostgreSQL), in the
  // page's order.
  std::vector<std::optional<OpResultRecord>> found(page.size());
  absl::flat_hash_map<int64_t, size_t> slot;
  for (size_t i = 0; i < page.size(); ++i) slot.emplace(page[i], i);
  constexpr size_t kKeysPerQuery = 256;
  for (size_t begin = 0; begin < page.size(); begin += kKeysPerQuery) {
    const size_t n = std::min(kKeysPerQuery, page.size() - begin);
    std::string sql = absl::StrCat("SELECT ", kResultColumns, " FROM op_results WHERE k IN (?");
    for (size_t i = 1; i < n; ++i) sql += ",?";
    sql += ")";
    PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare(sql));
    for (size_t i = 0; i < n; ++i) st.Bind(static_cast<int>(i + 1), page[begin + i]);
    while (true) {
      PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      auto s = slot.find(st.ColumnInt(0));  // kResultColumns starts with k
      if (s == slot.end()) continue;
      PARITY_ASSIGN_OR_RETURN(OpResultRecord rec, ReadResult(st, job_id));
      found[s->second] = std::move(rec);
    }
  }
  std::vector<OpResultRecord> out;
  out.reserve(page.size());
  for (std::optional<OpResultRecord>& rec : found) {
    if (rec) out.push_back(*std::move(rec));
  }
  return out;
}

absl::StatusOr<ResultSeries> Store::JobSeries(const std::string& job_id, const std::string& metric,
                                              int64_t buckets, int64_t max_culprits) {
  const int column = SortableMetricColumn(metric);
  if (column < 0) {
    return absl::InvalidArgumentError(absl::StrCat("no metric '", metric.substr(0, 64), "'; one of: ",
                                                   absl::StrJoin(kSortableMetrics, ", ")));
  }
  if (buckets < 1) return absl::InvalidArgumentError("a series needs at least one bucket");
  PARITY_ASSIGN_OR_RETURN(std::shared_ptr<const SeriesColumn> values, Column(job_id, column));
  return Bucketize(*values, buckets, max_culprits);
}

absl::StatusOr<std::shared_ptr<const Store::SeriesColumn>> Store::Column(const std::string& job_id, int column) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement js, r.db().Prepare("SELECT seq, state, finished_at_ms FROM jobs WHERE job_id=?"));
  js.Bind(1, job_id);
  PARITY_ASSIGN_OR_RETURN(bool have_job, js.Step());
  if (!have_job) return JobNotFound(job_id);
  const int64_t seq = js.ColumnInt(0);
  const bool finished = IsFinal(static_cast<JobState>(js.ColumnInt(1)));
  const int64_t finished_at_ms = js.ColumnInt(2);
  if (!finished || options_.sort_cache_entries <= 0) return BuildColumn(r.db(), job_id, seq, column, finished);
  // A finished job does not change: its column is read once and kept with the listing orders.
  auto lookup = [&]() -> std::shared_ptr<const SeriesColumn> {
    absl::MutexLock l(&cache_mu_);
    for (auto it = column_cache_.begin(); it != column_cache_.end(); ++it) {
      if (it->job_id == job_id && it->column == column && it->finished_at_ms == finished_at_ms) {
        CachedColumn hit = *it;
        column_cache_.erase(it);
        column_cache_.push_front(hit);
        return hit.values;
      }
    }
    return nullptr;
  };
  if (std::shared_ptr<const SeriesColumn> hit = lookup()) return hit;
  absl::MutexLock building(&build_mu_);
  if (std::shared_ptr<const SeriesColumn> hit = lookup()) return hit;
  PARITY_ASSIGN_OR_RETURN(std::shared_ptr<const SeriesColumn> built,
                          BuildColumn(r.db(), job_id, seq, column, /*finished=*/true));
  absl::MutexLock l(&cache_mu_);
  column_cache_.push_front({job_id, column, finished_at_ms, built});
  while (static_cast<int>(column_cache_.size()) > options_.sort_cache_entries) column_cache_.pop_back();
  return built;
}

absl::StatusOr<std::shared_ptr<const Store::SeriesColumn>> Store::BuildColumn(Database& db, const std::string& job_id,
                                                                              int64_t seq, int column, bool finished) {
  auto out = std::make_shared<SeriesColumn>();
  std::optional<IndexedColumn> index;
  if (finished) {
    PARITY_ASSIGN_OR_RETURN(index, ReadIndex(db, job_id, column));
  }
  if (index) {
    out->values = std::move(index->values);
    out->failing.resize(index->rows.size());
    std::vector<std::pair<int64_t, size_t>> culprits;  // key, position
    for (size_t i = 0; i < index->rows.size(); ++i) {
      const IndexRow& ir = index->rows[i];
      out->failing[i] = ir.verdict == static_cast<int>(Verdict::kFail) || ir.verdict == static_cast<int>(Verdict::kError);
      if (ir.culprit == 1 && ir.verdict == static_cast<int>(Verdict::kFail)) culprits.emplace_back(FirstKey(seq) | ir.slot, i);
    }
    // The culprits' names from their rows (few, found by key).
    PARITY_ASSIGN_OR_RETURN(Statement st, db.Prepare("SELECT name, api FROM op_results WHERE k=?"));
    for (const auto& [key, i] : culprits) {
      st.Reset();
      st.Bind(1, key);
      PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
      if (row) out->culprits.push_back({static_cast<int64_t>(i), st.ColumnText(0), st.ColumnText(1), out->values[i]});
    }
    return std::shared_ptr<const SeriesColumn>(std::move(out));
  }
  PARITY_ASSIGN_OR_RETURN(
      Statement st, db.Prepare("SELECT verdict, culprit, rec, CASE WHEN culprit=1 THEN name END, "
                               "CASE WHEN culprit=1 THEN api END FROM op_results "
                               "WHERE k BETWEEN ? AND ? ORDER BY k"));
  st.Bind(1, FirstKey(seq)).Bind(2, LastKey(seq));
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    const int verdict = static_cast<int>(st.ColumnInt(0));
    const std::optional<double> v = BlobSortValue(st.ColumnBlob(2), kSortableMetrics[column]);
    const double value = v ? *v : std::numeric_limits<double>::quiet_NaN();
    out->values.push_back(value);
    out->failing.push_back(verdict == static_cast<int>(Verdict::kFail) || verdict == static_cast<int>(Verdict::kError));
    if (st.ColumnInt(1) == 1 && verdict == static_cast<int>(Verdict::kFail)) {
      out->culprits.push_back({static_cast<int64_t>(out->values.size()) - 1, st.ColumnText(3), st.ColumnText(4), value});
    }
  }
  return std::shared_ptr<const SeriesColumn>(std::move(out));
}

ResultSeries Store::Bucketize(const SeriesColumn& c, int64_t buckets, int64_t max_culprits) {
  ResultSeries out;
  out.total = static_cast<int64_t>(c.values.size());
  const int64_t nb = std::min(buckets, out.total);
  out.buckets.resize(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) {
    SeriesBucket& sb = out.buckets[static_cast<size_t>(b)];
    sb.first = b * out.total / nb;
    const int64_t end = (b + 1) * out.total / nb;
    sb.count = end - sb.first;
    sb.min = sb.max = std::numeric_limits<double>::quiet_NaN();
    for (int64_t i = sb.first; i < end; ++i) {
      sb.failing += c.failing[static_cast<size_t>(i)];
      const double v = c.values[static_cast<size_t>(i)];
      if (std::isnan(v)) continue;
      sb.min = sb.with_value == 0 ? v : std::min(sb.min, v);
      sb.max = sb.with_value == 0 ? v : std::max(sb.max, v);
      ++sb.with_value;
    }
  }
  const size_t marks = std::min(c.culprits.size(), static_cast<size_t>(std::max<int64_t>(max_culprits, 0)));
  out.culprits.assign(c.culprits.begin(), c.culprits.begin() + static_cast<std::ptrdiff_t>(marks));
  return out;
}

absl::StatusOr<OpResultRecord> Store::GetOpResult(const std::string& job_id, const std::string& name) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(
      Statement js, r.db().Prepare("SELECT seq, target_run_id, golden_run_id FROM jobs WHERE job_id=?"));
  js.Bind(1, job_id);
  PARITY_ASSIGN_OR_RETURN(bool have_job, js.Step());
  if (!have_job) return JobNotFound(job_id);
  const int64_t seq = js.ColumnInt(0);
  PARITY_ASSIGN_OR_RETURN(
      Statement one,
      r.db().Prepare(absl::StrCat("SELECT ", kResultColumns, " FROM op_results WHERE k=? AND name=?")));
  // A result is named after its target item, or its golden item when the target side is
  // missing: look the index up there first.
  PARITY_ASSIGN_OR_RETURN(Statement item, r.db().Prepare("SELECT idx FROM items WHERE run_id=? AND name=?"));
  for (int side = 0; side < 2; ++side) {
    item.Reset();
    item.Bind(1, js.ColumnText(1 + side)).Bind(2, name);
    PARITY_ASSIGN_OR_RETURN(bool found, item.Step());
    if (!found) continue;
    const int64_t index = side == 0 ? item.ColumnInt(0) : kGoldenOnlyIndexBase + item.ColumnInt(0);
    absl::StatusOr<int64_t> key = ResultKey(seq, index);
    if (!key.ok()) continue;
    one.Reset();
    one.Bind(1, *key).Bind(2, name);
    PARITY_ASSIGN_OR_RETURN(bool row, one.Step());
    if (row) return ReadResult(one, job_id);
  }
  // Results written without items (or under another name): scan the job's results.
  PARITY_ASSIGN_OR_RETURN(
      Statement scan,
      r.db().Prepare(absl::StrCat("SELECT ", kResultColumns,
                                  " FROM op_results WHERE k BETWEEN ? AND ? AND name=? ORDER BY k LIMIT 1")));
  scan.Bind(1, FirstKey(seq)).Bind(2, LastKey(seq)).Bind(3, name);
  PARITY_ASSIGN_OR_RETURN(bool row, scan.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("job '", job_id, "' has no result for '", name, "'"));
  return ReadResult(scan, job_id);
}

absl::StatusOr<std::vector<std::string>> Store::ListOpResultNames(const std::string& job_id) {
  return QueryStrings(
      "SELECT name FROM op_results WHERE k BETWEEN (SELECT seq FROM jobs WHERE job_id=?1) << 32 "
      "AND ((SELECT seq FROM jobs WHERE job_id=?1) << 32) | 4294967295 ORDER BY k",
      job_id);
}

absl::StatusOr<std::vector<std::string>> Store::ListCulpritApis(const std::string& job_id) {
  return QueryStrings(
      "SELECT api, MIN(k) AS first FROM op_results WHERE k BETWEEN (SELECT seq FROM jobs WHERE "
      "job_id=?1) << 32 AND ((SELECT seq FROM jobs WHERE job_id=?1) << 32) | 4294967295 AND "
      "culprit=1 GROUP BY api ORDER BY first",
      job_id);
}

absl::StatusOr<std::vector<Store::OpStatusRow>> Store::ListOpStatuses(const std::string& job_id) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(
      Statement st,
      r.db().Prepare(absl::StrCat(
          "SELECT api, MIN(CASE culprit WHEN 1 THEN 0 WHEN 2 THEN 1 ELSE 2 END), MAX(verdict=", static_cast<int>(Verdict::kFail),
          "), MIN(k) AS first FROM op_results WHERE k BETWEEN (SELECT seq FROM jobs WHERE job_id=?1) << 32 AND "
          "((SELECT seq FROM jobs WHERE job_id=?1) << 32) | 4294967295 AND (culprit != 0 OR verdict=",
          static_cast<int>(Verdict::kFail), ") GROUP BY api ORDER BY first")));
  st.Bind(1, job_id);
  std::vector<OpStatusRow> out;
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    OpStatusRow& o = out.emplace_back();
    o.api = std::string(st.ColumnText(0));
    const int64_t rank = st.ColumnInt(1);
    o.status = rank == 0 ? CulpritStatus::kCulprit : rank == 1 ? CulpritStatus::kPropagated : CulpritStatus::kNone;
    o.fails = st.ColumnInt(2) != 0;
  }
  return out;
}

Store::WriteFn Store::SetJobAnalysis(std::string job_id, std::string doc) {
  return [job_id = std::move(job_id), doc = std::move(doc)](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(Statement st, db.Prepare(ReplaceInto(db.dialect(), "job_analysis", "job_id, doc", "job_id")));
    st.Bind(1, job_id).Bind(2, doc);
    return st.Run();
  };
}

absl::StatusOr<std::string> Store::GetJobAnalysis(const std::string& job_id) {
  PARITY_ASSIGN_OR_RETURN(std::vector<std::string> docs,
                          QueryStrings("SELECT doc FROM job_analysis WHERE job_id=?", job_id));
  return docs.empty() ? std::string() : std::move(docs[0]);
}

Store::WriteFn Store::PutRunFile(std::string run_id, std::string name, std::string data) {
  return [run_id = std::move(run_id), name = std::move(name), data = std::move(data)](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(Statement st,
                            db.Prepare(ReplaceInto(db.dialect(), "run_files", "run_id, name, data", "run_id, name")));
    st.Bind(1, run_id).Bind(2, name).BindBlob(3, data);
    return st.Run();
  };
}

Store::WriteFn Store::PutRunStacks(std::string run_id, const DumpStructure& stacks) {
  // Each distinct stack once (the current format groups the entries sharing one).
  auto texts = std::make_shared<std::vector<std::string>>();
  auto apis = std::make_shared<std::vector<std::pair<std::string, int64_t>>>();
  absl::flat_hash_map<absl::string_view, int64_t> id_of;
  apis->reserve(stacks.stacks.size());
  for (const auto& [api, text] : stacks.stacks) {
    auto [it, fresh] = id_of.try_emplace(text, static_cast<int64_t>(texts->size()));
    if (fresh) texts->push_back(text);
    apis->emplace_back(api, it->second);
  }
  return [run_id = std::move(run_id), texts, apis](Database& db) -> absl::Status {
    for (const char* sql : {"DELETE FROM run_stack_texts WHERE run_id=?", "DELETE FROM run_stacks WHERE run_id=?"}) {
      PARITY_ASSIGN_OR_RETURN(Statement del, db.Prepare(sql));
      del.Bind(1, run_id);
      PARITY_RETURN_IF_ERROR(del.Run());
    }
    PARITY_ASSIGN_OR_RETURN(Statement t, db.Prepare("INSERT INTO run_stack_texts(run_id, id, text) VALUES(?, ?, ?)"));
    for (size_t i = 0; i < texts->size(); ++i) {
      t.Reset();
      t.Bind(1, run_id).Bind(2, static_cast<int64_t>(i)).Bind(3, (*texts)[i]);
      PARITY_RETURN_IF_ERROR(t.Run());
    }
    PARITY_ASSIGN_OR_RETURN(Statement a, db.Prepare("INSERT INTO run_stacks(run_id, api, id) VALUES(?, ?, ?)"));
    for (const auto& [api, id] : *apis) {
      a.Reset();
      a.Bind(1, run_id).Bind(2, api).Bind(3, id);
      PARITY_RETURN_IF_ERROR(a.Run());
    }
    return PutRunFile(run_id, kStackJson, "")(db);
  };
}

absl::StatusOr<absl::flat_hash_map<std::string, std::string>> Store::GetStacks(const std::string& run_id,
                                                                                const std::vector<std::string>& apis) {
  absl::flat_hash_map<std::string, std::string> out;
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare(
                                            "SELECT t.text FROM run_stacks s JOIN run_stack_texts t ON "
                                            "t.run_id=s.run_id AND t.id=s.id WHERE s.run_id=? AND s.api=?"));
  for (const std::string& api : apis) {
    if (out.contains(api)) continue;
    st.Reset();
    st.Bind(1, run_id).Bind(2, api);
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (row) out.emplace(api, st.ColumnText(0));
  }
  return out;
}

absl::StatusOr<std::optional<std::string>> Store::GetRunFile(const std::string& run_id, const std::string& name) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare("SELECT data FROM run_files WHERE run_id=? AND name=?"));
  st.Bind(1, run_id).Bind(2, name);
  PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<std::string>();
  return std::optional<std::string>(std::string(st.ColumnBlob(0)));
}

absl::StatusOr<std::vector<std::string>> Store::ListRunsWithDataBefore(int64_t cutoff_ms) {
  return QueryStrings(
      "SELECT run_id FROM runs WHERE complete=1 AND created_at_ms<CAST(? AS BIGINT) AND "
      "EXISTS (SELECT 1 FROM items WHERE items.run_id=runs.run_id AND blob != '') ORDER BY created_at_ms",
      absl::StrCat(cutoff_ms));
}

Store::WriteFn Store::ReleaseRunData(std::string run_id) {
  return [run_id = std::move(run_id)](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(Statement st, db.Prepare("UPDATE items SET blob='', data=NULL WHERE run_id=?"));
    st.Bind(1, run_id);
    return st.Run();
  };
}

absl::StatusOr<std::vector<std::string>> Store::ReferencedBlobs() {
  return QueryStrings("SELECT DISTINCT blob FROM items WHERE blob != '' AND data IS NULL", "");
}

absl::StatusOr<std::vector<Store::MatchingBlob>> Store::BlobsMatching(const std::string& project,
                                                                     uint64_t byte_length,
                                                                     uint32_t crc32, int limit) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(
      Statement st,
      r.db().Prepare(absl::StrCat("SELECT DISTINCT items.blob, NOT EXISTS "
                     "(SELECT 1 FROM blob_hashes WHERE blob_hashes.blob=items.blob) "
                     "FROM items", IndexedBy(r.db().dialect(), "items_by_crc"), " JOIN runs ON runs.run_id=items.run_id "
                     "WHERE items.crc32=? AND items.byte_length=? AND items.blob != '' AND "
                     "items.data IS NULL AND runs.project=? LIMIT ?")));
  st.Bind(1, int64_t{crc32}).Bind(2, static_cast<int64_t>(byte_length)).Bind(3, project).Bind(4, int64_t{limit});
  std::vector<MatchingBlob> out;
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back({st.ColumnText(0), st.ColumnInt(1) != 0});
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> Store::ProjectBlobsWithHash(const std::string& project,
                                                                     const std::string& sha256) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(
      Statement st,
      r.db().Prepare(absl::StrCat("SELECT c.k FROM (SELECT CAST(?1 AS TEXT) AS k UNION SELECT blob FROM blob_hashes "
                     "WHERE sha256=?1) AS c WHERE c.k != '' AND EXISTS (SELECT 1 FROM items",
                     IndexedBy(r.db().dialect(), "items_by_blob_prefix"), " JOIN runs ON runs.run_id=items.run_id "
                     "WHERE substr(items.blob, 1, 16)=substr(c.k, 1, 16) AND items.blob=c.k AND "
                     "items.blob != '' AND items.data IS NULL AND runs.project=?2)")));
  st.Bind(1, sha256).Bind(2, project);
  return FirstColumnOfEachRow(st);
}

Store::WriteFn Store::RecordBlobHash(std::string key, std::string sha256) {
  return [key = std::move(key), sha256 = std::move(sha256)](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(Statement st,
                            db.Prepare(ReplaceInto(db.dialect(), "blob_hashes", "blob, sha256", "blob")));
    st.Bind(1, key).Bind(2, sha256);
    return st.Run();
  };
}

Store::WriteFn Store::ForgetUnreferencedBlobHashes() {
  return [](Database& db) -> absl::Status {
    return db.Exec(absl::StrCat(
        "DELETE FROM blob_hashes WHERE NOT EXISTS (SELECT 1 FROM items", IndexedBy(db.dialect(), "items_by_blob_prefix"),
        " WHERE substr(items.blob, 1, 16)=substr(blob_hashes.blob, 1, 16) AND "
        "items.blob=blob_hashes.blob AND items.blob != '' AND items.data IS NULL)"));
  };
}

absl::StatusOr<uint64_t> Store::SizeBytes() {
  if (!IsPostgresStore(options_.path)) {
    uint64_t bytes = 0;
    for (const std::string& path : {options_.path, options_.path + "-wal"}) {
      struct stat st;
      if (::stat(path.c_str(), &st) == 0) bytes += static_cast<uint64_t>(st.st_size);
    }
    return bytes;
  }
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare("SELECT pg_database_size(current_database())"));
  PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
  return row ? static_cast<uint64_t>(st.ColumnInt(0)) : uint64_t{0};
}

absl::Status Store::IntegrityCheck() {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  // PostgreSQL checks its pages itself (checksums, WAL); there is no file of Parity's to check.
  if (r.db().dialect() == SqlDialect::kPostgres) return absl::OkStatus();
  PARITY_ASSIGN_OR_RETURN(Statement st, r.db().Prepare("PRAGMA integrity_check"));
  PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row || st.ColumnText(0) != "ok") {
    return absl::DataLossError(absl::StrCat("integrity_check: ", row ? st.ColumnText(0) : "no answer"));
  }
  return absl::OkStatus();
}

namespace {
constexpr char kTokenColumns[] =
    "token_id, project, role, salt, hash, note, created_at_ms, revoked_at_ms";

TokenRecord ReadToken(const Statement& st) {
  TokenRecord t;
  t.token_id = st.ColumnText(0);
  t.project = st.ColumnText(1);
  t.role = st.ColumnText(2);
  t.salt = st.ColumnText(3);
  t.hash = st.ColumnText(4);
  t.note = st.ColumnText(5);
  t.created_at_ms = st.ColumnInt(6);
  t.revoked_at_ms = st.ColumnInt(7);
  return t;
}
}  // namespace

Store::WriteFn Store::InsertToken(TokenRecord t) {
  return [t = std::move(t)](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(Statement st,
                            db.Prepare(absl::StrCat("INSERT INTO tokens(", kTokenColumns,
                                                    ") VALUES(?,?,?,?,?,?,?,?)")));
    st.Bind(1, t.token_id).Bind(2, t.project).Bind(3, t.role);
    st.BindBlob(4, t.salt).BindBlob(5, t.hash).Bind(6, t.note);
    st.Bind(7, t.created_at_ms).Bind(8, t.revoked_at_ms);
    return st.Run();
  };
}

Store::WriteFn Store::RevokeToken(std::string token_id, int64_t at_ms) {
  return [token_id = std::move(token_id), at_ms](Database& db) -> absl::Status {
    PARITY_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("UPDATE tokens SET revoked_at_ms=? WHERE token_id=? AND revoked_at_ms=0"));
    st.Bind(1, at_ms).Bind(2, token_id);
    return st.Run();
  };
}

absl::StatusOr<TokenRecord> Store::GetToken(const std::string& token_id) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(
      Statement st,
      r.db().Prepare(absl::StrCat("SELECT ", kTokenColumns, " FROM tokens WHERE token_id=?")));
  st.Bind(1, token_id);
  PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("no token '", token_id, "'"));
  return ReadToken(st);
}

absl::StatusOr<std::vector<TokenRecord>> Store::ListTokens(const std::string& project) {
  PARITY_ASSIGN_OR_RETURN(ReaderLease r, Reader());
  PARITY_ASSIGN_OR_RETURN(
      Statement st,
      r.db().Prepare(absl::StrCat("SELECT ", kTokenColumns, " FROM tokens",
                                  project.empty() ? "" : " WHERE project=?",
                                  " ORDER BY created_at_ms, token_id")));
  if (!project.empty()) st.Bind(1, project);
  std::vector<TokenRecord> out;
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(ReadToken(st));
  }
  return out;
}

}  // namespace parity
