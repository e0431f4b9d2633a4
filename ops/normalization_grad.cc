// Gradients of the normalization ops (normalization_ops.cc), as
// TensorFlow's: FusedBatchNormV3's gradient flows from y into x, scale and
// offset through FusedBatchNormGradV3; its mean and variance inputs and its
// statistics outputs carry none. LayerNorm's flows through LayerNormGrad.

#include <string>
#include <vector>

#include "ops/grad_internal.h"
#include "ops/normalization_ops.h"

namespace ckflow::internal {
namespace {

Status FusedBatchNormGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                          std::vector<Output>* dx) {
  if (!dz[0].valid()) return OkStatus();  // only the statistics were used
  const AttrMap& a = op.attrs();
  const ops::FusedBatchNormAttrs attrs{.epsilon = a.GetOr<float>("epsilon", 1e-4f),
                                       .data_format = a.GetOr<std::string>("data_format", "NHWC"),
                                       .is_training = a.GetOr<bool>("is_training", true)};
  // Training normalized with the batch's statistics, which the op saved in
  // its reserve spaces; inference with its mean and variance inputs.
  const Output mean = attrs.is_training ? OutputOf(op, 3) : op.input(3);
  const Output variance = attrs.is_training ? OutputOf(op, 4) : op.input(4);
  ops::FusedBatchNormGradOutputs g = ops::FusedBatchNormGrad(
      scope, dz[0], op.input(0), op.input(1), mean, variance, OutputOf(op, 5), attrs);
  (*dx)[0] = g.x_backprop;
  (*dx)[1] = g.scale_backprop;
  (*dx)[2] = g.offset_backprop;
  return OkStatus();
}

Status LayerNormGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                     std::vector<Output>* dx) {
  (*dx)[0] =
      ops::LayerNormGrad(scope, dz[0], op.input(0), op.attrs().GetOr<float>("epsilon", 1e-3f));
  return OkStatus();
}

}  // namespace

Status RegisterNormalizationGradients(GradientRegistry& r) {
  CKFLOW_RETURN_IF_ERROR(r.Register("FusedBatchNormV3", FusedBatchNormGrad));
  return r.Register("LayerNorm", LayerNormGrad);
}

}  // namespace ckflow::internal
