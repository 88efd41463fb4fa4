#include "common/compare/engine.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/batch_read.h"
#include "common/base/file_util.h"
#include "common/base/status_macros.h"
#include "common/checks/msprobe_kernel.h"
#include "common/formats/torchair.h"
#include "common/checks/msprobe_policy.h"
#include "common/checks/stats.h"
#include "common/formats/argument.h"
#include "common/formats/npy.h"
#include "common/compare/pairing.h"

namespace parity {

const char kFuzzyMatchNote[] = " Fuzzy matching data, the comparison accuracy may be affected.";

void FillMissingStats(DumpItem* it) {
  if (!it->is_tensor || it->max.is_number() || it->mean.is_number()) return;
  if (it->data_path.empty() && it->raw_data_path.empty()) return;
  absl::StatusOr<Tensor> t = LoadItemTensor(*it);
  if (!t.ok()) return;
  const TensorStats s = ComputeStats(*t);
  auto json = [](const std::optional<double>& v) { return v ? Json::Number(*v) : Json(); };
  it->max = json(s.max);
  it->min = json(s.min);
  it->mean = json(s.mean);
  it->norm = json(s.norm);
}

CheckResult UnmatchedResult(DumpMode mode, MissingSide missing, const std::string& note) {
  CheckResult r;
  r.policy = "msprobe";
  r.verdict = Verdict::kUnmatched;
  switch (mode) {
    case DumpMode::kTensor:
      for (const char* c : kMsprobeRealColumns) r.Add(c, MetricValue::Text(kUnsupported));
      r.peer_verdict = "None";
      break;
    case DumpMode::kStatistics:
      for (const char* c : kMsprobeStatsColumns) r.Add(c, MetricValue::Text(kNotApplicable));
      r.peer_verdict = kNotApplicable;
      break;
    case DumpMode::kMd5:
      r.peer_verdict = kNotApplicable;
      break;
  }
  r.message = absl::StrCat(missing == MissingSide::kGolden ? "No bench data matched. ("
                                                            : "No target data matched. (",
                           note, ")");
  return r;
}

namespace {

// An item's L2 norm as its dump (or FillMissingStats) recorded it.
std::optional<double> NormOf(const Json& norm) {
  if (!norm.is_number()) return std::nullopt;
  return norm.as_double();
}

// Non-tensor arguments (ints, floats, None...): msprobe's columns (placeholders in tensor mode,
// the value taken as its statistics, CRCs of str(value) in md5 mode) and message; the verdict
// compares the values themselves, and a difference is noted after msprobe's message.
CheckResult NonTensorPair(const DumpItem& t, const DumpItem& g, DumpMode mode, PolicyKind kind) {
  CheckResult r;
  const bool msprobe = kind == PolicyKind::kMsprobe;
  if (mode == DumpMode::kMd5) {
    r = MsprobeCompareCrc(t.md5, g.md5);
  } else if (msprobe && mode == DumpMode::kTensor) {
    for (const char* c : kMsprobeRealColumns) r.Add(c, MetricValue::Text(kUnsupported));
    r.peer_verdict = "None";
    r.message = "NPU does not have data file.";
  } else if (msprobe) {
    const CheckResult stats = MsprobeCompareStats(ArgumentStats(t), ArgumentStats(g));
    for (const Metric& m : stats.metrics) {
      if (m.name != "Requires_grad Consistent") r.Add(m.name, m.value);
    }
    r.peer_verdict = stats.peer_verdict;
    r.message = stats.message;
  }
  r.policy = PolicyName(kind);
  const std::string tv = PyStr(t.value), gv = PyStr(g.value);
  if (tv == gv && t.type == g.type) {
    r.verdict = Verdict::kPass;
    return r;
  }
  r.verdict = Verdict::kFail;
  if (!r.message.empty() && r.message.back() != ' ') r.message += ' ';
  absl::StrAppend(&r.message, "Non-tensor values differ: golden ", g.type, " ", gv, ", target ", t.type,
                  " ", tv);
  return r;
}

std::string NeedsTensorData(PolicyKind k, DumpMode mode) {
  return absl::StrCat("the ", PolicyName(k), " policy needs tensor data; this dump holds ",
                      DumpModeName(mode), " only (use --policy msprobe)");
}

// msprobe's note on a real-data or CRC row whose sides disagree on requires_grad.
void NoteRequiresGrad(const DumpItem& t, const DumpItem& g, CheckResult* r) {
  if (MsprobeRequiresGradText(t.requires_grad) != MsprobeRequiresGradText(g.requires_grad)) {
    r->message += "Requires_grad inconsistent. ";
  }
}

// A .npy file on disk whose bytes the listing did not keep: the pair may be read in pieces.
bool IsUnreadNpyFile(const DumpItem& it) {
  return it.read_error.ok() && it.raw_data_path.empty() && it.safetensors_key.empty() &&
         it.pt_key.empty() && it.ge_index < 0 && it.npy_file.owner == nullptr &&
         absl::EndsWith(it.data_path, ".npy");
}

// The item's .npy file open with its header read: the one the read-ahead kept open, or opened
// here.
absl::StatusOr<std::shared_ptr<const OpenNpyFile>> OpenItemNpy(const DumpItem& it) {
  if (it.npy_open != nullptr) return it.npy_open;
  absl::StatusOr<RandomAccessFile> file = RandomAccessFile::Open(it.data_path);
  if (!file.ok()) return file.status();
  absl::StatusOr<NpyLayout> layout = ReadNpyLayout(*file);
  if (!layout.ok()) return layout.status();
  return std::make_shared<const OpenNpyFile>(OpenNpyFile{*std::move(file), *std::move(layout)});
}

// msprobe's real-data compare of two .npy files read in pieces (MsprobeKernelRunPieces) rather
// than loaded whole: the same result as MsprobeCompareReal on the loaded pair, bit for bit, for
// the common case (one dtype, or two the vectorised kernel pairs, one shape of rank >= 1, native
// byte order and C order on both sides, no inf/nan). nullopt when the pair is not that case or a file cannot be read as it was
// listed: the caller then loads both, and LoadItemTensor's checks and errors apply.
std::optional<CheckResult> MsprobeNpyInPieces(const DumpItem& t, const DumpItem& g,
                                              const MsprobeOptions& opts) {
  if (!IsUnreadNpyFile(t) || !IsUnreadNpyFile(g)) return std::nullopt;
  absl::StatusOr<std::shared_ptr<const OpenNpyFile>> topen = OpenItemNpy(t);
  if (!topen.ok()) return std::nullopt;
  absl::StatusOr<std::shared_ptr<const OpenNpyFile>> gopen = OpenItemNpy(g);
  if (!gopen.ok()) return std::nullopt;
  const RandomAccessFile* tf = &(*topen)->file;
  const RandomAccessFile* gf = &(*gopen)->file;
  const NpyLayout* tl = &(*topen)->layout;
  const NpyLayout* gl = &(*gopen)->layout;
  if (!tl->native || !gl->native || tl->shape != gl->shape || tl->shape.empty() ||
      !MsprobeKernelSupports(tl->dtype, gl->dtype) ||
      (t.has_shape && t.shape != tl->shape) || (g.has_shape && g.shape != gl->shape)) {
    return std::nullopt;
  }
  absl::StatusOr<int64_t> numel = CheckedNumel(tl->shape);
  if (!numel.ok() || *numel == 0) return std::nullopt;
  const uint64_t esize[2] = {DTypeSize(tl->dtype), DTypeSize(gl->dtype)};
  double t1 = 0, t5 = 0;
  MsprobeThresholds(tl->dtype, gl->dtype, &t1, &t5);
  const RandomAccessFile* files[2] = {tf, gf};  // npu (target), bench (golden)
  const uint64_t offsets[2] = {tl->data_offset, gl->data_offset};
  absl::StatusOr<MsprobePartial> p = MsprobeKernelRunPieces(
      tl->dtype, gl->dtype, *numel, t1, t5,
      [&](int side, int64_t begin, int64_t count, char* buf) {
        return files[side]->ReadExact(offsets[side] + static_cast<uint64_t>(begin) * esize[side],
                                      static_cast<size_t>(count) * esize[side], buf);
      },
      /*parallel_for=*/nullptr);
  if (!p.ok() || p->nonfinite) return std::nullopt;
  return MsprobeRealFromPartial(*numel, *p, opts, MsprobeLoadedDtypesDiffer(tl->dtype, gl->dtype));
}

// Whether NpyReadAhead reads `it`: a deferred .npy item, or a tensor in a .npy file not read
// yet (msprobe's dump_tensor_data).
bool ReadsAhead(const DumpItem& it) {
  return it.npy_deferred || (it.is_tensor && IsUnreadNpyFile(it));
}

// Reads the .npy files of a window of pairs ahead of comparing them, in one batch
// (BatchReader): each file's first kProbeReadBytes + 1 bytes, into `arena`; a file shorter than
// that is then whole, and its item takes those bytes as npy_file (a deferred item is resolved
// from them). A larger file is kept open with its header parsed from those bytes, and its item
// takes it as npy_open: comparing it in pieces then neither opens it again nor reads its header
// again. Anything else (an error, a header that does not parse) is read as without reading
// ahead: ResolveDeferredNpy for a deferred item, then CompareItems, which give the same items,
// rows and errors.
class NpyReadAhead {
 public:
  static constexpr size_t kWindowPairs = BatchReader::kMaxBatch / 2;
  using Window = std::vector<std::array<DumpItem*, 2>>;  // per pair: target, golden (or null)

