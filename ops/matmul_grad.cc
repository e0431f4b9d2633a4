// The gradients of MatMul and BatchMatMulV2 (matmul_op.cc).

#include <algorithm>
#include <vector>

#include "ops/grad_internal.h"
#include "ops/math_ops.h"

namespace ckflow::internal {
namespace {

Status MatMulGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                  std::vector<Output>* dx) {
  // With C = op(A) op(B): dA = dC op(B)^T, dB = op(A)^T dC, each arranged
  // so no transpose is materialized (TensorFlow's four cases).
  const Output a = op.input(0);
  const Output b = op.input(1);
  const Output g = dz[0];
  const bool ta = op.attrs().GetOr<bool>("transpose_a", false);
  const bool tb = op.attrs().GetOr<bool>("transpose_b", false);
  if (!ta && !tb) {
    (*dx)[0] = ops::MatMul(scope, g, b, {.transpose_b = true});
    (*dx)[1] = ops::MatMul(scope, a, g, {.transpose_a = true});
  } else if (!ta && tb) {
    (*dx)[0] = ops::MatMul(scope, g, b);
    (*dx)[1] = ops::MatMul(scope, g, a, {.transpose_a = true});
  } else if (ta && !tb) {
    (*dx)[0] = ops::MatMul(scope, b, g, {.transpose_b = true});
    (*dx)[1] = ops::MatMul(scope, a, g);
  } else {
    (*dx)[0] = ops::MatMul(scope, b, g, {.transpose_a = true, .transpose_b = true});
    (*dx)[1] = ops::MatMul(scope, g, a, {.transpose_a = true, .transpose_b = true});
  }
  return OkStatus();
}

// `g` (the gradient with respect to an operand of a BatchMatMulV2 with
// output `z`, in the output's batch shape) summed over the batch
// dimensions that `operand` broadcast along.
Output SumBroadcastBatch(const Scope& scope, Output g, Output operand, Output z) {
  const PartialShape& o = operand.shape();
  const PartialShape& out = z.shape();
  if (o.IsFullyDefined() && out.IsFullyDefined() && o.rank() == out.rank() &&
      std::equal(o.dims().begin(), o.dims().end() - 2, out.dims().begin())) {
    return g;
  }
  return ops::SumToShapeOf(scope, g, operand);
}

Status BatchMatMulGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                       std::vector<Output>* dx) {
  // MatMul's four cases, matrix by matrix (TensorFlow's _BatchMatMulV2),
  // then summed over the batch dimensions each operand was broadcast along.
  const Output x = op.input(0);
  const Output y = op.input(1);
  const Output g = dz[0];
  const bool ax = op.attrs().GetOr<bool>("adj_x", false);
  const bool ay = op.attrs().GetOr<bool>("adj_y", false);
  Output gx, gy;
  if (!ax && !ay) {
    gx = ops::BatchMatMul(scope, g, y, {.adj_y = true});
    gy = ops::BatchMatMul(scope, x, g, {.adj_x = true});
  } else if (!ax && ay) {
    gx = ops::BatchMatMul(scope, g, y);
    gy = ops::BatchMatMul(scope, g, x, {.adj_x = true});
  } else if (ax && !ay) {
    gx = ops::BatchMatMul(scope, y, g, {.adj_y = true});
    gy = ops::BatchMatMul(scope, x, g);
  } else {
    gx = ops::BatchMatMul(scope, y, g, {.adj_x = true, .adj_y = true});
    gy = ops::BatchMatMul(scope, g, x, {.adj_x = true, .adj_y = true});
  }
  (*dx)[0] = SumBroadcastBatch(scope, gx, x, OutputOf(op));
  (*dx)[1] = SumBroadcastBatch(scope, gy, y, OutputOf(op));
  return OkStatus();
}

}  // namespace

Status RegisterMatMulGradients(GradientRegistry& r) {
  CKFLOW_RETURN_IF_ERROR(r.Register("MatMul", MatMulGrad));
  return r.Register("BatchMatMulV2", BatchMatMulGrad);
}

}  // namespace ckflow::internal
