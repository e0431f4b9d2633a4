#include "ops/normalization_layers.h"

#include <algorithm>
#include <utility>

#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "ops/layers_internal.h"
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
  if (options_.axis != -1 && options_.axis != 3) {
    return InvalidArgumentError("axis must be -1 or 3 (the channels of NHWC), got ", options_.axis);
  }
  CKFLOW_RETURN_IF_ERROR(internal::CheckImageInput(input));
  const DataType dtype = input.dtype();
  const TensorShape shape({input.shape().dim(3)});
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

}  // namespace ckflow
