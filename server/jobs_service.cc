#include "server/jobs_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/memory.h"
#include "common/base/pyformat.h"
#include "common/base/status_macros.h"
#include "common/compare/culprit.h"
#include "server/admin_service.h"
#include "server/convert.h"
#include "server/request_limits.h"

namespace parity {

absl::StatusOr<int64_t> ParsePageToken(const std::string& token) {
  if (token.empty()) return 0;
  int64_t v;
  if (!absl::SimpleAtoi(token, &v) || v < 0) {
    return absl::InvalidArgumentError(absl::StrCat("page_token '", token.substr(0, 32), "' is not valid"));
  }
  return v;
}

int64_t PageSize(int32_t requested) {
  if (requested <= 0) return 50;
  return std::min<int64_t>(requested, 1000);
}

namespace {
grpc::Status Invalid(const std::string& msg) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, msg); }

// OK when job `job_id` exists and the caller has `role` in its project (see CallerOnJob).
grpc::Status AllowJob(const grpc::ServerContext* ctx, const TokenAuth* auth, Core* core,
                      AccessRole role, const std::string& job_id) {
  return ToGrpcStatus(CallerOnJob(*ctx, auth, core, role, job_id).status());
}

// The project a listing is limited to: the requested one (checked), or the caller's own.
absl::StatusOr<std::string> ListProject(const grpc::ServerContext* ctx, const TokenAuth* auth,
                                        const std::string& requested) {
  absl::StatusOr<Principal> p = CallerOf(*ctx, auth);
  if (!p.ok()) return p.status();
  if (p->AllProjects()) return requested;
  if (requested.empty()) return p->project;
  absl::Status ok = Require(*p, AccessRole::kViewer, requested);
  if (!ok.ok()) return ok;
  return requested;
}
}  // namespace

grpc::Status JobsService::Submit(grpc::ServerContext* ctx, const v1::SubmitJobRequest* req, v1::Job* out) {
  if (absl::Status limits = CheckRequestLimits(*req); !limits.ok()) return ToGrpcStatus(limits);
  if (req->golden_run_id().empty()) return Invalid("golden_run_id is empty");
  if (req->target_run_id().empty()) return Invalid("target_run_id is empty");
  // The caller first (no token: UNAUTHENTICATED whatever the ids), then the runs: one of another
  // project is NOT_FOUND, as a missing one.
  absl::StatusOr<Principal> caller = CallerOf(*ctx, auth_);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  for (const std::string& run_id : {req->golden_run_id(), req->target_run_id()}) {
    absl::StatusOr<RunRecord> run = core_->store().GetRun(run_id);
    if (!run.ok()) return ToGrpcStatus(run.status());
    if (!caller->AllProjects() && run->project != caller->project) return ToGrpcStatus(RunNotFound(run_id));
    if (absl::Status a = Require(*caller, AccessRole::kAgent, run->project); !a.ok()) return ToGrpcStatus(a);
  }
  absl::StatusOr<JobRecord> job = core_->SubmitJob(req->golden_run_id(), req->target_run_id(),
                                                   req->config().policy(), req->config().match_mode(),
                                                   req->config().config_json());
  if (!job.ok()) return ToGrpcStatus(job.status());
  ToProto(*job, out);
  return grpc::Status::OK;
}

