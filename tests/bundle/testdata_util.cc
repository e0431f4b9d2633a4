#include "tests/bundle/testdata_util.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <snappy.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <set>

#include "bundle/bundle_format.h"
#include "bundle/crc32c.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/test_util.h"

namespace ckflow::testing {
namespace {

namespace fs = std::filesystem;
using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

const Value* Field(const Struct& s, const std::string& name) {
  auto it = s.fields().find(name);
  return it == s.fields().end() ? nullptr : &it->second;
}
std::string StringField(const Struct& s, const std::string& name) {
  const Value* v = Field(s, name);
  return v ? v->string_value() : "";
}
double NumberField(const Struct& s, const std::string& name) {
  const Value* v = Field(s, name);
  return v ? v->number_value() : 0;
}
const ListValue& ListField(const Struct& s, const std::string& name) {
  const Value* v = Field(s, name);
  return v ? v->list_value() : ListValue::default_instance();
}

// The manifest's object graph (TensorFlow's TrackableObjectGraph as JSON)
// as plain data, for CanonicalGraph.
CheckpointObjectGraph GraphOfManifest(const Struct& json) {
  CheckpointObjectGraph graph;
  for (const Value& node_value : ListField(json, "nodes").values()) {
    const Struct& node = node_value.struct_value();
    CheckpointObjectGraph::Node& out = graph.nodes.emplace_back();
    for (const Value& c : ListField(node, "children").values()) {
      out.children.push_back({StringField(c.struct_value(), "local_name"),
                              static_cast<int>(NumberField(c.struct_value(), "node_id"))});
    }
    for (const Value& a : ListField(node, "attributes").values()) {
      out.attributes.push_back({StringField(a.struct_value(), "name"),
                                StringField(a.struct_value(), "full_name"),
                                StringField(a.struct_value(), "checkpoint_key")});
    }
    for (const Value& s : ListField(node, "slot_variables").values()) {
      const Struct& slot = s.struct_value();
      out.slot_variables.push_back(
          {static_cast<int>(NumberField(slot, "original_variable_node_id")),
           static_cast<int>(NumberField(slot, "slot_variable_node_id")),
           StringField(slot, "slot_name")});
    }
  }
  return graph;
}

// LevelDB's varint64 at data[*pos]; false past `end`.
bool ReadVarint(std::string_view data, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *pos < data.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(data[(*pos)++]);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (byte < 0x80) return true;
  }
  return false;
}

uint32_t Fixed32(std::string_view data, size_t pos) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(data[pos + i]);
  return v;
}

// The block at (offset, size) of a table file, its trailer checked, into
// *storage (uncompressed).
Status Block(const std::string& path, std::string_view file, uint64_t offset, uint64_t size,
             int* compression, std::string* storage) {
  if (offset > file.size() || size + 5 > file.size() - offset) {
    return DataLossError(path, ": block at ", offset, " of ", size, " bytes runs past the end");
  }
  const std::string_view with_type = file.substr(offset, size + 1);
  const uint32_t stored = Fixed32(file, offset + size + 1);
  if (crc32c::Mask(crc32c::Value(with_type)) != stored) {
    return DataLossError(path, ": block at ", offset, ": trailer checksum mismatch");
  }
  *compression = static_cast<uint8_t>(with_type.back());
  const std::string_view contents = file.substr(offset, size);
  if (*compression == 0) {
    storage->assign(contents);
  } else if (*compression != 1 || !snappy::Uncompress(contents.data(), contents.size(), storage)) {
    return DataLossError(path, ": block at ", offset, ": bad compression ", *compression);
  }
  return OkStatus();
}

