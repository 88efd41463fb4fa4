#include "client/agent.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <cstdlib>
#include <thread>
#include <unordered_set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli.h"
#include "client/file_pieces.h"
#include "client/proto_util.h"
#include "client/remote_common.h"
#include "client/report_format.h"
#include "common/base/control_chars.h"
#include "client/terminal.h"
#include "client/upload_stream.h"
#include "proto/enums.h"
#include "common/checks/compare_config.h"
#include "common/base/crc32.h"
#include "common/formats/dump.h"
#include "common/base/file_util.h"
#include "common/checks/msprobe_policy.h"
#include "common/base/sha256.h"
#include "common/checks/stats.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "parity/v1/parity.grpc.pb.h"
#include "client/agent_items.h"

namespace parity {

using agent::kDedupMinBytes;
using agent::Loaded;
using agent::Precompute;
using agent::kMaxReadErrorBytes;
using agent::Utf8Prefix;
using agent::LoadOrStreamForSend;
using agent::LoadSummaryForSend;
using agent::Prefetcher;
using agent::SetStatistics;
using agent::MakeHeader;

namespace {

// A new run's id, drawn here so that a retried start finds the run its first attempt created
// (UploadStart.new_run_id): "run-" and 16 lowercase hex digits.
std::string NewRunId() {
  std::random_device rd;
  const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return absl::StrFormat("run-%016x", v);
}

// A token bucket over bytes per second (0: unlimited).
class RateLimiter {
 public:
  explicit RateLimiter(uint64_t bytes_per_second) : rate_(bytes_per_second) {}
  void Take(uint64_t n) {
    if (rate_ == 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (start_ == std::chrono::steady_clock::time_point()) start_ = now;
    sent_ += n;
    const auto due = start_ + std::chrono::microseconds(sent_ * 1000000 / rate_);
    if (due > now) std::this_thread::sleep_until(due);
  }

 private:
  const uint64_t rate_;
  uint64_t sent_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

void UploadPacer::WaitToLead(uint64_t sent) {
  absl::MutexLock l(&mu_);
  leading_ = sent;
  mu_.Await(may_lead_);
}

bool UploadPacer::WouldLead(uint64_t sent) {
  absl::MutexLock l(&mu_);
  return MayLeadWith(sent);
}

void UploadPacer::Followed(uint64_t sent) {
  absl::MutexLock l(&mu_);
  followed_ = std::max(followed_, sent);
}

void UploadPacer::Release() {
  absl::MutexLock l(&mu_);
  released_ = true;
}

void UploadCanceller::Cancel() {
  absl::MutexLock l(&mu_);
  cancelled_ = true;
  if (ctx_ != nullptr) ctx_->TryCancel();
}

bool UploadCanceller::cancelled() const {
  absl::MutexLock l(&mu_);
  return cancelled_;
}

void UploadCanceller::Attach(grpc::ClientContext* ctx) {
  absl::MutexLock l(&mu_);
  ctx_ = ctx;
  if (cancelled_ && ctx_ != nullptr) ctx_->TryCancel();
}

int RunUpload(const UploadOptions& o, std::ostream& out, std::ostream& err, const UploadHooks& hooks) {
  if (hooks.completed != nullptr) *hooks.completed = false;
  const OutsideLinks links = o.allow_outside_links ? OutsideLinks::kFollow : OutsideLinks::kRefuse;
  auto open_dump = [&o, links] {
    return OpenDump(o.path, kDefaultKeepBudgetBytes, NpyListing::kReadHeaders, nullptr, links);
  };
  absl::StatusOr<Dump> dump = open_dump();
  if (!dump.ok() && o.follow && std::filesystem::is_directory(o.path)) dump = Dump();  // not written yet
  if (!dump.ok()) {
    err << "parity-agent: " << dump.status().message() << "\n";
    return 2;
  }
  v1::UploadStart start;
  v1::RunMetadata* meta = start.mutable_new_run();
  meta->set_project(o.project);
  meta->set_side(o.role == "golden" ? v1::SIDE_GOLDEN : v1::SIDE_TARGET);
  meta->set_name(o.run_name.empty() ? o.path : o.run_name);
  meta->set_rank(o.rank);
  meta->set_step(o.step);
  meta->set_framework(dump->framework);
  meta->set_model(o.model);
  meta->set_device(o.device);
  meta->set_dump_format(dump->format);
  meta->set_dump_mode(ToProto(o.mode == "stats" ? DumpMode::kStatistics : dump->mode));
  for (const auto& [k, v] : o.labels) (*meta->mutable_labels())[k] = v;
  start.set_new_run_id(NewRunId());
  if (!o.against_run_id.empty()) start.set_against_run_id(o.against_run_id);
  start.set_summary_waits_for_job(o.summary_waits_for_job);
  if (!o.against_label_key.empty()) {
    start.mutable_against_label()->set_key(o.against_label_key);
    start.mutable_against_label()->set_value(o.against_label_value);
    for (const auto& [k, v] : o.against_extra_labels) {
      v1::LabelSelector* l = start.add_against_extra_labels();
      l->set_key(k);
      l->set_value(v);
    }
  }
  if (!o.policy.empty()) {
    PolicyKind k;
    if (!ParsePolicyKind(o.policy, &k)) {
      err << "parity-agent: --policy must be msprobe, forge or torch\n";
      return 2;
    }
    start.mutable_job_config()->set_policy(static_cast<v1::Policy>(static_cast<int>(k) + 1));
  }
  if (!o.config_path.empty()) {
    absl::StatusOr<CompareConfig> check = LoadCompareConfig(o.config_path);
    if (!check.ok()) {
      err << "parity-agent: " << check.status().message() << "\n";
      return 2;
    }
    start.mutable_job_config()->set_config_json(*ReadFileToString(o.config_path));
  }

  v1::DataMode first_mode = v1::DATA_MODE_DATA;
  if (o.mode == "stats") first_mode = v1::DATA_MODE_STATS;
  if (o.mode == "crc" || o.mode == "auto") first_mode = v1::DATA_MODE_CRC;
  std::atomic<int64_t> load_errors{0};
  std::atomic<uint64_t> data_bytes{0}, full_bytes{0}, dedup_bytes{0};
  std::atomic<int64_t> dedup_probes{0}, dedup_hashes{0};
  std::atomic<int64_t> piece_tensors{0};  // tensors sent from their files in pieces
  // Whether the server answers HaveBlobs' probes (-1: not known yet; 0: an older server, every
  // candidate is hashed and offered).
  std::atomic<int> probes_answered{-1};
  // Verdict latency: from the item's last byte written to its verdict's arrival.
  absl::Mutex latency_mu;
  std::map<std::string, std::chrono::steady_clock::time_point> sent_at;  // guarded by latency_mu
  std::vector<double> latencies_ms;                                      // guarded by latency_mu
  std::string load_error_text;
  RateLimiter limiter(o.max_bytes_per_second);
  std::map<std::string, int64_t> follow_index;  // --follow: stable item indexes by first sighting
  std::atomic<size_t> follow_items{0};  // --follow: items sent so far (read by the progress bar)
  std::set<std::string> counted;  // items whose size went into full_bytes
  v1::UploadAccepted accepted;
  int64_t acks = 0, rejected = 0;
  std::unordered_set<std::string> acked_names;  // the items counted in `acks`
  v1::UploadSummary summary;
  bool have_summary = false;
  grpc::Status st;
  ProgressBar bar("uploading", o.progress);
  bool verdict_header_printed = false;  // before the first streamed verdict
  const auto upload_start = std::chrono::steady_clock::now();
  // --retry-seconds is counted from a lost connection, and counted afresh (with the backoff)
  // from the next loss once an attempt in between got items acknowledged: an upload of hours
  // may lose its connection many times and go on as long as each attempt makes progress.
  auto lost_since = std::chrono::steady_clock::now();
  int64_t acks_at_loss = -1;
  std::mt19937_64 jitter(std::random_device{}());
  auto backoff = std::chrono::milliseconds(500);
  for (int attempt = 1;; ++attempt) {
    // One connection: start (a new run, or attach to the run of the previous attempt), the
    // items the server does not hold yet, then (auto) Flush and the wanted data, then End.
    v1::UploadStart this_start = start;
    if (!accepted.run_id().empty()) {
      this_start.Clear();
      this_start.set_attach_run_id(accepted.run_id());
      this_start.set_summary_waits_for_job(o.summary_waits_for_job);
    }
    const std::shared_ptr<grpc::Channel> channel = MakeChannel(o.server);
    auto stub = v1::Ingest::NewStub(channel);
    grpc::ClientContext ctx;
    struct Attached {  // the canceller reaches this attempt's call while it lasts
      UploadCanceller* c;
      Attached(UploadCanceller* c, grpc::ClientContext* ctx) : c(c) {
        if (c != nullptr) c->Attach(ctx);
      }
      ~Attached() {
        if (c != nullptr) c->Attach(nullptr);
      }
    } attached(hooks.canceller, &ctx);
    std::unique_ptr<UploadStream> stream = OpenUploadStream(channel, &ctx);
    v1::UploadRequest req;
    *req.mutable_start() = this_start;
    v1::UploadResponse resp;
    if (stream->Write(req) && stream->Read(&resp) && resp.has_accepted()) {
      const bool first = accepted.run_id().empty();
      accepted = resp.accepted();
      if (first && !o.run_id_file.empty()) WriteStringToFile(o.run_id_file, accepted.run_id() + "\n").IgnoreError();
      if (first && hooks.on_run_id) hooks.on_run_id(accepted.run_id());
      (o.json ? err : out) << "run " << accepted.run_id()
                            << (accepted.job_id().empty() ? "" : " job " + accepted.job_id())
                            << (first ? ": uploading " : ": resuming, the server holds ")
                            << (first ? dump->items.size() : static_cast<size_t>(accepted.held_item_names_size()))
                            << " items" << (first ? " from " + o.path : "") << "\n";
      const std::set<std::string> held(accepted.held_item_names().begin(), accepted.held_item_names().end());
      const uint64_t chunk = accepted.max_chunk_bytes() ? accepted.max_chunk_bytes() : (1u << 20);
      absl::Mutex flush_mu;
      std::optional<std::vector<std::string>> flush_names;  // guarded by flush_mu
      // The dedup offer for an item about to go in `mode`: its content hash and whether the
      // server holds it (tensors of kDedupMinBytes or more sent with data). Safe on any thread.
      auto offer = [&](v1::DataMode mode, Loaded* l) {
        l->offered = true;
        const uint64_t length = l->tensor ? l->tensor->bytes().size() : l->range ? l->range->length : 0;
        if ((!l->tensor && !l->range) || mode != v1::DATA_MODE_DATA || !o.dedup || length < kDedupMinBytes) {
          return;
        }
        // A tensor sent from its file is read once more for its CRC-32 (and its hash, if the
        // probe says the server may hold it). If that fails it goes with the failure.
        auto scan = [&](std::string* sha256) {
          uint32_t crc = 0;
          absl::Status s = ScanTensorFileRange(*l->range, chunk, &crc, sha256);
          if (s.ok()) {
            l->crc32 = crc;
            return true;
          }
          l->status = std::move(s);
          l->range.reset();
          l->pieces.reset();
          return false;
        };
        if (l->tensor) {
          l->crc32 = Crc32(0, l->tensor->data(), length);
        } else if (!scan(nullptr)) {
          return;
        } else if (hooks.after_offer_read) {
          hooks.after_offer_read(l->range->file->path());
        }
        // One HaveBlobs call for this project; false when it failed (no offer: the data goes).
        auto ask = [&](v1::HaveBlobsRequest* q, v1::HaveBlobsResponse* a) {
          q->set_project(o.project);
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
          return stub->HaveBlobs(&ctx, *q, a).ok();
        };
        if (probes_answered.load() != 0) {
          // First the probe by length and CRC-32: content the project cannot hold is not hashed.
          v1::HaveBlobsRequest pq;
          v1::ContentProbe* p = pq.add_probes();
          p->set_byte_length(length);
          p->set_crc32(*l->crc32);
          v1::HaveBlobsResponse pa;
          if (!ask(&pq, &pa)) return;
          ++dedup_probes;
          if (pa.maybe_held_size() != 1) {
            probes_answered = 0;  // a server without probes: offer the hash
          } else {
            probes_answered = 1;
            if (!pa.maybe_held(0)) return;
          }
        }
        if (l->tensor) {
          l->sha256 = Sha256Hex(l->tensor->bytes());
        } else if (!scan(&l->sha256)) {
          return;
        }
        ++dedup_hashes;
        v1::HaveBlobsRequest hq;
        hq.add_sha256(l->sha256);
        v1::HaveBlobsResponse ha;
        l->held = ask(&hq, &ha) && ha.held_size() == 1 && ha.held(0);
        if (l->held) l->pieces.reset();  // sent by reference: nothing to read
      };
      // `n` more bytes of tensor data were handed to gRPC.
      auto sent_data = [&](uint64_t n) {
        data_bytes += n;
        if (hooks.pacer != nullptr && !hooks.pacer_leads) hooks.pacer->Followed(data_bytes.load());
      };
      auto mark_sent = [&](const DumpItem& it) {
        if (accepted.job_id().empty()) return;  // no verdicts come for a golden run
        absl::MutexLock l(&latency_mu);
        sent_at[it.name] = std::chrono::steady_clock::now();
      };
      // Sends one item from its file (Loaded::range): in DATA mode its pieces as they are read,
      // else its header; false when the stream is gone. If reading fails part way, the item is
      // ended with the failure (TensorChunk.read_error): the server stores it without data, as
      // an ERROR.
      auto send_range = [&](const DumpItem& it, int64_t index, v1::DataMode mode, Loaded loaded) {
        const TensorFileRange& range = *loaded.range;
        if (counted.insert(it.name).second) full_bytes += range.length;
        ++piece_tensors;
        v1::UploadRequest h;
        *h.mutable_header() = MakeHeader(it, index, nullptr, mode, loaded.crc32, loaded.stats, &range);
        if (mode != v1::DATA_MODE_DATA) {
          if (!stream->Write(h)) return false;
          mark_sent(it);
          return true;
        }
        if (loaded.held) {
          h.mutable_header()->set_content_sha256(loaded.sha256);
          h.mutable_header()->set_by_reference(true);
          if (!stream->Write(h)) return false;
          dedup_bytes += range.length;
          return true;
        }
        if (!stream->Write(h)) return false;
        while (true) {
          FilePieces::Piece p;
          bool got = false;
          if (absl::Status s = loaded.pieces->Next(&p, &got); !s.ok()) {
            ++load_errors;
            load_error_text = std::string(s.message());
            v1::UploadRequest abort;
            abort.mutable_chunk()->set_read_error(Utf8Prefix(s.message(), kMaxReadErrorBytes));
            if (!stream->Write(abort)) return false;
            break;
          }
          if (!got) break;
          if (loaded.crc32 && p.crc32 && *p.crc32 != *loaded.crc32) {
            // The header carries the CRC-32 of an earlier read (the dedup offer's): the file
            // changed since. The item ends as a read error (an ERROR row naming the file), not as
            // data the server would refuse for its CRC.
            ++load_errors;
            load_error_text = absl::StrFormat(
                "%s: the file changed while it was uploaded (the tensor's CRC-32 was %08x when first "
                "read, %08x when sent)",
                range.file->path(), *loaded.crc32, *p.crc32);
            v1::UploadRequest abort;
            abort.mutable_chunk()->set_read_error(Utf8Prefix(load_error_text, kMaxReadErrorBytes));
            if (!stream->Write(abort)) return false;
            break;
          }
          limiter.Take(p.bytes.size());
          // The header's CRC-32 covers the data when the dedup offer took it; else the last
          // chunk carries it.
          const std::optional<uint32_t> crc = loaded.crc32 ? std::nullopt : p.crc32;
          std::optional<v1::Statistics> stats;
          if (p.stats) SetStatistics(*p.stats, &stats.emplace());
          if (!stream->Write(OutgoingUpload::Chunk(p.offset, p.bytes, std::move(p.owner), crc,
                                                   stats ? &*stats : nullptr))) {
            return false;
          }
          sent_data(p.bytes.size());
        }
        mark_sent(it);
        return true;
      };
      // Sends one item in `mode` (its data loaded already when `tensor` is set, or to be read
      // from its file when `range` is, else loaded here); false when the stream is gone. With
      // `next_ready` (the next item is loaded and this thread will not wait before sending it),
      // a tensor loaded whole goes with the buffer hint: gRPC sends it with what follows, one
      // flush for several small items instead of one each.
      auto send_loaded = [&](const DumpItem& it, int64_t index, v1::DataMode mode, Loaded loaded,
                             bool next_ready) {
        if (hooks.pacer != nullptr && hooks.pacer_leads) hooks.pacer->WaitToLead(data_bytes.load());
        if (!loaded.offered) offer(mode, &loaded);
        if (loaded.range) return send_range(it, index, mode, std::move(loaded));
        std::optional<Tensor> tensor = std::move(loaded.tensor);
        if (!loaded.status.ok()) {
          ++load_errors;
          load_error_text = std::string(loaded.status.message());
        }
        if (tensor && counted.insert(it.name).second) full_bytes += tensor->bytes().size();
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
          if (!stream->Write(h)) return false;
          dedup_bytes += tensor->bytes().size();
          return true;
        }
        const bool chunks_follow = tensor && m == v1::DATA_MODE_DATA && !tensor->bytes().empty();
        // The leader of a pair waits before its next item while it is too far ahead, and a
        // throttled upload (--max-bytes-per-second) before each chunk: the last message then
        // goes out at once.
        const uint64_t item_bytes = chunks_follow ? tensor->bytes().size() : 0;
        const bool hint_last = next_ready && o.max_bytes_per_second <= 0 &&
                               (hooks.pacer == nullptr || !hooks.pacer_leads ||
                                hooks.pacer->WouldLead(data_bytes.load() + item_bytes));
        const auto options = [](bool hint) {
          return hint ? grpc::WriteOptions().set_buffer_hint() : grpc::WriteOptions();
        };
        // A header followed by chunks goes out with the first of them (one flush, not two).
        if (!stream->Write(h, options(chunks_follow || hint_last))) return false;
        if (!chunks_follow) {
          mark_sent(it);
          return true;
        }
        const absl::string_view bytes = tensor->bytes();
        for (uint64_t off = 0; off < bytes.size(); off += chunk) {
          const absl::string_view piece = bytes.substr(off, chunk);
          limiter.Take(piece.size());
          // The chunk refers to the tensor's buffer (no copy); gRPC holds it until sent.
          const bool last = off + piece.size() == bytes.size();
          if (!stream->Write(OutgoingUpload::Chunk(off, piece, tensor->owner()), options(last && hint_last))) {
            return false;
          }
          sent_data(piece.size());
        }
        mark_sent(it);
        return true;
      };
      // An item to be sent in `mode`, on any path (read-ahead or not): a large tensor is read
      // from its file a piece at a time (Loaded::pieces, filled by the caller) or summarised
      // from it, the rest loaded whole.
      auto load_now = [&](const DumpItem& it, v1::DataMode mode) {
        return mode == v1::DATA_MODE_DATA ? LoadOrStreamForSend(it, o.stream_min_bytes, chunk)
                                          : LoadSummaryForSend(it, mode, o.stream_min_bytes);
      };
      // What goes before the header: the dedup offer, and the CRC-32 and statistics of a tensor
      // loaded whole.
      auto prepare = [&](const DumpItem& it, v1::DataMode mode, Loaded* l) {
        offer(mode, l);
        Precompute(it, mode, l);
      };
      // Sends what load_now gave, without read-ahead (--read-ahead 0, --follow, and auto's
      // second pass): on this thread, a large tensor's pieces read by a helper thread while they
      // are sent.
      auto send_now = [&](const DumpItem& it, int64_t index, v1::DataMode mode, Loaded l) {
        prepare(it, mode, &l);
        const std::shared_ptr<FilePieces> pieces = l.pieces;  // none when sent by reference
        if (pieces == nullptr) return send_loaded(it, index, mode, std::move(l), false);
        std::thread fill([pieces] { pieces->Fill(); });
        const bool ok = send_loaded(it, index, mode, std::move(l), false);
        pieces->Cancel();  // the stream went away part way: Fill stops waiting for room
        fill.join();
        return ok;
      };
      auto send_item = [&](size_t i, v1::DataMode mode) {
        return send_now(dump->items[i], static_cast<int64_t>(i), mode, load_now(dump->items[i], mode));
      };
      std::thread writer([&] {
        if (o.follow) {
          // Poll the directory; an item goes once its data file is complete (it reads back, or
          // has the size its header and the listing give).
          std::set<std::string> sent(held.begin(), held.end());
          auto last_new = std::chrono::steady_clock::now();
          while (true) {
            // The marker is looked at before the listing: the writer creates it after its last
            // file, so a listing that starts after the marker exists sees every file. (Checked
            // after the listing, a file written between the two could be missed.)
            const bool marker = std::filesystem::exists(std::filesystem::path(o.path) / o.end_marker);
            bool all_sent = false;
            if (absl::StatusOr<Dump> now = open_dump(); now.ok()) {
              all_sent = true;
              for (DumpItem& it : now->items) {
                if (sent.count(it.name)) continue;
                Loaded loaded = load_now(it, first_mode);
                // A link outside the tree is final (sent with its read error); another failure
                // is a file still being written.
                if (!loaded.status.ok() && !absl::IsPermissionDenied(it.read_error)) {
                  all_sent = false;  // still being written
                  continue;
                }
                auto [pos, inserted] = follow_index.try_emplace(it.name, static_cast<int64_t>(follow_index.size()));
                (void)inserted;
                if (!send_now(it, pos->second, first_mode, std::move(loaded))) return;
                sent.insert(it.name);
                ++follow_items;
                last_new = std::chrono::steady_clock::now();
              }
            }
            if (marker && all_sent) break;
            if (std::chrono::steady_clock::now() - last_new > std::chrono::seconds(o.idle_timeout_seconds)) {
              err << "parity-agent: no new complete item for " << o.idle_timeout_seconds
                  << " s; ending the upload\n";
              break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
          }
          v1::UploadRequest end;
          end.mutable_end();
          stream->Write(end);
          stream->WritesDone();
          return;
        }
        {
          std::vector<size_t> order;
          for (size_t i = 0; i < dump->items.size(); ++i) {
            if (!held.count(dump->items[i].name)) order.push_back(i);
          }
          if (o.read_ahead > 0) {
            // The dedup offer (hash and HaveBlobs) is made on the read-ahead thread too, while
            // earlier items are being sent.
            Prefetcher ahead(dump->items, std::move(order), static_cast<size_t>(o.read_ahead), 256ull << 20,
                             [&](const DumpItem& it) {
                               if (hooks.before_read_ahead) hooks.before_read_ahead(it.name);
                               return load_now(it, first_mode);
                             },
                             [&](const DumpItem& it, Loaded* l) { prepare(it, first_mode, l); });
            size_t i;
            Loaded loaded;
            bool more = false;
            while (ahead.Next(&i, &loaded, &more)) {
              if (!send_loaded(dump->items[i], static_cast<int64_t>(i), first_mode, std::move(loaded), more)) {
                return;
              }
            }
          } else {
            for (size_t i : order) {
              if (!send_item(i, first_mode)) return;
            }
          }
        }
        if (o.mode == "auto") {
          v1::UploadRequest f;
          f.mutable_flush();
          if (!stream->Write(f)) return;
          std::vector<std::string> wanted;
          {
            absl::MutexLock l(&flush_mu);
            flush_mu.Await(absl::Condition(
                +[](std::optional<std::vector<std::string>>* n) { return n->has_value(); }, &flush_names));
            wanted = *flush_names;
          }
          const std::set<std::string> want(wanted.begin(), wanted.end());
          for (size_t i = 0; i < dump->items.size(); ++i) {
            if (want.count(dump->items[i].name) && !send_item(i, v1::DATA_MODE_DATA)) return;
          }
        }
        v1::UploadRequest end;
        end.mutable_end();
        stream->Write(end);
        stream->WritesDone();
        // All data sent: a leader waiting for more would wait for ever.
        if (hooks.pacer != nullptr && !hooks.pacer_leads) hooks.pacer->Release();
      });
      while (stream->Read(&resp)) {
        switch (resp.msg_case()) {
          case v1::UploadResponse::kAck: {
            // Items, not acknowledgements: --mode auto sends a disagreeing item twice
            // (statistics, then data) and it is acknowledged each time.
            if (acked_names.insert(resp.ack().name()).second) ++acks;
            if (hooks.on_ack) hooks.on_ack(resp.ack().name());
            const size_t total = std::max(dump->items.size(), follow_items.load());
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - upload_start).count();
            const double mib = static_cast<double>(data_bytes.load()) / (1 << 20);
            const double eta = acks > 0 ? secs / static_cast<double>(acks) *
                                              static_cast<double>(total > static_cast<size_t>(acks) ? total - acks : 0)
                                        : 0;
            bar.Update(std::min<size_t>(static_cast<size_t>(acks), total), total,
                       absl::StrFormat(" items, %.1f MiB, %.1f MiB/s, ETA %.0f s", mib,
                                       secs > 0 ? mib / secs : 0.0, eta));
            break;
          }
          case v1::UploadResponse::kRejected:
            ++rejected;
            err << "parity-agent: rejected " << resp.rejected().name() << ": " << resp.rejected().message() << "\n";
            break;
          case v1::UploadResponse::kVerdict: {
            {
              absl::MutexLock l(&latency_mu);
              auto sent = sent_at.find(resp.verdict().key().name());
              if (sent != sent_at.end()) {
                latencies_ms.push_back(std::chrono::duration<double, std::milli>(
                                           std::chrono::steady_clock::now() - sent->second)
                                           .count());
                sent_at.erase(sent);
              }
            }
            if (o.json || hooks.quiet_verdicts) break;
            const v1::OpResult& r = resp.verdict();
            CheckResult c = CheckResultFromProto(r);
            bar.Finish();
            // Streamed as they come: fixed columns (an item name past 48 bytes pushes its
            // metrics right), under one header.
            if (!verdict_header_printed) {
              out << Pad("VERDICT", 10) << "  " << Pad("ITEM", 48) << "  METRICS\n";
              verdict_header_printed = true;
            }
            out << Paint(Pad(VerdictName(c.verdict), 10), VerdictColorCode(c.verdict), o.color) << "  "
                << Pad(r.key().name(), 48) << "  " << KeyMetrics(PolicyFromProto(r.policy()), c) << "\n";
            break;
          }
          case v1::UploadResponse::kSummary:
            summary = resp.summary();
            have_summary = true;
            break;
          case v1::UploadResponse::kFlushDone: {
            absl::MutexLock l(&flush_mu);
            flush_names = std::vector<std::string>(resp.flush_done().full_data_names().begin(),
                                                   resp.flush_done().full_data_names().end());
            break;
          }
          default: break;
        }
      }
      {
        // A stream that ended before FlushDone must not leave the writer waiting.
        absl::MutexLock l(&flush_mu);
        if (!flush_names) flush_names = std::vector<std::string>();
      }
      if (!have_summary) ctx.TryCancel();  // unblocks a writer stuck on a dead stream
      writer.join();
      st = stream->Finish();
      bar.Finish();
      if (st.ok() && have_summary) {
        if (hooks.completed != nullptr) *hooks.completed = true;
        break;
      }
      if (st.ok()) st = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream ended without a summary");
    } else {
      st = stream->Finish();
      if (st.ok()) st = grpc::Status(grpc::StatusCode::UNAVAILABLE, "no UploadAccepted");
    }
    if (hooks.canceller != nullptr && hooks.canceller->cancelled()) {
      err << "parity-agent: upload of " << o.path << " stopped\n";
      return 2;
    }
    // Reconnect on transport failures, with exponential backoff, within --retry-seconds; and on
    // RESOURCE_EXHAUSTED that parityd did not choose: its gRPC memory quota cancelled the stream.
    // The trailer's key is parity.proto's (server/ingest_service.h: kUploadEndedByParitydKey).
    const bool ended_by_parityd = ctx.GetServerTrailingMetadata().count("parityd-ended") != 0;
    const bool retryable = st.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           st.error_code() == grpc::StatusCode::CANCELLED ||
                           st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                           (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED && !ended_by_parityd);
    const auto now = std::chrono::steady_clock::now();
    if (acks != acks_at_loss) {
      lost_since = now;
      acks_at_loss = acks;
      backoff = std::chrono::milliseconds(500);
    }
    if (!retryable || now + backoff > lost_since + std::chrono::seconds(o.retry_seconds)) {
      err << "parity-agent: upload failed: " << st.error_message() << " (code " << st.error_code() << ", "
          << o.server << ", attempt " << attempt << ")" << TlsHint(st.error_message()) << "\n";
      return 2;
    }
    const bool quota = st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
    // Jittered (half to all of the backoff): the streams a quota cancels together, or the agents
    // of a restarted parityd, do not all come back at the same instant.
    const auto wait = std::chrono::milliseconds(
        backoff.count() / 2 + static_cast<int64_t>(jitter() % static_cast<uint64_t>(backoff.count() / 2 + 1)));
    err << "parity-agent: " << (quota ? "stream cancelled by the server's gRPC memory quota (" : "connection lost (")
        << st.error_message() << "); reconnecting in " << wait.count() << " ms (attempt " << attempt + 1 << ")"
        << TlsHint(st.error_message()) << "\n";
    std::this_thread::sleep_for(wait);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(30000));
  }
  if (load_errors > 0) {
    err << "parity-agent: " << load_errors << " tensors could not be read; each was sent with its read error "
        << "(a job reports it as an ERROR row) and whatever statistics the dump's index holds (last: "
        << load_error_text << ")\n";
  }
  const v1::Job& job = summary.job();
  if (o.json) {
    Json j = Json::MakeObject();
    j.Set("run_id", Json::String(accepted.run_id()));
    j.Set("job_id", Json::String(accepted.job_id()));
    if (!o.against_run_id.empty()) j.Set("golden_run_id", Json::String(o.against_run_id));
    j.Set("items_acknowledged", Json::Integer(acks));
    j.Set("items_rejected", Json::Integer(rejected));
    j.Set("mode", Json::String(o.mode));
    j.Set("data_bytes_sent", Json::Integer(static_cast<int64_t>(data_bytes.load())));
    j.Set("data_bytes_in_dump", Json::Integer(static_cast<int64_t>(full_bytes.load())));
    j.Set("data_bytes_deduplicated", Json::Integer(static_cast<int64_t>(dedup_bytes.load())));
    // Dedup offers: probes by length and CRC-32 answered, and SHA-256 hashes taken (only for
    // tensors a probe said may be held, or every candidate with a server without probes).
    j.Set("dedup_probes", Json::Integer(dedup_probes.load()));
    j.Set("dedup_hashes", Json::Integer(dedup_hashes.load()));
    j.Set("tensors_read_in_pieces", Json::Integer(piece_tensors.load()));
    {
      absl::MutexLock l(&latency_mu);
      std::sort(latencies_ms.begin(), latencies_ms.end());
      Json lat = Json::MakeObject();
      auto pct = [&](double q) {
        return latencies_ms.empty() ? 0.0 : latencies_ms[static_cast<size_t>(q * (latencies_ms.size() - 1))];
      };
      lat.Set("count", Json::Integer(static_cast<int64_t>(latencies_ms.size())));
      lat.Set("p50", Json::Number(pct(0.5)));
      lat.Set("p99", Json::Number(pct(0.99)));
      j.Set("verdict_latency_ms", std::move(lat));
    }
    j.Set("job", summary.has_job() ? remote::JobJson(job) : Json());
    out << j.Dump(2) << "\n";
  } else {
    out << "\nrun " << accepted.run_id() << ": " << acks << " items acknowledged, " << rejected << " rejected; "
        << data_bytes.load() << " of " << full_bytes.load() << " tensor data bytes sent (mode " << o.mode
        << (dedup_bytes.load() ? absl::StrCat("; ", dedup_bytes.load(), " already held, sent by reference") : std::string())
        << ")\n";
    if (have_summary && summary.has_job()) {
      out << "job " << job.job_id() << " " << remote::StateText(job.state()) << ": "
          << remote::CountsText(job.counts()) << "\n";
      if (!job.error().empty()) out << "job error: " << job.error() << "\n";
      if (!job.first_culprit().empty()) {
        out << Paint("First culprit", "31;1", o.color) << ": " << TerminalSafe(job.first_culprit()) << "\n";
      } else if (job.state() == v1::JOB_STATE_DONE) {
        out << "No culprit: no operator's outputs fail while its inputs pass.\n";
      }
      if (o.mode == "stats" || dump->mode == DumpMode::kStatistics) out << kStatisticsOnlyNote << "\n";
    }
  }
  // A job that failed (it could not store its results) is a system error, not a verdict.
  if (rejected > 0 || load_errors > 0) return kExitUsage;
  if (!summary.has_job()) return kExitOk;  // a golden run: nothing was compared, nothing asked
  if (job.state() == v1::JOB_STATE_FAILED) return kExitUsage;
  const CheckOutcome outcome = OutcomeFromProto(job);
  if (const std::string note = IncompleteNote(outcome, o.allow_unmatched); !note.empty()) {
    err << "parity-agent: job " << job.job_id() << " " << note << "\n";
  }
  return OutcomeExitCode(outcome, o.allow_unmatched);
}

int RunUploadPair(const UploadOptions& o, const std::string& golden_path, const std::string& target_path,
                  std::ostream& out, std::ostream& err) {
  absl::Mutex lines_mu;  // whole lines from both sides
  UploadCanceller stop_target;
  struct GoldenState {
    std::optional<std::string> run_id;
    bool ended = false;
  };
  absl::Mutex mu;
  GoldenState golden_state;  // guarded by mu
  int golden_rc = 0;
  bool golden_completed = false;
  UploadOptions g = o;
  g.path = golden_path;
  g.role = "golden";
  g.json = false;
  g.progress = false;  // the target's bar counts
  if (!o.run_id_file.empty()) g.run_id_file = o.run_id_file + ".golden";
  UploadPacer pacer(o.pair_lead_bytes);
  UploadHooks gh;
  gh.pacer = &pacer;
  gh.pacer_leads = true;
  gh.quiet_verdicts = true;
  gh.on_run_id = [&](const std::string& id) {
    absl::MutexLock l(&mu);
    golden_state.run_id = id;
  };
  gh.completed = &golden_completed;
  std::thread golden([&] {
    int rc;
    {
      LinesTo gout(o.json ? err : out, &lines_mu), gerr(err, &lines_mu);
      rc = RunUpload(g, gout, gerr, gh);
    }
    // Without the golden run complete the target's job cannot finish: stop waiting for it.
    if (!golden_completed) stop_target.Cancel();
    absl::MutexLock l(&mu);
    golden_rc = rc;
    golden_state.ended = true;
  });
  std::string golden_id;
  {
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(
        +[](GoldenState* s) { return s->run_id.has_value() || s->ended; }, &golden_state));
    if (golden_state.run_id) golden_id = *golden_state.run_id;
  }
  if (golden_id.empty()) {  // the golden upload failed before its run existed (it said why)
    pacer.Release();
    golden.join();
    return 2;
  }
  UploadOptions t = o;
  t.path = target_path;
  t.role = "target";
  t.against_run_id = golden_id;
  t.summary_waits_for_job = true;
  if (!o.run_id_file.empty()) t.run_id_file = o.run_id_file + ".target";
  UploadHooks th;
  th.canceller = &stop_target;
  th.pacer = &pacer;
  int target_rc;
  {
    LinesTo tout(out, &lines_mu), terr(err, &lines_mu);
    target_rc = RunUpload(t, tout, terr, th);
  }
  pacer.Release();  // however the target ended
  golden.join();
  if (!golden_completed) {
    err << "parity-agent upload-pair: the golden upload of " << golden_path
        << " did not complete, so its comparison with " << target_path << " could not finish\n";
  }
  return WorseExitCode(golden_rc, target_rc);
}

std::vector<RankDump> FindRankDumps(const std::string& path,
                                    std::optional<std::vector<DirEntry>>* listing) {
  namespace fs = std::filesystem;
  if (listing != nullptr) listing->reset();
  std::error_code ec;
  auto number = [](const std::string& name, const std::string& prefix, std::string* n) {
    if (name.rfind(prefix, 0) != 0) return false;
    const std::string rest = name.substr(prefix.size());
    for (char c : rest) {
      if (c < '0' || c > '9') return false;
    }
    *n = rest;
    return true;
  };
  auto by_number = [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  };
  // The rank<N> directories holding a dump.json among `entries` (the listing of `dir`).
  auto ranks_in = [&](const std::string& dir, const std::vector<DirEntry>& entries, const std::string& step,
                      std::vector<RankDump>* out) {
    std::vector<RankDump> found;
    for (const DirEntry& e : entries) {
      std::string r;
      if (e.is_directory && number(e.name, "rank", &r)) {
        const std::string rank_dir = (fs::path(dir) / e.name).string();
        if (fs::exists(fs::path(rank_dir) / "dump.json", ec)) found.push_back({rank_dir, step, r});
      }
    }
    std::sort(found.begin(), found.end(), [&](const RankDump& a, const RankDump& b) { return by_number(a.rank, b.rank); });
    out->insert(out->end(), found.begin(), found.end());
  };
  if (!fs::is_directory(path, ec) || fs::exists(fs::path(path) / "dump.json", ec)) return {{path, "", ""}};
  // One listing of the top directory (it may hold thousands of tensor files).
  absl::StatusOr<std::vector<DirEntry>> top = ListDirectory(path);
  if (!top.ok()) return {{path, "", ""}};  // OpenDump reports the error
  std::vector<std::pair<std::string, std::string>> steps;  // (number, directory)
  for (const DirEntry& e : *top) {
    std::string s;
    if (e.is_directory && number(e.name, "step", &s)) steps.emplace_back(s, (fs::path(path) / e.name).string());
  }
  std::sort(steps.begin(), steps.end(), [&](const auto& a, const auto& b) { return by_number(a.first, b.first); });
  std::vector<RankDump> out;
  for (const auto& [s, dir] : steps) {
    if (absl::StatusOr<std::vector<DirEntry>> listing = ListDirectory(dir); listing.ok()) {
      ranks_in(dir, *listing, s, &out);
    }
  }
  if (steps.empty()) ranks_in(path, *top, "", &out);
  if (out.empty()) {
    if (listing != nullptr) *listing = std::move(*top);
    return {{path, "", ""}};
  }
  return out;
}

}  // namespace parity
