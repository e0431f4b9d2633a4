// Checkpoints in an eager scope (graph/eager.h): restore-on-create of
// variables, slots and beta powers in both orders, through one reader; the
// status objects as TensorFlow's eager ones; Save without a Session; and
// eager-written checkpoints read in graph mode and back, bit for bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bundle/bundle_reader.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "checkpoint/name_based_saver.h"
#include "checkpoint/object_graph_internal.h"
#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "ops/layers.h"
#include "ops/losses.h"
#include "ops/nn_ops.h"
#include "ops/optimizers.h"
#include "ops/partitioned_variables.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/bundle/testdata_util.h"
#include "tests/checkpoint/recording_file_system.h"
#include "tests/ops/op_test_util.h"
#include "tests/test_util.h"
#include "workloads/model_program.h"

namespace ckflow {
namespace {

using testing::StatusIs;

// Two Dense layers that a program may call one at a time.
class TwoLayers : public Model {
 public:
  TwoLayers() : Model("two_layers") {
    first = Track("first", Dense::Make(5, {.activation = ops::Relu,
                                           .kernel_initializer = testing::WavyInitializer(0),
                                           .name = "first"}));
    second = Track("second", Dense::Make(1, {.kernel_initializer = testing::WavyInitializer(1),
                                             .name = "second"}));
  }
  std::shared_ptr<Dense> first, second;

 protected:
  Output Call(const Scope& scope, Output x) override {
    return (*second)(scope, (*first)(scope, x));
  }
};

std::pair<Tensor, Tensor> Batch(int seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  Tensor x(DT_FLOAT, TensorShape({8, 3}));
  Tensor y(DT_FLOAT, TensorShape({8, 1}));
  for (int i = 0; i < 8; ++i) {
    float* v = &x.flat<float>()[3 * i];
    for (int j = 0; j < 3; ++j) v[j] = u(rng);
    y.flat<float>()[i] = v[0] - 2 * v[1] * v[2];
  }
  return {x, y};
}

// An eager program: the model, Adam and a checkpoint of both.
struct EagerProgram {
  explicit EagerProgram(FileSystem* fs = nullptr)
      : scope(Scope::NewEagerScope(fs)),
        model(std::make_shared<TwoLayers>()),
        adam(Adam::Make({.learning_rate = 0.05f})),
        checkpoint(scope, {{"model", model}, {"optimizer", adam}}, {.file_system = fs}) {}

  void Train(int first_step, int steps) {
    for (int s = first_step; s < first_step + steps; ++s) {
      auto [x, y] = Batch(s);
      adam->Minimize(scope, [&] {
        return losses::MeanSquaredError(scope, ops::Const(scope, y),
                                        (*model)(scope, ops::Const(scope, x)));
      });
    }
  }
  // Every variable's value, by name.
  std::map<std::string, Tensor> Values() const {
    std::map<std::string, Tensor> out;
    for (const auto& v : GlobalVariables(scope.graph())) out[v->name()] = v->value().value();
    return out;
  }

  Scope scope;
  std::shared_ptr<TwoLayers> model;
  std::shared_ptr<Adam> adam;
  Checkpoint checkpoint;
};

void ExpectSameValues(const std::map<std::string, Tensor>& a,
                      const std::map<std::string, Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, tensor] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_TRUE(testing::SameTensor(tensor, b.at(name))) << name;
  }
}

// An Initializer that counts its calls and fills with `value`.
Initializer Counting(int* calls, double value) {
  return [calls, value](const Scope& scope, DataType dtype, const TensorShape& shape) {
    ++*calls;
    return initializers::Constant(value)(scope, dtype, shape);
  };
}

class EagerCheckpointTest : public ::testing::Test {
 protected:
  // Trains 5 steps and saves; `continued` gets the values after 5 more.
  std::string SaveAfterFiveSteps(std::map<std::string, Tensor>* continued = nullptr) {
    EagerProgram p;
    p.Train(0, 5);
    StatusOr<std::string> path = p.checkpoint.Save(dir_ + "/ckpt");
    EXPECT_TRUE(path.ok()) << path.status();
    EXPECT_TRUE(p.checkpoint.Sync().ok());
    if (continued != nullptr) {
      p.Train(5, 5);
      *continued = p.Values();
    }
    return *path;
  }

