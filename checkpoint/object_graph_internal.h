// The object graph as a checkpoint sees it: TensorFlow's ObjectGraphView and
// its serialization into a TrackableObjectGraph proto.
//
// Node ids come from a breadth-first walk from the root, children in
// tracking order; an object reachable by two paths is one node, named by
// the first path the walk meets. Slot variables are appended after every
// ordinary node: for each optimizer (in id order), each slot name (sorted),
// each variable (in id order) that has that slot.
//
// Keys: an object's path is its edge names from the root, each escaped
// ('.' -> '..', then '/' -> '.S'), joined by '/'; a slot's path is
// "<variable path>/.OPTIMIZER_SLOT/<optimizer path>/<slot name>"; a value's
// key is "<path>/.ATTRIBUTES/<attribute name>".

#ifndef CKFLOW_CHECKPOINT_OBJECT_GRAPH_INTERNAL_H_
#define CKFLOW_CHECKPOINT_OBJECT_GRAPH_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "bundle/bundle_format.h"
#include "bundle/checkpoint_object_graph_internal.h"
#include "bundle/protos/trackable_object_graph.pb.h"
#include "graph/trackable.h"

namespace ckflow::internal {

using ::ckflow::EscapeLocalName;  // '.' -> '..', then '/' -> '.S' (bundle_format.h)
// The key of attribute `attribute_name` of the object at `object_path`.
std::string AttributeKey(std::string_view object_path, std::string_view attribute_name);

struct ObjectGraphNode {
  std::shared_ptr<Trackable> object;
  std::string path;     // escaped key path; "" for the root
  std::string display;  // "(root).model.dense.kernel", for messages
  // The edge the walk first reached an ordinary node by (-1 and "" for the
  // root and slots), in both details: ObjectPath rebuilds `path` from them.
  int parent = -1;
  std::string local_name;
  std::vector<std::pair<std::string, int>> children;  // every edge, in order
  std::vector<SaveableAttribute> attributes;
  std::vector<std::string> keys;  // parallel to attributes
  bool is_slot = false;
  // For slot nodes: the original variable and optimizer node ids.
  int slot_variable_of = -1;
  int slot_optimizer = -1;
  std::string slot_name;
};

struct ObjectGraph {
  std::vector<ObjectGraphNode> nodes;  // node 0 is the root
  std::unordered_map<const Trackable*, int> id_of;
  // Every (key, attribute, node id) to save, in node order.
  struct Value {
    std::string key;
    SaveableAttribute attribute;
    int node = -1;
  };
  std::vector<Value> values;
  // The first object's refused Track (Trackable::tracking_status), with its
  // path: a save must not write a graph that silently lacks the child.
  Status tracking_status;
};

// A value's size as its attribute declares it (saturating); 0 when its
// shape is unknown. What placement on a group's members and the split into
// data files weigh values by.
int64_t DeclaredBytes(const SaveableAttribute& attribute);

// Walks the objects reachable from `root` (children, then slots). With
// kObjectsOnly the nodes carry only their object and slot links (no paths,
// names, attributes or values): the cheap walk restore uses to find what
// exists now.
enum class ObjectGraphDetail { kFull, kObjectsOnly };
ObjectGraph BuildObjectGraph(const std::shared_ptr<Trackable>& root,
                             ObjectGraphDetail detail = ObjectGraphDetail::kFull);
// Calls visit on each object BuildObjectGraph would reach, and nothing
// else, once: for a caller that needs only the objects (the initializers a
// restore leaves to run), without a node, path or index entry per object.
// Ordinary objects come first, breadth first with children in tracking
// order (ForEachChild, which may differ from the graph's where a subclass
// reorders Children()), then slots: copying each object's children with
// their names was most of this walk's memory for a module of 20,000
// variables.
void ForEachReachableObject(const std::shared_ptr<Trackable>& root,
                            const std::function<void(const Trackable&)>& visit);
// The escaped key path of node `id` ("" for the root), from the parent
// links: what a kObjectsOnly walk's caller uses to name the few nodes it
// reports without building every path.
std::string ObjectPath(const ObjectGraph& graph, int id);
// For tests: how many kFull graphs BuildObjectGraph has built in this
// process (a save of an unchanged model builds none).
int64_t NumFullObjectGraphBuilds();

// The TrackableObjectGraph proto TensorFlow would write for `graph`,
// has_checkpoint_values set on every node.
tensorflow::TrackableObjectGraph ToProto(const ObjectGraph& graph);
// ToProto(graph) serialized, written straight from the graph: the same
// bytes without a message per node, attribute and edge (for 20,000
// variables those took 10.9 MiB, most of a first save's peak).
// InvalidArgument past protobuf's 2 GiB.
StatusOr<std::string> SerializeObjectGraph(const ObjectGraph& graph);

// "(root).a.b" names of a checkpoint's nodes (BFS over the children from
// node 0, slots named "<optimizer>'s state '<slot>' for <variable>"), as
// TensorFlow names them in warnings.
std::vector<std::string> CheckpointNodeNames(const StoredObjectGraph& graph);

}  // namespace ckflow::internal

#endif  // CKFLOW_CHECKPOINT_OBJECT_GRAPH_INTERNAL_H_
