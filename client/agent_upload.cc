#include "client/agent_upload.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/agent_items.h"
#include "client/cli.h"
#include "client/file_pieces.h"
#include "client/proto_util.h"
#include "client/remote_common.h"
#include "client/report_format.h"
#include "client/upload_stream.h"
#include "common/formats/dump_structure.h"
#include "common/formats/torchair.h"
#include "common/base/control_chars.h"
#include "common/base/crc32.h"
#include "common/base/file_util.h"
#include "common/base/json.h"
#include "common/base/sha256.h"
#include "common/checks/compare_config.h"
#include "common/checks/msprobe_policy.h"
#include "parity/v1/parity.grpc.pb.h"
#include "proto/enums.h"

namespace parity::agent {
namespace {

// A new run's id, drawn here so that a retried start finds the run its first attempt created
// (UploadStart.new_run_id): "run-" and 16 lowercase hex digits.
std::string NewRunId() {
  std::random_device rd;
  const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return absl::StrFormat("run-%016x", v);
}

// How long a stream's end waits for its writer before cancelling the call (see UploadAttempt::Run).
constexpr absl::Duration kWriterGrace = absl::Seconds(2);

grpc::WriteOptions BufferHint(bool hint) {
  return hint ? grpc::WriteOptions().set_buffer_hint() : grpc::WriteOptions();
}

v1::UploadRequest EndRequest() {
  v1::UploadRequest end;
  end.mutable_end();
  return end;
}

v1::UploadRequest ReadErrorChunk(absl::string_view message) {
  v1::UploadRequest abort;
  abort.mutable_chunk()->set_read_error(Utf8Prefix(message, kMaxReadErrorBytes));
  return abort;
}

}  // namespace

void RateLimiter::Take(uint64_t n) {
  if (rate_ == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (start_ == std::chrono::steady_clock::time_point()) start_ = now;
  sent_ += n;
  const auto due = start_ + std::chrono::microseconds(sent_ * 1000000 / rate_);
  if (due > now) std::this_thread::sleep_until(due);
}

// One connection of an upload: the start (a new run, or attach to the run of the previous
// attempt), the items the server does not hold yet, then (auto) Flush and the wanted data, then
// End; meanwhile the server's acknowledgements, verdicts and summary are read.
class UploadAttempt {
 public:
  explicit UploadAttempt(Upload* u);
  UploadAttempt(const UploadAttempt&) = delete;
  UploadAttempt& operator=(const UploadAttempt&) = delete;

  // OK when the server acknowledged the run's end with its summary.
  grpc::Status Run();
  // Whether parityd ended the stream itself (its trailer), as opposed to its gRPC memory quota.
  bool EndedByParityd() const { return ctx_.GetServerTrailingMetadata().count("parityd-ended") != 0; }

 private:
  // Attaches the canceller to this attempt's call while it lasts.
  struct Attached {
    Attached(UploadCanceller* c, grpc::ClientContext* ctx) : c(c) {
      if (c != nullptr) c->Attach(ctx);
    }
    ~Attached() {
      if (c != nullptr) c->Attach(nullptr);
    }
    UploadCanceller* c;
  };

  // The dedup offer for an item about to go in `mode`: its content hash and whether the server
  // holds it (tensors of kDedupMinBytes or more sent with data). Safe on any thread.
  void Offer(v1::DataMode mode, Loaded* l);
  // Reads a tensor's file once more for its CRC-32 (and `sha256`); on failure the item goes
  // with the failure, and false.
  bool ScanForOffer(Loaded* l, std::string* sha256) const;
  // One HaveBlobs call for this project; false when it failed (no offer: the data goes).
  bool AskHaveBlobs(v1::HaveBlobsRequest* q, v1::HaveBlobsResponse* a);
  // `n` more bytes of tensor data were handed to gRPC.
  void SentData(uint64_t n);
  // An item to be sent in `mode`: a large tensor is read from its file a piece at a time
  // (Loaded::pieces, filled by the caller) or summarised from it, the rest loaded whole.
  Loaded LoadNow(const DumpItem& it, v1::DataMode mode) const;
  // What goes before the header: the dedup offer, and the CRC-32 and statistics of a tensor
  // loaded whole.
  void Prepare(const DumpItem& it, v1::DataMode mode, Loaded* l);
  // Sends one item from its file (Loaded::range): in DATA mode its pieces as they are read,
  // else its header; false when the stream is gone. If reading fails part way, the item is
  // ended with the failure (TensorChunk.read_error): the server stores it without data, as an
  // ERROR.
  bool SendRange(const DumpItem& it, int64_t index, v1::DataMode mode, Loaded loaded);
  // The pieces of SendRange's item, each checked against the CRC-32 of the offer's read.
  bool SendPieces(Loaded* loaded);
  // Sends one item in `mode` (its data loaded already when `tensor` is set, or to be read from
  // its file when `range` is); false when the stream is gone. With `next_ready` (the next item
  // is loaded and this thread will not wait before sending it), a tensor loaded whole goes with
  // the buffer hint: gRPC sends it with what follows, one flush for several small items.
  bool SendLoaded(const DumpItem& it, int64_t index, v1::DataMode mode, Loaded loaded, bool next_ready);
  // The chunks of a tensor loaded whole; the last with the buffer hint when `hint_last`.
  bool SendChunks(const Tensor& tensor, bool hint_last);
  // Sends what LoadNow gave without read-ahead (--read-ahead 0, --follow, and auto's second
  // pass): on this thread, a large tensor's pieces read by a helper thread while they are sent.
  bool SendNow(const DumpItem& it, int64_t index, v1::DataMode mode, Loaded l);
  bool SendItem(size_t i, v1::DataMode mode);

  // The writer thread: the items, then End.
  void Write();
  // --follow: polls the directory; an item goes once its data file is complete. False when the
  // stream is gone.
  bool WriteFollowed();
  // The dump's items the server does not hold, read ahead unless --read-ahead 0.
  bool WriteDump();
  // --mode auto's second pass: Flush, then the data the server asked for.
  bool WriteWanted();
  // An msprobe dump's stack.json and construct.json (a TorchAir GE dump: the stack.json of its
  // GE ops' lines), in parts of at most chunk_ bytes.
  bool WriteRunFiles();
  // Reads the server's messages until the stream ends.
  void Read();

  // Constant after construction.
  Upload& u_;
  const UploadOptions& o_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::Ingest::Stub> stub_;
  grpc::ClientContext ctx_;
  const Attached attached_;
  const std::unique_ptr<UploadStream> stream_;
  // Set once the server accepted the start, before the writer starts.
  std::set<std::string> held_;
  uint64_t chunk_ = 1u << 20;

  // Set once the server's side of the stream has ended: a writer following a directory stops.
  std::atomic<bool> read_ended_{false};
  absl::Mutex flush_mu_;
  std::optional<std::vector<std::string>> flush_names_ ABSL_GUARDED_BY(flush_mu_);
};

UploadAttempt::UploadAttempt(Upload* u)
    : u_(*u),
      o_(u->o_),
      channel_(MakeChannel(o_.server)),
      stub_(v1::Ingest::NewStub(channel_)),
      attached_(u->hooks_.canceller, &ctx_),
      stream_(OpenUploadStream(channel_, &ctx_)) {}

grpc::Status UploadAttempt::Run() {
  v1::UploadRequest req;
  *req.mutable_start() = u_.NextStart();
  v1::UploadResponse resp;
  if (!stream_->Write(req) || !stream_->Read(&resp) || !resp.has_accepted()) {
    const grpc::Status st = stream_->Finish();
    return st.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "no UploadAccepted") : st;
  }
  u_.Accepted(resp.accepted());
  held_ = std::set<std::string>(resp.accepted().held_item_names().begin(),
                                resp.accepted().held_item_names().end());
  if (resp.accepted().max_chunk_bytes()) chunk_ = resp.accepted().max_chunk_bytes();
  absl::Notification writer_done;
  std::thread writer([this, &writer_done] {
    Write();
    writer_done.Notify();
  });
  Read();
  read_ended_ = true;
  {
    // A stream that ended before FlushDone must not leave the writer waiting.
    absl::MutexLock l(&flush_mu_);
    if (!flush_names_) flush_names_ = std::vector<std::string>();
  }
  // The writer sees the ended stream at its next write (or, following a directory, at its next
  // look). Cancelling the call would replace the server's status with CANCELLED, so only a
  // writer still stuck after kWriterGrace (a write gRPC holds back) is cut off that way.
  if (!u_.have_summary_ && !writer_done.WaitForNotificationWithTimeout(kWriterGrace)) ctx_.TryCancel();
  writer.join();
  const grpc::Status st = stream_->Finish();
  u_.bar_.Finish();
  if (st.ok() && !u_.have_summary_) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream ended without a summary");
  }
  return st;
}

