// TensorFlow's slicing and joining array ops: Slice, Pad, PadV2, ConcatV2,
// ConcatOffset (the offsets ConcatV2's gradient slices at), Split, SplitV
// and Tile, with their builders (declared in array_ops.h).
//
// All of them move boxes of elements as bytes, so one kernel serves every
// fixed-size dtype; each output element is written by exactly one copy, so
// the results are the same under any thread count.

#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/array_ops.h"
#include "ops/ops_internal.h"
#include "ops/standard_ops.h"

namespace ckflow {
namespace internal {
namespace {

// Copies the box of extent `size` at `src_begin` in `src` to `dst_begin` in
// `dst` (same dtype and rank). The innermost dimensions the box spans whole
// in both tensors merge with the first one it does not into contiguous runs,
// one memcpy each; the runs are walked as an odometer over the outer
// dimensions, in parallel.
void CopyBox(const Tensor& src, const std::vector<int64_t>& src_begin, Tensor& dst,
             const std::vector<int64_t>& dst_begin, const std::vector<int64_t>& size) {
  const int rank = static_cast<int>(size.size());
  for (int64_t s : size) {
    if (s == 0) return;
  }
  const size_t element = DataTypeSize(src.dtype());
  const char* from = static_cast<const char*>(src.raw_data());
  char* to = static_cast<char*>(dst.raw_data());
  if (rank == 0) {
    std::memcpy(to, from, element);
    return;
  }
  std::vector<int64_t> src_strides(rank), dst_strides(rank);
  int64_t src_stride = 1, dst_stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    src_strides[d] = src_stride;
    dst_strides[d] = dst_stride;
    src_stride *= src.shape().dim(d);
    dst_stride *= dst.shape().dim(d);
  }
  int inner = rank - 1;  // dimensions [inner, rank) form one run
  int64_t run = size[inner];
  while (inner > 0 && size[inner] == src.shape().dim(inner) &&
         size[inner] == dst.shape().dim(inner)) {
    --inner;
    run *= size[inner];
  }
  int64_t rows = 1;
  for (int d = 0; d < inner; ++d) rows *= size[d];
  const size_t run_bytes = static_cast<size_t>(run) * element;
  ParallelRange(rows, run, [&](int64_t b, int64_t e) {
    std::vector<int64_t> index(inner);
    int64_t rest = b;
    for (int d = inner - 1; d >= 0; --d) {
      index[d] = rest % size[d];
      rest /= size[d];
    }
    for (int64_t r = b; r < e; ++r) {
      int64_t s = src_begin[inner] * src_strides[inner];
      int64_t t = dst_begin[inner] * dst_strides[inner];
      for (int d = 0; d < inner; ++d) {
        s += (src_begin[d] + index[d]) * src_strides[d];
        t += (dst_begin[d] + index[d]) * dst_strides[d];
      }
      std::memcpy(to + t * element, from + s * element, run_bytes);
      for (int d = inner - 1; d >= 0 && ++index[d] == size[d]; --d) index[d] = 0;
    }
  });
}

// ------------------------------------------------------------------ Slice

// The extent of the slice of `dims` at `begin` with `size` (-1: to the
// end), or InvalidArgument naming the dimension that does not hold it.
StatusOr<std::vector<int64_t>> SliceExtent(const std::vector<int64_t>& dims,
                                           const std::vector<int64_t>& begin,
                                           const std::vector<int64_t>& size) {
  const size_t rank = dims.size();
  if (begin.size() != rank || size.size() != rank) {
    return InvalidArgumentError("begin ", DimsString(begin), " and size ", DimsString(size),
                                " must have one element per dimension of the input, ",
                                DimsString(dims));
  }
  std::vector<int64_t> extent(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t b = begin[d];
    const int64_t s = size[d] == -1 && b >= 0 && b <= dims[d] ? dims[d] - b : size[d];
    if (b < 0 || b > dims[d] || s < 0 || s > dims[d] - b) {
      return InvalidArgumentError("begin[", d, "] = ", b, " and size[", d, "] = ", size[d],
                                  " do not fit dimension ", d, " of the input, ", DimsString(dims),
                                  ": need 0 <= begin <= ", dims[d],
                                  " and 0 <= begin + size <= ", dims[d], " (size -1: to the end)");
    }
    extent[d] = s;
  }
  return extent;
}

Status SliceShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "input", kCastTypes));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "begin", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 1, "begin", 2, "size"));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "begin", 1, 1));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 2, "size", 1, 1));
  const PartialShape& in = c.input_shapes[0];
  for (int i : {1, 2}) {
    const PartialShape& v = c.input_shapes[i];
    if (in.known_rank() && v.known_rank() && v.dim(0) >= 0 && v.dim(0) != in.rank()) {
      return InvalidArgumentError(i == 1 ? "begin" : "size", " is ", v.ToString(), " (",
                                  InputName(c, i), "), but must have one element per dimension of ",
                                  "input, ", in.ToString(), " (", InputName(c, 0), ")");
    }
  }
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> begin, ConstantInts(c, 1, "begin"));
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> size, ConstantInts(c, 2, "size"));
  if (begin && size && in.IsFullyDefined()) {
    StatusOr<std::vector<int64_t>> extent = SliceExtent(in.dim_sizes(), *begin, *size);
    if (!extent.ok()) return extent.status().WithContext("input (" + InputName(c, 0) + ")");
    c.AddOutput(c.input_types[0], PartialShape(*std::move(extent)));
    return OkStatus();
  }
  int rank = in.rank();
  if (rank < 0 && size) rank = static_cast<int>(size->size());
  if (rank < 0 && begin) rank = static_cast<int>(begin->size());
  if (rank < 0) {
    c.AddOutput(c.input_types[0], PartialShape::Unknown());
    return OkStatus();
  }
  std::vector<int64_t> dims(rank, -1);
  for (int d = 0; size && d < rank && d < static_cast<int>(size->size()); ++d) {
    const int64_t s = (*size)[d];
    if (s < -1) {
      return InvalidArgumentError("size[", d, "] = ", s, " (", InputName(c, 2),
                                  ") is negative (only -1, to the end, is allowed)");
    }
    if (s >= 0) {
      dims[d] = s;
    } else if (begin && in.known_rank() && in.dim(d) >= 0) {
      dims[d] = std::max<int64_t>(0, in.dim(d) - (*begin)[d]);
    }
  }
  c.AddOutput(c.input_types[0], PartialShape(std::move(dims)));
  return OkStatus();
}

