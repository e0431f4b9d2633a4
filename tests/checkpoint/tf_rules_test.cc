// TensorFlow's rules where ckflow used to be silent or differ (issue 22):
// load_weights deferred until the layers build, the state file's validity,
// CheckpointManager's clock bookkeeping, duplicate dependencies at save
// time, and the words of TensorFlow's assertion messages. Each test states
// the TensorFlow behaviour it mirrors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/logging.h"
#include "bundle/bundle_reader.h"
#include "bundle/checkpoint_state.h"
#include "bundle/object_tree.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "checkpoint/weights.h"
#include "ops/array_ops.h"
#include "ops/layers.h"
#include "ops/losses.h"
#include "ops/nn_ops.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/bundle/testdata_util.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

namespace fs = std::filesystem;
using testing::CountingVariable;
using ::testing::HasSubstr;
using testing::Module;
using testing::NewSession;
using testing::RunOrFail;
using testing::SameTensor;
using ::testing::StartsWith;
using testing::ValueOf;

// A subclassed Keras model that also tracks its optimizer (as a compiled
// Keras model does), so its weights file holds the optimizer's slots.
class TwoLayers : public Model {
 public:
  TwoLayers() : Model("two_layers") {
    // Tanh: every unit gets a gradient, so every slot moves.
    hidden_ = Track("hidden", Dense::Make(4, {.activation = ops::Tanh}));
    output_ = Track("output", Dense::Make(1));
    optimizer_ = Track("optimizer", Adam::Make({.learning_rate = 0.05f}));
  }
  const std::shared_ptr<Dense>& hidden() const { return hidden_; }
  const std::shared_ptr<Dense>& output() const { return output_; }
  const std::shared_ptr<Adam>& optimizer() const { return optimizer_; }

 protected:
  Output Call(const Scope& scope, Output x) override {
    return (*output_)(scope, (*hidden_)(scope, x));
  }

 private:
  std::shared_ptr<Dense> hidden_, output_;
  std::shared_ptr<Adam> optimizer_;
};

Tensor Filled(const TensorShape& shape, float start, float step) {
  Tensor t(DT_FLOAT, shape);
  float v = start;
  for (float& x : t.flat<float>()) {
    x = v;
    v += step;
  }
  return t;
}

// Builds the model's forward pass and an Adam step on it in `scope`.
struct Training {
  Output x, y, train_op;
  void Build(const Scope& scope, Layer& model, Optimizer& optimizer) {
    scope.graph().set_seed(7);  // the same initial weights in every run
    x = ops::Placeholder(scope, DT_FLOAT, {.shape = {-1, 3}});
    y = ops::Placeholder(scope, DT_FLOAT, {.shape = {-1, 1}});
    Output loss = losses::MeanSquaredError(scope, y, model(scope, x));
    train_op = optimizer.Minimize(scope, loss);
  }
  void Step(Session& session) {
    CKFLOW_ASSERT_OK(session
                         .Run({{x, Filled(TensorShape({2, 3}), 0.5f, 0.25f)},
                               {y, Filled(TensorShape({2, 1}), 1.0f, -2.0f)}},
                              {}, {train_op})
                         .status());
  }
};

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

class TfRulesTest : public ::testing::Test {
 protected:
  std::string dir_ = testing::NewTempDir("tf_rules");
};

// Every value of `model` (its layers' variables and Adam's slots), by name.
std::vector<std::pair<std::string, Tensor>> ModelValues(Session& session, const TwoLayers& model) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& v : model.variables()) {
    out.emplace_back(v->name(), ValueOf(session, *v));
    for (const char* slot : {"m", "v"}) {
      if (auto s = model.optimizer()->GetSlotVariable(*v, slot)) {
        out.emplace_back(v->name() + "/" + slot, ValueOf(session, *s));
      }
    }
  }
  return out;
}

// Trains a TwoLayers three steps and saves its weights (Adam's slots
// included) to `path`; returns its values as ModelValues lists them.
std::vector<std::pair<std::string, Tensor>> SaveTrainedWeights(const std::string& path) {
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<TwoLayers>();
  Training t;
  t.Build(scope, *model, *model->optimizer());
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  for (int i = 0; i < 3; ++i) t.Step(*session);
  Status saved = SaveWeights(model, path, *session);
  EXPECT_TRUE(saved.ok()) << saved;
  return ModelValues(*session, *model);
}

// Keras' load_weights on a subclassed model that has not been called: the
// values are restored as the layers build on the first call, the slots as
// the optimizer creates them (checkpoint_test.py's deferred restoration,
// through load_weights).
TEST_F(TfRulesTest, LoadWeightsDefersUntilTheLayersBuildAndTheSlotsAppear) {
  const std::string path = dir_ + "/weights";
  const std::vector<std::pair<std::string, Tensor>> saved = SaveTrainedWeights(path);
  ASSERT_EQ(saved.size(), 14u);  // 4 variables, each with m and v; beta1/2_power

  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<TwoLayers>();
  auto session = NewSession(scope);  // before anything is built
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, LoadWeights(model, path, *session));
  EXPECT_FALSE(model->built());
  CKFLOW_EXPECT_OK(status.AssertExistingObjectsMatched());
  EXPECT_EQ(status.AssertConsumed().code(), StatusCode::kFailedPrecondition);  // not built yet

  Training t;
  t.Build(scope, *model, *model->optimizer());  // layers build, slots appear
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  std::vector<std::pair<std::string, Tensor>> restored = ModelValues(*session, *model);
  ASSERT_EQ(restored.size(), saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    EXPECT_EQ(restored[i].first, saved[i].first);
    EXPECT_TRUE(SameTensor(restored[i].second, saved[i].second)) << saved[i].first;
  }
}

