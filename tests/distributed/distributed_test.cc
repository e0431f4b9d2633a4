// WorkerGroup and group saves under mpirun (ctest runs this with -np 2 and
// -np 4): every rank runs every test, in the same order, as the members of
// one group. The cross-size matrix and the SIGKILL case are in
// CMakeLists.txt and distributed_kill_test.cc.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

#include "bundle/checkpoint_state.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "distributed/worker_group.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/bundle/testdata_util.h"
#include "tests/checkpoint/group_model.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::GroupModel;
using testing::StatusIs;

WorkerGroup* workers = nullptr;

// A directory every rank uses: rank 0's new temp dir.
std::string SharedTempDir() {
  std::string mine = workers->rank() == 0 ? testing::NewTempDir("mpi") : "";
  StatusOr<std::vector<std::string>> all = workers->AllGather(mine, kDefaultGroupTimeout);
  EXPECT_TRUE(all.ok()) << all.status();
  return all.ok() ? (*all)[0] : "";
}

std::unique_ptr<GroupModel> MakeModel(CheckpointGroup* group, FileSystem* fs = nullptr) {
  CheckpointOptions options{.file_system = fs};
  options.group.group = group;
  StatusOr<std::unique_ptr<GroupModel>> m = GroupModel::Create({}, std::move(options));
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

TEST(WorkerGroup, GathersInRankOrder) {
  StatusOr<std::vector<std::string>> all =
      workers->AllGather(std::to_string(workers->rank() * 10), kDefaultGroupTimeout);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(static_cast<int>(all->size()), workers->size());
  for (int r = 0; r < workers->size(); ++r) EXPECT_EQ((*all)[r], std::to_string(r * 10));
  CKFLOW_EXPECT_OK(workers->Barrier());
}

TEST(WorkerGroup, AgreesOnTheLowestFailingRanksError) {
  const int last = workers->size() - 1;
  Status mine = workers->rank() == last ? DataLossError("bad disk") : OkStatus();
  EXPECT_EQ(workers->AgreeOn(mine), DataLossError("rank " + std::to_string(last) + " of " +
                                                  std::to_string(workers->size()) + ": bad disk"));
  CKFLOW_EXPECT_OK(workers->AgreeOn(OkStatus()));
}

TEST(GroupSave, EveryRankWritesItsPartAndRankZeroMerges) {
  const std::string dir = SharedTempDir();
  std::unique_ptr<GroupModel> m = MakeModel(workers);
  ASSERT_NE(m, nullptr);
  CKFLOW_ASSERT_OK(m->Set(9));
  StatusOr<std::string> saved = m->checkpoint().Save(dir + "/ckpt", m->session());
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(*saved, dir + "/ckpt-1");
  CKFLOW_ASSERT_OK(workers->Barrier());
  EXPECT_EQ(LatestCheckpoint(dir), dir + "/ckpt-1");
  EXPECT_FALSE(FileSystem::Default()->FileExists(dir + "/ckpt-1_temp").ok());
  if (workers->rank() == 0) {
    CKFLOW_EXPECT_OK(testing::CheckBundle(dir + "/ckpt-1").status());
  }
  // The same size restores: each rank its own values, all of them once.
  std::unique_ptr<GroupModel> r = MakeModel(workers);
  StatusOr<LoadStatus> status = r->checkpoint().Restore(LatestCheckpoint(dir));
  ASSERT_TRUE(status.ok()) << status.status();
  CKFLOW_ASSERT_OK(status->InitializeOrRestore(r->session()));
  CKFLOW_EXPECT_OK(status->AssertConsumed());
  StatusOr<int> restored = r->CheckInitialized(9);
  ASSERT_TRUE(restored.ok()) << restored.status();
  StatusOr<std::vector<std::string>> counts =
      workers->AllGather(std::to_string(*restored), kDefaultGroupTimeout);
  int total = 0;
  for (const std::string& c : *counts) total += std::stoi(c);
  EXPECT_EQ(total, r->num_values());
}

TEST(GroupSave, EveryRankSpreadsItsPartOverFilesPerDeviceFiles) {
  const std::string dir = SharedTempDir();
  std::unique_ptr<GroupModel> m = MakeModel(workers);
  ASSERT_NE(m, nullptr);
  CKFLOW_ASSERT_OK(m->Set(5));
  // Every rank owns more than 3 values (26 variables with 2 slots each).
  StatusOr<std::string> saved =
      m->checkpoint().Save(dir + "/ckpt", m->session(), {.files_per_device = 3});
  ASSERT_TRUE(saved.ok()) << saved.status();
  CKFLOW_ASSERT_OK(workers->Barrier());
  // One checkpoint of every rank's 3 data files.
  char last[64];
  std::snprintf(last, sizeof(last), "ckpt-1.data-%05d-of-%05d", 3 * workers->size() - 1,
                3 * workers->size());
  EXPECT_TRUE(FileSystem::Default()->FileExists(dir + "/" + last).ok()) << last;
  std::vector<std::string> files = *FileSystem::Default()->ListDir(dir);
  EXPECT_EQ(std::count_if(files.begin(), files.end(),
                          [](const std::string& f) { return f.starts_with("ckpt-1.data-"); }),
            3 * workers->size());
  EXPECT_FALSE(FileSystem::Default()->FileExists(dir + "/ckpt-1_temp").ok());
  if (workers->rank() == 0) {
    CKFLOW_EXPECT_OK(testing::CheckBundle(dir + "/ckpt-1").status());
    CKFLOW_EXPECT_OK(testing::CheckSeedInOneProcess(dir + "/ckpt-1", 5));
  }
}

TEST(GroupSave, ARankThatCannotWriteLeavesThePreviousCheckpointOnEveryRank) {
  const std::string dir = SharedTempDir();
  testing::FailingPartFs failing("ckpt-2_temp/part-00001-of-");
  std::unique_ptr<GroupModel> m = MakeModel(workers, workers->rank() == 1 ? &failing : nullptr);
  CKFLOW_ASSERT_OK(m->Set(1));
  auto manager = CheckpointManager::Create(m->checkpoint(), dir, {.max_to_keep = 1});
  ASSERT_TRUE(manager.ok()) << manager.status();
  ASSERT_TRUE((*manager)->Save(m->session()).ok());
  CKFLOW_ASSERT_OK(m->Set(2));
  StatusOr<std::string> second = (*manager)->Save(m->session());
  EXPECT_THAT(second, StatusIs(StatusCode::kResourceExhausted,
                               "rank 1 of " + std::to_string(workers->size()) + ": writing '" +
                                   dir + "/ckpt-2_temp/part-00001-of-"));
  // The same message on every rank.
  StatusOr<std::vector<std::string>> messages =
      workers->AllGather(std::string(second.status().message()), kDefaultGroupTimeout);
  ASSERT_TRUE(messages.ok());
  for (const std::string& s : *messages) EXPECT_EQ(s, (*messages)[0]);
  EXPECT_EQ((*manager)->latest_checkpoint(), dir + "/ckpt-1");
  EXPECT_EQ(LatestCheckpoint(dir), dir + "/ckpt-1");
  EXPECT_FALSE(FileSystem::Default()->FileExists(dir + "/ckpt-2.index").ok());
  EXPECT_FALSE(FileSystem::Default()->FileExists(dir + "/ckpt-2_temp").ok());
  // ckpt-1 is intact: a single-process restore finds seed 1.
  CKFLOW_EXPECT_OK(testing::CheckSeedInOneProcess(dir + "/ckpt-1", 1));
}

// Hangs before creating any file whose path contains `part` until
// `released` says so, or a minute has passed: a rank stuck on its disk for
// longer than the group's timeout, however loaded the machine.
class HangingPartFs : public FileSystemWrapper {
 public:
  HangingPartFs(std::string part, std::function<bool(const std::string& path)> released)
      : FileSystemWrapper(FileSystem::Default()),
        part_(std::move(part)),
        released_(std::move(released)) {}
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    if (path.find(part_) != std::string::npos) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
      while (!released_(path) && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    return FileSystemWrapper::NewWritableFile(path);
  }

 private:
  const std::string part_;
  const std::function<bool(const std::string& path)> released_;
};

std::string PartOf(const std::string& prefix, int rank) {
  char part[64];
  std::snprintf(part, sizeof(part), "_temp/part-%05d-of-", rank);
  return prefix + part;
}

TEST(GroupSave, ARankThatHangsPastTheTimeoutFailsTheSaveOnEveryRankWithoutHanging) {
  const std::string dir = SharedTempDir();
  const int late = workers->size() - 1;
  // Until rank 0 has given up: it removes the failed save's "_temp".
  HangingPartFs hanging(PartOf("ckpt-2", late), [](const std::string& path) {
    return !FileSystem::Default()->FileExists(Dirname(path)).ok();
  });
  CheckpointOptions options{.file_system = workers->rank() == late ? &hanging : nullptr};
  options.group = {.group = workers, .timeout = std::chrono::seconds(2)};
  StatusOr<std::unique_ptr<GroupModel>> m = GroupModel::Create({}, std::move(options));
  ASSERT_TRUE(m.ok()) << m.status();
  CKFLOW_ASSERT_OK((*m)->Set(1));
  auto manager = CheckpointManager::Create((*m)->checkpoint(), dir, {.max_to_keep = 1});
  ASSERT_TRUE(manager.ok()) << manager.status();
  ASSERT_TRUE((*manager)->Save((*m)->session()).ok());
  CKFLOW_ASSERT_OK((*m)->Set(2));
  // The others give up on the late rank; it gets the same error when it
  // arrives.
  StatusOr<std::string> second = (*manager)->Save((*m)->session());
  EXPECT_THAT(second, StatusIs(StatusCode::kDeadlineExceeded,
                               "saving checkpoint '" + dir + "/ckpt-2': WorkerGroup: rank(s) " +
                                   std::to_string(late) + " of " + std::to_string(workers->size()) +
                                   " did not arrive at the collective step within 2"));
  EXPECT_EQ((*manager)->latest_checkpoint(), dir + "/ckpt-1");
  CKFLOW_ASSERT_OK(workers->Barrier());
  EXPECT_EQ(LatestCheckpoint(dir), dir + "/ckpt-1");
  EXPECT_FALSE(FileSystem::Default()->FileExists(dir + "/ckpt-2.index").ok());
  if (workers->rank() == 0) CKFLOW_EXPECT_OK(testing::CheckSeedInOneProcess(dir + "/ckpt-1", 1));
  // Every rank failed the same step, so the group goes on: the next save
  // commits, and removes what the late rank wrote after the others left.
  StatusOr<std::string> third = (*manager)->Save((*m)->session());
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(*third, dir + "/ckpt-3");
  CKFLOW_ASSERT_OK(workers->Barrier());
  EXPECT_EQ(LatestCheckpoint(dir), dir + "/ckpt-3");
  EXPECT_FALSE(FileSystem::Default()->FileExists(dir + "/ckpt-2_temp").ok());
}

// Rank 0 judges each step (worker_group.cc): when it is the one late, the
// others give up after twice the timeout, and it finds their withdrawals
// when it arrives, so every rank fails the save.
TEST(GroupSave, ALateRankZeroFailsTheSaveOnEveryRankWithoutHanging) {
  const std::string dir = SharedTempDir();
  const std::string gave_up = dir + "/gave-up-";
  HangingPartFs hanging(PartOf("ckpt-1", 0), [&](const std::string&) {
    for (int r = 1; r < workers->size(); ++r) {
      if (!FileSystem::Default()->FileExists(gave_up + std::to_string(r)).ok()) return false;
    }
    return true;
  });
  CheckpointOptions options{.file_system = workers->rank() == 0 ? &hanging : nullptr};
  options.group = {.group = workers, .timeout = std::chrono::seconds(1)};
  StatusOr<std::unique_ptr<GroupModel>> m = GroupModel::Create({}, std::move(options));
  ASSERT_TRUE(m.ok()) << m.status();
  CKFLOW_ASSERT_OK((*m)->Set(1));
  StatusOr<std::string> saved = (*m)->checkpoint().Save(dir + "/ckpt", (*m)->session());
  if (workers->rank() == 0) {
    EXPECT_THAT(saved, StatusIs(StatusCode::kDeadlineExceeded, "WorkerGroup: rank 0 of " +
                                                                   std::to_string(workers->size()) +
                                                                   " arrived after rank "));
  } else {
    EXPECT_THAT(saved, StatusIs(StatusCode::kDeadlineExceeded,
                                "WorkerGroup: rank 0 of " + std::to_string(workers->size()) +
                                    ", which judges every collective step, did not answer"));
    CKFLOW_EXPECT_OK(
        FileSystem::Default()->NewWritableFile(gave_up + std::to_string(workers->rank())).status());
  }
  CKFLOW_ASSERT_OK(workers->Barrier());
  EXPECT_FALSE(LatestCheckpoint(dir).has_value());
  EXPECT_FALSE(FileSystem::Default()->FileExists(dir + "/ckpt-1.index").ok());
}

TEST(GroupSave, AsyncSavesOfAManagerKeepTheLastTwo) {
  const std::string dir = SharedTempDir();
  std::unique_ptr<GroupModel> m = MakeModel(workers);
  CheckpointManager::Options options{.max_to_keep = 2};
  options.save_options.async = true;
  auto manager = CheckpointManager::Create(m->checkpoint(), dir, options);
  ASSERT_TRUE(manager.ok()) << manager.status();
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    CKFLOW_ASSERT_OK(m->Set(seed));
    ASSERT_TRUE((*manager)->Save(m->session()).ok());
  }
  CKFLOW_ASSERT_OK(m->checkpoint().Sync());
  EXPECT_EQ((*manager)->checkpoints(),
            (std::vector<std::string>{dir + "/ckpt-3", dir + "/ckpt-4"}));
  CKFLOW_ASSERT_OK(workers->Barrier());
  std::vector<std::string> files = *FileSystem::Default()->ListDir(dir);
  EXPECT_EQ(std::count_if(files.begin(), files.end(),
                          [](const std::string& f) { return f.ends_with(".index"); }),
            2);
}

}  // namespace
}  // namespace ckflow

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto world = ckflow::WorkerGroup::World();
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().ToString().c_str());
    return 1;
  }
  ckflow::workers = world->get();
  const int result = RUN_ALL_TESTS();
  // Rank 0 made the shared directories, and its exit removes them: no rank
  // may still be looking at one then.
  if (ckflow::Status s = ckflow::workers->Barrier(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  world->reset();
  return result;
}
