// Optimizers with TensorFlow 1 semantics: GradientDescent, Momentum, Adam
// (and LazyAdam), RMSProp, Adagrad, Ftrl.
//
//   auto optimizer = Adam::Make({.learning_rate = 0.01f});
//   Output train_op = optimizer->Minimize(root, loss);   // all trainable variables
//   for (...) session->Run({{x, batch}}, {}, {train_op});
//
// Minimize = ComputeGradients (symbolic gradients of the loss with respect
// to each variable, ops/gradients.h) + ApplyGradients (one fused update op
// per variable, ops/training_ops.h, then the optimizer's own bookkeeping
// such as Adam's beta powers, then the optional global step increment).
//
// Slot variables (Momentum's "momentum", Adam's "m" and "v", ...) are
// created lazily by the first ApplyGradients that sees a variable, once per
// (variable, slot name), as TensorFlow 1 names them: "dense/kernel/Adam" and
// "dense/kernel/Adam_1", non-trainable, of the variable's dtype and shape.
// They are created through Variable::Create (so variable creator hooks see
// them) and then announced through SlotOwner::OnSlotCreated (so a
// checkpoint restore waiting for the slot runs at that moment). Slots are
// not children of the optimizer in the object graph: checkpoints record
// them per (variable, slot name); GetSlot finds them.
//
// Adam's non-slot variables "beta1_power" and "beta2_power" are created by
// its first ApplyGradients and are the optimizer's first children (sorted
// by name, then any other dependencies), as TensorFlow 1 orders them.
//
// An optimizer builds ops in one graph: using it with a second graph is an
// InvalidArgument (make one optimizer per graph).
//
// Errors: builder methods return an invalid Output (or empty list) and
// leave the error sticky in the scope, like every builder.
//
// Thread safety: graph building is single-threaded. The update ops lock the
// variables they update, so concurrent Session::Run calls are safe.

#ifndef CKFLOW_OPS_OPTIMIZERS_H_
#define CKFLOW_OPS_OPTIMIZERS_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "graph/trackable.h"
#include "ops/gradients.h"
#include "ops/partitioned_variables.h"
#include "ops/variables.h"

namespace ckflow {

// A gradient and the variable it is for. An invalid grad means "no
// gradient" (the loss does not depend on the variable).
struct GradAndVar {
  Output grad;
  std::shared_ptr<Variable> variable;
};

class Optimizer : public SlotOwner {
 public:
  // The name scope of the optimizer's ops and the suffix of its slots.
  const std::string& name() const { return name_; }

  // Ops that update `var_list` (default: every trainable variable of the
  // scope's graph) to decrease `loss`, then increment `global_step` (an
  // int32/int64 scalar variable) if given. Returns the train op: a target
  // for Session::Run. InvalidArgument if no variable gets a gradient.
  Output Minimize(const Scope& scope, Output loss,
                  std::vector<std::shared_ptr<Variable>> var_list = {},
                  const std::shared_ptr<Variable>& global_step = nullptr);

  // The same with the loss computed by `loss_fn`: in an eager scope
  // (graph/eager.h) under a GradientTape, so the update runs at once
  // (layers called in `loss_fn` build on first use, and var_list defaults
  // to the trainable variables existing after it ran); in a graph scope
  // loss_fn is called once and the result minimized as above. Returns the
  // train op (in an eager scope, a NoOp standing for the updates, which
  // have run).
  Output Minimize(const Scope& scope, const std::function<Output()>& loss_fn,
                  std::vector<std::shared_ptr<Variable>> var_list = {},
                  const std::shared_ptr<Variable>& global_step = nullptr);

  // d loss / d variable for each of `var_list` (default: every trainable
  // variable), in order; an invalid grad where the loss does not depend on
  // the variable.
  std::vector<GradAndVar> ComputeGradients(const Scope& scope, Output loss,
                                           std::vector<std::shared_ptr<Variable>> var_list = {});
  // The same for the loss `loss_fn` computes (recorded by a GradientTape in
  // an eager scope), which is also stored in *loss if given.
  std::vector<GradAndVar> ComputeGradients(const Scope& scope,
                                           const std::function<Output()>& loss_fn,
                                           std::vector<std::shared_ptr<Variable>> var_list = {},
                                           Output* loss = nullptr);

  // The update ops for each pair with a gradient (pairs without one are
  // skipped), creating missing slots first. InvalidArgument if no pair has a
  // gradient, a variable is null or listed twice, or a gradient's dtype or
  // shape does not fit its variable.
  Output ApplyGradients(const Scope& scope, const std::vector<GradAndVar>& grads_and_vars,
                        const std::shared_ptr<Variable>& global_step = nullptr);

