// StridedSlice (Python's x[1:-1:2, ..., tf.newaxis, 3]) and its gradient,
// StridedSliceGrad, with TensorFlow's masks and clamping rules.
//
// Both go through one plan: the sparse spec (one entry per element of
// begin/end/strides, with an ellipsis, new axes and shrunk axes) expands to
// a dense spec of one (begin, stride, size) per input dimension, and the
// output's dimensions are the kept dense sizes with the new axes' 1s among
// them. The kernels walk the dense spec as an odometer; a unit stride in
// the innermost dimension copies runs with memcpy.

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/ops_internal.h"
#include "ops/standard_ops.h"

namespace ckflow {
namespace internal {
namespace {

struct Masks {
  int64_t begin = 0, end = 0, ellipsis = 0, new_axis = 0, shrink_axis = 0;
};

StatusOr<Masks> MasksOf(const AttrMap& attrs) {
  Masks m{attrs.GetOr<int64_t>("begin_mask", 0), attrs.GetOr<int64_t>("end_mask", 0),
          attrs.GetOr<int64_t>("ellipsis_mask", 0), attrs.GetOr<int64_t>("new_axis_mask", 0),
          attrs.GetOr<int64_t>("shrink_axis_mask", 0)};
  if ((m.ellipsis & (m.ellipsis - 1)) != 0) {
    return InvalidArgumentError("ellipsis_mask is ", m.ellipsis,
                                ", but only one index may be an ellipsis");
  }
  return m;
}

// What one input dimension contributes.
struct DenseDim {
  int64_t begin = 0;   // the first element taken
  int64_t stride = 1;  // then every stride-th
  int64_t size = 0;    // elements taken
  bool shrink = false;
};

struct Plan {
  std::vector<DenseDim> dims;        // one per input dimension
  std::vector<int64_t> output_dims;  // the output's shape
};

// The plan for an input of `shape` (dims of -1: unknown, which leave sizes
// of -1) and the vectors begin/end/strides (nullopt: unknown values).
StatusOr<Plan> MakePlan(const std::vector<int64_t>& shape, const Masks& m, int64_t n,
                        const std::vector<int64_t>* begin, const std::vector<int64_t>* end,
                        const std::vector<int64_t>* strides) {
  const int rank = static_cast<int>(shape.size());
  if (n > 63) {  // the masks have a bit per index
    return InvalidArgumentError("begin, end and strides have ", n,
                                " entries; a slice has at most 63 indices");
  }
  int64_t after_ellipsis = 0;  // sparse entries after the ellipsis that use an input dimension
  bool has_ellipsis = false;
  for (int64_t i = 0; i < n; ++i) {
    if (m.ellipsis & (int64_t{1} << i)) {
      has_ellipsis = true;
    } else if (has_ellipsis && !(m.new_axis & (int64_t{1} << i))) {
      ++after_ellipsis;
    }
  }
  int64_t used = 0;  // input dimensions the sparse entries use, without an ellipsis
  for (int64_t i = 0; i < n; ++i) {
    if (!(m.ellipsis & (int64_t{1} << i)) && !(m.new_axis & (int64_t{1} << i))) ++used;
  }
  if (used > rank) {
    return InvalidArgumentError("the slice indexes ", used, " dimensions, but the input has rank ",
                                rank);
  }
  Plan plan;
  auto full = [&](int d) { plan.dims.push_back({0, 1, shape[d], false}); };
  for (int64_t i = 0; i < n; ++i) {
    const int64_t bit = int64_t{1} << i;
    if (m.ellipsis & bit) {
      // Whole dimensions up to those the entries after it index.
      while (static_cast<int64_t>(plan.dims.size()) < rank - after_ellipsis) {
        full(static_cast<int>(plan.dims.size()));
      }
      continue;
    }
    if (m.new_axis & bit) continue;
    const int d = static_cast<int>(plan.dims.size());
    const int64_t size = shape[d];
    DenseDim dim;
    dim.stride = strides ? (*strides)[i] : 0;
    if (strides && dim.stride == 0) {
      return InvalidArgumentError("strides[", i, "] is 0, but must not be");
    }
    if (m.shrink_axis & bit) {
      dim.shrink = true;
      dim.size = 1;
      dim.stride = 1;
      if (begin && size >= 0) {
        const int64_t b = (*begin)[i] < 0 ? (*begin)[i] + size : (*begin)[i];
        if (b < 0 || b >= size) {
          return InvalidArgumentError("index ", (*begin)[i], " of dimension ", d,
                                      " is out of bounds: the dimension has ", size, " elements");
        }
        dim.begin = b;
      }
      plan.dims.push_back(dim);
      continue;
    }
    if (!begin || !end || !strides || size < 0) {
      dim.size = -1;
    } else {
      const bool forward = dim.stride > 0;
      // Python's rules: negative indices count from the end, then clamp to
      // the dimension ([0, size] forward, [-1, size - 1] backward); a masked
      // index is the end the stride starts or stops at.
      auto canonical = [&](int64_t x, bool masked, bool is_begin) {
        if (masked) {
          return is_begin ? (forward ? int64_t{0} : size - 1) : (forward ? size : int64_t{-1});
        }
        const int64_t v = x < 0 ? x + size : x;
        return forward ? std::clamp<int64_t>(v, 0, size) : std::clamp<int64_t>(v, -1, size - 1);
      };
      dim.begin = canonical((*begin)[i], m.begin & bit, true);
      const int64_t stop = canonical((*end)[i], m.end & bit, false);
      const int64_t span = forward ? stop - dim.begin : dim.begin - stop;
      const int64_t step = forward ? dim.stride : -dim.stride;
      dim.size = span <= 0 ? 0 : (span + step - 1) / step;
    }
    plan.dims.push_back(dim);
  }
  while (static_cast<int>(plan.dims.size()) < rank) full(static_cast<int>(plan.dims.size()));
  // The output's dimensions in the sparse spec's order: kept dimensions'
  // sizes, 1 for each new axis; shrunk dimensions leave.
  int64_t dense = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t bit = int64_t{1} << i;
    if (m.ellipsis & bit) {
      for (; dense < rank - after_ellipsis; ++dense)
        plan.output_dims.push_back(plan.dims[dense].size);
    } else if (m.new_axis & bit) {
      plan.output_dims.push_back(1);
    } else {
      if (!plan.dims[dense].shrink) plan.output_dims.push_back(plan.dims[dense].size);
      ++dense;
    }
  }
  for (; dense < rank; ++dense) plan.output_dims.push_back(plan.dims[dense].size);
  return plan;
}

// Input offset (in elements) of every output element, as an odometer over
// the dense dimensions, calling f(input offset, output offset, run) with
// runs of contiguous elements.
template <typename F>
void ForEachRun(const std::vector<int64_t>& shape, const Plan& plan, const F& f) {
  const int rank = static_cast<int>(shape.size());
  if (rank == 0) {
    f(0, 0, 1);
    return;
  }
  for (const DenseDim& dim : plan.dims) {
    if (dim.size == 0) return;
  }
  std::vector<int64_t> strides(rank);
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape[d];
  }
  const DenseDim& last = plan.dims[rank - 1];
  const int64_t run = last.stride == 1 ? last.size : 1;
  const int64_t per_row = last.size / run;  // runs per innermost row
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= plan.dims[d].size;
  ParallelRange(rows * per_row, run, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t rest = t / per_row;
      int64_t from = (last.begin + (t % per_row) * last.stride) * strides[rank - 1];
      for (int d = rank - 2; d >= 0; --d) {
        const DenseDim& dim = plan.dims[d];
        from += (dim.begin + (rest % dim.size) * dim.stride) * strides[d];
        rest /= dim.size;
      }
      f(from, t * run, run);
    }
  });
}

