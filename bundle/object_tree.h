// Renders the object graph of an object-based checkpoint (the
// TrackableObjectGraph stored under _CHECKPOINTABLE_OBJECT_GRAPH) for people
// and tools: as an indented tree of edge names, as JSON, or as Graphviz DOT.
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
// Thread safety: pure functions of the (thread-safe) reader.

#ifndef CKFLOW_BUNDLE_OBJECT_TREE_H_
#define CKFLOW_BUNDLE_OBJECT_TREE_H_

#include <string>

#include "bundle/bundle_reader.h"
#include "base/status.h"

namespace ckflow {

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
