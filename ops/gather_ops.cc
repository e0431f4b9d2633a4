// TensorFlow's gather and scatter ops: GatherV2 (rows of a tensor),
// ResourceGather (rows of a variable, what an embedding lookup runs),
// UnsortedSegmentSum (rows summed by id: the dense form of a sparse
// gradient) and ResourceScatterAdd / ResourceScatterUpdate (rows of a
// variable written in place, what a sparse update runs).
//
// Every index is checked before anything is written, so a bad one fails the
// op with InvalidArgument naming its position and value, the same one on
// every thread count, and leaves a variable untouched. Rows move as bytes
// for gathers; sums add each row's contributions in input order, so the
// bits do not depend on the threads.

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/ops_internal.h"
#include "ops/standard_ops.h"
#include "ops/variable_ops.h"
#include "ops/variable_resource_internal.h"

namespace ckflow {
namespace internal {
namespace {

inline constexpr DataType kResource[] = {DT_RESOURCE};

// out[o, i, :] = params[o, index[i], :] for params viewed as [outer, rows,
// inner] (inner in bytes).
void GatherRows(const char* params, int64_t outer, int64_t rows, size_t inner_bytes,
                const std::vector<int64_t>& index, char* out) {
  const int64_t n = static_cast<int64_t>(index.size());
  ParallelRange(outer * n, static_cast<int64_t>(inner_bytes / 4 + 1), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / n, i = t % n;
      std::memcpy(out + t * inner_bytes, params + (o * rows + index[i]) * inner_bytes, inner_bytes);
    }
  });
}

// --------------------------------------------------------------- GatherV2

Status GatherShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "params", kCastTypes));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "indices", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 2, "axis", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, "params", 1, std::numeric_limits<int>::max()));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 2, "axis", 0, 0));
  if (c.attrs->GetOr<int64_t>("batch_dims", 0) != 0) {
    return UnimplementedError("GatherV2 with batch_dims other than 0");
  }
  const PartialShape& params = c.input_shapes[0];
  const PartialShape& indices = c.input_shapes[1];
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axis, ConstantInts(c, 2, "axis"));
  if (!params.known_rank() || !indices.known_rank() || !axis) {
    c.AddOutput(c.input_types[0], PartialShape::Unknown());
    return OkStatus();
  }
  StatusOr<int> a = NormalizeAxis((*axis)[0], params.rank(), "axis");
  if (!a.ok()) {
    return a.status().WithContext("params is " + params.ToString() + " (" + InputName(c, 0) + ")");
  }
  std::vector<int64_t> dims(params.dims().begin(), params.dims().begin() + *a);
  dims.insert(dims.end(), indices.dims().begin(), indices.dims().end());
  dims.insert(dims.end(), params.dims().begin() + *a + 1, params.dims().end());
  c.AddOutput(c.input_types[0], PartialShape(std::move(dims)));
  return OkStatus();
}

Status GatherCompute(KernelContext& ctx) {
  const Tensor& params = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  if (ctx.input(2).shape().rank() != 0) {
    return InvalidArgumentError("axis must be a scalar, got ", ctx.input(2).shape().ToString());
  }
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> axis_value, IntsFromTensor(ctx.input(2), "axis"));
  const TensorShape& ps = params.shape();
  if (ps.rank() < 1) return InvalidArgumentError("params must have rank >= 1, got a scalar");
  StatusOr<int> a = NormalizeAxis(axis_value[0], ps.rank(), "axis");
  if (!a.ok()) return a.status().WithContext("params is " + ps.ToString());
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> index,
                          CheckedIndices(indices, "indices", ps.dim(*a)));
  std::vector<int64_t> dims(ps.dims().begin(), ps.dims().begin() + *a);
  dims.insert(dims.end(), indices.shape().dims().begin(), indices.shape().dims().end());
  dims.insert(dims.end(), ps.dims().begin() + *a + 1, ps.dims().end());
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, params.dtype(), TensorShape(dims)));
  if (out->NumElements() == 0) return OkStatus();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < *a; ++d) outer *= ps.dim(d);
  for (int d = *a + 1; d < ps.rank(); ++d) inner *= ps.dim(d);
  GatherRows(static_cast<const char*>(params.raw_data()), outer, ps.dim(*a),
             static_cast<size_t>(inner) * DataTypeSize(params.dtype()), index,
             static_cast<char*>(out->raw_data()));
  return OkStatus();
}

