// NN ops: activations and their gradients, BiasAdd, softmax, losses.

#include "ops/nn_ops.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "ops/array_ops.h"
#include "ops/cwise_internal.h"
#include "ops/fused_epilogue_internal.h"
#include "ops/math_ops.h"
#include "ops/random_ops.h"
#include "ops/standard_ops.h"

namespace ckflow {
namespace internal {
namespace {

struct ReluFn : CwiseTraits {
  template <typename A>
  static auto Eval(const A& a) {
    return ReluOf(a);
  }
};
struct SigmoidFn : CwiseTraits {
  static constexpr int64_t kCost = kTranscendentalCost;
  template <typename A>
  static auto Eval(const A& a) {
    return a.logistic();
  }
};
struct TanhFn : CwiseTraits {
  static constexpr int64_t kCost = kTranscendentalCost;
  template <typename A>
  static auto Eval(const A& a) {
    return a.tanh();
  }
};

struct Relu6Fn : CwiseTraits {
  template <typename A>
  static auto Eval(const A& a) {
    return Relu6Of(a);
  }
};
struct EluFn : CwiseTraits {
  static constexpr int64_t kCost = kTranscendentalCost;
  template <typename A>
  static auto Eval(const A& a) {
    using S = typename A::Scalar;
    return (a < S(0)).select(a.exp() - S(1), a);
  }
};
// SELU's constants (Klambauer et al. 2017), as TensorFlow rounds them.
constexpr double kSeluScale = 1.0507009873554804934193349852946;
constexpr double kSeluScaleAlpha = 1.7580993408473768599402175208123;
struct SeluFn : CwiseTraits {
  static constexpr int64_t kCost = kTranscendentalCost;
  template <typename A>
  static auto Eval(const A& a) {
    using S = typename A::Scalar;
    return (a < S(0)).select(S(kSeluScaleAlpha) * (a.exp() - S(1)), S(kSeluScale) * a);
  }
};
// TensorFlow's numerically stable softplus: x where exp(-x) is below the
// dtype's epsilon relative to x, exp(x) where exp(x) is, log1p(exp(x))
// between. The threshold is log(epsilon) + 2 (-13.94 for float32, -34.04
// for float64).
struct SoftplusFn : CwiseTraits {
  static constexpr int64_t kCost = 2 * kTranscendentalCost;
  template <typename A>
  static auto Eval(const A& a) {
    using S = typename A::Scalar;
    const S threshold = std::log(std::numeric_limits<S>::epsilon()) + S(2);
    return (a > -threshold).select(a, (a < threshold).select(a.exp(), a.exp().log1p()));
  }
};

struct GradTraits : CwiseTraits {
  static constexpr bool kBroadcasts = false;
};
// Zero at both kinks, 0 and 6, as TensorFlow: `features` may then be
// Relu6's input or its output.
struct Relu6GradFn : GradTraits {  // (gradients, features)
  template <typename A, typename B>
  static auto Eval(const A& g, const B& f) {
    using S = typename A::Scalar;
    return g * ((f > S(0)) && (f < S(6))).template cast<S>();
  }
};
struct EluGradFn : GradTraits {  // (gradients, outputs)
  template <typename A, typename B>
  static auto Eval(const A& g, const B& y) {
    using S = typename A::Scalar;
    return (y < S(0)).select((y + S(1)) * g, g);
  }
};
struct SeluGradFn : GradTraits {  // (gradients, outputs)
  template <typename A, typename B>
  static auto Eval(const A& g, const B& y) {
    using S = typename A::Scalar;
    return (y < S(0)).select(g * (y + S(kSeluScaleAlpha)), g * S(kSeluScale));
  }
};
struct SoftplusGradFn : GradTraits {  // (gradients, features)
  static constexpr int64_t kCost = kTranscendentalCost;
  template <typename A, typename B>
  static auto Eval(const A& g, const B& f) {
    using S = typename A::Scalar;
    return g / ((-f).exp() + S(1));
  }
};
struct ReluGradFn : GradTraits {  // (gradients, features)
  template <typename A, typename B>
  static auto Eval(const A& g, const B& f) {
    using S = typename A::Scalar;
    return (f > S(0)).select(g, S(0));
  }
};
struct SigmoidGradFn : GradTraits {  // (y, dy)
  template <typename A, typename B>
  static auto Eval(const A& y, const B& dy) {
    return dy * y * (typename A::Scalar(1) - y);
  }
};
struct TanhGradFn : GradTraits {  // (y, dy)
  template <typename A, typename B>
  static auto Eval(const A& y, const B& dy) {
    return dy * (typename A::Scalar(1) - y.square());
  }
};
struct SigmoidCrossEntropyFn : GradTraits {  // (logits, labels)
  static constexpr int64_t kCost = 2 * kTranscendentalCost;
  template <typename A, typename B>
  static auto Eval(const A& x, const B& z) {
    using S = typename A::Scalar;
    return x.max(S(0)) - x * z + (-x.abs()).exp().log1p();
  }
};

// ----------------------------------------------------------- LeakyRelu

// LeakyRelu (features) and LeakyReluGrad (gradients, features): their
// attribute alpha scales what passes where features <= 0.
Status LeakyReluShapeFn(InferenceContext& c) {
  const float alpha = c.attrs->GetOr<float>("alpha", 0.2f);
  if (!std::isfinite(alpha)) {
    return InvalidArgumentError("attribute alpha is ", alpha, ", but must be finite");
  }
  if (c.input_types.size() == 1) return UnaryShapeFn("features", {DT_FLOAT, DT_DOUBLE})(c);
  return BinaryShapeFn("gradients", "features", {DT_FLOAT, DT_DOUBLE}, false, false)(c);
}

template <typename T, bool kGrad>
Status LeakyReluCompute(KernelContext& ctx, T alpha) {
  const Tensor& features = ctx.input(kGrad ? 1 : 0);
  const Tensor& passed = ctx.input(0);  // features themselves, or gradients
  if (passed.shape() != features.shape()) {
    return InvalidArgumentError("shapes must be equal: gradients is ", passed.shape().ToString(),
                                ", features is ", features.shape().ToString());
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, features.dtype(), features.shape()));
  const T* f = features.flat<T>().data();
  const T* p = passed.flat<T>().data();
  T* o = out->flat<T>().data();
  ParallelForBlocks(features.NumElements(), 1, [&](int64_t b, int64_t e) {
    const ConstArrayMap<T> fm(f + b, e - b);
    const ConstArrayMap<T> pm(p + b, e - b);
    ArrayMap<T>(o + b, e - b) = (fm > T(0)).select(pm, pm * alpha);
  });
  return OkStatus();
}

template <bool kGrad>
StatusOr<Kernel> LeakyReluKernel(const Node& node) {
  const float alpha = node.attrs().GetOr<float>("alpha", 0.2f);
  return DispatchFloat(node.output_type(0), [alpha](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel([a = static_cast<T>(alpha)](KernelContext& ctx) {
      return LeakyReluCompute<T, kGrad>(ctx, a);
    });
  });
}

// ------------------------------------------------------------- BiasAdd

Status BiasAddShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 0, "value", 1, "bias"));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "value", kNumericTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, "value", 2, std::numeric_limits<int>::max()));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "bias", 1, 1));
  PartialShape out = c.input_shapes[0];
  const PartialShape& bias = c.input_shapes[1];
  if (out.known_rank() && bias.known_rank()) {
    int64_t last = out.dim(out.rank() - 1);
    int64_t channels = bias.dim(0);
    if (last >= 0 && channels >= 0 && last != channels) {
      return InvalidArgumentError("bias is ", bias.ToString(), " (", InputName(c, 1),
                                  "), but must match the last dimension of value, ", out.ToString(),
                                  " (", InputName(c, 0), ")");
    }
    std::vector<int64_t> dims = out.dim_sizes();
    if (last < 0) dims.back() = channels;
    out = PartialShape(std::move(dims));
  }
  c.AddOutput(c.input_types[0], std::move(out));
  return OkStatus();
}

