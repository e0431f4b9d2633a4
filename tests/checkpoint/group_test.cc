// Group saves and restores (checkpoint/group.h) with threads as the
// members: every member builds its own model, session and Checkpoint, as a
// process under mpirun does (tests/distributed runs the same under mpirun).

#include "checkpoint/group.h"

#include <functional>

#include "base/file_system.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "bundle/checkpoint_state.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "checkpoint/group_internal.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/bundle/testdata_util.h"
#include "tests/checkpoint/group_model.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::GroupModel;
using testing::GroupModelSpec;
using testing::RunGroup;
using testing::StatusIs;
using testing::ThreadMeeting;
using testing::ThreadMember;

std::unique_ptr<GroupModel> MakeModel(CheckpointGroup* group, FileSystem* fs = nullptr,
                                      GroupModelSpec spec = {}) {
  CheckpointOptions options{.file_system = fs};
  options.group.group = group;
  StatusOr<std::unique_ptr<GroupModel>> m = GroupModel::Create(spec, std::move(options));
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

// Saves seed's values from a single-process model into `dir`, as ckpt-1.
void SavePlain(const std::string& dir, uint32_t seed, GroupModelSpec spec = {}) {
  std::unique_ptr<GroupModel> m = MakeModel(nullptr, nullptr, spec);
  ASSERT_NE(m, nullptr);
  CKFLOW_ASSERT_OK(m->Set(seed));
  StatusOr<std::string> saved = m->checkpoint().Save(dir + "/ckpt", m->session());
  ASSERT_TRUE(saved.ok()) << saved.status();
}

TEST(GroupPlacement, BalancedByBytesIsLargestFirstOntoTheLightestRank) {
  std::vector<PlacementItem> items = {{"a", 10}, {"b", 100}, {"c", 60}, {"d", 50}, {"e", 1}};
  // b (100) -> 0, c (60) -> 1, d (50) -> 1, a (10) -> 0, e (1): a tie (110 each) -> 0.
  EXPECT_EQ(BalancedByBytes(items, 2), (std::vector<int>{0, 0, 1, 1, 0}));
  EXPECT_EQ(BalancedByBytes(items, 1), (std::vector<int>{0, 0, 0, 0, 0}));
}

TEST(GroupPlacement, SlotsGoWithTheirVariable) {
  EXPECT_EQ(internal::PlacementName("model/w/.ATTRIBUTES/VARIABLE_VALUE"), "model/w");
  EXPECT_EQ(internal::PlacementName("model/w/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/"
                                    "VARIABLE_VALUE"),
            "model/w");
  EXPECT_EQ(internal::PlacementName("model/x..ATTRIBUTES/.ATTRIBUTES/VARIABLE_VALUE"),
            "model/x..ATTRIBUTES");
}

TEST(GroupPlacement, ARankOutsideTheGroupIsAnError) {
  GroupOptions options;
  ThreadMeeting meeting(2);
  ThreadMember member(&meeting, 0);
  options.group = &member;
  options.placement = [](const std::vector<PlacementItem>& items, int) {
    return std::vector<int>(items.size(), 5);
  };
  internal::Owners owners(options);
  EXPECT_THAT(owners.Place({{"model/w/.ATTRIBUTES/VARIABLE_VALUE", 4}}),
              StatusIs(StatusCode::kInvalidArgument, "'model/w' on rank 5 of a group of 2"));
}

TEST(GroupStatus, EveryMemberGetsTheFirstFailingRanksError) {
  std::vector<Status> got(3);
  RunGroup(3, [&](int rank, CheckpointGroup& group) {
    Status mine = rank == 0 ? OkStatus() : NotFoundError("no file ", rank);
    got[rank] = AgreeOnStatus(group, mine);
  });
  for (const Status& s : got) EXPECT_EQ(s, NotFoundError("rank 1 of 3: no file 1"));
}

TEST(GroupCheckpoint, SavedByThreeRestoredByOneAndByTwo) {
  const std::string dir = testing::NewTempDir("group");
  std::vector<std::string> paths(3);
  RunGroup(3, [&](int rank, CheckpointGroup& group) {
    std::unique_ptr<GroupModel> m = MakeModel(&group);
    ASSERT_NE(m, nullptr);
    CKFLOW_ASSERT_OK(m->Set(7));
    StatusOr<std::string> saved = m->checkpoint().Save(dir + "/ckpt", m->session());
    ASSERT_TRUE(saved.ok()) << saved.status();
    paths[rank] = *saved;
  });
  EXPECT_EQ(paths, std::vector<std::string>(3, dir + "/ckpt-1"));
  EXPECT_EQ(LatestCheckpoint(dir), dir + "/ckpt-1");
  std::vector<std::string> files = *FileSystem::Default()->ListDir(dir);
  std::sort(files.begin(), files.end());
  // Three parts' data files, renamed; no _temp left.
  EXPECT_EQ(files, (std::vector<std::string>{"checkpoint", "ckpt-1.data-00000-of-00003",
                                             "ckpt-1.data-00001-of-00003",
                                             "ckpt-1.data-00002-of-00003", "ckpt-1.index"}));
  CKFLOW_EXPECT_OK(testing::CheckBundle(dir + "/ckpt-1").status());
  CKFLOW_EXPECT_OK(testing::CheckSeedInOneProcess(dir + "/ckpt-1", 7));

  // Two members: each reads its own values, none twice, together all.
  std::vector<int> restored(2);
  RunGroup(2, [&](int rank, CheckpointGroup& group) {
    std::unique_ptr<GroupModel> m = MakeModel(&group);
    ASSERT_NE(m, nullptr);
    StatusOr<LoadStatus> status = m->checkpoint().Restore(LatestCheckpoint(dir));
    ASSERT_TRUE(status.ok()) << status.status();
    CKFLOW_ASSERT_OK(status->InitializeOrRestore(m->session()));
    CKFLOW_ASSERT_OK(status->AssertConsumed());
    StatusOr<int> checked = m->CheckInitialized(7);
    ASSERT_TRUE(checked.ok()) << checked.status();
    restored[rank] = *checked;
    // save_counter is every member's: the next save is number 2.
    StatusOr<std::string> saved = m->checkpoint().Save(dir + "/ckpt", m->session());
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_EQ(*saved, dir + "/ckpt-2");
  });
  const int total = MakeModel(nullptr)->num_values();
  EXPECT_GT(restored[0], 0);
  EXPECT_GT(restored[1], 0);
  EXPECT_EQ(restored[0] + restored[1], total);
}

// Each member's part is placed anew at every save, so nothing could be
// linked: an incremental save is refused on every member before anything
// changes (the save counter stays), and a manager refuses the option.
TEST(GroupCheckpoint, IncrementalSavesAreRefused) {
  const std::string dir = testing::NewTempDir("group");
  RunGroup(2, [&](int, CheckpointGroup& group) {
    std::unique_ptr<GroupModel> m = MakeModel(&group);
    ASSERT_NE(m, nullptr);
    CKFLOW_ASSERT_OK(m->Set(7));
    EXPECT_THAT(m->checkpoint().Save(dir + "/ckpt", m->session(), {.incremental = true}),
                testing::StatusIs(StatusCode::kInvalidArgument, "not for a member of a group"));
    EXPECT_THAT(
        CheckpointManager::Create(m->checkpoint(), dir, {.save_options = {.incremental = true}})
            .status(),
        testing::StatusIs(StatusCode::kInvalidArgument, "incremental"));
    StatusOr<std::string> saved = m->checkpoint().Save(dir + "/ckpt", m->session());
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_EQ(*saved, dir + "/ckpt-1");
  });
}

TEST(GroupCheckpoint, ASingleProcessCheckpointRestoresIntoFourMembers) {
  const std::string dir = testing::NewTempDir("group");
  SavePlain(dir, 3);
  std::vector<int> restored(4);
  RunGroup(4, [&](int rank, CheckpointGroup& group) {
    std::unique_ptr<GroupModel> m = MakeModel(&group);
    StatusOr<LoadStatus> status = m->checkpoint().Restore(dir + "/ckpt-1");
    ASSERT_TRUE(status.ok()) << status.status();
    CKFLOW_ASSERT_OK(status->InitializeOrRestore(m->session()));
    StatusOr<int> checked = m->CheckInitialized(3);
    ASSERT_TRUE(checked.ok()) << checked.status();
    restored[rank] = *checked;
  });
  EXPECT_EQ(restored[0] + restored[1] + restored[2] + restored[3],
            MakeModel(nullptr)->num_values());
}

TEST(GroupCheckpoint, AMemberThatCannotWriteFailsTheSaveOnEveryMember) {
  const std::string dir = testing::NewTempDir("group");
  testing::FailingPartFs failing("ckpt-2_temp/part-00001-of-00003");
  std::vector<Status> second(3);
  RunGroup(3, [&](int rank, CheckpointGroup& group) {
    std::unique_ptr<GroupModel> m = MakeModel(&group, rank == 1 ? &failing : nullptr);
    CKFLOW_ASSERT_OK(m->Set(11));
    ASSERT_TRUE(m->checkpoint().Save(dir + "/ckpt", m->session()).ok());
    CKFLOW_ASSERT_OK(m->Set(12));
    second[rank] = m->checkpoint().Save(dir + "/ckpt", m->session()).status();
  });
  for (const Status& s : second) {
    EXPECT_THAT(s, StatusIs(StatusCode::kResourceExhausted,
                            "saving checkpoint '" + dir + "/ckpt-2': rank 1 of 3: writing '" + dir +
                                "/ckpt-2_temp/part-00001-of-00003'"));
    EXPECT_EQ(s, second[0]);
  }
  EXPECT_EQ(LatestCheckpoint(dir), dir + "/ckpt-1");
  std::vector<std::string> files = *FileSystem::Default()->ListDir(dir);
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"checkpoint", "ckpt-1.data-00000-of-00003",
                                             "ckpt-1.data-00001-of-00003",
                                             "ckpt-1.data-00002-of-00003", "ckpt-1.index"}));
  CKFLOW_EXPECT_OK(testing::CheckSeedInOneProcess(dir + "/ckpt-1", 11));
}