// Keras's graph-mode load_weights restores each variable, then each slot,
// as it is created: predict and train_on_batch work right after, with no
// restore run by the caller. LoadWeights holds the session for that.
TEST_F(TfRulesTest, LoadWeightsRestoresEachVariableAsItIsCreated) {
  const std::string path = dir_ + "/weights";
  const std::vector<std::pair<std::string, Tensor>> saved = SaveTrainedWeights(path);

  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<TwoLayers>();
  auto session = NewSession(scope);
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, LoadWeights(model, path, *session));
  Training t;
  t.Build(scope, *model, *model->optimizer());
  // No RunRestoreOps, no InitializeOrRestore: every value is already there.
  std::vector<std::pair<std::string, Tensor>> restored = ModelValues(*session, *model);
  ASSERT_EQ(restored.size(), saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    EXPECT_TRUE(SameTensor(restored[i].second, saved[i].second)) << saved[i].first;
  }
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  t.Step(*session);  // train_on_batch: the slots and beta powers were restored too
  EXPECT_FALSE(SameTensor(ValueOf(*session, *model->variables()[0]), saved[0].second));
}

// A read that fails on creation (the data file cut short after
// LoadWeights opened the index) is kept and reported by the status, not
// lost: RunRestoreOps names the file.
TEST_F(TfRulesTest, LoadWeightsReportsAReadThatFailsOnCreation) {
  const std::string path = dir_ + "/weights";
  SaveTrainedWeights(path);
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<TwoLayers>();
  auto session = NewSession(scope);
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, LoadWeights(model, path, *session));
  fs::resize_file(path + ".data-00000-of-00001", 0);
  Training t;
  t.Build(scope, *model, *model->optimizer());
  EXPECT_THAT(status.RunRestoreOps(*session),
              testing::StatusIs(StatusCode::kDataLoss, "weights.data-00000-of-00001"));
}

// The same for Sequential: its weighted layers are checkpointed as
// "layer_with_weights-K", which only exist once the layers have variables.
TEST_F(TfRulesTest, LoadWeightsDefersForAnUnbuiltSequential) {
  const std::string path = dir_ + "/seq";
  auto make = [] {
    return Sequential::Make(
        {Dense::Make(4), Dense::Make(2, {.activation = ops::Tanh}), Dense::Make(1)});
  };
  std::vector<Tensor> saved;
  {
    Scope scope = Scope::NewRootScope();
    auto seq = make();
    (*seq)(scope, ops::Placeholder(scope, DT_FLOAT, {.shape = {-1, 3}}));
    auto session = NewSession(scope);
    RunOrFail(*session, {GlobalVariablesInitializer(scope)});
    CKFLOW_ASSERT_OK(SaveWeights(seq, path, *session));
    for (const auto& v : seq->variables()) saved.push_back(ValueOf(*session, *v));
  }
  Scope scope = Scope::NewRootScope();
  auto seq = make();
  auto session = NewSession(scope);
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, LoadWeights(seq, path, *session));
  (*seq)(scope, ops::Placeholder(scope, DT_FLOAT, {.shape = {-1, 3}}));
  ASSERT_TRUE(scope.ok()) << scope.status();
  CKFLOW_ASSERT_OK(status.RunRestoreOps(*session));
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  std::vector<std::shared_ptr<Variable>> vars = seq->variables();
  ASSERT_EQ(vars.size(), saved.size());
  for (size_t i = 0; i < vars.size(); ++i) {
    EXPECT_TRUE(SameTensor(ValueOf(*session, *vars[i]), saved[i])) << vars[i]->name();
  }
}

// load_weights' assert_nontrivial_match: "Nothing to load. No dependencies
// have been added to <root> yet." for a root without children, "Nothing
// except the root object matched a checkpointed value. ..." when the
// checkpoint is another program's.
TEST_F(TfRulesTest, LoadWeightsNontrivialMatchLeadsWithTensorFlowsWords) {
  const std::string path = dir_ + "/weights";
  {
    Scope scope = Scope::NewRootScope();
    auto model = std::make_shared<Module>();
    model->Track("v", CountingVariable(scope, "v", {2}, 1));
    auto session = NewSession(scope);
    RunOrFail(*session, {GlobalVariablesInitializer(scope)});
    CKFLOW_ASSERT_OK(SaveWeights(model, path, *session));
  }
  Scope scope = Scope::NewRootScope();
  auto session = NewSession(scope);
  StatusOr<LoadStatus> empty = LoadWeights(std::make_shared<Module>(), path, *session);
  EXPECT_EQ(empty.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(empty.status().message()),
              StartsWith("Nothing to load. No dependencies have been added to the root object "
                         "yet (checkpoint '" +
                         path + "')"));

  auto other = std::make_shared<Module>();
  auto w = other->Track("w", CountingVariable(scope, "w", {2}, 1));
  StatusOr<LoadStatus> mismatch = LoadWeights(other, path, *session);
  EXPECT_EQ(mismatch.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(mismatch.status().message()),
              StartsWith("Nothing except the root object matched a checkpointed value "
                         "(checkpoint '" +
                         path + "')"));
  // TensorFlow lists the objects without a value.
  EXPECT_THAT(std::string(mismatch.status().message()),
              HasSubstr("The following objects have no matching checkpointed value:\n  "
                        "w (Variable float32[2])"));
}

