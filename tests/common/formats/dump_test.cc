// msprobe dump.json reading (naming, order, modes, errors), directory layouts and pairing.
#include "common/formats/dump.h"

#include <sys/resource.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "gtest/gtest.h"
#include "client/agent.h"
#include "common/base/file_util.h"
#include "common/formats/npy.h"
#include "common/compare/pairing.h"
#include "common/compare/engine.h"
#include "common/checks/msprobe_kernel.h"
#include "common/formats/safetensors.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

Dump Parse(const std::string& json) {
  auto d = ParseMsprobeDumpJson("/tmp/root", "dump.json", json);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : Dump();
}

std::string TensorLeaf(const char* dtype = "torch.float32", const char* shape = "[2]",
                   const char* extra = "") {
  return std::string(R"({"type": "torch.Tensor", "dtype": ")") + dtype + R"(", "shape": )" +
         shape + R"(, "Max": 1.0, "Min": NaN, "Mean": Infinity, "Norm": -Infinity, "requires_grad": true)" +
         extra + "}";
}

TEST(MsprobeDump, NamesAndOrdersRowsLikeMsprobe) {
  const std::string json = std::string(R"({"task": "statistics", "level": "L1", "data": {
    "Module.conv.Conv2d.forward.0": {
      "output": [)") + TensorLeaf() + R"(],
      "parameters": {"weight": )" + TensorLeaf() + R"(},
      "input_kwargs": {"stride": {"type": "int", "value": 2}, "pad": [{"type": "int", "value": 1}, null]},
      "input_args": [)" + TensorLeaf() + R"(, [)" + TensorLeaf() + R"(]]
    },
    "Functional.relu.0.backward": {"input": [)" + TensorLeaf() + R"(], "output": [)" + TensorLeaf() + R"(],
                                   "is_recompute": false}
  }})";
  Dump d = Parse(json);
  ASSERT_EQ(d.mode, DumpMode::kStatistics);
  std::vector<std::string> names;
  for (const DumpItem& it : d.items) names.push_back(it.name);
  const std::vector<std::string> want = {
      "Module.conv.Conv2d.forward.0.input.0",          "Module.conv.Conv2d.forward.0.input.1.0",
      "Module.conv.Conv2d.forward.0.input.stride",     "Module.conv.Conv2d.forward.0.input.pad.0",
      "Module.conv.Conv2d.forward.0.input.pad.1",      "Module.conv.Conv2d.forward.0.parameters.weight",
      "Module.conv.Conv2d.forward.0.output.0",         "Functional.relu.0.backward.input.0",
      "Functional.relu.0.backward.output.0"};
  EXPECT_EQ(names, want);  // and no row for "is_recompute", as msprobe writes none
  EXPECT_EQ(d.items[0].op_type, "Conv2d");
  EXPECT_EQ(d.items[0].role, Role::kInput);
  EXPECT_EQ(d.items[5].role, Role::kParameter);
  EXPECT_EQ(d.items[6].role, Role::kOutput);
  EXPECT_EQ(d.items[7].phase, Phase::kBackward);
  EXPECT_EQ(d.items[7].op_type, "relu");
  EXPECT_FALSE(d.items[2].is_tensor);
  EXPECT_EQ(d.items[2].type, "int");
  EXPECT_EQ(d.items[4].type, "None");
  // msprobe's Dtype and shape columns for arguments: the Python type of the value, "[]"; a null
  // argument is None in both.
  EXPECT_EQ(d.items[2].dtype_text, "<class 'int'>");
  EXPECT_EQ(d.items[2].shape_text, "[]");
  EXPECT_EQ(d.items[4].dtype_text, "None");
  EXPECT_EQ(d.items[4].shape_text, "None");
  EXPECT_TRUE(std::isnan(d.items[0].min.as_double()));
  EXPECT_EQ(d.items[0].mean.as_double(), INFINITY);
  EXPECT_EQ(d.items[0].requires_grad, true);
  EXPECT_EQ(d.items[0].shape, (Shape{2}));
}

// Special argument types keep their type as Dtype, with msprobe's shape text; a bare value that
// is not a leaf (true, 3) gives no row, as msprobe's parser gives none.
TEST(MsprobeDump, ArgumentsHaveMsprobesDtypeAndShapeColumns) {
  Dump d = Parse(R"({"task": "statistics", "data": {"Tensor.view.0.forward": {"input_args": [
      {"type": "torch.Size", "value": [2, 3]}, {"type": "slice", "value": [0, null, 1]},
      {"type": "float", "value": 0.5}, {"type": "str", "value": "mean"}, {"type": "bool", "value": true},
      true, 3]}}})");
  ASSERT_EQ(d.items.size(), 5u);
  EXPECT_EQ(d.items[0].dtype_text, "torch.Size");
  EXPECT_EQ(d.items[0].shape_text, "[2, 3]");
  EXPECT_EQ(d.items[1].dtype_text, "slice");
  EXPECT_EQ(d.items[1].shape_text, "(3,)");
  EXPECT_EQ(d.items[2].dtype_text, "<class 'float'>");
  EXPECT_EQ(d.items[3].dtype_text, "<class 'str'>");
  EXPECT_EQ(d.items[4].dtype_text, "<class 'bool'>");
}

