// Nothing lost, nothing leaked, nothing let in (RELIABILITY.md): every disk
// effect of a save goes through the file layer; a save fails cleanly at any
// step with any error; a process killed at any step of the save protocol,
// or at a random moment, leaves the latest checkpoint whole and its debris
// is removed by the next save; state-file paths stay in their directory.

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>

#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "bundle/bundle_writer.h"
#include "bundle/checkpoint_state.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "ops/array_ops.h"
#include "ops/checkpoint_ops.h"
#include "tests/checkpoint/recording_file_system.h"
#include "tests/checkpoint/stepped_model.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

namespace stdfs = std::filesystem;
using testing::FsEvent;
using testing::FsOp;
using testing::RecordingFileSystem;
using testing::SteppedModel;

std::unique_ptr<SteppedModel> NewModel(FileSystem* fs) {
  StatusOr<std::unique_ptr<SteppedModel>> model = SteppedModel::Create({.file_system = fs});
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

std::string Ckpt(const std::string& dir, int64_t n) { return dir + "/ckpt-" + std::to_string(n); }

// Saves steps [first, last] into `dir` through a fresh manager.
void SaveSteps(SteppedModel& model, const std::string& dir, const SaveOptions& options,
               int64_t first, int64_t last) {
  CheckpointManager::Options o;
  o.max_to_keep = 2;
  o.save_options = options;
  auto manager = CheckpointManager::Create(model.checkpoint(), dir, o);
  ASSERT_TRUE(manager.ok()) << manager.status();
  for (int64_t step = first; step <= last; ++step) {
    CKFLOW_ASSERT_OK(model.SetStep(step));
    ASSERT_TRUE((*manager)->Save(model.session(), step).ok());
    CKFLOW_ASSERT_OK(model.checkpoint().Sync());
  }
}

void CopyDir(const std::string& from, const std::string& to) {
  stdfs::remove_all(to);
  stdfs::copy(from, to, stdfs::copy_options::recursive);
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// ------------------------------------------------------------ the file layer

// Every create, write, sync, rename and remove of a sharded, async, durable
// save and of a manager's sweep goes through the file system: replaying the
// recorded effects yields exactly the files on disk.
TEST(FileLayer, SeesEveryStepOfAShardedAsyncDurableSaveAndASweep) {
  const std::string dir = testing::NewTempDir("layer");
  RecordingFileSystem fs;
  auto model = NewModel(&fs);
  ASSERT_NE(model, nullptr);
  CheckpointManager::Options o;
  o.max_to_keep = 1;
  o.save_options = {.durable = true, .async = true, .files_per_device = 3};
  auto manager = CheckpointManager::Create(model->checkpoint(), dir, o);
  ASSERT_TRUE(manager.ok()) << manager.status();
  for (int64_t step = 1; step <= 3; ++step) {
    CKFLOW_ASSERT_OK(model->SetStep(step));
    ASSERT_TRUE((*manager)->Save(model->session()).ok());
    CKFLOW_ASSERT_OK(model->checkpoint().Sync());
  }
  const std::vector<FsEvent> events = fs.events();
  EXPECT_EQ(testing::ReplayTree(events, dir, {}), testing::DiskTree(dir));
  EXPECT_EQ(testing::DiskTree(dir),
            (std::set<std::string>{"checkpoint", "ckpt-3.index", "ckpt-3.data-00000-of-00003",
                                   "ckpt-3.data-00001-of-00003", "ckpt-3.data-00002-of-00003"}));
  std::map<FsOp, int> count;
  for (const FsEvent& e : events) ++count[e.op];
  for (FsOp op : {FsOp::kCreate, FsOp::kWrite, FsOp::kSync, FsOp::kClose, FsOp::kRename,
                  FsOp::kDelete, FsOp::kCreateDirs, FsOp::kDeleteDir, FsOp::kSyncDir}) {
    EXPECT_GT(count[op], 0) << testing::FsOpName(op);
  }
  // The sweep went through the layer too: the first two checkpoints' files.
  for (int64_t n : {1, 2}) {
    for (const std::string& file :
         {IndexFilename(Ckpt(dir, n)), DataFilename(Ckpt(dir, n), 1, 3)}) {
      EXPECT_TRUE(std::any_of(events.begin(), events.end(), [&](const FsEvent& e) {
        return e.op == FsOp::kDelete && e.path == file;
      })) << file;
    }
  }
  // Durable: each file that ends under a final name was synced under some
  // name before it got there, and its directory synced after.
  for (size_t i = 0; i < events.size(); ++i) {
    const FsEvent& e = events[i];
    if (e.op != FsOp::kRename || Dirname(e.to) != dir ||
        Basename(e.to).find("_temp") != std::string::npos)
      continue;
    std::set<std::string> names = {e.path};
    for (size_t j = i; j-- > 0;) {
      if (events[j].op == FsOp::kRename && names.count(events[j].to)) names.insert(events[j].path);
    }
    EXPECT_TRUE(
        std::any_of(events.begin(), events.begin() + i,
                    [&](const FsEvent& s) { return s.op == FsOp::kSync && names.count(s.path); }))
        << e.ToString() << ": never synced";
    EXPECT_TRUE(
        std::any_of(events.begin() + i, events.end(),
                    [&](const FsEvent& s) { return s.op == FsOp::kSyncDir && s.path == dir; }))
        << e.ToString() << ": its directory never synced after";
  }
}

// The state file of a durable save: its temp file is synced before the
// rename and the directory after (not only the data and the index).
TEST(FileLayer, DurableSaveSyncsTheStateFileAndItsDirectory) {
  const std::string dir = testing::NewTempDir("state");
  RecordingFileSystem fs;
  auto model = NewModel(&fs);
  ASSERT_NE(model, nullptr);
  CKFLOW_ASSERT_OK(model->SetStep(1));
  ASSERT_TRUE(model->checkpoint().Save(dir + "/ckpt", model->session(), {.durable = true}).ok());
  const std::vector<FsEvent> events = fs.events();
  auto rename = std::find_if(events.begin(), events.end(), [&](const FsEvent& e) {
    return e.op == FsOp::kRename && e.to == JoinPath(dir, kCheckpointStateFilename);
  });
  ASSERT_NE(rename, events.end());
  EXPECT_TRUE(std::any_of(events.begin(), rename, [&](const FsEvent& e) {
    return e.op == FsOp::kSync && e.path == rename->path;
  }));
  EXPECT_TRUE(std::any_of(rename, events.end(), [&](const FsEvent& e) {
    return e.op == FsOp::kSyncDir && e.path == dir;
  }));
}

// The session's file system reaches the merge kernel, and the kernel obeys
// delete_old_dirs.
TEST(FileLayer, MergeV2CheckpointsHonoursDeleteOldDirs) {
  for (bool delete_old_dirs : {false, true}) {
    SCOPED_TRACE(delete_old_dirs);
    const std::string dir = testing::NewTempDir("merge");
    std::vector<std::string> parts = {dir + "/a_temp/part-0", dir + "/b_temp/part-1"};
    for (size_t i = 0; i < parts.size(); ++i) {
      auto writer = BundleWriter::Create(parts[i]);
      ASSERT_TRUE(writer.ok()) << writer.status();
      CKFLOW_ASSERT_OK((*writer)->Add("k" + std::to_string(i), Tensor::Scalar(float(i))));
      CKFLOW_ASSERT_OK((*writer)->Finish());
    }
    Scope scope = Scope::NewRootScope();
    Output merge =
        ops::MergeV2Checkpoints(scope, ops::Const(scope, Tensor::FromVector<std::string>(parts)),
                                ops::Const(scope, Tensor::Scalar(dir + "/ckpt")), delete_old_dirs);
    RecordingFileSystem fs;
    auto session = Session::Create(scope.graph(), {.file_system = &fs});
    ASSERT_TRUE(session.ok()) << session.status();
    CKFLOW_ASSERT_OK((*session)->Run({}, {}, {merge}).status());
    EXPECT_EQ(stdfs::exists(dir + "/a_temp"), !delete_old_dirs);
    EXPECT_EQ(stdfs::exists(dir + "/b_temp"), !delete_old_dirs);
    EXPECT_EQ(testing::ReplayTree(fs.events(), dir, testing::DiskTree(dir)),
              testing::DiskTree(dir));
    auto reader = BundleReader::Open(dir + "/ckpt");
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_TRUE((*reader)->Contains("k0") && (*reader)->Contains("k1"));
    EXPECT_FALSE(fs.events().empty());
  }
}

// ------------------------------------------------------------ faults

struct FaultCase {
  std::string mode;
};

class SaveFaultTest : public ::testing::TestWithParam<std::string> {};

// A CheckpointManager save (over two kept checkpoints, so it sweeps) with
// step k of the file layer failing with ENOSPC, EIO or EACCES (a failing
// write writes half its bytes first), for every k: an error means the
// directory and the manager still name the previous checkpoint and no file
// of the new one is left; a failure after the commit point is no error;
// memory and directory agree; the latest checkpoint holds its step bit for
// bit; and the next, fault-free save succeeds and leaves no debris.
TEST_P(SaveFaultTest, EveryStepFailsCleanly) {
  const std::string mode = GetParam();
  const SaveOptions options = testing::SaveModeOptions(mode).value();
  const std::string root = testing::NewTempDir("fault");
  const std::string base = root + "/base";
  {
    auto plain = NewModel(nullptr);
    ASSERT_NE(plain, nullptr);
    SaveSteps(*plain, base, options, 1, 2);
  }
  RecordingFileSystem fs;
  auto model = NewModel(&fs);
  ASSERT_NE(model, nullptr);
  CheckpointManager::Options o;
  o.max_to_keep = 2;
  o.save_options = options;
  const std::string dir = root + "/d";

  // A dry run: how many steps, and which one commits.
  CopyDir(base, dir);
  fs.Clear();
  int steps = 0, commit = 0;
  {
    auto manager = CheckpointManager::Create(model->checkpoint(), dir, o);
    ASSERT_TRUE(manager.ok());
    CKFLOW_ASSERT_OK(model->SetStep(3));
    ASSERT_TRUE((*manager)->Save(model->session(), 3).ok());
    CKFLOW_ASSERT_OK(model->checkpoint().Sync());
    steps = fs.steps();
    // The first state write commits: its rename, and for a durable save
    // the directory sync after it (a failure there puts the old state back).
    for (const FsEvent& e : fs.events()) {
      if (commit > 0 && e.step == commit + 1 && e.op == FsOp::kSyncDir) commit = e.step;
      if (commit == 0 && e.op == FsOp::kRename && e.to == JoinPath(dir, kCheckpointStateFilename)) {
        commit = e.step;
      }
    }
  }
  ASSERT_GT(commit, 0);
  int failed_saves = 0, injected = 0;
  for (int step = 1; step <= steps; ++step) {
    for (int err : {ENOSPC, EIO, EACCES}) {
      SCOPED_TRACE("mode " + mode + ", step " + std::to_string(step) + ", " + strerrorname_np(err));
      CopyDir(base, dir);
      fs.Clear();
      fs.FailStep(step, err);
      auto manager = CheckpointManager::Create(model->checkpoint(), dir, o);
      ASSERT_TRUE(manager.ok()) << manager.status();
      CKFLOW_ASSERT_OK(model->SetStep(3));
      StatusOr<std::string> saved = (*manager)->Save(model->session(), 3);
      Status s = saved.ok() ? model->checkpoint().Sync() : saved.status();
      fs.FailStep(0, 0);
      const std::optional<FsEvent> failed = fs.failed_event();
      if (failed) ++injected;
      const std::string where = failed ? failed->ToString() : "no step failed";
      const std::optional<std::string> latest = LatestCheckpoint(dir);
      EXPECT_EQ(latest, (*manager)->latest_checkpoint()) << where;
      if (!s.ok()) {
        ++failed_saves;
        EXPECT_THAT(s, testing::StatusIs(s.code(), "(injected)"));
        EXPECT_LE(step, commit) << where << ": failed after the commit point: " << s;
        EXPECT_EQ(latest, Ckpt(dir, 2)) << where << ": " << s;
        EXPECT_FALSE(stdfs::exists(IndexFilename(Ckpt(dir, 3)))) << where;
        EXPECT_FALSE(stdfs::exists(DataFilename(Ckpt(dir, 3), 0, 1))) << where;
        EXPECT_TRUE(SteppedModel::CheckHoldsStep(Ckpt(dir, 2), 2).ok()) << where;
      } else {
        EXPECT_EQ(latest, Ckpt(dir, 3)) << where;
        Status held = SteppedModel::CheckHoldsStep(Ckpt(dir, 3), 3);
        EXPECT_TRUE(held.ok()) << where << ": " << held;
      }
      // Then a save without faults succeeds and sweeps the debris.
      CKFLOW_ASSERT_OK(model->SetStep(4));
      StatusOr<std::string> next = (*manager)->Save(model->session(), 4);
      ASSERT_TRUE(next.ok()) << where << ": " << next.status();
      CKFLOW_ASSERT_OK(model->checkpoint().Sync());
      EXPECT_EQ(LatestCheckpoint(dir), Ckpt(dir, 4));
      EXPECT_TRUE(SteppedModel::CheckHoldsStep(Ckpt(dir, 4), 4).ok()) << where;
      EXPECT_EQ(Join(testing::StrayFiles(dir)), "") << where;
      if (HasFailure()) return;
    }
  }
  EXPECT_GT(failed_saves, 0);
  std::printf(
      "[ figures  ] %s: %d steps, %d faults injected, %d failed saves (commit at step %d)\n",
      mode.c_str(), steps, injected, failed_saves, commit);
}

INSTANTIATE_TEST_SUITE_P(Modes, SaveFaultTest,
                         ::testing::Values("sync", "durable", "async", "async_durable", "sharded"));

// A failure after the commit point (the second state write, after the
// sweep) is no failed save: reported in last_sweep_status().
TEST(SaveFault, AfterTheCommitPointIsAWarningNotAnError) {
  const std::string dir = testing::NewTempDir("post");
  RecordingFileSystem fs;
  auto model = NewModel(&fs);
  ASSERT_NE(model, nullptr);
  CheckpointManager::Options o;
  o.max_to_keep = 1;
  auto manager = CheckpointManager::Create(model->checkpoint(), dir, o);
  ASSERT_TRUE(manager.ok());
  CKFLOW_ASSERT_OK(model->SetStep(1));
  ASSERT_TRUE((*manager)->Save(model->session(), 1).ok());
  // The second save's second state rename is its last rename.
  fs.Clear();
  CKFLOW_ASSERT_OK(model->SetStep(2));
  ASSERT_TRUE((*manager)->Save(model->session(), 2).ok());
  int last_rename = 0;
  for (const FsEvent& e : fs.events()) {
    if (e.op == FsOp::kRename && e.to == JoinPath(dir, kCheckpointStateFilename))
      last_rename = e.step;
  }
  const std::string base = dir + "_base";
  CopyDir(dir, base);
  // Redo save 2 from the state after save 1 with that step failing.
  stdfs::remove_all(dir);
  auto plain = NewModel(nullptr);
  SaveSteps(*plain, dir, {}, 1, 1);
  auto again = CheckpointManager::Create(model->checkpoint(), dir, o);
  ASSERT_TRUE(again.ok());
  fs.Clear();
  // Create adds no steps in a clean directory; the save's steps match.
  fs.FailStep(last_rename, EIO);
  StatusOr<std::string> saved = (*again)->Save(model->session(), 2);
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_TRUE(fs.failed_event().has_value());
  EXPECT_EQ((*again)->latest_checkpoint(), Ckpt(dir, 2));
  EXPECT_EQ(LatestCheckpoint(dir), Ckpt(dir, 2));
  EXPECT_TRUE(IsDataLoss((*again)->last_sweep_status())) << (*again)->last_sweep_status();
}

// errno becomes a code once, with the file and the operation named.
TEST(SaveFault, ErrorsNameTheFileTheStepAndTheErrno) {
  const std::string dir = testing::NewTempDir("msg");
  RecordingFileSystem fs;
  auto model = NewModel(&fs);
  ASSERT_NE(model, nullptr);
  CKFLOW_ASSERT_OK(model->SetStep(1));
  ASSERT_TRUE(model->checkpoint().Save(dir + "/ckpt", model->session(), {.durable = true}).ok());
  const int first_sync = fs.FirstStep(FsOp::kSync);
  ASSERT_GT(first_sync, 0);
  fs.Clear();
  fs.FailStep(first_sync, EIO);
  StatusOr<std::string> saved =
      model->checkpoint().Save(dir + "/ckpt", model->session(), {.durable = true});
  ASSERT_TRUE(fs.failed_event().has_value());
  EXPECT_EQ(fs.failed_event()->op, FsOp::kSync);
  EXPECT_THAT(saved, testing::StatusIs(StatusCode::kDataLoss,
                                       fs.failed_event()->path + ": sync (injected): "));
  EXPECT_THAT(saved, testing::StatusIs(StatusCode::kDataLoss, "(EIO)"));
  EXPECT_EQ(LatestCheckpoint(dir), dir + "/ckpt-1");
}

// A restore with step k of the file layer (reads counted: open, stat,
// list) failing with EIO or EACCES: an error naming the injected failure,
// or, when the failed step did not matter, every value bit for bit.
TEST(RestoreFault, EveryStepFailsCleanly) {
  const std::string dir = testing::NewTempDir("rfault");
  {
    auto plain = NewModel(nullptr);
    ASSERT_NE(plain, nullptr);
    SaveSteps(*plain, dir, {.files_per_device = 2}, 7, 7);
  }
  RecordingFileSystem fs;
  fs.CountReads(true);
  int steps = 0;
  {
    auto model = NewModel(&fs);
    ASSERT_NE(model, nullptr);
    fs.Clear();
    StatusOr<LoadStatus> status = model->checkpoint().Restore(LatestCheckpoint(dir));
    ASSERT_TRUE(status.ok()) << status.status();
    CKFLOW_ASSERT_OK(status->RunRestoreOps(model->session()));
    CKFLOW_ASSERT_OK(model->CheckSessionHoldsStep(7));
    steps = fs.steps();
  }
  ASSERT_GT(steps, 2);
  int failed = 0;
  for (int step = 1; step <= steps; ++step) {
    for (int err : {EIO, EACCES}) {
      SCOPED_TRACE("step " + std::to_string(step) + ", " + strerrorname_np(err));
      auto model = NewModel(&fs);
      ASSERT_NE(model, nullptr);
      fs.Clear();
      fs.FailStep(step, err);
      StatusOr<LoadStatus> status = model->checkpoint().Restore(dir + "/ckpt-7");
      Status s = status.ok() ? status->RunRestoreOps(model->session()) : status.status();
      fs.FailStep(0, 0);
      if (s.ok()) {
        CKFLOW_EXPECT_OK(model->CheckSessionHoldsStep(7));
      } else {
        ++failed;
        EXPECT_THAT(
            s, testing::StatusIs(err == EIO ? StatusCode::kDataLoss : StatusCode::kPermissionDenied,
                                 "(injected)"));
      }
    }
  }
  EXPECT_GT(failed, 0);
}

// ------------------------------------------------------------ async

TEST(AsyncSave, OnDoneReportsEachSaveWithItsPath) {
  const std::string dir = testing::NewTempDir("done");
  RecordingFileSystem fs;
  auto model = NewModel(&fs);
  ASSERT_NE(model, nullptr);
  std::mutex mu;
  std::vector<std::pair<std::string, Status>> done;
  CheckpointManager::Options o;
  o.save_options.async = true;
  o.save_options.on_done = [&](const std::string& path, const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    done.emplace_back(path, s);
  };
  auto manager = CheckpointManager::Create(model->checkpoint(), dir, o);
  ASSERT_TRUE(manager.ok());
  CKFLOW_ASSERT_OK(model->SetStep(1));
  ASSERT_TRUE((*manager)->Save(model->session(), 1).ok());
  CKFLOW_ASSERT_OK(model->checkpoint().Sync());
  // The second save fails at its first rename, in the background.
  fs.Clear();
  CKFLOW_ASSERT_OK(model->SetStep(2));
  fs.SetHook(nullptr);
  fs.FailStep(1000000, 0);
  ASSERT_TRUE((*manager)->Save(model->session(), 2).ok());
  CKFLOW_ASSERT_OK(model->checkpoint().Sync());
  const int rename = fs.FirstStep(FsOp::kRename);
  ASSERT_GT(rename, 0);
  fs.Clear();
  fs.FailStep(rename, ENOSPC);
  CKFLOW_ASSERT_OK(model->SetStep(3));
  ASSERT_TRUE((*manager)->Save(model->session(), 3).ok());
  Status synced = model->checkpoint().Sync();
  EXPECT_TRUE(IsResourceExhausted(synced)) << synced;
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].first, Ckpt(dir, 1));
  EXPECT_TRUE(done[0].second.ok());
  EXPECT_EQ(done[1].first, Ckpt(dir, 2));
  EXPECT_TRUE(done[1].second.ok());
  EXPECT_EQ(done[2].first, Ckpt(dir, 3));
  EXPECT_EQ(done[2].second, synced);
  EXPECT_EQ((*manager)->latest_checkpoint(), Ckpt(dir, 2));
  EXPECT_EQ(LatestCheckpoint(dir), Ckpt(dir, 2));
}

