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
//   ResourceApplyAdagrad(var, accum, lr, grad):
//       accum += grad^2                            (update_slots: true)
//       var   -= lr * grad / sqrt(accum)
//   ResourceApplyFtrl(var, accum, linear, grad, lr, l1, l2, lr_power):
//       new_accum = accum + grad^2
//       linear   += grad - (new_accum^-lr_power - accum^-lr_power) / lr * var
//       var       = (clamp(linear, -l1, l1) - linear)
//                   / (new_accum^-lr_power / lr + 2 * l2)
//       accum     = new_accum
//       (multiply_linear_by_lr: linear holds lr times as much, l1 and l2
//       are scaled by lr to match)
//
// The sparse forms (ResourceSparseApply*) take the gradient's rows with an
// int32/int64 vector `indices` after the gradient: row i of grad updates
// row indices[i] of every variable by the same formula (RMSProp's sparse
// kernel orders its arithmetic as TensorFlow's does:
// ms = ms * rho + grad^2 * (1 - rho); mom = mom * momentum + lr * grad /
// sqrt(ms + epsilon)). Rows not named are left alone. A row named twice is
// updated twice, in order: optimizers sum repeated rows first
// (Optimizer::ApplySparse), as TensorFlow's do, since two updates are not
// one update of the sum.
//
// The first inputs are variable handles, the hyperparameters are scalars of
// the gradient's dtype (float32 or float64), the gradient has the variable's
// shape (or, sparse, its rows' shape). The ops have no outputs. At run
// time they lock their variables (copying one first if a reader still
// holds its buffer), and fail with FailedPrecondition naming a variable that
// is not initialized and with InvalidArgument on a dtype or shape that does
// not fit or an index out of range (checked before anything is written).
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
Output ResourceApplyAdagrad(const Scope& scope, Output var, Output accum, Output lr, Output grad,
                            bool update_slots = true);
Output ResourceApplyFtrl(const Scope& scope, Output var, Output accum, Output linear, Output grad,
                         Output lr, Output l1, Output l2, Output lr_power,
                         bool multiply_linear_by_lr = false);

Output ResourceSparseApplyMomentum(const Scope& scope, Output var, Output accum, Output lr,
                                   Output grad, Output indices, Output momentum,
                                   bool use_nesterov = false);
Output ResourceSparseApplyRMSProp(const Scope& scope, Output var, Output ms, Output mom, Output lr,
                                  Output rho, Output momentum, Output epsilon, Output grad,
                                  Output indices);
Output ResourceSparseApplyAdagrad(const Scope& scope, Output var, Output accum, Output lr,
                                  Output grad, Output indices, bool update_slots = true);
Output ResourceSparseApplyFtrl(const Scope& scope, Output var, Output accum, Output linear,
                               Output grad, Output indices, Output lr, Output l1, Output l2,
                               Output lr_power, bool multiply_linear_by_lr = false);

}  // namespace ops
}  // namespace ckflow

#endif  // CKFLOW_OPS_TRAINING_OPS_H_
