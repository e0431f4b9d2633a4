#include "ops/gradients.h"

#include <algorithm>
#include <limits>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "ops/array_ops.h"
#include "ops/gradients_internal.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/ops_internal.h"

namespace ckflow {

// ---------------------------------------------------------------- registry

Status GradientRegistry::Register(std::string type, GradientFunction fn) {
  if (fns_.count(type)) {
    return AlreadyExistsError("gradient of op type '", type, "' is already registered");
  }
  fns_.emplace(std::move(type), fn);
  return OkStatus();
}

bool GradientRegistry::Contains(std::string_view type) const {
  return fns_.find(type) != fns_.end();
}

GradientFunction GradientRegistry::Find(std::string_view type) const {
  auto it = fns_.find(type);
  return it == fns_.end() ? nullptr : it->second;
}

std::vector<std::string> GradientRegistry::ListTypes() const {
  std::vector<std::string> types;
  for (const auto& [type, fn] : fns_) types.push_back(type);
  return types;
}

namespace {

// ----------------------------------------------------------- shared pieces

// Gradients flow through floating point tensors and through resource
// handles (to the value a ReadVariableOp reads); integers and bools block.
bool CarriesGradient(DataType dtype) { return IsFloatingType(dtype) || dtype == DT_RESOURCE; }

// Output `index` of a node a gradient function is given (Output is a
// mutable handle; the gradient functions only read through it).
Output OutputOf(const Node& op, int index = 0) { return Output(const_cast<Node*>(&op), index); }

// A scalar of `dtype` (float or double).
Output ScalarLike(const Scope& scope, DataType dtype, double value) {
  StatusOr<Tensor> t = internal::ScalarOfType(dtype, value);
  if (!t.ok()) {
    scope.UpdateStatus(t.status());
    return Output();
  }
  return ops::Const(scope, *t);
}

// The shape of `x` as an int64 vector: a Const when it is known.
Output ShapeOf(const Scope& scope, Output x) {
  const PartialShape& s = x.shape();
  if (s.IsFullyDefined()) return ops::Const<int64_t>(scope, s.dims(), {s.rank()});
  return ops::Shape(scope, x, DT_INT64);
}

// True if broadcasting `x` against `other` provably gives x's own shape, so
// the gradient needs no summing back to x: every dimension of `other` is 1
// or meets a known dimension of x other than 1.
bool BroadcastKeepsShape(const PartialShape& x, const PartialShape& other) {
  if (!x.known_rank() || !other.known_rank() || other.rank() > x.rank()) return false;
  const int offset = x.rank() - other.rank();
  for (int i = 0; i < other.rank(); ++i) {
    const int64_t xd = x.dim(offset + i);
    const int64_t od = other.dim(i);
    if (od != 1 && !(xd >= 0 && xd != 1)) return false;
  }
  return true;
}

// The gradient of a broadcasting op's output, summed down to the shape of
// its input `x`, whose partner in the broadcast was `other`.
Output ReduceToShape(const Scope& scope, Output grad, Output x, const PartialShape& other) {
  if (BroadcastKeepsShape(x.shape(), other)) return grad;
  return ops::SumToShapeOf(scope, grad, x);
}

// Fills (*grad_inputs)[0] and [1] for a binary broadcasting op whose
// gradient before reduction is gx and gy (either may be invalid).
void SetBinaryGradients(const Scope& scope, const Node& op, Output gx, Output gy,
                        std::vector<Output>* grad_inputs) {
  const Output x = op.input(0);
  const Output y = op.input(1);
  if (gx.valid()) (*grad_inputs)[0] = ReduceToShape(scope, gx, x, y.shape());
  if (gy.valid()) (*grad_inputs)[1] = ReduceToShape(scope, gy, y, x.shape());
}

// ------------------------------------------------------- elementwise math

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
           {"SelectV2", SelectGrad},
           {"Neg", NegGrad},
           {"Square", SquareGrad},
           {"Sqrt", SqrtGrad},
           {"Rsqrt", RsqrtGrad},
           {"Exp", ExpGrad},
           {"Log", LogGrad},
           {"Log1p", Log1pGrad},
           {"Reciprocal", ReciprocalGrad},
           {"Abs", AbsGrad},
           {"Sign", SignGrad},
           {"AddN", AddNGrad},
       }) {
    CKFLOW_RETURN_IF_ERROR(r.Register(type, fn));
  }
  return OkStatus();
}

// ------------------------------------------------------------- array ops

