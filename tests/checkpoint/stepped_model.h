// SteppedModel: a small model whose values are a function of a step
// number, so that any checkpoint of it can be checked bit for bit against
// the step it claims (ckpt-N must hold step N's values). Shared by the
// reliability tests and the save_child process they kill; no gtest.

#ifndef CKFLOW_TESTS_CHECKPOINT_STEPPED_MODEL_H_
#define CKFLOW_TESTS_CHECKPOINT_STEPPED_MODEL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "ops/variables.h"
#include "runtime/session.h"

namespace ckflow::testing {

class SteppedModel {
 public:
  static constexpr int kVariables = 4;
  // Elements of variable i: one large enough to be written in several
  // chunks, one tiny, one between, and a frozen one (2 MiB), whose value
  // moves only every kFrozenSteps steps: what an incremental save links.
  static int64_t Elements(int i);
  static constexpr int kFrozen = 3;
  static constexpr int64_t kFrozenSteps = 10;
  static float Value(int64_t step, int variable, int64_t element);
  // The checkpoint key of variable i.
  static std::string Key(int i);
  // OK if the checkpoint `prefix` holds exactly step `step`'s values (and
  // nothing is missing); else DataLoss naming the first difference.
  static Status CheckHoldsStep(const std::string& prefix, int64_t step, FileSystem* fs = nullptr);

  static StatusOr<std::unique_ptr<SteppedModel>> Create(CheckpointOptions options = {});

  // Assigns step `step`'s values to the variables; the frozen one only
  // when its value moves (an assignment of the same value would still be a
  // write, which an incremental save must write again). Threads may call it
  // at once (training steps racing saves); the frozen variable then holds
  // the value of one of the steps they set.
  Status SetStep(int64_t step);
  // OK if the variables in the session hold step `step`'s values bit for
  // bit; else DataLoss naming the first difference.
  Status CheckSessionHoldsStep(int64_t step);

  Checkpoint& checkpoint() { return *checkpoint_; }
  Session& session() { return *session_; }

 private:
  SteppedModel() = default;
  Scope scope_ = Scope::NewRootScope();
  std::shared_ptr<Trackable> model_;
  std::vector<std::shared_ptr<Variable>> variables_;
  std::vector<Output> feeds_;
  std::vector<Output> assigns_;
  std::vector<Output> reads_;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::unique_ptr<Session> session_;
  std::atomic<int64_t> frozen_at_{-1};  // the frozen variable's step / kFrozenSteps
};

// The save options of a named mode: "sync", "durable", "async",
// "async_durable", "sharded" (async, durable, three data files),
// "incremental" (SaveOptions::incremental).
StatusOr<SaveOptions> SaveModeOptions(const std::string& mode);

// Files in `dir` (recursively, directories with a trailing '/') that are
// neither the state file nor a file of a checkpoint the state file lists:
// what a dead save left behind. With their total size.
std::vector<std::string> StrayFiles(const std::string& dir, uint64_t* bytes = nullptr);

}  // namespace ckflow::testing

#endif  // CKFLOW_TESTS_CHECKPOINT_STEPPED_MODEL_H_