// assert_consumed: "Unused attributes in these objects (the attributes exist
// in the checkpoint but were not restored)" when a matched object lacks an
// attribute the checkpoint has for it.
TEST_F(TfRulesTest, UnusedAttributesLeadWithTensorFlowsWords) {
  std::string path;
  {
    Scope scope = Scope::NewRootScope();
    auto model = std::make_shared<Module>();
    model->Track("v", CountingVariable(scope, "v", {2}, 1));
    Checkpoint checkpoint(scope, {{"model", model}});
    auto session = NewSession(scope);
    RunOrFail(*session, {GlobalVariablesInitializer(scope)});
    CKFLOW_ASSERT_OK_AND_ASSIGN(path, checkpoint.Save(dir_ + "/ckpt", *session));
  }
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<Module>();
  model->Track("v", std::make_shared<Module>());  // matched, but owns no value
  Checkpoint checkpoint(scope, {{"model", model}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, checkpoint.Restore(path));
  Status consumed = status.AssertConsumed();
  EXPECT_EQ(consumed.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(consumed.message()),
              StartsWith("Unused attributes in these objects (the attributes exist in the "
                         "checkpoint but were not restored)"));
  EXPECT_THAT(std::string(consumed.message()),
              HasSubstr("(root).model.v has no attribute 'VARIABLE_VALUE'"));
  status.ExpectPartial();
}

// get_checkpoint_state raises "Invalid checkpoint state loaded from <dir>"
// for a state that names no checkpoint (an empty file parses to one).
TEST_F(TfRulesTest, AStateFileNamingNoCheckpointIsInvalid) {
  for (const std::string& text :
       {std::string(""), std::string("all_model_checkpoint_paths: \"a\"\n"),
        std::string("model_checkpoint_path: \"\"\n")}) {
    SCOPED_TRACE(text);
    WriteFile(dir_ + "/checkpoint", text);
    Status s = ReadCheckpointState(dir_).status();
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s;
    EXPECT_THAT(std::string(s.message()),
                StartsWith("Invalid checkpoint state loaded from " + dir_ + ": " + dir_ +
                           "/checkpoint has no model_checkpoint_path"));
    EXPECT_EQ(ResolveCheckpointPath(dir_).status().code(), StatusCode::kDataLoss);
    // "Nothing to resume from", as documented.
    EXPECT_EQ(LatestCheckpoint(dir_), std::nullopt);
  }
  WriteFile(dir_ + "/checkpoint", "not: a state");
  Status unparsable = ReadCheckpointState(dir_).status();
  EXPECT_EQ(unparsable.code(), StatusCode::kDataLoss) << unparsable;
  EXPECT_THAT(std::string(unparsable.message()),
              StartsWith("Invalid checkpoint state loaded from " + dir_));
}

TEST_F(TfRulesTest, CheckpointManagerRefusesADirectoryWithAnInvalidState) {
  Scope scope = Scope::NewRootScope();
  Checkpoint checkpoint(scope, {});
  WriteFile(dir_ + "/checkpoint", "");
  auto manager = CheckpointManager::Create(checkpoint, dir_, {});
  EXPECT_EQ(manager.status().code(), StatusCode::kDataLoss) << manager.status();
  EXPECT_EQ(testing::ReadFileOrDie(dir_ + "/checkpoint"), "");  // left as it was
}

// CheckpointManager.__init__: a clock behind the state's
// last_preserved_timestamp logs "... seconds behind the last preserved
// checkpoint timestamp." and the bookkeeping restarts at the clock: every
// checkpoint of the state is capped at that time, so none is managed (none
// will be deleted), and new saves are timestamped from there.
TEST_F(TfRulesTest, CheckpointManagerWarnsWhenTheClockIsBehindAndPreservesTheOld) {
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<Module>();
  model->Track("v", CountingVariable(scope, "v", {2}, 1));
  Checkpoint checkpoint(scope, {{"model", model}});
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  double now = 2000;
  auto options = [&now] {
    CheckpointManager::Options o;
    o.max_to_keep = 1;
    o.clock = [&now] { return now; };
    return o;
  };
  {
    CKFLOW_ASSERT_OK_AND_ASSIGN(auto manager,
                                CheckpointManager::Create(checkpoint, dir_, options()));
    CKFLOW_ASSERT_OK(manager->Save(*session).status());  // ckpt-1 at 2000
  }
  std::vector<std::string> warnings;
  LogSink old = SetLogSink([&](LogSeverity severity, std::string_view message) {
    if (severity == LogSeverity::kWarning) warnings.emplace_back(message);
  });
  now = 1500;  // the clock went back 500 s (the state preserves 1999)
  StatusOr<std::unique_ptr<CheckpointManager>> manager =
      CheckpointManager::Create(checkpoint, dir_, options());
  SetLogSink(old);
  ASSERT_TRUE(manager.ok()) << manager.status();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0],
              HasSubstr("the clock returned a value 499.000000 seconds behind the last "
                        "preserved checkpoint timestamp."));
  EXPECT_EQ((*manager)->checkpoints(), std::vector<std::string>{});
  EXPECT_EQ((*manager)->latest_checkpoint(), dir_ + "/ckpt-1");
  now = 1510;
  CKFLOW_ASSERT_OK((*manager)->Save(*session).status());
  now = 1520;
  CKFLOW_ASSERT_OK((*manager)->Save(*session).status());
  // ckpt-1 left management without being deleted; ckpt-2 was managed, so
  // max_to_keep=1 deleted it.
  EXPECT_TRUE(fs::exists(dir_ + "/ckpt-1.index"));
  EXPECT_FALSE(fs::exists(dir_ + "/ckpt-2.index"));
  EXPECT_EQ((*manager)->checkpoints(), std::vector<std::string>{dir_ + "/ckpt-3"});
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<CheckpointStateData> state, ReadCheckpointState(dir_));
  EXPECT_EQ(state->last_preserved_timestamp, 1500);
}