Status IdentityGrad(const Scope&, const Node&, const std::vector<Output>& dz,
                    std::vector<Output>* dx) {
  (*dx)[0] = dz[0];
  return OkStatus();
}

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

// ------------------------------------------------------------- reductions

// The value of `o` if a Const node produces it, else nullptr.
const Tensor* ConstantValue(const Output& o) {
  if (o.node()->type() != "Const") return nullptr;
  const AttrValue* v = o.node()->attrs().Find("value");
  return v == nullptr ? nullptr : std::get_if<Tensor>(v);
}

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
    std::vector<int64_t> dims = x.shape().dims();
    StatusOr<std::vector<int64_t>> ints = internal::IntsFromTensor(*axes_value, "axis");
    bool known = ints.ok();
    for (size_t i = 0; known && i < ints->size(); ++i) {
      StatusOr<int> d = internal::NormalizeAxis((*ints)[i], x.shape().rank(), "axis");
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

Status RegisterReductionGradients(GradientRegistry& r) {
  CKFLOW_RETURN_IF_ERROR(r.Register("Sum", SumGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("Mean", MeanGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("Max", MaxMinGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("Min", MaxMinGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("SumToShapeOf", SumToShapeOfGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("BroadcastTo", BroadcastToGrad));
  return OkStatus();
}

// ----------------------------------------------------------------- MatMul

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

// --------------------------------------------------------------------- nn

Status ReluGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                std::vector<Output>* dx) {
  (*dx)[0] = ops::ReluGrad(scope, dz[0], op.input(0));
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

// Second order: the gradients of the activation gradients.
Status ReluGradGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                    std::vector<Output>* dx) {
  // Linear in `gradients`; piecewise constant in `features`.
  (*dx)[0] = ops::ReluGrad(scope, dz[0], op.input(1));
  (*dx)[1] = ops::ZerosLike(scope, op.input(1));
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

Status RegisterNnGradients(GradientRegistry& r) {
  for (const auto& [type, fn] : std::initializer_list<std::pair<const char*, GradientFunction>>{
           {"MatMul", MatMulGrad},
           {"Relu", ReluGrad},
           {"Sigmoid", SigmoidGrad},
           {"Tanh", TanhGrad},
           {"ReluGrad", ReluGradGrad},
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

// -------------------------------------------------------------- variables

// The gradient with respect to a variable's handle is the gradient with
// respect to the value read (AddGradients sums it over all reads).
Status RegisterVariableGradients(GradientRegistry& r) {
  return r.Register("ReadVariableOp", IdentityGrad);
}

Status RegisterStandardGradients(GradientRegistry& registry) {
  // The one list of gradient groups. A new group is one more line here.
  using RegisterFn = Status (*)(GradientRegistry&);
  for (RegisterFn register_group : {
           RegisterMathGradients,
           RegisterArrayGradients,
           RegisterReductionGradients,
           RegisterNnGradients,
           RegisterVariableGradients,
       }) {
    CKFLOW_RETURN_IF_ERROR(register_group(registry));
  }
  return OkStatus();
}

}  // namespace

const GradientRegistry& StandardGradients() {
  // Filled on first use (thread-safe static initialization), never before
  // main; never destroyed.
  static const GradientRegistry* const registry = [] {
    auto* r = new GradientRegistry();
    Status s = RegisterStandardGradients(*r);
    if (!s.ok()) internal::CheckFailed(__FILE__, __LINE__, s.ToString().c_str());
    return r;
  }();
  return *registry;
}

// ------------------------------------------------------------ AddGradients

namespace {

// Checks that each of `outputs` is a valid output of a node in `graph`.
Status CheckOutputs(const Graph& graph, const std::vector<Output>& outputs, std::string_view what) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Output& o = outputs[i];
    if (!o.valid()) {
      return InvalidArgumentError(what, "[", i, "] is invalid (an earlier build step failed)");
    }
    if (&o.node()->graph() != &graph) {
      return InvalidArgumentError(what, "[", i, "] (", o.name(), ") is from another graph");
    }
    if (o.index() < 0 || o.index() >= o.node()->num_outputs()) {
      return InvalidArgumentError(what, "[", i, "] refers to output ", o.index(), " of ",
                                  o.node()->name(), ", which has ", o.node()->num_outputs(),
                                  " outputs");
    }
  }
  return OkStatus();
}

// One reverse-accumulation pass over a topological order of the nodes that
// may lie between xs and ys (graph ids from the first x on, or a tape's
// recording): a forward sweep finds what depends on xs and a backward sweep
// meets every node after all of its consumers.
class GradientBuilder {
 public:
  GradientBuilder(const Scope& scope, const GradientRegistry& registry)
      : scope_(scope), registry_(registry) {}

  StatusOr<std::vector<Output>> Build(const std::vector<Output>& ys, const std::vector<Output>& xs,
                                      const std::vector<Output>& grad_ys,
                                      const std::vector<const Node*>& order);

 private:
  // True if a gradient flowing into `o` can reach some x.
  bool OnPath(const Output& o) const {
    if (!CarriesGradient(o.dtype())) return false;
    return reached_.count(o.node()) > 0 || xs_.count({o.node(), o.index()}) > 0;
  }
  void MarkReached(const std::vector<const Node*>& order);
  // The name scope of `node`'s gradient, "gradients/<node>_grad", made once.
  const Scope& GradientScope(const Node& node);
  // The gradients that have reached output `index` of `node`, summed into
  // one (invalid if none).
  Output SumGradients(const Node& node, int index);
  Status Backprop(const Node& node);

  const Scope& scope_;
  const GradientRegistry& registry_;
  Scope gradients_scope_ = scope_;
  std::set<std::pair<const Node*, int>> xs_;  // (node, output index)
  std::unordered_set<const Node*> reached_;   // depends on an x
  // Gradients that have arrived at each output of a node, to be summed.
  std::unordered_map<const Node*, std::vector<std::vector<Output>>> pending_;
  std::unordered_map<const Node*, Scope> node_scopes_;
};

void GradientBuilder::MarkReached(const std::vector<const Node*>& order) {
  for (const Node* node : order) {
    // A node known to have no gradient blocks every path through it.
    if (registry_.Contains(node->type()) && registry_.Find(node->type()) == nullptr) continue;
    if (std::any_of(node->inputs().begin(), node->inputs().end(),
                    [this](const Output& in) { return OnPath(in); })) {
      reached_.insert(node);
    }
  }
}

const Scope& GradientBuilder::GradientScope(const Node& node) {
  auto it = node_scopes_.find(&node);
  if (it == node_scopes_.end()) {
    it = node_scopes_.emplace(&node, gradients_scope_.NewSubScope(node.name() + "_grad")).first;
  }
  return it->second;
}

Output GradientBuilder::SumGradients(const Node& node, int index) {
  auto it = pending_.find(&node);
  if (it == pending_.end()) return Output();
  std::vector<Output>& grads = it->second[index];
  if (grads.empty()) return Output();
  if (grads.size() > 1) grads = {ops::AddN(GradientScope(node), grads)};
  return grads[0];
}

Status GradientBuilder::Backprop(const Node& node) {
  auto it = pending_.find(&node);
  if (it == pending_.end()) return OkStatus();
  const Scope& scope = GradientScope(node);
  std::vector<Output> grad_outputs(node.num_outputs());
  for (int i = 0; i < node.num_outputs(); ++i) grad_outputs[i] = SumGradients(node, i);

  const std::string where = internal::StrCat(node.name(), " (", node.type(), ")");
  GradientFunction fn = registry_.Find(node.type());
  if (fn == nullptr) {
    return InvalidArgumentError("no gradient defined for ", where,
                                ", which lies on a path from xs to ys");
  }
  std::vector<Output> grad_inputs(node.num_inputs());
  CKFLOW_RETURN_IF_ERROR(fn(scope, node, grad_outputs, &grad_inputs).WithContext(where));
  CKFLOW_RETURN_IF_ERROR(scope.status());
  if (grad_inputs.size() != static_cast<size_t>(node.num_inputs())) {
    return InternalError("gradient of ", where, " returned ", grad_inputs.size(),
                         " input gradients for ", node.num_inputs(), " inputs");
  }
  for (int i = 0; i < node.num_inputs(); ++i) {
    const Output& in = node.input(i);
    const Output& grad = grad_inputs[i];
    if (!grad.valid() || !OnPath(in)) continue;
    // A resource's gradient is its value's, so only other inputs must match.
    if (in.dtype() != DT_RESOURCE && grad.dtype() != in.dtype()) {
      return InternalError("gradient of ", where, " for input ", i, " is ",
                           DataTypeName(grad.dtype()), ", but the input is ",
                           DataTypeName(in.dtype()));
    }
    auto& slots = pending_[in.node()];
    slots.resize(in.node()->num_outputs());
    slots[in.index()].push_back(grad);
  }
  return OkStatus();
}

StatusOr<std::vector<Output>> GradientBuilder::Build(const std::vector<Output>& ys,
                                                     const std::vector<Output>& xs,
                                                     const std::vector<Output>& grad_ys,
                                                     const std::vector<const Node*>& order) {
  for (const Output& x : xs) xs_.insert({x.node(), x.index()});
  if (!xs.empty()) MarkReached(order);

  gradients_scope_ = scope_.NewSubScope("gradients");
  for (size_t i = 0; i < ys.size(); ++i) {
    const Output& y = ys[i];
    if (!OnPath(y)) continue;  // nothing to propagate; skip building ones
    Output grad_y =
        grad_ys.empty()
            ? ops::OnesLike(gradients_scope_.WithOpName(internal::StrCat("grad_ys_", i)), y)
            : grad_ys[i];
    auto& slots = pending_[y.node()];
    slots.resize(y.node()->num_outputs());
    slots[y.index()].push_back(grad_y);
  }
  CKFLOW_RETURN_IF_ERROR(scope_.status());

  // Nodes that no y depends on have nothing pending, and Backprop skips them.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (reached_.count(*it)) CKFLOW_RETURN_IF_ERROR(Backprop(**it));
  }
  std::vector<Output> result;
  result.reserve(xs.size());
  for (const Output& x : xs) {
    result.push_back(CarriesGradient(x.dtype()) ? SumGradients(*x.node(), x.index()) : Output());
  }
  CKFLOW_RETURN_IF_ERROR(scope_.status());
  return result;
}

}  // namespace

namespace internal {

StatusOr<std::vector<Output>> GradientsAlong(const Scope& scope, const std::vector<Output>& ys,
                                             const std::vector<Output>& xs,
                                             const std::vector<const Node*>& order,
                                             const std::vector<Output>& grad_ys,
                                             const GradientRegistry* registry) {
  CKFLOW_RETURN_IF_ERROR(scope.status());
  const Graph& graph = scope.graph();
  CKFLOW_RETURN_IF_ERROR(CheckOutputs(graph, ys, "ys"));
  CKFLOW_RETURN_IF_ERROR(CheckOutputs(graph, xs, "xs"));
  CKFLOW_RETURN_IF_ERROR(CheckOutputs(graph, grad_ys, "grad_ys"));
  if (!grad_ys.empty() && grad_ys.size() != ys.size()) {
    return InvalidArgumentError("AddGradients: ", grad_ys.size(), " grad_ys for ", ys.size(),
                                " ys");
  }
  for (size_t i = 0; i < grad_ys.size(); ++i) {
    const Output& y = ys[i];
    const Output& g = grad_ys[i];
    if (g.dtype() != y.dtype() || !g.shape().IsCompatibleWith(y.shape())) {
      return InvalidArgumentError("AddGradients: grad_ys[", i, "] (", g.name(), ") is ",
                                  DataTypeName(g.dtype()), g.shape().ToString(), ", but ys[", i,
                                  "] (", y.name(), ") is ", DataTypeName(y.dtype()),
                                  y.shape().ToString());
    }
  }
  GradientBuilder builder(scope, registry != nullptr ? *registry : StandardGradients());
  return builder.Build(ys, xs, grad_ys, order);
}

}  // namespace internal

StatusOr<std::vector<Output>> AddGradients(const Scope& scope, const std::vector<Output>& ys,
                                           const std::vector<Output>& xs,
                                           const std::vector<Output>& grad_ys,
                                           const GradientRegistry* registry) {
  CKFLOW_RETURN_IF_ERROR(scope.status());
  if (scope.eager()) {
    return FailedPreconditionError(
        "AddGradients differentiates a graph; in an eager scope, record the ops with a "
        "GradientTape (ops/gradient_tape.h)");
  }
  const Graph& graph = scope.graph();
  CKFLOW_RETURN_IF_ERROR(CheckOutputs(graph, xs, "xs"));
  // Ids are a topological order: everything after the first x.
  int first_x = graph.num_nodes();
  for (const Output& x : xs) first_x = std::min(first_x, x.node()->id());
  std::vector<const Node*> order;
  for (int id = first_x + 1; id < graph.num_nodes(); ++id) order.push_back(graph.node(id));
  return internal::GradientsAlong(scope, ys, xs, order, grad_ys, registry);
}

}  // namespace ckflow