// Counts the checkpoints (their index files) a member deletes.
class CountingDeletesFs : public FileSystemWrapper {
 public:
  CountingDeletesFs() : FileSystemWrapper(FileSystem::Default()) {}
  Status DeleteFile(const std::string& path) override {
    if (path.ends_with(".index") && path.find("_temp") == std::string::npos) ++index_deletes;
    return FileSystemWrapper::DeleteFile(path);
  }
  std::atomic<int> index_deletes{0};
};

TEST(GroupCheckpoint, AManagerKeepsTheSameBooksOnEveryMemberAndDeletesOnce) {
  const std::string dir = testing::NewTempDir("group");
  std::vector<CountingDeletesFs> fs(2);
  std::vector<std::vector<std::string>> kept(2);
  RunGroup(2, [&](int rank, CheckpointGroup& group) {
    std::unique_ptr<GroupModel> m = MakeModel(&group, &fs[rank]);
    CKFLOW_ASSERT_OK(m->Set(5));
    auto manager = CheckpointManager::Create(m->checkpoint(), dir, {.max_to_keep = 2});
    ASSERT_TRUE(manager.ok()) << manager.status();
    for (int i = 1; i <= 4; ++i) {
      StatusOr<std::string> saved = (*manager)->Save(m->session());
      ASSERT_TRUE(saved.ok()) << saved.status();
      EXPECT_EQ(*saved, dir + "/ckpt-" + std::to_string(i));
    }
    kept[rank] = (*manager)->checkpoints();
  });
  EXPECT_EQ(kept[0], (std::vector<std::string>{dir + "/ckpt-3", dir + "/ckpt-4"}));
  EXPECT_EQ(kept[1], kept[0]);
  EXPECT_EQ(fs[0].index_deletes, 2);
  EXPECT_EQ(fs[1].index_deletes, 0);
  StatusOr<std::optional<CheckpointStateData>> state = ReadCheckpointState(dir);
  ASSERT_TRUE(state.ok() && state->has_value());
  EXPECT_EQ((*state)->all_model_checkpoint_paths, (std::vector<std::string>{"ckpt-3", "ckpt-4"}));
  EXPECT_FALSE(FileSystem::Default()->FileExists(dir + "/ckpt-2.index").ok());
  CKFLOW_EXPECT_OK(testing::CheckSeedInOneProcess(dir + "/ckpt-4", 5));
}