// A duplicate dependency is refused at the Track; a save of an object graph
// with one fails naming the object, rather than writing a graph without it.
TEST_F(TfRulesTest, ASaveOfAGraphWithARefusedDuplicateFailsNamingIt) {
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<Module>();
  model->Track("v", CountingVariable(scope, "v", {2}, 1));
  model->Track("v", CountingVariable(scope, "v2", {2}, 5));
  Checkpoint checkpoint(scope, {{"model", model}});
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  StatusOr<std::string> saved = checkpoint.Save(dir_ + "/ckpt", *session);
  EXPECT_EQ(saved.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(saved.status().message()),
              StartsWith("(root).model: Module: Track('v', Variable"));
  EXPECT_THAT(std::string(saved.status().message()), HasSubstr("already declared"));
  EXPECT_EQ(SaveWeights(model, dir_ + "/w", *session).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir_ + "/checkpoint"));
}

// ------------------------------------------------------------ state helpers

// tf.train.get_checkpoint_state joins relative paths onto the directory.
TEST_F(TfRulesTest, GetCheckpointStateReturnsAbsolutePaths) {
  CheckpointStateData state;
  state.model_checkpoint_path = "ckpt-2";
  state.all_model_checkpoint_paths = {"/elsewhere/ckpt-1", "ckpt-2"};
  CKFLOW_ASSERT_OK(WriteCheckpointState(dir_, state));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<CheckpointStateData> got, GetCheckpointState(dir_));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->model_checkpoint_path, dir_ + "/ckpt-2");
  EXPECT_EQ(got->all_model_checkpoint_paths,
            (std::vector<std::string>{"/elsewhere/ckpt-1", dir_ + "/ckpt-2"}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<CheckpointStateData> none,
                              GetCheckpointState(dir_ + "/missing"));
  EXPECT_FALSE(none.has_value());
}

// update_checkpoint_state: the newest path is appended to the list unless
// it is last; save_relative_paths writes paths under the directory relative
// to it; timestamps must pair up with paths; the state file itself is no
// checkpoint path.
TEST_F(TfRulesTest, UpdateCheckpointStateFollowsTensorFlow) {
  CKFLOW_ASSERT_OK(UpdateCheckpointState(dir_, dir_ + "/ckpt-3",
                                         {.all_model_checkpoint_paths = {dir_ + "/ckpt-1"},
                                          .all_model_checkpoint_timestamps = {10, 30},
                                          .last_preserved_timestamp = 5,
                                          .save_relative_paths = true}));
  EXPECT_EQ(testing::ReadFileOrDie(dir_ + "/checkpoint"),
            "model_checkpoint_path: \"ckpt-3\"\n"
            "all_model_checkpoint_paths: \"ckpt-1\"\n"
            "all_model_checkpoint_paths: \"ckpt-3\"\n"
            "all_model_checkpoint_timestamps: 10\n"
            "all_model_checkpoint_timestamps: 30\n"
            "last_preserved_timestamp: 5\n");
  CKFLOW_ASSERT_OK(UpdateCheckpointState(dir_, dir_ + "/ckpt-4"));  // absolute, as given
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<CheckpointStateData> state, ReadCheckpointState(dir_));
  EXPECT_EQ(state->model_checkpoint_path, dir_ + "/ckpt-4");
  EXPECT_EQ(state->all_model_checkpoint_paths, std::vector<std::string>{dir_ + "/ckpt-4"});

  Status mismatch =
      UpdateCheckpointState(dir_, "ckpt-5", {.all_model_checkpoint_timestamps = {1, 2, 3}});
  EXPECT_EQ(mismatch.code(), StatusCode::kInvalidArgument) << mismatch;
  EXPECT_THAT(std::string(mismatch.message()),
              HasSubstr("timestamps, if provided, must match checkpoint paths"));
  Status conflict = UpdateCheckpointState(dir_, dir_ + "/checkpoint");
  EXPECT_EQ(conflict.code(), StatusCode::kInvalidArgument) << conflict;
  EXPECT_THAT(std::string(conflict.message()),
              HasSubstr("conflicts with path used for checkpoint state"));
  // Neither failure touched the file.
  CKFLOW_ASSERT_OK_AND_ASSIGN(state, ReadCheckpointState(dir_));
  EXPECT_EQ(state->model_checkpoint_path, dir_ + "/ckpt-4");
}

