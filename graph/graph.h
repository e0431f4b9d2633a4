// The dataflow graph and the Scope that builds it.
//
//   Scope root = Scope::NewRootScope();
//   Scope dense = root.NewSubScope("dense");
//   Output y = MatMul(dense, x, w);          // node "dense/MatMul"
//   Output z = Add(dense.WithOpName("z"), y, b);
//   if (!root.ok()) ... root.status() names the node and the mismatch
//
// A Graph owns its Nodes; Output (node + output index) is a light handle.
// Every node is checked when it is added: its OpDef's shape function infers
// output dtypes and shapes from its inputs, so Add(float32, int32) or
// MatMul([2,3], [4,5]) fails at build time. Errors are sticky, as in
// TensorFlow's C++ Scope: the first one is kept in the graph, later builder
// calls return invalid Outputs, and Session::Create on the graph returns it.
//
// Names: op type by default, inside "/"-joined name scopes; a name already
// taken gets "_1", "_2"... appended, like TensorFlow. A name given with
// WithOpName must be free, or the build fails with AlreadyExists.
//
// Thread safety: building is single-threaded. A Graph may be read (by
// sessions) while it is extended from one thread: nodes are only ever added,
// never changed or removed, and node storage never moves.

#ifndef CKFLOW_GRAPH_GRAPH_H_
#define CKFLOW_GRAPH_GRAPH_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <typeindex>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "base/tensor.h"
#include "graph/eager.h"
#include "graph/op_def.h"

namespace ckflow {

class Graph;
class Node;

// One output of a node. Default-constructed (or returned by a failed build
// step) it is invalid: node() == nullptr.
class Output {
 public:
  Output() = default;
  Output(Node* node, int index = 0);  // NOLINT

  Node* node() const { return node_; }
  int index() const { return index_; }
  bool valid() const { return node_ != nullptr; }
  DataType dtype() const;             // REQUIRES: valid()
  const PartialShape& shape() const;  // REQUIRES: valid()
  std::string name() const;           // "scope/node:0"
  // The value an eager scope computed for this output; an invalid Tensor
  // for an output of a graph-mode node (run those in a Session).
  Tensor value() const;

  friend bool operator==(const Output& a, const Output& b) {
    return a.node_ == b.node_ && a.index_ == b.index_;
  }

 private:
  Node* node_ = nullptr;
  int index_ = 0;
  // Owns a transient (eager) node; null for graph nodes, which the graph owns.
  std::shared_ptr<Node> owner_;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  int id() const { return id_; }
  const std::string& name() const { return name_; }
  const std::string& type() const { return op_def_->type; }
  const OpDef& op_def() const { return *op_def_; }
  const std::string& device() const { return device_; }
  const AttrMap& attrs() const { return attrs_; }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const Output& input(int i) const { return inputs_[i]; }
  const std::vector<Output>& inputs() const { return inputs_; }
  const std::vector<Node*>& control_inputs() const { return control_inputs_; }

  int num_outputs() const { return static_cast<int>(output_types_.size()); }
  DataType output_type(int i) const { return output_types_[i]; }
  const PartialShape& output_shape(int i) const { return output_shapes_[i]; }

  Graph& graph() const { return *graph_; }

  // Built by an eager scope: owned by the Outputs that refer to it, not by
  // the graph (graph/eager.h); id() is -1.
  bool transient() const { return transient_; }
  // Whether an eager context ran this node; then value(i) is output i.
  bool has_values() const { return !values_.empty(); }
  const Tensor& value(int i) const { return values_[i]; }  // REQUIRES: has_values()

 private:
  friend class Graph;
  friend class EagerContext;
  Node() = default;