Status SliceCompute(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  for (int i : {1, 2}) {
    if (ctx.input(i).shape().rank() != 1) {
      return InvalidArgumentError(i == 1 ? "begin" : "size", " must be a vector, got shape ",
                                  ctx.input(i).shape().ToString());
    }
  }
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> begin, IntsFromTensor(ctx.input(1), "begin"));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> size, IntsFromTensor(ctx.input(2), "size"));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> extent,
                          SliceExtent(in.shape().dim_sizes(), begin, size));
  if (extent == in.shape().dim_sizes()) {  // the whole input: share it
    ctx.set_output(0, in);
    return OkStatus();
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, in.dtype(), TensorShape(extent)));
  CopyBox(in, begin, *out, std::vector<int64_t>(extent.size(), 0), extent);
  return OkStatus();
}

// -------------------------------------------------------------------- Pad

// The values of a constant paddings input (checked to be [rank, 2]), row
// by row; nullopt if it is not a Const.
StatusOr<std::optional<std::vector<int64_t>>> ConstantPaddings(const InferenceContext& c) {
  const Tensor* t = c.input_constants.size() > 1 ? c.input_constants[1] : nullptr;
  if (t == nullptr) return std::optional<std::vector<int64_t>>();
  CKFLOW_ASSIGN_OR_RETURN(Tensor flat, t->Reshaped(TensorShape({t->NumElements()})));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> pads, IntsFromTensor(flat, "paddings"));
  return std::optional<std::vector<int64_t>>(std::move(pads));
}

