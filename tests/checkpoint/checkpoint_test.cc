// Object-based checkpoints: the scenarios of TensorFlow's own checkpoint
// tests (python/checkpoint/checkpoint_test.py and friends), in graph mode.
#include "checkpoint/checkpoint.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "base/logging.h"
#include "bundle/bundle_reader.h"
#include "bundle/checkpoint_state.h"
#include "checkpoint/checkpoint_management.h"
#include "checkpoint/object_graph_internal.h"
#include "checkpoint/weights.h"
#include "ops/array_ops.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

namespace fs = std::filesystem;
using testing::CountingVariable;
using testing::Module;
using testing::NewSession;
using testing::RunOrFail;
using testing::SameTensor;
using testing::ValueOf;

// The program under test: a model (a dense-like module with kernel and bias,
// plus a step counter) trained by Adam with constant gradients. Built the
// same way by the writing and the reading side, in either order of objects.
struct Program {
  Scope scope = Scope::NewRootScope();
  std::shared_ptr<Module> model = std::make_shared<Module>();
  std::shared_ptr<Module> dense = model->Track("dense", std::make_shared<Module>());
  std::shared_ptr<Variable> kernel;
  std::shared_ptr<Variable> bias;
  std::shared_ptr<Variable> step;
  std::shared_ptr<Adam> optimizer = Adam::Make({.learning_rate = 0.1f});
  Output train_op;
  std::unique_ptr<Checkpoint> checkpoint;

  // Variables, offset so two programs start from different values.
  void BuildVariables(float offset) {
    kernel = dense->Track("kernel", CountingVariable(scope, "dense/kernel", {3, 4}, offset));
    bias = dense->Track("bias", CountingVariable(scope, "dense/bias", {4}, offset + 100));
    step = model->Track("step", Variable::Create(scope, "step", ops::Const(scope, int64_t{7}),
                                                 {.trainable = false}));
  }
  void BuildTrainOp() {
    Tensor gk(DT_FLOAT, TensorShape({3, 4}));
    for (auto& x : gk.flat<float>()) x = 0.5f;
    Tensor gb(DT_FLOAT, TensorShape({4}));
    for (auto& x : gb.flat<float>()) x = -0.25f;
    train_op = optimizer->ApplyGradients(
        scope, {{ops::Const(scope, gk), kernel}, {ops::Const(scope, gb), bias}});
    ASSERT_TRUE(scope.ok()) << scope.status();
  }
  void MakeCheckpoint() {
    checkpoint = std::make_unique<Checkpoint>(
        scope, Checkpoint::Dependencies{{"optimizer", optimizer}, {"model", model}});
  }
  // Every value a checkpoint of this program holds, by a readable name.
  std::map<std::string, Tensor> Values(Session& session) const {
    std::map<std::string, Tensor> values = {{"kernel", ValueOf(session, *kernel)},
                                            {"bias", ValueOf(session, *bias)},
                                            {"step", ValueOf(session, *step)}};
    for (const char* slot : {"m", "v"}) {
      for (const auto& [name, var] : {std::pair{"kernel", kernel}, std::pair{"bias", bias}}) {
        auto s = optimizer->GetSlotVariable(*var, slot);
        if (s) values[std::string(name) + "/" + slot] = ValueOf(session, *s);
      }
    }
    for (const char* name : {"beta1_power", "beta2_power"}) {
      if (auto v = optimizer->GetNonSlotVariable(name)) values[name] = ValueOf(session, *v);
    }
    if (checkpoint && checkpoint->save_counter()) {
      values["save_counter"] = ValueOf(session, *checkpoint->save_counter());
    }
    return values;
  }
};

class CheckpointTest : public ::testing::Test {
 protected:
  // Trains a fresh program 3 steps and saves it; returns the path and keeps
  // the values it saved.
  std::string TrainAndSave() {
    Program p;
    p.BuildVariables(1);
    p.BuildTrainOp();
    p.MakeCheckpoint();
    auto session = NewSession(p.scope);
    RunOrFail(*session, {GlobalVariablesInitializer(p.scope)});
    for (int i = 0; i < 3; ++i) RunOrFail(*session, {p.train_op});
    StatusOr<std::string> path = p.checkpoint->Save(dir_ + "/ckpt", *session);
    EXPECT_TRUE(path.ok()) << path.status();
    saved_ = p.Values(*session);
    return path.ok() ? *path : "";
  }

  // Restores `path` into a new program, its objects built before Restore or
  // (`deferred`) after it, and expects every value TrainAndSave saved.
  void ExpectRestoresSaved(const std::string& path, const RestoreOptions& options, bool deferred);

  std::string dir_ = testing::NewTempDir("ckpt");
  std::map<std::string, Tensor> saved_;
};

void ExpectSameValues(const std::map<std::string, Tensor>& a,
                      const std::map<std::string, Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, tensor] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_TRUE(SameTensor(tensor, b.at(name)))
        << name << ": " << tensor.DebugString() << " vs " << b.at(name).DebugString();
  }
}

void CheckpointTest::ExpectRestoresSaved(const std::string& path, const RestoreOptions& options,
                                         bool deferred) {
  Program p;
  if (!deferred) {
    p.BuildVariables(50);
    p.BuildTrainOp();
  }
  p.MakeCheckpoint();
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.checkpoint->Restore(path, options));
  EXPECT_EQ(status.kind_name(), "CheckpointLoadStatus");
  if (deferred) {
    EXPECT_FALSE(status.AssertConsumed().ok());  // nothing built yet
    p.BuildVariables(50);
    p.BuildTrainOp();
  }
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  auto session = NewSession(p.scope);
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
  ExpectSameValues(saved_, p.Values(*session));
}

