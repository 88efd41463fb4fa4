#include "common/formats/dump.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/file_util.h"
#include "common/formats/argument.h"
#include "common/formats/ge_dump.h"
#include "common/formats/torchair.h"
#include "common/checks/msprobe_policy.h"
#include "common/formats/npy.h"
#include "common/formats/pt_reader.h"
#include "common/formats/safetensors.h"
#include "common/base/status_macros.h"

namespace parity {

namespace fs = std::filesystem;

const char* DumpModeName(DumpMode m) {
  switch (m) {
    case DumpMode::kTensor: return "tensor";
    case DumpMode::kStatistics: return "statistics";
    case DumpMode::kMd5: return "md5";
  }
  return "?";
}

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kUnknown: return "unknown";
  }
  return "?";
}

const char* RoleName(Role r) {
  switch (r) {
    case Role::kInput: return "input";
    case Role::kOutput: return "output";
    case Role::kParameter: return "parameter";
    case Role::kGradient: return "gradient";
    case Role::kUnknown: return "unknown";
  }
  return "?";
}

std::string FuzzyName(const std::string& name) {
  size_t pos = name.find("forward");
  const size_t bpos = name.find("backward");
  if (bpos != std::string::npos && (pos == std::string::npos || bpos < pos)) pos = bpos;
  if (pos == std::string::npos || pos == 0) return name;
  std::string prefix = name.substr(0, pos);
  if (!prefix.empty() && prefix.back() == '.') prefix.pop_back();
  const size_t dot = prefix.rfind('.');
  prefix = dot == std::string::npos ? "" : prefix.substr(0, dot + 1);
  return prefix + name.substr(pos);
}

namespace {

// "Functional.linear.0.forward" -> "linear"; "Module.conv2.Conv2d.forward.0" -> "Conv2d".
std::string OpTypeOf(const std::string& api) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = api.find('.', start);
    parts.push_back(api.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (parts.empty()) return api;
  if (parts[0] == "Module" || parts[0] == "Cell") {
    for (size_t i = 1; i < parts.size(); ++i) {
      if ((parts[i] == "forward" || parts[i] == "backward" || parts[i] == "parameters_grad") &&
          i >= 1) {
        return parts[i - 1];
      }
    }
  }
  return parts.size() > 1 ? parts[1] : parts[0];
}

Phase PhaseOf(const std::string& api) {
  if (absl::StrContains(api, ".backward") || absl::StrContains(api, "parameters_grad")) {
    return Phase::kBackward;
  }
  if (absl::StrContains(api, ".forward")) return Phase::kForward;
  return Phase::kUnknown;
}

bool IsTensorType(const std::string& type) {
  return absl::StrContains(type, "Tensor") || absl::StrContains(type, "Parameter");
}

class MsprobeFlattener {
 public:
  MsprobeFlattener(const std::string& root, const std::string& api, Role role, Dump* dump)
      : root_(root), api_(api), role_(role), dump_(dump) {}

  absl::Status Flatten(const Json& v, const std::string& path, int depth) {
    if (depth > 400) {
      return absl::InvalidArgumentError(absl::StrCat("item ", path, " nests deeper than 400 levels"));
    }
    if (v.is_object()) {
      const Json* type = v.Find("type");
      if (type && type->is_string()) return Leaf(v, type->as_string(), path);
      if (v.as_object().empty()) {
        // msprobe: an empty container at the top of a section (input_kwargs {}) yields no
        // row; deeper down it is a None argument.
        return depth == 0 ? absl::OkStatus() : NonTensor(Json(), "None", path, /*null_leaf=*/true);
      }
      for (const auto& [k, child] : v.as_object()) {
        if (k == "class_type") continue;
        PARITY_RETURN_IF_ERROR(Flatten(child, absl::StrCat(path, ".", k), depth + 1));
      }
      return absl::OkStatus();
    }
    if (v.is_null() && depth == 0) return absl::OkStatus();
    if (v.is_array()) {
      int i = 0;
      for (const Json& child : v.as_array()) {
        PARITY_RETURN_IF_ERROR(Flatten(child, absl::StrCat(path, ".", i++), depth + 1));
      }
      return absl::OkStatus();
    }
    // A null in place of a leaf is a None argument (msprobe's default item); any other bare
    // value (a number, text, a bool) is no leaf, and msprobe's parser yields no row for it.
    if (v.is_null()) return NonTensor(v, "None", path, /*null_leaf=*/true);
    return absl::OkStatus();
  }

 private:
  DumpItem Base(const std::string& path) {
    DumpItem it;
    it.name = path;
    it.api = api_;
    it.op_type = OpTypeOf(api_);
    it.phase = PhaseOf(api_);
    it.role = role_;
    return it;
  }