// A file system on which the files starting with `hidden` look missing:
// one member's view of a checkpoint that lost a file (the group's verdicts
// must agree even when the members' views do not).
class HidesFileFs : public FileSystemWrapper {
 public:
  explicit HidesFileFs(std::string hidden)
      : FileSystemWrapper(FileSystem::Default()), hidden_(std::move(hidden)) {}
  StatusOr<FileStat> Stat(const std::string& path) override {
    if (!hidden_.empty() && path.starts_with(hidden_)) {
      return NotFoundError(path, ": hidden by the test");
    }
    return FileSystemWrapper::Stat(path);
  }

 private:
  const std::string hidden_;
};

// RestoreOrInitialize in a group: the newest checkpoint is whole for member
// 0 but not for member 1, so both fall back to the one before and restore
// the same step; the skip names the member that found the damage.
TEST(GroupCheckpoint, EveryMemberFallsBackToTheSameWholeCheckpoint) {
  const std::string dir = testing::NewTempDir("group");
  RunGroup(2, [&](int, CheckpointGroup& group) {
    std::unique_ptr<GroupModel> m = MakeModel(&group);
    auto manager = CheckpointManager::Create(m->checkpoint(), dir, {.max_to_keep = 5});
    ASSERT_TRUE(manager.ok()) << manager.status();
    for (uint32_t seed : {3, 4}) {
      CKFLOW_ASSERT_OK(m->Set(seed));
      ASSERT_TRUE((*manager)->Save(m->session()).ok());
    }
  });
  std::vector<std::optional<std::string>> restored(2);
  std::vector<std::vector<SkippedCheckpoint>> skipped(2);
  std::vector<HidesFileFs> fs = {HidesFileFs(""), HidesFileFs(dir + "/ckpt-2.data-")};
  RunGroup(2, [&](int rank, CheckpointGroup& group) {
    std::unique_ptr<GroupModel> m = MakeModel(&group, &fs[rank]);
    auto manager = CheckpointManager::Create(m->checkpoint(), dir, {.max_to_keep = 5});
    ASSERT_TRUE(manager.ok()) << manager.status();
    StatusOr<std::optional<std::string>> r = (*manager)->RestoreOrInitialize(m->session());
    ASSERT_TRUE(r.ok()) << r.status();
    restored[rank] = *r;
    skipped[rank] = (*manager)->skipped_on_restore();
    StatusOr<int> owned = m->CheckInitialized(3);
    EXPECT_TRUE(owned.ok()) << owned.status();
  });
  EXPECT_EQ(restored[0], dir + "/ckpt-1");
  EXPECT_EQ(restored[1], dir + "/ckpt-1");
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(skipped[rank].size(), 1u);
    EXPECT_EQ(skipped[rank][0].path, dir + "/ckpt-2");
    EXPECT_NE(skipped[rank][0].why.ToString().find("rank 1 of 2: "), std::string::npos)
        << skipped[rank][0].why;
  }
}