// Pad (input, paddings) and PadV2 (input, paddings, constant_values).
// paddings is [rank, 2]: row d holds the elements added before and after
// dimension d.
Status PadShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "input", kCastTypes));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "paddings", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "paddings", 2, 2));
  if (c.input_types.size() == 3) {
    CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 0, "input", 2, "constant_values"));
    CKFLOW_RETURN_IF_ERROR(CheckRank(c, 2, "constant_values", 0, 0));
  }
  const PartialShape& in = c.input_shapes[0];
  const PartialShape& p = c.input_shapes[1];
  int rank = in.rank();
  if (p.known_rank()) {
    const bool rows_mismatch = rank >= 0 && p.dim(0) >= 0 && p.dim(0) != rank;
    if ((p.dim(1) >= 0 && p.dim(1) != 2) || rows_mismatch) {
      return InvalidArgumentError("paddings is ", p.ToString(), " (", InputName(c, 1),
                                  "), but must be [rank, 2] for input ", in.ToString(), " (",
                                  InputName(c, 0), ")");
    }
    if (rank < 0 && p.dim(0) >= 0) rank = static_cast<int>(p.dim(0));
  }
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> pads, ConstantPaddings(c));
  if (rank < 0) {
    c.AddOutput(c.input_types[0], PartialShape::Unknown());
    return OkStatus();
  }
  std::vector<int64_t> dims(rank, -1);
  for (int d = 0; pads && d < rank; ++d) {
    const int64_t before = (*pads)[2 * d], after = (*pads)[2 * d + 1];
    if (before < 0 || after < 0) {
      return InvalidArgumentError("paddings (", InputName(c, 1), ") row ", d, " is [", before, ",",
                                  after, "], but paddings must not be negative");
    }
    if (in.known_rank() && in.dim(d) >= 0) dims[d] = in.dim(d) + before + after;
  }
  c.AddOutput(c.input_types[0], PartialShape(std::move(dims)));
  return OkStatus();
}

Status PadCompute(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const Tensor& paddings = ctx.input(1);
  const int rank = in.shape().rank();
  if (paddings.shape() != TensorShape({rank, 2})) {
    return InvalidArgumentError("paddings is ", paddings.shape().ToString(),
                                ", but must be [rank, 2] for input ", in.shape().ToString());
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor flat, paddings.Reshaped(TensorShape({2 * rank})));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> pads, IntsFromTensor(flat, "paddings"));
  std::vector<int64_t> dims(rank), before(rank);
  for (int d = 0; d < rank; ++d) {
    before[d] = pads[2 * d];
    const int64_t after = pads[2 * d + 1];
    if (before[d] < 0 || after < 0) {
      return InvalidArgumentError("paddings row ", d, " is [", before[d], ",", after,
                                  "], but paddings must not be negative");
    }
    if (before[d] > std::numeric_limits<int64_t>::max() - in.shape().dim(d) - after) {
      return InvalidArgumentError("paddings row ", d, " is [", before[d], ",", after,
                                  "]: dimension ", d, " would overflow");
    }
    dims[d] = in.shape().dim(d) + before[d] + after;
  }
  StatusOr<TensorShape> shape = TensorShape::Make(dims);
  if (!shape.ok()) return shape.status().WithContext("padded shape");
  Tensor zero;
  const Tensor* value = &zero;
  if (ctx.num_inputs() == 3) {
    value = &ctx.input(2);
    if (value->shape().rank() != 0) {
      return InvalidArgumentError("constant_values must be a scalar, got shape ",
                                  value->shape().ToString());
    }
  } else {
    CKFLOW_ASSIGN_OR_RETURN(zero, ScalarOfType(in.dtype(), 0));
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, in.dtype(), *shape));
  CKFLOW_RETURN_IF_ERROR(FillWith(*out, *value));
  CopyBox(in, std::vector<int64_t>(rank, 0), *out, before, in.shape().dim_sizes());
  return OkStatus();
}

// --------------------------------------------------------------- ConcatV2

std::string ValueArg(int i) { return "values[" + std::to_string(i) + "]"; }

// The concatenation of shapes `dims` along `axis` (normalized), or
// InvalidArgument naming the first value that does not fit.
StatusOr<std::vector<int64_t>> ConcatShape(const std::vector<std::vector<int64_t>>& dims,
                                           int axis) {
  std::vector<int64_t> out = dims[0];
  for (size_t i = 1; i < dims.size(); ++i) {
    bool fits = dims[i].size() == out.size();
    for (size_t d = 0; fits && d < out.size(); ++d) {
      fits = static_cast<int>(d) == axis || dims[i][d] == out[d];
    }
    if (!fits) {
      return InvalidArgumentError(ValueArg(static_cast<int>(i)), " is ", DimsString(dims[i]),
                                  ", but values[0] is ", DimsString(dims[0]),
                                  ": shapes must be equal but for axis ", axis);
    }
    out[axis] += dims[i][axis];
  }
  return out;
}