  // A non-tensor argument, with msprobe's Dtype and shape columns (compare's gen_op_item):
  // special types keep their type name; anything else is named by the Python type of its value,
  // its shape "[]". `null_leaf`: a JSON null in place of a leaf, msprobe's default item (Dtype and
  // shape None). The four statistics msprobe shows for it are ArgumentStats'.
  absl::Status NonTensor(const Json& value, const std::string& type, const std::string& path,
                         bool null_leaf = false) {
    DumpItem it = Base(path);
    it.is_tensor = false;
    it.type = type;
    it.value = value;
    const std::string last = path.substr(path.rfind('.') + 1);
    if (null_leaf) {
      it.dtype_text = it.shape_text = "None";
    } else if (type == "torch.Size") {
      it.dtype_text = type;
      it.shape_text = PyStr(value);
    } else if (type == "slice") {
      it.dtype_text = type;
      it.shape_text = value.is_array() ? absl::StrCat("(", value.as_array().size(), ",)") : "()";
    } else if (type == "ellipsis" || type == "torch.ProcessGroup" || last == "src" || last == "dst" ||
               last == "group_src" || last == "group_dst") {
      it.dtype_text = type;
      it.shape_text = "[]";
    } else {
      it.dtype_text = PythonTypeRepr(value);
      it.shape_text = "[]";
    }
    it.md5 = ArgumentMd5(it);
    dump_->items.push_back(std::move(it));
    return absl::OkStatus();
  }

  // str(type(v)) of a JSON value as Python's json module decodes it.
  static std::string PythonTypeRepr(const Json& v) {
    const char* t = v.is_null() ? "NoneType" : v.is_bool() ? "bool" : v.is_string() ? "str"
                    : v.is_integer() ? "int" : v.is_number() ? "float" : v.is_array() ? "list" : "dict";
    return absl::StrCat("<class '", t, "'>");
  }

  absl::Status Leaf(const Json& v, const std::string& type, const std::string& path) {
    if (!IsTensorType(type)) {
      // A process group is known by its ranks.
      const Json* value = v.Find(type == "torch.ProcessGroup" ? "group_ranks" : "value");
      return NonTensor(value ? *value : Json(), type, path);
    }
    DumpItem it = Base(path);
    it.type = type;
    if (const Json* dt = v.Find("dtype"); dt && dt->is_string()) {
      it.dtype_text = dt->as_string();
      it.dtype = ParseDType(it.dtype_text);
    }
    if (const Json* shape = v.Find("shape"); shape && shape->is_array()) {
      for (const Json& d : shape->as_array()) {
        if (!d.is_integer() || d.as_int() < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("item ", path, ": shape ", shape->Dump(), " holds a bad dimension"));
        }
        it.shape.push_back(d.as_int());
      }
      it.has_shape = true;
    }
    if (const Json* x = v.Find("Max")) it.max = *x;
    if (const Json* x = v.Find("Min")) it.min = *x;
    if (const Json* x = v.Find("Mean")) it.mean = *x;
    if (const Json* x = v.Find("Norm")) it.norm = *x;
    if (const Json* rg = v.Find("requires_grad"); rg && rg->is_bool()) it.requires_grad = rg->as_bool();
    if (const Json* md5 = v.Find("md5"); md5 && md5->is_string()) it.md5 = md5->as_string();
    if (const Json* dn = v.Find("data_name"); dn && dn->is_string() && dn->as_string() != "-1") {
      it.data_name = dn->as_string();
      if (it.data_name.find('/') != std::string::npos || it.data_name == ".." ||
          it.data_name == ".") {
        return absl::InvalidArgumentError(absl::StrCat(
            "item ", path, ": data_name '", it.data_name, "' must be a plain file name"));
      }
      const size_t dot = it.data_name.rfind('.');
      it.name = dot == std::string::npos ? it.data_name : it.data_name.substr(0, dot);
      it.data_path = (fs::path(root_) / "dump_tensor_data" / it.data_name).string();
    }
    dump_->items.push_back(std::move(it));
    return absl::OkStatus();
  }

  const std::string& root_;
  const std::string& api_;
  Role role_;
  Dump* dump_;
};

}  // namespace

