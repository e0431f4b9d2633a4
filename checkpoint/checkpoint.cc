#include "checkpoint/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>

#include "bundle/bundle_format.h"
#include "bundle/checkpoint_state.h"
#include "checkpoint/restore_internal.h"
#include "ops/array_ops.h"
#include "ops/variables.h"
#include "base/logging.h"

namespace ckflow {
namespace fs = std::filesystem;

namespace internal {

// The root object of a Checkpoint: its dependencies, then save_counter.
class CheckpointRoot : public Trackable {
 public:
  explicit CheckpointRoot(Scope scope)
      : scope_(scope), saver_(std::make_shared<Saver>(scope.NewSubScope("save"))) {}

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

  // Increments save_counter in `session` (creating and initializing it on
  // the first save) and returns the new value, as Checkpoint.save does.
  StatusOr<int64_t> IncrementSaveCounter(Session& session) {
    CKFLOW_RETURN_IF_ERROR(scope_.status());
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
};

Status SyncCheckpointFiles(const std::string& prefix, int num_shards) {
  std::vector<std::string> paths = {IndexFilename(prefix)};
  for (int i = 0; i < num_shards; ++i) paths.push_back(DataFilename(prefix, i, num_shards));
  std::string dir = fs::path(prefix).parent_path().string();
  paths.push_back(dir.empty() ? "." : dir);
  for (const std::string& path : paths) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NotFoundError("cannot open '", path, "' to sync it");
    int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0) return DataLossError("fsync of '", path, "' failed");
  }
  return OkStatus();
}

namespace {

std::string Basename(const std::string& path) { return fs::path(path).filename().string(); }
std::string Dirname(const std::string& path) { return fs::path(path).parent_path().string(); }

// Paths in the state file are relative to its directory, as TensorFlow's
// save_relative_paths writes them.
std::string RelativeTo(const std::string& dir, const std::string& path) {
  if (Dirname(path) == dir) return Basename(path);
  return path;
}

// Points `<dirname(path)>/checkpoint` at `path` alone, as Checkpoint.save
// and save_weights do.
Status PointStateFileAt(const std::string& path) {
  const std::string dir = Dirname(path);
  CheckpointStateData state;
  state.model_checkpoint_path = RelativeTo(dir, path);
  state.all_model_checkpoint_paths = {state.model_checkpoint_path};
  return WriteCheckpointState(dir.empty() ? "." : dir, state);
}

}  // namespace
}  // namespace internal

// ------------------------------------------------------------ Checkpoint

