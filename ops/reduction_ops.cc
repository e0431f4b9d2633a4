// Reductions: Sum, Mean, Max, Min, Prod over axes; ArgMax, ArgMin;
// SumToShapeOf.
//
// Every reduction is brought to passes of one shape: [outer, R, inner] →
// [outer, inner], reducing the middle dimension. Size-1 dimensions are
// dropped and neighbouring dimensions that are both reduced or both kept are
// merged first, so reducing axis 1 of [8, 100, 1, 50] is one pass with
// outer 8, R 5000, inner 1, and reductions over non-adjacent axes take one
// pass per reduced group, innermost first. Each output element is reduced
// by one task in a fixed order, so results do not depend on the thread
// count.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "ops/array_ops.h"
#include "ops/cwise_internal.h"
#include "ops/math_ops.h"
#include "ops/standard_ops.h"

namespace ckflow {
namespace internal {
namespace {

template <typename C, Reduction kR>
struct Reducer;

template <typename C>
struct Reducer<C, Reduction::kSum> {
  static C Identity() { return C(0); }
  static C Row(const ConstArrayMap<C>& row) { return row.sum(); }
  template <typename A, typename R>
  static void Accumulate(A& acc, const R& row) {
    acc += row;
  }
};
template <typename C>
struct Reducer<C, Reduction::kMean> : Reducer<C, Reduction::kSum> {};
template <typename C>
struct Reducer<C, Reduction::kProd> {
  static C Identity() { return C(1); }
  static C Row(const ConstArrayMap<C>& row) { return row.prod(); }
  template <typename A, typename R>
  static void Accumulate(A& acc, const R& row) {
    acc *= row;
  }
};
template <typename C>
struct Reducer<C, Reduction::kMax> {
  static C Identity() {
    if constexpr (std::numeric_limits<C>::has_infinity) return -std::numeric_limits<C>::infinity();
    return std::numeric_limits<C>::lowest();
  }
  static C Row(const ConstArrayMap<C>& row) { return row.maxCoeff(); }
  template <typename A, typename R>
  static void Accumulate(A& acc, const R& row) {
    acc = acc.max(row);
  }
};
template <typename C>
struct Reducer<C, Reduction::kMin> {
  static C Identity() {
    if constexpr (std::numeric_limits<C>::has_infinity) return std::numeric_limits<C>::infinity();
    return std::numeric_limits<C>::max();
  }
  static C Row(const ConstArrayMap<C>& row) { return row.minCoeff(); }
  template <typename A, typename R>
  static void Accumulate(A& acc, const R& row) {
    acc = acc.min(row);
  }
};

// Integer sums and products wrap, as Add and Mul do.
template <Reduction kR>
struct ReductionTraits : CwiseTraits {
  static constexpr bool kWrapsIntegers =
      kR == Reduction::kSum || kR == Reduction::kMean || kR == Reduction::kProd;
};

// Columns per task when reducing the middle of [outer, R, inner].
constexpr int64_t kColumnBlock = 256;

// [outer, r, inner] → [outer, inner]. REQUIRES: r >= 1.
template <typename C, Reduction kR>
void ReducePass(const C* src, C* dst, int64_t outer, int64_t r, int64_t inner) {
  using Red = Reducer<C, kR>;
  if (inner == 1) {
    ParallelRange(outer, r, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) dst[o] = Red::Row(ConstArrayMap<C>(src + o * r, r));
    });
    return;
  }
  const int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  // A vector's worth of columns at a time, its accumulator in registers
  // through all r rows: accumulating whole rows into dst made each row
  // wait for the stores of the one before. Each column still takes its
  // rows in order.
  constexpr int64_t kLanes = std::max<int64_t>(1, 64 / sizeof(C));
  const auto columns = [&]<int64_t kWidth>(const C* first, C* out) {
    using Lanes = Eigen::Array<C, kWidth, 1>;
    Lanes acc = Eigen::Map<const Lanes>(first);
    for (int64_t i = 1; i < r; ++i)
      Red::Accumulate(acc, Eigen::Map<const Lanes>(first + i * inner));
    Eigen::Map<Lanes>{out} = acc;
  };
  ParallelRange(outer * blocks, r * kColumnBlock, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t o = u / blocks;
      const int64_t c0 = (u % blocks) * kColumnBlock;
      const int64_t len = std::min(kColumnBlock, inner - c0);
      const C* first = src + o * r * inner + c0;
      C* out = dst + o * inner + c0;
      int64_t c = 0;
      for (; c + kLanes <= len; c += kLanes)
        columns.template operator()<kLanes>(first + c, out + c);
      for (; c < len; ++c) columns.template operator()<1>(first + c, out + c);
    }
  });
}

