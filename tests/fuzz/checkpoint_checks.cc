#include "tests/fuzz/checkpoint_checks.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>

#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"
#include "bundle/bundle_reader.h"
#include "bundle/checkpoint_state.h"
#include "bundle/crc32c.h"
#include "bundle/object_tree.h"
#include "bundle/protos/tensor_bundle.pb.h"
#include "checkpoint/checkpoint_management.h"
#include "tests/fuzz/memory_file_system.h"

namespace ckflow::fuzz {
namespace {

namespace fs = std::filesystem;

constexpr char kPrefixName[] = "ckpt";

std::string Describe(std::string_view what, const Status& status) {
  return std::string(what) + " returned " + status.ToString();
}

// Keeps the first problem found: later ones are often its consequences.
class Findings {
 public:
  bool ok() const { return first_.empty(); }
  void Add(std::string problem) {
    if (first_.empty()) first_ = std::move(problem);
  }
  // An error that is not one a reader of bad input may return.
  void ExpectInputError(std::string_view what, const Status& status) {
    if (!status.ok() && !IsInputError(status)) Add(Describe(what, status));
  }
  std::string Take() { return std::move(first_); }

 private:
  std::string first_;
};

Status WriteFile(const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return InternalError("fuzz: cannot write " + path);
  return OkStatus();
}

std::string DataName(const std::string& prefix, int shard, int num_shards) {
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ".data-%05d-of-%05d", shard, num_shards);
  return prefix + suffix;
}

// Empties `dir`, so no file of an earlier input changes what this one does.
Status ResetDir(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return InternalError("fuzz: cannot make " + dir + ": " + ec.message());
  return OkStatus();
}

// The bundle, entry by entry and in one batch.
void CheckBundle(const BundleReader& reader, Findings& findings) {
  std::vector<const BundleEntry*> batch;
  std::vector<Tensor> looked_up;
  for (const BundleEntry& entry : reader.entries()) {
    if (reader.FindEntry(entry.key) != &entry) {
      findings.Add("FindEntry(\"" + entry.key + "\") does not find its own entry");
    }
    StatusOr<Tensor> value = reader.Lookup(entry.key);
    // A partitioned tensor's full entry holds no bytes (its slices are
    // entries of their own, checked in turn): it looks up, assembled, but
    // has nothing to verify or batch.
    const Status verified = entry.is_sliced() ? OkStatus() : reader.Verify(entry);
    if (!value.ok()) {
      findings.ExpectInputError("Lookup(\"" + entry.key + "\")", value.status());
      findings.ExpectInputError("Verify(\"" + entry.key + "\")", verified);
      continue;
    }
    if (static_cast<int>(value->dtype()) != entry.dtype || !(value->shape() == entry.shape)) {
      findings.Add("Lookup(\"" + entry.key + "\") returned a tensor unlike its entry");
    }
    if (!verified.ok()) {
      findings.Add(Describe("Verify after a good Lookup of " + entry.key, verified));
    }
    if (value->dtype() != DT_STRING && !entry.is_sliced()) {
      batch.push_back(&entry);
      looked_up.push_back(*std::move(value));
    }
  }
  if (batch.empty() || !findings.ok()) return;

  // Every entry in the batch read alone, so the batch must read too, and
  // hand over the same bytes.
  const Status batched = reader.ReadBatch(batch, [&](size_t i, std::string_view bytes) {
    const Tensor& expected = looked_up[i];
    if (bytes.size() != expected.TotalBytes() ||
        std::memcmp(bytes.data(), expected.raw_data(), bytes.size()) != 0) {
      findings.Add("ReadBatch and Lookup disagree on \"" + batch[i]->key + "\"");
    }
    return OkStatus();
  });
  if (!batched.ok()) findings.Add(Describe("ReadBatch over entries that each read", batched));
}

// `hash` picks the rendering: the three share all but their last step, so
// rendering each input once in one of them covers them at a third of the
// cost.
// Returns the names of the root's children.
std::vector<std::string> CheckObjectGraph(const BundleReader& reader, uint32_t hash,
                                          Findings& findings) {
  constexpr ObjectGraphFormat kFormats[] = {ObjectGraphFormat::kTree, ObjectGraphFormat::kJson,
                                            ObjectGraphFormat::kDot};
  StatusOr<std::string> rendered = RenderObjectGraph(reader, kFormats[hash % 3]);
  if (!rendered.ok()) findings.ExpectInputError("RenderObjectGraph", rendered.status());
  // The same graph as data: every id it hands out must index its nodes.
  StatusOr<CheckpointObjectGraph> graph = ReadCheckpointObjectGraph(reader);
  if (!graph.ok()) {
    findings.ExpectInputError("ReadCheckpointObjectGraph", graph.status());
    return {};
  }
  const int n = static_cast<int>(graph->nodes.size());
  auto in_range = [n](int id) { return id >= 0 && id < n; };
  for (const CheckpointObjectGraph::Node& node : graph->nodes) {
    for (const auto& child : node.children) {
      if (!in_range(child.node_id)) {
        findings.Add("ReadCheckpointObjectGraph: child id out of range");
      }
    }
    for (const auto& slot : node.slot_variables) {
      if (!in_range(slot.original_variable_node_id) || !in_range(slot.slot_variable_node_id)) {
        findings.Add("ReadCheckpointObjectGraph: slot id out of range");
      }
    }
    if (node.path.empty()) findings.Add("ReadCheckpointObjectGraph: a node without a name");
  }
  std::vector<std::string> root_children;
  if (n > 0) {
    for (const auto& child : graph->nodes[0].children) root_children.push_back(child.local_name);
  }
  return root_children;
}

// Packs the checkpoint at `prefix` (its index and data files) as an input.
StatusOr<std::vector<uint8_t>> PackCheckpoint(const std::string& prefix) {
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  FileSystem* files = FileSystem::Default();
  std::vector<uint8_t> packed;
  CKFLOW_ASSIGN_OR_RETURN(std::string index, files->ReadFileToString(prefix + ".index"));
  AppendRecord(index, &packed);
  for (int shard = 0; shard < reader->num_shards(); ++shard) {
    CKFLOW_ASSIGN_OR_RETURN(std::string data, files->ReadFileToString(reader->DataPath(shard)));
    AppendRecord(data, &packed);
  }
  return packed;
}

// The files under `dir` that `want` picks, sorted (seeds in a stable order).
StatusOr<std::vector<fs::path>> FilesUnder(const std::string& dir,
                                           const std::function<bool(const fs::path&)>& want) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir, ec)) {
    if (want(entry.path())) files.push_back(entry.path());
  }
  if (ec) return NotFoundError("cannot list " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::vector<std::span<const uint8_t>> UnpackRecords(std::span<const uint8_t> input) {
  std::vector<std::span<const uint8_t>> records;
  while (input.size() >= 4) {
    uint32_t n = 0;
    for (int i = 3; i >= 0; --i) n = (n << 8) | input[i];
    input = input.subspan(4);
    const size_t take = std::min<size_t>(n, input.size());
    records.push_back(input.first(take));
    input = input.subspan(take);
  }
  return records;
}

void AppendRecord(std::string_view bytes, std::vector<uint8_t>* out) {
  const auto n = static_cast<uint32_t>(bytes.size());
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(n >> (8 * i)));
  out->insert(out->end(), bytes.begin(), bytes.end());
}