TEST_F(CheckpointTest, RoundTripRestoresEveryValueBitExact) {
  std::string path = TrainAndSave();
  EXPECT_EQ(path, dir_ + "/ckpt-1");
  EXPECT_EQ(saved_.size(), 10u);  // kernel, bias, step, 4 slots, 2 beta powers, save_counter
  // Objects first, then restore, then the session: nothing deferred.
  ExpectRestoresSaved(path, {}, /*deferred=*/false);
}

TEST_F(CheckpointTest, DeferredRestoreFillsVariablesAndSlotsCreatedAfterRestore) {
  // Restore first; the layer's variables and the optimizer's slots appear
  // later, as when a Keras layer builds on its first call.
  ExpectRestoresSaved(TrainAndSave(), {}, /*deferred=*/true);
}

// One open reader serves restores into two programs, one of them deferred,
// as Restore's own would.
TEST_F(CheckpointTest, AnOpenReaderIsRestoredFromWithoutOpeningItAgain) {
  const std::string path = TrainAndSave();
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::shared_ptr<const BundleReader> reader, BundleReader::Open(path));
  for (const bool deferred : {false, true}) ExpectRestoresSaved(path, {.reader = reader}, deferred);
}

TEST_F(CheckpointTest, AReaderOfAnotherCheckpointIsInvalidArgument) {
  const std::string path = TrainAndSave();
  const std::string other = path.substr(0, path.size() - 1) + "2";
  std::filesystem::copy_file(path + ".index", other + ".index");
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::shared_ptr<const BundleReader> reader,
                              BundleReader::Open(other));
  Program p;
  p.MakeCheckpoint();
  StatusOr<LoadStatus> status = p.checkpoint->Restore(path, {.reader = reader});
  EXPECT_EQ(status.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.status().message()),
              ::testing::AllOf(::testing::HasSubstr(path), ::testing::HasSubstr(other)));
}

// The checkpoint reaches the optimizer only through an edge added after
// Restore: the variables are bound first and their slots wait for the
// optimizer. Slots made before the optimizer is tracked join its walk;
// slots made after wait for their creation too.
void ExpectSlotsRestoreWithTheOptimizerBoundLast(const std::string& path,
                                                 const std::map<std::string, Tensor>& saved,
                                                 bool slots_first) {
  Program p;
  p.BuildVariables(50);
  if (slots_first) p.BuildTrainOp();
  p.checkpoint =
      std::make_unique<Checkpoint>(p.scope, Checkpoint::Dependencies{{"model", p.model}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.checkpoint->Restore(path));
  EXPECT_EQ(status.AssertConsumed().code(), StatusCode::kFailedPrecondition);
  p.checkpoint->root()->Track("optimizer", p.optimizer);
  if (!slots_first) p.BuildTrainOp();
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  auto session = NewSession(p.scope);
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
  ExpectSameValues(saved, p.Values(*session));
}

TEST_F(CheckpointTest, SlotsRestoreWhenTheOptimizerIsBoundAfterItsVariables) {
  ExpectSlotsRestoreWithTheOptimizerBoundLast(TrainAndSave(), saved_, /*slots_first=*/false);
}

TEST_F(CheckpointTest, ExistingSlotsRestoreWhenTheOptimizerIsBoundAfterItsVariables) {
  ExpectSlotsRestoreWithTheOptimizerBoundLast(TrainAndSave(), saved_, /*slots_first=*/true);
}

TEST_F(CheckpointTest, ExistingSlotsShareTheirVariablesRestoreOp) {
  // Every value of the checkpoint, slots included, restores through one
  // op, save_counter (which Restore creates after its walk) through a
  // second: a restore op per slot made a model with Adam restore several
  // times slower per value than one without.
  std::string path = TrainAndSave();
  Program p;
  p.BuildVariables(50);
  p.BuildTrainOp();
  p.MakeCheckpoint();
  const int before = p.scope.graph().num_nodes();
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.checkpoint->Restore(path));
  auto session = NewSession(p.scope);
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  int restore_ops = 0;
  for (int id = before; id < p.scope.graph().num_nodes(); ++id) {
    if (p.scope.graph().node(id)->type() == "RestoreVariables") ++restore_ops;
  }
  EXPECT_EQ(restore_ops, 2);
  ExpectSameValues(saved_, p.Values(*session));
}

TEST_F(CheckpointTest, AssertConsumedNamesAnUnusedCheckpointValue) {
  std::string path = TrainAndSave();
  Program p;
  p.BuildVariables(50);  // no optimizer variables: its values are unused
  p.MakeCheckpoint();
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.checkpoint->Restore(path));
  CKFLOW_EXPECT_OK(status.AssertExistingObjectsMatched());
  Status consumed = status.AssertConsumed();
  EXPECT_THAT(consumed, testing::StatusIs(StatusCode::kFailedPrecondition,
                                          "optimizer/beta1_power/.ATTRIBUTES/VARIABLE_VALUE"));
  status.ExpectPartial();
}

TEST_F(CheckpointTest, AssertConsumedFailsOnAnUnresolvedSlot) {
  std::string path = TrainAndSave();
  // The optimizer is matched but `bias` (which has slots) is not: its slot
  // restorations stay unresolved.
  Program p;
  p.kernel = p.dense->Track("kernel", CountingVariable(p.scope, "dense/kernel", {3, 4}, 0));
  p.step = p.model->Track("step", Variable::Create(p.scope, "step", ops::Const(p.scope, int64_t{0}),
                                                   {.trainable = false}));
  p.MakeCheckpoint();
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.checkpoint->Restore(path));
  Status consumed = status.AssertConsumed();
  EXPECT_THAT(consumed, testing::StatusIs(StatusCode::kFailedPrecondition, "dense.bias"));
  status.ExpectPartial();
}

TEST_F(CheckpointTest, AssertExistingObjectsMatchedNamesANewVariable) {
  std::string path = TrainAndSave();
  Program p;
  p.BuildVariables(50);
  p.dense->Track("extra", CountingVariable(p.scope, "dense/extra", {2}, 0));
  p.BuildTrainOp();
  p.MakeCheckpoint();
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.checkpoint->Restore(path));
  Status matched = status.AssertExistingObjectsMatched();
  EXPECT_THAT(matched, testing::StatusIs(StatusCode::kFailedPrecondition, "model/dense/extra"));
  EXPECT_EQ(status.AssertConsumed().code(), StatusCode::kFailedPrecondition);
}

