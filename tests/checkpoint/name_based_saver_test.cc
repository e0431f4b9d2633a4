// TensorFlow 1's name-based Saver: the scenarios of TensorFlow's
// python/training/saver_test.py (save and restore by name, var_list as a
// list or a map, global_step, max_to_keep, keep_checkpoint_every_n_hours,
// sharded), plus restoring TensorFlow's own TF1 checkpoint and an
// object-based checkpoint through it.
#include "checkpoint/name_based_saver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "bundle/checkpoint_state.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "ops/partitioned_variables.h"
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
using testing::SetValue;
using testing::StatusIs;
using testing::ValueOf;

class NameBasedSaverTest : public ::testing::Test {
 protected:
  std::vector<std::string> Files() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string dir_ = testing::NewTempDir("name_saver");
};

Tensor Filled(const TensorShape& shape, float value) {
  Tensor t(DT_FLOAT, shape);
  for (float& x : t.flat<float>()) x = value;
  return t;
}

// saver_test.testBasic: save v0 and v1 by name, change them, restore.
TEST_F(NameBasedSaverTest, SavesByNameWithoutAnObjectGraphAndRestores) {
  Scope scope = Scope::NewRootScope();
  auto v0 = CountingVariable(scope, "v0", {2}, 10);
  auto v1 = CountingVariable(scope, "v1", {3}, 20);
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver, NameBasedSaver::Create(scope, {v0, v1}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, saver->Save(*session, dir_ + "/model.ckpt"));
  EXPECT_EQ(path, dir_ + "/model.ckpt");

  CKFLOW_ASSERT_OK_AND_ASSIGN(auto reader, BundleReader::Open(path));
  std::vector<std::string> keys;
  for (const BundleEntry& e : reader->entries()) keys.push_back(e.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"v0", "v1"}));  // no _CHECKPOINTABLE_OBJECT_GRAPH
  EXPECT_EQ(reader->num_shards(), 1);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<CheckpointStateData> state, ReadCheckpointState(dir_));
  EXPECT_EQ(state->model_checkpoint_path, path);
  EXPECT_EQ(state->all_model_checkpoint_paths, std::vector<std::string>{path});

  const Tensor saved0 = ValueOf(*session, *v0);
  SetValue(*session, *v0, Filled(TensorShape({2}), -1));
  SetValue(*session, *v1, Filled(TensorShape({3}), -1));
  CKFLOW_ASSERT_OK(saver->Restore(*session, path));
  EXPECT_TRUE(SameTensor(ValueOf(*session, *v0), saved0));
  EXPECT_EQ(ValueOf(*session, *v1).flat<float>()[2], 22.0f);

  // A fresh program restores into uninitialized variables of the same names.
  Scope scope2 = Scope::NewRootScope();
  auto w0 = CountingVariable(scope2, "v0", {2}, 0);
  auto session2 = NewSession(scope2);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver2, NameBasedSaver::Create(scope2, {w0}));
  CKFLOW_ASSERT_OK(saver2->Restore(*session2, path));
  EXPECT_TRUE(SameTensor(ValueOf(*session2, *w0), saved0));
}

// saver_test.testSaveRestoreWithDict: var_list as a dict keys the values by
// the names given, whatever the variables are called.
TEST_F(NameBasedSaverTest, AMapKeysValuesByTheNamesGiven) {
  Scope scope = Scope::NewRootScope();
  auto a = CountingVariable(scope, "a", {2}, 1);
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver,
                              NameBasedSaver::CreateFromMap(scope, {{"layer/weights", a}}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, saver->Save(*session, dir_ + "/ckpt"));
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto reader, BundleReader::Open(path));
  EXPECT_TRUE(reader->Contains("layer/weights"));
  EXPECT_FALSE(reader->Contains("a"));

  Scope scope2 = Scope::NewRootScope();
  auto b = CountingVariable(scope2, "b", {2}, 100);
  auto session2 = NewSession(scope2);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver2,
                              NameBasedSaver::CreateFromMap(scope2, {{"layer/weights", b}}));
  CKFLOW_ASSERT_OK(saver2->Restore(*session2, path));
  EXPECT_TRUE(SameTensor(ValueOf(*session2, *b), ValueOf(*session, *a)));
}

