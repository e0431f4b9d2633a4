// TensorFlow's ops that rearrange dimensions: Transpose and
// InvertPermutation (the permutation Transpose's gradient uses), ExpandDims
// and Squeeze (Reshape with a dimension of 1 added or taken away), with
// their builders (declared in array_ops.h).
//
// ExpandDims and Squeeze share their input's buffer, as Reshape does.
// Transpose copies; each output element is written by one copy, so its
// results do not depend on the thread count.

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ops/array_ops.h"
#include "ops/ops_internal.h"
#include "ops/standard_ops.h"

namespace ckflow {
namespace internal {
namespace {

// InvalidArgument unless `perm` holds each of 0 .. rank-1 once.
Status CheckPermutation(const std::vector<int64_t>& perm, int64_t rank) {
  if (static_cast<int64_t>(perm.size()) != rank) {
    return InvalidArgumentError("perm ", DimsString(perm), " must have one element per dimension",
                                " of x, which has rank ", rank);
  }
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) {
      return InvalidArgumentError("perm ", DimsString(perm), " is not a permutation of 0..",
                                  rank - 1);
    }
    seen[p] = true;
  }
  return OkStatus();
}

// -------------------------------------------------------------- Transpose

Status TransposeShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "x", kCastTypes));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "perm", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "perm", 1, 1));
  const PartialShape& x = c.input_shapes[0];
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> perm, ConstantInts(c, 1, "perm"));
  int rank = x.rank();
  if (rank < 0 && c.input_shapes[1].known_rank()) rank = static_cast<int>(c.input_shapes[1].dim(0));
  if (perm) {
    if (rank < 0) rank = static_cast<int>(perm->size());
    Status s = CheckPermutation(*perm, rank);
    if (!s.ok()) {
      return s.WithContext("x is " + x.ToString() + " (" + InputName(c, 0) + ")");
    }
  } else if (x.known_rank() && c.input_shapes[1].known_rank() && c.input_shapes[1].dim(0) >= 0 &&
             c.input_shapes[1].dim(0) != x.rank()) {
    return InvalidArgumentError("perm is ", c.input_shapes[1].ToString(), " (", InputName(c, 1),
                                "), but must have one element per dimension of x, ", x.ToString(),
                                " (", InputName(c, 0), ")");
  }
  if (rank < 0) {
    c.AddOutput(c.input_types[0], PartialShape::Unknown());
    return OkStatus();
  }
  std::vector<int64_t> dims(rank, -1);
  for (int d = 0; perm && x.known_rank() && d < rank; ++d) dims[d] = x.dim((*perm)[d]);
  c.AddOutput(c.input_types[0], PartialShape(std::move(dims)));
  return OkStatus();
}

// Copies `in` to `out` = transpose(in, perm) for `perm` in its simplest
// form (no dimension of size 1, no two neighbouring input dimensions that
// stay neighbours). Elements move as T, an unsigned integer of their size.
template <typename T>
void TransposeElements(const T* in, T* out, const std::vector<int64_t>& in_dims,
                       const std::vector<int64_t>& perm) {
  const int rank = static_cast<int>(perm.size());
  std::vector<int64_t> in_strides(rank);
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    in_strides[d] = stride;
    stride *= in_dims[d];
  }
  // Output dimension d walks input dimension perm[d].
  std::vector<int64_t> out_dims(rank), walk(rank);
  for (int d = 0; d < rank; ++d) {
    out_dims[d] = in_dims[perm[d]];
    walk[d] = in_strides[perm[d]];
  }
  const int64_t inner = out_dims[rank - 1];
  const int64_t inner_stride = walk[rank - 1];
  const int64_t rows = stride / inner;
  ParallelRange(rows, inner, [&](int64_t begin, int64_t end) {
    // The odometer of output row `begin` over dimensions [0, rank - 1).
    std::vector<int64_t> index(rank - 1);
    int64_t rest = begin, from = 0;
    for (int d = rank - 2; d >= 0; --d) {
      index[d] = rest % out_dims[d];
      rest /= out_dims[d];
      from += index[d] * walk[d];
    }
    T* to = out + begin * inner;
    for (int64_t r = begin; r < end; ++r) {
      if (inner_stride == 1) {
        std::memcpy(to, in + from, inner * sizeof(T));
      } else {
        const T* src = in + from;
        for (int64_t i = 0; i < inner; ++i) to[i] = src[i * inner_stride];
      }
      to += inner;
      for (int d = rank - 2; d >= 0; --d) {
        from += walk[d];
        if (++index[d] < out_dims[d]) break;
        from -= walk[d] * out_dims[d];
        index[d] = 0;
      }
    }
  });
}