// A failed assertion counts every unmatched object and names the first ten,
// slots by their full path, as TensorFlow lists them.
TEST_F(CheckpointTest, AssertExistingObjectsMatchedNamesTenAndCountsTheRest) {
  std::string path = TrainAndSave();
  Program p;
  p.BuildVariables(50);
  std::vector<std::shared_ptr<Variable>> extras;
  for (int i = 0; i < 9; ++i) {
    const std::string name = "x0" + std::to_string(i);
    extras.push_back(p.dense->Track(name, CountingVariable(p.scope, "dense/" + name, {2}, 0)));
  }
  p.BuildTrainOp();
  // Adam's m and v of x00 are unmatched too: 9 + 2 objects.
  Tensor g(DT_FLOAT, TensorShape({2}));
  p.optimizer->ApplyGradients(p.scope, {{ops::Const(p.scope, g), extras[0]}});
  p.MakeCheckpoint();
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.checkpoint->Restore(path));
  const int64_t builds = internal::NumFullObjectGraphBuilds();
  const Status matched = status.AssertExistingObjectsMatched();
  EXPECT_EQ(internal::NumFullObjectGraphBuilds(), builds);
  EXPECT_THAT(matched, testing::StatusIs(StatusCode::kFailedPrecondition,
                                         "Found 11 object(s) that were not bound"));
  const std::string message(matched.message());
  for (int i = 0; i < 9; ++i) {
    const std::string object = "model/dense/x0" + std::to_string(i);
    EXPECT_THAT(message, ::testing::HasSubstr("\n  " + object + " (")) << object;
    EXPECT_THAT(message,
                ::testing::HasSubstr("would be key '" + object + "/.ATTRIBUTES/VARIABLE_VALUE'"));
  }
  const std::string slot = "model/dense/x00/.OPTIMIZER_SLOT/optimizer/";
  EXPECT_THAT(message, ::testing::HasSubstr("\n  " + slot + "m ("));
  EXPECT_THAT(message,
              ::testing::HasSubstr("would be key '" + slot + "m/.ATTRIBUTES/VARIABLE_VALUE'"));
  EXPECT_THAT(message, ::testing::Not(::testing::HasSubstr(slot + "v")));
  EXPECT_THAT(message, ::testing::EndsWith("\n  ... and 1 more"));
  status.ExpectPartial();
}

// The assertions of a full match walk the objects alone: the paths and keys
// of a full object graph are built only to name what did not match.
TEST_F(CheckpointTest, AssertionsOfAFullMatchBuildNoFullObjectGraph) {
  std::string path = TrainAndSave();
  Program p;
  p.BuildVariables(50);
  p.BuildTrainOp();
  p.MakeCheckpoint();
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.checkpoint->Restore(path));
  const int64_t builds = internal::NumFullObjectGraphBuilds();
  CKFLOW_EXPECT_OK(status.AssertExistingObjectsMatched());
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  CKFLOW_EXPECT_OK(status.AssertNontrivialMatch());
  EXPECT_EQ(internal::NumFullObjectGraphBuilds(), builds);
  auto session = NewSession(p.scope);
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
  ExpectSameValues(saved_, p.Values(*session));
}

TEST_F(CheckpointTest, InitializationOnlyStatusFailsAssertionsAndInitializes) {
  Program p;
  p.BuildVariables(3);
  p.MakeCheckpoint();
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.checkpoint->Restore(LatestCheckpoint(dir_)));
  EXPECT_EQ(status.kind(), LoadStatus::Kind::kInitializationOnly);
  for (Status s : {status.AssertConsumed(), status.AssertExistingObjectsMatched(),
                   status.AssertNontrivialMatch()}) {
    EXPECT_THAT(s,
                testing::StatusIs(StatusCode::kFailedPrecondition, "no checkpoint was specified"));
  }
  auto session = NewSession(p.scope);
  EXPECT_EQ(status.RunRestoreOps(*session).code(), StatusCode::kFailedPrecondition);
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
  EXPECT_EQ(ValueOf(*session, *p.kernel).flat<float>()[5], 8.0f);
  // save_counter, created by Restore after the status, is initialized too.
  ASSERT_NE(p.checkpoint->save_counter(), nullptr);
  EXPECT_EQ(ValueOf(*session, *p.checkpoint->save_counter()).scalar<int64_t>(), 0);
  StatusOr<std::string> path = p.checkpoint->Save(dir_ + "/ckpt", *session);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir_ + "/ckpt-1");
}

TEST_F(CheckpointTest, DroppedStatusWarnsAboutUnmatchedValuesUnlessExpectPartial) {
  std::string path = TrainAndSave();
  std::vector<std::string> warnings;
  LogSink old = SetLogSink([&](LogSeverity severity, std::string_view message) {
    if (severity == LogSeverity::kWarning) warnings.emplace_back(message);
  });
  {
    Program p;
    p.BuildVariables(0);
    p.MakeCheckpoint();
    ASSERT_TRUE(p.checkpoint->Restore(path).ok());
  }
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("ExpectPartial()"), std::string::npos);
  EXPECT_NE(warnings[0].find("optimizer/beta2_power/.ATTRIBUTES/VARIABLE_VALUE"), std::string::npos)
      << warnings[0];
  warnings.clear();
  {
    Program p;
    p.BuildVariables(0);
    p.MakeCheckpoint();
    CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.checkpoint->Restore(path));
    status.ExpectPartial();
  }
  EXPECT_TRUE(warnings.empty());
  SetLogSink(old);
}

