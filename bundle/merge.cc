#include "bundle/merge.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"

namespace ckflow {
namespace {

struct MergedEntry {
  tensorflow::BundleEntryProto proto;
  const std::string* from;  // the input prefix it came from
};

struct MergeState {
  bool seen_first = false;
  tensorflow::BundleHeaderProto::Endianness endianness = tensorflow::BundleHeaderProto::LITTLE;
  std::string version;  // serialized VersionDef of the first input
  std::map<std::string, MergedEntry> entries;
  // Old data file -> new shard id, and the new ids' old files in id order.
  std::map<std::string, int> shard_ids;
  std::vector<std::string> data_files;
  // The data file of each single-shard input (a BundleWriter's output),
  // referenced or not.
  std::vector<std::string> single_data_files;
};

Status MergeOne(FileSystem* fs, const std::string& input, MergeState* state) {
  CKFLOW_ASSIGN_OR_RETURN(internal::BundleIndex index, internal::ReadBundleIndex(fs, input));
  const tensorflow::BundleHeaderProto& header = index.header;
  const std::string version = header.version().SerializeAsString();
  if (!state->seen_first) {
    state->seen_first = true;
    state->endianness = header.endianness();
    state->version = version;
  } else if (header.endianness() != state->endianness) {
    return InvalidArgumentError(index.path, ": byte order differs from the first input's");
  } else if (version != state->version) {
    return InvalidArgumentError(index.path, ": format version differs from the first input's");
  }
  const int num_shards = header.num_shards();
  if (num_shards == 1) state->single_data_files.push_back(DataFilename(input, 0, 1));
  for (auto& [key, entry] : index.entries) {
    auto it = state->entries.find(key);
    if (it != state->entries.end()) {
      tensorflow::BundleEntryProto& existing = it->second.proto;
      if (existing.slices().empty() || entry.slices().empty()) {
        return InvalidArgumentError("duplicate key '", key, "' in ", IndexFilename(input), " and ",
                                    IndexFilename(*it->second.from));
      }
      if (existing.dtype() != entry.dtype() ||
          existing.shape().SerializeAsString() != entry.shape().SerializeAsString()) {
        return InvalidArgumentError("key '", key, "': slices in ", IndexFilename(input), " and ",
                                    IndexFilename(*it->second.from), " disagree on dtype or shape");
      }
      for (const auto& slice : entry.slices()) *existing.add_slices() = slice;
      continue;
    }
    if (entry.slices().empty() && (entry.shard_id() < 0 || entry.shard_id() >= num_shards)) {
      return DataLossError(index.path, ": key '", key, "': shard_id ", entry.shard_id(),
                           " out of range: the checkpoint has ", num_shards, " shard(s)");
    }
    std::string data_file = DataFilename(input, entry.shard_id(), num_shards);
    auto [slot, inserted] =
        state->shard_ids.emplace(data_file, static_cast<int>(state->data_files.size()));
    if (inserted) state->data_files.push_back(std::move(data_file));
    entry.set_shard_id(slot->second);
    state->entries.emplace(key, MergedEntry{std::move(entry), &input});
  }
  return OkStatus();
}

// Renames `moves` into place (index last) and, with options.sync, syncs the
// directory; if that sync fails the new files are removed again (index
// first, so no reader finds an index without its data).
Status MoveAndSync(FileSystem* fs, const std::vector<std::pair<std::string, std::string>>& moves,
                   const std::string& prefix, const MergeOptions& options) {
  CKFLOW_RETURN_IF_ERROR(internal::MoveIntoPlace(fs, moves));
  if (!options.sync) return OkStatus();
  Status synced = fs->SyncDir(Dirname(prefix));
  if (synced.ok()) return OkStatus();
  for (auto it = moves.rbegin(); it != moves.rend(); ++it) fs->DeleteFile(it->second).IgnoreError();
  return synced.WithContext("making checkpoint '" + prefix + "' durable");
}

void DeleteOldDirs(FileSystem* fs, std::span<const std::string> inputs, const std::string& prefix,
                   const MergeOptions& options) {
  if (!options.delete_old_dirs) return;
  const std::string dir = Dirname(prefix);
  for (const std::string& input : inputs) {
    if (Dirname(input) != dir) fs->DeleteDir(Dirname(input)).IgnoreError();
  }
}

}  // namespace

Status MergeBundles(std::span<const std::string> inputs, const std::string& prefix,
                    const MergeOptions& options) {
  FileSystem* fs = options.fs ? options.fs : FileSystem::Default();
  if (inputs.empty()) return InvalidArgumentError("no bundles to merge into '", prefix, "'");
  CKFLOW_RETURN_IF_ERROR(fs->CreateDirs(Dirname(prefix)));
  // One input with one data file (what one BundleWriter or SaveV2 writes)
  // already has the index a merge would write: the same header, every
  // shard_id 0. Re-reading and rewriting it cost a quarter of a save of
  // many small variables; its files are renamed instead.
  if (inputs.size() == 1 && inputs[0] != prefix &&
      fs->FileExists(DataFilename(inputs[0], 0, 1)).ok()) {
    const std::vector<std::pair<std::string, std::string>> moves = {
        {DataFilename(inputs[0], 0, 1), DataFilename(prefix, 0, 1)},
        {IndexFilename(inputs[0]), IndexFilename(prefix)},
    };
    CKFLOW_RETURN_IF_ERROR(MoveAndSync(fs, moves, prefix, options));
    DeleteOldDirs(fs, inputs, prefix, options);
    return OkStatus();
  }
  MergeState state;
  for (const std::string& input : inputs) CKFLOW_RETURN_IF_ERROR(MergeOne(fs, input, &state));

  // A merge of empty bundles still has one (empty) data file, as a
  // BundleWriter with no tensors does.
  if (state.data_files.empty()) {
    if (state.single_data_files.empty()) {
      CKFLOW_RETURN_IF_ERROR(
          internal::WriteNewFile(fs, DataFilename(prefix, 0, 1), "", options.sync));
    } else {
      state.data_files.push_back(state.single_data_files.front());
    }
  }
  const int num_files = std::max<int>(1, static_cast<int>(state.data_files.size()));

  tensorflow::BundleHeaderProto header;
  header.set_num_shards(num_files);
  header.set_endianness(state.endianness);
  if (!header.mutable_version()->ParseFromString(state.version)) {
    return InternalError("re-parsing a VersionDef");
  }
  std::vector<std::pair<std::string, tensorflow::BundleEntryProto>> entries;
  entries.reserve(state.entries.size());
  for (auto& [key, merged] : state.entries) entries.emplace_back(key, std::move(merged.proto));
  CKFLOW_ASSIGN_OR_RETURN(std::string index, internal::BuildBundleIndex(header, entries));
  const std::string index_path = IndexFilename(prefix);
  const std::string index_temp = index_path + internal::TempStateSuffix();
  CKFLOW_RETURN_IF_ERROR(internal::WriteNewFile(fs, index_temp, index, options.sync));

  std::vector<std::pair<std::string, std::string>> moves;
  for (int id = 0; id < static_cast<int>(state.data_files.size()); ++id) {
    moves.emplace_back(state.data_files[id], DataFilename(prefix, id, num_files));
  }
  moves.emplace_back(index_temp, index_path);
  if (Status s = MoveAndSync(fs, moves, prefix, options); !s.ok()) {
    fs->DeleteFile(index_temp).IgnoreError();
    return s;
  }

  // Best-effort cleanup of the inputs, never touching the result.
  std::set<std::string> moved(state.data_files.begin(), state.data_files.end());
  for (const std::string& file : state.single_data_files) {
    if (!moved.count(file)) fs->DeleteFile(file).IgnoreError();
  }
  for (const std::string& input : inputs) {
    if (IndexFilename(input) != index_path) fs->DeleteFile(IndexFilename(input)).IgnoreError();
  }
  DeleteOldDirs(fs, inputs, prefix, options);
  return OkStatus();
}

}  // namespace ckflow
