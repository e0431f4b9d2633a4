// Checkpoints that heal (checkpoint_health.h): a damaged checkpoint is told
// apart from a whole one and named with why; a restart falls back to the
// newest whole checkpoint; a directory's health is reported and repaired
// without deleting a checkpoint.

#include "checkpoint/checkpoint_health.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>

#include "base/logging.h"
#include "bundle/bundle_format.h"
#include "bundle/checkpoint_state.h"
#include "checkpoint/checkpoint_management.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/checkpoint/stepped_model.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

namespace stdfs = std::filesystem;
using testing::SteppedModel;

std::string Ckpt(const std::string& dir, int64_t n) { return dir + "/ckpt-" + std::to_string(n); }
std::string Data(const std::string& prefix) { return DataFilename(prefix, 0, 1); }

// Captures the log while it lives.
class LogCapture {
 public:
  LogCapture()
      : previous_(SetLogSink([this](LogSeverity, std::string_view message) {
          std::lock_guard<std::mutex> lock(mu_);
          text_ += std::string(message) + "\n";
        })) {}
  ~LogCapture() { SetLogSink(previous_); }
  std::string text() {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  std::mutex mu_;
  std::string text_;
  LogSink previous_;
};

// A directory with checkpoints ckpt-1..ckpt-`last` of a SteppedModel, each
// holding its step's values, saved by a manager that keeps them all.
std::string SavedDirectory(int64_t last, const std::string& mode = "sync") {
  const std::string dir = testing::NewTempDir("health");
  StatusOr<std::unique_ptr<SteppedModel>> model = SteppedModel::Create();
  EXPECT_TRUE(model.ok()) << model.status();
  StatusOr<SaveOptions> options = testing::SaveModeOptions(mode);
  EXPECT_TRUE(options.ok());
  auto manager = CheckpointManager::Create((*model)->checkpoint(), dir,
                                           {.max_to_keep = std::nullopt, .save_options = *options});
  EXPECT_TRUE(manager.ok()) << manager.status();
  for (int64_t step = 1; step <= last; ++step) {
    EXPECT_TRUE((*model)->SetStep(step).ok());
    EXPECT_TRUE((*manager)->Save((*model)->session(), step).ok());
  }
  EXPECT_TRUE((*model)->checkpoint().Sync().ok());
  return dir;
}

void Truncate(const std::string& path, uintmax_t size) { stdfs::resize_file(path, size); }

void FlipByte(const std::string& path, size_t at) {
  std::string bytes = testing::ReadFileOrDie(path);
  ASSERT_LT(at, bytes.size());
  bytes[at] ^= 0x20;
  testing::WriteFileOrDie(path, bytes);
}

// ------------------------------------------------------------ one checkpoint

TEST(CheckCheckpoint, NamesWhatIsWrongWithADamagedCheckpoint) {
  const std::string dir = SavedDirectory(1);
  const std::string prefix = Ckpt(dir, 1);
  CKFLOW_EXPECT_OK(CheckCheckpoint(prefix));
  CKFLOW_EXPECT_OK(CheckCheckpoint(prefix, CheckpointVerify::kChecksums));

  // A flipped bit in a value: the files look whole; the checksums do not.
  const std::string data = testing::ReadFileOrDie(Data(prefix));
  FlipByte(Data(prefix), data.size() - 1);
  CKFLOW_EXPECT_OK(CheckCheckpoint(prefix, CheckpointVerify::kFiles));
  Status crc = CheckCheckpoint(prefix, CheckpointVerify::kChecksums);
  EXPECT_TRUE(IsDataLoss(crc)) << crc;
  EXPECT_NE(crc.ToString().find("key '"), std::string::npos) << crc;
  testing::WriteFileOrDie(Data(prefix), data);

  // Cut short: the key that needs the missing bytes is named.
  Truncate(Data(prefix), data.size() / 2);
  Status cut = CheckCheckpoint(prefix);
  EXPECT_TRUE(IsDataLoss(cut)) << cut;
  EXPECT_NE(cut.ToString().find("truncated"), std::string::npos) << cut;
  EXPECT_NE(cut.ToString().find(Data(prefix)), std::string::npos) << cut;
  EXPECT_NE(cut.ToString().find("key '"), std::string::npos) << cut;

  // Lost.
  stdfs::remove(Data(prefix));
  Status lost = CheckCheckpoint(prefix);
  EXPECT_TRUE(IsNotFound(lost)) << lost;
  EXPECT_NE(lost.ToString().find(Data(prefix)), std::string::npos) << lost;
  CKFLOW_EXPECT_OK(CheckCheckpoint(prefix, CheckpointVerify::kNone));

  // An index that is not one, and none at all.
  testing::WriteFileOrDie(Data(prefix), data);
  testing::WriteFileOrDie(IndexFilename(prefix), "not an index");
  EXPECT_TRUE(IsDataLoss(CheckCheckpoint(prefix))) << CheckCheckpoint(prefix);
  stdfs::remove(IndexFilename(prefix));
  Status no_index = CheckCheckpoint(prefix);
  EXPECT_TRUE(IsNotFound(no_index)) << no_index;
  EXPECT_NE(no_index.ToString().find(IndexFilename(prefix)), std::string::npos) << no_index;
}

TEST(CheckCheckpoint, ChecksEveryDataFileOfAShardedCheckpoint) {
  const std::string dir = SavedDirectory(1, "sharded");
  const std::string prefix = Ckpt(dir, 1);
  CKFLOW_ASSERT_OK(CheckCheckpoint(prefix, CheckpointVerify::kChecksums));
  const std::string last = DataFilename(prefix, 2, 3);
  ASSERT_TRUE(stdfs::exists(last));
  stdfs::remove(last);
  Status lost = CheckCheckpoint(prefix);
  EXPECT_TRUE(IsNotFound(lost)) << lost;
  EXPECT_NE(lost.ToString().find("data file 3 of 3"), std::string::npos) << lost;
}

// ------------------------------------------------------------ falling back

TEST(LatestGoodCheckpoint, SkipsDamagedCheckpointsNewestFirstAndSaysWhy) {
  const std::string dir = SavedDirectory(3);
  EXPECT_EQ(LatestGoodCheckpoint(dir), Ckpt(dir, 3));
  Truncate(Data(Ckpt(dir, 3)), 1);
  stdfs::remove(IndexFilename(Ckpt(dir, 2)));
  LogCapture log;
  std::vector<SkippedCheckpoint> skipped;
  EXPECT_EQ(LatestGoodCheckpoint(dir, {.skipped = &skipped}), Ckpt(dir, 1));
  // TensorFlow's rule is unchanged beside it.
  EXPECT_EQ(LatestCheckpoint(dir), Ckpt(dir, 3));
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_EQ(skipped[0].path, Ckpt(dir, 3));
  EXPECT_TRUE(IsDataLoss(skipped[0].why)) << skipped[0].why;
  EXPECT_EQ(skipped[1].path, Ckpt(dir, 2));
  EXPECT_TRUE(IsNotFound(skipped[1].why)) << skipped[1].why;
  EXPECT_NE(log.text().find("skipping checkpoint '" + Ckpt(dir, 3) + "'"), std::string::npos)
      << log.text();

  stdfs::remove(Data(Ckpt(dir, 1)));
  EXPECT_EQ(LatestGoodCheckpoint(dir), std::nullopt);
  EXPECT_EQ(LatestGoodCheckpoint(testing::NewTempDir("empty")), std::nullopt);
}

// A new program over `dir`, as a restarted job makes one: the model and
// its manager, nothing restored yet.
struct Restarted {
  std::unique_ptr<SteppedModel> model;
  std::unique_ptr<CheckpointManager> manager;
};
Restarted Restart(const std::string& dir, CheckpointVerify verify = CheckpointVerify::kFiles) {
  Restarted r;
  StatusOr<std::unique_ptr<SteppedModel>> model = SteppedModel::Create();
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return r;
  r.model = *std::move(model);
  auto manager =
      CheckpointManager::Create(r.model->checkpoint(), dir, {.max_to_keep = 5, .verify = verify});
  EXPECT_TRUE(manager.ok()) << manager.status();
  if (manager.ok()) r.manager = *std::move(manager);
  return r;
}

TEST(RestoreOrInitialize, FallsBackToTheNewestWholeCheckpoint) {
  const std::string dir = SavedDirectory(3);
  Truncate(Data(Ckpt(dir, 3)), 3);
  auto [model, manager] = Restart(dir);
  ASSERT_NE(manager, nullptr);
  LogCapture log;
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<std::string> restored,
                              manager->RestoreOrInitialize(model->session()));
  EXPECT_EQ(restored, Ckpt(dir, 2));
  CKFLOW_EXPECT_OK(model->CheckSessionHoldsStep(2));
  ASSERT_EQ(manager->skipped_on_restore().size(), 1u);
  EXPECT_EQ(manager->skipped_on_restore()[0].path, Ckpt(dir, 3));
  EXPECT_NE(log.text().find("truncated"), std::string::npos) << log.text();

