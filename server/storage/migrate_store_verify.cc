// MigrateStore's second check: the store's own queries give the same answers on both stores.
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "server/storage/migrate_store.h"
#include "server/storage/store.h"

namespace parity {
namespace {

// Exact texts of records (doubles by their bits), equal only when every field is.
std::string Bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return absl::StrCat(u);
}
std::string Opt(const std::optional<double>& d) { return d ? Bits(*d) : "-"; }

std::string Text(const RunRecord& r) {
  std::string labels, counts;
  for (const auto& [k, v] : r.labels) absl::StrAppend(&labels, k.size(), ":", k, "=", v.size(), ":", v, ";");
  for (const auto& [k, v] : r.op_type_counts) absl::StrAppend(&counts, k.size(), ":", k, "=", v, ";");
  return absl::StrCat(r.run_id, "|", r.project, "|", static_cast<int>(r.side), "|", r.name, "|", r.model, "|",
                      r.framework, "|", r.device, "|", r.dump_format, "|",
                      r.dump_mode ? static_cast<int>(*r.dump_mode) : -1, "|", r.rank, "|", r.step, "|", labels, "|",
                      r.created_at_ms, "|", r.complete, "|", r.item_count, "|", r.structure_hash, "|", r.fingerprint,
                      "|", counts);
}

std::string Text(const ItemRecord& r) {
  return absl::StrCat(
      r.run_id, "|", r.name, "|", r.api, "|", r.op_type, "|", static_cast<int>(r.phase), "|",
      static_cast<int>(r.role), "|", r.index, "|", r.dtype ? static_cast<int>(*r.dtype) : -1, "|",
      absl::StrJoin(r.shape, ","), "|", static_cast<int>(r.data_mode), "|", r.byte_length, "|", Opt(r.max), "|",
      Opt(r.min), "|", Opt(r.mean), "|", Opt(r.norm), "|", r.crc32 ? static_cast<int64_t>(*r.crc32) : -1, "|",
      r.requires_grad ? static_cast<int>(*r.requires_grad) : -1, "|", r.scalar_value ? "v" + *r.scalar_value : "-",
      "|", r.scalar_type, "|", r.dtype_text, "|", r.data_name, "|", r.shape_text, "|", r.in_run_golden, "|", r.blob,
      "|", r.inline_data ? "d" + *r.inline_data : "-", "|", r.read_error);
}

std::string Text(const JobRecord& j) {
  return absl::StrCat(j.job_id, "|", j.project, "|", j.golden_run_id, "|", j.target_run_id, "|", j.policy, "|",
                      j.match_mode, "|", j.config_json, "|", static_cast<int>(j.state), "|", j.created_at_ms, "|",
                      j.finished_at_ms, "|", j.error, "|", j.pairs_done, "|", j.pairs_total, "|",
                      absl::StrJoin(j.counts, ","), "|", j.first_culprit);
}

std::string Text(const OpResultRecord& r) {
  return absl::StrCat(r.job_id, "|", r.name, "|", r.api, "|", r.op_type, "|", static_cast<int>(r.phase), "|",
                      static_cast<int>(r.role), "|", r.index, "|", r.golden_name, "|", r.result.ToJson().Dump(), "|",
                      static_cast<int>(r.culprit), "|", r.golden_dtype ? static_cast<int>(*r.golden_dtype) : -1, "|",
                      r.target_dtype ? static_cast<int>(*r.target_dtype) : -1, "|",
                      absl::StrJoin(r.golden_shape, ","), "|", absl::StrJoin(r.target_shape, ","), "|", Bits(r.error));
}

std::string Text(const TokenRecord& t) {
  return absl::StrCat(t.token_id, "|", t.project, "|", t.role, "|", t.salt.size(), ":", t.salt, "|", t.hash.size(),
                      ":", t.hash, "|", t.note, "|", t.created_at_ms, "|", t.revoked_at_ms);
}

template <typename T>
std::string Texts(const absl::StatusOr<std::vector<T>>& list) {
  if (!list.ok()) return absl::StrCat("error ", static_cast<int>(list.status().code()));
  std::string out;
  for (const T& r : *list) absl::StrAppend(&out, Text(r), "\n");
  return out;
}

// The same answer from both stores to one question, else DATA_LOSS naming it.
template <typename Ask>
absl::Status Same(const std::string& question, Store& a, Store& b, Ask ask, uint64_t* queries) {
  ++*queries;
  if (ask(a) == ask(b)) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("the stores answer differently: ", question));
}

}  // namespace

absl::Status CompareStoreAnswers(Store& a, Store& b, uint64_t* queries,
                                 const std::function<void(const std::string&, uint64_t, uint64_t)>& progress) {
  PARITY_RETURN_IF_ERROR(Same("the runs", a, b, [](Store& s) { return Texts(s.ListRuns(RunFilter(), 0, INT64_MAX)); }, queries));
  PARITY_RETURN_IF_ERROR(Same("the jobs", a, b, [](Store& s) { return Texts(s.ListJobs(JobFilter(), 0, INT64_MAX)); }, queries));
  PARITY_RETURN_IF_ERROR(Same("the tokens", a, b, [](Store& s) { return Texts(s.ListTokens("")); }, queries));
  PARITY_ASSIGN_OR_RETURN(std::vector<RunRecord> runs, a.ListRuns(RunFilter(), 0, INT64_MAX));
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string& id = runs[i].run_id;
    PARITY_RETURN_IF_ERROR(Same("the items of run " + id, a, b, [&](Store& s) { return Texts(s.ListItems(id)); }, queries));
    if (progress) progress("runs verified", i + 1, runs.size());
  }
  PARITY_ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, a.ListJobs(JobFilter(), 0, INT64_MAX));
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string& id = jobs[i].job_id;
    // Every result in dump order, the failures first by the worst Cosine and the rows by the
    // largest MaxAbsErr (a finished job's listings come from its stored index).
    std::vector<std::pair<std::string, OpResultFilter>> listings(3);
    listings[0].first = "in dump order";
    listings[1].first = "failures by Cosine";
    listings[1].second.verdicts = {static_cast<int>(Verdict::kFail)};
    listings[1].second.sort_metric = "Cosine";
    listings[2].first = "by MaxAbsErr";
    listings[2].second.sort_metric = "MaxAbsErr";
    listings[2].second.descending = true;
    for (const auto& [what, filter] : listings) {
      PARITY_RETURN_IF_ERROR(Same(absl::StrCat("the results of job ", id, " ", what), a, b, [&, f = filter](Store& s) {
        int64_t total = 0;
        return Texts(s.ListOpResults(id, f, 0, INT64_MAX, &total)) + absl::StrCat(total);
      }, queries));
    }
    if (progress) progress("jobs verified", i + 1, jobs.size());
  }
  return absl::OkStatus();
}

}  // namespace parity
