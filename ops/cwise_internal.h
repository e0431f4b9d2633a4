// Elementwise kernels on Eigen arrays, shared by math_ops.cc and nn_ops.cc.
//
// An op is a struct with a static Eval over Eigen array expressions and a
// few traits:
//
//   struct AddFn {
//     static constexpr int64_t kCost = 1;             // cycles per element
//     static constexpr bool kIntegers = true;         // int32/int64 allowed
//     static constexpr bool kWrapsIntegers = true;    // computed modulo 2^n
//     static constexpr bool kBoolOutput = false;      // comparisons: true
//     static constexpr bool kBroadcasts = true;       // else shapes must match
//     template <typename A, typename B>
//     static auto Eval(const A& a, const B& b) { return a + b; }
//   };
//
// Integer ops that can overflow (add, multiply, negate) run on the unsigned
// type of the same width: two's complement wrap-around, like TensorFlow on
// every platform, without the undefined behaviour of signed overflow.
//
// Thread safety: kernels are pure functions of their inputs.

#ifndef CKFLOW_OPS_CWISE_INTERNAL_H_
#define CKFLOW_OPS_CWISE_INTERNAL_H_

#include <Eigen/Core>
#include <array>
#include <string_view>
#include <type_traits>

#include "base/parallel.h"
#include "ops/ops_internal.h"

namespace ckflow::internal {

// Unaligned views: kernels work on sub-ranges at any offset.
template <typename T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// `n` copies of v as an Eigen expression (vectorized, never materialized).
template <typename T>
auto Repeat(T v, int64_t n) {
  return Eigen::Array<T, Eigen::Dynamic, 1>::Constant(n, v);
}

template <typename Fn, typename T, bool kWraps = std::is_integral_v<T>&& Fn::kWrapsIntegers>
struct ComputeTypeOf {
  using type = T;
};
template <typename Fn, typename T>
struct ComputeTypeOf<Fn, T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename Fn, typename T>
using ComputeType = typename ComputeTypeOf<Fn, T>::type;

// Reinterprets a T buffer as the compute type (same size and alignment;
// signed and unsigned variants may alias).
template <typename C, typename T>
const C* As(const T* p) {
  static_assert(sizeof(C) == sizeof(T));
  return reinterpret_cast<const C*>(p);
}
template <typename C, typename T>
C* As(T* p) {
  static_assert(sizeof(C) == sizeof(T));
  return reinterpret_cast<C*>(p);
}

template <typename Fn, typename T>
Status UnaryCompute(KernelContext& ctx) {
  using C = ComputeType<Fn, T>;
  const Tensor& x = ctx.input(0);
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                          ctx.ForwardInputOrAllocateOutput(0, 0, DataTypeOf<T>(), x.shape()));
  const C* in = As<C>(x.flat<T>().data());
  C* o = As<C>(out->flat<T>().data());
  ParallelForBlocks(x.NumElements(), Fn::kCost, [&](int64_t b, int64_t e) {
    ArrayMap<C>(o + b, e - b) = Fn::Eval(ConstArrayMap<C>(in + b, e - b));
  });
  return OkStatus();
}

template <typename Fn>
StatusOr<Kernel> UnaryKernel(DataType dtype) {
  return DispatchNumeric(dtype, [](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !Fn::kIntegers) {
      return InvalidArgumentError("unsupported dtype ", DataTypeName(DataTypeOf<T>()));
    } else {
      return Kernel(UnaryCompute<Fn, T>);
    }
  });
}

// out[0, len) = x op y, where x (or y) is one value repeated if x_repeats
// (y_repeats). All paths of BinaryCompute end here, so each op and dtype
// instantiates Eigen's loops only once per repetition pattern.
template <typename Fn, typename C, typename OutC>
void EvalSegment(OutC* out, const C* x, bool x_repeats, const C* y, bool y_repeats, int64_t len) {
  ArrayMap<OutC> o(out, len);
  if constexpr (Fn::kBroadcasts) {
    if (x_repeats) {
      o = Fn::Eval(Repeat(*x, len), ConstArrayMap<C>(y, len));
      return;
    }
    if (y_repeats) {
      o = Fn::Eval(ConstArrayMap<C>(x, len), Repeat(*y, len));
      return;
    }
  }
  o = Fn::Eval(ConstArrayMap<C>(x, len), ConstArrayMap<C>(y, len));
}