// The keys and values of an uncompressed block.
StatusOr<std::vector<std::pair<std::string, std::string>>> BlockEntries(const std::string& path,
                                                                        std::string_view block) {
  if (block.size() < 4) return DataLossError(path, ": block too short");
  const uint32_t restarts = Fixed32(block, block.size() - 4);
  if ((uint64_t{restarts} + 1) * 4 > block.size()) {
    return DataLossError(path, ": bad restart count ", restarts);
  }
  const size_t end = block.size() - 4 * (restarts + 1);
  std::vector<std::pair<std::string, std::string>> entries;
  std::string key;
  for (size_t pos = 0; pos < end;) {
    uint64_t shared, non_shared, value_size;
    if (!ReadVarint(block, &pos, &shared) || !ReadVarint(block, &pos, &non_shared) ||
        !ReadVarint(block, &pos, &value_size) || shared > key.size() ||
        non_shared + value_size > end - pos) {
      return DataLossError(path, ": bad block entry at ", pos);
    }
    key = key.substr(0, shared) + std::string(block.substr(pos, non_shared));
    pos += non_shared;
    entries.emplace_back(key, std::string(block.substr(pos, value_size)));
    pos += value_size;
  }
  return entries;
}

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

}  // namespace

std::vector<std::string> GoldenFolderNames() {
  std::vector<std::string> names;
  for (const std::string& name : ListDir(TestDataDir())) {
    if (fs::exists(fs::path(TestDataDir()) / name / "manifest.json")) names.push_back(name);
  }
  return names;
}

StatusOr<GoldenFolder> ReadGoldenFolder(const std::string& name) {
  GoldenFolder folder;
  folder.name = name;
  folder.dir = TestDataDir() + "/" + name;
  const std::string path = folder.dir + "/manifest.json";
  CKFLOW_ASSIGN_OR_RETURN(std::string text, FileSystem::Default()->ReadFileToString(path));
  Struct json;
  if (!google::protobuf::util::JsonStringToMessage(text, &json).ok()) {
    return DataLossError(path, ": not JSON");
  }
  folder.what = StringField(json, "what");
  for (const Value& c : ListField(json, "checkpoints").values()) {
    const Struct& checkpoint = c.struct_value();
    GoldenCheckpoint& out = folder.checkpoints.emplace_back();
    out.prefix = folder.dir + "/" + StringField(checkpoint, "prefix");
    out.v1 = StringField(checkpoint, "format") == "V1";
    for (const Value& t : ListField(checkpoint, "tensors").values()) {
      const Struct& tensor = t.struct_value();
      GoldenTensor& g = out.tensors.emplace_back();
      g.key = StringField(tensor, "key");
      g.dtype = StringField(tensor, "dtype");
      for (const Value& d : ListField(tensor, "shape").values()) {
        g.shape.push_back(static_cast<int64_t>(d.number_value()));
      }
      g.bytes = static_cast<int64_t>(NumberField(tensor, "bytes"));
      g.crc32 = static_cast<uint32_t>(NumberField(tensor, "crc32"));
    }
    if (const Value* graph = Field(checkpoint, "object_graph")) {
      out.object_graph = CanonicalGraph(GraphOfManifest(graph->struct_value()));
    }
  }
  if (folder.checkpoints.empty()) return DataLossError(path, ": no checkpoints");
  if (const Value* state_value = Field(json, "state")) {
    const Struct& state = state_value->struct_value();
    CheckpointStateData& s = folder.state.emplace();
    s.model_checkpoint_path = StringField(state, "model_checkpoint_path");
    for (const Value& p : ListField(state, "all_model_checkpoint_paths").values()) {
      s.all_model_checkpoint_paths.push_back(p.string_value());
    }
    for (const Value& t : ListField(state, "all_model_checkpoint_timestamps").values()) {
      s.all_model_checkpoint_timestamps.push_back(t.number_value());
    }
    s.last_preserved_timestamp = NumberField(state, "last_preserved_timestamp");
  }
  return folder;
}

std::string GoldenPrefix(const std::string& name) {
  StatusOr<GoldenFolder> folder = ReadGoldenFolder(name);
  EXPECT_TRUE(folder.ok()) << folder.status();
  return folder.ok() ? folder->checkpoints.back().prefix : "";
}

std::string TfV1CheckpointBytes() { return ReadFileOrDie(GoldenPrefix("tf1_saver_v1")); }

