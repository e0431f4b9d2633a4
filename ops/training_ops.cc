#include "ops/training_ops.h"

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
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

// An apply op's signature: `num_vars` handles first, then the gradient and
// scalars; a sparse apply also has the rows' indices.
struct ApplySignature {
  std::string type;
  std::vector<std::string> inputs;
  int num_vars;
  int grad_index;
  int indices_index = -1;  // >= 0: grad holds the rows of the variables at indices
  // Boolean attributes and their defaults, in the builders' order.
  std::vector<std::pair<std::string, bool>> bool_attrs;

  bool sparse() const { return indices_index >= 0; }
  int InputIndex(std::string_view name) const {
    return static_cast<int>(std::find(inputs.begin(), inputs.end(), name) - inputs.begin());
  }
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
      if (i == sig.indices_index) {
        CKFLOW_RETURN_IF_ERROR(internal::CheckDtype(c, i, sig.inputs[i], internal::kIndexTypes));
        CKFLOW_RETURN_IF_ERROR(internal::CheckRank(c, i, sig.inputs[i], 1, 1));
        continue;
      }
      CKFLOW_RETURN_IF_ERROR(internal::CheckSameDtype(c, i, sig.inputs[i], sig.grad_index, grad));
      CKFLOW_RETURN_IF_ERROR(internal::CheckRank(c, i, sig.inputs[i], 0, 0));
    }
    if (sig.sparse()) {
      CKFLOW_RETURN_IF_ERROR(
          internal::CheckRank(c, sig.grad_index, grad, 1, std::numeric_limits<int>::max()));
    }
    return OkStatus();
  };
}

template <typename T>
StatusOr<T> ScalarInput(const KernelContext& ctx, const ApplySignature& sig,
                        std::string_view name) {
  const int i = sig.InputIndex(name);
  const Tensor& t = ctx.input(i);
  if (t.NumElements() != 1 || t.shape().rank() != 0) {
    return InvalidArgumentError(name, " must be a scalar, got ", t.shape().ToString());
  }
  return t.scalar<T>();
}

// The variables' shape a gradient of `grad_shape` fits: the same, or for a
// sparse apply any shape whose rows are the gradient's rows.
bool FitsGradient(const ApplySignature& sig, const TensorShape& var, const TensorShape& grad) {
  if (!sig.sparse()) return var == grad;
  if (var.rank() != grad.rank() || var.rank() < 1) return false;
  return std::equal(var.dims().begin() + 1, var.dims().end(), grad.dims().begin() + 1);
}

// Variables of one apply op, locked for its run and made safe to write in
// place.
template <typename T, size_t N>
class LockedVariables {
 public:
  // Resolves inputs [0, N) to distinct variables, locks them and checks each
  // is initialized, of T and of one shape that fits the gradient.
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
      // A sparse apply's rows are checked against the shape first, then
      // prepared (PrepareRows): only theirs are written.
      const Tensor* value = nullptr;
      if (sig.sparse()) {
        CKFLOW_ASSIGN_OR_RETURN(value, v.PeekLocked());
      } else {
        CKFLOW_ASSIGN_OR_RETURN(Tensor * updated, v.PrepareToUpdateLocked());
        locked->data_[i] = updated->flat<T>().data();
        value = updated;
      }
      const bool fits =
          i == 0 ? FitsGradient(sig, value->shape(), grad_shape) : value->shape() == locked->shape_;
      if (!fits) {
        return InvalidArgumentError(
            sig.inputs[i], " '", v.name(), "' has shape ", value->shape().ToString(), " but ",
            i == 0 ? grad : sig.inputs[0], " has shape ",
            (i == 0 ? grad_shape : locked->shape_).ToString(),
            sig.sparse() && i == 0 ? " (its rows must be the variable's rows)" : "");
      }
      if (i == 0) locked->shape_ = value->shape();
    }
    return locked;
  }

  // For a sparse apply: makes the variables ready for writes of `rows`
  // (in range) and points data() at them.
  Status PrepareRows(std::span<const int64_t> rows) {
    for (size_t i = 0; i < N; ++i) {
      VariableResource& v = *vars_[i];
      v.mu().AssertHeld();  // by locks_
      CKFLOW_ASSIGN_OR_RETURN(Tensor * value, v.PrepareToUpdateRowsLocked(rows));
      data_[i] = value->flat<T>().data();
    }
    return OkStatus();
  }

  const std::array<T*, N>& data() const { return data_; }
  // The variables' shape.
  const TensorShape& shape() const { return shape_; }
  const std::string& name() const { return vars_[0]->name(); }

 private:
  LockedVariables() = default;

  std::array<std::shared_ptr<VariableResource>, N> vars_;
  std::unique_ptr<VariableLocks> locks_;  // declared after vars_: unlocks first
  std::array<T*, N> data_{};
  TensorShape shape_;
};

