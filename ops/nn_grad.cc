// Gradients of the nn ops (nn_ops.cc): activations and their own gradient
// ops (second order), BiasAdd, softmax and the cross-entropy losses.
// Dropout is a composite of ops with gradients (Mul, SelectV2).

#include <initializer_list>
#include <numbers>
#include <utility>
#include <vector>

#include "ops/array_ops.h"
#include "ops/grad_internal.h"
#include "ops/gradients.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"

namespace ckflow::internal {
namespace {

// Through Relu's output, as TensorFlow's gradient: output > 0 exactly where
// input > 0, and then Relu is its input's only reader, so it can write in
// that buffer (KernelContext::ForwardInputOrAllocateOutput).
Status ReluGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                std::vector<Output>* dx) {
  (*dx)[0] = ops::ReluGrad(scope, dz[0], OutputOf(op));
  return OkStatus();
}

Status SigmoidGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                   std::vector<Output>* dx) {
  (*dx)[0] = ops::SigmoidGrad(scope, OutputOf(op), dz[0]);
  return OkStatus();
}

Status TanhGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                std::vector<Output>* dx) {
  (*dx)[0] = ops::TanhGrad(scope, OutputOf(op), dz[0]);
  return OkStatus();
}

// Relu6, Elu and Selu differentiate through their output too, Softplus and
// LeakyRelu through their input, as TensorFlow's gradients do.
Status Relu6Grad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                 std::vector<Output>* dx) {
  (*dx)[0] = ops::Relu6Grad(scope, dz[0], OutputOf(op));
  return OkStatus();
}

float AlphaOf(const Node& op) { return op.attrs().GetOr<float>("alpha", 0.2f); }

Status LeakyReluGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                     std::vector<Output>* dx) {
  (*dx)[0] = ops::LeakyReluGrad(scope, dz[0], op.input(0), AlphaOf(op));
  return OkStatus();
}

Status EluGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
               std::vector<Output>* dx) {
  (*dx)[0] = ops::EluGrad(scope, dz[0], OutputOf(op));
  return OkStatus();
}

Status SeluGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                std::vector<Output>* dx) {
  (*dx)[0] = ops::SeluGrad(scope, dz[0], OutputOf(op));
  return OkStatus();
}

Status SoftplusGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                    std::vector<Output>* dx) {
  (*dx)[0] = ops::SoftplusGrad(scope, dz[0], op.input(0));
  return OkStatus();
}

// Second order: the gradients of the activation gradients.
// ReluGrad and Relu6Grad are linear in `gradients` and piecewise constant
// in `features`.
template <Output (*kGradOp)(const Scope&, ops::Input, ops::Input)>
Status PiecewiseLinearGradGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                               std::vector<Output>* dx) {
  (*dx)[0] = kGradOp(scope, dz[0], op.input(1));
  (*dx)[1] = ops::ZerosLike(scope, op.input(1));
  return OkStatus();
}

Status LeakyReluGradGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                         std::vector<Output>* dx) {
  (*dx)[0] = ops::LeakyReluGrad(scope, dz[0], op.input(1), AlphaOf(op));
  (*dx)[1] = ops::ZerosLike(scope, op.input(1));
  return OkStatus();
}

// EluGrad and SeluGrad (gradients g, outputs y) are linear in g and, where
// y < 0, g * (y + c): their derivative in y is g there, 0 elsewhere.
template <Output (*kGradOp)(const Scope&, ops::Input, ops::Input)>
Status ExponentialLinearGradGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                                 std::vector<Output>* dx) {
  const Output g = op.input(0);
  const Output y = op.input(1);
  (*dx)[0] = kGradOp(scope, dz[0], y);
  (*dx)[1] = ops::Select(scope, ops::Less(scope, y, ScalarLike(scope, y.dtype(), 0)),
                         ops::Mul(scope, dz[0], g), ops::ZerosLike(scope, y));
  return OkStatus();
}

Status SoftplusGradGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                        std::vector<Output>* dx) {
  // SoftplusGrad(dy, x) = dy / (1 + exp(-x)): d/d dy = 1 / (1 + exp(-x)),
  // d/dx = dy / (exp(-x) + 2 + exp(x)).
  const Output dy = op.input(0);
  const Output x = op.input(1);
  (*dx)[0] = ops::SoftplusGrad(scope, dz[0], x);
  Output denominator = ops::Add(
      scope, ops::Add(scope, ops::Exp(scope, ops::Neg(scope, x)), ScalarLike(scope, x.dtype(), 2)),
      ops::Exp(scope, x));
  (*dx)[1] = ops::Div(scope, ops::Mul(scope, dz[0], dy), denominator);
  return OkStatus();
}

