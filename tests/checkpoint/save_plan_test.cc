// A Checkpoint keeps what a save derives from its object graph (the values,
// the serialized TrackableObjectGraph, the split into files, the save ops)
// until TrackableStructureGeneration() moves: a save of an unchanged model
// builds no object graph and writes the bytes a fresh build writes, and every
// change of structure under the root (a dependency, a variable, a slot added
// anywhere, a reference expiring) shows in the next save.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "checkpoint/object_graph_internal.h"
#include "checkpoint/saver_internal.h"
#include "graph/structure_generation.h"
#include "ops/initializers.h"
#include "ops/partitioned_variables.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/bundle/testdata_util.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::CountingVariable;
using testing::FilesOf;
using testing::Module;

std::set<std::string> KeysOf(const std::string& prefix) {
  std::set<std::string> keys;
  StatusOr<std::unique_ptr<BundleReader>> reader = BundleReader::Open(prefix);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return keys;
  for (const BundleEntry& e : (*reader)->entries()) keys.insert(e.key);
  return keys;
}

// A model "model" with a nested module "inner" holding "w", and a session.
struct Program : testing::ModelProgram {
  std::shared_ptr<Module> inner = std::make_shared<Module>();
  Program() {
    model->Track("inner", inner);
    Add("v", CountingVariable(scope, "v", TensorShape({3}), 1.0f));
    inner->Track("w", CountingVariable(scope, "w", TensorShape({2}), 10.0f));
    CKFLOW_EXPECT_OK(Finish());
  }

  // Writes `name` in `dir`; returns its prefix.
  std::string Write(const std::string& dir, const std::string& name,
                    const SaveOptions& options = {}) {
    const std::string prefix = dir + "/" + name;
    StatusOr<std::string> written = checkpoint->Write(prefix, *session, options);
    EXPECT_TRUE(written.ok()) << written.status();
    CKFLOW_EXPECT_OK(checkpoint->Sync());
    return prefix;
  }

  // Slot "m" of v, created by `owner` (not initialized).
  void AddSlot(testing::MirrorOptimizer& owner) {
    owner.pending.push_back({.variable = vars[0],
                             .slot_name = "m",
                             .dtype = DT_FLOAT,
                             .shape = TensorShape({3}),
                             .key = ""});
    owner.CreateSlots(scope);
  }

  // A new variable, initialized, so a save can read it.
  std::shared_ptr<Variable> NewVariable(const std::string& name) {
    auto v = CountingVariable(scope, name, TensorShape({4}), 7.0f);
    testing::RunOrFail(*session, {v->initializer()});
    return v;
  }
};

// ForEachReachableObject, the walk InitializeOrRestore makes for the initializers
// a restore leaves, reaches the object graph's objects, each once, slots
// last: a module reached by two edges, a reference back to the model, a
// module reached only by a reference, a slot, and hundreds of modules, each
// also referring back to the model and to the one before it.
TEST(SavePlanTest, ReachableObjectsAreTheObjectGraphsObjects) {
  Program p;
  auto optimizer = std::make_shared<testing::MirrorOptimizer>();
  p.inner->Track("optimizer", optimizer);
  p.model->Track("inner_again", p.inner);
  p.inner->TrackReference("up", p.model);
  auto only_referenced = std::make_shared<Module>();
  p.inner->TrackReference("only_referenced", only_referenced);
  std::shared_ptr<Module> previous = p.inner;
  for (int i = 0; i < 500; ++i) {
    auto module = std::make_shared<Module>();
    p.inner->Track("m" + std::to_string(i), module);
    module->TrackReference("model", p.model);
    module->TrackReference("previous", previous);
    previous = module;
  }
  p.AddSlot(*optimizer);
  const std::shared_ptr<Trackable> root = p.checkpoint->root();
  std::vector<const Trackable*> want;
  for (const auto& node : internal::BuildObjectGraph(root).nodes) want.push_back(node.object.get());
  std::vector<const Trackable*> got;
  internal::ForEachReachableObject(root, [&](const Trackable& object) { got.push_back(&object); });
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back(), optimizer->slot_by_key.begin()->second.get());  // slots last
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(std::adjacent_find(got.begin(), got.end()), got.end());
  EXPECT_EQ(got, want);
  // The root, model, v, inner, w, the optimizer, the modules and the slot
  // at least.
  EXPECT_GE(got.size(), 508u);
}

