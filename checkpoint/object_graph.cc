#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <vector>

#include "bundle/bundle_format.h"
#include "checkpoint/object_graph_internal.h"

namespace ckflow::internal {

std::string AttributeKey(std::string_view object_path, std::string_view attribute_name) {
  std::string key(object_path);
  key += "/.ATTRIBUTES/";
  key += EscapeLocalName(attribute_name);
  return key;
}

int64_t DeclaredBytes(const SaveableAttribute& a) {
  if (!a.shape.IsFullyDefined()) return 0;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max() / 4;
  int64_t n = static_cast<int64_t>(DataTypeSize(a.dtype));
  for (int64_t d : a.shape.dims()) n = (d != 0 && n > kMax / d) ? kMax : n * d;
  return n;
}

namespace {

std::atomic<int64_t> full_builds{0};

// The objects a walk has reached, by address: open addressing in one
// array, so a walk of many objects allocates a few times, not once per
// object as a node-based set does.
class PointerSet {
 public:
  // Whether `p` was not in the set (and is now).
  bool Insert(const void* p) {
    if (2 * (size_ + 1) > slots_.size()) Grow();
    for (size_t i = Slot(p);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i] == p) return false;
      if (slots_[i] == nullptr) {
        slots_[i] = p;
        ++size_;
        return true;
      }
    }
  }

 private:
  size_t Slot(const void* p) const {
    // Fibonacci hashing: the top bits of the product mix every bit of the
    // address, whose low bits are alignment zeros.
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(p) * 0x9E3779B97F4A7C15ull) >>
                               (64 - bits_));
  }
  void Grow() {
    std::vector<const void*> old = std::move(slots_);
    bits_ = bits_ == 0 ? 6 : bits_ + 1;
    slots_.assign(size_t{1} << bits_, nullptr);
    size_ = 0;
    for (const void* p : old) {
      if (p != nullptr) Insert(p);
    }
  }

  std::vector<const void*> slots_;
  size_t size_ = 0;
  int bits_ = 0;
};

std::string JoinPath(const std::string& parent, std::string_view escaped) {
  if (parent.empty()) return std::string(escaped);
  return parent + "/" + std::string(escaped);
}

// Every node's attributes, their keys and the graph's values. The values
// are counted first: a save plan keeps them (Saver::PlanOf), so they must
// not keep the slack of a vector grown by doubling.
void AddAttributes(ObjectGraph& graph) {
  size_t count = 0;
  for (ObjectGraphNode& node : graph.nodes) {
    node.attributes = node.object->Attributes();
    count += node.attributes.size();
  }
  graph.values.reserve(count);
  for (size_t id = 0; id < graph.nodes.size(); ++id) {
    ObjectGraphNode& node = graph.nodes[id];
    node.keys.reserve(node.attributes.size());
    for (const SaveableAttribute& attr : node.attributes) {
      node.keys.push_back(AttributeKey(node.path, attr.name));
      graph.values.push_back({node.keys.back(), attr, static_cast<int>(id)});
    }
  }
}

}  // namespace

int64_t NumFullObjectGraphBuilds() { return full_builds.load(std::memory_order_relaxed); }

