// Culprit analysis on its own: which operator is named, and which one a summary reports first.
#include "common/compare/culprit.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace parity {
namespace {

std::vector<OpStatus> Statuses(const std::vector<OpAnalysis>& ops) {
  std::vector<OpStatus> out;
  for (const OpAnalysis& op : ops) out.push_back(op.status);
  return out;
}

constexpr Role kIn = Role::kInput;
constexpr Role kOut = Role::kOutput;
constexpr Verdict kP = Verdict::kPass;
constexpr Verdict kF = Verdict::kFail;

// Two operators fail independently with a propagated one between them: both are culprits, the
// one in between is propagated, and the first in dump order is the one reported.
TEST(Culprit, OfSeveralIndependentCulpritsTheFirstIsReported) {
  const std::vector<CulpritInput> items = {
      {"a", kIn, kP}, {"a", kOut, kF},   // culprit
      {"b", kIn, kF}, {"b", kOut, kF},   // propagated
      {"c", kIn, kP}, {"c", kOut, kP},   // clean
      {"d", kIn, kP}, {"d", kOut, kF}};  // culprit
  const std::vector<OpAnalysis> ops = AnalyzeCulprits(items);
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0].api, "a");
  EXPECT_EQ(ops[3].api, "d");
  EXPECT_EQ(Statuses(ops), (std::vector<OpStatus>{OpStatus::kCulprit, OpStatus::kPropagated,
                                                  OpStatus::kNone, OpStatus::kCulprit}));
  EXPECT_EQ(FirstCulprit(ops), "a");
}

// A propagated operator earlier in the dump is never the reported culprit.
TEST(Culprit, APropagatedOperatorIsNeverTheFirstCulprit) {
  const std::vector<OpAnalysis> ops =
      AnalyzeCulprits({{"p", kIn, kF}, {"p", kOut, kF}, {"q", kIn, kP}, {"q", kOut, kF}});
  EXPECT_EQ(Statuses(ops), (std::vector<OpStatus>{OpStatus::kPropagated, OpStatus::kCulprit}));
  EXPECT_EQ(FirstCulprit(ops), "q");
  EXPECT_EQ(FirstCulprit(AnalyzeCulprits({{"p", kIn, kF}, {"p", kOut, kF}})), "");
}

// An ERROR (unreadable data) is no precision failure: on an output it names no culprit, on an
// input it does not make the operator's failing output propagated.
TEST(Culprit, AnErrorIsNeitherACulpritNorAFailingInput) {
  const std::vector<OpAnalysis> ops = AnalyzeCulprits({{"e", kIn, kP},
                                                       {"e", kOut, Verdict::kError},
                                                       {"f", kIn, Verdict::kError},
                                                       {"f", kOut, kF}});
  EXPECT_EQ(Statuses(ops), (std::vector<OpStatus>{OpStatus::kNone, OpStatus::kCulprit}));
  EXPECT_EQ(FirstCulprit(ops), "f");
}

// An item without a role (a plain directory of tensor files) is its own operator's output.
TEST(Culprit, AnItemWithoutARoleIsItsOperatorsOutput) {
  const std::vector<OpAnalysis> ops =
      AnalyzeCulprits({{"x.npy", Role::kUnknown, kP}, {"y.npy", Role::kUnknown, kF}});
  EXPECT_EQ(Statuses(ops), (std::vector<OpStatus>{OpStatus::kNone, OpStatus::kCulprit}));
  EXPECT_EQ(FirstCulprit(ops), "y.npy");
}

// Operators are listed in order of first appearance, and each item knows its operator even
// when an operator's items are not together.
TEST(Culprit, ItemsMapToTheirOperatorInOrderOfFirstAppearance) {
  std::vector<size_t> op_of_item;
  const std::vector<OpAnalysis> ops = AnalyzeCulprits(
      {{"m", kIn, kP}, {"n", kIn, kP}, {"m", kOut, kF}, {"n", kOut, kP}, {"m", kOut, kP}}, &op_of_item);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].api, "m");
  EXPECT_EQ(ops[1].api, "n");
  EXPECT_EQ(op_of_item, (std::vector<size_t>{0, 1, 0, 1, 0}));
  EXPECT_EQ(Statuses(ops), (std::vector<OpStatus>{OpStatus::kCulprit, OpStatus::kNone}));
}