  // A checkpoint of a Module whose variables "v" and "u" (float32[4],
  // created by CreateTracked with nothing to restore) hold 3s.
  std::string SaveModuleWithVAndU() {
    Scope scope = Scope::NewEagerScope();
    auto module = std::make_shared<workloads::Module>();
    int calls = 0;
    for (const char* name : {"v", "u"}) {
      Variable::CreateTracked(*module, scope, name, DT_FLOAT, TensorShape({4}),
                              Counting(&calls, 3));
    }
    EXPECT_EQ(calls, 2);  // nothing to restore: initialized
    Checkpoint checkpoint(scope, {{"module", module}});
    StatusOr<std::string> path = checkpoint.Save(dir_ + "/ckpt");
    EXPECT_TRUE(path.ok()) << path.status();
    return path.ok() ? *path : std::string();
  }

  std::string dir_ = testing::NewTempDir("eager_ckpt");
};

TEST_F(EagerCheckpointTest, RestoreBeforeAnythingExistsThenTrainingContinuesExactly) {
  std::map<std::string, Tensor> expected;
  const std::string path = SaveAfterFiveSteps(&expected);

  EagerProgram p;
  StatusOr<LoadStatus> status = p.checkpoint.Restore(path);
  ASSERT_TRUE(status.ok()) << status.status();
  // save_counter was created by Restore and restored at once.
  EXPECT_EQ(p.checkpoint.save_counter()->value().value().scalar<int64_t>(), 1);
  EXPECT_TRUE(status->InitializeOrRestore().ok());  // no-ops in eager mode
  EXPECT_TRUE(status->RunRestoreOps().ok());
  EXPECT_THAT(status->AssertConsumed(), StatusIs(StatusCode::kFailedPrecondition, "Unresolved"));
  // Layers restore on their first call, slots and beta powers on the first
  // update (restored before the update reads them).
  p.Train(5, 5);
  ASSERT_TRUE(p.scope.ok()) << p.scope.status();
  EXPECT_TRUE(status->AssertConsumed().ok()) << status->AssertConsumed();
  ExpectSameValues(p.Values(), expected);
}

TEST_F(EagerCheckpointTest, SlotsRestoreWhenTheirVariableExistsBeforeRestore) {
  std::map<std::string, Tensor> expected;
  const std::string path = SaveAfterFiveSteps(&expected);

  EagerProgram p;
  // The layers exist (with their initial values) before Restore; the slots
  // do not until Minimize.
  auto [x, y] = Batch(0);
  (*p.model)(p.scope, ops::Const(p.scope, x));
  StatusOr<LoadStatus> status = p.checkpoint.Restore(path);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(status->AssertExistingObjectsMatched().ok());
  // The slots and beta powers wait for the first update.
  EXPECT_THAT(status->AssertConsumed(), StatusIs(StatusCode::kFailedPrecondition, "beta1_power"));
  p.Train(5, 5);
  EXPECT_TRUE(status->AssertConsumed().ok()) << status->AssertConsumed();
  ExpectSameValues(p.Values(), expected);
}

TEST_F(EagerCheckpointTest, SlotsThatExistAreRestoredOnTheSpot) {
  std::map<std::string, Tensor> expected;
  const std::string path = SaveAfterFiveSteps(&expected);

  EagerProgram p;
  p.Train(17, 3);  // everything exists, with other values
  StatusOr<LoadStatus> status = p.checkpoint.Restore(path);
  ASSERT_TRUE(status.ok());
  EXPECT_TRUE(status->AssertConsumed().ok()) << status->AssertConsumed();
  p.Train(5, 5);
  ExpectSameValues(p.Values(), expected);
}

TEST_F(EagerCheckpointTest, AssertConsumedFailsUntilTheLastObjectIsCreated) {
  const std::string path = SaveAfterFiveSteps();
  EagerProgram p;
  StatusOr<LoadStatus> status = p.checkpoint.Restore(path);
  ASSERT_TRUE(status.ok());
  auto [x, y] = Batch(0);
  // The variables appear across several calls.
  Output h = (*p.model->first)(p.scope, ops::Const(p.scope, x));
  EXPECT_THAT(status->AssertConsumed(), StatusIs(StatusCode::kFailedPrecondition, "second"));
  EXPECT_TRUE(status->AssertExistingObjectsMatched().ok());
  (*p.model->second)(p.scope, h);
  EXPECT_THAT(status->AssertConsumed(), StatusIs(StatusCode::kFailedPrecondition, "Unresolved"));
  p.Train(5, 1);
  ASSERT_TRUE(p.scope.ok()) << p.scope.status();
  EXPECT_TRUE(status->AssertConsumed().ok()) << status->AssertConsumed();
}

