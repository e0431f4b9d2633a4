#include "ops/core_layers.h"

#include <utility>
#include <vector>

#include "ops/array_ops.h"
#include "ops/layers_internal.h"
#include "ops/nn_ops.h"

namespace ckflow {
namespace {

// Flatten's target shape for `shape`, or empty if neither the non-batch
// dimensions nor the batch are known.
std::vector<int64_t> FlattenedShape(const PartialShape& shape) {
  if (shape.rank() == 1) return {-1, 1};
  int64_t rest = 1;
  for (int i = 1; i < shape.rank(); ++i) {
    if (shape.dim(i) < 0)
      return shape.dim(0) >= 0 ? std::vector<int64_t>{shape.dim(0), -1} : std::vector<int64_t>{};
    rest *= shape.dim(i);
  }
  return {-1, rest};
}

}  // namespace

std::shared_ptr<ReLU> ReLU::Make(std::string name) {
  return std::shared_ptr<ReLU>(new ReLU(std::move(name)));
}

Output ReLU::Call(const Scope& scope, Output input) { return ops::Relu(scope, input); }

std::shared_ptr<Flatten> Flatten::Make(std::string name) {
  return std::shared_ptr<Flatten>(new Flatten(std::move(name)));
}

Status Flatten::Build(const Scope&, const Output& input) {
  const PartialShape& shape = input.shape();
  if (!shape.known_rank() || shape.rank() == 0) {
    return InvalidArgumentError("expects an input of rank >= 1, got ", input.name(), " of shape ",
                                shape.ToString());
  }
  if (FlattenedShape(shape).empty()) {
    return InvalidArgumentError("needs the batch or every other dimension known, got ",
                                input.name(), " of shape ", shape.ToString());
  }
  return OkStatus();
}

Output Flatten::Call(const Scope& scope, Output input) {
  const std::vector<int64_t> shape = FlattenedShape(input.shape());
  if (shape.empty()) {
    // A later call on an input less known than the first's.
    scope.UpdateStatus(InvalidArgumentError(
        "layer '", name(), "': needs the batch or every other dimension known, got ", input.name(),
        " of shape ", input.shape().ToString()));
    return Output();
  }
  return ops::Reshape(scope, input, ops::Const<int64_t>(scope, shape));
}

Dropout::Dropout(double rate, DropoutOptions options)
    : Layer("Dropout", options.name), rate_(rate), options_(std::move(options)) {}

std::shared_ptr<Dropout> Dropout::Make(double rate, DropoutOptions options) {
  return std::shared_ptr<Dropout>(new Dropout(rate, std::move(options)));
}

Status Dropout::Build(const Scope&, const Output& input) {
  if (!(rate_ >= 0 && rate_ < 1)) {
    return InvalidArgumentError("rate must be in [0, 1), got ", rate_);
  }
  return internal::CheckFloatInput(input);
}

Output Dropout::Call(const Scope& scope, Output input) {
  if (!training(scope)) return input;
  return ops::Dropout(scope, input, rate_,
                      {.seed = options_.seed, .noise_shape = options_.noise_shape});
}

}  // namespace ckflow
