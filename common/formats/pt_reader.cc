#include "common/formats/pt_reader.h"

#include <cstring>
#include <map>
#include <memory>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/file_util.h"
#include "common/base/status_macros.h"

namespace parity {
namespace {

constexpr uint64_t kMaxPickleBytes = 64u << 20;
constexpr uint64_t kMaxCentralDirectory = 64u << 20;
// Containers nested deeper than this are refused (Python's own recursion limit is 1000; torch
// files nest a few levels). Bounds the recursion of destroying the value tree.
constexpr int kMaxPickleDepth = 1000;

uint16_t U16(const std::string& s, size_t p) {
  return static_cast<uint16_t>(static_cast<unsigned char>(s[p]) | (static_cast<unsigned char>(s[p + 1]) << 8));
}
uint32_t U32(const std::string& s, size_t p) {
  return static_cast<uint32_t>(U16(s, p)) | (static_cast<uint32_t>(U16(s, p + 2)) << 16);
}
uint64_t U64(const std::string& s, size_t p) {
  return static_cast<uint64_t>(U32(s, p)) | (static_cast<uint64_t>(U32(s, p + 4)) << 32);
}

// ---- ZIP (stored entries only; zip64 aware) -------------------------------------------------

struct ZipEntry {
  uint64_t data_offset;
  uint64_t size;
  bool compressed;  // torch.save only writes stored entries; compressed ones cannot be read
};

class Zip {
 public:
  static absl::StatusOr<Zip> Open(const std::string& path) {
    Zip z;
    z.path_ = path;
    PARITY_ASSIGN_OR_RETURN(uint64_t size, FileSize(path));
    auto bad = [&](const std::string& what) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": not a torch.save archive: ", what));
    };
    if (size < 22) return bad("file too short for a ZIP archive");
    const uint64_t tail_len = std::min<uint64_t>(size, 22 + 65535 + 20);
    PARITY_ASSIGN_OR_RETURN(std::string tail, ReadFileRange(path, size - tail_len, tail_len));
    size_t eocd = std::string::npos;
    for (size_t i = tail.size() - 22 + 1; i-- > 0;) {
      if (U32(tail, i) == 0x06054b50) {
        eocd = i;
        break;
      }
    }
    if (eocd == std::string::npos) {
      if (tail.size() >= 2 && tail[0] == '\x80') {
        return bad("legacy (non-zip) torch.save format is not supported; re-save with torch >= 1.6");
      }
      return bad("no ZIP end-of-central-directory record");
    }
    uint64_t entries = U16(tail, eocd + 10);
    uint64_t cd_size = U32(tail, eocd + 12);
    uint64_t cd_offset = U32(tail, eocd + 16);
    if (cd_offset == 0xffffffffu || entries == 0xffff || cd_size == 0xffffffffu) {
      // zip64: the locator sits right before the EOCD.
      if (eocd < 20 || U32(tail, eocd - 20) != 0x07064b50) return bad("zip64 locator missing");
      const uint64_t z64_off = U64(tail, eocd - 20 + 8);
      PARITY_ASSIGN_OR_RETURN(std::string z64, ReadFileRange(path, z64_off, 56));
      if (U32(z64, 0) != 0x06064b50) return bad("zip64 end record missing");
      entries = U64(z64, 32);
      cd_size = U64(z64, 40);
      cd_offset = U64(z64, 48);
    }
    if (cd_size > kMaxCentralDirectory || cd_offset > size || cd_size > size - cd_offset) {
      return bad(absl::StrCat("central directory (", cd_size, " bytes at ", cd_offset, ") is out of bounds"));
    }
    PARITY_ASSIGN_OR_RETURN(std::string cd, ReadFileRange(path, cd_offset, cd_size));
    size_t p = 0;
    for (uint64_t e = 0; e < entries; ++e) {
      if (p + 46 > cd.size() || U32(cd, p) != 0x02014b50) return bad("corrupt central directory");
      const uint16_t method = U16(cd, p + 10);
      uint64_t csize = U32(cd, p + 20), usize = U32(cd, p + 24);
      const uint16_t name_len = U16(cd, p + 28), extra_len = U16(cd, p + 30), comment_len = U16(cd, p + 32);
      uint64_t local = U32(cd, p + 42);
      if (p + 46 + name_len + extra_len + comment_len > cd.size()) return bad("corrupt central directory");
      const std::string name = cd.substr(p + 46, name_len);
      // zip64 extra field: replaces the 0xffffffff fields in order.
      size_t x = p + 46 + name_len;
      const size_t xend = x + extra_len;
      while (x + 4 <= xend) {
        const uint16_t id = U16(cd, x), len = U16(cd, x + 2);
        size_t q = x + 4;
        if (id == 0x0001) {
          if (usize == 0xffffffffu && q + 8 <= x + 4 + len) usize = U64(cd, q), q += 8;
          if (csize == 0xffffffffu && q + 8 <= x + 4 + len) csize = U64(cd, q), q += 8;
          if (local == 0xffffffffu && q + 8 <= x + 4 + len) local = U64(cd, q), q += 8;
        }
        x += 4 + len;
      }
      p += 46 + name_len + extra_len + comment_len;
      if (method != 0) {
        z.entries_[name] = {0, 0, true};
        continue;
      }
      if (csize != usize) return bad(absl::StrCat("entry '", name, "' has inconsistent sizes"));
      PARITY_ASSIGN_OR_RETURN(std::string lh, ReadFileRange(path, local, 30));
      if (U32(lh, 0) != 0x04034b50) return bad(absl::StrCat("entry '", name, "' has no local header"));
      const uint64_t data = local + 30 + U16(lh, 26) + U16(lh, 28);
      if (data > size || usize > size - data) {
        return bad(absl::StrCat("entry '", name, "' runs past the end of the file"));
      }
      z.entries_[name] = {data, usize, false};
    }
    return z;
  }

  // The entry whose name ends with `suffix` after the archive's top folder ("x/data.pkl").
  const ZipEntry* FindInArchive(const std::string& suffix, std::string* prefix) const {
    for (const auto& [name, e] : entries_) {
      const size_t slash = name.find('/');
      if (slash != std::string::npos && name.substr(slash + 1) == suffix) {
        *prefix = name.substr(0, slash + 1);
        return &e;
      }
    }
    return nullptr;
  }
  const ZipEntry* Find(const std::string& name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second;
  }
  absl::StatusOr<std::string> Read(const ZipEntry& e, const std::string& name) const {
    if (e.compressed) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": entry '", name,
                                                     "' is compressed (torch.save stores entries uncompressed)"));
    }
    return ReadFileRange(path_, e.data_offset, e.size);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::map<std::string, ZipEntry> entries_;
};