StatusOr<std::vector<int64_t>> VectorInput(const Tensor& t, std::string_view arg, int64_t n) {
  if (t.shape().rank() != 1 || t.NumElements() != n) {
    return InvalidArgumentError(arg, " must be a vector of ", n, " like begin, got ",
                                t.shape().ToString());
  }
  return IntsFromTensor(t, arg);
}

// Inputs `first`.. are begin, end, strides; the sliced shape is `shape`.
StatusOr<Plan> PlanAt(KernelContext& ctx, int first, const std::vector<int64_t>& shape) {
  CKFLOW_ASSIGN_OR_RETURN(Masks m, MasksOf(ctx.node().attrs()));
  const Tensor& b = ctx.input(first);
  if (b.shape().rank() != 1) {
    return InvalidArgumentError("begin must be a vector, got ", b.shape().ToString());
  }
  const int64_t n = b.NumElements();
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> begin, IntsFromTensor(b, "begin"));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> end, VectorInput(ctx.input(first + 1), "end", n));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                          VectorInput(ctx.input(first + 2), "strides", n));
  return MakePlan(shape, m, n, &begin, &end, &strides);
}

Status StridedSliceCompute(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const std::vector<int64_t> shape = in.shape().dim_sizes();
  CKFLOW_ASSIGN_OR_RETURN(Plan plan, PlanAt(ctx, 1, shape));
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                          ctx.AllocateOutput(0, in.dtype(), TensorShape(plan.output_dims)));
  if (out->NumElements() == 0) return OkStatus();
  if (in.dtype() == DT_STRING) {
    std::span<const std::string> from = in.flat<std::string>();
    std::span<std::string> to = out->flat<std::string>();
    ForEachRun(shape, plan, [&](int64_t s, int64_t t, int64_t run) {
      std::copy_n(from.begin() + s, run, to.begin() + t);
    });
    return OkStatus();
  }
  const size_t element = DataTypeSize(in.dtype());
  const char* from = static_cast<const char*>(in.raw_data());
  char* to = static_cast<char*>(out->raw_data());
  ForEachRun(shape, plan, [&](int64_t s, int64_t t, int64_t run) {
    std::memcpy(to + t * element, from + s * element, run * element);
  });
  return OkStatus();
}

