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
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
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
inline constexpr DataType kInt32[] = {DT_INT32};

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
  std::vector<int64_t> dims = indices.dim_sizes();
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
  // A copy: PrepareToUpdateRowsLocked below may move the value to a new buffer.
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
  CKFLOW_ASSIGN_OR_RETURN(Tensor * value, variable.PrepareToUpdateRowsLocked(*index));
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

// ------------------------------------------------------- DynamicPartition

Status DynamicPartitionShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "data", kCastTypes));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "partitions", kInt32));
  CKFLOW_ASSIGN_OR_RETURN(int64_t n, c.attrs->Get<int64_t>("num_partitions"));
  if (n < 1) return InvalidArgumentError("num_partitions is ", n, ", but must be at least 1");
  const PartialShape& data = c.input_shapes[0];
  const PartialShape& partitions = c.input_shapes[1];
  PartialShape out = PartialShape::Unknown();
  if (data.known_rank() && partitions.known_rank()) {
    bool prefix = partitions.rank() <= data.rank();
    for (int d = 0; prefix && d < partitions.rank(); ++d) {
      prefix = data.dim(d) < 0 || partitions.dim(d) < 0 || data.dim(d) == partitions.dim(d);
    }
    if (!prefix) {
      return InvalidArgumentError("partitions is ", partitions.ToString(), " (", InputName(c, 1),
                                  "), but its shape must be a prefix of data's, ", data.ToString(),
                                  " (", InputName(c, 0), ")");
    }
    std::vector<int64_t> dims = {-1};
    dims.insert(dims.end(), data.dims().begin() + partitions.rank(), data.dims().end());
    out = PartialShape(std::move(dims));
  }
  for (int64_t p = 0; p < n; ++p) c.AddOutput(c.input_types[0], out);
  return OkStatus();
}

// Output p holds, in order, the rows of data (data viewed as [partitions'
// elements, row]) whose partition is p: one pass numbers each row within
// its partition, then the rows move in parallel, each to its own place.
Status DynamicPartitionCompute(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& partitions = ctx.input(1);
  const int64_t n = ctx.num_outputs();
  const TensorShape& ds = data.shape();
  const TensorShape& ps = partitions.shape();
  bool prefix = ps.rank() <= ds.rank();
  for (int d = 0; prefix && d < ps.rank(); ++d) prefix = ds.dim(d) == ps.dim(d);
  if (!prefix) {
    return InvalidArgumentError("partitions is ", ps.ToString(),
                                ", but its shape must be a prefix of data's, ", ds.ToString());
  }
  std::span<const int32_t> part = partitions.flat<int32_t>();
  const int64_t rows = partitions.NumElements();
  std::vector<int64_t> count(n, 0), slot(rows);
  for (int64_t i = 0; i < rows; ++i) {
    if (part[i] < 0 || part[i] >= n) {
      return InvalidArgumentError("partitions", IndexString(ps, i), " = ", part[i],
                                  " is not in [0, ", n, ")");
    }
    slot[i] = count[part[i]]++;
  }
  std::vector<int64_t> row_dims(ds.dims().begin() + ps.rank(), ds.dims().end());
  const size_t row_bytes =
      static_cast<size_t>(TensorShape(row_dims).num_elements()) * DataTypeSize(data.dtype());
  std::vector<char*> out(n);
  for (int64_t p = 0; p < n; ++p) {
    std::vector<int64_t> dims = {count[p]};
    dims.insert(dims.end(), row_dims.begin(), row_dims.end());
    CKFLOW_ASSIGN_OR_RETURN(Tensor * t, ctx.AllocateOutput(p, data.dtype(), TensorShape(dims)));
    out[p] = static_cast<char*>(t->raw_data());
  }
  if (row_bytes == 0) return OkStatus();
  const char* in = static_cast<const char*>(data.raw_data());
  ParallelRange(rows, static_cast<int64_t>(row_bytes / 4 + 1), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      std::memcpy(out[part[i]] + slot[i] * row_bytes, in + i * row_bytes, row_bytes);
    }
  });
  return OkStatus();
}

// ---------------------------------------------------------- DynamicStitch

