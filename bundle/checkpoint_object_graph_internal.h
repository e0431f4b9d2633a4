// The object graph an object-based checkpoint stores under
// _CHECKPOINTABLE_OBJECT_GRAPH (a serialized tensorflow.TrackableObjectGraph),
// parsed and checked: the one parser of it, for the restore
// (checkpoint/load_status.cc) and for the tools (object_tree.h).
//
// Thread safety: a pure function of the (thread-safe) reader.

#ifndef CKFLOW_BUNDLE_CHECKPOINT_OBJECT_GRAPH_INTERNAL_H_
#define CKFLOW_BUNDLE_CHECKPOINT_OBJECT_GRAPH_INTERNAL_H_

#include <google/protobuf/arena.h>

#include <memory>

#include "base/status.h"
#include "bundle/bundle_reader.h"
#include "bundle/protos/trackable_object_graph.pb.h"

namespace ckflow::internal {

struct ParsedObjectGraph {
  // One allocation for tens of thousands of nodes, and no per-node teardown.
  std::unique_ptr<google::protobuf::Arena> arena;
  // In `arena`; null if the checkpoint stores no object graph (a
  // name-based checkpoint, written by a TensorFlow 1 Saver).
  const tensorflow::TrackableObjectGraph* proto = nullptr;
};

// The object graph of `reader`'s checkpoint (`reader` may have been opened
// with only_key = kObjectGraphKey). Every child and slot variable is checked
// to name a node of the graph; the graph may still share nodes, contain
// cycles or have no nodes at all. DataLoss, naming the file, if the value is
// not a string scalar, does not parse, or names a node that does not exist;
// errors reading the entry as they come.
StatusOr<ParsedObjectGraph> ParseCheckpointObjectGraph(const BundleReader& reader);

}  // namespace ckflow::internal

#endif  // CKFLOW_BUNDLE_CHECKPOINT_OBJECT_GRAPH_INTERNAL_H_
