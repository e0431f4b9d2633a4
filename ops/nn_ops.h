// Neural-network op builders: activations and their gradients, BiasAdd,
// softmax and the losses built on it, dropout.
//
//   Output h = ops::Relu(scope, ops::BiasAdd(scope, ops::MatMul(scope, x, w), b));
//   Output d = ops::Dropout(scope, h, 0.5, {.seed = 7});
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

#include <cstdint>
#include <optional>
#include <vector>

#include "graph/graph.h"
#include "ops/input.h"

namespace ckflow::ops {

// Elementwise activations (TensorFlow's ops and formulas).
Output Relu(const Scope& scope, Input features);   // max(x, 0)
Output Relu6(const Scope& scope, Input features);  // min(max(x, 0), 6)
// x where x > 0, else alpha * x.
Output LeakyRelu(const Scope& scope, Input features, float alpha = 0.2f);
Output Elu(const Scope& scope, Input features);  // x where x >= 0, else exp(x) - 1
// scale * x where x >= 0, else scale * alpha * (exp(x) - 1), with SELU's
// scale 1.0507... and alpha 1.6732...
Output Selu(const Scope& scope, Input features);
// log(1 + exp(x)), as x for x > 13.94 (float32; 34.04 for float64) and
// exp(x) for x < -13.94: TensorFlow's thresholds.
Output Softplus(const Scope& scope, Input features);
Output Sigmoid(const Scope& scope, Input x);  // 1 / (1 + exp(-x))
// tf.nn.gelu: x * P(X <= x) for a standard normal X. Exactly, 0.5 * x *
// erfc(-x / sqrt(2)): one "Gelu" op whose kernel takes each element
// through the operations TensorFlow 2.21's tf.nn.gelu builds (the same
// values), with "GeluGrad" as its gradient (not differentiable again). With
// `approximate`, 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))),
// built from TensorFlow's ops as TensorFlow builds it (in name scope
// "Gelu"); gradients flow through those ops.
Output Gelu(const Scope& scope, Input features, bool approximate = false);
Output Tanh(const Scope& scope, Input x);

// Their gradients, TensorFlow's ops, equal shapes. At the kinks the choices
// are TensorFlow's: Relu passes where features > 0; Relu6 where 0 <
// features < 6 (nothing at 0 or 6); LeakyRelu passes all of it where
// features > 0, alpha times it elsewhere (alpha at 0). Elu and Selu take
// the activation's output (derivative y + 1 and y + scale * alpha where
// y < 0; 1 and scale elsewhere, so at 0), Softplus its input (dy /
// (1 + exp(-x))), Sigmoid and Tanh their output: dy * y * (1 - y),
// dy * (1 - y^2).
Output ReluGrad(const Scope& scope, Input gradients, Input features);
Output Relu6Grad(const Scope& scope, Input gradients, Input features);
Output LeakyReluGrad(const Scope& scope, Input gradients, Input features, float alpha = 0.2f);
Output EluGrad(const Scope& scope, Input gradients, Input outputs);
Output SeluGrad(const Scope& scope, Input gradients, Input outputs);
Output SoftplusGrad(const Scope& scope, Input gradients, Input features);
// The exact Gelu's: gradients * d gelu(features) / d features.
Output GeluGrad(const Scope& scope, Input gradients, Input features);
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

struct DropoutAttrs {
  // The op-level seed of the RandomUniform, with the graph seed as
  // random_ops.h describes (TensorFlow 1's rule).
  std::optional<int64_t> seed;
  // The shape of the mask, broadcast against x (tf.nn.dropout's
  // noise_shape); -1 takes x's dimension (TensorFlow's None). Default: x's
  // shape.
  std::optional<std::vector<int64_t>> noise_shape;
};
// tf.nn.dropout: x * 1 / (1 - rate) where a uniform [0, 1) draw is >= rate,
// 0 elsewhere, built as TensorFlow builds it (Mul, RandomUniform,
// GreaterEqual, SelectV2, in name scope "dropout"). Each run draws a new
// mask; the same graph and op seeds give the same masks in every session.
// rate 0 returns x itself. x: float32 or float64. InvalidArgument (sticky)
// for a rate outside [0, 1) or a noise_shape of another rank than x's. The
// gradient, through SelectV2 and Mul, is the upstream gradient scaled by
// 1 / (1 - rate) where kept and 0 where dropped.
Output Dropout(const Scope& scope, Input x, double rate, const DropoutAttrs& attrs = {});
// Dropout with the uniform draw given: `uniform`, of x's dtype, broadcasts
// against x (a placeholder fed TensorFlow's draw reproduces its masks).
Output DropoutWithUniform(const Scope& scope, Input x, double rate, Input uniform);

}  // namespace ckflow::ops

#endif  // CKFLOW_OPS_NN_OPS_H_
