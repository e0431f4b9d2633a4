// PreemptionHandler (checkpoint/preemption.h): a signal raised in this
// process, or Trigger, makes the next SaveIfPreempted save at the step
// reached and call exit_fn (recorded here instead of exiting); in a group
// (threads as members) every member saves at the same step.

#include "checkpoint/preemption.h"

#include <signal.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_management.h"
#include "tests/checkpoint/group_model.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::CheckSeedInOneProcess;
using testing::GroupModel;
using testing::RunGroup;
using testing::StatusIs;

std::unique_ptr<GroupModel> MakeModel(CheckpointGroup* group = nullptr) {
  CheckpointOptions options;
  options.group.group = group;
  StatusOr<std::unique_ptr<GroupModel>> m = GroupModel::Create({}, std::move(options));
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

std::unique_ptr<CheckpointManager> MakeManager(GroupModel& m, const std::string& dir,
                                               SaveOptions save_options = {}) {
  StatusOr<std::unique_ptr<CheckpointManager>> manager =
      CheckpointManager::Create(m.checkpoint(), dir, {.save_options = save_options});
  EXPECT_TRUE(manager.ok()) << manager.status();
  return manager.ok() ? *std::move(manager) : nullptr;
}

std::unique_ptr<PreemptionHandler> MakeHandler(GroupModel& m, CheckpointManager& manager,
                                               PreemptionOptions options) {
  StatusOr<std::unique_ptr<PreemptionHandler>> handler =
      PreemptionHandler::Create(m.checkpoint(), manager, std::move(options));
  EXPECT_TRUE(handler.ok()) << handler.status();
  return handler.ok() ? *std::move(handler) : nullptr;
}

// One process: a model holding seed 1's values, its manager in a fresh
// directory, and Install's handler, whose exit_fn (unless the test gives
// one, or asks for none) records the saves in exits_ instead of exiting.
class Preemption : public ::testing::Test {
 protected:
  void SetUp() override {
    m_ = MakeModel();
    ASSERT_NE(m_, nullptr);
    CKFLOW_ASSERT_OK(m_->Set(1));
  }
  PreemptionHandler* Install(PreemptionOptions options = {}, SaveOptions save_options = {},
                             bool record_exits = true) {
    manager_ = MakeManager(*m_, dir_, save_options);
    if (record_exits && !options.exit_fn) {
      options.exit_fn = [this](const PreemptionSave& save) { exits_.push_back(save); };
    }
    handler_ = MakeHandler(*m_, *manager_, std::move(options));
    return handler_.get();
  }
  Session& session() { return m_->session(); }

  std::string dir_ = testing::NewTempDir("preempt");
  std::unique_ptr<GroupModel> m_;
  std::unique_ptr<CheckpointManager> manager_;
  std::unique_ptr<PreemptionHandler> handler_;
  std::vector<PreemptionSave> exits_;
};

TEST_F(Preemption, WithoutTheSignalNothingIsSaved) {
  PreemptionHandler* handler = Install();
  ASSERT_NE(handler, nullptr);
  for (int64_t step = 1; step <= 20; ++step) {
    StatusOr<std::optional<PreemptionSave>> saved = handler->SaveIfPreempted(session(), step);
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_FALSE(saved->has_value()) << "step " << step;
  }
  EXPECT_TRUE(exits_.empty());
  EXPECT_FALSE(handler->received_signal());
  EXPECT_EQ(LatestCheckpoint(dir_), std::nullopt);
}

TEST_F(Preemption, SigtermSavesTheStepReachedThenCallsExitFn) {
  PreemptionHandler* handler = Install({.exit_code = 7});
  ASSERT_NE(handler, nullptr);
  for (int64_t step = 1; step <= 3; ++step) {
    CKFLOW_ASSERT_OK(m_->Set(static_cast<uint32_t>(step)));
    ASSERT_FALSE(handler->SaveIfPreempted(session(), step)->has_value());
  }
  // The signal comes in the middle of step 4, which still finishes (its
  // values are seed 40's) before the save.
  StatusOr<std::optional<PreemptionSave>> saved = handler->Run(session(), 4, [&]() -> Status {
    EXPECT_EQ(raise(SIGTERM), 0);
    EXPECT_TRUE(handler->received_signal());
    return m_->Set(40);
  });
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_TRUE(saved->has_value());
  EXPECT_EQ((*saved)->signal, SIGTERM);
  EXPECT_EQ((*saved)->step, 4);
  EXPECT_EQ((*saved)->path, dir_ + "/ckpt-4");
  EXPECT_EQ((*saved)->exit_code, 7);
  ASSERT_EQ(exits_.size(), 1u);
  EXPECT_EQ(exits_[0].path, dir_ + "/ckpt-4");
  EXPECT_EQ(exits_[0].exit_code, 7);
  EXPECT_EQ(LatestCheckpoint(dir_), dir_ + "/ckpt-4");
  CKFLOW_EXPECT_OK(CheckSeedInOneProcess(dir_ + "/ckpt-4", 40));
  // Answered: the next steps go on without saving.
  EXPECT_FALSE(handler->received_signal());
  EXPECT_FALSE(handler->SaveIfPreempted(session(), 5)->has_value());
  EXPECT_EQ(exits_.size(), 1u);
}

TEST_F(Preemption, WithoutAnExitFnTheProcessExitsWithTheCode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the session has threads
  // The death test's child runs this test again from the start, in a new
  // process: it saves into the parent's directory, named in the environment.
  constexpr char kDirVariable[] = "CKFLOW_PREEMPTION_EXIT_DIR";
  if (const char* parent = std::getenv(kDirVariable)) {
    dir_ = parent;
  } else {
    ASSERT_EQ(setenv(kDirVariable, dir_.c_str(), 1), 0);
  }
  const std::string dir = dir_;
  EXPECT_EXIT(
      {
        PreemptionHandler* handler = Install({.exit_code = 43}, {}, /*record_exits=*/false);
        if (handler == nullptr) std::exit(1);
        handler->Trigger();
        handler->SaveIfPreempted(session(), 3).status().IgnoreError();
        std::exit(2);  // not reached
      },
      ::testing::ExitedWithCode(43), "saved .*/ckpt-3 at step 3; exiting with 43");
  unsetenv(kDirVariable);
  // What the exited process left, as the restarted one would find it.
  EXPECT_EQ(LatestCheckpoint(dir), dir + "/ckpt-3");
  CKFLOW_EXPECT_OK(CheckSeedInOneProcess(dir + "/ckpt-3", 1));
}

TEST_F(Preemption, TheSignalIsConfigurable) {
  PreemptionHandler* handler = Install({.signal = SIGUSR1});
  ASSERT_NE(handler, nullptr);
  ASSERT_EQ(raise(SIGUSR1), 0);
  StatusOr<std::optional<PreemptionSave>> saved = handler->SaveIfPreempted(session(), 12);
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_TRUE(saved->has_value());
  EXPECT_EQ((*saved)->signal, SIGUSR1);
  EXPECT_EQ((*saved)->path, dir_ + "/ckpt-12");
  CKFLOW_EXPECT_OK(CheckSeedInOneProcess(dir_ + "/ckpt-12", 1));
}

TEST_F(Preemption, AnAsyncSaveIsCompleteWhenExitFnRuns) {
  int exits = 0;
  PreemptionOptions options;
  options.exit_fn = [&](const PreemptionSave& save) {
    ++exits;
    EXPECT_EQ(save.exit_code, 42);  // TensorFlow's
    // What a restarted process would find, before this one is gone.
    EXPECT_EQ(LatestCheckpoint(dir_), save.path);
    CKFLOW_EXPECT_OK(CheckSeedInOneProcess(save.path, 1));
  };
  PreemptionHandler* handler = Install(options, {.async = true});
  ASSERT_NE(handler, nullptr);
  handler->Trigger();
  StatusOr<std::optional<PreemptionSave>> saved = handler->SaveIfPreempted(session(), 5);
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_TRUE(saved->has_value());
  EXPECT_EQ((*saved)->signal, 0);  // Trigger, not a signal
  EXPECT_EQ((*saved)->path, dir_ + "/ckpt-5");
  EXPECT_EQ(exits, 1);
}

TEST_F(Preemption, AFailedStepIsReturnedWithoutASave) {
  PreemptionHandler* handler = Install();
  ASSERT_NE(handler, nullptr);
  handler->Trigger();
  StatusOr<std::optional<PreemptionSave>> saved =
      handler->Run(session(), 2, [] { return InternalError("step 2 failed"); });
  EXPECT_THAT(saved.status(), StatusIs(StatusCode::kInternal, "step 2 failed"));
  EXPECT_TRUE(exits_.empty());
  EXPECT_EQ(LatestCheckpoint(dir_), std::nullopt);
  EXPECT_TRUE(handler->received_signal());  // still asked for: the next step saves
  ASSERT_TRUE(handler->SaveIfPreempted(session(), 3)->has_value());
  EXPECT_EQ(LatestCheckpoint(dir_), dir_ + "/ckpt-3");
}

TEST_F(Preemption, CreateRefusesWhatCannotWork) {
  manager_ = MakeManager(*m_, dir_);
  struct sigaction before = {};
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &before), 0);
  EXPECT_THAT(PreemptionHandler::Create(m_->checkpoint(), *manager_, {.signal = SIGKILL}).status(),
              StatusIs(StatusCode::kInvalidArgument, "signal 9 cannot be caught"));
  EXPECT_THAT(PreemptionHandler::Create(m_->checkpoint(), *manager_, {.check_every = 0}).status(),
              StatusIs(StatusCode::kInvalidArgument, "check_every is 0"));
  {
    auto first = MakeHandler(*m_, *manager_, {});
    ASSERT_NE(first, nullptr);
    EXPECT_THAT(PreemptionHandler::Create(m_->checkpoint(), *manager_, {}).status(),
                StatusIs(StatusCode::kAlreadyExists, "signal 15 already has a handler"));
  }
  // Gone: the signal's disposition is what it was, and it can be taken again.
  struct sigaction after = {};
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  EXPECT_NE(MakeHandler(*m_, *manager_, {}), nullptr);
}