ObjectGraph BuildObjectGraph(const std::shared_ptr<Trackable>& root, ObjectGraphDetail detail) {
  const bool full = detail == ObjectGraphDetail::kFull;
  if (full) full_builds.fetch_add(1, std::memory_order_relaxed);
  ObjectGraph graph;
  graph.nodes.push_back({.object = root, .path = "", .display = "(root)"});
  graph.id_of[root.get()] = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    // Copy out what we need: push_back below may move graph.nodes.
    std::shared_ptr<Trackable> object = graph.nodes[i].object;
    if (graph.tracking_status.ok() && !object->tracking_status().ok()) {
      graph.tracking_status = object->tracking_status().WithContext(
          full ? graph.nodes[i].display : std::string("object graph"));
    }
    auto children = object->Children();
    // A module of thousands of variables would otherwise rehash and move
    // the whole table many times over. The room grows geometrically: room
    // for just each module's children would move every node and rehash
    // every id once per module of a deep model.
    const size_t needed = graph.nodes.size() + children.size();
    if (needed > graph.nodes.capacity()) {
      graph.nodes.reserve(std::max(needed, 2 * graph.nodes.capacity()));
    }
    if (static_cast<float>(needed) >
        static_cast<float>(graph.id_of.bucket_count()) * graph.id_of.max_load_factor()) {
      graph.id_of.reserve(std::max(needed, 2 * graph.id_of.size()));
    }
    for (auto& [name, child] : children) {
      auto [it, inserted] = graph.id_of.emplace(child.get(), static_cast<int>(graph.nodes.size()));
      if (inserted) {
        ObjectGraphNode node{.object = child, .parent = static_cast<int>(i)};
        if (full) {
          node.path = JoinPath(graph.nodes[i].path, EscapeLocalName(name));
          node.display = graph.nodes[i].display + "." + name;
          node.local_name = name;
        } else {
          node.local_name = std::move(name);
        }
        graph.nodes.push_back(std::move(node));
      }
      if (full) graph.nodes[i].children.emplace_back(std::move(name), it->second);
    }
  }
  const size_t num_ordinary = graph.nodes.size();
  for (size_t opt = 0; opt < num_ordinary; ++opt) {
    auto* owner = dynamic_cast<SlotOwner*>(graph.nodes[opt].object.get());
    if (owner == nullptr) continue;
    // Ids go slot name by slot name, as TensorFlow's ObjectGraphView
    // gives them, but the owner is asked object by object: its record of
    // an object is then in cache for the object's second slot.
    const std::vector<std::string> slot_names = owner->SlotNames();
    std::vector<std::vector<std::pair<size_t, std::shared_ptr<Trackable>>>> found(
        slot_names.size());
    for (size_t var = 0; var < num_ordinary; ++var) {
      for (size_t k = 0; k < slot_names.size(); ++k) {
        std::shared_ptr<Trackable> slot = owner->GetSlot(*graph.nodes[var].object, slot_names[k]);
        if (slot) found[k].emplace_back(var, std::move(slot));
      }
    }
    for (size_t k = 0; k < slot_names.size(); ++k) {
      const std::string& slot_name = slot_names[k];
      for (auto& [var, slot] : found[k]) {
        int id = static_cast<int>(graph.nodes.size());
        // A slot that is also an ordinary dependency keeps its first id.
        if (!graph.id_of.emplace(slot.get(), id).second) continue;
        ObjectGraphNode node{.object = std::move(slot),
                             .is_slot = true,
                             .slot_variable_of = static_cast<int>(var),
                             .slot_optimizer = static_cast<int>(opt),
                             .slot_name = slot_name};
        if (full) {
          node.path = graph.nodes[var].path + "/.OPTIMIZER_SLOT/" + graph.nodes[opt].path + "/" +
                      EscapeLocalName(slot_name);
          node.display = graph.nodes[opt].display + "'s state '" + slot_name + "' for " +
                         graph.nodes[var].display;
        }
        graph.nodes.push_back(std::move(node));
      }
    }
  }
  if (full) AddAttributes(graph);
  return graph;
}

