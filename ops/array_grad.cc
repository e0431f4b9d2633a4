// Gradients of the array ops (array_ops.cc, array_slicing_ops.cc).

#include <cstdint>
#include <optional>
#include <vector>

#include "ops/array_ops.h"
#include "ops/grad_internal.h"
#include "ops/math_ops.h"
#include "ops/ops_internal.h"

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

// The band of the gradient: what the band kept passes, the rest was zeroed.
Status MatrixBandPartGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                          std::vector<Output>* dx) {
  (*dx)[0] = ops::MatrixBandPart(scope, dz[0], op.input(1), op.input(2));
  return OkStatus();
}

// Slice's gradient pads the gradient back to the input's shape with zeros:
// begin before, the rest after (TensorFlow builds the same paddings).
// TensorFlow's: StridedSliceGrad puts dz back where the slice took it.
Status StridedSliceGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                        std::vector<Output>* dx) {
  const AttrMap& a = op.attrs();
  ops::StridedSliceAttrs attrs{a.GetOr<int64_t>("begin_mask", 0), a.GetOr<int64_t>("end_mask", 0),
                               a.GetOr<int64_t>("ellipsis_mask", 0),
                               a.GetOr<int64_t>("new_axis_mask", 0),
                               a.GetOr<int64_t>("shrink_axis_mask", 0)};
  (*dx)[0] = ops::StridedSliceGrad(scope, ops::Shape(scope, op.input(0), op.input(1).dtype()),
                                   op.input(1), op.input(2), op.input(3), dz[0], attrs);
  return OkStatus();
}

Status SliceGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                 std::vector<Output>* dx) {
  const Output x = op.input(0);
  const Output begin = op.input(1);
  const Output y = OutputOf(op);
  const std::optional<std::vector<int64_t>> b = ConstantIntsOf(begin);
  if (b && x.shape().IsFullyDefined() && y.shape().IsFullyDefined()) {
    const int64_t rank = x.shape().rank();
    std::vector<int64_t> paddings;
    for (int d = 0; d < rank; ++d) {
      paddings.push_back((*b)[d]);
      paddings.push_back(x.shape().dim(d) - y.shape().dim(d) - (*b)[d]);
    }
    (*dx)[0] = ops::Pad(scope, dz[0], ops::Const<int64_t>(scope, paddings, {rank, 2}));
    return OkStatus();
  }
  const DataType index = begin.dtype();
  Output before = ops::Reshape(scope, begin, {-1, 1});
  Output after = ops::Reshape(
      scope,
      ops::Sub(scope, ops::Sub(scope, ops::Shape(scope, x, index), ops::Shape(scope, y, index)),
               begin),
      {-1, 1});
  (*dx)[0] = ops::Pad(scope, dz[0], ops::Concat(scope, {before, after}, 1));
  return OkStatus();
}

// Pad's (and PadV2's) gradient is the slice of the gradient where the input
// was; constant_values gets none, as in TensorFlow.
Status PadGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
               std::vector<Output>* dx) {
  const Output x = op.input(0);
  const Output paddings = op.input(1);
  const std::optional<std::vector<int64_t>> p = ConstantIntsOf(paddings);
  if (p && x.shape().IsFullyDefined()) {
    std::vector<int64_t> begin;
    for (size_t i = 0; i < p->size(); i += 2) begin.push_back((*p)[i]);
    (*dx)[0] = ops::Slice(scope, dz[0], ops::Const<int64_t>(scope, begin),
                          ops::Const<int64_t>(scope, x.shape().dim_sizes()));
    return OkStatus();
  }
  // The first column of paddings, as a vector.
  Output begin = ops::Reshape(scope, ops::Slice(scope, paddings, {0, 0}, {-1, 1}), {-1});
  (*dx)[0] = ops::Slice(scope, dz[0], begin, ops::Shape(scope, x, paddings.dtype()));
  return OkStatus();
}

// ConcatV2's gradient slices the gradient where each value went: at
// ConcatOffset's offsets (Consts when every shape and the axis are known).
Status ConcatGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                  std::vector<Output>* dx) {
  const int n = op.num_inputs() - 1;
  const Output axis = op.input(n);
  const std::optional<std::vector<int64_t>> a = ConstantIntsOf(axis);
  bool known = a.has_value();
  for (int i = 0; known && i < n; ++i) known = op.input(i).shape().IsFullyDefined();
  if (known) {
    const int rank = op.input(0).shape().rank();
    StatusOr<int> d = NormalizeAxis((*a)[0], rank, "axis");
    if (!d.ok()) return d.status();
    std::vector<int64_t> offset(rank, 0);
    for (int i = 0; i < n; ++i) {
      const std::vector<int64_t> dims = op.input(i).shape().dim_sizes();
      (*dx)[i] = ops::Slice(scope, dz[0], ops::Const<int64_t>(scope, offset),
                            ops::Const<int64_t>(scope, dims));
      offset[*d] += dims[*d];
    }
    return OkStatus();
  }
  std::vector<Output> shapes;
  for (int i = 0; i < n; ++i) shapes.push_back(ShapeOf(scope, op.input(i)));
  std::vector<Output> offsets = ops::ConcatOffset(scope, axis, shapes);
  for (int i = 0; i < n; ++i) (*dx)[i] = ops::Slice(scope, dz[0], offsets[i], shapes[i]);
  return OkStatus();
}

