#include "ops/gradients.h"

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "ops/array_ops.h"
#include "ops/grad_internal.h"
#include "ops/gradients_internal.h"
#include "ops/math_ops.h"
#include "ops/ops_internal.h"

namespace ckflow {

// ---------------------------------------------------------------- registry

Status GradientRegistry::Register(std::string type, GradientFunction fn) {
  if (fns_.count(type)) {
    return AlreadyExistsError("gradient of op type '", type, "' is already registered");
  }
  fns_.emplace(std::move(type), fn);
  return OkStatus();
}

bool GradientRegistry::Contains(std::string_view type) const {
  return fns_.find(type) != fns_.end();
}

GradientFunction GradientRegistry::Find(std::string_view type) const {
  auto it = fns_.find(type);
  return it == fns_.end() ? nullptr : it->second;
}

std::vector<std::string> GradientRegistry::ListTypes() const {
  std::vector<std::string> types;
  for (const auto& [type, fn] : fns_) types.push_back(type);
  return types;
}

namespace {

Status RegisterStandardGradients(GradientRegistry& registry) {
  // The one list of gradient groups, one per op family (<family>_grad.cc).
  // A new family is one more line here.
  using RegisterFn = Status (*)(GradientRegistry&);
  for (RegisterFn register_group : {
           internal::RegisterMathGradients,
           internal::RegisterComparisonGradients,
           internal::RegisterArrayGradients,
           internal::RegisterReductionGradients,
           internal::RegisterMatMulGradients,
           internal::RegisterGatherGradients,
           internal::RegisterNnGradients,
           internal::RegisterConvGradients,
           internal::RegisterPoolingGradients,
           internal::RegisterNormalizationGradients,
           internal::RegisterVariableGradients,
       }) {
    CKFLOW_RETURN_IF_ERROR(register_group(registry));
  }
  return OkStatus();
}

}  // namespace

const GradientRegistry& StandardGradients() {
  // Filled on first use (thread-safe static initialization), never before
  // main; never destroyed.
  static const GradientRegistry* const registry = [] {
    auto* r = new GradientRegistry();
    Status s = RegisterStandardGradients(*r);
    if (!s.ok()) internal::CheckFailed(__FILE__, __LINE__, s.ToString().c_str());
    return r;
  }();
  return *registry;
}

// ------------------------------------------------------------ AddGradients

namespace {

// Gradients flow through floating point tensors and through resource
// handles (to the value a ReadVariableOp reads); integers and bools block.
bool CarriesGradient(DataType dtype) { return IsFloatingType(dtype) || dtype == DT_RESOURCE; }

// Checks that each of `outputs` is a valid output of a node in `graph`.
Status CheckOutputs(const Graph& graph, const std::vector<Output>& outputs, std::string_view what) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Output& o = outputs[i];
    if (!o.valid()) {
      return InvalidArgumentError(what, "[", i, "] is invalid (an earlier build step failed)");
    }
    if (&o.node()->graph() != &graph) {
      return InvalidArgumentError(what, "[", i, "] (", o.name(), ") is from another graph");
    }
    if (o.index() < 0 || o.index() >= o.node()->num_outputs()) {
      return InvalidArgumentError(what, "[", i, "] refers to output ", o.index(), " of ",
                                  o.node()->name(), ", which has ", o.node()->num_outputs(),
                                  " outputs");
    }
  }
  return OkStatus();
}

// The sum of several gradients reaching one tensor. Sparse ones (gathers'
// gradients) stay sparse when all are: their rows are concatenated, as
// TensorFlow aggregates IndexedSlices, and repeats add where they are used.
// Any dense one makes the sum dense (AddN of the dense forms).
Output AddGradientsOf(const Scope& scope, const std::vector<Output>& grads) {
  std::vector<Output> values, indices;
  bool int64_indices = false;
  for (const Output& g : grads) {
    std::optional<IndexedSlices> slices = AsIndexedSlices(g);
    if (!slices) return ops::AddN(scope, grads);
    values.push_back(slices->values);
    indices.push_back(slices->indices);
    int64_indices |= slices->indices.dtype() == DT_INT64;
  }
  if (int64_indices) {
    for (Output& i : indices) {
      if (i.dtype() != DT_INT64) i = ops::Cast(scope, i, DT_INT64);
    }
  }
  return internal::MakeIndexedSlices(scope, ops::Concat(scope, values, 0),
                                     ops::Concat(scope, indices, 0), grads[0].node()->input(2));
}

// One reverse-accumulation pass over a topological order of the nodes that
// may lie between xs and ys (graph ids from the first x on, or a tape's
// recording): a forward sweep finds what depends on xs and a backward sweep
// meets every node after all of its consumers.
class GradientBuilder {
 public:
  GradientBuilder(const Scope& scope, const GradientRegistry& registry)
      : scope_(scope), registry_(registry) {}