// saver_test: "At least two variables have the same name"; an empty
// var_list in an empty graph has nothing to save.
TEST_F(NameBasedSaverTest, RefusesDuplicateNamesAndNothingToSave) {
  Scope scope = Scope::NewRootScope();
  EXPECT_EQ(NameBasedSaver::Create(scope, {}).status().code(), StatusCode::kInvalidArgument);
  auto a = CountingVariable(scope, "a", {2}, 1);
  auto dup = NameBasedSaver::Create(scope, {a, a});
  EXPECT_EQ(dup.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dup.status().message()),
              HasSubstr("at least two variables have the same name: a"));
  auto null = NameBasedSaver::CreateFromMap(scope, {{"x", std::shared_ptr<Variable>()}});
  EXPECT_EQ(null.status().code(), StatusCode::kInvalidArgument);
  // With no var_list: every variable of the graph.
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto all, NameBasedSaver::Create(scope, {}));
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, all->Save(*session, dir_ + "/all"));
  EXPECT_TRUE(BundleReader::Open(path).value()->Contains("a"));
}

// save(sess, path, global_step=...): "<path>-<step>", from a number or from
// the step variable; max_to_keep deletes the oldest (saver_test's
// MaxToKeepTest.testNonSharded), and the state file lists what is kept.
TEST_F(NameBasedSaverTest, GlobalStepSuffixAndMaxToKeep) {
  Scope scope = Scope::NewRootScope();
  auto v = CountingVariable(scope, "v", {2}, 1);
  auto step =
      Variable::Create(scope, "global_step", ops::Const(scope, int64_t{7}), {.trainable = false});
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver, NameBasedSaver::Create(scope, {v}, {.max_to_keep = 2}));
  const std::string base = dir_ + "/model.ckpt";
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string s1, saver->Save(*session, base, *step));
  EXPECT_EQ(s1, base + "-7");
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string s2, saver->Save(*session, base, 8));
  EXPECT_EQ(saver->last_checkpoints(), (std::vector<std::string>{s1, s2}));
  // Saving s1 again moves it to the end.
  CKFLOW_ASSERT_OK(saver->Save(*session, base, 7).status());
  EXPECT_EQ(saver->last_checkpoints(), (std::vector<std::string>{s2, s1}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string s3, saver->Save(*session, base, 9));
  EXPECT_EQ(saver->last_checkpoints(), (std::vector<std::string>{s1, s3}));
  EXPECT_FALSE(CheckpointExists(s2));
  EXPECT_TRUE(CheckpointExists(s1));
  EXPECT_TRUE(CheckpointExists(s3));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<CheckpointStateData> state, ReadCheckpointState(dir_));
  EXPECT_EQ(state->model_checkpoint_path, s3);
  EXPECT_EQ(state->all_model_checkpoint_paths, (std::vector<std::string>{s1, s3}));
  EXPECT_EQ(LatestCheckpoint(dir_), s3);
  // write_state=false writes the files only.
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string s4, saver->Save(*session, base, 10, false));
  EXPECT_TRUE(CheckpointExists(s4));
  EXPECT_EQ(LatestCheckpoint(dir_), s3);
}

// KeepCheckpointEveryNHoursTest: with max_to_keep=2 and N=0.7 hours, a
// checkpoint leaving the window is kept if it is more than N hours after
// the saver started (and then N hours after the last one so kept).
TEST_F(NameBasedSaverTest, KeepsOneCheckpointEveryNHours) {
  Scope scope = Scope::NewRootScope();
  auto v = CountingVariable(scope, "v", {2}, 1);
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  double now = 1000;
  NameBasedSaver::Options options{.max_to_keep = 2, .keep_checkpoint_every_n_hours = 0.7};
  options.clock = [&now] { return now; };
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver, NameBasedSaver::Create(scope, {v}, options));
  const std::string base = dir_ + "/s";
  for (auto [step, time] :
       std::vector<std::pair<int, double>>{{1, 1100}, {2, 1200}, {3, 3600}, {4, 3700}, {5, 3800}}) {
    now = time;
    CKFLOW_ASSERT_OK(saver->Save(*session, base, step).status());
  }
  // s1 (1100) and s2 (1200) left the window before 1000 + 2520; s3 (3600)
  // after it, so it stays.
  EXPECT_FALSE(CheckpointExists(base + "-1"));
  EXPECT_FALSE(CheckpointExists(base + "-2"));
  EXPECT_TRUE(CheckpointExists(base + "-3"));
  EXPECT_EQ(saver->last_checkpoints(), (std::vector<std::string>{base + "-4", base + "-5"}));
}