// ---- Pickle subset ------------------------------------------------------------------------

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Storage {
  DType dtype;
  std::string key;
  int64_t numel;
};

struct TensorRef {
  std::shared_ptr<Storage> storage;
  int64_t offset;
  Shape size;
  std::vector<int64_t> stride;
};

enum class Global { kRebuildTensorV2, kRebuildTensor, kRebuildParameter, kOrderedDict, kStorageClass };

struct Value {
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kTuple, kList, kDict, kGlobal, kStorage, kTensor, kMark };
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<ValuePtr> items;                  // tuple, list
  std::vector<std::pair<ValuePtr, ValuePtr>> dict;
  Global global = Global::kOrderedDict;
  DType storage_dtype = DType::kFloat32;        // for kGlobal kStorageClass
  std::shared_ptr<Storage> storage;
  std::shared_ptr<TensorRef> tensor;
  int depth = 0;        // containers: 1 + the deepest nested container
  bool nested = false;  // held by a container (then no longer changed: see Nest)
};

ValuePtr Make(Value::Kind k) {
  auto v = std::make_shared<Value>();
  v->kind = k;
  return v;
}

std::optional<DType> StorageClassDType(const std::string& name) {
  static const std::map<std::string, DType> kMap = {
      {"FloatStorage", DType::kFloat32},  {"DoubleStorage", DType::kFloat64},
      {"HalfStorage", DType::kFloat16},   {"BFloat16Storage", DType::kBFloat16},
      {"LongStorage", DType::kInt64},     {"IntStorage", DType::kInt32},
      {"ShortStorage", DType::kInt16},    {"CharStorage", DType::kInt8},
      {"ByteStorage", DType::kUInt8},     {"BoolStorage", DType::kBool},
      {"Float8_e4m3fnStorage", DType::kFloat8E4M3FN}, {"Float8_e5m2Storage", DType::kFloat8E5M2},
  };
  auto it = kMap.find(name);
  if (it == kMap.end()) return std::nullopt;
  return it->second;
}

class Unpickler {
 public:
  Unpickler(const std::string& data, const std::string& origin) : d_(data), origin_(origin) {}

