// What the gradient functions of the op families share (math_grad.cc,
// array_grad.cc, nn_grad.cc, ...), and the one function per family that
// registers its gradients; StandardGradients (gradients.cc) calls those from
// one list. Internal to ops/.
//
// Thread safety: the builders add nodes through a Scope, as all graph
// building does: one thread per graph at a time.

#ifndef CKFLOW_OPS_GRAD_INTERNAL_H_
#define CKFLOW_OPS_GRAD_INTERNAL_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"
#include "base/types.h"
#include "graph/graph.h"
#include "ops/gradients.h"

namespace ckflow::internal {

// Output `index` of a node a gradient function is given (Output is a
// mutable handle; the gradient functions only read through it).
inline Output OutputOf(const Node& op, int index = 0) {
  return Output(const_cast<Node*>(&op), index);
}

// A scalar of `dtype` (float or double).
Output ScalarLike(const Scope& scope, DataType dtype, double value);

// The value of `o` if a Const node produces it, else nullptr.
const Tensor* ConstantValue(const Output& o);
// The integers (int32/int64, any shape, row-major) `o` holds if a Const
// node produces it; nullopt otherwise.
std::optional<std::vector<int64_t>> ConstantIntsOf(const Output& o);

// The shape of `x` as an int64 vector: a Const when it is known.
Output ShapeOf(const Scope& scope, Output x);

// The gradient of a broadcasting op's output, summed down to the shape of
// its input `x`, whose partner in the broadcast was `other`.
Output ReduceToShape(const Scope& scope, Output grad, Output x, const PartialShape& other);

// Fills (*grad_inputs)[0] and [1] for a binary broadcasting op whose
// gradient before reduction is gx and gy (either may be invalid).
void SetBinaryGradients(const Scope& scope, const Node& op, Output gx, Output gy,
                        std::vector<Output>* grad_inputs);

// The gradient of an op whose output is its input (Identity; ReadVariableOp,
// whose handle's gradient is its value's).
Status IdentityGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                    std::vector<Output>* dx);

// A sparse gradient (ops/gradients.h, IndexedSlices) of `values` at
// `indices` for a tensor of `num_rows` rows (an int32/int64 scalar).
Output MakeIndexedSlices(const Scope& scope, Output values, Output indices, Output num_rows);

// The families' gradients, one function each, beside the family's kernels.
Status RegisterMathGradients(GradientRegistry& r);        // elementwise arithmetic, AddN
Status RegisterComparisonGradients(GradientRegistry& r);  // SelectV2
Status RegisterArrayGradients(GradientRegistry& r);       // Reshape, Slice, Pad, ConcatV2, ...
Status RegisterReductionGradients(GradientRegistry& r);   // Sum, Mean, Max, Min, SumToShapeOf
Status RegisterMatMulGradients(GradientRegistry& r);      // MatMul, BatchMatMulV2
Status RegisterGatherGradients(GradientRegistry& r);      // GatherV2, ResourceGather, ...
Status RegisterNnGradients(GradientRegistry& r);          // activations, BiasAdd, Softmax, losses
Status RegisterConvGradients(GradientRegistry& r);        // Conv2D, DepthwiseConv2dNative
Status RegisterPoolingGradients(GradientRegistry& r);     // MaxPool, AvgPool
Status RegisterNormalizationGradients(GradientRegistry& r);  // FusedBatchNormV3
Status RegisterVariableGradients(GradientRegistry& r);       // ReadVariableOp

}  // namespace ckflow::internal

#endif  // CKFLOW_OPS_GRAD_INTERNAL_H_
