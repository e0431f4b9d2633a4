// The standard op registry: every op ckflow ships, registered from one
// visible list of plain functions (RegisterArrayOps, RegisterMathOps, ...)
// the first time it is asked for. Sessions use it unless given another.
//
// A custom registry (standard ops plus one's own, or a subset for a test)
// is built by calling the same functions:
//
//   OpRegistry registry;
//   CKFLOW_RETURN_IF_ERROR(RegisterStandardOps(registry));
//   CKFLOW_RETURN_IF_ERROR(registry.Register(my_op));
//
// Thread safety: StandardOps() may be called from any thread; the registry
// it returns is immutable. The Register* functions mutate their argument.

#ifndef CKFLOW_OPS_STANDARD_OPS_H_
#define CKFLOW_OPS_STANDARD_OPS_H_

#include <string_view>

#include "graph/op_def.h"

namespace ckflow {

const OpRegistry& StandardOps();

// The OpDef of a standard op; aborts if `type` is not one (a programming
// error in ckflow's own builders, never user input).
const OpDef& StandardOp(std::string_view type);

// Adds every standard op to `registry`; AlreadyExists if one is there.
Status RegisterStandardOps(OpRegistry& registry);

// The groups RegisterStandardOps adds, one per source file.
Status RegisterArrayOps(OpRegistry& registry);         // Const, Placeholder, Reshape, Cast, ...
Status RegisterArraySlicingOps(OpRegistry& registry);  // Slice, Pad, PadV2, ConcatV2, ConcatOffset
Status RegisterStridedSliceOps(OpRegistry& registry);  // StridedSlice, StridedSliceGrad
Status RegisterDimensionOps(OpRegistry& registry);     // Transpose, ExpandDims, Squeeze, ...
Status RegisterMathOps(OpRegistry& registry);          // elementwise arithmetic, AddN
Status RegisterComparisonOps(OpRegistry& registry);    // Equal, Less, ..., SelectV2
Status RegisterReductionOps(OpRegistry& registry);     // Sum, Mean, Max, ArgMax, SumToShapeOf
Status RegisterGatherOps(OpRegistry& registry);   // GatherV2, UnsortedSegmentSum, scatters, Unique
Status RegisterMatMulOps(OpRegistry& registry);   // MatMul, BatchMatMulV2
Status RegisterNnOps(OpRegistry& registry);       // activations, BiasAdd, Softmax, losses
Status RegisterConvOps(OpRegistry& registry);     // Conv2D, DepthwiseConv2dNative, backprops
Status RegisterPoolingOps(OpRegistry& registry);  // MaxPool, AvgPool, their gradients
Status RegisterNormalizationOps(OpRegistry& registry);  // FusedBatchNormV3, FusedBatchNormGradV3
Status RegisterRandomOps(OpRegistry& registry);         // RandomUniform, RandomStandardNormal, ...

}  // namespace ckflow

#endif  // CKFLOW_OPS_STANDARD_OPS_H_
