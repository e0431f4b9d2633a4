#include "ops/gradient_tape.h"

#include "ops/gradients_internal.h"

namespace ckflow {

GradientTape::GradientTape(const Scope& scope) : scope_(scope) {
  if (scope_.eager()) {
    scope_.eager_context()->AddObserver(this);
    recording_ = true;
  }
}

GradientTape::~GradientTape() {
  StopRecording();
  for (const auto& node : recorded_) EagerContext::ReleaseInputs(*node);
}

void GradientTape::StopRecording() {
  if (!recording_) return;
  scope_.eager_context()->RemoveObserver(this);
  recording_ = false;
}

void GradientTape::OnExecuted(const std::shared_ptr<Node>& node) {
  EagerContext::HoldInputs(*node);
  recorded_.push_back(node);
}

StatusOr<std::vector<Output>> GradientTape::Gradient(const Output& target,
                                                     const std::vector<Output>& sources) {
  if (!scope_.eager()) {
    return FailedPreconditionError(
        "GradientTape records eager ops only; in a graph scope use AddGradients");
  }
  // The gradient's own ops are not part of what is differentiated.
  StopRecording();
  std::vector<const Node*> order;
  order.reserve(recorded_.size());
  for (const auto& node : recorded_) order.push_back(node.get());
  return internal::GradientsAlong(scope_, {target}, sources, order);
}

StatusOr<std::vector<Output>> GradientTape::Gradient(
    const Output& target, const std::vector<std::shared_ptr<Variable>>& variables) {
  std::vector<Output> handles;
  handles.reserve(variables.size());
  for (const auto& v : variables) {
    if (v == nullptr) return InvalidArgumentError("GradientTape::Gradient: a variable is null");
    handles.push_back(v->handle());
  }
  return Gradient(target, handles);
}

}  // namespace ckflow
