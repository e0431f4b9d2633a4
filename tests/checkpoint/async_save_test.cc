// SaveOptions::async: the values saved are those at the moment Save
// returned, the state file moves only once the files are complete, errors
// surface on the next save or on Sync, and a crash mid-write leaves the
// previous checkpoint as the latest.

#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "checkpoint/async_writer_internal.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "checkpoint/weights.h"
#include "ops/array_ops.h"
#include "ops/variable_ops.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/checkpoint/recording_file_system.h"
#include "tests/test_util.h"
#include "workloads/model_program.h"

namespace ckflow {
namespace {

namespace fs = std::filesystem;
using testing::CountingVariable;
using testing::SameTensor;
using testing::SetValue;
using testing::ValueOf;

// `count` float variables of `elements` each, counting from 100*i.
struct Program : testing::ModelProgram {
  Program(int count, int64_t elements) {
    for (int i = 0; i < count; ++i) {
      const std::string name = "v" + std::to_string(i);
      Add(name,
          CountingVariable(scope, name, TensorShape({elements}), 100.0f * static_cast<float>(i)));
    }
    CKFLOW_EXPECT_OK(Finish());
  }

  std::vector<Tensor> Values() {
    std::vector<Tensor> values;
    for (const auto& v : vars) values.push_back(ValueOf(*session, *v));
    return values;
  }
};

Tensor Filled(int64_t elements, float value) {
  Tensor t(DT_FLOAT, TensorShape({elements}));
  for (float& x : t.flat<float>()) x = value;
  return t;
}

// Restores `path` into a fresh program of the same shape and returns its
// values.
std::vector<Tensor> RestoredValues(const std::string& path, int count, int64_t elements) {
  Program p(count, elements);
  for (const auto& v : p.vars) SetValue(*p.session, *v, Filled(elements, -1));
  LoadStatus status = p.checkpoint->Restore(path).value();
  EXPECT_TRUE(status.RunRestoreOps(*p.session).ok());
  EXPECT_TRUE(status.AssertConsumed().ok());
  return p.Values();
}

TEST(AsyncSaveTest, SavesTheValuesOfTheMomentSaveReturned) {
  const std::string dir = testing::NewTempDir();
  Program p(4, 1 << 18);  // 4 MiB
  const std::vector<Tensor> before = p.Values();
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path,
                              p.checkpoint->Save(dir + "/ckpt", *p.session, {.async = true}));
  EXPECT_EQ(path, dir + "/ckpt-1");
  // The training loop goes on and changes every variable.
  for (const auto& v : p.vars) SetValue(*p.session, *v, Filled(1 << 18, 7));
  CKFLOW_ASSERT_OK(p.checkpoint->Sync());
  EXPECT_EQ(LatestCheckpoint(dir), path);
  std::vector<Tensor> restored = RestoredValues(path, 4, 1 << 18);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(SameTensor(restored[i], before[i])) << i;

  // A second async save reuses the snapshot buffers and sees the new values.
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      path, p.checkpoint->Save(dir + "/ckpt", *p.session, {.durable = true, .async = true}));
  CKFLOW_ASSERT_OK(p.checkpoint->Sync());
  EXPECT_EQ(LatestCheckpoint(dir), dir + "/ckpt-2");
  for (const Tensor& t : RestoredValues(path, 4, 1 << 18)) {
    EXPECT_TRUE(SameTensor(t, Filled(1 << 18, 7)));
  }
  CKFLOW_EXPECT_OK(p.checkpoint->Sync());  // nothing pending
}