Status SigmoidGradGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                       std::vector<Output>* dx) {
  // z = dy * y * (1 - y): dz/dy_in = dy * (1 - 2y), dz/d dy = y (1 - y).
  const Output y = op.input(0);
  const Output dy = op.input(1);
  Output one_minus_2y = ops::Sub(scope, ScalarLike(scope, y.dtype(), 1),
                                 ops::Mul(scope, ScalarLike(scope, y.dtype(), 2), y));
  (*dx)[0] = ops::Mul(scope, dz[0], ops::Mul(scope, dy, one_minus_2y));
  (*dx)[1] = ops::SigmoidGrad(scope, y, dz[0]);
  return OkStatus();
}

Status TanhGradGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                    std::vector<Output>* dx) {
  // z = dy * (1 - y^2): dz/dy_in = -2 y dy, dz/d dy = 1 - y^2.
  const Output y = op.input(0);
  const Output dy = op.input(1);
  (*dx)[0] = ops::Mul(scope, dz[0],
                      ops::Mul(scope, ScalarLike(scope, y.dtype(), -2), ops::Mul(scope, y, dy)));
  (*dx)[1] = ops::TanhGrad(scope, y, dz[0]);
  return OkStatus();
}

// The exact GELU differentiates through its input, as the composite does.
Status GeluGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                std::vector<Output>* dx) {
  (*dx)[0] = ops::GeluGrad(scope, dz[0], op.input(0));
  return OkStatus();
}

Status GeluGradGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                    std::vector<Output>* dx) {
  // GeluGrad(dy, x) = dy * gelu'(x): d/d dy = gelu'(x), d/dx = dy *
  // gelu''(x) = dy * (2 - x^2) * exp(-x^2 / 2) / sqrt(2 pi).
  const Output dy = op.input(0);
  const Output x = op.input(1);
  const DataType dtype = x.dtype();
  (*dx)[0] = ops::GeluGrad(scope, dz[0], x);
  Output x2 = ops::Square(scope, x);
  Output density =
      ops::Mul(scope, ops::Exp(scope, ops::Mul(scope, x2, ScalarLike(scope, dtype, -0.5))),
               ScalarLike(scope, dtype, 0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2));
  (*dx)[1] = ops::Mul(scope, ops::Mul(scope, dz[0], dy),
                      ops::Mul(scope, ops::Sub(scope, ScalarLike(scope, dtype, 2), x2), density));
  return OkStatus();
}

Status BiasAddGrad(const Scope& scope, const Node&, const std::vector<Output>& dz,
                   std::vector<Output>* dx) {
  (*dx)[0] = dz[0];
  (*dx)[1] = ops::BiasAddGrad(scope, dz[0]);
  return OkStatus();
}

Status BiasAddGradGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                       std::vector<Output>* dx) {
  // The bias gradient sums over all but the last dimension; its gradient
  // spreads back over them.
  (*dx)[0] = ops::BroadcastTo(scope, dz[0], ShapeOf(scope, op.input(0)));
  return OkStatus();
}

// The Jacobian-vector product of softmax (over the last dimension) with g:
// (g - sum(g * s, -1)) * s for s = softmax.
Output SoftmaxBackprop(const Scope& scope, Output s, Output g) {
  Output dot = ops::Sum(scope, ops::Mul(scope, g, s), -1, {.keep_dims = true});
  return ops::Mul(scope, ops::Sub(scope, g, dot), s);
}

Status SoftmaxGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                   std::vector<Output>* dx) {
  (*dx)[0] = SoftmaxBackprop(scope, OutputOf(op), dz[0]);
  return OkStatus();
}

Status LogSoftmaxGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                      std::vector<Output>* dx) {
  // y = x - logsumexp(x): dx = g - softmax(x) * sum(g, -1).
  Output softmax = ops::Exp(scope, OutputOf(op));
  Output total = ops::Sum(scope, dz[0], -1, {.keep_dims = true});
  (*dx)[0] = ops::Sub(scope, dz[0], ops::Mul(scope, softmax, total));
  return OkStatus();
}