TEST_F(CheckpointTest, HundredSavesAndRestoresAddNoNodes) {
  Program p;
  p.BuildVariables(0);
  p.BuildTrainOp();
  p.MakeCheckpoint();
  auto session = NewSession(p.scope);
  RunOrFail(*session, {GlobalVariablesInitializer(p.scope)});
  ASSERT_TRUE(p.checkpoint->Save(dir_ + "/ckpt", *session).ok());
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus first, p.checkpoint->Restore(dir_ + "/ckpt-1"));
  CKFLOW_ASSERT_OK(first.RunRestoreOps(*session));
  const int nodes = p.scope.graph().num_nodes();
  for (int i = 0; i < 100; ++i) {
    StatusOr<std::string> path = p.checkpoint->Save(dir_ + "/ckpt", *session);
    ASSERT_TRUE(path.ok()) << path.status();
    CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.checkpoint->Restore(*path));
    CKFLOW_ASSERT_OK(status.RunRestoreOps(*session));
  }
  EXPECT_EQ(p.scope.graph().num_nodes(), nodes);
  EXPECT_EQ(LatestCheckpoint(dir_), dir_ + "/ckpt-101");
}

TEST_F(CheckpointTest, StateFileAndLatestCheckpointFollowSaves) {
  Program p;
  p.BuildVariables(0);
  p.MakeCheckpoint();
  auto session = NewSession(p.scope);
  RunOrFail(*session, {GlobalVariablesInitializer(p.scope)});
  EXPECT_EQ(LatestCheckpoint(dir_), std::nullopt);
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(p.checkpoint->Save(dir_ + "/ckpt", *session).ok());
    EXPECT_EQ(LatestCheckpoint(dir_), dir_ + "/ckpt-" + std::to_string(i));
  }
  EXPECT_EQ(testing::ReadFileOrDie(dir_ + "/checkpoint"),
            "model_checkpoint_path: \"ckpt-3\"\nall_model_checkpoint_paths: \"ckpt-3\"\n");
  // Write neither counts nor moves the state file.
  ASSERT_TRUE(p.checkpoint->Write(dir_ + "/other", *session).ok());
  EXPECT_EQ(LatestCheckpoint(dir_), dir_ + "/ckpt-3");
  EXPECT_EQ(ValueOf(*session, *p.checkpoint->save_counter()).scalar<int64_t>(), 3);
  // A state file naming a checkpoint whose index is gone: no checkpoint.
  fs::remove(dir_ + "/ckpt-3.index");
  EXPECT_EQ(LatestCheckpoint(dir_), std::nullopt);
  // A legacy V1 checkpoint is a single file, which TensorFlow accepts too; a
  // directory is never one (found by tests/fuzz: model_checkpoint_path "/").
  std::ofstream(dir_ + "/v1_model") << "V1 data";
  CKFLOW_ASSERT_OK(WriteCheckpointState(dir_, {.model_checkpoint_path = "v1_model"}));
  EXPECT_EQ(LatestCheckpoint(dir_), dir_ + "/v1_model");
  for (const std::string& directory : {std::string("/"), dir_, std::string(".")}) {
    CKFLOW_ASSERT_OK(WriteCheckpointState(dir_, {.model_checkpoint_path = directory}));
    EXPECT_EQ(LatestCheckpoint(dir_), std::nullopt) << directory;
  }
}

TEST_F(CheckpointTest, RestoringAMissingCheckpointIsNotFound) {
  Program p;
  p.MakeCheckpoint();
  StatusOr<LoadStatus> status = p.checkpoint->Restore(dir_ + "/nope-1");
  EXPECT_THAT(status.status(), testing::StatusIs(StatusCode::kNotFound, "nope-1"));
}

TEST_F(CheckpointTest, SaveAfterRestoreBeforeInitializationFailsClearly) {
  std::string path = TrainAndSave();
  Program p;
  p.BuildVariables(0);
  p.MakeCheckpoint();
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.checkpoint->Restore(path));
  auto session = NewSession(p.scope);
  StatusOr<std::string> saved = p.checkpoint->Save(dir_ + "/again", *session);
  EXPECT_THAT(saved.status(),
              testing::StatusIs(StatusCode::kFailedPrecondition, "InitializeOrRestore"));
  status.ExpectPartial();
}

TEST_F(CheckpointTest, NewerRestoreWinsWhateverTheOrderObjectsAppear) {
  // Two checkpoints with different kernels.
  std::string first = TrainAndSave();
  auto first_values = saved_;
  std::string dir2 = testing::NewTempDir("ckpt2");
  std::string second;
  {
    Program p;
    p.BuildVariables(1000);
    p.MakeCheckpoint();
    auto session = NewSession(p.scope);
    RunOrFail(*session, {GlobalVariablesInitializer(p.scope)});
    second = p.checkpoint->Save(dir2 + "/ckpt", *session).value();
  }
  Program p;
  p.MakeCheckpoint();
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus older, p.checkpoint->Restore(first));
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus newer, p.checkpoint->Restore(second));
  p.BuildVariables(0);  // both restores are deferred; the newer must win
  auto session = NewSession(p.scope);
  CKFLOW_ASSERT_OK(older.InitializeOrRestore(*session));
  CKFLOW_ASSERT_OK(newer.InitializeOrRestore(*session));
  EXPECT_EQ(ValueOf(*session, *p.kernel).flat<float>()[0], 1000.0f);
  // Initialization by the older status never overwrote the newer value.
  CKFLOW_ASSERT_OK(older.InitializeOrRestore(*session));
  EXPECT_EQ(ValueOf(*session, *p.kernel).flat<float>()[0], 1000.0f);
  older.ExpectPartial();
  newer.ExpectPartial();
}

TEST_F(CheckpointTest, StatusKeepsWorkingAfterItsCheckpointIsDropped) {
  std::string path = TrainAndSave();
  Program p;
  p.MakeCheckpoint();
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.checkpoint->Restore(path));
  p.checkpoint.reset();
  p.BuildVariables(0);
  auto session = NewSession(p.scope);
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
  EXPECT_TRUE(SameTensor(ValueOf(*session, *p.kernel), saved_["kernel"]));
  status.ExpectPartial();
}