  absl::StatusOr<ValuePtr> Load() {
    while (true) {
      if (p_ >= d_.size()) return Err("pickle ends without STOP");
      const size_t at = p_;
      const unsigned char op = static_cast<unsigned char>(d_[p_++]);
      absl::Status s = Step(op, at);
      if (!s.ok()) return s;
      if (stopped_) {
        if (stack_.size() != 1) return Err("STOP with an unbalanced stack");
        return stack_.back();
      }
    }
  }

 private:
  absl::Status Err(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ": ", what));
  }
  absl::Status Need(size_t n) const {
    if (p_ + n > d_.size()) return Err("truncated pickle");
    return absl::OkStatus();
  }
  absl::StatusOr<ValuePtr> Pop() {
    if (stack_.empty() || stack_.back()->kind == Value::Kind::kMark) return Err("pickle stack underflow");
    ValuePtr v = stack_.back();
    stack_.pop_back();
    return v;
  }
  absl::StatusOr<std::vector<ValuePtr>> PopToMark() {
    std::vector<ValuePtr> items;
    while (!stack_.empty() && stack_.back()->kind != Value::Kind::kMark) {
      items.push_back(stack_.back());
      stack_.pop_back();
    }
    if (stack_.empty()) return Err("pickle MARK missing");
    stack_.pop_back();
    std::reverse(items.begin(), items.end());
    return items;
  }
  void Push(ValuePtr v) { stack_.push_back(std::move(v)); }

  // Puts `child` into the container `parent` (a caller appends it). A container that is already
  // held by another one cannot change, and nothing holds itself: that is how a pickle builds a
  // recursive structure, which is refused (it would leak and make any walk endless).
  absl::Status Nest(Value& parent, const ValuePtr& child) {
    if (parent.nested || child.get() == &parent) {
      return Err("recursive containers (a list or dict changed after it was nested) are not supported");
    }
    child->nested = true;
    parent.depth = std::max(parent.depth, child->depth + 1);
    if (parent.depth > kMaxPickleDepth) {
      return Err(absl::StrCat("containers nested more than ", kMaxPickleDepth, " deep"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> ReadLine() {
    const size_t nl = d_.find('\n', p_);
    if (nl == std::string::npos) return Err("truncated pickle line");
    std::string s = d_.substr(p_, nl - p_);
    p_ = nl + 1;
    return s;
  }

  absl::Status PushGlobal(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    auto g = Make(Value::Kind::kGlobal);
    if (full == "torch._utils._rebuild_tensor_v2") {
      g->global = Global::kRebuildTensorV2;
    } else if (full == "torch._utils._rebuild_tensor") {
      g->global = Global::kRebuildTensor;
    } else if (full == "torch._utils._rebuild_parameter") {
      g->global = Global::kRebuildParameter;
    } else if (full == "collections.OrderedDict") {
      g->global = Global::kOrderedDict;
    } else if (module == "torch" && StorageClassDType(name)) {
      g->global = Global::kStorageClass;
      g->storage_dtype = *StorageClassDType(name);
    } else {
      return Err(absl::StrCat("refusing global '", full,
                              "': only tensor-rebuilding globals are allowed, nothing is executed"));
    }
    Push(g);
    return absl::OkStatus();
  }

  absl::Status Memo(uint64_t idx) {
    if (stack_.empty()) return Err("memo put on an empty stack");
    if (idx > 10000000) return Err("memo index too large");
    memo_[idx] = stack_.back();
    return absl::OkStatus();
  }

  absl::Status Reduce(const ValuePtr& fn, const ValuePtr& args) {
    if (fn->kind != Value::Kind::kGlobal) return Err("REDUCE on something that is not an allowed global");
    if (args->kind != Value::Kind::kTuple) return Err("REDUCE arguments are not a tuple");
    const auto& a = args->items;
    switch (fn->global) {
      case Global::kOrderedDict:
        if (!a.empty()) return Err("OrderedDict() with arguments");
        Push(Make(Value::Kind::kDict));
        return absl::OkStatus();
      case Global::kRebuildParameter: {
        // (tensor, requires_grad, backward_hooks)
        if (a.empty() || a[0]->kind != Value::Kind::kTensor) return Err("_rebuild_parameter without a tensor");
        Push(a[0]);
        return absl::OkStatus();
      }
      case Global::kRebuildTensorV2:
      case Global::kRebuildTensor: {
        // (storage, storage_offset, size, stride, ...)
        if (a.size() < 4 || a[0]->kind != Value::Kind::kStorage || a[1]->kind != Value::Kind::kInt ||
            a[2]->kind != Value::Kind::kTuple || a[3]->kind != Value::Kind::kTuple) {
          return Err("_rebuild_tensor arguments are not (storage, offset, size, stride, ...)");
        }
        auto t = std::make_shared<TensorRef>();
        t->storage = a[0]->storage;
        t->offset = a[1]->i;
        for (const ValuePtr& d : a[2]->items) {
          if (d->kind != Value::Kind::kInt) return Err("tensor size holds a non-integer");
          t->size.push_back(d->i);
        }
        for (const ValuePtr& d : a[3]->items) {
          if (d->kind != Value::Kind::kInt) return Err("tensor stride holds a non-integer");
          t->stride.push_back(d->i);
        }
        auto v = Make(Value::Kind::kTensor);
        v->tensor = std::move(t);
        Push(v);
        return absl::OkStatus();
      }
      case Global::kStorageClass:
        return Err("calling a storage class is not allowed");
    }
    return Err("unknown global");
  }

  absl::Status PersistentLoad(const ValuePtr& pid) {
    // ('storage', storage_type, key, location, numel)
    if (pid->kind != Value::Kind::kTuple || pid->items.size() < 5 || pid->items[0]->kind != Value::Kind::kString ||
        pid->items[0]->s != "storage") {
      return Err("persistent id is not a ('storage', type, key, location, numel) tuple");
    }
    const auto& a = pid->items;
    if (a[1]->kind != Value::Kind::kGlobal || a[1]->global != Global::kStorageClass) {
      return Err("persistent storage type is not a torch storage class");
    }
    if (a[2]->kind != Value::Kind::kString || a[4]->kind != Value::Kind::kInt || a[4]->i < 0) {
      return Err("persistent storage key or numel is malformed");
    }
    auto it = storages_.find(a[2]->s);
    if (it == storages_.end()) {
      auto st = std::make_shared<Storage>();
      st->dtype = a[1]->storage_dtype;
      st->key = a[2]->s;
      st->numel = a[4]->i;
      it = storages_.emplace(st->key, st).first;
    }
    auto v = Make(Value::Kind::kStorage);
    v->storage = it->second;
    Push(v);
    return absl::OkStatus();
  }

  // One opcode at offset `at`: by what it makes, scalars, containers, the memo or objects.
  absl::Status Step(unsigned char op, size_t at) {
    switch (op) {
      case 0x80: case 0x95: case '.': case '(': case 'N': case 0x88: case 0x89: case 'J': case 'K':
      case 'M': case 0x8a: case 'G': case 'X': case 0x8c: case 0x8d: case 'B': case 'C':
        return StepScalar(op);
      case '}': case ']': case ')': case 't': case 0x85: case 0x86: case 0x87: case 'a': case 'e':
      case 's': case 'u':
        return StepContainer(op);
      case 'q': case 'r': case 0x94: case 'h': case 'j':
        return StepMemo(op);
      case 'c': case 0x93: case 'Q': case 'R': case 'b':
        return StepObject(op, at);
      default:
        return Err(absl::StrFormat("unsupported pickle opcode 0x%02x ('%c') at offset %d", op,
                                   op >= 0x20 && op < 0x7f ? static_cast<char>(op) : '?', at));
    }
  }

  // Framing, marks and scalars: ints, floats, strings, bools, None.
  absl::Status StepScalar(unsigned char op) {
    auto str = [&](size_t n) {
      std::string s = d_.substr(p_, n);
      p_ += n;
      return s;
    };
    switch (op) {
      case 0x80:  // PROTO
        PARITY_RETURN_IF_ERROR(Need(1));
        ++p_;
        return absl::OkStatus();
      case 0x95:  // FRAME
        PARITY_RETURN_IF_ERROR(Need(8));
        p_ += 8;
        return absl::OkStatus();
      case '.':  // STOP
        stopped_ = true;
        return absl::OkStatus();
      case '(':  // MARK
        Push(Make(Value::Kind::kMark));
        return absl::OkStatus();
      case 'N': Push(Make(Value::Kind::kNone)); return absl::OkStatus();
      case 0x88:
      case 0x89: {  // NEWTRUE / NEWFALSE
        auto v = Make(Value::Kind::kBool);
        v->b = op == 0x88;
        Push(v);
        return absl::OkStatus();
      }
      case 'J': case 'K': case 'M': {  // BININT, BININT1, BININT2
        const size_t n = op == 'J' ? 4 : op == 'K' ? 1 : 2;
        PARITY_RETURN_IF_ERROR(Need(n));
        auto v = Make(Value::Kind::kInt);
        if (n == 4) v->i = static_cast<int32_t>(U32(d_, p_));
        else if (n == 2) v->i = U16(d_, p_);
        else v->i = static_cast<unsigned char>(d_[p_]);
        p_ += n;
        Push(v);
        return absl::OkStatus();
      }
      case 0x8a: {  // LONG1
        PARITY_RETURN_IF_ERROR(Need(1));
        const size_t n = static_cast<unsigned char>(d_[p_++]);
        if (n > 8) return Err("LONG1 wider than 64 bits");
        PARITY_RETURN_IF_ERROR(Need(n));
        uint64_t u = 0;
        for (size_t i = 0; i < n; ++i) u |= static_cast<uint64_t>(static_cast<unsigned char>(d_[p_ + i])) << (8 * i);
        if (n > 0 && n < 8 && (d_[p_ + n - 1] & 0x80)) u |= ~uint64_t{0} << (8 * n);  // sign-extend
        p_ += n;
        auto v = Make(Value::Kind::kInt);
        v->i = static_cast<int64_t>(u);
        Push(v);
        return absl::OkStatus();
      }
      case 'G': {  // BINFLOAT (big-endian double)
        PARITY_RETURN_IF_ERROR(Need(8));
        uint64_t u = 0;
        for (int i = 0; i < 8; ++i) u = (u << 8) | static_cast<unsigned char>(d_[p_ + i]);
        p_ += 8;
        auto v = Make(Value::Kind::kFloat);
        std::memcpy(&v->f, &u, 8);
        Push(v);
        return absl::OkStatus();
      }
      case 'X': case 0x8c: case 0x8d: case 'B': case 'C': {  // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, BINBYTES, SHORT_BINBYTES
        uint64_t n;
        if (op == 0x8c || op == 'C') {
          PARITY_RETURN_IF_ERROR(Need(1));
          n = static_cast<unsigned char>(d_[p_++]);
        } else if (op == 0x8d) {
          PARITY_RETURN_IF_ERROR(Need(8));
          n = U64(d_, p_);
          p_ += 8;
        } else {
          PARITY_RETURN_IF_ERROR(Need(4));
          n = U32(d_, p_);
          p_ += 4;
        }
        if (n > d_.size() - p_) return Err("truncated pickle string");
        auto v = Make(Value::Kind::kString);
        v->s = str(n);
        Push(v);
        return absl::OkStatus();
      }
      default:
        return Err("unreachable opcode");
    }
  }

  // Tuples, lists and dicts, and what fills them.
  absl::Status StepContainer(unsigned char op) {
    switch (op) {
      case '}': Push(Make(Value::Kind::kDict)); return absl::OkStatus();
      case ']': Push(Make(Value::Kind::kList)); return absl::OkStatus();
      case ')': Push(Make(Value::Kind::kTuple)); return absl::OkStatus();
      case 't': {
        PARITY_ASSIGN_OR_RETURN(std::vector<ValuePtr> items, PopToMark());
        auto v = Make(Value::Kind::kTuple);
        for (const ValuePtr& x : items) PARITY_RETURN_IF_ERROR(Nest(*v, x));
        v->items = std::move(items);
        Push(v);
        return absl::OkStatus();
      }
      case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
        const size_t n = op - 0x84;
        auto v = Make(Value::Kind::kTuple);
        for (size_t i = 0; i < n; ++i) {
          PARITY_ASSIGN_OR_RETURN(ValuePtr x, Pop());
          PARITY_RETURN_IF_ERROR(Nest(*v, x));
          v->items.insert(v->items.begin(), x);
        }
        Push(v);
        return absl::OkStatus();
      }
      case 'a': {  // APPEND
        PARITY_ASSIGN_OR_RETURN(ValuePtr x, Pop());
        PARITY_ASSIGN_OR_RETURN(ValuePtr list, Pop());
        if (list->kind != Value::Kind::kList) return Err("APPEND to a non-list");
        PARITY_RETURN_IF_ERROR(Nest(*list, x));
        list->items.push_back(x);
        Push(list);
        return absl::OkStatus();
      }
      case 'e': {  // APPENDS
        PARITY_ASSIGN_OR_RETURN(std::vector<ValuePtr> items, PopToMark());
        PARITY_ASSIGN_OR_RETURN(ValuePtr list, Pop());
        if (list->kind != Value::Kind::kList) return Err("APPENDS to a non-list");
        for (const ValuePtr& x : items) PARITY_RETURN_IF_ERROR(Nest(*list, x));
        list->items.insert(list->items.end(), items.begin(), items.end());
        Push(list);
        return absl::OkStatus();
      }
      case 's': {  // SETITEM
        PARITY_ASSIGN_OR_RETURN(ValuePtr val, Pop());
        PARITY_ASSIGN_OR_RETURN(ValuePtr key, Pop());
        PARITY_ASSIGN_OR_RETURN(ValuePtr dict, Pop());
        if (dict->kind != Value::Kind::kDict) return Err("SETITEM on a non-dict");
        PARITY_RETURN_IF_ERROR(Nest(*dict, key));
        PARITY_RETURN_IF_ERROR(Nest(*dict, val));
        dict->dict.emplace_back(key, val);
        Push(dict);
        return absl::OkStatus();
      }
      case 'u': {  // SETITEMS
        PARITY_ASSIGN_OR_RETURN(std::vector<ValuePtr> items, PopToMark());
        PARITY_ASSIGN_OR_RETURN(ValuePtr dict, Pop());
        if (dict->kind != Value::Kind::kDict || items.size() % 2) return Err("SETITEMS on a non-dict");
        for (const ValuePtr& x : items) PARITY_RETURN_IF_ERROR(Nest(*dict, x));
        for (size_t i = 0; i < items.size(); i += 2) dict->dict.emplace_back(items[i], items[i + 1]);
        Push(dict);
        return absl::OkStatus();
      }
      default:
        return Err("unreachable opcode");
    }
  }

  // The memo: PUT and GET.
  absl::Status StepMemo(unsigned char op) {
    switch (op) {
      case 'q': case 'r': {  // BINPUT, LONG_BINPUT
        const size_t n = op == 'q' ? 1 : 4;
        PARITY_RETURN_IF_ERROR(Need(n));
        const uint64_t idx = n == 1 ? static_cast<unsigned char>(d_[p_]) : U32(d_, p_);
        p_ += n;
        return Memo(idx);
      }
      case 0x94: return Memo(next_memo_++);  // MEMOIZE
      case 'h': case 'j': {  // BINGET, LONG_BINGET
        const size_t n = op == 'h' ? 1 : 4;
        PARITY_RETURN_IF_ERROR(Need(n));
        const uint64_t idx = n == 1 ? static_cast<unsigned char>(d_[p_]) : U32(d_, p_);
        p_ += n;
        auto it = memo_.find(idx);
        if (it == memo_.end()) return Err(absl::StrCat("memo index ", idx, " is not set"));
        Push(it->second);
        return absl::OkStatus();
      }
      default:
        return Err("unreachable opcode");
    }
  }

  // Globals, persistent ids, REDUCE and BUILD.
  absl::Status StepObject(unsigned char op, size_t at) {
    switch (op) {
      case 'c': {  // GLOBAL module\nname\n
        PARITY_ASSIGN_OR_RETURN(std::string module, ReadLine());
        PARITY_ASSIGN_OR_RETURN(std::string name, ReadLine());
        return PushGlobal(module, name);
      }
      case 0x93: {  // STACK_GLOBAL
        PARITY_ASSIGN_OR_RETURN(ValuePtr name, Pop());
        PARITY_ASSIGN_OR_RETURN(ValuePtr module, Pop());
        if (name->kind != Value::Kind::kString || module->kind != Value::Kind::kString) {
          return Err("STACK_GLOBAL operands are not strings");
        }
        return PushGlobal(module->s, name->s);
      }
      case 'Q': {  // BINPERSID
        PARITY_ASSIGN_OR_RETURN(ValuePtr pid, Pop());
        return PersistentLoad(pid);
      }
      case 'R': {  // REDUCE
        PARITY_ASSIGN_OR_RETURN(ValuePtr args, Pop());
        PARITY_ASSIGN_OR_RETURN(ValuePtr fn, Pop());
        return Reduce(fn, args);
      }
      case 'b': {  // BUILD: only empty state on a tensor or dict
        PARITY_ASSIGN_OR_RETURN(ValuePtr state, Pop());
        if (stack_.empty()) return Err("BUILD on an empty stack");
        const bool empty_state = (state->kind == Value::Kind::kDict && state->dict.empty()) ||
                                 state->kind == Value::Kind::kNone ||
                                 (state->kind == Value::Kind::kTuple && state->items.empty());
        if (!empty_state) return Err(absl::StrFormat("BUILD with object state at offset %d is not supported", at));
        return absl::OkStatus();
      }
      default:
        return Err("unreachable opcode");
    }
  }

  const std::string& d_;
  const std::string& origin_;
  size_t p_ = 0;
  bool stopped_ = false;
  std::vector<ValuePtr> stack_;
  std::map<uint64_t, ValuePtr> memo_;
  uint64_t next_memo_ = 0;
  std::map<std::string, std::shared_ptr<Storage>> storages_;
};

// A tensor's storage entry, checked: the view lies inside it. `contiguous` when the view's
// elements are numel consecutive elements from `offset` (a C-order view).
struct Located {
  const ZipEntry* entry;
  std::string entry_name;
  int64_t numel;
  size_t esize;
  bool contiguous;
};

absl::StatusOr<Located> Locate(const Zip& zip, const std::string& prefix, const TensorRef& t,
                               const std::string& origin) {
  if (t.size.size() != t.stride.size()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": tensor size and stride have different ranks"));
  }
  PARITY_ASSIGN_OR_RETURN(int64_t numel, CheckedNumel(t.size));
  const Storage& st = *t.storage;
  const size_t esize = DTypeSize(st.dtype);
  const std::string entry = prefix + "data/" + st.key;
  const ZipEntry* e = zip.Find(entry);
  if (e == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": storage '", entry, "' is missing"));
  }
  if (e->compressed) return zip.Read(*e, entry).status();
  if (st.numel > 0 && static_cast<uint64_t>(st.numel) > e->size / esize) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": storage '", st.key, "' holds ", e->size,
                                                   " bytes, fewer than its ", st.numel, " elements"));
  }
  // The largest element index the view touches must lie inside the storage.
  int64_t max_index = t.offset;
  for (size_t d = 0; d < t.size.size(); ++d) {
    if (t.stride[d] < 0) return absl::InvalidArgumentError(absl::StrCat(origin, ": negative stride"));
    if (t.size[d] > 0) max_index += (t.size[d] - 1) * t.stride[d];
  }
  if (numel > 0 && (t.offset < 0 || max_index >= st.numel)) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": tensor view (offset ", t.offset, ", shape ",
                                                   ShapeToString(t.size), ") reaches element ", max_index,
                                                   " of a storage of ", st.numel));
  }
  bool contiguous = true;
  int64_t expect = 1;
  for (size_t d = t.size.size(); d-- > 0;) {
    if (t.size[d] != 1 && t.stride[d] != expect) contiguous = false;
    expect *= t.size[d];
  }
  return Located{e, entry, numel, esize, contiguous};
}