// ------------------------------------------------------------ paths

void WriteState(const std::string& dir, const std::string& path, double ts) {
  CheckpointStateData state;
  state.model_checkpoint_path = path;
  state.all_model_checkpoint_paths = {path};
  state.all_model_checkpoint_timestamps = {ts};
  CKFLOW_ASSERT_OK(WriteCheckpointState(dir, state));
}

TEST(StateFilePaths, OutsideTheDirectoryAreNeitherFollowedNorDeleted) {
  const std::string root = testing::NewTempDir("paths");
  const std::string dir = root + "/d";
  auto model = NewModel(nullptr);
  ASSERT_NE(model, nullptr);
  CKFLOW_ASSERT_OK(model->SetStep(1));
  ASSERT_TRUE(model->checkpoint().Write(root + "/other/ckpt-1", model->session()).ok());
  for (const std::string& named : {std::string("../other/ckpt-1"), root + "/other/ckpt-1"}) {
    SCOPED_TRACE(named);
    stdfs::remove_all(dir);
    WriteState(dir, named, 1e9);
    EXPECT_EQ(LatestCheckpoint(dir), std::nullopt);
    EXPECT_EQ(LatestCheckpoint(dir, {.allow_outside_directory = true}), JoinPath(dir, named));
    EXPECT_THAT(ResolveCheckpointPath(dir),
                testing::StatusIs(StatusCode::kInvalidArgument, "outside the directory"));
    {
      auto manager = CheckpointManager::Create(model->checkpoint(), dir, {});
      ASSERT_TRUE(manager.ok());
      EXPECT_EQ((*manager)->latest_checkpoint(), std::nullopt);
      EXPECT_TRUE((*manager)->checkpoints().empty());
    }
    // Opted in, it is tracked, but a sweep never deletes it.
    CheckpointManager::Options o;
    o.max_to_keep = 1;
    o.allow_outside_directory = true;
    auto manager = CheckpointManager::Create(model->checkpoint(), dir, o);
    ASSERT_TRUE(manager.ok());
    EXPECT_EQ((*manager)->latest_checkpoint(), JoinPath(dir, named));
    ASSERT_TRUE((*manager)->Save(model->session(), 2).ok());
    EXPECT_EQ((*manager)->checkpoints(), std::vector<std::string>{Ckpt(dir, 2)});
    EXPECT_TRUE(stdfs::exists(root + "/other/ckpt-1.index"));
    EXPECT_TRUE(stdfs::exists(root + "/other/ckpt-1.data-00000-of-00001"));
  }
}