// ---------------------------------------------------------- ResourceGather

Status ResourceGatherShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "resource", kResource));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "indices", kIndexTypes));
  if (c.attrs->GetOr<int64_t>("batch_dims", 0) != 0) {
    return UnimplementedError("ResourceGather with batch_dims other than 0");
  }
  CKFLOW_ASSIGN_OR_RETURN(DataType dtype, c.attrs->Get<DataType>("dtype"));
  const PartialShape var = c.attrs->GetOr<PartialShape>("_shape", PartialShape::Unknown());
  const PartialShape& indices = c.input_shapes[1];
  if (!var.known_rank() || !indices.known_rank()) {
    c.AddOutput(dtype, PartialShape::Unknown());
    return OkStatus();
  }
  if (var.rank() < 1) {
    return InvalidArgumentError("the variable is a scalar (", InputName(c, 0),
                                "); gather needs rank >= 1");
  }
  std::vector<int64_t> dims = indices.dims();
  dims.insert(dims.end(), var.dims().begin() + 1, var.dims().end());
  c.AddOutput(dtype, PartialShape(std::move(dims)));
  return OkStatus();
}

StatusOr<Kernel> ResourceGatherKernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(DataType dtype, node.attrs().Get<DataType>("dtype"));
  return Kernel([dtype](KernelContext& ctx) -> Status {
    CKFLOW_ASSIGN_OR_RETURN(auto variable, VariableFromHandle(ctx.input(0), "resource"));
    if (variable->dtype() != dtype) {
      return InvalidArgumentError("variable '", variable->name(), "' is ",
                                  DataTypeName(variable->dtype()), ", read as ",
                                  DataTypeName(dtype));
    }
    // The rows are copied out under the lock, from the value itself: a
    // share of the buffer would make an update that overlaps the lookup
    // copy the whole table first.
    MutexLock lock(&variable->mu());
    CKFLOW_ASSIGN_OR_RETURN(const Tensor* value, variable->PeekLocked());
    const TensorShape& vs = value->shape();
    if (vs.rank() < 1) {
      return InvalidArgumentError("variable '", variable->name(), "' is a scalar; gather needs ",
                                  "rank >= 1");
    }
    const Tensor& indices = ctx.input(1);
    StatusOr<std::vector<int64_t>> index = CheckedIndices(indices, "indices", vs.dim(0));
    if (!index.ok()) {
      return index.status().WithContext("variable '" + variable->name() + "' " + vs.ToString());
    }
    std::vector<int64_t> dims(indices.shape().dims().begin(), indices.shape().dims().end());
    dims.insert(dims.end(), vs.dims().begin() + 1, vs.dims().end());
    CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, dtype, TensorShape(dims)));
    if (out->NumElements() == 0) return OkStatus();
    GatherRows(static_cast<const char*>(value->raw_data()), 1, vs.dim(0),
               static_cast<size_t>(vs.num_elements() / vs.dim(0)) * DataTypeSize(dtype), *index,
               static_cast<char*>(out->raw_data()));
    return OkStatus();
  });
}

// ------------------------------------------------------ UnsortedSegmentSum

Status SegmentSumShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "data", kNumericTypes));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "segment_ids", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 2, "num_segments", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 2, "num_segments", 0, 0));
  const PartialShape& data = c.input_shapes[0];
  const PartialShape& ids = c.input_shapes[1];
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> n,
                          ConstantInts(c, 2, "num_segments"));
  if (n && (*n)[0] < 0) {
    return InvalidArgumentError("num_segments is ", (*n)[0], " (", InputName(c, 2),
                                "), but must not be negative");
  }
  if (!data.known_rank() || !ids.known_rank()) {
    c.AddOutput(c.input_types[0], PartialShape::Unknown());
    return OkStatus();
  }
  bool prefix = ids.rank() <= data.rank();
  for (int d = 0; prefix && d < ids.rank(); ++d) {
    prefix = ids.dim(d) < 0 || data.dim(d) < 0 || ids.dim(d) == data.dim(d);
  }
  if (!prefix) {
    return InvalidArgumentError("segment_ids is ", ids.ToString(), " (", InputName(c, 1),
                                "), but must be a prefix of data's shape, ", data.ToString(), " (",
                                InputName(c, 0), ")");
  }
  std::vector<int64_t> dims = {n ? (*n)[0] : -1};
  dims.insert(dims.end(), data.dims().begin() + ids.rank(), data.dims().end());
  c.AddOutput(c.input_types[0], PartialShape(std::move(dims)));
  return OkStatus();
}