void ForEachReachableObject(const std::shared_ptr<Trackable>& root,
                            const std::function<void(const Trackable&)>& visit) {
  // Each object is visited, and asked whether it owns slots, when the walk
  // first reads it, not in passes after the walk: past a few thousand
  // objects each pass found every one of them cold again. The walk keeps
  // plain pointers: an owned child lives as long as its parent tracks it;
  // a referenced one is held here. Copying a shared_ptr per object touched
  // each one twice more (the count up, then down).
  std::vector<const Trackable*> objects{root.get()};
  std::vector<std::shared_ptr<Trackable>> referenced;
  std::vector<const SlotOwner*> owners;
  PointerSet seen;
  seen.Insert(root.get());
  for (size_t i = 0; i < objects.size(); ++i) {
    const Trackable* object = objects[i];
    visit(*object);
    if (const auto* owner = dynamic_cast<const SlotOwner*>(object)) owners.push_back(owner);
    object->ForEachChild([&](const std::shared_ptr<Trackable>& child, bool owned) {
      if (!seen.Insert(child.get())) return;
      objects.push_back(child.get());
      if (!owned) referenced.push_back(child);
    });
  }
  // Object by object, each object's slots one after another: the owner's
  // record of an object is then in cache for its second slot.
  for (const SlotOwner* owner : owners) {
    const std::vector<std::string> slot_names = owner->SlotNames();
    for (const Trackable* variable : objects) {
      for (const std::string& slot_name : slot_names) {
        std::shared_ptr<Trackable> slot = owner->GetSlot(*variable, slot_name);
        if (slot && seen.Insert(slot.get())) visit(*slot);
      }
    }
  }
}

std::string ObjectPath(const ObjectGraph& graph, int id) {
  const ObjectGraphNode& node = graph.nodes[id];
  if (node.is_slot) {
    return ObjectPath(graph, node.slot_variable_of) + "/.OPTIMIZER_SLOT/" +
           ObjectPath(graph, node.slot_optimizer) + "/" + EscapeLocalName(node.slot_name);
  }
  std::vector<int> chain;  // leaf first
  for (int at = id; at > 0; at = graph.nodes[at].parent) chain.push_back(at);
  std::string path;
  for (auto at = chain.rbegin(); at != chain.rend(); ++at) {
    if (!path.empty()) path += '/';
    path += EscapeLocalName(graph.nodes[*at].local_name);
  }
  return path;
}