// Each member of a thread group needs a signal of its own: a signal's flag
// is process-wide, as the signal is.
constexpr int kMemberSignals[] = {SIGUSR1, SIGUSR2, SIGHUP, SIGALRM};

// A member's model, manager (of `dir`) and handler, with its own signal.
struct Member {
  std::unique_ptr<GroupModel> m;
  std::unique_ptr<CheckpointManager> manager;
  std::unique_ptr<PreemptionHandler> handler;
};

Member MakeMember(CheckpointGroup& group, const std::string& dir, PreemptionOptions options) {
  Member member;
  member.m = MakeModel(&group);
  if (member.m == nullptr) return member;
  member.manager = MakeManager(*member.m, dir);
  if (member.manager == nullptr) return member;
  options.signal = kMemberSignals[group.rank()];
  options.group = &group;
  member.handler = MakeHandler(*member.m, *member.manager, std::move(options));
  return member;
}

TEST(PreemptionGroup, EveryMemberSavesAtTheSameStep) {
  const std::string dir = testing::NewTempDir("preempt");
  constexpr int kMembers = 4;
  std::vector<std::optional<PreemptionSave>> saves(kMembers);
  std::vector<int> exits(kMembers, 0);
  RunGroup(kMembers, [&](int rank, CheckpointGroup& group) {
    PreemptionOptions options;
    options.check_every = 2;
    options.exit_fn = [&exits, rank](const PreemptionSave&) { ++exits[rank]; };
    Member member = MakeMember(group, dir, options);
    ASSERT_NE(member.handler, nullptr);
    GroupModel* m = member.m.get();
    PreemptionHandler* handler = member.handler.get();
    for (int64_t step = 1; step <= 30 && !saves[rank]; ++step) {
      CKFLOW_ASSERT_OK(m->Set(static_cast<uint32_t>(100 + step)));
      // Only member 2 gets its signal, after its step 5.
      if (rank == 2 && step == 5) {
        EXPECT_EQ(raise(kMemberSignals[2]), 0);
      }
      StatusOr<std::optional<PreemptionSave>> saved = handler->SaveIfPreempted(m->session(), step);
      ASSERT_TRUE(saved.ok()) << "rank " << rank << ": " << saved.status();
      saves[rank] = *saved;
    }
  });
  // The vote started after step 6 (the first one after the signal) is
  // finished after step 8, by every member.
  for (int rank = 0; rank < kMembers; ++rank) {
    ASSERT_TRUE(saves[rank].has_value()) << "rank " << rank;
    EXPECT_EQ(saves[rank]->step, 8) << "rank " << rank;
    EXPECT_EQ(saves[rank]->path, dir + "/ckpt-8") << "rank " << rank;
    EXPECT_EQ(saves[rank]->signal, kMemberSignals[2]) << "rank " << rank;
    EXPECT_EQ(exits[rank], 1) << "rank " << rank;
  }
  EXPECT_EQ(LatestCheckpoint(dir), dir + "/ckpt-8");
  CKFLOW_EXPECT_OK(CheckSeedInOneProcess(dir + "/ckpt-8", 108));
}

TEST(PreemptionGroup, MembersAtDifferentStepsAreAnError) {
  const std::string dir = testing::NewTempDir("preempt");
  std::vector<Status> results(2);
  RunGroup(2, [&](int rank, CheckpointGroup& group) {
    Member member = MakeMember(group, dir, {});
    ASSERT_NE(member.handler, nullptr);
    // Member 1 counts from 11: the first vote's steps differ.
    for (int64_t step = 1; step <= 2 && results[rank].ok(); ++step) {
      results[rank] =
          member.handler->SaveIfPreempted(member.m->session(), step + 10 * rank).status();
    }
  });
  for (const Status& s : results) {
    EXPECT_THAT(s, StatusIs(StatusCode::kFailedPrecondition,
                            "the members voted after different steps (1 to 11)"));
  }
}

}  // namespace
}  // namespace ckflow
