// Gradients of the elementwise arithmetic ops and AddN (math_ops.cc).

#include <initializer_list>
#include <numbers>
#include <utility>
#include <vector>

#include "ops/array_ops.h"
#include "ops/grad_internal.h"
#include "ops/math_ops.h"

namespace ckflow::internal {
namespace {

Status AddGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
               std::vector<Output>* dx) {
  SetBinaryGradients(scope, op, dz[0], dz[0], dx);
  return OkStatus();
}

Status SubGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
               std::vector<Output>* dx) {
  SetBinaryGradients(scope, op, dz[0], ops::Neg(scope, dz[0]), dx);
  return OkStatus();
}

Status MulGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
               std::vector<Output>* dx) {
  const Output x = op.input(0);
  const Output y = op.input(1);
  SetBinaryGradients(scope, op, ops::Mul(scope, dz[0], y), ops::Mul(scope, x, dz[0]), dx);
  return OkStatus();
}

Status DivGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
               std::vector<Output>* dx) {
  // z = x / y: dz/dx = 1 / y, dz/dy = -x / y^2.
  const Output x = op.input(0);
  const Output y = op.input(1);
  Output gy = ops::Mul(scope, dz[0], ops::Div(scope, ops::Div(scope, ops::Neg(scope, x), y), y));
  SetBinaryGradients(scope, op, ops::Div(scope, dz[0], y), gy, dx);
  return OkStatus();
}

// Maximum and Minimum route the gradient to the input that was chosen; a tie
// goes to x, as in TensorFlow.
Status MaximumMinimumGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                          std::vector<Output>* dx) {
  const Output x = op.input(0);
  const Output y = op.input(1);
  Output x_chosen =
      op.type() == "Maximum" ? ops::GreaterEqual(scope, x, y) : ops::LessEqual(scope, x, y);
  Output zero = ScalarLike(scope, dz[0].dtype(), 0);
  SetBinaryGradients(scope, op, ops::Select(scope, x_chosen, dz[0], zero),
                     ops::Select(scope, x_chosen, zero, dz[0]), dx);
  return OkStatus();
}

Status PowGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
               std::vector<Output>* dx) {
  // z = x^y: dz/dx = y x^(y-1); dz/dy = z log(x), taken as 0 where x <= 0
  // (TensorFlow's choice: the real power is only differentiable in y there
  // if x > 0).
  const Output x = op.input(0);
  const Output y = op.input(1);
  const Output z = OutputOf(op);
  const DataType dtype = x.dtype();
  Output gx = ops::Mul(
      scope, dz[0],
      ops::Mul(scope, y, ops::Pow(scope, x, ops::Sub(scope, y, ScalarLike(scope, dtype, 1)))));
  Output zero = ScalarLike(scope, dtype, 0);
  Output positive = ops::Greater(scope, x, zero);
  Output safe_x = ops::Select(scope, positive, x, ScalarLike(scope, dtype, 1));
  Output log_x = ops::Select(scope, positive, ops::Log(scope, safe_x), zero);
  Output gy = ops::Mul(scope, dz[0], ops::Mul(scope, z, log_x));
  SetBinaryGradients(scope, op, gx, gy, dx);
  return OkStatus();
}

Status SquaredDifferenceGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                             std::vector<Output>* dx) {
  const Output x = op.input(0);
  const Output y = op.input(1);
  Output two = ScalarLike(scope, x.dtype(), 2);
  Output gx = ops::Mul(scope, dz[0], ops::Mul(scope, two, ops::Sub(scope, x, y)));
  SetBinaryGradients(scope, op, gx, ops::Neg(scope, gx), dx);
  return OkStatus();
}

Status NegGrad(const Scope& scope, const Node&, const std::vector<Output>& dz,
               std::vector<Output>* dx) {
  (*dx)[0] = ops::Neg(scope, dz[0]);
  return OkStatus();
}

Status SquareGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                  std::vector<Output>* dx) {
  const Output x = op.input(0);
  (*dx)[0] = ops::Mul(scope, dz[0], ops::Mul(scope, ScalarLike(scope, x.dtype(), 2), x));
  return OkStatus();
}

Status SqrtGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                std::vector<Output>* dx) {
  // y = sqrt(x): dy/dx = 0.5 / y.
  const Output y = OutputOf(op);
  (*dx)[0] = ops::Div(scope, ops::Mul(scope, dz[0], ScalarLike(scope, y.dtype(), 0.5)), y);
  return OkStatus();
}