// A relative directory: as TensorFlow's generate_checkpoint_state_proto, a
// relative path (relative to the working directory, as the directory is) is
// stored relative to the directory, so ("train", "train/model-1") stores
// "model-1" and reads back as train/model-1, not train/train/model-1
// (interop/test_interop.py runs TensorFlow on the same arguments).
TEST_F(TfRulesTest, UpdateCheckpointStateInARelativeDirectory) {
  const std::filesystem::path here = std::filesystem::current_path();
  std::filesystem::current_path(dir_);
  std::filesystem::create_directories("train");
  // Nothing between the two chdirs may return early.
  const Status written = testing::WriteBundle("train/model-1", {{"w", Tensor::Scalar(1.0f)}});
  Status updated = UpdateCheckpointState(
      "train", "train/model-1",
      {.all_model_checkpoint_paths = {"train/model-0", "/abs/x", "other/model-9"}});
  StatusOr<std::optional<CheckpointStateData>> state = ReadCheckpointState("train");
  const std::optional<std::string> latest = LatestCheckpoint("train");
  std::filesystem::current_path(here);
  CKFLOW_ASSERT_OK(written);
  CKFLOW_ASSERT_OK(updated);
  ASSERT_TRUE(state.ok() && state->has_value()) << state.status();
  EXPECT_EQ((*state)->model_checkpoint_path, "model-1");
  EXPECT_EQ((*state)->all_model_checkpoint_paths,
            (std::vector<std::string>{"model-0", "/abs/x", "../other/model-9", "model-1"}));
  EXPECT_EQ(latest, "train/model-1");
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<CheckpointStateData> absolute,
                              GetCheckpointState(dir_ + "/train"));
  EXPECT_EQ(absolute->model_checkpoint_path, dir_ + "/train/model-1");
}

// checkpoint_exists and remove_checkpoint: the index and every data file of
// one prefix, not those of a prefix it is the beginning of.
TEST_F(TfRulesTest, CheckpointExistsAndRemoveCheckpointTouchOnlyThatPrefix) {
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<Module>();
  model->Track("a", CountingVariable(scope, "a", {64}, 1));
  model->Track("b", CountingVariable(scope, "b", {64}, 2));
  Checkpoint checkpoint(scope, {{"model", model}});
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  CKFLOW_ASSERT_OK(checkpoint.Write(dir_ + "/ckpt-1", *session, {.files_per_device = 2}).status());
  CKFLOW_ASSERT_OK(checkpoint.Write(dir_ + "/ckpt-10", *session).status());
  EXPECT_TRUE(CheckpointExists(dir_ + "/ckpt-1"));
  EXPECT_FALSE(CheckpointExists(dir_ + "/ckpt-2"));
  EXPECT_FALSE(CheckpointExists(dir_));  // a directory is no checkpoint
  CKFLOW_ASSERT_OK(RemoveCheckpoint(dir_ + "/ckpt-1"));
  EXPECT_FALSE(CheckpointExists(dir_ + "/ckpt-1"));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir_)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"ckpt-10.data-00000-of-00001", "ckpt-10.index"}));
  Status again = RemoveCheckpoint(dir_ + "/ckpt-1");
  EXPECT_EQ(again.code(), StatusCode::kNotFound) << again;
}

// ------------------------------------------------------------ manager features

class ManagerFeaturesTest : public TfRulesTest {
 protected:
  void SetUp() override {
    model_->Track("v", CountingVariable(scope_, "v", {3}, 1));
    step_ = Variable::Create(scope_, "step", ops::Const(scope_, int64_t{0}), {.trainable = false});
    model_->Track("step", step_);
    checkpoint_ = std::make_unique<Checkpoint>(scope_, Checkpoint::Dependencies{{"model", model_}});
    session_ = NewSession(scope_);
  }
  void SetStep(int64_t step) { testing::SetValue(*session_, *step_, Tensor::Scalar(step)); }
  Scope scope_ = Scope::NewRootScope();
  std::shared_ptr<Module> model_ = std::make_shared<Module>();
  std::shared_ptr<Variable> step_;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::unique_ptr<Session> session_;
};