// A save writes the object graph straight from its walk, without
// protobuf's messages; the bytes must be those protobuf writes for the same
// graph: node ids and lengths past one varint byte (hundreds of modules, a
// 200-character name), references back up (cycles, one to node 0), a slot, a
// partitioned variable (one attribute for its parts), object and attribute
// names to escape, an empty name, and nodes without values.
TEST(SavePlanTest, TheObjectGraphIsWrittenAsProtobufWritesIt) {
  Program p;
  auto optimizer = std::make_shared<testing::MirrorOptimizer>();
  p.inner->Track("optimizer", optimizer);
  p.inner->TrackReference("up", p.model);
  p.inner->TrackReference("root", p.checkpoint->root());  // node id 0: left out
  std::shared_ptr<Module> previous = p.inner;
  for (int i = 0; i < 300; ++i) {
    auto module = std::make_shared<Module>();
    p.inner->Track(i == 7 ? "" : i == 8 ? "a/b.c" : "m" + std::to_string(i), module);
    module->TrackReference("previous", previous);
    previous = module;
  }
  previous->Track(std::string(200, 'x'), p.NewVariable("long"));
  previous->Track("parts",
                  PartitionedVariable::Create(p.scope, "parts", DT_FLOAT, TensorShape({6, 2}),
                                              initializers::Zeros(), {.num_shards = 3}));
  auto empty = std::make_shared<Module>();
  p.model->Track("empty", empty);
  // An attribute name with characters a checkpoint escapes.
  p.model->Track("odd",
                 std::make_shared<testing::EditedAttribute>(
                     p.NewVariable("odd"), [](SaveableAttribute& a) { a.name = "a.b/c..d"; }));
  p.AddSlot(*optimizer);
  const internal::ObjectGraph graph = internal::BuildObjectGraph(p.checkpoint->root());
  ASSERT_GT(graph.nodes.size(), 300u);
  const tensorflow::TrackableObjectGraph proto = internal::ToProto(graph);
  EXPECT_EQ(internal::SerializeObjectGraph(graph).value(), proto.SerializeAsString());
  const auto& odd = proto.nodes(graph.id_of.at(p.model->LookupChild("odd").get()));
  ASSERT_EQ(odd.attributes_size(), 1);
  EXPECT_EQ(odd.attributes(0).name(), "a..b.Sc....d");
  // has_checkpoint_values: the optimizer (no values of its own) has its
  // slot's; the empty module has none.
  EXPECT_TRUE(proto.nodes(graph.id_of.at(optimizer.get())).has_checkpoint_values().value());
  EXPECT_FALSE(proto.nodes(graph.id_of.at(empty.get())).has_checkpoint_values().value());
}

TEST(SavePlanTest, AnUnchangedModelIsSavedWithoutBuildingItsObjectGraphAgain) {
  const std::string dir = testing::NewTempDir("plan");
  Program p;
  const std::string first = p.Write(dir, "first");  // builds
  const int64_t builds = internal::NumFullObjectGraphBuilds();
  const std::string second = p.Write(dir, "second");
  const std::string third = p.Write(dir, "third", {.async = true});
  EXPECT_EQ(internal::NumFullObjectGraphBuilds(), builds);
  // The cached saves write the bytes the fresh build wrote.
  EXPECT_EQ(FilesOf(second), FilesOf(first));
  EXPECT_EQ(FilesOf(third), FilesOf(first));
  EXPECT_EQ(FilesOf(first).size(), 2u);  // index and one data file
  CKFLOW_EXPECT_OK(testing::CheckBundle(second).status());
}

