#include "graph/graph.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace ckflow {

DataType Output::dtype() const { return node_->output_type(index_); }

const PartialShape& Output::shape() const { return node_->output_shape(index_); }

std::string Output::name() const {
  if (node_ == nullptr) return "<invalid>";
  return node_->name() + ":" + std::to_string(index_);
}

Tensor Output::value() const {
  if (node_ == nullptr || !node_->has_values()) return Tensor();
  return node_->value(index_);
}

namespace {

// The elements of a rank-1 int32/int64 tensor, as dimensions (negative:
// unknown).
std::optional<PartialShape> ShapeOfValues(const Tensor& t) {
  if (t.shape().rank() != 1) return std::nullopt;
  std::vector<int64_t> dims;
  if (t.dtype() == DT_INT32) {
    for (int32_t v : t.flat<int32_t>()) dims.push_back(v < 0 ? -1 : v);
  } else if (t.dtype() == DT_INT64) {
    for (int64_t v : t.flat<int64_t>()) dims.push_back(v < 0 ? -1 : v);
  } else {
    return std::nullopt;
  }
  return PartialShape(std::move(dims));
}

// The value of `out` read as a shape, as far as the graph knows it
// statically (InferenceContext::input_shape_values): a walk over the few
// ops shape arithmetic is made of, bounded in depth.
std::optional<PartialShape> ShapeValueOf(const Output& out, int depth = 0) {
  if (depth > 16 || (out.dtype() != DT_INT32 && out.dtype() != DT_INT64)) return std::nullopt;
  const Node& node = *out.node();
  if (node.has_values()) return ShapeOfValues(node.value(out.index()));
  const std::string& type = node.type();
  if (type == "Const") {
    const AttrValue* v = node.attrs().Find("value");
    const Tensor* t = v == nullptr ? nullptr : std::get_if<Tensor>(v);
    return t == nullptr ? std::nullopt : ShapeOfValues(*t);
  }
  if (type == "Shape") {
    const PartialShape& shape = node.input(0).shape();
    if (!shape.known_rank()) return std::nullopt;
    return shape;
  }
  if (type == "Identity" || type == "Cast") return ShapeValueOf(node.input(0), depth + 1);
  if (type == "ConcatV2") {
    const int n = node.num_inputs() - 1;  // the last input is the axis
    std::vector<int64_t> dims;
    for (int i = 0; i < n; ++i) {
      std::optional<PartialShape> piece = ShapeValueOf(node.input(i), depth + 1);
      if (!piece || !piece->known_rank()) return std::nullopt;
      for (int d = 0; d < piece->rank(); ++d) dims.push_back(piece->dim(d));
    }
    return PartialShape(std::move(dims));
  }
  if (type == "Slice") {
    std::optional<PartialShape> whole = ShapeValueOf(node.input(0), depth + 1);
    std::optional<PartialShape> begin = ShapeValueOf(node.input(1), depth + 1);
    std::optional<PartialShape> size = ShapeValueOf(node.input(2), depth + 1);
    // begin and size must be known constants (a -1 size runs to the end).
    if (!whole || !whole->known_rank() || !begin || !size || begin->rank() != 1 ||
        size->rank() != 1 || begin->dim(0) < 0) {
      return std::nullopt;
    }
    const int64_t b = begin->dim(0);
    const int64_t e = size->dim(0) < 0 ? whole->rank() : b + size->dim(0);
    if (e > whole->rank()) return std::nullopt;
    std::vector<int64_t> dims;
    for (int64_t d = b; d < e; ++d) dims.push_back(whole->dim(static_cast<int>(d)));
    return PartialShape(std::move(dims));
  }
  return std::nullopt;
}

}  // namespace

StatusOr<Node*> Graph::AddNode(NodeSpec spec) { return AddNode(std::move(spec), nullptr); }

StatusOr<Output> Graph::AddTransientNode(NodeSpec spec) {
  spec.transient = true;
  std::shared_ptr<Node> owner;
  CKFLOW_ASSIGN_OR_RETURN(Node * node, AddNode(std::move(spec), &owner));
  return Output(node, 0);  // shares `owner`'s ownership
}