template <typename T>
using Array = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstArray = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

template <typename T, size_t N>
std::array<T*, N> Offset(const std::array<T*, N>& vars, int64_t offset) {
  std::array<T*, N> out;
  for (size_t k = 0; k < N; ++k) out[k] = vars[k] + offset;
  return out;
}

// The rows of a sparse apply: update(vars at row indices[i], grad row i,
// inner) for each i. A row named twice is updated once per mention, in
// order, by one worker, so repeats compose as sequential updates and the
// bits do not depend on the thread count.
template <typename T, size_t N, typename Update>
Status RunSparseApply(const KernelContext& ctx, const ApplySignature& sig, int64_t cost_per_element,
                      Update update) {
  const Tensor& grad = ctx.input(sig.grad_index);
  const Tensor& indices = ctx.input(sig.indices_index);
  const std::string& grad_arg = sig.inputs[sig.grad_index];
  if (indices.shape().rank() != 1) {
    return InvalidArgumentError("indices must be a vector, got ", indices.shape().ToString());
  }
  if (grad.shape().rank() < 1 || grad.shape().dim(0) != indices.NumElements()) {
    return InvalidArgumentError(grad_arg, " is ", grad.shape().ToString(), " but must have ",
                                indices.NumElements(), " rows, one per index");
  }
  CKFLOW_ASSIGN_OR_RETURN(auto locked, (LockedVariables<T, N>::Acquire(ctx, sig, grad.shape())));
  StatusOr<std::vector<int64_t>> index =
      internal::CheckedIndices(indices, "indices", locked->shape().dim(0));
  if (!index.ok()) {
    return index.status().WithContext("variable '" + locked->name() + "' " +
                                      locked->shape().ToString());
  }
  const int64_t n = indices.NumElements();
  if (n == 0) return OkStatus();
  CKFLOW_RETURN_IF_ERROR(locked->PrepareRows(*index));
  const int64_t inner = grad.NumElements() / n;
  const std::array<T*, N>& vars = locked->data();
  const T* g = grad.flat<T>().data();
  auto row = [&](int64_t i) { update(Offset(vars, (*index)[i] * inner), g + i * inner, inner); };
  if (internal::RunsInline(grad.NumElements(), cost_per_element)) {
    for (int64_t i = 0; i < n; ++i) row(i);
    return OkStatus();
  }
  // Mentions grouped by row, in input order within a row; workers take
  // whole groups.
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return (*index)[a] < (*index)[b]; });
  std::vector<int64_t> starts;
  for (int64_t k = 0; k < n; ++k) {
    if (k == 0 || (*index)[order[k]] != (*index)[order[k - 1]]) starts.push_back(k);
  }
  starts.push_back(n);
  const int64_t groups = static_cast<int64_t>(starts.size()) - 1;
  internal::ParallelRange(groups, inner * cost_per_element * n / groups,
                          [&](int64_t begin, int64_t end) {
                            for (int64_t k = starts[begin]; k < starts[end]; ++k) row(order[k]);
                          });
  return OkStatus();
}

// Runs update(vars, grad, n) over the elements (or, for a sparse apply,
// the rows) in pieces, split across workers for big variables; the
// pointers given point at the piece's first element.
template <typename T, size_t N, typename Update>
Status RunApply(const KernelContext& ctx, const ApplySignature& sig, int64_t cost_per_element,
                Update update) {
  if (sig.sparse()) return RunSparseApply<T, N>(ctx, sig, cost_per_element, update);
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
                                  update(Offset(vars, b), g + b, std::min(kPiece, end - b));
                                }
                              });
  return OkStatus();
}

