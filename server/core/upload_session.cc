#include "server/core/upload_session.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/formats/dump_structure.h"
#include "common/base/control_chars.h"
#include "common/base/crc32.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/checks/compare_config.h"

namespace parity {

struct UploadSession::Shared {
  EmitFn emit;
  std::string job_id;
  std::string golden_run_id;
  bool summary_waits_for_job = false;  // set before the run's listener is subscribed
  std::atomic<bool> ended{false};
  std::atomic<bool> summary_sent{false};
  std::atomic<int64_t> received{0};
  std::atomic<int64_t> rejected{0};
  // The run's verdicts wait here until UploadAccepted has gone out: a resumed run's job may
  // announce one while Start is still running, and the agent reads UploadAccepted first.
  absl::Mutex gate_mu;
  bool accepted_sent ABSL_GUARDED_BY(gate_mu) = false;
  std::vector<UploadEvent> early ABSL_GUARDED_BY(gate_mu);
};

UploadSession::UploadSession(Core* core, EmitFn emit) : core_(core), shared_(std::make_shared<Shared>()) {
  shared_->emit = std::move(emit);
}

UploadSession::~UploadSession() {
  FinishPending();  // received whole: stored as if the stream had gone on
  if (listener_) core_->Unsubscribe(listener_);
  AbandonCurrent();
  for (const auto& [name, f] : run_files_) core_->ReleaseRunFileBytes(f.data.size());  // never completed
}

absl::Status ValidateHeader(const ItemRecord& it, const CoreOptions& o) {
  if (it.name.empty()) return absl::InvalidArgumentError("header.key.name is empty");
  if (it.name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("header.key.name is ", it.name.size(),
                                                   " bytes, the limit is ", kMaxNameBytes));
  }
  for (unsigned char c : it.name) {
    if (c == '/' || c == '\\') {
      return absl::InvalidArgumentError(
          absl::StrCat("header.key.name '", it.name, "' contains a path separator"));
    }
  }
  // Every text field of the header that names or describes the item (a non-tensor's
  // scalar_value is data: shown escaped, never refused).
  const std::pair<const char*, const std::string*> texts[] = {
      {"header.key.name", &it.name},           {"header.key.api", &it.api},
      {"header.key.op_type", &it.op_type},     {"header.dtype_text", &it.dtype_text},
      {"header.data_name", &it.data_name},     {"header.shape_text", &it.shape_text},
      {"header.scalar_type", &it.scalar_type}, {"header.in_run_golden", &it.in_run_golden}};
  for (const auto& [field, text] : texts) {
    if (std::optional<uint32_t> c = FindControlCharacter(*text)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " of item ", it.index, " contains control character 0x", absl::Hex(*c)));
    }
  }
  if (it.index < 0) {
    return absl::InvalidArgumentError(absl::StrCat("header.key.index is negative (", it.index, ")"));
  }
  if (it.scalar_value && it.scalar_value->size() > kMaxScalarValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat("header.scalar_value of '", it.name, "' is ",
                                                   it.scalar_value->size(), " bytes, the limit is ",
                                                   kMaxScalarValueBytes));
  }
  if (it.api.size() > kMaxNameBytes || it.op_type.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError("header.key.api or op_type is longer than 1024 bytes");
  }
  if (it.dtype_text.size() > kMaxNameBytes || it.data_name.size() > kMaxNameBytes ||
      it.shape_text.size() > kMaxNameBytes || it.in_run_golden.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("header.dtype_text, data_name, shape_text or in_run_golden of '", it.name,
                                                   "' is longer than ", kMaxNameBytes, " bytes"));
  }
  if (!it.read_error.empty()) {
    if (it.read_error.size() > kMaxReadErrorBytes) {
      return absl::InvalidArgumentError(absl::StrCat("header.read_error of '", it.name, "' is ",
                                                     it.read_error.size(), " bytes, the limit is ",
                                                     kMaxReadErrorBytes));
    }
    if (it.scalar_value) {
      return absl::InvalidArgumentError(absl::StrCat(
          "header.read_error of '", it.name, "' is for tensors; this header has a scalar_value"));
    }
    if (it.data_mode != DataMode::kStats || it.byte_length != 0 || !it.offered_blob.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "header for '", it.name, "' has a read_error and so no data: set data_mode STATS, "
          "byte_length 0 and no by_reference"));
    }
  }
  if (!it.dtype) {
    if (it.data_mode == DataMode::kData && it.byte_length > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "header for '", it.name, "' has no dtype but announces ", it.byte_length, " data bytes"));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> numel = CheckedNumel(it.shape);
  if (!numel.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("header.shape of '", it.name, "': ", numel.status().message()));
  }
  if (it.data_mode == DataMode::kData) {
    const uint64_t esize = DTypeSize(*it.dtype);
    if (static_cast<uint64_t>(*numel) > o.max_tensor_bytes / esize) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "tensor '", it.name, "' of shape ", ShapeToString(it.shape), " exceeds parityd --max-tensor-bytes=",
          o.max_tensor_bytes));
    }
    const uint64_t want = static_cast<uint64_t>(*numel) * esize;
    if (it.byte_length != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          "header.byte_length ", it.byte_length, " of '", it.name, "' does not match shape ",
          ShapeToString(it.shape), " x ", esize, " bytes per ", DTypeName(*it.dtype), " = ", want));
    }
  } else if (it.byte_length != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "header.byte_length must be 0 when no data is sent (item '", it.name, "')"));
  }
  return absl::OkStatus();
}