TEST(StateFilePaths, ManagerDeletesOnlyItsOwnNaming) {
  const std::string dir = testing::NewTempDir("naming");
  auto model = NewModel(nullptr);
  ASSERT_NE(model, nullptr);
  CKFLOW_ASSERT_OK(model->SetStep(1));
  ASSERT_TRUE(model->checkpoint().Write(dir + "/precious", model->session()).ok());
  WriteState(dir, "precious", 1e9);
  CheckpointManager::Options o;
  o.max_to_keep = 1;
  auto manager = CheckpointManager::Create(model->checkpoint(), dir, o);
  ASSERT_TRUE(manager.ok());
  ASSERT_TRUE((*manager)->Save(model->session(), 2).ok());
  EXPECT_TRUE(stdfs::exists(dir + "/precious.index"));
}

// Debris of every kind a save makes is removed by a new manager; files
// that merely look similar are not; a set-aside file is put back.
TEST(Debris, ANewManagerRemovesOnlyWhatSavesMake) {
  const std::string dir = testing::NewTempDir("debris");
  auto touch = [&](const std::string& name) {
    stdfs::create_directories(Dirname(dir + "/" + name));
    std::ofstream(dir + "/" + name) << "x";
  };
  const std::vector<std::string> debris = {
      "ckpt-7_temp/part-00000-of-00002.data-00000-of-00001.tempstate123",
      "ckpt-7_temp/part-00001-of-00002.index",
      "ckpt-7.index.tempstate99",
      "ckpt-7.data-00000-of-00001.tempstate5",
      "ckpt-6.index.old42",
      "checkpoint.tmp0123456789abcdef0123456789abcdef",
  };
  const std::vector<std::string> foreign = {
      "ckpt-7.index.tempstate", "notes.txt",         "other-3.index.tempstate1",
      "ckpt-x.index.old1",      "checkpoint.tmpXYZ", "keep_temp/part-00000-of-00001.index",
  };
  for (const auto& n : debris) touch(n);
  for (const auto& n : foreign) touch(n);
  auto model = NewModel(nullptr);
  ASSERT_NE(model, nullptr);
  auto manager = CheckpointManager::Create(model->checkpoint(), dir, {});
  ASSERT_TRUE(manager.ok());
  // A set-aside file whose name nothing took goes back under it.
  std::set<std::string> want = {"ckpt-6.index"};
  for (const auto& n : foreign) {
    want.insert(n);
    if (n.find('/') != std::string::npos) want.insert(Dirname(n) + "/");
  }
  EXPECT_EQ(testing::DiskTree(dir), want);
}