Status TransposeCompute(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> perm, IntsFromTensor(ctx.input(1), "perm"));
  if (ctx.input(1).shape().rank() != 1) {
    return InvalidArgumentError("perm must be a vector, got ", ctx.input(1).shape().ToString());
  }
  const int rank = x.shape().rank();
  Status valid = CheckPermutation(perm, rank);
  if (!valid.ok()) return valid.WithContext("x is " + x.shape().ToString());
  std::vector<int64_t> out_dims(rank);
  for (int d = 0; d < rank; ++d) out_dims[d] = x.shape().dim(perm[d]);
  // The same transpose with size-1 dimensions dropped and input dimensions
  // that stay neighbours merged: often a copy of the buffer, or a batch of
  // 2-D transposes.
  std::vector<int> kept_rank(rank, -1);  // input dim -> index among kept dims
  std::vector<int64_t> kept_dims;
  for (int d = 0; d < rank; ++d) {
    if (x.shape().dim(d) != 1) {
      kept_rank[d] = static_cast<int>(kept_dims.size());
      kept_dims.push_back(x.shape().dim(d));
    }
  }
  std::vector<int64_t> kept_perm;
  for (int d = 0; d < rank; ++d) {
    if (kept_rank[perm[d]] >= 0) kept_perm.push_back(kept_rank[perm[d]]);
  }
  std::vector<int64_t> dims, order;          // merged input dims; output order of them
  std::vector<int> group(kept_dims.size());  // kept input dim -> merged dim
  for (size_t i = 0; i < kept_perm.size(); ++i) {
    if (i > 0 && kept_perm[i] == kept_perm[i - 1] + 1) {
      group[kept_perm[i]] = group[kept_perm[i - 1]];
      continue;
    }
    group[kept_perm[i]] = static_cast<int>(order.size());
    order.push_back(kept_perm[i]);
  }
  // Renumber the groups by where they start in the input.
  std::vector<int64_t> starts = order;
  std::sort(starts.begin(), starts.end());
  std::vector<int64_t> merged_of(kept_dims.size(), 0);
  for (size_t g = 0; g < starts.size(); ++g) merged_of[starts[g]] = static_cast<int64_t>(g);
  dims.assign(starts.size(), 1);
  for (size_t d = 0; d < kept_dims.size(); ++d) dims[merged_of[order[group[d]]]] *= kept_dims[d];
  std::vector<int64_t> merged_perm;
  for (int64_t start : order) merged_perm.push_back(merged_of[start]);

  bool identity = true;
  for (size_t d = 0; d < merged_perm.size(); ++d) identity &= merged_perm[d] == int64_t(d);
  if (identity) {
    // Only size-1 dimensions move: the same bytes in another shape.
    CKFLOW_ASSIGN_OR_RETURN(Tensor same, x.Reshaped(TensorShape(out_dims)));
    ctx.set_output(0, std::move(same));
    return OkStatus();
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), TensorShape(out_dims)));
  if (out->NumElements() == 0) return OkStatus();
  const void* in = x.raw_data();
  void* to = out->raw_data();
  switch (DataTypeSize(x.dtype())) {
    case 1:
      TransposeElements(static_cast<const uint8_t*>(in), static_cast<uint8_t*>(to), dims,
                        merged_perm);
      break;
    case 2:
      TransposeElements(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(to), dims,
                        merged_perm);
      break;
    case 4:
      TransposeElements(static_cast<const uint32_t*>(in), static_cast<uint32_t*>(to), dims,
                        merged_perm);
      break;
    case 8:
      TransposeElements(static_cast<const uint64_t*>(in), static_cast<uint64_t*>(to), dims,
                        merged_perm);
      break;
    default:
      return InvalidArgumentError("cannot transpose a tensor of dtype ", DataTypeName(x.dtype()));
  }
  return OkStatus();
}