template <typename T, Reduction kR>
Status ReduceImpl(const Tensor& in, const std::vector<bool>& reduce, Tensor& out) {
  using C = ComputeType<ReductionTraits<kR>, T>;
  using Red = Reducer<C, kR>;
  C* o = As<C>(out.flat<T>().data());
  const int64_t out_n = out.NumElements();
  if (in.NumElements() == 0) {
    C identity = Red::Identity();
    if constexpr (kR == Reduction::kMean) {
      identity = std::numeric_limits<C>::has_quiet_NaN ? std::numeric_limits<C>::quiet_NaN() : C(0);
    }
    std::fill(o, o + out_n, identity);
    return OkStatus();
  }
  struct Group {
    int64_t size;
    bool reduced;
  };
  std::vector<Group> groups;
  for (int d = 0; d < in.shape().rank(); ++d) {
    if (in.shape().dim(d) == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduce[d]) {
      groups.back().size *= in.shape().dim(d);
    } else {
      groups.push_back({in.shape().dim(d), reduce[d]});
    }
  }
  const C* src = As<C>(in.flat<T>().data());
  Tensor buffers[2];
  int next_buffer = 0;
  for (;;) {
    int j = static_cast<int>(groups.size()) - 1;
    while (j >= 0 && !groups[j].reduced) --j;
    if (j < 0) {  // nothing (more) to reduce
      if (src != o) std::copy(src, src + out_n, o);
      break;
    }
    int64_t outer = 1, inner = 1;
    bool last_pass = true;
    for (int g = 0; g < j; ++g) {
      outer *= groups[g].size;
      last_pass = last_pass && !groups[g].reduced;
    }
    for (int g = j + 1; g < static_cast<int>(groups.size()); ++g) inner *= groups[g].size;
    C* dst = o;
    if (!last_pass) {
      Tensor& buffer = buffers[next_buffer];
      next_buffer ^= 1;
      CKFLOW_ASSIGN_OR_RETURN(buffer,
                              Tensor::Allocate(DataTypeOf<T>(), TensorShape({outer * inner})));
      dst = As<C>(buffer.flat<T>().data());
    }
    ReducePass<C, kR>(src, dst, outer, groups[j].size, inner);
    groups.erase(groups.begin() + j);
    src = dst;
    if (last_pass) break;
  }
  if constexpr (kR == Reduction::kMean) {
    const int64_t count = in.NumElements() / out_n;
    if constexpr (std::is_integral_v<T>) {
      for (int64_t i = 0; i < out_n; ++i) o[i] = static_cast<C>(static_cast<T>(o[i]) / count);
    } else {
      ArrayMap<C>(o, out_n) /= static_cast<C>(count);
    }
  }
  return OkStatus();
}

// ------------------------------------------------------------------ ops

std::string AxisWhat(const InferenceContext& c) { return "axis (" + InputName(c, 1) + ")"; }

Status ReductionShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "input", kNumericTypes));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "axis", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "axis", 0, 1));
  const bool keep_dims = c.attrs->GetOr<bool>("keep_dims", false);
  const PartialShape& in = c.input_shapes[0];
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, ConstantInts(c, 1, "axis"));
  if (!in.known_rank()) {
    c.AddOutput(c.input_types[0], PartialShape::Unknown());
    return OkStatus();
  }
  if (!axes) {
    c.AddOutput(c.input_types[0], keep_dims ? PartialShape(std::vector<int64_t>(in.rank(), -1))
                                            : PartialShape::Unknown());
    return OkStatus();
  }
  std::vector<bool> reduced(in.rank(), false);
  for (int64_t a : *axes) {
    CKFLOW_ASSIGN_OR_RETURN(int d, NormalizeAxis(a, in.rank(), AxisWhat(c)));
    reduced[d] = true;
  }
  std::vector<int64_t> dims;
  for (int d = 0; d < in.rank(); ++d) {
    if (!reduced[d]) {
      dims.push_back(in.dim(d));
    } else if (keep_dims) {
      dims.push_back(1);
    }
  }
  c.AddOutput(c.input_types[0], PartialShape(std::move(dims)));
  return OkStatus();
}

