// Checkpoints under concurrency (run under ThreadSanitizer by ./run.sh tsan):
// training steps on several threads while async saves write; two sessions
// restoring one checkpoint at once; a manager saving in another process while
// this one reads LatestCheckpoint.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "bundle/bundle_reader.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "tests/checkpoint/stepped_model.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::SteppedModel;

std::unique_ptr<SteppedModel> NewModel() {
  StatusOr<std::unique_ptr<SteppedModel>> model = SteppedModel::Create();
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

TEST(CheckpointConcurrency, TrainingStepsRunWhileAsyncSavesWrite) {
  const std::string dir = testing::NewTempDir("conc");
  auto model = NewModel();
  ASSERT_NE(model, nullptr);
  CheckpointManager::Options o;
  o.max_to_keep = 2;
  o.save_options.async = true;
  auto manager = CheckpointManager::Create(model->checkpoint(), dir, o);
  ASSERT_TRUE(manager.ok());
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  std::vector<std::thread> trainers;
  for (int t = 0; t < 3; ++t) {
    trainers.emplace_back([&, t] {
      for (int64_t step = t; !stop.load(); step += 3) {
        if (!model->SetStep(step % 50).ok()) ++errors;
      }
    });
  }
  for (int64_t n = 1; n <= 8; ++n) {
    ASSERT_TRUE((*manager)->Save(model->session(), n).ok());
  }
  CKFLOW_EXPECT_OK(model->checkpoint().Sync());
  stop = true;
  for (auto& t : trainers) t.join();
  EXPECT_EQ(errors.load(), 0);
  const std::optional<std::string> latest = LatestCheckpoint(dir);
  ASSERT_EQ(latest, dir + "/ckpt-8");
  auto reader = BundleReader::Open(*latest);
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (const BundleEntry& e : (*reader)->entries()) CKFLOW_EXPECT_OK((*reader)->Verify(e));
}

TEST(CheckpointConcurrency, TwoSessionsRestoreOneCheckpointAtOnce) {
  const std::string dir = testing::NewTempDir("conc");
  {
    auto model = NewModel();
    ASSERT_NE(model, nullptr);
    CKFLOW_ASSERT_OK(model->SetStep(5));
    ASSERT_TRUE(model->checkpoint().Write(dir + "/ckpt-5", model->session()).ok());
  }
  auto a = NewModel();
  auto b = NewModel();
  ASSERT_TRUE(a && b);
  Status sa, sb;
  auto restore = [&](SteppedModel& m, Status* out) {
    StatusOr<LoadStatus> status = m.checkpoint().Restore(dir + "/ckpt-5");
    *out = status.ok() ? status->RunRestoreOps(m.session()) : status.status();
    if (out->ok()) *out = m.CheckSessionHoldsStep(5);
  };
  std::thread ta(restore, std::ref(*a), &sa);
  std::thread tb(restore, std::ref(*b), &sb);
  ta.join();
  tb.join();
  CKFLOW_EXPECT_OK(sa);
  CKFLOW_EXPECT_OK(sb);
}

// Another process saves (and sweeps) while this one follows
// LatestCheckpoint: whatever it names is whole, or already swept (NotFound).
TEST(CheckpointConcurrency, ManagerSaveRacesLatestCheckpointInAnotherProcess) {
  const std::string dir = testing::NewTempDir("conc");
  FILE* child =
      popen((std::string(CKFLOW_SAVE_CHILD) + " " + dir + " sync 1 60 2>&1").c_str(), "r");
  ASSERT_NE(child, nullptr);
  std::atomic<bool> done{false};
  std::string out;
  std::thread reader_of_child([&] {
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), child)) > 0) out.append(buf, n);
    done = true;
  });
  int seen = 0, swept = 0;
  while (!done.load()) {
    const std::optional<std::string> latest = LatestCheckpoint(dir);
    if (!latest) continue;
    const int64_t n = std::atoll(latest->substr(latest->rfind('-') + 1).c_str());
    Status s = SteppedModel::CheckHoldsStep(*latest, n);
    if (IsNotFound(s)) {
      ++swept;
      continue;
    }
    EXPECT_TRUE(s.ok()) << s;
    ++seen;
  }
  reader_of_child.join();
  EXPECT_EQ(pclose(child), 0) << out;
  EXPECT_GT(seen, 0);
  std::printf("[ figures  ] read %d checkpoints while they were saved (%d swept first)\n", seen,
              swept);
}

}  // namespace
}  // namespace ckflow