  // The next save replaces the damaged checkpoint with a whole one.
  CKFLOW_ASSERT_OK(model->SetStep(3));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string saved, manager->Save(model->session(), 3));
  EXPECT_EQ(saved, Ckpt(dir, 3));
  CKFLOW_EXPECT_OK(SteppedModel::CheckHoldsStep(saved, 3));
}

TEST(RestoreOrInitialize, WithoutVerificationFailsAsTensorFlowDoes) {
  const std::string dir = SavedDirectory(2);
  Truncate(Data(Ckpt(dir, 2)), 3);
  auto [model, manager] = Restart(dir, CheckpointVerify::kNone);
  ASSERT_NE(manager, nullptr);
  StatusOr<std::optional<std::string>> restored = manager->RestoreOrInitialize(model->session());
  EXPECT_FALSE(restored.ok());
  EXPECT_TRUE(manager->skipped_on_restore().empty());
}

TEST(RestoreOrInitialize, InitializesWhenNoCheckpointIsWholeAndSaysSo) {
  const std::string dir = SavedDirectory(2);
  stdfs::remove(Data(Ckpt(dir, 1)));
  stdfs::remove(Data(Ckpt(dir, 2)));
  auto [model, manager] = Restart(dir);
  ASSERT_NE(manager, nullptr);
  LogCapture log;
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<std::string> restored,
                              manager->RestoreOrInitialize(model->session()));
  EXPECT_EQ(restored, std::nullopt);
  EXPECT_EQ(manager->skipped_on_restore().size(), 2u);
  EXPECT_NE(log.text().find("no whole checkpoint"), std::string::npos) << log.text();
}

