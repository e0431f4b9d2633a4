#include "bundle/object_tree.h"

#include <gtest/gtest.h>

#include "bundle/bundle_format.h"
#include "bundle/protos/trackable_object_graph.pb.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/bundle/testdata_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using Graph = tensorflow::TrackableObjectGraph;
using Node = tensorflow::TrackableObjectGraph::TrackableObject;

void AddChild(Node* node, int id, const std::string& name) {
  auto* c = node->add_children();
  c->set_node_id(id);
  c->set_local_name(name);
}

void AddValue(Node* node, const std::string& key) {
  auto* a = node->add_attributes();
  a->set_name("VARIABLE_VALUE");
  a->set_checkpoint_key(key);
}

void AddSlot(Node* optimizer, int variable, const std::string& slot, int slot_node) {
  auto* s = optimizer->add_slot_variables();
  s->set_original_variable_node_id(variable);
  s->set_slot_name(slot);
  s->set_slot_variable_node_id(slot_node);
}

// root -> model -> dense -> {kernel, bias}; model.root_again -> root (a
// cycle); opt -> iter, opt.alias -> dense (shared: BFS meets it first under
// model), slots m for kernel and bias on opt; save_counter. The bias slot's
// value is not in the bundle.
Graph ExampleGraph() {
  Graph g;
  for (int i = 0; i < 10; ++i) g.add_nodes();
  AddChild(g.mutable_nodes(0), 1, "model");
  AddChild(g.mutable_nodes(0), 2, "opt");
  AddChild(g.mutable_nodes(0), 3, "save_counter");
  AddChild(g.mutable_nodes(1), 4, "dense");
  AddChild(g.mutable_nodes(1), 0, "root_again");
  AddChild(g.mutable_nodes(4), 5, "kernel");
  AddChild(g.mutable_nodes(4), 6, "bias");
  AddChild(g.mutable_nodes(2), 7, "iter");
  AddChild(g.mutable_nodes(2), 4, "alias");
  AddSlot(g.mutable_nodes(2), 5, "m", 8);
  AddSlot(g.mutable_nodes(2), 6, "m", 9);
  AddValue(g.mutable_nodes(3), "save_counter/.ATTRIBUTES/VARIABLE_VALUE");
  AddValue(g.mutable_nodes(5), "model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE");
  AddValue(g.mutable_nodes(6), "model/dense/bias/.ATTRIBUTES/VARIABLE_VALUE");
  AddValue(g.mutable_nodes(7), "opt/iter/.ATTRIBUTES/VARIABLE_VALUE");
  AddValue(g.mutable_nodes(8),
           "model/dense/kernel/.OPTIMIZER_SLOT/opt/m/.ATTRIBUTES/VARIABLE_VALUE");
  AddValue(g.mutable_nodes(9), "model/dense/bias/.OPTIMIZER_SLOT/opt/m/.ATTRIBUTES/VARIABLE_VALUE");
  return g;
}

std::unique_ptr<BundleReader> WriteWithGraph(const std::string& prefix, const Graph& g,
                                             bool with_bias_slot = false) {
  testing::NamedTensors tensors = {
      {std::string(kObjectGraphKey), Tensor::Scalar(g.SerializeAsString())},
      {"save_counter/.ATTRIBUTES/VARIABLE_VALUE", Tensor::Scalar(int64_t{1})},
      {"model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE", Tensor(DT_FLOAT, TensorShape({3, 2}))},
      {"model/dense/bias/.ATTRIBUTES/VARIABLE_VALUE", Tensor(DT_FLOAT, TensorShape({2}))},
      {"opt/iter/.ATTRIBUTES/VARIABLE_VALUE", Tensor::Scalar(int64_t{4})},
      {"model/dense/kernel/.OPTIMIZER_SLOT/opt/m/.ATTRIBUTES/VARIABLE_VALUE",
       Tensor(DT_FLOAT, TensorShape({3, 2}))},
  };
  if (with_bias_slot) {
    tensors.emplace_back("model/dense/bias/.OPTIMIZER_SLOT/opt/m/.ATTRIBUTES/VARIABLE_VALUE",
                         Tensor(DT_FLOAT, TensorShape({2})));
  }
  for (auto& [key, t] : tensors) {
    if (t.dtype() == DT_FLOAT) std::fill(t.flat<float>().begin(), t.flat<float>().end(), 0.0f);
  }
  Status s = testing::WriteBundle(prefix, tensors);
  EXPECT_TRUE(s.ok()) << s;
  StatusOr<std::unique_ptr<BundleReader>> reader = BundleReader::Open(prefix);
  EXPECT_TRUE(reader.ok()) << reader.status();
  return reader.ok() ? std::move(reader).value() : nullptr;
}