TEST(MsprobeDump, RowNameComesFromDataName) {
  Dump d = Parse(std::string(R"({"task": "tensor", "data": {"Functional.add.0.forward": {
      "input_args": [)") + TensorLeaf("torch.float32", "[2]", R"(, "data_name": "Other.name.pt")") + "]}}}");
  ASSERT_EQ(d.items.size(), 1u);
  EXPECT_EQ(d.items[0].name, "Other.name");
  EXPECT_EQ(d.items[0].data_path, "/tmp/root/dump_tensor_data/Other.name.pt");
  EXPECT_EQ(d.mode, DumpMode::kTensor);
}

TEST(MsprobeDump, Md5ModeWhenAnyTensorHasMd5) {
  Dump d = Parse(std::string(R"({"task": "statistics", "data": {"F.a.0.forward": {"input_args": [)") +
                 TensorLeaf("torch.float32", "[2]", R"(, "md5": "0badf00d")") + "]}}}");
  EXPECT_EQ(d.mode, DumpMode::kMd5);
  EXPECT_EQ(d.items[0].md5, "0badf00d");
}

TEST(MsprobeDump, RejectsMalformedDocuments) {
  struct Case {
    const char* json;
    const char* needle;
  } cases[] = {
      {"{\"task\": \"tensor\"}", "no \"data\" object"},
      {"{\"data\": {}}", "no \"task\" string"},
      {"{\"task\": \"structure\", \"data\": {}}", "hold no tensor data"},
      {"{\"task\": \"weird\", \"data\": {}}", "unknown task \"weird\""},
      {"{\"task\": \"tensor\", \"data\": {\"a\": 3}}", "entry 'a' is not an object"},
      {"[1]", "not a JSON object"},
      {"{\"task\": \"tensor\", \"data\": {\"a\": {\"input_args\": [{\"type\": \"torch.Tensor\", "
       "\"shape\": [-1]}]}}}", "bad dimension"},
      {"{\"task\": \"tensor\", \"data\": {\"a\": {\"input_args\": [{\"type\": \"torch.Tensor\", "
       "\"data_name\": \"../../etc/passwd\"}]}}}", "must be a plain file name"},
      {"{\"task\": ", "JSON parse error"},
      // The first member of a name counts, as a lookup in a whole document finds it.
      {"{\"task\": 5, \"task\": \"tensor\", \"data\": {}}", "no \"task\" string"},
      {"{\"task\": \"tensor\", \"data\": [], \"data\": {}}", "no \"data\" object"},
  };
  for (const Case& c : cases) {
    auto d = ParseMsprobeDumpJson("/r", "x/dump.json", c.json);
    ASSERT_FALSE(d.ok()) << c.json;
    EXPECT_NE(d.status().message().find(c.needle), std::string::npos) << d.status();
    EXPECT_NE(d.status().message().find("x/dump.json"), std::string::npos);
  }
}

// dump.json is read one operator at a time: a second "data" object is ignored, as a lookup in
// a whole document would ignore it, and the members around "data" count wherever they are.
TEST(MsprobeDump, OnlyTheFirstDataObjectCounts) {
  const char* json =
      "{\"data\": {\"Functional.a.0.forward\": {\"output\": [{\"type\": \"torch.Tensor\", "
      "\"dtype\": \"torch.float32\", \"shape\": [2], \"Max\": 1.5, \"Min\": 0, \"Mean\": 1, "
      "\"Norm\": 2}]}}, \"framework\": \"pytorch\", \"task\": \"statistics\", "
      "\"data\": {\"Functional.b.0.forward\": {\"output\": [{\"type\": \"torch.Tensor\"}]}}}";
  auto d = ParseMsprobeDumpJson("/r", "dump.json", json);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->items.size(), 1u);
  EXPECT_EQ(d->items[0].name, "Functional.a.0.forward.output.0");
  EXPECT_EQ(d->items[0].max.as_double(), 1.5);
  EXPECT_EQ(d->framework, "pytorch");
  EXPECT_EQ(d->mode, DumpMode::kStatistics);
}

TEST(MsprobeDump, FuzzyNameDropsCallCount) {
  EXPECT_EQ(FuzzyName("Functional.relu.3.forward.input.0"), "Functional.relu.forward.input.0");
  EXPECT_EQ(FuzzyName("Module.a.Conv2d.forward.0.input.0"), "Module.a.forward.0.input.0");
  EXPECT_EQ(FuzzyName("Tensor.add.12.backward.output.0"), "Tensor.add.backward.output.0");
  EXPECT_EQ(FuzzyName("plain"), "plain");
}

class DirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("parity_dump_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(DirectoryTest, ReadsNpyAndSafetensorsDirectories) {
  auto a = *parity::Tensor::Make(DType::kFloat32, {1}, std::string("\0\0\x80\x3f", 4));
  ASSERT_TRUE(WriteStringToFile((dir_ / "b_op.npy").string(), EncodeNpy(a)).ok());
  ASSERT_TRUE(WriteStringToFile((dir_ / "w.safetensors").string(),
                                EncodeSafetensors({{"layer.weight", a}})).ok());
  ASSERT_TRUE(WriteStringToFile((dir_ / "notes.txt").string(), "ignored").ok());
  auto d = OpenDump(dir_.string());
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->items.size(), 2u);
  EXPECT_EQ(d->items[0].name, "b_op");
  EXPECT_EQ(d->items[1].name, "layer.weight");
  auto t = LoadItemTensor(d->items[1]);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->At(0), 1.0);
}

