// GradientTape: gradients in an eager scope (graph/eager.h), as TensorFlow's
// tf.GradientTape.
//
//   Scope scope = Scope::NewEagerScope();
//   GradientTape tape(scope);                      // records from here
//   Output loss = losses::MeanSquaredError(scope, y, (*model)(scope, x));
//   CKFLOW_ASSIGN_OR_RETURN(std::vector<Output> grads,
//                           tape.Gradient(loss, model->TrainableVariables()));
//
// The tape records every op its scope's graph runs while it records. Gradient
// replays them backwards with the registered graph gradient functions
// (ops/gradients.h), which build their ops on the eager scope and so run at
// once: the same functions, rules and messages as AddGradients, with the
// recording taking the place of the graph's node order.
//
// Recording stops at the first Gradient call (or destruction); Gradient may
// then be called again, with other targets or sources. The tape keeps the
// recorded ops and their values alive until it is destroyed; then each op
// drops its inputs (EagerContext::HoldInputs), so that what the caller keeps
// (the loss, the gradients) no longer keeps the values it came from.
//
// Thread safety: one thread, the eager scope's.

#ifndef CKFLOW_OPS_GRADIENT_TAPE_H_
#define CKFLOW_OPS_GRADIENT_TAPE_H_

#include <memory>
#include <vector>

#include "base/status.h"
#include "graph/eager.h"
#include "graph/graph.h"
#include "ops/variables.h"

namespace ckflow {

class GradientTape : public EagerObserver {
 public:
  // Starts recording. A scope that is not eager records nothing, and
  // Gradient then fails with FailedPrecondition.
  explicit GradientTape(const Scope& scope);
  ~GradientTape() override;
  GradientTape(const GradientTape&) = delete;
  GradientTape& operator=(const GradientTape&) = delete;

  // d target / d source for each of `sources` (a variable's handle stands
  // for the variable, as in AddGradients), in order; an invalid Output
  // where target does not depend on the source through recorded
  // differentiable ops. Errors as AddGradients's.
  StatusOr<std::vector<Output>> Gradient(const Output& target, const std::vector<Output>& sources);
  StatusOr<std::vector<Output>> Gradient(const Output& target,
                                         const std::vector<std::shared_ptr<Variable>>& variables);

  void OnExecuted(const std::shared_ptr<Node>& node) override;

 private:
  void StopRecording();

  Scope scope_;
  bool recording_ = false;
  std::vector<std::shared_ptr<Node>> recorded_;  // in execution order
};

}  // namespace ckflow

#endif  // CKFLOW_OPS_GRADIENT_TAPE_H_