// A table the loop updates by rows, too large to copy at every save, is
// saved from its own buffer: the write reads it a block at a time while the
// loop goes on, the loop sets aside only the blocks it changes before the
// write has read them, and the checkpoint holds the table as Save found it.
TEST(AsyncSaveTest, TableUpdatedByRowsIsSavedFromItsOwnBuffer) {
  constexpr int64_t kRows = 8192;
  constexpr int64_t kCols = 512;  // 16 MiB: snapshotted by blocks
  const std::string dir = testing::NewTempDir();
  testing::RecordingFileSystem files;
  std::mutex mu;
  std::condition_variable changed;
  bool writing = false;
  bool go = false;
  // Every write of a data file waits until the loop has run.
  files.SetHook([&](const testing::FsEvent& event, bool after) {
    if (after || event.op != testing::FsOp::kWrite ||
        event.path.find("data-") == std::string::npos) {
      return;
    }
    std::unique_lock<std::mutex> lock(mu);
    writing = true;
    changed.notify_all();
    changed.wait(lock, [&] { return go; });
  });
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<workloads::Module>();
  std::shared_ptr<Variable> table =
      model->Track("table", CountingVariable(scope, "table", TensorShape({kRows, kCols}), 0));
  Output ids = ops::Placeholder(scope, DT_INT64, {.shape = {-1}});
  Output rows = ops::Placeholder(scope, DT_FLOAT, {.shape = {-1, kCols}});
  Output scatter = ops::ResourceScatterAdd(scope, table->handle(), ids, rows);
  Checkpoint checkpoint(scope, {{"model", model}}, {.file_system = &files});
  std::unique_ptr<Session> session = testing::NewSession(scope);
  testing::RunOrFail(*session, {GlobalVariablesInitializer(scope)});
  auto add_to_rows = [&](const std::vector<int64_t>& at, float delta) {
    Tensor updates(DT_FLOAT, TensorShape({static_cast<int64_t>(at.size()), kCols}));
    for (float& x : updates.flat<float>()) x = delta;
    CKFLOW_ASSERT_OK(
        session->Run({{ids, Tensor::FromVector(at)}, {rows, updates}}, {}, {scatter}).status());
  };
  add_to_rows({0}, 1);  // a table the loop updates by rows
  const Tensor before = ValueOf(*session, *table).Clone();
  const void* buffer = ValueOf(*session, *table).raw_data();
  const int64_t copies = internal::NumSnapshotAllocations();

  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path,
                              checkpoint.Save(dir + "/ckpt", *session, {.async = true}));
  {
    std::unique_lock<std::mutex> lock(mu);
    changed.wait(lock, [&] { return writing; });
  }
  // A row every 97, all over the table: blocks the write has not read yet.
  std::vector<int64_t> spread;
  for (int64_t r = 0; r < kRows; r += 97) spread.push_back(r);
  add_to_rows(spread, 5);
  {
    std::lock_guard<std::mutex> lock(mu);
    go = true;
  }
  changed.notify_all();
  CKFLOW_ASSERT_OK(checkpoint.Sync());

  // One snapshot buffer: save_counter's, not the table's.
  EXPECT_EQ(internal::NumSnapshotAllocations(), copies + 1);
  EXPECT_EQ(ValueOf(*session, *table).raw_data(), buffer);  // updated in place
  EXPECT_EQ(ValueOf(*session, *table).flat<float>()[97 * kCols],
            before.flat<float>()[97 * kCols] + 5);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(path));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor saved,
                              reader->Lookup("model/table/.ATTRIBUTES/VARIABLE_VALUE"));
  EXPECT_TRUE(SameTensor(saved, before));

  // The next save sees the rows changed, and again copies nothing.
  const Tensor now = ValueOf(*session, *table).Clone();
  CKFLOW_ASSERT_OK_AND_ASSIGN(path, checkpoint.Save(dir + "/ckpt", *session, {.async = true}));
  add_to_rows(spread, -2);
  CKFLOW_ASSERT_OK(checkpoint.Sync());
  EXPECT_EQ(internal::NumSnapshotAllocations(), copies + 1);
  EXPECT_EQ(ValueOf(*session, *table).raw_data(), buffer);
  CKFLOW_ASSERT_OK_AND_ASSIGN(reader, BundleReader::Open(path));
  CKFLOW_ASSERT_OK_AND_ASSIGN(saved, reader->Lookup("model/table/.ATTRIBUTES/VARIABLE_VALUE"));
  EXPECT_TRUE(SameTensor(saved, now));
}

// A regular file where the save's temp directory goes makes the background
// write fail after Save has returned.
void BlockTempDir(const std::string& path) { std::ofstream(path + "_temp") << "in the way"; }

TEST(AsyncSaveTest, BackgroundErrorIsReturnedBySyncOnce) {
  const std::string dir = testing::NewTempDir();
  Program p(2, 16);
  BlockTempDir(dir + "/ckpt-1");
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path,
                              p.checkpoint->Save(dir + "/ckpt", *p.session, {.async = true}));
  Status s = p.checkpoint->Sync();
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kNotFound, path));
  CKFLOW_EXPECT_OK(p.checkpoint->Sync());
  // The state file never named the failed checkpoint.
  EXPECT_EQ(LatestCheckpoint(dir), std::nullopt);
  EXPECT_FALSE(fs::exists(IndexFilename(path)));
}