// A data file that is a link leading outside the dump's tree is listed but not read when asked
// (OutsideLinks::kRefuse): its item names the link and its target; a link inside the tree, and
// every file with kFollow, is read as usual. The same for a dump.json's data files, whose
// directory may itself be a link.
TEST_F(DirectoryTest, LinksLeadingOutsideTheTreeAreNotReadWhenRefused) {
  auto a = *parity::Tensor::Make(DType::kFloat32, {1}, std::string("\0\0\x80\x3f", 4));
  fs::create_directories(dir_ / "dump");
  fs::create_directories(dir_ / "outside");
  ASSERT_TRUE(WriteStringToFile((dir_ / "dump" / "a.npy").string(), EncodeNpy(a)).ok());
  ASSERT_TRUE(WriteStringToFile((dir_ / "outside" / "secret.npy").string(), EncodeNpy(a)).ok());
  fs::create_symlink("../outside/secret.npy", dir_ / "dump" / "leak.npy");
  fs::create_symlink("a.npy", dir_ / "dump" / "same.npy");
  const std::string dump = (dir_ / "dump").string();
  auto refused = OpenDump(dump, kDefaultKeepBudgetBytes, NpyListing::kReadHeaders, nullptr, OutsideLinks::kRefuse);
  ASSERT_TRUE(refused.ok()) << refused.status();
  ASSERT_EQ(refused->items.size(), 3u);
  std::map<std::string, const DumpItem*> by_name;
  for (const DumpItem& it : refused->items) by_name[it.name] = &it;
  ASSERT_TRUE(by_name.count("leak"));
  const absl::Status leak = by_name["leak"]->read_error;
  EXPECT_TRUE(absl::IsPermissionDenied(leak)) << leak;
  EXPECT_NE(leak.message().find("dump/leak.npy leads outside the dump directory"), std::string::npos) << leak;
  EXPECT_NE(leak.message().find("outside/secret.npy"), std::string::npos) << leak;
  EXPECT_FALSE(by_name["leak"]->npy_file.owner);  // nothing of it was read
  EXPECT_FALSE(by_name["leak"]->dtype.has_value());
  EXPECT_TRUE(LoadItemTensor(*by_name["same"]).ok());
  EXPECT_TRUE(LoadItemTensor(*by_name["a"]).ok());
  auto followed = OpenDump(dump);
  ASSERT_TRUE(followed.ok());
  for (const DumpItem& it : followed->items) EXPECT_TRUE(LoadItemTensor(it).ok()) << it.name;

  // msprobe's layout: dump_tensor_data is a link to a directory outside.
  fs::create_directories(dir_ / "ms");
  fs::create_symlink("../outside", dir_ / "ms" / "dump_tensor_data");
  ASSERT_TRUE(WriteStringToFile((dir_ / "ms" / "dump.json").string(),
                                R"({"task": "tensor", "level": "L1", "data": {"Functional.relu.0.forward": {)"
                                R"("input_args": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1],)"
                                R"( "data_name": "secret.npy"}]}}})").ok());
  auto ms = OpenDump((dir_ / "ms").string(), kDefaultKeepBudgetBytes, NpyListing::kReadHeaders, nullptr,
                     OutsideLinks::kRefuse);
  ASSERT_TRUE(ms.ok()) << ms.status();
  ASSERT_EQ(ms->items.size(), 1u);
  EXPECT_TRUE(absl::IsPermissionDenied(ms->items[0].read_error)) << ms->items[0].read_error;
  auto ms_followed = OpenDump((dir_ / "ms").string());
  ASSERT_TRUE(ms_followed.ok());
  EXPECT_TRUE(LoadItemTensor(ms_followed->items[0]).ok());
}

TEST_F(DirectoryTest, AnUnreadableFileCostsOnlyItsOwnItem) {
  auto a = *parity::Tensor::Make(DType::kFloat32, {1}, std::string("\0\0\x80\x3f", 4));
  ASSERT_TRUE(WriteStringToFile((dir_ / "a.npy").string(), EncodeNpy(a)).ok());
  ASSERT_TRUE(WriteStringToFile((dir_ / "b.npy").string(), "garbage").ok());
  ASSERT_TRUE(WriteStringToFile((dir_ / "c.pt").string(), "not a zip").ok());
  ASSERT_TRUE(WriteStringToFile((dir_ / "d.npy").string(), EncodeNpy(a)).ok());
  auto d = OpenDump(dir_.string());
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->items.size(), 4u);
  EXPECT_EQ(d->items[1].name, "b");
  EXPECT_EQ(d->items[1].read_error.code(), absl::StatusCode::kDataLoss) << d->items[1].read_error;
  absl::StatusOr<Tensor> bad = LoadItemTensor(d->items[1]);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("b.npy: truncated .npy file (7 bytes)"), std::string::npos)
      << bad.status();
  EXPECT_EQ(d->items[2].name, "c");
  EXPECT_FALSE(d->items[2].read_error.ok());
  EXPECT_FALSE(LoadItemTensor(d->items[2]).ok());
  for (size_t i : {size_t{0}, size_t{3}}) {
    EXPECT_TRUE(d->items[i].read_error.ok());
    ASSERT_TRUE(LoadItemTensor(d->items[i]).ok()) << d->items[i].name;
  }
  // A single file given on its own is still an error for the whole command.
  EXPECT_EQ(OpenDump((dir_ / "b.npy").string()).status().code(), absl::StatusCode::kDataLoss);
}

