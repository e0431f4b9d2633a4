// Gradients of the reductions (reduction_ops.cc) and of BroadcastTo
// (grad_ops.cc), the op that undoes SumToShapeOf.

#include <cstdint>
#include <vector>

#include "ops/array_ops.h"
#include "ops/grad_internal.h"
#include "ops/gradients.h"
#include "ops/math_ops.h"
#include "ops/ops_internal.h"

namespace ckflow::internal {
namespace {

// The number of elements of `x`, as a scalar of `dtype`.
Output NumElementsOf(const Scope& scope, Output x, DataType dtype) {
  const PartialShape& s = x.shape();
  if (s.IsFullyDefined())
    return ScalarLike(scope, dtype, static_cast<double>(s.ToTensorShape().num_elements()));
  return ops::Cast(scope, ops::Prod(scope, ops::Shape(scope, x, DT_INT64), 0), dtype);
}

// The shape reduction `op` (input, axis) gives its input with keep_dims:
// the input's shape with the reduced dimensions set to 1. A Const when the
// input's shape and the axes are known.
Output KeptShape(const Scope& scope, const Node& op) {
  const Output x = op.input(0);
  const Output axes = op.input(1);
  const Tensor* axes_value = ConstantValue(axes);
  if (x.shape().IsFullyDefined() && axes_value != nullptr) {
    std::vector<int64_t> dims = x.shape().dim_sizes();
    StatusOr<std::vector<int64_t>> ints = IntsFromTensor(*axes_value, "axis");
    bool known = ints.ok();
    for (size_t i = 0; known && i < ints->size(); ++i) {
      StatusOr<int> d = NormalizeAxis((*ints)[i], x.shape().rank(), "axis");
      known = d.ok();
      if (known) dims[*d] = 1;
    }
    // A bad axis fails the forward op at run time; the runtime op below
    // would report the same.
    if (known) return ops::Const<int64_t>(scope, dims, {static_cast<int64_t>(dims.size())});
  }
  return ops::ReducedShape(scope, ShapeOf(scope, x), axes);
}

// `t`, an output or gradient of reduction `op`, with the reduced dimensions
// as size 1 so that it broadcasts against the input.
Output WithKeptDims(const Scope& scope, const Node& op, Output t) {
  if (op.attrs().GetOr<bool>("keep_dims", false)) return t;
  return ops::Reshape(scope, t, KeptShape(scope, op));
}

Status SumGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
               std::vector<Output>* dx) {
  const Output x = op.input(0);
  (*dx)[0] = ops::BroadcastTo(scope, WithKeptDims(scope, op, dz[0]), ShapeOf(scope, x));
  return OkStatus();
}

Status MeanGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                std::vector<Output>* dx) {
  // Sum's gradient over the number of elements averaged. An empty mean
  // (count 0) has an empty input, so the guard against 0 changes nothing.
  const Output x = op.input(0);
  const DataType dtype = x.dtype();
  Output count = ops::Div(
      scope, NumElementsOf(scope, x, dtype),
      ops::Maximum(scope, NumElementsOf(scope, OutputOf(op), dtype), ScalarLike(scope, dtype, 1)));
  Output grad = ops::Div(scope, dz[0], count);
  (*dx)[0] = ops::BroadcastTo(scope, WithKeptDims(scope, op, grad), ShapeOf(scope, x));
  return OkStatus();
}

// Max and Min pass the gradient to the elements equal to the result; ties
// share it equally, as in TensorFlow.
Status MaxMinGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                  std::vector<Output>* dx) {
  const Output x = op.input(0);
  const Output axes = op.input(1);
  Output y = WithKeptDims(scope, op, OutputOf(op));
  Output grad = WithKeptDims(scope, op, dz[0]);
  Output chosen = ops::Cast(scope, ops::Equal(scope, x, y), x.dtype());
  Output num_chosen = ops::Sum(scope, chosen, axes, {.keep_dims = true});
  (*dx)[0] = ops::Mul(scope, ops::Div(scope, chosen, num_chosen), grad);
  return OkStatus();
}

Status SumToShapeOfGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                        std::vector<Output>* dx) {
  (*dx)[0] = ops::BroadcastTo(scope, dz[0], ShapeOf(scope, op.input(0)));
  return OkStatus();
}

Status BroadcastToGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                       std::vector<Output>* dx) {
  (*dx)[0] = ops::SumToShapeOf(scope, dz[0], op.input(0));
  return OkStatus();
}

}  // namespace

Status RegisterReductionGradients(GradientRegistry& r) {
  CKFLOW_RETURN_IF_ERROR(r.Register("Sum", SumGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("Mean", MeanGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("Max", MaxMinGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("Min", MaxMinGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("SumToShapeOf", SumToShapeOfGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("BroadcastTo", BroadcastToGrad));
  return OkStatus();
}

}  // namespace ckflow::internal