bool UploadAttempt::ScanForOffer(Loaded* l, std::string* sha256) const {
  uint32_t crc = 0;
  absl::Status s = ScanTensorFileRange(*l->range, chunk_, &crc, sha256);
  if (s.ok()) {
    l->crc32 = crc;
    return true;
  }
  l->status = std::move(s);
  l->range.reset();
  l->pieces.reset();
  return false;
}

bool UploadAttempt::AskHaveBlobs(v1::HaveBlobsRequest* q, v1::HaveBlobsResponse* a) {
  q->set_project(o_.project);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return stub_->HaveBlobs(&ctx, *q, a).ok();
}

void UploadAttempt::Offer(v1::DataMode mode, Loaded* l) {
  l->offered = true;
  const uint64_t length = l->tensor ? l->tensor->bytes().size() : l->range ? l->range->length : 0;
  if ((!l->tensor && !l->range) || mode != v1::DATA_MODE_DATA || !o_.dedup || length < kDedupMinBytes) {
    return;
  }
  // A tensor sent from its file is read once more for its CRC-32 (and its hash, if the probe
  // says the server may hold it). If that fails it goes with the failure.
  if (l->tensor) {
    l->crc32 = Crc32(0, l->tensor->data(), length);
  } else if (!ScanForOffer(l, nullptr)) {
    return;
  } else if (u_.hooks_.after_offer_read) {
    u_.hooks_.after_offer_read(l->range->file->path());
  }
  UploadCounters& c = u_.counters_;
  if (c.probes_answered.load() != 0) {
    // First the probe by length and CRC-32: content the project cannot hold is not hashed.
    v1::HaveBlobsRequest pq;
    v1::ContentProbe* p = pq.add_probes();
    p->set_byte_length(length);
    p->set_crc32(*l->crc32);
    v1::HaveBlobsResponse pa;
    if (!AskHaveBlobs(&pq, &pa)) return;
    ++c.dedup_probes;
    if (pa.maybe_held_size() != 1) {
      c.probes_answered = 0;  // a server without probes: offer the hash
    } else {
      c.probes_answered = 1;
      if (!pa.maybe_held(0)) return;
    }
  }
  if (l->tensor) {
    l->sha256 = Sha256Hex(l->tensor->bytes());
  } else if (!ScanForOffer(l, &l->sha256)) {
    return;
  }
  ++c.dedup_hashes;
  v1::HaveBlobsRequest hq;
  hq.add_sha256(l->sha256);
  v1::HaveBlobsResponse ha;
  l->held = AskHaveBlobs(&hq, &ha) && ha.held_size() == 1 && ha.held(0);
  if (l->held) l->pieces.reset();  // sent by reference: nothing to read
}

