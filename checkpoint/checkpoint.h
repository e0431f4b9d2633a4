// Object-based checkpoints in graph mode: TensorFlow's
// tf.compat.v1.train.Checkpoint, in C++.
//
//   Checkpoint checkpoint(scope, {{"optimizer", optimizer}, {"model", model}});
//   CKFLOW_ASSIGN_OR_RETURN(LoadStatus status,
//                           checkpoint.Restore(LatestCheckpoint(dir)));
//   Output train_op = optimizer->Minimize(scope, loss);  // restore ops appear
//   CKFLOW_ASSIGN_OR_RETURN(auto session, Session::Create(scope.graph()));
//   CKFLOW_RETURN_IF_ERROR(status.InitializeOrRestore(*session));
//   for (...) {
//     session->Run(feeds, {}, {train_op});
//     CKFLOW_ASSIGN_OR_RETURN(std::string path, checkpoint.Save(dir + "/ckpt", *session));
//   }
//
// A Checkpoint is the root of an object graph: its named dependencies (sorted
// by name, as TensorFlow orders keyword arguments), then `save_counter`. A
// checkpoint file records that graph (`_CHECKPOINTABLE_OBJECT_GRAPH`) and each
// value under its object path ("model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE"),
// so restoring matches values to objects by path, not by variable names.
//
// Save and restore are graph ops the session runs (a SaveV2 per data file,
// each device's values spread over SaveOptions::files_per_device files, then
// MergeV2Checkpoints; restore ops that read straight into the variables),
// built once and cached: the checkpoint prefix is fed, so the thousandth save
// or restore adds no node to the graph.
//
// A save either happened or it did not. It has one commit point, the rename
// of the `checkpoint` state file: an error from Save (or, for an async save,
// from Sync) means the state file, LatestCheckpoint and a manager's
// latest_checkpoint() still name the previous checkpoint, and no file of the
// new one is left; OK means they all name the new one. What a save killed
// at any moment leaves behind (temp files, a "_temp" directory) is never
// mistaken for a checkpoint and is removed by the next save or
// CheckpointManager in that directory. See RELIABILITY.md.
//
// Every file is touched through CheckpointOptions::file_system, also by the
// save and restore kernels (it is passed to each session run).
//
// Restore is deferred: objects and variables that do not exist yet when
// Restore is called (a layer's weights before its first call, optimizer
// slots before Minimize) get their restore ops the moment they are created.
// LoadStatus::RunRestoreOps runs every restore op accumulated so far.
//
// Thread safety: a Checkpoint and its LoadStatus objects are used from the
// thread that builds the graph. The session ops they run are thread-safe.
//
// Beside it: LatestCheckpoint and CheckpointManager in
// checkpoint_management.h, Keras' SaveWeights/LoadWeights in weights.h,
// TF1's name-based Saver in name_based_saver.h.

#ifndef CKFLOW_CHECKPOINT_CHECKPOINT_H_
#define CKFLOW_CHECKPOINT_CHECKPOINT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/file_system.h"
#include "base/status.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/load_status.h"
#include "graph/graph.h"
#include "graph/trackable.h"
#include "runtime/session.h"

namespace ckflow {

class Variable;

namespace internal {
class CheckpointRoot;
}  // namespace internal

class Checkpoint {
 public:
  using Dependencies = std::vector<std::pair<std::string, std::shared_ptr<Trackable>>>;

  // A checkpoint whose root has `dependencies` as children, sorted by name.
  // Ops it adds (save_counter, save and restore ops) go into scope's graph
  // under "save". A duplicate or empty name, or a null object, is recorded in
  // the scope as InvalidArgument.
  Checkpoint(const Scope& scope, Dependencies dependencies, CheckpointOptions options = {});
  // Waits for a pending asynchronous save (logging its error, if any).
  ~Checkpoint();
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  // Increments save_counter (creating and initializing it on the first save)
  // and writes "<prefix>-<counter>", then points `<dirname>/checkpoint` at it
  // (the commit point; durable saves fsync the state file and directory).
  // First removes the debris of dead saves of "<prefix>-<N>". Returns the
  // path written.
  StatusOr<std::string> Save(const std::string& prefix, Session& session,
                             const SaveOptions& options = {});
  // Save of a checkpoint built in an eager scope (graph/eager.h), whose
  // variables hold their values without a Session (one over the eager
  // variables is made on first use). FailedPrecondition in graph mode.
  StatusOr<std::string> Save(const std::string& prefix, const SaveOptions& options = {});
  // Writes exactly `prefix`: no counter increment, no state file.
  StatusOr<std::string> Write(const std::string& prefix, Session& session,
                              const SaveOptions& options = {});

  // Waits for an asynchronous save to finish and returns its status (the
  // error of a failed one is returned once). OK when nothing is pending.
  Status Sync();

  // Restores from `save_path` (deferred as described above); with nullopt
  // nothing is restored and the status only initializes. NotFound if the
  // checkpoint does not exist; DataLoss if its index is corrupt.
  StatusOr<LoadStatus> Restore(const std::optional<std::string>& save_path,
                               const RestoreOptions& options = {});

  // The int64 variable counting saves; null until the first Save or Restore.
  std::shared_ptr<Variable> save_counter() const;
  // The root object (for inspection; a CheckpointManager saves through it).
  std::shared_ptr<Trackable> root() const;
  // CheckpointOptions::file_system, or the default one.
  FileSystem* file_system() const;

 private:
  std::shared_ptr<internal::CheckpointRoot> root_;
};

}  // namespace ckflow

#endif  // CKFLOW_CHECKPOINT_CHECKPOINT_H_
