#include "checkpoint/checkpoint_management.h"

#include <algorithm>
#include <chrono>

#include "base/logging.h"
#include "bundle/bundle_format.h"
#include "bundle/checkpoint_state.h"
#include "checkpoint/checkpoint_health.h"
#include "checkpoint/checkpoint_internal.h"
#include "checkpoint/save_files_internal.h"
#include "checkpoint/save_sequence_internal.h"
#include "checkpoint/step_counter_internal.h"
#include "ops/variables.h"

namespace ckflow {

std::optional<std::string> LatestCheckpoint(const std::string& dir,
                                            const LatestCheckpointOptions& options) {
  FileSystem* fs = options.file_system ? options.file_system : FileSystem::Default();
  StatusOr<std::optional<CheckpointStateData>> state =
      ReadCheckpointState(dir, fs, options.latest_filename);
  if (!state.ok() || !state->has_value()) return std::nullopt;
  const std::string& latest = (*state)->model_checkpoint_path;
  if (latest.empty()) return std::nullopt;
  if (!options.allow_outside_directory && !IsInsideDirectory(dir, latest)) {
    Log(LogSeverity::kWarning, "LatestCheckpoint: " + JoinPath(dir, options.latest_filename) +
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

// ------------------------------------------------------------ CheckpointManager

namespace {
double WallClock() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

CheckpointManager::CheckpointManager(Checkpoint& checkpoint, std::string directory, Options options)
    : checkpoint_(checkpoint), directory_(std::move(directory)), options_(std::move(options)) {}

// A pending write's bookkeeping refers to this manager.
CheckpointManager::~CheckpointManager() { internal::LogAsyncError(checkpoint_.Sync()); }

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
      internal::Saver::CheckOptions(options.save_options, "CheckpointManager: save_options",
                                    internal::RootOf(checkpoint)->saver()->group()));
  if (!options.clock) options.clock = WallClock;
  if (directory.empty()) directory = ".";
  std::unique_ptr<CheckpointManager> manager(
      new CheckpointManager(checkpoint, std::move(directory), std::move(options)));
  if (manager->options_.checkpoint_interval.has_value()) {
    manager->last_checkpoint_step_ = manager->options_.last_checkpoint_step;
  }
  // Nobody else sees the manager yet; the lock is for the analysis.
  MutexLock lock(&manager->mu_);
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
  manager->RemoveDebris();
  return manager;
}

std::vector<std::string> CheckpointManager::checkpoints() const {
  MutexLock lock(&mu_);
  std::vector<std::string> paths;
  for (const auto& [path, ts] : active_) paths.push_back(path);
  return paths;
}

std::optional<std::string> CheckpointManager::latest_checkpoint() const {
  MutexLock lock(&mu_);
  return latest_;
}

Status CheckpointManager::last_sweep_status() const {
  MutexLock lock(&mu_);
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
  if (!internal::OwnsDirectory(internal::RootOf(checkpoint_)->saver()->group())) return;
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
  debris_possible_ = !s.ok();
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

std::optional<int64_t> CheckpointManager::last_checkpoint_step() const {
  return last_checkpoint_step_;
}

StatusOr<std::string> CheckpointManager::Save(Session& session,
                                              std::optional<int64_t> checkpoint_number,
                                              bool check_interval) {
  if (options_.checkpoint_interval.has_value()) {
    CKFLOW_ASSIGN_OR_RETURN(int64_t step,
                            internal::ReadStepCounter(session, *options_.step_counter,
                                                      "CheckpointManager", "step_counter"));
    if (last_checkpoint_step_.has_value()) {
      if (step == *last_checkpoint_step_) return std::string();
      if (check_interval && step < *last_checkpoint_step_ + *options_.checkpoint_interval) {
        return std::string();
      }
    }
    last_checkpoint_step_ = step;
  }
  const std::string& name = options_.checkpoint_name;
  return internal::SaveRoot(
      internal::RootOf(checkpoint_), session, options_.save_options,
      {.number = checkpoint_number,
       .path = [&](int64_t n) { return JoinPath(directory_, name + "-" + std::to_string(n)); },
       .remove_debris =
           [this] {
             MutexLock lock(&mu_);
             sweep_status_ = OkStatus();
             // Listing the directory is most of an async save's stall for a
             // small model: only a save that did not complete (or a sweep
             // that failed) can have left something to remove.
             if (debris_possible_) RemoveDebris();
             debris_possible_ = true;  // until this save is recorded
           },
       .clock = options_.clock,
       .commit = [this](const std::string& prefix, double now) { return Record(prefix, now); }});
}

StatusOr<std::string> CheckpointManager::Save(std::optional<int64_t> checkpoint_number,
                                              bool check_interval) {
  CKFLOW_ASSIGN_OR_RETURN(Session * session, internal::RootOf(checkpoint_)->EagerSession());
  return Save(*session, checkpoint_number, check_interval);
}

StatusOr<std::optional<std::string>> CheckpointManager::RestoreOrInitialize() {
  CKFLOW_ASSIGN_OR_RETURN(Session * session, internal::RootOf(checkpoint_)->EagerSession());
  return RestoreOrInitialize(*session);
}

StatusOr<std::optional<std::string>> CheckpointManager::NewestWholeCheckpoint() {
  skipped_on_restore_.clear();
  std::vector<std::string> candidates;
  {
    MutexLock lock(&mu_);
    if (latest_) candidates.push_back(*latest_);
    for (auto it = active_.rbegin(); it != active_.rend(); ++it) {
      if (it->first != latest_) candidates.push_back(it->first);
    }
  }
  if (options_.verify == CheckpointVerify::kNone) {
    return candidates.empty() ? std::nullopt : std::optional<std::string>(candidates.front());
  }
  const internal::Saver& saver = *internal::RootOf(checkpoint_)->saver();
  for (const std::string& path : candidates) {
    Status why = CheckCheckpoint(path, options_.verify, checkpoint_.file_system());
    // The members of a group restore one checkpoint: each walks the same
    // candidates, and one is taken only if it is whole for every member
    // (the shared file system should make their verdicts equal; a member
    // that disagrees must not leave the others restoring another step).
    if (CheckpointGroup* group = saver.group()) {
      why = AgreeOnStatus(*group, why, saver.group_timeout());
      // A member that did not arrive is no verdict on the checkpoint.
      if (IsDeadlineExceeded(why)) return why;
    }
    if (why.ok()) return std::optional<std::string>(path);
    Log(LogSeverity::kWarning, "CheckpointManager: skipping checkpoint '" + path +
                                   "', which is not whole: " + why.ToString());
    skipped_on_restore_.push_back({path, std::move(why)});
  }
  if (!skipped_on_restore_.empty()) {
    Log(LogSeverity::kWarning, "CheckpointManager: no whole checkpoint in '" + directory_ + "' (" +
                                   std::to_string(skipped_on_restore_.size()) +
                                   " skipped); initializing instead");
  }
  return std::optional<std::string>();
}

StatusOr<std::optional<std::string>> CheckpointManager::RestoreOrInitialize(Session& session) {
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::string> latest, NewestWholeCheckpoint());
  if (latest) {
    CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, checkpoint_.Restore(*latest));
    CKFLOW_RETURN_IF_ERROR(status.InitializeOrRestore(session));
    if (options_.checkpoint_interval.has_value()) {
      CKFLOW_ASSIGN_OR_RETURN(last_checkpoint_step_,
                              internal::ReadStepCounter(session, *options_.step_counter,
                                                        "CheckpointManager", "step_counter"));
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
  MutexLock lock(&mu_);
  FileSystem* fs = checkpoint_.file_system();
  const bool durable = options_.save_options.durable;
  // In a group, member 0 writes the state file and deletes; the others only
  // keep the same books.
  const bool files = internal::OwnsDirectory(internal::RootOf(checkpoint_)->saver()->group());
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
  // Saves run one at a time, and this one is complete; but it may have
  // failed to remove its parts' directory, which is no error: one stat
  // here, on the saving thread, spares the next save listing the directory.
  debris_possible_ = files && fs->IsDirectory(prefix + "_temp");
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