// StridedSliceGrad(shape, begin, end, strides, dy): zeros of `shape` with dy
// where the slice took its elements (each taken once: no sums).
Status StridedSliceGradCompute(KernelContext& ctx) {
  CKFLOW_ASSIGN_OR_RETURN(TensorShape shape, ShapeFromTensor(ctx.input(0), "shape"));
  const Tensor& dy = ctx.input(4);
  const std::vector<int64_t> dims = shape.dim_sizes();
  CKFLOW_ASSIGN_OR_RETURN(Plan plan, PlanAt(ctx, 1, dims));
  if (TensorShape(plan.output_dims) != dy.shape()) {
    return InvalidArgumentError("dy is ", dy.shape().ToString(), ", but the slice of ",
                                shape.ToString(), " is ", TensorShape(plan.output_dims).ToString());
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, dy.dtype(), shape));
  const size_t element = DataTypeSize(dy.dtype());
  std::memset(out->raw_data(), 0, out->TotalBytes());
  if (dy.NumElements() == 0) return OkStatus();
  const char* from = static_cast<const char*>(dy.raw_data());
  char* to = static_cast<char*>(out->raw_data());
  ForEachRun(dims, plan, [&](int64_t s, int64_t t, int64_t run) {
    std::memcpy(to + s * element, from + t * element, run * element);
  });
  return OkStatus();
}