StatusOr<std::vector<Seed>> CheckpointSeeds(const std::string& testdata_dir,
                                            const std::string& scratch_dir) {
  std::vector<Seed> seeds;
  CKFLOW_ASSIGN_OR_RETURN(
      std::vector<fs::path> indexes,
      FilesUnder(testdata_dir, [](const fs::path& path) { return path.extension() == ".index"; }));
  for (const fs::path& index : indexes) {
    const std::string prefix = (index.parent_path() / index.stem()).string();
    CKFLOW_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, PackCheckpoint(prefix));
    // A folder may hold several checkpoints (a manager's).
    seeds.push_back(
        {index.parent_path().filename().string() + "_" + index.stem().string(), std::move(bytes)});
  }
  for (const std::string& name : RestoreTargets::Names()) {
    const std::string dir = scratch_dir + "/" + name;
    CKFLOW_ASSIGN_OR_RETURN(std::string ours, RestoreTargets::SaveStructure(name, dir));
    CKFLOW_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, PackCheckpoint(ours));
    seeds.push_back({"ckflow_" + name, std::move(bytes)});
  }
  return seeds;
}

StatusOr<std::vector<Seed>> StateSeeds(const std::string& testdata_dir,
                                       const std::string& scratch_dir) {
  std::vector<Seed> seeds;
  CKFLOW_ASSIGN_OR_RETURN(std::vector<fs::path> states,
                          FilesUnder(testdata_dir, [](const fs::path& path) {
                            return path.filename() == kCheckpointStateFilename;
                          }));
  CKFLOW_RETURN_IF_ERROR(
      WriteCheckpointState(scratch_dir, {.model_checkpoint_path = "ckpt-3",
                                         .all_model_checkpoint_paths = {"ckpt-2", "ckpt-3"},
                                         .all_model_checkpoint_timestamps = {1.5e9, 1.6e9},
                                         .last_preserved_timestamp = 1.4e9}));
  states.push_back(fs::path(scratch_dir) / kCheckpointStateFilename);
  for (const fs::path& path : states) {
    CKFLOW_ASSIGN_OR_RETURN(std::string text, FileSystem::Default()->ReadFileToString(path));
    const bool ours = path.parent_path() == fs::path(scratch_dir);
    seeds.push_back({ours ? "ckflow_written" : path.parent_path().filename().string(),
                     {text.begin(), text.end()}});
  }
  return seeds;
}

