// The root object of a Checkpoint, which its saves and restores (and a
// CheckpointManager's) work on, and the state file's paths. The steps of a
// save are save_sequence_internal.h's.

#ifndef CKFLOW_CHECKPOINT_CHECKPOINT_INTERNAL_H_
#define CKFLOW_CHECKPOINT_CHECKPOINT_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "base/file_system.h"
#include "base/status.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/group.h"
#include "checkpoint/saver_internal.h"
#include "graph/graph.h"
#include "graph/trackable.h"
#include "ops/variables.h"
#include "runtime/session.h"

namespace ckflow::internal {

// The root object of a Checkpoint: its dependencies, then save_counter.
class CheckpointRoot : public Trackable {
 public:
  CheckpointRoot(const Scope& scope, FileSystem* fs, GroupOptions group);
  std::string TypeName() const override { return "Checkpoint"; }

  const Scope& scope() const { return scope_; }
  const std::shared_ptr<Saver>& saver() const { return saver_; }
  const std::shared_ptr<Variable>& save_counter() const { return save_counter_; }

  // Creates save_counter (tracked as child "save_counter", so a deferred
  // restore of it fires) if it does not exist yet. Returns it (null, with
  // the error in the scope, if it could not be made).
  std::shared_ptr<Variable> MaybeCreateSaveCounter();

  // A session over the eager variables, for the save ops (made once).
  // FailedPrecondition in graph mode.
  StatusOr<Session*> EagerSession();

  // Increments save_counter in `session` (creating and initializing it on
  // the first save) and returns the new value, as Checkpoint.save does.
  StatusOr<int64_t> IncrementSaveCounter(Session& session);

 private:
  Scope scope_;
  std::shared_ptr<Saver> saver_;
  std::shared_ptr<Variable> save_counter_;
  Output increment_;
  std::unique_ptr<Session> eager_session_;
};

// The root of `checkpoint` (Checkpoint::root() is always a CheckpointRoot):
// how a CheckpointManager reaches the checkpoint it saves.
std::shared_ptr<CheckpointRoot> RootOf(const Checkpoint& checkpoint);

// Paths in the state file are relative to its directory, as TensorFlow's
// save_relative_paths writes them.
std::string RelativeTo(const std::string& dir, const std::string& path);

// A state-file path (relative to `dir`, or absolute) as a path to open.
std::string Resolve(const std::string& dir, const std::string& path);

// A pending asynchronous save's error, when nobody is left to return it to
// (a destructor waits for the save).
void LogAsyncError(const Status& s);

}  // namespace ckflow::internal

#endif  // CKFLOW_CHECKPOINT_CHECKPOINT_INTERNAL_H_
