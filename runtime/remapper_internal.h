// The remapper: what TensorFlow's grappler pass of that name does for CPU
// graphs, applied to each plan the session builds. A Conv2D or MatMul whose
// output only a BiasAdd reads becomes one _FusedConv2D or _FusedMatMul with
// the ops after it folded in:
//
//   Conv2D -> BiasAdd [-> FusedBatchNormV3 (is_training false)] [-> Relu | Relu6]
//          [-> MaxPool]
//   MatMul -> BiasAdd [-> Relu | Relu6]
//
// The MaxPool is ckflow's own addition (the convolution pools each block of
// its output while it is in cache); the rest are TensorFlow's fusions.
//
// And, as oneDNN's max pooling keeps a workspace for its backward pass, a
// MaxPool whose MaxPoolGrad runs in the same plan becomes _MaxPoolWithTaps,
// which also outputs the tap that held each maximum, and the MaxPoolGrad
// _MaxPoolGradWithTaps, which sends each gradient there without reading
// the pooling's input again; a ReluGrad through that input, right after the
// MaxPoolGrad, folds into it (ops/pooling_ops.cc). When the windows cannot
// overlap and a FusedBatchNormGradV3 is all that reads that gradient (Keras'
// Conv2D -> BatchNormalization -> ReLU -> MaxPooling2D), the three become
// _FusedBatchNormGradFromTaps, which makes the gradient's rows as it needs
// them (ops/normalization_ops.cc).
//
// Each op of the chain but the last must have that one consumer, must not be
// fetched, fed past, a target or a control input, and the last may only be
// read at output 0. So the chain's intermediate tensors are needed by
// nothing else in the run: a training step's chains fold as far as the
// gradients allow (Relu's gradient reads Relu's output, which the fused op
// produces; a training batch norm needs the whole batch and stays; pooling
// folds in at inference, where nothing else reads its input).
//
// The fused kernels compute each element with the separate ops' own
// expressions (ops/fused_epilogue_internal.h), so remapping changes the
// memory traffic of a run and not its bits.

#ifndef CKFLOW_RUNTIME_REMAPPER_INTERNAL_H_
#define CKFLOW_RUNTIME_REMAPPER_INTERNAL_H_

#include <functional>
#include <vector>

#include "graph/graph.h"
#include "graph/op_def.h"

namespace ckflow::internal {

struct Fusion {
  // A transient node of the chain's graph, owning itself through this
  // Output: its inputs are the chain's outside inputs, its control inputs
  // all of theirs, and its output 0 stands for `last`'s.
  Output fused;
  const Node* last = nullptr;
  std::vector<const Node*> absorbed;  // the chain, `last` included
};

// The chains in `order` (a plan's pruned nodes). `fed` tells the outputs a
// run is fed (their producers' results are not read), `fetched(node, i)`
// whether it returns output i of node; `targets` and the nodes `order` names
// as control inputs are kept as they are. Fused nodes are made with
// `registry`'s _FusedConv2D, _FusedMatMul, _MaxPoolWithTaps,
// _MaxPoolGradWithTaps and _FusedBatchNormGradFromTaps; without them,
// nothing is fused.
std::vector<Fusion> FindFusions(const std::vector<const Node*>& order,
                                const std::function<bool(const Output&)>& fed,
                                const std::function<bool(const Node*, int)>& fetched,
                                const std::vector<Output>& targets, const OpRegistry& registry);

}  // namespace ckflow::internal

#endif  // CKFLOW_RUNTIME_REMAPPER_INTERNAL_H_
