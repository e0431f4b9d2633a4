#include "checkpoint/checkpoint.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "base/logging.h"
#include "bundle/bundle_format.h"
#include "bundle/checkpoint_state.h"
#include "checkpoint/load_status_internal.h"
#include "checkpoint/save_files_internal.h"
#include "ops/array_ops.h"
#include "ops/variables.h"

namespace ckflow {

namespace internal {

// The root object of a Checkpoint: its dependencies, then save_counter.
class CheckpointRoot : public Trackable {
 public:
  CheckpointRoot(const Scope& scope, FileSystem* fs, GroupOptions group)
      : scope_(scope),
        saver_(std::make_shared<Saver>(scope.NewSubScope("save"), fs, SaverFormat{},
                                       std::move(group))) {}
  std::string TypeName() const override { return "Checkpoint"; }

  const Scope& scope() const { return scope_; }
  const std::shared_ptr<Saver>& saver() const { return saver_; }
  const std::shared_ptr<Variable>& save_counter() const { return save_counter_; }

  // Creates save_counter (tracked as child "save_counter", so a deferred
  // restore of it fires) if it does not exist yet. Returns it.
  std::shared_ptr<Variable> MaybeCreateSaveCounter() {
    if (save_counter_) return save_counter_;
    Scope s = scope_.WithNoControlDependencies().WithDevice("");
    auto counter =
        Variable::Create(s, "save_counter", ops::Const(s, int64_t{0}), {.trainable = false});
    if (!counter) return nullptr;
    save_counter_ = Track("save_counter", counter);
    return save_counter_;
  }

  // A session over the eager variables, for the save ops (made once).
  StatusOr<Session*> EagerSession() {
    if (!scope_.eager()) {
      return FailedPreconditionError(
          "Checkpoint::Save without a Session needs a checkpoint built in an eager scope");
    }
    if (eager_session_ == nullptr) {
      SessionOptions options{.file_system = saver_->file_system(),
                             .resources = scope_.eager_context()->shared_resources()};
      CKFLOW_ASSIGN_OR_RETURN(eager_session_, Session::Create(scope_.graph(), std::move(options)));
    }
    return eager_session_.get();
  }

  // Increments save_counter in `session` (creating and initializing it on
  // the first save) and returns the new value, as Checkpoint.save does.
  StatusOr<int64_t> IncrementSaveCounter(Session& session) {
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

 private:
  Scope scope_;
  std::shared_ptr<Saver> saver_;
  std::shared_ptr<Variable> save_counter_;
  Output increment_;
  std::unique_ptr<Session> eager_session_;
};

namespace {

// Paths in the state file are relative to its directory, as TensorFlow's
// save_relative_paths writes them.
std::string RelativeTo(const std::string& dir, const std::string& path) {
  if (CleanPath(Dirname(path)) == CleanPath(dir)) return std::string(Basename(path));
  return path;
}

// A state-file path (relative to `dir`, or absolute) as a path to open.
std::string Resolve(const std::string& dir, const std::string& path) { return JoinPath(dir, path); }

// Points `<dirname(path)>/checkpoint` at `path` alone, as Checkpoint.save
// and save_weights do: the commit point of a Checkpoint::Save. On error
// the state file is as before, and the files of `path` are removed (unless
// the state file names `path` already: then they replaced its files).
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

// Whether this process touches the directory's shared files (debris, the
// state file, old checkpoints): alone, or as member 0 of a group.
bool OwnsDirectory(const CheckpointGroup* group) { return group == nullptr || group->rank() == 0; }

// Collective, before a group save writes anything: every member has
// `local` OK (a pending save's error, the counter's increment) and the same
// save number `n`, and member 0 has removed the debris of dead saves, which
// includes other members' parts. Returns member 0's `now`, so every
// member's bookkeeping stamps the save alike. Without a group, `now`.
StatusOr<double> AgreeOnSave(const Saver& saver, const Status& local, int64_t n, double now) {
  CheckpointGroup* group = saver.group();
  if (group == nullptr) {
    CKFLOW_RETURN_IF_ERROR(local);
    return now;
  }
  CKFLOW_RETURN_IF_ERROR(AgreeOnStatus(*group, local, saver.group_timeout()));
  CKFLOW_ASSIGN_OR_RETURN(
      std::vector<std::string> all,
      group->AllGather(std::to_string(n) + " " + std::to_string(now), saver.group_timeout()));
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r].substr(0, all[r].find(' ')) != all[0].substr(0, all[0].find(' '))) {
      return FailedPreconditionError("checkpoint group: rank 0 saves number ",
                                     all[0].substr(0, all[0].find(' ')), ", rank ", r, " number ",
                                     all[r].substr(0, all[r].find(' ')),
                                     " (every member must restore the same checkpoint, or none)");
    }
  }
  return std::strtod(all[0].c_str() + all[0].find(' ') + 1, nullptr);
}

}  // namespace
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

