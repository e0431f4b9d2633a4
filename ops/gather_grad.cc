// The gradients of the gather ops (gather_ops.cc): sparse (IndexedSlices,
// ops/gradients.h) for GatherV2 along axis 0 and for ResourceGather, as
// TensorFlow's are; dense for GatherV2 along another axis (TensorFlow's
// transposes around an UnsortedSegmentSum) and for UnsortedSegmentSum.

#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

#include "ops/array_ops.h"
#include "ops/grad_internal.h"
#include "ops/math_ops.h"
#include "ops/variable_ops.h"

namespace ckflow::internal {
namespace {

// The shape argument of a Reshape to a scalar.
Tensor ScalarShape() { return Tensor::FromVector(std::vector<int64_t>{}); }

// `grad` (of shape indices.shape + row shape) as [n] + row shape, and
// `indices` as [n]; `row` is the shape of one row (dims 1.. of the
// params), or unknown.
void FlattenRows(const Scope& scope, Output grad, Output indices, const PartialShape& row,
                 Output runtime_row_shape, Output* values, Output* flat_indices) {
  if (row.IsFullyDefined()) {
    std::vector<int64_t> dims = {-1};
    dims.insert(dims.end(), row.dims().begin(), row.dims().end());
    *values = ops::Reshape(scope, grad, ops::Const<int64_t>(scope, dims));
  } else {
    *values = ops::Reshape(
        scope, grad,
        ops::Concat(scope,
                    {ops::Const<int64_t>(scope, std::vector<int64_t>{-1}), runtime_row_shape}, 0));
  }
  *flat_indices = ops::Reshape(scope, indices, {-1});
}

// The number of rows (dimension 0) of a tensor of shape `shape`, whose
// runtime shape vector (int64) `runtime_shape` makes when it is not known.
Output RowCount(const Scope& scope, const PartialShape& shape, const Output& runtime_shape) {
  if (shape.known_rank() && shape.rank() >= 1 && shape.dim(0) >= 0) {
    return ops::Const<int64_t>(scope, shape.dim(0));
  }
  return ops::Reshape(scope, ops::Slice(scope, runtime_shape, {0}, {1}), ScalarShape());
}

Output RowShape(const Scope& scope, const Output& runtime_shape) {
  return ops::Slice(scope, runtime_shape, {1}, {-1});
}

Status GatherGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                  std::vector<Output>* dx) {
  const Output params = op.input(0);
  const Output indices = op.input(1);
  const std::optional<std::vector<int64_t>> axis_value = ConstantIntsOf(op.input(2));
  const PartialShape& ps = params.shape();
  if (!axis_value || ((*axis_value)[0] != 0 && !ps.known_rank())) {
    return UnimplementedError(
        "the gradient of GatherV2 needs a constant axis, and params of known rank unless the "
        "axis is 0");
  }
  const int rank = ps.rank();
  const int64_t axis = (*axis_value)[0] < 0 ? (*axis_value)[0] + rank : (*axis_value)[0];
  Output shape = ShapeOf(scope, params);
  if (axis == 0) {
    PartialShape row =
        ps.known_rank() ? PartialShape(std::vector<int64_t>(ps.dims().begin() + 1, ps.dims().end()))
                        : PartialShape::Unknown();
    Output values, flat;
    FlattenRows(scope, dz[0], indices, row,
                row.IsFullyDefined() ? Output() : RowShape(scope, shape), &values, &flat);
    (*dx)[0] = MakeIndexedSlices(scope, values, flat, RowCount(scope, ps, shape));
    return OkStatus();
  }
  // TensorFlow's way for another axis: the gradient as [outer..., n,
  // inner...], the gathered axis moved first, summed by index, moved back.
  const PartialShape& is = indices.shape();
  if (!is.known_rank()) {
    return UnimplementedError("the gradient of GatherV2 along axis ", axis,
                              " needs indices of known rank");
  }
  const int inner = rank - 1 - static_cast<int>(axis);
  std::vector<int64_t> to_front = {axis};
  for (int d = 0; d < axis; ++d) to_front.push_back(d);
  for (int d = 0; d < inner; ++d) to_front.push_back(axis + 1 + d);
  std::vector<int64_t> back(rank);
  for (int d = 0; d < rank; ++d) back[to_front[d]] = d;
  // dz is [outer..., indices..., inner...]: merge the indices dimensions.
  Output grad_shape = ShapeOf(scope, dz[0]);
  Output merged_shape = ops::Concat(
      scope,
      {ops::Slice(scope, grad_shape, ops::Const<int64_t>(scope, std::vector<int64_t>{0}),
                  ops::Const<int64_t>(scope, std::vector<int64_t>{axis})),
       ops::Const<int64_t>(scope, std::vector<int64_t>{-1}),
       ops::Slice(scope, grad_shape,
                  ops::Const<int64_t>(scope, std::vector<int64_t>{axis + is.rank()}),
                  ops::Const<int64_t>(scope, std::vector<int64_t>{-1}))},
      0);
  Output values = ops::Transpose(scope, ops::Reshape(scope, dz[0], merged_shape),
                                 ops::Const<int64_t>(scope, to_front));
  Output summed = ops::UnsortedSegmentSum(
      scope, values, ops::Reshape(scope, indices, {-1}),
      ops::Reshape(scope,
                   ops::Slice(scope, shape, ops::Const<int64_t>(scope, std::vector<int64_t>{axis}),
                              ops::Const<int64_t>(scope, std::vector<int64_t>{1})),
                   ScalarShape()));
  (*dx)[0] = ops::Transpose(scope, summed, ops::Const<int64_t>(scope, back));
  return OkStatus();
}

Status ResourceGatherGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                          std::vector<Output>* dx) {
  // The handle's gradient is the variable value's: sparse, rows of it.
  const Output indices = op.input(1);
  const PartialShape var = op.attrs().GetOr<PartialShape>("_shape", PartialShape::Unknown());
  Output shape;
  if (!var.IsFullyDefined()) {
    CKFLOW_ASSIGN_OR_RETURN(DataType dtype, op.attrs().Get<DataType>("dtype"));
    shape = ops::Shape(scope, ops::ReadVariableOp(scope, op.input(0), dtype), DT_INT64);
  }
  PartialShape row =
      var.known_rank() && var.rank() >= 1
          ? PartialShape(std::vector<int64_t>(var.dims().begin() + 1, var.dims().end()))
          : PartialShape::Unknown();
  Output values, flat;
  FlattenRows(scope, dz[0], indices, row, row.IsFullyDefined() ? Output() : RowShape(scope, shape),
              &values, &flat);
  (*dx)[0] = MakeIndexedSlices(scope, values, flat, RowCount(scope, var, shape));
  return OkStatus();
}