TEST_F(EagerCheckpointTest, RestoreOnCreateReadsThroughOneReader) {
  const std::string path = SaveAfterFiveSteps();
  testing::RecordingFileSystem fs;
  EagerProgram p(&fs);
  fs.CountReads(true);
  ASSERT_TRUE(p.checkpoint.Restore(path).ok());
  auto opens = [&] {
    int n = 0;
    for (const auto& e : fs.events()) n += e.op == testing::FsOp::kOpen;
    return n;
  };
  const int after_restore = opens();
  p.Train(5, 3);  // 13 variables restored as they appear
  ASSERT_TRUE(p.scope.ok()) << p.scope.status();
  EXPECT_EQ(opens(), after_restore);
}

// TensorFlow's eager restore-on-create: the checkpointed value is the initial
// value, so a variable a restore waits for never runs its initializer; only
// when the restore cannot assign it (its value has another shape) does the
// initializer run after all, and the status reports the problem.
TEST_F(EagerCheckpointTest, AVariableARestoreWaitsForIsReadNotInitialized) {
  const std::string path = SaveModuleWithVAndU();
  Scope scope = Scope::NewEagerScope();
  auto module = std::make_shared<workloads::Module>();
  Checkpoint checkpoint(scope, {{"module", module}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, checkpoint.Restore(path));
  int calls = 0;
  std::shared_ptr<Variable> v =
      Variable::CreateTracked(*module, scope, "v", DT_FLOAT, TensorShape({4}), Counting(&calls, 7));
  ASSERT_NE(v, nullptr) << scope.status();
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(testing::SameTensor(v->value().value(),
                                  testing::MakeTensor(DT_FLOAT, TensorShape({4}), {3, 3, 3, 3})));
  EXPECT_THAT(status.AssertConsumed(), StatusIs(StatusCode::kFailedPrecondition, "u"));

  std::shared_ptr<Variable> u =
      Variable::CreateTracked(*module, scope, "u", DT_FLOAT, TensorShape({5}), Counting(&calls, 7));
  ASSERT_NE(u, nullptr) << scope.status();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(testing::SameTensor(
      u->value().value(), testing::MakeTensor(DT_FLOAT, TensorShape({5}), {7, 7, 7, 7, 7})));
  EXPECT_THAT(status.AssertConsumed(), StatusIs(StatusCode::kInvalidArgument, "shape"));

  // A variable nothing waits for is initialized as usual.
  Variable::CreateTracked(*module, scope, "w", DT_FLOAT, TensorShape({4}), Counting(&calls, 7));
  EXPECT_EQ(calls, 2);
}

// Both variables exist when the restore matches them, the first one
// matched ("v") with a shape its value does not fit: it keeps its value and
// the status reports it, while "u", after it, is restored on the spot.
TEST_F(EagerCheckpointTest, AValueThatDoesNotFitLeavesTheOthersRestored) {
  const std::string path = SaveModuleWithVAndU();
  Scope scope = Scope::NewEagerScope();
  auto module = std::make_shared<workloads::Module>();
  int calls = 0;
  std::shared_ptr<Variable> v =
      Variable::CreateTracked(*module, scope, "v", DT_FLOAT, TensorShape({5}), Counting(&calls, 7));
  std::shared_ptr<Variable> u =
      Variable::CreateTracked(*module, scope, "u", DT_FLOAT, TensorShape({4}), Counting(&calls, 7));
  ASSERT_TRUE(scope.ok()) << scope.status();
  Checkpoint checkpoint(scope, {{"module", module}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, checkpoint.Restore(path));
  EXPECT_THAT(status.AssertExistingObjectsMatched(),
              StatusIs(StatusCode::kInvalidArgument, "has shape [4] but variable 'v'"));
  EXPECT_TRUE(testing::SameTensor(
      v->value().value(), testing::MakeTensor(DT_FLOAT, TensorShape({5}), {7, 7, 7, 7, 7})));
  EXPECT_TRUE(testing::SameTensor(u->value().value(),
                                  testing::MakeTensor(DT_FLOAT, TensorShape({4}), {3, 3, 3, 3})));
}

TEST_F(EagerCheckpointTest, EagerCheckpointsRestoreInGraphModeAndBackBitForBit) {
  EagerProgram eager;
  eager.Train(0, 4);
  const std::string eager_path = *eager.checkpoint.Save(dir_ + "/eager");
  ASSERT_TRUE(eager.checkpoint.Sync().ok());
  const std::map<std::string, Tensor> eager_values = eager.Values();

  // Graph mode restores the eager checkpoint: every value, slots included.
  Scope graph = Scope::NewRootScope();
  auto model = std::make_shared<TwoLayers>();
  auto adam = Adam::Make({.learning_rate = 0.05f});
  Checkpoint checkpoint(graph, {{"model", model}, {"optimizer", adam}});
  LoadStatus status = *checkpoint.Restore(eager_path);
  Output x = ops::Placeholder(graph, DT_FLOAT, {.shape = {-1, 3}});
  Output y = ops::Placeholder(graph, DT_FLOAT, {.shape = {-1, 1}});
  adam->Minimize(graph, losses::MeanSquaredError(graph, y, (*model)(graph, x)));
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto session = *Session::Create(graph.graph());
  ASSERT_TRUE(status.InitializeOrRestore(*session).ok());
  EXPECT_TRUE(status.AssertConsumed().ok()) << status.AssertConsumed();
  const auto graph_vars = GlobalVariables(graph.graph());
  ASSERT_EQ(graph_vars.size(), eager_values.size());
  for (const auto& v : graph_vars) {
    SCOPED_TRACE(v->name());
    EXPECT_TRUE(
        testing::SameTensor((*session->Run({}, {v->value()}))[0], eager_values.at(v->name())));
  }

  // Graph mode saves it again: the same tensors under the same keys.
  const std::string graph_path = *checkpoint.Save(dir_ + "/graph", *session);
  auto eager_reader = *BundleReader::Open(eager_path);
  auto graph_reader = *BundleReader::Open(graph_path);
  ASSERT_EQ(eager_reader->entries().size(), graph_reader->entries().size());
  for (const BundleEntry& entry : eager_reader->entries()) {
    SCOPED_TRACE(entry.key);
    if (entry.key == "_CHECKPOINTABLE_OBJECT_GRAPH") continue;
    StatusOr<Tensor> a = eager_reader->Lookup(entry.key);
    StatusOr<Tensor> b = graph_reader->Lookup(entry.key);
    ASSERT_TRUE(a.ok() && b.ok());
    if (entry.key.starts_with("save_counter")) continue;  // 1, then 2
    EXPECT_TRUE(testing::SameTensor(*a, *b));
  }

  // And an eager program restores the graph's checkpoint as it builds.
  EagerProgram back;
  LoadStatus back_status = *back.checkpoint.Restore(graph_path);
  (*back.model)(back.scope, ops::Const(back.scope, Batch(0).first));
  ASSERT_TRUE(back.scope.ok()) << back.scope.status();
  back_status.ExpectPartial();  // no slots: nothing is trained here
  for (const auto& [name, value] : back.Values()) {
    SCOPED_TRACE(name);
    if (name == "save_counter") continue;  // the graph's save made it 2
    EXPECT_TRUE(testing::SameTensor(value, eager_values.at(name)));
  }
  EXPECT_EQ(back.checkpoint.save_counter()->value().value().scalar<int64_t>(), 2);
}

TEST_F(EagerCheckpointTest, ReaderLevelCheckPassesOnAnEagerCheckpoint) {
  const std::string path = SaveAfterFiveSteps();
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string out, testing::CheckBundle(path));
  EXPECT_NE(out.find("every key in the bundle"), std::string::npos) << out;
  EXPECT_NE(out.find("model/first/kernel/.OPTIMIZER_SLOT/optimizer/m/"), std::string::npos) << out;
}

// The value a checkpoint at `path` holds under `key`.
Tensor Stored(const std::string& path, const std::string& key) {
  StatusOr<std::unique_ptr<BundleReader>> reader = BundleReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return Tensor();
  StatusOr<Tensor> value = (*reader)->Lookup(key);
  EXPECT_TRUE(value.ok()) << value.status();
  return value.ok() ? *value : Tensor();
}

// Saves without a Session go through the saver's cached save plan: a save
// after slots appeared writes them, and a save of an unchanged model writes
// the values of the moment, not those of the save the plan was made for.
TEST_F(EagerCheckpointTest, SavesWithoutASessionFollowTheModelThroughThePlanCache) {
  const std::string kernel_key = "model/first/kernel/.ATTRIBUTES/VARIABLE_VALUE";
  const std::string slot_key =
      "model/first/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE";
  EagerProgram p;
  (*p.model)(p.scope, ops::Const(p.scope, Batch(0).first));  // layers, no slots
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string first, p.checkpoint.Save(dir_ + "/ckpt"));
  CKFLOW_ASSERT_OK(p.checkpoint.Sync());
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto first_reader, BundleReader::Open(first));
  EXPECT_EQ(first_reader->FindEntry(slot_key), nullptr);

  p.Train(0, 2);  // creates the slots and beta powers
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string second, p.checkpoint.Save(dir_ + "/ckpt"));
  CKFLOW_ASSERT_OK(p.checkpoint.Sync());
  EXPECT_TRUE(testing::SameTensor(
      Stored(second, slot_key),
      p.adam->GetSlotVariable(*p.model->first->kernel(), "m")->value().value()));

  const int64_t builds = internal::NumFullObjectGraphBuilds();
  p.Train(2, 2);  // same structure: the plan is kept
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string third, p.checkpoint.Save(dir_ + "/ckpt"));
  CKFLOW_ASSERT_OK(p.checkpoint.Sync());
  EXPECT_EQ(internal::NumFullObjectGraphBuilds(), builds);
  const Tensor kernel = p.model->first->kernel()->value().value();
  EXPECT_TRUE(testing::SameTensor(Stored(third, kernel_key), kernel));
  EXPECT_FALSE(testing::SameTensor(Stored(second, kernel_key), kernel));
  EXPECT_EQ(Stored(third, "save_counter/.ATTRIBUTES/VARIABLE_VALUE").scalar<int64_t>(), 3);
}