// Inputs: N int32 index tensors, then N data tensors (TensorFlow's
// `indices` and `data` lists, attribute N).
Status DynamicStitchShapeFn(InferenceContext& c) {
  const int total = static_cast<int>(c.input_types.size());
  if (total % 2 != 0) {
    return InvalidArgumentError("DynamicStitch takes as many data as indices tensors, got ", total,
                                " inputs");
  }
  const int n = total / 2;
  PartialShape row = PartialShape::Unknown();
  for (int m = 0; m < n; ++m) {
    CKFLOW_RETURN_IF_ERROR(CheckDtype(c, m, "indices", kInt32));
    CKFLOW_RETURN_IF_ERROR(CheckDtype(c, n + m, "data", kCastTypes));
    CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, n, "data", n + m, "data"));
    const PartialShape& indices = c.input_shapes[m];
    const PartialShape& data = c.input_shapes[n + m];
    if (!indices.known_rank() || !data.known_rank()) continue;
    bool prefix = indices.rank() <= data.rank();
    for (int d = 0; prefix && d < indices.rank(); ++d) {
      prefix = data.dim(d) < 0 || indices.dim(d) < 0 || data.dim(d) == indices.dim(d);
    }
    PartialShape rest(std::vector<int64_t>(data.dims().begin() + (prefix ? indices.rank() : 0),
                                           data.dims().end()));
    StatusOr<PartialShape> merged = row.known_rank() ? row.Merge(rest) : rest;
    if (!prefix || !merged.ok()) {
      return InvalidArgumentError("data is ", data.ToString(), " (", InputName(c, n + m),
                                  "), but must be indices' shape ", indices.ToString(), " (",
                                  InputName(c, m), ") followed by the rows' shape",
                                  row.known_rank() ? " " + row.ToString() : std::string());
    }
    row = *merged;
  }
  if (!row.known_rank()) {
    c.AddOutput(c.input_types[n], PartialShape::Unknown());
    return OkStatus();
  }
  std::vector<int64_t> dims = {-1};
  dims.insert(dims.end(), row.dims().begin(), row.dims().end());
  c.AddOutput(c.input_types[n], PartialShape(std::move(dims)));
  return OkStatus();
}

// merged[indices[m][i]] = data[m][i]; a position given twice takes the last
// one (in m, then i order), as TensorFlow's. Positions nobody names are
// zero. The source of each output row is found in one pass, then rows move
// in parallel.
Status DynamicStitchCompute(KernelContext& ctx) {
  const int n = ctx.num_inputs() / 2;
  const TensorShape& first = ctx.input(0).shape();
  const TensorShape& first_data = ctx.input(n).shape();
  if (first_data.rank() < first.rank()) {
    return InvalidArgumentError("data[0] is ", first_data.ToString(),
                                ", but must start with indices[0]'s shape ", first.ToString());
  }
  const std::vector<int64_t> row_dims(first_data.dims().begin() + first.rank(),
                                      first_data.dims().end());
  const TensorShape row_shape(row_dims);
  const size_t row_bytes =
      static_cast<size_t>(row_shape.num_elements()) * DataTypeSize(ctx.input(n).dtype());
  int64_t rows = 0;
  for (int m = 0; m < n; ++m) {
    const TensorShape& is = ctx.input(m).shape();
    std::vector<int64_t> expected = is.dim_sizes();
    expected.insert(expected.end(), row_dims.begin(), row_dims.end());
    if (ctx.input(n + m).shape() != TensorShape(expected)) {
      return InvalidArgumentError("data[", m, "] is ", ctx.input(n + m).shape().ToString(),
                                  ", but must be indices[", m, "]'s shape ", is.ToString(),
                                  " followed by the rows' shape ", row_shape.ToString());
    }
    std::span<const int32_t> index = ctx.input(m).flat<int32_t>();
    for (int64_t i = 0; i < static_cast<int64_t>(index.size()); ++i) {
      if (index[i] < 0) {
        return InvalidArgumentError("indices[", m, "]", IndexString(is, i), " = ", index[i],
                                    " is negative");
      }
      rows = std::max<int64_t>(rows, int64_t{index[i]} + 1);
    }
  }
  std::vector<int64_t> dims = {rows};
  dims.insert(dims.end(), row_dims.begin(), row_dims.end());
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                          ctx.AllocateOutput(0, ctx.input(n).dtype(), TensorShape(dims)));
  if (row_bytes == 0 || rows == 0) return OkStatus();
  // source[r]: (m, i) of the last row written to position r, or m = -1.
  std::vector<std::pair<int32_t, int64_t>> source(rows, {-1, 0});
  for (int m = 0; m < n; ++m) {
    std::span<const int32_t> index = ctx.input(m).flat<int32_t>();
    for (int64_t i = 0; i < static_cast<int64_t>(index.size()); ++i) source[index[i]] = {m, i};
  }
  char* to = static_cast<char*>(out->raw_data());
  ParallelRange(rows, static_cast<int64_t>(row_bytes / 4 + 1), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const auto [m, i] = source[r];
      if (m < 0) {
        std::memset(to + r * row_bytes, 0, row_bytes);
      } else {
        std::memcpy(to + r * row_bytes,
                    static_cast<const char*>(ctx.input(n + m).raw_data()) + i * row_bytes,
                    row_bytes);
      }
    }
  });
  return OkStatus();
}

// ------------------------------------------------------------------ Range

template <typename T>
StatusOr<int64_t> RangeSize(T start, T limit, T delta) {
  if (delta == 0) return InvalidArgumentError("delta is 0, but must not be");
  if (delta > 0 ? start > limit : start < limit) {
    return InvalidArgumentError("start ", start, " and limit ", limit,
                                " are the wrong way round for delta ", delta);
  }
  if constexpr (std::is_integral_v<T>) {
    const auto span = static_cast<uint64_t>(limit > start ? limit - start : start - limit);
    const auto step = static_cast<uint64_t>(delta > 0 ? delta : -delta);
    return static_cast<int64_t>((span + step - 1) / step);
  } else {
    const double size = std::ceil(std::abs((static_cast<double>(limit) - start) / delta));
    if (!(size < static_cast<double>(std::numeric_limits<int32_t>::max()))) {
      return InvalidArgumentError("a range from ", start, " to ", limit, " by ", delta,
                                  " has too many elements");
    }
    return static_cast<int64_t>(size);
  }
}