// ------------------------------------------------------------ a directory

bool Exists(const std::string& path) { return stdfs::exists(path); }

TEST(CheckpointDirectory, AWholeDirectoryIsClean) {
  const std::string dir = SavedDirectory(3);
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      CheckpointDirectoryHealth health,
      CheckCheckpointDirectory(dir, {.verify = CheckpointVerify::kChecksums}));
  EXPECT_TRUE(health.clean());
  ASSERT_EQ(health.checkpoints.size(), 3u);
  EXPECT_TRUE(health.checkpoints[2].latest);
  EXPECT_GT(health.checkpoints[0].bytes, 0u);
  EXPECT_TRUE(IsNotFound(CheckCheckpointDirectory(dir + "/nope").status()));
}

TEST(CheckpointDirectory, RepairListsOnlyWholeCheckpointsAndDeletesNone) {
  const std::string dir = SavedDirectory(3);
  Truncate(Data(Ckpt(dir, 3)), 2);
  CKFLOW_ASSERT_OK_AND_ASSIGN(CheckpointDirectoryHealth health, CheckCheckpointDirectory(dir));
  EXPECT_FALSE(health.clean());
  ASSERT_EQ(health.checkpoints.size(), 3u);
  EXPECT_TRUE(IsDataLoss(health.checkpoints[2].status)) << health.checkpoints[2].status;
  CKFLOW_ASSERT_OK_AND_ASSIGN(CheckpointRepair repair, RepairCheckpointDirectory(health));
  EXPECT_TRUE(repair.state_rewritten);
  EXPECT_EQ(LatestCheckpoint(dir), Ckpt(dir, 2));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<CheckpointStateData> state, ReadCheckpointState(dir));
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->all_model_checkpoint_paths, (std::vector<std::string>{"ckpt-1", "ckpt-2"}));
  EXPECT_EQ(state->all_model_checkpoint_timestamps.size(), 2u);
  EXPECT_TRUE(Exists(IndexFilename(Ckpt(dir, 3))));  // never deleted
  // A manager picks the repaired directory up.
  auto [model, manager] = Restart(dir);
  ASSERT_NE(manager, nullptr);
  EXPECT_EQ(manager->checkpoints(), (std::vector<std::string>{Ckpt(dir, 1), Ckpt(dir, 2)}));
}