absl::Status UploadSession::Allowed(const std::string& project, const std::string& what) const {
  if (allowed_project_ == "*" || allowed_project_ == project) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("this token belongs to project '", allowed_project_,
                                                  "'; ", what, " is in project '", project, "'"));
}

absl::Status UploadSession::Visible(const RunRecord& r) const {
  // A run named by id in another project is, to this caller, a run that does not exist.
  return allowed_project_ == "*" || allowed_project_ == r.project ? absl::OkStatus() : RunNotFound(r.run_id);
}

absl::StatusOr<std::string> UploadSession::FindGolden(const UploadStartRequest& req,
                                                      const std::string& project) const {
  std::string golden_id = req.against_run_id;
  if (golden_id.empty()) {
    PARITY_ASSIGN_OR_RETURN(RunRecord g, core_->FindGoldenByLabels(project, req.against_labels));
    golden_id = g.run_id;
  }
  PARITY_ASSIGN_OR_RETURN(RunRecord golden, core_->store().GetRun(golden_id));
  PARITY_RETURN_IF_ERROR(Visible(golden));
  return golden_id;
}

absl::Status UploadSession::CheckStart(const UploadStartRequest& req) const {
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"start.attach_run_id", &req.attach_run_id},
                                      {"start.against_run_id", &req.against_run_id}}) {
    if (value->size() > 64) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", value->size(), " bytes, the limit is 64"));
    }
  }
  if (req.config_json.size() > kMaxConfigJsonBytes) {
    return absl::InvalidArgumentError(absl::StrCat("start.job_config.config_json: ", req.config_json.size(),
                                                   " bytes, the limit is ", kMaxConfigJsonBytes));
  }
  PARITY_RETURN_IF_ERROR(core_->CheckFreeDisk());
  PARITY_RETURN_IF_ERROR(core_->CheckDatabaseQuota());
  return ValidateLabels("start.against_extra_labels", req.against_labels);
}

absl::Status UploadSession::StartNewRun(const UploadStartRequest& req, bool against, RunRecord* run,
                                        std::string* attach_id, std::string* golden_id) {
  const RunRecord& meta = *req.new_run;
  PARITY_RETURN_IF_ERROR(Allowed(meta.project, "the new run"));
  if (admit_) PARITY_RETURN_IF_ERROR(admit_(meta.project));
  // Whatever can refuse the start is checked before the run exists: a refused start leaves no
  // empty run behind.
  if (against && meta.side != Side::kTarget) {
    return absl::FailedPreconditionError("against is only allowed when uploading a target run");
  }
  if (against) {
    PARITY_ASSIGN_OR_RETURN(*golden_id, FindGolden(req, meta.project));
  }
  if (!req.config_json.empty()) {
    absl::StatusOr<Json> j = ParseJson(req.config_json);
    if (!j.ok()) return absl::InvalidArgumentError(absl::StrCat("config_json: ", j.status().message()));
    PARITY_RETURN_IF_ERROR(ParseCompareConfig(*j).status());
  }
  if (!meta.run_id.empty()) {
    // The agent's retry of a start whose UploadAccepted it never got: the run that start
    // created is resumed, not created twice.
    absl::StatusOr<RunRecord> prior = core_->store().GetRun(meta.run_id);
    if (prior.ok()) {
      if (prior->project != meta.project || prior->side != meta.side) {
        return absl::AlreadyExistsError(absl::StrCat("run ", prior->run_id, " exists in another project or side"));
      }
      *attach_id = prior->run_id;
    } else if (!absl::IsNotFound(prior.status())) {
      return prior.status();
    }
  }
  if (attach_id->empty()) {
    PARITY_ASSIGN_OR_RETURN(*run, core_->CreateRun(meta));
  }
  return absl::OkStatus();
}