void UploadAttempt::SentData(uint64_t n) {
  u_.counters_.data_bytes += n;
  const UploadHooks& h = u_.hooks_;
  if (h.pacer != nullptr && !h.pacer_leads) h.pacer->Followed(u_.counters_.data_bytes.load());
}

Loaded UploadAttempt::LoadNow(const DumpItem& it, v1::DataMode mode) const {
  return mode == v1::DATA_MODE_DATA ? LoadOrStreamForSend(it, o_.stream_min_bytes, chunk_)
                                    : LoadSummaryForSend(it, mode, o_.stream_min_bytes);
}

void UploadAttempt::Prepare(const DumpItem& it, v1::DataMode mode, Loaded* l) {
  Offer(mode, l);
  Precompute(it, mode, l);
}

bool UploadAttempt::SendRange(const DumpItem& it, int64_t index, v1::DataMode mode, Loaded loaded) {
  const TensorFileRange& range = *loaded.range;
  if (u_.counted_.insert(it.name).second) u_.counters_.full_bytes += range.length;
  ++u_.counters_.piece_tensors;
  v1::UploadRequest h;
  *h.mutable_header() = MakeHeader(it, index, nullptr, mode, loaded.crc32, loaded.stats, &range);
  if (mode != v1::DATA_MODE_DATA) {
    if (!stream_->Write(h)) return false;
    u_.MarkSent(it.name);
    return true;
  }
  if (loaded.held) {
    h.mutable_header()->set_content_sha256(loaded.sha256);
    h.mutable_header()->set_by_reference(true);
    if (!stream_->Write(h)) return false;
    u_.counters_.dedup_bytes += range.length;
    return true;
  }
  if (!stream_->Write(h) || !SendPieces(&loaded)) return false;
  u_.MarkSent(it.name);
  return true;
}

bool UploadAttempt::SendPieces(Loaded* loaded) {
  while (true) {
    FilePieces::Piece p;
    bool got = false;
    if (absl::Status s = loaded->pieces->Next(&p, &got); !s.ok()) {
      ++u_.counters_.load_errors;
      u_.load_error_text_ = std::string(s.message());
      return stream_->Write(ReadErrorChunk(s.message()));
    }
    if (!got) return true;
    if (loaded->crc32 && p.crc32 && *p.crc32 != *loaded->crc32) {
      // The header carries the CRC-32 of an earlier read (the dedup offer's): the file changed
      // since. The item ends as a read error (an ERROR row naming the file), not as data the
      // server would refuse for its CRC.
      ++u_.counters_.load_errors;
      u_.load_error_text_ = absl::StrFormat(
          "%s: the file changed while it was uploaded (the tensor's CRC-32 was %08x when first "
          "read, %08x when sent)",
          loaded->range->file->path(), *loaded->crc32, *p.crc32);
      return stream_->Write(ReadErrorChunk(u_.load_error_text_));
    }
    u_.limiter_.Take(p.bytes.size());
    // The header's CRC-32 covers the data when the dedup offer took it; else the last chunk
    // carries it.
    const std::optional<uint32_t> crc = loaded->crc32 ? std::nullopt : p.crc32;
    std::optional<v1::Statistics> stats;
    if (p.stats) SetStatistics(*p.stats, &stats.emplace());
    if (!stream_->Write(OutgoingUpload::Chunk(p.offset, p.bytes, std::move(p.owner), crc,
                                              stats ? &*stats : nullptr))) {
      return false;
    }
    SentData(p.bytes.size());
  }
}

