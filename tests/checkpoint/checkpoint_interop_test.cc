// Interoperability with TensorFlow: the golden checkpoints TensorFlow 2.21
// wrote (tests/testdata/) restore into equivalent C++ objects, each value
// bit for bit; and every kind of checkpoint ckflow writes passes the
// reader-level check (testing::CheckBundle). That TensorFlow itself reads
// each kind is the interop suite's part (interop/test_interop.py).
#include <gtest/gtest.h>

#include <cmath>

#include "bundle/bundle_reader.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "checkpoint/weights.h"
#include "ops/array_ops.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "tests/bundle/testdata_util.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::CountingVariable;
using testing::GoldenPrefix;
using testing::Mirror;
using testing::MirrorCheckpoint;
using testing::Module;
using testing::NewSession;
using testing::RunOrFail;
using testing::ValueOf;

// Restores the golden checkpoint into its mirror with the mirror's root as
// root; runs the restore ops, creates optimizer slots (restoring them as
// they appear) and runs the restore ops again.
struct RestoredGolden {
  Scope scope = Scope::NewRootScope();
  Mirror mirror;
  std::unique_ptr<Session> session;
  std::optional<LoadStatus> status;
  Status run;
};

std::unique_ptr<RestoredGolden> RestoreGolden(const std::string& prefix) {
  auto r = std::make_unique<RestoredGolden>();
  StatusOr<Mirror> mirror = MirrorCheckpoint(r->scope, prefix);
  EXPECT_TRUE(mirror.ok()) << mirror.status();
  r->mirror = *std::move(mirror);
  r->session = NewSession(r->scope);
  StatusOr<LoadStatus> loaded = LoadWeights(r->mirror.root, prefix, *r->session);
  if (!loaded.ok()) {
    r->run = loaded.status();
    return r;
  }
  r->status = *loaded;
  for (auto& opt : r->mirror.optimizers) opt->CreateSlots(r->scope);
  r->run = r->status->RunRestoreOps(*r->session);
  return r;
}

// Every variable and slot of the mirror holds its checkpoint value, bit for
// bit; returns how many were compared.
size_t ExpectEveryValueRestored(RestoredGolden& r, const std::string& prefix) {
  CKFLOW_EXPECT_OK(r.run);
  StatusOr<std::unique_ptr<BundleReader>> reader = BundleReader::Open(prefix);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return 0;
  std::map<std::string, std::shared_ptr<Variable>> by_key = r.mirror.variable_by_key;
  for (const auto& opt : r.mirror.optimizers)
    by_key.insert(opt->slot_by_key.begin(), opt->slot_by_key.end());
  for (const auto& [key, var] : by_key) {
    StatusOr<Tensor> stored = (*reader)->Lookup(key);
    EXPECT_TRUE(stored.ok()) << stored.status();
    if (stored.ok()) {
      EXPECT_TRUE(testing::SameTensor(ValueOf(*r.session, *var), *stored)) << key;
    }
  }
  return by_key.size();
}

// Every object-based golden checkpoint whose every key is in its bundle.
class GoldenRestoreTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenRestoreTest, EveryValueRestoresBitForBit) {
  const std::string prefix = GoldenPrefix(GetParam());
  auto r = RestoreGolden(prefix);
  CKFLOW_ASSERT_OK(r->run);
  CKFLOW_EXPECT_OK(r->status->AssertConsumed());
  EXPECT_GT(ExpectEveryValueRestored(*r, prefix), 0u);
}

