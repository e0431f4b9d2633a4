#include "checkpoint/preemption.h"

#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <utility>
#include <vector>

#include "base/logging.h"

namespace ckflow {
namespace {

// Process-wide, as signals are (the one exception to "no global state"): a
// signal handler can reach nothing else. pending[s] is 0, the signal's
// number once it came, or kTriggered.
constexpr int kTriggered = -1;
std::atomic<int> pending[NSIG];
std::atomic<bool> installed[NSIG];
struct sigaction previous[NSIG];  // Create writes, the destructor reads (ordered by installed)

static_assert(std::atomic<int>::is_always_lock_free, "a signal handler may store only lock-free");

extern "C" void OnSignal(int signal) {
  // A store, nothing more: anything else (a lock, an allocation, a log
  // line) could deadlock or corrupt what the interrupted code was doing.
  pending[signal].store(signal, std::memory_order_relaxed);
}

}  // namespace

StatusOr<std::unique_ptr<PreemptionHandler>> PreemptionHandler::Create(Checkpoint& checkpoint,
                                                                       CheckpointManager& manager,
                                                                       PreemptionOptions options) {
  const int s = options.signal;
  if (s <= 0 || s >= NSIG || s == SIGKILL || s == SIGSTOP) {
    return InvalidArgumentError("PreemptionHandler: signal ", s, " cannot be caught");
  }
  if (options.check_every < 1) {
    return InvalidArgumentError("PreemptionHandler: check_every is ", options.check_every,
                                ", must be at least 1");
  }
  bool expected = false;
  if (!installed[s].compare_exchange_strong(expected, true)) {
    return AlreadyExistsError("PreemptionHandler: signal ", s, " already has a handler");
  }
  pending[s].store(0);  // a signal from before is not this run's to answer
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  // The training loop's blocking calls resume rather than fail with EINTR.
  action.sa_flags = SA_RESTART;
  if (sigaction(s, &action, &previous[s]) != 0) {
    installed[s].store(false);
    return InvalidArgumentError("PreemptionHandler: sigaction(", s, ") failed");
  }
  return std::unique_ptr<PreemptionHandler>(
      new PreemptionHandler(checkpoint, manager, std::move(options)));
}

PreemptionHandler::~PreemptionHandler() {
  const int s = options_.signal;
  if (vote_pending_) {
    StatusOr<std::vector<int64_t>> vote = options_.group->FinishMax(options_.timeout);
    if (!vote.ok()) Log(LogSeverity::kWarning, "PreemptionHandler: " + vote.status().ToString());
  }
  sigaction(s, &previous[s], nullptr);
  installed[s].store(false);
}

void PreemptionHandler::Trigger() {
  pending[options_.signal].store(kTriggered, std::memory_order_relaxed);
}

bool PreemptionHandler::received_signal() const {
  return pending[options_.signal].load(std::memory_order_relaxed) != 0;
}

StatusOr<std::optional<int>> PreemptionHandler::Decide(int64_t step) {
  const int came = pending[options_.signal].load(std::memory_order_relaxed);
  CheckpointGroup* group = options_.group;
  if (group == nullptr) {
    if (came == 0) return std::optional<int>();
    return std::optional<int>(came > 0 ? came : 0);
  }
  if (++calls_ % options_.check_every != 0) return std::optional<int>();
  std::optional<int> preempted;
  if (vote_pending_) {
    StatusOr<std::vector<int64_t>> vote = group->FinishMax(options_.timeout);
    // Past the deadline the vote may still complete: the next call waits
    // for it again rather than start another beside it.
    if (!vote.ok() && !IsDeadlineExceeded(vote.status())) vote_pending_ = false;
    if (!vote.ok()) return vote.status().WithContext("PreemptionHandler: the vote");
    vote_pending_ = false;
    // The members' steps at the vote, highest and lowest.
    const int64_t highest = (*vote)[1], lowest = -(*vote)[2];
    if (highest != lowest) {
      return FailedPreconditionError(
          "PreemptionHandler: the members voted after different steps (", lowest, " to ", highest,
          "); every member must call SaveIfPreempted with the same steps");
    }
    // 0: no member was asked; 1: Trigger; s + 1: signal s (see below).
    if ((*vote)[0] > 0) preempted = static_cast<int>((*vote)[0] - 1);
  }
  if (!preempted) {
    // So that every member can say which signal asked (the highest, if
    // several came), not only the one that got it.
    const int64_t mine = came == 0 ? 0 : came > 0 ? came + 1 : 1;
    CKFLOW_RETURN_IF_ERROR(group->StartMax({mine, step, -step}, options_.timeout)
                               .WithContext("PreemptionHandler: the vote"));
    vote_pending_ = true;
  }
  return preempted;
}

StatusOr<PreemptionSave> PreemptionHandler::Save(Session& session, int64_t step, int signal) {
  const std::string what = "PreemptionHandler: saving at step " + std::to_string(step);
  StatusOr<std::string> path = manager_.Save(session, step, /*check_interval=*/false);
  if (!path.ok()) return path.status().WithContext(what);
  // The files must be complete before the process exits; "" is a manager
  // whose step counter says this step is saved already.
  Status synced = checkpoint_.Sync();
  if (!synced.ok()) return synced.WithContext(what);
  PreemptionSave save;
  pending[options_.signal].store(0);
  save.signal = signal;
  save.step = step;
  save.path = path->empty() ? manager_.latest_checkpoint().value_or("") : *path;
  save.exit_code = options_.exit_code;
  return save;
}

StatusOr<std::optional<PreemptionSave>> PreemptionHandler::SaveIfPreempted(Session& session,
                                                                           int64_t step) {
  CKFLOW_ASSIGN_OR_RETURN(std::optional<int> signal, Decide(step));
  if (!signal) return std::optional<PreemptionSave>();
  CKFLOW_ASSIGN_OR_RETURN(PreemptionSave save, Save(session, step, *signal));
  if (options_.exit_fn) {
    options_.exit_fn(save);
    return std::optional<PreemptionSave>(std::move(save));
  }
  Log(LogSeverity::kInfo, "PreemptionHandler: saved " + save.path + " at step " +
                              std::to_string(step) + "; exiting with " +
                              std::to_string(save.exit_code));
  std::exit(save.exit_code);
}

StatusOr<std::optional<PreemptionSave>> PreemptionHandler::Run(
    Session& session, int64_t step, const std::function<Status()>& step_fn) {
  CKFLOW_RETURN_IF_ERROR(step_fn());
  return SaveIfPreempted(session, step);
}

}  // namespace ckflow