// sharded=True: one data file per device; unsharded: one file.
TEST_F(NameBasedSaverTest, ShardedWritesAFilePerDevice) {
  Scope scope = Scope::NewRootScope();
  auto a = CountingVariable(scope, "a", {2}, 1, {.device = "/cpu:0"});
  auto b = CountingVariable(scope, "b", {2}, 5, {.device = "/cpu:1"});
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto sharded,
                              NameBasedSaver::Create(scope, {a, b}, {.sharded = true}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string s, sharded->Save(*session, dir_ + "/sharded"));
  EXPECT_EQ(BundleReader::Open(s).value()->num_shards(), 2);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto single, NameBasedSaver::Create(scope, {a, b}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string u, single->Save(*session, dir_ + "/single"));
  EXPECT_EQ(BundleReader::Open(u).value()->num_shards(), 1);
  SetValue(*session, *b, Filled(TensorShape({2}), 0));
  CKFLOW_ASSERT_OK(single->Restore(*session, s));  // either restores into either
  EXPECT_EQ(ValueOf(*session, *b).flat<float>()[1], 6.0f);
}

// A checkpoint TensorFlow 1's Saver wrote (two shards, Adam slots): values
// restore by their names.
TEST_F(NameBasedSaverTest, RestoresTensorFlowsOwnTf1Checkpoint) {
  const std::string path = testing::GoldenPrefix("tf1_saver_sharded");
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto reader, BundleReader::Open(path));
  Scope scope = Scope::NewRootScope();
  std::map<std::string, std::shared_ptr<Variable>> vars;
  for (const BundleEntry& e : reader->entries()) {
    if (e.dtype != DT_FLOAT || vars.size() == 5) continue;
    vars[e.key] = Variable::Create(scope, "v" + std::to_string(vars.size()), DT_FLOAT, e.shape,
                                   initializers::Zeros());
  }
  ASSERT_EQ(vars.size(), 5u);
  auto session = NewSession(scope);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver, NameBasedSaver::CreateFromMap(scope, vars));
  CKFLOW_ASSERT_OK(saver->Restore(*session, path));
  for (const auto& [key, v] : vars) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor expected, reader->Lookup(key));
    EXPECT_TRUE(SameTensor(ValueOf(*session, *v), expected)) << key;
  }
}

// saver_test's object-based compatibility: a name-based Saver restores an
// object-based checkpoint by the variable names its object graph records.
TEST_F(NameBasedSaverTest, RestoresAnObjectBasedCheckpointByItsVariableNames) {
  std::string path;
  Tensor kernel_value;
  {
    Scope scope = Scope::NewRootScope();
    auto model = std::make_shared<Module>();
    auto kernel = model->Track("kernel", CountingVariable(scope, "dense/kernel", {2, 3}, 5));
    Checkpoint checkpoint(scope, {{"model", model}});
    auto session = NewSession(scope);
    RunOrFail(*session, {GlobalVariablesInitializer(scope)});
    CKFLOW_ASSERT_OK_AND_ASSIGN(path, checkpoint.Save(dir_ + "/object", *session));
    kernel_value = ValueOf(*session, *kernel);
  }
  Scope scope = Scope::NewRootScope();
  auto kernel = CountingVariable(scope, "dense/kernel", {2, 3}, 0);
  auto other = CountingVariable(scope, "other", {1}, 0);
  auto session = NewSession(scope);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver, NameBasedSaver::Create(scope, {kernel}));
  CKFLOW_ASSERT_OK(saver->Restore(*session, path));
  EXPECT_TRUE(SameTensor(ValueOf(*session, *kernel), kernel_value));
  // A name in neither the bundle nor the object graph: NotFound naming it.
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto missing, NameBasedSaver::Create(scope, {other}));
  Status s = missing->Restore(*session, path);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("Key other not found in checkpoint"));
}