  // The slot `slot_name` of `variable`, or null if not created (yet).
  std::shared_ptr<Variable> GetSlotVariable(const Variable& variable,
                                            std::string_view slot_name) const;
  std::shared_ptr<Trackable> GetSlot(const Trackable& variable,
                                     std::string_view slot_name) const override;
  // Sorted: {"m", "v"} for Adam.
  // A PartitionedVariable's slot is the PartitionedVariable of its parts'
  // slots (each a slice of the whole, as TensorFlow 1's slot_creator makes
  // them), once every part has one.
  std::vector<std::string> SlotNames() const override;

  // The non-slot variable `name` ("beta1_power"), or null if not created.
  std::shared_ptr<Variable> GetNonSlotVariable(std::string_view name) const;

  // Non-slot variables first (sorted by name), then other dependencies.
  std::vector<std::pair<std::string, std::shared_ptr<Trackable>>> Children() const override;
  std::string TypeName() const override { return type_name_; }

 protected:
  Optimizer(std::string type_name, std::string name, std::vector<std::string> slot_names);

  // TensorFlow 1's _create_slots: make the slots (and non-slot variables)
  // `variables` need, through MakeSlot / MakeNonSlotVariable. Runs in a root
  // scope without control dependencies.
  virtual void CreateSlots(const Scope& root,
                           const std::vector<std::shared_ptr<Variable>>& variables) = 0;
  // TensorFlow 1's _apply_dense: the update op of one variable.
  virtual Output ApplyDense(const Scope& scope, const Output& grad, const Variable& variable) = 0;
  // TensorFlow 1's _resource_apply_sparse_duplicate_indices: the update op
  // of one variable from a sparse gradient (ops/gradients.h; rows may
  // repeat), for a gradient AsIndexedSlices recognizes. The default applies
  // the dense form through ApplyDense.
  virtual Output ApplySparse(const Scope& scope, const IndexedSlices& grad,
                             const Variable& variable);
  // TensorFlow 1's _deduplicate_indexed_slices: each row once (Unique, in
  // order of first appearance), its values summed (UnsortedSegmentSum).
  // Optimizers whose update is not linear in the gradient (all but
  // GradientDescent) call it first: a row looked up twice in a step gets
  // one update with the sum of its gradients, as in TensorFlow.
  static IndexedSlices SumRepeatedRows(const Scope& scope, const IndexedSlices& grad);
  // TensorFlow 1's _finish: runs after `update_ops`; the default does
  // nothing more. Returns extra ops the train op must wait for.
  virtual std::vector<Output> Finish(const Scope& scope, const std::vector<Output>& update_ops);

  // The slot `slot_name` of `variable`, created filled with `fill_value`
  // and announced through OnSlotCreated if it does not exist yet.
  std::shared_ptr<Variable> MakeSlot(const Scope& root, const std::shared_ptr<Variable>& variable,
                                     const std::string& slot_name, double fill_value = 0.0);
  // The non-slot variable `name`, a float32 scalar created with
  // `initial_value` on `colocate_with`'s device if it does not exist yet,
  // and tracked as a child (so a deferred restore of it runs).
  std::shared_ptr<Variable> MakeNonSlotVariable(const Scope& root, const std::string& name,
                                                float initial_value, const Variable& colocate_with);
  // A scalar hyperparameter of `dtype`: one Const per (name, dtype) in each
  // ApplyGradients call, under the optimizer's name scope. REQUIRES: called
  // from ApplyDense or Finish.
  Output Hyperparameter(const std::string& name, double value, DataType dtype);
  // `value` converted to `dtype` (a Cast unless it already is).
  Output CastTo(const Scope& scope, Output value, DataType dtype);

 private:
  // A variable's slots, by name in the order they were made.
  struct VariableSlots {
    std::weak_ptr<Variable> variable;  // a dead variable's record is stale
    std::vector<std::pair<std::string, std::shared_ptr<Variable>>> slots;
  };
  // The live record of `variable`, or null.
  const VariableSlots* SlotsOf(const Variable& variable) const;
  // ComputeGradients's checks around `gradients`, which maps the
  // variables' handles to their gradients.
  std::vector<GradAndVar> GradientsOf(
      const Scope& scope, const Output& loss, std::vector<std::shared_ptr<Variable>> var_list,
      const std::function<StatusOr<std::vector<Output>>(const std::vector<Output>&)>& gradients);
  // Minimize's second half: ApplyGradients unless no variable got a gradient.
  Output ApplyComputed(const Scope& scope, const std::vector<GradAndVar>& grads_and_vars,
                       const Output& loss, const std::shared_ptr<Variable>& global_step);
  Status BindGraph(const Scope& scope);
  // The slot `slot_name` of a partitioned variable, or null until every
  // part has it.
  std::shared_ptr<Trackable> PartitionedSlot(const PartitionedVariable& variable,
                                             std::string_view slot_name) const;
  void OnSlotRestoreDeferred(const std::shared_ptr<Trackable>& variable,
                             const std::string& slot_name) override;
  // Announces the partitioned slots a restore waits for whose parts now all
  // exist.
  void AnnounceCompletePartitionedSlots();
  Status CheckGradients(const std::vector<GradAndVar>& grads_and_vars) const;

