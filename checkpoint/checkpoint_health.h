// Whether checkpoints are whole, and a directory's health: what a job that
// restarts needs to resume from the newest checkpoint it can actually read,
// and what `ckflow fsck` reports and repairs.
//
// A checkpoint is whole when its index parses and checks (bundle_reader.h),
// every data file the index names is there with at least the bytes its
// entries need, and, when asked, every entry's CRC32C matches. A save
// commits atomically, so a damaged checkpoint comes from outside: a disk
// that lost a file, a copy cut short, bits that rotted.
//
// TensorFlow's restore uses the state file's newest checkpoint and fails if
// it is damaged; Checkpoint::Restore keeps that behaviour.
// LatestGoodCheckpoint and CheckpointManager::RestoreOrInitialize fall back
// to the newest whole checkpoint and log each one they skip, with why.

#ifndef CKFLOW_CHECKPOINT_CHECKPOINT_HEALTH_H_
#define CKFLOW_CHECKPOINT_CHECKPOINT_HEALTH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/file_system.h"
#include "base/status.h"
#include "bundle/checkpoint_state.h"

namespace ckflow {

// How much of a checkpoint to read to call it whole; each level includes
// the one before.
enum class CheckpointVerify {
  kNone,       // nothing: the state file's word is taken
  kFiles,      // the index parses; every data file is there, long enough
  kChecksums,  // and every entry's bytes match their CRC32C (reads it all)
};

// OK if the checkpoint at `prefix` is whole at `verify`; else why not:
// NotFound for a missing index or data file, DataLoss for an index that
// does not parse, a data file shorter than its entries need, or a CRC
// mismatch; each names the file and, where there is one, the key. A V1
// checkpoint (a single file at `prefix`) is whole if it opens and checks.
Status CheckCheckpoint(const std::string& prefix,
                       CheckpointVerify verify = CheckpointVerify::kFiles,
                       FileSystem* fs = nullptr);

// A checkpoint passed over, and why.
struct SkippedCheckpoint {
  std::string path;
  Status why;
};

struct LatestGoodCheckpointOptions {
  FileSystem* file_system = nullptr;  // null: FileSystem::Default()
  CheckpointVerify verify = CheckpointVerify::kFiles;
  // As LatestCheckpointOptions.
  bool allow_outside_directory = false;
  std::string latest_filename = kCheckpointStateFilename;
  // If set, receives the checkpoints skipped, newest first.
  std::vector<SkippedCheckpoint>* skipped = nullptr;
};

// The newest whole checkpoint that `<dir>/checkpoint` lists: its latest,
// else the others from newest to oldest. Each one skipped is logged as a
// warning naming it and why. nullopt if none is whole, or there is no
// readable state file (as LatestCheckpoint).
std::optional<std::string> LatestGoodCheckpoint(const std::string& dir,
                                                const LatestGoodCheckpointOptions& options = {});

// ------------------------------------------------------------ a directory

struct CheckpointDirectoryOptions {
  FileSystem* file_system = nullptr;  // null: FileSystem::Default()
  CheckpointVerify verify = CheckpointVerify::kFiles;
  bool allow_outside_directory = false;
  std::string latest_filename = kCheckpointStateFilename;
};

// One checkpoint of a directory: listed by its state file, or found by its
// index file.
struct CheckpointHealth {
  std::string path;      // the prefix, as a path to open
  bool listed = false;   // named by the state file
  bool latest = false;   // the state file's newest
  double timestamp = 0;  // the state file's, if it has one; else 0
  uint64_t bytes = 0;    // of its index and data files that exist
  Status status;         // CheckCheckpoint's verdict
};

struct CheckpointDirectoryHealth {
  std::string dir;
  bool has_state_file = false;
  // What is wrong with the state file itself: it does not parse, names a
  // checkpoint that does not exist or lies outside the directory, its
  // newest is not the last it lists, its timestamps do not pair up.
  std::vector<std::string> state_problems;
  double last_preserved_timestamp = 0;  // the state file's
  // Listed ones in the state file's order (oldest first), then the
  // directory's others by name.
  std::vector<CheckpointHealth> checkpoints;
  // Files (and "_temp" directories) that dead saves left behind.
  std::vector<std::string> debris;
  uint64_t debris_bytes = 0;

  // Nothing damaged and nothing left behind.
  bool clean() const;
};

// Checks the state file, every checkpoint it lists and every `*.index` in
// `dir`, and looks for the debris of dead saves. Only errors reading the
// directory itself fail (NotFound if it does not exist); what is damaged is
// in the result.
StatusOr<CheckpointDirectoryHealth> CheckCheckpointDirectory(
    const std::string& dir, const CheckpointDirectoryOptions& options = {});

struct CheckpointRepair {
  bool state_rewritten = false;
  bool state_removed = false;  // no whole checkpoint was left to name
  int debris_files = 0;
  uint64_t debris_bytes = 0;
};

// Repairs what `health` (from CheckCheckpointDirectory, with the same
// options) found: rewrites the state file durably to list only the whole
// checkpoints it listed, in order, the newest whole one as latest (an
// unreadable state file is rebuilt from the directory's whole numbered
// checkpoints, "<name>-<N>", by N; with none whole it is removed), and
// removes the debris of dead saves. Never deletes a checkpoint, whole or
// damaged.
StatusOr<CheckpointRepair> RepairCheckpointDirectory(
    const CheckpointDirectoryHealth& health, const CheckpointDirectoryOptions& options = {});

}  // namespace ckflow

#endif  // CKFLOW_CHECKPOINT_CHECKPOINT_HEALTH_H_