template <typename T>
StatusOr<T> ScalarOf(const Tensor& t, std::string_view arg) {
  if (t.shape().rank() != 0) {
    return InvalidArgumentError(arg, " must be a scalar, got ", t.shape().ToString());
  }
  return t.scalar<T>();
}

Status RangeShapeFn(InferenceContext& c) {
  static constexpr DataType kRangeTypes[] = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64};
  const char* args[] = {"start", "limit", "delta"};
  for (int i = 0; i < 3; ++i) {
    CKFLOW_RETURN_IF_ERROR(CheckDtype(c, i, args[i], kRangeTypes));
    CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 0, "start", i, args[i]));
    CKFLOW_RETURN_IF_ERROR(CheckRank(c, i, args[i], 0, 0));
  }
  int64_t size = -1;
  if (c.input_constants[0] && c.input_constants[1] && c.input_constants[2]) {
    StatusOr<int64_t> known = DispatchNumeric(c.input_types[0], [&](auto tag) -> StatusOr<int64_t> {
      using T = typename decltype(tag)::type;
      return RangeSize<T>(c.input_constants[0]->scalar<T>(), c.input_constants[1]->scalar<T>(),
                          c.input_constants[2]->scalar<T>());
    });
    if (!known.ok()) return known.status();
    size = *known;
  }
  c.AddOutput(c.input_types[0], PartialShape({size}));
  return OkStatus();
}

template <typename T>
Status RangeCompute(KernelContext& ctx) {
  CKFLOW_ASSIGN_OR_RETURN(T start, ScalarOf<T>(ctx.input(0), "start"));
  CKFLOW_ASSIGN_OR_RETURN(T limit, ScalarOf<T>(ctx.input(1), "limit"));
  CKFLOW_ASSIGN_OR_RETURN(T delta, ScalarOf<T>(ctx.input(2), "delta"));
  CKFLOW_ASSIGN_OR_RETURN(int64_t size, RangeSize<T>(start, limit, delta));
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                          ctx.AllocateOutput(0, DataTypeOf<T>(), TensorShape({size})));
  T* to = out->flat<T>().data();
  // start + i * delta, not a running sum, so float ranges do not drift.
  for (int64_t i = 0; i < size; ++i) to[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  return OkStatus();
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
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "DynamicPartition",
                     .inputs = {"data", "partitions"},
                     .shape_fn = DynamicPartitionShapeFn,
                     .kernel_factory = StatelessKernel(DynamicPartitionCompute)}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "DynamicStitch",
                                        .inputs = {"indices_then_data"},
                                        .variadic = true,
                                        .shape_fn = DynamicStitchShapeFn,
                                        .kernel_factory = StatelessKernel(DynamicStitchCompute)}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(
      r, {.type = "Range",
          .inputs = {"start", "limit", "delta"},
          .shape_fn = RangeShapeFn,
          .kernel_factory = [](const Node& node) {
            return DispatchNumeric(node.output_type(0), [](auto tag) -> StatusOr<Kernel> {
              return Kernel(RangeCompute<typename decltype(tag)::type>);
            });
          }}));
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

std::vector<Output> DynamicPartition(const Scope& scope, Input data, Input partitions,
                                     int64_t num_partitions) {
  AttrMap attrs;
  attrs.Set("num_partitions", num_partitions);
  Node* node = internal::BuildNode(scope, "DynamicPartition", {data, partitions}, std::move(attrs));
  std::vector<Output> out;
  if (node == nullptr) return out;
  for (int64_t p = 0; p < num_partitions; ++p) out.emplace_back(node, static_cast<int>(p));
  return out;
}

Output DynamicStitch(const Scope& scope, const std::vector<Output>& indices,
                     const std::vector<Output>& data) {
  if (!scope.ok()) return Output();
  if (indices.empty() || indices.size() != data.size()) {
    scope.UpdateStatus(InvalidArgumentError("DynamicStitch takes as many data as indices tensors (",
                                            "at least one), got ", indices.size(), " and ",
                                            data.size()));
    return Output();
  }
  std::vector<Input> inputs(indices.begin(), indices.end());
  inputs.insert(inputs.end(), data.begin(), data.end());
  AttrMap attrs;
  attrs.Set("N", static_cast<int64_t>(indices.size()));
  return BuildOp(scope, "DynamicStitch", inputs, std::move(attrs));
}

Output Range(const Scope& scope, Input start, Input limit, Input delta) {
  return BuildOp(scope, "Range", {start, limit, delta});
}

}  // namespace ops
}  // namespace ckflow
