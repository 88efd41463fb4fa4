#include "server/convert.h"

#include <atomic>
#include <chrono>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/compare/culprit.h"

namespace parity {

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  if (absl::IsInternal(s) || absl::IsUnknown(s)) {
    // The detail (a database message, a path in the data directory) is the operator's, not the
    // caller's: it goes to the log under an id the caller can quote.
    static std::atomic<uint64_t> incidents{0};
    const std::string id = absl::StrCat(
        absl::Hex(std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count()),
        "-", ++incidents);
    LogLine(LogLevel::kError, "rpc", "internal error",
            absl::StrCat("incident=", id, " error=", LogQuote(s.message())));
    return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                        absl::StrCat("internal error in parityd (incident ", id, "; its log has the detail)"));
  }
  std::string msg(s.message());
  if (msg.size() > 1024) msg.resize(1024);
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), msg);
}


void ToProto(const RunRecord& r, v1::Run* out) {
  out->set_run_id(r.run_id);
  v1::RunMetadata* m = out->mutable_metadata();
  m->set_project(r.project);
  m->set_side(static_cast<v1::Side>(r.side));
  m->set_name(r.name);
  m->set_model(r.model);
  m->set_framework(r.framework);
  m->set_dump_format(r.dump_format);
  if (r.dump_mode) m->set_dump_mode(ToProto(*r.dump_mode));
  m->set_device(r.device);
  m->set_rank(r.rank);
  m->set_step(r.step);
  for (const auto& [k, v] : r.labels) (*m->mutable_labels())[k] = v;
  out->set_created_at_ms(r.created_at_ms);
  out->set_complete(r.complete);
  out->set_item_count(r.item_count);
  out->set_structure_hash(r.structure_hash);
  out->set_fingerprint(r.fingerprint);
  for (const auto& [k, v] : r.op_type_counts) (*out->mutable_op_type_counts())[k] = v;
}

RunRecord FromProto(const v1::RunMetadata& m) {
  RunRecord r;
  r.project = m.project();
  r.side = static_cast<Side>(m.side());
  r.name = m.name();
  r.model = m.model();
  r.framework = m.framework();
  r.dump_format = m.dump_format();
  r.dump_mode = FromProto(m.dump_mode());
  r.device = m.device();
  r.rank = m.rank();
  r.step = m.step();
  for (const auto& [k, v] : m.labels()) r.labels[k] = v;
  return r;
}

void ToProto(const JobRecord& j, v1::Job* out) {
  out->set_job_id(j.job_id);
  out->set_project(j.project);
  out->set_golden_run_id(j.golden_run_id);
  out->set_target_run_id(j.target_run_id);
  out->mutable_config()->set_policy(static_cast<v1::Policy>(j.policy));
  out->mutable_config()->set_match_mode(static_cast<v1::MatchMode>(j.match_mode));
  out->mutable_config()->set_config_json(j.config_json);
  out->set_state(static_cast<v1::JobState>(j.state));
  out->set_created_at_ms(j.created_at_ms);
  out->set_finished_at_ms(j.finished_at_ms);
  out->set_error(j.error);
  out->set_pairs_done(j.pairs_done);
  out->set_pairs_total(j.pairs_total);
  v1::VerdictCounts* c = out->mutable_counts();
  c->set_pass(j.counts[0]);
  c->set_warn(j.counts[1]);
  c->set_fail(j.counts[2]);
  c->set_error(j.counts[3]);
  c->set_unmatched(j.counts[4]);
  c->set_skipped(j.counts[5]);
  out->set_first_culprit(j.first_culprit);
}

