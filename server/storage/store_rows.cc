#include "server/storage/store_rows.h"


#include <charconv>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>

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


namespace parity {
namespace store_internal {

std::string InsertInto(absl::string_view table, absl::string_view columns) {
  const size_t n = std::vector<absl::string_view>(absl::StrSplit(columns, ", ")).size();
  std::string sql = absl::StrCat("INSERT INTO ", table, "(", columns, ") VALUES(");
  for (size_t i = 0; i < n; ++i) absl::StrAppend(&sql, i ? ", ?" : "?");
  return sql + ")";
}

std::string ReplaceInto(SqlDialect d, absl::string_view table, absl::string_view columns, absl::string_view key) {
  const std::vector<absl::string_view> cols = absl::StrSplit(columns, ", ");
  if (d == SqlDialect::kSqlite) return absl::StrCat("INSERT OR REPLACE", InsertInto(table, columns).substr(6));
  std::string sql = InsertInto(table, columns);
  const size_t keys = std::vector<absl::string_view>(absl::StrSplit(key, ", ")).size();
  absl::StrAppend(&sql, " ON CONFLICT(", key, ") DO UPDATE SET ");
  for (size_t i = keys; i < cols.size(); ++i) {
    absl::StrAppend(&sql, i > keys ? ", " : "", cols[i], "=excluded.", cols[i]);
  }
  return sql;
}

std::string IndexedBy(SqlDialect d, absl::string_view index) {
  return d == SqlDialect::kSqlite ? absl::StrCat(" INDEXED BY ", index) : "";
}

std::string ShapeText(const Shape& s) { return absl::StrJoin(s, ","); }
Shape ParseShape(absl::string_view t) {
  Shape s;
  const char* p = t.data();
  const char* const end = p + t.size();
  while (p < end) {
    int64_t v = 0;
    const std::from_chars_result r = std::from_chars(p, end, v);
    if (r.ptr == p) break;
    s.push_back(v);
    p = r.ptr;
    if (p < end && *p == ',') ++p;
  }
  return s;
}

std::optional<std::string> StatText(const std::optional<double>& v) {
  if (!v) return std::nullopt;
  return PyRepr(*v);
}
std::optional<double> ParseStat(const Statement& st, int col) {
  if (st.ColumnIsNull(col)) return std::nullopt;
  const absl::string_view t = st.ColumnBlob(col);
  double v = 0;
  const std::from_chars_result r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (r.ec == std::errc() && r.ptr == t.data() + t.size()) return v;
  return std::strtod(std::string(t).c_str(), nullptr);  // anything from_chars does not take
}

void BindOptStatic(Statement& st, int i, const std::optional<std::string>& v) {
  if (v) {
    st.BindStatic(i, *v);
  } else {
    st.BindNull(i);
  }
}

std::vector<Metric> MetricsFromJson(const std::string& text) {
  std::vector<Metric> out;
  absl::StatusOr<Json> j = ParseJson(text);
  if (!j.ok() || !j->is_array()) return out;
  for (const Json& e : j->as_array()) {
    const auto& a = e.as_array();
    if (a.size() != 3) continue;
    const std::string& kind = a[1].as_string();
    const std::string& v = a[2].as_string();
    MetricValue mv = kind == "i"   ? MetricValue::Integer(std::strtoll(v.c_str(), nullptr, 10))
                     : kind == "n" ? MetricValue::Number(std::strtod(v.c_str(), nullptr))
                                   : MetricValue::Text(v);
    out.push_back({a[0].as_string(), mv});
  }
  return out;
}

std::string MapToJson(const std::map<std::string, int64_t>& m) {
  Json o = Json::MakeObject();
  for (const auto& [k, v] : m) o.Set(k, Json::Integer(v));
  return o.Dump();
}

std::map<std::string, int64_t> MapFromJson(const std::string& text) {
  std::map<std::string, int64_t> out;
  absl::StatusOr<Json> j = ParseJson(text);
  if (!j.ok() || !j->is_object()) return out;
  for (const auto& [k, v] : j->as_object()) out[k] = v.as_int();
  return out;
}


RunRecord ReadRun(const Statement& st) {
  RunRecord r;
  r.run_id = st.ColumnText(0);
  r.project = st.ColumnText(1);
  r.side = static_cast<Side>(st.ColumnInt(2));
  r.name = st.ColumnText(3);
  r.model = st.ColumnText(4);
  r.framework = st.ColumnText(5);
  r.device = st.ColumnText(6);
  r.rank = static_cast<int32_t>(st.ColumnInt(7));
  r.step = st.ColumnInt(8);
  r.created_at_ms = st.ColumnInt(9);
  r.complete = st.ColumnInt(10) != 0;
  r.item_count = st.ColumnInt(11);
  r.structure_hash = st.ColumnText(12);
  r.fingerprint = st.ColumnText(13);
  r.op_type_counts = MapFromJson(st.ColumnText(14));
  r.dump_format = st.ColumnText(15);
  if (const int64_t m = st.ColumnInt(16); m >= 1 && m <= 3) r.dump_mode = static_cast<DumpMode>(m - 1);
  return r;
}


JobRecord ReadJob(const Statement& st) {
  JobRecord j;
  j.job_id = st.ColumnText(0);
  j.project = st.ColumnText(1);
  j.golden_run_id = st.ColumnText(2);
  j.target_run_id = st.ColumnText(3);
  j.policy = static_cast<int>(st.ColumnInt(4));
  j.match_mode = static_cast<int>(st.ColumnInt(5));
  j.config_json = st.ColumnText(6);
  j.state = static_cast<JobState>(st.ColumnInt(7));
  j.created_at_ms = st.ColumnInt(8);
  j.finished_at_ms = st.ColumnInt(9);
  j.error = st.ColumnText(10);
  j.pairs_done = st.ColumnInt(11);
  j.pairs_total = st.ColumnInt(12);
  size_t i = 0;
  for (absl::string_view c : absl::StrSplit(st.ColumnText(13), ',')) {
    if (i < 6) j.counts[i++] = std::strtoll(std::string(c).c_str(), nullptr, 10);
  }
  j.first_culprit = st.ColumnText(14);
  return j;
}


absl::StatusOr<int64_t> ResultKey(int64_t seq, int64_t index) {
  int64_t slot = -1;
  if (index >= 0 && index < kGoldenSlotBase) {
    slot = index;
  } else if (index >= kGoldenOnlyIndexBase && index - kGoldenOnlyIndexBase < kGoldenSlotBase) {
    slot = kGoldenSlotBase + (index - kGoldenOnlyIndexBase);
  }
  if (slot < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "result index ", index, " is out of range: item indexes must be below 2^31"));
  }
  return (seq << 32) | slot;
}
int64_t FirstKey(int64_t seq) { return seq << 32; }
int64_t LastKey(int64_t seq) { return (seq << 32) | 0xffffffff; }

