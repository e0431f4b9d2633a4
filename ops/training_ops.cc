#include "ops/training_ops.h"

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/ops_internal.h"
#include "ops/standard_ops.h"
#include "ops/variable_resource_internal.h"

namespace ckflow {
namespace {

using internal::DispatchFloat;
using internal::VariableFromHandle;
using internal::VariableLocks;
using internal::VariableResource;

constexpr DataType kResource[] = {DT_RESOURCE};

// An apply op's signature: `num_vars` handles first, then scalars, with the
// gradient at `grad_index`.
struct ApplySignature {
  std::string type;
  std::vector<std::string> inputs;
  int num_vars;
  int grad_index;
  bool has_nesterov = false;  // a use_nesterov attribute
};

ShapeFn ApplyShapeFn(const ApplySignature& sig) {
  return [sig](InferenceContext& c) -> Status {
    for (int i = 0; i < sig.num_vars; ++i) {
      CKFLOW_RETURN_IF_ERROR(internal::CheckDtype(c, i, sig.inputs[i], kResource));
    }
    const std::string& grad = sig.inputs[sig.grad_index];
    CKFLOW_RETURN_IF_ERROR(internal::CheckDtype(c, sig.grad_index, grad, internal::kFloatTypes));
    for (int i = sig.num_vars; i < static_cast<int>(sig.inputs.size()); ++i) {
      if (i == sig.grad_index) continue;
      CKFLOW_RETURN_IF_ERROR(internal::CheckSameDtype(c, i, sig.inputs[i], sig.grad_index, grad));
      CKFLOW_RETURN_IF_ERROR(internal::CheckRank(c, i, sig.inputs[i], 0, 0));
    }
    return OkStatus();
  };
}

template <typename T>
StatusOr<T> ScalarInput(const KernelContext& ctx, int i, const std::string& arg) {
  const Tensor& t = ctx.input(i);
  if (t.NumElements() != 1 || t.shape().rank() != 0) {
    return InvalidArgumentError(arg, " must be a scalar, got ", t.shape().ToString());
  }
  return t.scalar<T>();
}

// Variables of one apply op, locked for its run and made safe to write in
// place.
template <typename T, size_t N>
class LockedVariables {
 public:
  // Resolves inputs [0, N) to distinct variables, locks them and checks each
  // is initialized, of T and of the gradient's shape.
  static StatusOr<std::unique_ptr<LockedVariables>> Acquire(const KernelContext& ctx,
                                                            const ApplySignature& sig,
                                                            const TensorShape& grad_shape) {
    auto locked = std::unique_ptr<LockedVariables>(new LockedVariables());
    std::vector<VariableResource*> raw;
    for (size_t i = 0; i < N; ++i) {
      CKFLOW_ASSIGN_OR_RETURN(locked->vars_[i], VariableFromHandle(ctx.input(i), sig.inputs[i]));
      for (size_t j = 0; j < i; ++j) {
        if (locked->vars_[j] == locked->vars_[i]) {
          return InvalidArgumentError(sig.inputs[j], " and ", sig.inputs[i],
                                      " are the same variable '", locked->vars_[i]->name(), "'");
        }
      }
      raw.push_back(locked->vars_[i].get());
    }
    locked->locks_ = std::make_unique<VariableLocks>(std::move(raw));
    const std::string& grad = sig.inputs[sig.grad_index];
    for (size_t i = 0; i < N; ++i) {
      VariableResource& v = *locked->vars_[i];
      v.mu().AssertHeld();  // by locks_, which the analysis cannot see into
      if (!v.initialized_locked()) return v.NotInitializedError();
      if (v.dtype() != DataTypeOf<T>()) {
        return InvalidArgumentError(sig.inputs[i], " '", v.name(), "' is ", DataTypeName(v.dtype()),
                                    " but ", grad, " is ", DataTypeName(DataTypeOf<T>()));
      }
    }
    for (size_t i = 0; i < N; ++i) {
      VariableResource& v = *locked->vars_[i];
      v.mu().AssertHeld();  // by locks_
      CKFLOW_ASSIGN_OR_RETURN(Tensor * value, v.PrepareToUpdateLocked());
      if (!(value->shape() == grad_shape)) {
        return InvalidArgumentError(sig.inputs[i], " '", v.name(), "' has shape ",
                                    value->shape().ToString(), " but ", grad, " has shape ",
                                    grad_shape.ToString());
      }
      locked->data_[i] = value->flat<T>().data();
    }
    return locked;
  }

  const std::array<T*, N>& data() const { return data_; }

 private:
  LockedVariables() = default;