// value + bias, row by row: each row of the last dimension is one
// vectorized add of the bias. The general broadcasting Add computed each
// row's offsets and set up a segment per row, 4x the cost of this loop on a
// layer's 128 x 256 activations.
template <typename T>
Status BiasAddCompute(KernelContext& ctx) {
  const Tensor& value = ctx.input(0);
  const Tensor& bias = ctx.input(1);
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                          ctx.ForwardInputOrAllocateOutput(0, 0, value.dtype(), value.shape()));
  const int64_t channels = bias.NumElements();
  if (channels == 0) return OkStatus();
  const int64_t rows = value.NumElements() / channels;
  const T* in = value.flat<T>().data();
  T* o = out->flat<T>().data();
  const auto b = ConstArrayMap<T>(bias.flat<T>().data(), channels);
  ParallelRange(rows, channels, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      ArrayMap<T>(o + r * channels, channels) = ConstArrayMap<T>(in + r * channels, channels) + b;
    }
  });
  return OkStatus();
}

StatusOr<Kernel> BiasAddKernel(const Node& node) {
  // Integers keep Add's wrap-around arithmetic.
  Kernel add;
  if (node.output_type(0) == DT_FLOAT) {
    add = BiasAddCompute<float>;
  } else if (node.output_type(0) == DT_DOUBLE) {
    add = BiasAddCompute<double>;
  } else {
    CKFLOW_ASSIGN_OR_RETURN(add, AddKernel(node.output_type(0), "value", "bias"));
  }
  return Kernel([add = std::move(add)](KernelContext& ctx) -> Status {
    const TensorShape& value = ctx.input(0).shape();
    const TensorShape& bias = ctx.input(1).shape();
    if (value.rank() < 2 || bias.rank() != 1 || bias.dim(0) != value.dim(value.rank() - 1)) {
      return InvalidArgumentError("bias is ", bias.ToString(),
                                  ", but must be a vector as long as the last dimension of value, ",
                                  value.ToString(), " (of rank >= 2)");
    }
    return add(ctx);
  });
}