bool UploadAttempt::SendLoaded(const DumpItem& it, int64_t index, v1::DataMode mode, Loaded loaded,
                               bool next_ready) {
  const UploadHooks& hooks = u_.hooks_;
  UploadCounters& c = u_.counters_;
  if (hooks.pacer != nullptr && hooks.pacer_leads) hooks.pacer->WaitToLead(c.data_bytes.load());
  if (!loaded.offered) Offer(mode, &loaded);
  if (loaded.range) return SendRange(it, index, mode, std::move(loaded));
  std::optional<Tensor> tensor = std::move(loaded.tensor);
  if (!loaded.status.ok()) {
    ++c.load_errors;
    u_.load_error_text_ = std::string(loaded.status.message());
  }
  if (tensor && u_.counted_.insert(it.name).second) c.full_bytes += tensor->bytes().size();
  const v1::DataMode m = tensor ? mode : v1::DATA_MODE_STATS;
  v1::UploadRequest h;
  *h.mutable_header() = MakeHeader(it, index, tensor ? &*tensor : nullptr, m, loaded.crc32, loaded.stats);
  if (!loaded.status.ok() && it.is_tensor) {
    // The item still goes: the job reports it as an ERROR row naming the failure.
    h.mutable_header()->set_read_error(Utf8Prefix(loaded.status.message(), kMaxReadErrorBytes));
  }
  if (tensor && m == v1::DATA_MODE_DATA && loaded.held) {
    // The server holds this content: sent by reference (no chunks).
    h.mutable_header()->set_content_sha256(loaded.sha256);
    h.mutable_header()->set_by_reference(true);
    if (!stream_->Write(h)) return false;
    c.dedup_bytes += tensor->bytes().size();
    return true;
  }
  const bool chunks_follow = tensor && m == v1::DATA_MODE_DATA && !tensor->bytes().empty();
  // The leader of a pair waits before its next item while it is too far ahead, and a throttled
  // upload (--max-bytes-per-second) before each chunk: the last message then goes out at once.
  const uint64_t item_bytes = chunks_follow ? tensor->bytes().size() : 0;
  const bool hint_last = next_ready && o_.max_bytes_per_second <= 0 &&
                         (hooks.pacer == nullptr || !hooks.pacer_leads ||
                          hooks.pacer->WouldLead(c.data_bytes.load() + item_bytes));
  // A header followed by chunks goes out with the first of them (one flush, not two).
  if (!stream_->Write(h, BufferHint(chunks_follow || hint_last))) return false;
  if (chunks_follow && !SendChunks(*tensor, hint_last)) return false;
  u_.MarkSent(it.name);
  return true;
}

bool UploadAttempt::SendChunks(const Tensor& tensor, bool hint_last) {
  const absl::string_view bytes = tensor.bytes();
  for (uint64_t off = 0; off < bytes.size(); off += chunk_) {
    const absl::string_view piece = bytes.substr(off, chunk_);
    u_.limiter_.Take(piece.size());
    // The chunk refers to the tensor's buffer (no copy); gRPC holds it until sent.
    const bool last = off + piece.size() == bytes.size();
    if (!stream_->Write(OutgoingUpload::Chunk(off, piece, tensor.owner()), BufferHint(last && hint_last))) {
      return false;
    }
    SentData(piece.size());
  }
  return true;
}

bool UploadAttempt::SendNow(const DumpItem& it, int64_t index, v1::DataMode mode, Loaded l) {
  Prepare(it, mode, &l);
  const std::shared_ptr<FilePieces> pieces = l.pieces;  // none when sent by reference
  if (pieces == nullptr) return SendLoaded(it, index, mode, std::move(l), false);
  std::thread fill([pieces] { pieces->Fill(); });
  const bool ok = SendLoaded(it, index, mode, std::move(l), false);
  pieces->Cancel();  // the stream went away part way: Fill stops waiting for room
  fill.join();
  return ok;
}

bool UploadAttempt::SendItem(size_t i, v1::DataMode mode) {
  const DumpItem& it = u_.dump_->items[i];
  return SendNow(it, static_cast<int64_t>(i), mode, LoadNow(it, mode));
}

void UploadAttempt::Write() {
  if (o_.follow ? !WriteFollowed() : !WriteDump() || !WriteWanted()) return;
  if (!WriteRunFiles()) return;
  stream_->Write(EndRequest());
  stream_->WritesDone();
  // All data sent: a leader waiting for more would wait for ever.
  const UploadHooks& h = u_.hooks_;
  if (!o_.follow && h.pacer != nullptr && !h.pacer_leads) h.pacer->Release();
}

