// The `checkpoint` state file of a checkpoint directory, and resolving what
// a user means by a checkpoint path.
//
// <dir>/checkpoint is a text-format tensorflow.CheckpointState, e.g.
//
//   model_checkpoint_path: "ckpt-2"
//   all_model_checkpoint_paths: "ckpt-1"
//   all_model_checkpoint_paths: "ckpt-2"
//   all_model_checkpoint_timestamps: 1700000000.5
//   all_model_checkpoint_timestamps: 1700000060.25
//   last_preserved_timestamp: 1699999999.5
//
// with paths relative to <dir>, as TensorFlow writes them. Writes are
// atomic: the text goes to <dir>/checkpoint.tmp<32 hex digits> and is
// renamed over <dir>/checkpoint.
//
// The paths are input from outside: ReadCheckpointState returns them as
// stored, and the callers that follow them (LatestCheckpoint,
// ResolveCheckpointPath, CheckpointManager) refuse one that leaves <dir>
// (absolute elsewhere, or with "..") unless told otherwise; see NOTES.md.
//
// Thread safety: the functions may be called concurrently, but concurrent
// writers to one directory race (the last rename wins, as in TensorFlow).

#ifndef CKFLOW_BUNDLE_CHECKPOINT_STATE_H_
#define CKFLOW_BUNDLE_CHECKPOINT_STATE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/file_system.h"
#include "base/status.h"

namespace ckflow {

// The fields of tensorflow.CheckpointState.
struct CheckpointStateData {
  std::string model_checkpoint_path;                    // the newest
  std::vector<std::string> all_model_checkpoint_paths;  // oldest to newest
  std::vector<double> all_model_checkpoint_timestamps;  // Unix seconds, parallel
  double last_preserved_timestamp = 0;
};

// The name of the state file in a checkpoint directory.
inline constexpr char kCheckpointStateFilename[] = "checkpoint";

// Reads <dir>/checkpoint, paths as stored (normally relative to `dir`).
// `latest_filename` names another state file in `dir` (TensorFlow's
// latest_filename argument; each function below takes it too). nullopt if
// the file does not exist. DataLoss "Invalid checkpoint state
// loaded from <dir>: ..." (TensorFlow's words) naming the file if it is not a
// text CheckpointState or names no checkpoint (model_checkpoint_path empty,
// as an empty file does); other file-system errors as they come.
StatusOr<std::optional<CheckpointStateData>> ReadCheckpointState(
    const std::string& dir, FileSystem* fs = nullptr,
    std::string_view latest_filename = kCheckpointStateFilename);

// Writes `state` to <dir>/checkpoint atomically (see above), paths as given.
// With `durable`, the temp file is fsynced before the rename and the
// directory after it, so the new state survives a power loss (never an
// empty or vanished state file). Errors name the file and the step; on
// error the previous state file is untouched and the temp file removed.
Status WriteCheckpointState(const std::string& dir, const CheckpointStateData& state,
                            FileSystem* fs = nullptr, bool durable = false,
                            std::string_view latest_filename = kCheckpointStateFilename);

// Whether `name` (a file name, no directory) is a temp file that
// WriteCheckpointState makes: "checkpoint.tmp" and 32 hex digits.
bool IsCheckpointStateTempName(std::string_view name);

// TensorFlow's tf.train.get_checkpoint_state: ReadCheckpointState with
// every relative path made absolute against `dir` (joined, as TensorFlow
// joins them). nullopt if there is no state file; the same errors.
StatusOr<std::optional<CheckpointStateData>> GetCheckpointState(
    const std::string& dir, FileSystem* fs = nullptr,
    std::string_view latest_filename = kCheckpointStateFilename);

struct UpdateCheckpointStateOptions {
  // Oldest to newest. `model_checkpoint_path` is appended unless it is
  // already last, as TensorFlow does.
  std::vector<std::string> all_model_checkpoint_paths;
  // Empty, or one per path (after the append above).
  std::vector<double> all_model_checkpoint_timestamps;
  double last_preserved_timestamp = 0;
  // Writes absolute paths relative to `dir` (TensorFlow's
  // save_relative_paths); else paths are written as given.
  bool save_relative_paths = false;
  // The state file's name in `dir`.
  std::string latest_filename = kCheckpointStateFilename;
};

// TensorFlow's update_checkpoint_state: writes <dir>/checkpoint (atomically,
// see above) naming `model_checkpoint_path` as the newest checkpoint.
// InvalidArgument if the timestamps do not pair up with the paths, or if the
// checkpoint path is the state file itself (TensorFlow: "Save path ...
// conflicts with path used for checkpoint state").
Status UpdateCheckpointState(const std::string& dir, const std::string& model_checkpoint_path,
                             const UpdateCheckpointStateOptions& options = {},
                             FileSystem* fs = nullptr);

// TensorFlow's checkpoint_exists: whether `prefix` has an index file (a V2
// checkpoint) or is itself a file (a V1 one).
bool CheckpointExists(const std::string& prefix, FileSystem* fs = nullptr);

// TensorFlow's remove_checkpoint: deletes `prefix`.index and every
// `prefix`.data-NNNNN-of-NNNNN, nothing else. Files already gone are no
// error; NotFound if none of them existed; other errors as they come.
Status RemoveCheckpoint(const std::string& prefix, FileSystem* fs = nullptr);

// The checkpoint prefix that `path` names: a prefix ("dir/ckpt-3"), its
// index or a data file ("dir/ckpt-3.index", "dir/ckpt-3.data-00000-of-00001"),
// or a directory, meaning the newest checkpoint of its state file (as
// tf.train.latest_checkpoint). Errors: NotFound if the directory has no
// state file, or its newest checkpoint has no index file; DataLoss if the
// state file does not parse or names no checkpoint. A newest checkpoint
// outside the directory (see above) is InvalidArgument unless
// `allow_outside_directory`.
StatusOr<std::string> ResolveCheckpointPath(const std::string& path, FileSystem* fs = nullptr,
                                            bool allow_outside_directory = false);

}  // namespace ckflow

#endif  // CKFLOW_BUNDLE_CHECKPOINT_STATE_H_