Status BiasAddGradShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "out_backprop", kNumericTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, "out_backprop", 2, std::numeric_limits<int>::max()));
  const PartialShape& in = c.input_shapes[0];
  c.AddOutput(c.input_types[0], PartialShape({in.known_rank() ? in.dim(in.rank() - 1) : -1}));
  return OkStatus();
}

Status BiasAddGradCompute(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const int rank = in.shape().rank();
  if (rank < 2) {
    return InvalidArgumentError("out_backprop must have rank >= 2, got ", in.shape().ToString());
  }
  std::vector<bool> reduced(rank, true);
  reduced.back() = false;
  CKFLOW_ASSIGN_OR_RETURN(
      Tensor * out, ctx.AllocateOutput(0, in.dtype(), TensorShape({in.shape().dim(rank - 1)})));
  return ReduceTensor(Reduction::kSum, in, reduced, *out);
}

// ------------------------------------------------------------- softmax

Status SoftmaxShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "logits", kFloatTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, "logits", 1, std::numeric_limits<int>::max()));
  c.AddOutput(c.input_types[0], c.input_shapes[0]);
  return OkStatus();
}

// Softmax (or log-softmax) of each row, from x - max(x) so exp never
// overflows.
template <typename T, bool kLog>
Status SoftmaxCompute(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.shape().rank() < 1) return InvalidArgumentError("logits must have rank >= 1, got a scalar");
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  const int64_t cols = x.shape().dim(x.shape().rank() - 1);
  if (x.NumElements() == 0) return OkStatus();
  const T* in = x.flat<T>().data();
  T* o = out->flat<T>().data();
  ParallelRange(x.NumElements() / cols, cols * kTranscendentalCost, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      ConstArrayMap<T> xr(in + row * cols, cols);
      ArrayMap<T> orow(o + row * cols, cols);
      orow = xr - xr.maxCoeff();
      if constexpr (kLog) {
        orow -= std::log(orow.exp().sum());
      } else {
        orow = orow.exp();
        orow /= orow.sum();
      }
    }
  });
  return OkStatus();
}

template <bool kLog>
StatusOr<Kernel> SoftmaxKernel(const Node& node) {
  return DispatchFloat(node.output_type(0), [](auto tag) -> StatusOr<Kernel> {
    return Kernel(SoftmaxCompute<typename decltype(tag)::type, kLog>);
  });
}

// ------------------------------------------------------- cross entropy

