// Elementwise arithmetic and AddN (comparisons and Select: comparison_ops.cc).

#include "ops/math_ops.h"

#include <cmath>
#include <numbers>
#include <string>
#include <unsupported/Eigen/SpecialFunctions>
#include <utility>

#include "ops/cwise_internal.h"
#include "ops/standard_ops.h"

#if CKFLOW_HAVE_LIBMVEC
// libmvec's vector variants (x86_64 vector function ABI names).
extern "C" {
#if defined(__AVX512F__)
__m512 _ZGVeN16v_erfcf(__m512);
__m512d _ZGVeN8v_erfc(__m512d);
#elif defined(__AVX2__)
__m256 _ZGVdN8v_erfcf(__m256);
__m256d _ZGVdN4v_erfc(__m256d);
#endif
}

namespace {
// erfc through glibc's vector math library (libmvec, glibc >= 2.35): Eigen
// 3.4 has no packet erfc for float, so a.erfc() calls the scalar erfcf per
// element, a tenth of a transformer's training step in GELU. libmvec's is
// within 4 ulp. The kernels split work on vector boundaries
// (ParallelForBlocks), so each element takes the same path, packet or
// scalar tail, on every thread count.
struct VectorErfc {
  float operator()(float x) const { return std::erfc(x); }
  double operator()(double x) const { return std::erfc(x); }
#if defined(__AVX512F__)
  Eigen::internal::Packet16f packetOp(const Eigen::internal::Packet16f& x) const {
    return _ZGVeN16v_erfcf(x);
  }
  Eigen::internal::Packet8d packetOp(const Eigen::internal::Packet8d& x) const {
    return _ZGVeN8v_erfc(x);
  }
#elif defined(__AVX2__)
  Eigen::internal::Packet8f packetOp(const Eigen::internal::Packet8f& x) const {
    return _ZGVdN8v_erfcf(x);
  }
  Eigen::internal::Packet4d packetOp(const Eigen::internal::Packet4d& x) const {
    return _ZGVdN4v_erfc(x);
  }
#endif
};
}  // namespace

template <>
struct Eigen::internal::functor_traits<VectorErfc> {
  enum { Cost = 20, PacketAccess = 1 };
};
#endif