// A kernel factory for the ops of `sig`: make_update<T>(ctx, sig, attrs)
// reads the scalars and returns the update RunApply runs.
template <typename Family>
KernelFactory ApplyKernel(const ApplySignature& sig, int64_t cost_per_element) {
  return [&sig, cost_per_element](const Node& node) -> StatusOr<Kernel> {
    std::vector<bool> attrs;
    for (const auto& [name, fallback] : sig.bool_attrs) {
      attrs.push_back(node.attrs().GetOr<bool>(name, fallback));
    }
    return DispatchFloat(node.input(sig.grad_index).dtype(),
                         [&sig, attrs, cost_per_element](auto tag) -> StatusOr<Kernel> {
                           using T = typename decltype(tag)::type;
                           return Kernel([&sig, attrs, cost_per_element](KernelContext& ctx) {
                             return Family::template Run<T>(ctx, sig, attrs, cost_per_element);
                           });
                         });
  };
}

// ------------------------------------------------------------ formulas

struct GradientDescentFamily {
  template <typename T>
  static Status Run(const KernelContext& ctx, const ApplySignature& sig, const std::vector<bool>&,
                    int64_t cost) {
    CKFLOW_ASSIGN_OR_RETURN(T alpha, ScalarInput<T>(ctx, sig, "alpha"));
    return RunApply<T, 1>(ctx, sig, cost,
                          [alpha](const std::array<T*, 1>& v, const T* g, int64_t n) {
                            Array<T>(v[0], n) -= ConstArray<T>(g, n) * alpha;
                          });
  }
};

struct MomentumFamily {
  template <typename T>
  static Status Run(const KernelContext& ctx, const ApplySignature& sig,
                    const std::vector<bool>& attrs, int64_t cost) {
    const bool nesterov = attrs[0];
    CKFLOW_ASSIGN_OR_RETURN(T lr, ScalarInput<T>(ctx, sig, "lr"));
    CKFLOW_ASSIGN_OR_RETURN(T momentum, ScalarInput<T>(ctx, sig, "momentum"));
    return RunApply<T, 2>(ctx, sig, cost, [=](const std::array<T*, 2>& v, const T* g, int64_t n) {
      Array<T> var(v[0], n), accum(v[1], n);
      ConstArray<T> grad(g, n);
      accum = accum * momentum + grad;
      if (nesterov) {
        var -= grad * lr + accum * momentum * lr;
      } else {
        var -= accum * lr;
      }
    });
  }
};

struct AdamFamily {
  template <typename T>
  static Status Run(const KernelContext& ctx, const ApplySignature& sig,
                    const std::vector<bool>& attrs, int64_t cost) {
    const bool nesterov = attrs[0];
    std::array<T, 6> s{};
    const char* names[] = {"beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"};
    for (int i = 0; i < 6; ++i) {
      CKFLOW_ASSIGN_OR_RETURN(s[i], ScalarInput<T>(ctx, sig, names[i]));
    }
    const T beta1 = s[3], beta2 = s[4], epsilon = s[5];
    const T lr_t = s[2] * std::sqrt(T(1) - s[1]) / (T(1) - s[0]);
    return RunApply<T, 3>(ctx, sig, cost, [=](const std::array<T*, 3>& v, const T* g, int64_t n) {
      Array<T> var(v[0], n), m(v[1], n), vv(v[2], n);
      ConstArray<T> grad(g, n);
      m += (grad - m) * (T(1) - beta1);
      vv += (grad.square() - vv) * (T(1) - beta2);
      if (nesterov) {
        var -= ((grad * (T(1) - beta1) + beta1 * m) * lr_t) / (vv.sqrt() + epsilon);
      } else {
        var -= (m * lr_t) / (vv.sqrt() + epsilon);
      }
    });
  }
};