absl::StatusOr<Dump> ParseMsprobeDumpJson(const std::string& root, const std::string& origin,
                                          absl::string_view json_text) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", what));
  };
  Dump dump;
  dump.root = root;
  dump.format = "msprobe";
  // Every tensor's entry is a JSON object, so the objects in the text bound the items of a
  // tensor dump (a hint only: scalars without one still fit, the vector grows past it). The
  // vector is then never moved while it fills (no second copy of the items at once); what the
  // bound over-reserves is address space the items never touch, not memory.
  // Counted with memchr (a '{' every few hundred bytes): 2 ms per 61 MB, std::count 17.
  size_t objects = 0;
  for (const char *p = json_text.data(), *end = p + json_text.size();
       (p = static_cast<const char*>(std::memchr(p, '{', static_cast<size_t>(end - p)))) != nullptr;
       ++p) {
    ++objects;
  }
  dump.items.reserve(objects);
  struct Section {
    const char* key;
    const char* suffix;
    Role role;
  };
  static constexpr Section kOrder[] = {
      {"input_args", "input", Role::kInput},    {"input_kwargs", "input", Role::kInput},
      {"input", "input", Role::kInput},         {"parameters", "parameters", Role::kParameter},
      {"output", "output", Role::kOutput},      {"parameters_grad", "parameters_grad", Role::kGradient},
  };
  // The "data" object is read one operator at a time (a statistics dump of a large model is
  // hundreds of MB: a whole document tree of it took 16 times its size in memory). The first
  // "task", "framework" and "data" members count, as a lookup in a whole document would find.
  std::optional<Json> task;
  bool framework_seen = false;
  std::optional<bool> data_is_object;
  absl::Status entry_error;
  auto fail = [&](const std::string& what) {
    entry_error = bad(what);
    return entry_error;
  };
  const absl::Status parsed = ParseJsonObjectMembers(
      json_text, "data",
      [&](std::string key, Json v) -> absl::Status {
        if (key == "task" && !task) {
          task = std::move(v);
        } else if (key == "framework" && !framework_seen) {
          framework_seen = true;
          if (v.is_string()) dump.framework = v.as_string();
        } else if (key == "data" && !data_is_object) {
          data_is_object = v.is_object();
        }
        return absl::OkStatus();
      },
      [&](std::string api, Json entry) -> absl::Status {
        if (data_is_object) return absl::OkStatus();  // a second "data" member: ignored
        if (!entry.is_object()) return fail(absl::StrCat("entry '", api, "' is not an object"));
        for (const Section& s : kOrder) {
          const Json* part = entry.Find(s.key);
          if (!part) continue;
          MsprobeFlattener f(root, api, s.role, &dump);
          absl::Status st = f.Flatten(*part, absl::StrCat(api, ".", s.suffix), 0);
          if (!st.ok()) return fail(std::string(st.message()));
        }
        // Members msprobe does not name (e.g. a parameters_grad entry's own keys) keep their key.
        // A bare scalar member (a forward entry's "is_recompute": false) is no data: msprobe's
        // parser yields no row for a value that is neither a container nor null.
        for (const auto& [k, part] : entry.as_object()) {
          if (std::any_of(std::begin(kOrder), std::end(kOrder), [&k = k](const Section& s) { return k == s.key; })) {
            continue;
          }
          if (!part.is_object() && !part.is_array() && !part.is_null()) continue;
          MsprobeFlattener f(root, api, Role::kGradient, &dump);
          absl::Status st = f.Flatten(part, absl::StrCat(api, ".", k), 0);
          if (!st.ok()) return fail(std::string(st.message()));
        }
        return absl::OkStatus();
      });
  if (!entry_error.ok()) return entry_error;
  if (parsed.code() == absl::StatusCode::kFailedPrecondition) return bad("dump.json is not a JSON object");
  if (!parsed.ok()) return bad(std::string(parsed.message()));
  if (!task || !task->is_string()) return bad("dump.json has no \"task\" string");
  if (!data_is_object || !*data_is_object) return bad("dump.json has no \"data\" object");
  const std::string& t = task->as_string();
  if (t == "tensor") {
    dump.mode = DumpMode::kTensor;
  } else if (t == "statistics") {
    dump.mode = DumpMode::kStatistics;
    for (const DumpItem& it : dump.items) {
      if (it.is_tensor && !it.md5.empty()) dump.mode = DumpMode::kMd5;
    }
  } else if (t == "structure") {
    return bad("task \"structure\" dumps hold no tensor data or statistics to compare");
  } else {
    return bad(absl::StrCat("unknown task \"", t, "\" (expected tensor or statistics)"));
  }
  return dump;
}