  StatusOr<std::vector<Output>> Build(const std::vector<Output>& ys, const std::vector<Output>& xs,
                                      const std::vector<Output>& grad_ys,
                                      const std::vector<const Node*>& order);

 private:
  // True if a gradient flowing into `o` can reach some x.
  bool OnPath(const Output& o) const {
    if (!CarriesGradient(o.dtype())) return false;
    return reached_.count(o.node()) > 0 || xs_.count({o.node(), o.index()}) > 0;
  }
  void MarkReached(const std::vector<const Node*>& order);
  // The name scope of `node`'s gradient, "gradients/<node>_grad", made once.
  const Scope& GradientScope(const Node& node);
  // The gradients that have reached output `index` of `node`, summed into
  // one (invalid if none).
  Output SumGradients(const Node& node, int index);
  Status Backprop(const Node& node);

  const Scope& scope_;
  const GradientRegistry& registry_;
  Scope gradients_scope_ = scope_;
  std::set<std::pair<const Node*, int>> xs_;  // (node, output index)
  std::unordered_set<const Node*> reached_;   // depends on an x
  // Gradients that have arrived at each output of a node, to be summed.
  std::unordered_map<const Node*, std::vector<std::vector<Output>>> pending_;
  std::unordered_map<const Node*, Scope> node_scopes_;
};

void GradientBuilder::MarkReached(const std::vector<const Node*>& order) {
  for (const Node* node : order) {
    // A node known to have no gradient blocks every path through it.
    if (registry_.Contains(node->type()) && registry_.Find(node->type()) == nullptr) continue;
    if (std::any_of(node->inputs().begin(), node->inputs().end(),
                    [this](const Output& in) { return OnPath(in); })) {
      reached_.insert(node);
    }
  }
}

const Scope& GradientBuilder::GradientScope(const Node& node) {
  auto it = node_scopes_.find(&node);
  if (it == node_scopes_.end()) {
    it = node_scopes_.emplace(&node, gradients_scope_.NewSubScope(node.name() + "_grad")).first;
  }
  return it->second;
}

Output GradientBuilder::SumGradients(const Node& node, int index) {
  auto it = pending_.find(&node);
  if (it == pending_.end()) return Output();
  std::vector<Output>& grads = it->second[index];
  if (grads.empty()) return Output();
  if (grads.size() > 1) grads = {AddGradientsOf(GradientScope(node), grads)};
  return grads[0];
}

Status GradientBuilder::Backprop(const Node& node) {
  auto it = pending_.find(&node);
  if (it == pending_.end()) return OkStatus();
  const Scope& scope = GradientScope(node);
  std::vector<Output> grad_outputs(node.num_outputs());
  for (int i = 0; i < node.num_outputs(); ++i) grad_outputs[i] = SumGradients(node, i);

  const std::string where = internal::StrCat(node.name(), " (", node.type(), ")");
  GradientFunction fn = registry_.Find(node.type());
  if (fn == nullptr) {
    return InvalidArgumentError("no gradient defined for ", where,
                                ", which lies on a path from xs to ys");
  }
  std::vector<Output> grad_inputs(node.num_inputs());
  CKFLOW_RETURN_IF_ERROR(fn(scope, node, grad_outputs, &grad_inputs).WithContext(where));
  CKFLOW_RETURN_IF_ERROR(scope.status());
  if (grad_inputs.size() != static_cast<size_t>(node.num_inputs())) {
    return InternalError("gradient of ", where, " returned ", grad_inputs.size(),
                         " input gradients for ", node.num_inputs(), " inputs");
  }
  for (int i = 0; i < node.num_inputs(); ++i) {
    const Output& in = node.input(i);
    const Output& grad = grad_inputs[i];
    if (!grad.valid() || !OnPath(in)) continue;
    // A resource's gradient is its value's, so only other inputs must match.
    if (in.dtype() != DT_RESOURCE && grad.dtype() != in.dtype()) {
      return InternalError("gradient of ", where, " for input ", i, " is ",
                           DataTypeName(grad.dtype()), ", but the input is ",
                           DataTypeName(in.dtype()));
    }
    auto& slots = pending_[in.node()];
    slots.resize(in.node()->num_outputs());
    slots[in.index()].push_back(grad);
  }
  return OkStatus();
}