template <Reduction kR>
StatusOr<Kernel> ReductionKernel(const Node& node) {
  const bool keep_dims = node.attrs().GetOr<bool>("keep_dims", false);
  return Kernel([keep_dims](KernelContext& ctx) -> Status {
    const Tensor& in = ctx.input(0);
    CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> axes, IntsFromTensor(ctx.input(1), "axis"));
    const int rank = in.shape().rank();
    std::vector<bool> reduced(rank, false);
    for (int64_t a : axes) {
      CKFLOW_ASSIGN_OR_RETURN(int d, NormalizeAxis(a, rank, "axis"));
      reduced[d] = true;
    }
    std::vector<int64_t> dims;
    for (int d = 0; d < rank; ++d) {
      if (!reduced[d]) {
        dims.push_back(in.shape().dim(d));
      } else if (keep_dims) {
        dims.push_back(1);
      }
    }
    CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                            ctx.AllocateOutput(0, in.dtype(), TensorShape(std::move(dims))));
    return ReduceTensor(kR, in, reduced, *out);
  });
}

// ArgMax / ArgMin.
Status ArgShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "input", kNumericTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, "input", 1, std::numeric_limits<int>::max()));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "dimension", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "dimension", 0, 0));
  DataType out_type = c.attrs->GetOr<DataType>("output_type", DT_INT64);
  if (out_type != DT_INT32 && out_type != DT_INT64) {
    return InvalidArgumentError("output_type must be int32 or int64, got ", DataTypeName(out_type));
  }
  const PartialShape& in = c.input_shapes[0];
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axis,
                          ConstantInts(c, 1, "dimension"));
  if (!in.known_rank()) {
    c.AddOutput(out_type, PartialShape::Unknown());
  } else if (!axis) {
    c.AddOutput(out_type, PartialShape(std::vector<int64_t>(in.rank() - 1, -1)));
  } else {
    CKFLOW_ASSIGN_OR_RETURN(
        int d, NormalizeAxis((*axis)[0], in.rank(), "dimension (" + InputName(c, 1) + ")"));
    std::vector<int64_t> dims = in.dim_sizes();
    if (dims[d] == 0) {
      return InvalidArgumentError("input is ", in.ToString(), " (", InputName(c, 0),
                                  "): dimension ", d, " is empty");
    }
    dims.erase(dims.begin() + d);
    c.AddOutput(out_type, PartialShape(std::move(dims)));
  }
  return OkStatus();
}

template <typename T, bool kMax>
Status ArgCompute(KernelContext& ctx, DataType out_type) {
  const Tensor& in = ctx.input(0);
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> axis_v, IntsFromTensor(ctx.input(1), "dimension"));
  if (axis_v.size() != 1 || ctx.input(1).shape().rank() != 0) {
    return InvalidArgumentError("dimension must be a scalar, got shape ",
                                ctx.input(1).shape().ToString());
  }
  const int rank = in.shape().rank();
  if (rank == 0) return InvalidArgumentError("input must have rank >= 1, got a scalar");
  CKFLOW_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_v[0], rank, "dimension"));
  const int64_t r = in.shape().dim(axis);
  if (r == 0) {
    return InvalidArgumentError("input is ", in.shape().ToString(), ": dimension ", axis,
                                " is empty");
  }
  if (out_type == DT_INT32 && r > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("dimension ", axis, " of ", in.shape().ToString(),
                                " is too long for int32 indices");
  }
  std::vector<int64_t> dims = in.shape().dim_sizes();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= dims[d];
  for (int d = axis + 1; d < rank; ++d) inner *= dims[d];
  dims.erase(dims.begin() + axis);
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, out_type, TensorShape(dims)));
  const T* src = in.flat<T>().data();
  ParallelRange(outer * inner, r, [&](int64_t b, int64_t e) {
    for (int64_t idx = b; idx < e; ++idx) {
      const T* p = src + (idx / inner) * r * inner + idx % inner;
      int64_t best = 0;
      T best_value = p[0];
      for (int64_t i = 1; i < r; ++i) {
        T v = p[i * inner];
        if (kMax ? v > best_value : v < best_value) {
          best = i;
          best_value = v;
        }
      }
      if (out_type == DT_INT64) {
        out->flat<int64_t>()[idx] = best;
      } else {
        out->flat<int32_t>()[idx] = static_cast<int32_t>(best);
      }
    }
  });
  return OkStatus();
}