Status ConcatShapeFn(InferenceContext& c) {
  const int n = static_cast<int>(c.input_types.size()) - 1;  // the last input is the axis
  if (n < 2) {
    return InvalidArgumentError("expects at least 2 values and an axis, got ", n + 1, " inputs");
  }
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, n, "axis", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, n, "axis", 0, 0));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, ValueArg(0), kCastTypes));
  int ranked = -1;  // a value of known rank
  for (int i = 0; i < n; ++i) {
    CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 0, ValueArg(0), i, ValueArg(i)));
    const PartialShape& s = c.input_shapes[i];
    if (!s.known_rank()) continue;
    if (s.rank() == 0) {
      return InvalidArgumentError("cannot concatenate scalars: ", ValueArg(i), " is [] (",
                                  InputName(c, i), ")");
    }
    if (ranked < 0) {
      ranked = i;
    } else if (s.rank() != c.input_shapes[ranked].rank()) {
      return InvalidArgumentError("ranks differ: ", ValueArg(ranked), " is ",
                                  c.input_shapes[ranked].ToString(), " (", InputName(c, ranked),
                                  "), ", ValueArg(i), " is ", s.ToString(), " (", InputName(c, i),
                                  ")");
    }
  }
  if (ranked < 0) {
    c.AddOutput(c.input_types[0], PartialShape::Unknown());
    return OkStatus();
  }
  const int rank = c.input_shapes[ranked].rank();
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axis_value,
                          ConstantInts(c, n, "axis"));
  if (!axis_value) {
    c.AddOutput(c.input_types[0], PartialShape(std::vector<int64_t>(rank, -1)));
    return OkStatus();
  }
  CKFLOW_ASSIGN_OR_RETURN(int axis,
                          NormalizeAxis((*axis_value)[0], rank, "axis (" + InputName(c, n) + ")"));
  std::vector<int64_t> dims(rank, -1);
  std::vector<int> pinned_by(rank, -1);
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    const PartialShape& s = c.input_shapes[i];
    if (!s.known_rank()) {
      total = -1;
      continue;
    }
    for (int d = 0; d < rank; ++d) {
      if (d == axis) {
        total = total < 0 || s.dim(d) < 0 ? -1 : total + s.dim(d);
      } else if (s.dim(d) >= 0 && dims[d] < 0) {
        dims[d] = s.dim(d);
        pinned_by[d] = i;
      } else if (s.dim(d) >= 0 && s.dim(d) != dims[d]) {
        const int j = pinned_by[d];
        return InvalidArgumentError(ValueArg(i), " is ", s.ToString(), " (", InputName(c, i),
                                    "), but ", ValueArg(j), " is ", c.input_shapes[j].ToString(),
                                    " (", InputName(c, j), "): dimension ", d,
                                    " differs off the concatenation axis ", axis);
      }
    }
  }
  dims[axis] = total;
  c.AddOutput(c.input_types[0], PartialShape(std::move(dims)));
  return OkStatus();
}