namespace {

// An item of a plain tensor file (its own operator).
DumpItem FileItem(const std::string& name, const char* type, DType dtype, const Shape& shape,
                  const std::string& path) {
  DumpItem it;
  it.name = name;
  it.api = name;
  it.op_type = name;
  it.type = type;
  it.dtype = dtype;
  it.dtype_text = TorchDTypeName(dtype);
  it.shape = shape;
  it.has_shape = true;
  it.data_path = path;
  it.data_name = path.substr(path.rfind('/') + 1);  // npos + 1 == 0: the whole path
  return it;
}

// The item of a tensor file of a directory whose header has not been read (or could not be).
DumpItem UnreadFileItem(const std::string& stem, const std::string& filename,
                        const std::string& path, const std::string& ext) {
  DumpItem it;
  it.name = stem;
  it.api = stem;
  it.op_type = stem;
  it.type = ext == ".npy" ? "numpy.ndarray" : "torch.Tensor";
  it.data_path = path;
  it.data_name = filename;
  return it;
}

// *keep_budget: bytes of small files the listing may still keep (see OpenDump), in `arena`.
absl::Status AddNpyItem(const std::string& path, const std::string& name, Dump* dump,
                        size_t* keep_budget, SmallFileArena* arena) {
  SharedBytes kept;
  PARITY_ASSIGN_OR_RETURN(
      NpyInfo info, ReadNpyInfo(path, std::min(kKeptNpyFileBytes, *keep_budget), arena, &kept));
  dump->items.push_back(FileItem(name, "numpy.ndarray", info.dtype, info.shape, path));
  if (kept.owner != nullptr) {
    *keep_budget -= kept.bytes.size();
    dump->items.back().npy_file = std::move(kept);
  }
  return absl::OkStatus();
}

absl::Status AddPtItems(const std::string& path, const std::string& stem, Dump* dump) {
  PARITY_ASSIGN_OR_RETURN(std::vector<PtEntry> entries, ReadPtIndex(path));
  for (const PtEntry& e : entries) {
    DumpItem it = FileItem(e.name.empty() ? stem : stem + "." + e.name, "torch.Tensor", e.dtype, e.shape, path);
    it.pt_key = e.name;
    dump->items.push_back(std::move(it));
  }
  return absl::OkStatus();
}

// Adds the tensors of GE dump files, ordered by timestamp; repeated op names get increasing
// occurrence numbers.
absl::Status AddGeItems(std::vector<fs::path> files, Dump* dump) {
  auto ts = [](const fs::path& p) {
    const std::string n = p.filename().string();
    return std::strtoull(n.substr(n.rfind('.') + 1).c_str(), nullptr, 10);
  };
  std::stable_sort(files.begin(), files.end(), [&](const fs::path& a, const fs::path& b) { return ts(a) < ts(b); });
  std::map<std::string, int> occurrences;
  for (const fs::path& f : files) {
    PARITY_ASSIGN_OR_RETURN(GeDump ge, ReadGeDump(f.string()));
    const std::string filename = f.filename().string();
    const std::string op_type = filename.substr(0, filename.find('.'));
    std::string op_name = ge.op_name;
    if (op_name.empty()) {
      const size_t a = filename.find('.') + 1;
      op_name = filename.substr(a, filename.find('.', a) - a);
    }
    const int occ = occurrences[op_name]++;
    const std::string api = absl::StrCat(op_name, ".", occ);
    for (size_t i = 0; i < ge.tensors.size(); ++i) {
      const GeTensorEntry& e = ge.tensors[i];
      DumpItem it = FileItem(absl::StrCat(api, e.role == Role::kInput ? ".input." : ".output.", e.index),
                             "ge.Tensor", e.dtype, e.shape, f.string());
      it.api = api;
      it.op_type = op_type;
      it.role = e.role;
      it.phase = Phase::kForward;
      it.ge_index = static_cast<int>(i);
      dump->items.push_back(std::move(it));
    }
  }
  return absl::OkStatus();
}

// A name not taken yet: `name`, else `fallback`, else `fallback` + "#k".
std::string FreeName(const std::string& name, const std::string& fallback, absl::flat_hash_set<std::string>* used) {
  std::string out = used->contains(name) ? fallback : name;
  for (int k = 1; used->contains(out); ++k) out = absl::StrCat(fallback, "#", k);
  used->insert(out);
  return out;
}

// The GE dump files of one token of a TorchAir run, named after the FX nodes `graph` maps them to
// (common/formats/torchair.h), in timestamp order; of two files of one op, the larger is kept, as
// msit's reference keeps it. Each op's line for the stack column is in dump->structure.
absl::Status AddTorchairGeItems(const std::vector<fs::path>& files, const GeGraph& graph, Dump* dump) {
  struct OpFile {
    fs::path path;
    std::string op_type;
    uint64_t timestamp = 0;
    uintmax_t size = 0;
  };
  std::map<std::string, OpFile> by_op;
  for (const fs::path& f : files) {
    const std::string filename = f.filename().string();
    const std::string op_name = GeDumpFileOpName(filename);
    std::error_code ec;
    OpFile o{f, filename.substr(0, filename.find('.')),
             std::strtoull(filename.substr(filename.rfind('.') + 1).c_str(), nullptr, 10), fs::file_size(f, ec)};
    auto [it, fresh] = by_op.emplace(op_name, o);
    if (!fresh && o.size > it->second.size) it->second = std::move(o);
  }
  std::vector<std::pair<std::string, const OpFile*>> order;
  absl::flat_hash_set<std::string> dumped;
  for (const auto& [name, o] : by_op) {
    order.emplace_back(name, &o);
    dumped.insert(name);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second->timestamp < b.second->timestamp; });
  absl::flat_hash_set<std::string> used;
  for (const auto& [op_name, o] : order) {
    PARITY_ASSIGN_OR_RETURN(GeDump ge, ReadGeDump(o->path.string()));
    const GeOpNaming naming = NameGeOp(graph, op_name, o->op_type, dumped);
    dump->structure.stacks[op_name] = naming.description;
    const std::string filename = o->path.filename().string();
    const size_t first = dump->items.size();
    std::map<int, std::string> input_names;  // by input index
    for (size_t i = 0; i < ge.tensors.size(); ++i) {
      const GeTensorEntry& e = ge.tensors[i];
      const bool input = e.role == Role::kInput;
      const std::string& node = input ? naming.input_node : naming.output_node;
      const std::string suffix = absl::StrCat(input ? ".input." : ".output.", e.index);
      std::string name = (node.empty() ? op_name : node) + suffix;
      if (input && static_cast<size_t>(e.index) < naming.fused_inputs.size()) name = naming.fused_inputs[e.index];
      DumpItem it = FileItem(FreeName(name, op_name + suffix, &used),
                             "ge.Tensor", e.dtype, e.shape, o->path.string());
      it.api = op_name;
      it.op_type = o->op_type;
      it.role = e.role;
      it.phase = Phase::kForward;
      it.ge_index = static_cast<int>(i);
      it.data_name = absl::StrCat(filename, input ? ",inputs," : ",outputs,", e.index);
      if (e.dtype == DType::kBFloat16) it.dtype_text = "torch.float32";  // widened, as the reference's reader does
      if (input) input_names[e.index] = it.name;
      dump->items.push_back(std::move(it));
    }
    if (naming.self_compared) {
      for (size_t i = first; i < dump->items.size(); ++i) {
        DumpItem& it = dump->items[i];
        auto in = input_names.find(ge.tensors[i - first].index);
        if (it.role == Role::kOutput && in != input_names.end()) it.in_run_golden = in->second;
      }
    }
  }
  dump->structure.has_stack_json = true;
  return absl::OkStatus();
}