std::vector<Seed> IndexMutations(const Seed& seed, size_t max_entries) {
  using tensorflow::BundleEntryProto;
  using tensorflow::BundleHeaderProto;
  const std::vector<std::span<const uint8_t>> records = UnpackRecords(seed.bytes);
  if (records.empty()) return {};
  const auto as_view = [](std::span<const uint8_t> bytes) {
    return std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  };
  StatusOr<std::vector<internal::KeyValue>> table =
      internal::ReadTable(seed.name, as_view(records[0]));
  if (!table.ok() || table->empty() || !table->front().first.empty()) return {};

  // The packed seed with entry `at` of the table replaced by `value` (or
  // removed, for nullopt).
  const auto repack = [&](size_t at, std::optional<std::string> value) {
    std::vector<internal::KeyValue> entries = *table;
    if (value) {
      entries[at].second = *std::move(value);
    } else {
      entries.erase(entries.begin() + static_cast<ptrdiff_t>(at));
    }
    std::vector<uint8_t> out;
    StatusOr<std::string> index = internal::BuildTable(entries);
    if (!index.ok()) return out;
    AppendRecord(*index, &out);
    for (size_t i = 1; i < records.size(); ++i) AppendRecord(as_view(records[i]), &out);
    return out;
  };
  std::vector<Seed> mutants;
  const auto add = [&](std::string what, size_t at, std::optional<std::string> value) {
    std::vector<uint8_t> bytes = repack(at, std::move(value));
    if (!bytes.empty()) {
      mutants.push_back({seed.name + ": " + table->at(at).first + " " + what, std::move(bytes)});
    }
  };

  BundleHeaderProto header;
  if (header.ParseFromString(table->front().second)) {
    const auto header_with = [&](std::string what,
                                 const std::function<void(BundleHeaderProto&)>& f) {
      BundleHeaderProto changed = header;
      f(changed);
      add("header " + what, 0, changed.SerializeAsString());
    };
    header_with("num_shards 0", [](auto& h) { h.set_num_shards(0); });
    header_with("num_shards -1", [](auto& h) { h.set_num_shards(-1); });
    header_with("num_shards + 1", [](auto& h) { h.set_num_shards(h.num_shards() + 1); });
    header_with("num_shards 2^30", [](auto& h) { h.set_num_shards(1 << 30); });
    header_with("big-endian", [](auto& h) { h.set_endianness(BundleHeaderProto::BIG); });
    header_with("endianness 7",
                [](auto& h) { h.set_endianness(BundleHeaderProto::Endianness(7)); });
    header_with("producer 0", [](auto& h) { h.mutable_version()->set_producer(0); });
    header_with("min_consumer 99", [](auto& h) { h.mutable_version()->set_min_consumer(99); });
    header_with("bad consumer 0", [](auto& h) { h.mutable_version()->add_bad_consumers(0); });
  }
  add("header removed", 0, std::nullopt);

  const size_t n = table->size() - 1;
  const size_t picks = std::min(n, max_entries);
  for (size_t p = 0; p < picks; ++p) {
    const size_t at = 1 + n * p / picks;
    BundleEntryProto entry;
    if (!entry.ParseFromString(table->at(at).second)) continue;
    // A fresh entry checksum wherever the mutated range lies in its data
    // file (which is what a writer with a bug, not a bit flip, produces).
    const auto entry_with = [&](std::string what, const std::function<void(BundleEntryProto&)>& f) {
      BundleEntryProto changed = entry;
      f(changed);
      const size_t file = static_cast<size_t>(changed.shard_id()) + 1;
      if (changed.shard_id() >= 0 && file < records.size() && changed.offset() >= 0 &&
          changed.size() >= 0 &&
          static_cast<uint64_t>(changed.offset()) + static_cast<uint64_t>(changed.size()) <=
              records[file].size()) {
        changed.set_crc32c(crc32c::Mask(
            crc32c::Value(as_view(records[file].subspan(changed.offset(), changed.size())))));
      }
      add(what, at, changed.SerializeAsString());
    };
    for (int dtype : {0, 1, 2, 3, 7, 9, 10, 14, 19, 20, 21, 1000}) {
      entry_with("dtype " + std::to_string(dtype),
                 [&](auto& e) { e.set_dtype(static_cast<tensorflow::DataType>(dtype)); });
    }
    entry_with("one more dim", [](auto& e) { e.mutable_shape()->add_dim()->set_size(2); });
    entry_with("dim of 2^40",
               [](auto& e) { e.mutable_shape()->add_dim()->set_size(int64_t{1} << 40); });
    entry_with("dim -1", [](auto& e) { e.mutable_shape()->add_dim()->set_size(-1); });
    entry_with("shape cleared", [](auto& e) { e.clear_shape(); });
    entry_with("unknown rank", [](auto& e) { e.mutable_shape()->set_unknown_rank(true); });
    entry_with("shard -1", [](auto& e) { e.set_shard_id(-1); });
    entry_with("shard + 1", [](auto& e) { e.set_shard_id(e.shard_id() + 1); });
    entry_with("offset + 1", [](auto& e) { e.set_offset(e.offset() + 1); });
    entry_with("offset -1", [](auto& e) { e.set_offset(-1); });
    entry_with("offset 2^62", [](auto& e) { e.set_offset(int64_t{1} << 62); });
    entry_with("size 0", [](auto& e) { e.set_size(0); });
    entry_with("size + 1", [](auto& e) { e.set_size(e.size() + 1); });
    entry_with("size - 1", [](auto& e) { e.set_size(e.size() - 1); });
    entry_with("size 2^62", [](auto& e) { e.set_size(int64_t{1} << 62); });
    entry_with("a slice",
               [](auto& e) { e.add_slices()->add_extent()->set_length(int64_t{1} << 40); });
    add("value not a proto", at, std::string("\xff\xff\xff"));
    add("removed", at, std::nullopt);
  }
  return mutants;
}

