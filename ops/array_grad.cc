// Gradients of the array ops (array_ops.cc).

#include <vector>

#include "ops/array_ops.h"
#include "ops/grad_internal.h"
#include "ops/math_ops.h"

namespace ckflow::internal {

Status IdentityGrad(const Scope&, const Node&, const std::vector<Output>& dz,
                    std::vector<Output>* dx) {
  (*dx)[0] = dz[0];
  return OkStatus();
}

namespace {

Status ReshapeGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                   std::vector<Output>* dx) {
  (*dx)[0] = ops::Reshape(scope, dz[0], ShapeOf(scope, op.input(0)));
  return OkStatus();
}

Status CastGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                std::vector<Output>* dx) {
  // Only float <-> float casts pass gradients; AddGradients never sends one
  // into an integer input anyway.
  const DataType src = op.input(0).dtype();
  if (IsFloatingType(src) && IsFloatingType(dz[0].dtype())) (*dx)[0] = ops::Cast(scope, dz[0], src);
  return OkStatus();
}

Status FillGrad(const Scope& scope, const Node&, const std::vector<Output>& dz,
                std::vector<Output>* dx) {
  // Fill(dims, value): every element is the scalar value.
  (*dx)[1] = ops::Sum(scope, dz[0]);
  return OkStatus();
}

}  // namespace

Status RegisterArrayGradients(GradientRegistry& r) {
  CKFLOW_RETURN_IF_ERROR(r.Register("Identity", IdentityGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("Reshape", ReshapeGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("Cast", CastGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("Fill", FillGrad));
  // Non-differentiable by design: gradients stop here. (ZerosLike and
  // OnesLike do not depend on their input's values; TensorFlow too.)
  for (const char* type : {"StopGradient", "ZerosLike", "OnesLike", "Shape"}) {
    CKFLOW_RETURN_IF_ERROR(r.RegisterNoGradient(type));
  }
  return OkStatus();
}

}  // namespace ckflow::internal