absl::Status UploadSession::AttachRun(const std::string& run_id, RunRecord* run, std::vector<std::string>* held) {
  PARITY_ASSIGN_OR_RETURN(*run, core_->store().GetRun(run_id));
  PARITY_RETURN_IF_ERROR(Visible(*run));
  if (admit_) PARITY_RETURN_IF_ERROR(admit_(run->project));
  // A complete run is attached to when the agent's connection broke after its UploadEnd was
  // handled but before the summary arrived: nothing more is accepted, End() reports again.
  attached_complete_ = run->complete;
  PARITY_ASSIGN_OR_RETURN(std::vector<ItemRecord> items, core_->store().ListItems(run->run_id));
  for (const ItemRecord& it : items) {
    indexes_.insert(it.index);
    held_[it.name] = {it.index, it.blob.empty() && it.dtype ? it.data_mode : DataMode::kData};
    held->push_back(it.name);
  }
  JobFilter f;
  f.run_id = run->run_id;
  PARITY_ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, core_->store().ListJobs(f, 0, 100));
  for (const JobRecord& j : jobs) {
    if (j.target_run_id == run->run_id && (attached_complete_ || !IsFinal(j.state)) &&
        shared_->job_id.empty()) {  // newest first
      shared_->job_id = j.job_id;
      shared_->golden_run_id = j.golden_run_id;
    }
  }
  return absl::OkStatus();
}

void UploadSession::SubscribeToRun() {
  std::weak_ptr<Shared> weak = shared_;
  Core* core = core_;
  listener_ = core_->SubscribeRun(
      run_id_,
      [weak](const ResultEvent& ev) {
        std::shared_ptr<Shared> sh = weak.lock();
        if (!sh) return;
        UploadEvent e(UploadEvent::Kind::kVerdict);
        e.job_id = ev.job_id;
        e.result = ev.result;
        absl::MutexLock l(&sh->gate_mu);
        if (!sh->accepted_sent) {
          sh->early.push_back(std::move(e));
          return;
        }
        sh->emit(std::move(e));  // under gate_mu: after the early ones, in order
      },
      [weak, core](const JobRecord& job) {
        std::shared_ptr<Shared> sh = weak.lock();
        if (sh && job.job_id == sh->job_id && IsFinal(job.state)) MaybeSummarize(sh, core);
      });
}

void UploadSession::SendAccepted(std::vector<std::string> held) {
  UploadEvent accepted(UploadEvent::Kind::kAccepted);
  accepted.run_id = run_id_;
  accepted.job_id = shared_->job_id;
  accepted.held_items = std::move(held);
  accepted.max_chunk_bytes = core_->options().max_chunk_bytes;
  shared_->emit(std::move(accepted));
  absl::MutexLock l(&shared_->gate_mu);
  shared_->accepted_sent = true;
  for (UploadEvent& e : shared_->early) shared_->emit(std::move(e));
  shared_->early.clear();
}

