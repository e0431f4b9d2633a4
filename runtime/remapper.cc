#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "runtime/remapper_internal.h"

namespace ckflow::internal {
namespace {

// Who reads a node's outputs within a plan.
struct Use {
  const Node* consumer;
  int input;   // which of the consumer's inputs
  int output;  // which of the node's outputs
};

class ChainFinder {
 public:
  ChainFinder(const std::vector<const Node*>& order, const std::function<bool(const Output&)>& fed,
              const std::function<bool(const Node*, int)>& fetched,
              const std::vector<Output>& targets)
      : fetched_(fetched) {
    for (const Node* n : order) {
      for (int i = 0; i < n->num_inputs(); ++i) {
        const Output& in = n->input(i);
        if (!fed(in)) uses_[in.node()].push_back({n, i, in.index()});
      }
      for (const Node* dep : n->control_inputs()) kept_.insert(dep);
    }
    for (const Output& t : targets) kept_.insert(t.node());
  }

  // The one op that reads `node` (at its output 0, as input 0) if `node` is
  // an intermediate the chain may absorb, else nullptr.
  const Node* SoleConsumer(const Node* node) const {
    if (kept_.count(node)) return nullptr;
    for (int k = 0; k < node->num_outputs(); ++k) {
      if (fetched_(node, k)) return nullptr;
    }
    auto it = uses_.find(node);
    if (it == uses_.end() || it->second.size() != 1) return nullptr;
    const Use& use = it->second[0];
    return use.output == 0 && use.input == 0 ? use.consumer : nullptr;
  }

  // Who reads `node`'s outputs (not fed) in the plan.
  const std::vector<Use>& UsesOf(const Node* node) const {
    static const std::vector<Use> kNone;
    auto it = uses_.find(node);
    return it == uses_.end() ? kNone : it->second;
  }

  // Whether nothing reads or fetches `node`'s outputs but output 0.
  bool OnlyOutputZeroUsed(const Node* node) const {
    for (int k = 1; k < node->num_outputs(); ++k) {
      if (fetched_(node, k)) return false;
    }
    auto it = uses_.find(node);
    if (it == uses_.end()) return true;
    for (const Use& use : it->second) {
      if (use.output != 0) return false;
    }
    return true;
  }