namespace ckflow {
namespace internal {
namespace {

// Binary ops. Integer-capable ones that can overflow wrap (see
// cwise_internal.h).
struct AddFn : CwiseTraits {
  static constexpr bool kIntegers = true, kWrapsIntegers = true;
  template <typename A, typename B>
  static auto Eval(const A& a, const B& b) {
    return a + b;
  }
};
struct SubFn : CwiseTraits {
  static constexpr bool kIntegers = true, kWrapsIntegers = true;
  template <typename A, typename B>
  static auto Eval(const A& a, const B& b) {
    return a - b;
  }
};
struct MulFn : CwiseTraits {
  static constexpr bool kIntegers = true, kWrapsIntegers = true;
  template <typename A, typename B>
  static auto Eval(const A& a, const B& b) {
    return a * b;
  }
};
struct DivFn : CwiseTraits {
  static constexpr int64_t kCost = 4;
  template <typename A, typename B>
  static auto Eval(const A& a, const B& b) {
    return a / b;
  }
};
struct MaximumFn : CwiseTraits {
  static constexpr bool kIntegers = true;
  template <typename A, typename B>
  static auto Eval(const A& a, const B& b) {
    return a.max(b);
  }
};
struct MinimumFn : CwiseTraits {
  static constexpr bool kIntegers = true;
  template <typename A, typename B>
  static auto Eval(const A& a, const B& b) {
    return a.min(b);
  }
};
struct PowFn : CwiseTraits {
  static constexpr int64_t kCost = 2 * kTranscendentalCost;
  template <typename A, typename B>
  static auto Eval(const A& a, const B& b) {
    return a.pow(b);
  }
};
struct SquaredDifferenceFn : CwiseTraits {
  template <typename A, typename B>
  static auto Eval(const A& a, const B& b) {
    return (a - b).square();
  }
};

// Unary ops.
struct NegFn : CwiseTraits {
  static constexpr bool kIntegers = true, kWrapsIntegers = true;
  template <typename A>
  static auto Eval(const A& a) {
    return -a;
  }
};
struct SquareFn : CwiseTraits {
  static constexpr bool kIntegers = true, kWrapsIntegers = true;
  template <typename A>
  static auto Eval(const A& a) {
    return a.square();
  }
};
struct SignFn : CwiseTraits {
  static constexpr bool kIntegers = true;
  template <typename A>
  static auto Eval(const A& a) {
    return a.sign();
  }
};
struct AbsFn : CwiseTraits {
  template <typename A>
  static auto Eval(const A& a) {
    return a.abs();
  }
};
struct SqrtFn : CwiseTraits {
  static constexpr int64_t kCost = 8;
  template <typename A>
  static auto Eval(const A& a) {
    return a.sqrt();
  }
};
struct RsqrtFn : CwiseTraits {
  static constexpr int64_t kCost = 8;
  template <typename A>
  static auto Eval(const A& a) {
    return a.rsqrt();
  }
};
struct ExpFn : CwiseTraits {
  static constexpr int64_t kCost = kTranscendentalCost;
  template <typename A>
  static auto Eval(const A& a) {
    return a.exp();
  }
};
struct LogFn : CwiseTraits {
  static constexpr int64_t kCost = kTranscendentalCost;
  template <typename A>
  static auto Eval(const A& a) {
    return a.log();
  }
};
struct Log1pFn : CwiseTraits {
  static constexpr int64_t kCost = kTranscendentalCost;
  template <typename A>
  static auto Eval(const A& a) {
    return a.log1p();
  }
};
// Eigen's erf, the one TensorFlow's kernel calls.
struct ErfFn : CwiseTraits {
  static constexpr int64_t kCost = kTranscendentalCost;
  template <typename A>
  static auto Eval(const A& a) {
    return a.erf();
  }
};

struct ErfcFn : CwiseTraits {
  static constexpr int64_t kCost = kTranscendentalCost;
  template <typename A>
  static auto Eval(const A& a) {
#if CKFLOW_HAVE_LIBMVEC
    return a.unaryExpr(::VectorErfc());
#else
    return a.erfc();
#endif
  }
};
// The exact GELU, tf.nn.gelu's 0.5 * x * erfc(-x * c), and its gradient,
// each one pass over memory where TensorFlow's graph (and the composite
// ckflow built before) makes five forward and ten backward. Each element
// goes through the composite's operations in its order, with its
// constants (c a float32 literal, as TensorFlow's), so the values are the
// composite's: the forward bit for bit, the gradient but for the rounding a
// fused multiply-add may save in its last sum.
template <typename S>
constexpr S kGeluC = static_cast<S>(0.7071067811865476f);
struct GeluFn : CwiseTraits {
  static constexpr int64_t kCost = kTranscendentalCost;
  template <typename A>
  static auto Eval(const A& x) {
    using S = typename A::Scalar;
    return (x * S(0.5)) * ErfcFn::Eval((-x) * kGeluC<S>);
  }
};
// d/dx of (0.5 x) * erfc(u), u = -x c, as the composite's gradients take
// it: dy * erfc(u) * 0.5 from the first factor, and from the second
// -(dy * 0.5 x * (-2 / sqrt(pi)) * exp(-u^2) * c) (ErfcGrad's order of
// products).
struct GeluGradFn : CwiseTraits {  // (gradients, features)
  static constexpr bool kBroadcasts = false;
  static constexpr int64_t kCost = 2 * kTranscendentalCost;
  template <typename A, typename B>
  static auto Eval(const A& dy, const B& x) {
    using S = typename A::Scalar;
    const auto u = (-x) * kGeluC<S>;
    const auto from_erfc =
        ((dy * (x * S(0.5))) * S(-2 * std::numbers::inv_sqrtpi)) * (-u.square()).exp();
    return -(from_erfc * kGeluC<S>)+(dy * ErfcFn::Eval(u)) * S(0.5);
  }
};

struct ReciprocalFn : CwiseTraits {
  static constexpr int64_t kCost = 4;
  template <typename A>
  static auto Eval(const A& a) {
    return a.inverse();
  }
};

// -------------------------------------------------------------------- AddN

Status AddNShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "inputs[0]", kNumericTypes));
  PartialShape shape = c.input_shapes[0];
  for (int i = 1; i < static_cast<int>(c.input_types.size()); ++i) {
    std::string arg = "inputs[" + std::to_string(i) + "]";
    CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 0, "inputs[0]", i, arg));
    StatusOr<PartialShape> merged = shape.Merge(c.input_shapes[i]);
    if (!merged.ok()) {
      return InvalidArgumentError("shapes must be equal: inputs[0] is ",
                                  c.input_shapes[0].ToString(), " (", InputName(c, 0), "), ", arg,
                                  " is ", c.input_shapes[i].ToString(), " (", InputName(c, i), ")");
    }
    shape = *std::move(merged);
  }
  c.AddOutput(c.input_types[0], std::move(shape));
  return OkStatus();
}