Checkpoint::Checkpoint(const Scope& scope, Dependencies dependencies)
    : root_(std::make_shared<internal::CheckpointRoot>(scope)) {
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

StatusOr<std::string> Checkpoint::Write(const std::string& prefix, Session& session,
                                        const SaveOptions& options) {
  return WriteThen(prefix, session, options, {});
}

StatusOr<std::string> Checkpoint::WriteThen(const std::string& prefix, Session& session,
                                            const SaveOptions& options,
                                            std::function<Status()> on_written) {
  CKFLOW_RETURN_IF_ERROR(root_->scope().status());
  internal::ObjectGraph graph = internal::BuildObjectGraph(root_);
  CKFLOW_RETURN_IF_ERROR(graph.tracking_status);
  CKFLOW_RETURN_IF_ERROR(
      root_->saver()->Write(graph, prefix, session, options, std::move(on_written)));
  return prefix;
}

StatusOr<std::string> Checkpoint::Save(const std::string& prefix, Session& session,
                                       const SaveOptions& options) {
  CKFLOW_RETURN_IF_ERROR(internal::Saver::CheckOptions(options, "saving under '" + prefix + "'"));
  // A failed background save is reported before the counter moves on.
  CKFLOW_RETURN_IF_ERROR(Sync());
  CKFLOW_ASSIGN_OR_RETURN(int64_t n, root_->IncrementSaveCounter(session));
  const std::string path = prefix + "-" + std::to_string(n);
  return WriteThen(path, session, options, [path] { return internal::PointStateFileAt(path); });
}

StatusOr<LoadStatus> Checkpoint::Restore(const std::optional<std::string>& save_path,
                                         const RestoreOptions& options) {
  CKFLOW_RETURN_IF_ERROR(root_->scope().status());
  std::shared_ptr<internal::CheckpointRoot> root = root_;
  return internal::RestoreRoot(
      root_, root_->saver(), save_path,
      [root]() -> std::shared_ptr<Trackable> { return root->MaybeCreateSaveCounter(); }, options);
}

std::optional<std::string> LatestCheckpoint(const std::string& dir) {
  StatusOr<std::optional<CheckpointStateData>> state = ReadCheckpointState(dir);
  if (!state.ok() || !state->has_value()) return std::nullopt;
  const std::string& latest = (*state)->model_checkpoint_path;
  if (latest.empty()) return std::nullopt;
  std::string path = fs::path(latest).is_absolute() ? latest : (fs::path(dir) / latest).string();
  std::error_code ec;
  // TensorFlow globs for either; a directory matches its glob too, but is
  // never a checkpoint.
  if (fs::exists(IndexFilename(path), ec) || fs::is_regular_file(path, ec)) return path;
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
// build), where they will appear.
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
    saver = std::make_shared<internal::Saver>(scope.NewSubScope("weights"));
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
  return internal::PointStateFileAt(path);
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
  if (options.checkpoint_name.empty()) {
    return InvalidArgumentError("CheckpointManager: checkpoint_name must not be empty");
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
  const double now = manager->options_.clock();
  // A state file that exists but cannot be read is an error, as in
  // TensorFlow: the manager would otherwise forget (and never delete) the
  // checkpoints it managed, and overwrite the file on its first save.
  CKFLOW_ASSIGN_OR_RETURN(std::optional<CheckpointStateData> state,
                          ReadCheckpointState(manager->directory_));
  if (!state.has_value()) {
    // Slightly in the past, so a manager re-created at once does not
    // preserve the checkpoint its predecessor just wrote.
    manager->last_preserved_ = now - 1;
    return manager;
  }
  const CheckpointStateData& s = *state;
  auto absolute = [&](const std::string& p) {
    return fs::path(p).is_absolute() ? p : (fs::path(manager->directory_) / p).string();
  };
  manager->latest_ = absolute(s.model_checkpoint_path);
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
    if (ts > manager->last_preserved_) {
      manager->active_.emplace_back(absolute(s.all_model_checkpoint_paths[i]), ts);
    }
  }
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

Status CheckpointManager::WriteState() const {
  CheckpointStateData state;
  if (latest_) state.model_checkpoint_path = internal::RelativeTo(directory_, *latest_);
  for (const auto& [path, ts] : active_) {
    state.all_model_checkpoint_paths.push_back(internal::RelativeTo(directory_, path));
    state.all_model_checkpoint_timestamps.push_back(ts);
  }
  state.last_preserved_timestamp = last_preserved_;
  return WriteCheckpointState(directory_, state);
}

Status CheckpointManager::Sweep() {
  if (!options_.max_to_keep.has_value()) return OkStatus();
  while (active_.size() > static_cast<size_t>(*options_.max_to_keep)) {
    auto [path, ts] = active_.front();
    active_.erase(active_.begin());
    if (options_.keep_checkpoint_every_n_hours.has_value() &&
        ts - *options_.keep_checkpoint_every_n_hours * 3600.0 >= last_preserved_) {
      last_preserved_ = ts;  // kept for good, no longer managed
      continue;
    }
    // Only files of this checkpoint: P.index and P.data-?????-of-?????. One
    // the user removed already is no error, as in TensorFlow.
    Status removed = RemoveCheckpoint(path);
    if (!removed.ok() && !IsNotFound(removed)) {
      Log(LogSeverity::kWarning, "CheckpointManager: could not delete checkpoint '" + path +
                                     "' it no longer keeps: " + removed.ToString());
    }
  }
  return OkStatus();
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
  CKFLOW_RETURN_IF_ERROR(checkpoint_.Sync());
  CKFLOW_ASSIGN_OR_RETURN(int64_t counter, checkpoint_.root_->IncrementSaveCounter(session));
  const int64_t n = checkpoint_number.value_or(counter);
  const std::string prefix =
      (fs::path(directory_) / (options_.checkpoint_name + "-" + std::to_string(n))).string();
  // Timestamped when the save starts, as TensorFlow does.
  const double now = options_.clock();
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
  active_.erase(std::remove_if(active_.begin(), active_.end(),
                               [&](const auto& e) { return e.first == prefix; }),
                active_.end());
  active_.emplace_back(prefix, timestamp);
  latest_ = prefix;
  CKFLOW_RETURN_IF_ERROR(WriteState());
  CKFLOW_RETURN_IF_ERROR(Sweep());
  return WriteState();
}

}  // namespace ckflow