Status CrossEntropyShapeFn(InferenceContext& c, bool sparse) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "features", kFloatTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, "features", 2, 2));
  PartialShape features = c.input_shapes[0];
  const PartialShape& labels = c.input_shapes[1];
  if (sparse) {
    CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "labels", kIndexTypes));
    CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "labels", 1, 1));
    if (features.known_rank() && labels.known_rank()) {
      StatusOr<PartialShape> batch = PartialShape({features.dim(0)}).Merge(labels);
      if (!batch.ok()) {
        return InvalidArgumentError("labels is ", labels.ToString(), " (", InputName(c, 1),
                                    "), but features is ", features.ToString(), " (",
                                    InputName(c, 0), "): batch sizes differ");
      }
      features = PartialShape({batch->dim(0), features.dim(1)});
    }
  } else {
    CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 0, "features", 1, "labels"));
    StatusOr<PartialShape> merged = features.Merge(labels);
    if (!merged.ok()) {
      return InvalidArgumentError("shapes must be equal: features is ", features.ToString(), " (",
                                  InputName(c, 0), "), labels is ", labels.ToString(), " (",
                                  InputName(c, 1), ")");
    }
    features = *std::move(merged);
  }
  c.AddOutput(c.input_types[0], PartialShape({features.known_rank() ? features.dim(0) : -1}));
  c.AddOutput(c.input_types[0], features.known_rank() ? features : PartialShape({-1, -1}));
  return OkStatus();
}

// Index labels are Label (int32/int64); dense labels are T (Label = void).
template <typename T, typename Label>
Status CrossEntropyCompute(KernelContext& ctx) {
  constexpr bool kSparse = !std::is_void_v<Label>;
  const Tensor& features = ctx.input(0);
  const Tensor& labels = ctx.input(1);
  const TensorShape& fs = features.shape();
  if (fs.rank() != 2) return InvalidArgumentError("features must have rank 2, got ", fs.ToString());
  const int64_t batch = fs.dim(0);
  const int64_t classes = fs.dim(1);
  if constexpr (kSparse) {
    if (labels.shape() != TensorShape({batch})) {
      return InvalidArgumentError("labels is ", labels.shape().ToString(), ", but features is ",
                                  fs.ToString(), ": must be [", batch, "]");
    }
    // Checked before any work so no thread ever indexes out of range.
    std::span<const Label> l = labels.flat<Label>();
    for (int64_t i = 0; i < batch; ++i) {
      if (l[i] < 0 || l[i] >= classes) {
        return InvalidArgumentError("labels[", i, "] = ", l[i], " is outside the valid range [0, ",
                                    classes, ")");
      }
    }
  } else if (labels.shape() != fs) {
    return InvalidArgumentError("shapes must be equal: features is ", fs.ToString(), ", labels is ",
                                labels.shape().ToString());
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * loss,
                          ctx.AllocateOutput(0, features.dtype(), TensorShape({batch})));
  CKFLOW_ASSIGN_OR_RETURN(Tensor * backprop, ctx.AllocateOutput(1, features.dtype(), fs));
  if (batch == 0) return OkStatus();
  const T* f = features.flat<T>().data();
  T* lo = loss->flat<T>().data();
  T* bp = backprop->flat<T>().data();
  if (classes == 0) {
    std::fill(lo, lo + batch, T(0));
    return OkStatus();
  }
  ParallelRange(batch, classes * kTranscendentalCost, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      ConstArrayMap<T> x(f + row * classes, classes);
      ArrayMap<T> g(bp + row * classes, classes);
      g = x - x.maxCoeff();  // shifted logits, for now
      const T sum_exp = g.exp().sum();
      const T log_sum_exp = std::log(sum_exp);
      if constexpr (kSparse) {
        const Label label = labels.flat<Label>()[row];
        lo[row] = log_sum_exp - g[label];
        g = g.exp() / sum_exp;
        g[label] -= T(1);
      } else {
        ConstArrayMap<T> z(labels.flat<T>().data() + row * classes, classes);
        lo[row] = (z * (log_sum_exp - g)).sum();
        g = g.exp() / sum_exp - z;
      }
    }
  });
  return OkStatus();
}

template <bool kSparse>
StatusOr<Kernel> CrossEntropyKernel(const Node& node) {
  DataType label_type = node.input(1).dtype();
  return DispatchFloat(node.output_type(0), [&](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    if constexpr (kSparse) {
      return DispatchIndex(label_type, [](auto label_tag) -> StatusOr<Kernel> {
        return Kernel(CrossEntropyCompute<T, typename decltype(label_tag)::type>);
      });
    } else {
      return Kernel(CrossEntropyCompute<T, void>);
    }
  });
}

}  // namespace
}  // namespace internal

