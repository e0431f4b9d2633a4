// SaveOptions::incremental: a save writes only the data files whose values
// changed since the saver's previous save and hard-links the others from it.
// Every checkpoint stays whole: it restores as any other, also after the
// checkpoint it linked from is deleted, and whatever would make a link wrong
// (the previous checkpoint gone or rewritten) gives a full save instead.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/logging.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "checkpoint/weights.h"
#include "ops/initializers.h"
#include "ops/partitioned_variables.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/checkpoint/recording_file_system.h"
#include "tests/checkpoint/stepped_model.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

namespace fs = std::filesystem;
using testing::CountingVariable;
using ::testing::HasSubstr;
using testing::SameTensor;
using testing::SetValue;
using testing::ValueOf;

constexpr int64_t kBase = int64_t{1} << 19;  // 2 MiB of float32: frozen
constexpr int64_t kHead = 256;               // trained at every step

Tensor Filled(int64_t elements, float value) {
  Tensor t(DT_FLOAT, TensorShape({elements}));
  for (float& x : t.flat<float>()) x = value;
  return t;
}

Tensor Counting(int64_t elements, float start) {
  Tensor t(DT_FLOAT, TensorShape({elements}));
  float x = start;
  for (float& v : t.flat<float>()) v = x++;
  return t;
}

// A fine-tuning program: a large frozen base and a small head the loop
// changes. With `parts`, the base is a PartitionedVariable of that many
// parts (a [kBase / 64, 64] matrix).
struct Program : testing::ModelProgram {
  explicit Program(int parts = 0) {
    if (parts == 0) {
      Add("base", CountingVariable(scope, "base", TensorShape({kBase}), 0.0f));
    } else {
      partitioned =
          PartitionedVariable::Create(scope, "base", DT_FLOAT, TensorShape({kBase / 64, 64}),
                                      initializers::Zeros(), {.num_shards = parts});
      model->Track("base", partitioned);
    }
    Add("head", CountingVariable(scope, "head", TensorShape({kHead}), 1e6f));
    CKFLOW_EXPECT_OK(Finish());
  }
  Variable& head() const { return *vars.back(); }
  void Step(float x) { SetValue(*session, head(), Filled(kHead, x)); }

  std::shared_ptr<PartitionedVariable> partitioned;
};

// (device, inode) of each data file of checkpoint `prefix`.
std::set<std::pair<dev_t, ino_t>> DataFiles(const std::string& prefix) {
  std::set<std::pair<dev_t, ino_t>> files;
  const std::string data = std::string(Basename(prefix)) + ".data-";
  for (const auto& entry : fs::directory_iterator(Dirname(prefix))) {
    if (!entry.path().filename().string().starts_with(data)) continue;
    struct stat st;
    EXPECT_EQ(::stat(entry.path().c_str(), &st), 0) << entry.path();
    files.emplace(st.st_dev, st.st_ino);
  }
  return files;
}

int Shared(const std::string& a, const std::string& b) {
  int shared = 0;
  for (const auto& file : DataFiles(a)) shared += static_cast<int>(DataFiles(b).count(file));
  return shared;
}

// Restores `path` into a fresh program (every value -1 first), checking
// that it consumes the whole checkpoint (for one Checkpoint::Write made,
// which has no save counter for the program's, that it matched); returns
// base and head.
std::pair<Tensor, Tensor> Restored(const std::string& path, bool written = false) {
  Program p;
  SetValue(*p.session, *p.vars[0], Filled(kBase, -1));
  p.Step(-1);
  StatusOr<LoadStatus> status = p.checkpoint->Restore(path);
  EXPECT_TRUE(status.ok()) << status.status();
  if (!status.ok()) return {};
  CKFLOW_EXPECT_OK(status->RunRestoreOps(*p.session));
  CKFLOW_EXPECT_OK(written ? status->AssertNontrivialMatch() : status->AssertConsumed());
  return {ValueOf(*p.session, *p.vars[0]), ValueOf(*p.session, p.head())};
}