// A float32 .npy of n values starting at `first`.
std::string NpyOf(int64_t n, float first) {
  std::string bytes(static_cast<size_t>(n) * 4, '\0');
  for (int64_t i = 0; i < n; ++i) {
    const float v = first + static_cast<float>(i);
    std::memcpy(&bytes[static_cast<size_t>(i) * 4], &v, 4);
  }
  return EncodeNpy(*Tensor::Make(DType::kFloat32, {n}, bytes));
}

// Listing a directory keeps small .npy files whole (one read for header and data) up to a
// budget; loading such an item parses the kept bytes, which are the file as it was listed.
TEST_F(DirectoryTest, SmallNpyFilesAreKeptWholeByTheListingWithinABudget) {
  // a, b, c: 1,024 values (4,224 bytes); big: 64 Ki values (more than kKeptNpyFileBytes).
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_TRUE(WriteStringToFile((dir_ / (std::string(name) + ".npy")).string(), NpyOf(1024, name[0])).ok());
  }
  ASSERT_TRUE(WriteStringToFile((dir_ / "big.npy").string(), NpyOf(65536, 7)).ok());
  const size_t small = NpyOf(1024, 0).size();
  ASSERT_GT(NpyOf(65536, 7).size(), kKeptNpyFileBytes);

  auto d = OpenDump(dir_.string());
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->items.size(), 4u);  // a, b, big, c
  EXPECT_EQ(d->items[0].npy_file.bytes.size(), small);
  EXPECT_EQ(d->items[1].npy_file.bytes.size(), small);
  EXPECT_EQ(d->items[2].npy_file.owner, nullptr);  // big: read when loaded
  EXPECT_EQ(d->items[3].npy_file.bytes.size(), small);
  for (const DumpItem& it : d->items) {
    absl::StatusOr<Tensor> kept = LoadItemTensor(it);
    absl::StatusOr<Tensor> file = ReadNpyFile(it.data_path);
    ASSERT_TRUE(kept.ok() && file.ok()) << it.name;
    EXPECT_EQ(kept->shape(), file->shape()) << it.name;
    EXPECT_EQ(0, std::memcmp(kept->data(), file->data(), kept->numel() * 4)) << it.name;
  }
  // Rewritten after the listing: a kept item still holds what was listed; a large one is read.
  ASSERT_TRUE(WriteStringToFile((dir_ / "a.npy").string(), NpyOf(1024, 100)).ok());
  ASSERT_TRUE(WriteStringToFile((dir_ / "big.npy").string(), NpyOf(65536, 100)).ok());
  EXPECT_EQ(LoadItemTensor(d->items[0])->At(0), 'a');
  EXPECT_EQ(LoadItemTensor(d->items[2])->At(0), 100);

  // The budget: two small files fit in 2.5 of them, the third does not; none with 0.
  auto tight = OpenDump(dir_.string(), small * 5 / 2);
  ASSERT_TRUE(tight.ok()) << tight.status();
  EXPECT_NE(tight->items[0].npy_file.owner, nullptr);
  EXPECT_NE(tight->items[1].npy_file.owner, nullptr);
  EXPECT_EQ(tight->items[3].npy_file.owner, nullptr);
  EXPECT_EQ(LoadItemTensor(tight->items[3])->At(0), 'c');
  auto none = OpenDump(dir_.string(), 0);
  ASSERT_TRUE(none.ok()) << none.status();
  for (const DumpItem& it : none->items) EXPECT_EQ(it.npy_file.owner, nullptr) << it.name;
}

