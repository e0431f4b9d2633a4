#include "ops/normalization_layers.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "ops/layers_internal.h"
#include "ops/math_ops.h"
#include "ops/normalization_ops.h"
#include "ops/ops_internal.h"

namespace ckflow {
namespace {

// Keras' list of axes (a ListWrapper in its object graph): no values of its
// own, tracked so the graph a checkpoint saves has Keras' nodes.
class AxisList : public Trackable {
 public:
  std::string TypeName() const override { return "ListWrapper"; }
};

// tf.compat.v1.nn.fused_batch_norm raises a smaller epsilon to this.
constexpr double kMinEpsilon = 1.001e-5;

}  // namespace

BatchNormalization::BatchNormalization(BatchNormalizationOptions options)
    : Layer("BatchNormalization", options.name), options_(std::move(options)) {}

std::shared_ptr<BatchNormalization> BatchNormalization::Make(BatchNormalizationOptions options) {
  return std::shared_ptr<BatchNormalization>(new BatchNormalization(std::move(options)));
}

Status BatchNormalization::Build(const Scope& scope, const Output& input) {
  const PartialShape& in = input.shape();
  if (in.rank() < 2 || in.dim(in.rank() - 1) < 0) {
    return InvalidArgumentError("expects an input of rank 2 or more with known features (its last ",
                                "axis), got ", input.name(), " of shape ", in.ToString());
  }
  if (options_.axis != -1 && options_.axis != in.rank() - 1) {
    return InvalidArgumentError("axis must be -1 or ", in.rank() - 1,
                                " (the last, the features or channels), got ", options_.axis);
  }
  CKFLOW_RETURN_IF_ERROR(internal::CheckFloatInput(input));
  const DataType dtype = input.dtype();
  const TensorShape shape({in.dim(in.rank() - 1)});
  Track("axis", std::make_shared<AxisList>());
  if (options_.scale) {
    gamma_ = AddWeight(scope, "gamma", dtype, shape,
                       internal::OrDefault(options_.gamma_initializer, initializers::Ones()));
  }
  if (options_.center) {
    beta_ = AddWeight(scope, "beta", dtype, shape,
                      internal::OrDefault(options_.beta_initializer, initializers::Zeros()));
  }
  moving_mean_ =
      AddWeight(scope, "moving_mean", dtype, shape,
                internal::OrDefault(options_.moving_mean_initializer, initializers::Zeros()),
                /*trainable=*/false);
  moving_variance_ =
      AddWeight(scope, "moving_variance", dtype, shape,
                internal::OrDefault(options_.moving_variance_initializer, initializers::Ones()),
                /*trainable=*/false);
  return OkStatus();
}

Output BatchNormalization::Call(const Scope& scope, Output input) {
  const DataType dtype = input.dtype();
  // Keras fuses images of float32 only (TensorFlow's fused kernel has no
  // float64); everything else takes its composite path.
  if (input.shape().rank() != 4 || dtype != DT_FLOAT) return CallComposite(scope, input);
  const int64_t channels = moving_mean_->shape().dim(0);
  // Without scale or center, Keras normalizes with constant ones and zeros.
  auto constant = [&](double value) {
    StatusOr<Tensor> scalar = internal::ScalarOfType(dtype, value);
    if (!scalar.ok()) {
      scope.UpdateStatus(scalar.status());
      return Output();
    }
    return ops::Fill(scope, ops::Const(scope, std::vector<int64_t>{channels}),
                     ops::Const(scope, *scalar));
  };
  Output gamma = gamma_ != nullptr ? gamma_->Read(scope) : constant(1.0);
  Output beta = beta_ != nullptr ? beta_->Read(scope) : constant(0.0);
  const float epsilon = static_cast<float>(std::max(options_.epsilon, kMinEpsilon));
  if (!training(scope)) {
    return ops::FusedBatchNorm(scope, input, gamma, beta, moving_mean_->Read(scope),
                               moving_variance_->Read(scope),
                               {.epsilon = epsilon, .is_training = false})
        .y;
  }
  // exponential_avg_factor 1: the op does no averaging and never reads the
  // mean and variance it is given.
  Tensor empty(dtype, TensorShape({0}));
  ops::FusedBatchNormOutputs bn =
      ops::FusedBatchNorm(scope, input, gamma, beta, ops::Const(scope, empty),
                          ops::Const(scope, empty), {.epsilon = epsilon, .is_training = true});
  if (!bn.y.valid()) return Output();
  Output update_mean =
      ops::AssignMovingAverage(scope, *moving_mean_, bn.batch_mean, options_.momentum);
  Output update_variance =
      ops::AssignMovingAverage(scope, *moving_variance_, bn.batch_variance, options_.momentum);
  return ops::Identity(scope.WithControlDependencies({update_mean, update_variance}), bn.y);
}

// tf_keras' non-fused path, op for op: tf.nn.moments over every axis but
// the last (the biased variance, which also goes into the moving average:
// no Bessel correction here), then tf.nn.batch_normalization,
//   inv = rsqrt(variance + epsilon) * gamma;  y = x * inv + (beta - mean * inv),
// with epsilon as given (the fused op's floor of 1.001e-5 does not apply).
Output BatchNormalization::CallComposite(const Scope& scope, Output input) {
  const DataType dtype = input.dtype();
  const bool train = training(scope);
  std::vector<int64_t> axes(static_cast<size_t>(input.shape().rank() - 1));
  for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
  Output mean, variance;
  std::vector<Output> updates;
  if (train) {
    const Scope m = scope.NewSubScope("moments");
    Output reduce = ops::Const(m, Tensor::FromVector<int64_t>(axes));
    Output batch_mean = ops::Mean(m, input, reduce, {.keep_dims = true});
    Output batch_variance =
        ops::Mean(m, ops::SquaredDifference(m, input, ops::StopGradient(m, batch_mean)), reduce,
                  {.keep_dims = true});
    mean = ops::Squeeze(m, batch_mean, axes);
    variance = ops::Squeeze(m, batch_variance, axes);
    updates = {ops::AssignMovingAverage(scope, *moving_mean_, mean, options_.momentum),
               ops::AssignMovingAverage(scope, *moving_variance_, variance, options_.momentum)};
  } else {
    mean = moving_mean_->Read(scope);
    variance = moving_variance_->Read(scope);
  }
  StatusOr<Tensor> epsilon = internal::ScalarOfType(dtype, options_.epsilon);
  if (!epsilon.ok()) {
    scope.UpdateStatus(epsilon.status());
    return Output();
  }
  const Scope b = scope.NewSubScope("batchnorm");
  Output inv = ops::Rsqrt(b, ops::Add(b, variance, ops::Const(b, *epsilon)));
  if (gamma_ != nullptr) inv = ops::Mul(b, inv, gamma_->Read(b));
  Output mean_inv = ops::Mul(b, mean, inv);
  Output shift = beta_ != nullptr ? ops::Sub(b, beta_->Read(b), mean_inv) : ops::Neg(b, mean_inv);
  Output y = ops::Add(b, ops::Mul(b, input, inv), shift);
  return train ? ops::Identity(scope.WithControlDependencies(updates), y) : y;
}

}  // namespace ckflow