class IncrementalSaveTest : public ::testing::Test {
 protected:
  // Saves through a manager keeping `keep`, `steps` times, the head changed
  // before each save after the first. Returns the paths.
  std::vector<std::string> SaveSteps(Program& p, int steps, int keep, bool async = false) {
    auto manager = CheckpointManager::Create(
        *p.checkpoint, dir_,
        {.max_to_keep = keep, .save_options = {.async = async, .incremental = true}});
    EXPECT_TRUE(manager.ok()) << manager.status();
    std::vector<std::string> paths;
    for (int i = 0; i < steps && manager.ok(); ++i) {
      if (i > 0) p.Step(static_cast<float>(i));
      StatusOr<std::string> path = (*manager)->Save(*p.session);
      EXPECT_TRUE(path.ok()) << path.status();
      if (async) CKFLOW_EXPECT_OK(p.checkpoint->Sync());
      paths.push_back(path.ok() ? *path : "");
    }
    return paths;
  }

  std::string dir_ = testing::NewTempDir("incremental_save");
};

TEST_F(IncrementalSaveTest, UnchangedFilesAreLinkedAndEveryCheckpointRestoresWhole) {
  Program p;
  const std::vector<std::string> paths = SaveSteps(p, 4, /*keep=*/5);
  // The second save learns that only the head changes and saves it apart
  // from the base; from the third on the base's file is linked.
  EXPECT_EQ(DataFiles(paths[1]).size(), 2u);
  EXPECT_EQ(Shared(paths[0], paths[1]), 0);
  EXPECT_EQ(Shared(paths[1], paths[2]), 1);
  EXPECT_EQ(Shared(paths[2], paths[3]), 1);
  EXPECT_EQ(Shared(paths[1], paths[3]), 1);
  for (size_t i = 0; i < paths.size(); ++i) {
    auto [base, head] = Restored(paths[i]);
    EXPECT_TRUE(SameTensor(base, Counting(kBase, 0.0f))) << paths[i];
    const Tensor want_head = i == 0 ? Counting(kHead, 1e6f) : Filled(kHead, static_cast<float>(i));
    EXPECT_TRUE(SameTensor(head, want_head)) << paths[i];
  }
}

TEST_F(IncrementalSaveTest, DeletingTheCheckpointLinkedFromLeavesTheNewerOneWhole) {
  Program p;
  const std::vector<std::string> paths = SaveSteps(p, 4, /*keep=*/1);
  for (size_t i = 0; i + 1 < paths.size(); ++i) {
    EXPECT_FALSE(fs::exists(IndexFilename(paths[i]))) << paths[i];
  }
  EXPECT_EQ(LatestCheckpoint(dir_), paths.back());
  auto [base, head] = Restored(paths.back());
  EXPECT_TRUE(SameTensor(base, Counting(kBase, 0.0f)));
  EXPECT_TRUE(SameTensor(head, Filled(kHead, 3)));
  // Every byte of it read back, every CRC checked.
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader,
                              BundleReader::Open(paths.back()));
  for (const BundleEntry& entry : reader->entries()) {
    EXPECT_TRUE(reader->Lookup(entry.key).ok()) << entry.key;
  }
}

TEST_F(IncrementalSaveTest, AChangedFrozenValueIsWrittenAgain) {
  Program p;
  std::vector<std::string> paths = SaveSteps(p, 3, /*keep=*/5);
  SetValue(*p.session, *p.vars[0], Filled(kBase, 5));
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      std::string path, p.checkpoint->Save(dir_ + "/more", *p.session, {.incremental = true}));
  EXPECT_EQ(Shared(paths.back(), path), 0);
  auto [base, head] = Restored(path);
  EXPECT_TRUE(SameTensor(base, Filled(kBase, 5)));
  EXPECT_TRUE(SameTensor(head, Filled(kHead, 2)));
}

TEST_F(IncrementalSaveTest, AsynchronousSavesLinkToo) {
  Program p;
  const std::vector<std::string> paths = SaveSteps(p, 4, /*keep=*/2, /*async=*/true);
  EXPECT_EQ(Shared(paths[2], paths[3]), 1);
  auto [base, head] = Restored(paths.back());
  EXPECT_TRUE(SameTensor(base, Counting(kBase, 0.0f)));
  EXPECT_TRUE(SameTensor(head, Filled(kHead, 3)));
}

