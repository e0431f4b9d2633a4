#include "base/logging.h"
#include "bundle/checkpoint_state.h"
#include "checkpoint/group_save_internal.h"
#include "checkpoint/save_files_internal.h"
#include "checkpoint/save_sequence_internal.h"

namespace ckflow::internal {

StatusOr<std::string> SaveRoot(const std::shared_ptr<CheckpointRoot>& root, Session& session,
                               const SaveOptions& options, const SaveSequence& sequence) {
  Saver& saver = *root->saver();
  // A failed background save is reported before the counter moves on.
  Status local = saver.WaitForPendingWrite();
  int64_t counter = 0;
  if (local.ok()) {
    if (sequence.remove_debris) sequence.remove_debris();
    if (sequence.count) {
      StatusOr<int64_t> counted = root->IncrementSaveCounter(session);
      local = counted.status();
      if (counted.ok()) counter = *counted;
    }
  }
  const int64_t n = sequence.number.value_or(counter);
  // Timestamped when the save starts, as TensorFlow does (in a group, by
  // member 0's clock).
  CKFLOW_ASSIGN_OR_RETURN(const double now, AgreeOnSave(saver.group_options(), local, n,
                                                        sequence.clock ? sequence.clock() : 0));
  const std::string path = sequence.path(n);
  CKFLOW_RETURN_IF_ERROR(root->scope().status());
  std::function<Status()> on_written;
  if (sequence.commit) {
    on_written = [commit = sequence.commit, path, now] { return commit(path, now); };
  }
  CKFLOW_RETURN_IF_ERROR(saver.WriteObjects(root, path, session, options, std::move(on_written)));
  return path;
}

bool OwnsDirectory(const CheckpointGroup* group) { return group == nullptr || group->rank() == 0; }

std::function<void()> RemoveDebrisOf(const CheckpointRoot& root, const std::string& prefix,
                                     bool numbered) {
  if (!OwnsDirectory(root.saver()->group())) return nullptr;
  return [fs = root.saver()->file_system(), dir = Dirname(prefix),
          naming = CheckpointNaming{std::string(Basename(prefix)), numbered}] {
    StatusOr<DebrisRemoved> removed = RemoveSaveDebris(fs, dir, naming);
    if (!removed.ok()) Log(LogSeverity::kWarning, removed.status().ToString());
  };
}

Status CommitStateFile(FileSystem* fs, const std::string& path, bool durable) {
  const std::string dir = Dirname(path);
  CheckpointStateData state;
  state.model_checkpoint_path = RelativeTo(dir, path);
  state.all_model_checkpoint_paths = {state.model_checkpoint_path};
  Status s = WriteCheckpointState(dir, state, fs, durable);
  if (s.ok()) return s;
  StatusOr<std::optional<CheckpointStateData>> now = ReadCheckpointState(dir, fs);
  const bool named = now.ok() && now->has_value() &&
                     CleanPath(Resolve(dir, (*now)->model_checkpoint_path)) == CleanPath(path);
  if (!named) RemoveCheckpointFiles(fs, path).IgnoreError();
  return s.WithContext("recording checkpoint '" + path + "' in the state file");
}

}  // namespace ckflow::internal