  Graph* graph_ = nullptr;
  int id_ = -1;
  std::string name_;
  const OpDef* op_def_ = nullptr;
  std::string device_;
  AttrMap attrs_;
  std::vector<Output> inputs_;
  std::vector<Node*> control_inputs_;
  std::vector<DataType> output_types_;
  std::vector<PartialShape> output_shapes_;
  bool transient_ = false;
  std::vector<Tensor> values_;  // set once, by EagerContext::Execute
  int input_holds_ = 0;         // see EagerContext::HoldInputs
};

inline Output::Output(Node* node, int index) : node_(node), index_(index) {
  if (node != nullptr && node->transient()) owner_ = node->shared_from_this();
}

// Per-graph state that higher layers keep with the graph (the list of
// variables, creation hooks). Subclass it; Graph::Attachment<T>() owns one T.
class GraphAttachment {
 public:
  virtual ~GraphAttachment() = default;
};

// What Graph::AddNode needs to create a node.
struct NodeSpec {
  std::string name;  // exact, must be free
  const OpDef* op_def = nullptr;
  std::vector<Output> inputs;
  std::vector<Node*> control_inputs;
  AttrMap attrs;
  std::string device;
  // An eager scope's node (graph/eager.h): not kept by the graph, its name
  // not reserved.
  bool transient = false;
};

class Graph : public std::enable_shared_from_this<Graph> {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Validates the spec (inputs from this graph, valid outputs), runs the shape
  // function and appends the node. Errors name the node. Does not touch the
  // sticky status; Scope does that.
  StatusOr<Node*> AddNode(NodeSpec spec) CKFLOW_EXCLUDES(mu_);
  // A transient node (spec.transient is implied) that the returned Output
  // keeps alive, in any graph: what a session's remapper runs in place of
  // a chain of the graph's nodes. Errors as AddNode's.
  StatusOr<Output> AddTransientNode(NodeSpec spec) CKFLOW_EXCLUDES(mu_);

  int num_nodes() const CKFLOW_EXCLUDES(mu_);
  // REQUIRES: 0 <= id < num_nodes().
  Node* node(int id) const CKFLOW_EXCLUDES(mu_);
  // nullptr if there is no node of that name.
  Node* FindNode(std::string_view name) const CKFLOW_EXCLUDES(mu_);
  // `base` if free, else base_1, base_2, ... (the first free one). Reserves
  // the returned name.
  std::string UniqueName(std::string_view base) CKFLOW_EXCLUDES(mu_);
  // The name UniqueName would return, without reserving it (an eager
  // graph's name scopes: reserved only once a variable is created in them).
  std::string FreeName(std::string_view base) CKFLOW_EXCLUDES(mu_);
  bool IsNameUsed(std::string_view name) const CKFLOW_EXCLUDES(mu_);

  // The first build error, or OK. Session::Create returns it.
  Status status() const CKFLOW_EXCLUDES(mu_);
  void RecordError(const Status& error) CKFLOW_EXCLUDES(mu_);  // keeps only the first

  // Graph-level random seed (TensorFlow's tf.set_random_seed). Ops seeded
  // with neither a graph nor an op seed draw a fresh seed per graph.
  std::optional<int64_t> seed() const { return seed_; }
  void set_seed(int64_t seed) { seed_ = seed; }

  // The graph's one T (a GraphAttachment subclass), created on first use.
  template <typename T>
  T& Attachment() CKFLOW_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    std::unique_ptr<GraphAttachment>& slot = attachments_[std::type_index(typeid(T))];
    if (!slot) slot = std::make_unique<T>();
    return static_cast<T&>(*slot);
  }

  // The context of a graph made by Scope::NewEagerScope, else null.
  EagerContext* eager_context() const { return eager_.get(); }

  // Graphviz DOT text: one node per op, edges for data (solid) and control
  // (dashed) inputs, name scopes as nested clusters.
  std::string ToDot() const CKFLOW_EXCLUDES(mu_);

 private:
  // AddNode; a transient node goes to *transient_owner when it is given.
  StatusOr<Node*> AddNode(NodeSpec spec, std::shared_ptr<Node>* transient_owner)
      CKFLOW_EXCLUDES(mu_);

  // Against readers on other threads while the building thread adds nodes.
  mutable Mutex mu_;
  std::deque<std::unique_ptr<Node>> nodes_ CKFLOW_GUARDED_BY(mu_);  // deque: pointers never move
  std::unordered_map<std::string, Node*> by_name_ CKFLOW_GUARDED_BY(mu_);
  // Reserved names → next suffix.
  std::unordered_map<std::string, int> names_ CKFLOW_GUARDED_BY(mu_);
  Status status_ CKFLOW_GUARDED_BY(mu_);
  std::optional<int64_t> seed_;
  std::unordered_map<std::type_index, std::unique_ptr<GraphAttachment>> attachments_
      CKFLOW_GUARDED_BY(mu_);
  std::unique_ptr<EagerContext> eager_;  // set once, by Scope::NewEagerScope
  friend class Scope;
};