// x op y with NumPy broadcasting; x_arg and y_arg name them in messages.
template <typename Fn, typename T>
Status BinaryCompute(KernelContext& ctx, std::string_view x_arg, std::string_view y_arg) {
  using C = ComputeType<Fn, T>;
  using Out = std::conditional_t<Fn::kBoolOutput, bool, T>;
  using OutC = std::conditional_t<Fn::kBoolOutput, bool, C>;
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  if (!Fn::kBroadcasts && x.shape() != y.shape()) {
    return InvalidArgumentError("shapes must be equal: ", x_arg, " is ", x.shape().ToString(), ", ",
                                y_arg, " is ", y.shape().ToString());
  }
  TensorShape broadcast;  // only built when the shapes differ: tiny ops pay nothing
  if (x.shape() != y.shape()) {
    CKFLOW_ASSIGN_OR_RETURN(broadcast, BroadcastTensorShapes(x.shape(), x_arg, y.shape(), y_arg));
  }
  const TensorShape& shape = x.shape() == y.shape() ? x.shape() : broadcast;
  // An input the output's size takes its buffer where the run allows
  // (x first): elementwise, each element is read before it is written.
  const int64_t n = shape.num_elements();
  const int forward = x.NumElements() == n ? 0 : 1;
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                          ctx.ForwardInputOrAllocateOutput(forward, 0, DataTypeOf<Out>(), shape));
  if (n == 0) return OkStatus();
  const C* xp = As<C>(x.flat<T>().data());
  const C* yp = As<C>(y.flat<T>().data());
  OutC* op = As<OutC>(out->flat<Out>().data());
  // Each input either covers the output or is a single value.
  const bool x_whole = x.NumElements() == n;
  const bool y_whole = y.NumElements() == n;
  if ((x_whole || x.NumElements() == 1) && (y_whole || y.NumElements() == 1)) {
    ParallelForBlocks(n, Fn::kCost, [&](int64_t b, int64_t e) {
      EvalSegment<Fn>(op + b, xp + (x_whole ? b : 0), !x_whole, yp + (y_whole ? b : 0), !y_whole,
                      e - b);
    });
    return OkStatus();
  }
  if constexpr (Fn::kBroadcasts) {
    const TensorShape* shapes[] = {&x.shape(), &y.shape()};
    BroadcastPlan plan(shapes, shape);
    const int64_t inner = plan.inner();
    const bool x_repeats = plan.inner_broadcast(0);
    const bool y_repeats = plan.inner_broadcast(1);
    ParallelRange(plan.rows(), inner * Fn::kCost, [&](int64_t b, int64_t e) {
      std::array<int64_t, 2> off;
      for (int64_t row = b; row < e; ++row) {
        plan.RowOffsets(row, off);
        EvalSegment<Fn>(op + row * inner, xp + off[0], x_repeats, yp + off[1], y_repeats, inner);
      }
    });
    return OkStatus();
  }
  return InternalError("elementwise op reached broadcasting with equal shapes");
}

template <typename Fn>
StatusOr<Kernel> BinaryKernel(DataType dtype, std::string_view x_arg, std::string_view y_arg) {
  return DispatchNumeric(dtype, [x_arg, y_arg](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !Fn::kIntegers) {
      return InvalidArgumentError("unsupported dtype ", DataTypeName(DataTypeOf<T>()));
    } else {
      return Kernel(
          [x_arg, y_arg](KernelContext& ctx) { return BinaryCompute<Fn, T>(ctx, x_arg, y_arg); });
    }
  });
}

// Defaults for the traits; ops override what differs.
struct CwiseTraits {
  static constexpr int64_t kCost = 1;
  static constexpr bool kIntegers = false;
  static constexpr bool kWrapsIntegers = false;
  static constexpr bool kBoolOutput = false;
  static constexpr bool kBroadcasts = true;
};
// Transcendental functions cost tens of cycles per element.
inline constexpr int64_t kTranscendentalCost = 20;

// Registers an elementwise op: `Fn` as a unary (one arg) or binary (two)
// kernel, with the matching shape function over Fn's dtypes.
template <typename Fn>
Status RegisterUnary(OpRegistry& registry, std::string type, std::string arg = "x") {
  std::vector<DataType> types(std::begin(kFloatTypes), std::end(kFloatTypes));
  if (Fn::kIntegers) types = {std::begin(kNumericTypes), std::end(kNumericTypes)};
  return RegisterOp(registry, {.type = std::move(type),
                               .inputs = {arg},
                               .shape_fn = UnaryShapeFn(arg, types),
                               .kernel_factory = [](const Node& node) {
                                 return UnaryKernel<Fn>(node.input(0).dtype());
                               }});
}

// x_arg and y_arg must be string literals (the kernels keep views of them).
template <typename Fn>
Status RegisterBinary(OpRegistry& registry, std::string type, std::string_view x_arg = "x",
                      std::string_view y_arg = "y") {
  std::vector<DataType> types(std::begin(kFloatTypes), std::end(kFloatTypes));
  if (Fn::kIntegers) types = {std::begin(kNumericTypes), std::end(kNumericTypes)};
  return RegisterOp(registry, {.type = std::move(type),
                               .inputs = {std::string(x_arg), std::string(y_arg)},
                               .shape_fn = BinaryShapeFn(std::string(x_arg), std::string(y_arg),
                                                         types, Fn::kBoolOutput, Fn::kBroadcasts),
                               .kernel_factory = [x_arg, y_arg](const Node& node) {
                                 return BinaryKernel<Fn>(node.input(0).dtype(), x_arg, y_arg);
                               }});
}

}  // namespace ckflow::internal

#endif  // CKFLOW_OPS_CWISE_INTERNAL_H_