// A names-only listing opens no file; comparing its dumps reads each header with its pair and
// gives the same items and rows as a listing that read the headers, and keeps no file bytes.
TEST_F(DirectoryTest, NamesOnlyListingComparesLikeAHeaderListing) {
  const fs::path g = dir_ / "g", t = dir_ / "t";
  fs::create_directories(g);
  fs::create_directories(t);
  auto put = [](const fs::path& p, const std::string& bytes) {
    ASSERT_TRUE(WriteStringToFile(p.string(), bytes).ok()) << p;
  };
  put(g / "a.npy", NpyOf(1024, 1));      // small, equal
  put(t / "a.npy", NpyOf(1024, 1));
  put(g / "b.npy", NpyOf(1024, 1));      // small, differs
  put(t / "b.npy", NpyOf(1024, 500));
  put(g / "big.npy", NpyOf(65536, 3));   // read in pieces
  put(t / "big.npy", NpyOf(65536, 4));
  put(g / "bad.npy", NpyOf(1024, 1));
  put(t / "bad.npy", "garbage");         // unreadable target
  // Larger than the read-ahead's probe, kept open by it: a target cut short of what its header
  // says, and one whose header does not parse.
  put(g / "big_cut.npy", NpyOf(65536, 3));
  put(t / "big_cut.npy", NpyOf(65536, 3).substr(0, 200000));
  put(g / "big_bad.npy", NpyOf(65536, 3));
  put(t / "big_bad.npy", std::string("\x93NUMPY\x01\x00\x10\x00", 10) +  // a 16-byte header
                             "{'descr': '<f4', 'fortran_order': False, 'shape': (65536,), }" +
                             std::string(262144, '\0'));
  put(g / "shape.npy", NpyOf(1024, 1));  // shapes differ
  put(t / "shape.npy", NpyOf(1000, 1));
  put(g / "only_g.npy", NpyOf(8, 1));    // unmatched on each side
  put(t / "only_t.npy", NpyOf(8, 1));
  // Enough pairs for several read-ahead windows, one of them unreadable mid-window.
  for (int i = 0; i < 70; ++i) {
    const std::string name = "m" + std::to_string(100 + i) + ".npy";
    put(g / name, NpyOf(16 + i, 1));
    put(t / name, i == 40 ? std::string("\x93NUMPY\x01\x00") : NpyOf(16 + i, i % 3 == 0 ? 2 : 1));
  }

  auto lazy_g = OpenDump(g.string(), kDefaultKeepBudgetBytes, NpyListing::kNamesOnly);
  auto lazy_t = OpenDump(t.string(), kDefaultKeepBudgetBytes, NpyListing::kNamesOnly);
  ASSERT_TRUE(lazy_g.ok() && lazy_t.ok());
  ASSERT_EQ(lazy_t->items.size(), 78u);
  for (const DumpItem& it : lazy_t->items) {
    EXPECT_TRUE(it.npy_deferred) << it.name;
    EXPECT_FALSE(it.dtype.has_value()) << it.name;
    EXPECT_TRUE(it.read_error.ok()) << it.name;  // "garbage" is not read yet
  }
  auto eager_g = OpenDump(g.string());
  auto eager_t = OpenDump(t.string());
  ASSERT_TRUE(eager_g.ok() && eager_t.ok());
  for (PolicyKind kind : {PolicyKind::kMsprobe, PolicyKind::kTorch}) {
    CompareConfig config;
    config.base.kind = kind;
    Dump lg = *lazy_g, lt = *lazy_t;
    auto lazy = CompareDumps(&lg, &lt, config);
    auto eager = CompareDumps(&*eager_g, &*eager_t, config);
    ASSERT_TRUE(lazy.ok() && eager.ok());
    ASSERT_EQ(lazy->rows.size(), eager->rows.size());
    ASSERT_EQ(lazy->rows.size(), 79u);  // a, b, bad, big, big_bad, big_cut, m100..m169, only_t, shape, only_g
    for (size_t i = 0; i < lazy->rows.size(); ++i) {
      const CompareRow& l = lazy->rows[i];
      const CompareRow& e = eager->rows[i];
      EXPECT_EQ(l.target, e.target);
      EXPECT_EQ(l.golden, e.golden);
      EXPECT_EQ(l.result.verdict, e.result.verdict) << i;
      EXPECT_EQ(l.result.message, e.result.message) << i;
      ASSERT_EQ(l.result.metrics.size(), e.result.metrics.size()) << i;
      for (size_t m = 0; m < l.result.metrics.size(); ++m) {
        EXPECT_EQ(l.result.metrics[m].name, e.result.metrics[m].name);
        EXPECT_EQ(l.result.metrics[m].value.ToJson().Dump(), e.result.metrics[m].value.ToJson().Dump())
            << i << " " << l.result.metrics[m].name;
      }
    }
    EXPECT_EQ(lazy->counts, eager->counts);
    EXPECT_GT(lazy->count(Verdict::kFail), 0);
    EXPECT_GT(lazy->count(Verdict::kError), 0);
    for (auto [lazy_dump, eager_dump] : {std::pair<Dump*, Dump*>{&lg, &*eager_g}, {&lt, &*eager_t}}) {
      ASSERT_EQ(lazy_dump->items.size(), eager_dump->items.size());
      for (size_t i = 0; i < lazy_dump->items.size(); ++i) {
        const DumpItem& l = lazy_dump->items[i];
        const DumpItem& e = eager_dump->items[i];
        EXPECT_FALSE(l.npy_deferred) << l.name;
        EXPECT_EQ(l.npy_file.owner, nullptr) << l.name;
        EXPECT_EQ(l.npy_open, nullptr) << l.name;  // no file left open after comparing
        EXPECT_EQ(l.dtype, e.dtype) << l.name;
        EXPECT_EQ(l.dtype_text, e.dtype_text) << l.name;
        EXPECT_EQ(l.shape, e.shape) << l.name;
        EXPECT_EQ(l.has_shape, e.has_shape) << l.name;
        EXPECT_EQ(l.read_error, e.read_error) << l.name;
        EXPECT_EQ(l.data_name, e.data_name) << l.name;
      }
    }
  }
}