namespace {

void LogAsyncError(const Status& s) {
  if (!s.ok()) Log(LogSeverity::kError, "an asynchronous checkpoint save failed: " + s.ToString());
}

}  // namespace

// The Saver may outlive this (statuses share it), but its pending write must
// not outlive the session the caller is about to destroy.
Checkpoint::~Checkpoint() { LogAsyncError(Sync()); }

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
  CheckpointGroup* group = root_->saver()->group();
  Status synced = Sync();
  if (synced.ok() && internal::OwnsDirectory(group)) {
    RemoveDebris(file_system(), Dirname(prefix),
                 {std::string(Basename(prefix)), /*numbered=*/false});
  }
  CKFLOW_RETURN_IF_ERROR(internal::AgreeOnSave(*root_->saver(), synced, 0, 0).status());
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
  CKFLOW_RETURN_IF_ERROR(internal::AgreeOnSave(*root_->saver(), local, n, 0).status());
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

std::optional<std::string> LatestCheckpoint(const std::string& dir,
                                            const LatestCheckpointOptions& options) {
  FileSystem* fs = options.file_system ? options.file_system : FileSystem::Default();
  StatusOr<std::optional<CheckpointStateData>> state = ReadCheckpointState(dir, fs);
  if (!state.ok() || !state->has_value()) return std::nullopt;
  const std::string& latest = (*state)->model_checkpoint_path;
  if (latest.empty()) return std::nullopt;
  if (!options.allow_outside_directory && !IsInsideDirectory(dir, latest)) {
    Log(LogSeverity::kWarning, "LatestCheckpoint: " + JoinPath(dir, kCheckpointStateFilename) +
                                   " names '" + latest +
                                   "', outside the directory; not following it (see "
                                   "LatestCheckpointOptions::allow_outside_directory)");
    return std::nullopt;
  }
  std::string path = internal::Resolve(dir, latest);
  if (fs->FileExists(IndexFilename(path)).ok()) return path;
  // TensorFlow globs for either; a directory matches its glob too, but is
  // never a checkpoint.
  StatusOr<FileStat> st = fs->Stat(path);
  if (st.ok() && !st->is_directory) return path;
  return std::nullopt;
}

// ------------------------------------------------------------ SaveWeights

namespace {

// The saver of a SaveWeights root, kept with its graph so repeated
// SaveWeights and LoadWeights calls reuse their ops.
struct WeightSavers : GraphAttachment {
  std::map<const Trackable*, std::shared_ptr<internal::Saver>> by_root;
};

// The saver's ops go into the graph `session` runs: the graph of the root's
// variables or, before there are any (LoadWeights deferred until the layers
// build), where they will appear. Its file system is the session's, fixed
// when the saver is first made for `root`.
StatusOr<std::shared_ptr<internal::Saver>> SaverForRoot(const std::shared_ptr<Trackable>& root,
                                                        Session& session) {
  if (root == nullptr) return InvalidArgumentError("SaveWeights/LoadWeights: the object is null");
  // A session runs a graph that keeps growing (these restore ops are added
  // to it), so the const in Session::graph() is the session's promise not to
  // change it, not the graph's.
  Graph& g = const_cast<Graph&>(session.graph());
  std::shared_ptr<internal::Saver>& saver = g.Attachment<WeightSavers>().by_root[root.get()];
  if (saver == nullptr) {
    CKFLOW_ASSIGN_OR_RETURN(Scope scope, Scope::ForGraph(g));
    saver = std::make_shared<internal::Saver>(scope.NewSubScope("weights"), session.file_system());
  }
  return saver;
}

}  // namespace