Status ConcatCompute(KernelContext& ctx) {
  const int n = ctx.num_inputs() - 1;
  const Tensor& axis_t = ctx.input(n);
  if (axis_t.shape().rank() != 0) {
    return InvalidArgumentError("axis must be a scalar, got shape ", axis_t.shape().ToString());
  }
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> axis_value, IntsFromTensor(axis_t, "axis"));
  const int rank = ctx.input(0).shape().rank();
  if (rank == 0) return InvalidArgumentError("cannot concatenate scalars (values[0] is [])");
  CKFLOW_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_value[0], rank, "axis"));
  std::vector<std::vector<int64_t>> dims(n);
  for (int i = 0; i < n; ++i) dims[i] = ctx.input(i).shape().dim_sizes();
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> out_dims, ConcatShape(dims, axis));
  StatusOr<TensorShape> shape = TensorShape::Make(out_dims);
  if (!shape.ok()) return shape.status().WithContext("concatenated shape");
  const DataType dtype = ctx.input(0).dtype();
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, dtype, *shape));
  if (out->NumElements() == 0) return OkStatus();
  // The output is `outer` rows, each the inputs' rows side by side.
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= out_dims[d];
  for (int d = axis + 1; d < rank; ++d) inner *= out_dims[d];
  const size_t element = DataTypeSize(dtype);
  std::vector<int64_t> widths(n);  // elements of input i per row
  int64_t row = 0;
  for (int i = 0; i < n; ++i) row += widths[i] = dims[i][axis] * inner;
  char* to = static_cast<char*>(out->raw_data());
  ParallelRange(outer, row, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      char* dst = to + static_cast<size_t>(r * row) * element;
      for (int i = 0; i < n; ++i) {
        const size_t bytes = static_cast<size_t>(widths[i]) * element;
        if (bytes == 0) continue;
        std::memcpy(dst, static_cast<const char*>(ctx.input(i).raw_data()) + r * bytes, bytes);
        dst += bytes;
      }
    }
  });
  return OkStatus();
}

// ConcatOffset(concat_dim, shape_0, ..., shape_n-1): where each value
// starts in the concatenation, one vector per value.
Status ConcatOffsetShapeFn(InferenceContext& c) {
  const int n = static_cast<int>(c.input_types.size()) - 1;
  if (n < 2) {
    return InvalidArgumentError("expects concat_dim and at least 2 shapes, got ", n + 1, " inputs");
  }
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "concat_dim", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, "concat_dim", 0, 0));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "shape[0]", kIndexTypes));
  for (int i = 1; i <= n; ++i) {
    const std::string arg = "shape[" + std::to_string(i - 1) + "]";
    CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 1, "shape[0]", i, arg));
    CKFLOW_RETURN_IF_ERROR(CheckRank(c, i, arg, 1, 1));
  }
  for (int i = 1; i <= n; ++i) c.AddOutput(c.input_types[1], c.input_shapes[i]);
  return OkStatus();
}

Status ConcatOffsetCompute(KernelContext& ctx) {
  const int n = ctx.num_inputs() - 1;
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> axis_value,
                          IntsFromTensor(ctx.input(0), "concat_dim"));
  if (ctx.input(0).shape().rank() != 0) {
    return InvalidArgumentError("concat_dim must be a scalar, got shape ",
                                ctx.input(0).shape().ToString());
  }
  std::vector<std::vector<int64_t>> dims(n);
  for (int i = 0; i < n; ++i) {
    if (ctx.input(i + 1).shape().rank() != 1) {
      return InvalidArgumentError("shape[", i, "] must be a vector, got shape ",
                                  ctx.input(i + 1).shape().ToString());
    }
    CKFLOW_ASSIGN_OR_RETURN(dims[i], IntsFromTensor(ctx.input(i + 1), "shape"));
  }
  const int rank = static_cast<int>(dims[0].size());
  CKFLOW_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_value[0], rank, "concat_dim"));
  CKFLOW_RETURN_IF_ERROR(ConcatShape(dims, axis).status());
  int64_t offset = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> v(rank, 0);
    v[axis] = offset;
    offset += dims[i][axis];
    const DataType dtype = ctx.input(i + 1).dtype();
    CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(i, dtype, TensorShape({rank})));
    for (int d = 0; d < rank; ++d) {
      if (dtype == DT_INT64) {
        out->flat<int64_t>()[d] = v[d];
      } else {
        out->flat<int32_t>()[d] = static_cast<int32_t>(v[d]);
      }
    }
  }
  return OkStatus();
}

// -------------------------------------------------------- Split, SplitV

// The sizes of the pieces of a dimension of `total` elements (unknown: -1)
// cut by `sizes` (one of which may be -1, the rest), or InvalidArgument.
StatusOr<std::vector<int64_t>> PieceSizes(std::vector<int64_t> sizes, int64_t total) {
  int64_t known = 0;
  int free = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && free < 0) {
      free = static_cast<int>(i);
    } else if (sizes[i] < 0) {
      return InvalidArgumentError("size_splits ", DimsString(sizes),
                                  " has a negative size other than one -1");
    } else {
      known += sizes[i];
    }
  }
  if (total < 0) return sizes;  // the -1 stays unknown
  if (free >= 0) {
    if (known > total) {
      return InvalidArgumentError("size_splits ", DimsString(sizes), " add up to more than the ",
                                  total, " elements of the axis");
    }
    sizes[free] = total - known;
  } else if (known != total) {
    return InvalidArgumentError("size_splits ", DimsString(sizes), " add up to ", known,
                                ", but the axis has ", total, " elements");
  }
  return sizes;
}