constexpr Role kGrad = Role::kGradient;

// A forward defect: the backward entries of the failing forward ops have failing outputs too
// (they compute from saved tensors that were already wrong), and are consequences.
TEST(Culprit, ABackwardEntryWhoseForwardFailsIsPropagated) {
  const std::vector<OpAnalysis> ops = AnalyzeCulprits({
      {"Functional.batch_norm.6.forward", kIn, kP}, {"Functional.batch_norm.6.forward", kOut, kF},  // culprit
      {"Tensor.square.0.forward", kIn, kF}, {"Tensor.square.0.forward", kOut, kF},  // propagated
      {"Tensor.square.0.backward", kIn, kP}, {"Tensor.square.0.backward", kOut, kF},  // 2*y*g from a wrong y
      {"Functional.batch_norm.6.backward", kIn, kF}, {"Functional.batch_norm.6.backward", kOut, kF}});
  EXPECT_EQ(Statuses(ops), (std::vector<OpStatus>{OpStatus::kCulprit, OpStatus::kPropagated,
                                                  OpStatus::kPropagated, OpStatus::kPropagated}));
  EXPECT_EQ(FirstCulprit(ops), "Functional.batch_norm.6.forward");
}

// A backward-only defect: forward clean, the incoming gradient right, the outgoing one wrong.
TEST(Culprit, ABackwardEntryWithCleanForwardAndIncomingGradientIsACulprit) {
  const std::vector<OpAnalysis> ops = AnalyzeCulprits({
      {"Functional.gelu.0.forward", kIn, kP}, {"Functional.gelu.0.forward", kOut, kP},
      {"Functional.gelu.0.backward", kIn, kP}, {"Functional.gelu.0.backward", kOut, kF},  // culprit
      {"Functional.linear.0.backward", kIn, kF}, {"Functional.linear.0.backward", kOut, kF},
      {"Module.fc.Linear.backward.0", kIn, kP}, {"Module.fc.Linear.backward.0", kOut, kF},  // no forward entry
  });
  EXPECT_EQ(Statuses(ops), (std::vector<OpStatus>{OpStatus::kNone, OpStatus::kCulprit, OpStatus::kPropagated,
                                                  OpStatus::kCulprit}));
  EXPECT_EQ(FirstCulprit(ops), "Functional.gelu.0.backward");
}

// A module's forward and backward entries pair by their call count.
TEST(Culprit, AModulesBackwardPairsWithTheForwardCallOfTheSameCount) {
  const std::vector<OpAnalysis> ops = AnalyzeCulprits({
      {"Module.l.Linear.forward.0", kIn, kP}, {"Module.l.Linear.forward.0", kOut, kP},
      {"Module.l.Linear.forward.1", kIn, kF}, {"Module.l.Linear.forward.1", kOut, kF},
      {"Module.l.Linear.backward.1", kIn, kP}, {"Module.l.Linear.backward.1", kOut, kF},  // forward.1 fails
      {"Module.l.Linear.backward.0", kIn, kP}, {"Module.l.Linear.backward.0", kOut, kF},  // forward.0 passes
  });
  EXPECT_EQ(Statuses(ops), (std::vector<OpStatus>{OpStatus::kNone, OpStatus::kPropagated, OpStatus::kPropagated,
                                                  OpStatus::kCulprit}));
}

// Parameter gradients are analysed (their items used to count as inputs): a failing one is a
// culprit of its own when the module's forward and incoming gradient pass, else propagated.
TEST(Culprit, AFailingParameterGradientIsACulpritOnlyWhenItsModuleIsClean) {
  const std::vector<OpAnalysis> clean = AnalyzeCulprits({
      {"Module.fc.Linear.forward.0", kIn, kP}, {"Module.fc.Linear.forward.0", kOut, kP},
      {"Module.fc.Linear.backward.0", kIn, kP}, {"Module.fc.Linear.backward.0", kOut, kP},
      {"Module.fc.Linear.parameters_grad", kGrad, kP}, {"Module.fc.Linear.parameters_grad", kGrad, kF}});
  EXPECT_EQ(Statuses(clean), (std::vector<OpStatus>{OpStatus::kNone, OpStatus::kNone, OpStatus::kCulprit}));
  EXPECT_EQ(FirstCulprit(clean), "Module.fc.Linear.parameters_grad");
  const std::vector<OpAnalysis> incoming_wrong = AnalyzeCulprits({
      {"Module.fc.Linear.forward.0", kIn, kP}, {"Module.fc.Linear.forward.0", kOut, kP},
      {"Module.fc.Linear.backward.0", kIn, kF}, {"Module.fc.Linear.backward.0", kOut, kF},
      {"Module.fc.Linear.parameters_grad", kGrad, kF}});
  EXPECT_EQ(Statuses(incoming_wrong).back(), OpStatus::kPropagated);
  const std::vector<OpAnalysis> forward_wrong = AnalyzeCulprits({
      {"Module.fc.Linear.forward.0", kIn, kF}, {"Module.fc.Linear.forward.0", kOut, kF},
      {"Module.fc.Linear.parameters_grad", kGrad, kF}});
  EXPECT_EQ(Statuses(forward_wrong).back(), OpStatus::kPropagated);
}