Status UnsortedSegmentSumGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                              std::vector<Output>* dx) {
  // Each data row gets its segment's gradient, or zero where its id was
  // negative (the row was dropped): TensorFlow's _GatherDropNegatives.
  const Output ids = op.input(1);
  const PartialShape& data = op.input(0).shape();
  Output zero = ops::Cast(scope, ops::Const<int32_t>(scope, 0), ids.dtype());
  Output gathered = ops::Gather(scope, dz[0], ops::Maximum(scope, ids, zero));
  // The kept mask, with a dimension of 1 for each dimension of a row.
  Output kept = ops::GreaterEqual(scope, ids, zero);
  if (data.known_rank() && ids.shape().known_rank()) {
    for (int d = ids.shape().rank(); d < data.rank(); ++d) kept = ops::ExpandDims(scope, kept, -1);
  } else {
    // As many ones as dz has dimensions after the first.
    Output rank = ops::Shape(scope, ops::Shape(scope, dz[0], DT_INT64), DT_INT64);
    Output ones = ops::Fill(scope, ops::Sub(scope, rank, ops::Const<int64_t>(scope, int64_t{1})),
                            ops::Const<int64_t>(scope, int64_t{1}));
    kept =
        ops::Reshape(scope, kept, ops::Concat(scope, {ops::Shape(scope, ids, DT_INT64), ones}, 0));
  }
  (*dx)[0] = ops::Select(scope, kept, gathered, ops::ZerosLike(scope, gathered));
  return OkStatus();
}

// TensorFlow's _DynamicStitchGrads: each data tensor gets the rows of the
// gradient at its indices (a position written twice passes its gradient to
// both writers, as TensorFlow's does).
Status DynamicStitchGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                         std::vector<Output>* dx) {
  const int n = op.num_inputs() / 2;
  for (int m = 0; m < n; ++m) (*dx)[n + m] = ops::Gather(scope, dz[0], op.input(m));
  return OkStatus();
}

// TensorFlow's _DynamicPartitionGrads: the positions of the rows,
// partitioned as the data was, stitch the outputs' gradients back in place.
Status DynamicPartitionGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                            std::vector<Output>* dx) {
  const Output partitions = op.input(1);
  Output prefix = ops::Shape(scope, partitions);
  Output positions =
      ops::Reshape(scope,
                   ops::Range(scope, ops::Const<int32_t>(scope, 0), ops::Prod(scope, prefix, 0),
                              ops::Const<int32_t>(scope, 1)),
                   prefix);
  std::vector<Output> where = ops::DynamicPartition(scope, positions, partitions, op.num_outputs());
  std::vector<Output> grads;
  for (int p = 0; p < op.num_outputs(); ++p) {
    grads.push_back(dz[p].valid() ? dz[p] : ops::ZerosLike(scope, OutputOf(op, p)));
  }
  (*dx)[0] =
      ops::Reshape(scope, ops::DynamicStitch(scope, where, grads), ops::Shape(scope, op.input(0)));
  return OkStatus();
}

}  // namespace

Status RegisterGatherGradients(GradientRegistry& r) {
  CKFLOW_RETURN_IF_ERROR(r.Register("GatherV2", GatherGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("ResourceGather", ResourceGatherGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("UnsortedSegmentSum", UnsortedSegmentSumGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("DynamicStitch", DynamicStitchGrad));
  CKFLOW_RETURN_IF_ERROR(r.Register("DynamicPartition", DynamicPartitionGrad));
  CKFLOW_RETURN_IF_ERROR(r.RegisterNoGradient("Range"));
  return r.RegisterNoGradient("Unique");  // as TensorFlow: positions have no slope
}

}  // namespace ckflow::internal
