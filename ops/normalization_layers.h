// Keras' BatchNormalization (tf_keras' layers/normalization/) over the last
// axis (the channels of NHWC images, the features of [batch, features] or
// [batch, steps, features]), with Keras' variables, defaults and
// moving-average update.
//
//   auto bn = BatchNormalization::Make();  // momentum 0.99, epsilon 1e-3
//   Output train_y = (*bn)(scope, x, true);   // batch statistics; updates the moving ones
//   Output infer_y = (*bn)(scope, x, false);  // the moving statistics
//
// Variables, created by the first call for C = the input's last dimension,
// in Keras' order: gamma (ones) and beta (zeros), trainable, when scale and
// center are set; moving_mean (zeros) and moving_variance (ones),
// non-trainable. Like Keras, the layer also tracks "axis" (Keras' list of
// axes, an object with no values) before them, so the object graph a
// checkpoint saves is Keras' node for node.
//
// A training call (see the training flag in ops/layers.h) normalizes with
// the batch's mean and variance over every axis but the last and updates
// the moving statistics as tf-keras does in a graph:
// moving -= (moving - batch_stat) * (1 - momentum). The two updates are
// control dependencies of the call's output, so a step that computes the
// output (a train step through it) updates them, as TensorFlow 2's automatic
// control dependencies run a layer's updates; in an eager scope they run
// with the call. An inference call normalizes with the moving statistics
// and updates nothing. Both: y = (x - mean) * gamma / sqrt(variance +
// epsilon) + beta. Keras computes this in one of two ways, and so does the
// layer, by the same rule:
//  * float32 images (rank 4): FusedBatchNormV3 (ops/normalization_ops.h),
//    an epsilon below 1.001e-5 raised to it as tf.compat.v1.nn.
//    fused_batch_norm does, and the batch's Bessel-corrected variance
//    (n / (n - 1) times the biased one it normalized with) in the average;
//  * any other rank, and float64 (TensorFlow's fused kernel has none):
//    tf.nn.moments and tf.nn.batch_normalization op for op, epsilon as
//    given, and the biased variance in the average.
//
// Errors of a call (InvalidArgument, sticky, prefixed with the layer's
// name): an input of rank below 2 or of unknown last dimension, a dtype
// other than float32 or float64, an axis other than -1 or the last.
//
// Thread safety: building is single-threaded (see ops/layers.h).

#ifndef CKFLOW_OPS_NORMALIZATION_LAYERS_H_
#define CKFLOW_OPS_NORMALIZATION_LAYERS_H_

#include <memory>
#include <string>

#include "ops/layers.h"

namespace ckflow {

struct BatchNormalizationOptions {
  int axis = -1;  // the last: -1 or rank - 1
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;                       // beta
  bool scale = true;                        // gamma
  Initializer beta_initializer;             // Zeros() if empty
  Initializer gamma_initializer;            // Ones() if empty
  Initializer moving_mean_initializer;      // Zeros() if empty
  Initializer moving_variance_initializer;  // Ones() if empty
  std::string name = "batch_normalization";
};

class BatchNormalization : public Layer {
 public:
  static std::shared_ptr<BatchNormalization> Make(BatchNormalizationOptions options = {});

  // Null before the first call (gamma without scale, beta without center).
  const std::shared_ptr<Variable>& gamma() const { return gamma_; }
  const std::shared_ptr<Variable>& beta() const { return beta_; }
  const std::shared_ptr<Variable>& moving_mean() const { return moving_mean_; }
  const std::shared_ptr<Variable>& moving_variance() const { return moving_variance_; }

 protected:
  Status Build(const Scope& scope, const Output& input) override;
  Output Call(const Scope& scope, Output input) override;

 private:
  Output CallComposite(const Scope& scope, Output input);
  explicit BatchNormalization(BatchNormalizationOptions options);

  const BatchNormalizationOptions options_;
  std::shared_ptr<Variable> gamma_;
  std::shared_ptr<Variable> beta_;
  std::shared_ptr<Variable> moving_mean_;
  std::shared_ptr<Variable> moving_variance_;
};

}  // namespace ckflow

#endif  // CKFLOW_OPS_NORMALIZATION_LAYERS_H_