  std::array<std::shared_ptr<VariableResource>, N> vars_;
  std::unique_ptr<VariableLocks> locks_;  // declared after vars_: unlocks first
  std::array<T*, N> data_{};
};

template <typename T>
using Array = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstArray = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// Runs update(vars, grad, begin, n) over the elements in cache-sized pieces,
// split across workers for big variables.
template <typename T, size_t N, typename Update>
Status RunApply(const KernelContext& ctx, const ApplySignature& sig, int64_t cost_per_element,
                Update update) {
  const Tensor& grad = ctx.input(sig.grad_index);
  CKFLOW_ASSIGN_OR_RETURN(auto locked, (LockedVariables<T, N>::Acquire(ctx, sig, grad.shape())));
  const std::array<T*, N>& vars = locked->data();
  const T* g = grad.flat<T>().data();
  // Each statement of an update is one pass over its arrays, so a piece of
  // all N + 1 arrays should stay in L1 (32 KiB or more on x86 and ARM cores
  // of the last decade) from one pass to the next: half of it, leaving room
  // for what else is hot. Measured for Adam on floats over 784 x 256: pieces
  // of 256-1024 elements update 20% faster than 4,096 (64 KiB of arrays,
  // which spill to L2) and than three whole-array passes.
  constexpr int64_t kPiece = std::max<int64_t>(64, (16 << 10) / ((N + 1) * sizeof(T)));
  internal::ParallelForBlocks(grad.NumElements(), cost_per_element,
                              [&](int64_t begin, int64_t end) {
                                for (int64_t b = begin; b < end; b += kPiece) {
                                  update(vars, g, b, std::min(kPiece, end - b));
                                }
                              });
  return OkStatus();
}

// ------------------------------------------------------------------ kernels

const ApplySignature& GradientDescentSignature() {
  static const auto* sig = new ApplySignature{.type = "ResourceApplyGradientDescent",
                                              .inputs = {"var", "alpha", "delta"},
                                              .num_vars = 1,
                                              .grad_index = 2};
  return *sig;
}

StatusOr<Kernel> GradientDescentKernel(const Node& node) {
  return DispatchFloat(node.input(2).dtype(), [](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel([](KernelContext& ctx) -> Status {
      const ApplySignature& sig = GradientDescentSignature();
      CKFLOW_ASSIGN_OR_RETURN(T alpha, ScalarInput<T>(ctx, 1, sig.inputs[1]));
      return RunApply<T, 1>(ctx, sig, 2,
                            [alpha](const std::array<T*, 1>& v, const T* g, int64_t b, int64_t n) {
                              Array<T>(v[0] + b, n) -= ConstArray<T>(g + b, n) * alpha;
                            });
    });
  });
}

const ApplySignature& MomentumSignature() {
  static const auto* sig = new ApplySignature{.type = "ResourceApplyMomentum",
                                              .inputs = {"var", "accum", "lr", "grad", "momentum"},
                                              .num_vars = 2,
                                              .grad_index = 3,
                                              .has_nesterov = true};
  return *sig;
}

StatusOr<Kernel> MomentumKernel(const Node& node) {
  const bool nesterov = node.attrs().GetOr<bool>("use_nesterov", false);
  return DispatchFloat(node.input(3).dtype(), [nesterov](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel([nesterov](KernelContext& ctx) -> Status {
      const ApplySignature& sig = MomentumSignature();
      CKFLOW_ASSIGN_OR_RETURN(T lr, ScalarInput<T>(ctx, 2, sig.inputs[2]));
      CKFLOW_ASSIGN_OR_RETURN(T momentum, ScalarInput<T>(ctx, 4, sig.inputs[4]));
      return RunApply<T, 2>(ctx, sig, 4,
                            [=](const std::array<T*, 2>& v, const T* g, int64_t b, int64_t n) {
                              Array<T> var(v[0] + b, n), accum(v[1] + b, n);
                              ConstArray<T> grad(g + b, n);
                              accum = accum * momentum + grad;
                              if (nesterov) {
                                var -= grad * lr + accum * momentum * lr;
                              } else {
                                var -= accum * lr;
                              }
                            });
    });
  });
}

const ApplySignature& AdamSignature() {
  static const auto* sig =
      new ApplySignature{.type = "ResourceApplyAdam",
                         .inputs = {"var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1",
                                    "beta2", "epsilon", "grad"},
                         .num_vars = 3,
                         .grad_index = 9,
                         .has_nesterov = true};
  return *sig;
}

StatusOr<Kernel> AdamKernel(const Node& node) {
  const bool nesterov = node.attrs().GetOr<bool>("use_nesterov", false);
  return DispatchFloat(node.input(9).dtype(), [nesterov](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel([nesterov](KernelContext& ctx) -> Status {
      const ApplySignature& sig = AdamSignature();
      std::array<T, 6> s{};  // beta1_power, beta2_power, lr, beta1, beta2, epsilon
      for (int i = 0; i < 6; ++i) {
        CKFLOW_ASSIGN_OR_RETURN(s[i], ScalarInput<T>(ctx, 3 + i, sig.inputs[3 + i]));
      }
      const T beta1 = s[3], beta2 = s[4], epsilon = s[5];
      const T lr_t = s[2] * std::sqrt(T(1) - s[1]) / (T(1) - s[0]);
      return RunApply<T, 3>(
          ctx, sig, 20, [=](const std::array<T*, 3>& v, const T* g, int64_t b, int64_t n) {
            Array<T> var(v[0] + b, n), m(v[1] + b, n), vv(v[2] + b, n);
            ConstArray<T> grad(g + b, n);
            m += (grad - m) * (T(1) - beta1);
            vv += (grad.square() - vv) * (T(1) - beta2);
            if (nesterov) {
              var -= ((grad * (T(1) - beta1) + beta1 * m) * lr_t) / (vv.sqrt() + epsilon);
            } else {
              var -= (m * lr_t) / (vv.sqrt() + epsilon);
            }
          });
    });
  });
}

const ApplySignature& RMSPropSignature() {
  static const auto* sig =
      new ApplySignature{.type = "ResourceApplyRMSProp",
                         .inputs = {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"},
                         .num_vars = 3,
                         .grad_index = 7};
  return *sig;
}

StatusOr<Kernel> RMSPropKernel(const Node& node) {
  return DispatchFloat(node.input(7).dtype(), [](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel([](KernelContext& ctx) -> Status {
      const ApplySignature& sig = RMSPropSignature();
      std::array<T, 4> s{};  // lr, rho, momentum, epsilon
      for (int i = 0; i < 4; ++i) {
        CKFLOW_ASSIGN_OR_RETURN(s[i], ScalarInput<T>(ctx, 3 + i, sig.inputs[3 + i]));
      }
      const T lr = s[0], rho = s[1], momentum = s[2], epsilon = s[3];
      return RunApply<T, 3>(ctx, sig, 20,
                            [=](const std::array<T*, 3>& v, const T* g, int64_t b, int64_t n) {
                              Array<T> var(v[0] + b, n), ms(v[1] + b, n), mom(v[2] + b, n);
                              ConstArray<T> grad(g + b, n);
                              ms += (grad.square() - ms) * (T(1) - rho);
                              mom = mom * momentum + (grad * lr) / (ms + epsilon).sqrt();
                              var -= mom;
                            });
    });
  });
}

Status RegisterApply(OpRegistry& registry, const ApplySignature& sig, KernelFactory factory) {
  return internal::RegisterOp(registry, {.type = sig.type,
                                         .inputs = sig.inputs,
                                         .stateful = true,
                                         .shape_fn = ApplyShapeFn(sig),
                                         .kernel_factory = std::move(factory)});
}

Output AddApplyNode(const Scope& scope, const ApplySignature& sig, std::vector<Output> inputs,
                    bool use_nesterov) {
  AttrMap attrs;
  attrs.Set("use_locking", true);
  if (sig.has_nesterov) attrs.Set("use_nesterov", use_nesterov);
  const Output& grad = inputs[sig.grad_index];
  if (grad.valid()) attrs.Set("T", grad.dtype());
  return scope.AddNode(StandardOp(sig.type), std::move(inputs), std::move(attrs));
}

}  // namespace

Status RegisterTrainingOps(OpRegistry& registry) {
  CKFLOW_RETURN_IF_ERROR(
      RegisterApply(registry, GradientDescentSignature(), GradientDescentKernel));
  CKFLOW_RETURN_IF_ERROR(RegisterApply(registry, MomentumSignature(), MomentumKernel));
  CKFLOW_RETURN_IF_ERROR(RegisterApply(registry, AdamSignature(), AdamKernel));
  return RegisterApply(registry, RMSPropSignature(), RMSPropKernel);
}

namespace ops {

Output ResourceApplyGradientDescent(const Scope& scope, Output var, Output alpha, Output delta) {
  return AddApplyNode(scope, GradientDescentSignature(), {var, alpha, delta}, false);
}

Output ResourceApplyMomentum(const Scope& scope, Output var, Output accum, Output lr, Output grad,
                             Output momentum, bool use_nesterov) {
  return AddApplyNode(scope, MomentumSignature(), {var, accum, lr, grad, momentum}, use_nesterov);
}

Output ResourceApplyAdam(const Scope& scope, Output var, Output m, Output v, Output beta1_power,
                         Output beta2_power, Output lr, Output beta1, Output beta2, Output epsilon,
                         Output grad, bool use_nesterov) {
  return AddApplyNode(scope, AdamSignature(),
                      {var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad},
                      use_nesterov);
}

Output ResourceApplyRMSProp(const Scope& scope, Output var, Output ms, Output mom, Output lr,
                            Output rho, Output momentum, Output epsilon, Output grad) {
  return AddApplyNode(scope, RMSPropSignature(), {var, ms, mom, lr, rho, momentum, epsilon, grad},
                      false);
}

}  // namespace ops
}  // namespace ckflow