StatusOr<Node*> Graph::AddNode(NodeSpec spec, std::shared_ptr<Node>* transient_owner) {
  if (spec.op_def == nullptr) return InvalidArgumentError(spec.name, ": no op definition");
  const std::string where = spec.name + " (" + spec.op_def->type + ")";
  InferenceContext ctx;
  ctx.node_name = spec.name;
  ctx.op_type = spec.op_def->type;
  ctx.attrs = &spec.attrs;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const Output& in = spec.inputs[i];
    if (!in.valid()) {
      return InvalidArgumentError(where, ": input ", i,
                                  " is invalid (an earlier build step failed)");
    }
    if (&in.node()->graph() != this) {
      return InvalidArgumentError(where, ": input ", i, " (", in.name(), ") is from another graph");
    }
    if (in.index() < 0 || in.index() >= in.node()->num_outputs()) {
      return InvalidArgumentError(where, ": input ", i, " refers to output ", in.index(), " of ",
                                  in.node()->name(), ", which has ", in.node()->num_outputs(),
                                  " outputs");
    }
    ctx.input_types.push_back(in.dtype());
    ctx.input_shapes.push_back(in.shape());
    ctx.input_names.push_back(in.name());
    const Tensor* constant = nullptr;
    if (in.node()->has_values()) {
      // Eager: every input is known, so shapes follow from values as they
      // do from constants.
      constant = &in.node()->value(in.index());
    } else if (in.node()->type() == "Const") {
      if (const AttrValue* v = in.node()->attrs().Find("value")) constant = std::get_if<Tensor>(v);
    }
    ctx.input_constants.push_back(constant);
    ctx.input_shape_values.push_back(ShapeValueOf(in));
  }
  for (Node* dep : spec.control_inputs) {
    if (dep == nullptr || &dep->graph() != this) {
      return InvalidArgumentError(where, ": control input is invalid or from another graph");
    }
  }
  if (Status s = spec.op_def->shape_fn(ctx); !s.ok()) return s.WithContext(where);
  if (ctx.output_types.size() != ctx.output_shapes.size()) {
    return InternalError(where, ": shape function set ", ctx.output_types.size(), " types but ",
                         ctx.output_shapes.size(), " shapes");
  }

  if (spec.transient) {
    // Owned by its Outputs; the context keeps it until one exists.
    auto node = std::shared_ptr<Node>(new Node());
    node->graph_ = this;
    node->transient_ = true;
    node->name_ = std::move(spec.name);
    node->op_def_ = spec.op_def;
    node->device_ = std::move(spec.device);
    node->attrs_ = std::move(spec.attrs);
    node->inputs_ = std::move(spec.inputs);
    node->control_inputs_ = std::move(spec.control_inputs);
    node->output_types_ = std::move(ctx.output_types);
    node->output_shapes_ = std::move(ctx.output_shapes);
    Node* raw = node.get();
    if (transient_owner != nullptr) {
      *transient_owner = std::move(node);
    } else if (eager_ != nullptr) {
      eager_->Pin(std::move(node));
    }
    return raw;
  }

  MutexLock lock(&mu_);
  if (by_name_.count(spec.name)) {
    return AlreadyExistsError("node name '", spec.name, "' is already used in the graph");
  }
  if (eager_ != nullptr) {
    // An eager graph reserves name scopes only when something permanent (a
    // variable) is created in them, so "dense" becomes "dense_1" for a
    // second layer but a step's "gradients" scope is reused every step.
    for (size_t slash = spec.name.find('/'); slash != std::string::npos;
         slash = spec.name.find('/', slash + 1)) {
      names_.emplace(spec.name.substr(0, slash), 1);
    }
  }
  auto node = std::unique_ptr<Node>(new Node());
  node->graph_ = this;
  node->id_ = static_cast<int>(nodes_.size());
  node->name_ = std::move(spec.name);
  node->op_def_ = spec.op_def;
  node->device_ = std::move(spec.device);
  node->attrs_ = std::move(spec.attrs);
  node->inputs_ = std::move(spec.inputs);
  // A node depends on each other node once; duplicates only cost the executor.
  std::sort(spec.control_inputs.begin(), spec.control_inputs.end());
  spec.control_inputs.erase(std::unique(spec.control_inputs.begin(), spec.control_inputs.end()),
                            spec.control_inputs.end());
  node->control_inputs_ = std::move(spec.control_inputs);
  node->output_types_ = std::move(ctx.output_types);
  node->output_shapes_ = std::move(ctx.output_shapes);
  names_.emplace(node->name_, 1);
  by_name_.emplace(node->name_, node.get());
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

