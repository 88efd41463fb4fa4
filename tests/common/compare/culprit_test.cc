// Culprit analysis on its own: which operator is named, and which one a summary reports first.
#include "common/compare/culprit.h"

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

}  // namespace
}  // namespace parity
