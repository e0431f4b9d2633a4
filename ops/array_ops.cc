// Array ops: Const, Placeholder, Identity, StopGradient, NoOp, Reshape,
// Cast, Fill, ZerosLike, OnesLike, Shape.

#include "ops/array_ops.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "base/parallel.h"
#include "ops/ops_internal.h"
#include "ops/standard_ops.h"

namespace ckflow {
namespace internal {

StatusOr<Tensor> AllocateConst(const Scope& scope, DataType dtype,
                               const std::vector<int64_t>& shape, size_t count) {
  Status error;
  StatusOr<TensorShape> s = TensorShape::Make(shape);
  if (!s.ok()) {
    error = s.status().WithContext("Const");
  } else if (s->num_elements() != static_cast<int64_t>(count)) {
    error = InvalidArgumentError("Const: ", count, " values do not fill shape ", s->ToString(),
                                 " (", s->num_elements(), " elements)");
  } else {
    StatusOr<Tensor> t = Tensor::Allocate(dtype, *s);
    if (t.ok()) return t;
    error = t.status().WithContext("Const");
  }
  scope.UpdateStatus(error);
  return error;
}

namespace {

// ------------------------------------------------------------ conversion

template <typename T>
struct Widened {
  using type = T;
};
template <>
struct Widened<bfloat16> {
  using type = float;
};
template <>
struct Widened<float16> {
  using type = float;
};

// Floating point to integer without undefined behaviour: round toward zero,
// saturate at the range, NaN to 0.
template <typename To, typename From>
To SaturatingCast(From v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) {
    return std::numeric_limits<To>::lowest();
  }
  // max() rounds up to a power of two in From, so >= catches all overflow.
  if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
  return static_cast<To>(v);
}

template <typename To, typename From>
To ConvertValue(From from) {
  using W = typename Widened<From>::type;
  W v = static_cast<W>(from);
  if constexpr (std::is_same_v<To, bool>) {
    return v != W(0);
  } else if constexpr (std::is_same_v<To, bfloat16> || std::is_same_v<To, float16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<W>) {
    return SaturatingCast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

template <typename From, typename To>
Status CastCompute(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DataTypeOf<To>(), x.shape()));
  const From* in = x.flat<From>().data();
  To* o = out->flat<To>().data();
  ParallelRange(x.NumElements(), 2, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) o[i] = ConvertValue<To>(in[i]);
  });
  return OkStatus();
}

// Copies element bits, so one loop per element size serves all fixed-size
// types.
template <typename Bits>
void FillBits(Tensor& out, const Tensor& value) {
  Bits bits;
  std::memcpy(&bits, value.raw_data(), sizeof(Bits));
  Bits* o = static_cast<Bits*>(out.raw_data());
  ParallelRange(out.NumElements(), 1, [&](int64_t b, int64_t e) { std::fill(o + b, o + e, bits); });
}

// ----------------------------------------------------------------- Reshape

// Checks a requested shape: non-negative sizes but for at most one -1.
Status ValidateReshapeDims(const std::vector<int64_t>& dims) {
  int unknown = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (unknown >= 0) {
        return InvalidArgumentError("shape ", DimsString(dims),
                                    " has more than one -1 (dimensions ", unknown, " and ", i, ")");
      }
      unknown = static_cast<int>(i);
    } else if (dims[i] < 0) {
      return InvalidArgumentError("shape has negative dimension ", dims[i], " at index ", i);
    }
  }
  return OkStatus();
}

// The shape `dims` (validated) gives a tensor of `num_elements`, -1 filled in.
StatusOr<TensorShape> ResolveReshape(std::vector<int64_t> dims, const TensorShape& from) {
  CKFLOW_RETURN_IF_ERROR(ValidateReshapeDims(dims));
  int unknown = -1;
  int64_t known = 1;
  bool overflow = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      unknown = static_cast<int>(i);
    } else if (dims[i] != 0 && known > std::numeric_limits<int64_t>::max() / dims[i]) {
      overflow = true;
    } else {
      known *= dims[i];
    }
  }
  const int64_t n = from.num_elements();
  auto mismatch = [&] {
    return InvalidArgumentError("cannot reshape a tensor of ", n, " elements (", from.ToString(),
                                ") into shape ", DimsString(dims));
  };
  if (overflow) return mismatch();
  if (unknown >= 0) {
    if (known == 0) {
      if (n != 0) return mismatch();
      return InvalidArgumentError("cannot infer the -1 in shape ", DimsString(dims),
                                  " for an empty tensor (", from.ToString(), ")");
    }
    if (n % known != 0) return mismatch();
    dims[unknown] = n / known;
  } else if (known != n) {
    return mismatch();
  }
  return TensorShape::Make(dims);
}

