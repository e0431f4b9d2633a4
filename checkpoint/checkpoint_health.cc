#include "checkpoint/checkpoint_health.h"

#include <algorithm>
#include <map>
#include <set>

#include "base/logging.h"
#include "base/parallel.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "bundle/v1_checkpoint_reader.h"
#include "checkpoint/checkpoint_internal.h"
#include "checkpoint/save_files_internal.h"

namespace ckflow {
namespace {

FileSystem* Fs(FileSystem* fs) { return fs ? fs : FileSystem::Default(); }

// The data files an index names, each checked to be there and to hold the
// bytes its entries need.
Status CheckDataFiles(const BundleReader& reader, FileSystem* fs) {
  // Per shard: how far its entries reach, and the entry that reaches
  // furthest (to name in an error).
  // Unsigned: offsets and sizes come from the file (each is non-negative,
  // so their sum fits).
  auto end_of = [](const BundleEntry& e) {
    return static_cast<uint64_t>(e.offset) + static_cast<uint64_t>(e.size);
  };
  std::vector<const BundleEntry*> furthest(static_cast<size_t>(reader.num_shards()), nullptr);
  for (const BundleEntry& e : reader.entries()) {
    if (e.is_sliced() || e.shard_id < 0 || e.shard_id >= reader.num_shards()) continue;
    const BundleEntry*& f = furthest[static_cast<size_t>(e.shard_id)];
    if (f == nullptr || end_of(e) > end_of(*f)) f = &e;
  }
  for (int shard = 0; shard < reader.num_shards(); ++shard) {
    const std::string path = reader.DataPath(shard);
    StatusOr<FileStat> st = fs->Stat(path);
    if (!st.ok()) {
      if (IsNotFound(st.status())) {
        return NotFoundError(path, ": missing (data file ", shard + 1, " of ", reader.num_shards(),
                             " of checkpoint '", reader.prefix(), "')");
      }
      return st.status();
    }
    const BundleEntry* f = furthest[static_cast<size_t>(shard)];
    if (f == nullptr) continue;
    const uint64_t needed = end_of(*f);
    if (st->size < needed) {
      return DataLossError(path, ": truncated: ", st->size, " bytes, but key '", f->key,
                           "' needs bytes up to ", needed);
    }
  }
  return OkStatus();
}

// Every entry's bytes against its CRC; the first bad one in key order.
Status CheckChecksums(const BundleReader& reader) {
  const std::vector<BundleEntry>& entries = reader.entries();
  std::vector<Status> results(entries.size());
  ParallelFor(static_cast<int64_t>(entries.size()), 100000, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (!entries[i].is_sliced()) results[i] = reader.Verify(entries[i]);
    }
  });
  for (const Status& s : results) {
    if (!s.ok()) return s;
  }
  return OkStatus();
}

uint64_t SizeOf(FileSystem* fs, const std::string& path) {
  StatusOr<FileStat> st = fs->Stat(path);
  return st.ok() && !st->is_directory ? st->size : 0;
}

// The bytes of checkpoint `prefix`'s files that exist: its index and
// "<base>.data-*" (or the V1 file itself).
uint64_t CheckpointBytes(FileSystem* fs, const std::string& prefix,
                         const std::vector<std::string>& names) {
  uint64_t bytes = SizeOf(fs, IndexFilename(prefix));
  const std::string data = std::string(Basename(prefix)) + ".data-";
  for (const std::string& name : names) {
    if (name.starts_with(data)) bytes += SizeOf(fs, JoinPath(Dirname(prefix), name));
  }
  if (bytes == 0) bytes = SizeOf(fs, prefix);
  return bytes;
}

// "ckpt-12" -> {"ckpt", 12}; nullopt for a name without "-<digits>".
std::optional<std::pair<std::string, int64_t>> SplitNumbered(std::string_view name) {
  const size_t dash = name.rfind('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == name.size()) return std::nullopt;
  const std::string_view digits = name.substr(dash + 1);
  if (digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::make_pair(std::string(name.substr(0, dash)), std::stoll(std::string(digits)));
}

// How the saves of a directory name their checkpoints, judged by the
// checkpoints there: "ckpt-3" was saved as {ckpt, numbered}, "model" by a
// Write of exactly that prefix. A manager's default is always among them.
std::vector<internal::CheckpointNaming> NamingsOf(const std::vector<CheckpointHealth>& found) {
  std::set<std::pair<std::string, bool>> seen{{"ckpt", true}};
  for (const CheckpointHealth& c : found) {
    const std::string_view base = Basename(c.path);
    if (auto numbered = SplitNumbered(base)) {
      seen.insert({numbered->first, true});
    } else {
      seen.insert({std::string(base), false});
    }
  }
  std::vector<internal::CheckpointNaming> namings;
  for (const auto& [base, numbered] : seen) namings.push_back({base, numbered});
  return namings;
}

}  // namespace

Status CheckCheckpoint(const std::string& prefix, CheckpointVerify verify, FileSystem* fs) {
  if (verify == CheckpointVerify::kNone) return OkStatus();
  fs = Fs(fs);
  const std::string index = IndexFilename(prefix);
  if (!fs->FileExists(index).ok()) {
    // A legacy V1 checkpoint is the file at the prefix itself.
    StatusOr<FileStat> st = fs->Stat(prefix);
    if (st.ok() && !st->is_directory) return V1CheckpointReader::Open(prefix, fs).status();
    return NotFoundError(index, ": missing (the index of checkpoint '", prefix, "')");
  }
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<BundleReader> reader,
                          BundleReader::Open(prefix, {.fs = fs}));
  CKFLOW_RETURN_IF_ERROR(CheckDataFiles(*reader, fs));
  if (verify == CheckpointVerify::kChecksums) return CheckChecksums(*reader);
  return OkStatus();
}