TEST_F(DirectoryTest, ItemsComeInNameOrderNamedByTheirStems) {
  auto a = *parity::Tensor::Make(DType::kFloat32, {1}, std::string("\0\0\x80\x3f", 4));
  for (const char* name : {"t10.npy", "t2.npy", "T1.npy", "x.y.npy", ".npy", "u.NPY", "notes.txt"}) {
    ASSERT_TRUE(WriteStringToFile((dir_ / name).string(), EncodeNpy(a)).ok());
  }
  fs::create_symlink(dir_ / "t2.npy", dir_ / "v.npy");  // a link to a file is a file
  fs::create_directory(dir_ / "w.npy");                  // a directory is not
  for (const std::string& root : {dir_.string(), dir_.string() + "/"}) {
    auto d = OpenDump(root);
    ASSERT_TRUE(d.ok()) << d.status();
    std::vector<std::string> names;
    for (const DumpItem& it : d->items) names.push_back(it.name + "=" + it.data_name);
    // Byte order of the file names; ".npy" has no extension, as std::filesystem splits it.
    EXPECT_EQ(names, (std::vector<std::string>{"T1=T1.npy", "t10=t10.npy", "t2=t2.npy", "v=v.npy", "x.y=x.y.npy"}));
    EXPECT_EQ(d->items[4].data_path, (dir_ / "x.y.npy").string());
    ASSERT_TRUE(LoadItemTensor(d->items[3]).ok());
  }
}

TEST_F(DirectoryTest, FindRankDumpsHandsOverThePlainDirectorysListing) {
  auto a = *parity::Tensor::Make(DType::kFloat32, {1}, std::string("\0\0\x80\x3f", 4));
  for (const char* name : {"a.npy", "b.npy"}) {
    ASSERT_TRUE(WriteStringToFile((dir_ / name).string(), EncodeNpy(a)).ok());
  }
  std::optional<std::vector<DirEntry>> listing;
  std::vector<RankDump> ranks = FindRankDumps(dir_.string(), &listing);
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].path, dir_.string());
  ASSERT_TRUE(listing.has_value());
  ASSERT_EQ(listing->size(), 2u);
  EXPECT_EQ((*listing)[1].name, "b.npy");
  // OpenDump takes the listing as given: a file it does not name is not listed again.
  listing->pop_back();
  auto d = OpenDump(dir_.string(), kDefaultKeepBudgetBytes, NpyListing::kNamesOnly, &*listing);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->items.size(), 1u);
  EXPECT_EQ(d->items[0].name, "a");
  // A step/rank tree hands over nothing (its ranks are other directories); nor does a
  // directory holding a dump.json, which is not listed at all.
  fs::create_directories(dir_ / "tree" / "rank0");
  ASSERT_TRUE(WriteStringToFile((dir_ / "tree" / "rank0" / "dump.json").string(), "{}").ok());
  ranks = FindRankDumps((dir_ / "tree").string(), &listing);
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].rank, "0");
  EXPECT_FALSE(listing.has_value());
  listing.emplace();
  ranks = FindRankDumps((dir_ / "tree" / "rank0").string(), &listing);
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_FALSE(listing.has_value());
}

TEST_F(DirectoryTest, ExplainsUnusableDirectoriesAndFiles) {
  auto d = OpenDump(dir_.string());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("no dump.json"), std::string::npos);
  EXPECT_EQ(OpenDump((dir_ / "missing").string()).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(WriteStringToFile((dir_ / "x.bin").string(), "x").ok());
  EXPECT_NE(OpenDump((dir_ / "x.bin").string()).status().message().find("unsupported file type"),
            std::string::npos);
}