Status ReshapeShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "shape", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "shape", 1, 1));
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> dims, ConstantInts(c, 1, "shape"));
  PartialShape out;
  if (!dims) {
    CKFLOW_ASSIGN_OR_RETURN(out, ShapeFromShapeInput(c, 1, "shape"));
  } else if (c.input_shapes[0].IsFullyDefined()) {
    StatusOr<TensorShape> s = ResolveReshape(*dims, c.input_shapes[0].ToTensorShape());
    if (!s.ok()) return s.status().WithContext("tensor (" + InputName(c, 0) + ")");
    out = *s;
  } else {
    CKFLOW_RETURN_IF_ERROR(ValidateReshapeDims(*dims));
    out = PartialShape(*dims);  // the -1, if any, stays unknown
  }
  c.AddOutput(c.input_types[0], std::move(out));
  return OkStatus();
}

Status ReshapeCompute(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> dims, IntsFromTensor(ctx.input(1), "shape"));
  if (ctx.input(1).shape().rank() != 1) {
    return InvalidArgumentError("shape must be a vector, got ", ctx.input(1).shape().ToString());
  }
  CKFLOW_ASSIGN_OR_RETURN(TensorShape shape, ResolveReshape(std::move(dims), x.shape()));
  CKFLOW_ASSIGN_OR_RETURN(Tensor out, x.Reshaped(shape));
  ctx.set_output(0, std::move(out));
  return OkStatus();
}

// -------------------------------------------------------- the other ops

Status ConstShapeFn(InferenceContext& c) {
  CKFLOW_ASSIGN_OR_RETURN(Tensor value, c.attrs->Get<Tensor>("value"));
  if (!value.IsValid()) return InvalidArgumentError("attribute 'value' holds no tensor");
  c.AddOutput(value.dtype(), value.shape());
  return OkStatus();
}

StatusOr<Kernel> ConstKernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(Tensor value, node.attrs().Get<Tensor>("value"));
  return Kernel([value](KernelContext& ctx) {
    ctx.set_output(0, value);
    return OkStatus();
  });
}

Status PlaceholderShapeFn(InferenceContext& c) {
  CKFLOW_ASSIGN_OR_RETURN(DataType dtype, c.attrs->Get<DataType>("dtype"));
  if (!IsSupportedDataType(dtype)) {
    return InvalidArgumentError("unsupported dtype ", DataTypeName(dtype));
  }
  c.AddOutput(dtype, c.attrs->GetOr<PartialShape>("shape", PartialShape::Unknown()));
  return OkStatus();
}

StatusOr<Kernel> PlaceholderKernel(const Node& node) {
  std::string message = "placeholder '" + node.name() + "' must be fed a value of dtype " +
                        std::string(DataTypeName(node.output_type(0))) + " and shape " +
                        node.output_shape(0).ToString();
  return Kernel([message](KernelContext&) { return InvalidArgumentError(message); });
}

Status IdentityShapeFn(InferenceContext& c) {
  c.AddOutput(c.input_types[0], c.input_shapes[0]);
  return OkStatus();
}

Status IdentityCompute(KernelContext& ctx) {
  ctx.set_output(0, ctx.input(0));
  return OkStatus();
}

Status CastShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "x", kCastTypes));
  CKFLOW_ASSIGN_OR_RETURN(DataType dst, c.attrs->Get<DataType>("DstT"));
  if (std::find(std::begin(kCastTypes), std::end(kCastTypes), dst) == std::end(kCastTypes)) {
    return InvalidArgumentError("cannot cast to ", DataTypeName(dst), "; DstT must be one of ",
                                DataTypeList(kCastTypes));
  }
  c.AddOutput(dst, c.input_shapes[0]);
  return OkStatus();
}