Status SaveWeights(const std::shared_ptr<Trackable>& root, const std::string& path,
                   Session& session, const SaveOptions& options) {
  if (options.async) {
    // Nothing would let the caller wait for it or see its error.
    return InvalidArgumentError("SaveWeights('", path,
                                "'): async saves need a Checkpoint (Checkpoint::Sync waits)");
  }
  if (root == nullptr) return InvalidArgumentError("SaveWeights('", path, "'): the object is null");
  internal::ObjectGraph graph = internal::BuildObjectGraph(root);
  CKFLOW_RETURN_IF_ERROR(graph.tracking_status);
  if (graph.values.empty()) {
    return FailedPreconditionError("SaveWeights('", path,
                                   "'): the object owns no variables yet (call the model once so "
                                   "its layers build)");
  }
  if (&graph.values[0].attribute.handle.node()->graph() != &session.graph()) {
    return InvalidArgumentError("SaveWeights('", path,
                                "'): the object's variables are not in the session's graph");
  }
  CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<internal::Saver> saver, SaverForRoot(root, session));
  CKFLOW_RETURN_IF_ERROR(saver->Write(graph, path, session, options));
  return internal::CommitStateFile(saver->file_system(), path, options.durable);
}

StatusOr<LoadStatus> LoadWeights(const std::shared_ptr<Trackable>& root, const std::string& path,
                                 Session& session) {
  CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<internal::Saver> saver, SaverForRoot(root, session));
  CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, internal::RestoreRoot(root, saver, path, nullptr));
  CKFLOW_RETURN_IF_ERROR(status.RunRestoreOps(session));
  CKFLOW_RETURN_IF_ERROR(status.AssertNontrivialMatch());
  return status;
}

// ------------------------------------------------------------ CheckpointManager

namespace {
double WallClock() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

CheckpointManager::CheckpointManager(Checkpoint& checkpoint, std::string directory, Options options)
    : checkpoint_(checkpoint), directory_(std::move(directory)), options_(std::move(options)) {}

// A pending write's bookkeeping refers to this manager.
CheckpointManager::~CheckpointManager() { LogAsyncError(checkpoint_.Sync()); }

StatusOr<std::unique_ptr<CheckpointManager>> CheckpointManager::Create(Checkpoint& checkpoint,
                                                                       std::string directory,
                                                                       Options options) {
  if (options.max_to_keep.has_value() && *options.max_to_keep <= 0) {
    return InvalidArgumentError(
        "CheckpointManager: max_to_keep must be positive (or unset to "
        "keep every checkpoint), got ",
        *options.max_to_keep);
  }
  if (options.checkpoint_interval.has_value() && options.step_counter == nullptr) {
    return InvalidArgumentError(
        "CheckpointManager: step_counter should be passed if checkpoint_interval is set");
  }
  if (options.checkpoint_interval.has_value() && *options.checkpoint_interval < 0) {
    return InvalidArgumentError("CheckpointManager: checkpoint_interval must not be negative, got ",
                                *options.checkpoint_interval);
  }
  if (options.checkpoint_name.empty() || options.checkpoint_name.find('/') != std::string::npos) {
    return InvalidArgumentError("CheckpointManager: checkpoint_name '", options.checkpoint_name,
                                "' must be a non-empty file name (no '/')");
  }
  CKFLOW_RETURN_IF_ERROR(
      internal::Saver::CheckOptions(options.save_options, "CheckpointManager: save_options"));
  if (!options.clock) options.clock = WallClock;
  if (directory.empty()) directory = ".";
  std::unique_ptr<CheckpointManager> manager(
      new CheckpointManager(checkpoint, std::move(directory), std::move(options)));
  if (manager->options_.checkpoint_interval.has_value()) {
    manager->last_checkpoint_step_ = manager->options_.last_checkpoint_step;
  }
  FileSystem* fs = checkpoint.file_system();
  const double now = manager->options_.clock();
  // A state file that exists but cannot be read is an error, as in
  // TensorFlow: the manager would otherwise forget (and never delete) the
  // checkpoints it managed, and overwrite the file on its first save.
  CKFLOW_ASSIGN_OR_RETURN(std::optional<CheckpointStateData> state,
                          ReadCheckpointState(manager->directory_, fs));
  if (!state.has_value()) {
    // Slightly in the past, so a manager re-created at once does not
    // preserve the checkpoint its predecessor just wrote.
    manager->last_preserved_ = now - 1;
    std::lock_guard<std::mutex> lock(manager->mu_);
    manager->RemoveDebris();
    return manager;
  }
  const CheckpointStateData& s = *state;
  const std::string& dir = manager->directory_;
  // The state file is input from outside: a path that leaves the directory
  // is tracked only on request (and even then never deleted).
  auto followed = [&](const std::string& p) {
    if (manager->options_.allow_outside_directory || IsInsideDirectory(dir, p)) return true;
    Log(LogSeverity::kWarning, "CheckpointManager: " + JoinPath(dir, kCheckpointStateFilename) +
                                   " names '" + p + "', outside '" + dir + "'; ignoring it");
    return false;
  };
  // As LatestCheckpoint: only a checkpoint that is there.
  if (!s.model_checkpoint_path.empty() && followed(s.model_checkpoint_path)) {
    std::string latest = internal::Resolve(dir, s.model_checkpoint_path);
    if (fs->FileExists(IndexFilename(latest)).ok()) manager->latest_ = std::move(latest);
  }
  manager->last_preserved_ = s.last_preserved_timestamp;
  if (now < manager->last_preserved_) {
    // The clock went backwards (or the state came from another machine).
    // TensorFlow warns and starts its bookkeeping at `now`; every stored
    // timestamp is capped at `now` below, so old checkpoints never look new
    // and none is deleted early.
    Log(LogSeverity::kWarning, "CheckpointManager('" + manager->directory_ +
                                   "'): the clock returned a value " +
                                   std::to_string(manager->last_preserved_ - now) +
                                   " seconds behind the last preserved checkpoint timestamp.");
    manager->last_preserved_ = now;
  }
  std::vector<double> timestamps = s.all_model_checkpoint_timestamps;
  // Without timestamps every checkpoint counts as preserved: it leaves
  // management without being deleted. With too few, TensorFlow pairs them up
  // (zip) and drops the paths left over.
  if (timestamps.empty()) {
    timestamps.assign(s.all_model_checkpoint_paths.size(), manager->last_preserved_);
  }
  const size_t n = std::min(timestamps.size(), s.all_model_checkpoint_paths.size());
  for (size_t i = 0; i < n; ++i) {
    const double ts = std::min(timestamps[i], now);
    if (ts > manager->last_preserved_ && followed(s.all_model_checkpoint_paths[i])) {
      manager->active_.emplace_back(internal::Resolve(dir, s.all_model_checkpoint_paths[i]), ts);
    }
  }
  std::lock_guard<std::mutex> lock(manager->mu_);
  manager->RemoveDebris();
  return manager;
}

std::vector<std::string> CheckpointManager::checkpoints() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> paths;
  for (const auto& [path, ts] : active_) paths.push_back(path);
  return paths;
}