bool UploadAttempt::WriteFollowed() {
  // An item goes once its data file is complete (it reads back, or has the size its header and
  // the listing give).
  std::set<std::string> sent(held_.begin(), held_.end());
  auto last_new = std::chrono::steady_clock::now();
  while (!read_ended_) {
    // The marker is looked at before the listing: the writer creates it after its last file, so
    // a listing that starts after the marker exists sees every file. (Checked after the
    // listing, a file written between the two could be missed.)
    const bool marker = std::filesystem::exists(std::filesystem::path(o_.path) / o_.end_marker);
    bool all_sent = false;
    if (absl::StatusOr<Dump> now = u_.ReadDump(); now.ok()) {
      all_sent = true;
      for (DumpItem& it : now->items) {
        if (sent.count(it.name)) continue;
        Loaded loaded = LoadNow(it, u_.first_mode_);
        // A link outside the tree is final (sent with its read error); another failure is a
        // file still being written.
        if (!loaded.status.ok() && !absl::IsPermissionDenied(it.read_error)) {
          all_sent = false;
          continue;
        }
        auto pos = u_.follow_index_.try_emplace(it.name, static_cast<int64_t>(u_.follow_index_.size())).first;
        if (!SendNow(it, pos->second, u_.first_mode_, std::move(loaded))) return false;
        sent.insert(it.name);
        ++u_.counters_.follow_items;
        last_new = std::chrono::steady_clock::now();
      }
    }
    if (marker && all_sent) return true;
    if (std::chrono::steady_clock::now() - last_new > std::chrono::seconds(o_.idle_timeout_seconds)) {
      u_.err_ << "parity-agent: no new complete item for " << o_.idle_timeout_seconds
              << " s; ending the upload\n";
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

bool UploadAttempt::WriteDump() {
  const std::vector<DumpItem>& items = u_.dump_->items;
  std::vector<size_t> order;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!held_.count(items[i].name)) order.push_back(i);
  }
  if (o_.read_ahead <= 0) {
    for (size_t i : order) {
      if (!SendItem(i, u_.first_mode_)) return false;
    }
    return true;
  }
  // The dedup offer (hash and HaveBlobs) is made on the read-ahead thread too, while earlier
  // items are being sent.
  const v1::DataMode mode = u_.first_mode_;
  Prefetcher ahead(items, std::move(order), static_cast<size_t>(o_.read_ahead), 256ull << 20,
                   [this, mode](const DumpItem& it) {
                     if (u_.hooks_.before_read_ahead) u_.hooks_.before_read_ahead(it.name);
                     return LoadNow(it, mode);
                   },
                   [this, mode](const DumpItem& it, Loaded* l) { Prepare(it, mode, l); });
  size_t i;
  Loaded loaded;
  bool more = false;
  while (ahead.Next(&i, &loaded, &more)) {
    if (!SendLoaded(items[i], static_cast<int64_t>(i), mode, std::move(loaded), more)) return false;
  }
  return true;
}

bool UploadAttempt::WriteWanted() {
  if (o_.mode != "auto") return true;
  v1::UploadRequest f;
  f.mutable_flush();
  if (!stream_->Write(f)) return false;
  std::set<std::string> want;
  {
    absl::MutexLock l(&flush_mu_);
    flush_mu_.Await(absl::Condition(
        +[](std::optional<std::vector<std::string>>* n) { return n->has_value(); }, &flush_names_));
    want.insert(flush_names_->begin(), flush_names_->end());
  }
  const std::vector<DumpItem>& items = u_.dump_->items;
  for (size_t i = 0; i < items.size(); ++i) {
    if (want.count(items[i].name) && !SendItem(i, v1::DATA_MODE_DATA)) return false;
  }
  return true;
}

bool UploadAttempt::WriteRunFiles() {
  std::vector<std::pair<const char*, std::string>> files;
  if (u_.dump_->format == kTorchairGeFormat) {
    files.emplace_back(kStackJson, StackJsonText(u_.dump_->structure));  // its GE ops' lines
  } else if (u_.dump_->format == "msprobe") {
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::is_directory(o_.path, ec)
                                          ? std::filesystem::path(o_.path)
                                          : std::filesystem::path(o_.path).parent_path();
    for (const char* name : {kStackJson, kConstructJson}) {
      const std::filesystem::path p = dir / name;
      if (!std::filesystem::is_regular_file(p, ec)) continue;
      absl::StatusOr<std::string> text = ReadFileToString(p.string(), kMaxStructureFileBytes);
      if (!text.ok()) {
        u_.err_ << "parity-agent: " << name << " not sent: " << text.status().message() << "\n";
        continue;
      }
      files.emplace_back(name, std::move(*text));
    }
  }
  for (const auto& [name, text] : files) {
    v1::UploadRequest part;
    v1::RunFilePart* f = part.mutable_run_file();
    f->set_name(name);
    uint64_t offset = 0;
    do {
      const uint64_t n = std::min<uint64_t>(chunk_, text.size() - offset);
      f->set_offset(offset);
      f->set_data(text.substr(offset, n));
      offset += n;
      f->set_last(offset == text.size());
      if (!stream_->Write(part)) return false;
    } while (offset < text.size());
  }
  return true;
}

void UploadAttempt::Read() {
  v1::UploadResponse resp;
  while (stream_->Read(&resp)) {
    switch (resp.msg_case()) {
      case v1::UploadResponse::kAck:
        u_.OnAck(resp.ack().name());
        break;
      case v1::UploadResponse::kRejected:
        ++u_.rejected_;
        u_.err_ << "parity-agent: rejected " << resp.rejected().name() << ": " << resp.rejected().message()
                << "\n";
        break;
      case v1::UploadResponse::kVerdict:
        u_.OnVerdict(resp.verdict());
        break;
      case v1::UploadResponse::kSummary:
        u_.summary_ = resp.summary();
        u_.have_summary_ = true;
        break;
      case v1::UploadResponse::kFlushDone: {
        absl::MutexLock l(&flush_mu_);
        flush_names_ = std::vector<std::string>(resp.flush_done().full_data_names().begin(),
                                                resp.flush_done().full_data_names().end());
        break;
      }
      default:
        break;
    }
  }
}

Upload::Upload(const UploadOptions& o, std::ostream& out, std::ostream& err, const UploadHooks& hooks)
    : o_(o),
      out_(out),
      err_(err),
      hooks_(hooks),
      started_at_(std::chrono::steady_clock::now()),
      limiter_(o.max_bytes_per_second),
      bar_("uploading", o.progress) {}

int Upload::Run() {
  if (hooks_.completed != nullptr) *hooks_.completed = false;
  absl::Status s = Open();
  if (s.ok()) s = Send();
  if (!s.ok()) return ErrorExitCode("parity-agent", s, err_);
  return Report();
}

absl::StatusOr<Dump> Upload::ReadDump() const {
  const OutsideLinks links = o_.allow_outside_links ? OutsideLinks::kFollow : OutsideLinks::kRefuse;
  // Nothing is kept by the listing (a budget of 0): each small file is read when it is sent,
  // into memory the agent reuses from one item to the next. Kept files would be up to 32 MiB
  // of fresh pages per side in a process that lives for one upload, which cost more (zero
  // fill, and on a VM that hands freed memory back to its host, a trip to the host per page)
  // than opening each small file a second time.
  return OpenDump(o_.path, /*keep_budget_bytes=*/0, NpyListing::kReadHeaders, nullptr, links);
}

absl::Status Upload::Open() {
  absl::StatusOr<Dump> dump = ReadDump();
  if (!dump.ok() && o_.follow && std::filesystem::is_directory(o_.path)) dump = Dump();  // not written yet
  if (!dump.ok()) return dump.status();
  dump_ = std::move(*dump);
  v1::RunMetadata* meta = start_.mutable_new_run();
  meta->set_project(o_.project);
  meta->set_side(o_.role == "golden" ? v1::SIDE_GOLDEN : v1::SIDE_TARGET);
  meta->set_name(o_.run_name.empty() ? o_.path : o_.run_name);
  meta->set_rank(o_.rank);
  meta->set_step(o_.step);
  meta->set_framework(dump_->framework);
  meta->set_model(o_.model);
  meta->set_device(o_.device);
  meta->set_dump_format(dump_->format);
  meta->set_dump_mode(ToProto(o_.mode == "stats" ? DumpMode::kStatistics : dump_->mode));
  for (const auto& [k, v] : o_.labels) (*meta->mutable_labels())[k] = v;
  start_.set_new_run_id(NewRunId());
  if (!o_.against_run_id.empty()) start_.set_against_run_id(o_.against_run_id);
  start_.set_summary_waits_for_job(o_.summary_waits_for_job);
  if (!o_.against_label_key.empty()) {
    start_.mutable_against_label()->set_key(o_.against_label_key);
    start_.mutable_against_label()->set_value(o_.against_label_value);
    for (const auto& [k, v] : o_.against_extra_labels) {
      v1::LabelSelector* l = start_.add_against_extra_labels();
      l->set_key(k);
      l->set_value(v);
    }
  }
  if (!o_.policy.empty()) {
    PolicyKind k;
    if (!ParsePolicyKind(o_.policy, &k)) {
      return absl::InvalidArgumentError("--policy must be msprobe, forge or torch");
    }
    start_.mutable_job_config()->set_policy(static_cast<v1::Policy>(static_cast<int>(k) + 1));
  }
  if (!o_.config_path.empty()) {
    // Read once: the text checked is the text sent.
    absl::StatusOr<std::string> text = ReadFileToString(o_.config_path, kMaxCompareConfigBytes);
    if (!text.ok()) return text.status();
    absl::StatusOr<CompareConfig> check = ParseCompareConfigText(*text, o_.config_path);
    if (!check.ok()) return check.status();
    start_.mutable_job_config()->set_config_json(*std::move(text));
  }
  if (o_.mode == "stats") first_mode_ = v1::DATA_MODE_STATS;
  if (o_.mode == "crc" || o_.mode == "auto") first_mode_ = v1::DATA_MODE_CRC;
  return absl::OkStatus();
}

v1::UploadStart Upload::NextStart() const {
  if (accepted_.run_id().empty()) return start_;
  v1::UploadStart attach;
  attach.set_attach_run_id(accepted_.run_id());
  attach.set_summary_waits_for_job(o_.summary_waits_for_job);
  return attach;
}

void Upload::Accepted(const v1::UploadAccepted& a) {
  const bool first = accepted_.run_id().empty();
  accepted_ = a;
  if (first && !o_.run_id_file.empty()) WriteStringToFile(o_.run_id_file, a.run_id() + "\n").IgnoreError();
  if (first && hooks_.on_run_id) hooks_.on_run_id(a.run_id());
  (o_.json ? err_ : out_) << "run " << a.run_id() << (a.job_id().empty() ? "" : " job " + a.job_id())
                          << (first ? ": uploading " : ": resuming, the server holds ")
                          << (first ? dump_->items.size() : static_cast<size_t>(a.held_item_names_size()))
                          << " items" << (first ? " from " + o_.path : "") << "\n";
}

absl::Status Upload::Send() {
  // --retry-seconds is counted from a lost connection, and counted afresh (with the backoff)
  // from the next loss once an attempt in between got items acknowledged: an upload of hours
  // may lose its connection many times and go on as long as each attempt makes progress.
  auto lost_since = std::chrono::steady_clock::now();
  int64_t acks_at_loss = -1;
  std::mt19937_64 jitter(std::random_device{}());
  auto backoff = std::chrono::milliseconds(500);
  for (int attempt = 1;; ++attempt) {
    UploadAttempt a(this);
    const grpc::Status st = a.Run();
    if (st.ok()) {
      if (hooks_.completed != nullptr) *hooks_.completed = true;
      return absl::OkStatus();
    }
    if (hooks_.canceller != nullptr && hooks_.canceller->cancelled()) {
      return absl::CancelledError(absl::StrCat("upload of ", o_.path, " stopped"));
    }
    // Reconnect on transport failures, with exponential backoff, within --retry-seconds; and on
    // RESOURCE_EXHAUSTED that parityd did not choose: its gRPC memory quota cancelled the stream.
    // The trailer's key is parity.proto's (server/ingest_service.h: kUploadEndedByParitydKey).
    const bool quota = st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
    const bool retryable = st.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           st.error_code() == grpc::StatusCode::CANCELLED ||
                           st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                           (quota && !a.EndedByParityd());
    const auto now = std::chrono::steady_clock::now();
    if (acks_ != acks_at_loss) {
      lost_since = now;
      acks_at_loss = acks_;
      backoff = std::chrono::milliseconds(500);
    }
    if (!retryable || now + backoff > lost_since + std::chrono::seconds(o_.retry_seconds)) {
      return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                          absl::StrCat("upload failed: ", st.error_message(), " (code ", st.error_code(), ", ",
                                       o_.server, ", attempt ", attempt, ")", TlsHint(st.error_message())));
    }
    // Jittered (half to all of the backoff): the streams a quota cancels together, or the agents
    // of a restarted parityd, do not all come back at the same instant.
    const auto wait = std::chrono::milliseconds(
        backoff.count() / 2 + static_cast<int64_t>(jitter() % static_cast<uint64_t>(backoff.count() / 2 + 1)));
    err_ << "parity-agent: "
         << (quota ? "stream cancelled by the server's gRPC memory quota (" : "connection lost (")
         << st.error_message() << "); reconnecting in " << wait.count() << " ms (attempt " << attempt + 1
         << ")" << TlsHint(st.error_message()) << "\n";
    std::this_thread::sleep_for(wait);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(30000));
  }
}