absl::Status UploadSession::Start(const UploadStartRequest& req) {
  if (started_) return absl::FailedPreconditionError("UploadStart sent twice");
  started_ = true;
  PARITY_RETURN_IF_ERROR(CheckStart(req));
  const bool against = !req.against_run_id.empty() || !req.against_labels.empty();
  RunRecord run;
  std::vector<std::string> held;
  std::string attach_id = req.attach_run_id;
  std::string golden_id;  // found before a new run is created
  if (req.new_run) {
    PARITY_RETURN_IF_ERROR(StartNewRun(req, against, &run, &attach_id, &golden_id));
  } else if (attach_id.empty()) {
    return absl::InvalidArgumentError("UploadStart needs new_run or attach_run_id");
  }
  if (!attach_id.empty()) PARITY_RETURN_IF_ERROR(AttachRun(attach_id, &run, &held));
  run_id_ = run.run_id;
  project_ = run.project;
  item_count_ = static_cast<int64_t>(held.size());
  if (shared_->job_id.empty() && against) {
    if (run.side != Side::kTarget) {
      return absl::FailedPreconditionError("against is only allowed when uploading a target run");
    }
    if (golden_id.empty()) {
      PARITY_ASSIGN_OR_RETURN(golden_id, FindGolden(req, run.project));
    }
    PARITY_ASSIGN_OR_RETURN(JobRecord job, core_->SubmitJob(golden_id, run.run_id, req.policy,
                                                            req.match_mode, req.config_json));
    shared_->job_id = job.job_id;
    shared_->golden_run_id = golden_id;
  }
  shared_->summary_waits_for_job = req.summary_waits_for_job;
  SubscribeToRun();
  // A resumed target whose job no daemon compares any more (its daemon died): compared here.
  if (!attach_id.empty() && !attached_complete_) core_->AdoptJob(shared_->job_id);
  if (Metrics* m = core_->options().metrics) m->UploadStarted();
  LogLine(LogLevel::kInfo, "ingest", attach_id.empty() ? "upload started" : "upload resumed",
          absl::StrCat("run=", run_id_, " project=", run.project, " job=", shared_->job_id,
                       " held=", held.size()));
  SendAccepted(std::move(held));
  return absl::OkStatus();
}

void UploadSession::Reject(const std::string& name, absl::Status s) {
  // The first few rejections of an upload are logged (a full or read-only disk shows here);
  // the rest are counted in its "upload complete" line.
  constexpr int64_t kLoggedRejections = 3;
  if (shared_->rejected.load() < kLoggedRejections) {
    LogLine(LogLevel::kWarning, "ingest", "item rejected",
            absl::StrCat("run=", run_id_, " item=", LogQuote(name), " code=",
                         absl::StatusCodeToString(s.code()), " error=", LogQuote(s.message())));
  }
  shared_->rejected++;
  UploadEvent e(UploadEvent::Kind::kRejected);
  e.name = name;
  e.status = std::move(s);
  shared_->emit(std::move(e));
}

void UploadSession::RejectUnfinished(const char* because) {
  if (!current_) return;
  Reject(current_->name, absl::DataLossError(absl::StrCat("item '", current_->name, "' ended after ", received_,
                                                          " of ", current_->byte_length, " bytes (", because, ")")));
  AbandonCurrent();
}

void UploadSession::AbandonCurrent() {
  current_.reset();
  blob_.reset();  // deletes the temp file
  in_memory_.reset();
  inline_ = false;
  inline_buf_.clear();
  received_ = 0;
}

absl::Status UploadSession::CheckHeader(const ItemRecord& item) {
  PARITY_RETURN_IF_ERROR(ValidateHeader(item, core_->options()));
  if (attached_complete_) {
    return absl::FailedPreconditionError(absl::StrCat("run ", run_id_, " is complete; start a new run to upload again"));
  }
  if (auto h = held_.find(item.name); h != held_.end()) {
    // A DATA header for an item held as STATS/CRC upgrades it (same index); anything else is a
    // duplicate.
    if (h->second.second == DataMode::kData || item.data_mode != DataMode::kData || !item.dtype ||
        item.index != h->second.first) {
      return absl::AlreadyExistsError(absl::StrCat("item '", item.name, "' was already uploaded to run ", run_id_));
    }
    upgrading_ = true;
  }
  if (!upgrading_ && indexes_.count(item.index)) {
    return absl::AlreadyExistsError(absl::StrCat("header.key.index ", item.index, " of '", item.name,
                                                 "' is already used in run ", run_id_));
  }
  if (!upgrading_ && item_count_ >= core_->options().max_items_per_run) {
    return absl::ResourceExhaustedError(absl::StrCat("run ", run_id_, " reached parityd --max-items-per-run=",
                                                     core_->options().max_items_per_run));
  }
  return core_->CheckDatabaseQuota();
}