StatusOr<Kernel> CastKernel(const Node& node) {
  DataType src = node.input(0).dtype();
  DataType dst = node.output_type(0);
  if (src == dst) return Kernel(IdentityCompute);
  return DispatchCastable(src, [dst](auto from) -> StatusOr<Kernel> {
    return DispatchCastable(dst, [](auto to) -> StatusOr<Kernel> {
      return Kernel(CastCompute<typename decltype(from)::type, typename decltype(to)::type>);
    });
  });
}

Status FillShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "dims", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, "dims", 1, 1));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "value", 0, 0));
  if (c.input_types[1] == DT_RESOURCE) {
    return InvalidArgumentError("value (", InputName(c, 1), ") cannot be a resource");
  }
  CKFLOW_ASSIGN_OR_RETURN(PartialShape shape, ShapeFromShapeInput(c, 0, "dims"));
  c.AddOutput(c.input_types[1], std::move(shape));
  return OkStatus();
}

Status FillCompute(KernelContext& ctx) {
  CKFLOW_ASSIGN_OR_RETURN(TensorShape shape, ShapeFromTensor(ctx.input(0), "dims"));
  const Tensor& value = ctx.input(1);
  if (value.shape().rank() != 0) {
    return InvalidArgumentError("value must be a scalar, got shape ", value.shape().ToString());
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, value.dtype(), shape));
  return FillWith(*out, value);
}

// ZerosLike / OnesLike: the factory makes the scalar once.
KernelFactory FillLikeKernel(double value) {
  return [value](const Node& node) -> StatusOr<Kernel> {
    CKFLOW_ASSIGN_OR_RETURN(Tensor scalar, ScalarOfType(node.output_type(0), value));
    return Kernel([scalar](KernelContext& ctx) -> Status {
      CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                              ctx.AllocateOutput(0, scalar.dtype(), ctx.input(0).shape()));
      return FillWith(*out, scalar);
    });
  };
}

Status ShapeShapeFn(InferenceContext& c) {
  DataType out_type = c.attrs->GetOr<DataType>("out_type", DT_INT32);
  if (out_type != DT_INT32 && out_type != DT_INT64) {
    return InvalidArgumentError("out_type must be int32 or int64, got ", DataTypeName(out_type));
  }
  const PartialShape& s = c.input_shapes[0];
  c.AddOutput(out_type, PartialShape({s.known_rank() ? s.rank() : -1}));
  return OkStatus();
}

StatusOr<Kernel> ShapeKernel(const Node& node) {
  DataType out_type = node.output_type(0);
  return Kernel([out_type](KernelContext& ctx) -> Status {
    const TensorShape& shape = ctx.input(0).shape();
    CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                            ctx.AllocateOutput(0, out_type, TensorShape({shape.rank()})));
    for (int d = 0; d < shape.rank(); ++d) {
      if (out_type == DT_INT64) {
        out->flat<int64_t>()[d] = shape.dim(d);
      } else if (shape.dim(d) > std::numeric_limits<int32_t>::max()) {
        return InvalidArgumentError("dimension ", d, " of ", shape.ToString(),
                                    " does not fit in int32; use out_type int64");
      } else {
        out->flat<int32_t>()[d] = static_cast<int32_t>(shape.dim(d));
      }
    }
    return OkStatus();
  });
}

}  // namespace

StatusOr<Tensor> ScalarOfType(DataType dtype, double value) {
  // Complex values have no C++ element type here: (value, 0) by bytes, as
  // tf.zeros and tf.ones make them.
  if (dtype == DT_COMPLEX64 || dtype == DT_COMPLEX128) {
    Tensor t(dtype, TensorShape());
    if (dtype == DT_COMPLEX64) {
      const float parts[2] = {static_cast<float>(value), 0.0f};
      std::memcpy(t.raw_data(), parts, sizeof(parts));
    } else {
      const double parts[2] = {value, 0.0};
      std::memcpy(t.raw_data(), parts, sizeof(parts));
    }
    return t;
  }
  // tf.zeros of strings is empty strings (a string has no other number).
  if (dtype == DT_STRING && value == 0) return Tensor::Scalar(std::string());
  return DispatchCastable(dtype, [value](auto tag) -> StatusOr<Tensor> {
    using T = typename decltype(tag)::type;
    return Tensor::Scalar(ConvertValue<T>(value));
  });
}

std::string DimsString(const std::vector<int64_t>& dims) {
  std::string out = "[";
  // Appended piece by piece: `"," + std::to_string(...)` trips g++ 12's
  // false -Wrestrict in optimized builds.
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(dims[i]);
  }
  return out + "]";
}

