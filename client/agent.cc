#include "client/agent.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/agent_upload.h"
#include "client/cli.h"
#include "client/terminal.h"
#include "common/formats/torchair.h"

namespace parity {

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
  return agent::Upload(o, out, err, hooks).Run();
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
    return kExitUsage;
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
        if (fs::exists(fs::path(rank_dir) / "dump.json", ec)) found.push_back({rank_dir, step, r, "", ""});
      }
    }
    std::sort(found.begin(), found.end(), [&](const RankDump& a, const RankDump& b) { return by_number(a.rank, b.rank); });
    out->insert(out->end(), found.begin(), found.end());
  };
  if (!fs::is_directory(path, ec) || fs::exists(fs::path(path) / "dump.json", ec)) return {{path, "", "", "", ""}};
  // One listing of the top directory (it may hold thousands of tensor files).
  absl::StatusOr<std::vector<DirEntry>> top = ListDirectory(path);
  if (!top.ok()) return {{path, "", "", "", ""}};  // OpenDump reports the error
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
  // A TorchAir tree (only a directory with subdirectories can be one).
  if (out.empty() && std::any_of(top->begin(), top->end(), [](const DirEntry& e) { return e.is_directory; })) {
    for (TorchairRun& r : FindTorchairRuns(path)) {
      out.push_back({std::move(r.path), "", std::move(r.rank), std::move(r.token), std::move(r.graph)});
    }
  }
  if (out.empty()) {
    if (listing != nullptr) *listing = std::move(*top);
    return {{path, "", "", "", ""}};
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> RankDumpParts(const RankDump& r) {
  std::vector<std::pair<std::string, std::string>> parts;
  for (const auto& [k, v] : {std::pair<const char*, const std::string*>{"step", &r.step}, {"rank", &r.rank},
                             {"token", &r.token}, {"graph", &r.graph}}) {
    if (!v->empty()) parts.emplace_back(k, *v);
  }
  return parts;
}

std::string RankDumpSuffix(const RankDump& r) {
  std::string s;
  for (const auto& [k, v] : RankDumpParts(r)) absl::StrAppend(&s, ".", k, v);
  return s;
}

std::string RankDumpTitle(const RankDump& r) {
  std::vector<std::pair<std::string, std::string>> parts = RankDumpParts(r);
  if (parts.empty()) return "step - rank -";
  std::string s;
  for (const auto& [k, v] : parts) absl::StrAppend(&s, s.empty() ? "" : " ", k, " ", v);
  return s;
}

}  // namespace parity