// Split's and SplitV's gradient: the pieces' gradients concatenated back
// along the axis, zeros for a piece nothing used.
Status SplitGradInto(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                     const Output& axis, Output* dvalue) {
  std::vector<Output> pieces;
  for (int i = 0; i < op.num_outputs(); ++i) {
    pieces.push_back(dz[i].valid() ? dz[i] : ops::ZerosLike(scope, OutputOf(op, i)));
  }
  *dvalue = ops::Concat(scope, pieces, axis);
  return OkStatus();
}

Status SplitGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                 std::vector<Output>* dx) {
  return SplitGradInto(scope, op, dz, op.input(0), &(*dx)[1]);  // Split(axis, value)
}

Status SplitVGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                  std::vector<Output>* dx) {
  return SplitGradInto(scope, op, dz, op.input(2), &(*dx)[0]);  // SplitV(value, sizes, axis)
}

// Tile's gradient sums the tiles: dz viewed as [m0, d0, m1, d1, ...]
// summed over the m axes (TensorFlow's, the interleaved shape built from
// multiples and the input's shape at run time).
Status TileGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                std::vector<Output>* dx) {
  const Output x = op.input(0);
  // The rank: the input's, or the length of multiples.
  const PartialShape& multiples_shape = op.input(1).shape();
  const int rank = x.shape().known_rank() ? x.shape().rank()
                   : multiples_shape.known_rank() && multiples_shape.dim(0) >= 0
                       ? static_cast<int>(multiples_shape.dim(0))
                       : -1;
  if (rank < 0) {
    return InvalidArgumentError("Tile's gradient needs the rank of its input ", x.name(),
                                " or the length of multiples ", op.input(1).name());
  }
  if (rank == 0) {
    (*dx)[0] = dz[0];
    return OkStatus();
  }
  Output multiples = ops::Cast(scope, op.input(1), DT_INT32);
  Output pairs = ops::Reshape(scope, ops::Concat(scope, {multiples, ops::Shape(scope, x)}, 0),
                              Tensor::FromVector<int32_t>({2, rank}));
  Output split_shape =
      ops::Reshape(scope, ops::Transpose(scope, pairs, Tensor::FromVector<int32_t>({1, 0})),
                   Tensor::FromVector<int32_t>({2 * rank}));
  std::vector<int32_t> tile_axes;
  for (int d = 0; d < rank; ++d) tile_axes.push_back(2 * d);
  (*dx)[0] = ops::Sum(scope, ops::Reshape(scope, dz[0], split_shape),
                      Tensor::FromVector<int32_t>(tile_axes));
  return OkStatus();
}

// Transpose's gradient transposes back, by the inverse permutation (a
// Const when perm is one, else InvertPermutation at run time).
Status TransposeGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                     std::vector<Output>* dx) {
  const Output perm = op.input(1);
  if (std::optional<std::vector<int64_t>> p = ConstantIntsOf(perm)) {
    std::vector<int64_t> inverse(p->size());
    for (size_t i = 0; i < p->size(); ++i) inverse[(*p)[i]] = static_cast<int64_t>(i);
    (*dx)[0] = ops::Transpose(scope, dz[0], ops::Const<int64_t>(scope, inverse));
  } else {
    (*dx)[0] = ops::Transpose(scope, dz[0], ops::InvertPermutation(scope, perm));
  }
  return OkStatus();
}

}  // namespace

Status RegisterArrayGradients(GradientRegistry& r) {
  CKFLOW_RETURN_IF_ERROR(r.Register("Identity", IdentityGrad));
  // ExpandDims and Squeeze are reshapes; the gradient reshapes back.
  for (const char* type : {"Reshape", "ExpandDims", "Squeeze"}) {
    CKFLOW_RETURN_IF_ERROR(r.Register(type, ReshapeGrad));
  }
  CKFLOW_RETURN_IF_ERROR(r.Register("Transpose", TransposeGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("Cast", CastGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("Fill", FillGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("MatrixBandPart", MatrixBandPartGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("Split", SplitGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("SplitV", SplitVGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("Tile", TileGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("Slice", SliceGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("StridedSlice", StridedSliceGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("Pad", PadGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("PadV2", PadGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("ConcatV2", ConcatGrad));
  // Non-differentiable by design: gradients stop here. (ZerosLike and
  // OnesLike do not depend on their input's values; TensorFlow too.)
  for (const char* type : {"StopGradient", "ZerosLike", "OnesLike", "Shape", "ConcatOffset",
                           "InvertPermutation", "OneHot"}) {
    CKFLOW_RETURN_IF_ERROR(r.RegisterNoGradient(type));
  }
  return OkStatus();
}

}  // namespace ckflow::internal