grpc::Status JobsService::Get(grpc::ServerContext* ctx, const v1::GetJobRequest* req, v1::Job* out) {
  if (absl::Status limits = CheckRequestLimits(*req); !limits.ok()) return ToGrpcStatus(limits);
  if (req->job_id().empty()) return Invalid("job_id is empty");
  if (grpc::Status a = AllowJob(ctx, auth_, core_, AccessRole::kViewer, req->job_id()); !a.ok()) return a;
  absl::StatusOr<JobRecord> job = core_->GetJob(req->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  ToProto(*job, out);
  AddRunNames(core_->store(), out);
  return grpc::Status::OK;
}

void AddRunNames(Store& store, v1::Job* j) {
  if (absl::StatusOr<RunRecord> g = store.GetRun(j->golden_run_id()); g.ok()) j->set_golden_run_name(g->name);
  if (absl::StatusOr<RunRecord> t = store.GetRun(j->target_run_id()); t.ok()) {
    j->set_target_run_name(t->name);
    j->set_target_dump_format(t->dump_format);
  }
}

grpc::Status JobsService::List(grpc::ServerContext* ctx, const v1::ListJobsRequest* req, v1::ListJobsResponse* out) {
  if (absl::Status limits = CheckRequestLimits(*req); !limits.ok()) return ToGrpcStatus(limits);
  absl::StatusOr<int64_t> offset = ParsePageToken(req->page_token());
  if (!offset.ok()) return ToGrpcStatus(offset.status());
  absl::StatusOr<std::string> project = ListProject(ctx, auth_, req->project());
  if (!project.ok()) return ToGrpcStatus(project.status());
  const int64_t size = PageSize(req->page_size());
  JobFilter f;
  f.project = *project;
  f.run_id = req->run_id();
  f.state = req->state();
  absl::StatusOr<std::vector<JobRecord>> jobs = core_->store().ListJobs(f, *offset, size + 1);
  if (!jobs.ok()) return ToGrpcStatus(jobs.status());
  for (size_t i = 0; i < jobs->size() && static_cast<int64_t>(i) < size; ++i) {
    absl::StatusOr<JobRecord> live = core_->GetJob((*jobs)[i].job_id);
    v1::Job* j = out->add_jobs();
    ToProto(live.ok() ? *live : (*jobs)[i], j);
    AddRunNames(core_->store(), j);
  }
  if (static_cast<int64_t>(jobs->size()) > size) out->set_next_page_token(absl::StrCat(*offset + size));
  return grpc::Status::OK;
}

grpc::Status JobsService::Cancel(grpc::ServerContext* ctx, const v1::CancelJobRequest* req, v1::Job* out) {
  if (absl::Status limits = CheckRequestLimits(*req); !limits.ok()) return ToGrpcStatus(limits);
  if (req->job_id().empty()) return Invalid("job_id is empty");
  if (grpc::Status a = AllowJob(ctx, auth_, core_, AccessRole::kAgent, req->job_id()); !a.ok()) return a;
  absl::StatusOr<JobRecord> job = core_->CancelJob(req->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  ToProto(*job, out);
  return grpc::Status::OK;
}

namespace {
int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

QueryService::QueryService(Core* core, const TokenAuth* auth,
                           std::function<void(std::vector<Gauge>*)> more_gauges)
    : core_(core),
      auth_(auth),
      more_gauges_(std::move(more_gauges)),
      started_at_ms_(WallMs()),
      started_(std::chrono::steady_clock::now()) {}

grpc::Status QueryService::GetServerStatus(grpc::ServerContext* ctx,
                                           const v1::GetServerStatusRequest*,
                                           v1::ServerStatus* out) {
  absl::StatusOr<Principal> p = CallerOf(*ctx, auth_);
  if (!p.ok()) return ToGrpcStatus(p.status());
  std::vector<Gauge> gauges;
  if (more_gauges_) more_gauges_(&gauges);
  core_->AppendGauges(&gauges);
  const ResidentMemory m = ReadResidentMemory();
  gauges.push_back({"resident_bytes", m.now, m.peak, 0, false, true, ""});
  out->set_version(kParitydVersion);
  out->set_started_at_ms(started_at_ms_);
  out->set_uptime_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - started_)
                         .count());
  for (const Gauge& g : gauges) {
    v1::Gauge* o = out->add_gauges();
    o->set_name(g.name);
    o->set_value(g.value);
    o->set_peak(g.peak);
    o->set_limit(g.limit);
    o->set_limit_is_floor(g.limit_is_floor);
    o->set_bytes(g.bytes);
    o->set_flag(g.flag);
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::ListRuns(grpc::ServerContext* ctx, const v1::ListRunsRequest* req, v1::ListRunsResponse* out) {
  if (absl::Status limits = CheckRequestLimits(*req); !limits.ok()) return ToGrpcStatus(limits);
  absl::StatusOr<int64_t> offset = ParsePageToken(req->page_token());
  if (!offset.ok()) return ToGrpcStatus(offset.status());
  absl::StatusOr<std::string> project = ListProject(ctx, auth_, req->project());
  if (!project.ok()) return ToGrpcStatus(project.status());
  const int64_t size = PageSize(req->page_size());
  RunFilter f;
  f.project = *project;
  f.model = req->model();
  f.structure_hash = req->structure_hash();
  f.created_after_ms = req->created_after_ms();
  f.created_before_ms = req->created_before_ms();
  for (const auto& [k, v] : req->labels()) f.labels[k] = v;
  absl::StatusOr<std::vector<RunRecord>> runs = core_->store().ListRuns(f, *offset, size + 1);
  if (!runs.ok()) return ToGrpcStatus(runs.status());
  for (size_t i = 0; i < runs->size() && static_cast<int64_t>(i) < size; ++i) ToProto((*runs)[i], out->add_runs());
  if (static_cast<int64_t>(runs->size()) > size) out->set_next_page_token(absl::StrCat(*offset + size));
  return grpc::Status::OK;
}

namespace {
// Metrics where a larger value is worse; for the others (Cosine, PCC, ratios) smaller is worse.
bool HigherIsWorse(const std::string& m) {
  return m == "MaxAbsErr" || m == "MaxRelativeErr" || m == "EucDist" || m == "Mismatched elements" ||
         m == "Max absolute difference" || m == "Max relative difference" || m == "Required atol" ||
         m == "Required rtol" || m == "Dissimilarity";
}
bool LowerIsWorse(const std::string& m) {
  return m == "Cosine" || m == "PCC" || m == "One Thousandth Err Ratio" || m == "Five Thousandths Err Ratio";
}
}  // namespace

namespace {

// The stack StackOf shows for each of `apis` in the run ("" when none), read from its index.
absl::StatusOr<std::vector<std::string>> StacksOf(Store& store, const std::string& run_id,
                                                  const std::vector<std::string>& apis) {
  std::vector<std::string> names;
  for (const std::string& api : apis) {
    for (std::string& n : StackCandidates(api)) names.push_back(std::move(n));
  }
  using StackMap = absl::flat_hash_map<std::string, std::string>;
  PARITY_ASSIGN_OR_RETURN(StackMap found, store.GetStacks(run_id, names));
  std::vector<std::string> out;
  for (const std::string& api : apis) {
    std::string& stack = out.emplace_back();
    for (const std::string& n : StackCandidates(api)) {
      if (auto it = found.find(n); it != found.end()) {
        stack = it->second;
        break;
      }
    }
  }
  return out;
}

// The target run's module tree with each node's culprit status (a module's parameters_grad
// status on its first forward node).
grpc::Status AddModuleTree(Store& store, const JobRecord& job, v1::JobSummary* out) {
  std::optional<DumpStructure> tree = RunModuleTree(store, job.target_run_id);
  if (!tree) return grpc::Status::OK;
  absl::StatusOr<std::vector<Store::OpStatusRow>> statuses = store.ListOpStatuses(job.job_id);
  if (!statuses.ok()) return ToGrpcStatus(statuses.status());
  absl::flat_hash_map<std::string, const Store::OpStatusRow*> by_api;
  for (const Store::OpStatusRow& r : *statuses) by_api.emplace(r.api, &r);
  const std::vector<std::string> gradients = GradientEntries(*tree);
  for (size_t i = 0; i < tree->parents.size(); ++i) {
    v1::TreeNode* n = out->add_module_tree();
    n->set_name(tree->parents[i].first);
    n->set_parent(tree->parents[i].second);
    if (auto it = by_api.find(n->name()); it != by_api.end()) {
      n->set_status(static_cast<v1::CulpritStatus>(it->second->status));
      n->set_fails(it->second->fails);
    }
    if (gradients[i].empty()) continue;
    if (auto it = by_api.find(gradients[i]); it != by_api.end()) {
      n->set_gradient_status(static_cast<v1::CulpritStatus>(it->second->status));
      n->set_gradient_fails(it->second->fails);
    }
  }
  return grpc::Status::OK;
}

}  // namespace

grpc::Status QueryService::GetJobSummary(grpc::ServerContext* ctx, const v1::GetJobSummaryRequest* req,
                                         v1::JobSummary* out) {
  if (absl::Status limits = CheckRequestLimits(*req); !limits.ok()) return ToGrpcStatus(limits);
  if (req->job_id().empty()) return Invalid("job_id is empty");
  if (grpc::Status a = AllowJob(ctx, auth_, core_, AccessRole::kViewer, req->job_id()); !a.ok()) return a;
  absl::StatusOr<JobRecord> job = core_->GetJob(req->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  ToProto(*job, out->mutable_job());
  AddRunNames(core_->store(), out->mutable_job());
  *out->mutable_counts() = out->job().counts();
  out->set_first_culprit(job->first_culprit);
  absl::StatusOr<std::vector<std::string>> culprits = core_->store().ListCulpritApis(job->job_id);
  if (!culprits.ok()) return ToGrpcStatus(culprits.status());
  for (const std::string& c : *culprits) out->add_culprits(c);
  absl::StatusOr<std::string> analysis = core_->store().GetJobAnalysis(job->job_id);
  if (!analysis.ok()) return ToGrpcStatus(analysis.status());
  if (!analysis->empty()) {
    if (absl::Status a = AnalysisToProto(*analysis, out); !a.ok()) return ToGrpcStatus(a);
  } else {
    out->set_growth_threshold(kMinGrowth);
  }
  if (out->ranked_culprits_size() > 0) {
    std::vector<std::string> apis;
    for (const v1::Culprit& c : out->ranked_culprits()) apis.push_back(c.api());
    absl::StatusOr<std::vector<std::string>> stacks = StacksOf(core_->store(), job->target_run_id, apis);
    if (!stacks.ok()) return ToGrpcStatus(stacks.status());
    for (int i = 0; i < out->ranked_culprits_size(); ++i) out->mutable_ranked_culprits(i)->set_stack((*stacks)[i]);
  }
  if (req->module_tree()) {
    if (grpc::Status t = AddModuleTree(core_->store(), *job, out); !t.ok()) return t;
  }
  const int n = req->worst_per_metric() <= 0 ? 5 : std::min(req->worst_per_metric(), 100);
  for (const char* metric : {"Cosine", "MaxAbsErr", "MaxRelativeErr", "PCC", "Mismatched elements",
                             "Max absolute difference"}) {
    OpResultFilter f;
    f.sort_metric = metric;
    f.descending = HigherIsWorse(metric);
    f.one_off = true;
    int64_t total = 0;
    absl::StatusOr<std::vector<OpResultRecord>> rows = core_->store().ListOpResults(job->job_id, f, 0, n, &total);
    if (!rows.ok()) return ToGrpcStatus(rows.status());
    for (const OpResultRecord& r : *rows) {
      const MetricValue* v = r.result.Find(metric);
      if (v == nullptr || !v->is_number()) continue;
      // Rows at the metric's best (Cosine 1, an error of 0) are not "worst": the list stops there.
      const double x = v->number();
      if ((LowerIsWorse(metric) && x >= 1.0) || (HigherIsWorse(metric) && x <= 0.0)) break;
      v1::WorstOp* w = out->add_worst();
      w->set_metric(metric);
      w->set_name(r.name);
      w->set_value(v->number());
    }
  }
  return grpc::Status::OK;
}

namespace {
// Adds the items' statistics to results of `job` (looked up by name in both runs; a golden the
// target item names as its in-run golden, in the target run).
void AddItems(Store& store, const JobRecord& job, const OpResultRecord& r, v1::OpResult* out) {
  absl::StatusOr<ItemRecord> t = r.index >= 1000000000000 ? absl::StatusOr<ItemRecord>(absl::NotFoundError(""))
                                                          : store.GetItem(job.target_run_id, r.name);
  const bool in_run = t.ok() && !r.golden_name.empty() && t->in_run_golden == r.golden_name;
  absl::StatusOr<ItemRecord> g = r.golden_name.empty()
                                     ? absl::StatusOr<ItemRecord>(absl::NotFoundError(""))
                                     : store.GetItem(in_run ? job.target_run_id : job.golden_run_id, r.golden_name);
  AddItemInfo(g.ok() ? &*g : nullptr, t.ok() ? &*t : nullptr, out);
}
}  // namespace

grpc::Status QueryService::ListOpResults(grpc::ServerContext* ctx, const v1::ListOpResultsRequest* req,
                                         v1::ListOpResultsResponse* out) {
  if (absl::Status limits = CheckRequestLimits(*req); !limits.ok()) return ToGrpcStatus(limits);
  if (req->job_id().empty()) return Invalid("job_id is empty");
  if (grpc::Status a = AllowJob(ctx, auth_, core_, AccessRole::kViewer, req->job_id()); !a.ok()) return a;
  absl::StatusOr<int64_t> offset = ParsePageToken(req->page_token());
  if (!offset.ok()) return ToGrpcStatus(offset.status());
  absl::StatusOr<JobRecord> job = core_->GetJob(req->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  const int64_t size = PageSize(req->page_size());
  OpResultFilter f;
  for (int v : req->verdicts()) {
    if (v <= v1::VERDICT_UNSPECIFIED || v > v1::VERDICT_SKIPPED) {
      return Invalid(absl::StrCat("verdicts holds unknown value ", v));
    }
    f.verdicts.push_back(v - 1);
  }
  for (int c : req->culprits()) {
    if (c < v1::CULPRIT_STATUS_UNSPECIFIED || c > v1::CULPRIT_STATUS_PROPAGATED) {
      return Invalid(absl::StrCat("culprits holds unknown value ", c));
    }
    f.culprits.push_back(static_cast<CulpritStatus>(c));
  }
  f.glob = req->op_glob();
  f.phase = req->phase();
  f.role = req->role();
  f.sort_metric = req->sort_metric();
  f.descending = req->descending();
  int64_t total = 0;
  absl::StatusOr<std::vector<OpResultRecord>> rows =
      core_->store().ListOpResults(req->job_id(), f, *offset, size, &total);
  if (!rows.ok()) return ToGrpcStatus(rows.status());
  // msprobe's stack column: the API's own stack only (no fallback to the forward entry's), on
  // the first result of each API in the page.
  absl::flat_hash_map<std::string, std::string> stacks;
  if (req->with_stack()) {
    absl::StatusOr<std::optional<std::string>> marker = core_->store().GetRunFile(job->target_run_id, kStackJson);
    if (!marker.ok()) return ToGrpcStatus(marker.status());
    out->set_has_stacks(marker->has_value());
    std::vector<std::string> apis;
    for (const OpResultRecord& r : *rows) apis.push_back(r.api);
    if (marker->has_value()) {
      absl::StatusOr<absl::flat_hash_map<std::string, std::string>> found =
          core_->store().GetStacks(job->target_run_id, apis);
      if (!found.ok()) return ToGrpcStatus(found.status());
      stacks = *std::move(found);
    }
  }
  const std::string* previous_api = nullptr;
  for (const OpResultRecord& r : *rows) {
    v1::OpResult* o = out->add_results();
    ToProto(r, o);
    AddItems(core_->store(), *job, r, o);
    if (previous_api == nullptr || *previous_api != r.api) {
      if (auto it = stacks.find(r.api); it != stacks.end()) o->set_stack(it->second);
    }
    previous_api = &r.api;
  }
  out->set_total(total);
  if (*offset + static_cast<int64_t>(rows->size()) < total) {
    out->set_next_page_token(absl::StrCat(*offset + static_cast<int64_t>(rows->size())));
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::GetOpResult(grpc::ServerContext* ctx, const v1::GetOpResultRequest* req, v1::OpResult* out) {
  if (absl::Status limits = CheckRequestLimits(*req); !limits.ok()) return ToGrpcStatus(limits);
  if (req->job_id().empty()) return Invalid("job_id is empty");
  if (grpc::Status a = AllowJob(ctx, auth_, core_, AccessRole::kViewer, req->job_id()); !a.ok()) return a;
  if (req->name().empty()) return Invalid("name is empty");
  absl::StatusOr<JobRecord> job = core_->GetJob(req->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  absl::StatusOr<OpResultRecord> r = core_->store().GetOpResult(req->job_id(), req->name());
  if (!r.ok()) return ToGrpcStatus(r.status());
  ToProto(*r, out);
  AddItems(core_->store(), *job, *r, out);
  absl::StatusOr<std::vector<std::string>> stack = StacksOf(core_->store(), job->target_run_id, {r->api});
  if (!stack.ok()) return ToGrpcStatus(stack.status());
  out->set_stack((*stack)[0]);
  return grpc::Status::OK;
}

grpc::Status QueryService::GetJobSeries(grpc::ServerContext* ctx, const v1::GetJobSeriesRequest* req,
                                        v1::JobSeries* out) {
  constexpr int kDefaultBuckets = 1000, kMaxBuckets = 10000, kMaxMarks = 1000;
  if (absl::Status limits = CheckRequestLimits(*req); !limits.ok()) return ToGrpcStatus(limits);
  if (req->job_id().empty()) return Invalid("job_id is empty");
  if (req->buckets() < 0 || req->buckets() > kMaxBuckets) {
    return Invalid(absl::StrCat("buckets must be between 1 and ", kMaxBuckets, " (0: ", kDefaultBuckets, "), got ",
                                req->buckets()));
  }
  if (grpc::Status a = AllowJob(ctx, auth_, core_, AccessRole::kViewer, req->job_id()); !a.ok()) return a;
  absl::StatusOr<JobRecord> job = core_->GetJob(req->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  absl::StatusOr<CompareConfig> config = JobConfig(*job);
  const PolicyConfig policy = config.ok() ? config->base : PolicyConfig();
  const std::string metric = req->metric().empty() ? core_->PlotMetric(*job) : req->metric();
  absl::StatusOr<ResultSeries> series = core_->store().JobSeries(
      req->job_id(), metric, req->buckets() == 0 ? kDefaultBuckets : req->buckets(), kMaxMarks);
  if (!series.ok()) return ToGrpcStatus(series.status());
  out->set_job_id(req->job_id());
  out->set_metric(metric);
  out->set_total(series->total);
  for (const SeriesBucket& b : series->buckets) {
    v1::SeriesBucket* o = out->add_buckets();
    o->set_first(b.first);
    o->set_count(b.count);
    o->set_with_value(b.with_value);
    o->set_min(b.min);
    o->set_max(b.max);
    o->set_failing(b.failing);
  }
  for (const SeriesMark& m : series->culprits) {
    v1::SeriesMark* o = out->add_culprits();
    o->set_position(m.position);
    o->set_name(m.name);
    o->set_api(m.api);
    o->set_value(m.value);
  }
  if (std::optional<MetricLimit> limit = PolicyMetricLimit(policy, metric)) {
    out->set_has_threshold(true);
    out->set_threshold(limit->value);
    out->set_higher_is_better(limit->higher_is_better);
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::DiffJobs(grpc::ServerContext* ctx, const v1::DiffJobsRequest* req, v1::DiffJobsResponse* out) {
  if (absl::Status limits = CheckRequestLimits(*req); !limits.ok()) return ToGrpcStatus(limits);
  if (req->base_job_id().empty() || req->job_id().empty()) return Invalid("base_job_id and job_id are required");
  for (const std::string& id : {req->base_job_id(), req->job_id()}) {
    if (grpc::Status a = AllowJob(ctx, auth_, core_, AccessRole::kViewer, id); !a.ok()) return a;
  }
  absl::StatusOr<int64_t> offset = ParsePageToken(req->page_token());
  if (!offset.ok()) return ToGrpcStatus(offset.status());
  int64_t total = 0;
  absl::StatusOr<std::vector<OpResultRecord>> base =
      core_->store().ListOpResults(req->base_job_id(), OpResultFilter(), 0, INT64_MAX, &total);
  if (!base.ok()) return ToGrpcStatus(base.status());
  absl::StatusOr<std::vector<OpResultRecord>> cur =
      core_->store().ListOpResults(req->job_id(), OpResultFilter(), 0, INT64_MAX, &total);
  if (!cur.ok()) return ToGrpcStatus(cur.status());
  if (base->empty()) {
    absl::StatusOr<JobRecord> j = core_->GetJob(req->base_job_id());
    if (!j.ok()) return ToGrpcStatus(j.status());
  }
  std::map<std::string, const OpResultRecord*> by_name;
  for (const OpResultRecord& r : *base) by_name[r.name] = &r;
  std::vector<std::pair<const OpResultRecord*, std::string>> regressions;
  int64_t common = 0;
  for (const OpResultRecord& r : *cur) {
    auto b = by_name.find(r.name);
    if (b == by_name.end()) continue;
    ++common;
    const OpResultRecord& old = *b->second;
    const int sb = VerdictSeverity(old.result.verdict), sc = VerdictSeverity(r.result.verdict);
    // Regressions: a worse verdict, or a metric moved the wrong way; improvements the reverse.
    const bool better = req->improvements();
    std::string reason;
    if (better ? sc < sb : sc > sb) {
      reason = absl::StrCat("verdict ", VerdictName(old.result.verdict), " -> ", VerdictName(r.result.verdict));
    } else if (sc == sb) {
      for (const Metric& m : r.result.metrics) {
        const MetricValue* ov = old.result.Find(m.name);
        if (!ov || !ov->is_number() || !m.value.is_number()) continue;
        const double a = better ? m.value.number() : ov->number(), c = better ? ov->number() : m.value.number();
        if (std::isnan(a) || std::isnan(c)) continue;
        const double tol = req->min_change() > 0 ? req->min_change() : 1e-5;
        if ((HigherIsWorse(m.name) && c > a + tol) || (LowerIsWorse(m.name) && c < a - tol)) {
          reason = absl::StrCat(m.name, " ", PyRepr(ov->number()), " -> ", PyRepr(m.value.number()));
          break;
        }
      }
    }
    if (!reason.empty()) regressions.emplace_back(&r, reason);
  }
  if (common == 0) {
    // "0 regressions" would read as "nothing got worse" when nothing could be compared.
    return ToGrpcStatus(absl::FailedPreconditionError(absl::StrCat(
        "jobs ", req->base_job_id(), " (", base->size(), " results) and ", req->job_id(), " (",
        cur->size(), " results) have no item in common: nothing to compare")));
  }
  const int64_t size = PageSize(req->page_size());
  for (int64_t i = *offset; i < static_cast<int64_t>(regressions.size()) && i < *offset + size; ++i) {
    const auto& [r, reason] = regressions[static_cast<size_t>(i)];
    v1::OpRegression* reg = out->add_regressions();
    reg->set_name(r->name);
    ToProto(*by_name[r->name], reg->mutable_base());
    ToProto(*r, reg->mutable_current());
    reg->set_reason(reason);
  }
  if (*offset + size < static_cast<int64_t>(regressions.size())) out->set_next_page_token(absl::StrCat(*offset + size));
  return grpc::Status::OK;
}

}  // namespace parity