TEST(AsyncSaveTest, BackgroundErrorIsReturnedByTheNextSave) {
  const std::string dir = testing::NewTempDir();
  Program p(2, 16);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string first, p.checkpoint->Save(dir + "/ckpt", *p.session));
  BlockTempDir(dir + "/ckpt-2");
  CKFLOW_ASSERT_OK(p.checkpoint->Save(dir + "/ckpt", *p.session, {.async = true}).status());
  StatusOr<std::string> next = p.checkpoint->Save(dir + "/ckpt", *p.session, {.async = true});
  EXPECT_THAT(next, testing::StatusIs(StatusCode::kNotFound, dir + "/ckpt-2"));
  EXPECT_EQ(LatestCheckpoint(dir), first);
  // Reported once; saving goes on.
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string later,
                              p.checkpoint->Save(dir + "/ckpt", *p.session, {.async = true}));
  CKFLOW_ASSERT_OK(p.checkpoint->Sync());
  EXPECT_EQ(LatestCheckpoint(dir), later);
}

TEST(AsyncSaveTest, ManagerBookkeepingHappensWhenTheFilesAreComplete) {
  const std::string dir = testing::NewTempDir();
  Program p(2, 1 << 16);
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      auto manager, CheckpointManager::Create(*p.checkpoint, dir,
                                              {.max_to_keep = 2, .save_options = {.async = true}}));
  std::vector<std::string> saved;
  for (int i = 0; i < 3; ++i) {
    SetValue(*p.session, *p.vars[0], Filled(1 << 16, static_cast<float>(i)));
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, manager->Save(*p.session));
    saved.push_back(path);
  }
  CKFLOW_ASSERT_OK(p.checkpoint->Sync());
  EXPECT_EQ(manager->checkpoints(), (std::vector<std::string>{saved[1], saved[2]}));
  EXPECT_EQ(manager->latest_checkpoint(), saved[2]);
  EXPECT_EQ(LatestCheckpoint(dir), saved[2]);
  EXPECT_FALSE(fs::exists(IndexFilename(saved[0])));
  EXPECT_TRUE(SameTensor(RestoredValues(saved[2], 2, 1 << 16)[0], Filled(1 << 16, 2)));
}

TEST(AsyncSaveTest, SaveWeightsRefusesAsync) {
  const std::string dir = testing::NewTempDir();
  Program p(1, 4);
  Status s = SaveWeights(p.model, dir + "/w", *p.session, {.async = true});
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kInvalidArgument, dir + "/w"));
  CKFLOW_EXPECT_OK(SaveWeights(p.model, dir + "/w", *p.session));
}

// Run by CrashMidWriteLeavesThePreviousCheckpoint in a child process: one
// complete save, then an async one that the process does not survive.
TEST(AsyncSaveTest, CrashingChild) {
  const char* dir = std::getenv("CKFLOW_ASYNC_CRASH_DIR");
  if (dir == nullptr) GTEST_SKIP() << "run by CrashMidWriteLeavesThePreviousCheckpoint";
  Program p(8, 1 << 20);  // 32 MiB
  CKFLOW_ASSERT_OK(p.checkpoint->Save(std::string(dir) + "/ckpt", *p.session).status());
  for (const auto& v : p.vars) SetValue(*p.session, *v, Filled(1 << 20, 7));
  CKFLOW_ASSERT_OK(
      p.checkpoint->Save(std::string(dir) + "/ckpt", *p.session, {.durable = true, .async = true})
          .status());
  std::raise(SIGKILL);  // while the background thread writes
}

TEST(AsyncSaveTest, CrashMidWriteLeavesThePreviousCheckpoint) {
  const std::string dir = testing::NewTempDir();
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::string output;
  const int rc = testing::RunCommand("CKFLOW_ASYNC_CRASH_DIR=" + dir + " " + self +
                                         " --gtest_filter=AsyncSaveTest.CrashingChild 2>&1",
                                     &output);
  ASSERT_NE(rc, 0) << "the child was meant to die mid-write:\n" << output;
  ASSERT_TRUE(fs::exists(IndexFilename(dir + "/ckpt-1"))) << output;
  EXPECT_EQ(LatestCheckpoint(dir), dir + "/ckpt-1");
  std::vector<Tensor> restored = RestoredValues(dir + "/ckpt-1", 8, 1 << 20);
  // The values of the first save, not the 7s of the one that died.
  EXPECT_EQ(restored[3].flat<float>()[0], 300.0f);
  EXPECT_EQ(restored[3].flat<float>()[(1 << 20) - 1], 300.0f + ((1 << 20) - 1));
  // Saving over the debris of the dead write (ckpt-2_temp) works.
  Program p(8, 16);
  CKFLOW_ASSERT_OK(p.checkpoint->Save(dir + "/ckpt", *p.session).status());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, p.checkpoint->Save(dir + "/ckpt", *p.session));
  EXPECT_EQ(path, dir + "/ckpt-2");
  EXPECT_EQ(LatestCheckpoint(dir), path);
  RestoredValues(path, 8, 16);
}

}  // namespace
}  // namespace ckflow