// An object dying anywhere makes the next save check that the plan's objects
// still live (they do), not build the object graph again.
TEST(SavePlanTest, AnUnrelatedObjectDyingKeepsThePlan) {
  const std::string dir = testing::NewTempDir("plan");
  Program p;
  const std::string first = p.Write(dir, "first");
  const int64_t builds = internal::NumFullObjectGraphBuilds();
  const uint64_t destroyed = TrackablesDestroyed();
  // Tracking would move the structure's generation: these only live and die.
  std::make_shared<Module>().reset();
  { const Module on_the_stack; }
  EXPECT_EQ(TrackablesDestroyed(), destroyed + 2);
  const std::string second = p.Write(dir, "second");
  EXPECT_EQ(internal::NumFullObjectGraphBuilds(), builds);
  EXPECT_EQ(FilesOf(second), FilesOf(first));
}

TEST(SavePlanTest, ChangedValuesAreSavedFromTheCachedPlan) {
  const std::string dir = testing::NewTempDir("plan");
  Program p;
  p.Write(dir, "first");
  testing::SetValue(*p.session, *p.vars[0], Tensor::FromVector<float>({-1, -2, -3}));
  const std::string second = p.Write(dir, "second");
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(second));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor v, reader->Lookup("model/v/.ATTRIBUTES/VARIABLE_VALUE"));
  EXPECT_TRUE(testing::SameTensor(v, Tensor::FromVector<float>({-1, -2, -3})));
}

// Each change of structure is seen by the next save: the object graph is
// built again, and what is written equals a save by a checkpoint that never
// saved before (a fresh build of everything).
class SavePlanChangeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SavePlanChangeTest, InvalidatesThePlan) {
  const std::string change = GetParam();
  const std::string dir = testing::NewTempDir("plan");
  Program p;
  auto optimizer = std::make_shared<testing::MirrorOptimizer>();
  p.inner->Track("optimizer", optimizer);
  auto kept = std::make_shared<Module>();
  kept->Track("r", p.NewVariable("r"));
  p.model->TrackReference("ref", kept);
  p.Write(dir, "before");
  p.Write(dir, "cached");
  const int64_t builds = internal::NumFullObjectGraphBuilds();

  std::string expected_key;
  std::string gone_key;
  if (change == "dependency") {
    auto deep = std::make_shared<Module>();
    p.inner->Track("deep", deep);  // no values: only the object graph changes
    expected_key.clear();
  } else if (change == "variable") {
    p.inner->Track("x", p.NewVariable("x"));
    expected_key = "model/inner/x/.ATTRIBUTES/VARIABLE_VALUE";
  } else if (change == "slot") {
    p.AddSlot(*optimizer);
    testing::RunOrFail(*p.session, {optimizer->slot_by_key.begin()->second->initializer()});
    expected_key = "model/v/.OPTIMIZER_SLOT/model/inner/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE";
  } else if (change == "expired reference") {
    kept.reset();
    gone_key = "model/ref/r/.ATTRIBUTES/VARIABLE_VALUE";
  }
  const std::string after = p.Write(dir, "after");
  EXPECT_GT(internal::NumFullObjectGraphBuilds(), builds) << change;
  EXPECT_NE(FilesOf(after).at(".index"), FilesOf(dir + "/cached").at(".index")) << change;
  const std::set<std::string> keys = KeysOf(after);
  if (!expected_key.empty()) {
    EXPECT_TRUE(keys.count(expected_key)) << change;
  }
  if (!gone_key.empty()) {
    EXPECT_FALSE(keys.count(gone_key)) << change;
    EXPECT_TRUE(KeysOf(dir + "/cached").count(gone_key)) << change;
  }

