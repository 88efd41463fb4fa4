#include "common/formats/torchair.h"

#include <filesystem>
#include <string>
#include <vector>

#include "common/base/file_util.h"
#include "common/formats/dump.h"
#include "common/formats/npy.h"
#include "gtest/gtest.h"

namespace parity {
namespace {
namespace fs = std::filesystem;

constexpr char kGraph[] = R"(# a GE graph as torchair writes it
op {
  name: "Data_0"
  type: "Data"
}
op {
  name: "Conv2D_1"
  type: "Conv2D"
  input: "Data_0:0"
  input: "Const_1:0"
  input: "Data_0:-1"
  output_desc {
    name: "y"
    attr {
      key: "_fx_tensor_name"
      value {
        s: "convolution-aten.convolution.default.OUTPUT.0"
      }
    }
  }
}
graph {
  name: "inner"
  op { name: "Relu_1" type: "Relu" input: "Conv2D_1:0"
       output_desc { attr { key: "other" value { s: "x" } } attr { key: "_fx_tensor_name" value { s: "relu-aten.relu.default.OUTPUT.0" } } } }
  op { name: "Relu_10" type: "Relu" input: "Relu_1:0" input: "Const_2:0"
       output_desc { attr { key: "_fx_tensor_name" value { s: "relu_9-aten.relu.default.OUTPUT.0" } } } }
}
op {
  name: "Odd\"name\\x"
  type: 'Add'
}
)";

TEST(Torchair, ParsesTheGraphsOpsAndTheirFxNodes) {
  auto g = ParseGeGraphText(kGraph, "g.txt");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->ops.size(), 5u);
  EXPECT_EQ(g->ops[1].name, "Conv2D_1");
  EXPECT_EQ(g->ops[1].type, "Conv2D");
  EXPECT_EQ(g->ops[1].inputs, (std::vector<std::string>{"Data_0:0", "Const_1:0", "Data_0:-1"}));
  EXPECT_EQ(g->ops[1].fx_node, "convolution-aten.convolution.default");
  EXPECT_EQ(g->ops[2].name, "Relu_1");  // inside graph { }, one line per op
  EXPECT_EQ(g->ops[2].fx_node, "relu-aten.relu.default");
  EXPECT_EQ(g->ops[0].fx_node, "");
  EXPECT_EQ(g->ops[4].name, "Odd\"name\\x");
  EXPECT_EQ(g->ops[4].type, "Add");
}

TEST(Torchair, RefusesMalformedGraphTextWithItsLine) {
  struct Case {
    const char* text;
    const char* needle;
  };
  for (const Case& c : std::vector<Case>{{"op {\n  name: \"a\n}\n", "g.txt:2: "},
                                         {"op {\n}\n}\n", "g.txt:3: not a GE graph in text format: a '}' closes no block"},
                                         {"op {\n  name: \"a\"\n", "a block is not closed"},
                                         {"op {\n  name\n}\n", "has neither ':' nor '{'"}}) {
    auto g = ParseGeGraphText(c.text, "g.txt");
    ASSERT_FALSE(g.ok()) << c.text;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(g.status().message().find(c.needle), std::string::npos) << g.status();
  }
  std::string deep;
  for (int i = 0; i < 70; ++i) deep += "a {\n";
  auto g = ParseGeGraphText(deep, "g.txt");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("deeper than 64"), std::string::npos) << g.status();
}

