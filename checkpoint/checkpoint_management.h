// Finding and keeping checkpoints in a directory, as TensorFlow's
// checkpoint_management.py: LatestCheckpoint and CheckpointManager.

#ifndef CKFLOW_CHECKPOINT_CHECKPOINT_MANAGEMENT_H_
#define CKFLOW_CHECKPOINT_CHECKPOINT_MANAGEMENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/file_system.h"
#include "base/mutex.h"
#include "base/status.h"
#include "bundle/checkpoint_state.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_health.h"
#include "checkpoint/checkpoint_options.h"
#include "runtime/session.h"

namespace ckflow {

class Variable;

struct LatestCheckpointOptions {
  FileSystem* file_system = nullptr;  // null: FileSystem::Default()
  // Follow a state file's path that leaves `dir` (absolute elsewhere, or
  // with ".."), as TensorFlow does. The state file is input from outside,
  // so by default such a path is refused (nullopt, with a warning).
  bool allow_outside_directory = false;
  std::string latest_filename = "checkpoint";  // the state file (TensorFlow's latest_filename)
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
// Options::allow_outside_directory. Creating a manager, and each Save after
// one that failed, removes the debris of dead saves in the directory.
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
    // How RestoreOrInitialize checks a checkpoint is whole before it
    // restores it (checkpoint_health.h); kNone restores the newest and
    // fails if it is damaged, as TensorFlow does.
    CheckpointVerify verify = CheckpointVerify::kFiles;
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
  //
  // Unlike TensorFlow, a newest checkpoint that is not whole (see
  // Options::verify) is skipped, with a warning saying why, for the newest
  // managed one that is; with none whole it initializes, and says so.
  // skipped_on_restore() lists what was skipped. In a group every member
  // takes the newest checkpoint that is whole for all of them. A whole
  // checkpoint that does not fit the program (a missing key, another shape)
  // still fails.
  StatusOr<std::optional<std::string>> RestoreOrInitialize(Session& session);
  // Both for a checkpoint built in an eager scope, with no Session (as
  // Checkpoint::Save); FailedPrecondition in graph mode.
  StatusOr<std::string> Save(std::optional<int64_t> checkpoint_number = {},
                             bool check_interval = true);
  StatusOr<std::optional<std::string>> RestoreOrInitialize();

  // The checkpoints the last RestoreOrInitialize skipped, newest first.
  const std::vector<SkippedCheckpoint>& skipped_on_restore() const { return skipped_on_restore_; }
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
  Status Record(const std::string& prefix, double timestamp) CKFLOW_EXCLUDES(mu_);
  // The state file for these checkpoints (paths relative to the directory).
  CheckpointStateData StateOf(const std::optional<std::string>& latest,
                              const std::vector<std::pair<std::string, double>>& active,
                              double last_preserved) const;
  // RestoreOrInitialize's choice: the newest managed checkpoint that is
  // whole (Options::verify) for every member of a group; skipped ones go to
  // skipped_on_restore_. Errors: a group's collective failing.
  StatusOr<std::optional<std::string>> NewestWholeCheckpoint() CKFLOW_EXCLUDES(mu_);
  // Deletes checkpoint `path` if it is this manager's to delete (in its
  // directory, named by its naming); else warns and keeps it.
  Status DeleteManaged(const std::string& path) const;
  // Removes debris of dead saves; a failure goes to sweep_status_.
  void RemoveDebris() CKFLOW_REQUIRES(mu_);

  Checkpoint& checkpoint_;
  const std::string directory_;
  const Options options_;
  // The books are written by the saving thread (the background one for an
  // async save) and read by the caller's.
  mutable Mutex mu_;
  // Path and timestamp; oldest first.
  std::vector<std::pair<std::string, double>> active_ CKFLOW_GUARDED_BY(mu_);
  std::optional<std::string> latest_ CKFLOW_GUARDED_BY(mu_);
  double last_preserved_ CKFLOW_GUARDED_BY(mu_) = 0;
  Status sweep_status_ CKFLOW_GUARDED_BY(mu_);
  // A save started since the last complete one (it may have failed, or be
  // writing) or a sweep failed: the next save sweeps first.
  bool debris_possible_ CKFLOW_GUARDED_BY(mu_) = true;
  std::optional<int64_t> last_checkpoint_step_;        // read and set by the caller's thread
  std::vector<SkippedCheckpoint> skipped_on_restore_;  // the caller's thread
};

}  // namespace ckflow

#endif  // CKFLOW_CHECKPOINT_CHECKPOINT_MANAGEMENT_H_
