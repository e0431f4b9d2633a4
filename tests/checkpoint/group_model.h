// GroupModel: the model group saves are tested on, shared by the in-process
// group tests (threads as members) and the programs mpirun starts. Small
// and large float variables under "model" and, optionally, Adam (its m and
// v slots for each variable and its beta powers, made by Minimize); every
// value a function of a seed, so a restore is checked bit for bit against
// the seed the saver used. No gtest.

#ifndef CKFLOW_TESTS_CHECKPOINT_GROUP_MODEL_H_
#define CKFLOW_TESTS_CHECKPOINT_GROUP_MODEL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/group.h"
#include "ops/variables.h"
#include "runtime/session.h"

namespace ckflow::testing {

struct GroupModelSpec {
  int small = 24;                  // variables of 1..7 elements
  int large = 2;                   // variables of large_elements
  int64_t large_elements = 65536;  // 256 KiB each
  bool slots = true;               // Adam's m and v for every variable
  // Without: no assign ops (a smaller graph, for the scale test); the
  // variables' initializers hold init_seed's values, and Set takes only it.
  bool assignable = true;
  uint32_t init_seed = 0;
};

class GroupModel {
 public:
  // The model, its checkpoint (with `options`) and a session; nothing
  // initialized.
  static StatusOr<std::unique_ptr<GroupModel>> Create(const GroupModelSpec& spec,
                                                      CheckpointOptions options = {});
  // Initializes every variable (and slot) to seed's values.
  // InvalidArgument for a seed other than init_seed without assign ops.
  Status Set(uint32_t seed);
  // Checks every initialized variable and slot against seed's values, bit
  // for bit (DataLoss naming the first difference), and returns how many
  // were initialized: after a group restore, the ones this member owns.
  StatusOr<int> CheckInitialized(uint32_t seed);
  int num_values() const { return static_cast<int>(vars_.size()); }

  Checkpoint& checkpoint() { return *checkpoint_; }
  Session& session() { return *session_; }
  const Scope& scope() const { return scope_; }

 private:
  GroupModel() = default;
  static Tensor Values(uint32_t seed, int index, const TensorShape& shape);

  Scope scope_ = Scope::NewRootScope();
  std::shared_ptr<Trackable> model_;
  std::vector<std::shared_ptr<Variable>> vars_;  // variables, then slots
  std::vector<Output> feeds_;
  std::vector<Output> assigns_;
  std::vector<Output> initialized_;
  uint32_t init_seed_ = 0;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::unique_ptr<Session> session_;
};

// Restores `path` into a fresh single-process GroupModel (default spec):
// OK if every value is consumed and holds seed's values, bit for bit.
Status CheckSeedInOneProcess(const std::string& path, uint32_t seed);

// Fails creating any file whose path contains `part` (ENOSPC, as a full
// disk would): one member's part of a save.
class FailingPartFs : public FileSystemWrapper {
 public:
  explicit FailingPartFs(std::string part)
      : FileSystemWrapper(FileSystem::Default()), part_(std::move(part)) {}
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;

 private:
  const std::string part_;
};

// Threads as the members of a group. The members' meeting point:
// AllGather hands every member the round's strings once all have arrived
// (no timeout: threads do not hang here; WorkerGroup's timeout is tested
// under mpirun).
class ThreadMeeting {
 public:
  explicit ThreadMeeting(int size) : size_(size), slots_(size) {}
  int size() const { return size_; }
  std::vector<std::string> AllGather(int rank, std::string_view mine);

 private:
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int64_t round_ = 0;
  std::vector<std::string> slots_, result_;
};

class ThreadMember : public CheckpointGroup {
 public:
  ThreadMember(ThreadMeeting* meeting, int rank) : meeting_(meeting), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return meeting_->size(); }
  StatusOr<std::vector<std::string>> AllGather(std::string_view mine, GroupTimeout) override {
    return meeting_->AllGather(rank_, mine);
  }

 private:
  ThreadMeeting* meeting_;
  int rank_;
};

// Runs body(rank, member) on `size` threads at once.
void RunGroup(int size, const std::function<void(int, CheckpointGroup&)>& body);

}  // namespace ckflow::testing

#endif  // CKFLOW_TESTS_CHECKPOINT_GROUP_MODEL_H_
