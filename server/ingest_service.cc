#include "server/ingest_service.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/logging.h"
#include "common/base/thread_name.h"
#include "server/admin_service.h"
#include "server/convert.h"
#include "server/core/upload_session.h"

namespace parity {
namespace {

// Raises `*high` to `now` when it is lower.
void RaiseTo(std::atomic<uint64_t>* high, uint64_t now) {
  uint64_t h = high->load();
  while (now > h && !high->compare_exchange_weak(h, now)) {
  }
}

}  // namespace

// Lifetime: the reactor deletes itself in OnDone. Everything that worker tasks or core
// listeners touch lives in State, shared by pointer; State::reactor is cleared in OnDone, and
// every call into the reactor goes through State under its mutex.
class UploadReactor : public grpc::ServerBidiReactor<IncomingUpload, v1::UploadResponse> {
 public:
  // `caller`: who opened the stream (an error ends it at once).
  UploadReactor(IngestService* service, grpc::CallbackServerContext* context,
                const absl::StatusOr<Principal>& caller)
      : service_(service), state_(std::make_shared<State>()) {
    state_->reactor = this;
    state_->context = context;
    state_->service = service;
    state_->max_out = service->options_.max_outgoing_messages;
    std::weak_ptr<State> weak = state_;
    state_->session = std::make_shared<UploadSession>(service->core_, [weak](UploadEvent e) {
      if (std::shared_ptr<State> st = weak.lock()) Emit(st, std::move(e));
    });
    absl::Status allowed = caller.status();
    if (allowed.ok() && static_cast<int>(caller->role) < static_cast<int>(AccessRole::kAgent)) {
      allowed = absl::PermissionDeniedError(absl::StrCat(
          "token ", caller->token_id, " is a ", RoleName(caller->role), " token; uploading needs agent"));
    }
    if (allowed.ok() && service->refusing_.load()) {
      allowed = absl::UnavailableError("parityd is shutting down; the upload can resume once it is back");
    }
    if (allowed.ok()) {
      state_->session->set_allowed_project(caller->project);
      absl::StatusOr<std::unique_ptr<Shares::Lease>> lease =
          service->streams_.Acquire(caller->token_id, caller->project);
      if (!lease.ok()) allowed = lease.status();
      absl::MutexLock l(&state_->mu);
      if (lease.ok()) state_->lease = std::move(*lease);
    }
    if (!allowed.ok()) {
      absl::MutexLock l(&state_->mu);
      FinishLocked(*state_, ToGrpcStatus(allowed));
      return;
    }
    // An admin token's (or, without tokens, anyone's) upload counts against its project from
    // UploadStart, before the run is created.
    state_->session->set_admit([weak](const std::string& project) {
      std::shared_ptr<State> st = weak.lock();
      if (!st) return absl::CancelledError("the upload stream has ended");
      absl::MutexLock l(&st->mu);
      return st->lease ? st->lease->SetProject(project) : absl::OkStatus();
    });
    {
      absl::MutexLock l(&state_->mu);
      state_->opened_ms = state_->last_input_ms = NowMs();
    }
    const int64_t idle_ms = service_->options_.upload_idle_timeout_seconds * 1000;
    const int64_t start_ms = service_->options_.upload_start_timeout_seconds * 1000;
    if (idle_ms > 0 || start_ms > 0) {
      idle_check_ = service_->AddIdleCheck([weak, idle_ms, start_ms](int64_t now_ms) {
        if (std::shared_ptr<State> st = weak.lock()) CheckIdle(st, now_ms, idle_ms, start_ms);
      });
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The agent closed its side (or the call was cancelled). An upload without UploadEnd
      // leaves the run incomplete, to be resumed with attach_run_id.
      absl::MutexLock l(&state_->mu);
      state_->input_done = true;
      if (state_->draining) return;  // Drain ends the stream once the inbox is handled
      EndOfInputLocked(*state_);
      return;
    }
    // Messages queue per stream (at most kInboxMessages and max_stream_buffer_bytes) and are
    // handled in order by one worker task at a time, while the next message is already read.
    if (!service_->options_.keep_received_slices) request_.CopyData();
    const uint64_t bytes = request_.wire_bytes();
    service_->Hold(bytes);
    std::shared_ptr<std::atomic<uint64_t>> counter = service_->buffered_;
    std::shared_ptr<const IncomingUpload> in(new IncomingUpload(std::move(request_)),
                                             [counter, bytes](const IncomingUpload* m) {
                                               *counter -= bytes;
                                               delete m;
                                             });
    const v1::UploadRequest* msg = &in->request();
    const bool is_end = msg->has_end();
    absl::ReleasableMutexLock l(&state_->mu);
    if (state_->finished) {
      l.Release();
      in.reset();
      service_->WakeWaiters();  // its bytes were counted for a moment
      return;
    }
    state_->inbox_bytes += bytes;
    if (msg->has_flush()) {
      ++state_->flushes_pending;  // not progress: it leaves the idle clock alone
    } else {
      state_->last_input_ms = NowMs();
    }
    if (msg->has_start()) {
      state_->start_read = true;
      state_->resumed = !msg->start().attach_run_id().empty();
    }
    state_->inbox.push_back({std::move(in), bytes});
    if (is_end) state_->end_read = true;
    if (!state_->draining) {
      std::shared_ptr<State> st = state_;
      if (!service_->pool_->TrySubmit([st] { Drain(st); })) {
        FinishLocked(*state_, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                           "the ingest queue is full; retry later"));
        return;
      }
      state_->draining = true;
    }
    if (state_->end_read) return;  // the summary ends the stream
    if (RoomLocked(*state_)) {
      StartRead(&request_);
    } else {
      PauseLocked(state_);
    }
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock l(&state_->mu);
    state_->writing = false;
    const bool ack = !state_->out.empty() && state_->out.front().has_ack();
    if (!state_->out.empty()) state_->out.pop_front();
    if (!ok) {
      state_->out.clear();
      FinishLocked(*state_, grpc::Status(grpc::StatusCode::CANCELLED, "the agent went away"));
      return;
    }
    const auto& end_for_test = service_->options_.end_after_ack_for_test;
    const IngestOptions::TestStreamEnd end = ack && end_for_test
                                                 ? end_for_test(++state_->acks_written, state_->resumed)
                                                 : IngestOptions::TestStreamEnd::kNone;
    if (end != IngestOptions::TestStreamEnd::kNone) {
      DropPendingLocked(*state_);
      FinishLocked(*state_,
                   grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "ended after an acknowledgement (test)"),
                   /*chosen_by_parityd=*/end == IngestOptions::TestStreamEnd::kByParityd);
      return;
    }
    WriteNextLocked(*state_);
  }

  void OnCancel() override {
    absl::MutexLock l(&state_->mu);
    DropPendingLocked(*state_);
    if (!state_->writing) FinishLocked(*state_, grpc::Status::CANCELLED);
    else state_->finish_when_drained = true;
  }

  void OnDone() override {
    if (idle_check_ >= 0) service_->RemoveIdleCheck(idle_check_);
    std::unique_ptr<Shares::Lease> lease;
    {
      absl::MutexLock l(&state_->mu);
      state_->reactor = nullptr;
      lease = std::move(state_->lease);
    }
    lease.reset();  // the slot is free once the stream is
    delete this;
  }

 private:
  // Large messages are bounded by max_stream_buffer_bytes first (4 of 1 MiB at the defaults);
  // the count lets small items' messages come in bursts without pausing the read per message.
  static constexpr size_t kInboxMessages = 64;
  static constexpr int kMessagesPerTurn = 16;  // per Drain task (see Drain)
  // Responses up to this size are written with gRPC's buffer hint when more are queued.
  static constexpr size_t kBufferedResponseBytes = 16 << 10;

  struct State {
    absl::Mutex mu;
    struct Received {
      std::shared_ptr<const IncomingUpload> msg;
      uint64_t bytes;  // its serialized size, as counted in inbox_bytes and the service's total
    };
    std::deque<Received> inbox ABSL_GUARDED_BY(mu);
    uint64_t inbox_bytes ABSL_GUARDED_BY(mu) = 0;
    IngestService* service = nullptr;
    grpc::CallbackServerContext* context = nullptr;
    bool draining ABSL_GUARDED_BY(mu) = false;     // a Drain task is queued or running
    bool read_paused ABSL_GUARDED_BY(mu) = false;  // no read in flight: the inbox was full
    bool global_waiter ABSL_GUARDED_BY(mu) = false;  // a waiter will resume the read (global limit)
    bool end_read ABSL_GUARDED_BY(mu) = false;     // UploadEnd arrived; no more reads
    UploadReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
    std::deque<v1::UploadResponse> out ABSL_GUARDED_BY(mu);
    bool writing ABSL_GUARDED_BY(mu) = false;
    bool finished ABSL_GUARDED_BY(mu) = false;
    bool finish_when_drained ABSL_GUARDED_BY(mu) = false;
    bool input_done ABSL_GUARDED_BY(mu) = false;
    int64_t opened_ms ABSL_GUARDED_BY(mu) = 0;
    int64_t last_input_ms ABSL_GUARDED_BY(mu) = 0;  // when the last progress arrived (not a Flush)
    bool start_read ABSL_GUARDED_BY(mu) = false;   // UploadStart arrived
    std::unique_ptr<Shares::Lease> lease ABSL_GUARDED_BY(mu);  // released in OnDone
    int flushes_pending ABSL_GUARDED_BY(mu) = 0;    // Flush read, FlushDone not yet sent
    int64_t acks_written ABSL_GUARDED_BY(mu) = 0;  // for IngestOptions::end_after_ack_for_test
    bool resumed ABSL_GUARDED_BY(mu) = false;      // UploadStart attached to a run
    grpc::Status final_status ABSL_GUARDED_BY(mu);
    size_t max_out = 0;
    std::shared_ptr<UploadSession> session;  // used by one worker task at a time
  };

  static void FinishLocked(State& st, grpc::Status status, bool chosen_by_parityd = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
    if (st.finished || st.reactor == nullptr) return;
    if (st.writing) {  // finish once the write in flight completes
      st.final_status = std::move(status);
      st.finish_when_drained = true;
      DropPendingLocked(st);
      return;
    }
    st.finished = true;
    LogEnd(status);
    // Tells the agent that parityd chose this status, unlike gRPC's own ends of a stream (its
    // memory quota's RST_STREAM also reads RESOURCE_EXHAUSTED), which the agent resumes after.
    if (chosen_by_parityd) st.context->AddTrailingMetadata(kUploadEndedByParitydKey, "1");
    st.reactor->Finish(status);
  }

  // Streams ending with an error the agent did not cause by going away are logged.
  static void LogEnd(const grpc::Status& status) {
    if (status.ok() || status.error_code() == grpc::StatusCode::CANCELLED) return;
    LogLine(LogLevel::kWarning, "ingest", "upload ended with an error",
            absl::StrCat("code=", static_cast<int>(status.error_code()), " error=",
                         LogQuote(status.error_message())));
  }

  // Drops queued responses, except the one being written (gRPC still reads it).
  static void DropPendingLocked(State& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
    st.out.resize(st.writing ? std::min<size_t>(st.out.size(), 1) : 0);
  }

  // The agent closed its side and every message it sent was handled.
  static void EndOfInputLocked(State& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
    if (st.out.empty() && !st.writing) FinishLocked(st, st.final_status);
    else st.finish_when_drained = true;
  }

  static void WriteNextLocked(State& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
    if (st.finished || st.reactor == nullptr || st.writing) return;
    if (!st.out.empty()) {
      st.writing = true;
      // A small response with more queued behind it goes out with them (one flush, not one
      // each); the last one queued is flushed. gRPC completes a small buffered write at once.
      const bool more = st.out.size() > 1 && st.out.front().ByteSizeLong() <= kBufferedResponseBytes;
      st.reactor->StartWrite(&st.out.front(),
                             more ? grpc::WriteOptions().set_buffer_hint() : grpc::WriteOptions());
      return;
    }
    if (st.finish_when_drained) FinishLocked(st, st.final_status);
  }

  static int64_t NowMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // Ends the stream when the server has been waiting for the agent's progress for `idle_ms`
  // (a read is in flight, nothing is queued or being handled, no UploadEnd), or for its
  // UploadStart for `start_ms` since the stream opened (0: no limit). A Flush being answered
  // does not end it, nor does it count as progress.
  static void CheckIdle(const std::shared_ptr<State>& st, int64_t now_ms, int64_t idle_ms, int64_t start_ms) {
    absl::MutexLock l(&st->mu);
    if (st->finished || st->reactor == nullptr || st->end_read || st->input_done) return;
    if (st->read_paused || st->draining || !st->inbox.empty()) {
      st->last_input_ms = std::max(st->last_input_ms, now_ms - 1);  // the server is the one busy
      return;
    }
    if (st->flushes_pending > 0) return;
    if (!st->start_read && start_ms > 0 && now_ms - st->opened_ms >= start_ms) {
      FinishLocked(*st, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                     absl::StrCat("no UploadStart ", start_ms / 1000,
                                                  " s after the stream opened (parityd --upload-start-timeout-seconds=",
                                                  start_ms / 1000, ")")));
      return;
    }
    if (idle_ms <= 0 || now_ms - st->last_input_ms < idle_ms) return;
    FinishLocked(*st, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                   absl::StrCat("no upload progress for ", idle_ms / 1000,
                                                " s (parityd --upload-idle-timeout-seconds=", idle_ms / 1000,
                                                "; a Flush is not progress); the run stays incomplete and can be resumed")));
  }

  static void Emit(const std::shared_ptr<State>& st, UploadEvent e) {
    absl::MutexLock l(&st->mu);
    if (e.kind == UploadEvent::Kind::kFlushDone && st->flushes_pending > 0) --st->flushes_pending;
    if (st->finished || st->reactor == nullptr || (st->finish_when_drained && !st->final_status.ok())) return;
    v1::UploadResponse resp;
    ToProto(e, &resp);
    st->out.push_back(std::move(resp));
    if (e.kind == UploadEvent::Kind::kSummary) st->finish_when_drained = true;
    if (st->out.size() > st->max_out) {
      DropPendingLocked(*st);
      FinishLocked(*st, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                     "the agent is not reading responses (max_outgoing_messages)"));
      return;
    }
    WriteNextLocked(*st);
  }

  // Runs on an ingest worker: handles the inbox in order until it is empty, resuming a paused
  // read once there is room. Before it goes idle, the session's pending blobs are finished, the
  // oldest first, a message arriving meanwhile going first (see UploadSession::FinishPending):
  // received items never wait for the next message. After kMessagesPerTurn messages it queues
  // itself behind the other streams' turns, so that a busy stream does not hold a worker.
  static void Drain(const std::shared_ptr<State>& st) {
    for (int handled = 0;; ++handled) {
      if (handled == kMessagesPerTurn && st->service->pool_->TrySubmit([st] { Drain(st); })) return;
      std::shared_ptr<const IncomingUpload> msg;
      {
        absl::ReleasableMutexLock l(&st->mu);
        const bool idle = st->finished || st->reactor == nullptr || st->inbox.empty();
        if (idle && st->session->has_pending()) {
          l.Release();
          st->session->FinishOldestPending();  // its events take st->mu
          continue;
        }
        if (idle) {
          const bool dropped = !st->inbox.empty();
          st->inbox.clear();
          st->inbox_bytes = 0;
          st->draining = false;
          if (st->input_done) EndOfInputLocked(*st);
          ResumeOrWaitLocked(st);  // a read paused by the global limit needs a waiter now
          l.Release();
          if (dropped) st->service->WakeWaiters();
          return;
        }
        msg = std::move(st->inbox.front().msg);
        st->inbox_bytes -= st->inbox.front().bytes;
        st->inbox.pop_front();
      }
      Handle(st, *msg);
      msg.reset();  // its bytes leave the global count
      st->service->WakeWaiters();
      absl::MutexLock l(&st->mu);
      ResumeOrWaitLocked(st);
    }
  }

  // Whether this stream's inbox may take another message: fewer than kInboxMessages entries
  // and under max_stream_buffer_bytes.
  static bool OwnRoomLocked(State& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
    return st.inbox.size() < kInboxMessages &&
           st.inbox_bytes < st.service->options_.max_stream_buffer_bytes;
  }

  // Whether another message may be read: the stream's own room, and all streams together are
  // under max_buffered_bytes.
  static bool RoomLocked(State& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
    return OwnRoomLocked(st) && st.service->GlobalRoom();
  }

  // Stops reading until ResumeOrWaitLocked finds room.
  static void PauseLocked(const std::shared_ptr<State>& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(st->mu) {
    st->read_paused = true;
    ResumeOrWaitLocked(st);
  }

  // For a paused read: resumes it when there is room. Otherwise someone must call this again
  // once there may be: the stream's own Drain when its inbox is what is full (it calls this
  // after every message it handles and when it goes idle), a waiter woken by another stream's
  // handling when only the global limit is in the way (registered here, once per stream).
  static void ResumeOrWaitLocked(const std::shared_ptr<State>& st)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(st->mu) {
    if (!st->read_paused || st->finished || st->reactor == nullptr || st->end_read) return;
    if (RoomLocked(*st)) {
      st->read_paused = false;
      st->reactor->StartRead(&st->reactor->request_);
      return;
    }
    if (!OwnRoomLocked(*st) || st->global_waiter) return;
    st->global_waiter = true;
    std::weak_ptr<State> weak = st;
    st->service->AddWaiter([weak]() -> bool {
      std::shared_ptr<State> s = weak.lock();
      if (!s) return true;
      absl::MutexLock l(&s->mu);
      if (s->read_paused && !s->finished && s->reactor != nullptr && !s->end_read &&
          OwnRoomLocked(*s) && !s->service->GlobalRoom()) {
        return false;  // still only the global limit: stays registered
      }
      s->global_waiter = false;
      ResumeOrWaitLocked(s);  // resumes, or leaves it to Drain, or registers again
      return true;
    });
    // Room may have appeared between the check and the registration, and its WakeWaiters may
    // have run before it: resume now (the waiter, when it runs, finds the read going).
    if (RoomLocked(*st)) {
      st->read_paused = false;
      st->reactor->StartRead(&st->reactor->request_);
    }
  }

  static void Handle(const std::shared_ptr<State>& st, const IncomingUpload& msg) {
    const absl::Status status = ApplyUploadRequest(*st->session, msg.request(), msg.data());
    if (status.ok()) return;
    absl::MutexLock l(&st->mu);
    if (st->finished || st->reactor == nullptr) return;
    FinishLocked(*st, ToGrpcStatus(status));
  }

  IngestService* const service_;
  int64_t idle_check_ = -1;
  std::shared_ptr<State> state_;
  IncomingUpload request_;
};