void ToProto(const OpResultRecord& r, v1::OpResult* out) {
  out->set_job_id(r.job_id);
  v1::ItemKey* k = out->mutable_key();
  k->set_name(r.name);
  k->set_api(r.api);
  k->set_op_type(r.op_type);
  k->set_phase(ToProto(r.phase));
  k->set_role(ToProto(r.role));
  k->set_index(r.index);
  out->set_golden_name(r.golden_name);
  out->set_verdict(ToProto(r.result.verdict));
  v1::Policy p = v1::POLICY_UNSPECIFIED;
  if (r.result.policy == "msprobe") p = v1::POLICY_MSPROBE;
  if (r.result.policy == "forge") p = v1::POLICY_FORGE;
  if (r.result.policy == "torch") p = v1::POLICY_TORCH;
  out->set_policy(p);
  out->set_peer_verdict(r.result.peer_verdict);
  out->set_message(r.result.message);
  for (const Metric& m : r.result.metrics) {
    v1::Metric* pm = out->add_metrics();
    pm->set_name(m.name);
    if (m.value.is_integer()) {
      pm->set_integer(m.value.integer());
    } else if (m.value.is_number()) {
      pm->set_number(m.value.number());
    } else {
      pm->set_text(m.value.text());
    }
  }
  out->set_culprit(static_cast<v1::CulpritStatus>(r.culprit));
  out->set_golden_dtype(ToProto(r.golden_dtype));
  out->set_target_dtype(ToProto(r.target_dtype));
  for (int64_t d : r.golden_shape) out->add_golden_shape(d);
  for (int64_t d : r.target_shape) out->add_target_shape(d);
}

absl::Status AnalysisToProto(absl::string_view doc, v1::JobSummary* out) {
  absl::StatusOr<Json> j = ParseJson(doc);
  if (!j.ok() || !j->is_object()) return absl::DataLossError("stored culprit analysis is not a JSON object");
  auto number = [](const Json* v) -> std::optional<double> {
    if (v == nullptr) return std::nullopt;
    if (v->is_number()) return v->as_double();
    if (v->is_string() && v->as_string() == "inf") return std::numeric_limits<double>::infinity();
    return std::nullopt;
  };
  if (std::optional<double> n = number(j->Find("noise_growth"))) out->set_noise_growth(*n);
  out->set_growth_threshold(number(j->Find("growth_threshold")).value_or(kMinGrowth));
  if (std::optional<double> n = number(j->Find("noise_samples"))) out->set_noise_samples(static_cast<int64_t>(*n));
  if (std::optional<double> n = number(j->Find("more"))) out->set_more_culprits(static_cast<int64_t>(*n));
  if (std::optional<double> n = number(j->Find("growth_fence"))) out->set_growth_fence(*n);
  if (const Json* noise = j->Find("within_noise"); noise != nullptr && noise->is_array()) {
    for (const Json& n : noise->as_array()) {
      if (n.is_string()) out->add_within_noise(n.as_string());
    }
  }
  const Json* ranked = j->Find("ranked");
  if (ranked == nullptr || !ranked->is_array()) return absl::DataLossError("stored culprit analysis has no ranked list");
  for (const Json& c : ranked->as_array()) {
    const Json* api = c.Find("api");
    if (api == nullptr || !api->is_string()) return absl::DataLossError("stored culprit without an api");
    v1::Culprit* p = out->add_ranked_culprits();
    p->set_api(api->as_string());
    const Json* phase = c.Find("phase");
    const std::string ph = phase != nullptr && phase->is_string() ? phase->as_string() : "";
    p->set_phase(ph == "forward"    ? v1::STEP_PHASE_FORWARD
                 : ph == "backward" ? v1::STEP_PHASE_BACKWARD
                 : ph == "gradient" ? v1::STEP_PHASE_GRADIENT
                                    : v1::STEP_PHASE_UNSPECIFIED);
    if (std::optional<double> n = number(c.Find("growth"))) p->set_growth(*n);
    if (std::optional<double> n = number(c.Find("in_error"))) p->set_in_error(*n);
    if (std::optional<double> n = number(c.Find("out_error"))) p->set_out_error(*n);
  }
  return absl::OkStatus();
}

