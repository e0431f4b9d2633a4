// The object graph of an object-based checkpoint (the TrackableObjectGraph
// stored under _CHECKPOINTABLE_OBJECT_GRAPH): read as plain data
// (ReadCheckpointObjectGraph), or rendered for people and tools as an
// indented tree of edge names, as JSON, or as Graphviz DOT.
//
// The graph may share nodes and contain cycles. Each node is shown once,
// under the edge a breadth-first walk from the root meets first (the edge
// that gives it its checkpoint key, as in TensorFlow); every other edge to it
// is shown as a reference to that path. Slot variables are shown under their
// optimizer, naming the variable they belong to. Each value shows its
// checkpoint key, dtype and shape, or that the bundle lacks the key.
//
//   (root)
//     child
//       parent -> (root)
//       my_variable  float32[]  child/my_variable/.ATTRIBUTES/VARIABLE_VALUE
//     signatures
//   4 objects, 1 value
//
// The graph is parsed and checked by ParseCheckpointObjectGraph
// (checkpoint_object_graph_internal.h), as a restore parses it.
//
// Thread safety: pure functions of the (thread-safe) reader.

#ifndef CKFLOW_BUNDLE_OBJECT_TREE_H_
#define CKFLOW_BUNDLE_OBJECT_TREE_H_

#include <string>
#include <vector>

#include "base/status.h"
#include "bundle/bundle_reader.h"

namespace ckflow {

// The object graph of an object-based checkpoint as plain data: what
// `ckflow tree --json` prints, for programs. Node ids are the checkpoint's
// (TrackableObjectGraph's) node numbers; node 0 is the root. The graph may
// share nodes and contain cycles; ids are checked to be in range.
struct CheckpointObjectGraph {
  struct Child {
    std::string local_name;  // the edge's name ("dense", "kernel")
    int node_id = -1;
  };
  struct Attribute {
    std::string name;            // "VARIABLE_VALUE" (as stored: escaped once)
    std::string full_name;       // the variable's name, as a name-based Saver keys it
    std::string checkpoint_key;  // the bundle key of its value
  };
  // A slot variable an optimizer node keeps for a variable node.
  struct SlotVariable {
    int original_variable_node_id = -1;
    int slot_variable_node_id = -1;
    std::string slot_name;  // "m", "v", "momentum"
  };
  struct Node {
    // How TensorFlow names the node in messages: "(root).model.dense" by
    // the first path a breadth-first walk from the root meets, "<optimizer>'s
    // state 'm' for <variable>" for a slot, "(unreachable node N)" otherwise.
    std::string path;
    std::vector<Child> children;
    std::vector<Attribute> attributes;
    std::vector<SlotVariable> slot_variables;  // for an optimizer node
  };
  std::vector<Node> nodes;
};

// Reads the object graph of `reader`'s checkpoint. Errors as
// RenderObjectGraph's.
StatusOr<CheckpointObjectGraph> ReadCheckpointObjectGraph(const BundleReader& reader);

enum class ObjectGraphFormat {
  kTree,  // indented text, as above
  kJson,  // {"objects":N,"values":V,"missing_values":M,"root":{...}}
  kDot,   // digraph; shared and cyclic edges dashed, slot edges blue
};

// NotFound if the checkpoint has no object graph (a name-based, TF1 Saver
// checkpoint); DataLoss if the graph does not parse or refers to nodes that
// do not exist; read errors of the graph's entry.
StatusOr<std::string> RenderObjectGraph(const BundleReader& reader, ObjectGraphFormat format);

}  // namespace ckflow

#endif  // CKFLOW_BUNDLE_OBJECT_TREE_H_