// A save that completed cleanly leaves nothing to sweep: the next save does
// not list the directory (most of a small model's async-save stall). One
// that failed does, and the save after it sweeps what the failure left.
TEST(Debris, OnlyASaveAfterAnIncompleteOneListsTheDirectory) {
  const std::string dir = testing::NewTempDir("debris");
  RecordingFileSystem fs;
  auto model = NewModel(&fs);
  ASSERT_NE(model, nullptr);
  // Keeping every checkpoint: deleting an old one lists the directory too.
  auto manager = CheckpointManager::Create(model->checkpoint(), dir, {.max_to_keep = 10});
  ASSERT_TRUE(manager.ok()) << manager.status();
  auto lists = [&] {
    const std::vector<FsEvent> events = fs.events();
    return std::count_if(events.begin(), events.end(),
                         [](const FsEvent& e) { return e.op == FsOp::kList; });
  };
  for (int step = 1; step <= 3; ++step) {
    CKFLOW_ASSERT_OK(model->SetStep(step));
    fs.Clear();
    CKFLOW_ASSERT_OK((*manager)->Save(model->session()).status());
    EXPECT_EQ(lists(), 0) << "save " << step;
  }
  // A save that fails half way leaves a temp file, which the next save
  // removes after listing the directory.
  std::ofstream(dir + "/ckpt-4.index.tempstate1") << "x";
  fs.Clear();
  fs.FailStep(1, EIO);
  EXPECT_FALSE((*manager)->Save(model->session()).ok());
  fs.FailStep(0, 0);
  fs.Clear();
  CKFLOW_ASSERT_OK(model->SetStep(5));
  CKFLOW_ASSERT_OK((*manager)->Save(model->session()).status());
  EXPECT_GT(lists(), 0);
  EXPECT_EQ(Join(testing::StrayFiles(dir)), "");
}