Status FillWith(Tensor& out, const Tensor& value) {
  if (out.NumElements() == 0) return OkStatus();
  switch (value.dtype() == DT_STRING ? 0 : DataTypeSize(value.dtype())) {
    case 1:
      FillBits<uint8_t>(out, value);
      return OkStatus();
    case 2:
      FillBits<uint16_t>(out, value);
      return OkStatus();
    case 4:
      FillBits<uint32_t>(out, value);
      return OkStatus();
    case 8:
      FillBits<uint64_t>(out, value);
      return OkStatus();
    case 16:
      FillBits<std::array<uint64_t, 2>>(out, value);
      return OkStatus();
    default:
      break;
  }
  if (value.dtype() == DT_STRING) {
    for (std::string& s : out.flat<std::string>()) s = value.scalar<std::string>();
    return OkStatus();
  }
  return InvalidArgumentError("cannot fill a tensor of dtype ", DataTypeName(value.dtype()));
}

// ----------------------------------------------------- MatrixBandPart

Status BandPartShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "input", kCastTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, "input", 2, std::numeric_limits<int>::max()));
  for (int i : {1, 2}) {
    const char* arg = i == 1 ? "num_lower" : "num_upper";
    CKFLOW_RETURN_IF_ERROR(CheckDtype(c, i, arg, kIndexTypes));
    CKFLOW_RETURN_IF_ERROR(CheckRank(c, i, arg, 0, 0));
  }
  c.AddOutput(c.input_types[0], c.input_shapes[0]);
  return OkStatus();
}

// Each innermost matrix [rows, cols] keeps the band num_lower below and
// num_upper above its diagonal (a negative count keeps the whole triangle)
// and is zero elsewhere. Row by row: a copy of the band, zeros around it, so
// any dtype moves as bytes.
Status BandPartCompute(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  int64_t band[2];
  for (int i : {1, 2}) {
    const Tensor& t = ctx.input(i);
    if (t.shape().rank() != 0) {
      return InvalidArgumentError(i == 1 ? "num_lower" : "num_upper", " must be a scalar, got ",
                                  t.shape().ToString());
    }
    CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> v, IntsFromTensor(t, "band"));
    band[i - 1] = v[0];
  }
  const TensorShape& shape = input.shape();
  if (shape.rank() < 2) {
    return InvalidArgumentError("input must have rank >= 2, got ", shape.ToString());
  }
  const int64_t rows = shape.dim(shape.rank() - 2), cols = shape.dim(shape.rank() - 1);
  if (band[0] > rows) {
    return InvalidArgumentError("num_lower is ", band[0], ", more than the ", rows, " rows");
  }
  if (band[1] > cols) {
    return InvalidArgumentError("num_upper is ", band[1], ", more than the ", cols, " columns");
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, input.dtype(), shape));
  if (input.NumElements() == 0) return OkStatus();
  const size_t size = DataTypeSize(input.dtype());
  const char* in = static_cast<const char*>(input.raw_data());
  char* o = static_cast<char*>(out->raw_data());
  const int64_t total_rows = input.NumElements() / cols;
  const int64_t lower = band[0] < 0 ? rows : band[0];
  const int64_t upper = band[1] < 0 ? cols : band[1];
  ParallelRange(total_rows, cols, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t i = r % rows;
      const int64_t first = std::clamp<int64_t>(i - lower, 0, cols);
      const int64_t last = std::clamp<int64_t>(i + upper + 1, first, cols);
      char* dst = o + r * cols * size;
      std::memset(dst, 0, first * size);
      std::memcpy(dst + first * size, in + (r * cols + first) * size, (last - first) * size);
      std::memset(dst + last * size, 0, (cols - last) * size);
    }
  });
  return OkStatus();
}

// ---------------------------------------------------------------- OneHot