// CheckpointManager(checkpoint_interval=N, step_counter=...): save() returns
// None until the counter is N steps past the last checkpoint, and for the
// same step; save(check_interval=False) only skips the same step.
TEST_F(ManagerFeaturesTest, CheckpointIntervalSkipsSavesUntilTheStepCounterAdvances) {
  RunOrFail(*session_, {GlobalVariablesInitializer(scope_)});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto manager, CheckpointManager::Create(*checkpoint_, dir_,
                                                                      {.max_to_keep = std::nullopt,
                                                                       .checkpoint_interval = 10,
                                                                       .step_counter = step_}));
  EXPECT_EQ(manager->checkpoint_interval(), 10);
  EXPECT_EQ(manager->last_checkpoint_step(), std::nullopt);
  std::vector<std::string> saved;
  for (int64_t step : {0, 0, 5, 9, 10, 12, 20, 25}) {
    SetStep(step);
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, manager->Save(*session_));
    if (!path.empty())
      saved.push_back(std::to_string(step) + ":" + fs::path(path).filename().string());
  }
  EXPECT_EQ(saved, (std::vector<std::string>{"0:ckpt-1", "10:ckpt-2", "20:ckpt-3"}));
  EXPECT_EQ(manager->last_checkpoint_step(), 20);
  SetStep(21);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string forced,
                              manager->Save(*session_, std::nullopt, /*check_interval=*/false));
  EXPECT_EQ(forced, dir_ + "/ckpt-4");
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string same,
                              manager->Save(*session_, std::nullopt, /*check_interval=*/false));
  EXPECT_EQ(same, "");  // the same step is never saved twice
  EXPECT_EQ(manager->checkpoints().size(), 4u);
}

TEST_F(ManagerFeaturesTest, CheckpointIntervalWithoutAStepCounterIsInvalid) {
  auto manager = CheckpointManager::Create(*checkpoint_, dir_, {.checkpoint_interval = 10});
  EXPECT_EQ(manager.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(manager.status().message()), HasSubstr("step_counter"));
}

// restore_or_initialize: init_fn when the directory has no checkpoint (and
// None returned); else the latest checkpoint restored, its path returned,
// and last_checkpoint_step read from the step counter.
TEST_F(ManagerFeaturesTest, RestoreOrInitializeRunsInitFnOrRestoresTheLatest) {
  int init_calls = 0;
  CheckpointManager::Options options{.checkpoint_interval = 1, .step_counter = step_};
  options.init_fn = [&](Session& session) {
    ++init_calls;
    return session.Run({}, {}, {GlobalVariablesInitializer(scope_)}).status();
  };
  {
    CKFLOW_ASSERT_OK_AND_ASSIGN(auto manager,
                                CheckpointManager::Create(*checkpoint_, dir_, options));
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<std::string> restored,
                                manager->RestoreOrInitialize(*session_));
    EXPECT_EQ(restored, std::nullopt);
    EXPECT_EQ(init_calls, 1);
    SetStep(42);
    CKFLOW_ASSERT_OK(manager->Save(*session_).status());
  }
  // A new program resumes from it.
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<Module>();
  auto v = model->Track("v", CountingVariable(scope, "v", {3}, 100));
  auto step = model->Track(
      "step", Variable::Create(scope, "step", ops::Const(scope, int64_t{0}), {.trainable = false}));
  Checkpoint checkpoint(scope, {{"model", model}});
  auto session = NewSession(scope);
  options.step_counter = step;
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto manager, CheckpointManager::Create(checkpoint, dir_, options));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<std::string> restored,
                              manager->RestoreOrInitialize(*session));
  EXPECT_EQ(restored, dir_ + "/ckpt-1");
  EXPECT_EQ(init_calls, 1);
  EXPECT_EQ(manager->last_checkpoint_step(), 42);
  EXPECT_EQ(ValueOf(*session, *step).scalar<int64_t>(), 42);
  EXPECT_EQ(ValueOf(*session, *v).flat<float>()[0], 1.0f);  // CountingVariable(..., 1)
}

// Without init_fn, a graph-mode program still needs its variables
// initialized: RestoreOrInitialize initializes every one of the checkpoint.
TEST_F(ManagerFeaturesTest, RestoreOrInitializeWithoutInitFnInitializesTheVariables) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto manager, CheckpointManager::Create(*checkpoint_, dir_, {}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<std::string> restored,
                              manager->RestoreOrInitialize(*session_));
  EXPECT_EQ(restored, std::nullopt);
  EXPECT_EQ(ValueOf(*session_, *step_).scalar<int64_t>(), 0);
}

// ------------------------------------------------------------ skip slots

// CheckpointOptions(experimental_skip_slot_variables=True): the model's
// values are restored, the optimizer's slots start fresh, and
// assert_consumed ignores the checkpoint's slots.
TEST_F(TfRulesTest, SkipSlotVariablesRestoresTheModelButNotTheSlots) {
  std::string path;
  std::vector<std::pair<std::string, Tensor>> saved;
  {
    Scope scope = Scope::NewRootScope();
    auto model = std::make_shared<TwoLayers>();
    Training t;
    t.Build(scope, *model, *model->optimizer());
    Checkpoint checkpoint(scope, {{"model", model}});
    auto session = NewSession(scope);
    RunOrFail(*session, {GlobalVariablesInitializer(scope)});
    for (int i = 0; i < 3; ++i) t.Step(*session);
    CKFLOW_ASSERT_OK_AND_ASSIGN(path, checkpoint.Save(dir_ + "/ckpt", *session));
    saved = ModelValues(*session, *model);
  }
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<TwoLayers>();
  Checkpoint checkpoint(scope, {{"model", model}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status,
                              checkpoint.Restore(path, {.skip_slot_variables = true}));
  Training t;
  t.Build(scope, *model, *model->optimizer());
  auto session = NewSession(scope);
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  std::vector<std::pair<std::string, Tensor>> restored = ModelValues(*session, *model);
  ASSERT_EQ(restored.size(), saved.size());
  int slots = 0;
  for (size_t i = 0; i < saved.size(); ++i) {
    const bool is_slot = saved[i].first.ends_with("/m") || saved[i].first.ends_with("/v");
    if (!is_slot) {
      EXPECT_TRUE(SameTensor(restored[i].second, saved[i].second)) << saved[i].first;
      continue;
    }
    ++slots;
    bool moved = false;  // the saved slot is not its initial value
    for (float x : saved[i].second.flat<float>()) moved = moved || x != 0.0f;
    EXPECT_TRUE(moved) << saved[i].first;
    for (float x : restored[i].second.flat<float>()) EXPECT_EQ(x, 0.0f) << saved[i].first;
  }
  EXPECT_EQ(slots, 8);
  // Without the option the same checkpoint restores the slots too.
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus all, checkpoint.Restore(path));
  CKFLOW_ASSERT_OK(all.RunRestoreOps(*session));
  restored = ModelValues(*session, *model);
  for (size_t i = 0; i < saved.size(); ++i) {
    EXPECT_TRUE(SameTensor(restored[i].second, saved[i].second)) << saved[i].first;
  }
}

