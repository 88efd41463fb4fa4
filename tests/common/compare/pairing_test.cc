// Pairing rules on their own: which items pair, and why the others do not.
#include "common/compare/pairing.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace parity {
namespace {

DumpItem Tensor(const std::string& name, const std::string& dtype, Shape shape) {
  DumpItem it;
  it.name = name;
  it.dtype_text = dtype;
  it.shape = std::move(shape);
  it.has_shape = true;
  return it;
}

DumpItem Value(const std::string& name, const std::string& type) {
  DumpItem it;
  it.name = name;
  it.is_tensor = false;
  it.type = type;
  return it;
}

const PairingOptions kMsprobe = PairingOptionsFor("msprobe", "msprobe", false, {});
const PairingOptions kByName = PairingOptionsFor("npy-dir", "msprobe", false, {});

// msprobe's shape and dtype gates apply when both dumps are msprobe's, and only then.
TEST(Pairing, MsprobesGatesApplyOnlyBetweenTwoMsprobeDumps) {
  EXPECT_TRUE(kMsprobe.match_shape);
  EXPECT_TRUE(kMsprobe.dtype_gate);
  EXPECT_FALSE(kByName.match_shape);
  EXPECT_FALSE(kByName.dtype_gate);
  EXPECT_FALSE(PairingOptionsFor("msprobe", "npy-dir", false, {}).match_shape);
  const DumpItem t = Tensor("x", "torch.float32", {2, 3});
  const DumpItem g = Tensor("x", "torch.float32", {3, 2});
  EXPECT_EQ(PairIncompatibility(t, g, kMsprobe), "shapes differ: golden [3, 2], target [2, 3]");
  EXPECT_EQ(PairIncompatibility(t, g, kByName), "");
}

// The dtype gate: equal dtypes, or both within one framework's float family.
TEST(Pairing, TheDtypeGateTakesEqualDtypesOrTwoFloatsOfOneFamily) {
  auto pairs = [](const std::string& a, const std::string& b) {
    return PairIncompatibility(Tensor("x", a, {4}), Tensor("x", b, {4}), kMsprobe).empty();
  };
  EXPECT_TRUE(pairs("torch.float32", "torch.bfloat16"));
  EXPECT_TRUE(pairs("torch.float16", "torch.float32"));
  EXPECT_TRUE(pairs("Float16", "BFloat16"));
  EXPECT_TRUE(pairs("torch.int64", "torch.int64"));
  EXPECT_FALSE(pairs("torch.float32", "torch.int64"));
  EXPECT_FALSE(pairs("torch.int32", "torch.float16"));
  EXPECT_FALSE(pairs("torch.float32", "Float32"));
  EXPECT_EQ(PairIncompatibility(Tensor("x", "torch.int64", {4}), Tensor("x", "torch.float32", {4}), kMsprobe),
            "dtypes cannot be compared (msprobe dtype gate): golden torch.float32, target torch.int64");
}

// A tensor never pairs with a non-tensor value of the same name, under any rules; two values do.
TEST(Pairing, ATensorNeverPairsWithAValue) {
  const DumpItem t = Tensor("arg", "torch.float32", {1});
  const DumpItem v = Value("arg", "int");
  for (const PairingOptions& o : {kMsprobe, kByName}) {
    EXPECT_EQ(PairIncompatibility(v, t, o), "the golden item is a tensor, the target item is int");
    EXPECT_EQ(PairIncompatibility(t, v, o), "the golden item is int, the target item is a tensor");
    EXPECT_EQ(PairIncompatibility(v, Value("arg", "float"), o), "");
  }
  auto pairs = PairItems({v}, {t}, kByName);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  ASSERT_EQ(pairs->size(), 2u);  // the target item unmatched, then the golden one
  EXPECT_EQ((*pairs)[0].target, 0);
  EXPECT_EQ((*pairs)[0].golden, -1);
  EXPECT_EQ((*pairs)[0].note, "the golden item is a tensor, the target item is int");
  EXPECT_EQ((*pairs)[1].golden, 0);
  EXPECT_EQ((*pairs)[1].target, -1);
}

// A name twice on one side is an error naming both places, never a silent pick.
TEST(Pairing, ANameTwiceOnOneSideIsAnError) {
  auto pairs = PairItems({Tensor("x", "torch.float32", {1}), Tensor("x", "torch.float32", {1})},
                         {Tensor("x", "torch.float32", {1})}, kMsprobe);
  ASSERT_FALSE(pairs.ok());
  EXPECT_EQ(pairs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pairs.status().message(), "duplicate item name 'x' in the target dump (items 0 and 1)");
}

// Against an FX dump, a GE target's item naming another target item as its in-run golden (an
// inserted Cast's output and its input) is compared with it; that item has no row of its own.
TEST(Pairing, InRunGoldensMoveToTheGoldenSideOnlyAgainstAnFxDump) {
  auto items = [] {
    std::vector<DumpItem> t = {Tensor("Cast_9.input.0", "torch.float32", {2}),
                               Tensor("Cast_9.output.0", "torch.float16", {2}), Tensor("add.output.0", "x", {2})};
    t[1].in_run_golden = "Cast_9.input.0";
    return t;
  };
  std::vector<DumpItem> target = items();
  std::vector<DumpItem> golden = {Tensor("add.output.0", "x", {2})};
  PairingOptions o = PairingOptionsFor("torchair-fx", "torchair-ge", false, {});
  ASSERT_TRUE(o.in_run_goldens);
  MoveInRunGoldens(&target, &golden, &o);
  ASSERT_EQ(target.size(), 2u);
  EXPECT_EQ(target[0].name, "Cast_9.output.0");
  ASSERT_EQ(golden.size(), 2u);
  EXPECT_EQ(golden[1].name, "Cast_9.input.0");
  absl::StatusOr<std::vector<ItemPair>> p = PairItems(target, golden, o);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[0].golden, 1);  // the Cast's output against its input
  EXPECT_EQ((*p)[1].golden, 0);
  // Against a fusion-off GE dump the Cast pairs by name, as the reference pairs GE ops.
  std::vector<DumpItem> target2 = items(), golden2 = items();
  PairingOptions ge = PairingOptionsFor("torchair-ge", "torchair-ge", false, {});
  EXPECT_FALSE(ge.in_run_goldens);
  MoveInRunGoldens(&target2, &golden2, &ge);
  EXPECT_EQ(target2.size(), 3u);
  EXPECT_TRUE(ge.mapping.empty());
}

}  // namespace
}  // namespace parity