// Names that only look like a phase are plain operators.
TEST(Culprit, OnlyAPhaseWordAtTheEndOrBeforeACountMakesABackwardEntry) {
  const std::vector<OpAnalysis> ops = AnalyzeCulprits({
      {"x.forward", kIn, kF}, {"x.forward", kOut, kF},
      {"x.backward_hook", kIn, kP}, {"x.backward_hook", kOut, kF}});
  EXPECT_EQ(Statuses(ops), (std::vector<OpStatus>{OpStatus::kPropagated, OpStatus::kCulprit}));
}

// Error growth. Items carry their error figure and the rounding unit of their dtype.
CulpritInput E(const char* api, Role role, Verdict v, double error, double unit = 0x1p-8) {
  return {api, role, v, error, unit};
}

// A clean bf16 run whose rounding makes one operator fail the peer's rule: it amplifies the
// error it receives no more than the passing operators do, so it is no culprit (within noise);
// a real defect in the same run (growth far above the floor) is one.
TEST(CulpritGrowth, AFailureWithinTheNoiseFloorIsNoCulpritButARealDefectIs) {
  std::vector<CulpritInput> items;
  std::vector<std::string> names;
  for (int i = 0; i < 10; ++i) names.push_back("Functional.op." + std::to_string(i) + ".forward");
  for (int i = 0; i < 10; ++i) {  // passing operators growing the error 1x to 3x
    items.push_back(E(names[i].c_str(), kIn, kP, 0.01));
    items.push_back(E(names[i].c_str(), kOut, kP, 0.01 * (1 + (i % 3))));
  }
  items.push_back(E("Functional.relu.0.backward", kIn, kP, 0.01));
  items.push_back(E("Functional.relu.0.backward", kOut, kF, 0.025));  // fails, grows 2.5x
  items.push_back(E("Functional.batch_norm.0.forward", kIn, kP, 0.01));
  items.push_back(E("Functional.batch_norm.0.forward", kOut, kF, 0.6));  // grows 60x
  GrowthFloor floor;
  const std::vector<OpAnalysis> ops = AnalyzeCulprits(items, nullptr, &floor);
  EXPECT_EQ(floor.samples, 10u);
  EXPECT_DOUBLE_EQ(floor.noise, 3.0);
  EXPECT_DOUBLE_EQ(floor.threshold, 6.0);
  EXPECT_TRUE(std::isnan(floor.fence));  // 12 operators: too few for the fence
  const OpAnalysis& relu = ops[10];
  EXPECT_EQ(relu.status, OpStatus::kNone);
  EXPECT_TRUE(relu.fails);
  EXPECT_DOUBLE_EQ(relu.growth, 2.5);
  const OpAnalysis& bn = ops[11];
  EXPECT_EQ(bn.status, OpStatus::kCulprit);
  EXPECT_EQ(bn.phase, OpPhase::kForward);
  EXPECT_DOUBLE_EQ(bn.growth, 60.0);
  EXPECT_EQ(FirstCulprit(ops), "Functional.batch_norm.0.forward");
  const Json doc = CulpritAnalysisJson(ops, floor);
  EXPECT_EQ(doc.Find("within_noise")->Dump(), "[\"Functional.relu.0.backward\"]");
  EXPECT_EQ(doc.Find("ranked")->as_array().size(), 1u);
}