  const std::string type_name_;
  const std::string name_;
  const std::vector<std::string> slot_names_;  // sorted
  std::weak_ptr<Graph> graph_;                 // the graph of the first ApplyGradients
  // By variable. A checkpoint's walks ask for every variable's slots: a
  // tree keyed by (variable, name) cost ~16 cold nodes a question, a hash
  // table two lines.
  std::unordered_map<const Variable*, VariableSlots> slots_;
  std::map<std::string, std::shared_ptr<Variable>, std::less<>> non_slot_;
  // The wholes PartitionedSlot made, so a checkpoint sees one object each.
  mutable std::map<std::pair<const PartitionedVariable*, std::string>,
                   std::shared_ptr<PartitionedVariable>, std::less<>>
      partitioned_slots_;
  // Where the wholes' initializers are built (the scope slots are made in).
  mutable std::optional<Scope> slot_scope_;
  // Partitioned variables whose slot a restore waits for.
  std::vector<std::pair<std::weak_ptr<PartitionedVariable>, std::string>> waiting_partitioned_;
  // Hyperparameter Consts of the current ApplyGradients call.
  std::optional<Scope> hyper_scope_;
  std::map<std::pair<std::string, DataType>, Output> hyper_cache_;
};

// var -= learning_rate * grad.
struct GradientDescentOptions {
  float learning_rate = 0.01f;
  std::string name = "GradientDescent";
};
class GradientDescent : public Optimizer {
 public:
  static std::shared_ptr<GradientDescent> Make(GradientDescentOptions options);
  static std::shared_ptr<GradientDescent> Make(float learning_rate) {
    return Make(GradientDescentOptions{.learning_rate = learning_rate});
  }

 protected:
  void CreateSlots(const Scope&, const std::vector<std::shared_ptr<Variable>>&) override {}
  Output ApplyDense(const Scope& scope, const Output& grad, const Variable& variable) override;
  // ResourceScatterAdd of -learning_rate * rows: only the rows looked up
  // change (repeats add), as TensorFlow 1's GradientDescentOptimizer.
  Output ApplySparse(const Scope& scope, const IndexedSlices& grad,
                     const Variable& variable) override;

 private:
  explicit GradientDescent(GradientDescentOptions options);
  const GradientDescentOptions options_;
};

// Slot "momentum"; see ResourceApplyMomentum for the update.
struct MomentumOptions {
  float learning_rate = 0.01f;
  float momentum = 0.9f;
  bool use_nesterov = false;
  std::string name = "Momentum";
};
class Momentum : public Optimizer {
 public:
  static std::shared_ptr<Momentum> Make(MomentumOptions options);

 protected:
  void CreateSlots(const Scope& root,
                   const std::vector<std::shared_ptr<Variable>>& variables) override;
  Output ApplyDense(const Scope& scope, const Output& grad, const Variable& variable) override;
  // ResourceSparseApplyMomentum of the summed rows.
  Output ApplySparse(const Scope& scope, const IndexedSlices& grad,
                     const Variable& variable) override;

 private:
  explicit Momentum(MomentumOptions options);
  const MomentumOptions options_;
};

// Slots "m" and "v", non-slot variables "beta1_power" and "beta2_power"
// (initially beta1 and beta2, multiplied by them after every step's
// updates); see ResourceApplyAdam for the update. A sparse gradient updates
// as TensorFlow 1's AdamOptimizer does: m = beta1 * m, then m[rows] +=
// (1 - beta1) * g (v alike with g^2), then the whole variable moves by
// lr_t * m / (sqrt(v) + epsilon) -- every row, every step, whether it was
// looked up or not. LazyAdam below touches only the rows looked up.
struct AdamOptions {
  float learning_rate = 0.001f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  bool use_nesterov = false;
  std::string name = "Adam";
};
class Adam : public Optimizer {
 public:
  static std::shared_ptr<Adam> Make(AdamOptions options = {});

