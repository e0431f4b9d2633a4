#include <google/protobuf/io/coded_stream.h>

#include <climits>
#include <initializer_list>

#include "bundle/bundle_format.h"
#include "bundle/checkpoint_object_graph_internal.h"

namespace ckflow::internal {

// Reads the wire format with protobuf's CodedInputStream, field numbers as
// in bundle/protos/trackable_object_graph.proto. Where a field repeats, the
// last value wins and messages merge, as protobuf's parser does.
class StoredObjectGraph::Parser {
 public:
  explicit Parser(StoredObjectGraph& g)
      : g_(g),
        base_(reinterpret_cast<const uint8_t*>(g.bytes_.data())),
        in_(base_, static_cast<int>(g.bytes_.size())) {}

  bool Graph() {
    // TrackableObjectGraph: repeated TrackableObject nodes = 1.
    return Message([&](uint32_t tag) {
      return tag == Tag(1, kBytes) ? Nested([&] { return Node(); }) : Skip(tag);
    });
  }

 private:
  enum WireType : uint32_t {
    kVarint = 0,
    kFixed64 = 1,
    kBytes = 2,
    kStartGroup = 3,
    kEndGroup = 4,
    kFixed32 = 5
  };
  // Groups inside unknown fields nest; protobuf's own limit.
  static constexpr int kMaxGroupDepth = 100;

  static constexpr uint32_t Tag(uint32_t field, WireType type) { return field << 3 | type; }

  // Reads fields until the current limit; `field` handles one tag.
  template <typename F>
  bool Message(F&& field) {
    while (in_.BytesUntilLimit() > 0) {
      const uint32_t tag = in_.ReadTag();
      // Field number 0 is not a field; a tag of 0 is also a varint cut short.
      if (tag >> 3 == 0) return false;
      if (!field(tag)) return false;
    }
    return true;
  }

  // A length-delimited field parsed by `body` within its length.
  template <typename F>
  bool Nested(F&& body) {
    int size = 0;
    if (!in_.ReadVarintSizeAsInt(&size) || size > in_.BytesUntilLimit()) return false;
    const auto limit = in_.PushLimit(size);
    if (!body()) return false;
    in_.PopLimit(limit);
    return true;
  }

  bool Bytes(std::string_view& out) {
    int size = 0;
    if (!in_.ReadVarintSizeAsInt(&size) || size > in_.BytesUntilLimit()) return false;
    out = std::string_view(reinterpret_cast<const char*>(base_) + in_.CurrentPosition(),
                           static_cast<size_t>(size));
    return in_.Skip(size);
  }

  // int32 as protobuf reads it: a varint of up to ten bytes, truncated.
  bool Int32(int& out) {
    uint32_t v = 0;
    if (!in_.ReadVarint32(&v)) return false;
    out = static_cast<int32_t>(v);
    return true;
  }

  bool Skip(uint32_t tag, int depth = 0) {
    switch (tag & 7) {
      case kVarint: {
        uint64_t v = 0;
        return in_.ReadVarint64(&v);
      }
      case kFixed64:
        return in_.Skip(8);
      case kBytes: {
        std::string_view ignored;
        return Bytes(ignored);
      }
      case kStartGroup:
        if (depth >= kMaxGroupDepth) return false;
        for (;;) {
          const uint32_t inner = in_.ReadTag();
          if (inner >> 3 == 0) return false;
          if ((inner & 7) == kEndGroup) return inner >> 3 == tag >> 3;
          if (!Skip(inner, depth + 1)) return false;
        }
      case kFixed32:
        return in_.Skip(4);
      default:  // an end-group without its start, or no wire type at all
        return false;
    }
  }

  bool Node() {
    NodeRecord& record = g_.nodes_.emplace_back();
    const bool ok = Message([&](uint32_t tag) {
      switch (tag) {
        case Tag(1, kBytes):
          return Nested([&] { return Child(g_.children_.emplace_back()); });
        case Tag(2, kBytes):
          return Nested([&] {
            StoredObjectGraph::Attribute& a = g_.attributes_.emplace_back();
            return Strings({&a.name_, &a.full_name_, &a.checkpoint_key_});
          });
        case Tag(3, kBytes):
          return Nested([&] { return Slot(g_.slots_.emplace_back()); });
        case Tag(4, kBytes):
          if (record.saver < 0) {
            record.saver = static_cast<int32_t>(g_.savers_.size());
            g_.savers_.emplace_back();
          }
          return Nested([&] {
            RegisteredSaver& s = g_.savers_[record.saver];
            return Strings({&s.name_, &s.object_name_});
          });
        case Tag(5, kBytes):
          if (record.has_values < 0) record.has_values = 0;
          return Nested([&] { return BoolValue(record.has_values); });
        default:
          return Skip(tag);
      }
    });
    record.children_end = static_cast<uint32_t>(g_.children_.size());
    record.attributes_end = static_cast<uint32_t>(g_.attributes_.size());
    record.slots_end = static_cast<uint32_t>(g_.slots_.size());
    return ok;
  }

