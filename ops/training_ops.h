// The fused optimizer update ops, as TensorFlow 1 has them: each updates
// resource variables in place from a gradient in one pass over the elements
// (split across oneTBB workers for big variables). Optimizers
// (ops/optimizers.h) build them; the formulas are TensorFlow's kernels':
//
//   ResourceApplyGradientDescent(var, alpha, delta):
//       var -= alpha * delta
//   ResourceApplyMomentum(var, accum, lr, grad, momentum):
//       accum = accum * momentum + grad
//       var  -= lr * accum                         (use_nesterov: false)
//       var  -= lr * grad + lr * momentum * accum  (use_nesterov: true)
//   ResourceApplyAdam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2,
//                     epsilon, grad):
//       lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
//       m   += (grad - m) * (1 - beta1)
//       v   += (grad^2 - v) * (1 - beta2)
//       var -= lr_t * m / (sqrt(v) + epsilon)
//              (use_nesterov: m replaced by beta1 * m + (1 - beta1) * grad)
//   ResourceApplyRMSProp(var, ms, mom, lr, rho, momentum, epsilon, grad):
//       ms  += (grad^2 - ms) * (1 - rho)
//       mom  = mom * momentum + lr * grad / sqrt(ms + epsilon)
//       var -= mom
//
// The first inputs are variable handles, the hyperparameters are scalars of
// the gradient's dtype (float32 or float64), the gradient has the variable's
// shape. The ops have no outputs. At run time they lock their variables
// (copying one first if a reader still holds its buffer), and fail with
// FailedPrecondition naming a variable that is not initialized and with
// InvalidArgument on a dtype or shape that does not fit.
//
// Thread safety: graph building is single-threaded; the kernels lock the
// variables they update.

#ifndef CKFLOW_OPS_TRAINING_OPS_H_
#define CKFLOW_OPS_TRAINING_OPS_H_

#include "graph/graph.h"
#include "graph/op_def.h"

namespace ckflow {

// Registers the ops above in `registry`.
Status RegisterTrainingOps(OpRegistry& registry);

namespace ops {

// Each returns Output(node): a target or a control dependency, not data.
Output ResourceApplyGradientDescent(const Scope& scope, Output var, Output alpha, Output delta);
Output ResourceApplyMomentum(const Scope& scope, Output var, Output accum, Output lr, Output grad,
                             Output momentum, bool use_nesterov = false);
Output ResourceApplyAdam(const Scope& scope, Output var, Output m, Output v, Output beta1_power,
                         Output beta2_power, Output lr, Output beta1, Output beta2, Output epsilon,
                         Output grad, bool use_nesterov = false);
Output ResourceApplyRMSProp(const Scope& scope, Output var, Output ms, Output mom, Output lr,
                            Output rho, Output momentum, Output epsilon, Output grad);

}  // namespace ops
}  // namespace ckflow

#endif  // CKFLOW_OPS_TRAINING_OPS_H_