// `v`, a vector over the batch, as a column [batch, 1] that broadcasts
// against `like` [batch, classes].
Output AsColumn(const Scope& scope, Output v, Output like) {
  const PartialShape& s = like.shape();
  if (s.IsFullyDefined() && s.rank() == 2) {
    return ops::Reshape(scope, v, ops::Const<int64_t>(scope, {s.dim(0), 1}, {2}));
  }
  return ops::Reshape(scope, v, ops::ReducedShape(scope, ShapeOf(scope, like), -1));
}

// The cross-entropy ops have two outputs, loss and backprop (= softmax -
// labels, with one-hot labels for the sparse op); either may carry a
// gradient.
Status CrossEntropyGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                        std::vector<Output>* dx) {
  const Output logits = op.input(0);
  const Output labels = op.input(1);
  const Output backprop = OutputOf(op, 1);
  Output dlogits;
  Output dlabels;
  if (dz[0].valid()) {
    Output g = AsColumn(scope, dz[0], backprop);
    dlogits = ops::Mul(scope, g, backprop);
    dlabels = ops::Mul(scope, g, ops::Neg(scope, ops::LogSoftmax(scope, logits)));
  }
  if (dz[1].valid()) {
    Output through_softmax = SoftmaxBackprop(scope, ops::Softmax(scope, logits), dz[1]);
    dlogits = dlogits.valid() ? ops::Add(scope, dlogits, through_softmax) : through_softmax;
    Output minus = ops::Neg(scope, dz[1]);
    dlabels = dlabels.valid() ? ops::Add(scope, dlabels, minus) : minus;
  }
  (*dx)[0] = dlogits;
  if (IsFloatingType(labels.dtype())) (*dx)[1] = dlabels;  // sparse labels are indices
  return OkStatus();
}

Status SigmoidCrossEntropyGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                               std::vector<Output>* dx) {
  // loss = max(x, 0) - x z + log(1 + exp(-|x|)): d/dx = sigmoid(x) - z,
  // d/dz = -x.
  const Output x = op.input(0);
  const Output z = op.input(1);
  SetBinaryGradients(scope, op, ops::Mul(scope, dz[0], ops::Sub(scope, ops::Sigmoid(scope, x), z)),
                     ops::Mul(scope, dz[0], ops::Neg(scope, x)), dx);
  return OkStatus();
}

}  // namespace

Status RegisterNnGradients(GradientRegistry& r) {
  for (const auto& [type, fn] : std::initializer_list<std::pair<const char*, GradientFunction>>{
           {"Relu", ReluGrad},
           {"Sigmoid", SigmoidGrad},
           {"Tanh", TanhGrad},
           {"Relu6", Relu6Grad},
           {"LeakyRelu", LeakyReluGrad},
           {"Elu", EluGrad},
           {"Selu", SeluGrad},
           {"Softplus", SoftplusGrad},
           {"Gelu", GeluGrad},
           {"GeluGrad", GeluGradGrad},
           {"ReluGrad", PiecewiseLinearGradGrad<ops::ReluGrad>},
           {"Relu6Grad", PiecewiseLinearGradGrad<ops::Relu6Grad>},
           {"LeakyReluGrad", LeakyReluGradGrad},
           {"EluGrad", ExponentialLinearGradGrad<ops::EluGrad>},
           {"SeluGrad", ExponentialLinearGradGrad<ops::SeluGrad>},
           {"SoftplusGrad", SoftplusGradGrad},
           {"SigmoidGrad", SigmoidGradGrad},
           {"TanhGrad", TanhGradGrad},
           {"BiasAdd", BiasAddGrad},
           {"BiasAddGrad", BiasAddGradGrad},
           {"Softmax", SoftmaxGrad},
           {"LogSoftmax", LogSoftmaxGrad},
           {"SoftmaxCrossEntropyWithLogits", CrossEntropyGrad},
           {"SparseSoftmaxCrossEntropyWithLogits", CrossEntropyGrad},
           {"SigmoidCrossEntropyWithLogits", SigmoidCrossEntropyGrad},
       }) {
    CKFLOW_RETURN_IF_ERROR(r.Register(type, fn));
  }
  return OkStatus();
}

}  // namespace ckflow::internal