std::optional<std::string> CheckpointManager::latest_checkpoint() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

Status CheckpointManager::last_sweep_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sweep_status_;
}

namespace {

// N of "<dir>/<name>-N"; -1 if `path` is not named so.
int64_t CheckpointNumber(const std::string& path, const std::string& name) {
  const std::string_view base = Basename(path);
  if (base.size() <= name.size() + 1 || !base.starts_with(name) || base[name.size()] != '-') {
    return -1;
  }
  int64_t n = 0;
  for (char c : base.substr(name.size() + 1)) {
    if (c < '0' || c > '9' || n > (int64_t{1} << 58)) return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

}  // namespace

void CheckpointManager::RemoveDebris() {
  if (!internal::OwnsDirectory(checkpoint_.root_->saver()->group())) return;
  FileSystem* fs = checkpoint_.file_system();
  const internal::CheckpointNaming naming{options_.checkpoint_name, /*numbered=*/true};
  StatusOr<internal::DebrisRemoved> removed = internal::RemoveSaveDebris(fs, directory_, naming);
  Status s = removed.status();
  // A save killed after its files were in place but before the state file
  // named them left a whole checkpoint that never happened: numbered after
  // the latest, and listed nowhere. (Older unlisted ones may be preserved
  // by keep_checkpoint_every_n_hours, or the user's: they stay.)
  const int64_t latest = latest_ ? CheckpointNumber(*latest_, options_.checkpoint_name) : -1;
  StatusOr<std::vector<std::string>> names = fs->ListDir(directory_);
  if (latest >= 0 && names.ok()) {
    for (const std::string& name : *names) {
      if (!name.ends_with(".index")) continue;
      const std::string prefix = JoinPath(directory_, name.substr(0, name.size() - 6));
      const int64_t n = CheckpointNumber(prefix, options_.checkpoint_name);
      const bool listed =
          prefix == *latest_ || std::any_of(active_.begin(), active_.end(),
                                            [&](const auto& e) { return e.first == prefix; });
      if (n <= latest || listed) continue;
      Status r = internal::RemoveCheckpointFiles(fs, prefix);
      if (!r.ok() && s.ok()) s = r;
    }
  }
  if (!s.ok()) {
    Log(LogSeverity::kWarning, "CheckpointManager: " + s.ToString());
    sweep_status_ = s;
  }
}

CheckpointStateData CheckpointManager::StateOf(
    const std::optional<std::string>& latest,
    const std::vector<std::pair<std::string, double>>& active, double last_preserved) const {
  CheckpointStateData state;
  if (latest) state.model_checkpoint_path = internal::RelativeTo(directory_, *latest);
  for (const auto& [path, ts] : active) {
    state.all_model_checkpoint_paths.push_back(internal::RelativeTo(directory_, path));
    state.all_model_checkpoint_timestamps.push_back(ts);
  }
  state.last_preserved_timestamp = last_preserved;
  return state;
}

Status CheckpointManager::DeleteManaged(const std::string& path) const {
  const internal::CheckpointNaming naming{options_.checkpoint_name, /*numbered=*/true};
  if (CleanPath(Dirname(path)) != CleanPath(directory_) ||
      !naming.IsCheckpointName(Basename(path))) {
    Log(LogSeverity::kWarning, "CheckpointManager: not deleting '" + path +
                                   "': only checkpoints in '" + directory_ + "' named '" +
                                   options_.checkpoint_name + "-<N>' are its to delete");
    return OkStatus();
  }
  return internal::RemoveCheckpointFiles(checkpoint_.file_system(), path);
}

namespace {

StatusOr<int64_t> ReadStep(Session& session, const Variable& counter) {
  StatusOr<std::vector<Tensor>> value = session.Run({}, {counter.value()});
  if (!value.ok()) {
    return value.status().WithContext("CheckpointManager: reading step_counter '" + counter.name() +
                                      "'");
  }
  const Tensor& t = (*value)[0];
  if (t.NumElements() != 1 || (t.dtype() != DT_INT64 && t.dtype() != DT_INT32)) {
    return InvalidArgumentError("CheckpointManager: step_counter '", counter.name(),
                                "' must be an int64 or int32 scalar, got ", DataTypeName(t.dtype()),
                                t.shape().ToString());
  }
  return t.dtype() == DT_INT64 ? t.scalar<int64_t>() : int64_t{t.scalar<int32_t>()};
}

}  // namespace

std::optional<int64_t> CheckpointManager::last_checkpoint_step() const {
  return last_checkpoint_step_;
}

StatusOr<std::string> CheckpointManager::Save(Session& session,
                                              std::optional<int64_t> checkpoint_number,
                                              bool check_interval) {
  if (options_.checkpoint_interval.has_value()) {
    CKFLOW_ASSIGN_OR_RETURN(int64_t step, ReadStep(session, *options_.step_counter));
    if (last_checkpoint_step_.has_value()) {
      if (step == *last_checkpoint_step_) return std::string();
      if (check_interval && step < *last_checkpoint_step_ + *options_.checkpoint_interval) {
        return std::string();
      }
    }
    last_checkpoint_step_ = step;
  }
  Status local = checkpoint_.Sync();
  int64_t counter = 0;
  if (local.ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      sweep_status_ = OkStatus();
      RemoveDebris();
    }
    StatusOr<int64_t> counted = checkpoint_.root_->IncrementSaveCounter(session);
    local = counted.status();
    if (counted.ok()) counter = *counted;
  }
  const int64_t n = checkpoint_number.value_or(counter);
  // Timestamped when the save starts, as TensorFlow does (in a group, by
  // member 0's clock).
  CKFLOW_ASSIGN_OR_RETURN(const double now, internal::AgreeOnSave(*checkpoint_.root_->saver(),
                                                                  local, n, options_.clock()));
  const std::string prefix =
      JoinPath(directory_, options_.checkpoint_name + "-" + std::to_string(n));
  return checkpoint_.WriteThen(prefix, session, options_.save_options,
                               [this, prefix, now] { return Record(prefix, now); });
}

StatusOr<std::optional<std::string>> CheckpointManager::RestoreOrInitialize(Session& session) {
  if (std::optional<std::string> latest = latest_checkpoint()) {
    CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, checkpoint_.Restore(*latest));
    CKFLOW_RETURN_IF_ERROR(status.InitializeOrRestore(session));
    if (options_.checkpoint_interval.has_value()) {
      CKFLOW_ASSIGN_OR_RETURN(last_checkpoint_step_, ReadStep(session, *options_.step_counter));
    }
    return latest;
  }
  if (options_.init_fn) {
    CKFLOW_RETURN_IF_ERROR(options_.init_fn(session));
  } else {
    CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, checkpoint_.Restore(std::nullopt));
    CKFLOW_RETURN_IF_ERROR(status.InitializeOrRestore(session));
  }
  return std::optional<std::string>();
}