std::optional<std::string> LatestGoodCheckpoint(const std::string& dir,
                                                const LatestGoodCheckpointOptions& options) {
  FileSystem* fs = Fs(options.file_system);
  StatusOr<std::optional<CheckpointStateData>> state =
      ReadCheckpointState(dir, fs, options.latest_filename);
  if (!state.ok()) {
    Log(LogSeverity::kWarning, "LatestGoodCheckpoint: " + state.status().ToString());
    return std::nullopt;
  }
  if (!state->has_value()) return std::nullopt;
  // The newest first: the state's latest, then the list from its end.
  std::vector<std::string> candidates{(*state)->model_checkpoint_path};
  const std::vector<std::string>& all = (*state)->all_model_checkpoint_paths;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (std::find(candidates.begin(), candidates.end(), *it) == candidates.end()) {
      candidates.push_back(*it);
    }
  }
  for (const std::string& listed : candidates) {
    Status why;
    std::string path = internal::Resolve(dir, listed);
    if (!options.allow_outside_directory && !IsInsideDirectory(dir, listed)) {
      why = InvalidArgumentError("outside the directory '", dir,
                                 "' (see LatestGoodCheckpointOptions::allow_outside_directory)");
      path = listed;
    } else {
      why = CheckCheckpoint(path, options.verify, fs);
      if (why.ok()) return path;
    }
    Log(LogSeverity::kWarning,
        "LatestGoodCheckpoint: skipping checkpoint '" + path + "': " + why.ToString());
    if (options.skipped) options.skipped->push_back({path, why});
  }
  return std::nullopt;
}

// ------------------------------------------------------------ a directory

bool CheckpointDirectoryHealth::clean() const {
  return state_problems.empty() && debris.empty() &&
         std::all_of(checkpoints.begin(), checkpoints.end(),
                     [](const CheckpointHealth& c) { return c.status.ok(); });
}

StatusOr<CheckpointDirectoryHealth> CheckCheckpointDirectory(
    const std::string& dir, const CheckpointDirectoryOptions& options) {
  FileSystem* fs = Fs(options.file_system);
  CKFLOW_ASSIGN_OR_RETURN(std::vector<std::string> names, fs->ListDir(dir));
  std::sort(names.begin(), names.end());
  CheckpointDirectoryHealth health;
  health.dir = dir;
  std::vector<CheckpointHealth>& found = health.checkpoints;
  std::set<std::string> seen;  // prefixes, as paths

  StatusOr<std::optional<CheckpointStateData>> state =
      ReadCheckpointState(dir, fs, options.latest_filename);
  if (!state.ok()) {
    health.has_state_file = true;
    health.state_problems.push_back(std::string(state.status().message()));
  } else if (state->has_value()) {
    health.has_state_file = true;
    const CheckpointStateData& s = **state;
    health.last_preserved_timestamp = s.last_preserved_timestamp;
    std::vector<std::string> listed = s.all_model_checkpoint_paths;
    if (!listed.empty() && listed.back() != s.model_checkpoint_path) {
      health.state_problems.push_back("its newest, '" + s.model_checkpoint_path +
                                      "', is not the last it lists ('" + listed.back() + "')");
    }
    if (!s.all_model_checkpoint_timestamps.empty() &&
        s.all_model_checkpoint_timestamps.size() != listed.size()) {
      health.state_problems.push_back(std::to_string(s.all_model_checkpoint_timestamps.size()) +
                                      " timestamps for " + std::to_string(listed.size()) +
                                      " checkpoints");
    }
    const bool paired = s.all_model_checkpoint_timestamps.size() == listed.size();
    if (std::find(listed.begin(), listed.end(), s.model_checkpoint_path) == listed.end()) {
      listed.push_back(s.model_checkpoint_path);
    }
    for (size_t i = 0; i < listed.size(); ++i) {
      if (!options.allow_outside_directory && !IsInsideDirectory(dir, listed[i])) {
        health.state_problems.push_back("it names '" + listed[i] +
                                        "', outside the directory (not checked)");
        continue;
      }
      const std::string path = internal::Resolve(dir, listed[i]);
      if (!seen.insert(path).second) continue;
      CheckpointHealth c;
      c.path = path;
      c.listed = true;
      c.latest = listed[i] == s.model_checkpoint_path;
      if (paired && i < s.all_model_checkpoint_timestamps.size()) {
        c.timestamp = s.all_model_checkpoint_timestamps[i];
      }
      found.push_back(std::move(c));
    }
  }
  for (const std::string& name : names) {
    if (!name.ends_with(".index")) continue;
    const std::string path = JoinPath(dir, name.substr(0, name.size() - 6));
    if (!seen.insert(path).second) continue;
    found.push_back({.path = path});
  }
  // Checkpoints are independent; checksums read every byte of each.
  ParallelFor(static_cast<int64_t>(found.size()), 1000000, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      found[i].status = CheckCheckpoint(found[i].path, options.verify, fs);
      found[i].bytes = CheckpointBytes(fs, found[i].path, names);
    }
  });
  for (const CheckpointHealth& c : found) {
    if (c.listed && IsNotFound(c.status) && !fs->FileExists(IndexFilename(c.path)).ok() &&
        !fs->FileExists(c.path).ok()) {
      health.state_problems.push_back("it names '" + c.path + "', which does not exist");
    }
  }
  std::set<std::string> debris;
  for (const internal::CheckpointNaming& naming : NamingsOf(found)) {
    CKFLOW_ASSIGN_OR_RETURN(std::vector<std::string> more,
                            internal::ListSaveDebris(fs, dir, naming));
    debris.insert(more.begin(), more.end());
  }
  health.debris.assign(debris.begin(), debris.end());
  for (const std::string& name : health.debris) {
    health.debris_bytes += SizeOf(fs, JoinPath(dir, name));
  }
  return health;
}