TEST(ObjectTree, SharedNodesCyclesAndSlotsShownOnce) {
  auto reader = WriteWithGraph(testing::NewTempDir("tree") + "/ckpt", ExampleGraph());
  ASSERT_NE(reader, nullptr);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string tree,
                              RenderObjectGraph(*reader, ObjectGraphFormat::kTree));
  EXPECT_EQ(tree,
            "(root)\n"
            "  model\n"
            "    dense\n"
            "      kernel  float32[3,2]  model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE\n"
            "      bias  float32[2]  model/dense/bias/.ATTRIBUTES/VARIABLE_VALUE\n"
            "    root_again -> (root)\n"
            "  opt\n"
            "    iter  int64[]  opt/iter/.ATTRIBUTES/VARIABLE_VALUE\n"
            "    alias -> model/dense\n"
            "    slot 'm' for model/dense/kernel  float32[3,2]  "
            "model/dense/kernel/.OPTIMIZER_SLOT/opt/m/.ATTRIBUTES/VARIABLE_VALUE\n"
            "    slot 'm' for model/dense/bias  (not in checkpoint)  "
            "model/dense/bias/.OPTIMIZER_SLOT/opt/m/.ATTRIBUTES/VARIABLE_VALUE\n"
            "  save_counter  int64[]  save_counter/.ATTRIBUTES/VARIABLE_VALUE\n"
            "10 objects, 6 values (1 not in the checkpoint)\n");
}

TEST(ObjectTree, JsonIsValidAndNested) {
  const std::string dir = testing::NewTempDir("json");
  auto reader = WriteWithGraph(dir + "/ckpt", ExampleGraph(), /*with_bias_slot=*/true);
  ASSERT_NE(reader, nullptr);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string json,
                              RenderObjectGraph(*reader, ObjectGraphFormat::kJson));
  testing::WriteFileOrDie(dir + "/tree.json", json);
  // An independent parser reads it and walks to the kernel's slot.
  std::string output;
  const int rc = testing::RunCommand(
      "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d[\"roots\"][0]; "
      "opt=r[\"children\"][1]; print(d[\"objects\"], d[\"missing_values\"], opt[\"edge\"], "
      "opt[\"children\"][1][\"ref\"], opt[\"children\"][2][\"slot\"], "
      "opt[\"children\"][2][\"variable\"], opt[\"children\"][2][\"attributes\"][0][\"shape\"])' " +
          dir + "/tree.json",
      &output);
  EXPECT_EQ(rc, 0) << json;
  EXPECT_EQ(output, "10 0 opt model/dense m model/dense/kernel [3, 2]\n") << json;
}

TEST(ObjectTree, DotDrawsEveryEdgeOnce) {
  auto reader = WriteWithGraph(testing::NewTempDir("dot") + "/ckpt", ExampleGraph());
  ASSERT_NE(reader, nullptr);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string dot, RenderObjectGraph(*reader, ObjectGraphFormat::kDot));
  EXPECT_EQ(dot.rfind("digraph checkpoint {\n", 0), 0u);
  EXPECT_NE(dot.find("  n1 -> n0 [label=\"root_again\", style=dashed];\n"), std::string::npos);
  EXPECT_NE(dot.find("  n2 -> n4 [label=\"alias\", style=dashed];\n"), std::string::npos);
  EXPECT_NE(dot.find("  n4 -> n5 [label=\"kernel\"];\n"), std::string::npos);
  EXPECT_NE(dot.find("  n2 -> n8 [label=\"slot m\", color=blue, fontcolor=blue];\n"),
            std::string::npos);
  EXPECT_NE(dot.find("n5 [label=\"kernel\\nfloat32[3,2]\""), std::string::npos) << dot;
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
}

TEST(ObjectTree, NodeIdOutOfRangeIsDataLoss) {
  Graph g = ExampleGraph();
  AddChild(g.mutable_nodes(4), 42, "ghost");
  auto reader = WriteWithGraph(testing::NewTempDir("bad") + "/ckpt", g);
  ASSERT_NE(reader, nullptr);
  Status s = RenderObjectGraph(*reader, ObjectGraphFormat::kTree).status();
  EXPECT_THAT(s,
              testing::StatusIs(StatusCode::kDataLoss, "node 4: child 'ghost' is node 42 of 10"));
}

TEST(ObjectTree, GraphThatDoesNotParseIsDataLoss) {
  const std::string prefix = testing::NewTempDir("garbage") + "/ckpt";
  CKFLOW_ASSERT_OK(testing::WriteBundle(
      prefix, {{std::string(kObjectGraphKey), Tensor::Scalar(std::string("\xff\xff\xff", 3))}}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  Status s = RenderObjectGraph(*reader, ObjectGraphFormat::kTree).status();
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kDataLoss, "not a TrackableObjectGraph"));
}

TEST(ObjectTree, NameBasedCheckpointIsNotFound) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader,
                              BundleReader::Open(testing::GoldenPrefix("tf1_saver_small")));
  Status s = RenderObjectGraph(*reader, ObjectGraphFormat::kTree).status();
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kNotFound, "name-based"));
}

TEST(ObjectTree, DeepChainDoesNotExhaustTheStack) {
  Graph g;
  const int depth = 100000;
  for (int i = 0; i < depth; ++i) {
    Node* n = g.add_nodes();
    if (i + 1 < depth) AddChild(n, i + 1, "c");
  }
  const std::string prefix = testing::NewTempDir("deep") + "/ckpt";
  CKFLOW_ASSERT_OK(testing::WriteBundle(
      prefix, {{std::string(kObjectGraphKey), Tensor::Scalar(g.SerializeAsString())}}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  for (ObjectGraphFormat format :
       {ObjectGraphFormat::kTree, ObjectGraphFormat::kJson, ObjectGraphFormat::kDot}) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::string out, RenderObjectGraph(*reader, format));
    EXPECT_GT(out.size(), static_cast<size_t>(depth)) << static_cast<int>(format);
    EXPECT_LT(out.size(), static_cast<size_t>(200 * depth));  // linear, not quadratic
  }
}

}  // namespace
}  // namespace ckflow
