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

#ifndef CKFLOW_CHECKPOINT_CHECKPOINT_H_
#define CKFLOW_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/file_system.h"
#include "base/status.h"
#include "bundle/checkpoint_state.h"
#include "checkpoint/group.h"
#include "graph/graph.h"
#include "graph/trackable.h"
#include "runtime/session.h"

namespace ckflow {

class Variable;

namespace internal {
class LoadStatusImpl;
class CheckpointRoot;
}  // namespace internal

// What Checkpoint::Restore returns: TensorFlow's CheckpointLoadStatus,
// InitializationOnlyStatus or NameBasedSaverStatus, as one value type (copies
// share the same restore). kind() tells which; each method has the exact
// conditions of its TensorFlow namesake (assert_consumed, ...). A failed
// assertion is FailedPrecondition listing what did not match by object path
// and checkpoint key.
//
// Dropping the last copy of a status whose checkpoint values were never all
// matched logs a warning listing them, unless ExpectPartial() was called.
class LoadStatus {
 public:
  enum class Kind { kCheckpointLoad, kInitializationOnly, kNameBasedSaver };

  Kind kind() const;
  // "CheckpointLoadStatus", "InitializationOnlyStatus", "NameBasedSaverStatus".
  std::string_view kind_name() const;

  // Every checkpointed value was matched to an object and every object that
  // exists now was matched (also AssertExistingObjectsMatched).
  Status AssertConsumed() const;
  // Every object that exists now and owns values was matched.
  Status AssertExistingObjectsMatched() const;
  // Something besides the root was matched.
  Status AssertNontrivialMatch() const;
  // Silences the warning about unmatched values. Returns *this.
  LoadStatus& ExpectPartial();
  // Runs all restore ops created so far (including deferred ones).
  Status RunRestoreOps(Session& session) const;
  // Runs the restore ops, then initializes every variable this restore did
  // not match and no later restore assigned.
  Status InitializeOrRestore(Session& session) const;
  // A restore into an eager scope (graph/eager.h) assigned each value as its
  // object appeared: the four calls above (with or without a session) are
  // no-ops returning OK; without one, in graph mode, FailedPrecondition.
  Status RunRestoreOps() const;
  Status InitializeOrRestore() const;

  // The checkpoint this status restores from; empty for kInitializationOnly.
  const std::string& save_path() const;

 private:
  friend class Checkpoint;
  friend class internal::LoadStatusImpl;
  explicit LoadStatus(std::shared_ptr<internal::LoadStatusImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<internal::LoadStatusImpl> impl_;
};

struct SaveOptions {
  // fsync the data files, the index and the directory before returning (and
  // before the state file names the new checkpoint).
  bool durable = false;
  // Return as soon as the values are copied into host buffers (reused from
  // save to save); write, checksum and sync them on a background thread
  // while the training loop goes on. The state file (and a
  // CheckpointManager's bookkeeping) is updated only once the files are
  // complete, so a crash mid-write leaves the previous checkpoint as the
  // latest. The next Save or Write waits for this one first and returns its
  // error, if it failed, without saving; Checkpoint::Sync waits explicitly.
  // The session must outlive the write: call Sync before destroying it.
  bool async = false;
  // For an async save: called once, on the background thread, when the
  // save has finished -- files written, state file and manager bookkeeping
  // done -- with the checkpoint's path and the status Sync will return (OK,
  // or the error; the save then did not happen). Must not call back into
  // the Checkpoint or its manager (they wait for this thread).
  std::function<void(const std::string& path, const Status& status)> on_done;
  // How many data files each task's values are spread over (TensorFlow
  // writes one file per task: the devices of one job/replica/task share
  // it, their values saved by the task's CPU:0). Linux lets
  // one writer at a time copy into a file (buffered writes take the file's
  // inode lock), so a save written on two threads into one file goes little
  // faster than on one; into two files it goes nearly twice as fast. The
  // values are dealt by size so the files come out about equal; a value is
  // never split, and no file is left empty. 0 (the default): one file per
  // thread of the session's pool, for saves of at least 32 MiB per file.
  // 1: one file per task, as TensorFlow writes. Readers of the format
  // (TensorFlow's among them) read any number of data files.
  int files_per_device = 0;
};

// As TensorFlow's tf.train.CheckpointOptions: how a Checkpoint does I/O.
struct CheckpointOptions {
  // The file layer of every save, restore and state-file access, handed to
  // the kernels the Checkpoint runs; null: FileSystem::Default(). Must
  // outlive the Checkpoint and its statuses.
  FileSystem* file_system = nullptr;
  // Save and restore as one member of a group of processes (group.h), also
  // through a CheckpointManager.
  GroupOptions group;
};

// Options of Checkpoint::Restore (TensorFlow's tf.train.CheckpointOptions
// for a restore).
struct RestoreOptions {
  // Leaves optimizer slot variables alone (TensorFlow's
  // experimental_skip_slot_variables): none is restored, InitializeOrRestore
  // initializes them, and the assertions expect neither the checkpoint's
  // slots nor the program's to match. For fine-tuning with a fresh
  // optimizer state.
  bool skip_slot_variables = false;
};

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
  // The root object (for inspection and for CheckpointManager).
  std::shared_ptr<Trackable> root() const;
  // CheckpointOptions::file_system, or the default one.
  FileSystem* file_system() const;