TEST(GroupCheckpoint, AsyncSavesRunTheirCollectivesInTheBackground) {
  const std::string dir = testing::NewTempDir("group");
  RunGroup(2, [&](int, CheckpointGroup& group) {
    std::unique_ptr<GroupModel> m = MakeModel(&group);
    CKFLOW_ASSERT_OK(m->Set(21));
    StatusOr<std::string> saved =
        m->checkpoint().Save(dir + "/ckpt", m->session(), {.async = true});
    ASSERT_TRUE(saved.ok()) << saved.status();
    // The values were copied: changing them does not change the save.
    CKFLOW_ASSERT_OK(m->Set(22));
    CKFLOW_ASSERT_OK(m->checkpoint().Sync());
  });
  EXPECT_EQ(LatestCheckpoint(dir), dir + "/ckpt-1");
  CKFLOW_EXPECT_OK(testing::CheckSeedInOneProcess(dir + "/ckpt-1", 21));
}

TEST(GroupCheckpoint, AnAssertionThatFailsOnOneMemberFailsOnEveryMember) {
  const std::string dir = testing::NewTempDir("group");
  SavePlain(dir, 1, {.slots = false});
  std::vector<Status> consumed(2), partial(2);
  RunGroup(2, [&](int rank, CheckpointGroup& group) {
    // Member 1 has slots the checkpoint does not.
    std::unique_ptr<GroupModel> m = MakeModel(&group, nullptr, {.slots = rank == 1});
    StatusOr<LoadStatus> status = m->checkpoint().Restore(dir + "/ckpt-1");
    ASSERT_TRUE(status.ok()) << status.status();
    consumed[rank] = status->AssertConsumed();
    partial[rank] = status->AssertNontrivialMatch();
  });
  EXPECT_THAT(consumed[0], StatusIs(StatusCode::kFailedPrecondition, "rank 1 of 2: Found "));
  EXPECT_EQ(consumed[1], consumed[0]);
  CKFLOW_EXPECT_OK(partial[0]);
  CKFLOW_EXPECT_OK(partial[1]);
}

TEST(GroupCheckpoint, AValueMatchedOnAnyMemberCountsAsConsumed) {
  const std::string dir = testing::NewTempDir("group");
  SavePlain(dir, 1);
  std::vector<Status> consumed(2);
  RunGroup(2, [&](int rank, CheckpointGroup& group) {
    // Only member 0 has the optimizer whose slots the checkpoint holds.
    std::unique_ptr<GroupModel> m = MakeModel(&group, nullptr, {.slots = rank == 0});
    StatusOr<LoadStatus> status = m->checkpoint().Restore(dir + "/ckpt-1");
    ASSERT_TRUE(status.ok()) << status.status();
    consumed[rank] = status->AssertConsumed();
  });
  CKFLOW_EXPECT_OK(consumed[0]);
  CKFLOW_EXPECT_OK(consumed[1]);
}

}  // namespace
}  // namespace ckflow