template <typename T>
Status AddNCompute(KernelContext& ctx) {
  using C = ComputeType<AddFn, T>;
  const Tensor& first = ctx.input(0);
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).shape() != first.shape()) {
      return InvalidArgumentError("shapes must be equal: inputs[0] is ", first.shape().ToString(),
                                  ", inputs[", i, "] is ", ctx.input(i).shape().ToString());
    }
  }
  if (ctx.num_inputs() == 1) {
    ctx.set_output(0, first);
    return OkStatus();
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, first.dtype(), first.shape()));
  C* o = As<C>(out->flat<T>().data());
  ParallelForBlocks(first.NumElements(), ctx.num_inputs(), [&](int64_t b, int64_t e) {
    ArrayMap<C> acc(o + b, e - b);
    acc = ConstArrayMap<C>(As<C>(ctx.input(0).flat<T>().data()) + b, e - b);
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      acc += ConstArrayMap<C>(As<C>(ctx.input(i).flat<T>().data()) + b, e - b);
    }
  });
  return OkStatus();
}

}  // namespace

StatusOr<Kernel> AddKernel(DataType dtype, std::string_view x_arg, std::string_view y_arg) {
  return BinaryKernel<AddFn>(dtype, x_arg, y_arg);
}

}  // namespace internal

Status RegisterMathOps(OpRegistry& r) {
  using namespace internal;  // NOLINT: the Fn structs above
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<AddFn>(r, "Add"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<SubFn>(r, "Sub"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<MulFn>(r, "Mul"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<DivFn>(r, "Div"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<MaximumFn>(r, "Maximum"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<MinimumFn>(r, "Minimum"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<PowFn>(r, "Pow"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<SquaredDifferenceFn>(r, "SquaredDifference"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<NegFn>(r, "Neg"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<SquareFn>(r, "Square"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<SignFn>(r, "Sign"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<AbsFn>(r, "Abs"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<SqrtFn>(r, "Sqrt"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<RsqrtFn>(r, "Rsqrt"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<ExpFn>(r, "Exp"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<LogFn>(r, "Log"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<Log1pFn>(r, "Log1p"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<ReciprocalFn>(r, "Reciprocal"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<ErfFn>(r, "Erf"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<ErfcFn>(r, "Erfc"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<GeluFn>(r, "Gelu", "features"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<GeluGradFn>(r, "GeluGrad", "gradients", "features"));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(
      r, {.type = "AddN",
          .inputs = {"inputs"},
          .variadic = true,
          .shape_fn = AddNShapeFn,
          .kernel_factory = [](const Node& node) {
            return DispatchNumeric(node.output_type(0), [](auto tag) -> StatusOr<Kernel> {
              return Kernel(AddNCompute<typename decltype(tag)::type>);
            });
          }}));
  return OkStatus();
}

// ---------------------------------------------------------------- builders

namespace ops {

using internal::BuildOp;

#define CKFLOW_BINARY_BUILDER(Name, Type) \
  Output Name(const Scope& scope, Input x, Input y) { return BuildOp(scope, Type, {x, y}); }
#define CKFLOW_UNARY_BUILDER(Name, Type) \
  Output Name(const Scope& scope, Input x) { return BuildOp(scope, Type, {x}); }

CKFLOW_BINARY_BUILDER(Add, "Add")
CKFLOW_BINARY_BUILDER(Sub, "Sub")
CKFLOW_BINARY_BUILDER(Mul, "Mul")
CKFLOW_BINARY_BUILDER(Div, "Div")
CKFLOW_BINARY_BUILDER(Maximum, "Maximum")
CKFLOW_BINARY_BUILDER(Minimum, "Minimum")
CKFLOW_BINARY_BUILDER(Pow, "Pow")
CKFLOW_BINARY_BUILDER(SquaredDifference, "SquaredDifference")
CKFLOW_UNARY_BUILDER(Neg, "Neg")
CKFLOW_UNARY_BUILDER(Square, "Square")
CKFLOW_UNARY_BUILDER(Sign, "Sign")
CKFLOW_UNARY_BUILDER(Abs, "Abs")
CKFLOW_UNARY_BUILDER(Sqrt, "Sqrt")
CKFLOW_UNARY_BUILDER(Rsqrt, "Rsqrt")
CKFLOW_UNARY_BUILDER(Exp, "Exp")
CKFLOW_UNARY_BUILDER(Log, "Log")
CKFLOW_UNARY_BUILDER(Log1p, "Log1p")
CKFLOW_UNARY_BUILDER(Reciprocal, "Reciprocal")
CKFLOW_UNARY_BUILDER(Erf, "Erf")
CKFLOW_UNARY_BUILDER(Erfc, "Erfc")

#undef CKFLOW_BINARY_BUILDER
#undef CKFLOW_UNARY_BUILDER

Output AddN(const Scope& scope, const std::vector<Output>& inputs) {
  return BuildOp(scope, "AddN", std::vector<Input>(inputs.begin(), inputs.end()));
}

}  // namespace ops
}  // namespace ckflow