  bool Child(StoredObjectGraph::Child& c) {
    return Message([&](uint32_t tag) {
      switch (tag) {
        case Tag(1, kVarint):
          return Int32(c.node_id_);
        case Tag(2, kBytes):
          return Bytes(c.local_name_);
        default:
          return Skip(tag);
      }
    });
  }

  // A message of bytes fields only, numbered 1, 2, ...: field k into
  // fields[k - 1] (SerializedTensor's names, RegisteredSaver).
  bool Strings(std::initializer_list<std::string_view*> fields) {
    return Message([&](uint32_t tag) {
      const uint32_t k = tag >> 3;
      if ((tag & 7) != kBytes || k > fields.size()) return Skip(tag);
      return Bytes(*fields.begin()[k - 1]);
    });
  }

  bool Slot(SlotVariable& s) {
    return Message([&](uint32_t tag) {
      switch (tag) {
        case Tag(1, kVarint):
          return Int32(s.original_variable_node_id_);
        case Tag(2, kBytes):
          return Bytes(s.slot_name_);
        case Tag(3, kVarint):
          return Int32(s.slot_variable_node_id_);
        default:
          return Skip(tag);
      }
    });
  }

  // google.protobuf.BoolValue: bool value = 1.
  bool BoolValue(int8_t& value) {
    return Message([&](uint32_t tag) {
      if (tag != Tag(1, kVarint)) return Skip(tag);
      uint64_t v = 0;
      if (!in_.ReadVarint64(&v)) return false;
      value = v != 0;
      return true;
    });
  }

  StoredObjectGraph& g_;
  const uint8_t* const base_;
  google::protobuf::io::CodedInputStream in_;
};

std::unique_ptr<StoredObjectGraph> StoredObjectGraph::Parse(std::string bytes) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return nullptr;  // CodedInputStream's limit
  std::unique_ptr<StoredObjectGraph> g(new StoredObjectGraph);
  g->bytes_ = std::move(bytes);
  if (!Parser(*g).Graph()) return nullptr;
  // The arrays grew by doubling; the graph lives as long as its restore.
  g->nodes_.shrink_to_fit();
  g->children_.shrink_to_fit();
  g->attributes_.shrink_to_fit();
  g->slots_.shrink_to_fit();
  return g;
}

StoredObjectGraph::Node StoredObjectGraph::nodes(int id) const {
  const NodeRecord& r = nodes_[id];
  const NodeRecord empty;
  const NodeRecord& prev = id > 0 ? nodes_[id - 1] : empty;
  Node node;
  node.children_ =
      std::span(children_).subspan(prev.children_end, r.children_end - prev.children_end);
  node.attributes_ =
      std::span(attributes_).subspan(prev.attributes_end, r.attributes_end - prev.attributes_end);
  node.slots_ = std::span(slots_).subspan(prev.slots_end, r.slots_end - prev.slots_end);
  if (r.saver >= 0) node.saver_ = &savers_[r.saver];
  if (r.has_values >= 0) node.has_values_ = r.has_values != 0;
  return node;
}

StatusOr<std::unique_ptr<const StoredObjectGraph>> ParseCheckpointObjectGraph(
    const BundleReader& reader) {
  const BundleEntry* entry = reader.FindEntry(kObjectGraphKey);
  if (entry == nullptr) return std::unique_ptr<const StoredObjectGraph>();
  CKFLOW_ASSIGN_OR_RETURN(Tensor t, reader.Lookup(kObjectGraphKey));
  if (t.dtype() != DT_STRING || t.NumElements() != 1) {
    return DataLossError(IndexFilename(reader.prefix()), ": ", kObjectGraphKey, " is ",
                         DataTypeName(t.dtype()), t.shape().ToString(), ", not a string scalar");
  }
  std::unique_ptr<const StoredObjectGraph> graph =
      StoredObjectGraph::Parse(std::move(t.flat<std::string>()[0]));
  if (graph == nullptr) {
    return DataLossError(DataFilename(reader.prefix(), entry->shard_id, reader.num_shards()), ": ",
                         kObjectGraphKey, " is not a TrackableObjectGraph");
  }
  const int n = graph->nodes_size();
  auto bad = [&](int node, auto&&... what) {
    return DataLossError(IndexFilename(reader.prefix()), ": object graph node ", node, ": ",
                         what...);
  };
  for (int u = 0; u < n; ++u) {
    const StoredObjectGraph::Node node = graph->nodes(u);
    for (const auto& c : node.children()) {
      if (c.node_id() < 0 || c.node_id() >= n) {
        return bad(u, "child '", c.local_name(), "' is node ", c.node_id(), " of ", n);
      }
    }
    for (const auto& s : node.slot_variables()) {
      if (s.slot_variable_node_id() < 0 || s.slot_variable_node_id() >= n ||
          s.original_variable_node_id() < 0 || s.original_variable_node_id() >= n) {
        return bad(u, "slot '", s.slot_name(), "' refers to node ", s.slot_variable_node_id(),
                   " for node ", s.original_variable_node_id(), " of ", n);
      }
    }
  }
  return graph;
}

}  // namespace ckflow::internal
