// PreemptionHandler: a checkpoint when the machine is being taken away, as
// TensorFlow's tf.distribute.experimental.PreemptionCheckpointHandler.
//
//   CKFLOW_ASSIGN_OR_RETURN(auto preemption,
//                           PreemptionHandler::Create(checkpoint, *manager, {}));
//   for (int64_t step = first + 1; step <= last; ++step) {
//     session->Run(...);  // the step
//     CKFLOW_RETURN_IF_ERROR(preemption->SaveIfPreempted(*session, step).status());
//   }
//
// Creating it installs a handler for PreemptionOptions::signal (SIGTERM),
// which only sets a flag: a signal can come in the middle of anything, and
// nothing but an atomic store is safe there. The training loop calls
// SaveIfPreempted after each step; once the signal has come, it saves
// through the manager as checkpoint number `step` (so a resumed run's
// RestoreOrInitialize or LatestCheckpoint finds it as the newest), waits
// for the files to be complete (an async save too), and calls exit_fn,
// whose default exits the process with exit_code (42, TensorFlow's). A step
// is never cut short: the save holds the state of a step that finished.
//
// In a group (PreemptionOptions::group, the Checkpoint's group), every
// member must save at the same step, though the signal may reach only one
// of them. The members vote with the group's non-blocking maximum
// (CheckpointGroup::StartMax): every `check_every` steps each member
// finishes the vote it started `check_every` steps before and starts the
// next with its own flag. So the loop does not wait on the vote when no
// signal came: the vote had a whole interval to complete in the background,
// and in lockstep training (a gradient allreduce every step) every member
// has started it before any member can finish the next step, so FinishMax
// finds it done or all but done. Since every member finishes the same vote
// after the same step, they all see the same answer there, and all save at
// that step: check_every to 2 * check_every steps after the signal. Keep
// that well inside the grace period the platform gives (TensorFlow saves
// one step after, with an acknowledgement every worker waits for instead).
// A group without a non-blocking StartMax (the default, an AllGather)
// blocks at each vote instead.
// Every member must call SaveIfPreempted with the same steps, in the same
// order: a vote whose members were at different steps is FailedPrecondition.
//
// Thread safety: SaveIfPreempted from the training loop's thread; Trigger
// and received_signal anywhere. One handler per signal in a process at a
// time (a second is AlreadyExists): the signal's flag is process-wide, as
// the signal is. Destroying the handler finishes a pending vote (a
// collective: every member destroys its handler at the same point) and
// puts back the signal's previous disposition.

#ifndef CKFLOW_CHECKPOINT_PREEMPTION_H_
#define CKFLOW_CHECKPOINT_PREEMPTION_H_

#include <csignal>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "checkpoint/group.h"
#include "runtime/session.h"

namespace ckflow {

// What a preemption save did, handed to exit_fn.
struct PreemptionSave {
  // The signal that asked for it, on whichever member it came (0: Trigger).
  int signal = 0;
  int64_t step = 0;  // the step saved, and the checkpoint's number
  std::string path;  // the checkpoint saved
  int exit_code = 0;
};

struct PreemptionOptions {
  // The signal that asks for the save. Not SIGKILL or SIGSTOP (they cannot
  // be caught: InvalidArgument).
  int signal = SIGTERM;
  // After the save: exit_fn(save) if set, else the process exits with
  // exit_code (std::exit, so static destructors and atexit run). An exit_fn
  // that returns (a test; a program that stops its loop itself) makes
  // SaveIfPreempted return the save, and the handler is ready for the next
  // signal.
  int exit_code = 42;
  std::function<void(const PreemptionSave&)> exit_fn;
  // The group whose members save together (the one in the Checkpoint's
  // GroupOptions); null: this process alone, which saves right after the
  // step the signal came in.
  CheckpointGroup* group = nullptr;
  // Steps between the group's votes (see above). >= 1.
  int64_t check_every = 1;
  // How long a vote, and the group save, wait for the other members.
  GroupTimeout timeout = kDefaultGroupTimeout;
};

class PreemptionHandler {
 public:
  // Installs the signal handler. `checkpoint` and `manager` (the manager of
  // that checkpoint) must outlive the handler. InvalidArgument for a signal
  // that cannot be caught or check_every < 1; AlreadyExists if another
  // handler has the signal.
  static StatusOr<std::unique_ptr<PreemptionHandler>> Create(Checkpoint& checkpoint,
                                                             CheckpointManager& manager,
                                                             PreemptionOptions options = {});
  ~PreemptionHandler();
  PreemptionHandler(const PreemptionHandler&) = delete;
  PreemptionHandler& operator=(const PreemptionHandler&) = delete;

  // Call after every step, with the step just finished (the value the
  // checkpoint should resume from, e.g. the global step). nullopt while no
  // save is asked for (the usual case: one atomic load, and in a group a
  // non-blocking test of the vote); else saves as described above and
  // exits, or, when exit_fn returns, returns what was saved. Errors of the
  // save or the vote as they come (the signal stays pending, so the next
  // call tries again).
  StatusOr<std::optional<PreemptionSave>> SaveIfPreempted(Session& session, int64_t step);

  // TensorFlow's run(distributed_train_function): `step_fn` runs the step,
  // then SaveIfPreempted(session, step). step_fn's error is returned as is,
  // without a save.
  StatusOr<std::optional<PreemptionSave>> Run(Session& session, int64_t step,
                                              const std::function<Status()>& step_fn);

  // As if the signal had come (tests; a platform's own notice of
  // preemption, as TensorFlow's termination_watcher_fn).
  void Trigger();
  // This process got the signal (or Trigger) and has not saved since.
  bool received_signal() const;
  const PreemptionOptions& options() const { return options_; }

 private:
  PreemptionHandler(Checkpoint& checkpoint, CheckpointManager& manager, PreemptionOptions options)
      : checkpoint_(checkpoint), manager_(manager), options_(std::move(options)) {}
  // Whether to save after this step (nullopt: not), and the signal that
  // asked (0: Trigger): the flag alone, or the group's vote.
  StatusOr<std::optional<int>> Decide(int64_t step);
  StatusOr<PreemptionSave> Save(Session& session, int64_t step, int signal);

  Checkpoint& checkpoint_;
  CheckpointManager& manager_;
  const PreemptionOptions options_;
  int64_t calls_ = 0;          // SaveIfPreempted calls, which pace the votes
  bool vote_pending_ = false;  // a StartMax waits for its FinishMax
};

}  // namespace ckflow

#endif  // CKFLOW_CHECKPOINT_PREEMPTION_H_