TEST_F(NameBasedSaverTest, AShapeMismatchIsInvalidArgumentNamingTheKey) {
  Scope scope = Scope::NewRootScope();
  auto v = CountingVariable(scope, "v", {2}, 1);
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver, NameBasedSaver::Create(scope, {v}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, saver->Save(*session, dir_ + "/ckpt"));
  Scope scope2 = Scope::NewRootScope();
  auto wrong = CountingVariable(scope2, "v", {3}, 1);
  auto session2 = NewSession(scope2);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver2, NameBasedSaver::Create(scope2, {wrong}));
  Status s = saver2->Restore(*session2, path);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("key 'v'"));
}

// Saver(pad_step_number=True): "%s-%08d", so that listings sort by step;
// a step of more digits is written whole.
TEST_F(NameBasedSaverTest, PadStepNumberZeroPadsTheStepToEightDigits) {
  Scope scope = Scope::NewRootScope();
  auto v = CountingVariable(scope, "v", {2}, 1);
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver,
                              NameBasedSaver::Create(scope, {v}, {.pad_step_number = true}));
  const std::string base = dir_ + "/model.ckpt";
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string s42, saver->Save(*session, base, 42));
  EXPECT_EQ(s42, base + "-00000042");
  EXPECT_TRUE(CheckpointExists(s42));
  EXPECT_EQ(LatestCheckpoint(dir_), s42);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string big, saver->Save(*session, base, 1234567890));
  EXPECT_EQ(big, base + "-1234567890");
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string negative, saver->Save(*session, base, -5));
  EXPECT_EQ(negative, base + "--0000005");  // Python's "{:08d}".format(-5)
  CKFLOW_ASSERT_OK(saver->Restore(*session, s42));
  // Unpadded by default.
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto plain, NameBasedSaver::Create(scope, {v}));
  EXPECT_EQ(plain->Save(*session, base, 42).value(), base + "-42");
}

// save(..., latest_filename="latest") keeps its state in <dir>/latest;
// latest_checkpoint(dir, "latest") and get_checkpoint_state read it, the
// default "checkpoint" is never written, and max_to_keep still deletes.
TEST_F(NameBasedSaverTest, LatestFilenameKeepsTheStateInAnotherFile) {
  Scope scope = Scope::NewRootScope();
  auto v = CountingVariable(scope, "v", {2}, 1);
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver, NameBasedSaver::Create(scope, {v}, {.max_to_keep = 1}));
  const std::string base = dir_ + "/model.ckpt";
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string s1, saver->Save(*session, base, 1, true, "latest"));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string s2, saver->Save(*session, base, 2, true, "latest"));
  EXPECT_FALSE(CheckpointExists(s1));
  EXPECT_EQ(Files(), (std::vector<std::string>{"latest", "model.ckpt-2.data-00000-of-00001",
                                               "model.ckpt-2.index"}));
  EXPECT_EQ(LatestCheckpoint(dir_), std::nullopt);
  EXPECT_EQ(LatestCheckpoint(dir_, {.latest_filename = "latest"}), s2);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<CheckpointStateData> state,
                              GetCheckpointState(dir_, nullptr, "latest"));
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->model_checkpoint_path, s2);
  EXPECT_EQ(state->all_model_checkpoint_paths, std::vector<std::string>{s2});
  EXPECT_FALSE(ReadCheckpointState(dir_).value().has_value());
}