void Upload::MarkSent(const std::string& name) {
  if (accepted_.job_id().empty()) return;  // no verdicts come for a golden run
  absl::MutexLock l(&latency_mu_);
  sent_at_[name] = std::chrono::steady_clock::now();
}

void Upload::OnAck(const std::string& name) {
  // Items, not acknowledgements: --mode auto sends a disagreeing item twice (statistics, then
  // data) and it is acknowledged each time.
  if (acked_names_.insert(name).second) ++acks_;
  if (hooks_.on_ack) hooks_.on_ack(name);
  const size_t total = std::max(dump_->items.size(), counters_.follow_items.load());
  const size_t done = static_cast<size_t>(acks_);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at_).count();
  const double mib = static_cast<double>(counters_.data_bytes.load()) / (1 << 20);
  const double eta = done > 0 ? secs / static_cast<double>(done) * static_cast<double>(total > done ? total - done : 0)
                              : 0;
  bar_.Update(std::min(done, total), total,
              absl::StrFormat(" items, %.1f MiB, %.1f MiB/s, ETA %.0f s", mib, secs > 0 ? mib / secs : 0.0, eta));
}

void Upload::OnVerdict(const v1::OpResult& r) {
  {
    absl::MutexLock l(&latency_mu_);
    auto sent = sent_at_.find(r.key().name());
    if (sent != sent_at_.end()) {
      latencies_ms_.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - sent->second).count());
      sent_at_.erase(sent);
    }
  }
  if (o_.json || hooks_.quiet_verdicts) return;
  const CheckResult c = CheckResultFromProto(r);
  bar_.Finish();
  // Streamed as they come: fixed columns (an item name past 48 bytes pushes its metrics right),
  // under one header.
  if (!verdict_header_printed_) {
    out_ << Pad("VERDICT", 10) << "  " << Pad("ITEM", 48) << "  METRICS\n";
    verdict_header_printed_ = true;
  }
  out_ << Paint(Pad(VerdictName(c.verdict), 10), VerdictColorCode(c.verdict), o_.color) << "  "
       << Pad(r.key().name(), 48) << "  " << KeyMetrics(PolicyFromProto(r.policy()), c) << "\n";
}