 private:
  const std::function<bool(const Node*, int)>& fetched_;
  std::unordered_map<const Node*, std::vector<Use>> uses_;
  std::unordered_set<const Node*> kept_;
};

bool IsFloat(DataType t) { return t == DT_FLOAT || t == DT_DOUBLE; }

bool ChannelsLast(const Node& n) {
  return n.attrs().GetOr<std::string>("data_format", "NHWC") == "NHWC";
}

// A transient node standing for `nodes` (the first names it), or nothing
// if it fails its own checks.
std::optional<Output> MakeFused(const std::vector<const Node*>& nodes, const OpDef* def,
                                std::vector<Output> inputs, AttrMap attrs) {
  std::vector<std::string> names;
  std::vector<Node*> control_inputs;
  for (const Node* n : nodes) {
    names.push_back(n->name());
    for (Node* dep : n->control_inputs()) control_inputs.push_back(dep);
  }
  attrs.Set("fused_nodes", names);
  NodeSpec spec{.name = nodes.front()->name(),
                .op_def = def,
                .inputs = std::move(inputs),
                .control_inputs = std::move(control_inputs),
                .attrs = std::move(attrs),
                .device = nodes.front()->device()};
  // Transient: the graph neither keeps the node nor reserves its name.
  StatusOr<Output> made = nodes.front()->graph().AddTransientNode(std::move(spec));
  // The ops passed their own checks when they were built; a fused node that
  // does not is left unfused rather than failing the run.
  if (!made.ok()) return std::nullopt;
  return *std::move(made);
}

// The chain that starts at `product` (a Conv2D or MatMul), or nothing.
std::optional<Fusion> ChainFrom(const Node* product, const ChainFinder& finder,
                                const OpRegistry& registry) {
  const bool conv = product->type() == "Conv2D";
  const DataType dtype = product->output_type(0);
  if (!IsFloat(dtype) || (conv && !ChannelsLast(*product))) return std::nullopt;
  const Node* bias_add = finder.SoleConsumer(product);
  if (bias_add == nullptr || bias_add->type() != "BiasAdd" || !ChannelsLast(*bias_add) ||
      bias_add->input(1).dtype() != dtype) {
    return std::nullopt;
  }
  std::vector<const Node*> chain = {product, bias_add};
  std::vector<std::string> fused_ops = {"BiasAdd"};
  std::vector<Output> inputs = {product->input(0), product->input(1), bias_add->input(1)};
  AttrMap attrs = product->attrs();

  const Node* next = finder.SoleConsumer(bias_add);
  if (conv && next != nullptr && next->type() == "FusedBatchNormV3" &&
      !next->attrs().GetOr<bool>("is_training", true) && ChannelsLast(*next) &&
      finder.OnlyOutputZeroUsed(next)) {
    bool same_types = true;
    for (int i = 1; i < 5; ++i) same_types = same_types && next->input(i).dtype() == dtype;
    if (same_types) {
      chain.push_back(next);
      fused_ops.push_back("FusedBatchNorm");
      for (int i = 1; i < 5; ++i) inputs.push_back(next->input(i));
      attrs.Set("epsilon", next->attrs().GetOr<float>("epsilon", 1e-4f));
      next = finder.SoleConsumer(next);
    }
  }
  if (next != nullptr && (next->type() == "Relu" || next->type() == "Relu6")) {
    chain.push_back(next);
    fused_ops.push_back(next->type());
    next = finder.SoleConsumer(next);
  }
  // Not one of TensorFlow's fusions: pooling each block of the convolution
  // while it is in cache spares the unpooled output's trip to memory.
  if (conv && next != nullptr && next->type() == "MaxPool" && ChannelsLast(*next)) {
    chain.push_back(next);
    fused_ops.push_back("MaxPool");
    const AttrMap& pool = next->attrs();
    attrs.Set("pool_ksize", pool.GetOr<std::vector<int64_t>>("ksize", {}));
    attrs.Set("pool_strides", pool.GetOr<std::vector<int64_t>>("strides", {}));
    attrs.Set("pool_padding", pool.GetOr<std::string>("padding", ""));
  }

  const OpDef* def = registry.Find(conv ? "_FusedConv2D" : "_FusedMatMul");
  if (def == nullptr) return std::nullopt;
  attrs.Set("fused_ops", fused_ops);
  std::optional<Output> made = MakeFused(chain, def, std::move(inputs), std::move(attrs));
  if (!made) return std::nullopt;
  return Fusion{.fused = *std::move(made), .last = chain.back(), .absorbed = std::move(chain)};
}

bool SamePooling(const Node& a, const Node& b) {
  for (const char* attr : {"ksize", "strides"}) {
    if (a.attrs().GetOr<std::vector<int64_t>>(attr, {}) !=
        b.attrs().GetOr<std::vector<int64_t>>(attr, {})) {
      return false;
    }
  }
  return a.attrs().GetOr<std::string>("padding", "") ==
             b.attrs().GetOr<std::string>("padding", "") &&
         ChannelsLast(a) && ChannelsLast(b);
}

// Whether a pooling's windows never overlap, whatever its input: a stride
// of at least the window (padding, if any, comes after the input).
bool DisjointByAttrs(const Node& pool) {
  const auto ksize = pool.attrs().GetOr<std::vector<int64_t>>("ksize", {});
  const auto strides = pool.attrs().GetOr<std::vector<int64_t>>("strides", {});
  return ksize.size() == 4 && strides.size() == 4 && strides[1] >= ksize[1] &&
         strides[2] >= ksize[2];
}

// A MaxPool whose MaxPoolGrads run in the same plan, as
// _MaxPoolWithTaps and _MaxPoolGradWithTaps (ops/pooling_ops.cc), each
// gradient with the ReluGrad after it when that ReluGrad differentiates
// the pooling's input, and with the FusedBatchNormGradV3 after those when
// the windows are disjoint (_FusedBatchNormGradFromTaps,
// ops/normalization_ops.cc). Appends the fusions to `out`.
void PoolFusions(const Node* pool, const ChainFinder& finder, const OpRegistry& registry,
                 std::vector<Fusion>& out) {
  const OpDef* forward_def = registry.Find("_MaxPoolWithTaps");
  const OpDef* grad_def = registry.Find("_MaxPoolGradWithTaps");
  const OpDef* norm_def = registry.Find("_FusedBatchNormGradFromTaps");
  const DataType dtype = pool->output_type(0);
  if (forward_def == nullptr || grad_def == nullptr || !IsFloat(dtype) || !ChannelsLast(*pool)) {
    return;
  }
  std::vector<const Node*> grads;
  for (const Use& use : finder.UsesOf(pool)) {
    const Node* g = use.consumer;
    // MaxPoolGrad(orig_input, orig_output, grad) of this very pooling.
    if (g->type() == "MaxPoolGrad" && use.input == 1 && use.output == 0 &&
        g->input(0) == pool->input(0) && g->output_type(0) == dtype && SamePooling(*pool, *g) &&
        std::find(grads.begin(), grads.end(), g) == grads.end()) {
      grads.push_back(g);
    }
  }
  if (grads.empty()) return;
  std::optional<Output> forward = MakeFused({pool}, forward_def, {pool->input(0)}, pool->attrs());
  if (!forward) return;
  std::vector<Fusion> fused_grads;
  for (const Node* g : grads) {
    std::vector<const Node*> chain = {g};
    const Node* relu = finder.SoleConsumer(g);
    if (relu != nullptr && relu->type() == "ReluGrad" && relu->input(1) == g->input(0)) {
      chain.push_back(relu);
    }
    AttrMap attrs = g->attrs();
    attrs.Set("relu", chain.size() == 2);
    const Output taps(forward->node(), 1);
    std::optional<Output> fused;
    // A batch norm's gradient that is all that reads the pooling's: it
    // makes that gradient's rows itself (Keras' Conv2D ->
    // BatchNormalization -> ReLU -> MaxPooling2D).
    const Node* norm = finder.SoleConsumer(chain.back());
    if (norm != nullptr && norm->type() == "FusedBatchNormGradV3" && ChannelsLast(*norm) &&
        norm->output_type(0) == dtype && norm_def != nullptr && DisjointByAttrs(*g)) {
      chain.push_back(norm);
      AttrMap norm_attrs = attrs;
      for (const auto& [name, value] : norm->attrs().all()) norm_attrs.Set(name, value);
      std::vector<Output> inputs = {g->input(2), g->input(1), taps};
      for (int i = 1; i < norm->num_inputs(); ++i) inputs.push_back(norm->input(i));
      fused = MakeFused(chain, norm_def, std::move(inputs), std::move(norm_attrs));
      if (!fused) chain.pop_back();
    }
    if (!fused) {
      fused = MakeFused(chain, grad_def, {g->input(0), g->input(1), g->input(2), taps},
                        std::move(attrs));
    }
    if (!fused) return;  // the pooling stays as it was, and so do its gradients
    fused_grads.push_back(
        Fusion{.fused = *std::move(fused), .last = chain.back(), .absorbed = std::move(chain)});
  }
  out.push_back(Fusion{.fused = *std::move(forward), .last = pool, .absorbed = {pool}});
  for (Fusion& f : fused_grads) out.push_back(std::move(f));
}

}  // namespace

std::vector<Fusion> FindFusions(const std::vector<const Node*>& order,
                                const std::function<bool(const Output&)>& fed,
                                const std::function<bool(const Node*, int)>& fetched,
                                const std::vector<Output>& targets, const OpRegistry& registry) {
  std::vector<Fusion> fusions;
  ChainFinder finder(order, fed, fetched, targets);
  for (const Node* n : order) {
    if (n->type() != "Conv2D" && n->type() != "MatMul") continue;
    if (std::optional<Fusion> f = ChainFrom(n, finder, registry)) fusions.push_back(*std::move(f));
  }
  std::unordered_set<const Node*> absorbed;
  for (const Fusion& f : fusions) absorbed.insert(f.absorbed.begin(), f.absorbed.end());
  for (const Node* n : order) {
    if (n->type() == "MaxPool" && !absorbed.count(n)) PoolFusions(n, finder, registry, fusions);
  }
  return fusions;
}

}  // namespace ckflow::internal