TEST(CheckpointDirectory, FindsAStateFileThatNamesWhatIsNotThere) {
  const std::string dir = SavedDirectory(2);
  CKFLOW_ASSERT_OK(
      WriteCheckpointState(dir, {.model_checkpoint_path = "ckpt-1",
                                 .all_model_checkpoint_paths = {"ckpt-1", "ckpt-2", "ckpt-9"}}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(CheckpointDirectoryHealth health, CheckCheckpointDirectory(dir));
  EXPECT_FALSE(health.clean());
  std::string problems;
  for (const std::string& p : health.state_problems) problems += p + "\n";
  EXPECT_NE(problems.find("is not the last it lists"), std::string::npos) << problems;
  EXPECT_NE(problems.find("ckpt-9', which does not exist"), std::string::npos) << problems;
  CKFLOW_ASSERT_OK(RepairCheckpointDirectory(health).status());
  EXPECT_EQ(LatestCheckpoint(dir), Ckpt(dir, 2));
  CKFLOW_ASSERT_OK_AND_ASSIGN(CheckpointDirectoryHealth after, CheckCheckpointDirectory(dir));
  EXPECT_TRUE(after.clean());
}

TEST(CheckpointDirectory, RebuildsAnUnreadableStateFileFromTheCheckpoints) {
  const std::string dir = SavedDirectory(3);
  testing::WriteFileOrDie(dir + "/checkpoint", "this is { not a state");
  EXPECT_EQ(LatestCheckpoint(dir), std::nullopt);
  CKFLOW_ASSERT_OK_AND_ASSIGN(CheckpointDirectoryHealth health, CheckCheckpointDirectory(dir));
  ASSERT_EQ(health.state_problems.size(), 1u);
  EXPECT_EQ(health.checkpoints.size(), 3u);  // found by their index files
  CKFLOW_ASSERT_OK(RepairCheckpointDirectory(health).status());
  EXPECT_EQ(LatestCheckpoint(dir), Ckpt(dir, 3));
}

TEST(CheckpointDirectory, RemovesTheStateFileWhenNoCheckpointIsWhole) {
  const std::string dir = SavedDirectory(1);
  stdfs::remove(Data(Ckpt(dir, 1)));
  CKFLOW_ASSERT_OK_AND_ASSIGN(CheckpointDirectoryHealth health, CheckCheckpointDirectory(dir));
  CKFLOW_ASSERT_OK_AND_ASSIGN(CheckpointRepair repair, RepairCheckpointDirectory(health));
  EXPECT_TRUE(repair.state_removed);
  EXPECT_FALSE(Exists(dir + "/checkpoint"));
  EXPECT_TRUE(Exists(IndexFilename(Ckpt(dir, 1))));
}

TEST(CheckpointDirectory, FindsAndRemovesOnlyTheLeftoversOfDeadSaves) {
  const std::string dir = SavedDirectory(2);
  // What a save killed at different steps leaves: its parts' directory, a
  // merged index not yet renamed, a data file whose index never came, a
  // state file not yet renamed.
  stdfs::create_directories(dir + "/ckpt-3_temp");
  testing::WriteFileOrDie(dir + "/ckpt-3_temp/part-00000-of-00001.data-00000-of-00001", "x");
  testing::WriteFileOrDie(dir + "/ckpt-3.index.tempstate123", "y");
  testing::WriteFileOrDie(dir + "/ckpt-4.data-00000-of-00001", "zz");
  testing::WriteFileOrDie(dir + "/checkpoint.tmp0123456789abcdef0123456789abcdef", "w");
  testing::WriteFileOrDie(dir + "/notes.txt", "mine");
  CKFLOW_ASSERT_OK_AND_ASSIGN(CheckpointDirectoryHealth health, CheckCheckpointDirectory(dir));
  EXPECT_FALSE(health.clean());
  EXPECT_TRUE(health.state_problems.empty());
  EXPECT_EQ(health.debris,
            (std::vector<std::string>{"checkpoint.tmp0123456789abcdef0123456789abcdef",
                                      "ckpt-3.index.tempstate123", "ckpt-3_temp",
                                      "ckpt-4.data-00000-of-00001"}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(CheckpointRepair repair, RepairCheckpointDirectory(health));
  EXPECT_FALSE(repair.state_rewritten);
  EXPECT_EQ(repair.debris_files, 4);
  CKFLOW_ASSERT_OK_AND_ASSIGN(CheckpointDirectoryHealth after, CheckCheckpointDirectory(dir));
  EXPECT_TRUE(after.clean());
  EXPECT_TRUE(Exists(dir + "/notes.txt"));
  CKFLOW_EXPECT_OK(SteppedModel::CheckHoldsStep(Ckpt(dir, 2), 2));
}

}  // namespace
}  // namespace ckflow