  // Saved again from the new plan: the same bytes as the save right after
  // the change, which built everything afresh.
  const std::string again = p.Write(dir, "again");
  EXPECT_EQ(FilesOf(again), FilesOf(after)) << change;
  CKFLOW_EXPECT_OK(testing::CheckBundle(again).status());
}

INSTANTIATE_TEST_SUITE_P(Changes, SavePlanChangeTest,
                         ::testing::Values("dependency", "variable", "slot", "expired reference"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name) {
                             if (c == ' ') c = '_';
                           }
                           return name;
                         });

TEST(SavePlanTest, ARefusedTrackFailsEverySave) {
  const std::string dir = testing::NewTempDir("plan");
  Program p;
  p.Write(dir, "first");
  p.inner->Track("w", std::make_shared<Module>());  // "w" is taken
  for (int i = 0; i < 2; ++i) {
    StatusOr<std::string> written = p.checkpoint->Write(dir + "/bad", *p.session);
    EXPECT_THAT(written.status(),
                testing::StatusIs(StatusCode::kInvalidArgument, "already declared"));
  }
}

TEST(SavePlanTest, AsyncSavesReuseTheirSnapshotBuffers) {
  // A hundred async saves of one model: its snapshot buffers are allocated
  // by the first and reused by every later one, so memory does not grow.
  const std::string dir = testing::NewTempDir("plan");
  Program p;
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<CheckpointManager> manager,
      CheckpointManager::Create(*p.checkpoint, dir,
                                {.max_to_keep = 2, .save_options = {.async = true}}));
  CKFLOW_ASSERT_OK(manager->Save(*p.session).status());
  CKFLOW_ASSERT_OK(p.checkpoint->Sync());
  const int64_t allocations = internal::NumSnapshotAllocations();
  for (int i = 0; i < 99; ++i) {
    testing::SetValue(*p.session, *p.vars[0],
                      Tensor::FromVector<float>({static_cast<float>(i), 0, 0}));
    CKFLOW_ASSERT_OK(manager->Save(*p.session).status());
  }
  CKFLOW_ASSERT_OK(p.checkpoint->Sync());
  EXPECT_EQ(internal::NumSnapshotAllocations(), allocations);
  EXPECT_EQ(testing::ListDir(dir).size(), 5u);  // the state file and two checkpoints
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader,
                              BundleReader::Open(*manager->latest_checkpoint()));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor v, reader->Lookup("model/v/.ATTRIBUTES/VARIABLE_VALUE"));
  EXPECT_EQ(v.flat<float>()[0], 98.0f);
}

TEST(StructureGenerationTest, MovesOnEveryKindOfChange) {
  Scope scope = Scope::NewRootScope();
  auto parent = std::make_shared<Module>();
  auto child = std::make_shared<Module>();
  uint64_t g = TrackableStructureGeneration();
  auto moved = [&g] {
    const uint64_t now = TrackableStructureGeneration();
    const bool changed = now != g;
    g = now;
    return changed;
  };
  parent->Track("child", child);
  EXPECT_TRUE(moved()) << "Track";
  parent->Track("child", child);
  EXPECT_FALSE(moved()) << "the same Track again changes nothing";
  parent->TrackReference("ref", child);
  EXPECT_TRUE(moved()) << "TrackReference";
  parent->Track("child", std::make_shared<Module>());  // refused
  EXPECT_TRUE(moved()) << "refused Track";
  auto optimizer = std::make_shared<testing::MirrorOptimizer>();
  auto variable = CountingVariable(scope, "v", TensorShape({1}), 0.0f);
  moved();
  optimizer->pending.push_back({.variable = variable,
                                .slot_name = "m",
                                .dtype = DT_FLOAT,
                                .shape = TensorShape({1}),
                                .key = ""});
  optimizer->CreateSlots(scope);
  EXPECT_TRUE(moved()) << "slot created";
  EXPECT_FALSE(moved());
}

}  // namespace
}  // namespace ckflow