// A restore waiting on an object the graph owns (here a variable that the
// checkpoint says has children) holds the restore, which builds its ops in
// that graph: a strong reference back would keep the graph alive forever.
// Found by tests/fuzz.
TEST_F(CheckpointTest, ARestoreWaitingOnAVariableDoesNotKeepTheGraphAlive) {
  std::string path = TrainAndSave();
  std::weak_ptr<Graph> graph;
  std::weak_ptr<Variable> variable;
  {
    Scope scope = Scope::NewRootScope();
    graph = scope.shared_graph();
    auto model = std::make_shared<Module>();
    // "dense" was a module with a kernel and a bias; here it is a variable.
    variable = model->Track("dense", CountingVariable(scope, "dense", {2}, 0));
    Checkpoint checkpoint(scope, {{"model", model}});
    CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, checkpoint.Restore(path));
    EXPECT_TRUE(variable.lock()->HasDeferredRestores());
    status.ExpectPartial();
  }
  EXPECT_TRUE(graph.expired());
  EXPECT_TRUE(variable.expired());
}

// Nothing a restore leaves behind touches its graph once the graph is gone:
// a status kept past it (LoadWeights' does not hold the graph) fails, and a
// deferred restore that fires for an object moved to a new graph builds
// nothing (under ASan, either would otherwise read freed memory).
TEST_F(CheckpointTest, RestoresOutlivingTheirGraphTouchNothing) {
  std::string path = TrainAndSave();
  auto model = std::make_shared<Module>();
  auto dense = model->Track("dense", std::make_shared<Module>());
  std::weak_ptr<Graph> old_graph;
  std::optional<LoadStatus> weights_status;
  {
    Scope old_scope = Scope::NewRootScope();
    old_graph = old_scope.shared_graph();
    // The restore waits for "kernel"; its status and checkpoint are dropped.
    StatusOr<LoadStatus> restored = Checkpoint(old_scope, {{"model", model}}).Restore(path);
    ASSERT_TRUE(restored.ok()) << restored.status();
    restored->ExpectPartial();
    // LoadWeights restores straight away, into a model of its own.
    auto other = std::make_shared<Module>();
    other->Track("step", Variable::Create(old_scope, "step", ops::Const(old_scope, int64_t{3}),
                                          {.trainable = false}));
    auto session = NewSession(old_scope);
    RunOrFail(*session, {GlobalVariablesInitializer(old_scope)});
    CKFLOW_ASSERT_OK(SaveWeights(other, dir_ + "/weights", *session));
    CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus loaded, LoadWeights(other, dir_ + "/weights", *session));
    weights_status = loaded;
  }
  ASSERT_TRUE(old_graph.expired());

  Scope scope = Scope::NewRootScope();
  auto kernel = dense->Track("kernel", CountingVariable(scope, "dense/kernel", {3, 4}, 5));
  auto session = NewSession(scope);
  Status run = weights_status->RunRestoreOps(*session);
  EXPECT_THAT(run, testing::StatusIs(StatusCode::kFailedPrecondition, "destroyed"));
  // The kernel was not restored: it starts from its own initial values.
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  Tensor value = ValueOf(*session, *kernel);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(value.flat<float>()[i], 5.0f + i);
}

