// Resource variables, TensorFlow-1 graph style.
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
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/trackable.h"

namespace ckflow {

struct VariableOptions {
  bool trainable = true;
  std::string device;  // e.g. "/cpu:1"; checkpoints shard saves by device
};

class Variable : public Trackable {
 public:
  // A variable named `name` in `scope` (its shared name is the full node
  // name, e.g. "dense/kernel"), initialized from `initial_value`, whose dtype
  // and shape it takes. Returns null (with the error sticky in the scope) if
  // `initial_value` is invalid or the name is taken.
  static std::shared_ptr<Variable> Create(const Scope& scope, const std::string& name,
                                          Output initial_value, VariableOptions options = {});

  const std::string& name() const { return name_; }  // shared name
  DataType dtype() const { return dtype_; }
  const PartialShape& shape() const { return shape_; }
  bool trainable() const { return options_.trainable; }
  const std::string& device() const { return options_.device; }

  Output handle() const { return handle_; }           // DT_RESOURCE
  Output initial_value() const { return initial_value_; }
  Output initializer() const override { return initializer_; }  // AssignVariableOp
  // The variable's value, read by one ReadVariableOp made at creation.
  Output value() const { return value_; }
  // A new read of the variable (e.g. after a control dependency).
  Output Read(const Scope& scope) const;
  // Assignments; each returns the op (0 outputs unless noted).
  Output Assign(const Scope& scope, Output value) const;
  Output AssignAdd(const Scope& scope, Output delta) const;
  Output AssignSub(const Scope& scope, Output delta) const;
  Output IsInitialized(const Scope& scope) const;  // bool scalar

  std::vector<SaveableAttribute> Attributes() const override;
  std::string TypeName() const override;

 private:
  Variable() = default;

  std::string name_;
  DataType dtype_ = DT_INVALID;
  PartialShape shape_;
  VariableOptions options_;
  Output handle_;
  Output initial_value_;
  Output initializer_;
  Output value_;
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