struct RMSPropFamily {
  template <typename T>
  static Status Run(const KernelContext& ctx, const ApplySignature& sig, const std::vector<bool>&,
                    int64_t cost) {
    std::array<T, 4> s{};
    const char* names[] = {"lr", "rho", "momentum", "epsilon"};
    for (int i = 0; i < 4; ++i) {
      CKFLOW_ASSIGN_OR_RETURN(s[i], ScalarInput<T>(ctx, sig, names[i]));
    }
    const T lr = s[0], rho = s[1], momentum = s[2], epsilon = s[3];
    if (sig.sparse()) {
      // TensorFlow's sparse kernel orders the arithmetic differently from
      // its dense one; each is followed as written.
      return RunApply<T, 3>(ctx, sig, cost, [=](const std::array<T*, 3>& v, const T* g, int64_t n) {
        Array<T> var(v[0], n), ms(v[1], n), mom(v[2], n);
        ConstArray<T> grad(g, n);
        ms = ms * rho + grad.square() * (T(1) - rho);
        mom = mom * momentum + (ms + epsilon).rsqrt() * lr * grad;
        var -= mom;
      });
    }
    return RunApply<T, 3>(ctx, sig, cost, [=](const std::array<T*, 3>& v, const T* g, int64_t n) {
      Array<T> var(v[0], n), ms(v[1], n), mom(v[2], n);
      ConstArray<T> grad(g, n);
      ms += (grad.square() - ms) * (T(1) - rho);
      mom = mom * momentum + (grad * lr) / (ms + epsilon).sqrt();
      var -= mom;
    });
  }
};

struct AdagradFamily {
  template <typename T>
  static Status Run(const KernelContext& ctx, const ApplySignature& sig,
                    const std::vector<bool>& attrs, int64_t cost) {
    const bool update_slots = attrs[0];
    CKFLOW_ASSIGN_OR_RETURN(T lr, ScalarInput<T>(ctx, sig, "lr"));
    return RunApply<T, 2>(ctx, sig, cost, [=](const std::array<T*, 2>& v, const T* g, int64_t n) {
      Array<T> var(v[0], n), accum(v[1], n);
      ConstArray<T> grad(g, n);
      if (update_slots) accum += grad.square();
      var -= grad * lr * accum.rsqrt();
    });
  }
};

struct FtrlFamily {
  template <typename T>
  static Status Run(const KernelContext& ctx, const ApplySignature& sig,
                    const std::vector<bool>& attrs, int64_t cost) {
    const bool by_lr = attrs[0];  // multiply_linear_by_lr
    std::array<T, 4> s{};
    const char* names[] = {"lr", "l1", "l2", "lr_power"};
    for (int i = 0; i < 4; ++i) {
      CKFLOW_ASSIGN_OR_RETURN(s[i], ScalarInput<T>(ctx, sig, names[i]));
    }
    const T lr = s[0], l2 = s[2], lr_power = s[3];
    const T l1 = by_lr ? s[1] * lr : s[1];
    const T two_l2 = by_lr ? T(2) * l2 * lr : T(2) * l2;
    const bool root = lr_power == T(-0.5);
    // accum^(-lr_power), the per-coordinate learning rate's inverse.
    auto power = [root, lr_power](T a) { return root ? std::sqrt(a) : std::pow(a, -lr_power); };
    return RunApply<T, 3>(ctx, sig, cost, [=](const std::array<T*, 3>& v, const T* g, int64_t n) {
      T *var = v[0], *accum = v[1], *linear = v[2];
      for (int64_t j = 0; j < n; ++j) {
        const T grad = g[j];
        const T new_accum = accum[j] + grad * grad;
        const T new_power = power(new_accum);
        const T sigma = new_power - power(accum[j]);
        const T l = by_lr ? linear[j] + (grad * lr - sigma * var[j])
                          : linear[j] + (grad - sigma / lr * var[j]);
        const T quadratic = by_lr ? new_power + two_l2 : new_power / lr + two_l2;
        var[j] = (std::clamp(l, -l1, l1) - l) / quadratic;
        linear[j] = l;
        accum[j] = new_accum;
      }
    });
  }
};

// ---------------------------------------------------------- signatures