TEST_F(CheckpointTest, AnObjectReachableByTwoPathsIsOneObject) {
  std::string path;
  std::shared_ptr<Variable> shared;
  {
    Scope scope = Scope::NewRootScope();
    auto a = std::make_shared<Module>();
    auto b = std::make_shared<Module>();
    shared = a->Track("v", CountingVariable(scope, "v", {2}, 5));
    b->Track("same_v", shared);
    Checkpoint checkpoint(scope, {{"a", a}, {"b", b}});
    auto session = NewSession(scope);
    RunOrFail(*session, {GlobalVariablesInitializer(scope)});
    path = checkpoint.Save(dir_ + "/ckpt", *session).value();
  }
  auto reader = BundleReader::Open(path).value();
  EXPECT_TRUE(reader->Contains("a/v/.ATTRIBUTES/VARIABLE_VALUE"));
  EXPECT_FALSE(reader->Contains("b/same_v/.ATTRIBUTES/VARIABLE_VALUE"));
  // Restoring through either path fills the one variable.
  Scope scope = Scope::NewRootScope();
  auto b = std::make_shared<Module>();
  auto v = b->Track("same_v", CountingVariable(scope, "v", {2}, 0));
  Checkpoint checkpoint(scope, {{"b", b}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, checkpoint.Restore(path));
  auto session = NewSession(scope);
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
  EXPECT_EQ(ValueOf(*session, *v).flat<float>()[1], 6.0f);
  status.ExpectPartial();
}

TEST_F(CheckpointTest, FailedSaveLeavesThePreviousCheckpointIntact) {
  std::string path = TrainAndSave();
  std::string index_before = testing::ReadFileOrDie(path + ".index");
  Program p;
  p.BuildVariables(0);
  p.MakeCheckpoint();
  auto session = NewSession(p.scope);
  RunOrFail(*session, {GlobalVariablesInitializer(p.scope)});
  // A file where the save's temp directory must go makes the write fail.
  std::ofstream(dir_ + "/ckpt-1_temp") << "in the way";
  StatusOr<std::string> failed = p.checkpoint->Save(dir_ + "/ckpt", *session);
  EXPECT_THAT(failed, testing::StatusIs(StatusCode::kNotFound, "ckpt-1"));
  EXPECT_EQ(testing::ReadFileOrDie(path + ".index"), index_before);
  EXPECT_EQ(LatestCheckpoint(dir_), path);
  EXPECT_TRUE(BundleReader::Open(path).ok());
}

// TensorFlow writes one data file per task (its host CPU); these variables
// are on three tasks.
TEST_F(CheckpointTest, ShardedSaveWritesOneShardPerTaskAndRestores) {
  std::string path;
  std::vector<Tensor> saved;
  {
    Scope scope = Scope::NewRootScope();
    auto model = std::make_shared<Module>();
    std::vector<std::shared_ptr<Variable>> vars;
    for (int d = 0; d < 3; ++d) {
      std::string name = "w" + std::to_string(d);
      vars.push_back(model->Track(
          name, CountingVariable(scope, name, {4, 5}, 10.0f * d,
                                 {.device = "/job:worker/replica:0/task:" + std::to_string(d) +
                                            "/device:CPU:0"})));
    }
    Checkpoint checkpoint(scope, {{"model", model}});
    auto session = NewSession(scope);
    RunOrFail(*session, {GlobalVariablesInitializer(scope)});
    path = checkpoint.Save(dir_ + "/ckpt", *session).value();
    for (auto& v : vars) saved.push_back(ValueOf(*session, *v));
  }
  for (int s = 0; s < 3; ++s) {
    EXPECT_TRUE(fs::exists(path + ".data-0000" + std::to_string(s) + "-of-00003"));
  }
  EXPECT_FALSE(fs::exists(path + "_temp"));
  auto reader = BundleReader::Open(path).value();
  EXPECT_EQ(reader->num_shards(), 3);
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<Module>();
  Checkpoint checkpoint(scope, {{"model", model}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, checkpoint.Restore(path));
  std::vector<std::shared_ptr<Variable>> vars;
  for (int d = 0; d < 3; ++d) {
    std::string name = "w" + std::to_string(d);
    vars.push_back(model->Track(name, CountingVariable(scope, name, {4, 5}, -1)));
  }
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  auto session = NewSession(scope);
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
  for (int d = 0; d < 3; ++d) EXPECT_TRUE(SameTensor(ValueOf(*session, *vars[d]), saved[d]));
}

// A program of float32 vectors v0, v1, ... of the given lengths, dealt
// round-robin over `devices` (if any), initialized in its session.
struct VectorsModel : testing::ModelProgram {
  VectorsModel(const std::vector<int64_t>& lengths, float start,
               const std::vector<std::string>& devices = {}) {
    for (size_t i = 0; i < lengths.size(); ++i) {
      const std::string name = "v" + std::to_string(i);
      VariableOptions options;
      if (!devices.empty()) options.device = devices[i % devices.size()];
      Add(name, CountingVariable(scope, name, {lengths[i]}, start + 1000.0f * i, options));
    }
    CKFLOW_EXPECT_OK(Finish());
  }
};

// Bytes of variable values in each data file of the checkpoint at `path`.
std::vector<int64_t> BytesPerDataFile(const std::string& path) {
  auto reader = BundleReader::Open(path).value();
  std::vector<int64_t> bytes(reader->num_shards(), 0);
  for (const BundleEntry& e : reader->entries()) {
    if (e.key.find("VARIABLE_VALUE") != std::string::npos) bytes.at(e.shard_id) += e.size;
  }
  return bytes;
}

TEST_F(CheckpointTest, SaveSpreadsValuesOverDataFilesBySizeAndRestoresThem) {
  const std::vector<int64_t> lengths = {1000, 600, 500, 300, 100, 40};
  VectorsModel saved(lengths, 1);
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      std::string path,
      saved.checkpoint->Save(dir_ + "/ckpt", *saved.session, {.files_per_device = 2}));
  EXPECT_TRUE(fs::exists(path + ".data-00000-of-00002"));
  EXPECT_TRUE(fs::exists(path + ".data-00001-of-00002"));
  EXPECT_FALSE(fs::exists(path + "_temp"));
  // Dealt largest first, each to the lighter file: 1000 and 300 floats in
  // one, 600, 500, 100, 40 and save_counter's 8 bytes in the other.
  std::vector<int64_t> bytes = BytesPerDataFile(path);
  ASSERT_EQ(bytes.size(), 2u);
  EXPECT_EQ(bytes[0], (1000 + 300) * 4);
  EXPECT_EQ(bytes[1], (600 + 500 + 100 + 40) * 4 + 8);

  VectorsModel restored(lengths, -5);
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, restored.checkpoint->Restore(path));
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*restored.session));
  for (size_t i = 0; i < lengths.size(); ++i) {
    EXPECT_TRUE(SameTensor(ValueOf(*restored.session, *restored.vars[i]),
                           ValueOf(*saved.session, *saved.vars[i])))
        << saved.vars[i]->name();
  }

  // More files than values: one value each, no empty file.
  path = saved.checkpoint->Write(dir_ + "/many", *saved.session, {.files_per_device = 64}).value();
  bytes = BytesPerDataFile(path);
  EXPECT_EQ(bytes.size(), lengths.size() + 1);  // and save_counter
  for (int64_t b : bytes) EXPECT_GT(b, 0);
  // Values of no size still fill every file.
  VectorsModel empty({0, 0, 0, 0, 0}, 0);
  path = empty.checkpoint->Write(dir_ + "/empty", *empty.session, {.files_per_device = 3}).value();
  auto reader = BundleReader::Open(path).value();
  ASSERT_EQ(reader->num_shards(), 3);
  std::vector<int> values_per_file(3, 0);
  for (const BundleEntry& e : reader->entries()) {
    if (e.key.find("VARIABLE_VALUE") != std::string::npos) ++values_per_file.at(e.shard_id);
  }
  EXPECT_EQ(values_per_file, (std::vector<int>{2, 2, 1}));
  // One file, as TensorFlow writes.
  path = saved.checkpoint->Write(dir_ + "/one", *saved.session, {.files_per_device = 1}).value();
  EXPECT_TRUE(fs::exists(path + ".data-00000-of-00001"));
  EXPECT_EQ(BundleReader::Open(path).value()->num_shards(), 1);
}