Status OneHotShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "indices", kIndexTypes));
  static constexpr DataType kInt32[] = {DT_INT32};
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "depth", kInt32));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "depth", 0, 0));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 2, "on_value", kNumericTypes));
  CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 2, "on_value", 3, "off_value"));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 2, "on_value", 0, 0));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 3, "off_value", 0, 0));
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> depth, ConstantInts(c, 1, "depth"));
  if (depth && (*depth)[0] < 0) {
    return InvalidArgumentError("depth is ", (*depth)[0], " (", InputName(c, 1),
                                "), but must not be negative");
  }
  const PartialShape& indices = c.input_shapes[0];
  if (!indices.known_rank()) {
    c.AddOutput(c.input_types[2], PartialShape::Unknown());
    return OkStatus();
  }
  const int64_t axis = c.attrs->GetOr<int64_t>("axis", -1);
  if (axis < -1 || axis > indices.rank()) {
    return InvalidArgumentError("axis is ", axis, ", but must be in [-1, ", indices.rank(), "]");
  }
  std::vector<int64_t> dims = indices.dim_sizes();
  dims.insert(dims.begin() + (axis < 0 ? indices.rank() : axis), depth ? (*depth)[0] : -1);
  c.AddOutput(c.input_types[2], PartialShape(std::move(dims)));
  return OkStatus();
}

// out[..., j, ...] = on_value where j == indices[...], else off_value; an
// index outside [0, depth) (negative ones too) gives a row of off_value, as
// TensorFlow's.
template <typename T>
Status OneHotCompute(KernelContext& ctx, int64_t axis_attr) {
  const Tensor& indices = ctx.input(0);
  for (int i = 1; i < 4; ++i) {
    if (ctx.input(i).shape().rank() != 0) {
      return InvalidArgumentError(i == 1   ? "depth"
                                  : i == 2 ? "on_value"
                                           : "off_value",
                                  " must be a scalar, got ", ctx.input(i).shape().ToString());
    }
  }
  const int64_t depth = ctx.input(1).scalar<int32_t>();
  if (depth < 0) return InvalidArgumentError("depth is ", depth, ", but must not be negative");
  const int rank = indices.shape().rank();
  if (axis_attr < -1 || axis_attr > rank) {
    return InvalidArgumentError("axis is ", axis_attr, ", but must be in [-1, ", rank, "]");
  }
  const int axis = axis_attr < 0 ? rank : static_cast<int>(axis_attr);
  std::vector<int64_t> dims = indices.shape().dim_sizes();
  dims.insert(dims.begin() + axis, depth);
  StatusOr<TensorShape> shape = TensorShape::Make(dims);
  if (!shape.ok()) return shape.status().WithContext("one-hot shape");
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DataTypeOf<T>(), *shape));
  const T on = ctx.input(2).scalar<T>(), off = ctx.input(3).scalar<T>();
  // indices viewed as [outer, inner] around the new axis: out is [outer,
  // depth, inner].
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= dims[d];
  for (int d = axis + 1; d <= rank; ++d) inner *= dims[d];
  const std::vector<int64_t> index = FlatIndices(indices);
  T* o = out->flat<T>().data();
  std::fill_n(o, out->NumElements(), off);
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t b = 0; b < inner; ++b) {
      const int64_t j = index[a * inner + b];
      if (j >= 0 && j < depth) o[(a * depth + j) * inner + b] = on;
    }
  }
  return OkStatus();
}

StatusOr<Kernel> OneHotKernel(const Node& node) {
  const int64_t axis = node.attrs().GetOr<int64_t>("axis", -1);
  return DispatchNumeric(node.output_type(0), [axis](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel([axis](KernelContext& ctx) { return OneHotCompute<T>(ctx, axis); });
  });
}

}  // namespace internal

using internal::RegisterOp;