// An operator whose own rounding grows the error a lot (a ReLU backward whose mask flips in
// bf16) fails once a defect upstream has made the others fail too: the passing operators left
// are few and quiet, but the outlier fence over every operator receiving passing inputs keeps
// it within noise while the defect stands out.
TEST(CulpritGrowth, TheOutlierFenceKeepsANoisyOperatorOutWhenFewPass) {
  std::vector<CulpritInput> items;
  std::vector<std::string> names;
  for (int i = 0; i < 40; ++i) names.push_back("Functional.op." + std::to_string(i) + ".forward");
  for (int i = 0; i < 40; ++i) {  // growth 0.5x to 2x
    items.push_back(E(names[i].c_str(), kIn, kP, 0.01));
    items.push_back(E(names[i].c_str(), kOut, i < 30 ? kP : kF, 0.005 * (1 + (i % 4))));
  }
  items.push_back(E("Functional.relu.7.backward", kIn, kP, 0.01));
  items.push_back(E("Functional.relu.7.backward", kOut, kF, 0.155));  // 15.5x
  items.push_back(E("Functional.batch_norm.2.forward", kIn, kP, 0.004));
  items.push_back(E("Functional.batch_norm.2.forward", kOut, kF, 1.04));  // 260x
  GrowthFloor floor;
  const std::vector<OpAnalysis> ops = AnalyzeCulprits(items, nullptr, &floor);
  EXPECT_DOUBLE_EQ(floor.noise, 2.0);
  ASSERT_FALSE(std::isnan(floor.fence));
  EXPECT_GT(floor.fence, 15.5);
  EXPECT_LT(floor.fence, 260.0);
  EXPECT_DOUBLE_EQ(floor.threshold, floor.fence);
  EXPECT_EQ(ops[40].status, OpStatus::kNone);
  EXPECT_EQ(ops[41].status, OpStatus::kCulprit);
  EXPECT_EQ(RankedCulprits(ops), (std::vector<size_t>{41}));
}

// A threshold artefact: an op's input fails by MaxAbsErr while its output passes at the same
// relative error; the next op's output fails at that error again. Its growth is 1: no culprit.
TEST(CulpritGrowth, AVerdictFlipWithoutErrorGrowthIsNoCulprit) {
  const std::vector<OpAnalysis> ops = AnalyzeCulprits({
      E("pool", kIn, kF, 0.3), E("pool", kOut, kP, 0.3),
      E("next", kIn, kP, 0.3), E("next", kOut, kF, 0.3)});
  EXPECT_EQ(Statuses(ops), (std::vector<OpStatus>{OpStatus::kNone, OpStatus::kNone}));
  EXPECT_DOUBLE_EQ(ops[1].growth, 1.0);
}

// Culprits are ranked by growth, unknown growth last; exact inputs count as the rounding unit
// (a first operator's growth is its output error over its dtype's unit).
TEST(CulpritGrowth, CulpritsRankByGrowthAndExactInputsCountAsTheRoundingUnit) {
  const std::vector<OpAnalysis> ops = AnalyzeCulprits({
      E("a", kIn, kP, 0.0), E("a", kOut, kF, 0x1p-8 * 100),  // 100x the bf16 unit
      E("b", kIn, kP, 0.01), E("b", kOut, kF, 5.0),          // 500x
      {"c", kIn, kP}, {"c", kOut, kF}});                      // no figures
  EXPECT_DOUBLE_EQ(ops[0].growth, 100.0);
  EXPECT_DOUBLE_EQ(ops[1].growth, 500.0);
  EXPECT_TRUE(std::isnan(ops[2].growth));
  EXPECT_EQ(Statuses(ops), (std::vector<OpStatus>{OpStatus::kCulprit, OpStatus::kCulprit, OpStatus::kCulprit}));
  EXPECT_EQ(RankedCulprits(ops), (std::vector<size_t>{1, 0, 2}));
}

// A backward entry receives its forward entry's error too (the tensors it saved).
TEST(CulpritGrowth, ABackwardEntryReceivesItsForwardEntrysError) {
  const std::vector<OpAnalysis> ops = AnalyzeCulprits({
      E("Tensor.square.0.forward", kIn, kP, 0.2), E("Tensor.square.0.forward", kOut, kP, 0.4),
      E("Tensor.square.0.backward", kIn, kP, 0.01), E("Tensor.square.0.backward", kOut, kF, 0.4)});
  EXPECT_DOUBLE_EQ(ops[1].in_error, 0.4);
  EXPECT_DOUBLE_EQ(ops[1].growth, 1.0);
  EXPECT_EQ(ops[1].status, OpStatus::kNone);
}