// ------------------------------------------------------------ crashes

// How many data files checkpoints `a` and `b` share (hard links of one
// file, as an incremental save makes).
int SharedDataFiles(const std::string& a, const std::string& b) {
  auto files = [](const std::string& prefix) {
    std::set<std::pair<uint64_t, uint64_t>> ids;
    const std::string data = std::string(Basename(prefix)) + ".data-";
    for (const auto& e : stdfs::directory_iterator(Dirname(prefix))) {
      if (!e.path().filename().string().starts_with(data)) continue;
      StatusOr<FileStat> st = FileSystem::Default()->Stat(e.path().string());
      if (st.ok()) ids.emplace(st->device, st->inode);
    }
    return ids;
  };
  const auto in_a = files(a);
  int shared = 0;
  for (const auto& id : files(b)) shared += static_cast<int>(in_a.count(id));
  return shared;
}

struct ChildResult {
  int rc;
  std::string out;
  bool killed() const { return out.find("killed at") != std::string::npos; }
  int64_t last_saved() const {
    int64_t last = 0;
    std::istringstream in(out);
    std::string word;
    int64_t n;
    while (in >> word) {
      if (word == "saved" && in >> n) last = std::max(last, n);
    }
    return last;
  }
  int steps() const {
    size_t at = out.rfind("steps ");
    return at == std::string::npos ? 0 : std::atoi(out.c_str() + at + 6);
  }
};

