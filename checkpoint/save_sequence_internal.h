// The one sequence every save of a Checkpoint's root runs, whoever names
// and commits it (Checkpoint::Save and Write, CheckpointManager::Save):
//
//   1. wait for a pending asynchronous save: its error fails this one,
//      before anything moves;
//   2. remove the debris of dead saves (the naming's, as the caller says);
//   3. increment save_counter (Save and the manager; not Write);
//   4. agree with the group, if any, on going ahead, the number and the
//      timestamp (group_save_internal.h);
//   5. write the checkpoint (Saver::WriteObjects);
//   6. commit it once its files are complete (the state file, or the
//      manager's bookkeeping), on the background thread for an async save.
//
// Thread safety: the thread that builds the graph, as Checkpoint's.

#ifndef CKFLOW_CHECKPOINT_SAVE_SEQUENCE_INTERNAL_H_
#define CKFLOW_CHECKPOINT_SAVE_SEQUENCE_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/file_system.h"
#include "base/status.h"
#include "checkpoint/checkpoint_internal.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/group.h"
#include "runtime/session.h"

namespace ckflow::internal {

// What sets one kind of save apart. `path` is required; the rest may be
// left empty.
struct SaveSequence {
  // Whether save_counter counts this save (and numbers it).
  bool count = true;
  // The number the save is named by instead of the counter's.
  std::optional<int64_t> number;
  // The checkpoint's path for save number `n` (0 when nothing numbers it).
  std::function<std::string(int64_t n)> path;
  // Step 2, on every member: each caller knows which debris is its own and
  // whether this process owns the directory (OwnsDirectory).
  std::function<void()> remove_debris;
  // The save's timestamp, for the commit (in a group, member 0's); null: 0.
  std::function<double()> clock;
  // Step 6: (path, timestamp), once the files are complete (on the writer's
  // thread for an async save; in a group, on member 0 before the last
  // agreement and on the others after it). Null: nothing to commit.
  std::function<Status(const std::string& path, double timestamp)> commit;
};

// Runs the sequence above for `root` in `session`. Returns the path
// written; an error means nothing was committed. REQUIRES: the caller
// checked `options` (Saver::CheckOptions).
StatusOr<std::string> SaveRoot(const std::shared_ptr<CheckpointRoot>& root, Session& session,
                               const SaveOptions& options, const SaveSequence& sequence);

// Whether this process touches the directory's shared files (debris, the
// state file, old checkpoints): alone, or as member 0 of a group.
bool OwnsDirectory(const CheckpointGroup* group);

// The debris removal of a Checkpoint's own saves of `prefix` (numbered:
// "<prefix>-<N>", else exactly `prefix`), on the process that owns the
// directory (null elsewhere): reported as a warning, never a reason to fail
// the save (its own files have other names).
std::function<void()> RemoveDebrisOf(const CheckpointRoot& root, const std::string& prefix,
                                     bool numbered);

// Points `<dirname(path)>/checkpoint` at `path` alone, as Checkpoint.save
// and save_weights do: the commit point of a Checkpoint::Save. On error
// the state file is as before, and the files of `path` are removed (unless
// the state file names `path` already: then they replaced its files).
Status CommitStateFile(FileSystem* fs, const std::string& path, bool durable);

}  // namespace ckflow::internal

#endif  // CKFLOW_CHECKPOINT_SAVE_SEQUENCE_INTERNAL_H_