TEST(Torchair, ResolvesFusedOpNamesByLongestMatch) {
  auto g = ParseGeGraphText(kGraph, "g.txt");
  ASSERT_TRUE(g.ok());
  auto names = [&](const std::string& op, const absl::flat_hash_set<std::string>& dumped = {}) {
    std::vector<std::string> out;
    for (const GeGraphOp* o : ResolveGeOp(*g, op, dumped)) out.push_back(o->name);
    return out;
  };
  EXPECT_EQ(names("Conv2D_1"), (std::vector<std::string>{"Conv2D_1"}));
  EXPECT_EQ(names("Conv2D_1Relu_10"), (std::vector<std::string>{"Conv2D_1", "Relu_10"}));  // not Relu_1 + "0"
  EXPECT_EQ(names("Conv2D_1Relu_1"), (std::vector<std::string>{"Conv2D_1", "Relu_1"}));
  EXPECT_EQ(names("Cast_9"), std::vector<std::string>{});
  // The rest does not resolve: the ops until then, as the reference returns them.
  EXPECT_EQ(names("Conv2D_1Mystery"), (std::vector<std::string>{"Conv2D_1"}));
  // A prefix that is another dumped op the graph lacks ends the search.
  EXPECT_EQ(names("Cast_9Conv2D_1", {"Cast_9"}), std::vector<std::string>{});

  // A fused op: inputs after its first op's FX node, and the group's outside inputs after the
  // ops that take them; outputs after the last op's node.
  const GeOpNaming n = NameGeOp(*g, "Conv2D_1Relu_10", "AutomaticBufferFusionOp", {});
  EXPECT_EQ(n.input_node, "convolution-aten.convolution.default");
  EXPECT_EQ(n.output_node, "relu_9-aten.relu.default");
  EXPECT_EQ(n.fused_inputs, (std::vector<std::string>{"convolution-aten.convolution.default.input.0",
                                                      "convolution-aten.convolution.default.input.1",
                                                      "relu_9-aten.relu.default.input.0",
                                                      "relu_9-aten.relu.default.input.1"}));
  EXPECT_NE(n.description.find("fuses 2 ops: Conv2D_1 (Conv2D) <- convolution-aten.convolution.default; Relu_10"),
            std::string::npos)
      << n.description;
  // Ops GE inserted (not in the graph, a Cast or TransData type): compared output against input.
  const GeOpNaming cast = NameGeOp(*g, "Cast_9", "Cast", {});
  EXPECT_EQ(cast.input_node, "");
  EXPECT_TRUE(cast.self_compared);
  EXPECT_EQ(cast.description,
            "GE op Cast_9 (Cast): not an op of the GE graph g.txt; inserted by GE: against an FX dump, its "
            "output i is compared with its input i");
  EXPECT_TRUE(NameGeOp(*g, "trans_TransData_4", "TransDataRNN", {}).self_compared);
  const GeOpNaming other = NameGeOp(*g, "Mystery_1", "Mystery", {});
  EXPECT_FALSE(other.self_compared);
  EXPECT_EQ(other.description, "GE op Mystery_1 (Mystery): not an op of the GE graph g.txt");
  EXPECT_FALSE(NameGeOp(*g, "Conv2D_1", "Cast", {}).self_compared);  // in the graph: its FX node
}

TEST(Torchair, ReadsFxFileNamesAndTimestampsOfAnyLength) {
  FxFileName f;
  ASSERT_TRUE(ParseFxFileName("add_1-aten.add.Tensor.OUTPUT.2.20240125031118787351.npy", &f));
  EXPECT_EQ(f.node, "add_1-aten.add.Tensor");
  EXPECT_FALSE(f.input);
  EXPECT_EQ(f.index, 2);
  EXPECT_EQ(f.timestamp, "20240125031118787351");
  ASSERT_TRUE(ParseFxFileName("mm-aten.mm.default.INPUT.0.1.npy", &f));
  EXPECT_TRUE(f.input);
  for (const char* bad : {"mm-aten.mm.default.INPUT.0.npy", "mm.SIDE.0.1.npy", ".INPUT.0.1.npy",
                          "mm.INPUT.x.1.npy", "mm.INPUT.0.1.pt"}) {
    EXPECT_FALSE(ParseFxFileName(bad, &f)) << bad;
  }
  EXPECT_TRUE(TimestampLess("9", "10"));
  EXPECT_TRUE(TimestampLess("20240125031118787351", "30240125031118787351"));  // beyond 64 bits
  EXPECT_FALSE(TimestampLess("010", "9"));
  EXPECT_EQ(FxNodeOfTensorName("add_1-aten.add.Tensor.OUTPUT.0"), "add_1-aten.add.Tensor");
  EXPECT_EQ(FxNodeOfTensorName("plain"), "plain");
  EXPECT_EQ(TorchairRankOfDirName("worldsize8_global_rank7"), 7);
  EXPECT_EQ(TorchairRankOfDirName("rank7"), -1);
  EXPECT_EQ(TorchairRankOfDirName("worldsize8_global_rankx"), -1);
}

void Touch(const fs::path& p, const std::string& bytes = "") {
  fs::create_directories(p.parent_path());
  ASSERT_TRUE(WriteStringToFile(p.string(), bytes).ok());
}

std::string Npy(float v) {
  return EncodeNpy(*Tensor::Make(DType::kFloat32, {1}, std::string(reinterpret_cast<const char*>(&v), 4)));
}