template <bool kMax>
StatusOr<Kernel> ArgKernel(const Node& node) {
  DataType out_type = node.output_type(0);
  return DispatchNumeric(node.input(0).dtype(), [out_type](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel([out_type](KernelContext& ctx) { return ArgCompute<T, kMax>(ctx, out_type); });
  });
}

// SumToShapeOf.
Status SumToShapeOfShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "grad", kNumericTypes));
  const PartialShape& grad = c.input_shapes[0];
  const PartialShape& like = c.input_shapes[1];
  if (grad.known_rank() && like.known_rank()) {
    bool ok = like.rank() <= grad.rank();
    for (int d = 0; ok && d < like.rank(); ++d) {
      int64_t l = like.dim(d);
      int64_t g = grad.dim(d + grad.rank() - like.rank());
      ok = l < 0 || g < 0 || l == 1 || l == g;
    }
    if (!ok) {
      return InvalidArgumentError("grad is ", grad.ToString(), " (", InputName(c, 0),
                                  "), which is not a broadcast of like, ", like.ToString(), " (",
                                  InputName(c, 1), ")");
    }
  }
  c.AddOutput(c.input_types[0], like);
  return OkStatus();
}

Status SumToShapeOfCompute(KernelContext& ctx) {
  const Tensor& grad = ctx.input(0);
  const TensorShape& like = ctx.input(1).shape();
  if (grad.shape() == like) {
    ctx.set_output(0, grad);
    return OkStatus();
  }
  const int rank = grad.shape().rank();
  const int lead = rank - like.rank();
  std::vector<bool> reduced(rank, false);
  bool ok = lead >= 0;
  for (int d = 0; ok && d < rank; ++d) {
    if (d < lead) {
      reduced[d] = true;
    } else if (like.dim(d - lead) != grad.shape().dim(d)) {
      ok = like.dim(d - lead) == 1;
      reduced[d] = true;
    }
  }
  if (!ok) {
    return InvalidArgumentError("grad is ", grad.shape().ToString(),
                                ", which is not a broadcast of like, ", like.ToString());
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, grad.dtype(), like));
  return ReduceTensor(Reduction::kSum, grad, reduced, *out);
}

}  // namespace

Status ReduceTensor(Reduction reduction, const Tensor& in, const std::vector<bool>& reduce,
                    Tensor& out) {
  return DispatchNumeric(in.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    switch (reduction) {
      case Reduction::kSum:
        return ReduceImpl<T, Reduction::kSum>(in, reduce, out);
      case Reduction::kMean:
        return ReduceImpl<T, Reduction::kMean>(in, reduce, out);
      case Reduction::kMax:
        return ReduceImpl<T, Reduction::kMax>(in, reduce, out);
      case Reduction::kMin:
        return ReduceImpl<T, Reduction::kMin>(in, reduce, out);
      case Reduction::kProd:
        return ReduceImpl<T, Reduction::kProd>(in, reduce, out);
    }
    return InternalError("unknown reduction");
  });
}

}  // namespace internal