TEST_F(IncrementalSaveTest, NothingIsLinkedFromACheckpointGoneOrRewritten) {
  std::vector<std::string> warnings;
  SetLogSink([&](LogSeverity severity, std::string_view message) {
    if (severity == LogSeverity::kWarning) warnings.emplace_back(message);
  });
  Program p;
  const std::vector<std::string> paths = SaveSteps(p, 2, /*keep=*/5);
  const SaveOptions incremental{.incremental = true};
  // Rewritten in place (a user's tool): linking it would copy bytes that
  // the index of the saver's memory no longer describes.
  for (const auto& entry : fs::directory_iterator(dir_)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("ckpt-2.data-")) {
      fs::last_write_time(entry.path(), fs::last_write_time(entry.path()) + std::chrono::hours(1));
    }
  }
  p.Step(7);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string third,
                              p.checkpoint->Save(dir_ + "/ckpt", *p.session, incremental));
  EXPECT_EQ(Shared(paths[1], third), 0);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("replaced or rewritten"));
  // Gone: the next save after that links from `third`, unless it is gone.
  fs::remove(IndexFilename(third));
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (entry.path().filename().string().starts_with("ckpt-3.data-")) fs::remove(entry.path());
  }
  p.Step(8);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string fourth,
                              p.checkpoint->Save(dir_ + "/ckpt", *p.session, incremental));
  SetLogSink(nullptr);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_THAT(warnings[1], HasSubstr(third));
  auto [base, head] = Restored(fourth);
  EXPECT_TRUE(SameTensor(base, Counting(kBase, 0.0f)));
  EXPECT_TRUE(SameTensor(head, Filled(kHead, 8)));
}

// An object tracked elsewhere in the process (here another Checkpoint's
// save counter, made at its first save) makes the saver plan its save
// anew; with the same values it keeps its files, and still links.
TEST_F(IncrementalSaveTest, AnObjectTrackedElsewhereDoesNotStopTheLinks) {
  Program p;
  std::vector<std::string> paths = SaveSteps(p, 2, /*keep=*/5);
  Checkpoint other(p.scope, {{"model", p.model}});
  CKFLOW_ASSERT_OK(other.Save(dir_ + "/other/ckpt", *p.session).status());
  p.Step(9);
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      std::string path, p.checkpoint->Save(dir_ + "/ckpt", *p.session, {.incremental = true}));
  EXPECT_EQ(Shared(paths[1], path), 1);
  auto [base, head] = Restored(path);
  EXPECT_TRUE(SameTensor(base, Counting(kBase, 0.0f)));
  EXPECT_TRUE(SameTensor(head, Filled(kHead, 9)));
}

TEST_F(IncrementalSaveTest, SavingOverThePreviousCheckpointWritesEverything) {
  Program p;
  const SaveOptions incremental{.incremental = true};
  CKFLOW_ASSERT_OK(p.checkpoint->Write(dir_ + "/w", *p.session, incremental).status());
  p.Step(1);
  CKFLOW_ASSERT_OK(p.checkpoint->Write(dir_ + "/w", *p.session, incremental).status());
  p.Step(2);
  CKFLOW_ASSERT_OK(p.checkpoint->Write(dir_ + "/w", *p.session, incremental).status());
  auto [base, head] = Restored(dir_ + "/w", /*written=*/true);
  EXPECT_TRUE(SameTensor(base, Counting(kBase, 0.0f)));
  EXPECT_TRUE(SameTensor(head, Filled(kHead, 2)));
}

// Writes (no save counter) of a model nothing changed between: after the
// regrouping the first data file holds the object graph alone and every
// variable's file is linked.
TEST_F(IncrementalSaveTest, WritesOfAnUnchangedModelLinkEveryVariable) {
  Program p;
  const SaveOptions incremental{.incremental = true};
  std::vector<std::string> paths;
  for (int i = 0; i < 3; ++i) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(
        std::string path,
        p.checkpoint->Write(dir_ + "/w" + std::to_string(i), *p.session, incremental));
    paths.push_back(path);
  }
  EXPECT_EQ(DataFiles(paths[2]).size(), 2u);
  EXPECT_EQ(Shared(paths[1], paths[2]), 1);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(paths[2]));
  int in_first = 0;
  for (const BundleEntry& entry : reader->entries()) in_first += entry.shard_id == 0;
  EXPECT_EQ(in_first, 1);  // the object graph
  auto [base, head] = Restored(paths[2], /*written=*/true);
  EXPECT_TRUE(SameTensor(base, Counting(kBase, 0.0f)));
  EXPECT_TRUE(SameTensor(head, Counting(kHead, 1e6f)));
}