std::string ValueBytes(const Tensor& t) {
  if (t.dtype() != DT_STRING) {
    return std::string(static_cast<const char*>(t.raw_data()), t.TotalBytes());
  }
  std::string out;
  for (const std::string& s : t.flat<std::string>()) {
    uint64_t n = s.size();
    for (int i = 0; i < 8; ++i, n >>= 8) out += static_cast<char>(n & 0xff);
    out += s;
  }
  return out;
}

uint32_t Crc32(std::string_view data) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (char ch : data) crc = table[(crc ^ static_cast<uint8_t>(ch)) & 0xff] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

std::string CanonicalGraph(const CheckpointObjectGraph& graph) {
  std::string out;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const CheckpointObjectGraph::Node& node = graph.nodes[i];
    out += "node " + std::to_string(i) + "\n";
    for (const auto& c : node.children) {
      out += "  child " + c.local_name + " -> " + std::to_string(c.node_id) + "\n";
    }
    for (const auto& a : node.attributes) {
      out += "  attribute " + a.name + " " + a.full_name + " " + a.checkpoint_key + "\n";
    }
    for (const auto& s : node.slot_variables) {
      out += "  slot " + std::to_string(s.original_variable_node_id) + " " + s.slot_name + " -> " +
             std::to_string(s.slot_variable_node_id) + "\n";
    }
  }
  return out;
}

StatusOr<TableLayout> ReadTableLayout(const std::string& path) {
  CKFLOW_ASSIGN_OR_RETURN(std::string file, FileSystem::Default()->ReadFileToString(path));
  constexpr size_t kFooter = 48;
  if (file.size() < kFooter || Fixed32(file, file.size() - 8) != 0x8b80fb57u ||
      Fixed32(file, file.size() - 4) != 0xdb477524u) {
    return DataLossError(path, ": no table footer");
  }
  const std::string_view footer = std::string_view(file).substr(file.size() - kFooter, 40);
  size_t pos = 0;
  uint64_t meta_offset, meta_size, index_offset, index_size;
  if (!ReadVarint(footer, &pos, &meta_offset) || !ReadVarint(footer, &pos, &meta_size) ||
      !ReadVarint(footer, &pos, &index_offset) || !ReadVarint(footer, &pos, &index_size)) {
    return DataLossError(path, ": bad footer handles");
  }
  TableLayout layout;
  layout.footer_padding_zero = std::all_of(footer.begin() + static_cast<ptrdiff_t>(pos),
                                           footer.end(), [](char c) { return c == 0; });
  int type = 0;
  std::string meta, index, data;
  CKFLOW_RETURN_IF_ERROR(Block(path, file, meta_offset, meta_size, &type, &meta));
  CKFLOW_ASSIGN_OR_RETURN(auto meta_entries, BlockEntries(path, meta));
  layout.metaindex_entries = static_cast<int>(meta_entries.size());
  CKFLOW_RETURN_IF_ERROR(Block(path, file, index_offset, index_size, &type, &index));
  CKFLOW_ASSIGN_OR_RETURN(auto index_entries, BlockEntries(path, index));
  for (const auto& [separator, handle] : index_entries) {
    layout.separators.push_back(separator);
    size_t at = 0;
    uint64_t offset, size;
    if (!ReadVarint(handle, &at, &offset) || !ReadVarint(handle, &at, &size)) {
      return DataLossError(path, ": bad block handle under '", separator, "'");
    }
    CKFLOW_RETURN_IF_ERROR(Block(path, file, offset, size, &type, &data));
    CKFLOW_RETURN_IF_ERROR(BlockEntries(path, data).status());
    layout.compression.push_back(type);
    ++layout.data_blocks;
  }
  return layout;
}