// GE dump files in a directory: under a TorchAir GE graph (found in the directory or above it)
// named after the FX nodes, otherwise by op and occurrence.
absl::Status AddGeFiles(const std::string& dir, const std::vector<fs::path>& files, Dump* dump) {
  std::vector<std::string> op_names;
  for (const fs::path& f : files) op_names.push_back(GeDumpFileOpName(f.filename().string()));
  absl::StatusOr<std::shared_ptr<const GeGraph>> graph = FindGeGraphFor(dir, op_names);
  if (graph.ok()) {
    dump->format = kTorchairGeFormat;
    return AddTorchairGeItems(files, **graph, dump);
  }
  if (!absl::IsNotFound(graph.status())) return graph.status();
  dump->format = "ge";
  return AddGeItems(files, dump);
}

absl::Status AddSafetensorsItems(const std::string& path, Dump* dump) {
  PARITY_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(path));
  for (const SafetensorsFile::Entry& e : f.entries()) {
    DumpItem it = FileItem(e.name, "safetensors", e.dtype, e.shape, path);
    it.safetensors_key = e.name;
    dump->items.push_back(std::move(it));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

void SetNpyHeader(NpyInfo info, SharedBytes whole, DumpItem* item) {
  item->dtype = info.dtype;
  item->dtype_text = TorchDTypeName(info.dtype);
  item->shape = std::move(info.shape);
  item->has_shape = true;
  item->npy_file = std::move(whole);
}

}  // namespace

void ResolveDeferredNpy(DumpItem* item, SmallFileArena* arena) {
  if (!item->npy_deferred) return;
  item->npy_deferred = false;
  SharedBytes kept;
  absl::StatusOr<NpyInfo> info = ReadNpyInfo(item->data_path, kKeptNpyFileBytes, arena, &kept);
  if (!info.ok()) {
    item->read_error = info.status();
    return;
  }
  SetNpyHeader(*std::move(info), std::move(kept), item);
}

bool ResolveDeferredNpyFrom(DumpItem* item, SharedBytes whole) {
  if (!item->npy_deferred) return false;
  absl::StatusOr<NpyInfo> info = ParseNpyInfo(whole.bytes, item->data_path);
  if (!info.ok()) return false;
  item->npy_deferred = false;
  SetNpyHeader(*std::move(info), std::move(whole), item);
  return true;
}