// The same option through load_weights (Keras passes its
// CheckpointOptions to the restore): a weights file that holds the
// optimizer's slots, loaded into an unbuilt model, restores its layers and
// leaves the slots to their initializers.
TEST_F(TfRulesTest, LoadWeightsSkipsSlotVariablesWhenAsked) {
  const std::string path = dir_ + "/weights";
  const std::vector<std::pair<std::string, Tensor>> saved = SaveTrainedWeights(path);
  for (bool skip : {true, false}) {
    Scope scope = Scope::NewRootScope();
    auto model = std::make_shared<TwoLayers>();
    auto session = NewSession(scope);
    CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status,
                                LoadWeights(model, path, *session, {.skip_slot_variables = skip}));
    Training t;
    t.Build(scope, *model, *model->optimizer());
    CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
    CKFLOW_EXPECT_OK(status.AssertConsumed());
    std::vector<std::pair<std::string, Tensor>> restored = ModelValues(*session, *model);
    ASSERT_EQ(restored.size(), saved.size());
    int fresh_slots = 0;
    for (size_t i = 0; i < saved.size(); ++i) {
      const bool is_slot = saved[i].first.ends_with("/m") || saved[i].first.ends_with("/v");
      if (is_slot && skip) {
        bool zero = true;
        for (float x : restored[i].second.flat<float>()) zero = zero && x == 0.0f;
        fresh_slots += zero;
        EXPECT_FALSE(SameTensor(restored[i].second, saved[i].second)) << saved[i].first;
      } else {
        EXPECT_TRUE(SameTensor(restored[i].second, saved[i].second)) << saved[i].first;
      }
    }
    EXPECT_EQ(fresh_slots, skip ? 8 : 0);
  }
}

// ------------------------------------------------------------ data files per task

// TensorFlow's MultiDeviceSaver maps each variable's device to its task's
// CPU:0 (set_cpu0) and writes one data file per such host: two devices of
// one process share a file, two tasks get two. Restoring reads either.
TEST_F(TfRulesTest, SavesWriteOneDataFilePerTaskNotPerDevice) {
  struct Case {
    std::vector<std::string> devices;
    int files;
  };
  const Case cases[] = {
      {{"/cpu:0", "/cpu:1", "/device:GPU:0"}, 1},
      {{"/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:GPU:1",
        "/job:worker/replica:0/task:1/device:CPU:0"},
       2},
      {{"", "/job:ps/task:0/device:CPU:0", "/job:ps/task:1/cpu:0", "/job:ps/task:2/gpu:0"}, 3},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.files);
    Scope scope = Scope::NewRootScope();
    auto model = std::make_shared<Module>();
    std::vector<std::shared_ptr<Variable>> vars;
    for (size_t i = 0; i < c.devices.size(); ++i) {
      const std::string name = "w" + std::to_string(i);
      vars.push_back(model->Track(
          name, CountingVariable(scope, name, {3}, 10.0f * i, {.device = c.devices[i]})));
    }
    Checkpoint checkpoint(scope, {{"model", model}});
    auto session = NewSession(scope);
    RunOrFail(*session, {GlobalVariablesInitializer(scope)});
    const std::string path = dir_ + "/ckpt" + std::to_string(n++);
    CKFLOW_ASSERT_OK(checkpoint.Write(path, *session, {.files_per_device = 1}).status());
    CKFLOW_ASSERT_OK_AND_ASSIGN(auto reader, BundleReader::Open(path));
    EXPECT_EQ(reader->num_shards(), c.files);
    // Every value restores into a fresh program.
    Scope scope2 = Scope::NewRootScope();
    auto model2 = std::make_shared<Module>();
    std::vector<std::shared_ptr<Variable>> vars2;
    for (size_t i = 0; i < c.devices.size(); ++i) {
      const std::string name = "w" + std::to_string(i);
      vars2.push_back(model2->Track(name, CountingVariable(scope2, name, {3}, -1)));
    }
    Checkpoint checkpoint2(scope2, {{"model", model2}});
    CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, checkpoint2.Restore(path));
    auto session2 = NewSession(scope2);
    CKFLOW_ASSERT_OK(status.RunRestoreOps(*session2));
    for (size_t i = 0; i < vars.size(); ++i) {
      EXPECT_TRUE(SameTensor(ValueOf(*session2, *vars2[i]), ValueOf(*session, *vars[i])));
    }
  }
}

