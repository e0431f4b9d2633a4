#include "checkpoint/checkpoint.h"

#include <algorithm>

#include "base/logging.h"
#include "bundle/bundle_format.h"
#include "checkpoint/checkpoint_internal.h"
#include "checkpoint/load_status_internal.h"
#include "checkpoint/save_sequence_internal.h"
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

std::shared_ptr<CheckpointRoot> RootOf(const Checkpoint& checkpoint) {
  return std::static_pointer_cast<CheckpointRoot>(checkpoint.root());
}

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

StatusOr<std::string> Checkpoint::Write(const std::string& prefix, Session& session,
                                        const SaveOptions& options) {
  CKFLOW_RETURN_IF_ERROR(
      internal::Saver::CheckOptions(options, "writing '" + prefix + "'", root_->saver()->group()));
  return internal::SaveRoot(
      root_, session, options,
      {.count = false,
       .path = [&prefix](int64_t) { return prefix; },
       .remove_debris = internal::RemoveDebrisOf(*root_, prefix, /*numbered=*/false)});
}

StatusOr<std::string> Checkpoint::Save(const std::string& prefix, const SaveOptions& options) {
  CKFLOW_ASSIGN_OR_RETURN(Session * session, root_->EagerSession());
  return Save(prefix, *session, options);
}

StatusOr<std::string> Checkpoint::Save(const std::string& prefix, Session& session,
                                       const SaveOptions& options) {
  CKFLOW_RETURN_IF_ERROR(internal::Saver::CheckOptions(options, "saving under '" + prefix + "'",
                                                       root_->saver()->group()));
  internal::SaveSequence sequence{
      .path = [&prefix](int64_t n) { return prefix + "-" + std::to_string(n); },
      .remove_debris = internal::RemoveDebrisOf(*root_, prefix, /*numbered=*/true)};
  // The state file is the directory owner's to write.
  if (internal::OwnsDirectory(root_->saver()->group())) {
    sequence.commit = [fs = file_system(), durable = options.durable](const std::string& path,
                                                                      double) {
      return internal::CommitStateFile(fs, path, durable);
    };
  }
  return internal::SaveRoot(root_, session, options, sequence);
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