Status RegisterNnOps(OpRegistry& r) {
  using namespace internal;  // NOLINT: the kernels above
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<ReluFn>(r, "Relu", "features"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<SigmoidFn>(r, "Sigmoid"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<TanhFn>(r, "Tanh"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<ReluGradFn>(r, "ReluGrad", "gradients", "features"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<SigmoidGradFn>(r, "SigmoidGrad", "y", "dy"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<TanhGradFn>(r, "TanhGrad", "y", "dy"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<Relu6Fn>(r, "Relu6", "features"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<EluFn>(r, "Elu", "features"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<SeluFn>(r, "Selu", "features"));
  CKFLOW_RETURN_IF_ERROR(RegisterUnary<SoftplusFn>(r, "Softplus", "features"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<Relu6GradFn>(r, "Relu6Grad", "gradients", "features"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<EluGradFn>(r, "EluGrad", "gradients", "outputs"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<SeluGradFn>(r, "SeluGrad", "gradients", "outputs"));
  CKFLOW_RETURN_IF_ERROR(
      RegisterBinary<SoftplusGradFn>(r, "SoftplusGrad", "gradients", "features"));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "LeakyRelu",
                                        .inputs = {"features"},
                                        .shape_fn = LeakyReluShapeFn,
                                        .kernel_factory = LeakyReluKernel<false>}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "LeakyReluGrad",
                                        .inputs = {"gradients", "features"},
                                        .shape_fn = LeakyReluShapeFn,
                                        .kernel_factory = LeakyReluKernel<true>}));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<SigmoidCrossEntropyFn>(r, "SigmoidCrossEntropyWithLogits",
                                                               "logits", "labels"));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "BiasAdd",
                                        .inputs = {"value", "bias"},
                                        .shape_fn = BiasAddShapeFn,
                                        .kernel_factory = BiasAddKernel}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "BiasAddGrad",
                                        .inputs = {"out_backprop"},
                                        .shape_fn = BiasAddGradShapeFn,
                                        .kernel_factory = StatelessKernel(BiasAddGradCompute)}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "Softmax",
                                        .inputs = {"logits"},
                                        .shape_fn = SoftmaxShapeFn,
                                        .kernel_factory = SoftmaxKernel<false>}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "LogSoftmax",
                                        .inputs = {"logits"},
                                        .shape_fn = SoftmaxShapeFn,
                                        .kernel_factory = SoftmaxKernel<true>}));
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "SoftmaxCrossEntropyWithLogits",
                     .inputs = {"features", "labels"},
                     .shape_fn = [](InferenceContext& c) { return CrossEntropyShapeFn(c, false); },
                     .kernel_factory = CrossEntropyKernel<false>}));
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "SparseSoftmaxCrossEntropyWithLogits",
                     .inputs = {"features", "labels"},
                     .shape_fn = [](InferenceContext& c) { return CrossEntropyShapeFn(c, true); },
                     .kernel_factory = CrossEntropyKernel<true>}));
  return OkStatus();
}

// ---------------------------------------------------------------- builders