TEST_F(DirectoryTest, LoadReportsMissingAndMismatchedDataFiles) {
  fs::create_directories(dir_ / "dump_tensor_data");
  const std::string json = std::string(R"({"task": "tensor", "data": {"F.a.0.forward": {"input_args": [)") +
                           TensorLeaf("torch.float32", "[3]", R"(, "data_name": "F.a.0.forward.input.0.npy")") +
                           ", " + TensorLeaf("torch.float32", "[1]", R"(, "data_name": "gone.npy")") + ", " +
                           TensorLeaf("torch.float32", "[1]", R"(, "data_name": "x.pt")") + "]}}}";
  ASSERT_TRUE(WriteStringToFile((dir_ / "dump.json").string(), json).ok());
  auto a = *parity::Tensor::Make(DType::kFloat32, {1}, std::string(4, '\0'));
  ASSERT_TRUE(WriteStringToFile((dir_ / "dump_tensor_data" / "F.a.0.forward.input.0.npy").string(),
                                EncodeNpy(a)).ok());
  auto d = OpenDump(dir_.string());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(LoadItemTensor(d->items[0]).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(LoadItemTensor(d->items[1]).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadItemTensor(d->items[2]).status().code(), absl::StatusCode::kNotFound);  // a missing .pt
}

// An msprobe dump's data files are read ahead in batches too: every row is what CompareItems
// gives for that pair without reading ahead, and no file bytes stay in the items.
// Pairs compared on several threads give the report one thread gives: rows in pair order,
// counts, first failure and culprit, with large pairs split across threads inside them.
TEST_F(DirectoryTest, PairsComparedOnSeveralThreadsGiveTheSameReport) {
  const fs::path g = dir_ / "g", t = dir_ / "t";
  fs::create_directories(g);
  fs::create_directories(t);
  auto put = [](const fs::path& p, const std::string& bytes) {
    ASSERT_TRUE(WriteStringToFile(p.string(), bytes).ok()) << p;
  };
  // 300 small pairs (ten read-ahead windows), every seventh one differing; three of 1 Mi + 1
  // values (two kernel chunks each); an unreadable target; one unmatched item on each side.
  for (int i = 0; i < 300; ++i) {
    const std::string name = "s" + std::to_string(1000 + i) + ".npy";
    put(g / name, NpyOf(64 + i, 1));
    put(t / name, NpyOf(64 + i, i % 7 == 3 ? 2 : 1));
  }
  for (int i = 0; i < 3; ++i) {
    const std::string name = "big" + std::to_string(i) + ".npy";
    put(g / name, NpyOf((1 << 20) + 1, 1));
    put(t / name, NpyOf((1 << 20) + 1, i == 1 ? 1.5f : 1));
  }
  put(g / "s1150.npy", NpyOf(10, 1));
  put(t / "s1150.npy", "not a .npy file");
  put(g / "only_g.npy", NpyOf(8, 1));
  put(t / "only_t.npy", NpyOf(8, 1));

  const int kernel_threads = KernelThreads();
  SetKernelThreads(3);
  std::optional<CompareReport> one;
  for (int threads : {1, 4, 3}) {
    auto golden = OpenDump(g.string(), kDefaultKeepBudgetBytes, NpyListing::kNamesOnly);
    auto target = OpenDump(t.string(), kDefaultKeepBudgetBytes, NpyListing::kNamesOnly);
    ASSERT_TRUE(golden.ok() && target.ok());
    std::vector<size_t> seen;
    size_t total = 0;
    auto report = CompareDumps(
        &*golden, &*target, CompareConfig(),
        [&](size_t done, size_t all) {
          seen.push_back(done);
          total = all;
        },
        threads);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_EQ(report->rows.size(), 305u);  // 300 small (s1150 unreadable), 3 big, only_g, only_t
    ASSERT_EQ(seen.size(), report->rows.size()) << threads;
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], i + 1) << threads;
    EXPECT_EQ(total, report->rows.size());
    for (const auto* d : {&*golden, &*target}) {
      for (const DumpItem& it : d->items) {
        EXPECT_FALSE(it.npy_deferred) << it.name;
        EXPECT_EQ(it.npy_open, nullptr) << it.name;
      }
    }
    if (!one) {
      EXPECT_GT(report->count(Verdict::kPass), 0);
      EXPECT_GT(report->count(Verdict::kError), 0);
      EXPECT_GT(report->count(Verdict::kUnmatched), 0);
      EXPECT_GE(report->first_failure, 0);
      one = *std::move(report);
      continue;
    }
    EXPECT_EQ(report->counts, one->counts) << threads;
    EXPECT_EQ(report->first_failure, one->first_failure) << threads;
    EXPECT_EQ(report->first_culprit, one->first_culprit) << threads;
    for (size_t i = 0; i < report->rows.size(); ++i) {
      const CompareRow& a = report->rows[i];
      const CompareRow& b = one->rows[i];
      ASSERT_EQ(a.target, b.target) << threads << " row " << i;
      ASSERT_EQ(a.golden, b.golden) << threads << " row " << i;
      EXPECT_EQ(a.result.verdict, b.result.verdict) << threads << " row " << i;
      EXPECT_EQ(a.result.message, b.result.message) << threads << " row " << i;
      ASSERT_EQ(a.result.metrics.size(), b.result.metrics.size()) << threads << " row " << i;
      for (size_t m = 0; m < a.result.metrics.size(); ++m) {
        EXPECT_EQ(a.result.metrics[m].value.ToJson().Dump(), b.result.metrics[m].value.ToJson().Dump())
            << threads << " row " << i << " " << a.result.metrics[m].name;
      }
    }
  }
  SetKernelThreads(kernel_threads);
}

// Each thread comparing pairs holds up to a window's larger files open: under a low limit on
// open files, fewer threads compare, and no pair fails for want of a descriptor.
TEST_F(DirectoryTest, PairsOnManyThreadsStayWithinTheOpenFileLimit) {
  const fs::path g = dir_ / "g", t = dir_ / "t";
  fs::create_directories(g);
  fs::create_directories(t);
  // 640 pairs of 20 KiB files (larger than the read-ahead's probe, so kept open): 20 windows.
  for (int i = 0; i < 640; ++i) {
    const std::string name = "f" + std::to_string(1000 + i) + ".npy";
    ASSERT_TRUE(WriteStringToFile((g / name).string(), NpyOf(5120, 1)).ok());
    ASSERT_TRUE(WriteStringToFile((t / name).string(), NpyOf(5120, 1)).ok());
  }
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = 160;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  auto golden = OpenDump(g.string(), kDefaultKeepBudgetBytes, NpyListing::kNamesOnly);
  auto target = OpenDump(t.string(), kDefaultKeepBudgetBytes, NpyListing::kNamesOnly);
  absl::StatusOr<CompareReport> report = absl::UnknownError("not run");
  if (golden.ok() && target.ok()) report = CompareDumps(&*golden, &*target, CompareConfig(), nullptr, 16);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->count(Verdict::kPass), 640);
  for (const CompareRow& row : report->rows) {
    ASSERT_EQ(row.result.verdict, Verdict::kPass) << row.result.message;
  }
}