template <typename T>
Status SegmentSumCompute(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& ids = ctx.input(1);
  if (ctx.input(2).shape().rank() != 0) {
    return InvalidArgumentError("num_segments must be a scalar, got ",
                                ctx.input(2).shape().ToString());
  }
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> n_value,
                          IntsFromTensor(ctx.input(2), "num_segments"));
  const int64_t segments = n_value[0];
  if (segments < 0) {
    return InvalidArgumentError("num_segments is ", segments, ", but must not be negative");
  }
  const TensorShape& ds = data.shape();
  bool prefix = ids.shape().rank() <= ds.rank();
  for (int d = 0; prefix && d < ids.shape().rank(); ++d) prefix = ids.shape().dim(d) == ds.dim(d);
  if (!prefix) {
    return InvalidArgumentError("segment_ids is ", ids.shape().ToString(),
                                ", but must be a prefix of data's shape, ", ds.ToString());
  }
  const std::vector<int64_t> id = FlatIndices(ids);
  // TensorFlow drops a negative id's row; one past the end is an error.
  for (size_t i = 0; i < id.size(); ++i) {
    if (id[i] >= segments) {
      return InvalidArgumentError("segment_ids", IndexString(ids.shape(), static_cast<int64_t>(i)),
                                  " = ", id[i], " is out of range [0, ", segments, ")");
    }
  }
  std::vector<int64_t> dims = {segments};
  dims.insert(dims.end(), ds.dims().begin() + ids.shape().rank(), ds.dims().end());
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, data.dtype(), TensorShape(dims)));
  if (out->NumElements() == 0) return OkStatus();
  const int64_t inner = out->NumElements() / segments;
  // Each segment's rows in input order (a counting sort), so a segment is
  // summed by one task in a fixed order.
  std::vector<int64_t> start(segments + 1, 0);
  for (int64_t s : id) {
    if (s >= 0) ++start[s + 1];
  }
  for (int64_t s = 0; s < segments; ++s) start[s + 1] += start[s];
  std::vector<int64_t> rows(start[segments]);
  {
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (size_t i = 0; i < id.size(); ++i) {
      if (id[i] >= 0) rows[next[id[i]]++] = static_cast<int64_t>(i);
    }
  }
  const T* in = data.flat<T>().data();
  T* o = out->flat<T>().data();
  const int64_t per_segment = inner * (1 + static_cast<int64_t>(rows.size()) / segments);
  ParallelRange(segments, per_segment, [&](int64_t b, int64_t e) {
    for (int64_t s = b; s < e; ++s) {
      T* dst = o + s * inner;
      std::fill_n(dst, inner, T(0));
      for (int64_t r = start[s]; r < start[s + 1]; ++r) {
        const T* src = in + rows[r] * inner;
        for (int64_t j = 0; j < inner; ++j) dst[j] += src[j];
      }
    }
  });
  return OkStatus();
}

StatusOr<Kernel> SegmentSumKernel(const Node& node) {
  return DispatchNumeric(node.output_type(0), [](auto tag) -> StatusOr<Kernel> {
    return Kernel(SegmentSumCompute<typename decltype(tag)::type>);
  });
}

// ---------------------------------------- ResourceScatterAdd / Update

Status ScatterShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "resource", kResource));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "indices", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 2, "updates", kNumericTypes));
  return OkStatus();
}

enum class ScatterOp { kAdd, kSub, kUpdate };