// saver_test's testBasicsWithListOfVariables / latest_filename checks: a
// state file name with a directory, or (with no step, unsharded) the save
// path's own name, is a ValueError: InvalidArgument, nothing written.
TEST_F(NameBasedSaverTest, LatestFilenameWithADirectoryOrCollidingIsRefused) {
  Scope scope = Scope::NewRootScope();
  auto v = CountingVariable(scope, "v", {2}, 1);
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver, NameBasedSaver::Create(scope, {v}));
  EXPECT_THAT(
      saver->Save(*session, dir_ + "/model", 1, true, "sub/latest").status(),
      StatusIs(StatusCode::kInvalidArgument, "'latest_filename' must not contain path components"));
  EXPECT_THAT(
      saver->Save(*session, dir_ + "/latest", std::nullopt, true, "latest").status(),
      StatusIs(StatusCode::kInvalidArgument,
               "'latest_filename' collides with 'save_path': 'latest' and '" + dir_ + "/latest'"));
  EXPECT_THAT(saver->Save(*session, dir_ + "/checkpoint").status(),
              StatusIs(StatusCode::kInvalidArgument, "'latest_filename' collides with"));
  EXPECT_TRUE(Files().empty());
  // With a step the names cannot collide.
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path,
                              saver->Save(*session, dir_ + "/latest", 3, true, "latest"));
  EXPECT_EQ(LatestCheckpoint(dir_, {.latest_filename = "latest"}), path);
}

// Saver(var_list=[]) raises "No variables to save" unless allow_empty;
// an empty saver's save writes nothing and returns None (""), its restore
// does nothing, whatever the path.
TEST_F(NameBasedSaverTest, AnEmptySaverNeedsAllowEmptyAndThenDoesNothing) {
  Scope scope = Scope::NewRootScope();
  EXPECT_THAT(NameBasedSaver::Create(scope, {}).status(),
              StatusIs(StatusCode::kInvalidArgument, "No variables to save"));
  EXPECT_THAT(NameBasedSaver::CreateFromMap(scope, {}).status(),
              StatusIs(StatusCode::kInvalidArgument, "No variables to save"));
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto empty, NameBasedSaver::Create(scope, {}, {.allow_empty = true}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto empty_map,
                              NameBasedSaver::CreateFromMap(scope, {}, {.allow_empty = true}));
  auto session = NewSession(scope);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, empty->Save(*session, dir_ + "/model", 5));
  EXPECT_EQ(path, "");
  EXPECT_EQ(empty_map->Save(*session, dir_ + "/model").value(), "");
  EXPECT_TRUE(Files().empty());
  EXPECT_THAT(empty->last_checkpoints(), ::testing::IsEmpty());
  CKFLOW_EXPECT_OK(empty->Restore(*session, ""));
  CKFLOW_EXPECT_OK(empty->Restore(*session, dir_ + "/nothing"));
}

// restore(sess, None) and restore of a path with no checkpoint are
// ValueErrors in TensorFlow: InvalidArgument, in its words.
TEST_F(NameBasedSaverTest, RestoreWithoutACheckpointIsInvalidArgument) {
  Scope scope = Scope::NewRootScope();
  auto v = CountingVariable(scope, "v", {2}, 1);
  auto session = NewSession(scope);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver, NameBasedSaver::Create(scope, {v}));
  EXPECT_THAT(saver->Restore(*session, ""),
              StatusIs(StatusCode::kInvalidArgument, "Can't load save_path when it is None"));
  EXPECT_THAT(saver->Restore(*session, dir_ + "/nothing"),
              StatusIs(StatusCode::kInvalidArgument,
                       "The passed save_path is not a valid checkpoint: " + dir_ + "/nothing"));
  // A directory is not a checkpoint either (TensorFlow's glob would match).
  EXPECT_THAT(saver->Restore(*session, dir_),
              StatusIs(StatusCode::kInvalidArgument, "not a valid checkpoint"));
}

