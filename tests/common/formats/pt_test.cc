// PyTorch .pt files: the safe pickle subset, views, containers, and refusals (malicious pickles
// are refused and nothing is executed). Fixtures: tests/data/make_pt.py.
#include "common/formats/pt_reader.h"

#include <filesystem>

#include "gtest/gtest.h"
#include "common/formats/dump.h"
#include "common/compare/engine.h"
#include "common/base/file_util.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
const std::string kDir = std::string(PARITY_SOURCE_DIR) + "/tests/data/pt/";

std::vector<double> Values(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  t.ToDouble(0, t.numel(), v.data());
  return v;
}

TEST(Pt, ReadsContiguousStridedOffsetAndBf16Tensors) {
  auto t = ReadPtFile(kDir + "f32.pt");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kFloat32);
  EXPECT_EQ(t->shape(), (Shape{2, 3}));
  EXPECT_EQ(Values(*t), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  auto tr = ReadPtFile(kDir + "transposed.pt");
  ASSERT_TRUE(tr.ok()) << tr.status();
  EXPECT_EQ(tr->shape(), (Shape{3, 2}));
  EXPECT_EQ(Values(*tr), (std::vector<double>{1, 4, 2, 5, 3, 6}));  // made contiguous
  auto off = ReadPtFile(kDir + "offset.pt");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(Values(*off), (std::vector<double>{3, 4, 5, 6}));
  auto bf = ReadPtFile(kDir + "bf16.pt");
  ASSERT_TRUE(bf.ok()) << bf.status();
  EXPECT_EQ(bf->dtype(), DType::kBFloat16);
  EXPECT_EQ(Values(*bf), (std::vector<double>{1, -2}));
}

// Where a tensor lies in its file (the agent sends large ones from there in pieces): the bytes
// at the range are the tensor ReadPtTensors returns; a strided view has none.
TEST(Pt, RangesAreTheTensorsBytes) {
  auto bytes_at = [](const std::string& path, const PtRange& r) {
    absl::StatusOr<std::string> b = ReadFileRange(path, r.offset, r.length);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *b : std::string();
  };
  for (const char* f : {"f32.pt", "offset.pt", "bf16.pt"}) {
    SCOPED_TRACE(f);
    auto t = ReadPtFile(kDir + f);
    ASSERT_TRUE(t.ok()) << t.status();
    auto r = FindPtRange(kDir + f, "");
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->has_value());
    EXPECT_EQ((*r)->dtype, t->dtype());
    EXPECT_EQ((*r)->shape, t->shape());
    EXPECT_EQ(bytes_at(kDir + f, **r), std::string(t->bytes()));
  }
  auto tr = FindPtRange(kDir + "transposed.pt", "");
  ASSERT_TRUE(tr.ok()) << tr.status();
  EXPECT_FALSE(tr->has_value());
  auto all = ReadPtTensors(kDir + "state_dict.pt");
  ASSERT_TRUE(all.ok()) << all.status();
  auto w = FindPtRange(kDir + "state_dict.pt", "weight");
  ASSERT_TRUE(w.ok() && w->has_value());
  EXPECT_EQ(bytes_at(kDir + "state_dict.pt", **w), std::string((*all)[0].second.bytes()));
  EXPECT_EQ(FindPtRange(kDir + "state_dict.pt", "bias").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(FindPtRange(kDir + "state_dict.pt", "").ok());  // not a single tensor
  EXPECT_FALSE(FindPtRange(kDir + "compressed.pt", "").ok());
  EXPECT_FALSE(FindPtRange(kDir + "out_of_bounds.pt", "").ok());
}

TEST(Pt, ReadsAStateDict) {
  auto all = ReadPtTensors(kDir + "state_dict.pt");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].first, "weight");
  EXPECT_EQ(Values((*all)[0].second), (std::vector<double>{0.5, -0.5}));
  EXPECT_EQ((*all)[1].first, "step");
  EXPECT_EQ((*all)[1].second.dtype(), DType::kInt64);
  EXPECT_EQ((*all)[1].second.rank(), 0);
  EXPECT_EQ(Values((*all)[1].second), (std::vector<double>{7}));
  EXPECT_FALSE(ReadPtFile(kDir + "state_dict.pt").ok());  // not a single tensor
  auto index = ReadPtIndex(kDir + "state_dict.pt");
  ASSERT_TRUE(index.ok());
  EXPECT_EQ((*index)[0].shape, (Shape{2}));
}

