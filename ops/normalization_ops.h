// Normalization op builders: TensorFlow's FusedBatchNormV3, its gradient op
// FusedBatchNormGradV3, and the moving-average update Keras' BatchNormalization
// builds on them.
//
//   auto bn = ops::FusedBatchNorm(scope, x, gamma, beta, moving_mean->value(),
//                                 moving_variance->value(), {.epsilon = 1e-3f});
//   Output h = ops::Relu(scope, bn.y);
//   Output update_mean = ops::AssignMovingAverage(scope, *moving_mean, bn.batch_mean, 0.99);
//   Output update_var = ops::AssignMovingAverage(scope, *moving_variance, bn.batch_variance, 0.99);
//
// FusedBatchNormV3(x, scale, offset, mean, variance) normalizes x, [N,H,W,C]
// with channels last (data_format "NHWC", the only one ckflow supports), per
// channel over its n = N*H*W values. Attributes (TensorFlow's): epsilon
// (default 1e-4; Keras passes 1e-3), exponential_avg_factor f (1),
// is_training (true). Dtypes: float32, as TensorFlow's CPU kernel, and
// float64 (ckflow only: TensorFlow has no float64 kernel), the same for all
// inputs.
//
// Training (is_training), with the batch's mean m and biased variance v
// (sum of squares / n):
//   y               = (x - m) * (rsqrt(v + epsilon) * scale) + offset
//   batch_mean      = m                    if f == 1, else (1 - f) * mean + f * m
//   batch_variance  = v * n / (n - 1)      if f == 1, else (1 - f) * variance + f * v * n / (n - 1)
//                     (Bessel's correction; n / (n - 1) is 1 when n == 1)
//   reserve_space_1 = m, reserve_space_2 = v (what y was normalized with)
//   reserve_space_3 = an empty [0] tensor
// mean and variance are read only when f != 1; otherwise they may be empty
// (tf.compat.v1.nn.fused_batch_norm passes [] then).
// Inference (!is_training): y normalizes with the given mean and variance;
// batch_mean, batch_variance, reserve_space_1 and reserve_space_2 are those
// inputs (TensorFlow's oneDNN kernel, its default on x86; its Eigen kernel
// leaves the reserve spaces unset). An empty x (n == 0) gives NaN in
// outputs 1 to 4, as TensorFlow.
//
// Each channel's sums are taken in double, over blocks of rows whose
// boundaries depend on the shape only, and the blocks' sums are added in
// order: the bits do not depend on the thread count.
//
// Keras' moving statistics (momentum 0.99 by default):
//  * tf-keras (Keras 2) in a TF1 graph: exponential_avg_factor 1, then per
//    statistic `moving -= (moving - batch_stat) * (1 - momentum)` as an
//    assign_sub, with batch_mean and the Bessel-corrected batch_variance:
//    AssignMovingAverage below.
//  * tf-keras in TensorFlow 2 (model.fit, tf.function, eager):
//    exponential_avg_factor = 1 - momentum and the moving mean and variance
//    are assigned batch_mean and batch_variance as they come (the op has
//    done the averaging): moving->Assign(scope, bn.batch_mean).
//  * Keras 3 (tf.keras of TensorFlow 2.21 by default) and tf-keras on
//    inputs of rank 2 do not use this op: they take tf.nn.moments (biased
//    variance: reserve_space_2 here) and `moving = moving * momentum +
//    stat * (1 - momentum)`.
//
// Errors (InvalidArgument, naming the node and the input or attribute): x
// not of rank 4 (rank 2 only through the FusedBatchNorm builder), scale,
// offset, mean or variance not vectors of C elements (mean and variance:
// when they are read), mismatched dtypes, a negative or non-finite epsilon,
// a non-finite exponential_avg_factor, a data_format other than "NHWC". The
// same shape checks run again when shapes are known only at run time.
//
// Thread safety: graph building is single-threaded (see graph/graph.h).

#ifndef CKFLOW_OPS_NORMALIZATION_OPS_H_
#define CKFLOW_OPS_NORMALIZATION_OPS_H_

#include <string>

#include "graph/graph.h"
#include "ops/input.h"

namespace ckflow {

class Variable;  // ops/variables.h

namespace ops {

struct FusedBatchNormAttrs {
  float epsilon = 1e-4f;
  float exponential_avg_factor = 1.0f;
  std::string data_format = "NHWC";
  bool is_training = true;
};

// The six outputs of FusedBatchNormV3 (all invalid on a build error).
struct FusedBatchNormOutputs {
  Output y;
  Output batch_mean;
  Output batch_variance;
  Output reserve_space_1;
  Output reserve_space_2;
  Output reserve_space_3;
};

// A FusedBatchNormV3 node. x of rank 2, [N, C] (a Dense layer's), is
// normalized as [N, 1, 1, C] and y reshaped back; C must then be known from
// x or scale when the graph is built.
FusedBatchNormOutputs FusedBatchNorm(const Scope& scope, Input x, Input scale, Input offset,
                                     Input mean, Input variance,
                                     const FusedBatchNormAttrs& attrs = {});

struct FusedBatchNormGradOutputs {
  Output x_backprop;
  Output scale_backprop;
  Output offset_backprop;
};

// FusedBatchNormGradV3: the gradients of y with respect to x, scale and
// offset, given y_backprop (x's shape). Training: reserve_space_1/2 are the
// forward op's (the batch's mean and biased variance); inference: the mean
// and variance it was given. reserve_space_3 is not read. Only epsilon,
// data_format and is_training of `attrs` apply. Its reserve_space_4 and
// reserve_space_5 outputs are empty [0] placeholders, as TensorFlow's.
FusedBatchNormGradOutputs FusedBatchNormGrad(const Scope& scope, Input y_backprop, Input x,
                                             Input scale, Input reserve_space_1,
                                             Input reserve_space_2, Input reserve_space_3,
                                             const FusedBatchNormAttrs& attrs = {});

// Each row of x's last axis normalized: (x - mean) / sqrt(variance +
// epsilon), with the row's mean and biased variance. tf_keras'
// LayerNormalization asks this of FusedBatchNormV3 (scale 1, offset 0) for
// float32 and epsilon >= 1.001e-5, then applies gamma and beta itself;
// ckflow's LayerNormalization does the same with this op. float32 or
// float64, rank >= 1. Its gradient is LayerNormGrad (not differentiable
// again): the gradient with respect to x, given y_backprop (x's shape).
Output LayerNorm(const Scope& scope, Input x, float epsilon);
Output LayerNormGrad(const Scope& scope, Input y_backprop, Input x, float epsilon);

// tf-keras' graph-mode moving-average update of `variable` towards `value`:
// variable.assign_sub((variable - value) * (1 - momentum)), the decay
// 1 - momentum computed in double and rounded to the variable's dtype.
// Returns the AssignSubVariableOp (no outputs: a target).
Output AssignMovingAverage(const Scope& scope, const Variable& variable, Input value,
                           double momentum);

}  // namespace ops
}  // namespace ckflow

#endif  // CKFLOW_OPS_NORMALIZATION_OPS_H_