absl::StatusOr<std::string> UploadSession::ReferencedBlob() {
  // The bytes are already in the spool, under the offered hash or under a unique key whose hash
  // was recorded. Only blobs this run's project references count: another project's data is
  // neither lent nor revealed (the answer is the same as for a blob nobody holds). No wait for
  // pending hashes: the agent offers by reference only what HaveBlobs answered held, whose hash
  // was then known.
  const ItemRecord& it = *current_;
  if (it.data_mode != DataMode::kData || !it.dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("item '", it.name, "': by_reference needs DATA_MODE_DATA and a tensor dtype"));
  }
  PARITY_ASSIGN_OR_RETURN(std::string held, core_->HeldBlobFor(project_, it.offered_blob, /*wait=*/false));
  if (held.empty() && Spool::IsKey(it.offered_blob)) {
    return absl::FailedPreconditionError(absl::StrCat("item '", it.name, "': blob ", it.offered_blob,
                                                      " is not held for project '", project_, "'; send the data"));
  }
  const std::string key = held.empty() ? it.offered_blob : held;
  absl::StatusOr<uint64_t> size = core_->spool().SizeOf(key);
  if (!size.ok()) {
    return size.status().code() == absl::StatusCode::kNotFound
               ? absl::FailedPreconditionError(
                     absl::StrCat("item '", it.name, "': ", size.status().message(), " any more; send the data"))
               : absl::InvalidArgumentError(
                     absl::StrCat("item '", it.name, "': content_sha256 ", size.status().message()));
  }
  if (*size != it.byte_length) {
    return absl::InvalidArgumentError(absl::StrCat("item '", it.name, "': blob ", it.offered_blob, " holds ",
                                                   *size, " bytes, header.byte_length says ", it.byte_length));
  }
  return key;
}

absl::Status UploadSession::OpenData() {
  PARITY_RETURN_IF_ERROR(core_->CheckFreeDisk());
  const uint64_t length = current_->byte_length;
  if (core_->options().inline_max_bytes > 0 && length <= core_->options().inline_max_bytes) {
    inline_ = true;
    inline_buf_.clear();
    inline_buf_.reserve(length);
    return absl::OkStatus();
  }
  // Large blobs are compared from memory when a running job will compare them (and written past
  // the page cache: reading them back would be a disk read). The spool writes such a blob from
  // its memory, not through staging buffers of its own.
  if (core_->spool().WritesDirect(length) && core_->RunHasActiveJob(run_id_)) {
    in_memory_ = core_->held_blobs().Reserve(length);
  }
  PARITY_ASSIGN_OR_RETURN(blob_, core_->spool().Create(length, in_memory_ ? in_memory_->buffer() : nullptr));
  return absl::OkStatus();
}

absl::Status UploadSession::Header(ItemRecord item) {
  if (!started_) return absl::FailedPreconditionError("the first message must be UploadStart");
  if (ended_) return absl::FailedPreconditionError("message after UploadEnd");
  RejectUnfinished("the next header arrived");
  skipping_ = false;
  upgrading_ = false;
  if (!pending_.empty() &&
      (item_count_ + static_cast<int64_t>(pending_.size()) >= core_->options().max_items_per_run ||
       std::any_of(pending_.begin(), pending_.end(), [&](const Received& r) {
         return r.item.name == item.name || r.item.index == item.index;
       }))) {
    FinishPending();  // the checks below see them as stored (or rejected)
  }
  if (absl::Status v = CheckHeader(item); !v.ok()) {
    upgrading_ = false;
    skipping_ = true;
    Reject(item.name, v);
    return absl::OkStatus();
  }
  item.run_id = run_id_;
  item.blob.clear();
  current_ = std::move(item);
  received_ = 0;
  crc_ = 0;
  crc_from_chunk_ = false;
  if (!current_->offered_blob.empty()) {
    absl::StatusOr<std::string> key = ReferencedBlob();
    if (!key.ok()) {
      Reject(current_->name, key.status());
      AbandonCurrent();
      return absl::OkStatus();
    }
    current_->blob = *std::move(key);
    return Complete();
  }
  if (current_->data_mode == DataMode::kData && current_->dtype) {
    if (absl::Status s = OpenData(); !s.ok()) {
      skipping_ = true;
      Reject(current_->name, s);
      AbandonCurrent();
      return absl::OkStatus();
    }
    if (current_->byte_length > 0) return absl::OkStatus();
  }
  return Complete();
}

absl::Status UploadSession::RejectHeader(const std::string& name, absl::Status why) {
  if (!started_) return absl::FailedPreconditionError("the first message must be UploadStart");
  if (ended_) return absl::FailedPreconditionError("message after UploadEnd");
  RejectUnfinished("the next header arrived");
  skipping_ = true;
  Reject(name, std::move(why));
  return absl::OkStatus();
}

