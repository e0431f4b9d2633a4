// Resource variables, TensorFlow-1 graph style; in an eager scope
// (graph/eager.h) they hold their value from creation on.
//
// A Variable is a graph-side object: a VarHandleOp node (the handle), an
// initializer op, and a Trackable that owns one checkpointed value,
// VARIABLE_VALUE. The value itself lives in each Session's ResourceMgr, so
// two sessions over one graph hold two independent values. Reading a
// variable that was never initialized or restored fails with
// FailedPrecondition naming it.
//
//   auto w = Variable::Create(scope, "w", ops::RandomNormal(scope, {3, 10}));
//   Output y = ops::MatMul(scope, x, w->value());
//   session->Run({}, {}, {GlobalVariablesInitializer(scope)});
//
// Every variable is created through Variable::Create, which runs the graph's
// creator hooks (AddVariableCreatorHook) after the variable exists: that is
// the one place where other layers (checkpoints restoring on creation) can
// act on new variables.
//
// Thread safety: creation and graph building are single-threaded. Variable
// ops may run concurrently in sessions; each op locks the variable it uses.

#ifndef CKFLOW_OPS_VARIABLES_H_
#define CKFLOW_OPS_VARIABLES_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "graph/trackable.h"
#include "ops/input.h"

namespace ckflow {

// Builds a variable's initial value of `dtype` and `shape` through `scope`
// (the variable's "Initializer" name scope, as in TensorFlow). See
// ops/initializers.h for Zeros, GlorotUniform, ...
using Initializer =
    std::function<Output(const Scope& scope, DataType dtype, const TensorShape& shape)>;

// Where a variable lies inside a larger one it is a part of (TensorFlow's
// Variable.SaveSliceInfo): checkpoints save it as that slice of the tensor
// `full_name`. See ops/partitioned_variables.h, which makes such parts.
struct SaveSliceInfo {
  std::string full_name;
  std::vector<int64_t> full_shape;
  std::vector<int64_t> var_offset;
  std::vector<int64_t> var_shape;
  // "10 4 0,4:0,4": the full shape, then each dimension's offset,length.
  std::string Spec() const;
};

struct VariableOptions {
  bool trainable = true;
  std::string device;  // e.g. "/cpu:1"; checkpoints shard saves by device
  // Set for a part of a partitioned variable: its checkpoint key is then
  // full_name, holding this variable as one slice.
  std::optional<SaveSliceInfo> save_slice_info;
};

class Variable : public Trackable {
 public:
  // A variable named `name` in `scope`, initialized from `initial_value`,
  // whose dtype and shape it takes. As in TensorFlow, the name is made unique
  // ("w_1" if "w" is taken) and the handle node carries it: its full name is
  // the variable's shared name ("dense/kernel"), and its other ops live in
  // that name scope ("dense/kernel/Assign", "dense/kernel/Read/..."). The
  // variable ignores the scope's control dependencies (TensorFlow's
  // init_scope). Returns null, with the error sticky in the scope, if the
  // scope has an error, `name` is empty or `initial_value` is invalid.
  static std::shared_ptr<Variable> Create(const Scope& scope, const std::string& name,
                                          Output initial_value, VariableOptions options = {});
  // The same with the initial value built by `initializer` inside the
  // variable's name scope ("dense/kernel/Initializer/..."). Also null if
  // the initializer returns a value of another dtype or shape.
  static std::shared_ptr<Variable> Create(const Scope& scope, const std::string& name,
                                          DataType dtype, const TensorShape& shape,
                                          const Initializer& initializer,
                                          VariableOptions options = {});

  // TensorFlow's Trackable._add_variable_with_custom_getter, for an object
  // creating a variable it owns (a layer's weight, a Module's variable):
  // Create, then owner.Track(name, variable). In an eager scope where a
  // restore waits for `owner`'s child `name` (Checkpoint::Restore before the
  // variable exists), the initializer is not run at all: the checkpointed
  // value is the initial value, read into the new variable as it is
  // tracked. The initializer runs only if that restore did not assign it
  // (a value that does not fit, which the restore's status reports).
  static std::shared_ptr<Variable> CreateTracked(Trackable& owner, const Scope& scope,
                                                 const std::string& name, DataType dtype,
                                                 const TensorShape& shape,
                                                 const Initializer& initializer,
                                                 VariableOptions options = {});