// Shape inference: exact when the input's shape and begin/end/strides are
// known, the rank and the whole dimensions when only the masks are.
Status InferSliceShape(InferenceContext& c, const PartialShape& input, int first, DataType dtype) {
  CKFLOW_ASSIGN_OR_RETURN(Masks m, MasksOf(*c.attrs));
  for (int i = first; i < first + 3; ++i) {
    CKFLOW_RETURN_IF_ERROR(CheckDtype(c, i,
                                      i == first       ? "begin"
                                      : i == first + 1 ? "end"
                                                       : "strides",
                                      kIndexTypes));
    CKFLOW_RETURN_IF_ERROR(CheckRank(c, i, "begin, end and strides", 1, 1));
  }
  // The slice's length: any of the three vectors' that is known.
  int64_t n = -1;
  for (int i = first; i < first + 3 && n < 0; ++i) {
    if (c.input_shapes[i].known_rank()) n = c.input_shapes[i].dim(0);
  }
  if (!input.known_rank() || n < 0) {
    c.AddOutput(dtype, PartialShape::Unknown());
    return OkStatus();
  }
  std::optional<std::vector<int64_t>> values[3];
  for (int i = 0; i < 3; ++i) {
    CKFLOW_ASSIGN_OR_RETURN(values[i], ConstantInts(c, first + i, "begin, end and strides"));
    if (values[i] && static_cast<int64_t>(values[i]->size()) != n) {
      return InvalidArgumentError("begin, end and strides must have one length, got ", n, " and ",
                                  values[i]->size());
    }
  }
  StatusOr<Plan> plan =
      MakePlan(input.dim_sizes(), m, n, values[0] ? &*values[0] : nullptr,
               values[1] ? &*values[1] : nullptr, values[2] ? &*values[2] : nullptr);
  if (!plan.ok()) return plan.status().WithContext("input is " + input.ToString());
  c.AddOutput(dtype, PartialShape(plan->output_dims));
  return OkStatus();
}

Status StridedSliceShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "input", kCastTypes));
  return InferSliceShape(c, c.input_shapes[0], 1, c.input_types[0]);
}

Status StridedSliceGradShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "shape", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 4, "dy", kCastTypes));
  CKFLOW_ASSIGN_OR_RETURN(PartialShape shape, ShapeFromShapeInput(c, 0, "shape"));
  CKFLOW_RETURN_IF_ERROR(InferSliceShape(c, shape, 1, c.input_types[4]));
  // The output is `shape`; the slice's shape (just inferred) must fit dy.
  const PartialShape sliced = c.output_shapes.back();
  c.output_types.pop_back();
  c.output_shapes.pop_back();
  if (!sliced.Merge(c.input_shapes[4]).ok()) {
    return InvalidArgumentError("dy is ", c.input_shapes[4].ToString(), " (", InputName(c, 4),
                                "), but the slice of ", shape.ToString(), " is ",
                                sliced.ToString());
  }
  c.AddOutput(c.input_types[4], shape);
  return OkStatus();
}

}  // namespace
}  // namespace internal

Status RegisterStridedSliceOps(OpRegistry& r) {
  using namespace internal;  // NOLINT: the shape functions and kernels above
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "StridedSlice",
                                        .inputs = {"input", "begin", "end", "strides"},
                                        .shape_fn = StridedSliceShapeFn,
                                        .kernel_factory = StatelessKernel(StridedSliceCompute)}));
  return RegisterOp(r, {.type = "StridedSliceGrad",
                        .inputs = {"shape", "begin", "end", "strides", "dy"},
                        .shape_fn = StridedSliceGradShapeFn,
                        .kernel_factory = StatelessKernel(StridedSliceGradCompute)});
}

namespace ops {

namespace {
AttrMap SliceAttrs(const StridedSliceAttrs& a) {
  AttrMap attrs;
  attrs.Set("begin_mask", a.begin_mask);
  attrs.Set("end_mask", a.end_mask);
  attrs.Set("ellipsis_mask", a.ellipsis_mask);
  attrs.Set("new_axis_mask", a.new_axis_mask);
  attrs.Set("shrink_axis_mask", a.shrink_axis_mask);
  return attrs;
}
}  // namespace

Output StridedSlice(const Scope& scope, Input input, Input begin, Input end, Input strides,
                    const StridedSliceAttrs& attrs) {
  return internal::BuildOp(scope, "StridedSlice", {input, begin, end, strides}, SliceAttrs(attrs));
}

Output StridedSliceGrad(const Scope& scope, Input shape, Input begin, Input end, Input strides,
                        Input dy, const StridedSliceAttrs& attrs) {
  return internal::BuildOp(scope, "StridedSliceGrad", {shape, begin, end, strides, dy},
                           SliceAttrs(attrs));
}

}  // namespace ops
}  // namespace ckflow