absl::Status UploadSession::AbortItem(std::string read_error) {
  if (!started_) return absl::FailedPreconditionError("the first message must be UploadStart");
  if (ended_) return absl::FailedPreconditionError("message after UploadEnd");
  if (!current_) {
    if (!skipping_) {
      Reject("", absl::FailedPreconditionError("a chunk with a read_error arrived without a header"));
      skipping_ = true;
    }
    return absl::OkStatus();
  }
  FinishWritten();
  ItemRecord item = std::move(*current_);
  AbandonCurrent();
  if (upgrading_) {
    // The item stays as it was stored (statistics or CRC only).
    upgrading_ = false;
    skipping_ = true;
    Reject(item.name, absl::DataLossError(absl::StrCat("item '", item.name, "' keeps what was stored; its data could not be read: ", read_error)));
    return absl::OkStatus();
  }
  item.data_mode = DataMode::kStats;
  item.byte_length = 0;
  item.crc32.reset();
  item.offered_blob.clear();
  item.read_error = std::move(read_error);
  return Header(std::move(item));
}

absl::Status UploadSession::Chunk(uint64_t offset, absl::Span<const absl::string_view> pieces,
                                  std::optional<uint32_t> crc32, const TensorStats* stats) {
  if (!started_) return absl::FailedPreconditionError("the first message must be UploadStart");
  if (ended_) return absl::FailedPreconditionError("message after UploadEnd");
  if (!current_) {
    if (!skipping_) {
      Reject("", absl::FailedPreconditionError(absl::StrCat(
                     "a chunk at offset ", offset, " arrived without a header")));
      skipping_ = true;
    }
    return absl::OkStatus();
  }
  FinishWritten();  // acknowledged sooner
  const std::string name = current_->name;
  uint64_t size = 0;
  for (absl::string_view p : pieces) size += p.size();
  absl::Status bad;
  if (!blob_ && !inline_) {
    bad = absl::InvalidArgumentError(absl::StrCat("item '", name, "' announced no data, but a chunk arrived"));
  } else if (offset != received_) {
    bad = absl::InvalidArgumentError(absl::StrCat("chunk offset ", offset, " of '", name,
                                                  "', expected ", received_));
  } else if (size > core_->options().max_chunk_bytes) {
    bad = absl::ResourceExhaustedError(absl::StrCat("chunk of ", size, " bytes exceeds parityd --max-chunk-bytes=",
                                                    core_->options().max_chunk_bytes));
  } else if (size > current_->byte_length - received_) {
    bad = absl::InvalidArgumentError(absl::StrCat("chunk overruns '", name, "': ", received_ + size,
                                                  " bytes received, byte_length is ", current_->byte_length));
  }
  if (bad.ok() && crc32) {
    if (current_->crc32 && *current_->crc32 != *crc32) {
      bad = absl::DataLossError(absl::StrCat("chunk.crc32 of '", name, "' is ", absl::Hex(*crc32, absl::kZeroPad8),
                                             ", the header says ", absl::Hex(*current_->crc32, absl::kZeroPad8)));
    } else {
      current_->crc32 = crc32;  // verified with the item's last byte, as the header's is
      crc_from_chunk_ = true;
    }
  }
  if (bad.ok() && stats != nullptr) {
    if (current_->max || current_->min || current_->mean || current_->norm) {
      bad = absl::InvalidArgumentError(
          absl::StrCat("chunk.stats of '", name, "': its header has statistics already"));
    } else if (received_ + size != current_->byte_length) {
      bad = absl::InvalidArgumentError(absl::StrCat("chunk.stats of '", name, "' on a chunk that is not its last"));
    } else {
      current_->max = stats->max;
      current_->min = stats->min;
      current_->mean = stats->mean;
      current_->norm = stats->norm;
    }
  }
  if (bad.ok() && blob_ && in_memory_) {
    // The blob's writer takes the bytes from the held buffer: one copy from the slices.
    char* to = in_memory_->data() + received_;
    for (absl::string_view p : pieces) {
      std::memcpy(to, p.data(), p.size());
      crc_ = Crc32(crc_, to, p.size());  // while the piece is in cache
      to += p.size();
    }
    bad = blob_->Append(in_memory_->data() + received_, size);
  } else if (bad.ok()) {
    for (absl::string_view p : pieces) {
      if (blob_ && bad.ok()) bad = blob_->Append(p.data(), p.size());
      if (inline_) inline_buf_.append(p.data(), p.size());
      crc_ = Crc32(crc_, p.data(), p.size());
    }
  }
  if (!bad.ok()) {
    Reject(name, bad);
    AbandonCurrent();
    skipping_ = true;
    return absl::OkStatus();
  }
  received_ += size;
  if (received_ == current_->byte_length) return Complete();
  return absl::OkStatus();
}