absl::StatusOr<int64_t> JobSeq(Database& db, absl::string_view job_id) {
  if (const int64_t* seq = db.MemoFind(job_id)) return *seq;
  PARITY_ASSIGN_OR_RETURN(Statement * st, db.Cached("SELECT seq FROM jobs WHERE job_id=?"));
  st->Bind(1, job_id);
  PARITY_ASSIGN_OR_RETURN(bool row, st->Step());
  if (!row) return JobNotFound(job_id);
  const int64_t seq = st->ColumnInt(0);
  st->Reset();
  db.MemoPut(std::string(job_id), seq);
  return seq;
}


int64_t IndexOfKey(int64_t key) {
  const int64_t slot = key & 0xffffffff;
  return slot < kGoldenSlotBase ? slot : kGoldenOnlyIndexBase + (slot - kGoldenSlotBase);
}

absl::StatusOr<OpResultRecord> ReadResult(const Statement& st, const std::string& job_id) {
  OpResultRecord r;
  r.job_id = job_id;
  r.index = IndexOfKey(st.ColumnInt(0));
  r.name = st.ColumnText(1);
  r.api = st.ColumnText(2);
  r.result.verdict = static_cast<Verdict>(st.ColumnInt(3));
  r.phase = static_cast<Phase>(st.ColumnInt(4));
  r.role = static_cast<Role>(st.ColumnInt(5));
  r.culprit = static_cast<CulpritStatus>(st.ColumnInt(6));
  absl::Status s = DecodeResultBlob(st.ColumnBlob(7), &r);
  if (!s.ok()) {
    return absl::DataLossError(absl::StrCat("job '", job_id, "', result '", r.name, "': ", s.message()));
  }
  return r;
}



PackedResult Pack(const OpResultRecord& r) {
  PackedResult p;
  p.job_id = r.job_id;
  p.name = r.name;
  p.api = r.api;
  p.index = r.index;
  p.verdict = r.result.verdict;
  p.phase = r.phase;
  p.role = r.role;
  p.culprit = r.culprit;
  p.blob = EncodeResultBlob(r);
  return p;
}

void BindPacked(Statement& st, int64_t key, const PackedResult& p, int row) {
  const int b = 8 * row;
  st.Bind(b + 1, key).BindStatic(b + 2, p.name).BindStatic(b + 3, p.api);
  st.Bind(b + 4, int64_t{static_cast<int>(p.verdict)}).Bind(b + 5, int64_t{static_cast<int>(p.phase)});
  st.Bind(b + 6, int64_t{static_cast<int>(p.role)}).Bind(b + 7, int64_t{static_cast<int>(p.culprit)});
  st.BindBlobStatic(b + 8, p.blob);
}

absl::StatusOr<std::vector<std::string>> FirstColumnOfEachRow(Statement& st) {
  std::vector<std::string> out;
  while (true) {
    PARITY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(st.ColumnText(0));
  }
  return out;
}

}  // namespace store_internal
}  // namespace parity
