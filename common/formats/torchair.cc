#include "common/formats/torchair.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/file_util.h"
#include "common/base/status_macros.h"
#include "common/formats/ge_dump.h"

namespace parity {
namespace fs = std::filesystem;

bool IsTorchairFormat(absl::string_view format) {
  return format == kTorchairGeFormat || format == kTorchairFxFormat;
}

namespace {

constexpr int kMaxGraphDepth = 64;
constexpr uint64_t kMaxGraphFileBytes = 1ull << 30;
constexpr size_t kMaxOpNameBytes = 1 << 16;
constexpr int kMaxTreeDepth = 8;

// A message of protobuf text format: its scalar fields (name -> values, in order) and its
// message fields (name -> messages, in order).
struct TextMessage {
  std::vector<std::pair<std::string, std::string>> scalars;
  std::vector<std::pair<std::string, std::unique_ptr<TextMessage>>> messages;

  const std::string* Scalar(absl::string_view name) const {
    for (const auto& [k, v] : scalars) {
      if (k == name) return &v;
    }
    return nullptr;
  }
};

class TextParser {
 public:
  TextParser(absl::string_view text, absl::string_view origin) : t_(text), origin_(origin) {}

  absl::Status ParseInto(TextMessage* top) {
    std::vector<TextMessage*> stack = {top};
    while (true) {
      SkipSpace();
      if (p_ == t_.size()) break;
      const char c = t_[p_];
      if (c == '}' || c == '>') {
        if (stack.size() == 1) return Err("a '}' closes no block");
        stack.pop_back();
        ++p_;
        continue;
      }
      std::string name;
      if (!Identifier(&name)) return Err(absl::StrCat("unexpected '", std::string(1, c), "'"));
      SkipSpace();
      bool colon = false;
      if (p_ < t_.size() && t_[p_] == ':') {
        colon = true;
        ++p_;
        SkipSpace();
      }
      if (p_ < t_.size() && (t_[p_] == '{' || t_[p_] == '<')) {
        if (static_cast<int>(stack.size()) > kMaxGraphDepth) return Err("blocks nested deeper than 64");
        ++p_;
        auto child = std::make_unique<TextMessage>();
        TextMessage* raw = child.get();
        stack.back()->messages.emplace_back(std::move(name), std::move(child));
        stack.push_back(raw);
        continue;
      }
      if (!colon) return Err(absl::StrCat("field '", name, "' has neither ':' nor '{'"));
      std::string value;
      PARITY_RETURN_IF_ERROR(Value(&value));
      stack.back()->scalars.emplace_back(std::move(name), std::move(value));
    }
    if (stack.size() != 1) return Err("a block is not closed at the end of the file");
    return absl::OkStatus();
  }