TEST(Pt, MaliciousPickleIsRefusedAndNothingRuns) {
  fs::remove("/tmp/parity_pwned_by_pickle");
  auto t = ReadPtTensors(kDir + "malicious.pt");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("refusing global 'os.system'"), std::string::npos) << t.status();
  EXPECT_FALSE(fs::exists("/tmp/parity_pwned_by_pickle"));
}

TEST(Pt, RefusesWhatItCannotReadWithPreciseErrors) {
  struct Case {
    const char* file;
    const char* needle;
  } cases[] = {
      {"bad_opcode.pt", "unsupported pickle opcode 0x69 ('i') at offset 3"},
      {"out_of_bounds.pt", "reaches element 4 of a storage of 2"},
      {"compressed.pt", "is compressed"},
      {"not_zip.pt", "not a torch.save archive"},
      {"deep.pt", "containers nested more than 1000 deep"},
      {"recursive.pt", "recursive containers"},
  };
  for (const Case& c : cases) {
    auto t = ReadPtTensors(kDir + c.file);
    ASSERT_FALSE(t.ok()) << c.file;
    EXPECT_NE(t.status().message().find(c.needle), std::string::npos) << c.file << ": " << t.status();
  }
}

TEST(Pt, DumpDirectoriesOfPtFiles) {
  auto d = OpenDump(kDir + "state_dict.pt");
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->items.size(), 2u);
  EXPECT_EQ(d->items[0].name, "state_dict.weight");
  auto w = LoadItemTensor(d->items[0]);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(Values(*w), (std::vector<double>{0.5, -0.5}));
  // In a directory, each malicious or broken file is refused on its own, naming the file (its
  // item carries the error and never loads); the sound files still load.
  auto dir = OpenDump(kDir);
  ASSERT_TRUE(dir.ok()) << dir.status();
  int refused = 0, loaded = 0;
  for (const DumpItem& it : dir->items) {
    if (it.data_path.find("bad_opcode.pt") != std::string::npos ||
        it.data_path.find("malicious.pt") != std::string::npos ||
        it.data_path.find("not_zip.pt") != std::string::npos) {
      ASSERT_FALSE(it.read_error.ok()) << it.name;
      EXPECT_NE(it.read_error.message().find(it.data_path), std::string::npos) << it.read_error;
      EXPECT_FALSE(LoadItemTensor(it).ok()) << it.name;
      ++refused;
    } else if (it.data_path.find("state_dict.pt") != std::string::npos) {
      EXPECT_TRUE(LoadItemTensor(it).ok()) << it.name;
      ++loaded;
    }
  }
  EXPECT_EQ(refused, 3);
  EXPECT_GE(loaded, 1);
}

}  // namespace
}  // namespace parity

namespace parity {
namespace {

TEST(Pt, MsprobePytorchDumpWithPtDataFiles) {
  auto golden = OpenDump(kDir + "msprobe_dump/golden");
  auto target = OpenDump(kDir + "msprobe_dump/target");
  ASSERT_TRUE(golden.ok()) << golden.status();
  ASSERT_TRUE(target.ok()) << target.status();
  CompareConfig config;
  auto report = CompareDumps(&*golden, &*target, config);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->rows.size(), 3u);
  const CheckResult& out = report->rows[2].result;  // the output, off by 10%
  EXPECT_EQ(out.Find("MaxRelativeErr")->number(), 0.100000031292);
  EXPECT_EQ(out.peer_verdict, "Yes");  // msprobe's cosine is blind to a uniform scale error
  config.base.kind = PolicyKind::kTorch;
  report = CompareDumps(&*golden, &*target, config);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->rows[2].result.verdict, Verdict::kFail);
  EXPECT_EQ(report->first_culprit, "Functional.add.0.forward");
}

}  // namespace
}  // namespace parity