ChildResult RunChild(const std::string& args, const std::string& prefix = "") {
  ChildResult r;
  r.rc = testing::RunCommand(prefix + CKFLOW_SAVE_CHILD " " + args + " 2>&1", &r.out);
  return r;
}

// What `ckflow fsck --checksums` checks: every checkpoint whole, the state
// file right, nothing left behind.
void ExpectFsckClean(const std::string& dir) {
  StatusOr<CheckpointDirectoryHealth> health =
      CheckCheckpointDirectory(dir, {.verify = CheckpointVerify::kChecksums});
  ASSERT_TRUE(health.ok()) << health.status();
  std::string report;
  for (const CheckpointHealth& c : health->checkpoints) report += c.status.ToString() + "\n";
  for (const std::string& p : health->state_problems) report += p + "\n";
  for (const std::string& d : health->debris) report += d + "\n";
  EXPECT_TRUE(health->clean()) << report;
}

class CrashPointTest : public ::testing::TestWithParam<std::string> {};

// The child is killed before, and after, each step of the file layer in a
// manager's save that sweeps (a new manager's debris removal included).
// Then this process finds the latest checkpoint whole, bit for bit, and
// after the child's next save no debris is left.
TEST_P(CrashPointTest, KilledAtEveryStepOfASave) {
  const std::string mode = GetParam();
  const std::string root = testing::NewTempDir("crash");
  const std::string base = root + "/base", dir = root + "/d";
  ChildResult first = RunChild(base + " " + mode + " 1 2");
  ASSERT_EQ(first.rc, 0) << first.out;
  // The save killed is the child's last: step 3, or for an incremental
  // save step 5, the first that links (3 is full, 4 regroups the frozen
  // variable into a file of its own), killed only at its own steps.
  const bool incremental = mode == "incremental";
  const int64_t last = incremental ? 5 : 3;
  const std::string saves = " 3 " + std::to_string(last);
  int first_step = 1;
  if (incremental) {
    CopyDir(base, dir);
    ChildResult before = RunChild(dir + " " + mode + " 3 4");
    ASSERT_EQ(before.rc, 0) << before.out;
    first_step = before.steps() + 1;
  }
  CopyDir(base, dir);
  ChildResult dry = RunChild(dir + " " + mode + saves);
  ASSERT_EQ(dry.rc, 0) << dry.out;
  const int steps = dry.steps();
  ASSERT_GT(steps - first_step, 10) << dry.out;
  if (incremental) {
    EXPECT_EQ(SharedDataFiles(Ckpt(dir, 4), Ckpt(dir, 5)), 1) << "the last save did not link";
  }
  int kills = 0, rolled_forward = 0;
  for (int step = first_step; step <= steps; ++step) {
    for (bool after : {false, true}) {
      CopyDir(base, dir);
      ChildResult killed = RunChild(dir + " " + mode + saves + " --kill-step " +
                                    std::to_string(step) + (after ? " --kill-after" : ""));
      SCOPED_TRACE(killed.out);
      ASSERT_TRUE(killed.killed()) << "mode " << mode << " step " << step;
      ++kills;
      const std::optional<std::string> latest = LatestCheckpoint(dir);
      ASSERT_TRUE(latest == Ckpt(dir, last - 1) || latest == Ckpt(dir, last))
          << latest.value_or("(none)");
      const int64_t n = latest == Ckpt(dir, last) ? last : last - 1;
      rolled_forward += n == last;
      Status held = SteppedModel::CheckHoldsStep(*latest, n);
      ASSERT_TRUE(held.ok()) << held;
      // A fresh process (this one) restores it.
      auto model = NewModel(nullptr);
      ASSERT_NE(model, nullptr);
      StatusOr<LoadStatus> status = model->checkpoint().Restore(latest);
      ASSERT_TRUE(status.ok()) << status.status();
      CKFLOW_ASSERT_OK(status->RunRestoreOps(model->session()));
      CKFLOW_ASSERT_OK(model->CheckSessionHoldsStep(n));
      const std::string after_kill = std::to_string(last + 1);
      ChildResult next = RunChild(dir + " " + mode + " " + after_kill + " " + after_kill);
      ASSERT_EQ(next.rc, 0) << next.out;
      EXPECT_EQ(LatestCheckpoint(dir), Ckpt(dir, last + 1));
      ASSERT_EQ(Join(testing::StrayFiles(dir)), "") << "mode " << mode << " step " << step;
      ExpectFsckClean(dir);
    }
  }
  std::printf("[ figures  ] crash points %s: %d steps, %d kills, %d after the commit\n",
              mode.c_str(), steps - first_step + 1, kills, rolled_forward);
}