absl::StatusOr<Tensor> Materialize(const Zip& zip, const std::string& prefix, const TensorRef& t,
                                   const std::string& origin) {
  PARITY_ASSIGN_OR_RETURN(Located l, Locate(zip, prefix, t, origin));
  const Storage& st = *t.storage;
  const ZipEntry* e = l.entry;
  const std::string& entry = l.entry_name;
  const int64_t numel = l.numel;
  const size_t esize = l.esize;
  const bool contiguous = l.contiguous;
  std::string data;
  if (numel == 0) {
    // nothing to read
  } else if (contiguous) {
    // Read into a pooled buffer that the tensor views: no zero fill, no copy.
    PARITY_ASSIGN_OR_RETURN(SharedBytes read,
                            ReadFileRangeShared(zip.path(), e->data_offset + static_cast<uint64_t>(t.offset) * esize,
                                                static_cast<uint64_t>(numel) * esize));
    return Tensor::MakeView(st.dtype, t.size, std::move(read.owner), read.bytes);
  } else {
    PARITY_ASSIGN_OR_RETURN(std::string all, zip.Read(*e, entry));
    data.resize(static_cast<size_t>(numel) * esize);
    std::vector<int64_t> idx(t.size.size(), 0);
    for (int64_t i = 0; i < numel; ++i) {
      int64_t src = t.offset;
      for (size_t d = 0; d < idx.size(); ++d) src += idx[d] * t.stride[d];
      std::memcpy(&data[static_cast<size_t>(i) * esize], &all[static_cast<size_t>(src) * esize], esize);
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < t.size[d]) break;
        idx[d] = 0;
      }
    }
  }
  return Tensor::Make(st.dtype, t.size, std::move(data));
}