namespace ops {

using internal::BuildNode;
using internal::BuildOp;

Output Relu(const Scope& scope, Input features) { return BuildOp(scope, "Relu", {features}); }
Output Sigmoid(const Scope& scope, Input x) { return BuildOp(scope, "Sigmoid", {x}); }
Output Tanh(const Scope& scope, Input x) { return BuildOp(scope, "Tanh", {x}); }

Output GeluGrad(const Scope& scope, Input gradients, Input features) {
  return BuildOp(scope, "GeluGrad", {gradients, features});
}
Output ReluGrad(const Scope& scope, Input gradients, Input features) {
  return BuildOp(scope, "ReluGrad", {gradients, features});
}
Output SigmoidGrad(const Scope& scope, Input y, Input dy) {
  return BuildOp(scope, "SigmoidGrad", {y, dy});
}
Output TanhGrad(const Scope& scope, Input y, Input dy) {
  return BuildOp(scope, "TanhGrad", {y, dy});
}

Output Relu6(const Scope& scope, Input features) { return BuildOp(scope, "Relu6", {features}); }
namespace {
AttrMap AlphaAttr(float alpha) {
  AttrMap a;
  a.Set("alpha", alpha);
  return a;
}
}  // namespace

Output LeakyRelu(const Scope& scope, Input features, float alpha) {
  return BuildOp(scope, "LeakyRelu", {features}, AlphaAttr(alpha));
}
Output Elu(const Scope& scope, Input features) { return BuildOp(scope, "Elu", {features}); }
Output Selu(const Scope& scope, Input features) { return BuildOp(scope, "Selu", {features}); }
Output Softplus(const Scope& scope, Input features) {
  return BuildOp(scope, "Softplus", {features});
}

Output Relu6Grad(const Scope& scope, Input gradients, Input features) {
  return BuildOp(scope, "Relu6Grad", {gradients, features});
}
Output LeakyReluGrad(const Scope& scope, Input gradients, Input features, float alpha) {
  return BuildOp(scope, "LeakyReluGrad", {gradients, features}, AlphaAttr(alpha));
}
Output EluGrad(const Scope& scope, Input gradients, Input outputs) {
  return BuildOp(scope, "EluGrad", {gradients, outputs});
}
Output SeluGrad(const Scope& scope, Input gradients, Input outputs) {
  return BuildOp(scope, "SeluGrad", {gradients, outputs});
}
Output SoftplusGrad(const Scope& scope, Input gradients, Input features) {
  return BuildOp(scope, "SoftplusGrad", {gradients, features});
}

Output BiasAdd(const Scope& scope, Input value, Input bias) {
  return BuildOp(scope, "BiasAdd", {value, bias});
}
Output BiasAddGrad(const Scope& scope, Input out_backprop) {
  return BuildOp(scope, "BiasAddGrad", {out_backprop});
}

Output Softmax(const Scope& scope, Input logits) { return BuildOp(scope, "Softmax", {logits}); }
Output LogSoftmax(const Scope& scope, Input logits) {
  return BuildOp(scope, "LogSoftmax", {logits});
}

CrossEntropy SoftmaxCrossEntropyWithLogits(const Scope& scope, Input features, Input labels) {
  Node* node = BuildNode(scope, "SoftmaxCrossEntropyWithLogits", {features, labels});
  if (node == nullptr) return {};
  return {Output(node, 0), Output(node, 1)};
}

CrossEntropy SparseSoftmaxCrossEntropyWithLogits(const Scope& scope, Input features, Input labels) {
  Node* node = BuildNode(scope, "SparseSoftmaxCrossEntropyWithLogits", {features, labels});
  if (node == nullptr) return {};
  return {Output(node, 0), Output(node, 1)};
}

Output SigmoidCrossEntropyWithLogits(const Scope& scope, Input logits, Input labels) {
  return BuildOp(scope, "SigmoidCrossEntropyWithLogits", {logits, labels});
}

namespace {

// x (float) and rate checked for Dropout; invalid, with the error sticky,
// if either is bad.
Output DropoutInput(const Scope& scope, Input x, double rate) {
  if (!scope.ok()) return Output();
  Output out = x.ToOutput(scope);
  if (!out.valid()) return Output();
  if (!(rate >= 0 && rate < 1)) {
    scope.UpdateStatus(InvalidArgumentError("Dropout: rate is ", rate, ", but must be in [0, 1)"));
    return Output();
  }
  if (out.dtype() != DT_FLOAT && out.dtype() != DT_DOUBLE) {
    scope.UpdateStatus(InvalidArgumentError("Dropout: x is ", DataTypeName(out.dtype()), " (",
                                            out.name(), "), but must be float32 or float64"));
    return Output();
  }
  return out;
}

// tf.nn.dropout's composite on a checked x, rate > 0: x scaled by
// 1 / (1 - rate), where the uniform draw is >= rate. `uniform` is made
// after the Mul, in TensorFlow's order.
template <typename MakeUniform>
Output BuildDropout(const Scope& s, Output x, double rate, MakeUniform&& make_uniform) {
  StatusOr<Tensor> scale = internal::ScalarOfType(x.dtype(), 1.0 / (1.0 - rate));
  StatusOr<Tensor> threshold = internal::ScalarOfType(x.dtype(), rate);
  StatusOr<Tensor> zero = internal::ScalarOfType(x.dtype(), 0);
  if (!scale.ok() || !threshold.ok() || !zero.ok()) {
    s.UpdateStatus(InternalError("Dropout: no scalars of ", DataTypeName(x.dtype())));
    return Output();
  }
  Output scaled = Mul(s, x, *scale);
  Output uniform = make_uniform();
  if (!uniform.valid()) return Output();
  Output keep = GreaterEqual(s, uniform, *threshold);
  return Select(s, keep, scaled, *zero);
}

// The noise shape as an int64 vector: x's shape, or attrs' with its -1s
// taken from x's (at run time where x's are not known).
Output NoiseShape(const Scope& s, Output x, const std::optional<std::vector<int64_t>>& noise) {
  const PartialShape& xs = x.shape();
  if (!noise) {
    if (xs.IsFullyDefined()) return Const<int64_t>(s, xs.dim_sizes());
    return Shape(s, x, DT_INT64);
  }
  std::vector<int64_t> dims = *noise;
  const int rank = static_cast<int>(dims.size());
  if (xs.known_rank() && xs.rank() != rank) {
    s.UpdateStatus(InvalidArgumentError("Dropout: noise_shape has ", rank, " dimensions, but x is ",
                                        xs.ToString(), " (", x.name(), ")"));
    return Output();
  }
  std::vector<bool> from_x(rank, false);
  bool runtime = false;
  for (int d = 0; d < rank; ++d) {
    if (dims[d] < -1) {
      s.UpdateStatus(InvalidArgumentError("Dropout: noise_shape[", d, "] is ", dims[d],
                                          ", but must be >= 0 or -1 (x's dimension)"));
      return Output();
    }
    if (dims[d] != -1) continue;
    if (xs.known_rank() && xs.dim(d) >= 0) {
      dims[d] = xs.dim(d);
    } else {
      from_x[d] = true;
      dims[d] = 0;
      runtime = true;
    }
  }
  Output given = Const<int64_t>(s, dims);
  if (!runtime) return given;
  Tensor mask(DT_BOOL, TensorShape({rank}));
  for (int d = 0; d < rank; ++d) mask.flat<bool>()[d] = from_x[d];
  return Select(s, Const(s, mask), Shape(s, x, DT_INT64), given);
}

}  // namespace

Output Dropout(const Scope& scope, Input x, double rate, const DropoutAttrs& attrs) {
  const Scope s = scope.NewSubScope("dropout");
  Output in = DropoutInput(s, x, rate);
  if (!in.valid() || rate == 0) return in;
  return BuildDropout(s, in, rate, [&] {
    Output shape = NoiseShape(s, in, attrs.noise_shape);
    if (!shape.valid()) return Output();
    return RandomUniform(s.NewSubScope("random_uniform"), shape, in.dtype(), {.seed = attrs.seed});
  });
}

Output Gelu(const Scope& scope, Input features, bool approximate) {
  // The exact form is one kernel of the composite's operations (math_ops.cc,
  // GeluFn).
  if (!approximate) return BuildOp(scope, "Gelu", {features});
  const Scope s = scope.NewSubScope("Gelu");
  Output x = features.ToOutput(s);
  if (!x.valid()) return x;
  auto scalar = [&](double v) -> Output {
    StatusOr<Tensor> c = internal::ScalarOfType(x.dtype(), v);
    return c.ok() ? Const(s, *c) : Output();
  };
  // TensorFlow casts two of its constants from float32 literals, so in
  // float64 they carry float32's rounding; so do these.
  auto float32_literal = [&](float v) { return scalar(v); };
  Output cube = Mul(s, float32_literal(0.044715f), Pow(s, x, scalar(3)));
  Output inner = Tanh(s, Mul(s, scalar(0.7978845608028654), Add(s, x, cube)));
  return Mul(s, Mul(s, scalar(0.5), x), Add(s, scalar(1), inner));
}

Output DropoutWithUniform(const Scope& scope, Input x, double rate, Input uniform) {
  const Scope s = scope.NewSubScope("dropout");
  Output in = DropoutInput(s, x, rate);
  if (!in.valid() || rate == 0) return in;
  return BuildDropout(s, in, rate, [&] { return uniform.ToOutput(s); });
}

}  // namespace ops
}  // namespace ckflow