TEST_F(CheckpointTest, ASaveFailingInOneOfItsFilesLeavesNoneBehind) {
  VectorsModel saved({64, 32, 16, 8}, 0);
  const std::string first =
      saved.checkpoint->Save(dir_ + "/ckpt", *saved.session, {.files_per_device = 2}).value();
  const std::string index_before = testing::ReadFileOrDie(first + ".index");
  // A variable never initialized, large enough to get a file of its own:
  // that file's SaveV2 fails, the other's may be written by then.
  saved.Add("late", CountingVariable(saved.scope, "late", {1000}, 0));
  StatusOr<std::string> failed =
      saved.checkpoint->Save(dir_ + "/ckpt", *saved.session, {.files_per_device = 2});
  EXPECT_THAT(failed, testing::StatusIs(StatusCode::kFailedPrecondition, "ckpt-2"));
  EXPECT_THAT(failed, testing::StatusIs(StatusCode::kFailedPrecondition,
                                        "variable 'late' is not initialized"));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir_)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"checkpoint", "ckpt-1.data-00000-of-00002",
                                            "ckpt-1.data-00001-of-00002", "ckpt-1.index"}));
  EXPECT_EQ(testing::ReadFileOrDie(first + ".index"), index_before);
  EXPECT_EQ(LatestCheckpoint(dir_), first);
  VectorsModel restored({64, 32, 16, 8}, -7);
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, restored.checkpoint->Restore(first));
  CKFLOW_EXPECT_OK(status.AssertConsumed());
}

TEST_F(CheckpointTest, EachTaskGetsItsOwnDataFiles) {
  const std::string task0 = "/job:worker/replica:0/task:0/device:CPU:0";
  const std::string task1 = "/job:worker/replica:0/task:1/device:CPU:0";
  VectorsModel saved({64, 32, 16, 8}, 0, {task0, task1});
  const std::string path =
      saved.checkpoint->Write(dir_ + "/ckpt", *saved.session, {.files_per_device = 2}).value();
  auto reader = BundleReader::Open(path).value();
  ASSERT_EQ(reader->num_shards(), 4);
  // Values of one device never share a file with the other's.
  std::map<int, std::set<std::string>> devices_of_file;
  for (const BundleEntry& e : reader->entries()) {
    for (size_t i = 0; i < saved.vars.size(); ++i) {
      if (e.key.rfind("model/v" + std::to_string(i) + "/", 0) == 0) {
        devices_of_file[e.shard_id].insert(i % 2 == 0 ? task0 : task1);
      }
    }
  }
  EXPECT_EQ(devices_of_file.size(), 4u);
  for (const auto& [file, devices] : devices_of_file) EXPECT_EQ(devices.size(), 1u) << file;
}

TEST_F(CheckpointTest, LargeSavesGetADataFilePerThread) {
  // 2 x 32 MiB: enough for two files of at least 32 MiB each.
  VectorsModel large({int64_t{8} << 20, int64_t{8} << 20}, 0);
  VectorsModel small({int64_t{4} << 20, int64_t{4} << 20}, 0);
  {
    tbb::global_control two(tbb::global_control::max_allowed_parallelism, 2);
    const std::string path = large.checkpoint->Write(dir_ + "/large2", *large.session).value();
    EXPECT_EQ(BytesPerDataFile(path), (std::vector<int64_t>{32 << 20, 32 << 20}));
    const std::string small_path = small.checkpoint->Write(dir_ + "/small", *small.session).value();
    EXPECT_EQ(BundleReader::Open(small_path).value()->num_shards(), 1);
  }
  tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
  const std::string path = large.checkpoint->Write(dir_ + "/large1", *large.session).value();
  EXPECT_EQ(BundleReader::Open(path).value()->num_shards(), 1);
}

TEST_F(CheckpointTest, ANegativeFileCountIsRejectedBeforeAnythingIsWritten) {
  VectorsModel saved({4}, 0);
  StatusOr<std::string> written =
      saved.checkpoint->Save(dir_ + "/ckpt", *saved.session, {.files_per_device = -1});
  ASSERT_FALSE(written.ok());
  EXPECT_THAT(written.status(),
              testing::StatusIs(StatusCode::kInvalidArgument, "files_per_device"));
  EXPECT_THAT(written.status(), testing::StatusIs(StatusCode::kInvalidArgument, dir_ + "/ckpt"));
  EXPECT_THAT(saved.checkpoint->Write(dir_ + "/w", *saved.session, {.files_per_device = -3}),
              testing::StatusIs(StatusCode::kInvalidArgument, "files_per_device is -3"));
  EXPECT_THAT(SaveWeights(saved.model, dir_ + "/weights", *saved.session, {.files_per_device = -2}),
              testing::StatusIs(StatusCode::kInvalidArgument, "SaveWeights('" + dir_ + "/weights"));
  EXPECT_TRUE(fs::is_empty(dir_));
  StatusOr<std::unique_ptr<CheckpointManager>> manager = CheckpointManager::Create(
      *saved.checkpoint, dir_, {.save_options = {.files_per_device = -1}});
  ASSERT_FALSE(manager.ok());
  EXPECT_EQ(manager.status().code(), StatusCode::kInvalidArgument);
  // The counter did not move for the save that never started.
  EXPECT_EQ(saved.checkpoint->Save(dir_ + "/ckpt", *saved.session).value(), dir_ + "/ckpt-1");
}

TEST_F(CheckpointTest, RestoreReportsADtypeOrShapeMismatchByKey) {
  std::string path = TrainAndSave();
  Program p;
  p.kernel = p.dense->Track("kernel", CountingVariable(p.scope, "dense/kernel", {4, 3}, 0));
  p.MakeCheckpoint();
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.checkpoint->Restore(path));
  auto session = NewSession(p.scope);
  Status run = status.RunRestoreOps(*session);
  EXPECT_THAT(run, testing::StatusIs(StatusCode::kInvalidArgument,
                                     "model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE"));
  EXPECT_THAT(run, testing::StatusIs(StatusCode::kInvalidArgument, "[3,4]"));
  status.ExpectPartial();
}