void ResolveDeferredNpyFromOpen(DumpItem* item, std::shared_ptr<const OpenNpyFile> open) {
  if (!item->npy_deferred) return;
  item->npy_deferred = false;
  SetNpyHeader(NpyInfo{open->layout.dtype, open->layout.shape}, SharedBytes(), item);
  item->npy_open = std::move(open);
}

// Confines a dump's data files to its tree (OutsideLinks::kRefuse): the tree is a directory,
// resolved once; a file is checked only when it is a link or its directory resolves elsewhere
// than it is written (each directory resolved once).
class TreeConfinement {
 public:
  explicit TreeConfinement(const std::string& root) : root_(root), root_real_(Resolve(root)) {}

  // OK when `file` lies in the tree (or does not resolve: reading it reports why), else the
  // PERMISSION_DENIED its item gets. `is_link`: the caller knows the file is a link (a
  // listing's); otherwise it is looked at.
  absl::Status Check(const std::string& file, std::optional<bool> is_link = std::nullopt) {
    if (root_real_.empty()) return absl::OkStatus();
    const std::string dir = fs::path(file).parent_path().string();
    auto cached = dirs_.find(dir);
    if (cached == dirs_.end()) cached = dirs_.emplace(dir, Inside(Resolve(dir))).first;
    bool link = is_link.value_or(false);
    if (!is_link) {
      struct stat st;
      link = ::lstat(file.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
    }
    if (cached->second && !link) return absl::OkStatus();
    const std::string real = Resolve(file);
    if (real.empty() || Inside(real)) return absl::OkStatus();
    return absl::PermissionDeniedError(absl::StrCat(
        file, " leads outside the dump directory ", root_, " (to ", real,
        "), so it is not read; parity-agent --allow-outside-links reads such files"));
  }

 private:
  static std::string Resolve(const std::string& p) {
    char buf[PATH_MAX];
    return ::realpath(p.c_str(), buf) != nullptr ? std::string(buf) : std::string();
  }
  bool Inside(const std::string& real) const {
    return !real.empty() && (real == root_real_ || absl::StartsWith(real, root_real_ == "/" ? "/" : root_real_ + "/"));
  }
  const std::string root_;
  const std::string root_real_;  // "" when the root does not resolve: nothing is refused
  std::map<std::string, bool> dirs_;  // directory as written -> whether it resolves inside
};

absl::Status CheckInsideTree(const std::string& root, const std::string& path) {
  return TreeConfinement(root).Check(path);
}

// Gives each item whose data file leads outside the tree its read_error (OutsideLinks::kRefuse
// for a dump.json's items, whose files the listing does not read).
void ConfineItems(const std::string& root, Dump* dump) {
  TreeConfinement tree(root);
  for (DumpItem& it : dump->items) {
    if (it.data_path.empty() || !it.read_error.ok()) continue;
    if (absl::Status s = tree.Check(it.data_path); !s.ok()) it.read_error = std::move(s);
  }
}

namespace {

// A dump that is one file: .npy, .safetensors, .pt, a GE dump file, or an msprobe dump.json.
absl::StatusOr<Dump> OpenDumpFile(const std::string& path, OutsideLinks links) {
  Dump dump;
  dump.root = path;
  const std::string ext = fs::path(path).extension().string();
  const std::string stem = fs::path(path).stem().string();
  if (ext == ".npy") {
    dump.format = "npy";
    size_t none = 0;  // one file: read once anyway
    PARITY_RETURN_IF_ERROR(AddNpyItem(path, stem, &dump, &none, nullptr));
    return dump;
  }
  if (ext == ".safetensors") {
    dump.format = "safetensors";
    PARITY_RETURN_IF_ERROR(AddSafetensorsItems(path, &dump));
    return dump;
  }
  if (ext == ".pt" || ext == ".pth") {
    dump.format = "pt";
    PARITY_RETURN_IF_ERROR(AddPtItems(path, stem, &dump));
    return dump;
  }
  if (IsGeDumpFileName(fs::path(path).filename().string())) {
    dump.format = "ge";
    PARITY_RETURN_IF_ERROR(AddGeItems({fs::path(path)}, &dump));
    return dump;
  }
  if (ext == ".json") {
    PARITY_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, 1ull << 32));
    const std::string root = fs::path(path).parent_path().string();
    PARITY_ASSIGN_OR_RETURN(dump, ParseMsprobeDumpJson(root, path, text));
    if (links == OutsideLinks::kRefuse) ConfineItems(root.empty() ? "." : root, &dump);
    PARITY_ASSIGN_OR_RETURN(dump.structure, ReadDumpStructure(root.empty() ? "." : root));
    return dump;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": unsupported file type '", ext,
      "' (expected an msprobe dump directory, dump.json, .npy, .pt or .safetensors)"));
}