template <typename T, ScatterOp kOp>
Status ScatterInto(VariableResource& variable, const Tensor& indices, const Tensor& updates) {
  MutexLock lock(&variable.mu());
  CKFLOW_ASSIGN_OR_RETURN(const Tensor* current, variable.PeekLocked());
  // A copy: PrepareToUpdateLocked below may move the value to a new buffer.
  const TensorShape vs = current->shape();
  if (vs.rank() < 1) {
    return InvalidArgumentError("variable '", variable.name(), "' is a scalar; scatter needs ",
                                "rank >= 1");
  }
  // updates must be indices.shape + the variable's row shape (or a scalar,
  // repeated), as TensorFlow's ResourceScatterAdd takes them.
  std::vector<int64_t> want(indices.shape().dims().begin(), indices.shape().dims().end());
  want.insert(want.end(), vs.dims().begin() + 1, vs.dims().end());
  const bool scalar = updates.shape().rank() == 0;
  if (!scalar && !(updates.shape() == TensorShape(want))) {
    return InvalidArgumentError("updates is ", updates.shape().ToString(), ", but must be ",
                                DimsString(want), " (indices ", indices.shape().ToString(),
                                " then the rows of variable '", variable.name(), "' ",
                                vs.ToString(), ") or a scalar");
  }
  StatusOr<std::vector<int64_t>> index = CheckedIndices(indices, "indices", vs.dim(0));
  if (!index.ok()) {
    return index.status().WithContext("variable '" + variable.name() + "' " + vs.ToString());
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * value, variable.PrepareToUpdateLocked());
  const int64_t inner = vs.num_elements() / vs.dim(0);
  T* dst = value->flat<T>().data();
  const T* src = updates.flat<T>().data();
  // In index order, one thread: a row named twice gets both updates, in
  // order (TensorFlow's CPU kernel does the same).
  for (size_t i = 0; i < index->size(); ++i) {
    T* row = dst + (*index)[i] * inner;
    for (int64_t j = 0; j < inner; ++j) {
      const T u = scalar ? src[0] : src[i * inner + j];
      if constexpr (kOp == ScatterOp::kAdd) {
        row[j] += u;
      } else if constexpr (kOp == ScatterOp::kSub) {
        row[j] -= u;
      } else {
        row[j] = u;
      }
    }
  }
  return OkStatus();
}

template <ScatterOp kOp>
Status ScatterCompute(KernelContext& ctx) {
  CKFLOW_ASSIGN_OR_RETURN(auto variable, VariableFromHandle(ctx.input(0), "resource"));
  const Tensor& updates = ctx.input(2);
  if (updates.dtype() != variable->dtype()) {
    return InvalidArgumentError("variable '", variable->name(), "' is ",
                                DataTypeName(variable->dtype()), "; cannot scatter ",
                                DataTypeName(updates.dtype()), " updates into it");
  }
  return DispatchNumeric(updates.dtype(), [&](auto tag) -> Status {
    return ScatterInto<typename decltype(tag)::type, kOp>(*variable, ctx.input(1), updates);
  });
}

// ------------------------------------------------------------- Unique

Status UniqueShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "x", kNumericTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, "x", 1, 1));
  const DataType out_idx = c.attrs->GetOr<DataType>("out_idx", DT_INT32);
  if (out_idx != DT_INT32 && out_idx != DT_INT64) {
    return InvalidArgumentError("out_idx is ", DataTypeName(out_idx),
                                ", but must be one of int32, int64");
  }
  c.AddOutput(c.input_types[0], PartialShape({-1}));
  c.AddOutput(out_idx, c.input_shapes[0]);
  return OkStatus();
}

// y = the distinct values of x in order of first appearance, idx[i] = the
// position of x[i] in y: TensorFlow's Unique, one pass over a hash map.
template <typename T, typename Index>
Status UniqueCompute(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.shape().rank() != 1) {
    return InvalidArgumentError("x must be a vector, got ", x.shape().ToString());
  }
  const int64_t n = x.NumElements();
  if (n > std::numeric_limits<Index>::max()) {
    return InvalidArgumentError("x has ", n, " elements, more than out_idx ",
                                DataTypeName(DataTypeOf<Index>()), " can number");
  }
  std::span<const T> in = x.flat<T>();
  CKFLOW_ASSIGN_OR_RETURN(Tensor * idx, ctx.AllocateOutput(1, DataTypeOf<Index>(), x.shape()));
  Index* position = idx->flat<Index>().data();
  std::unordered_map<T, Index> first;
  first.reserve(static_cast<size_t>(n));
  std::vector<T> distinct;
  for (int64_t i = 0; i < n; ++i) {
    auto [it, inserted] = first.try_emplace(in[i], static_cast<Index>(distinct.size()));
    if (inserted) distinct.push_back(in[i]);
    position[i] = it->second;
  }
  const auto count = static_cast<int64_t>(distinct.size());
  CKFLOW_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x.dtype(), TensorShape({count})));
  std::copy(distinct.begin(), distinct.end(), y->flat<T>().data());
  return OkStatus();
}