void Upload::WriteJsonReport(std::ostream& out) {
  const UploadCounters& c = counters_;
  Json j = Json::MakeObject();
  j.Set("run_id", Json::String(accepted_.run_id()));
  j.Set("job_id", Json::String(accepted_.job_id()));
  if (!o_.against_run_id.empty()) j.Set("golden_run_id", Json::String(o_.against_run_id));
  j.Set("items_acknowledged", Json::Integer(acks_));
  j.Set("items_rejected", Json::Integer(rejected_));
  j.Set("mode", Json::String(o_.mode));
  j.Set("data_bytes_sent", Json::Integer(static_cast<int64_t>(c.data_bytes.load())));
  j.Set("data_bytes_in_dump", Json::Integer(static_cast<int64_t>(c.full_bytes.load())));
  j.Set("data_bytes_deduplicated", Json::Integer(static_cast<int64_t>(c.dedup_bytes.load())));
  // Dedup offers: probes by length and CRC-32 answered, and SHA-256 hashes taken (only for
  // tensors a probe said may be held, or every candidate with a server without probes).
  j.Set("dedup_probes", Json::Integer(c.dedup_probes.load()));
  j.Set("dedup_hashes", Json::Integer(c.dedup_hashes.load()));
  j.Set("tensors_read_in_pieces", Json::Integer(c.piece_tensors.load()));
  {
    absl::MutexLock l(&latency_mu_);
    std::vector<double>& ms = latencies_ms_;
    std::sort(ms.begin(), ms.end());
    const double p50 = ms.empty() ? 0.0 : ms[static_cast<size_t>(0.5 * (ms.size() - 1))];
    const double p99 = ms.empty() ? 0.0 : ms[static_cast<size_t>(0.99 * (ms.size() - 1))];
    Json lat = Json::MakeObject();
    lat.Set("count", Json::Integer(static_cast<int64_t>(ms.size())));
    lat.Set("p50", Json::Number(p50));
    lat.Set("p99", Json::Number(p99));
    j.Set("verdict_latency_ms", std::move(lat));
  }
  j.Set("job", summary_.has_job() ? remote::JobJson(summary_.job()) : Json());
  out << j.Dump(2) << "\n";
}