// ------------------------------------------------------------ object graph

// The checkpoint's object graph as data: nodes by their TensorFlow names,
// children, attributes with their keys, and the optimizer's slot references.
TEST_F(TfRulesTest, ReadCheckpointObjectGraphListsNodesChildrenSlotsAndKeys) {
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<TwoLayers>();
  Training t;
  t.Build(scope, *model, *model->optimizer());
  Checkpoint checkpoint(scope, {{"model", model}});
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, checkpoint.Save(dir_ + "/ckpt", *session));

  CKFLOW_ASSERT_OK_AND_ASSIGN(auto reader, BundleReader::Open(path));
  CKFLOW_ASSERT_OK_AND_ASSIGN(CheckpointObjectGraph graph, ReadCheckpointObjectGraph(*reader));
  ASSERT_FALSE(graph.nodes.empty());
  EXPECT_EQ(graph.nodes[0].path, "(root)");
  std::map<std::string, int> by_path;
  for (size_t id = 0; id < graph.nodes.size(); ++id) by_path[graph.nodes[id].path] = id;
  ASSERT_TRUE(by_path.count("(root).model.hidden.kernel"));
  const auto& kernel = graph.nodes[by_path["(root).model.hidden.kernel"]];
  ASSERT_EQ(kernel.attributes.size(), 1u);
  EXPECT_EQ(kernel.attributes[0].name, "VARIABLE_VALUE");
  EXPECT_EQ(kernel.attributes[0].checkpoint_key, "model/hidden/kernel/.ATTRIBUTES/VARIABLE_VALUE");
  EXPECT_EQ(kernel.attributes[0].full_name, model->hidden()->kernel()->name());
  EXPECT_TRUE(reader->Contains(kernel.attributes[0].checkpoint_key));

  ASSERT_TRUE(by_path.count("(root).model.optimizer"));
  const auto& optimizer = graph.nodes[by_path["(root).model.optimizer"]];
  ASSERT_EQ(optimizer.slot_variables.size(), 8u);  // m and v for 4 variables
  int kernel_slots = 0;
  for (const auto& slot : optimizer.slot_variables) {
    if (slot.original_variable_node_id != by_path["(root).model.hidden.kernel"]) continue;
    ++kernel_slots;
    const auto& node = graph.nodes[slot.slot_variable_node_id];
    EXPECT_EQ(node.path, "(root).model.optimizer's state '" + slot.slot_name +
                             "' for (root).model.hidden.kernel");
    ASSERT_EQ(node.attributes.size(), 1u);
    EXPECT_EQ(node.attributes[0].checkpoint_key,
              "model/hidden/kernel/.OPTIMIZER_SLOT/model/optimizer/" + slot.slot_name +
                  "/.ATTRIBUTES/VARIABLE_VALUE");
  }
  EXPECT_EQ(kernel_slots, 2);
  // The root's children: the model, then save_counter.
  std::vector<std::string> root_children;
  for (const auto& c : graph.nodes[0].children) root_children.push_back(c.local_name);
  EXPECT_EQ(root_children, (std::vector<std::string>{"model", "save_counter"}));
}

// TensorFlow's own checkpoint: 16 Adam slots from two optimizers, every
// attribute's key present in the bundle, a cycle back to the root.
TEST_F(TfRulesTest, ReadCheckpointObjectGraphReadsTensorFlowsOwnCheckpoint) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto reader,
                              BundleReader::Open(testing::GoldenPrefix("eager_optimizer_slots")));
  CKFLOW_ASSERT_OK_AND_ASSIGN(CheckpointObjectGraph graph, ReadCheckpointObjectGraph(*reader));
  EXPECT_EQ(graph.nodes.size(), 48u);
  int slots = 0, attributes = 0, edges_to_root = 0;
  for (const auto& node : graph.nodes) {
    EXPECT_FALSE(node.path.empty());
    for (const auto& slot : node.slot_variables) {
      ++slots;
      EXPECT_EQ(graph.nodes[slot.slot_variable_node_id].path,
                node.path + "'s state '" + slot.slot_name + "' for " +
                    graph.nodes[slot.original_variable_node_id].path);
    }
    for (const auto& a : node.attributes) {
      ++attributes;
      EXPECT_TRUE(reader->Contains(a.checkpoint_key)) << a.checkpoint_key;
    }
    for (const auto& c : node.children) edges_to_root += c.node_id == 0;
  }
  EXPECT_EQ(slots, 16);
  EXPECT_EQ(attributes, static_cast<int>(reader->entries().size()) - 1);  // all but the graph
  EXPECT_GE(edges_to_root, 1);
}

TEST_F(TfRulesTest, ReadCheckpointObjectGraphOfANameBasedCheckpointIsNotFound) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto reader,
                              BundleReader::Open(testing::GoldenPrefix("tf1_saver_sharded")));
  EXPECT_EQ(ReadCheckpointObjectGraph(*reader).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace ckflow