const ApplySignature& GradientDescentSignature() {
  static const auto* const sig = new ApplySignature{.type = "ResourceApplyGradientDescent",
                                                    .inputs = {"var", "alpha", "delta"},
                                                    .num_vars = 1,
                                                    .grad_index = 2};
  return *sig;
}
const ApplySignature& MomentumSignature() {
  static const auto* const sig =
      new ApplySignature{.type = "ResourceApplyMomentum",
                         .inputs = {"var", "accum", "lr", "grad", "momentum"},
                         .num_vars = 2,
                         .grad_index = 3,
                         .bool_attrs = {{"use_nesterov", false}}};
  return *sig;
}
const ApplySignature& SparseMomentumSignature() {
  static const auto* const sig =
      new ApplySignature{.type = "ResourceSparseApplyMomentum",
                         .inputs = {"var", "accum", "lr", "grad", "indices", "momentum"},
                         .num_vars = 2,
                         .grad_index = 3,
                         .indices_index = 4,
                         .bool_attrs = {{"use_nesterov", false}}};
  return *sig;
}
const ApplySignature& AdamSignature() {
  static const auto* const sig =
      new ApplySignature{.type = "ResourceApplyAdam",
                         .inputs = {"var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1",
                                    "beta2", "epsilon", "grad"},
                         .num_vars = 3,
                         .grad_index = 9,
                         .bool_attrs = {{"use_nesterov", false}}};
  return *sig;
}
const ApplySignature& RMSPropSignature() {
  static const auto* const sig =
      new ApplySignature{.type = "ResourceApplyRMSProp",
                         .inputs = {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"},
                         .num_vars = 3,
                         .grad_index = 7};
  return *sig;
}
const ApplySignature& SparseRMSPropSignature() {
  static const auto* const sig = new ApplySignature{
      .type = "ResourceSparseApplyRMSProp",
      .inputs = {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad", "indices"},
      .num_vars = 3,
      .grad_index = 7,
      .indices_index = 8};
  return *sig;
}
const ApplySignature& AdagradSignature() {
  static const auto* const sig = new ApplySignature{.type = "ResourceApplyAdagrad",
                                                    .inputs = {"var", "accum", "lr", "grad"},
                                                    .num_vars = 2,
                                                    .grad_index = 3,
                                                    .bool_attrs = {{"update_slots", true}}};
  return *sig;
}
const ApplySignature& SparseAdagradSignature() {
  static const auto* const sig =
      new ApplySignature{.type = "ResourceSparseApplyAdagrad",
                         .inputs = {"var", "accum", "lr", "grad", "indices"},
                         .num_vars = 2,
                         .grad_index = 3,
                         .indices_index = 4,
                         .bool_attrs = {{"update_slots", true}}};
  return *sig;
}
const ApplySignature& FtrlSignature() {
  static const auto* const sig =
      new ApplySignature{.type = "ResourceApplyFtrl",
                         .inputs = {"var", "accum", "linear", "grad", "lr", "l1", "l2", "lr_power"},
                         .num_vars = 3,
                         .grad_index = 3,
                         .bool_attrs = {{"multiply_linear_by_lr", false}}};
  return *sig;
}
const ApplySignature& SparseFtrlSignature() {
  static const auto* const sig = new ApplySignature{
      .type = "ResourceSparseApplyFtrl",
      .inputs = {"var", "accum", "linear", "grad", "indices", "lr", "l1", "l2", "lr_power"},
      .num_vars = 3,
      .grad_index = 3,
      .indices_index = 4,
      .bool_attrs = {{"multiply_linear_by_lr", false}}};
  return *sig;
}

template <typename Family>
Status RegisterApply(OpRegistry& registry, const ApplySignature& sig, int64_t cost_per_element) {
  return internal::RegisterOp(registry,
                              {.type = sig.type,
                               .inputs = sig.inputs,
                               .stateful = true,
                               .shape_fn = ApplyShapeFn(sig),
                               .kernel_factory = ApplyKernel<Family>(sig, cost_per_element)});
}

Output AddApplyNode(const Scope& scope, const ApplySignature& sig, std::vector<Output> inputs,
                    std::vector<bool> bool_attrs = {}) {
  AttrMap attrs;
  attrs.Set("use_locking", true);
  for (size_t i = 0; i < sig.bool_attrs.size(); ++i) {
    attrs.Set(sig.bool_attrs[i].first,
              i < bool_attrs.size() ? bool_attrs[i] : sig.bool_attrs[i].second);
  }
  const Output& grad = inputs[sig.grad_index];
  if (grad.valid()) attrs.Set("T", grad.dtype());
  if (sig.sparse() && inputs[sig.indices_index].valid()) {
    attrs.Set("Tindices", inputs[sig.indices_index].dtype());
  }
  return scope.AddNode(StandardOp(sig.type), std::move(inputs), std::move(attrs));
}

}  // namespace

Status RegisterTrainingOps(OpRegistry& registry) {
  CKFLOW_RETURN_IF_ERROR(
      (RegisterApply<GradientDescentFamily>(registry, GradientDescentSignature(), 2)));
  CKFLOW_RETURN_IF_ERROR((RegisterApply<MomentumFamily>(registry, MomentumSignature(), 4)));
  CKFLOW_RETURN_IF_ERROR((RegisterApply<MomentumFamily>(registry, SparseMomentumSignature(), 4)));
  CKFLOW_RETURN_IF_ERROR((RegisterApply<AdamFamily>(registry, AdamSignature(), 20)));
  CKFLOW_RETURN_IF_ERROR((RegisterApply<RMSPropFamily>(registry, RMSPropSignature(), 20)));
  CKFLOW_RETURN_IF_ERROR((RegisterApply<RMSPropFamily>(registry, SparseRMSPropSignature(), 20)));
  CKFLOW_RETURN_IF_ERROR((RegisterApply<AdagradFamily>(registry, AdagradSignature(), 10)));
  CKFLOW_RETURN_IF_ERROR((RegisterApply<AdagradFamily>(registry, SparseAdagradSignature(), 10)));
  CKFLOW_RETURN_IF_ERROR((RegisterApply<FtrlFamily>(registry, FtrlSignature(), 40)));
  return RegisterApply<FtrlFamily>(registry, SparseFtrlSignature(), 40);
}

namespace ops {

Output ResourceApplyGradientDescent(const Scope& scope, Output var, Output alpha, Output delta) {
  return AddApplyNode(scope, GradientDescentSignature(), {var, alpha, delta});
}

Output ResourceApplyMomentum(const Scope& scope, Output var, Output accum, Output lr, Output grad,
                             Output momentum, bool use_nesterov) {
  return AddApplyNode(scope, MomentumSignature(), {var, accum, lr, grad, momentum}, {use_nesterov});
}

Output ResourceSparseApplyMomentum(const Scope& scope, Output var, Output accum, Output lr,
                                   Output grad, Output indices, Output momentum,
                                   bool use_nesterov) {
  return AddApplyNode(scope, SparseMomentumSignature(), {var, accum, lr, grad, indices, momentum},
                      {use_nesterov});
}

Output ResourceApplyAdam(const Scope& scope, Output var, Output m, Output v, Output beta1_power,
                         Output beta2_power, Output lr, Output beta1, Output beta2, Output epsilon,
                         Output grad, bool use_nesterov) {
  return AddApplyNode(scope, AdamSignature(),
                      {var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad},
                      {use_nesterov});
}

Output ResourceApplyRMSProp(const Scope& scope, Output var, Output ms, Output mom, Output lr,
                            Output rho, Output momentum, Output epsilon, Output grad) {
  return AddApplyNode(scope, RMSPropSignature(), {var, ms, mom, lr, rho, momentum, epsilon, grad});
}

Output ResourceSparseApplyRMSProp(const Scope& scope, Output var, Output ms, Output mom, Output lr,
                                  Output rho, Output momentum, Output epsilon, Output grad,
                                  Output indices) {
  return AddApplyNode(scope, SparseRMSPropSignature(),
                      {var, ms, mom, lr, rho, momentum, epsilon, grad, indices});
}

Output ResourceApplyAdagrad(const Scope& scope, Output var, Output accum, Output lr, Output grad,
                            bool update_slots) {
  return AddApplyNode(scope, AdagradSignature(), {var, accum, lr, grad}, {update_slots});
}

Output ResourceSparseApplyAdagrad(const Scope& scope, Output var, Output accum, Output lr,
                                  Output grad, Output indices, bool update_slots) {
  return AddApplyNode(scope, SparseAdagradSignature(), {var, accum, lr, grad, indices},
                      {update_slots});
}

Output ResourceApplyFtrl(const Scope& scope, Output var, Output accum, Output linear, Output grad,
                         Output lr, Output l1, Output l2, Output lr_power,
                         bool multiply_linear_by_lr) {
  return AddApplyNode(scope, FtrlSignature(), {var, accum, linear, grad, lr, l1, l2, lr_power},
                      {multiply_linear_by_lr});
}

Output ResourceSparseApplyFtrl(const Scope& scope, Output var, Output accum, Output linear,
                               Output grad, Output indices, Output lr, Output l1, Output l2,
                               Output lr_power, bool multiply_linear_by_lr) {
  return AddApplyNode(scope, SparseFtrlSignature(),
                      {var, accum, linear, grad, indices, lr, l1, l2, lr_power},
                      {multiply_linear_by_lr});
}

}  // namespace ops
}  // namespace ckflow