// A plain directory of tensor files (`listing`, when given, is its listing): one item per tensor
// (per file for .npy and .pt, per tensor for .safetensors, GE dump files by op), an unreadable
// file costing its own row.
absl::StatusOr<Dump> OpenTensorDirectory(const std::string& path, size_t keep_budget, NpyListing npy_listing,
                                         const std::vector<DirEntry>* listing, OutsideLinks links) {
  Dump dump;
  dump.root = path;
  dump.format = "directory";
  std::vector<DirEntry> own_listing;
  if (listing == nullptr) {
    PARITY_ASSIGN_OR_RETURN(own_listing, ListDirectory(path));
    listing = &own_listing;
  }
  const std::vector<DirEntry>& entries = *listing;
  struct TensorFile {
    std::string path, name, stem, ext;
  };
  std::vector<TensorFile> files;  // in name order (ListDirectory sorts)
  std::vector<fs::path> ge_files;
  std::optional<TreeConfinement> tree;
  if (links == OutsideLinks::kRefuse) tree.emplace(path);
  for (const DirEntry& e : entries) {
    if (!e.is_regular) continue;
    std::string full = path.back() == '/' ? path + e.name : absl::StrCat(path, "/", e.name);
    // std::filesystem's stem/extension split: the last '.', unless it starts the name.
    const size_t dot = e.name.rfind('.');
    const bool has_ext = dot != std::string::npos && dot != 0;
    std::string ext = has_ext ? e.name.substr(dot) : std::string();
    const bool tensor_file =
        IsGeDumpFileName(e.name) || ext == ".npy" || ext == ".safetensors" || ext == ".pt" || ext == ".pth";
    if (tree && tensor_file) {
      if (absl::Status outside = tree->Check(full, e.is_link); !outside.ok()) {  // listed, never read
        DumpItem it = UnreadFileItem(has_ext ? e.name.substr(0, dot) : e.name, e.name, full, ext);
        it.read_error = std::move(outside);
        dump.items.push_back(std::move(it));
        continue;
      }
    }
    if (IsGeDumpFileName(e.name)) {
      ge_files.emplace_back(std::move(full));
    } else if (ext == ".npy" || ext == ".safetensors" || ext == ".pt" || ext == ".pth") {
      files.push_back({std::move(full), e.name, e.name.substr(0, dot), std::move(ext)});
    }
  }
  if (!ge_files.empty()) PARITY_RETURN_IF_ERROR(AddGeFiles(path, ge_files, &dump));
  // An FX dump of TorchAir (every file {node}-{target}.{INPUT|OUTPUT}.{i}.{timestamp}.npy): its
  // items named after the node, in call order.
  std::vector<FxFileName> fx(files.size());
  const bool fx_dump = ge_files.empty() && !files.empty() && std::all_of(files.begin(), files.end(), [&](const TensorFile& f) {
    return ParseFxFileName(f.name, &fx[static_cast<size_t>(&f - files.data())]);
  });
  if (fx_dump) {
    dump.format = kTorchairFxFormat;
    std::vector<size_t> order(files.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (fx[a].timestamp != fx[b].timestamp) return TimestampLess(fx[a].timestamp, fx[b].timestamp);
      return std::make_tuple(!fx[a].input, fx[a].index) < std::make_tuple(!fx[b].input, fx[b].index);
    });
    std::vector<TensorFile> sorted;
    std::vector<FxFileName> sorted_fx;
    absl::flat_hash_set<std::string> used;
    for (size_t i : order) {
      const std::string name = absl::StrCat(fx[i].node, fx[i].input ? ".input." : ".output.", fx[i].index);
      sorted.push_back(files[i]);
      sorted.back().stem = FreeName(name, name, &used);
      sorted_fx.push_back(fx[i]);
    }
    files = std::move(sorted);
    fx = std::move(sorted_fx);
  }
  if (files.empty() && ge_files.empty() && dump.items.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": no dump.json, .npy, .pt, .safetensors or GE dump files here"));
  }
  dump.items.reserve(dump.items.size() + files.size());
  SmallFileArena arena;
  for (const TensorFile& f : files) {
    absl::Status st;
    if (f.ext == ".npy" && npy_listing == NpyListing::kNamesOnly) {
      DumpItem it = UnreadFileItem(f.stem, f.name, f.path, f.ext);
      it.npy_deferred = true;
      dump.items.push_back(std::move(it));
    } else if (f.ext == ".npy") {
      st = AddNpyItem(f.path, f.stem, &dump, &keep_budget, &arena);
    } else if (f.ext == ".safetensors") {
      st = AddSafetensorsItems(f.path, &dump);
    } else {
      st = AddPtItems(f.path, f.stem, &dump);
    }
    if (!st.ok()) {
      // One unreadable file costs its own row, not the whole dump.
      DumpItem it = UnreadFileItem(f.stem, f.name, f.path, f.ext);
      it.read_error = std::move(st);
      dump.items.push_back(std::move(it));
    }
    if (fx_dump) {
      const FxFileName& n = fx[static_cast<size_t>(&f - files.data())];
      DumpItem& it = dump.items.back();
      it.api = n.node;
      it.op_type = n.node.substr(n.node.find('-') + 1);
      it.role = n.input ? Role::kInput : Role::kOutput;
      it.phase = Phase::kForward;
    }
  }
  return dump;
}


}  // namespace

