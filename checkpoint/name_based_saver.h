// TensorFlow 1's name-based Saver (tf.compat.v1.train.Saver), in C++: saves
// and restores variables by name, in TensorFlow's bundle format, without an
// object graph.
//
//   CKFLOW_ASSIGN_OR_RETURN(auto saver, NameBasedSaver::Create(scope, {}));  // every variable
//   ...
//   CKFLOW_ASSIGN_OR_RETURN(std::string path,
//                           saver->Save(*session, dir + "/model.ckpt", global_step));
//   CKFLOW_RETURN_IF_ERROR(saver->Restore(*session, path));
//
// Each variable's value is stored under a key: its name (the variable's
// shared name, "dense/kernel") for a list of variables, or the name given
// in a name -> variable map. A checkpoint written by a TF1 trainer restores
// into the variables of the same names; an object-based checkpoint
// (Checkpoint, SaveWeights, TensorFlow 2) restores too: as TensorFlow does,
// a name missing from the bundle is looked up among the object graph's
// attributes by the variable name they record (`full_name`).
//
// Bookkeeping as TensorFlow 1's: Save writes "<path>" or
// "<path>-<global_step>", points <dir>/checkpoint at it (with
// last_checkpoints() as the list), and deletes the oldest checkpoint beyond
// max_to_keep unless keep_checkpoint_every_n_hours has passed since the
// last one kept.
//
// Thread safety: build and use from one thread, as Checkpoint.

#ifndef CKFLOW_CHECKPOINT_NAME_BASED_SAVER_H_
#define CKFLOW_CHECKPOINT_NAME_BASED_SAVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "runtime/session.h"

namespace ckflow {

class Variable;

namespace internal {
class Saver;
}  // namespace internal

// NameBasedSaver::Options (outside the class so it can be a default argument).
struct NameBasedSaverOptions {
  // How many recent checkpoints to keep; 0 or nullopt keeps all (and
  // lists none in the state file, as TensorFlow 1).
  std::optional<int> max_to_keep = 5;
  // A checkpoint leaving the max_to_keep window is kept anyway if it is
  // newer than this many hours after the last one so kept.
  double keep_checkpoint_every_n_hours = 10000.0;
  // One data file per device of the variables (else a single file).
  bool sharded = false;
  // Write the state file's paths relative to its directory.
  bool save_relative_paths = false;
  // Save "<path>-00000042" (the step zero-padded to 8 digits, so that a
  // listing sorts by step) instead of "<path>-42".
  bool pad_step_number = false;
  // A saver with no variables is no error: Save writes nothing and returns
  // "" (TensorFlow returns None), Restore does nothing.
  bool allow_empty = false;
  // Seconds since the epoch; tests replace it.
  std::function<double()> clock;
};

class NameBasedSaver {
 public:
  using Options = NameBasedSaverOptions;

  // A saver of `variables` keyed by their names; with none, of every
  // variable in scope's graph now (as TensorFlow's default var_list). A part
  // of a PartitionedVariable (ops/partitioned_variables.h) is keyed by the
  // whole variable's name and saved as its slice; restoring it reads its
  // slice of that key whatever partitioning (or none) the checkpoint has.
  // InvalidArgument if two variables share a name ("At least two variables
  // have the same name"), or there is nothing to save ("No variables to
  // save", unless allow_empty); the scope's error.
  static StatusOr<std::unique_ptr<NameBasedSaver>> Create(
      const Scope& scope, const std::vector<std::shared_ptr<Variable>>& variables,
      Options options = {});
  // A saver of `variables` keyed by the names given (var_list as a dict).
  // InvalidArgument for an empty name, a null variable, or an empty map
  // (unless allow_empty).
  static StatusOr<std::unique_ptr<NameBasedSaver>> CreateFromMap(
      const Scope& scope, const std::map<std::string, std::shared_ptr<Variable>>& variables,
      Options options = {});
  ~NameBasedSaver();
  NameBasedSaver(const NameBasedSaver&) = delete;
  NameBasedSaver& operator=(const NameBasedSaver&) = delete;

  // Writes "<save_path>" (or "<save_path>-<global_step>") and returns it;
  // with `write_state`, records it as above in <dir>/<latest_filename>.
  // `global_step` is a number or a scalar int64/int32 variable read in
  // `session`. InvalidArgument if `latest_filename` has a directory part
  // ("'latest_filename' must not contain path components") or, without a
  // step and unsharded, is save_path's own name ("'latest_filename' collides
  // with 'save_path'"). Errors of the write; a failed save leaves the
  // previous checkpoints and the state file whole.
  StatusOr<std::string> Save(Session& session, const std::string& save_path,
                             std::optional<int64_t> global_step = {}, bool write_state = true,
                             const std::string& latest_filename = "checkpoint");
  StatusOr<std::string> Save(Session& session, const std::string& save_path,
                             const Variable& global_step, bool write_state = true,
                             const std::string& latest_filename = "checkpoint");

  // Restores every variable from `save_path`: a V2 prefix, or a V1
  // checkpoint's file (TensorFlow 1's SaverDef.V1). InvalidArgument if
  // save_path is empty ("Can't load save_path when it is None") or names no
  // checkpoint ("The passed save_path is not a valid checkpoint: ..."), as
  // TensorFlow; NotFound naming the key (and the variable) if the
  // checkpoint has no value for one, neither by name nor through its object
  // graph; InvalidArgument for a dtype or shape mismatch; DataLoss for a
  // damaged checkpoint.
  Status Restore(Session& session, const std::string& save_path);

  // The checkpoints this saver keeps, oldest first (TensorFlow's
  // last_checkpoints).
  std::vector<std::string> last_checkpoints() const;
  // Replaces them, e.g. with a state file's all_model_checkpoint_paths
  // (TensorFlow's set_last_checkpoints): they are timestamped now.
  void SetLastCheckpoints(const std::vector<std::string>& paths);

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<Variable> variable;
  };
  NameBasedSaver(const Scope& scope, std::vector<Entry> entries, Options options);
  static StatusOr<std::unique_ptr<NameBasedSaver>> Make(const Scope& scope,
                                                        std::vector<Entry> entries,
                                                        Options options);
  // TensorFlow's _RecordLastCheckpoint and _MaybeDeleteOldCheckpoints.
  void Record(const std::string& path);
  // Restore from a V1 file: each value is read, then fed to its variable.
  Status RestoreV1(Session& session, const std::string& save_path);

  const std::vector<Entry> entries_;
  const Options options_;
  std::shared_ptr<internal::Saver> saver_;
  std::vector<std::pair<std::string, double>> last_checkpoints_;  // path, time; oldest first
  std::vector<std::pair<std::string, double>> to_delete_;  // left the window, not yet deleted
  double next_keep_time_ = 0;
  // Per entry, a placeholder and the op assigning it to the variable; built
  // by the first V1 restore.
  std::vector<std::pair<Output, Output>> v1_assigns_;
};

}  // namespace ckflow

#endif  // CKFLOW_CHECKPOINT_NAME_BASED_SAVER_H_