TEST(Torchair, FindsTheRunsOfEachLayout) {
  const fs::path root = fs::path(::testing::TempDir()) / "torchair_layouts";
  fs::remove_all(root);
  // GE, with ranks: a graph file at the top, two tokens of one model each.
  for (const char* r : {"0", "1"}) {
    const fs::path rank = root / "ge" / "msit_ge_dump" / (std::string("worldsize2_global_rank") + r);
    for (const char* t : {"0", "1"}) Touch(rank / "20240101000000" / "0" / "graph_1" / "1" / t / "Add.Add_1.1.2.17");
  }
  Touch(root / "ge" / "msit_ge_dump" / "dynamo_original_graph_1_rank_0_pid_1_2024.txt", "op { name: \"Add_1\" }\n");
  auto ge = FindTorchairRuns((root / "ge").string());
  ASSERT_EQ(ge.size(), 4u);
  EXPECT_EQ(ge[0].rank, "0");
  EXPECT_EQ(ge[0].token, "0");
  EXPECT_EQ(ge[1].token, "1");
  EXPECT_EQ(ge[3].rank, "1");
  EXPECT_EQ(ge[0].graph, "");
  EXPECT_EQ(fs::path(ge[1].path).filename(), "1");
  // FX, with ranks: tokens under the model's directory.
  for (const char* t : {"0", "1", "10"}) {
    Touch(root / "fx" / "msit_fx_dump" / "worldsize1_global_rank0" / "m" / t / "add-aten.add.Tensor.INPUT.0.5.npy");
  }
  auto fx = FindTorchairRuns((root / "fx").string());
  ASSERT_EQ(fx.size(), 3u);
  EXPECT_EQ(fx[2].token, "10");  // numeric order
  // The older FX layout: data_dump/{token + 1}/gm_*_dump/, one directory per graph.
  for (const char* t : {"1", "2"}) {
    for (const char* gm : {"gm_1_dump", "gm_2_dump"}) {
      Touch(root / "old" / "data_dump" / t / gm / "add-aten.add.Tensor.OUTPUT.0.5.npy");
    }
  }
  auto old = FindTorchairRuns((root / "old").string());
  ASSERT_EQ(old.size(), 4u);
  EXPECT_EQ(old[0].token, "0");
  EXPECT_EQ(old[0].graph, "0");
  EXPECT_EQ(old[1].graph, "1");
  EXPECT_EQ(old[3].token, "1");
  EXPECT_EQ(old[0].rank, "");
  // Not TorchAir: a plain directory of tensors, and one token directory itself.
  Touch(root / "plain" / "0" / "x.npy");
  EXPECT_TRUE(FindTorchairRuns((root / "plain").string()).empty());
  EXPECT_TRUE(FindTorchairRuns(fx[0].path).empty());
}

TEST(Torchair, AnFxDumpIsNamedAfterItsNodesInCallOrder) {
  const fs::path dir = fs::path(::testing::TempDir()) / "torchair_fx" / "0";
  fs::remove_all(dir.parent_path());
  Touch(dir / "relu-aten.relu.default.OUTPUT.0.20240125031118787352.npy", Npy(3));
  Touch(dir / "relu-aten.relu.default.INPUT.0.20240125031118787352.npy", Npy(2));
  Touch(dir / "add-aten.add.Tensor.INPUT.1.9.npy", Npy(1));
  Touch(dir / "add-aten.add.Tensor.INPUT.0.9.npy", Npy(0));
  auto d = OpenDump(dir.string());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->format, kTorchairFxFormat);
  ASSERT_EQ(d->items.size(), 4u);
  EXPECT_EQ(d->items[0].name, "add-aten.add.Tensor.input.0");
  EXPECT_EQ(d->items[1].name, "add-aten.add.Tensor.input.1");
  EXPECT_EQ(d->items[2].name, "relu-aten.relu.default.input.0");
  EXPECT_EQ(d->items[3].name, "relu-aten.relu.default.output.0");
  EXPECT_EQ(d->items[3].api, "relu-aten.relu.default");
  EXPECT_EQ(d->items[3].op_type, "aten.relu.default");
  EXPECT_EQ(d->items[3].role, Role::kOutput);
  auto t = LoadItemTensor(d->items[3]);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->At(0), 3.0);
  // One file of another naming makes it a plain directory again.
  Touch(dir / "x.npy", Npy(4));
  auto plain = OpenDump(dir.string());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->format, "directory");
}

}  // namespace
}  // namespace parity
