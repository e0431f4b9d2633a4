// Gradients of the comparison family (comparison_ops.cc): only SelectV2 has
// one; the comparisons themselves give bools, which carry no gradient.

#include <vector>

#include "ops/grad_internal.h"
#include "ops/math_ops.h"

namespace ckflow::internal {
namespace {

Status SelectGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                  std::vector<Output>* dx) {
  // SelectV2(condition, t, e): the condition is bool and gets nothing.
  const Output condition = op.input(0);
  const Output t = op.input(1);
  const Output e = op.input(2);
  Output zero = ScalarLike(scope, dz[0].dtype(), 0);
  const PartialShape& out_shape = op.output_shape(0);
  (*dx)[1] = ReduceToShape(scope, ops::Select(scope, condition, dz[0], zero), t, out_shape);
  (*dx)[2] = ReduceToShape(scope, ops::Select(scope, condition, zero, dz[0]), e, out_shape);
  return OkStatus();
}

}  // namespace

Status RegisterComparisonGradients(GradientRegistry& r) {
  return r.Register("SelectV2", SelectGrad);
}

}  // namespace ckflow::internal