void AddItemInfo(const ItemRecord* golden, const ItemRecord* target, v1::OpResult* out) {
  auto stats = [](const ItemRecord& it, v1::Statistics* s) {
    if (it.max) s->set_max(*it.max);
    if (it.min) s->set_min(*it.min);
    if (it.mean) s->set_mean(*it.mean);
    if (it.norm) s->set_norm(*it.norm);
  };
  if (golden) {
    stats(*golden, out->mutable_golden_stats());
    if (golden->requires_grad) out->set_golden_requires_grad(*golden->requires_grad);
    out->set_golden_dtype_text(golden->dtype_text);
    out->set_golden_data_name(golden->data_name);
    out->set_golden_shape_text(golden->shape_text);
    if (!golden->dtype) out->set_golden_type(golden->scalar_type.empty() ? "None" : golden->scalar_type);
    if (golden->scalar_value) out->set_golden_value(*golden->scalar_value);
  }
  if (target) {
    stats(*target, out->mutable_target_stats());
    if (target->requires_grad) out->set_target_requires_grad(*target->requires_grad);
    out->set_target_dtype_text(target->dtype_text);
    out->set_target_data_name(target->data_name);
    out->set_target_shape_text(target->shape_text);
    if (!target->dtype) out->set_target_type(target->scalar_type.empty() ? "None" : target->scalar_type);
    if (target->scalar_value) out->set_target_value(*target->scalar_value);
  }
}

ItemRecord FromProto(const v1::TensorHeader& h) {
  ItemRecord it;
  it.name = h.key().name();
  it.api = h.key().api().empty() ? h.key().name() : h.key().api();
  it.op_type = h.key().op_type();
  it.phase = FromProto(h.key().phase());
  it.role = FromProto(h.key().role());
  it.index = h.key().index();
  it.dtype_text = h.dtype_text();
  it.data_name = h.data_name();
  it.shape_text = h.shape_text();
  it.in_run_golden = h.in_run_golden();
  if (h.has_scalar_value()) {
    it.scalar_value = h.scalar_value();
    it.scalar_type = h.scalar_type();
  } else {
    it.dtype = FromProto(h.dtype());
    if (!it.dtype) it.dtype = std::nullopt;
  }
  it.shape.assign(h.shape().begin(), h.shape().end());
  // Unspecified: data follows, unless the agent could not read it.
  it.data_mode = h.data_mode() != v1::DATA_MODE_UNSPECIFIED ? static_cast<DataMode>(h.data_mode())
                 : h.read_error().empty()                   ? DataMode::kData
                                                            : DataMode::kStats;
  it.byte_length = h.byte_length();
  if (h.stats().has_max()) it.max = h.stats().max();
  if (h.stats().has_min()) it.min = h.stats().min();
  if (h.stats().has_mean()) it.mean = h.stats().mean();
  if (h.stats().has_norm()) it.norm = h.stats().norm();
  if (h.has_crc32()) it.crc32 = h.crc32();
  if (h.has_requires_grad()) it.requires_grad = h.requires_grad();
  if (h.by_reference()) it.offered_blob = h.content_sha256();
  it.read_error = h.read_error();
  return it;
}

UploadStartRequest FromProto(const v1::UploadStart& s) {
  UploadStartRequest r;
  if (s.has_new_run()) {
    r.new_run = FromProto(s.new_run());
    r.new_run->run_id = s.new_run_id();
  }
  r.attach_run_id = s.attach_run_id();
  r.against_run_id = s.against_run_id();
  if (s.has_against_label()) {
    r.against_labels[s.against_label().key()] = s.against_label().value();
    for (const auto& l : s.against_extra_labels()) r.against_labels[l.key()] = l.value();
  }
  r.policy = s.job_config().policy();
  r.match_mode = s.job_config().match_mode();
  r.config_json = s.job_config().config_json();
  r.summary_waits_for_job = s.summary_waits_for_job();
  return r;
}

void ToProto(const UploadEvent& e, v1::UploadResponse* out) {
  switch (e.kind) {
    case UploadEvent::Kind::kAccepted: {
      v1::UploadAccepted* a = out->mutable_accepted();
      a->set_run_id(e.run_id);
      a->set_job_id(e.job_id);
      for (const std::string& n : e.held_items) a->add_held_item_names(n);
      a->set_max_chunk_bytes(e.max_chunk_bytes);
      break;
    }
    case UploadEvent::Kind::kAck:
      out->mutable_ack()->set_name(e.name);
      out->mutable_ack()->set_index(e.index);
      break;
    case UploadEvent::Kind::kRejected:
      out->mutable_rejected()->set_name(e.name);
      out->mutable_rejected()->set_code(static_cast<int>(e.status.code()));
      out->mutable_rejected()->set_message(std::string(e.status.message()));
      break;
    case UploadEvent::Kind::kVerdict:
      ToProto(e.result, out->mutable_verdict());
      break;
    case UploadEvent::Kind::kFlushDone:
      for (const std::string& n : e.full_data_names) out->mutable_flush_done()->add_full_data_names(n);
      if (e.full_data_names.empty()) out->mutable_flush_done();
      break;
    case UploadEvent::Kind::kSummary: {
      v1::UploadSummary* s = out->mutable_summary();
      if (e.job) ToProto(*e.job, s->mutable_job());
      s->set_items_received(e.items_received);
      s->set_items_rejected(e.items_rejected);
      break;
    }
  }
}