CheckResult CheckCheckpointInput(std::span<const uint8_t> input, const std::string& dir,
                                 RestoreTargets& targets) {
  // The files go into the targets' in-memory file system, under `dir`.
  MemoryFileSystem& fs = targets.file_system();
  fs.RemoveAll(dir);
  const std::vector<std::span<const uint8_t>> records = UnpackRecords(input);
  if (records.empty()) return {};
  const std::string prefix = dir + "/" + kPrefixName;
  const int num_shards = std::max<int>(1, static_cast<int>(records.size()) - 1);
  const auto put = [&fs](const std::string& path, std::span<const uint8_t> bytes) {
    return fs.Put(path, {reinterpret_cast<const char*>(bytes.data()), bytes.size()});
  };
  if (Status s = put(prefix + ".index", records[0]); !s.ok()) return {s.ToString()};
  for (size_t i = 1; i < records.size(); ++i) {
    const std::string path = DataName(prefix, static_cast<int>(i) - 1, num_shards);
    if (Status s = put(path, records[i]); !s.ok()) return {s.ToString()};
  }

  // Picks the paths only some inputs take, so that a replay takes the same.
  const uint32_t hash =
      crc32c::Value(std::string_view(reinterpret_cast<const char*>(input.data()), input.size()));
  Findings findings;
  std::vector<std::string> root_children;
  std::shared_ptr<const BundleReader> reader;
  if (StatusOr<std::unique_ptr<BundleReader>> opened = BundleReader::Open(prefix, {.fs = &fs});
      opened.ok()) {
    reader = *std::move(opened);
    CheckBundle(*reader, findings);
    root_children = CheckObjectGraph(*reader, hash, findings);
  } else {
    findings.ExpectInputError("BundleReader::Open", opened.status());
  }
  std::vector<std::string> restored;
  if (findings.ok()) {
    // One input in 32 also goes into a fresh program (restore_targets.h).
    const bool deferred = (hash >> 16) % 32 == 0;
    // One in 8 opens the checkpoint again, as Restore(path) does for a user.
    const bool reuse_reader = (hash >> 24) % 8 != 0;
    restored = targets.Restore(prefix, reader, reuse_reader,
                               RestoreTargets::Pick(root_children, hash >> 8), deferred,
                               [&](std::string problem) { findings.Add(std::move(problem)); });
  }
  return {findings.Take(), std::move(restored)};
}

