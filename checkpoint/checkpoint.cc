#include "checkpoint/checkpoint.h"

#include <algorithm>

#include "base/logging.h"
#include "bundle/bundle_format.h"
#include "bundle/checkpoint_state.h"
#include "checkpoint/checkpoint_internal.h"
#include "checkpoint/group_save_internal.h"
#include "checkpoint/load_status_internal.h"
#include "checkpoint/save_files_internal.h"
#include "ops/array_ops.h"
#include "ops/variables.h"

namespace ckflow {

namespace internal {

CheckpointRoot::CheckpointRoot(const Scope& scope, FileSystem* fs, GroupOptions group)
    : scope_(scope),
      saver_(std::make_shared<Saver>(scope.NewSubScope("save"), fs, SaverFormat{},
                                     std::move(group))) {}

std::shared_ptr<Variable> CheckpointRoot::MaybeCreateSaveCounter() {
  if (save_counter_) return save_counter_;
  Scope s = scope_.WithNoControlDependencies().WithDevice("");
  auto counter =
      Variable::Create(s, "save_counter", ops::Const(s, int64_t{0}), {.trainable = false});
  if (!counter) return nullptr;
  save_counter_ = Track("save_counter", counter);
  return save_counter_;
}

StatusOr<Session*> CheckpointRoot::EagerSession() {
  if (!scope_.eager()) {
    return FailedPreconditionError(
        "saving or restoring without a Session needs a checkpoint built in an eager scope");
  }
  if (eager_session_ == nullptr) {
    SessionOptions options{.file_system = saver_->file_system(),
                           .resources = scope_.eager_context()->shared_resources()};
    CKFLOW_ASSIGN_OR_RETURN(eager_session_, Session::Create(scope_.graph(), std::move(options)));
  }
  return eager_session_.get();
}
StatusOr<int64_t> CheckpointRoot::IncrementSaveCounter(Session& session) {
  CKFLOW_RETURN_IF_ERROR(scope_.status());
  if (scope_.eager()) {
    if (MaybeCreateSaveCounter() == nullptr) return scope_.status();
    Scope s = scope_.WithNoControlDependencies().WithDevice("");
    save_counter_->AssignAdd(s, ops::Const(s, int64_t{1}));
    Tensor counted = save_counter_->value().value();
    CKFLOW_RETURN_IF_ERROR(scope_.status());
    return counted.scalar<int64_t>();
  }
  if (save_counter_ == nullptr) {
    if (MaybeCreateSaveCounter() == nullptr) return scope_.status();
    CKFLOW_RETURN_IF_ERROR(session.Run({}, {}, {save_counter_->initializer()}).status());
  }
  if (!increment_.valid()) {
    Scope s = scope_.WithNoControlDependencies().WithDevice("");
    Output add = save_counter_->AssignAdd(s, ops::Const(s, int64_t{1}));
    increment_ = save_counter_->Read(s.WithControlDependencies({add}));
    CKFLOW_RETURN_IF_ERROR(scope_.status());
  }
  StatusOr<std::vector<Tensor>> counted = session.Run({}, {increment_}, {});
  if (!counted.ok()) {
    return counted.status().WithContext(
        "incrementing save_counter (after Restore, run the status's InitializeOrRestore or "
        "RunRestoreOps before saving)");
  }
  return (*counted)[0].scalar<int64_t>();
}
std::string RelativeTo(const std::string& dir, const std::string& path) {
  if (CleanPath(Dirname(path)) == CleanPath(dir)) return std::string(Basename(path));
  return path;
}

std::string Resolve(const std::string& dir, const std::string& path) { return JoinPath(dir, path); }

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

bool OwnsDirectory(const CheckpointGroup* group) { return group == nullptr || group->rank() == 0; }

void LogAsyncError(const Status& s) {
  if (!s.ok()) Log(LogSeverity::kError, "an asynchronous checkpoint save failed: " + s.ToString());
}

}  // namespace internal

// ------------------------------------------------------------ Checkpoint

Checkpoint::Checkpoint(const Scope& scope, Dependencies dependencies, CheckpointOptions options)
    : root_(std::make_shared<internal::CheckpointRoot>(
          scope, options.file_system ? options.file_system : FileSystem::Default(),
          std::move(options.group))) {
  std::sort(dependencies.begin(), dependencies.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < dependencies.size(); ++i) {
    const auto& [name, object] = dependencies[i];
    if (name.empty() || object == nullptr || name == "save_counter" ||
        (i > 0 && dependencies[i - 1].first == name)) {
      scope.UpdateStatus(InvalidArgumentError("Checkpoint: dependency '", name, "' is ",
                                              object == nullptr ? "null"
                                              : name.empty()    ? "unnamed"
                                                                : "named twice or reserved"));
      continue;
    }
    root_->Track(name, object);
  }
}

// The Saver may outlive this (statuses share it), but its pending write must
// not outlive the session the caller is about to destroy.
Checkpoint::~Checkpoint() { internal::LogAsyncError(Sync()); }

Status Checkpoint::Sync() { return root_->saver()->WaitForPendingWrite(); }

std::shared_ptr<Variable> Checkpoint::save_counter() const { return root_->save_counter(); }
std::shared_ptr<Trackable> Checkpoint::root() const { return root_; }
FileSystem* Checkpoint::file_system() const { return root_->saver()->file_system(); }

namespace {

// Debris of dead saves is no reason to fail a save: it is reported and the
// save goes on (its own files have other names).
void RemoveDebris(FileSystem* fs, const std::string& dir,
                  const internal::CheckpointNaming& naming) {
  StatusOr<internal::DebrisRemoved> removed = internal::RemoveSaveDebris(fs, dir, naming);
  if (!removed.ok()) Log(LogSeverity::kWarning, removed.status().ToString());
}

}  // namespace

StatusOr<std::string> Checkpoint::Write(const std::string& prefix, Session& session,
                                        const SaveOptions& options) {
  CKFLOW_RETURN_IF_ERROR(internal::Saver::CheckOptions(options, "writing '" + prefix + "'"));
  CheckpointGroup* group = root_->saver()->group();
  Status synced = Sync();
  if (synced.ok() && internal::OwnsDirectory(group)) {
    RemoveDebris(file_system(), Dirname(prefix),
                 {std::string(Basename(prefix)), /*numbered=*/false});
  }
  CKFLOW_RETURN_IF_ERROR(
      internal::AgreeOnSave(root_->saver()->group_options(), synced, 0, 0).status());
  return WriteThen(prefix, session, options, {});
}

StatusOr<std::string> Checkpoint::WriteThen(const std::string& prefix, Session& session,
                                            const SaveOptions& options,
                                            std::function<Status()> on_written) {
  CKFLOW_RETURN_IF_ERROR(root_->scope().status());
  CKFLOW_RETURN_IF_ERROR(
      root_->saver()->WriteObjects(root_, prefix, session, options, std::move(on_written)));
  return prefix;
}

StatusOr<std::string> Checkpoint::Save(const std::string& prefix, const SaveOptions& options) {
  CKFLOW_ASSIGN_OR_RETURN(Session * session, root_->EagerSession());
  return Save(prefix, *session, options);
}

StatusOr<std::string> Checkpoint::Save(const std::string& prefix, Session& session,
                                       const SaveOptions& options) {
  CKFLOW_RETURN_IF_ERROR(internal::Saver::CheckOptions(options, "saving under '" + prefix + "'"));
  CheckpointGroup* group = root_->saver()->group();
  // A failed background save is reported before the counter moves on.
  Status local = Sync();
  FileSystem* fs = file_system();
  int64_t n = 0;
  if (local.ok()) {
    if (internal::OwnsDirectory(group)) {
      RemoveDebris(fs, Dirname(prefix), {std::string(Basename(prefix)), /*numbered=*/true});
    }
    StatusOr<int64_t> counted = root_->IncrementSaveCounter(session);
    local = counted.status();
    if (counted.ok()) n = *counted;
  }
  CKFLOW_RETURN_IF_ERROR(
      internal::AgreeOnSave(root_->saver()->group_options(), local, n, 0).status());
  const std::string path = prefix + "-" + std::to_string(n);
  std::function<Status()> commit;
  if (internal::OwnsDirectory(group)) {
    commit = [fs, path, durable = options.durable] {
      return internal::CommitStateFile(fs, path, durable);
    };
  }
  return WriteThen(path, session, options, std::move(commit));
}

StatusOr<LoadStatus> Checkpoint::Restore(const std::optional<std::string>& save_path,
                                         const RestoreOptions& options) {
  CKFLOW_RETURN_IF_ERROR(root_->scope().status());
  std::shared_ptr<internal::CheckpointRoot> root = root_;
  return internal::RestoreRoot(
      root_, root_->saver(), save_path,
      [root]() -> std::shared_ptr<Trackable> { return root->MaybeCreateSaveCounter(); }, options);
}

}  // namespace ckflow
