#include "bundle/checkpoint_state.h"

#include <gtest/gtest.h>

#include "tests/bundle/bundle_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

// Every golden folder's state file against TensorFlow's reading of it is in
// golden_checkpoint_test.cc; here one written by tf.train.Checkpoint.save.
TEST(CheckpointState, ReadsTensorFlowsStateFile) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      std::optional<CheckpointStateData> state,
      ReadCheckpointState(testing::TestDataDir() + "/eager_optimizer_slots"));
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->model_checkpoint_path, "ckpt-1");
  EXPECT_EQ(state->all_model_checkpoint_paths, std::vector<std::string>{"ckpt-1"});
  EXPECT_TRUE(state->all_model_checkpoint_timestamps.empty());
}

TEST(CheckpointState, MissingFileIsNullopt) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<CheckpointStateData> state,
                              ReadCheckpointState(testing::NewTempDir("state")));
  EXPECT_FALSE(state.has_value());
}

TEST(CheckpointState, WritesTensorFlowsTextFormatAtomically) {
  const std::string dir = testing::NewTempDir("state");
  CheckpointStateData state;
  state.model_checkpoint_path = "ckpt-2";
  state.all_model_checkpoint_paths = {"ckpt-1", "ckpt-2"};
  state.all_model_checkpoint_timestamps = {1700000000.5, 1700000060.25};
  state.last_preserved_timestamp = 1699999999.5;
  CKFLOW_ASSERT_OK(WriteCheckpointState(dir, state));
  EXPECT_EQ(testing::ReadFileOrDie(dir + "/checkpoint"),
            "model_checkpoint_path: \"ckpt-2\"\n"
            "all_model_checkpoint_paths: \"ckpt-1\"\n"
            "all_model_checkpoint_paths: \"ckpt-2\"\n"
            "all_model_checkpoint_timestamps: 1700000000.5\n"
            "all_model_checkpoint_timestamps: 1700000060.25\n"
            "last_preserved_timestamp: 1699999999.5\n");
  EXPECT_EQ(testing::ListDir(dir), std::vector<std::string>{"checkpoint"});  // no temp left
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<CheckpointStateData> read, ReadCheckpointState(dir));
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->all_model_checkpoint_paths, state.all_model_checkpoint_paths);
  EXPECT_EQ(read->all_model_checkpoint_timestamps, state.all_model_checkpoint_timestamps);
  EXPECT_EQ(read->last_preserved_timestamp, state.last_preserved_timestamp);
}

TEST(CheckpointState, QuotesAreEscaped) {
  const std::string dir = testing::NewTempDir("state");
  CheckpointStateData state;
  state.model_checkpoint_path = "we\"ird\\name";
  CKFLOW_ASSERT_OK(WriteCheckpointState(dir, state));
  EXPECT_EQ(testing::ReadFileOrDie(dir + "/checkpoint"),
            "model_checkpoint_path: \"we\\\"ird\\\\name\"\n");
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<CheckpointStateData> read, ReadCheckpointState(dir));
  EXPECT_EQ(read->model_checkpoint_path, state.model_checkpoint_path);
}

TEST(CheckpointState, FailedWriteKeepsTheOldFile) {
  const std::string dir = testing::NewTempDir("state");
  CheckpointStateData old_state;
  old_state.model_checkpoint_path = "ckpt-1";
  CKFLOW_ASSERT_OK(WriteCheckpointState(dir, old_state));
  CheckpointStateData new_state;
  new_state.model_checkpoint_path = "ckpt-2";
  for (int fail_at = 1;; ++fail_at) {
    testing::FaultyFileSystem fs(fail_at);
    Status s = WriteCheckpointState(dir, new_state, &fs);
    if (!fs.failed()) break;
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(testing::ListDir(dir), std::vector<std::string>{"checkpoint"});
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<CheckpointStateData> read, ReadCheckpointState(dir));
    EXPECT_EQ(read->model_checkpoint_path, "ckpt-1");
  }
}

TEST(CheckpointState, UnparsableFileIsDataLossNamingIt) {
  const std::string dir = testing::NewTempDir("state");
  testing::WriteFileOrDie(dir + "/checkpoint", "model_checkpoint_path: \"a\"\nbogus_field: 3\n");
  Status s = ReadCheckpointState(dir).status();
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kDataLoss, dir + "/checkpoint"));
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kDataLoss, "line 2"));
}

TEST(ResolveCheckpointPath, AcceptsPrefixIndexDataFileAndDirectory) {
  const std::string dir = testing::TestDataDir() + "/tf1_saver_sharded";
  const std::string prefix = dir + "/model.ckpt-1000";
  struct Case {
    std::string path, expected;
  };
  const Case cases[] = {
      {prefix, prefix}, {prefix + ".index", prefix}, {prefix + ".data-00001-of-00002", prefix},
      {dir, prefix},    {dir + "/", prefix},
  };
  for (const Case& c : cases) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::string resolved, ResolveCheckpointPath(c.path));
    EXPECT_EQ(resolved, c.expected) << c.path;
  }
}

TEST(ResolveCheckpointPath, DirectoryErrorsNameTheProblem) {
  const std::string dir = testing::NewTempDir("resolve");
  Status no_state = ResolveCheckpointPath(dir).status();
  EXPECT_THAT(no_state, testing::StatusIs(StatusCode::kNotFound, "state file"));
  CheckpointStateData state;
  state.model_checkpoint_path = "ckpt-9";
  CKFLOW_ASSERT_OK(WriteCheckpointState(dir, state));
  Status no_index = ResolveCheckpointPath(dir).status();
  EXPECT_THAT(no_index, testing::StatusIs(StatusCode::kNotFound, "ckpt-9.index"));
}

}  // namespace
}  // namespace ckflow