IngestService::IngestService(Core* core, WorkerPool* pool, IngestOptions options, const TokenAuth* auth)
    : core_(core),
      pool_(pool),
      options_(options),
      auth_(auth),
      streams_({options.max_streams, options.max_streams_per_project, options.max_streams_per_token,
                "max-streams", "max-streams-per-project", "max-streams-per-token", "concurrent uploads"}) {
  if (options_.upload_idle_timeout_seconds > 0 || options_.upload_start_timeout_seconds > 0) {
    reaper_ = std::thread([this] { ReapLoop(); });
  }
  // Method 0 is Upload, the first rpc of service Ingest in parity.proto (the generated code
  // numbers them in order; IngestServiceTest checks it).
  MarkMethodCallback(kUploadMethodIndex,
                     new grpc::internal::CallbackBidiHandler<IncomingUpload, v1::UploadResponse>(
                         [this](grpc::CallbackServerContext* context) { return UploadWithSlices(context); }));
}

IngestService::~IngestService() {
  {
    absl::MutexLock l(&idle_mu_);
    stopping_ = true;
  }
  if (reaper_.joinable()) reaper_.join();
}

int64_t IngestService::AddIdleCheck(IdleCheck check) {
  absl::MutexLock l(&idle_mu_);
  const int64_t id = next_idle_id_++;
  idle_checks_[id] = std::move(check);
  return id;
}