  const std::string& name() const { return name_; }  // shared name
  DataType dtype() const { return dtype_; }
  const PartialShape& shape() const { return shape_; }
  bool trainable() const { return options_.trainable; }
  const std::string& device() const { return options_.device; }
  const std::optional<SaveSliceInfo>& save_slice_info() const { return options_.save_slice_info; }

  Output handle() const { return handle_; }  // DT_RESOURCE
  // Invalid for a variable of an eager scope, which is assigned its
  // initial value (or a checkpointed one) when it is created.
  Output initial_value() const { return initial_value_; }
  Output initializer() const override { return initializer_; }  // AssignVariableOp
  // The variable's value, read by one ReadVariableOp made at creation; in
  // an eager scope, a new read (the current value) on every call.
  Output value() const;
  // A new read of the variable (e.g. after a control dependency).
  Output Read(const Scope& scope) const;
  // The rows at `indices` (int32/int64, any shape), read without copying
  // the rest: ResourceVariable.sparse_read, a ResourceGather. Its gradient
  // is sparse, so an optimizer updates only the rows read.
  Output SparseRead(const Scope& scope, ops::Input indices) const;
  // Assignments; each returns the op (0 outputs unless noted).
  Output Assign(const Scope& scope, Output value) const;
  Output AssignAdd(const Scope& scope, Output delta) const;
  Output AssignSub(const Scope& scope, Output delta) const;
  Output IsInitialized(const Scope& scope) const;  // bool scalar

  std::vector<SaveableAttribute> Attributes() const override;
  std::string TypeName() const override;

 private:
  Variable() = default;
  // The one place variables come into being: builds the ops, registers the
  // variable with its graph and runs the creator hooks, then `bind`, if
  // set; with `restore_waiting` in an eager scope the initializer runs
  // after that, only if it left the variable unassigned.
  static std::shared_ptr<Variable> CreateImpl(
      const Scope& scope, const std::string& name, DataType dtype, const PartialShape& shape,
      const std::function<Output(const Scope&)>& make_initial_value, VariableOptions options,
      const std::function<void(const std::shared_ptr<Variable>&)>* bind = nullptr,
      bool restore_waiting = false);
  // Create, then `bind(variable)` (if set), which runs any restore waiting
  // for it (Track, a slot's OnSlotCreated). With `restore_waiting` in an
  // eager scope the initializer is built only if the restore did not assign
  // the variable.
  friend class Optimizer;
  static std::shared_ptr<Variable> CreateThenBind(
      const Scope& scope, const std::string& name, DataType dtype, const TensorShape& shape,
      const Initializer& initializer, VariableOptions options, bool restore_waiting,
      const std::function<void(const std::shared_ptr<Variable>&)>& bind);
  // InvalidArgument unless `value` fits this variable's dtype and shape.
  Status CheckAssignable(const Output& value, std::string_view what) const;

  std::string name_;
  DataType dtype_ = DT_INVALID;
  PartialShape shape_;
  VariableOptions options_;
  Output handle_;
  Output initial_value_;
  Output initializer_;
  Output value_;
  std::optional<Scope> read_scope_;  // eager only: where value() reads
};

// A hook called with every variable created in a graph, right after
// creation. Returns an id for RemoveVariableCreatorHook.
using VariableCreatorHook = std::function<void(const std::shared_ptr<Variable>&)>;
int AddVariableCreatorHook(Graph& graph, VariableCreatorHook hook);
void RemoveVariableCreatorHook(Graph& graph, int id);

// All variables created in `graph`, in creation order; the trainable ones.
std::vector<std::shared_ptr<Variable>> GlobalVariables(const Graph& graph);
std::vector<std::shared_ptr<Variable>> TrainableVariables(const Graph& graph);

// A NoOp that runs the initializers of `variables` (TensorFlow's
// variables_initializer), or of every variable of the scope's graph
// existing now (global_variables_initializer).
Output VariablesInitializer(const Scope& scope,
                            const std::vector<std::shared_ptr<Variable>>& variables);
Output GlobalVariablesInitializer(const Scope& scope);

}  // namespace ckflow

#endif  // CKFLOW_OPS_VARIABLES_H_