int Graph::num_nodes() const {
  MutexLock lock(&mu_);
  return static_cast<int>(nodes_.size());
}

Node* Graph::node(int id) const {
  MutexLock lock(&mu_);
  CKFLOW_CHECK(id >= 0 && id < static_cast<int>(nodes_.size()));
  return nodes_[id].get();
}

Node* Graph::FindNode(std::string_view name) const {
  MutexLock lock(&mu_);
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : it->second;
}

bool Graph::IsNameUsed(std::string_view name) const {
  MutexLock lock(&mu_);
  return names_.count(std::string(name)) > 0;
}

std::string Graph::UniqueName(std::string_view base) {
  MutexLock lock(&mu_);
  std::string name(base);
  auto it = names_.find(name);
  if (it == names_.end()) {
    names_.emplace(name, 1);
    return name;
  }
  // TensorFlow's rule: base_N with the first N not yet taken, remembering
  // where the search stopped so repeated names stay linear.
  for (int n = it->second;; ++n) {
    std::string candidate = name + "_" + std::to_string(n);
    if (!names_.count(candidate)) {
      names_[name] = n + 1;
      names_.emplace(candidate, 1);
      return candidate;
    }
  }
}

std::string Graph::FreeName(std::string_view base) {
  MutexLock lock(&mu_);
  std::string name(base);
  auto it = names_.find(name);
  if (it == names_.end()) return name;
  for (int n = it->second;; ++n) {
    std::string candidate = name + "_" + std::to_string(n);
    if (!names_.count(candidate)) return candidate;
  }
}

Status Graph::status() const {
  MutexLock lock(&mu_);
  return status_;
}

void Graph::RecordError(const Status& error) {
  MutexLock lock(&mu_);
  if (status_.ok()) status_ = error;
}

namespace {

std::string DotEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// Name-scope tree for clusters: scope path -> child scopes and nodes.
struct ScopeTree {
  std::map<std::string, ScopeTree> children;
  std::vector<const Node*> nodes;
};

void EmitScope(const ScopeTree& tree, const std::string& path, int depth, std::ostringstream& os) {
  std::string indent(2 * depth, ' ');
  for (const auto& [name, child] : tree.children) {
    std::string child_path = path;
    if (!child_path.empty()) child_path += '/';
    child_path += name;
    os << indent << "subgraph \"cluster_" << DotEscape(child_path) << "\" {\n";
    os << indent << "  label=\"" << DotEscape(name) << "\";\n";
    EmitScope(child, child_path, depth + 1, os);
    os << indent << "}\n";
  }
  for (const Node* n : tree.nodes) {
    os << indent << "\"" << DotEscape(n->name()) << "\" [label=\""
       << DotEscape(n->name().substr(n->name().rfind('/') + 1)) << "\\n"
       << DotEscape(n->type()) << "\"];\n";
  }
}

}  // namespace

std::string Graph::ToDot() const {
  std::vector<const Node*> nodes;
  {
    MutexLock lock(&mu_);
    for (const auto& n : nodes_) nodes.push_back(n.get());
  }
  ScopeTree root;
  for (const Node* n : nodes) {
    ScopeTree* t = &root;
    const std::string& name = n->name();
    size_t start = 0;
    for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', start)) {
      t = &t->children[name.substr(start, slash - start)];
      start = slash + 1;
    }
    t->nodes.push_back(n);
  }
  std::ostringstream os;
  os << "digraph ckflow {\n  node [shape=box, fontname=\"Helvetica\"];\n";
  EmitScope(root, "", 1, os);
  for (const Node* n : nodes) {
    for (const Output& in : n->inputs()) {
      os << "  \"" << DotEscape(in.node()->name()) << "\" -> \"" << DotEscape(n->name())
         << "\" [label=\"" << DataTypeName(in.dtype()) << in.shape().ToString() << "\"];\n";
    }
    for (const Node* dep : n->control_inputs()) {
      os << "  \"" << DotEscape(dep->name()) << "\" -> \"" << DotEscape(n->name())
         << "\" [style=dashed];\n";
    }
  }
  os << "}\n";
  return os.str();
}