std::string KeyText(const Value& k) {
  switch (k.kind) {
    case Value::Kind::kString: return k.s;
    case Value::Kind::kInt: return absl::StrCat(k.i);
    default: return "?";
  }
}

}  // namespace

struct Loaded {
  Zip zip;
  std::string prefix;
  std::vector<std::pair<std::string, std::shared_ptr<TensorRef>>> tensors;
};

absl::StatusOr<Loaded> LoadPt(const std::string& path) {
  PARITY_ASSIGN_OR_RETURN(Zip zip, Zip::Open(path));
  std::string prefix;
  const ZipEntry* pkl = zip.FindInArchive("data.pkl", &prefix);
  if (pkl == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a torch.save archive: no */data.pkl entry"));
  }
  if (const ZipEntry* bo = zip.Find(prefix + "byteorder")) {
    PARITY_ASSIGN_OR_RETURN(std::string order, zip.Read(*bo, prefix + "byteorder"));
    if (order.rfind("little", 0) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": byte order '", order, "' is not supported"));
    }
  }
  if (pkl->size > kMaxPickleBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(path, ": data.pkl is ", pkl->size, " bytes, above 64 MiB"));
  }
  PARITY_ASSIGN_OR_RETURN(std::string pickle, zip.Read(*pkl, prefix + "data.pkl"));
  Unpickler u(pickle, path);
  PARITY_ASSIGN_OR_RETURN(ValuePtr root, u.Load());
  Loaded out{std::move(zip), prefix, {}};
  if (root->kind == Value::Kind::kTensor) {
    out.tensors.emplace_back("", root->tensor);
    return out;
  }
  std::vector<std::pair<std::string, ValuePtr>> members;
  if (root->kind == Value::Kind::kDict) {
    for (const auto& [k, v] : root->dict) members.emplace_back(KeyText(*k), v);
  } else if (root->kind == Value::Kind::kList || root->kind == Value::Kind::kTuple) {
    for (size_t i = 0; i < root->items.size(); ++i) members.emplace_back(absl::StrCat(i), root->items[i]);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(path, ": holds no tensor"));
  }
  for (const auto& [name, v] : members) {
    if (v->kind == Value::Kind::kTensor) out.tensors.emplace_back(name, v->tensor);
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadPtTensors(const std::string& path) {
  PARITY_ASSIGN_OR_RETURN(Loaded l, LoadPt(path));
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, ref] : l.tensors) {
    PARITY_ASSIGN_OR_RETURN(Tensor t, Materialize(l.zip, l.prefix, *ref, path));
    out.emplace_back(name, std::move(t));
  }
  return out;
}