 protected:
  void CreateSlots(const Scope& root,
                   const std::vector<std::shared_ptr<Variable>>& variables) override;
  Output ApplyDense(const Scope& scope, const Output& grad, const Variable& variable) override;
  Output ApplySparse(const Scope& scope, const IndexedSlices& grad,
                     const Variable& variable) override;
  std::vector<Output> Finish(const Scope& scope, const std::vector<Output>& update_ops) override;

  Adam(AdamOptions options, std::string type_name);
  const AdamOptions& options() const { return options_; }
  // lr * sqrt(1 - beta2_power) / (1 - beta1_power) in `dtype`, as ops.
  Output BiasCorrectedRate(const Scope& scope, DataType dtype);

 private:
  const AdamOptions options_;
};

// Adam whose sparse updates touch only the rows looked up
// (tf.contrib.opt.LazyAdamOptimizer): for those rows m = beta1 * m +
// (1 - beta1) * g, v alike, var -= lr_t * m / (sqrt(v) + epsilon); other
// rows' m and v do not decay. Faster on large embedding tables and
// different from Adam's numbers; dense gradients update as Adam's. Slots and
// checkpoint keys are Adam's, so either restores the other's checkpoint.
class LazyAdam : public Adam {
 public:
  static std::shared_ptr<LazyAdam> Make(AdamOptions options = {});

 protected:
  Output ApplySparse(const Scope& scope, const IndexedSlices& grad,
                     const Variable& variable) override;

 private:
  explicit LazyAdam(AdamOptions options);
};

// Slots "rms" (initially ones) and "momentum"; see ResourceApplyRMSProp for
// the update (TensorFlow 1's RMSPropOptimizer, not centered).
struct RMSPropOptions {
  float learning_rate = 0.001f;
  float decay = 0.9f;
  float momentum = 0.0f;
  float epsilon = 1e-10f;
  std::string name = "RMSProp";
};
class RMSProp : public Optimizer {
 public:
  static std::shared_ptr<RMSProp> Make(RMSPropOptions options = {});

 protected:
  void CreateSlots(const Scope& root,
                   const std::vector<std::shared_ptr<Variable>>& variables) override;
  Output ApplyDense(const Scope& scope, const Output& grad, const Variable& variable) override;
  // ResourceSparseApplyRMSProp of the summed rows.
  Output ApplySparse(const Scope& scope, const IndexedSlices& grad,
                     const Variable& variable) override;

 private:
  explicit RMSProp(RMSPropOptions options);
  const RMSPropOptions options_;
};

// Slot "accumulator" (initially initial_accumulator_value); see
// ResourceApplyAdagrad for the update, ResourceSparseApplyAdagrad of the
// summed rows for a sparse gradient (TensorFlow 1's AdagradOptimizer).
struct AdagradOptions {
  float learning_rate = 0.001f;
  double initial_accumulator_value = 0.1;  // > 0
  std::string name = "Adagrad";
};
class Adagrad : public Optimizer {
 public:
  static std::shared_ptr<Adagrad> Make(AdagradOptions options = {});

 protected:
  void CreateSlots(const Scope& root,
                   const std::vector<std::shared_ptr<Variable>>& variables) override;
  Output ApplyDense(const Scope& scope, const Output& grad, const Variable& variable) override;
  Output ApplySparse(const Scope& scope, const IndexedSlices& grad,
                     const Variable& variable) override;

 private:
  explicit Adagrad(AdagradOptions options);
  const AdagradOptions options_;
};

// Follow-the-regularized-leader (TensorFlow 1's FtrlOptimizer without
// l2 shrinkage or beta): slots "accum" (initially initial_accumulator_value)
// and "linear"; see ResourceApplyFtrl for the update. Bad options
// (learning_rate_power > 0, negative l1, l2 or initial accumulator) are an
// InvalidArgument at the first ApplyGradients.
struct FtrlOptions {
  float learning_rate = 0.001f;
  float learning_rate_power = -0.5f;
  double initial_accumulator_value = 0.1;
  float l1 = 0.0f;
  float l2 = 0.0f;
  std::string name = "Ftrl";
};
class Ftrl : public Optimizer {
 public:
  static std::shared_ptr<Ftrl> Make(FtrlOptions options = {});

 protected:
  void CreateSlots(const Scope& root,
                   const std::vector<std::shared_ptr<Variable>>& variables) override;
  Output ApplyDense(const Scope& scope, const Output& grad, const Variable& variable) override;
  Output ApplySparse(const Scope& scope, const IndexedSlices& grad,
                     const Variable& variable) override;

 private:
  explicit Ftrl(FtrlOptions options);
  const FtrlOptions options_;
};

}  // namespace ckflow

#endif  // CKFLOW_OPS_OPTIMIZERS_H_