absl::StatusOr<Dump> OpenDump(const std::string& path, size_t keep_budget_bytes,
                              NpyListing npy_listing, const std::vector<DirEntry>* listing,
                              OutsideLinks links) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
  if (fs::is_regular_file(st)) return OpenDumpFile(path, links);
  if (!fs::is_directory(st)) return absl::InvalidArgumentError(absl::StrCat(path, ": not a file or directory"));
  const fs::path json = fs::path(path) / "dump.json";
  if (fs::exists(json)) {
    PARITY_ASSIGN_OR_RETURN(std::string text, ReadFileToString(json.string(), 1ull << 32));
    PARITY_ASSIGN_OR_RETURN(Dump dump, ParseMsprobeDumpJson(path, json.string(), text));
    if (links == OutsideLinks::kRefuse) ConfineItems(path, &dump);
    PARITY_ASSIGN_OR_RETURN(dump.structure, ReadDumpStructure(path));
    return dump;
  }
  return OpenTensorDirectory(path, keep_budget_bytes, npy_listing, listing, links);
}

absl::StatusOr<Tensor> LoadItemTensor(const DumpItem& item) {
  if (!item.read_error.ok()) return item.read_error;
  if (!item.is_tensor) {
    return absl::FailedPreconditionError(absl::StrCat(item.name, " is not a tensor (", item.type, ")"));
  }
  if (!item.raw_data_path.empty()) {
    if (!item.dtype) return absl::FailedPreconditionError(absl::StrCat(item.name, " has no dtype"));
    // Bytes already in memory are used as they are. Otherwise raw blobs are parityd's spool
    // files, never rewritten in place: mapped, not copied, or read past the page cache as they
    // were written.
    if (item.raw_bytes.owner) {
      return Tensor::MakeView(*item.dtype, item.shape, item.raw_bytes.owner, item.raw_bytes.bytes);
    }
    PARITY_ASSIGN_OR_RETURN(SharedBytes blob, item.raw_direct ? ReadFileDirect(item.raw_data_path)
                                                               : MapFileShared(item.raw_data_path));
    return Tensor::MakeView(*item.dtype, item.shape, std::move(blob.owner), blob.bytes);
  }
  if (item.data_path.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(item.name, " has no data file in this dump"));
  }
  if (!item.safetensors_key.empty()) {
    PARITY_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(item.data_path));
    for (const SafetensorsFile::Entry& e : f.entries()) {
      if (e.name == item.safetensors_key) return f.Read(e);
    }
    return absl::NotFoundError(absl::StrCat(item.data_path, ": no tensor '", item.safetensors_key, "'"));
  }
  if (item.ge_index >= 0) {
    PARITY_ASSIGN_OR_RETURN(GeDump ge, ReadGeDump(item.data_path));
    if (static_cast<size_t>(item.ge_index) >= ge.tensors.size()) {
      return absl::DataLossError(absl::StrCat(item.data_path, " changed: it no longer holds tensor ", item.ge_index));
    }
    return ReadGeTensor(item.data_path, ge.tensors[static_cast<size_t>(item.ge_index)]);
  }
  if (!item.pt_key.empty()) {
    PARITY_ASSIGN_OR_RETURN(auto tensors, ReadPtTensors(item.data_path));
    for (auto& [name, t] : tensors) {
      if (name == item.pt_key) return std::move(t);
    }
    return absl::NotFoundError(absl::StrCat(item.data_path, ": no tensor '", item.pt_key, "'"));
  }
  const bool pt = absl::EndsWith(item.data_path, ".pt") || absl::EndsWith(item.data_path, ".pth");
  absl::StatusOr<Tensor> loaded = pt                     ? ReadPtFile(item.data_path)
                                  : item.npy_file.owner ? ParseNpyFile(item.npy_file, item.data_path)
                                                        : ReadNpyFile(item.data_path);
  if (!loaded.ok()) return loaded.status();
  Tensor t = std::move(*loaded);
  if (item.has_shape && t.shape() != item.shape) {
    return absl::DataLossError(absl::StrCat(item.data_path, ": file holds shape ",
                                            ShapeToString(t.shape()), " but dump.json says ",
                                            ShapeToString(item.shape)));
  }
  return t;
}

}  // namespace parity