StatusOr<Kernel> UniqueKernel(const Node& node) {
  return DispatchNumeric(node.input(0).dtype(), [&](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    if (node.output_type(1) == DT_INT64) return Kernel(UniqueCompute<T, int64_t>);
    return Kernel(UniqueCompute<T, int32_t>);
  });
}

}  // namespace
}  // namespace internal

Status RegisterGatherOps(OpRegistry& r) {
  using namespace internal;  // NOLINT: the shape functions and kernels above
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "GatherV2",
                                        .inputs = {"params", "indices", "axis"},
                                        .shape_fn = GatherShapeFn,
                                        .kernel_factory = StatelessKernel(GatherCompute)}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "ResourceGather",
                                        .inputs = {"resource", "indices"},
                                        .stateful = true,
                                        .shape_fn = ResourceGatherShapeFn,
                                        .kernel_factory = ResourceGatherKernel}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "UnsortedSegmentSum",
                                        .inputs = {"data", "segment_ids", "num_segments"},
                                        .shape_fn = SegmentSumShapeFn,
                                        .kernel_factory = SegmentSumKernel}));
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "ResourceScatterAdd",
                     .inputs = {"resource", "indices", "updates"},
                     .stateful = true,
                     .shape_fn = ScatterShapeFn,
                     .kernel_factory = StatelessKernel(ScatterCompute<ScatterOp::kAdd>)}));
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "ResourceScatterSub",
                     .inputs = {"resource", "indices", "updates"},
                     .stateful = true,
                     .shape_fn = ScatterShapeFn,
                     .kernel_factory = StatelessKernel(ScatterCompute<ScatterOp::kSub>)}));
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "ResourceScatterUpdate",
                     .inputs = {"resource", "indices", "updates"},
                     .stateful = true,
                     .shape_fn = ScatterShapeFn,
                     .kernel_factory = StatelessKernel(ScatterCompute<ScatterOp::kUpdate>)}));
  return RegisterOp(r, {.type = "Unique",
                        .inputs = {"x"},
                        .shape_fn = UniqueShapeFn,
                        .kernel_factory = UniqueKernel});
}

namespace ops {

using internal::BuildOp;

Output Gather(const Scope& scope, Input params, Input indices, Input axis) {
  AttrMap attrs;
  attrs.Set("batch_dims", int64_t{0});
  return BuildOp(scope, "GatherV2", {params, indices, axis}, std::move(attrs));
}

Output UnsortedSegmentSum(const Scope& scope, Input data, Input segment_ids, Input num_segments) {
  return BuildOp(scope, "UnsortedSegmentSum", {data, segment_ids, num_segments});
}

Output ResourceGather(const Scope& scope, Output resource, Input indices, DataType dtype,
                      const PartialShape& shape) {
  AttrMap attrs;
  attrs.Set("dtype", dtype);
  attrs.Set("batch_dims", int64_t{0});
  if (shape.known_rank()) attrs.Set("_shape", shape);
  return BuildOp(scope, "ResourceGather", {resource, indices}, std::move(attrs));
}

Output ResourceScatterAdd(const Scope& scope, Output resource, Input indices, Input updates) {
  return BuildOp(scope, "ResourceScatterAdd", {resource, indices, updates});
}

Output ResourceScatterSub(const Scope& scope, Output resource, Input indices, Input updates) {
  return BuildOp(scope, "ResourceScatterSub", {resource, indices, updates});
}

UniqueOutput Unique(const Scope& scope, Input x, DataType out_idx) {
  AttrMap attrs;
  attrs.Set("out_idx", out_idx);
  Node* node = internal::BuildNode(scope, "Unique", {x}, std::move(attrs));
  if (node == nullptr) return {};
  return {Output(node, 0), Output(node, 1)};
}

Output ResourceScatterUpdate(const Scope& scope, Output resource, Input indices, Input updates) {
  return BuildOp(scope, "ResourceScatterUpdate", {resource, indices, updates});
}

}  // namespace ops
}  // namespace ckflow
