#include "bundle/merge.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "base/atomic_file_internal.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"

namespace ckflow {
namespace {

// An entry of the merged index. Its key and serialized value (shard_id
// already remapped) live in MergeState::bytes: a merge of 200,000 entries
// then makes no allocation per entry, where parsed protos made several.
struct MergedEntry {
  size_t key_offset;
  size_t key_size;
  size_t value_offset;
  size_t value_size;
  const std::string* from;  // the input prefix it came from
  int sliced = -1;          // a partitioned tensor's full entry: its index in MergeState::sliced
};

struct MergeState {
  bool seen_first = false;
  tensorflow::BundleHeaderProto::Endianness endianness = tensorflow::BundleHeaderProto::LITTLE;
  std::string version;  // serialized VersionDef of the first input
  std::string bytes;
  // Every input's entries, in input order and each input's key order; the
  // ones before runs[i] came from the inputs before input i.
  std::vector<MergedEntry> entries;
  std::vector<size_t> runs;
  // The full entries of partitioned tensors, parsed (their slices are
  // gathered across inputs), and their keys.
  std::vector<tensorflow::BundleEntryProto> sliced;
  std::set<std::string, std::less<>> sliced_keys;
  // Old data file -> new shard id, and the new ids' old files in id order.
  std::map<std::string, int> shard_ids;
  std::vector<std::string> data_files;
  // The data file of each single-shard input (a BundleWriter's output),
  // referenced or not.
  std::vector<std::string> single_data_files;