absl::Status UploadSession::Complete() {
  ItemRecord item = std::move(*current_);
  current_.reset();
  if (blob_ || inline_) {
    if (item.crc32 && *item.crc32 != crc_) {
      Reject(item.name, absl::DataLossError(absl::StrCat(
                            "CRC-32 of '", item.name, "' is ", absl::Hex(crc_, absl::kZeroPad8),
                            crc_from_chunk_ ? ", its chunk says " : ", the header says ",
                            absl::Hex(*item.crc32, absl::kZeroPad8))));
      AbandonCurrent();
      return absl::OkStatus();
    }
    item.crc32 = crc_;
    if (inline_) {
      item.blob = Spool::KeyOf(inline_buf_);
      item.inline_data = std::make_shared<const std::string>(std::move(inline_buf_));
      inline_ = false;
      inline_buf_ = std::string();
    }
  }
  Received r{std::move(item), std::move(blob_), std::move(in_memory_), upgrading_};
  upgrading_ = false;
  if (r.blob && r.blob->direct()) {
    if (absl::Status s = r.blob->Seal(); !s.ok()) {
      Reject(r.item.name, s);
      return absl::OkStatus();
    }
    pending_.push_back(std::move(r));
    while (pending_.size() > kMaxPending) FinishOldestPending();
    FinishWritten();
    return absl::OkStatus();
  }
  Store(std::move(r));
  return absl::OkStatus();
}

void UploadSession::FinishOldestPending() {
  if (pending_.empty()) return;
  Received r = std::move(pending_.front());
  pending_.pop_front();
  Store(std::move(r));  // Commit waits for the writes still in flight
}

void UploadSession::FinishPending() {
  while (!pending_.empty()) FinishOldestPending();
}

void UploadSession::FinishWritten() {
  while (!pending_.empty() && pending_.front().blob->WritesDone()) FinishOldestPending();
}

void UploadSession::Store(Received r) {
  ItemRecord& item = r.item;
  const bool tensor = item.dtype.has_value();
  const uint64_t data_bytes = r.blob ? item.byte_length : (item.inline_data ? item.inline_data->size() : 0);
  if (r.blob) {
    absl::StatusOr<std::string> key = r.blob->Commit();
    r.blob.reset();
    if (!key.ok()) {
      Reject(item.name, key.status());
      return;
    }
    item.blob = *key;
    // In the shared tier before the item's row can commit.
    if (SharedBlobs* shared = core_->shared_blobs(); shared != nullptr) {
      if (absl::Status s = shared->Publish(item.blob, item.byte_length); !s.ok()) {
        Reject(item.name, s);
        return;
      }
    }
    if (r.in_memory) core_->held_blobs().Hold(item.blob, std::move(r.in_memory));
  }
  const bool upgrade = r.upgrade;
  held_[item.name] = {item.index, item.blob.empty() && item.dtype ? item.data_mode : DataMode::kData};
  indexes_.insert(item.index);
  if (!upgrade) ++item_count_;
  const std::string name = item.name;
  const int64_t index = item.index;
  std::weak_ptr<Shared> weak = shared_;
  Metrics* metrics = core_->options().metrics;
  core_->AddItem(project_, std::move(item), [weak, name, index, metrics, tensor, data_bytes](const absl::Status& s) {
    if (s.ok() && metrics) metrics->ItemReceived(tensor, data_bytes);
    std::shared_ptr<Shared> sh = weak.lock();
    if (!sh) return;
    UploadEvent e(s.ok() ? UploadEvent::Kind::kAck : UploadEvent::Kind::kRejected);
    e.name = name;
    e.index = index;
    e.status = s;
    if (s.ok()) {
      sh->received++;
    } else {
      sh->rejected++;
    }
    sh->emit(std::move(e));
  }, upgrade);
}

absl::Status UploadSession::Flush() {
  if (!started_) return absl::FailedPreconditionError("the first message must be UploadStart");
  if (ended_) return absl::FailedPreconditionError("message after UploadEnd");
  RejectUnfinished("Flush arrived");
  FinishPending();
  PARITY_ASSIGN_OR_RETURN(std::vector<std::string> names, core_->FullDataWanted(run_id_));
  UploadEvent e(UploadEvent::Kind::kFlushDone);
  e.full_data_names = std::move(names);
  shared_->emit(std::move(e));
  return absl::OkStatus();
}