Status RegisterReductionOps(OpRegistry& r) {
  using namespace internal;  // NOLINT: the kernels above
  const std::pair<const char*, KernelFactory> reductions[] = {
      {"Sum", ReductionKernel<Reduction::kSum>},   {"Mean", ReductionKernel<Reduction::kMean>},
      {"Max", ReductionKernel<Reduction::kMax>},   {"Min", ReductionKernel<Reduction::kMin>},
      {"Prod", ReductionKernel<Reduction::kProd>},
  };
  for (const auto& [type, factory] : reductions) {
    CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = type,
                                          .inputs = {"input", "axis"},
                                          .shape_fn = ReductionShapeFn,
                                          .kernel_factory = factory}));
  }
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "ArgMax",
                                        .inputs = {"input", "dimension"},
                                        .shape_fn = ArgShapeFn,
                                        .kernel_factory = ArgKernel<true>}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "ArgMin",
                                        .inputs = {"input", "dimension"},
                                        .shape_fn = ArgShapeFn,
                                        .kernel_factory = ArgKernel<false>}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "SumToShapeOf",
                                        .inputs = {"grad", "like"},
                                        .shape_fn = SumToShapeOfShapeFn,
                                        .kernel_factory = StatelessKernel(SumToShapeOfCompute)}));
  return OkStatus();
}

// ---------------------------------------------------------------- builders

namespace ops {
namespace {

Output Reduce(const Scope& scope, const char* type, Input input, Input axis,
              const ReduceAttrs& attrs) {
  AttrMap a;
  a.Set("keep_dims", attrs.keep_dims);
  return internal::BuildOp(scope, type, {input, axis}, std::move(a));
}

// Over all axes: [0, rank) when the rank is known; else the input
// flattened and reduced over its one axis.
Output ReduceAll(const Scope& scope, const char* type, Input input) {
  if (!scope.ok()) return Output();
  Output x = input.ToOutput(scope);
  if (!x.valid()) return Output();
  const PartialShape& shape = x.shape();
  if (shape.known_rank()) {
    std::vector<int32_t> axes(shape.rank());
    for (int d = 0; d < shape.rank(); ++d) axes[d] = d;
    return Reduce(scope, type, x, Tensor::FromVector(axes), {});
  }
  return Reduce(scope, type, Reshape(scope.NewSubScope(""), x, {-1}), 0, {});
}

}  // namespace

Output Sum(const Scope& scope, Input input, Input axis, const ReduceAttrs& attrs) {
  return Reduce(scope, "Sum", input, axis, attrs);
}
Output Mean(const Scope& scope, Input input, Input axis, const ReduceAttrs& attrs) {
  return Reduce(scope, "Mean", input, axis, attrs);
}
Output Max(const Scope& scope, Input input, Input axis, const ReduceAttrs& attrs) {
  return Reduce(scope, "Max", input, axis, attrs);
}
Output Min(const Scope& scope, Input input, Input axis, const ReduceAttrs& attrs) {
  return Reduce(scope, "Min", input, axis, attrs);
}
Output Prod(const Scope& scope, Input input, Input axis, const ReduceAttrs& attrs) {
  return Reduce(scope, "Prod", input, axis, attrs);
}
Output Sum(const Scope& scope, Input input) { return ReduceAll(scope, "Sum", input); }
Output Mean(const Scope& scope, Input input) { return ReduceAll(scope, "Mean", input); }
Output Max(const Scope& scope, Input input) { return ReduceAll(scope, "Max", input); }
Output Min(const Scope& scope, Input input) { return ReduceAll(scope, "Min", input); }

Output ArgMax(const Scope& scope, Input input, Input axis, DataType output_type) {
  AttrMap a;
  a.Set("output_type", output_type);
  return internal::BuildOp(scope, "ArgMax", {input, axis}, std::move(a));
}
Output ArgMin(const Scope& scope, Input input, Input axis, DataType output_type) {
  AttrMap a;
  a.Set("output_type", output_type);
  return internal::BuildOp(scope, "ArgMin", {input, axis}, std::move(a));
}

Output SumToShapeOf(const Scope& scope, Input grad, Input like) {
  return internal::BuildOp(scope, "SumToShapeOf", {grad, like});
}

}  // namespace ops
}  // namespace ckflow