// The parts of a partitioned base are linked as slices: the full tensor's
// entry lists every part's slice, so the checkpoint restores into another
// partitioning.
TEST_F(IncrementalSaveTest, PartsOfAPartitionedVariableAreLinkedAsSlices) {
  Program p(/*parts=*/4);
  std::vector<Tensor> parts;
  for (int i = 0; i < 4; ++i) {
    const auto& part = p.partitioned->parts()[i];
    const TensorShape shape = part->shape().ToTensorShape();
    CKFLOW_ASSERT_OK_AND_ASSIGN(
        Tensor value,
        Counting(shape.num_elements(), 1000.0f * static_cast<float>(i)).Reshaped(shape));
    SetValue(*p.session, *part, value);
    parts.push_back(value);
  }
  const std::vector<std::string> paths = SaveSteps(p, 3, /*keep=*/5);
  EXPECT_GE(Shared(paths[1], paths[2]), 1);

  Program q(/*parts=*/3);
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, q.checkpoint->Restore(paths[2]));
  CKFLOW_ASSERT_OK(status.RunRestoreOps(*q.session));
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  std::vector<float> want;
  for (const Tensor& part : parts) {
    for (float x : part.flat<float>()) want.push_back(x);
  }
  std::vector<float> got;
  for (const auto& part : q.partitioned->parts()) {
    for (float x : ValueOf(*q.session, *part).flat<float>()) got.push_back(x);
  }
  EXPECT_EQ(got, want);
  EXPECT_TRUE(SameTensor(ValueOf(*q.session, q.head()), Filled(kHead, 2)));
}

// A save that links: each step of its file layer (the reads of the previous
// index, each link, each part index, the writes, the merge's renames, the
// state file) failed in turn with EIO. Whatever fails, the newest checkpoint
// the directory names restores whole with the values it was saved with, the
// checkpoint linked from stays whole, and the next save, which links again,
// succeeds and leaves no debris.
TEST_F(IncrementalSaveTest, AFaultAtAnyStepOfALinkingSaveLeavesEveryCheckpointWhole) {
  Program p;
  testing::RecordingFileSystem fs;
  fs.CountReads(true);
  Checkpoint checkpoint(p.scope, {{"model", p.model}}, {.file_system = &fs});
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      auto manager,
      CheckpointManager::Create(checkpoint, dir_,
                                {.max_to_keep = 2, .save_options = {.incremental = true}}));
  float head = 0;
  std::map<std::string, float> heads;  // the head each checkpoint holds
  auto save = [&]() -> Status {
    p.Step(++head);
    StatusOr<std::string> path = manager->Save(*p.session);
    if (path.ok()) heads[*path] = head;
    return path.status();
  };
  CKFLOW_ASSERT_OK(save());
  CKFLOW_ASSERT_OK(save());  // regroups: the base's file is linked from here on
  fs.Clear();
  CKFLOW_ASSERT_OK(save());
  const int steps = fs.steps();
  const std::vector<testing::FsEvent> events = fs.events();
  ASSERT_TRUE(std::any_of(events.begin(), events.end(),
                          [](const testing::FsEvent& e) { return e.op == testing::FsOp::kLink; }));
  int failed = 0;
  for (int step = 1; step <= steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const std::optional<std::string> before = LatestCheckpoint(dir_);
    fs.Clear();
    fs.FailStep(step, EIO);
    const Status s = save();
    fs.FailStep(0, 0);
    if (!s.ok()) ++failed;
    const std::optional<std::string> latest = LatestCheckpoint(dir_);
    ASSERT_TRUE(latest.has_value());
    if (!s.ok()) {
      EXPECT_EQ(latest, before) << s;
    }
    auto [base, restored_head] = Restored(*latest);
    EXPECT_TRUE(SameTensor(base, Counting(kBase, 0.0f))) << *latest;
    EXPECT_TRUE(SameTensor(restored_head, Filled(kHead, heads[*latest]))) << *latest;
    CKFLOW_ASSERT_OK(save());
    EXPECT_EQ(testing::StrayFiles(dir_), std::vector<std::string>());
    auto [next_base, next_head] = Restored(*LatestCheckpoint(dir_));
    EXPECT_TRUE(SameTensor(next_base, Counting(kBase, 0.0f)));
    EXPECT_TRUE(SameTensor(next_head, Filled(kHead, head)));
    if (HasFailure()) return;
  }
  EXPECT_GT(failed, 0);
}

TEST_F(IncrementalSaveTest, SaveWeightsRefusesIt) {
  Program p;
  const Status s = SaveWeights(p.model, dir_ + "/w", *p.session, {.incremental = true});
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kInvalidArgument, "incremental"));
}

}  // namespace
}  // namespace ckflow