StatusOr<CheckpointRepair> RepairCheckpointDirectory(const CheckpointDirectoryHealth& health,
                                                     const CheckpointDirectoryOptions& options) {
  FileSystem* fs = Fs(options.file_system);
  const std::string& dir = health.dir;
  CheckpointRepair repair;
  // The whole checkpoints the new state lists, oldest first.
  std::vector<const CheckpointHealth*> keep;
  const bool state_readable =
      health.has_state_file && std::any_of(health.checkpoints.begin(), health.checkpoints.end(),
                                           [](const CheckpointHealth& c) { return c.listed; });
  if (state_readable) {
    for (const CheckpointHealth& c : health.checkpoints) {
      if (c.listed && c.status.ok()) keep.push_back(&c);
    }
  } else if (health.has_state_file) {
    // Unreadable: rebuilt from the numbered checkpoints, by number.
    std::map<std::pair<std::string, int64_t>, const CheckpointHealth*> numbered;
    for (const CheckpointHealth& c : health.checkpoints) {
      if (!c.status.ok()) continue;
      if (auto n = SplitNumbered(Basename(c.path))) numbered[*n] = &c;
    }
    for (const auto& [key, c] : numbered) keep.push_back(c);
  }
  const bool state_damaged =
      !health.state_problems.empty() ||
      std::any_of(health.checkpoints.begin(), health.checkpoints.end(),
                  [](const CheckpointHealth& c) { return c.listed && !c.status.ok(); });
  if (health.has_state_file && state_damaged) {
    if (keep.empty()) {
      CKFLOW_RETURN_IF_ERROR(fs->DeleteFile(JoinPath(dir, options.latest_filename))
                                 .WithContext("removing the state file, which names no whole "
                                              "checkpoint"));
      repair.state_removed = true;
    } else {
      CheckpointStateData state;
      const bool timestamps = std::all_of(
          keep.begin(), keep.end(), [](const CheckpointHealth* c) { return c->timestamp > 0; });
      for (const CheckpointHealth* c : keep) {
        state.all_model_checkpoint_paths.push_back(internal::RelativeTo(dir, c->path));
        if (timestamps) state.all_model_checkpoint_timestamps.push_back(c->timestamp);
      }
      state.model_checkpoint_path = state.all_model_checkpoint_paths.back();
      state.last_preserved_timestamp = health.last_preserved_timestamp;
      CKFLOW_RETURN_IF_ERROR(
          WriteCheckpointState(dir, state, fs, /*durable=*/true, options.latest_filename));
      repair.state_rewritten = true;
    }
  }
  for (const internal::CheckpointNaming& naming : NamingsOf(health.checkpoints)) {
    CKFLOW_ASSIGN_OR_RETURN(internal::DebrisRemoved removed,
                            internal::RemoveSaveDebris(fs, dir, naming));
    repair.debris_files += removed.files;
    repair.debris_bytes += removed.bytes;
  }
  return repair;
}

}  // namespace ckflow