absl::Status UploadSession::RunFile(const std::string& name, uint64_t offset, const std::string& data, bool last) {
  if (!started_) return absl::FailedPreconditionError("the first message must be UploadStart");
  if (ended_) return absl::FailedPreconditionError("message after UploadEnd");
  RejectUnfinished("a run file arrived");
  FinishPending();
  if (name != kStackJson && name != kConstructJson) {
    if (offset == 0) {
      Reject(name, absl::InvalidArgumentError(absl::StrCat("run file '", name,
                                                           "' is not one a run carries (stack.json, construct.json)")));
    }
    return absl::OkStatus();
  }
  RunFileBuffer& f = run_files_[name];
  auto refuse = [&](absl::Status why) {
    f.failed = true;
    core_->ReleaseRunFileBytes(f.data.size());
    f.data = std::string();
    Reject(name, std::move(why));
  };
  const uint64_t limit = core_->options().max_run_file_bytes;
  if (f.failed) {
    // Dropped: already refused.
  } else if (offset != f.data.size()) {
    refuse(absl::InvalidArgumentError(absl::StrCat("run file '", name, "': part at offset ", offset,
                                                   ", expected offset ", f.data.size())));
  } else if (data.size() > limit - f.data.size()) {
    refuse(absl::ResourceExhaustedError(absl::StrCat("run file '", name, "' is larger than --max-run-file-bytes (",
                                                     limit, ")")));
  } else if (!core_->ReserveRunFileBytes(data.size())) {
    refuse(absl::ResourceExhaustedError(absl::StrCat(
        "run file '", name, "': the run files being received by all uploads would exceed --max-run-file-memory-bytes (",
        core_->options().max_run_file_memory_bytes, "); send it again later")));
  } else {
    f.data.append(data);
  }
  if (!last) return absl::OkStatus();
  RunFileBuffer done = std::move(f);
  run_files_.erase(name);
  core_->ReleaseRunFileBytes(done.data.size());
  if (done.failed) return absl::OkStatus();
  DumpStructure parsed;
  absl::Status valid = name == kStackJson ? ParseStackJson(done.data, &parsed) : ParseConstructJson(done.data, &parsed);
  if (!valid.ok()) {
    Reject(name, std::move(valid));
    return absl::OkStatus();
  }
  // construct.json as it came; stack.json as its index (what result pages read).
  absl::Status stored = core_->store().WriteSync(name == kStackJson ? Store::PutRunStacks(run_id_, parsed)
                                                                    : Store::PutRunFile(run_id_, name, std::move(done.data)));
  if (!stored.ok()) Reject(name, std::move(stored));
  return absl::OkStatus();
}

absl::Status UploadSession::End() {
  if (!started_) return absl::FailedPreconditionError("the first message must be UploadStart");
  if (ended_) return absl::FailedPreconditionError("UploadEnd sent twice");
  ended_ = true;
  RejectUnfinished("UploadEnd arrived");
  FinishPending();
  if (!attached_complete_) PARITY_RETURN_IF_ERROR(core_->CompleteRun(run_id_));
  LogLine(LogLevel::kInfo, "ingest", "upload complete",
          absl::StrCat("run=", run_id_, " items=", item_count_, " rejected=", shared_->rejected.load()));
  shared_->ended = true;
  MaybeSummarize(shared_, core_);
  return absl::OkStatus();
}

void UploadSession::MaybeSummarize(const std::shared_ptr<Shared>& sh, Core* core) {
  if (!sh->ended) return;
  std::optional<JobRecord> job;
  if (!sh->job_id.empty()) {
    absl::StatusOr<JobRecord> j = core->GetJob(sh->job_id);
    if (j.ok()) job = *j;
    absl::StatusOr<RunRecord> golden = core->store().GetRun(sh->golden_run_id);
    const bool golden_complete = golden.ok() && golden->complete;
    // Wait for the job when it can finish, or when asked to (the golden side is arriving on
    // another stream); else report progress so far when the golden side is still uploading.
    if (job && !IsFinal(job->state) && (golden_complete || sh->summary_waits_for_job)) return;
  }
  if (sh->summary_sent.exchange(true)) return;
  UploadEvent e(UploadEvent::Kind::kSummary);
  e.job = job;
  e.items_received = sh->received;
  e.items_rejected = sh->rejected;
  sh->emit(std::move(e));
}

}  // namespace parity