// ---------------------------------------------------------------- Scope

Scope Scope::NewRootScope() { return Scope(std::make_shared<Graph>()); }

Scope Scope::NewEagerScope(FileSystem* file_system) {
  auto graph = std::make_shared<Graph>();
  graph->eager_ = std::make_unique<EagerContext>(file_system);
  Scope scope(std::move(graph));
  scope.eager_ = true;
  return scope;
}

StatusOr<Scope> Scope::ForGraph(Graph& graph) {
  std::shared_ptr<Graph> shared = graph.weak_from_this().lock();
  if (shared == nullptr) {
    return FailedPreconditionError("the graph was not made by Scope::NewRootScope");
  }
  Scope scope(std::move(shared));
  scope.eager_ = graph.eager_context() != nullptr;
  return scope;
}

Scope Scope::NewSubScope(std::string_view name) const {
  Scope s = *this;
  s.op_name_.clear();
  if (name.empty()) return s;
  std::string full = prefix_.empty() ? std::string(name) : prefix_ + "/" + std::string(name);
  s.prefix_ =
      graph_->eager_context() != nullptr ? graph_->FreeName(full) : graph_->UniqueName(full);
  return s;
}

Scope Scope::WithOpName(std::string_view name) const {
  Scope s = *this;
  s.op_name_ = std::string(name);
  return s;
}

Scope Scope::WithControlDependencies(const std::vector<Output>& deps) const {
  Scope s = *this;
  for (const Output& d : deps) {
    if (!d.valid()) {
      UpdateStatus(
          InvalidArgumentError("control dependency is invalid (an earlier build step failed)"));
      continue;
    }
    // Eager nodes may be freed, and already ran: nothing to wait for.
    if (!eager_) s.control_deps_.push_back(d.node());
  }
  return s;
}

Scope Scope::WithNoControlDependencies() const {
  Scope s = *this;
  s.control_deps_.clear();
  return s;
}

Scope Scope::WithDevice(std::string_view device) const {
  Scope s = *this;
  s.device_ = std::string(device);
  return s;
}

Scope Scope::Root() const {
  Scope s(graph_);
  s.eager_ = eager_;
  return s;
}

StatusOr<std::string> Scope::NameForNode(std::string_view op_type) const {
  if (eager_) {
    // Eager nodes are transient: their names label messages and gradient
    // scopes, and are neither unique nor reserved.
    std::string_view base = op_name_.empty() ? op_type : std::string_view(op_name_);
    return prefix_.empty() ? std::string(base) : prefix_ + "/" + std::string(base);
  }
  if (!op_name_.empty()) {
    std::string full = prefix_.empty() ? op_name_ : prefix_ + "/" + op_name_;
    if (graph_->IsNameUsed(full)) {
      return AlreadyExistsError("node name '", full, "' is already used in the graph");
    }
    return graph_->UniqueName(full);  // free, so reserved unchanged
  }
  std::string base = prefix_.empty() ? std::string(op_type) : prefix_ + "/" + std::string(op_type);
  return graph_->UniqueName(base);
}

Node* Scope::AddNode(const OpDef& def, std::vector<Output> inputs, AttrMap attrs) const {
  if (!ok()) return nullptr;
  StatusOr<std::string> name = NameForNode(def.type);
  if (!name.ok()) {
    UpdateStatus(name.status());
    return nullptr;
  }
  // Eager ops run in program order, so control dependencies are moot.
  NodeSpec spec{.name = *std::move(name),
                .op_def = &def,
                .inputs = std::move(inputs),
                .control_inputs = eager_ ? std::vector<Node*>() : control_deps_,
                .attrs = std::move(attrs),
                .device = device_,
                .transient = eager_};
  StatusOr<Node*> node = graph_->AddNode(std::move(spec));
  if (!node.ok()) {
    UpdateStatus(node.status());
    return nullptr;
  }
  if (eager_) {
    if (Status s = graph_->eager_context()->Execute(**node); !s.ok()) {
      UpdateStatus(s);
      return nullptr;
    }
  }
  return *node;
}

}  // namespace ckflow