// Split(axis, value) and SplitV(value, size_splits, axis): the input's
// position of each argument, and num_split from the attributes.
struct SplitArgs {
  int value;
  int axis;
  int sizes;  // -1 for Split: equal pieces
};

ShapeFn SplitShapeFn(SplitArgs args) {
  return [args](InferenceContext& c) -> Status {
    CKFLOW_ASSIGN_OR_RETURN(int64_t n, c.attrs->Get<int64_t>("num_split"));
    if (n < 1) return InvalidArgumentError("num_split must be at least 1, got ", n);
    CKFLOW_RETURN_IF_ERROR(CheckDtype(c, args.value, "value", kCastTypes));
    CKFLOW_RETURN_IF_ERROR(CheckDtype(c, args.axis, "axis", kIndexTypes));
    CKFLOW_RETURN_IF_ERROR(CheckRank(c, args.axis, "axis", 0, 0));
    const PartialShape& value = c.input_shapes[args.value];
    std::optional<std::vector<int64_t>> sizes;
    if (args.sizes >= 0) {
      CKFLOW_RETURN_IF_ERROR(CheckDtype(c, args.sizes, "size_splits", kIndexTypes));
      CKFLOW_RETURN_IF_ERROR(CheckRank(c, args.sizes, "size_splits", 1, 1));
      CKFLOW_ASSIGN_OR_RETURN(sizes, ConstantInts(c, args.sizes, "size_splits"));
      if (sizes && static_cast<int64_t>(sizes->size()) != n) {
        return InvalidArgumentError("size_splits has ", sizes->size(), " sizes (",
                                    InputName(c, args.sizes), ") but num_split is ", n);
      }
    }
    CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axis_value,
                            ConstantInts(c, args.axis, "axis"));
    for (int64_t i = 0; i < n; ++i) {
      if (!value.known_rank()) {
        c.AddOutput(c.input_types[args.value], PartialShape::Unknown());
        continue;
      }
      std::vector<int64_t> dims = value.dim_sizes();
      if (!axis_value) {
        c.AddOutput(c.input_types[args.value], PartialShape(std::vector<int64_t>(dims.size(), -1)));
        continue;
      }
      CKFLOW_ASSIGN_OR_RETURN(int axis, NormalizeAxis((*axis_value)[0], value.rank(),
                                                      "axis (" + InputName(c, args.axis) + ")"));
      if (args.sizes < 0) {
        if (dims[axis] >= 0 && dims[axis] % n != 0) {
          return InvalidArgumentError("value is ", value.ToString(), " (", InputName(c, args.value),
                                      "): dimension ", axis, " does not split into ", n,
                                      " equal pieces");
        }
        if (dims[axis] >= 0) dims[axis] /= n;
      } else if (sizes) {
        CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> pieces, PieceSizes(*sizes, dims[axis]));
        dims[axis] = pieces[i];
      } else {
        dims[axis] = -1;
      }
      c.AddOutput(c.input_types[args.value], PartialShape(std::move(dims)));
    }
    return OkStatus();
  };
}