void IngestService::RemoveIdleCheck(int64_t id) {
  absl::MutexLock l(&idle_mu_);
  idle_checks_.erase(id);
}

void IngestService::Hold(uint64_t bytes) { RaiseTo(&buffered_high_, *buffered_ += bytes); }

void IngestService::AppendGauges(std::vector<Gauge>* out) const {
  out->push_back({"upload_streams", static_cast<uint64_t>(std::max(streams_.held(), 0)),
                  static_cast<uint64_t>(streams_.high_water()), static_cast<uint64_t>(options_.max_streams),
                  false, false, "max-streams"});
  out->push_back({"upload_buffered_bytes", buffered_->load(), buffered_high_.load(),
                  options_.max_buffered_bytes, false, true, "max-buffered-bytes"});
}

void IngestService::AddWaiter(std::function<bool()> resume) {
  absl::MutexLock l(&waiters_mu_);
  waiters_.push_back(std::move(resume));
}

void IngestService::WakeWaiters() {
  // A waiter put back while the buffer is full is woken when a message buffered now is
  // destroyed (in Drain, or in OnReadDone for a stream already finished; both call this
  // afterwards); one put back after room reappeared is retried here.
  while (GlobalRoom()) {
    std::vector<std::function<bool()>> waiting;
    {
      absl::MutexLock l(&waiters_mu_);
      if (waiters_.empty()) return;
      waiting.swap(waiters_);
    }
    std::vector<std::function<bool()>> still;
    for (auto& w : waiting) {
      if (!w()) still.push_back(std::move(w));
    }
    if (still.empty()) return;
    absl::MutexLock l(&waiters_mu_);
    for (auto& w : still) waiters_.push_back(std::move(w));
  }
}