  std::string_view Key(const MergedEntry& e) const {
    return {bytes.data() + e.key_offset, e.key_size};
  }
  std::string_view Value(const MergedEntry& e) const {
    return {bytes.data() + e.value_offset, e.value_size};
  }
};

Status MergeOne(FileSystem* fs, const std::string& input, MergeState* state) {
  // The new id of each of this input's data files, once an entry names it.
  std::vector<int> new_ids;
  auto new_id = [&](int old_id, int num_shards) {
    const bool in_range = old_id >= 0 && old_id < num_shards;
    if (in_range && static_cast<int>(new_ids.size()) == num_shards && new_ids[old_id] >= 0) {
      return new_ids[old_id];
    }
    std::string data_file = DataFilename(input, old_id, num_shards);
    auto [slot, inserted] =
        state->shard_ids.emplace(data_file, static_cast<int>(state->data_files.size()));
    if (inserted) state->data_files.push_back(std::move(data_file));
    if (in_range) {
      new_ids.resize(num_shards, -1);
      new_ids[old_id] = slot->second;
    }
    return slot->second;
  };
  const std::string path = IndexFilename(input);
  tensorflow::BundleEntryProto remapped;  // reused by every entry
  std::string value;
  state->runs.push_back(state->entries.size());
  CKFLOW_ASSIGN_OR_RETURN(
      tensorflow::BundleHeaderProto header,
      internal::VisitBundleIndex(
          fs, path, {},
          [&](std::string_view key, const tensorflow::BundleHeaderProto& header,
              const tensorflow::BundleEntryProto& entry) -> Status {
            const int num_shards = header.num_shards();
            MergedEntry merged{.key_offset = state->bytes.size(), .key_size = key.size()};
            merged.from = &input;
            state->bytes.append(key);
            // As TensorFlow's merge: every entry new to the merge names a
            // data file (the full entry of a partitioned tensor too), in
            // the order met; the slices of a tensor an earlier input began
            // are only added to it.
            const bool sliced = !entry.slices().empty();
            const bool remap = !sliced || !state->sliced_keys.contains(key);
            if (!sliced && (entry.shard_id() < 0 || entry.shard_id() >= num_shards)) {
              return DataLossError(path, ": key '", key, "': shard_id ", entry.shard_id(),
                                   " out of range: the checkpoint has ", num_shards, " shard(s)");
            }
            remapped.CopyFrom(entry);
            if (remap) remapped.set_shard_id(new_id(entry.shard_id(), num_shards));
            if (sliced) {
              state->sliced_keys.emplace(key);
              merged.sliced = static_cast<int>(state->sliced.size());
              state->sliced.push_back(remapped);
            } else {
              remapped.SerializeToString(&value);
              merged.value_offset = state->bytes.size();
              merged.value_size = value.size();
              state->bytes.append(value);
            }
            state->entries.push_back(merged);
            return OkStatus();
          }));
  const std::string header_version = header.version().SerializeAsString();
  if (!state->seen_first) {
    state->seen_first = true;
    state->endianness = header.endianness();
    state->version = header_version;
  } else if (header.endianness() != state->endianness) {
    return InvalidArgumentError(path, ": byte order differs from the first input's");
  } else if (header_version != state->version) {
    return InvalidArgumentError(path, ": format version differs from the first input's");
  }
  if (header.num_shards() == 1) state->single_data_files.push_back(DataFilename(input, 0, 1));
  return OkStatus();
}

// Sorts the inputs' entries by key, each input's already sorted (a merge of
// runs, stable: of equal keys the earlier input's comes first), and folds
// the slices of a partitioned tensor saved by several inputs into one full
// entry. InvalidArgument for a key two inputs hold otherwise.
Status SortAndFold(MergeState* state) {
  std::vector<MergedEntry>& entries = state->entries;
  auto by_key = [state](const MergedEntry& a, const MergedEntry& b) {
    return state->Key(a) < state->Key(b);
  };
  for (size_t r = 0; r < state->runs.size(); ++r) {
    const auto run_begin = entries.begin() + static_cast<std::ptrdiff_t>(state->runs[r]);
    const auto run_end = r + 1 < state->runs.size()
                             ? entries.begin() + static_cast<std::ptrdiff_t>(state->runs[r + 1])
                             : entries.end();
    // A valid table is sorted; a merge must not trust its input for that.
    auto unsorted = std::adjacent_find(run_begin, run_end, [state](const auto& a, const auto& b) {
      return !(state->Key(a) < state->Key(b));
    });
    if (unsorted != run_end) {
      return DataLossError(IndexFilename(*unsorted->from), ": keys out of order at '",
                           state->Key(*unsorted), "'");
    }
    std::inplace_merge(entries.begin(), run_begin, run_end, by_key);
  }
  size_t kept = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (kept > 0 && state->Key(entries[kept - 1]) == state->Key(entries[i])) {
      const MergedEntry& existing = entries[kept - 1];
      const MergedEntry& entry = entries[i];
      const std::string_view key = state->Key(entry);
      if (existing.sliced < 0 || entry.sliced < 0) {
        return InvalidArgumentError("duplicate key '", key, "' in ", IndexFilename(*entry.from),
                                    " and ", IndexFilename(*existing.from));
      }
      tensorflow::BundleEntryProto& full = state->sliced[existing.sliced];
      const tensorflow::BundleEntryProto& more = state->sliced[entry.sliced];
      if (full.dtype() != more.dtype() ||
          full.shape().SerializeAsString() != more.shape().SerializeAsString()) {
        return InvalidArgumentError("key '", key, "': slices in ", IndexFilename(*entry.from),
                                    " and ", IndexFilename(*existing.from),
                                    " disagree on dtype or shape");
      }
      for (const auto& slice : more.slices()) *full.add_slices() = slice;
      continue;
    }
    entries[kept++] = entries[i];
  }
  entries.resize(kept);
  return OkStatus();
}

// The merged index: the header, then every entry in key order.
StatusOr<std::string> BuildIndex(const MergeState& state,
                                 const tensorflow::BundleHeaderProto& header) {
  internal::TableWriter table;
  std::string value;
  header.SerializeToString(&value);
  CKFLOW_RETURN_IF_ERROR(table.Add("", value));
  for (const MergedEntry& e : state.entries) {
    if (e.sliced >= 0) {
      state.sliced[e.sliced].SerializeToString(&value);
      CKFLOW_RETURN_IF_ERROR(table.Add(state.Key(e), value));
    } else {
      CKFLOW_RETURN_IF_ERROR(table.Add(state.Key(e), state.Value(e)));
    }
  }
  return table.Finish();
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
    CKFLOW_RETURN_IF_ERROR(
        internal::MoveIntoPlaceDurably(fs, moves, options.sync, "checkpoint '" + prefix + "'"));
    DeleteOldDirs(fs, inputs, prefix, options);
    return OkStatus();
  }
  MergeState state;
  for (const std::string& input : inputs) CKFLOW_RETURN_IF_ERROR(MergeOne(fs, input, &state));
  CKFLOW_RETURN_IF_ERROR(SortAndFold(&state));

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
  CKFLOW_ASSIGN_OR_RETURN(std::string index, BuildIndex(state, header));
  const std::string index_path = IndexFilename(prefix);
  const std::string index_temp = index_path + internal::TempStateSuffix();
  CKFLOW_RETURN_IF_ERROR(internal::WriteNewFile(fs, index_temp, index, options.sync));

  std::vector<std::pair<std::string, std::string>> moves;
  for (int id = 0; id < static_cast<int>(state.data_files.size()); ++id) {
    moves.emplace_back(state.data_files[id], DataFilename(prefix, id, num_files));
  }
  moves.emplace_back(index_temp, index_path);
  if (Status s =
          internal::MoveIntoPlaceDurably(fs, moves, options.sync, "checkpoint '" + prefix + "'");
      !s.ok()) {
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