namespace {

// has_checkpoint_values of every node: its own attributes or slots, or a
// child's (through the children edges, which may form cycles: iterated to
// a fixed point, each pass linear, values only turning true).
std::vector<bool> HasValues(const ObjectGraph& graph) {
  const int n = static_cast<int>(graph.nodes.size());
  std::vector<bool> has_values(n, false);
  for (int id = 0; id < n; ++id) {
    const ObjectGraphNode& node = graph.nodes[id];
    if (!node.attributes.empty()) has_values[id] = true;
    if (node.is_slot) has_values[node.slot_optimizer] = true;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (int id = n - 1; id >= 0; --id) {
      if (has_values[id]) continue;
      for (const auto& [name, child] : graph.nodes[id].children) {
        if (has_values[child]) {
          has_values[id] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return has_values;
}

// The slot nodes of each optimizer node, in id order (as TensorFlow lists
// an optimizer's slot_variables).
std::vector<std::vector<int>> SlotsByOptimizer(const ObjectGraph& graph) {
  std::vector<std::vector<int>> slots(graph.nodes.size());
  for (size_t id = 0; id < graph.nodes.size(); ++id) {
    const ObjectGraphNode& node = graph.nodes[id];
    if (node.is_slot) slots[node.slot_optimizer].push_back(static_cast<int>(id));
  }
  return slots;
}

// Whether attribute a of `node` is written: the parts of a partitioned
// variable are one attribute, one key.
bool WritesAttribute(const ObjectGraphNode& node, size_t a) {
  return a == 0 || node.keys[a] != node.keys[a - 1];
}

// The wire format of TrackableObjectGraph, field by field, as protobuf
// writes it: fields in number order, proto3 zeros and empty strings left
// out, every submessage present. Sizes first, so each length precedes its
// message and the output is sized once.
class ObjectGraphWriter {
 public:
  explicit ObjectGraphWriter(const ObjectGraph& graph)
      : graph_(graph), has_values_(HasValues(graph)), slots_(SlotsByOptimizer(graph)) {}

  StatusOr<std::string> Serialize() const {
    // Each node's size is needed twice, for the total and its length
    // prefix: computed once.
    std::vector<size_t> sizes(graph_.nodes.size());
    size_t total = 0;
    for (size_t id = 0; id < graph_.nodes.size(); ++id) {
      sizes[id] = NodeSize(id);
      total += Message(sizes[id]);
    }
    // Protobuf's limit, which TensorFlow's reader has too.
    if (total > static_cast<size_t>(std::numeric_limits<int>::max())) {
      return InvalidArgumentError("the object graph of ", graph_.nodes.size(), " objects takes ",
                                  total, " bytes, over protobuf's limit of 2 GiB");
    }
    std::string out(total, '\0');
    google::protobuf::io::ArrayOutputStream array(out.data(), static_cast<int>(out.size()));
    google::protobuf::io::CodedOutputStream o(&array);
    for (size_t id = 0; id < graph_.nodes.size(); ++id) WriteNode(o, id, sizes[id]);
    return out;
  }

 private:
  using Coded = google::protobuf::io::CodedOutputStream;
  enum WireType : uint32_t { kVarint = 0, kLengthDelimited = 2 };

  static size_t Int(int32_t v) { return v == 0 ? 0 : 1 + Coded::VarintSize32SignExtended(v); }
  static size_t Bytes(size_t n) {
    return n == 0 ? 0 : 1 + Coded::VarintSize32(static_cast<uint32_t>(n)) + n;
  }
  static size_t Bytes(std::string_view s) { return Bytes(s.size()); }
  static size_t Message(size_t body) {
    return 1 + Coded::VarintSize32(static_cast<uint32_t>(body)) + body;
  }
  static void WriteInt(Coded& o, uint32_t field, int32_t v) {
    if (v == 0) return;
    o.WriteTag(field << 3 | kVarint);
    o.WriteVarint32SignExtended(v);
  }
  static void WriteBytes(Coded& o, uint32_t field, std::string_view s) {
    if (s.empty()) return;
    o.WriteTag(field << 3 | kLengthDelimited);
    o.WriteVarint32(static_cast<uint32_t>(s.size()));
    o.WriteRaw(s.data(), static_cast<int>(s.size()));
  }
  static void WriteMessage(Coded& o, uint32_t field, size_t body) {
    o.WriteTag(field << 3 | kLengthDelimited);
    o.WriteVarint32(static_cast<uint32_t>(body));
  }

  // ObjectReference, SerializedTensor, SlotVariableReference, BoolValue.
  static size_t ChildSize(const std::pair<std::string, int>& c) {
    return Int(c.second) + Bytes(c.first);
  }
  // TensorFlow stores the attribute name escaped once; the key escapes it
  // again (save_util._get_tensors_from_trackable). Sized without building
  // the escaped name: EscapeLocalName writes "." and "/" as two bytes each.
  static size_t EscapedSize(std::string_view name) {
    size_t size = name.size();
    for (char c : name) size += c == '.' || c == '/';
    return size;
  }
  static size_t AttributeSize(const ObjectGraphNode& node, size_t a) {
    return Bytes(EscapedSize(node.attributes[a].name)) + Bytes(node.attributes[a].full_name) +
           Bytes(node.keys[a]);
  }
  size_t SlotSize(int slot) const {
    const ObjectGraphNode& s = graph_.nodes[slot];
    return Int(s.slot_variable_of) + Bytes(s.slot_name) + Int(slot);
  }
  size_t FlagSize(size_t id) const { return has_values_[id] ? 2 : 0; }

  size_t NodeSize(size_t id) const {
    const ObjectGraphNode& node = graph_.nodes[id];
    size_t size = 0;
    for (const auto& child : node.children) size += Message(ChildSize(child));
    for (size_t a = 0; a < node.attributes.size(); ++a) {
      if (WritesAttribute(node, a)) size += Message(AttributeSize(node, a));
    }
    for (int slot : slots_[id]) size += Message(SlotSize(slot));
    return size + Message(FlagSize(id));
  }

  void WriteNode(Coded& o, size_t id, size_t size) const {
    const ObjectGraphNode& node = graph_.nodes[id];
    WriteMessage(o, 1, size);
    for (const auto& child : node.children) {
      WriteMessage(o, 1, ChildSize(child));
      WriteInt(o, 1, child.second);
      WriteBytes(o, 2, child.first);
    }
    for (size_t a = 0; a < node.attributes.size(); ++a) {
      if (!WritesAttribute(node, a)) continue;
      WriteMessage(o, 2, AttributeSize(node, a));
      WriteBytes(o, 1, EscapeLocalName(node.attributes[a].name));
      WriteBytes(o, 2, node.attributes[a].full_name);
      WriteBytes(o, 3, node.keys[a]);
    }
    for (int slot : slots_[id]) {
      const ObjectGraphNode& s = graph_.nodes[slot];
      WriteMessage(o, 3, SlotSize(slot));
      WriteInt(o, 1, s.slot_variable_of);
      WriteBytes(o, 2, s.slot_name);
      WriteInt(o, 3, slot);
    }
    WriteMessage(o, 5, FlagSize(id));
    if (has_values_[id]) {
      o.WriteTag(1 << 3 | kVarint);
      o.WriteVarint32(1);
    }
  }

  const ObjectGraph& graph_;
  const std::vector<bool> has_values_;
  const std::vector<std::vector<int>> slots_;
};

}  // namespace

tensorflow::TrackableObjectGraph ToProto(const ObjectGraph& graph) {
  tensorflow::TrackableObjectGraph proto;
  const std::vector<bool> has_values = HasValues(graph);
  const std::vector<std::vector<int>> slots = SlotsByOptimizer(graph);
  for (size_t id = 0; id < graph.nodes.size(); ++id) {
    const ObjectGraphNode& node = graph.nodes[id];
    auto* out = proto.add_nodes();
    for (const auto& [name, child] : node.children) {
      auto* ref = out->add_children();
      ref->set_node_id(child);
      ref->set_local_name(name);
    }
    for (size_t a = 0; a < node.attributes.size(); ++a) {
      if (!WritesAttribute(node, a)) continue;
      auto* attr = out->add_attributes();
      attr->set_name(EscapeLocalName(node.attributes[a].name));
      attr->set_full_name(node.attributes[a].full_name);
      attr->set_checkpoint_key(node.keys[a]);
    }
    for (int slot : slots[id]) {
      auto* ref = out->add_slot_variables();
      ref->set_original_variable_node_id(graph.nodes[slot].slot_variable_of);
      ref->set_slot_name(graph.nodes[slot].slot_name);
      ref->set_slot_variable_node_id(slot);
    }
    out->mutable_has_checkpoint_values()->set_value(has_values[id]);
  }
  return proto;
}

StatusOr<std::string> SerializeObjectGraph(const ObjectGraph& graph) {
  return ObjectGraphWriter(graph).Serialize();
}

std::vector<std::string> CheckpointNodeNames(const StoredObjectGraph& graph) {
  const int n = graph.nodes_size();
  std::vector<std::string> names(n);
  if (n == 0) return names;
  std::vector<bool> seen(n, false);
  std::deque<int> queue{0};
  names[0] = "(root)";
  seen[0] = true;
  while (!queue.empty()) {
    int id = queue.front();
    queue.pop_front();
    for (const auto& child : graph.nodes(id).children()) {
      int c = child.node_id();
      if (c < 0 || c >= n || seen[c]) continue;
      seen[c] = true;
      names[c] = names[id] + "." + std::string(child.local_name());
      queue.push_back(c);
    }
  }
  for (int id = 0; id < n; ++id) {
    for (const auto& slot : graph.nodes(id).slot_variables()) {
      int s = slot.slot_variable_node_id();
      int v = slot.original_variable_node_id();
      if (s < 0 || s >= n || v < 0 || v >= n) continue;
      names[s] = names[id] + "'s state '" + std::string(slot.slot_name()) + "' for " + names[v];
    }
  }
  for (int id = 0; id < n; ++id) {
    if (names[id].empty()) names[id] = "(node " + std::to_string(id) + ")";
  }
  return names;
}

}  // namespace ckflow::internal