 private:
  friend class CheckpointManager;
  // Write, then on_written once the files are complete (in the background
  // for an async save).
  StatusOr<std::string> WriteThen(const std::string& prefix, Session& session,
                                  const SaveOptions& options, std::function<Status()> on_written);

  std::shared_ptr<internal::CheckpointRoot> root_;
};

struct LatestCheckpointOptions {
  FileSystem* file_system = nullptr;  // null: FileSystem::Default()
  // Follow a state file's path that leaves `dir` (absolute elsewhere, or
  // with ".."), as TensorFlow does. The state file is input from outside,
  // so by default such a path is refused (nullopt, with a warning).
  bool allow_outside_directory = false;
};

// The newest checkpoint named by `<dir>/checkpoint`, if that state file
// exists, parses, names a path inside `dir` (see the options), and the
// checkpoint's index file exists (or, as TensorFlow also accepts for a
// legacy V1 checkpoint, the path itself is a file); else nullopt (as
// TensorFlow's tf.train.latest_checkpoint returns None).
//
// An invalid state file (unparsable, or naming no checkpoint) is nullopt
// too, where TensorFlow's latest_checkpoint raises for the second: the
// answer is "nothing to resume from" either way, and a trainer's
// `Restore(LatestCheckpoint(dir))` should not need an error path for it.
// ReadCheckpointState says what is wrong (DataLoss, "Invalid checkpoint
// state loaded from ..."), and CheckpointManager::Create refuses such a
// directory rather than overwrite the state.
std::optional<std::string> LatestCheckpoint(const std::string& dir,
                                            const LatestCheckpointOptions& options = {});

// Keeps the last `max_to_keep` checkpoints of a Checkpoint in a directory,
// as TensorFlow's tf.train.CheckpointManager: saves "<dir>/<name>-<N>",
// deletes the files of checkpoints it no longer keeps (only checkpoints it
// manages), optionally keeps one every N hours, optionally saves at most
// every `checkpoint_interval` steps, and picks up the state of an existing
// directory when constructed.
//
// A clock behind the state's last_preserved_timestamp (it went backwards,
// or the state came from another machine) is logged as a warning, "... seconds
// behind the last preserved checkpoint timestamp", and the bookkeeping
// restarts at the clock: the directory's checkpoints stop being managed
// (none is deleted), as in TensorFlow.
//
// Save has one commit point, the first write of the state file: an error
// means neither the directory nor latest_checkpoint()/checkpoints() name
// the new checkpoint, and its files are gone; OK means both name it. The
// retention sweep and the second state write come after the commit; their
// failure does not fail the save: it is logged as a warning and kept in
// last_sweep_status(), and a checkpoint that could not be deleted stays in
// checkpoints() for the next sweep to retry. The manager deletes only
// checkpoints in its own directory named "<checkpoint_name>-<N>"; a state-file path elsewhere is
// never deleted (a warning names it), and is followed for reading only with
// Options::allow_outside_directory. Creating a manager, and each Save,
// removes the debris of dead saves in the directory.
//
// Every file is touched through the Checkpoint's file system.
class CheckpointManager {
 public:
  struct Options {
    std::optional<int> max_to_keep = 5;  // nullopt: keep all
    std::optional<double> keep_checkpoint_every_n_hours;
    std::string checkpoint_name = "ckpt";
    // Seconds since the epoch; tests replace it.
    std::function<double()> clock;
    SaveOptions save_options;
    // Track state-file paths that leave the directory (see above).
    bool allow_outside_directory = false;
    // Save skips (returns "") until the step counter has advanced by this
    // many steps since the last checkpoint. Needs step_counter.
    std::optional<int64_t> checkpoint_interval;
    // A scalar int64 or int32 variable counting training steps (e.g. the
    // global step Minimize increments); read in the session at each Save.
    std::shared_ptr<Variable> step_counter;
    // The step of the last checkpoint, if known (else the first Save saves).
    std::optional<int64_t> last_checkpoint_step;
    // RestoreOrInitialize's initialization when the directory has no
    // checkpoint (e.g. restoring a pretrained checkpoint from elsewhere).
    // Unset: every variable of the checkpoint's objects is initialized.
    std::function<Status(Session&)> init_fn;
  };

  // InvalidArgument if max_to_keep <= 0, or checkpoint_interval is set
  // without a step_counter (TensorFlow's ValueError); DataLoss if the
  // directory's state file is invalid (see LatestCheckpoint).
  static StatusOr<std::unique_ptr<CheckpointManager>> Create(Checkpoint& checkpoint,
                                                             std::string directory,
                                                             Options options);
  ~CheckpointManager();