// ------------------------------------------------------ InvertPermutation

Status InvertPermutationShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "x", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, "x", 1, 1));
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> x, ConstantInts(c, 0, "x"));
  if (x) {
    Status s = CheckPermutation(*x, static_cast<int64_t>(x->size()));
    if (!s.ok()) return s.WithContext("x (" + InputName(c, 0) + ")");
  }
  c.AddOutput(c.input_types[0], c.input_shapes[0]);
  return OkStatus();
}

Status InvertPermutationCompute(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.shape().rank() != 1) {
    return InvalidArgumentError("x must be a vector, got ", x.shape().ToString());
  }
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> perm, IntsFromTensor(x, "x"));
  CKFLOW_RETURN_IF_ERROR(CheckPermutation(perm, static_cast<int64_t>(perm.size())));
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  return DispatchIndex(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    std::span<T> y = out->flat<T>();
    for (size_t i = 0; i < perm.size(); ++i) y[perm[i]] = static_cast<T>(i);
    return OkStatus();
  });
}

// -------------------------------------------------------------- ExpandDims

// The axis ExpandDims inserts at, in [0, rank], from `axis` in
// [-rank - 1, rank].
StatusOr<int> InsertionAxis(const std::vector<int64_t>& axis, int rank) {
  if (axis.size() != 1) {
    return InvalidArgumentError("axis must hold one value, got ", DimsString(axis));
  }
  const int64_t a = axis[0];
  if (a < -rank - 1 || a > rank) {
    return InvalidArgumentError("axis ", a, " is out of range [", -rank - 1, ", ", rank,
                                "] for an input of rank ", rank);
  }
  return static_cast<int>(a < 0 ? a + rank + 1 : a);
}

Status ExpandDimsShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "input", kCastTypes));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "axis", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "axis", 0, 1));
  const PartialShape& in = c.input_shapes[0];
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axis, ConstantInts(c, 1, "axis"));
  if (!in.known_rank()) {
    c.AddOutput(c.input_types[0], PartialShape::Unknown());
    return OkStatus();
  }
  std::vector<int64_t> dims = in.dim_sizes();
  if (!axis) {
    c.AddOutput(c.input_types[0], PartialShape(std::vector<int64_t>(dims.size() + 1, -1)));
    return OkStatus();
  }
  StatusOr<int> at = InsertionAxis(*axis, in.rank());
  if (!at.ok()) {
    return at.status().WithContext("input is " + in.ToString() + " (" + InputName(c, 0) + ")");
  }
  dims.insert(dims.begin() + *at, 1);
  c.AddOutput(c.input_types[0], PartialShape(std::move(dims)));
  return OkStatus();
}

Status ExpandDimsCompute(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (ctx.input(1).shape().rank() > 1) {
    return InvalidArgumentError("axis must be a scalar, got ", ctx.input(1).shape().ToString());
  }
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> axis, IntsFromTensor(ctx.input(1), "axis"));
  StatusOr<int> at = InsertionAxis(axis, x.shape().rank());
  if (!at.ok()) return at.status().WithContext("input is " + x.shape().ToString());
  std::vector<int64_t> dims(x.shape().dims().begin(), x.shape().dims().end());
  dims.insert(dims.begin() + *at, 1);
  CKFLOW_ASSIGN_OR_RETURN(Tensor out, x.Reshaped(TensorShape(std::move(dims))));
  ctx.set_output(0, std::move(out));
  return OkStatus();
}

// ----------------------------------------------------------------- Squeeze

// Which of `dims` Squeeze removes: those listed in `axes` (each in [-rank,
// rank), and of size 1 or unknown), or every one of size 1 if none are
// listed. InvalidArgument names the axis at fault.
StatusOr<std::vector<bool>> SqueezedDims(std::span<const int64_t> dims,
                                         const std::vector<int64_t>& axes) {
  const int rank = static_cast<int>(dims.size());
  std::vector<bool> squeezed(rank, false);
  if (axes.empty()) {
    for (int d = 0; d < rank; ++d) squeezed[d] = dims[d] == 1;
    return squeezed;
  }
  for (int64_t a : axes) {
    StatusOr<int> d = NormalizeAxis(a, rank, "squeeze_dims");
    if (!d.ok()) return d.status();
    if (dims[*d] >= 0 && dims[*d] != 1) {
      return InvalidArgumentError("cannot squeeze dimension ", a, " of size ", dims[*d],
                                  ": it must have size 1");
    }
    squeezed[*d] = true;
  }
  return squeezed;
}