// A partitioned variable saved eagerly restores on creation into another
// partitioning: each part reads its box of the whole.
TEST_F(EagerCheckpointTest, PartitionedVariablesRestoreOnCreateIntoTheirBoxes) {
  constexpr int64_t kRows = 6, kCols = 4;
  auto box = [](const PartitionedVariable& v, int i) {
    const TensorShape shape = v.parts()[i]->shape().ToTensorShape();
    return v.axis() == 0 ? testing::Grid(shape.dim(0), shape.dim(1), v.offset(i), 0)
                         : testing::Grid(shape.dim(0), shape.dim(1), 0, v.offset(i));
  };
  std::string path;
  {
    Scope scope = Scope::NewEagerScope();
    auto saved = PartitionedVariable::Create(scope, "emb", DT_FLOAT, {kRows, kCols},
                                             initializers::Zeros(), {.num_shards = 3, .axis = 0});
    ASSERT_NE(saved, nullptr) << scope.status();
    for (int i = 0; i < saved->num_parts(); ++i) {
      saved->parts()[i]->Assign(scope, ops::Const(scope, box(*saved, i)));
    }
    auto holder = std::make_shared<workloads::Module>();
    holder->Track("emb", saved);
    Checkpoint checkpoint(scope, {{"holder", holder}});
    CKFLOW_ASSERT_OK_AND_ASSIGN(path, checkpoint.Save(dir_ + "/parts"));
    CKFLOW_ASSERT_OK(checkpoint.Sync());
  }
  Scope scope = Scope::NewEagerScope();
  auto holder = std::make_shared<workloads::Module>();
  Checkpoint checkpoint(scope, {{"holder", holder}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, checkpoint.Restore(path));
  auto restored = PartitionedVariable::Create(scope, "other", DT_FLOAT, {kRows, kCols},
                                              initializers::Zeros(), {.num_shards = 2, .axis = 1});
  ASSERT_NE(restored, nullptr) << scope.status();
  holder->Track("emb", restored);
  ASSERT_TRUE(scope.ok()) << scope.status();
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  for (int i = 0; i < restored->num_parts(); ++i) {
    SCOPED_TRACE(restored->parts()[i]->name());
    EXPECT_TRUE(testing::SameTensor(restored->parts()[i]->value().value(), box(*restored, i)));
  }
}

// TensorFlow's eager manager.save() and restore_or_initialize() need no
// session.
TEST_F(EagerCheckpointTest, AManagerSavesAndRestoresWithoutASession) {
  std::map<std::string, Tensor> saved, continued;
  std::vector<std::string> paths;
  {
    EagerProgram p;
    CKFLOW_ASSERT_OK_AND_ASSIGN(auto manager,
                                CheckpointManager::Create(p.checkpoint, dir_, {.max_to_keep = 2}));
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<std::string> restored,
                                manager->RestoreOrInitialize());
    EXPECT_FALSE(restored.has_value());
    for (int i = 0; i < 3; ++i) {
      p.Train(2 * i, 2);
      CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, manager->Save());
      paths.push_back(path);
    }
    saved = p.Values();
    EXPECT_EQ(paths.back(), dir_ + "/ckpt-3");
    EXPECT_EQ(manager->checkpoints(), (std::vector<std::string>{paths[1], paths[2]}));
    EXPECT_EQ(manager->latest_checkpoint(), paths[2]);
    EXPECT_EQ(LatestCheckpoint(dir_), paths[2]);
    EXPECT_FALSE(std::filesystem::exists(paths[0] + ".index"));
    EXPECT_TRUE(std::filesystem::exists(paths[1] + ".index"));
    p.Train(6, 3);
    continued = p.Values();
  }
  // A second program restores on creation from the manager's latest.
  EagerProgram p;
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto manager,
                              CheckpointManager::Create(p.checkpoint, dir_, {.max_to_keep = 2}));
  ASSERT_EQ(manager->latest_checkpoint(), paths[2]);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<std::string> restored, manager->RestoreOrInitialize());
  EXPECT_EQ(restored, paths[2]);
  EXPECT_EQ(p.checkpoint.save_counter()->value().value().scalar<int64_t>(), 3);
  p.Train(6, 3);
  ASSERT_TRUE(p.scope.ok()) << p.scope.status();
  ExpectSameValues(p.Values(), continued);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, manager->Save());
  EXPECT_EQ(path, dir_ + "/ckpt-4");
  EXPECT_EQ(manager->checkpoints(), (std::vector<std::string>{paths[2], path}));
}

