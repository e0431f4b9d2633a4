// The object graph an object-based checkpoint stores under
// _CHECKPOINTABLE_OBJECT_GRAPH (a serialized tensorflow.TrackableObjectGraph),
// parsed and checked: the one parser of it, for the restore
// (checkpoint/load_status.cc) and for the tools (object_tree.h).
//
// The graph is read in place: every name is a view into the serialized
// bytes, which the graph keeps, and each node's children, attributes and
// slot variables are ranges of three flat arrays. Parsed into protobuf
// messages, 20,000 variables' nodes took ~17 MB of small allocations for
// 1.7 MB of bytes, a tenth of a restore's time in a new process spent
// faulting those pages in (checkpoint/NOTES.md). The accessors keep the
// generated message's names, so code reads as it would over the proto.
//
// Thread safety: immutable once parsed.

#ifndef CKFLOW_BUNDLE_CHECKPOINT_OBJECT_GRAPH_INTERNAL_H_
#define CKFLOW_BUNDLE_CHECKPOINT_OBJECT_GRAPH_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "bundle/bundle_reader.h"

namespace ckflow::internal {

class StoredObjectGraph {
 public:
  // TrackableObject.ObjectReference.
  struct Child {
    int node_id() const { return node_id_; }
    std::string_view local_name() const { return local_name_; }

    int node_id_ = 0;
    std::string_view local_name_;
  };
  // TrackableObject.SerializedTensor (optional_restore is not kept: a
  // restore here treats every value alike).
  struct Attribute {
    std::string_view name() const { return name_; }
    std::string_view full_name() const { return full_name_; }
    std::string_view checkpoint_key() const { return checkpoint_key_; }

    std::string_view name_, full_name_, checkpoint_key_;
  };
  // TrackableObject.SlotVariableReference.
  struct SlotVariable {
    int original_variable_node_id() const { return original_variable_node_id_; }
    int slot_variable_node_id() const { return slot_variable_node_id_; }
    std::string_view slot_name() const { return slot_name_; }

    int original_variable_node_id_ = 0;
    int slot_variable_node_id_ = 0;
    std::string_view slot_name_;
  };
  // RegisteredSaver.
  struct RegisteredSaver {
    std::string_view name() const { return name_; }
    std::string_view object_name() const { return object_name_; }

    std::string_view name_, object_name_;
  };

  // TrackableObject: a view, valid while the graph lives.
  class Node {
   public:
    std::span<const Child> children() const { return children_; }
    int children_size() const { return static_cast<int>(children_.size()); }
    const Child& children(int i) const { return children_[i]; }
    std::span<const Attribute> attributes() const { return attributes_; }
    int attributes_size() const { return static_cast<int>(attributes_.size()); }
    const Attribute& attributes(int i) const { return attributes_[i]; }
    std::span<const SlotVariable> slot_variables() const { return slots_; }
    int slot_variables_size() const { return static_cast<int>(slots_.size()); }
    const SlotVariable& slot_variables(int i) const { return slots_[i]; }
    bool has_registered_saver() const { return saver_ != nullptr; }
    const RegisteredSaver& registered_saver() const { return *saver_; }
    // Written for every node by TensorFlow >= 2.10; absent before.
    std::optional<bool> has_checkpoint_values() const { return has_values_; }

   private:
    friend class StoredObjectGraph;
    std::span<const Child> children_;
    std::span<const Attribute> attributes_;
    std::span<const SlotVariable> slots_;
    const RegisteredSaver* saver_ = nullptr;
    std::optional<bool> has_values_;
  };

  // Parses `bytes`, a serialized TrackableObjectGraph. Fields it does not
  // know are skipped, as protobuf does; false if the bytes are not a
  // TrackableObjectGraph (a truncated field, a bad wire type, a length past
  // the end). Node ids are not checked here.
  static std::unique_ptr<StoredObjectGraph> Parse(std::string bytes);

  int nodes_size() const { return static_cast<int>(nodes_.size()); }
  Node nodes(int id) const;

  StoredObjectGraph(const StoredObjectGraph&) = delete;
  StoredObjectGraph& operator=(const StoredObjectGraph&) = delete;

 private:
  // Where node i's ranges end in the flat arrays; they begin where node
  // i - 1's end.
  struct NodeRecord {
    uint32_t children_end = 0;
    uint32_t attributes_end = 0;
    uint32_t slots_end = 0;
    int32_t saver = -1;      // index into savers_, -1 if none
    int8_t has_values = -1;  // -1 absent, else 0 or 1
  };
  class Parser;

  StoredObjectGraph() = default;

  std::string bytes_;  // what every view points into; never moved again
  std::vector<NodeRecord> nodes_;
  std::vector<Child> children_;
  std::vector<Attribute> attributes_;
  std::vector<SlotVariable> slots_;
  std::vector<RegisteredSaver> savers_;
};

// The object graph of `reader`'s checkpoint (`reader` may have been opened
// with only_key = kObjectGraphKey); null if the checkpoint stores none (a
// name-based checkpoint, written by a TensorFlow 1 Saver). Every child and
// slot variable is checked to name a node of the graph; the graph may still
// share nodes, contain cycles or have no nodes at all. DataLoss, naming the
// file, if the value is not a string scalar, does not parse, or names a node
// that does not exist; errors reading the entry as they come.
StatusOr<std::unique_ptr<const StoredObjectGraph>> ParseCheckpointObjectGraph(
    const BundleReader& reader);

}  // namespace ckflow::internal

#endif  // CKFLOW_BUNDLE_CHECKPOINT_OBJECT_GRAPH_INTERNAL_H_