Status SqueezeShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "input", kCastTypes));
  const std::vector<int64_t> axes =
      c.attrs->GetOr<std::vector<int64_t>>("squeeze_dims", std::vector<int64_t>{});
  const PartialShape& in = c.input_shapes[0];
  if (!in.known_rank()) {
    c.AddOutput(c.input_types[0], PartialShape::Unknown());
    return OkStatus();
  }
  if (axes.empty()) {
    // Which dimensions go depends on sizes not known yet.
    for (int64_t d : in.dims()) {
      if (d < 0) {
        c.AddOutput(c.input_types[0], PartialShape::Unknown());
        return OkStatus();
      }
    }
  }
  StatusOr<std::vector<bool>> squeezed = SqueezedDims(in.dims(), axes);
  if (!squeezed.ok()) {
    return squeezed.status().WithContext("input is " + in.ToString() + " (" + InputName(c, 0) +
                                         ")");
  }
  std::vector<int64_t> dims;
  for (int d = 0; d < in.rank(); ++d) {
    if (!(*squeezed)[d]) dims.push_back(in.dim(d));
  }
  c.AddOutput(c.input_types[0], PartialShape(std::move(dims)));
  return OkStatus();
}

StatusOr<Kernel> SqueezeKernel(const Node& node) {
  std::vector<int64_t> axes =
      node.attrs().GetOr<std::vector<int64_t>>("squeeze_dims", std::vector<int64_t>{});
  return Kernel([axes = std::move(axes)](KernelContext& ctx) -> Status {
    const Tensor& x = ctx.input(0);
    StatusOr<std::vector<bool>> squeezed = SqueezedDims(x.shape().dims(), axes);
    if (!squeezed.ok()) return squeezed.status().WithContext("input is " + x.shape().ToString());
    std::vector<int64_t> dims;
    for (int d = 0; d < x.shape().rank(); ++d) {
      if (!(*squeezed)[d]) dims.push_back(x.shape().dim(d));
    }
    CKFLOW_ASSIGN_OR_RETURN(Tensor out, x.Reshaped(TensorShape(std::move(dims))));
    ctx.set_output(0, std::move(out));
    return OkStatus();
  });
}

}  // namespace
}  // namespace internal

Status RegisterDimensionOps(OpRegistry& r) {
  using namespace internal;  // NOLINT: the shape functions and kernels above
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "Transpose",
                                        .inputs = {"x", "perm"},
                                        .shape_fn = TransposeShapeFn,
                                        .kernel_factory = StatelessKernel(TransposeCompute)}));
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "InvertPermutation",
                     .inputs = {"x"},
                     .shape_fn = InvertPermutationShapeFn,
                     .kernel_factory = StatelessKernel(InvertPermutationCompute)}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "ExpandDims",
                                        .inputs = {"input", "axis"},
                                        .shape_fn = ExpandDimsShapeFn,
                                        .kernel_factory = StatelessKernel(ExpandDimsCompute)}));
  return RegisterOp(r, {.type = "Squeeze",
                        .inputs = {"input"},
                        .shape_fn = SqueezeShapeFn,
                        .kernel_factory = SqueezeKernel});
}

namespace ops {

using internal::BuildOp;

Output Transpose(const Scope& scope, Input x, Input perm) {
  return BuildOp(scope, "Transpose", {x, perm});
}

Output InvertPermutation(const Scope& scope, Input x) {
  return BuildOp(scope, "InvertPermutation", {x});
}

Output ExpandDims(const Scope& scope, Input input, Input axis) {
  return BuildOp(scope, "ExpandDims", {input, axis});
}

Output Squeeze(const Scope& scope, Input input, const std::vector<int64_t>& axis) {
  AttrMap attrs;
  attrs.Set("squeeze_dims", axis);
  return BuildOp(scope, "Squeeze", {input}, std::move(attrs));
}

}  // namespace ops
}  // namespace ckflow