INSTANTIATE_TEST_SUITE_P(TestData, GoldenRestoreTest,
                         ::testing::Values("every_dtype", "keras_save_weights",
                                           "checkpoint_manager", "eager_optimizer_slots",
                                           "graph_checkpoint", "cyclic_module", "two_shards",
                                           "sliced_values", "saved_model_variables"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(GoldenRestore, SavedModelVariablesBesideItsFunctions) {
  auto r = RestoreGolden(GoldenPrefix("saved_model_variables"));
  CKFLOW_ASSERT_OK(r->run);
  CKFLOW_EXPECT_OK(r->status->AssertConsumed());
  EXPECT_EQ(ValueOf(*r->session, *r->mirror.variable_by_key.at("a/.ATTRIBUTES/VARIABLE_VALUE"))
                .scalar<float>(),
            0.5f);
  EXPECT_EQ(ValueOf(*r->session, *r->mirror.variable_by_key.at("c/.ATTRIBUTES/VARIABLE_VALUE"))
                .scalar<float>(),
            3.0f);
}

TEST(GoldenRestore, CyclicModuleRestoresThroughTheCycle) {
  auto r = RestoreGolden(GoldenPrefix("cyclic_module"));
  CKFLOW_ASSERT_OK(r->run);
  CKFLOW_EXPECT_OK(r->status->AssertConsumed());
  EXPECT_EQ(ValueOf(*r->session,
                    *r->mirror.variable_by_key.at("child/my_variable/.ATTRIBUTES/VARIABLE_VALUE"))
                .scalar<float>(),
            3.0f);
}

TEST(GoldenRestore, TwoShardsWithTheVariableInTheSecond) {
  auto r = RestoreGolden(GoldenPrefix("two_shards"));
  CKFLOW_ASSERT_OK(r->run);
  CKFLOW_EXPECT_OK(r->status->AssertConsumed());
  const Tensor v =
      ValueOf(*r->session, *r->mirror.variable_by_key.at("v/.ATTRIBUTES/VARIABLE_VALUE"));
  EXPECT_EQ(v.shape(), TensorShape({1, 1, 1}));
  EXPECT_EQ(v.flat<float>()[0], 1.0f);
}

TEST(GoldenRestore, KeysMissingFromTheBundleAreReportedByKey) {
  auto r = RestoreGolden(GoldenPrefix("uninitialized_variable"));
  EXPECT_THAT(r->run, testing::StatusIs(StatusCode::kNotFound,
                                        "uninitialized_variable/.ATTRIBUTES/VARIABLE_VALUE"));
  if (r->status) r->status->ExpectPartial();
}

TEST(GoldenRestore, AgentWithAdamSlotsFromTwoOptimizers) {
  const std::string prefix = GoldenPrefix("eager_optimizer_slots");
  auto r = RestoreGolden(prefix);
  CKFLOW_ASSERT_OK(r->run);
  CKFLOW_EXPECT_OK(r->status->AssertConsumed());
  size_t slots = 0;
  for (const auto& opt : r->mirror.optimizers) slots += opt->pending.size();
  EXPECT_EQ(slots, 16u);
  ExpectEveryValueRestored(*r, prefix);
}

// TensorFlow 1's Saver: W = 0.25 and b = 1.5 (interop/make_testdata.py).
TEST(NameBasedRestore, Tf1SaverCheckpointMatchesVariablesByName) {
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<Module>();
  auto w = model->Track("weight", Variable::Create(scope, "W", ops::Const(scope, 0.0f)));
  auto b = model->Track("bias", Variable::Create(scope, "b", ops::Const(scope, 0.0f)));
  Checkpoint checkpoint(scope, {{"model", model}});
  const std::string dir = testing::TestDataDir() + "/tf1_saver_small";
  auto latest = LatestCheckpoint(dir);
  ASSERT_EQ(latest, dir + "/model");
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, checkpoint.Restore(latest));
  EXPECT_EQ(status.kind_name(), "NameBasedSaverStatus");
  // Name-based matching happens when the ops run.
  EXPECT_EQ(status.AssertConsumed().code(), StatusCode::kFailedPrecondition);
  auto session = NewSession(scope);
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
  CKFLOW_EXPECT_OK(status.AssertConsumed());  // save_counter is optional
  EXPECT_EQ(ValueOf(*session, *w).scalar<float>(), 0.25f);
  EXPECT_EQ(ValueOf(*session, *b).scalar<float>(), 1.5f);
}

// A TF1 checkpoint has no save_counter: InitializeOrRestore initializes it,
// so the training loop that restored it can save and number from 1.
TEST(NameBasedRestore, InitializeOrRestoreLetsTheLoopSave) {
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<Module>();
  model->Track("weight", Variable::Create(scope, "W", ops::Const(scope, 0.0f)));
  model->Track("bias", Variable::Create(scope, "b", ops::Const(scope, 0.0f)));
  Checkpoint checkpoint(scope, {{"model", model}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status,
                              checkpoint.Restore(GoldenPrefix("tf1_saver_small")));
  auto session = NewSession(scope);
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
  EXPECT_EQ(ValueOf(*session, *checkpoint.save_counter()).scalar<int64_t>(), 0);
  const std::string dir = testing::NewTempDir("tf1");
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string saved, checkpoint.Save(dir + "/ckpt", *session));
  EXPECT_EQ(saved, dir + "/ckpt-1");
}

TEST(NameBasedRestore, TwoShardSaverCheckpointReportsVariablesItLacks) {
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<Module>();
  auto step =
      model->Track("step", Variable::Create(scope, "global_step", ops::Const(scope, int64_t{0})));
  auto beta = model->Track("beta", Variable::Create(scope, "beta1_power", ops::Const(scope, 0.0f)));
  auto absent =
      model->Track("absent", Variable::Create(scope, "not/in/checkpoint", ops::Const(scope, 0.0f)));
  Checkpoint checkpoint(scope, {{"model", model}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status,
                              checkpoint.Restore(GoldenPrefix("tf1_saver_sharded")));
  auto session = NewSession(scope);
  CKFLOW_ASSERT_OK(status.RunRestoreOps(*session));
  EXPECT_EQ(ValueOf(*session, *step).scalar<int64_t>(), 1000);
  EXPECT_EQ(ValueOf(*session, *beta).scalar<float>(), 0.81f);
  Status consumed = status.AssertConsumed();
  EXPECT_THAT(consumed, testing::StatusIs(StatusCode::kFailedPrecondition, "not/in/checkpoint"));
}

// ----------------------------------------------- the reader-level check of ckflow's output

class ReaderCheckTest : public ::testing::Test {
 protected:
  // testing::CheckBundle's listing; a test failure if the check fails.
  std::string Check(const std::string& path) {
    StatusOr<std::string> listing = testing::CheckBundle(path);
    EXPECT_TRUE(listing.ok()) << path << ": " << listing.status();
    return listing.ok() ? *listing : "";
  }
  // A model with a layer, trained one step by Adam so slots exist.
  void Build(const Scope& scope, const std::string& device_prefix = "") {
    model_ = std::make_shared<Module>();
    auto dense = model_->Track("dense", std::make_shared<Module>());
    for (int i = 0; i < 2; ++i) {
      std::string name = i == 0 ? "kernel" : "bias";
      VariableOptions options;
      if (!device_prefix.empty()) options.device = device_prefix + std::to_string(i);
      vars_.push_back(
          dense->Track(name, CountingVariable(scope, "dense/" + name, {2, 3}, i, options)));
    }
    optimizer_ = Adam::Make();
    Tensor g(DT_FLOAT, TensorShape({2, 3}));
    for (auto& x : g.flat<float>()) x = 1;
    train_ = optimizer_->ApplyGradients(
        scope, {{ops::Const(scope, g), vars_[0]}, {ops::Const(scope, g), vars_[1]}});
  }
  // Build, then a checkpoint of the model and the optimizer, initialized and
  // trained one step in session_.
  void BuildAndTrain(const Scope& scope, const std::string& device_prefix = "") {
    Build(scope, device_prefix);
    checkpoint_ = std::make_unique<Checkpoint>(
        scope, Checkpoint::Dependencies{{"model", model_}, {"optimizer", optimizer_}});
    session_ = NewSession(scope);
    RunOrFail(*session_, {GlobalVariablesInitializer(scope)});
    RunOrFail(*session_, {train_});
  }
  std::string dir_ = testing::NewTempDir("check");
  std::unique_ptr<Session> session_;        // outlives checkpoint_'s pending
  std::unique_ptr<Checkpoint> checkpoint_;  // asynchronous save, if any
  std::shared_ptr<Module> model_;
  std::vector<std::shared_ptr<Variable>> vars_;
  std::shared_ptr<Adam> optimizer_;
  Output train_;
};

TEST_F(ReaderCheckTest, CheckpointSaveDecodesToTheObjectTree) {
  Scope scope = Scope::NewRootScope();
  BuildAndTrain(scope);
  EXPECT_EQ(checkpoint_->Save(dir_ + "/ckpt", *session_).value(), dir_ + "/ckpt-1");
  std::string out = Check(dir_);
  for (const char* expected :
       {"\n  model\n", "\n  optimizer\n", "    dense\n",
        "  save_counter  int64[]  save_counter/.ATTRIBUTES/VARIABLE_VALUE\n",
        "beta1_power  float32[]  optimizer/beta1_power/.ATTRIBUTES/VARIABLE_VALUE\n",
        "kernel  float32[2,3]  model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE\n",
        "slot 'm' for model/dense/kernel  float32[2,3]  "
        "model/dense/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE\n",
        "slot 'v' for model/dense/bias", "every key in the bundle",
        "state: model_checkpoint_path \"ckpt-1\""}) {
    EXPECT_NE(out.find(expected), std::string::npos) << expected << "\n" << out;
  }
}

TEST_F(ReaderCheckTest, ShardedSaveWeightsAndManagerCheckpointsDecode) {
  Scope scope = Scope::NewRootScope();
  Build(scope, "/job:worker/task:");  // a data file per task
  Checkpoint checkpoint(scope, {{"model", model_}});
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  std::string sharded = checkpoint.Write(dir_ + "/sharded", *session).value();
  std::string out = Check(sharded);
  EXPECT_NE(out.find("num_shards 2\n"), std::string::npos) << out;
  CKFLOW_ASSERT_OK(SaveWeights(model_, dir_ + "/weights/w", *session));
  out = Check(dir_ + "/weights/w");
  EXPECT_NE(out.find("  dense/bias/.ATTRIBUTES/VARIABLE_VALUE\n"), std::string::npos) << out;
  auto manager =
      CheckpointManager::Create(checkpoint, dir_ + "/managed", {.max_to_keep = 1}).value();
  ASSERT_TRUE(manager->Save(*session).ok());
  ASSERT_TRUE(manager->Save(*session).ok());
  out = Check(dir_ + "/managed");
  EXPECT_NE(out.find("state: model_checkpoint_path \"ckpt-2\", all [\"ckpt-2\"], timestamps 1"),
            std::string::npos)
      << out;
}

TEST_F(ReaderCheckTest, AsyncShardedSaveDecodes) {
  Scope scope = Scope::NewRootScope();
  BuildAndTrain(scope, "/job:worker/task:");  // a data file per task
  std::string path =
      checkpoint_->Save(dir_ + "/async/ckpt", *session_, {.durable = true, .async = true}).value();
  CKFLOW_ASSERT_OK(checkpoint_->Sync());
  std::string out = Check(dir_ + "/async");
  for (const char* expected :
       {"num_shards 2\n", "  save_counter  int64[]", "every key in the bundle",
        "state: model_checkpoint_path \"ckpt-1\""}) {
    EXPECT_NE(out.find(expected), std::string::npos) << expected << "\n" << out;
  }
  EXPECT_EQ(path, dir_ + "/async/ckpt-1");
}

TEST_F(ReaderCheckTest, SaveOverSeveralDataFilesDecodes) {
  Scope scope = Scope::NewRootScope();
  BuildAndTrain(scope);
  for (bool async : {false, true}) {
    const std::string dir = dir_ + (async ? "/async" : "/sync");
    checkpoint_->Save(dir + "/ckpt", *session_, {.async = async, .files_per_device = 3}).value();
    CKFLOW_ASSERT_OK(checkpoint_->Sync());
    std::string out = Check(dir);
    for (const char* expected : {"num_shards 3\n", "\n  optimizer\n", "every key in the bundle",
                                 "  model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE\n"}) {
      EXPECT_NE(out.find(expected), std::string::npos) << expected << "\n" << out;
    }
  }
}

}  // namespace
}  // namespace ckflow