// With construct.json, a module enclosing a culprit (level mix) is propagated: the failure is
// its inner operator's. Without it, both are named.
TEST(CulpritGrowth, AModuleEnclosingACulpritIsPropagatedWithTheModuleTree) {
  const std::vector<CulpritInput> items = {
      E("Functional.batch_norm.0.forward", kIn, kP, 0.0), E("Functional.batch_norm.0.forward", kOut, kF, 0.5),
      E("Module.bn.BatchNorm2d.forward.0", kIn, kP, 0.0), E("Module.bn.BatchNorm2d.forward.0", kOut, kF, 0.5),
      E("Module.block.Sequential.forward.0", kIn, kP, 0.0), E("Module.block.Sequential.forward.0", kOut, kF, 0.4)};
  EXPECT_EQ(Statuses(AnalyzeCulprits(items)),
            (std::vector<OpStatus>{OpStatus::kCulprit, OpStatus::kCulprit, OpStatus::kCulprit}));
  const ParentList tree = {{"Module.block.Sequential.forward.0", ""},
                           {"Module.bn.BatchNorm2d.forward.0", "Module.block.Sequential.forward.0"},
                           {"Functional.batch_norm.0.forward", "Module.bn.BatchNorm2d.forward.0"}};
  EXPECT_EQ(Statuses(AnalyzeCulprits(items, nullptr, nullptr, &tree)),
            (std::vector<OpStatus>{OpStatus::kCulprit, OpStatus::kPropagated, OpStatus::kPropagated}));
  // A cycle in a malformed file ends the walk.
  const ParentList cycle = {{"Functional.batch_norm.0.forward", "Module.bn.BatchNorm2d.forward.0"},
                            {"Module.bn.BatchNorm2d.forward.0", "Functional.batch_norm.0.forward"}};
  EXPECT_EQ(AnalyzeCulprits(items, nullptr, nullptr, &cycle).size(), 3u);
}

// The error figure: msprobe's EucDist over the golden norm; a cosine with both norms (exact);
// a cosine alone; statistics' NormRelativeErr; none for ERROR rows or non-float targets.
TEST(CulpritGrowth, ItemErrorIsTheRelativeL2Error) {
  CheckResult r;
  r.verdict = Verdict::kFail;
  r.Add("Cosine", MetricValue::Number(0.6));
  r.Add("EucDist", MetricValue::Number(3.0));
  EXPECT_DOUBLE_EQ(ItemError(r, DType::kFloat32, 6.0, 5.0), 0.5);
  CheckResult c;
  c.verdict = Verdict::kPass;
  c.Add("PCC", MetricValue::Number(0.5));
  EXPECT_DOUBLE_EQ(ItemError(c, DType::kBFloat16, 1.0, 1.0), 1.0);  // |t-g| of two unit vectors 60 deg apart
  EXPECT_DOUBLE_EQ(ItemError(c, DType::kBFloat16, 2.0, 1.0), std::sqrt(0.25 + 1 - 0.5));
  EXPECT_DOUBLE_EQ(ItemError(c, DType::kBFloat16, std::nullopt, std::nullopt), 1.0);
  CheckResult stats;
  stats.verdict = Verdict::kWarn;
  stats.Add("NormRelativeErr", MetricValue::Text("-12.5%"));
  EXPECT_DOUBLE_EQ(ItemError(stats, DType::kFloat16, 1.0, 1.0), 0.125);
  EXPECT_TRUE(std::isnan(ItemError(r, DType::kBool, 6.0, 5.0)));
  EXPECT_TRUE(std::isnan(ItemError(r, std::nullopt, 6.0, 5.0)));
  r.verdict = Verdict::kError;
  EXPECT_TRUE(std::isnan(ItemError(r, DType::kFloat32, 6.0, 5.0)));
  EXPECT_EQ(RoundingUnit(DType::kBFloat16), 0x1p-8);
  EXPECT_EQ(RoundingUnit(DType::kFloat32), 0x1p-24);
  EXPECT_EQ(RoundingUnit(DType::kInt64), 0.0);
}

}  // namespace
}  // namespace parity
