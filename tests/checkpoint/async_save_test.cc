// SaveOptions::async: the values saved are those at the moment Save
// returned, the state file moves only once the files are complete, errors
// surface on the next save or on Sync, and a crash mid-write leaves the
// previous checkpoint as the latest.

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "bundle/bundle_format.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "checkpoint/weights.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/test_util.h"

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