absl::StatusOr<std::vector<PtEntry>> ReadPtIndex(const std::string& path) {
  PARITY_ASSIGN_OR_RETURN(Loaded l, LoadPt(path));
  std::vector<PtEntry> out;
  for (const auto& [name, ref] : l.tensors) out.push_back({name, ref->storage->dtype, ref->size});
  return out;
}

absl::StatusOr<std::optional<PtRange>> FindPtRange(const std::string& path, const std::string& key) {
  PARITY_ASSIGN_OR_RETURN(Loaded l, LoadPt(path));
  const TensorRef* ref = nullptr;
  if (key.empty()) {
    if (l.tensors.size() != 1 || !l.tensors[0].first.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": holds ", l.tensors.size(),
                                                     " tensors in a container, not one tensor"));
    }
    ref = l.tensors[0].second.get();
  } else {
    for (const auto& [name, r] : l.tensors) {
      if (name == key) ref = r.get();
    }
    if (ref == nullptr) return absl::NotFoundError(absl::StrCat(path, ": no tensor '", key, "'"));
  }
  PARITY_ASSIGN_OR_RETURN(Located at, Locate(l.zip, l.prefix, *ref, path));
  if (!at.contiguous || at.numel == 0) return std::optional<PtRange>();
  PtRange r;
  r.dtype = ref->storage->dtype;
  r.shape = ref->size;
  r.offset = at.entry->data_offset + static_cast<uint64_t>(ref->offset) * at.esize;
  r.length = static_cast<uint64_t>(at.numel) * at.esize;
  return std::optional<PtRange>(r);
}

absl::StatusOr<Tensor> ReadPtFile(const std::string& path) {
  PARITY_ASSIGN_OR_RETURN(auto tensors, ReadPtTensors(path));
  if (tensors.size() != 1 || !tensors[0].first.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": holds ", tensors.size(),
                                                   " tensors in a container, not one tensor"));
  }
  return std::move(tensors[0].second);
}

}  // namespace parity