  NpyReadAhead(const Dump& golden, const Dump& target, SmallFileArena* arena)
      : arena_(arena), reader_(BatchReader::Create()) {
    // Deferred items are named relative to their dump's root (OpenDump's listing).
    dir_fd_[0] = ::open(target.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    dir_fd_[1] = ::open(golden.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  static bool Wanted(const Dump& d) {
    if (d.mode != DumpMode::kTensor) return false;
    for (const DumpItem& it : d.items) {
      if (ReadsAhead(it)) return true;
    }
    return false;
  }
  ~NpyReadAhead() {
    for (int fd : dir_fd_) {
      if (fd >= 0) ::close(fd);
    }
  }
  NpyReadAhead(const NpyReadAhead&) = delete;
  NpyReadAhead& operator=(const NpyReadAhead&) = delete;

  void ReadAhead(const Window& window) {
    ahead_.clear();
    arena_->Recycle();  // the last window's buffers are all released by now
    ahead_.resize(window.size());
    std::vector<BatchReader::Request> requests;
    std::vector<std::pair<size_t, int>> slots;  // (pair in window, side) of each request
    std::vector<std::shared_ptr<char>> buffers;
    for (size_t k = 0; k < window.size(); ++k) {
      for (int side = 0; side < 2; ++side) {
        const DumpItem* it = window[k][side];
        if (it == nullptr || !ReadsAhead(*it)) continue;
        std::shared_ptr<char> buf = arena_->Take(kProbeReadBytes + 1);
        if (buf == nullptr) continue;
        BatchReader::Request r;
        if (it->npy_deferred && dir_fd_[side] >= 0) {
          r.dir_fd = dir_fd_[side];
          r.name = it->data_name.c_str();
        } else {
          r.dir_fd = AT_FDCWD;
          r.name = it->data_path.c_str();
        }
        r.buf = buf.get();
        r.len = kProbeReadBytes + 1;
        r.keep_open_if_longer = true;
        requests.push_back(r);
        slots.emplace_back(k, side);
        buffers.push_back(std::move(buf));
      }
    }
    reader_->Read(absl::MakeSpan(requests));
    for (size_t i = 0; i < requests.size(); ++i) {
      const int64_t got = requests[i].result;
      Ahead& ahead = ahead_[slots[i].first][slots[i].second];
      if (requests[i].fd >= 0) {  // a larger file, left open
        const DumpItem* it = window[slots[i].first][slots[i].second];
        absl::StatusOr<RandomAccessFile> file = RandomAccessFile::Adopt(requests[i].fd, it->data_path);
        if (!file.ok()) continue;  // read again
        absl::StatusOr<NpyLayout> layout =
            ReadNpyLayout(*file, absl::string_view(buffers[i].get(), static_cast<size_t>(got)));
        if (!layout.ok()) continue;  // read again: the precise error then
        ahead.open = std::make_shared<const OpenNpyFile>(OpenNpyFile{*std::move(file), *std::move(layout)});
        continue;
      }
      if (got <= 0 || static_cast<uint64_t>(got) > kProbeReadBytes) continue;  // read again
      ahead.whole.bytes = absl::string_view(buffers[i].get(), static_cast<size_t>(got));
      ahead.whole.owner = std::move(buffers[i]);
    }
  }

  // Readies the item on `side` (0 target, 1 golden) of pair `k` of the last window for
  // CompareItems: resolves it when deferred, gives it the bytes read ahead. True when its
  // npy_file was set here (the caller drops it after comparing).
  bool Ready(size_t k, int side, DumpItem* item) {
    Ahead ahead;
    if (k < ahead_.size()) ahead = std::move(ahead_[k][side]);
    if (item->npy_deferred) {
      if (ahead.open != nullptr) {
        ResolveDeferredNpyFromOpen(item, std::move(ahead.open));
      } else if (ahead.whole.owner == nullptr ||
                 !ResolveDeferredNpyFrom(item, std::move(ahead.whole))) {
        ResolveDeferredNpy(item, arena_);
      }
      return true;
    }
    if (item->npy_file.owner != nullptr || item->npy_open != nullptr) return false;
    if (ahead.open != nullptr) {
      item->npy_open = std::move(ahead.open);
      return true;
    }
    if (ahead.whole.owner == nullptr) return false;
    item->npy_file = std::move(ahead.whole);
    return true;
  }

 private:
  struct Ahead {
    SharedBytes whole;                         // a whole small file
    std::shared_ptr<const OpenNpyFile> open;  // or a larger one, open
  };

  SmallFileArena* const arena_;
  const std::unique_ptr<BatchReader> reader_;
  int dir_fd_[2];
  std::vector<std::array<Ahead, 2>> ahead_;
};

}  // namespace

CheckResult CompareItems(const DumpItem* t, const DumpItem* g, DumpMode mode,
                         const PolicyConfig& policy, const std::string& unmatched_note) {
  if (t == nullptr || g == nullptr) {
    return UnmatchedResult(mode, g == nullptr ? MissingSide::kGolden : MissingSide::kTarget, unmatched_note);
  }
  if (!t->is_tensor || !g->is_tensor) return NonTensorPair(*t, *g, mode, policy.kind);
  if (mode == DumpMode::kMd5 || mode == DumpMode::kStatistics) {
    if (policy.kind != PolicyKind::kMsprobe) {
      CheckResult r;
      r.policy = PolicyName(policy.kind);
      r.verdict = Verdict::kError;
      r.message = NeedsTensorData(policy.kind, mode);
      return r;
    }
    if (mode == DumpMode::kMd5) {
      CheckResult r = MsprobeCompareCrc(t->md5, g->md5);
      NoteRequiresGrad(*t, *g, &r);
      return r;
    }
    MsprobeStats ns{t->max, t->min, t->mean, t->norm, t->requires_grad};
    MsprobeStats bs{g->max, g->min, g->mean, g->norm, g->requires_grad};
    return MsprobeCompareStats(ns, bs);
  }
  // Real data.
  if (policy.kind == PolicyKind::kMsprobe) {
    if (t->data_path.empty()) return MsprobeNoData("NPU does not have data file.");
    if (g->data_path.empty()) return MsprobeNoData("Bench does not have data file.");
  }
  if (policy.kind == PolicyKind::kMsprobe) {
    if (std::optional<CheckResult> r = MsprobeNpyInPieces(*t, *g, policy.msprobe)) {
      NoteRequiresGrad(*t, *g, &*r);
      return *std::move(r);
    }
  }
  absl::StatusOr<Tensor> tt = LoadItemTensor(*t);
  absl::StatusOr<Tensor> gt = tt.ok() ? LoadItemTensor(*g) : absl::StatusOr<Tensor>(Tensor());
  if (!tt.ok() || !gt.ok()) {
    const DumpItem& bad = tt.ok() ? *g : *t;
    const absl::Status& st = tt.ok() ? gt.status() : tt.status();
    CheckResult r = MsprobeNoData(absl::StrCat("Dump file: ", bad.data_name,
                                               " not found or read failed. (", st.message(), ")"));
    r.policy = PolicyName(policy.kind);
    if (policy.kind != PolicyKind::kMsprobe) {
      r.metrics.clear();
      r.peer_verdict.clear();
    }
    return r;
  }
  CheckResult r;
  switch (policy.kind) {
    case PolicyKind::kMsprobe:
      r = MsprobeCompareReal(*tt, *gt, policy.msprobe);
      NoteRequiresGrad(*t, *g, &r);
      break;
    case PolicyKind::kForge:
      r = ForgeCheck(*gt, *tt, policy.forge);
      break;
    case PolicyKind::kTorch:
      r = TorchAssertClose(*tt, *gt, policy.torch);
      break;
  }
  return r;
}

namespace {

// The pairs of two dumps of one mode; two single files are compared whatever their names. Items
// compared with another item of the target run move that item to `golden` (MoveInRunGoldens).
absl::StatusOr<std::vector<ItemPair>> PairDumps(Dump& golden, Dump& target, const CompareConfig& config) {
  if (golden.mode != target.mode) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the dumps were taken in different modes: golden ", DumpModeName(golden.mode),
        ", target ", DumpModeName(target.mode), " (msprobe needs the same task on both sides)"));
  }
  if (golden.items.size() == 1 && target.items.size() == 1 &&
      (golden.format == "npy" || target.format == "npy")) {
    return std::vector<ItemPair>{{0, 0, false, ""}};
  }
  PairingOptions options = PairingOptionsFor(golden.format, target.format, config.fuzzy_match, config.mapping);
  MoveInRunGoldens(&target.items, &golden.items, &options);
  return PairItems(target.items, golden.items, options);
}

DumpItem* ItemOf(Dump* d, int index) { return index >= 0 ? &d->items[index] : nullptr; }

// Compares one pair into `row`: `slot` is its place in the reader's window (when reading ahead);
// the pair's bytes are released once it is compared.
void ComparePair(const ItemPair& p, Dump* golden_dump, Dump* target_dump, const CompareConfig& config,
                 DumpMode mode, NpyReadAhead* reader, size_t slot, SmallFileArena* arena, CompareRow* row) {
  auto ready = [&](DumpItem* it, int side) {
    if (it == nullptr) return false;
    if (reader != nullptr) return reader->Ready(slot, side, it);
    if (!it->npy_deferred) return false;
    ResolveDeferredNpy(it, arena);  // a deferred item in a statistics dump: not read ahead
    return true;
  };
  DumpItem* t = ItemOf(target_dump, p.target);
  DumpItem* g = ItemOf(golden_dump, p.golden);
  const DumpItem& any = t ? *t : *g;
  const PolicyConfig& policy = config.PolicyFor(any.name, any.api, any.op_type);
  row->target = p.target;
  row->golden = p.golden;
  row->policy = policy.kind;
  const bool t_ready = ready(t, 0);
  const bool g_ready = ready(g, 1);
  row->result = CompareItems(t, g, mode, policy, p.note);
  if (config.fill_missing_stats) {
    // While the pair's bytes are still in memory (read ahead), on this thread.
    for (DumpItem* it : {t, g}) {
      if (it != nullptr) FillMissingStats(it);
    }
  }
  for (DumpItem* it : {t_ready ? t : nullptr, g_ready ? g : nullptr}) {
    if (it == nullptr) continue;
    it->npy_file = SharedBytes();
    it->npy_open.reset();
  }
  if (p.fuzzy) row->result.message += kFuzzyMatchNote;
}

// The report's counts, first failure and culprits from its rows; the headers of items no pair
// named are read.
void FinishReport(Dump* golden_dump, Dump* target_dump, CompareReport* report) {
  for (size_t i = 0; i < report->rows.size(); ++i) {
    const CompareRow& row = report->rows[i];
    const Verdict v = row.result.verdict;
    report->counts[static_cast<int>(v)]++;
    if (report->first_failure < 0 && row.target >= 0 && (v == Verdict::kFail || v == Verdict::kError)) {
      report->first_failure = static_cast<int>(i);
    }
  }
  SmallFileArena arena;
  // Items no pair named (none today: pairs cover both dumps) still get their headers read.
  for (Dump* d : {golden_dump, target_dump}) {
    for (DumpItem& it : d->items) {
      if (!it.npy_deferred) continue;
      arena.Recycle();
      ResolveDeferredNpy(&it, &arena);
      it.npy_file = SharedBytes();
    }
  }
  std::vector<CulpritInput> culprit_input;
  for (const CompareRow& row : report->rows) {
    if (row.target < 0) continue;
    const DumpItem& t = target_dump->items[row.target];
    const DumpItem* g = row.golden >= 0 ? &golden_dump->items[row.golden] : nullptr;
    culprit_input.push_back({t.api, t.role, row.result.verdict,
                             ItemError(row.result, t.dtype, g ? NormOf(g->norm) : std::nullopt, NormOf(t.norm)),
                             t.dtype ? RoundingUnit(*t.dtype) : 0.0});
  }
  report->ops = AnalyzeCulprits(culprit_input, nullptr, &report->growth_floor,
                                target_dump->structure.parents.empty() ? nullptr : &target_dump->structure.parents);
  report->first_culprit = FirstCulprit(report->ops);
}

// Threads comparing pairs: as asked, but a thread holds up to a batch of files open while it
// reads a window ahead, and a window's larger files until their pairs are compared (about
// kFilesPerThread descriptors); fewer threads compare when the limit on open files would not
// allow that for each.
size_t CompareThreads(int threads, size_t windows) {
  constexpr uint64_t kFilesPerThread = 2 * NpyReadAhead::kWindowPairs + 16;
  const uint64_t files = OpenFileLimit();
  const uint64_t fit = files > 64 + kFilesPerThread ? (files - 64) / kFilesPerThread : 1;
  return std::min<size_t>({static_cast<size_t>(std::max(1, threads)), windows, static_cast<size_t>(fit)});
}

}  // namespace

void ApplyLayoutRules(absl::string_view golden_format, absl::string_view target_format, CompareConfig* config) {
  if (!IsTorchairFormat(golden_format) && !IsTorchairFormat(target_format)) return;
  config->base.msprobe.rule = MsprobeRule::kTorchair;
  for (OverrideRule& o : config->overrides) o.policy.msprobe.rule = MsprobeRule::kTorchair;
}

absl::StatusOr<CompareReport> CompareDumps(
    Dump* golden_dump, Dump* target_dump, const CompareConfig& given_config,
    const std::function<void(size_t, size_t)>& progress, int threads) {
  CompareConfig config = given_config;
  ApplyLayoutRules(golden_dump->format, target_dump->format, &config);
  PARITY_ASSIGN_OR_RETURN(const std::vector<ItemPair> pairs, PairDumps(*golden_dump, *target_dump, config));
  CompareReport report;
  report.mode = target_dump->mode;
  report.policy = config.base.kind;
  const size_t n = pairs.size();
  std::vector<CompareRow> rows(n);
  const bool read_ahead = NpyReadAhead::Wanted(*golden_dump) || NpyReadAhead::Wanted(*target_dump);
  constexpr size_t kWindow = NpyReadAhead::kWindowPairs;
  const size_t windows = (n + kWindow - 1) / kWindow;
  std::atomic<size_t> next_window{0};
  absl::Mutex progress_mu;
  size_t done = 0;  // guarded by progress_mu
  // One thread's share: windows taken in turn, each read ahead into the thread's own arena (small
  // .npy files, a window at a time: the same chunk's pages every time).
  auto work = [&] {
    ScopedPairWorker worker;
    SmallFileArena arena;
    std::optional<NpyReadAhead> reader;
    if (read_ahead) reader.emplace(*golden_dump, *target_dump, &arena);
    for (size_t w = next_window++; w < windows; w = next_window++) {
      const size_t begin = w * kWindow, end = std::min(n, begin + kWindow);
      if (reader) {
        NpyReadAhead::Window window;
        for (size_t j = begin; j < end; ++j) {
          window.push_back({ItemOf(target_dump, pairs[j].target), ItemOf(golden_dump, pairs[j].golden)});
        }
        reader->ReadAhead(window);
      }
      for (size_t index = begin; index < end; ++index) {
        ComparePair(pairs[index], golden_dump, target_dump, config, report.mode, reader ? &*reader : nullptr,
                    index - begin, &arena, &rows[index]);
        if (progress) {
          absl::MutexLock l(&progress_mu);
          progress(++done, n);
        }
      }
    }
  };
  std::vector<std::thread> helpers;
  for (size_t i = 1; i < CompareThreads(threads, windows); ++i) helpers.emplace_back(work);
  work();
  for (std::thread& h : helpers) h.join();
  report.rows = std::move(rows);
  FinishReport(golden_dump, target_dump, &report);
  return report;
}

}  // namespace parity
