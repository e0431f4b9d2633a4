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
  std::vector<std::string> names;
  std::vector<Node*> control_inputs;
  for (const Node* n : chain) {
    names.push_back(n->name());
    for (Node* dep : n->control_inputs()) control_inputs.push_back(dep);
  }
  attrs.Set("fused_ops", fused_ops);
  attrs.Set("fused_nodes", names);
  NodeSpec spec{.name = product->name(),
                .op_def = def,
                .inputs = std::move(inputs),
                .control_inputs = std::move(control_inputs),
                .attrs = std::move(attrs),
                .device = product->device()};
  // Transient: the graph neither keeps the node nor reserves its name.
  StatusOr<Output> made = product->graph().AddTransientNode(std::move(spec));
  // The chain's ops passed their own checks when they were built; a fused
  // node that does not is left unfused rather than failing the run.
  if (!made.ok()) return std::nullopt;
  return Fusion{.fused = *made, .last = chain.back(), .absorbed = std::move(chain)};
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
  return fusions;
}

}  // namespace ckflow::internal