void Upload::WriteTextReport(std::ostream& out) {
  const UploadCounters& c = counters_;
  out << "\nrun " << accepted_.run_id() << ": " << acks_ << " items acknowledged, " << rejected_ << " rejected; "
      << c.data_bytes.load() << " of " << c.full_bytes.load() << " tensor data bytes sent (mode " << o_.mode
      << (c.dedup_bytes.load() ? absl::StrCat("; ", c.dedup_bytes.load(), " already held, sent by reference")
                               : std::string())
      << ")\n";
  if (!have_summary_ || !summary_.has_job()) return;
  const v1::Job& job = summary_.job();
  out << "job " << job.job_id() << " " << remote::StateText(job.state()) << ": " << remote::CountsText(job.counts())
      << "\n";
  if (!job.error().empty()) out << "job error: " << job.error() << "\n";
  if (!job.first_culprit().empty()) {
    out << Paint("First culprit", "31;1", o_.color) << ": " << TerminalSafe(job.first_culprit()) << "\n";
  } else if (job.state() == v1::JOB_STATE_DONE) {
    out << "No culprit: no operator fails while its inputs pass and grows the error beyond the noise floor.\n";
  }
  if (o_.mode == "stats" || dump_->mode == DumpMode::kStatistics) out << kStatisticsOnlyNote << "\n";
}

int Upload::Report() {
  const int64_t load_errors = counters_.load_errors.load();
  if (load_errors > 0) {
    err_ << "parity-agent: " << load_errors << " tensors could not be read; each was sent with its read error "
         << "(a job reports it as an ERROR row) and whatever statistics the dump's index holds (last: "
         << load_error_text_ << ")\n";
  }
  if (o_.json) {
    WriteJsonReport(out_);
  } else {
    WriteTextReport(out_);
  }
  // A job that failed (it could not store its results) is a system error, not a verdict.
  if (rejected_ > 0 || load_errors > 0) return kExitUsage;
  if (!summary_.has_job()) return kExitOk;  // a golden run: nothing was compared, nothing asked
  const v1::Job& job = summary_.job();
  if (job.state() == v1::JOB_STATE_FAILED) return kExitUsage;
  const CheckOutcome outcome = OutcomeFromProto(job);
  if (const std::string note = IncompleteNote(outcome, o_.allow_unmatched); !note.empty()) {
    err_ << "parity-agent: job " << job.job_id() << " " << note << "\n";
  }
  return OutcomeExitCode(outcome, o_.allow_unmatched);
}

}  // namespace parity::agent