StatusOr<std::string> CheckBundle(const std::string& path) {
  CKFLOW_ASSIGN_OR_RETURN(std::string prefix, ResolveCheckpointPath(path));
  std::string out = "prefix " + fs::path(prefix).filename().string() + "\n";

  CKFLOW_ASSIGN_OR_RETURN(TableLayout layout, ReadTableLayout(IndexFilename(prefix)));
  const bool compressed = std::any_of(layout.compression.begin(), layout.compression.end(),
                                      [](int type) { return type != 0; });
  out += "index: " + std::to_string(layout.data_blocks) +
         (layout.data_blocks == 1 ? " data block" : " data blocks") + ", separators [" +
         Join(layout.separators, " ") + "], metaindex " +
         (layout.metaindex_entries == 0 ? "empty" : "not empty") + ", footer padding " +
         (layout.footer_padding_zero ? "zero" : "NOT ZERO") +
         (compressed ? ", Snappy blocks" : "") + "\n";

  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  out += "num_shards " + std::to_string(reader->num_shards()) + "\n";
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> spans;  // shard -> (offset, size)
  for (const BundleEntry& e : reader->entries()) {
    if (!e.key.empty() && e.key[0] == '\0') continue;  // a slice: listed under its tensor
    const std::string head = e.key + " " + StoredDataTypeName(e.dtype) + e.shape.ToString() + " ";
    if (e.is_sliced()) {
      std::vector<std::string> slices;
      for (const TensorSlice& s : e.slices) slices.push_back(s.ToString());
      out +=
          head + "in " + std::to_string(e.slices.size()) + " slices: " + Join(slices, " ") + "\n";
      // The whole value, assembled from its slices, each read and checked.
      CKFLOW_RETURN_IF_ERROR(reader->Lookup(e.key).status());
      continue;
    }
    CKFLOW_RETURN_IF_ERROR(reader->Verify(e));
    out += head + "shard " + std::to_string(e.shard_id) + " offset " + std::to_string(e.offset) +
           " size " + std::to_string(e.size) + " crc ok\n";
  }
  for (const BundleEntry& e : reader->entries()) {
    if (!e.is_sliced()) spans[e.shard_id].emplace_back(e.offset, e.size);
  }
  for (int shard = 0; shard < reader->num_shards(); ++shard) {
    std::vector<std::pair<int64_t, int64_t>>& list = spans[shard];
    std::sort(list.begin(), list.end());
    std::error_code ec;
    const auto file_size = static_cast<int64_t>(fs::file_size(reader->DataPath(shard), ec));
    if (ec) return NotFoundError(reader->DataPath(shard), ": ", ec.message());
    int64_t at = 0;
    for (const auto& [offset, size] : list) {
      if (offset != at) {
        return DataLossError(reader->DataPath(shard), ": ", offset > at ? "a gap" : "an overlap",
                             " at byte ", at);
      }
      at += size;
    }
    if (at != file_size) {
      return DataLossError(reader->DataPath(shard), ": ", file_size - at,
                           " bytes after the last entry");
    }
    out += "data file " + std::to_string(shard) + ": " + std::to_string(file_size) +
           " bytes, covered\n";
  }

  StatusOr<CheckpointObjectGraph> graph = ReadCheckpointObjectGraph(*reader);
  if (graph.ok()) {
    std::vector<std::string> missing;
    int keys = 0;
    for (const auto& node : graph->nodes) {
      for (const auto& a : node.attributes) {
        ++keys;
        if (!reader->Contains(a.checkpoint_key)) missing.push_back(a.checkpoint_key);
      }
    }
    out += "object graph: " + std::to_string(graph->nodes.size()) + " nodes, " +
           std::to_string(keys) + " keys, " +
           (missing.empty() ? "every key in the bundle" : "missing " + Join(missing, " ")) + "\n";
    CKFLOW_ASSIGN_OR_RETURN(std::string tree, RenderObjectGraph(*reader, ObjectGraphFormat::kTree));
    out += tree;
  } else if (graph.status().code() != StatusCode::kNotFound) {
    return graph.status();
  } else {
    out += "no object graph\n";
  }

  if (fs::is_directory(path)) {
    CKFLOW_ASSIGN_OR_RETURN(std::optional<CheckpointStateData> state, ReadCheckpointState(path));
    if (state) {
      std::vector<std::string> all;
      for (const std::string& p : state->all_model_checkpoint_paths) all.push_back("\"" + p + "\"");
      out += "state: model_checkpoint_path \"" + state->model_checkpoint_path + "\", all [" +
             Join(all, " ") + "], timestamps " +
             std::to_string(state->all_model_checkpoint_timestamps.size()) + "\n";
    }
  }
  return out;
}

}  // namespace ckflow::testing