INSTANTIATE_TEST_SUITE_P(Modes, CrashPointTest,
                         ::testing::Values("sync", "durable", "async", "async_durable", "sharded",
                                           "incremental"));

// Kills at random moments (SIGKILL from outside, while the child saves in a
// loop), rotating the modes. Counts lost, corrupt and regressed
// checkpoints (all must be 0) and the debris left, which the next save
// must bring back to 0. CKFLOW_RANDOM_KILLS sets the number (default 12;
// the full campaign is 200), CKFLOW_RANDOM_SEED the seed.
TEST(RandomKills, NothingLostCorruptOrRegressed) {
  const char* kills_env = std::getenv("CKFLOW_RANDOM_KILLS");
  const char* seed_env = std::getenv("CKFLOW_RANDOM_SEED");
  const int kills = kills_env ? std::atoi(kills_env) : 12;
  const uint64_t seed = seed_env ? std::strtoull(seed_env, nullptr, 10) : 20261201;
  const std::vector<std::string> modes = {"sync",          "durable", "async",
                                          "async_durable", "sharded", "incremental"};
  const std::string dir = testing::NewTempDir("random");
  // How long a child takes to start and save a few times: kill within that.
  auto t0 = std::chrono::steady_clock::now();
  ChildResult warm = RunChild(dir + " sync 1 3");
  ASSERT_EQ(warm.rc, 0) << warm.out;
  const double span =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1.5;
  std::mt19937_64 rng(seed);
  int64_t committed = warm.last_saved();
  int lost = 0, corrupt = 0, regressed = 0, killed = 0;
  uint64_t max_debris = 0;
  for (int i = 0; i < kills; ++i) {
    const std::string& mode = modes[i % modes.size()];
    const double delay = std::uniform_real_distribution<double>(0.05, span)(rng);
    char timeout[64];
    std::snprintf(timeout, sizeof(timeout), "timeout -s KILL %.3f ", delay);
    ChildResult r = RunChild(dir + " " + mode + " " + std::to_string(committed + 1) + " " +
                                 std::to_string(committed + 1000),
                             timeout);
    if (r.rc != 0) ++killed;
    committed = std::max(committed, r.last_saved());
    uint64_t debris = 0;
    testing::StrayFiles(dir, &debris);
    max_debris = std::max(max_debris, debris);
    const std::optional<std::string> latest = LatestCheckpoint(dir);
    if (!latest) {
      ++lost;
      continue;
    }
    const int64_t n = std::atoll(latest->substr(latest->rfind('-') + 1).c_str());
    if (n < committed) ++regressed;
    if (!SteppedModel::CheckHoldsStep(*latest, n).ok()) ++corrupt;
    committed = std::max(committed, n);
  }
  ChildResult last = RunChild(dir + " sync " + std::to_string(committed + 1) + " " +
                              std::to_string(committed + 1));
  ASSERT_EQ(last.rc, 0) << last.out;
  uint64_t left = 0;
  const std::vector<std::string> strays = testing::StrayFiles(dir, &left);
  ExpectFsckClean(dir);
  std::printf(
      "[ figures  ] random kills: %d runs, %d killed, %lld saves committed, seed %llu: lost %d, "
      "corrupt %d, regressed %d; debris up to %llu bytes between saves, %llu after the next "
      "save\n",
      kills, killed, static_cast<long long>(committed - warm.last_saved()),
      static_cast<unsigned long long>(seed), lost, corrupt, regressed,
      static_cast<unsigned long long>(max_debris), static_cast<unsigned long long>(left));
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(corrupt, 0);
  EXPECT_EQ(regressed, 0);
  EXPECT_EQ(Join(strays), "");
  EXPECT_GT(killed, 0);
}

}  // namespace
}  // namespace ckflow
