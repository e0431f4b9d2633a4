// Ops the gradient functions build beyond the standard ones:
//
//   BroadcastTo(input, shape)        input repeated along broadcast dims up to
//                                    `shape` (TensorFlow's BroadcastTo); the
//                                    gradient of a reduction spreads the
//                                    reduced gradient back with it.
//   ReducedShape(input_shape, axes)  input_shape with the reduced axes set
//                                    to 1: the shape a reduction keeps with
//                                    keep_dims (TensorFlow's Python helper
//                                    reduced_shape, as one op).

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "base/parallel.h"
#include "ops/gradients.h"
#include "ops/ops_internal.h"
#include "ops/standard_ops.h"

namespace ckflow {
namespace internal {
namespace {

// ------------------------------------------------------------- BroadcastTo

constexpr DataType kBroadcastTypes[] = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BOOL};

Status BroadcastToShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "input", kBroadcastTypes));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "shape", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "shape", 1, 1));
  CKFLOW_ASSIGN_OR_RETURN(PartialShape shape, ShapeFromShapeInput(c, 1, "shape"));
  const PartialShape& in = c.input_shapes[0];
  if (!in.known_rank() || !shape.known_rank()) {
    c.AddOutput(c.input_types[0], shape);
    return OkStatus();
  }
  auto mismatch = [&] {
    return InvalidArgumentError("input is ", in.ToString(), " (", InputName(c, 0),
                                "), which does not broadcast to shape ", shape.ToString(), " (",
                                InputName(c, 1), ")");
  };
  if (in.rank() > shape.rank()) return mismatch();
  std::vector<int64_t> dims = shape.dim_sizes();
  const int offset = shape.rank() - in.rank();
  for (int i = 0; i < in.rank(); ++i) {
    const int64_t id = in.dim(i);
    int64_t& od = dims[offset + i];
    if (id == 1 || id < 0) continue;
    if (od < 0) {
      od = id;  // the target must equal a known input dimension other than 1
    } else if (od != id) {
      return mismatch();
    }
  }
  c.AddOutput(c.input_types[0], PartialShape(std::move(dims)));
  return OkStatus();
}

// Moves element bits, so one instantiation per element size serves every
// dtype (as Select does).
template <typename Bits>
Status BroadcastToCompute(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  CKFLOW_ASSIGN_OR_RETURN(TensorShape shape, ShapeFromTensor(ctx.input(1), "shape"));
  StatusOr<TensorShape> joint = BroadcastTensorShapes(in.shape(), "input", shape, "shape");
  if (!joint.ok() || !(*joint == shape)) {
    return InvalidArgumentError("input ", in.shape().ToString(), " does not broadcast to shape ",
                                shape.ToString());
  }
  if (in.shape() == shape) {
    ctx.set_output(0, in);  // tensors are immutable values: share the buffer
    return OkStatus();
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, in.dtype(), shape));
  if (out->NumElements() == 0) return OkStatus();
  const Bits* ip = static_cast<const Bits*>(in.raw_data());
  Bits* op = static_cast<Bits*>(out->raw_data());
  const TensorShape* shapes[] = {&in.shape()};
  BroadcastPlan plan(shapes, shape);
  const int64_t inner = plan.inner();
  const bool repeat = plan.inner_broadcast(0);
  ParallelFor(plan.rows(), inner, [&](int64_t begin, int64_t end) {
    std::array<int64_t, 1> off;
    for (int64_t row = begin; row < end; ++row) {
      plan.RowOffsets(row, off);
      Bits* o = op + row * inner;
      if (repeat) {
        std::fill(o, o + inner, ip[off[0]]);
      } else {
        std::copy(ip + off[0], ip + off[0] + inner, o);
      }
    }
  });
  return OkStatus();
}

StatusOr<Kernel> BroadcastToKernel(const Node& node) {
  switch (DataTypeSize(node.output_type(0))) {
    case 1:
      return Kernel(BroadcastToCompute<uint8_t>);
    case 4:
      return Kernel(BroadcastToCompute<uint32_t>);
    case 8:
      return Kernel(BroadcastToCompute<uint64_t>);
    default:
      return InvalidArgumentError("unsupported dtype ", DataTypeName(node.output_type(0)));
  }
}

// ------------------------------------------------------------ ReducedShape

Status ReducedShapeShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "input_shape", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, "input_shape", 1, 1));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "axes", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "axes", 0, 1));
  const PartialShape& s = c.input_shapes[0];
  c.AddOutput(c.input_types[0], PartialShape({s.known_rank() ? s.dim(0) : -1}));
  return OkStatus();
}

template <typename T>
Status ReducedShapeCompute(KernelContext& ctx) {
  const Tensor& input_shape = ctx.input(0);
  if (input_shape.shape().rank() != 1) {
    return InvalidArgumentError("input_shape must be a vector, got shape ",
                                input_shape.shape().ToString());
  }
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> axes, IntsFromTensor(ctx.input(1), "axes"));
  const int rank = static_cast<int>(input_shape.NumElements());
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                          ctx.AllocateOutput(0, input_shape.dtype(), input_shape.shape()));
  std::span<T> dims = out->flat<T>();
  std::copy(input_shape.flat<T>().begin(), input_shape.flat<T>().end(), dims.begin());
  for (int64_t axis : axes) {
    CKFLOW_ASSIGN_OR_RETURN(int a, NormalizeAxis(axis, rank, "axis"));
    dims[a] = 1;
  }
  return OkStatus();
}

}  // namespace
}  // namespace internal

Status RegisterGradientOps(OpRegistry& registry) {
  using namespace internal;  // NOLINT: the shape functions and kernels above
  CKFLOW_RETURN_IF_ERROR(RegisterOp(registry, {.type = "BroadcastTo",
                                               .inputs = {"input", "shape"},
                                               .shape_fn = BroadcastToShapeFn,
                                               .kernel_factory = BroadcastToKernel}));
  return RegisterOp(registry,
                    {.type = "ReducedShape",
                     .inputs = {"input_shape", "axes"},
                     .shape_fn = ReducedShapeShapeFn,
                     .kernel_factory = [](const Node& node) {
                       return DispatchIndex(node.output_type(0), [](auto tag) -> StatusOr<Kernel> {
                         return Kernel(ReducedShapeCompute<typename decltype(tag)::type>);
                       });
                     }});
}

namespace ops {

Output BroadcastTo(const Scope& scope, Input input, Input shape) {
  return internal::BuildOp(scope, "BroadcastTo", {std::move(input), std::move(shape)});
}

Output ReducedShape(const Scope& scope, Input input_shape, Input axes) {
  return internal::BuildOp(scope, "ReducedShape", {std::move(input_shape), std::move(axes)});
}

}  // namespace ops
}  // namespace ckflow