TEST_F(EagerCheckpointTest, AManagerWithoutASessionNeedsAnEagerScope) {
  Scope graph = Scope::NewRootScope();
  Checkpoint checkpoint(graph, {});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto manager, CheckpointManager::Create(checkpoint, dir_, {}));
  EXPECT_THAT(manager->Save(), StatusIs(StatusCode::kFailedPrecondition, "eager scope"));
  EXPECT_THAT(manager->RestoreOrInitialize(),
              StatusIs(StatusCode::kFailedPrecondition, "eager scope"));
}

// TensorFlow's eager NameBasedSaverStatus: a TF1 Saver's checkpoint (no
// object graph) restores by variable name, what exists at once and the rest
// on creation.
TEST_F(EagerCheckpointTest, NameBasedCheckpointsRestoreByNameNowAndOnCreation) {
  std::map<std::string, Tensor> expected;
  std::string path;
  {
    EagerProgram p;
    p.Train(0, 5);
    SessionOptions options{.resources = p.scope.eager_context()->shared_resources()};
    CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(p.scope.graph(), options));
    CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver, NameBasedSaver::Create(p.scope, {}));
    CKFLOW_ASSERT_OK_AND_ASSIGN(path, saver->Save(*session, dir_ + "/model.ckpt"));
    p.Train(5, 5);
    expected = p.Values();
  }
  EagerProgram p;
  auto [x, y] = Batch(0);
  (*p.model)(p.scope, ops::Const(p.scope, x));  // the layers exist; the slots do not
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.checkpoint.Restore(path));
  EXPECT_EQ(status.kind(), LoadStatus::Kind::kNameBasedSaver);
  // The layers were restored by Restore itself; save_counter, which a TF1
  // checkpoint lacks, is optional.
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  p.Train(5, 5);  // slots and beta powers restore as Minimize creates them
  ASSERT_TRUE(p.scope.ok()) << p.scope.status();
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  std::map<std::string, Tensor> values = p.Values();
  values.erase("save_counter");
  ExpectSameValues(values, expected);
}

TEST_F(EagerCheckpointTest, SaveWithoutASessionNeedsAnEagerScope) {
  Scope graph = Scope::NewRootScope();
  Checkpoint checkpoint(graph, {});
  EXPECT_THAT(checkpoint.Save(dir_ + "/x"), StatusIs(StatusCode::kFailedPrecondition, "eager"));
  StatusOr<LoadStatus> status = checkpoint.Restore(std::nullopt);
  ASSERT_TRUE(status.ok());
  EXPECT_THAT(status->InitializeOrRestore(), StatusIs(StatusCode::kFailedPrecondition, "Session"));
}

}  // namespace
}  // namespace ckflow