StatusOr<std::vector<Output>> GradientBuilder::Build(const std::vector<Output>& ys,
                                                     const std::vector<Output>& xs,
                                                     const std::vector<Output>& grad_ys,
                                                     const std::vector<const Node*>& order) {
  for (const Output& x : xs) xs_.insert({x.node(), x.index()});
  if (!xs.empty()) MarkReached(order);

  gradients_scope_ = scope_.NewSubScope("gradients");
  for (size_t i = 0; i < ys.size(); ++i) {
    const Output& y = ys[i];
    if (!OnPath(y)) continue;  // nothing to propagate; skip building ones
    Output grad_y =
        grad_ys.empty()
            ? ops::OnesLike(gradients_scope_.WithOpName(internal::StrCat("grad_ys_", i)), y)
            : grad_ys[i];
    auto& slots = pending_[y.node()];
    slots.resize(y.node()->num_outputs());
    slots[y.index()].push_back(grad_y);
  }
  CKFLOW_RETURN_IF_ERROR(scope_.status());

  // Nodes that no y depends on have nothing pending, and Backprop skips them.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (reached_.count(*it)) CKFLOW_RETURN_IF_ERROR(Backprop(**it));
  }
  std::vector<Output> result;
  result.reserve(xs.size());
  for (const Output& x : xs) {
    result.push_back(CarriesGradient(x.dtype()) ? SumGradients(*x.node(), x.index()) : Output());
  }
  CKFLOW_RETURN_IF_ERROR(scope_.status());
  return result;
}

}  // namespace

namespace internal {

StatusOr<std::vector<Output>> GradientsAlong(const Scope& scope, const std::vector<Output>& ys,
                                             const std::vector<Output>& xs,
                                             const std::vector<const Node*>& order,
                                             const std::vector<Output>& grad_ys,
                                             const GradientRegistry* registry) {
  CKFLOW_RETURN_IF_ERROR(scope.status());
  const Graph& graph = scope.graph();
  CKFLOW_RETURN_IF_ERROR(CheckOutputs(graph, ys, "ys"));
  CKFLOW_RETURN_IF_ERROR(CheckOutputs(graph, xs, "xs"));
  CKFLOW_RETURN_IF_ERROR(CheckOutputs(graph, grad_ys, "grad_ys"));
  if (!grad_ys.empty() && grad_ys.size() != ys.size()) {
    return InvalidArgumentError("AddGradients: ", grad_ys.size(), " grad_ys for ", ys.size(),
                                " ys");
  }
  for (size_t i = 0; i < grad_ys.size(); ++i) {
    const Output& y = ys[i];
    const Output& g = grad_ys[i];
    if (g.dtype() != y.dtype() || !g.shape().IsCompatibleWith(y.shape())) {
      return InvalidArgumentError("AddGradients: grad_ys[", i, "] (", g.name(), ") is ",
                                  DataTypeName(g.dtype()), g.shape().ToString(), ", but ys[", i,
                                  "] (", y.name(), ") is ", DataTypeName(y.dtype()),
                                  y.shape().ToString());
    }
  }
  GradientBuilder builder(scope, registry != nullptr ? *registry : StandardGradients());
  return builder.Build(ys, xs, grad_ys, order);
}

}  // namespace internal

std::optional<IndexedSlices> AsIndexedSlices(const Output& gradient) {
  if (!gradient.valid()) return std::nullopt;
  const Node& node = *gradient.node();
  if (node.type() != "UnsortedSegmentSum" || !node.attrs().GetOr<bool>("_indexed_slices", false) ||
      node.num_inputs() != 3) {
    return std::nullopt;
  }
  return IndexedSlices{.values = node.input(0), .indices = node.input(1), .dense = gradient};
}

namespace internal {

Output MakeIndexedSlices(const Scope& scope, Output values, Output indices, Output num_rows) {
  AttrMap attrs;
  attrs.Set("_indexed_slices", true);
  attrs.Set("_keep_inputs", true);  // in an eager scope too, the rows stay readable
  return BuildOp(scope, "UnsortedSegmentSum", {values, indices, num_rows}, std::move(attrs));
}

}  // namespace internal

StatusOr<std::vector<Output>> AddGradients(const Scope& scope, const std::vector<Output>& ys,
                                           const std::vector<Output>& xs,
                                           const std::vector<Output>& grad_ys,
                                           const GradientRegistry* registry) {
  CKFLOW_RETURN_IF_ERROR(scope.status());
  if (scope.eager()) {
    return FailedPreconditionError(
        "AddGradients differentiates a graph; in an eager scope, record the ops with a "
        "GradientTape (ops/gradient_tape.h)");
  }
  const Graph& graph = scope.graph();
  CKFLOW_RETURN_IF_ERROR(CheckOutputs(graph, xs, "xs"));
  // Ids are a topological order: everything after the first x.
  int first_x = graph.num_nodes();
  for (const Output& x : xs) first_x = std::min(first_x, x.node()->id());
  std::vector<const Node*> order;
  for (int id = first_x + 1; id < graph.num_nodes(); ++id) order.push_back(graph.node(id));
  return internal::GradientsAlong(scope, ys, xs, order, grad_ys, registry);
}

}  // namespace ckflow