// ------------------------------------------------------------ manager

class CheckpointManagerTest : public CheckpointTest {
 protected:
  void SetUp() override {
    p_.BuildVariables(0);
    p_.MakeCheckpoint();
    session_ = NewSession(p_.scope);
    RunOrFail(*session_, {GlobalVariablesInitializer(p_.scope)});
  }
  std::unique_ptr<CheckpointManager> NewManager(CheckpointManager::Options options) {
    options.clock = [this] { return now_; };
    auto m = CheckpointManager::Create(*p_.checkpoint, dir_, std::move(options));
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? std::move(m).value() : nullptr;
  }
  std::vector<std::string> Files() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  Program p_;
  std::unique_ptr<Session> session_;
  double now_ = 1.7e9;
};

TEST_F(CheckpointManagerTest, KeepsTheNewestAndDeletesOnlyWhatItManages) {
  std::ofstream(dir_ + "/notes.txt") << "mine";
  std::ofstream(dir_ + "/ckpt-1.data-00000-of-00001.bak") << "not a checkpoint file";
  auto manager = NewManager({.max_to_keep = 2});
  for (int i = 1; i <= 4; ++i) {
    now_ += 10;
    StatusOr<std::string> path = manager->Save(*session_);
    ASSERT_TRUE(path.ok()) << path.status();
    EXPECT_EQ(*path, dir_ + "/ckpt-" + std::to_string(i));
  }
  EXPECT_EQ(manager->checkpoints(), (std::vector<std::string>{dir_ + "/ckpt-3", dir_ + "/ckpt-4"}));
  EXPECT_EQ(Files(),
            (std::vector<std::string>{"checkpoint", "ckpt-1.data-00000-of-00001.bak",
                                      "ckpt-3.data-00000-of-00001", "ckpt-3.index",
                                      "ckpt-4.data-00000-of-00001", "ckpt-4.index", "notes.txt"}));
  EXPECT_EQ(LatestCheckpoint(dir_), dir_ + "/ckpt-4");
  // A new manager picks the directory's state up.
  auto again = NewManager({.max_to_keep = 2});
  EXPECT_EQ(again->checkpoints(), manager->checkpoints());
  EXPECT_EQ(again->latest_checkpoint(), dir_ + "/ckpt-4");
}

TEST_F(CheckpointManagerTest, DeletesEveryDataFileOfACheckpointItDrops) {
  auto manager = NewManager({.max_to_keep = 1, .save_options = {.files_per_device = 3}});
  for (int i = 1; i <= 2; ++i) ASSERT_TRUE(manager->Save(*session_).ok());
  EXPECT_EQ(Files(), (std::vector<std::string>{"checkpoint", "ckpt-2.data-00000-of-00003",
                                               "ckpt-2.data-00001-of-00003",
                                               "ckpt-2.data-00002-of-00003", "ckpt-2.index"}));
}

TEST_F(CheckpointManagerTest, KeepsOneCheckpointEveryNHours) {
  auto manager = NewManager({.max_to_keep = 1, .keep_checkpoint_every_n_hours = 1.0});
  // Saves every 20 minutes for 2 hours: one kept per hour besides the newest.
  for (int i = 1; i <= 7; ++i) {
    now_ += 1200;
    ASSERT_TRUE(manager->Save(*session_).ok());
  }
  std::vector<std::string> files = Files();
  auto has = [&](int n) {
    return std::count(files.begin(), files.end(), "ckpt-" + std::to_string(n) + ".index") == 1;
  };
  EXPECT_TRUE(has(7));  // the newest
  EXPECT_TRUE(has(3));  // 1 hour after the manager started
  EXPECT_TRUE(has(6));  // 1 hour after that
  EXPECT_FALSE(has(1) || has(2) || has(4) || has(5));
  EXPECT_EQ(manager->checkpoints(), (std::vector<std::string>{dir_ + "/ckpt-7"}));
}

TEST_F(CheckpointManagerTest, RejectsANonPositiveMaxToKeep) {
  auto m = CheckpointManager::Create(*p_.checkpoint, dir_, {.max_to_keep = 0});
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
}

// ------------------------------------------------------------ weights

TEST_F(CheckpointTest, SaveWeightsUsesTheModelAsRootAndDoesNotMatchACheckpoint) {
  Program p;
  p.BuildVariables(2);
  auto session = NewSession(p.scope);
  RunOrFail(*session, {GlobalVariablesInitializer(p.scope)});
  const std::string weights = dir_ + "/weights";
  CKFLOW_ASSERT_OK(SaveWeights(p.model, weights, *session));
  auto reader = BundleReader::Open(weights).value();
  EXPECT_TRUE(reader->Contains("dense/kernel/.ATTRIBUTES/VARIABLE_VALUE"));
  EXPECT_FALSE(reader->Contains("save_counter/.ATTRIBUTES/VARIABLE_VALUE"));
  EXPECT_EQ(LatestCheckpoint(dir_), weights);

  // LoadWeights into the same structure works...
  Program q;
  q.BuildVariables(50);
  auto session2 = NewSession(q.scope);
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus loaded, LoadWeights(q.model, weights, *session2));
  EXPECT_TRUE(SameTensor(ValueOf(*session2, *q.kernel), ValueOf(*session, *p.kernel)));
  // ...but a Checkpoint{model} has another root: only the root matches.
  q.MakeCheckpoint();
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, q.checkpoint->Restore(weights));
  Status nontrivial = status.AssertNontrivialMatch();
  EXPECT_THAT(nontrivial,
              testing::StatusIs(StatusCode::kFailedPrecondition,
                                "Nothing except the root object matched a checkpointed value"));
  status.ExpectPartial();
}

}  // namespace
}  // namespace ckflow
