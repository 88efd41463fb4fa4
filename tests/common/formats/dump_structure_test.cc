// msprobe's stack.json (both formats) and construct.json as Parity reads them.
#include "common/formats/dump_structure.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace parity {
namespace {

// The current format groups APIs that share a stack: {"0": [[names...], "stack"], ...}; entries
// of another shape are skipped, as msprobe's load_stack_json skips them.
TEST(DumpStructure, CurrentStackFormatMapsEachNameToItsStack) {
  DumpStructure s;
  ASSERT_TRUE(ParseStackJson(R"js({"0": [["Functional.relu.0.forward", "Module.a.A.forward.0"],
                                        "File m.py, line 3, in f, \n relu(x) \n"],
                                 "1": [["Tensor.add.0.forward"], "File m.py, line 4, in f, \n x + y \n"],
                                 "2": "not a pair"})js",
                             &s).ok());
  EXPECT_TRUE(s.has_stack_json);
  EXPECT_EQ(s.stacks.size(), 3u);
  EXPECT_EQ(s.stacks.at("Module.a.A.forward.0"), "File m.py, line 3, in f, \n relu(x) \n");
  EXPECT_EQ(StackOf(s, "Tensor.add.0.forward"), "File m.py, line 4, in f, \n x + y \n");
  // A backward entry shows where its forward call was made.
  EXPECT_EQ(StackOf(s, "Functional.relu.0.backward"), s.stacks.at("Functional.relu.0.forward"));
  EXPECT_EQ(StackOf(s, "Functional.gelu.0.forward"), "");
}

// The old format maps a name to its lines; the column shows Python's str() of the list.
TEST(DumpStructure, OldStackFormatKeepsTheListAsPythonPrintsIt) {
  DumpStructure s;
  ASSERT_TRUE(ParseStackJson(R"js({"Functional.relu.0.forward": ["File a.py, line 1", "relu(x)"]})js", &s).ok());
  EXPECT_EQ(s.stacks.at("Functional.relu.0.forward"), "['File a.py, line 1', 'relu(x)']");
}

// construct.json keeps the file's order; null is the top; Megatron's [parent, micro_step] pairs
// give their parent and its micro step count is no node.
TEST(DumpStructure, ConstructJsonKeepsOrderAndReadsMegatronPairs) {
  DumpStructure s;
  ASSERT_TRUE(ParseConstructJson(R"js({"Module.m.M.forward.0": null,
                                     "Functional.relu.0.forward": "Module.m.M.forward.0",
                                     "Module.l.L.forward.0": ["Module.m.M.forward.0", 1],
                                     "megatron_micro_step_number": 2})js",
                                 &s).ok());
  ASSERT_EQ(s.parents.size(), 3u);
  EXPECT_EQ(s.parents[0], (std::pair<std::string, std::string>{"Module.m.M.forward.0", ""}));
  EXPECT_EQ(s.parents[1].second, "Module.m.M.forward.0");
  EXPECT_EQ(s.parents[2].second, "Module.m.M.forward.0");
  EXPECT_EQ(ModuleOfForwardNode("Module.l.L.forward.0"), "Module.l.L");
  EXPECT_EQ(ModuleOfForwardNode("Module.l.L.backward.0"), "");
  EXPECT_EQ(ModuleOfForwardNode("Functional.relu.0.forward"), "");
  // A module's parameter gradients show on its first forward node only.
  s.parents.emplace_back("Module.l.L.forward.1", "Module.m.M.forward.0");
  EXPECT_EQ(GradientEntries(s), (std::vector<std::string>{"Module.m.M.parameters_grad", "",
                                                          "Module.l.L.parameters_grad", ""}));
}

// Malformed files are refused with the file and what is wrong, as msprobe refuses them.
TEST(DumpStructure, MalformedFilesNameTheFileAndTheProblem) {
  DumpStructure s;
  absl::Status st = ParseStackJson("[1, 2]", &s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "stack.json: the outermost value is not an object");
  st = ParseConstructJson(R"js({"a": 3.5e0, "b": {}})js", &s, "/d/construct.json");
  EXPECT_EQ(st.message(), "/d/construct.json: the parent of \"b\" is neither a name nor null");
  st = ParseConstructJson(R"js({"a": []})js", &s);
  EXPECT_EQ(st.message(), "construct.json: \"a\" has an empty list");
  EXPECT_EQ(ParseStackJson("{", &s).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace parity
