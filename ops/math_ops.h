// Math op builders: elementwise arithmetic with NumPy broadcasting,
// comparisons, reductions and matrix products.
//
//   Output y = ops::Add(scope, ops::MatMul(scope, x, w), b);
//   Output loss = ops::Mean(scope, ops::Square(scope, ops::Sub(scope, y, target)));
//   Output col_sums = ops::Sum(scope, m, {0}, {.keep_dims = true});
//
// Builders follow array_ops.h: one node through `scope`, its output
// returned, errors sticky in the scope and naming the node and both inputs:
//   add (Add): dtype mismatch: x is float32 (a:0), y is int32 (b:0)
//   mm (MatMul): inner dimensions differ: a is [2,3] (x:0), b is [4,5] (w:0)
//
// Dtypes: float32 and float64 everywhere; int32 and int64 too where marked
// "(+int)". Integer arithmetic wraps around on overflow.
//
// Thread safety: graph building is single-threaded (see graph/graph.h).

#ifndef CKFLOW_OPS_MATH_OPS_H_
#define CKFLOW_OPS_MATH_OPS_H_

#include <vector>

#include "graph/graph.h"
#include "ops/input.h"

namespace ckflow::ops {

// x op y, broadcasting.
Output Add(const Scope& scope, Input x, Input y);  // (+int)
Output Sub(const Scope& scope, Input x, Input y);  // (+int)
Output Mul(const Scope& scope, Input x, Input y);  // (+int)
Output Div(const Scope& scope, Input x, Input y);
Output Maximum(const Scope& scope, Input x, Input y);  // (+int)
Output Minimum(const Scope& scope, Input x, Input y);  // (+int)
Output Pow(const Scope& scope, Input x, Input y);
Output SquaredDifference(const Scope& scope, Input x, Input y);  // (x - y)^2

// Elementwise.
Output Neg(const Scope& scope, Input x);     // (+int)
Output Square(const Scope& scope, Input x);  // (+int)
Output Sign(const Scope& scope, Input x);    // (+int)
Output Abs(const Scope& scope, Input x);
Output Sqrt(const Scope& scope, Input x);
Output Rsqrt(const Scope& scope, Input x);  // 1 / sqrt(x)
Output Exp(const Scope& scope, Input x);
Output Log(const Scope& scope, Input x);
Output Log1p(const Scope& scope, Input x);  // log(1 + x), accurate near 0
Output Reciprocal(const Scope& scope, Input x);
Output Erf(const Scope& scope, Input x);   // 2/sqrt(pi) * integral from 0 to x of exp(-t^2)
Output Erfc(const Scope& scope, Input x);  // 1 - erf(x), accurate where erf(x) is near 1

// Comparisons, broadcasting, giving bool (+int).
Output Equal(const Scope& scope, Input x, Input y);
Output NotEqual(const Scope& scope, Input x, Input y);
Output Less(const Scope& scope, Input x, Input y);
Output LessEqual(const Scope& scope, Input x, Input y);
Output Greater(const Scope& scope, Input x, Input y);
Output GreaterEqual(const Scope& scope, Input x, Input y);

// Where `condition` (bool) is true, t, else e; all three broadcast
// (TensorFlow's SelectV2, tf.where). t and e: numeric or bool.
Output Select(const Scope& scope, Input condition, Input t, Input e);

// The sum of `inputs`, which must share dtype and shape (+int).
Output AddN(const Scope& scope, const std::vector<Output>& inputs);

struct MatMulAttrs {
  bool transpose_a = false;
  bool transpose_b = false;
};
// op(a) x op(b) for rank-2 a and b, op = transpose if asked.
Output MatMul(const Scope& scope, Input a, Input b, const MatMulAttrs& attrs = {});

struct BatchMatMulAttrs {
  bool adj_x = false;  // use x's matrices transposed (real dtypes: adjoint = transpose)
  bool adj_y = false;
};
// TensorFlow's BatchMatMulV2 (tf.linalg.matmul on rank > 2): x [..., M, K]
// times y [..., K, N] matrix by matrix, giving [..., M, N]; x and y have
// rank >= 2 and their batch dimensions (all but the last two) broadcast as
// NumPy's, so [B, H, T, D] x [D, E] and [B, 1, T, D] x [1, H, D, E] work.
Output BatchMatMul(const Scope& scope, Input x, Input y, const BatchMatMulAttrs& attrs = {});

struct ReduceAttrs {
  bool keep_dims = false;  // keep reduced dimensions with size 1
};
// Reductions of `input` over `axis` (int32/int64 scalar or vector; negative
// axes count from the end; an empty vector reduces nothing). Sum/Min/Max/
// Prod (+int); Mean of integers divides with truncation. The two-argument
// overloads reduce over all axes, like tf.reduce_sum(x).
Output Sum(const Scope& scope, Input input, Input axis, const ReduceAttrs& attrs = {});
Output Mean(const Scope& scope, Input input, Input axis, const ReduceAttrs& attrs = {});
Output Max(const Scope& scope, Input input, Input axis, const ReduceAttrs& attrs = {});
Output Min(const Scope& scope, Input input, Input axis, const ReduceAttrs& attrs = {});
Output Prod(const Scope& scope, Input input, Input axis, const ReduceAttrs& attrs = {});
Output Sum(const Scope& scope, Input input);
Output Mean(const Scope& scope, Input input);
Output Max(const Scope& scope, Input input);
Output Min(const Scope& scope, Input input);

// Index of the largest (smallest) value along `axis` (a scalar), ties to
// the first; int64 or int32 output (+int).
Output ArgMax(const Scope& scope, Input input, Input axis, DataType output_type = DT_INT64);
Output ArgMin(const Scope& scope, Input input, Input axis, DataType output_type = DT_INT64);

// TensorFlow's UnsortedSegmentSum: output[s, ...] = the sum of data[i, ...]
// over the positions i (of segment_ids, whose shape is a prefix of data's)
// with segment_ids[i] == s, zero for a segment nobody names; the output is
// [num_segments] + data.shape[segment_ids.rank:]. A negative id drops its
// row; one >= num_segments fails the run with InvalidArgument naming it.
// Each segment adds its rows in input order, so the bits do not depend on
// the thread count. (+int)
Output UnsortedSegmentSum(const Scope& scope, Input data, Input segment_ids, Input num_segments);

// `grad` summed down to the shape of `like`, which `grad` is a broadcast of:
// the gradient of a broadcasting op with respect to its input `like`
// (TensorFlow expresses this with BroadcastGradientArgs, Sum and Reshape).
// Only like's shape is used. (+int)
Output SumToShapeOf(const Scope& scope, Input grad, Input like);

}  // namespace ckflow::ops

#endif  // CKFLOW_OPS_MATH_OPS_H_
