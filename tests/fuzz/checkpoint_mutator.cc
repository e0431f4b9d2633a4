#include "tests/fuzz/checkpoint_mutator.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bundle/bundle_coding_internal.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"
#include "bundle/crc32c.h"
#include "bundle/protos/tensor_bundle.pb.h"
#include "bundle/protos/trackable_object_graph.pb.h"
#include "tests/fuzz/checkpoint_checks.h"

namespace ckflow::fuzz {
namespace {

using tensorflow::BundleEntryProto;
using tensorflow::BundleHeaderProto;
using tensorflow::TrackableObjectGraph;
using Entries = std::vector<std::pair<std::string, BundleEntryProto>>;

// An input taken apart: its files, its index's header and entries.
struct Checkpoint {
  std::vector<std::string> files;  // [0] the index, then the data files
  BundleHeaderProto header;
  Entries entries;  // sorted by key, unique, no ""
};

// With `only_key`, the entries are that key's alone (one seek into the
// index, no pass over it), for a checkpoint that is read and not packed.
std::optional<Checkpoint> Unpack(std::span<const uint8_t> input,
                                 std::optional<std::string_view> only_key = {}) {
  Checkpoint c;
  for (std::span<const uint8_t> record : UnpackRecords(input)) {
    c.files.emplace_back(reinterpret_cast<const char*>(record.data()), record.size());
  }
  if (c.files.empty()) return std::nullopt;
  bool seen_header = false;
  const Status read = internal::VisitTable(
      "fuzz", c.files[0], only_key, [&](std::string_view key, std::string_view value) -> Status {
        if (!seen_header) {
          seen_header = true;
          if (!key.empty() ||
              !c.header.ParseFromArray(value.data(), static_cast<int>(value.size())))
            return DataLossError("no header");
          return OkStatus();
        }
        BundleEntryProto& entry =
            c.entries.emplace_back(std::string(key), BundleEntryProto()).second;
        if (!entry.ParseFromArray(value.data(), static_cast<int>(value.size())))
          return DataLossError("not an entry");
        return OkStatus();
      });
  if (!read.ok() || !seen_header) return std::nullopt;
  return c;
}

// The packed input; nullopt if it does not fit in max_size.
std::optional<std::vector<uint8_t>> Pack(Checkpoint& c, size_t max_size) {
  std::stable_sort(c.entries.begin(), c.entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  c.entries.erase(std::unique(c.entries.begin(), c.entries.end(),
                              [](const auto& a, const auto& b) { return a.first == b.first; }),
                  c.entries.end());
  std::erase_if(c.entries, [](const auto& e) { return e.first.empty(); });
  StatusOr<std::string> index = internal::BuildBundleIndex(c.header, c.entries);
  if (!index.ok()) return std::nullopt;
  c.files[0] = *std::move(index);
  std::vector<uint8_t> out;
  for (const std::string& file : c.files) AppendRecord(file, &out);
  if (out.size() > max_size) return std::nullopt;
  return out;
}

// The bytes of `entry` in its data file, if they lie there.
std::optional<std::string_view> ValueBytes(const Checkpoint& c, const BundleEntryProto& entry) {
  const int64_t file = int64_t{entry.shard_id()} + 1;
  if (entry.shard_id() < 0 || file >= static_cast<int64_t>(c.files.size()) || entry.offset() < 0 ||
      entry.size() < 0) {
    return std::nullopt;
  }
  const std::string& data = c.files[static_cast<size_t>(file)];
  if (static_cast<uint64_t>(entry.offset()) > data.size() ||
      static_cast<uint64_t>(entry.size()) > data.size() - static_cast<uint64_t>(entry.offset())) {
    return std::nullopt;
  }
  return std::string_view(data).substr(static_cast<size_t>(entry.offset()),
                                       static_cast<size_t>(entry.size()));
}

// The checksum a writer would have stored for the entry's bytes (a string
// tensor's is over its lengths and bytes, not its encoding).
void RefreshChecksum(const Checkpoint& c, BundleEntryProto& entry) {
  std::optional<std::string_view> bytes = ValueBytes(c, entry);
  if (!bytes) return;
  uint32_t crc = crc32c::Value(*bytes);
  if (entry.dtype() == tensorflow::DT_STRING) {
    // Elements, while there can be as many as there are bytes.
    int64_t n = 1;
    for (const auto& dim : entry.shape().dim()) {
      if (n < 0 || dim.size() < 0 || __builtin_mul_overflow(n, dim.size(), &n)) n = -1;
    }
    if (n >= 0 && n <= static_cast<int64_t>(bytes->size())) {
      std::vector<std::string> strings(static_cast<size_t>(n));
      uint32_t string_crc = 0;
      if (internal::DecodeStringTensor(*bytes, strings, false, &string_crc).ok()) {
        crc = string_crc;
      }
    }
  }
  entry.set_crc32c(crc32c::Mask(crc));
}

// Puts `bytes` in the entry's data file (over its old bytes when they fit
// there or end the file, else after the end: inputs must not grow with
// every mutation) and points the entry at them.
void PlaceValue(Checkpoint& c, BundleEntryProto& entry, std::string_view bytes, uint32_t crc) {
  if (c.files.size() < 2) c.files.emplace_back();
  if (entry.shard_id() < 0 || static_cast<size_t>(entry.shard_id()) + 1 >= c.files.size()) {
    entry.set_shard_id(0);
  }
  std::string& data = c.files[static_cast<size_t>(entry.shard_id()) + 1];
  size_t at = data.size();
  if (std::optional<std::string_view> old = ValueBytes(c, entry)) {
    const auto offset = static_cast<size_t>(entry.offset());
    if (bytes.size() <= old->size()) {
      at = offset;
    } else if (offset + old->size() == data.size()) {
      at = offset;
      data.resize(offset);
    }
  }
  data.replace(at, std::min(bytes.size(), data.size() - at), bytes);
  entry.set_offset(static_cast<int64_t>(at));
  entry.set_size(static_cast<int64_t>(bytes.size()));
  entry.set_crc32c(crc32c::Mask(crc));
}

Entries::iterator FindGraph(Checkpoint& c) {
  return std::find_if(c.entries.begin(), c.entries.end(),
                      [](const auto& e) { return e.first == kObjectGraphKey; });
}

std::optional<TrackableObjectGraph> ReadGraph(const Checkpoint& c, const BundleEntryProto& entry) {
  std::optional<std::string_view> bytes = ValueBytes(c, entry);
  if (!bytes) return std::nullopt;
  std::string value;
  uint32_t crc = 0;
  TrackableObjectGraph graph;
  if (!internal::DecodeStringTensor(*bytes, std::span<std::string>(&value, 1), false, &crc).ok() ||
      !graph.ParseFromString(value)) {
    return std::nullopt;
  }
  return graph;
}

// The object graph's entry, added (a string scalar) if there is none.
BundleEntryProto& GraphEntry(Checkpoint& c) {
  auto it = FindGraph(c);
  if (it != c.entries.end()) return it->second;
  BundleEntryProto& entry =
      c.entries.emplace_back(std::string(kObjectGraphKey), BundleEntryProto()).second;
  entry.set_dtype(tensorflow::DT_STRING);
  entry.mutable_shape();
  return entry;
}

void WriteGraph(Checkpoint& c, const TrackableObjectGraph& graph) {
  const std::string serialized[] = {graph.SerializeAsString()};
  std::string encoded;
  const uint32_t crc = internal::EncodeStringTensor(serialized, &encoded);
  PlaceValue(c, GraphEntry(c), encoded, crc);
}

class Mutator {
 public:
  Mutator(Checkpoint& c, unsigned seed) : c_(c), rng_(seed) {
    for (const auto& [key, entry] : c_.entries) keys_.push_back(key);
  }

  size_t Below(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }
  bool OneIn(size_t n) { return Below(n) == 0; }

  // A name for an edge, an attribute, a slot or a key: one the checkpoint
  // uses, one with the characters escaping treats specially, or one of
  // those changed a little.
  std::string Name() {
    static const char* const kNames[] = {"",
                                         ".",
                                         "/",
                                         "..",
                                         ".S",
                                         "a/b.c",
                                         "m",
                                         "v",
                                         "kernel",
                                         "bias",
                                         "model",
                                         "step",
                                         "tree",
                                         "embedding",
                                         "optimizer",
                                         "save_counter",
                                         "VARIABLE_VALUE",
                                         ".ATTRIBUTES",
                                         "\xff\xfe",
                                         "layer_with_weights-0"};
    std::string name = !keys_.empty() && OneIn(2)    ? keys_[Below(keys_.size())]
                       : !names_.empty() && OneIn(2) ? names_[Below(names_.size())]
                                                     : kNames[Below(std::size(kNames))];
    if (OneIn(4) && !name.empty()) name.erase(Below(name.size()), 1);
    if (OneIn(4)) name.insert(Below(name.size() + 1), 1, "./ \0a"[Below(5)]);
    return name;
  }
  // An id: mostly a valid one, sometimes just outside or far out.
  int32_t Id(int n) {
    switch (Below(8)) {
      case 0:
        return -1;
      case 1:
        return n;
      case 2:
        return INT32_MAX;
      default:
        return static_cast<int32_t>(Below(static_cast<size_t>(std::max(n, 1))));
    }
  }
  int64_t Number(int64_t old, int64_t limit) {
    switch (Below(8)) {
      case 0:
        return 0;
      case 1:
        return -1;
      case 2:  // wrapping, not overflowing, at the ends
        return static_cast<int64_t>(static_cast<uint64_t>(old) + 1);
      case 3:
        return static_cast<int64_t>(static_cast<uint64_t>(old) - 1);
      case 4:
        return int64_t{1} << (32 + Below(31));
      default:
        return static_cast<int64_t>(Below(static_cast<size_t>(std::max<int64_t>(limit, 1))));
    }
  }

  void MutateGraph(TrackableObjectGraph& g) {
    for (const auto& node : g.nodes()) {
      for (const auto& child : node.children()) names_.push_back(child.local_name());
      for (const auto& slot : node.slot_variables()) names_.push_back(slot.slot_name());
    }
    const int n = g.nodes_size();
    if (n == 0) {
      g.add_nodes();
      return;
    }
    auto& node = *g.mutable_nodes(static_cast<int>(Below(static_cast<size_t>(n))));
    const auto pick = [&](auto& repeated) { return static_cast<int>(Below(repeated.size())); };
    switch (Below(16)) {
      case 0:  // a child's node id
        if (node.children_size() > 0)
          node.mutable_children(pick(node.children()))->set_node_id(Id(n));
        break;
      case 1:  // a child's local name
        if (node.children_size() > 0) {
          node.mutable_children(pick(node.children()))->set_local_name(Name());
        }
        break;
      case 2: {  // a new edge
        auto* child = node.add_children();
        child->set_node_id(Id(n));
        child->set_local_name(Name());
        break;
      }
      case 3:  // an edge removed
        if (node.children_size() > 0) {
          node.mutable_children()->DeleteSubrange(pick(node.children()), 1);
        }
        break;
      case 4:  // an attribute's key
        if (node.attributes_size() > 0) {
          node.mutable_attributes(pick(node.attributes()))->set_checkpoint_key(Name());
        }
        break;
      case 5:  // an attribute's name or full name
        if (node.attributes_size() > 0) {
          auto* attribute = node.mutable_attributes(pick(node.attributes()));
          OneIn(2) ? attribute->set_name(OneIn(2) ? "VARIABLE_VALUE" : Name())
                   : attribute->set_full_name(Name());
        }
        break;
      case 6: {  // an attribute added, or removed
        if (node.attributes_size() > 0 && OneIn(2)) {
          node.mutable_attributes()->DeleteSubrange(pick(node.attributes()), 1);
          break;
        }
        auto* attribute = node.add_attributes();
        attribute->set_name("VARIABLE_VALUE");
        attribute->set_full_name(Name());
        attribute->set_checkpoint_key(Name());
        break;
      }
      case 7:  // a slot reference's ids
        if (node.slot_variables_size() > 0) {
          auto* slot = node.mutable_slot_variables(pick(node.slot_variables()));
          OneIn(2) ? slot->set_original_variable_node_id(Id(n))
                   : slot->set_slot_variable_node_id(Id(n));
        }
        break;
      case 8:  // a slot reference's name
        if (node.slot_variables_size() > 0) {
          node.mutable_slot_variables(pick(node.slot_variables()))->set_slot_name(Name());
        }
        break;
      case 9: {  // a slot reference added, or removed
        if (node.slot_variables_size() > 0 && OneIn(2)) {
          node.mutable_slot_variables()->DeleteSubrange(pick(node.slot_variables()), 1);
          break;
        }
        auto* slot = node.add_slot_variables();
        slot->set_original_variable_node_id(Id(n));
        slot->set_slot_variable_node_id(Id(n));
        slot->set_slot_name(OneIn(2) ? "m" : Name());
        break;
      }
      case 10: {  // a node copied to the end, reached from another
        *g.add_nodes() = g.nodes(static_cast<int>(Below(static_cast<size_t>(n))));
        auto* edge =
            g.mutable_nodes(static_cast<int>(Below(static_cast<size_t>(n))))->add_children();
        edge->set_node_id(n);
        edge->set_local_name(Name());
        break;
      }
      case 11:  // the last node removed (edges to it now dangle)
        g.mutable_nodes()->RemoveLast();
        break;
      case 12:  // two nodes swapped (ids no longer mean what they meant)
        g.mutable_nodes()->SwapElements(static_cast<int>(Below(static_cast<size_t>(n))),
                                        static_cast<int>(Below(static_cast<size_t>(n))));
        break;
      case 13:  // has_checkpoint_values said otherwise, or not at all
        if (OneIn(3)) {
          node.clear_has_checkpoint_values();
        } else {
          node.mutable_has_checkpoint_values()->set_value(!node.has_checkpoint_values().value());
        }
        break;
      case 14:  // a registered saver
        if (node.has_registered_saver()) {
          node.clear_registered_saver();
        } else {
          node.mutable_registered_saver()->set_name(Name());
          node.mutable_registered_saver()->set_object_name(Name());
        }
        break;
      default:  // two edges swapped (a checkpoint numbers edges in order)
        if (node.children_size() > 1) {
          node.mutable_children()->SwapElements(pick(node.children()), pick(node.children()));
        }
        break;
    }
  }

  void MutateEntry(BundleEntryProto& e) {
    int64_t file_size = 0;
    for (size_t i = 1; i < c_.files.size(); ++i) {
      file_size = std::max<int64_t>(file_size, static_cast<int64_t>(c_.files[i].size()));
    }
    static constexpr int kDtypes[] = {0,  1,  2,  3,  4,  5,  6,  7,  8,   9,
                                      10, 14, 17, 18, 19, 20, 22, 23, 1000};
    auto* shape = e.mutable_shape();
    switch (Below(10)) {
      case 0:
        e.set_dtype(static_cast<tensorflow::DataType>(kDtypes[Below(std::size(kDtypes))]));
        break;
      case 1:
        if (shape->dim_size() > 0 && OneIn(2)) {
          shape->mutable_dim(static_cast<int>(Below(static_cast<size_t>(shape->dim_size()))))
              ->set_size(Number(2, 8));
        } else {
          shape->add_dim()->set_size(Number(1, 4));
        }
        break;
      case 2:
        if (shape->dim_size() > 0) {
          shape->mutable_dim()->RemoveLast();
        } else {
          shape->set_unknown_rank(!shape->unknown_rank());
        }
        break;
      case 3:
        e.set_shard_id(static_cast<int32_t>(Number(e.shard_id(), 4)));
        break;
      case 4:
        e.set_offset(Number(e.offset(), file_size));
        break;
      case 5:
        e.set_size(Number(e.size(), file_size));
        break;
      case 6:
        if (e.slices_size() > 0 && OneIn(2)) {
          e.mutable_slices()->RemoveLast();
        } else {
          auto* slice = e.add_slices();
          for (int d = 0; d < std::max(1, shape->dim_size()); ++d) {
            auto* extent = slice->add_extent();
            if (OneIn(3)) continue;  // the whole dimension
            extent->set_start(Number(0, 4));
            extent->set_length(Number(1, 4));
          }
        }
        break;
      case 7: {  // a byte of the value, behind a fresh checksum
        std::optional<std::string_view> bytes = ValueBytes(c_, e);
        if (!bytes || bytes->empty()) break;
        std::string& data = c_.files[static_cast<size_t>(e.shard_id()) + 1];
        data[static_cast<size_t>(e.offset()) + Below(bytes->size())] ^=
            static_cast<char>(1 + Below(255));
        break;
      }
      default:  // a stale checksum, or an endianness the checksums were not made in
        OneIn(2) ? e.set_crc32c(e.crc32c() + 1) : e.set_crc32c(0);
        return;
    }
    if (!OneIn(8)) RefreshChecksum(c_, e);
  }

  void MutateIndex() {
    auto& entries = c_.entries;
    switch (Below(8)) {
      case 0: {  // the header
        switch (Below(4)) {
          case 0:
            c_.header.set_num_shards(static_cast<int32_t>(Number(c_.header.num_shards(), 4)));
            break;
          case 1:
            c_.header.set_endianness(c_.header.endianness() == BundleHeaderProto::LITTLE
                                         ? BundleHeaderProto::BIG
                                         : BundleHeaderProto::LITTLE);
            break;
          case 2:
            c_.header.mutable_version()->set_min_consumer(static_cast<int32_t>(Number(0, 3)));
            break;
          default:
            c_.header.mutable_version()->set_producer(static_cast<int32_t>(Number(1, 3)));
            break;
        }
        return;
      }
      case 1:  // an entry renamed (the index is sorted again)
        if (!entries.empty()) entries[Below(entries.size())].first = Name();
        return;
      case 2:  // an entry removed
        if (!entries.empty())
          entries.erase(entries.begin() + static_cast<ptrdiff_t>(Below(entries.size())));
        return;
      case 3:  // an entry copied under another key
        if (!entries.empty()) entries.emplace_back(Name(), entries[Below(entries.size())].second);
        return;
      case 4:  // a data file dropped or added (empty, or the start of the first)
        if (c_.files.size() > 1 && OneIn(2)) {
          c_.files.pop_back();
        } else {
          c_.files.emplace_back(
              c_.files.size() > 1 ? c_.files[1].substr(0, Below(c_.files[1].size() + 1)) : "");
        }
        return;
      default:
        if (!entries.empty()) MutateEntry(entries[Below(entries.size())].second);
        return;
    }
  }

  // A graph for a checkpoint without one (a name-based save): the root
  // with one child per entry, each a variable with that entry's key.
  TrackableObjectGraph GraphOfEntries() {
    TrackableObjectGraph g;
    g.add_nodes();
    for (const auto& [key, entry] : c_.entries) {
      if (!OneIn(2)) continue;
      auto* edge = g.mutable_nodes(0)->add_children();
      edge->set_node_id(g.nodes_size());
      edge->set_local_name(key);
      auto* attribute = g.add_nodes()->add_attributes();
      attribute->set_name("VARIABLE_VALUE");
      attribute->set_full_name(key);
      attribute->set_checkpoint_key(key);
    }
    return g;
  }

  void MutateOnce() {
    if (!OneIn(3)) {  // the object graph, most of the time
      auto it = FindGraph(c_);
      std::optional<TrackableObjectGraph> graph =
          it != c_.entries.end() ? ReadGraph(c_, it->second) : std::nullopt;
      if (graph) {
        MutateGraph(*graph);
        WriteGraph(c_, *graph);
        return;
      }
      if (it == c_.entries.end() && !c_.entries.empty()) {
        WriteGraph(c_, GraphOfEntries());
        return;
      }
    }
    MutateIndex();
  }

 private:
  Checkpoint& c_;
  std::minstd_rand rng_;
  std::vector<std::string> keys_;
  std::vector<std::string> names_;
};

size_t Copy(const std::vector<uint8_t>& bytes, uint8_t* out) {
  std::memcpy(out, bytes.data(), bytes.size());
  return bytes.size();
}

}  // namespace

size_t MutateCheckpointInput(uint8_t* data, size_t size, size_t max_size, unsigned seed,
                             const ByteMutator& bytes) {
  // Byte mutations one time in five anyway: they make what the structured
  // ones cannot (a broken block, a truncated file, a varint past its end).
  if (seed % 5 == 0) return bytes(data, size, max_size);
  std::optional<Checkpoint> c = Unpack({data, size});
  if (!c) return bytes(data, size, max_size);
  Mutator mutator(*c, seed);
  for (size_t n = 1 + mutator.Below(3); n > 0; --n) mutator.MutateOnce();
  std::optional<std::vector<uint8_t>> packed = Pack(*c, max_size);
  if (!packed) return bytes(data, size, max_size);
  return Copy(*packed, data);
}

size_t CrossOverCheckpointInputs(const uint8_t* a, size_t a_size, const uint8_t* b, size_t b_size,
                                 uint8_t* out, size_t max_out, unsigned seed) {
  std::optional<Checkpoint> first = Unpack({a, a_size});
  if (!first) return 0;
  Mutator mutator(*first, seed);
  // Half the time the second's object graph, as stored: its index is
  // sought for that one entry, and its bytes are copied, not parsed.
  std::optional<Checkpoint> second;
  if (mutator.OneIn(2)) {
    second = Unpack({b, b_size}, kObjectGraphKey);
    const auto graph = second ? FindGraph(*second) : Entries::iterator();
    std::optional<std::string_view> bytes;
    if (second && graph != second->entries.end()) bytes = ValueBytes(*second, graph->second);
    if (bytes) {
      PlaceValue(*first, GraphEntry(*first), *bytes, crc32c::Unmask(graph->second.crc32c()));
      std::optional<std::vector<uint8_t>> packed = Pack(*first, max_out);
      return packed ? Copy(*packed, out) : 0;
    }
  }
  // Else a few small values of the second's: inputs grow no faster than
  // the mutations shrink them.
  second = Unpack({b, b_size});
  if (!second) return 0;
  int moves = 4;
  for (const auto& [second_key, entry] : second->entries) {
    const std::string& key = second_key;  // a lambda below captures it
    if (key == kObjectGraphKey || !mutator.OneIn(3)) continue;
    std::optional<std::string_view> value = ValueBytes(*second, entry);
    if (!value || value->size() > 1024 || moves-- == 0) continue;
    BundleEntryProto moved = entry;
    moved.set_shard_id(0);
    moved.set_offset(0);
    moved.set_size(0);
    const uint32_t crc = crc32c::Unmask(entry.crc32c());
    PlaceValue(*first, moved, *value, crc);
    std::erase_if(first->entries, [&](const auto& e) { return e.first == key; });
    first->entries.emplace_back(key, std::move(moved));
  }
  std::optional<std::vector<uint8_t>> packed = Pack(*first, max_out);
  return packed ? Copy(*packed, out) : 0;
}

}  // namespace ckflow::fuzz