Status RegisterArrayOps(OpRegistry& r) {
  using namespace internal;  // NOLINT: the shape functions and kernels above
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "Const", .shape_fn = ConstShapeFn, .kernel_factory = ConstKernel}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "Placeholder",
                                        .shape_fn = PlaceholderShapeFn,
                                        .kernel_factory = PlaceholderKernel}));
  for (const char* type : {"Identity", "StopGradient"}) {
    CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = type,
                                          .inputs = {"input"},
                                          .shape_fn = IdentityShapeFn,
                                          .kernel_factory = StatelessKernel(IdentityCompute)}));
  }
  CKFLOW_RETURN_IF_ERROR(RegisterOp(
      r, {.type = "NoOp",
          .shape_fn = [](InferenceContext&) { return OkStatus(); },
          .kernel_factory = StatelessKernel([](KernelContext&) { return OkStatus(); })}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "Reshape",
                                        .inputs = {"tensor", "shape"},
                                        .shape_fn = ReshapeShapeFn,
                                        .kernel_factory = StatelessKernel(ReshapeCompute)}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(
      r, {.type = "Cast", .inputs = {"x"}, .shape_fn = CastShapeFn, .kernel_factory = CastKernel}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "Fill",
                                        .inputs = {"dims", "value"},
                                        .shape_fn = FillShapeFn,
                                        .kernel_factory = StatelessKernel(FillCompute)}));
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "ZerosLike",
                     .inputs = {"x"},
                     .shape_fn = UnaryShapeFn("x", {std::begin(kCastTypes), std::end(kCastTypes)}),
                     .kernel_factory = FillLikeKernel(0)}));
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "OnesLike",
                     .inputs = {"x"},
                     .shape_fn = UnaryShapeFn("x", {std::begin(kCastTypes), std::end(kCastTypes)}),
                     .kernel_factory = FillLikeKernel(1)}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "Shape",
                                        .inputs = {"input"},
                                        .shape_fn = ShapeShapeFn,
                                        .kernel_factory = ShapeKernel}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "OneHot",
                                        .inputs = {"indices", "depth", "on_value", "off_value"},
                                        .shape_fn = OneHotShapeFn,
                                        .kernel_factory = OneHotKernel}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "MatrixBandPart",
                                        .inputs = {"input", "num_lower", "num_upper"},
                                        .shape_fn = BandPartShapeFn,
                                        .kernel_factory = StatelessKernel(BandPartCompute)}));
  return OkStatus();
}

// ---------------------------------------------------------------- builders

namespace ops {

using internal::BuildOp;

Output Input::ToOutput(const Scope& scope) const {
  if (!value_.IsValid()) return output_;
  // NewSubScope("") is the same scope without the op name, which belongs to
  // the op this input feeds.
  return Const(scope.NewSubScope(""), value_);
}

Output Const(const Scope& scope, const Tensor& value) {
  if (!scope.ok()) return Output();
  AttrMap attrs;
  attrs.Set("value", value);
  attrs.Set("dtype", value.dtype());
  return BuildOp(scope, "Const", {}, std::move(attrs));
}

Output Const(const Scope& scope, const std::string& value) {
  return Const(scope, Tensor::Scalar(value));
}

Output Placeholder(const Scope& scope, DataType dtype, const PlaceholderAttrs& attrs) {
  AttrMap a;
  a.Set("dtype", dtype);
  a.Set("shape", attrs.shape);
  return BuildOp(scope, "Placeholder", {}, std::move(a));
}

Output Identity(const Scope& scope, Input input) { return BuildOp(scope, "Identity", {input}); }

Output StopGradient(const Scope& scope, Input input) {
  return BuildOp(scope, "StopGradient", {input});
}

Output NoOp(const Scope& scope) { return BuildOp(scope, "NoOp", {}); }

Output Group(const Scope& scope, const std::vector<Output>& deps) {
  return NoOp(scope.WithControlDependencies(deps));
}

Output Reshape(const Scope& scope, Input tensor, Input shape) {
  return BuildOp(scope, "Reshape", {tensor, shape});
}

Output Cast(const Scope& scope, Input x, DataType dtype) {
  AttrMap attrs;
  attrs.Set("DstT", dtype);
  return BuildOp(scope, "Cast", {x}, std::move(attrs));
}

Output Fill(const Scope& scope, Input dims, Input value) {
  return BuildOp(scope, "Fill", {dims, value});
}

Output ZerosLike(const Scope& scope, Input x) { return BuildOp(scope, "ZerosLike", {x}); }

Output OnesLike(const Scope& scope, Input x) { return BuildOp(scope, "OnesLike", {x}); }

Output OneHot(const Scope& scope, Input indices, Input depth, Input on_value, Input off_value,
              int64_t axis) {
  AttrMap attrs;
  attrs.Set("axis", axis);
  return BuildOp(scope, "OneHot", {indices, depth, on_value, off_value}, std::move(attrs));
}

Output MatrixBandPart(const Scope& scope, Input input, Input num_lower, Input num_upper) {
  return BuildOp(scope, "MatrixBandPart", {input, num_lower, num_upper});
}

Output Shape(const Scope& scope, Input input, DataType out_type) {
  AttrMap attrs;
  attrs.Set("out_type", out_type);
  return BuildOp(scope, "Shape", {input}, std::move(attrs));
}

}  // namespace ops
}  // namespace ckflow