void IngestService::ReapLoop() {
  NameCurrentThread("idle-reaper");
  int64_t shortest = options_.upload_idle_timeout_seconds;
  if (options_.upload_start_timeout_seconds > 0 && (shortest <= 0 || options_.upload_start_timeout_seconds < shortest)) {
    shortest = options_.upload_start_timeout_seconds;
  }
  const absl::Duration period = absl::Milliseconds(std::min<int64_t>(1000, shortest * 250));
  absl::MutexLock l(&idle_mu_);
  while (!idle_mu_.AwaitWithTimeout(absl::Condition(&stopping_), period)) {
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    for (auto& [id, check] : idle_checks_) check(now);
  }
}

int IngestService::FinishUploads(std::chrono::system_clock::time_point deadline) {
  refusing_ = true;
  while (streams_.held() > 0 && std::chrono::system_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return streams_.held();
}

grpc::ServerBidiReactor<IncomingUpload, v1::UploadResponse>* IngestService::UploadWithSlices(
    grpc::CallbackServerContext* context) {
  return new UploadReactor(this, context, CallerOf(*context, auth_));
}

grpc::ServerUnaryReactor* IngestService::HaveBlobs(grpc::CallbackServerContext* context,
                                                   const v1::HaveBlobsRequest* request,
                                                   v1::HaveBlobsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Principal> caller = CallerOf(*context, auth_);
  if (caller.ok() && static_cast<int>(caller->role) < static_cast<int>(AccessRole::kAgent)) {
    caller = absl::PermissionDeniedError(absl::StrCat("token ", caller->token_id, " is a ",
                                                      RoleName(caller->role), " token; HaveBlobs needs agent"));
  }
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  if (request->project().empty()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "HaveBlobs: project is empty (the uploading run's project)"));
    return reactor;
  }
  if (absl::Status allowed = Require(*caller, AccessRole::kAgent, request->project()); !allowed.ok()) {
    reactor->Finish(ToGrpcStatus(allowed));
    return reactor;
  }
  constexpr int kMaxHashes = 4096;
  if (request->sha256_size() + request->probes_size() > kMaxHashes) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 absl::StrCat("HaveBlobs: ", request->sha256_size(), " hashes and ",
                                              request->probes_size(), " probes, the limit is ",
                                              kMaxHashes, " in all")));
    return reactor;
  }
  for (const std::string& h : request->sha256()) {
    if (!Spool::IsKey(h)) {
      reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                   absl::StrCat("HaveBlobs: '", h.substr(0, 80),
                                                "' is not a lowercase hex SHA-256")));
      return reactor;
    }
  }
  // Held: in the spool and referenced by an item of the project (never another project's).
  // A probe that matches blobs whose hash is not known yet has them hashed from disk on an
  // ingest worker after its answer, while the agent hashes its own copy; a hash offered
  // meanwhile is answered on a worker too, once those hashes are taken (Core::HeldBlobFor).
  // With the workers' queue full, the blobs are not hashed and the hash is answered without
  // waiting: a blob then found only by its hash is sent again.
  auto answer = [this, request, response, reactor](bool on_worker) {
    std::vector<std::string> to_hash;
    for (const std::string& h : request->sha256()) {
      absl::StatusOr<std::string> key = core_->HeldBlobFor(request->project(), h, on_worker);
      if (!key.ok()) {
        reactor->Finish(ToGrpcStatus(key.status()));
        return;
      }
      response->add_held(!key->empty());
    }
    grpc::Status status = grpc::Status::OK;
    for (const v1::ContentProbe& p : request->probes()) {
      absl::StatusOr<bool> maybe =
          core_->ProbeContent(request->project(), p.byte_length(), p.crc32(), &to_hash);
      if (!maybe.ok()) {
        status = ToGrpcStatus(maybe.status());
        break;
      }
      response->add_maybe_held(*maybe);
    }
    reactor->Finish(status);
    if (to_hash.empty()) return;
    Core* core = core_;  // the blobs were marked pending: hashed, or unmarked
    if (on_worker) {
      core->HashBlobs(to_hash);
    } else if (!pool_->TrySubmit([core, to_hash] { core->HashBlobs(to_hash); })) {
      core->AbandonHashes(to_hash);
    }
  };
  if (request->sha256_size() > 0 && core_->HashesPending() &&
      pool_->TrySubmit([answer] { answer(true); })) {
    return reactor;
  }
  answer(false);
  return reactor;
}

}  // namespace parity