 private:
  absl::Status Err(absl::string_view what) const {
    const int line = 1 + static_cast<int>(std::count(t_.begin(), t_.begin() + std::min(p_, t_.size()), '\n'));
    return absl::InvalidArgumentError(absl::StrCat(origin_, ":", line, ": not a GE graph in text format: ", what));
  }
  void SkipSpace() {
    while (p_ < t_.size()) {
      const char c = t_[p_];
      if (c == '#') {
        while (p_ < t_.size() && t_[p_] != '\n') ++p_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ';' || c == ',') {
        ++p_;
      } else {
        break;
      }
    }
  }
  bool Identifier(std::string* out) {
    const size_t start = p_;
    while (p_ < t_.size() && (absl::ascii_isalnum(t_[p_]) || t_[p_] == '_' || t_[p_] == '.' || t_[p_] == '[' ||
                              t_[p_] == ']' || t_[p_] == '/')) {
      ++p_;
    }
    *out = std::string(t_.substr(start, p_ - start));
    return p_ > start;
  }
  absl::Status Value(std::string* out) {
    if (p_ < t_.size() && (t_[p_] == '"' || t_[p_] == '\'')) {
      // Adjacent strings concatenate.
      while (p_ < t_.size() && (t_[p_] == '"' || t_[p_] == '\'')) {
        PARITY_RETURN_IF_ERROR(QuotedString(out));
        SkipSpace();
      }
      return absl::OkStatus();
    }
    const size_t start = p_;
    while (p_ < t_.size() && !absl::ascii_isspace(t_[p_]) && t_[p_] != '}' && t_[p_] != '>' && t_[p_] != '{' &&
           t_[p_] != ';' && t_[p_] != ',' && t_[p_] != '#') {
      ++p_;
    }
    if (p_ == start) return Err("a field has no value");
    *out = std::string(t_.substr(start, p_ - start));
    return absl::OkStatus();
  }
  absl::Status QuotedString(std::string* out) {
    const char quote = t_[p_++];
    while (p_ < t_.size() && t_[p_] != quote) {
      char c = t_[p_++];
      if (c == '\n') {
        --p_;  // the error names the string's own line
        return Err("a string runs past the end of its line");
      }
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (p_ == t_.size()) break;
      c = t_[p_++];
      switch (c) {
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case 'r': out->push_back('\r'); break;
        case 'a': out->push_back('\a'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'v': out->push_back('\v'); break;
        case 'x': {
          int v = 0, n = 0;
          while (n < 2 && p_ < t_.size() && absl::ascii_isxdigit(t_[p_])) {
            const char h = t_[p_++];
            v = v * 16 + (absl::ascii_isdigit(h) ? h - '0' : absl::ascii_tolower(h) - 'a' + 10);
            ++n;
          }
          out->push_back(static_cast<char>(v));
          break;
        }
        default:
          if (c >= '0' && c <= '7') {
            int v = c - '0', n = 1;
            while (n < 3 && p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '7') v = v * 8 + (t_[p_++] - '0'), ++n;
            out->push_back(static_cast<char>(v));
          } else {
            out->push_back(c);  // \" \' \\ and others as themselves
          }
      }
    }
    if (p_ == t_.size()) return Err("a string is not closed");
    ++p_;
    return absl::OkStatus();
  }

  absl::string_view t_;
  std::string origin_;
  size_t p_ = 0;
};

GeGraphOp OpFrom(const TextMessage& m) {
  GeGraphOp op;
  if (const std::string* n = m.Scalar("name")) op.name = *n;
  if (const std::string* t = m.Scalar("type")) op.type = *t;
  for (const auto& [k, v] : m.scalars) {
    if (k == "input") op.inputs.push_back(v);
  }
  for (const auto& [k, desc] : m.messages) {
    if (k != "output_desc") continue;
    for (const auto& [ak, attr] : desc->messages) {
      if (ak != "attr") continue;
      const std::string* key = attr->Scalar("key");
      if (key == nullptr || *key != "_fx_tensor_name") continue;
      for (const auto& [vk, value] : attr->messages) {
        if (vk != "value") continue;
        if (const std::string* s = value->Scalar("s")) op.fx_node = FxNodeOfTensorName(*s);
      }
    }
  }
  return op;
}

void CollectOps(const TextMessage& m, GeGraph* g) {
  for (const auto& [k, child] : m.messages) {
    if (k == "op") {
      GeGraphOp op = OpFrom(*child);
      if (op.name.empty() || g->by_name.contains(op.name)) continue;
      g->by_name.emplace(op.name, g->ops.size());
      g->ops.push_back(std::move(op));
    } else if (k == "graph") {
      CollectOps(*child, g);
    }
  }
}

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : absl::StrCat(dir, "/", name);
}

// Digit strings first, in numeric order (no leading zeros in directory numbers), then the other
// names in byte order: a strict weak order whatever the names.
bool NameLess(const std::string& a, const std::string& b) {
  const bool da = AllDigits(a), db = AllDigits(b);
  if (da != db) return da;
  if (da && a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

std::vector<std::string> Subdirs(const std::vector<DirEntry>& entries) {
  std::vector<std::string> out;
  for (const DirEntry& e : entries) {
    if (e.is_directory) out.push_back(e.name);
  }
  std::sort(out.begin(), out.end(), NameLess);
  return out;
}

// The leaf directories under `dir` (depth-limited) holding GE dump files, with their parents.
void GeLeaves(const std::string& dir, int depth, std::vector<std::pair<std::string, std::string>>* out) {
  absl::StatusOr<std::vector<DirEntry>> entries = ListDirectory(dir);
  if (!entries.ok()) return;
  const std::vector<std::string> subs = Subdirs(*entries);
  bool has_ge = false;
  for (const DirEntry& e : *entries) has_ge |= e.is_regular && IsGeDumpFileName(e.name);
  if (has_ge && subs.empty()) out->emplace_back(fs::path(dir).parent_path().string(), dir);
  if (depth >= kMaxTreeDepth) return;
  for (const std::string& s : subs) GeLeaves(Join(dir, s), depth + 1, out);
}

bool HasFxFiles(const std::vector<DirEntry>& entries) {
  FxFileName f;
  for (const DirEntry& e : entries) {
    if (e.is_regular && ParseFxFileName(e.name, &f)) return true;
  }
  return false;
}

// The FX runs of one rank (or of a tree without rank directories): the first level, top down,
// whose subdirectories are all numbers is the token level.
void FxRuns(const std::string& dir, int depth, const std::string& rank, std::vector<TorchairRun>* out) {
  absl::StatusOr<std::vector<DirEntry>> entries = ListDirectory(dir);
  if (!entries.ok()) return;
  const std::vector<std::string> subs = Subdirs(*entries);
  const bool tokens = !subs.empty() && std::all_of(subs.begin(), subs.end(), [](const std::string& s) {
    return AllDigits(s) && s.size() < 12;
  });
  if (!tokens) {
    if (depth >= kMaxTreeDepth) return;
    for (const std::string& s : subs) FxRuns(Join(dir, s), depth + 1, rank, out);
    return;
  }
  for (const std::string& t : subs) {
    const std::string token_dir = Join(dir, t);
    absl::StatusOr<std::vector<DirEntry>> in_token = ListDirectory(token_dir);
    if (!in_token.ok()) continue;
    if (HasFxFiles(*in_token)) {
      out->push_back({token_dir, rank, t, ""});
      continue;
    }
    // data_dump/{token + 1}/gm_{time}_dump/: one dump directory per graph.
    const std::vector<std::string> graphs = Subdirs(*in_token);
    const std::string token = std::to_string(std::strtoll(t.c_str(), nullptr, 10) - 1);
    for (size_t i = 0; i < graphs.size(); ++i) {
      const std::string graph_dir = Join(token_dir, graphs[i]);
      absl::StatusOr<std::vector<DirEntry>> in_graph = ListDirectory(graph_dir);
      if (!in_graph.ok() || !HasFxFiles(*in_graph)) continue;
      out->push_back({graph_dir, rank, token, graphs.size() > 1 ? std::to_string(i) : ""});
    }
  }
}

// The runs of one rank of a GE tree: its token directories grouped by their parent (one graph
// each, in the parent's order).
void GeRuns(const std::string& dir, const std::string& rank, std::vector<TorchairRun>* out) {
  std::vector<std::pair<std::string, std::string>> leaves;
  GeLeaves(dir, 0, &leaves);
  std::vector<std::string> parents;
  for (const auto& [parent, leaf] : leaves) {
    if (std::find(parents.begin(), parents.end(), parent) == parents.end()) parents.push_back(parent);
  }
  std::sort(parents.begin(), parents.end(), [](const std::string& a, const std::string& b) {
    return NameLess(fs::path(a).filename().string(), fs::path(b).filename().string()) ||
           (fs::path(a).filename() == fs::path(b).filename() && a < b);
  });
  for (size_t g = 0; g < parents.size(); ++g) {
    std::vector<TorchairRun> runs;
    for (const auto& [parent, leaf] : leaves) {
      if (parent != parents[g]) continue;
      const std::string name = fs::path(leaf).filename().string();
      runs.push_back({leaf, rank, AllDigits(name) ? name : "0", parents.size() > 1 ? std::to_string(g) : ""});
    }
    std::sort(runs.begin(), runs.end(), [](const TorchairRun& a, const TorchairRun& b) { return NameLess(a.token, b.token); });
    out->insert(out->end(), runs.begin(), runs.end());
  }
}

// Whether `dir`'s tree (depth-limited) holds a GE graph file.
bool HasGraphFile(const std::string& dir, int depth) {
  absl::StatusOr<std::vector<DirEntry>> entries = ListDirectory(dir);
  if (!entries.ok()) return false;
  for (const DirEntry& e : *entries) {
    if (e.is_regular && IsGeGraphFileName(e.name)) return true;
  }
  if (depth >= kMaxTreeDepth) return false;
  for (const std::string& s : Subdirs(*entries)) {
    if (HasGraphFile(Join(dir, s), depth + 1)) return true;
  }
  return false;
}

// The worldsize*_global_rank* directories of the first level (top down, at most 3 below `dir`)
// that has any.
void RankDirs(const std::string& dir, int depth, std::vector<std::pair<int, std::string>>* out) {
  absl::StatusOr<std::vector<DirEntry>> entries = ListDirectory(dir);
  if (!entries.ok()) return;
  const std::vector<std::string> subs = Subdirs(*entries);
  for (const std::string& s : subs) {
    if (int r = TorchairRankOfDirName(s); r >= 0) out->emplace_back(r, Join(dir, s));
  }
  if (!out->empty() || depth >= 3) return;
  for (const std::string& s : subs) {
    RankDirs(Join(dir, s), depth + 1, out);
    if (!out->empty()) return;
  }
}

}  // namespace

GeOpNaming NameGeOp(const GeGraph& graph, absl::string_view op_name, absl::string_view op_type,
                    const absl::flat_hash_set<std::string>& dumped) {
  GeOpNaming n;
  const std::vector<const GeGraphOp*> ops = ResolveGeOp(graph, op_name, dumped);
  const std::string graph_file = fs::path(graph.path).filename().string();
  if (ops.empty()) {
    n.self_compared = absl::StrContains(op_type, "Cast") || absl::StrContains(op_type, "TransData");
    n.description = absl::StrCat("GE op ", op_name, " (", op_type, "): not an op of the GE graph ", graph_file,
                                 n.self_compared ? "; inserted by GE: against an FX dump, its output i is compared "
                                                   "with its input i"
                                                 : "");
    return n;
  }
  n.input_node = ops.front()->fx_node;
  n.output_node = ops.back()->fx_node;
  if (ops.size() > 1) {
    absl::flat_hash_set<std::string> group;
    for (const GeGraphOp* op : ops) group.insert(op->name);
    for (const GeGraphOp* op : ops) {
      int j = 0;
      for (const std::string& in : op->inputs) {
        const size_t colon = in.rfind(':');
        if (colon != std::string::npos && in.substr(colon + 1) == "-1") continue;  // a control edge
        const std::string producer = colon == std::string::npos ? in : in.substr(0, colon);
        if (!group.contains(producer)) {
          n.fused_inputs.push_back(absl::StrCat(op->fx_node.empty() ? op->name : op->fx_node, ".input.", j));
        }
        ++j;
      }
    }
  }
  std::vector<std::string> parts;
  for (const GeGraphOp* op : ops) {
    parts.push_back(absl::StrCat(op->name, " (", op->type, ") <- ", op->fx_node.empty() ? "no FX node" : op->fx_node));
  }
  n.description = ops.size() == 1
                      ? absl::StrCat("GE op ", parts[0])
                      : absl::StrCat("GE op ", op_name, " (", op_type, ") fuses ", ops.size(), " ops: ",
                                     absl::StrJoin(parts, "; "));
  return n;
}

absl::StatusOr<GeGraph> ParseGeGraphText(absl::string_view text, absl::string_view origin) {
  TextMessage top;
  PARITY_RETURN_IF_ERROR(TextParser(text, origin).ParseInto(&top));
  GeGraph g;
  g.path = std::string(origin);
  CollectOps(top, &g);
  return g;
}

std::vector<const GeGraphOp*> ResolveGeOp(const GeGraph& graph, absl::string_view op_name,
                                          const absl::flat_hash_set<std::string>& dumped) {
  std::vector<const GeGraphOp*> ops;
  if (op_name.size() > kMaxOpNameBytes) return ops;
  std::string rest(op_name);
  while (!rest.empty()) {
    const GeGraphOp* found = nullptr;
    for (size_t len = rest.size(); len > 0; --len) {
      const std::string prefix = rest.substr(0, len);
      if (auto it = graph.by_name.find(prefix); it != graph.by_name.end()) {
        found = &graph.ops[it->second];
        break;
      }
      if (len < rest.size() && dumped.contains(prefix)) break;  // another dumped op, not in the graph
    }
    if (found == nullptr) break;
    ops.push_back(found);
    rest.erase(0, found->name.size());
  }
  return ops;
}

std::string FxNodeOfTensorName(absl::string_view fx_tensor_name) {
  const std::vector<absl::string_view> parts = absl::StrSplit(fx_tensor_name, '.');
  if (parts.size() >= 3 && parts[parts.size() - 2] == "OUTPUT") {
    const size_t cut = fx_tensor_name.size() - parts.back().size() - parts[parts.size() - 2].size() - 2;
    return std::string(fx_tensor_name.substr(0, cut));
  }
  return std::string(fx_tensor_name);
}

bool ParseFxFileName(absl::string_view filename, FxFileName* out) {
  if (!absl::ConsumeSuffix(&filename, ".npy")) return false;
  const size_t ts_dot = filename.rfind('.');
  if (ts_dot == absl::string_view::npos || !AllDigits(filename.substr(ts_dot + 1))) return false;
  absl::string_view rest = filename.substr(0, ts_dot);
  const size_t index_dot = rest.rfind('.');
  if (index_dot == absl::string_view::npos || !AllDigits(rest.substr(index_dot + 1))) return false;
  int index = 0;
  if (!absl::SimpleAtoi(rest.substr(index_dot + 1), &index)) return false;
  rest = rest.substr(0, index_dot);
  bool input;
  if (absl::ConsumeSuffix(&rest, ".INPUT")) {
    input = true;
  } else if (absl::ConsumeSuffix(&rest, ".OUTPUT")) {
    input = false;
  } else {
    return false;
  }
  if (rest.empty()) return false;
  *out = {std::string(rest), input, index, std::string(filename.substr(ts_dot + 1))};
  return true;
}

bool TimestampLess(const std::string& a, const std::string& b) {
  const size_t za = std::min(a.find_first_not_of('0'), a.size()), zb = std::min(b.find_first_not_of('0'), b.size());
  const absl::string_view x = absl::string_view(a).substr(za), y = absl::string_view(b).substr(zb);
  return x.size() != y.size() ? x.size() < y.size() : x < y;
}

bool IsGeGraphFileName(absl::string_view filename) {
  return absl::EndsWith(filename, ".txt") &&
         (absl::StartsWith(filename, "dynamo_original_graph_") || absl::StartsWith(filename, "dynamo_optimized_"));
}

int TorchairRankOfDirName(absl::string_view name) {
  if (!absl::StartsWith(name, "worldsize")) return -1;
  const size_t r = name.rfind("rank");
  if (r == absl::string_view::npos || !AllDigits(name.substr(r + 4)) || name.size() - r - 4 > 9) return -1;
  return static_cast<int>(std::strtol(std::string(name.substr(r + 4)).c_str(), nullptr, 10));
}

namespace {

// Graph files read, kept while unchanged (size and modification time): each token directory of a
// run finds the same few graphs.
struct GraphCache {
  struct Entry {
    uintmax_t size = 0;
    fs::file_time_type mtime;
    std::shared_ptr<const GeGraph> graph;
  };
  static constexpr size_t kMaxGraphs = 8;
  absl::Mutex mu;
  std::map<std::string, Entry> entries ABSL_GUARDED_BY(mu);
};

absl::StatusOr<std::shared_ptr<const GeGraph>> LoadGeGraph(const std::string& path) {
  static GraphCache* cache = new GraphCache();
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  const fs::file_time_type mtime = fs::last_write_time(path, ec);
  if (!ec) {
    absl::MutexLock l(&cache->mu);
    auto it = cache->entries.find(path);
    if (it != cache->entries.end() && it->second.size == size && it->second.mtime == mtime) return it->second.graph;
  }
  PARITY_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, kMaxGraphFileBytes));
  PARITY_ASSIGN_OR_RETURN(GeGraph g, ParseGeGraphText(text, path));
  auto graph = std::make_shared<const GeGraph>(std::move(g));
  if (!ec) {
    absl::MutexLock l(&cache->mu);
    if (cache->entries.size() >= GraphCache::kMaxGraphs) cache->entries.erase(cache->entries.begin());
    cache->entries[path] = {size, mtime, graph};
  }
  return graph;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const GeGraph>> FindGeGraphFor(const std::string& dir,
                                                              const std::vector<std::string>& op_names) {
  std::error_code ec;
  fs::path at = fs::absolute(fs::path(dir), ec).lexically_normal();
  if (at.has_filename() == false) at = at.parent_path();
  int rank = -1;
  for (fs::path p = at; !p.empty() && p != p.root_path(); p = p.parent_path()) {
    if (int r = TorchairRankOfDirName(p.filename().string()); r >= 0) {
      rank = r;
      break;
    }
  }
  for (int up = 0; up <= kMaxTreeDepth && !at.empty(); ++up, at = at.parent_path()) {
    absl::StatusOr<std::vector<DirEntry>> entries = ListDirectory(at.string());
    if (!entries.ok()) break;
    std::vector<std::string> original, optimized, of_rank;
    for (const DirEntry& e : *entries) {
      if (!e.is_regular || !IsGeGraphFileName(e.name)) continue;
      (absl::StartsWith(e.name, "dynamo_original_graph_") ? original : optimized).push_back(e.name);
    }
    std::vector<std::string>& files = original.empty() ? optimized : original;
    if (files.empty()) continue;
    if (rank >= 0) {
      for (const std::string& f : files) {
        if (absl::StrContains(f, absl::StrCat("rank_", rank, "_"))) of_rank.push_back(f);
      }
      if (!of_rank.empty()) files = of_rank;
    }
    const absl::flat_hash_set<std::string> dumped(op_names.begin(), op_names.end());
    std::shared_ptr<const GeGraph> best;
    size_t best_score = 0;
    for (const std::string& f : files) {
      PARITY_ASSIGN_OR_RETURN(std::shared_ptr<const GeGraph> g, LoadGeGraph((at / f).string()));
      size_t score = 0;
      if (files.size() > 1) {
        for (const std::string& n : op_names) score += ResolveGeOp(*g, n, dumped).empty() ? 0 : 1;
      }
      if (!best || score > best_score) {
        best_score = score;
        best = std::move(g);
      }
    }
    return best;
  }
  return absl::NotFoundError(absl::StrCat(dir, ": no GE graph (dynamo_original_graph_*.txt) in it or above it"));
}

std::vector<TorchairRun> FindTorchairRuns(const std::string& path) {
  std::vector<std::pair<int, std::string>> ranks;  // (rank, directory)
  RankDirs(path, 0, &ranks);
  std::sort(ranks.begin(), ranks.end());
  if (ranks.empty()) ranks.emplace_back(-1, path);
  const bool ge = HasGraphFile(path, 0);
  std::vector<TorchairRun> out;
  for (const auto& [r, dir] : ranks) {
    const std::string rank = r >= 0 ? std::to_string(r) : "";
    if (ge) {
      GeRuns(dir, rank, &out);
    } else {
      FxRuns(dir, 0, rank, &out);
    }
  }
  if (out.size() == 1 && fs::path(out[0].path).lexically_normal() == fs::path(path).lexically_normal()) return {};
  return out;
}

}  // namespace parity