// A V1 checkpoint (Saver(write_version=SaverDef.V1), here TensorFlow 2.21's
// own file): every variable restores by name, a partitioned variable's
// two slices into three parts, LatestCheckpoint follows a state file
// naming the file; a missing name is NotFound, a damaged file DataLoss.
TEST_F(NameBasedSaverTest, RestoresAV1CheckpointTensorFlowWrote) {
  const std::string path = dir_ + "/model.ckpt";
  testing::WriteFileOrDie(path, testing::TfV1CheckpointBytes());
  CKFLOW_ASSERT_OK(UpdateCheckpointState(dir_, path));
  ASSERT_EQ(LatestCheckpoint(dir_), path);

  Scope scope = Scope::NewRootScope();
  auto zeros = [&](const std::string& name, DataType dtype, const TensorShape& shape) {
    return Variable::Create(scope, name, dtype, shape, initializers::Zeros());
  };
  auto kernel = zeros("dense/kernel", DT_FLOAT, TensorShape({2, 3}));
  auto step = zeros("step", DT_INT64, TensorShape());
  auto i32 = zeros("i32", DT_INT32, TensorShape({3}));
  auto f64 = zeros("f64", DT_DOUBLE, TensorShape({2}));
  auto emb = PartitionedVariable::Create(scope, "emb", DT_FLOAT, {5, 2}, initializers::Zeros(),
                                         {.num_shards = 3});
  ASSERT_TRUE(scope.ok()) << scope.status();
  std::vector<std::shared_ptr<Variable>> list = {kernel, step, i32, f64};
  list.insert(list.end(), emb->parts().begin(), emb->parts().end());
  auto session = NewSession(scope);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver, NameBasedSaver::Create(scope, list));
  CKFLOW_ASSERT_OK(saver->Restore(*session, *LatestCheckpoint(dir_)));
  EXPECT_TRUE(SameTensor(ValueOf(*session, *kernel),
                         Tensor::FromVector<float>({-1, -0.5, 0, 0.5, 1, 1.5}, {2, 3})));
  EXPECT_EQ(ValueOf(*session, *step).scalar<int64_t>(), -3);
  EXPECT_TRUE(SameTensor(ValueOf(*session, *i32), Tensor::FromVector<int32_t>({1, -2, 3})));
  EXPECT_TRUE(SameTensor(ValueOf(*session, *f64), Tensor::FromVector<double>({1.5, -2.25})));
  // fixed_size_partitioner(3) of 5 rows: 2, 2, 1.
  EXPECT_TRUE(SameTensor(ValueOf(*session, *emb->parts()[1]),
                         Tensor::FromVector<float>({4.25, 5.25, 6.25, 7.25}, {2, 2})));
  EXPECT_TRUE(SameTensor(ValueOf(*session, *emb->parts()[2]),
                         Tensor::FromVector<float>({8.25, 9.25}, {1, 2})));
  // Again, through the ops the first restore built.
  SetValue(*session, *step, Tensor::Scalar<int64_t>(7));
  CKFLOW_ASSERT_OK(saver->Restore(*session, path));
  EXPECT_EQ(ValueOf(*session, *step).scalar<int64_t>(), -3);

  auto other = zeros("other", DT_FLOAT, TensorShape({1}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto missing, NameBasedSaver::Create(scope, {other}));
  EXPECT_THAT(missing->Restore(*session, path),
              StatusIs(StatusCode::kNotFound, "Key other not found in checkpoint"));
  auto wrong = zeros("i32", DT_INT32, TensorShape({4}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto mismatch,
                              NameBasedSaver::CreateFromMap(scope, {{"i32", wrong}}));
  EXPECT_THAT(mismatch->Restore(*session, path),
              StatusIs(StatusCode::kInvalidArgument, "key 'i32' is int32[3]"));
  std::string damaged = testing::TfV1CheckpointBytes();
  damaged[300] ^= 0x10;
  testing::WriteFileOrDie(path, damaged);
  EXPECT_THAT(saver->Restore(*session, path), StatusIs(StatusCode::kDataLoss, path));
}

// The reader-level check passes on what the saver writes: every entry,
// checksums and all, and no object graph.
TEST_F(NameBasedSaverTest, ReaderLevelCheckPassesOnWhatItWrites) {
  Scope scope = Scope::NewRootScope();
  auto a = CountingVariable(scope, "layer/kernel", {3, 2}, 1, {.device = "/cpu:0"});
  auto b = CountingVariable(scope, "layer/bias", {2}, 5, {.device = "/cpu:1"});
  auto session = NewSession(scope);
  RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver, NameBasedSaver::Create(scope, {a, b}, {.sharded = true}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, saver->Save(*session, dir_ + "/model.ckpt", 3));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string out, testing::CheckBundle(path));
  for (const char* expected : {"num_shards 2\n", "layer/kernel float32[3,2] shard ",
                               "layer/bias float32[2] shard ", "no object graph\n"}) {
    EXPECT_NE(out.find(expected), std::string::npos) << expected << "\n" << out;
  }
}

}  // namespace
}  // namespace ckflow
