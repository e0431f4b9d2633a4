// The gradient of MatMul (matmul_op.cc).

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

}  // namespace

Status RegisterMatMulGradients(GradientRegistry& r) { return r.Register("MatMul", MatMulGrad); }

}  // namespace ckflow::internal