Status RsqrtGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                 std::vector<Output>* dx) {
  // y = x^-1/2: dy/dx = -0.5 y^3.
  const Output y = OutputOf(op);
  Output y3 = ops::Mul(scope, ops::Square(scope, y), y);
  (*dx)[0] = ops::Mul(scope, dz[0], ops::Mul(scope, ScalarLike(scope, y.dtype(), -0.5), y3));
  return OkStatus();
}

Status ExpGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
               std::vector<Output>* dx) {
  (*dx)[0] = ops::Mul(scope, dz[0], OutputOf(op));
  return OkStatus();
}

Status LogGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
               std::vector<Output>* dx) {
  (*dx)[0] = ops::Div(scope, dz[0], op.input(0));
  return OkStatus();
}

Status Log1pGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                 std::vector<Output>* dx) {
  const Output x = op.input(0);
  (*dx)[0] = ops::Div(scope, dz[0], ops::Add(scope, ScalarLike(scope, x.dtype(), 1), x));
  return OkStatus();
}

Status ErfGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
               std::vector<Output>* dx) {
  // d erf(x)/dx = 2/sqrt(pi) exp(-x^2), in TensorFlow's order of products.
  const Output x = op.input(0);
  Output slope = ops::Mul(scope, ScalarLike(scope, x.dtype(), 2 * std::numbers::inv_sqrtpi),
                          ops::Exp(scope, ops::Neg(scope, ops::Square(scope, x))));
  (*dx)[0] = ops::Mul(scope, slope, dz[0]);
  return OkStatus();
}

Status ErfcGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                std::vector<Output>* dx) {
  // d erfc(x)/dx = -2/sqrt(pi) exp(-x^2), in TensorFlow's order of products.
  const Output x = op.input(0);
  Output scaled =
      ops::Mul(scope, dz[0], ScalarLike(scope, x.dtype(), -2 * std::numbers::inv_sqrtpi));
  (*dx)[0] = ops::Mul(scope, scaled, ops::Exp(scope, ops::Neg(scope, ops::Square(scope, x))));
  return OkStatus();
}

Status ReciprocalGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                      std::vector<Output>* dx) {
  // y = 1/x: dy/dx = -y^2.
  const Output y = OutputOf(op);
  (*dx)[0] = ops::Neg(scope, ops::Mul(scope, dz[0], ops::Square(scope, y)));
  return OkStatus();
}

Status AbsGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
               std::vector<Output>* dx) {
  (*dx)[0] = ops::Mul(scope, dz[0], ops::Sign(scope, op.input(0)));
  return OkStatus();
}

// Sign is piecewise constant: its derivative is 0 wherever it exists
// (TensorFlow's choice too), so the path exists and carries zeros.
Status SignGrad(const Scope& scope, const Node& op, const std::vector<Output>&,
                std::vector<Output>* dx) {
  (*dx)[0] = ops::ZerosLike(scope, op.input(0));
  return OkStatus();
}

Status AddNGrad(const Scope&, const Node& op, const std::vector<Output>& dz,
                std::vector<Output>* dx) {
  for (int i = 0; i < op.num_inputs(); ++i) (*dx)[i] = dz[0];
  return OkStatus();
}

}  // namespace

Status RegisterMathGradients(GradientRegistry& r) {
  for (const auto& [type, fn] : std::initializer_list<std::pair<const char*, GradientFunction>>{
           {"Add", AddGrad},
           {"Sub", SubGrad},
           {"Mul", MulGrad},
           {"Div", DivGrad},
           {"Maximum", MaximumMinimumGrad},
           {"Minimum", MaximumMinimumGrad},
           {"Pow", PowGrad},
           {"SquaredDifference", SquaredDifferenceGrad},
           {"Neg", NegGrad},
           {"Square", SquareGrad},
           {"Sqrt", SqrtGrad},
           {"Rsqrt", RsqrtGrad},
           {"Exp", ExpGrad},
           {"Log", LogGrad},
           {"Log1p", Log1pGrad},
           {"Erf", ErfGrad},
           {"Erfc", ErfcGrad},
           {"Reciprocal", ReciprocalGrad},
           {"Abs", AbsGrad},
           {"Sign", SignGrad},
           {"AddN", AddNGrad},
       }) {
    CKFLOW_RETURN_IF_ERROR(r.Register(type, fn));
  }
  return OkStatus();
}

}  // namespace ckflow::internal