KernelFactory SplitKernel(SplitArgs args) {
  return StatelessKernel([args](KernelContext& ctx) -> Status {
    const Tensor& value = ctx.input(args.value);
    const int64_t n = ctx.num_outputs();
    const Tensor& axis_t = ctx.input(args.axis);
    if (axis_t.shape().rank() != 0) {
      return InvalidArgumentError("axis must be a scalar, got shape ", axis_t.shape().ToString());
    }
    CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> axis_value, IntsFromTensor(axis_t, "axis"));
    if (value.shape().rank() == 0) return InvalidArgumentError("cannot split a scalar");
    CKFLOW_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_value[0], value.shape().rank(), "axis"));
    const int64_t total = value.shape().dim(axis);
    std::vector<int64_t> pieces;
    if (args.sizes < 0) {
      if (total % n != 0) {
        return InvalidArgumentError("value is ", value.shape().ToString(), ": dimension ", axis,
                                    " does not split into ", n, " equal pieces");
      }
      pieces.assign(n, total / n);
    } else {
      CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                              IntsFromTensor(ctx.input(args.sizes), "size_splits"));
      if (static_cast<int64_t>(sizes.size()) != n) {
        return InvalidArgumentError("size_splits has ", sizes.size(), " sizes but num_split is ",
                                    n);
      }
      CKFLOW_ASSIGN_OR_RETURN(pieces, PieceSizes(sizes, total));
    }
    std::vector<int64_t> begin(value.shape().rank(), 0);
    const std::vector<int64_t> zero(value.shape().rank(), 0);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> dims = value.shape().dim_sizes();
      dims[axis] = pieces[i];
      CKFLOW_ASSIGN_OR_RETURN(
          Tensor * out, ctx.AllocateOutput(static_cast<int>(i), value.dtype(), TensorShape(dims)));
      CopyBox(value, begin, *out, zero, dims);
      begin[axis] += pieces[i];
    }
    return OkStatus();
  });
}

// ------------------------------------------------------------------ Tile

Status TileShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "input", kCastTypes));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "multiples", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "multiples", 1, 1));
  const PartialShape& input = c.input_shapes[0];
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> multiples,
                          ConstantInts(c, 1, "multiples"));
  if (!input.known_rank()) {
    c.AddOutput(c.input_types[0], PartialShape::Unknown());
    return OkStatus();
  }
  if (multiples && static_cast<int>(multiples->size()) != input.rank()) {
    return InvalidArgumentError("multiples has ", multiples->size(), " values (", InputName(c, 1),
                                ") but input is ", input.ToString(), " (", InputName(c, 0), ")");
  }
  std::vector<int64_t> dims(input.rank(), -1);
  for (int d = 0; multiples && d < input.rank(); ++d) {
    if ((*multiples)[d] < 0) {
      return InvalidArgumentError("multiples ", DimsString(*multiples), " (", InputName(c, 1),
                                  ") has a negative value");
    }
    if (input.dim(d) >= 0) dims[d] = input.dim(d) * (*multiples)[d];
  }
  c.AddOutput(c.input_types[0], PartialShape(std::move(dims)));
  return OkStatus();
}

// One CopyBox of the input per tile.
Status TileCompute(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> multiples,
                          IntsFromTensor(ctx.input(1), "multiples"));
  const int rank = input.shape().rank();
  if (ctx.input(1).shape().rank() != 1 || static_cast<int>(multiples.size()) != rank) {
    return InvalidArgumentError("multiples must be a vector of ", rank, " values, got ",
                                DimsString(multiples));
  }
  std::vector<int64_t> dims(rank);
  for (int d = 0; d < rank; ++d) {
    if (multiples[d] < 0) {
      return InvalidArgumentError("multiples ", DimsString(multiples), " has a negative value");
    }
    dims[d] = input.shape().dim(d) * multiples[d];
  }
  StatusOr<TensorShape> shape = TensorShape::Make(dims);
  if (!shape.ok()) return shape.status().WithContext("tiled shape");
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, input.dtype(), *shape));
  if (out->NumElements() == 0) return OkStatus();
  int64_t tiles = 1;
  for (int64_t m : multiples) tiles *= m;
  const std::vector<int64_t> zero(rank, 0);
  const std::vector<int64_t> size = input.shape().dim_sizes();
  std::vector<int64_t> tile(rank, 0);  // an odometer over the tiles
  for (int64_t t = 0; t < tiles; ++t) {
    std::vector<int64_t> at(rank);
    for (int d = 0; d < rank; ++d) at[d] = tile[d] * size[d];
    CopyBox(input, zero, *out, at, size);
    for (int d = rank - 1; d >= 0 && ++tile[d] == multiples[d]; --d) tile[d] = 0;
  }
  return OkStatus();
}

}  // namespace
}  // namespace internal