// A position in a graph for building: name scope, control dependencies and
// device that apply to the nodes built through it. Cheap to copy; all scopes
// derived from one root share its Graph.
class Scope {
 public:
  // A new empty graph owned by the returned scope (and its copies).
  static Scope NewRootScope();
  // A new graph whose ops run when they are built (graph/eager.h);
  // `file_system` is its kernels' (null: FileSystem::Default()).
  static Scope NewEagerScope(FileSystem* file_system = nullptr);

  // A sub scope "name" (made unique: "name_1" if taken) under this one.
  Scope NewSubScope(std::string_view name) const;
  // The next node built through the returned scope is named exactly `name`
  // (inside this scope's name scope).
  Scope WithOpName(std::string_view name) const;
  // Nodes built through the returned scope run after `deps` (in addition to
  // any control dependencies this scope has).
  Scope WithControlDependencies(const std::vector<Output>& deps) const;
  Scope WithNoControlDependencies() const;
  Scope WithDevice(std::string_view device) const;
  // A scope on the same graph with no name scope, control dependencies or
  // device: where TensorFlow puts variables that belong to no caller's scope
  // (an optimizer's slots "dense/kernel/Adam", its beta1_power).
  Scope Root() const;
  // A root scope on an existing graph (one made by NewRootScope); for code
  // that holds graph objects but no scope. FailedPrecondition if the graph is
  // not owned by a shared_ptr.
  static StatusOr<Scope> ForGraph(Graph& graph);
  // A copy that does not keep the graph alive, for objects the graph itself
  // owns (attachments): an owning scope there would be a reference cycle.
  // REQUIRES: the graph outlives the copy.
  Scope Unowned() const {
    Scope s = *this;
    s.graph_ = std::shared_ptr<Graph>(std::shared_ptr<Graph>(), graph_.get());
    return s;
  }

  Graph& graph() const { return *graph_; }
  std::shared_ptr<Graph> shared_graph() const { return graph_; }
  // Whether nodes built through this scope run at once (graph/eager.h).
  bool eager() const { return eager_; }
  // The eager graph's context (variables' values), or null.
  EagerContext* eager_context() const { return graph_->eager_context(); }
  // This scope building graph-mode nodes, which a Session runs: on an eager
  // graph, for ops that must run many times (a checkpoint's save ops) on
  // the eager variables.
  Scope WithoutExecution() const {
    Scope s = *this;
    s.eager_ = false;
    return s;
  }
  bool ok() const { return graph_->status().ok(); }
  Status status() const { return graph_->status(); }
  void UpdateStatus(const Status& s) const { graph_->RecordError(s); }

  const std::string& name_prefix() const { return prefix_; }  // "a/b" or ""
  const std::string& device() const { return device_; }
  // The full name for a node of op type `op_type` built through this scope:
  // the WithOpName name if given (AlreadyExists if taken), else the op type
  // made unique.
  StatusOr<std::string> NameForNode(std::string_view op_type) const;

  // Builds a node of `def` through this scope: name, control dependencies and
  // device from the scope. Returns nullptr, and records the error in the
  // graph, if the scope already has an error, an input is invalid, or the
  // shape function rejects the inputs. An eager scope then runs the node
  // (an error of its kernel is recorded the same way).
  Node* AddNode(const OpDef& def, std::vector<Output> inputs, AttrMap attrs = {}) const;

 private:
  explicit Scope(std::shared_ptr<Graph> graph) : graph_(std::move(graph)) {}

  std::shared_ptr<Graph> graph_;
  std::string prefix_;
  std::string op_name_;  // set by WithOpName
  std::vector<Node*> control_deps_;
  std::string device_;
  bool eager_ = false;
};

}  // namespace ckflow

#endif  // CKFLOW_GRAPH_GRAPH_H_
