#include "ops/variables.h"

#include <map>
#include <tuple>
#include <utility>

#include "base/mutex.h"
#include "ops/standard_ops.h"
#include "ops/unique_names_internal.h"
#include "ops/variable_ops.h"
#include "ops/variable_resource_internal.h"

namespace ckflow {
namespace {

// The graph's variables and creator hooks.
struct VariableList : GraphAttachment {
  std::vector<std::shared_ptr<Variable>> variables;  // creation order
  std::map<int, VariableCreatorHook> hooks;          // by id: registration order
  int next_hook_id = 0;
};

// Graph::Attachment creates the list on first use, which does not change
// what the graph means; graphs are never const objects themselves.
VariableList& ListOf(const Graph& graph) {
  return const_cast<Graph&>(graph).Attachment<VariableList>();
}

// Whether the eager variable behind `handle` (an executed VarHandleOp) holds
// a value.
bool IsAssigned(const Output& handle) {
  StatusOr<std::shared_ptr<internal::VariableResource>> variable =
      internal::VariableFromHandle(handle.value(), "variable");
  if (!variable.ok()) return false;
  MutexLock lock(&(*variable)->mu());
  return (*variable)->initialized_locked();
}

}  // namespace

std::shared_ptr<Variable> Variable::Create(const Scope& scope, const std::string& name,
                                           Output initial_value, VariableOptions options) {
  if (!scope.ok()) return nullptr;
  if (!initial_value.valid()) {
    scope.UpdateStatus(InvalidArgumentError("variable '", name, "': initial value is invalid"));
    return nullptr;
  }
  return CreateImpl(
      scope, name, initial_value.dtype(), initial_value.shape(),
      [initial_value](const Scope&) { return initial_value; }, std::move(options));
}

std::shared_ptr<Variable> Variable::Create(const Scope& scope, const std::string& name,
                                           DataType dtype, const TensorShape& shape,
                                           const Initializer& initializer,
                                           VariableOptions options) {
  return CreateThenBind(scope, name, dtype, shape, initializer, std::move(options),
                        /*restore_waiting=*/false, nullptr);
}

std::shared_ptr<Variable> Variable::CreateThenBind(
    const Scope& scope, const std::string& name, DataType dtype, const TensorShape& shape,
    const Initializer& initializer, VariableOptions options, bool restore_waiting,
    const std::function<void(const std::shared_ptr<Variable>&)>& bind) {
  if (!scope.ok()) return nullptr;
  if (!initializer) {
    scope.UpdateStatus(InvalidArgumentError("variable '", name, "': no initializer"));
    return nullptr;
  }
  return CreateImpl(
      scope, name, dtype, shape,
      [&](const Scope& init_scope) { return initializer(init_scope, dtype, shape); },
      std::move(options), bind ? &bind : nullptr, restore_waiting);
}

std::shared_ptr<Variable> Variable::CreateTracked(Trackable& owner, const Scope& scope,
                                                  const std::string& name, DataType dtype,
                                                  const TensorShape& shape,
                                                  const Initializer& initializer,
                                                  VariableOptions options) {
  return CreateThenBind(scope, name, dtype, shape, initializer, std::move(options),
                        owner.HasDeferredRestore(name),
                        [&](const std::shared_ptr<Variable>& v) { owner.Track(name, v); });
}

std::shared_ptr<Variable> Variable::CreateImpl(
    const Scope& scope, const std::string& name, DataType dtype, const PartialShape& shape,
    const std::function<Output(const Scope&)>& make_initial_value, VariableOptions options,
    const std::function<void(const std::shared_ptr<Variable>&)>* bind, bool restore_waiting) {
  if (name.empty()) {
    scope.UpdateStatus(InvalidArgumentError("a variable needs a name"));
    return nullptr;
  }
  if (!IsSupportedDataType(dtype) || dtype == DT_RESOURCE) {
    scope.UpdateStatus(
        InvalidArgumentError("variable '", name, "' cannot hold ", DataTypeName(dtype)));
    return nullptr;
  }
  Scope outer = scope.WithNoControlDependencies();
  if (!options.device.empty()) outer = outer.WithDevice(options.device);
  options.device = outer.device();
  // TensorFlow's layout: the handle node is named like the variable's name
  // scope, which holds its other ops.
  Scope var_scope = outer.NewSubScope(name);
  const std::string& shared_name = var_scope.name_prefix();
  AttrMap attrs;
  attrs.Set("dtype", dtype);
  attrs.Set("shape", shape);
  attrs.Set("shared_name", shared_name);
  attrs.Set("container", std::string());
  StatusOr<Node*> handle_node = scope.graph().AddNode(NodeSpec{.name = shared_name,
                                                               .op_def = &StandardOp("VarHandleOp"),
                                                               .attrs = std::move(attrs),
                                                               .device = options.device});
  if (!handle_node.ok()) {
    scope.UpdateStatus(handle_node.status());
    return nullptr;
  }
  // Eager: the handle is a permanent node (the variable outlives any step),
  // run here so its ops have the handle's value.
  if (scope.eager()) {
    if (Status s = scope.eager_context()->Execute(**handle_node); !s.ok()) {
      scope.UpdateStatus(s);
      return nullptr;
    }
  }

  // The initial value, checked against the declaration, and its assignment.
  auto build_initializer = [&]() -> std::pair<Output, Output> {
    Output initial_value = make_initial_value(var_scope.NewSubScope("Initializer"));
    if (!scope.ok()) return {};
    if (!initial_value.valid()) {
      scope.UpdateStatus(
          InvalidArgumentError("variable '", shared_name, "': the initializer built no value"));
      return {};
    }
    if (initial_value.dtype() != dtype || !initial_value.shape().IsCompatibleWith(shape)) {
      scope.UpdateStatus(InvalidArgumentError(
          "variable '", shared_name, "' is ", DataTypeName(dtype), shape.ToString(),
          " but its initializer built ", DataTypeName(initial_value.dtype()),
          initial_value.shape().ToString(), " (", initial_value.name(), ")"));
      return {};
    }
    return {initial_value, ops::AssignVariableOp(var_scope.WithOpName("Assign"),
                                                 Output(*handle_node), initial_value)};
  };
  // With a restore to run first, the initializer waits (see CreateThenBind).
  const bool initialize_later = bind != nullptr && restore_waiting && scope.eager();
  Output initial_value, initializer;
  if (!initialize_later) {
    std::tie(initial_value, initializer) = build_initializer();
    if (!initial_value.valid()) return nullptr;
  }

  auto variable = std::shared_ptr<Variable>(new Variable());
  variable->name_ = shared_name;
  variable->dtype_ = dtype;
  variable->shape_ = shape;
  variable->options_ = std::move(options);
  variable->handle_ = Output(*handle_node);
  variable->initial_value_ = initial_value;
  variable->initializer_ = initializer;
  if (scope.eager()) {
    // Assigned already; holding the initial value would double the
    // variable's memory, and value() reads afresh each time.
    variable->initial_value_ = Output();
    variable->initializer_ = Output();
    // Unowned: the graph's variable list holds the variable.
    variable->read_scope_ = var_scope.NewSubScope("Read").WithOpName("ReadVariableOp").Unowned();
  } else {
    variable->value_ = variable->Read(var_scope.NewSubScope("Read").WithOpName("ReadVariableOp"));
  }
  if (!scope.ok()) return nullptr;

  VariableList& list = ListOf(scope.graph());
  list.variables.push_back(variable);
  // A hook may create variables (and so add hooks): iterate over a copy.
  std::vector<VariableCreatorHook> hooks;
  for (const auto& [id, hook] : list.hooks) hooks.push_back(hook);
  for (const VariableCreatorHook& hook : hooks) hook(variable);
  if (bind != nullptr) (*bind)(variable);
  if (initialize_later && !IsAssigned(variable->handle_)) {
    // The restore did not assign it (its status says why).
    if (!build_initializer().first.valid()) return nullptr;
  }
  return variable;
}

Output Variable::value() const { return read_scope_ ? Read(*read_scope_) : value_; }

Output Variable::Read(const Scope& scope) const {
  return ops::ReadVariableOp(scope, handle_, dtype_, shape_);
}

Status Variable::CheckAssignable(const Output& value, std::string_view what) const {
  if (!value.valid()) {
    return InvalidArgumentError("variable '", name_, "': ", what, " of an invalid value");
  }
  if (value.dtype() != dtype_ || !value.shape().IsCompatibleWith(shape_)) {
    return InvalidArgumentError(
        "variable '", name_, "' is ", DataTypeName(dtype_), shape_.ToString(), "; cannot ", what,
        " ", DataTypeName(value.dtype()), value.shape().ToString(), " (", value.name(), ")");
  }
  return OkStatus();
}

Output Variable::Assign(const Scope& scope, Output value) const {
  if (Status s = CheckAssignable(value, "assign"); !s.ok()) {
    scope.UpdateStatus(s);
    return Output();
  }
  return ops::AssignVariableOp(scope, handle_, value);
}

Output Variable::SparseRead(const Scope& scope, ops::Input indices) const {
  return ops::ResourceGather(scope, handle_, std::move(indices), dtype_, shape_);
}

Output Variable::AssignAdd(const Scope& scope, Output delta) const {
  if (Status s = CheckAssignable(delta, "add"); !s.ok()) {
    scope.UpdateStatus(s);
    return Output();
  }
  return ops::AssignAddVariableOp(scope, handle_, delta);
}

Output Variable::AssignSub(const Scope& scope, Output delta) const {
  if (Status s = CheckAssignable(delta, "subtract"); !s.ok()) {
    scope.UpdateStatus(s);
    return Output();
  }
  return ops::AssignSubVariableOp(scope, handle_, delta);
}

Output Variable::IsInitialized(const Scope& scope) const {
  return ops::VarIsInitializedOp(scope, handle_);
}

std::string SaveSliceInfo::Spec() const {
  std::string spec;
  for (int64_t d : full_shape) spec += std::to_string(d) + " ";
  for (size_t d = 0; d < var_offset.size() && d < var_shape.size(); ++d) {
    if (d) spec += ":";
    spec += std::to_string(var_offset[d]) + "," + std::to_string(var_shape[d]);
  }
  return spec;
}

std::vector<SaveableAttribute> Variable::Attributes() const {
  // Not `return {SaveableAttribute{...}}`: an initializer list can only be
  // copied from, so each string and the shape would be copied twice, and a
  // restore asks every variable once.
  std::vector<SaveableAttribute> attributes(1);
  SaveableAttribute& a = attributes[0];
  a.name = "VARIABLE_VALUE";
  a.full_name = options_.save_slice_info ? options_.save_slice_info->full_name : name_;
  if (options_.save_slice_info) a.slice_spec = options_.save_slice_info->Spec();
  a.handle = handle_;
  a.dtype = dtype_;
  a.shape = shape_;
  a.shared_name = name_;
  a.device = options_.device;
  return attributes;
}

std::string Variable::TypeName() const {
  return "Variable " + std::string(DataTypeName(dtype_)) + shape_.ToString();
}

int AddVariableCreatorHook(Graph& graph, VariableCreatorHook hook) {
  VariableList& list = ListOf(graph);
  int id = list.next_hook_id++;
  list.hooks.emplace(id, std::move(hook));
  return id;
}

void RemoveVariableCreatorHook(Graph& graph, int id) { ListOf(graph).hooks.erase(id); }

std::vector<std::shared_ptr<Variable>> GlobalVariables(const Graph& graph) {
  return ListOf(graph).variables;
}

std::vector<std::shared_ptr<Variable>> TrainableVariables(const Graph& graph) {
  std::vector<std::shared_ptr<Variable>> out;
  for (const auto& v : ListOf(graph).variables) {
    if (v->trainable()) out.push_back(v);
  }
  return out;
}

Output VariablesInitializer(const Scope& scope,
                            const std::vector<std::shared_ptr<Variable>>& variables) {
  std::vector<Output> initializers;
  for (const auto& v : variables) {
    if (v == nullptr) {
      scope.UpdateStatus(InvalidArgumentError("VariablesInitializer: a variable is null"));
      return Output();
    }
    initializers.push_back(v->initializer());
  }
  return scope.WithControlDependencies(initializers).AddNode(StandardOp("NoOp"), {});
}

Output GlobalVariablesInitializer(const Scope& scope) {
  return VariablesInitializer(internal::WithUniqueOpName(scope, "init"),
                              GlobalVariables(scope.graph()));
}

}  // namespace ckflow