Status RegisterArraySlicingOps(OpRegistry& r) {
  using namespace internal;  // NOLINT: the kernels above
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "Slice",
                                        .inputs = {"input", "begin", "size"},
                                        .shape_fn = SliceShapeFn,
                                        .kernel_factory = StatelessKernel(SliceCompute)}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "Pad",
                                        .inputs = {"input", "paddings"},
                                        .shape_fn = PadShapeFn,
                                        .kernel_factory = StatelessKernel(PadCompute)}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "PadV2",
                                        .inputs = {"input", "paddings", "constant_values"},
                                        .shape_fn = PadShapeFn,
                                        .kernel_factory = StatelessKernel(PadCompute)}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "ConcatV2",
                                        .inputs = {"values"},
                                        .variadic = true,
                                        .shape_fn = ConcatShapeFn,
                                        .kernel_factory = StatelessKernel(ConcatCompute)}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "ConcatOffset",
                                        .inputs = {"concat_dim"},
                                        .variadic = true,
                                        .shape_fn = ConcatOffsetShapeFn,
                                        .kernel_factory = StatelessKernel(ConcatOffsetCompute)}));
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "Split",
                     .inputs = {"axis", "value"},
                     .shape_fn = SplitShapeFn({.value = 1, .axis = 0, .sizes = -1}),
                     .kernel_factory = SplitKernel({.value = 1, .axis = 0, .sizes = -1})}));
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "SplitV",
                     .inputs = {"value", "size_splits", "axis"},
                     .shape_fn = SplitShapeFn({.value = 0, .axis = 2, .sizes = 1}),
                     .kernel_factory = SplitKernel({.value = 0, .axis = 2, .sizes = 1})}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "Tile",
                                        .inputs = {"input", "multiples"},
                                        .shape_fn = TileShapeFn,
                                        .kernel_factory = StatelessKernel(TileCompute)}));
  return OkStatus();
}

// ---------------------------------------------------------------- builders

namespace ops {

using internal::BuildNode;
using internal::BuildOp;

Output Slice(const Scope& scope, Input input, Input begin, Input size) {
  return BuildOp(scope, "Slice", {input, begin, size});
}

Output Pad(const Scope& scope, Input input, Input paddings) {
  return BuildOp(scope, "Pad", {input, paddings});
}

Output PadV2(const Scope& scope, Input input, Input paddings, Input constant_values) {
  return BuildOp(scope, "PadV2", {input, paddings, constant_values});
}

Output Concat(const Scope& scope, const std::vector<Output>& values, Input axis) {
  if (values.size() == 1) return Identity(scope, values[0]);  // tf.concat's shortcut
  std::vector<Input> inputs(values.begin(), values.end());
  inputs.push_back(axis);
  return BuildOp(scope, "ConcatV2", inputs);
}

std::vector<Output> ConcatOffset(const Scope& scope, Input concat_dim,
                                 const std::vector<Output>& shapes) {
  std::vector<Input> inputs = {concat_dim};
  inputs.insert(inputs.end(), shapes.begin(), shapes.end());
  Node* node = BuildNode(scope, "ConcatOffset", inputs);
  std::vector<Output> out(shapes.size());
  if (node == nullptr) return out;
  for (int i = 0; i < node->num_outputs(); ++i) out[i] = Output(node, i);
  return out;
}

namespace {
std::vector<Output> Outputs(Node* node, int64_t n) {
  std::vector<Output> out(n > 0 ? n : 0);
  if (node == nullptr) return out;
  for (int i = 0; i < node->num_outputs(); ++i) out[i] = Output(node, i);
  return out;
}
}  // namespace

std::vector<Output> Split(const Scope& scope, Input axis, Input value, int64_t num_split) {
  AttrMap attrs;
  attrs.Set("num_split", num_split);
  return Outputs(BuildNode(scope, "Split", {axis, value}, std::move(attrs)), num_split);
}

std::vector<Output> SplitV(const Scope& scope, Input value, Input size_splits, Input axis,
                           int64_t num_split) {
  AttrMap attrs;
  attrs.Set("num_split", num_split);
  return Outputs(BuildNode(scope, "SplitV", {value, size_splits, axis}, std::move(attrs)),
                 num_split);
}

Output Tile(const Scope& scope, Input input, Input multiples) {
  return BuildOp(scope, "Tile", {input, multiples});
}

}  // namespace ops
}  // namespace ckflow