TEST_F(DirectoryTest, MsprobeDataFilesReadAheadGiveTheSameRows) {
  Dump dumps[2];  // golden, target
  for (int side = 0; side < 2; ++side) {
    const fs::path root = dir_ / (side == 0 ? "g" : "t");
    fs::create_directories(root / "dump_tensor_data");
    std::string args;
    for (int i = 0; i < 40; ++i) {
      const int64_t n = i == 5 ? 65536 : 16 + i;  // one large file, read in pieces
      const std::string file = "F.a.0.forward.input." + std::to_string(i) + ".npy";
      const std::string shape = "[" + std::to_string(i == 7 ? n + 1 : n) + "]";  // 7: json disagrees
      if (!args.empty()) args += ", ";
      args += TensorLeaf("torch.float32", shape.c_str(), (R"(, "data_name": ")" + file + "\"").c_str());
      if (i == 9 && side == 1) continue;  // 9: the target's file is missing
      const std::string bytes = i == 11 && side == 1 ? std::string("\x93NUMPY") : NpyOf(n, i % 4 == 0 && side == 1 ? 2 : 1);
      ASSERT_TRUE(WriteStringToFile((root / "dump_tensor_data" / file).string(), bytes).ok());
    }
    const std::string json = R"({"task": "tensor", "data": {"F.a.0.forward": {"input_args": [)" + args + "]}}}";
    ASSERT_TRUE(WriteStringToFile((root / "dump.json").string(), json).ok());
    auto d = OpenDump(root.string());
    ASSERT_TRUE(d.ok()) << d.status();
    dumps[side] = *std::move(d);
  }
  const Dump fresh_g = dumps[0], fresh_t = dumps[1];
  CompareConfig config;
  auto report = CompareDumps(&dumps[0], &dumps[1], config);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->rows.size(), 40u);
  for (const CompareRow& row : report->rows) {
    ASSERT_GE(row.target, 0);
    ASSERT_GE(row.golden, 0);
    const CheckResult want = CompareItems(&fresh_t.items[row.target], &fresh_g.items[row.golden],
                                          DumpMode::kTensor, config.base, "");
    const std::string& name = fresh_t.items[row.target].name;
    EXPECT_EQ(row.result.verdict, want.verdict) << name;
    EXPECT_EQ(row.result.message, want.message) << name;
    ASSERT_EQ(row.result.metrics.size(), want.metrics.size()) << name;
    for (size_t m = 0; m < want.metrics.size(); ++m) {
      EXPECT_EQ(row.result.metrics[m].value.ToJson().Dump(), want.metrics[m].value.ToJson().Dump())
          << name << " " << want.metrics[m].name;
    }
  }
  EXPECT_EQ(report->count(Verdict::kError) + report->count(Verdict::kFail) > 0, true);
  EXPECT_NE(report->rows[9].result.message.find("not found or read failed"), std::string::npos)
      << report->rows[9].result.message;
  for (const Dump& d : dumps) {
    for (const DumpItem& it : d.items) EXPECT_EQ(it.npy_file.owner, nullptr) << it.name;
  }
}

DumpItem Item(const std::string& name, Shape shape = {2}, const std::string& dtype = "torch.float32") {
  DumpItem it;
  it.name = name;
  it.shape = shape;
  it.has_shape = true;
  it.dtype_text = dtype;
  return it;
}

TEST(Pairing, ExactMatchKeepsTargetOrderAndReportsUnmatched) {
  std::vector<DumpItem> target = {Item("b"), Item("a"), Item("only_target")};
  std::vector<DumpItem> golden = {Item("a"), Item("b"), Item("only_golden")};
  auto p = PairItems(target, golden, PairingOptions());
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 4u);
  EXPECT_EQ((*p)[0].golden, 1);
  EXPECT_EQ((*p)[1].golden, 0);
  EXPECT_EQ((*p)[2].golden, -1);
  EXPECT_NE((*p)[2].note.find("no golden item named 'only_target'"), std::string::npos);
  EXPECT_EQ((*p)[3].target, -1);
  EXPECT_EQ((*p)[3].golden, 2);
}

TEST(Pairing, ShapeAndDtypeGateMakeUnmatchedWithReason) {
  std::vector<DumpItem> target = {Item("s", {3}), Item("d", {2}, "torch.int64"),
                                  Item("h", {2}, "torch.float16")};
  std::vector<DumpItem> golden = {Item("s", {2}), Item("d", {2}, "torch.int32"),
                                  Item("h", {2}, "torch.bfloat16")};
  auto p = PairItems(target, golden, PairingOptions());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)[0].golden, -1);
  EXPECT_NE((*p)[0].note.find("shapes differ: golden [2], target [3]"), std::string::npos);
  EXPECT_EQ((*p)[1].golden, -1);
  EXPECT_NE((*p)[1].note.find("dtype gate"), std::string::npos);
  EXPECT_EQ((*p)[2].golden, 2);  // fp16 vs bf16 pass the gate
  EXPECT_EQ(p->size(), 5u);      // the two golden items come back unmatched
}

TEST(Pairing, DuplicatesAreAnError) {
  auto p = PairItems({Item("a"), Item("a")}, {Item("a")}, PairingOptions());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("duplicate item name 'a' in the target dump"), std::string::npos);
}

TEST(Pairing, FuzzyAndMapping) {
  PairingOptions o;
  o.fuzzy = true;
  auto p = PairItems({Item("F.relu.2.forward.output.0")}, {Item("F.relu.0.forward.output.0")}, o);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)[0].golden, 0);
  EXPECT_TRUE((*p)[0].fuzzy);
  PairingOptions m;
  m.mapping = {{"npu.x", "gpu.x"}};
  p = PairItems({Item("npu.x")}, {Item("gpu.x")}, m);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)[0].golden, 0);
}

}  // namespace
}  // namespace parity
