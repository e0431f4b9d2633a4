// Array op builders: constants, placeholders, identity, shapes and dtypes;
// slicing, padding and concatenation.
//
//   Scope root = Scope::NewRootScope();
//   Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {-1, 784}});
//   Output w = ops::Const<float>(root, {1, 2, 3, 4}, {2, 2});
//   Output flat = ops::Reshape(root, x, {-1});
//
// Every builder adds one node through `scope` (its name scope, control
// dependencies and device apply; the node is named after its op type unless
// the scope has WithOpName) and returns its output. On a build error it
// returns an invalid Output and leaves the error sticky in the scope's graph,
// so model code can build on and check root.status() once; the messages
// name the node and the inputs at fault. The op types and their attributes
// are TensorFlow's.
//
// Thread safety: graph building is single-threaded (see graph/graph.h).

#ifndef CKFLOW_OPS_ARRAY_OPS_H_
#define CKFLOW_OPS_ARRAY_OPS_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "base/tensor.h"
#include "graph/graph.h"
#include "ops/input.h"

namespace ckflow::ops {

// Const: the value, shared (not copied) by every run.
Output Const(const Scope& scope, const Tensor& value);
template <ConstElement T>
Output Const(const Scope& scope, T value) {
  return Const(scope, Tensor::Scalar(value));
}
// A string scalar (file names, tensor names for save/restore ops).
Output Const(const Scope& scope, const std::string& value);
// `values` in row-major order into `shape`; InvalidArgument (sticky) if the
// count does not match or a dimension is negative.
template <ConstElement T>
Output Const(const Scope& scope, const std::vector<T>& values, const std::vector<int64_t>& shape);
template <ConstElement T>
Output Const(const Scope& scope, std::initializer_list<T> values,
             const std::vector<int64_t>& shape) {
  return Const(scope, std::vector<T>(values), shape);
}
// A vector.
template <ConstElement T>
Output Const(const Scope& scope, const std::vector<T>& values) {
  return Const(scope, values, {static_cast<int64_t>(values.size())});
}

struct PlaceholderAttrs {
  PartialShape shape;  // unknown by default
};
// Placeholder: a value the caller feeds. Running it unfed is an
// InvalidArgument naming it; a fed value must match `dtype` and `shape`.
Output Placeholder(const Scope& scope, DataType dtype, const PlaceholderAttrs& attrs = {});

// Identity: its input (no copy). StopGradient: the same, but blocks
// gradients.
Output Identity(const Scope& scope, Input input);
Output StopGradient(const Scope& scope, Input input);

// NoOp: does nothing; with the scope's control dependencies it groups other
// ops. The returned Output has no data (index 0 of a node with no outputs):
// use it only as a target or control dependency.
Output NoOp(const Scope& scope);
// A NoOp that runs after all of `deps` (tf.group).
Output Group(const Scope& scope, const std::vector<Output>& deps);

// Reshape: `tensor` with the dimensions of `shape` (int32/int64 vector; one
// dimension may be -1 and is inferred). Shares the buffer.
Output Reshape(const Scope& scope, Input tensor, Input shape);

// Cast to `dtype`, between float32/64, bfloat16, float16, the signed and
// unsigned integers and bool. Floating to integer rounds toward zero and
// saturates at the integer's range (NaN becomes 0); anything to bool is
// x != 0.
Output Cast(const Scope& scope, Input x, DataType dtype);

// Fill: a tensor of shape `dims` (int32/int64 vector) with every element
// `value` (a scalar of any dtype).
Output Fill(const Scope& scope, Input dims, Input value);
// Zeros and ones of x's dtype (numeric or bool) and shape.
Output ZerosLike(const Scope& scope, Input x);
Output OnesLike(const Scope& scope, Input x);

// Shape of `input` as an int32 or int64 vector. int32 fails at run time
// for a dimension above 2^31 - 1.
Output Shape(const Scope& scope, Input input, DataType out_type = DT_INT32);

// Slicing and joining, TensorFlow's ops. Index inputs (begin, size,
// paddings, axis) are int32 or int64; data inputs any of Cast's dtypes.
// Errors (InvalidArgument, at build time when the values are constants and
// the shapes known, else at run time) name the input and the dimension.
//
// Slice: the box of `input` at `begin` with extent `size` (vectors of one
// element per dimension; size -1 takes the rest of the dimension). Needs
// 0 <= begin <= dim and begin + size <= dim.
Output Slice(const Scope& scope, Input input, Input begin, Input size);
// Pad: `input` with paddings[d] = (before, after) zeros added to dimension
// d; paddings is [rank, 2], non-negative. PadV2 pads with constant_values, a
// scalar of input's dtype.
Output Pad(const Scope& scope, Input input, Input paddings);
Output PadV2(const Scope& scope, Input input, Input paddings, Input constant_values);
// ConcatV2: `values` (same dtype and rank, equal but along `axis`) joined
// along `axis`, a scalar in [-rank, rank). A single value is returned as
// its Identity (tf.concat).
Output Concat(const Scope& scope, const std::vector<Output>& values, Input axis);
// ConcatOffset: where each of `shapes` (int32/int64 vectors, as
// ops::Shape gives) starts in their concatenation along concat_dim: one
// vector per shape, zero but at concat_dim. ConcatV2's gradient slices at
// them.
std::vector<Output> ConcatOffset(const Scope& scope, Input concat_dim,
                                 const std::vector<Output>& shapes);

// GatherV2 (tf.gather, batch_dims 0): the slices of `params` at `indices`
// (int32/int64, any shape) along `axis` (a scalar): the output's shape is
// params.shape[:axis] + indices.shape + params.shape[axis + 1:]. An index
// outside [0, params.shape[axis]) fails the run with InvalidArgument naming
// its position and value ("indices[1,2] = 12 is not in [0, 10)"). The
// gradient with respect to params along axis 0 is sparse: see
// AsIndexedSlices in ops/gradients.h.
Output Gather(const Scope& scope, Input params, Input indices, Input axis = 0);

// DynamicPartition (tf.dynamic_partition): output p holds, in order, the
// slices data[i, ...] whose partitions[i] (int32, its shape a prefix of
// data's) is p, for p in [0, num_partitions). A partition outside that
// range fails the run with InvalidArgument naming it. DynamicStitch
// (tf.dynamic_stitch) merges them back: merged[indices[m][i], ...] =
// data[m][i, ...] (int32 indices; the last wins where two name one
// position; positions nobody names are zero), of indices' maximum + 1 rows.
// The two are how an embedding lookup spans a partitioned table
// (EmbeddingLookup, ops/partitioned_variables.h). DynamicStitch's gradient
// gathers each data's rows back (as TensorFlow's, a position written twice
// passes its gradient to both writers); DynamicPartition's stitches the
// outputs' gradients.
std::vector<Output> DynamicPartition(const Scope& scope, Input data, Input partitions,
                                     int64_t num_partitions);
Output DynamicStitch(const Scope& scope, const std::vector<Output>& indices,
                     const std::vector<Output>& data);
// Range (tf.range): start, start + delta, ... up to but excluding limit
// (scalars of one dtype: int32, int64, float32, float64). InvalidArgument if
// delta is 0 or points away from limit.
Output Range(const Scope& scope, Input start, Input limit, Input delta);

// StridedSlice (Python's x[begin:end:stride] on every dimension, as
// tf.strided_slice): begin, end and strides are int32/int64 vectors of one
// length, an entry per index of the slice. Bit i of begin_mask (end_mask)
// ignores begin[i] (end[i]) for the start (stop) the stride points from
// (to); of ellipsis_mask (one bit at most) makes index i stand for every
// dimension the others do not index; of new_axis_mask inserts a dimension
// of 1 (tf.newaxis); of shrink_axis_mask takes the single element begin[i]
// and drops the dimension. Indices count from the end when negative and
// clamp to the dimension, as Python's; a stride of 0, or a shrunk index out
// of range, is InvalidArgument. The gradient is StridedSliceGrad: zeros of
// the input's `shape` holding dy where the slice took its elements.
struct StridedSliceAttrs {
  int64_t begin_mask = 0;
  int64_t end_mask = 0;
  int64_t ellipsis_mask = 0;
  int64_t new_axis_mask = 0;
  int64_t shrink_axis_mask = 0;
};
Output StridedSlice(const Scope& scope, Input input, Input begin, Input end, Input strides,
                    const StridedSliceAttrs& attrs = {});
Output StridedSliceGrad(const Scope& scope, Input shape, Input begin, Input end, Input strides,
                        Input dy, const StridedSliceAttrs& attrs = {});

// Split (tf.split into equal pieces): `value` cut along `axis` (a scalar)
// into num_split pieces; the axis must divide evenly. SplitV: into pieces of
// the sizes `size_splits` (a vector of num_split sizes, one of which may be
// -1 for the rest). The gradient concatenates the pieces' gradients (zeros
// for pieces without one).
std::vector<Output> Split(const Scope& scope, Input axis, Input value, int64_t num_split);
std::vector<Output> SplitV(const Scope& scope, Input value, Input size_splits, Input axis,
                           int64_t num_split);
// Tile: `input` repeated multiples[d] times along each dimension d
// (multiples: an int32/int64 vector of input's rank). The gradient sums the
// tiles.
Output Tile(const Scope& scope, Input input, Input multiples);
// OneHot (tf.one_hot): for indices of any shape, a new dimension of `depth`
// (an int32 scalar) at `axis` (-1: last) holding on_value where its
// position equals the index and off_value elsewhere (on_value and
// off_value: scalars of the output's dtype). An index outside [0, depth)
// gives all off_value. It has no gradient.
Output OneHot(const Scope& scope, Input indices, Input depth, Input on_value, Input off_value,
              int64_t axis = -1);

// MatrixBandPart (tf.linalg.band_part): each innermost matrix of `input`
// (rank >= 2) keeps the elements at most num_lower below and num_upper
// above the diagonal (int32/int64 scalars; negative keeps the whole
// triangle) and is zero elsewhere. MatrixBandPart(ones, -1, 0) is a causal
// mask. Its gradient is the same band of the incoming gradient.
Output MatrixBandPart(const Scope& scope, Input input, Input num_lower, Input num_upper);

// Unique (tf.unique): y holds the distinct values of the vector `x` in
// order of first appearance, idx (int32 or int64, x's shape) the position
// in y of each element of x, so x == Gather(y, idx). It has no gradient.
struct UniqueOutput {
  Output y;
  Output idx;
};
UniqueOutput Unique(const Scope& scope, Input x, DataType out_idx = DT_INT32);

// Rearranging dimensions (TensorFlow's ops; `input` any of Cast's dtypes).
//
// Transpose: x with its dimensions permuted, output dimension d being x's
// dimension perm[d] (perm an int32/int64 vector holding 0 .. rank-1 once
// each; InvalidArgument naming it otherwise). A permutation that only
// moves dimensions of size 1 shares x's buffer; any other copies.
Output Transpose(const Scope& scope, Input x, Input perm);
// InvertPermutation: y with y[x[i]] = i, for x a permutation of 0 .. n-1
// (int32/int64 vector): the perm that undoes Transpose(x, perm).
Output InvertPermutation(const Scope& scope, Input x);
// ExpandDims: `input` with a dimension of size 1 inserted at `axis` (an
// int32/int64 scalar in [-rank - 1, rank]; negative counts from the end,
// -1 appends). Shares the buffer.
Output ExpandDims(const Scope& scope, Input input, Input axis);
// Squeeze: `input` without the dimensions listed in `axis` (each in [-rank,
// rank) and of size 1; InvalidArgument naming it otherwise), or without
// every dimension of size 1 if `axis` is empty. The attribute is
// TensorFlow's squeeze_dims. Shares the buffer.
Output Squeeze(const Scope& scope, Input input, const std::vector<int64_t>& axis = {});

}  // namespace ckflow::ops

namespace ckflow::internal {
// Allocates the tensor for ops::Const(scope, values, shape); records and
// returns an error if `shape` is invalid or does not hold `count` values.
StatusOr<Tensor> AllocateConst(const Scope& scope, DataType dtype,
                               const std::vector<int64_t>& shape, size_t count);
}  // namespace ckflow::internal

namespace ckflow::ops {

template <ConstElement T>
Output Const(const Scope& scope, const std::vector<T>& values, const std::vector<int64_t>& shape) {
  StatusOr<Tensor> t =
      ::ckflow::internal::AllocateConst(scope, DataTypeOf<T>(), shape, values.size());
  if (!t.ok()) return Output();
  std::span<T> out = t->template flat<T>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return Const(scope, *t);
}

}  // namespace ckflow::ops

#endif  // CKFLOW_OPS_ARRAY_OPS_H_