  // Saves a checkpoint numbered by the incremented save_counter (or
  // `checkpoint_number`), updates the state file and deletes what is no
  // longer kept. Returns the path. With save_options.async the bookkeeping
  // happens once the files are complete (checkpoints() and
  // latest_checkpoint() show the new one from then on).
  //
  // With checkpoint_interval, reads the step counter first and returns ""
  // without saving (TensorFlow returns None) if it equals the last
  // checkpoint's step or, when `check_interval`, is less than
  // checkpoint_interval past it.
  StatusOr<std::string> Save(Session& session, std::optional<int64_t> checkpoint_number = {},
                             bool check_interval = true);

  // TensorFlow's restore_or_initialize: restores latest_checkpoint() if
  // there is one (its restore ops and the initialization of what it does not
  // match run now, so call this once the model is built) and returns its
  // path, taking last_checkpoint_step from the step counter; else runs
  // init_fn (or initializes every variable of the checkpoint's objects) and
  // returns nullopt. Errors of the restore or init_fn as they come.
  StatusOr<std::optional<std::string>> RestoreOrInitialize(Session& session);
  // Both for a checkpoint built in an eager scope, with no Session (as
  // Checkpoint::Save); FailedPrecondition in graph mode.
  StatusOr<std::string> Save(std::optional<int64_t> checkpoint_number = {},
                             bool check_interval = true);
  StatusOr<std::optional<std::string>> RestoreOrInitialize();

  // The managed checkpoints, oldest first.
  std::vector<std::string> checkpoints() const;
  // What went wrong after the last save's commit point (deleting old
  // checkpoints, the second state write), or removing debris; OK if
  // nothing did.
  Status last_sweep_status() const;
  std::optional<std::string> latest_checkpoint() const;
  const std::string& directory() const { return directory_; }
  const std::optional<int64_t>& checkpoint_interval() const { return options_.checkpoint_interval; }
  // The step counter's value at the last checkpoint saved or restored
  // (nullopt before one, or without a checkpoint_interval).
  std::optional<int64_t> last_checkpoint_step() const;

 private:
  CheckpointManager(Checkpoint& checkpoint, std::string directory, Options options);
  // Records `prefix` as the newest checkpoint, writes the state file and
  // deletes what is no longer kept. Runs on the saving thread (the
  // background one for an async save), so it holds mu_.
  Status Record(const std::string& prefix, double timestamp);
  // The state file for these checkpoints (paths relative to the directory).
  CheckpointStateData StateOf(const std::optional<std::string>& latest,
                              const std::vector<std::pair<std::string, double>>& active,
                              double last_preserved) const;
  // Deletes checkpoint `path` if it is this manager's to delete (in its
  // directory, named by its naming); else warns and keeps it.
  Status DeleteManaged(const std::string& path) const;
  // Removes debris of dead saves; a failure goes to sweep_status_.
  void RemoveDebris();  // REQUIRES: mu_ held

  Checkpoint& checkpoint_;
  const std::string directory_;
  const Options options_;
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, double>> active_;  // path, timestamp; oldest first
  std::optional<std::string> latest_;
  double last_preserved_ = 0;
  Status sweep_status_;                          // guarded by mu_
  std::optional<int64_t> last_checkpoint_step_;  // read and set by the caller's thread
};

// Keras-style weights of one object (usually a Model) with that object as
// the root of the object graph: no save_counter, exactly `path` written.
// Because the root differs, these files do not match Checkpoint{model}
// (TensorFlow warns about the same). Synchronous only: InvalidArgument for
// options.async. FailedPrecondition if the object owns no variables yet;
// the object graph's first refused Track (Trackable::tracking_status).
Status SaveWeights(const std::shared_ptr<Trackable>& root, const std::string& path,
                   Session& session, const SaveOptions& options = {});
// Restores with `root` as the root, runs the restore ops available now, and
// checks AssertNontrivialMatch, as Keras' load_weights does. Deferred like
// Checkpoint::Restore: a model (subclassed or Sequential) whose layers are
// not built yet is matched by its layers; each layer's weights get their
// restore ops when its first call creates them, an optimizer's slots when
// Minimize creates them, and the returned status's RunRestoreOps (or
// InitializeOrRestore) runs them. The ops go into `session`'s graph, where
// the model's variables are or will be. Errors: InvalidArgument for a null
// root; NotFound or DataLoss for the checkpoint; FailedPrecondition
// ("Nothing except the root object matched ..." or "Nothing to load ...")
// when nothing below the root matched.
StatusOr<LoadStatus> LoadWeights(const std::shared_ptr<Trackable>& root, const std::string& path,
                                 Session& session);

}  // namespace ckflow

#endif  // CKFLOW_CHECKPOINT_CHECKPOINT_H_