Status CheckpointManager::Record(const std::string& prefix, double timestamp) {
  std::lock_guard<std::mutex> lock(mu_);
  FileSystem* fs = checkpoint_.file_system();
  const bool durable = options_.save_options.durable;
  // In a group, member 0 writes the state file and deletes; the others only
  // keep the same books.
  const bool files = internal::OwnsDirectory(checkpoint_.root_->saver()->group());
  // The bookkeeping after this save, computed aside: memory changes only
  // once the directory does.
  std::vector<std::pair<std::string, double>> active = active_;
  const bool known =
      std::any_of(active.begin(), active.end(), [&](const auto& e) { return e.first == prefix; }) ||
      latest_ == prefix;
  std::erase_if(active, [&](const auto& e) { return e.first == prefix; });
  active.emplace_back(prefix, timestamp);
  double last_preserved = last_preserved_;
  std::vector<std::pair<std::string, double>> to_delete;
  if (options_.max_to_keep.has_value()) {
    while (active.size() > static_cast<size_t>(*options_.max_to_keep)) {
      auto [path, ts] = active.front();
      active.erase(active.begin());
      if (options_.keep_checkpoint_every_n_hours.has_value() &&
          ts - *options_.keep_checkpoint_every_n_hours * 3600.0 >= last_preserved) {
        last_preserved = ts;  // kept for good, no longer managed
        continue;
      }
      to_delete.emplace_back(path, ts);
    }
  }
  // The commit point. The state still lists the checkpoints about to be
  // deleted, so a crash before the second write leaves them managed (the
  // next save deletes them), never unreferenced.
  std::vector<std::pair<std::string, double>> listed = to_delete;
  listed.insert(listed.end(), active.begin(), active.end());
  Status committed =
      files ? WriteCheckpointState(directory_, StateOf(prefix, listed, last_preserved), fs, durable)
            : OkStatus();
  if (!committed.ok()) {
    // Not a checkpoint: nothing names it (unless it replaced one that was
    // already listed, whose files are now these).
    if (!known) internal::RemoveCheckpointFiles(fs, prefix).IgnoreError();
    return committed.WithContext("CheckpointManager: recording '" + prefix + "'");
  }
  active_ = std::move(active);
  latest_ = prefix;
  last_preserved_ = last_preserved;
  // After the commit nothing fails the save. A checkpoint whose files
  // could not all be deleted stays managed (and listed), so the next sweep
  // tries again instead of leaving its files behind for good.
  Status swept;
  std::vector<std::pair<std::string, double>> kept;
  for (const auto& [path, ts] : to_delete) {
    Status s = files ? DeleteManaged(path) : OkStatus();
    if (s.ok()) continue;
    kept.emplace_back(path, ts);
    if (swept.ok()) swept = s.WithContext("deleting old checkpoint '" + path + "'");
  }
  active_.insert(active_.begin(), kept.begin(), kept.end());
  if (!to_delete.empty() && files) {
    Status s =
        WriteCheckpointState(directory_, StateOf(latest_, active_, last_preserved_), fs, durable);
    if (!s.ok() && swept.ok()) swept = s.WithContext("rewriting the state file after the sweep");
  }
  if (!swept.ok()) {
    Log(LogSeverity::kWarning,
        "CheckpointManager: saved '" + prefix + "', but after that: " + swept.ToString());
    sweep_status_ = swept;
  }
  return OkStatus();
}

}  // namespace ckflow