std::string CheckStateInput(std::span<const uint8_t> input, const std::string& dir) {
  if (Status reset = ResetDir(dir); !reset.ok()) return reset.ToString();
  if (Status s = WriteFile(dir + "/" + kCheckpointStateFilename, input); !s.ok()) {
    return s.ToString();
  }
  Findings findings;
  StatusOr<std::optional<CheckpointStateData>> state = ReadCheckpointState(dir);
  if (!state.ok()) findings.ExpectInputError("ReadCheckpointState", state.status());
  // No checkpoint files exist, so whatever the state file names is absent.
  StatusOr<std::string> resolved = ResolveCheckpointPath(dir);
  if (resolved.ok()) {
    findings.Add("ResolveCheckpointPath found " + *resolved + " in a directory with no checkpoint");
  } else {
    findings.ExpectInputError("ResolveCheckpointPath", resolved.status());
  }
  // LatestCheckpoint accepts, as TensorFlow does, any file the state file
  // names as a legacy V1 checkpoint, but never a directory.
  if (std::optional<std::string> latest = LatestCheckpoint(dir);
      latest.has_value() && !fs::is_regular_file(*latest)) {
    findings.Add("LatestCheckpoint found " + *latest + " in a directory with no checkpoint");
  }
  return findings.Take();
}

}  // namespace ckflow::fuzz
