// Neural-network op builders: activations and their gradients, BiasAdd,
// softmax and the losses built on it.
//
//   Output h = ops::Relu(scope, ops::BiasAdd(scope, ops::MatMul(scope, x, w), b));
//   auto xent = ops::SoftmaxCrossEntropyWithLogits(scope, logits, labels);
//   Output loss = ops::Mean(scope, xent.loss);
//
// Builders follow array_ops.h: one node through `scope`, its output(s)
// returned, errors sticky in the scope and naming the node and inputs.
// Dtypes: float32 and float64. The losses are computed from shifted logits
// (x - max x), so large logits neither overflow nor lose precision.
//
// Thread safety: graph building is single-threaded (see graph/graph.h).

#ifndef CKFLOW_OPS_NN_OPS_H_
#define CKFLOW_OPS_NN_OPS_H_

#include "graph/graph.h"
#include "ops/input.h"

namespace ckflow::ops {

// Elementwise activations.
Output Relu(const Scope& scope, Input features);  // max(x, 0)
Output Sigmoid(const Scope& scope, Input x);      // 1 / (1 + exp(-x))
Output Tanh(const Scope& scope, Input x);

// Their gradients, TensorFlow's ops: `gradients` where features > 0;
// dy * y * (1 - y) and dy * (1 - y^2) from the activation's output y.
Output ReluGrad(const Scope& scope, Input gradients, Input features);
Output SigmoidGrad(const Scope& scope, Input y, Input dy);
Output TanhGrad(const Scope& scope, Input y, Input dy);

// value + bias along value's last dimension (value: rank >= 2, bias: a
// vector of that length); BiasAddGrad sums a gradient over all but the
// last dimension.
Output BiasAdd(const Scope& scope, Input value, Input bias);
Output BiasAddGrad(const Scope& scope, Input out_backprop);

// Softmax and log-softmax over the last dimension.
Output Softmax(const Scope& scope, Input logits);
Output LogSoftmax(const Scope& scope, Input logits);

struct CrossEntropy {
  Output loss;      // [batch]: the loss per example
  Output backprop;  // [batch, classes]: d loss / d features
};
// features and labels [batch, classes]; each row of labels a probability
// distribution.
CrossEntropy SoftmaxCrossEntropyWithLogits(const Scope& scope, Input features, Input labels);
// labels [batch] of class indices (int32/int64) in [0, classes); a label
// out of range fails the run with InvalidArgument naming it.
CrossEntropy SparseSoftmaxCrossEntropyWithLogits(const Scope& scope, Input features, Input labels);
// Elementwise logistic loss of logits against labels in [0, 1] (equal
// shapes): max(x, 0) - x * z + log(1 + exp(-|x|)), as
// tf.nn.sigmoid_cross_entropy_with_logits. Its gradient is
// sigmoid(x) - z.
Output SigmoidCrossEntropyWithLogits(const Scope& scope, Input logits, Input labels);

}  // namespace ckflow::ops

#endif  // CKFLOW_OPS_NN_OPS_H_
