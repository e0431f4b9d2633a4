#include "ops/optimizers.h"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "ops/array_ops.h"
#include "ops/gradient_tape.h"
#include "ops/gradients.h"
#include "ops/initializers.h"
#include "ops/math_ops.h"
#include "ops/ops_internal.h"
#include "ops/standard_ops.h"
#include "ops/training_ops.h"
#include "ops/unique_names_internal.h"
#include "ops/variable_ops.h"

namespace ckflow {
namespace {

std::vector<std::string> Sorted(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  return names;
}

std::string VariableNames(const std::vector<GradAndVar>& grads_and_vars) {
  std::string out = "[";
  for (const GradAndVar& gv : grads_and_vars) {
    if (out.size() > 1) out += ", ";
    out += "'" + gv.variable->name() + "'";
  }
  return out + "]";
}

}  // namespace

Optimizer::Optimizer(std::string type_name, std::string name, std::vector<std::string> slot_names)
    : type_name_(std::move(type_name)),
      name_(std::move(name)),
      slot_names_(Sorted(std::move(slot_names))) {}

// ------------------------------------------------------------ gradients

std::vector<GradAndVar> Optimizer::GradientsOf(
    const Scope& scope, const Output& loss, std::vector<std::shared_ptr<Variable>> var_list,
    const std::function<StatusOr<std::vector<Output>>(const std::vector<Output>&)>& gradients) {
  if (!scope.ok()) return {};
  if (!loss.valid()) {
    scope.UpdateStatus(InvalidArgumentError(name_, ": the loss is invalid"));
    return {};
  }
  if (var_list.empty()) var_list = TrainableVariables(scope.graph());
  if (var_list.empty()) {
    scope.UpdateStatus(InvalidArgumentError(name_, ": no variables to optimize"));
    return {};
  }
  std::vector<Output> handles;
  for (const auto& v : var_list) {
    if (v == nullptr) {
      scope.UpdateStatus(InvalidArgumentError(name_, ": a variable in var_list is null"));
      return {};
    }
    handles.push_back(v->handle());
  }
  StatusOr<std::vector<Output>> grads = gradients(handles);
  if (!grads.ok()) {
    scope.UpdateStatus(grads.status().WithContext(name_ + ": gradients of " + loss.name()));
    return {};
  }
  std::vector<GradAndVar> out;
  for (size_t i = 0; i < var_list.size(); ++i) {
    out.push_back(GradAndVar{.grad = (*grads)[i], .variable = var_list[i]});
  }
  return out;
}

std::vector<GradAndVar> Optimizer::ComputeGradients(
    const Scope& scope, Output loss, std::vector<std::shared_ptr<Variable>> var_list) {
  return GradientsOf(scope, loss, std::move(var_list), [&](const std::vector<Output>& handles) {
    return AddGradients(scope, {loss}, handles);
  });
}

std::vector<GradAndVar> Optimizer::ComputeGradients(const Scope& scope,
                                                    const std::function<Output()>& loss_fn,
                                                    std::vector<std::shared_ptr<Variable>> var_list,
                                                    Output* loss_out) {
  if (!scope.ok()) return {};
  if (!loss_fn) {
    scope.UpdateStatus(InvalidArgumentError(name_, ": no loss function"));
    return {};
  }
  if (!scope.eager()) {
    Output loss = loss_fn();
    if (loss_out != nullptr) *loss_out = loss;
    return ComputeGradients(scope, loss, std::move(var_list));
  }
  GradientTape tape(scope);
  Output loss = loss_fn();
  if (loss_out != nullptr) *loss_out = loss;
  return GradientsOf(scope, loss, std::move(var_list), [&](const std::vector<Output>& handles) {
    return tape.Gradient(loss, handles);
  });
}

Output Optimizer::ApplyComputed(const Scope& scope, const std::vector<GradAndVar>& grads_and_vars,
                                const Output& loss, const std::shared_ptr<Variable>& global_step) {
  if (!scope.ok()) return Output();
  bool any = std::any_of(grads_and_vars.begin(), grads_and_vars.end(),
                         [](const GradAndVar& gv) { return gv.grad.valid(); });
  if (!any) {
    scope.UpdateStatus(InvalidArgumentError(
        name_, ": no gradients for any variable: the loss ", loss.name(), " depends on none of ",
        VariableNames(grads_and_vars), " through differentiable ops"));
    return Output();
  }
  return ApplyGradients(scope, grads_and_vars, global_step);
}

Output Optimizer::Minimize(const Scope& scope, Output loss,
                           std::vector<std::shared_ptr<Variable>> var_list,
                           const std::shared_ptr<Variable>& global_step) {
  return ApplyComputed(scope, ComputeGradients(scope, loss, std::move(var_list)), loss,
                       global_step);
}

Output Optimizer::Minimize(const Scope& scope, const std::function<Output()>& loss_fn,
                           std::vector<std::shared_ptr<Variable>> var_list,
                           const std::shared_ptr<Variable>& global_step) {
  Output loss;
  std::vector<GradAndVar> grads_and_vars =
      ComputeGradients(scope, loss_fn, std::move(var_list), &loss);
  return ApplyComputed(scope, grads_and_vars, loss, global_step);
}

// ---------------------------------------------------------------- apply

Status Optimizer::BindGraph(const Scope& scope) {
  std::shared_ptr<Graph> bound = graph_.lock();
  if (bound == nullptr) {
    graph_ = scope.shared_graph();
    return OkStatus();
  }
  if (bound != scope.shared_graph()) {
    return InvalidArgumentError(name_,
                                ": this optimizer already builds ops in another graph; "
                                "create one optimizer per graph");
  }
  return OkStatus();
}

Status Optimizer::CheckGradients(const std::vector<GradAndVar>& grads_and_vars) const {
  if (grads_and_vars.empty()) return InvalidArgumentError(name_, ": no variables to update");
  std::set<const Variable*> seen;
  bool any = false;
  for (const GradAndVar& gv : grads_and_vars) {
    if (gv.variable == nullptr) return InvalidArgumentError(name_, ": a variable is null");
    const Variable& v = *gv.variable;
    if (!seen.insert(&v).second) {
      return InvalidArgumentError(name_, ": variable '", v.name(), "' is listed twice");
    }
    if (!gv.grad.valid()) continue;
    any = true;
    if (&gv.grad.node()->graph() != &v.handle().node()->graph()) {
      return InvalidArgumentError(name_, ": the gradient for '", v.name(), "' (", gv.grad.name(),
                                  ") is from another graph");
    }
    if (gv.grad.dtype() != v.dtype() || !gv.grad.shape().IsCompatibleWith(v.shape())) {
      return InvalidArgumentError(name_, ": variable '", v.name(), "' is ", DataTypeName(v.dtype()),
                                  v.shape().ToString(), " but its gradient ", gv.grad.name(),
                                  " is ", DataTypeName(gv.grad.dtype()),
                                  gv.grad.shape().ToString());
    }
    if (!IsFloatingType(v.dtype()) || v.dtype() == DT_BFLOAT16 || v.dtype() == DT_HALF) {
      return InvalidArgumentError(name_, ": variable '", v.name(), "' is ", DataTypeName(v.dtype()),
                                  "; only float32 and float64 variables can be trained");
    }
  }
  if (!any) {
    return InvalidArgumentError(name_, ": no gradients provided for any variable of ",
                                VariableNames(grads_and_vars));
  }
  return OkStatus();
}

Output Optimizer::ApplyGradients(const Scope& scope, const std::vector<GradAndVar>& grads_and_vars,
                                 const std::shared_ptr<Variable>& global_step) {
  if (!scope.ok()) return Output();
  Status s = CheckGradients(grads_and_vars);
  if (s.ok()) s = BindGraph(scope);
  if (s.ok() && global_step != nullptr &&
      ((global_step->dtype() != DT_INT32 && global_step->dtype() != DT_INT64) ||
       global_step->shape().rank() != 0)) {
    s = InvalidArgumentError(name_, ": global_step '", global_step->name(),
                             "' must be an int32 or int64 scalar, not ",
                             DataTypeName(global_step->dtype()), global_step->shape().ToString());
  }
  if (!s.ok()) {
    scope.UpdateStatus(s);
    return Output();
  }

  std::vector<std::shared_ptr<Variable>> variables;
  for (const GradAndVar& gv : grads_and_vars) {
    if (gv.grad.valid()) variables.push_back(gv.variable);
  }
  // Slots and non-slot variables belong to no caller's name scope and wait
  // for no caller's control dependencies (TensorFlow's init_scope).
  CreateSlots(scope.Root(), variables);
  if (!scope.ok()) return Output();

  Scope opt_scope = scope.NewSubScope(name_);
  hyper_scope_ = opt_scope.WithNoControlDependencies();
  std::vector<Output> update_ops;
  for (const GradAndVar& gv : grads_and_vars) {
    if (!gv.grad.valid()) continue;
    Scope update_scope = opt_scope.NewSubScope("update_" + gv.variable->name());
    std::optional<IndexedSlices> sparse = AsIndexedSlices(gv.grad);
    update_ops.push_back(sparse ? ApplySparse(update_scope, *sparse, *gv.variable)
                                : ApplyDense(update_scope, gv.grad, *gv.variable));
  }
  std::vector<Output> finish_ops = update_ops;
  for (const Output& op : Finish(opt_scope, update_ops)) finish_ops.push_back(op);
  hyper_cache_.clear();
  hyper_scope_.reset();
  if (!scope.ok()) return Output();

  std::vector<Output> train_deps = finish_ops;
  if (global_step != nullptr) {
    Scope after = opt_scope.WithControlDependencies(finish_ops);
    StatusOr<Tensor> one = internal::ScalarOfType(global_step->dtype(), 1);
    if (!one.ok()) {
      scope.UpdateStatus(one.status());
      return Output();
    }
    train_deps = {
        global_step->AssignAdd(after.WithOpName("increment_global_step"), ops::Const(after, *one))};
  }
  if (scope.eager()) {
    // The updates ran; the train op only stands for them.
    for (const Output& op : train_deps) {
      if (!op.valid()) return Output();
    }
    return Output(scope.WithOpName(opt_scope.name_prefix()).AddNode(StandardOp("NoOp"), {}));
  }
  // The train op carries the optimizer's name scope as its own name
  // ("Adam"), as TensorFlow names it.
  std::vector<Node*> deps;
  for (const Output& op : train_deps) {
    if (!op.valid()) return Output();
    deps.push_back(op.node());
  }
  StatusOr<Node*> train = scope.graph().AddNode(NodeSpec{.name = opt_scope.name_prefix(),
                                                         .op_def = &StandardOp("NoOp"),
                                                         .control_inputs = std::move(deps),
                                                         .device = scope.device()});
  if (!train.ok()) {
    scope.UpdateStatus(train.status());
    return Output();
  }
  return Output(*train);
}

std::vector<Output> Optimizer::Finish(const Scope&, const std::vector<Output>&) { return {}; }

// ---------------------------------------------------------------- slots

std::shared_ptr<Variable> Optimizer::MakeSlot(const Scope& root,
                                              const std::shared_ptr<Variable>& variable,
                                              const std::string& slot_name, double fill_value) {
  if (std::shared_ptr<Variable> slot = GetSlotVariable(*variable, slot_name)) return slot;
  // A record left by a dead variable at the same address starts over.
  VariableSlots& record = slots_[variable.get()];
  if (record.variable.lock() != variable) record = VariableSlots{.variable = variable, .slots = {}};

  // TensorFlow 1's slot_creator: "<variable>/<optimizer>", made unique, so a
  // second slot is "<variable>/<optimizer>_1".
  const std::string slot_var_name = variable->name() + "/" + name_;
  VariableOptions options{.trainable = false, .device = variable->device()};
  if (!slot_scope_) slot_scope_ = root;
  if (const std::optional<SaveSliceInfo>& slice = variable->save_slice_info()) {
    // A part of a partitioned variable: its slot is the same slice of the
    // whole's slot, "<whole>/<optimizer>" (the k-th slot of a variable is
    // made unique as "<optimizer>_k", as TensorFlow 1's slot_creator names
    // it).
    const size_t earlier = record.slots.size();
    options.save_slice_info = *slice;
    options.save_slice_info->full_name = slice->full_name + "/" + name_;
    // Appended, not "_" + to_string(): GCC 12 warns (-Wrestrict) on that
    // form, a false positive.
    if (earlier) options.save_slice_info->full_name.append("_").append(std::to_string(earlier));
  }
  if (variable->shape().IsFullyDefined()) {
    // A slot a restore waits for (eagerly) is read, not filled first.
    std::shared_ptr<Variable> slot = Variable::CreateThenBind(
        root, slot_var_name, variable->dtype(), variable->shape().ToTensorShape(),
        initializers::Constant(fill_value), options, HasDeferredSlotRestore(*variable, slot_name),
        [&](const std::shared_ptr<Variable>& s) {
          record.slots.emplace_back(slot_name, s);
          OnSlotCreated(*variable, slot_name, s);
        });
    if (slot != nullptr && !waiting_partitioned_.empty()) AnnounceCompletePartitionedSlots();
    return slot;
  }
  // A shape known only at run time: that of the variable's initial value.
  StatusOr<Tensor> fill = internal::ScalarOfType(variable->dtype(), fill_value);
  if (!fill.ok()) {
    root.UpdateStatus(fill.status());
    return nullptr;
  }
  Scope init_scope = root.NewSubScope(slot_var_name + "/Initializer");
  Output value = ops::Fill(init_scope, ops::Shape(init_scope, variable->initial_value()), *fill);
  std::shared_ptr<Variable> slot = Variable::Create(root, slot_var_name, value, options);
  if (slot == nullptr) return nullptr;
  record.slots.emplace_back(slot_name, slot);
  OnSlotCreated(*variable, slot_name, slot);
  if (!waiting_partitioned_.empty()) AnnounceCompletePartitionedSlots();
  return slot;
}

std::shared_ptr<Variable> Optimizer::MakeNonSlotVariable(const Scope& root, const std::string& name,
                                                         float initial_value,
                                                         const Variable& colocate_with) {
  auto it = non_slot_.find(name);
  if (it != non_slot_.end()) return it->second;
  // A restore waiting under this name (beta1_power) runs as it is
  // tracked, and then is the initial value.
  return Variable::CreateThenBind(
      root, name, DT_FLOAT, TensorShape(), initializers::Constant(initial_value),
      {.trainable = false, .device = colocate_with.device()}, HasDeferredRestore(name),
      [&](const std::shared_ptr<Variable>& v) {
        non_slot_.emplace(name, v);
        Track(name, v);
      });
}

const Optimizer::VariableSlots* Optimizer::SlotsOf(const Variable& variable) const {
  auto it = slots_.find(&variable);
  if (it == slots_.end() || it->second.variable.lock().get() != &variable) return nullptr;
  return &it->second;
}

std::shared_ptr<Variable> Optimizer::GetSlotVariable(const Variable& variable,
                                                     std::string_view slot_name) const {
  if (const VariableSlots* record = SlotsOf(variable)) {
    for (const auto& [name, slot] : record->slots) {
      if (name == slot_name) return slot;
    }
  }
  return nullptr;
}

std::shared_ptr<Trackable> Optimizer::GetSlot(const Trackable& variable,
                                              std::string_view slot_name) const {
  if (const auto* v = dynamic_cast<const Variable*>(&variable)) {
    return GetSlotVariable(*v, slot_name);
  }
  if (const auto* partitioned = dynamic_cast<const PartitionedVariable*>(&variable)) {
    return PartitionedSlot(*partitioned, slot_name);
  }
  return nullptr;
}

std::shared_ptr<Trackable> Optimizer::PartitionedSlot(const PartitionedVariable& variable,
                                                      std::string_view slot_name) const {
  std::vector<std::shared_ptr<Variable>> parts;
  for (const auto& part : variable.parts()) {
    parts.push_back(GetSlotVariable(*part, slot_name));
    if (parts.back() == nullptr) return nullptr;
  }
  auto key = std::make_pair(&variable, std::string(slot_name));
  auto it = partitioned_slots_.find(key);
  if (it != partitioned_slots_.end() && it->second->parts() == parts) return it->second;
  const std::optional<SaveSliceInfo>& slice = parts[0]->save_slice_info();
  const std::string name = slice ? slice->full_name : variable.name() + "/" + name_;
  // Eager parts were assigned as they were made: nothing to group.
  Output initializer;
  if (slot_scope_ && !slot_scope_->eager()) {
    initializer =
        VariablesInitializer(slot_scope_->NewSubScope(name).WithOpName("Initializer"), parts);
  }
  std::shared_ptr<PartitionedVariable> whole =
      PartitionedVariable::FromParts(variable, name, std::move(parts), initializer);
  partitioned_slots_[key] = whole;
  return whole;
}

void Optimizer::OnSlotRestoreDeferred(const std::shared_ptr<Trackable>& variable,
                                      const std::string& slot_name) {
  if (auto partitioned = std::dynamic_pointer_cast<PartitionedVariable>(variable)) {
    waiting_partitioned_.emplace_back(partitioned, slot_name);
  }
}

void Optimizer::AnnounceCompletePartitionedSlots() {
  std::vector<std::pair<std::shared_ptr<PartitionedVariable>, std::string>> complete;
  std::erase_if(waiting_partitioned_, [&](const auto& waiting) {
    std::shared_ptr<PartitionedVariable> variable = waiting.first.lock();
    if (variable == nullptr) return true;
    if (PartitionedSlot(*variable, waiting.second) == nullptr) return false;
    complete.emplace_back(std::move(variable), waiting.second);
    return true;
  });
  for (const auto& [variable, slot_name] : complete) {
    OnSlotCreated(*variable, slot_name, PartitionedSlot(*variable, slot_name));
  }
}

std::vector<std::string> Optimizer::SlotNames() const { return slot_names_; }

std::shared_ptr<Variable> Optimizer::GetNonSlotVariable(std::string_view name) const {
  auto it = non_slot_.find(name);
  return it == non_slot_.end() ? nullptr : it->second;
}

std::vector<std::pair<std::string, std::shared_ptr<Trackable>>> Optimizer::Children() const {
  std::vector<std::pair<std::string, std::shared_ptr<Trackable>>> children = Trackable::Children();
  auto is_non_slot = [this](const auto& child) { return non_slot_.count(child.first) > 0; };
  auto rest = std::stable_partition(children.begin(), children.end(), is_non_slot);
  std::sort(children.begin(), rest, [](const auto& a, const auto& b) { return a.first < b.first; });
  return children;
}

// ------------------------------------------------------- hyperparameters

Output Optimizer::Hyperparameter(const std::string& name, double value, DataType dtype) {
  CKFLOW_CHECK(hyper_scope_.has_value());  // only inside ApplyGradients
  auto [it, inserted] = hyper_cache_.try_emplace({name, dtype});
  if (inserted) {
    StatusOr<Tensor> t = internal::ScalarOfType(dtype, value);
    if (!t.ok()) {
      hyper_scope_->UpdateStatus(t.status());
      return Output();
    }
    it->second = ops::Const(internal::WithUniqueOpName(*hyper_scope_, name), *t);
  }
  return it->second;
}

Output Optimizer::CastTo(const Scope& scope, Output value, DataType dtype) {
  if (!value.valid() || value.dtype() == dtype) return value;
  return ops::Cast(scope, value, dtype);
}

Output Optimizer::ApplySparse(const Scope& scope, const IndexedSlices& grad,
                              const Variable& variable) {
  return ApplyDense(scope, grad.dense, variable);
}

IndexedSlices Optimizer::SumRepeatedRows(const Scope& scope, const IndexedSlices& grad) {
  // TensorFlow 1's _deduplicate_indexed_slices, op for op.
  ops::UniqueOutput unique = ops::Unique(scope, grad.indices);
  Output count = ops::Reshape(scope, ops::Slice(scope, ops::Shape(scope, unique.y), {0}, {1}),
                              Tensor::FromVector(std::vector<int32_t>{}));
  return IndexedSlices{.values = ops::UnsortedSegmentSum(scope, grad.values, unique.idx, count),
                       .indices = unique.y,
                       .dense = grad.dense};
}

// ------------------------------------------------------ GradientDescent

GradientDescent::GradientDescent(GradientDescentOptions options)
    : Optimizer("GradientDescent", options.name, {}), options_(std::move(options)) {}

std::shared_ptr<GradientDescent> GradientDescent::Make(GradientDescentOptions options) {
  return std::shared_ptr<GradientDescent>(new GradientDescent(std::move(options)));
}

Output GradientDescent::ApplySparse(const Scope& scope, const IndexedSlices& grad,
                                    const Variable& variable) {
  Output lr = Hyperparameter("learning_rate", options_.learning_rate, variable.dtype());
  return ops::ResourceScatterAdd(scope, variable.handle(), grad.indices,
                                 ops::Mul(scope, ops::Neg(scope, grad.values), lr));
}

Output GradientDescent::ApplyDense(const Scope& scope, const Output& grad,
                                   const Variable& variable) {
  return ops::ResourceApplyGradientDescent(
      scope, variable.handle(),
      Hyperparameter("learning_rate", options_.learning_rate, variable.dtype()), grad);
}

// ------------------------------------------------------------- Momentum

Momentum::Momentum(MomentumOptions options)
    : Optimizer("Momentum", options.name, {"momentum"}), options_(std::move(options)) {}

std::shared_ptr<Momentum> Momentum::Make(MomentumOptions options) {
  return std::shared_ptr<Momentum>(new Momentum(std::move(options)));
}

void Momentum::CreateSlots(const Scope& root,
                           const std::vector<std::shared_ptr<Variable>>& variables) {
  for (const auto& v : variables) MakeSlot(root, v, "momentum");
}

Output Momentum::ApplyDense(const Scope& scope, const Output& grad, const Variable& variable) {
  std::shared_ptr<Variable> accum = GetSlotVariable(variable, "momentum");
  return ops::ResourceApplyMomentum(
      scope, variable.handle(), accum->handle(),
      Hyperparameter("learning_rate", options_.learning_rate, variable.dtype()), grad,
      Hyperparameter("momentum", options_.momentum, variable.dtype()), options_.use_nesterov);
}

Output Momentum::ApplySparse(const Scope& scope, const IndexedSlices& grad,
                             const Variable& variable) {
  IndexedSlices summed = SumRepeatedRows(scope, grad);
  std::shared_ptr<Variable> accum = GetSlotVariable(variable, "momentum");
  return ops::ResourceSparseApplyMomentum(
      scope, variable.handle(), accum->handle(),
      Hyperparameter("learning_rate", options_.learning_rate, variable.dtype()), summed.values,
      summed.indices, Hyperparameter("momentum", options_.momentum, variable.dtype()),
      options_.use_nesterov);
}

// ----------------------------------------------------------------- Adam

Adam::Adam(AdamOptions options, std::string type_name)
    : Optimizer(std::move(type_name), options.name, {"m", "v"}), options_(std::move(options)) {}

std::shared_ptr<Adam> Adam::Make(AdamOptions options) {
  return std::shared_ptr<Adam>(new Adam(std::move(options), "Adam"));
}

void Adam::CreateSlots(const Scope& root, const std::vector<std::shared_ptr<Variable>>& variables) {
  // TensorFlow 1 places the beta powers with the first variable by name.
  const Variable& first =
      **std::min_element(variables.begin(), variables.end(),
                         [](const auto& a, const auto& b) { return a->name() < b->name(); });
  MakeNonSlotVariable(root, "beta1_power", options_.beta1, first);
  MakeNonSlotVariable(root, "beta2_power", options_.beta2, first);
  for (const auto& v : variables) {
    MakeSlot(root, v, "m");
    MakeSlot(root, v, "v");
  }
}

Output Adam::ApplyDense(const Scope& scope, const Output& grad, const Variable& variable) {
  const DataType dtype = variable.dtype();
  std::shared_ptr<Variable> m = GetSlotVariable(variable, "m");
  std::shared_ptr<Variable> v = GetSlotVariable(variable, "v");
  Output beta1_power = CastTo(scope, GetNonSlotVariable("beta1_power")->Read(scope), dtype);
  Output beta2_power = CastTo(scope, GetNonSlotVariable("beta2_power")->Read(scope), dtype);
  return ops::ResourceApplyAdam(
      scope, variable.handle(), m->handle(), v->handle(), beta1_power, beta2_power,
      Hyperparameter("learning_rate", options_.learning_rate, dtype),
      Hyperparameter("beta1", options_.beta1, dtype),
      Hyperparameter("beta2", options_.beta2, dtype),
      Hyperparameter("epsilon", options_.epsilon, dtype), grad, options_.use_nesterov);
}

Output Adam::BiasCorrectedRate(const Scope& scope, DataType dtype) {
  // lr * sqrt(1 - beta2_power) / (1 - beta1_power), as graph ops.
  Output one = Hyperparameter("one", 1.0, dtype);
  Output beta1_power = CastTo(scope, GetNonSlotVariable("beta1_power")->Read(scope), dtype);
  Output beta2_power = CastTo(scope, GetNonSlotVariable("beta2_power")->Read(scope), dtype);
  return ops::Div(scope,
                  ops::Mul(scope, Hyperparameter("learning_rate", options_.learning_rate, dtype),
                           ops::Sqrt(scope, ops::Sub(scope, one, beta2_power))),
                  ops::Sub(scope, one, beta1_power));
}

Output Adam::ApplySparse(const Scope& scope, const IndexedSlices& grad, const Variable& variable) {
  // TensorFlow 1's AdamOptimizer._apply_sparse_shared: m and v decay as
  // wholes, the summed rows are added to them, and the whole variable moves.
  // It has no Nesterov form; ResourceApplyAdam's on the dense gradient is
  // the same update.
  if (options_.use_nesterov) return Optimizer::ApplySparse(scope, grad, variable);
  const DataType dtype = variable.dtype();
  IndexedSlices summed = SumRepeatedRows(scope, grad);
  Output lr = BiasCorrectedRate(scope, dtype);
  Output one = Hyperparameter("one", 1.0, dtype);
  Output epsilon = Hyperparameter("epsilon", options_.epsilon, dtype);
  // slot = slot * beta, then slot[indices] += rows * (1 - beta); returns
  // the slot's new value.
  auto decay_then_add = [&](const char* slot_name, const char* beta_name, double beta_value,
                            Output rows) {
    const Variable& slot = *GetSlotVariable(variable, slot_name);
    Output beta = Hyperparameter(beta_name, beta_value, dtype);
    Output scaled = ops::Mul(scope, rows, ops::Sub(scope, one, beta));
    Output decayed = slot.Assign(scope, ops::Mul(scope, slot.Read(scope), beta));
    Output added = ops::ResourceScatterAdd(scope.WithControlDependencies({decayed}), slot.handle(),
                                           summed.indices, scaled);
    return slot.Read(scope.WithControlDependencies({added}));
  };
  Output m = decay_then_add("m", "beta1", options_.beta1, summed.values);
  Output v =
      decay_then_add("v", "beta2", options_.beta2, ops::Mul(scope, summed.values, summed.values));
  Output step =
      ops::Div(scope, ops::Mul(scope, lr, m), ops::Add(scope, ops::Sqrt(scope, v), epsilon));
  return variable.AssignSub(scope, step);
}

std::vector<Output> Adam::Finish(const Scope& scope, const std::vector<Output>& update_ops) {
  // The beta powers advance after every variable's update has read them.
  Scope after = scope.WithControlDependencies(update_ops);
  std::vector<Output> out;
  for (const auto& [power, beta, value] : {std::tuple{"beta1_power", "beta1", options_.beta1},
                                           std::tuple{"beta2_power", "beta2", options_.beta2}}) {
    std::shared_ptr<Variable> v = GetNonSlotVariable(power);
    Output next = ops::Mul(after, v->Read(after), Hyperparameter(beta, value, DT_FLOAT));
    out.push_back(v->Assign(after, next));
  }
  return out;
}

// ------------------------------------------------------------- LazyAdam

LazyAdam::LazyAdam(AdamOptions options) : Adam(std::move(options), "LazyAdam") {}

std::shared_ptr<LazyAdam> LazyAdam::Make(AdamOptions options) {
  return std::shared_ptr<LazyAdam>(new LazyAdam(std::move(options)));
}

Output LazyAdam::ApplySparse(const Scope& scope, const IndexedSlices& grad,
                             const Variable& variable) {
  // tf.contrib.opt.LazyAdamOptimizer's update: only the summed rows' m, v
  // and values change.
  const DataType dtype = variable.dtype();
  const AdamOptions& o = options();
  IndexedSlices summed = SumRepeatedRows(scope, grad);
  Output lr = BiasCorrectedRate(scope, dtype);
  Output one = Hyperparameter("one", 1.0, dtype);
  // beta * slot[indices] + (1 - beta) * rows, written back to those rows.
  auto moment = [&](const char* slot_name, const char* beta_name, double beta_value, Output rows,
                    Output* update) {
    const Variable& slot = *GetSlotVariable(variable, slot_name);
    Output beta = Hyperparameter(beta_name, beta_value, dtype);
    Output next = ops::Add(scope, ops::Mul(scope, beta, slot.SparseRead(scope, summed.indices)),
                           ops::Mul(scope, ops::Sub(scope, one, beta), rows));
    *update = ops::ResourceScatterUpdate(scope, slot.handle(), summed.indices, next);
    return next;
  };
  Output m_update, v_update;
  Output m = moment("m", "beta1", o.beta1, summed.values, &m_update);
  Output v = moment("v", "beta2", o.beta2, ops::Square(scope, summed.values), &v_update);
  Output direction = m;
  if (o.use_nesterov) {
    // ResourceApplyAdam's Nesterov direction, on the rows.
    Output beta1 = Hyperparameter("beta1", o.beta1, dtype);
    direction = ops::Add(scope, ops::Mul(scope, beta1, m),
                         ops::Mul(scope, ops::Sub(scope, one, beta1), summed.values));
  }
  Output step =
      ops::Div(scope, ops::Mul(scope, lr, direction),
               ops::Add(scope, ops::Sqrt(scope, v), Hyperparameter("epsilon", o.epsilon, dtype)));
  Output var_update = ops::ResourceScatterSub(scope, variable.handle(), summed.indices, step);
  return ops::Group(scope, {var_update, m_update, v_update});
}

// -------------------------------------------------------------- RMSProp

RMSProp::RMSProp(RMSPropOptions options)
    : Optimizer("RMSProp", options.name, {"momentum", "rms"}), options_(std::move(options)) {}

std::shared_ptr<RMSProp> RMSProp::Make(RMSPropOptions options) {
  return std::shared_ptr<RMSProp>(new RMSProp(std::move(options)));
}

void RMSProp::CreateSlots(const Scope& root,
                          const std::vector<std::shared_ptr<Variable>>& variables) {
  // TensorFlow 1 creates "rms" (from ones) before "momentum" (zeros), so
  // "rms" is "<var>/RMSProp" and "momentum" is "<var>/RMSProp_1".
  for (const auto& v : variables) {
    MakeSlot(root, v, "rms", /*fill_value=*/1.0);
    MakeSlot(root, v, "momentum");
  }
}

Output RMSProp::ApplyDense(const Scope& scope, const Output& grad, const Variable& variable) {
  const DataType dtype = variable.dtype();
  return ops::ResourceApplyRMSProp(scope, variable.handle(),
                                   GetSlotVariable(variable, "rms")->handle(),
                                   GetSlotVariable(variable, "momentum")->handle(),
                                   Hyperparameter("learning_rate", options_.learning_rate, dtype),
                                   Hyperparameter("decay", options_.decay, dtype),
                                   Hyperparameter("momentum", options_.momentum, dtype),
                                   Hyperparameter("epsilon", options_.epsilon, dtype), grad);
}

Output RMSProp::ApplySparse(const Scope& scope, const IndexedSlices& grad,
                            const Variable& variable) {
  const DataType dtype = variable.dtype();
  IndexedSlices summed = SumRepeatedRows(scope, grad);
  return ops::ResourceSparseApplyRMSProp(
      scope, variable.handle(), GetSlotVariable(variable, "rms")->handle(),
      GetSlotVariable(variable, "momentum")->handle(),
      Hyperparameter("learning_rate", options_.learning_rate, dtype),
      Hyperparameter("decay", options_.decay, dtype),
      Hyperparameter("momentum", options_.momentum, dtype),
      Hyperparameter("epsilon", options_.epsilon, dtype), summed.values, summed.indices);
}

// -------------------------------------------------------------- Adagrad

Adagrad::Adagrad(AdagradOptions options)
    : Optimizer("Adagrad", options.name, {"accumulator"}), options_(std::move(options)) {}

std::shared_ptr<Adagrad> Adagrad::Make(AdagradOptions options) {
  return std::shared_ptr<Adagrad>(new Adagrad(std::move(options)));
}

void Adagrad::CreateSlots(const Scope& root,
                          const std::vector<std::shared_ptr<Variable>>& variables) {
  if (!(options_.initial_accumulator_value > 0)) {
    root.UpdateStatus(InvalidArgumentError(name(), ": initial_accumulator_value must be positive, ",
                                           "got ", options_.initial_accumulator_value));
    return;
  }
  for (const auto& v : variables) {
    MakeSlot(root, v, "accumulator", options_.initial_accumulator_value);
  }
}

Output Adagrad::ApplyDense(const Scope& scope, const Output& grad, const Variable& variable) {
  return ops::ResourceApplyAdagrad(
      scope, variable.handle(), GetSlotVariable(variable, "accumulator")->handle(),
      Hyperparameter("learning_rate", options_.learning_rate, variable.dtype()), grad);
}

Output Adagrad::ApplySparse(const Scope& scope, const IndexedSlices& grad,
                            const Variable& variable) {
  IndexedSlices summed = SumRepeatedRows(scope, grad);
  return ops::ResourceSparseApplyAdagrad(
      scope, variable.handle(), GetSlotVariable(variable, "accumulator")->handle(),
      Hyperparameter("learning_rate", options_.learning_rate, variable.dtype()), summed.values,
      summed.indices);
}

// ----------------------------------------------------------------- Ftrl

Ftrl::Ftrl(FtrlOptions options)
    : Optimizer("Ftrl", options.name, {"accum", "linear"}), options_(std::move(options)) {}

std::shared_ptr<Ftrl> Ftrl::Make(FtrlOptions options) {
  return std::shared_ptr<Ftrl>(new Ftrl(std::move(options)));
}

void Ftrl::CreateSlots(const Scope& root, const std::vector<std::shared_ptr<Variable>>& variables) {
  // TensorFlow 1's checks, at the same moment (its constructor's).
  const FtrlOptions& o = options_;
  Status s;
  if (!(o.learning_rate_power <= 0)) {
    s = InvalidArgumentError(name(), ": learning_rate_power must be <= 0, got ",
                             o.learning_rate_power);
  } else if (!(o.initial_accumulator_value >= 0)) {
    s = InvalidArgumentError(name(), ": initial_accumulator_value must be >= 0, got ",
                             o.initial_accumulator_value);
  } else if (!(o.l1 >= 0) || !(o.l2 >= 0)) {
    s = InvalidArgumentError(name(), ": l1 and l2 must be >= 0, got ", o.l1, " and ", o.l2);
  }
  if (!s.ok()) {
    root.UpdateStatus(s);
    return;
  }
  // "accum" before "linear": "<var>/Ftrl" and "<var>/Ftrl_1", as TensorFlow 1
  // names them.
  for (const auto& v : variables) {
    MakeSlot(root, v, "accum", o.initial_accumulator_value);
    MakeSlot(root, v, "linear");
  }
}

Output Ftrl::ApplyDense(const Scope& scope, const Output& grad, const Variable& variable) {
  const DataType dtype = variable.dtype();
  return ops::ResourceApplyFtrl(
      scope, variable.handle(), GetSlotVariable(variable, "accum")->handle(),
      GetSlotVariable(variable, "linear")->handle(), grad,
      Hyperparameter("learning_rate", options_.learning_rate, dtype),
      Hyperparameter("l1", options_.l1, dtype), Hyperparameter("l2", options_.l2, dtype),
      Hyperparameter("learning_rate_power", options_.learning_rate_power, dtype));
}

Output Ftrl::ApplySparse(const Scope& scope, const IndexedSlices& grad, const Variable& variable) {
  const DataType dtype = variable.dtype();
  IndexedSlices summed = SumRepeatedRows(scope, grad);
  return ops::ResourceSparseApplyFtrl(
      scope, variable.handle(), GetSlotVariable(variable, "accum")->handle(),
      GetSlotVariable(variable, "linear")->handle(), summed.values, summed.indices,
      Hyperparameter("learning_rate", options_.learning_rate, dtype),
      Hyperparameter("l1", options_.l1, dtype), Hyperparameter("l2", options_.l2, dtype),
      Hyperparameter("learning_rate_power", options_.learning_rate_power, dtype));
}

}  // namespace ckflow