absl::Status ApplyUploadRequest(UploadSession& s, const v1::UploadRequest& msg) {
  const absl::string_view data = msg.chunk().data();
  return ApplyUploadRequest(s, msg, absl::MakeConstSpan(&data, data.empty() ? 0 : 1));
}

absl::Status ApplyUploadRequest(UploadSession& s, const v1::UploadRequest& msg,
                                absl::Span<const absl::string_view> chunk_data) {
  switch (msg.msg_case()) {
    case v1::UploadRequest::kStart:
      if (!v1::DumpMode_IsValid(msg.start().new_run().dump_mode())) {
        return absl::InvalidArgumentError(absl::StrCat("start.new_run.dump_mode ",
                                                       static_cast<int>(msg.start().new_run().dump_mode()),
                                                       " is not a known DumpMode"));
      }
      return s.Start(FromProto(msg.start()));
    case v1::UploadRequest::kHeader: {
      const v1::TensorHeader& h = msg.header();
      // Every enum of the API takes its declared values only (an unknown one is refused, not
      // stored): phase, role and data mode here, dtype below, side and dump mode with the run.
      if (!v1::Phase_IsValid(h.key().phase()) || !v1::Role_IsValid(h.key().role()) ||
          !v1::DataMode_IsValid(h.data_mode())) {
        return s.RejectHeader(h.key().name(), absl::InvalidArgumentError(absl::StrCat(
                                                  "header of '", h.key().name(), "': key.phase ",
                                                  static_cast<int>(h.key().phase()), ", key.role ",
                                                  static_cast<int>(h.key().role()), " or data_mode ",
                                                  static_cast<int>(h.data_mode()), " is not a known value")));
      }
      if (!h.has_scalar_value() && h.dtype() != v1::DTYPE_UNSPECIFIED && !FromProto(h.dtype())) {
        return s.RejectHeader(h.key().name(), absl::InvalidArgumentError(absl::StrCat(
                                                  "header.dtype ", static_cast<int>(h.dtype()),
                                                  " is not a known DType")));
      }
      if (!h.has_scalar_value() && h.dtype() == v1::DTYPE_UNSPECIFIED && h.read_error().empty()) {
        return s.RejectHeader(h.key().name(), absl::InvalidArgumentError(
                                                  "header.dtype is unspecified (set it, or "
                                                  "scalar_value for a non-tensor argument)"));
      }
      return s.Header(FromProto(h));
    }
    case v1::UploadRequest::kChunk:
    {
      const v1::TensorChunk& c = msg.chunk();
      if (!c.read_error().empty()) return s.AbortItem(c.read_error());
      TensorStats stats;
      if (c.has_stats()) {
        if (c.stats().has_max()) stats.max = c.stats().max();
        if (c.stats().has_min()) stats.min = c.stats().min();
        if (c.stats().has_mean()) stats.mean = c.stats().mean();
        if (c.stats().has_norm()) stats.norm = c.stats().norm();
      }
      return s.Chunk(c.offset(), chunk_data, c.has_crc32() ? std::optional<uint32_t>(c.crc32()) : std::nullopt,
                     c.has_stats() ? &stats : nullptr);
    }
    case v1::UploadRequest::kFlush:
      return s.Flush();
    case v1::UploadRequest::kEnd:
      return s.End();
    case v1::UploadRequest::kRunFile:
      return s.RunFile(msg.run_file().name(), msg.run_file().offset(), msg.run_file().data(), msg.run_file().last());
    default:
      return absl::InvalidArgumentError("UploadRequest has no message set");
  }
}

}  // namespace parity
