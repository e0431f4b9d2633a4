// The gradient of reading a variable (variable_ops.cc).

#include "ops/grad_internal.h"

namespace ckflow::internal {

// The gradient with respect to a variable's handle is the gradient with
// respect to the value read (AddGradients sums it over all reads).
Status RegisterVariableGradients(GradientRegistry& r) {
  return r.Register("ReadVariableOp", IdentityGrad);
}

}  // namespace ckflow::internal
