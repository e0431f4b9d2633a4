#include "ops/grad_internal.h"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/ops_internal.h"

namespace ckflow::internal {
namespace {

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

}  // namespace

Output ScalarLike(const Scope& scope, DataType dtype, double value) {
  StatusOr<Tensor> t = ScalarOfType(dtype, value);
  if (!t.ok()) {
    scope.UpdateStatus(t.status());
    return Output();
  }
  return ops::Const(scope, *t);
}

const Tensor* ConstantValue(const Output& o) {
  if (o.node()->type() != "Const") return nullptr;
  return o.node()->attrs().GetIf<Tensor>("value");
}

std::optional<std::vector<int64_t>> ConstantIntsOf(const Output& o) {
  const Tensor* t = ConstantValue(o);
  if (t == nullptr) return std::nullopt;
  StatusOr<Tensor> flat = t->Reshaped(TensorShape({t->NumElements()}));
  if (!flat.ok()) return std::nullopt;
  StatusOr<std::vector<int64_t>> ints = IntsFromTensor(*flat, "");
  if (!ints.ok()) return std::nullopt;
  return *std::move(ints);
}

Output ShapeOf(const Scope& scope, Output x) {
  const PartialShape& s = x.shape();
  if (s.IsFullyDefined()) return ops::Const<int64_t>(scope, s.dim_sizes(), {s.rank()});
  return ops::Shape(scope, x, DT_INT64);
}

Output ReduceToShape(const Scope& scope, Output grad, Output x, const PartialShape& other) {
  if (BroadcastKeepsShape(x.shape(), other)) return grad;
  return ops::SumToShapeOf(scope, grad, x);
}

void SetBinaryGradients(const Scope& scope, const Node& op, Output gx, Output gy,
                        std::vector<Output>* grad_inputs) {
  const Output x = op.input(0);
  const Output y = op.input(1);
  if (gx.valid()) (*grad_inputs)[0] = ReduceToShape(scope, gx, x, y.shape());
  if (gy.valid()) (*grad_inputs)[1] = ReduceToShape(scope, gy, y, x.shape());
}

}  // namespace ckflow::internal
