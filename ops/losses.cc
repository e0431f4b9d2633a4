#include "ops/losses.h"

#include <string_view>

#include "ops/math_ops.h"
#include "ops/nn_ops.h"

namespace ckflow::losses {
namespace {

// The loss's name scope, or an error sticky in `scope` if labels and
// predictions cannot be compared element by element (broadcasting a
// [batch, 1] against a [batch] would silently compute a [batch, batch] loss).
bool CheckPair(const Scope& scope, std::string_view loss, const Output& labels,
               std::string_view what, const Output& predictions) {
  if (!scope.ok()) return false;
  if (!labels.valid() || !predictions.valid()) {
    scope.UpdateStatus(InvalidArgumentError(loss, ": labels or ", what, " are invalid"));
    return false;
  }
  if (labels.dtype() != predictions.dtype() ||
      !labels.shape().IsCompatibleWith(predictions.shape())) {
    scope.UpdateStatus(InvalidArgumentError(
        loss, ": labels ", labels.name(), " are ", DataTypeName(labels.dtype()),
        labels.shape().ToString(), " but ", what, " ", predictions.name(), " are ",
        DataTypeName(predictions.dtype()), predictions.shape().ToString(),
        "; they must have the same dtype and shape"));
    return false;
  }
  return true;
}

}  // namespace

Output MeanSquaredError(const Scope& scope, Output labels, Output predictions) {
  if (!CheckPair(scope, "MeanSquaredError", labels, "predictions", predictions)) return Output();
  Scope s = scope.NewSubScope("mean_squared_error");
  return ops::Mean(s, ops::SquaredDifference(s, predictions, labels));
}

Output SoftmaxCrossEntropyWithLogits(const Scope& scope, Output labels, Output logits) {
  if (!CheckPair(scope, "SoftmaxCrossEntropyWithLogits", labels, "logits", logits)) {
    return Output();
  }
  Scope s = scope.NewSubScope("softmax_cross_entropy_loss");
  return ops::Mean(s, ops::SoftmaxCrossEntropyWithLogits(s, logits, labels).loss);
}

Output SparseSoftmaxCrossEntropyWithLogits(const Scope& scope, Output labels, Output logits) {
  if (!scope.ok()) return Output();
  if (!labels.valid() || !logits.valid()) {
    scope.UpdateStatus(
        InvalidArgumentError("SparseSoftmaxCrossEntropyWithLogits: labels or logits are invalid"));
    return Output();
  }
  const PartialShape& l = labels.shape();
  const PartialShape& z = logits.shape();
  if (l.known_rank() && z.known_rank() &&
      (l.rank() != 1 || z.rank() != 2 ||
       (l.dim(0) >= 0 && z.dim(0) >= 0 && l.dim(0) != z.dim(0)))) {
    scope.UpdateStatus(InvalidArgumentError("SparseSoftmaxCrossEntropyWithLogits: labels ",
                                            labels.name(), " are ", l.ToString(), " but logits ",
                                            logits.name(), " are ", z.ToString(),
                                            "; they must be [batch] and [batch, classes]"));
    return Output();
  }
  Scope s = scope.NewSubScope("sparse_softmax_cross_entropy_loss");
  return ops::Mean(s, ops::SparseSoftmaxCrossEntropyWithLogits(s, logits, labels).loss);
}

Output SigmoidCrossEntropyWithLogits(const Scope& scope, Output labels, Output logits) {
  if (!CheckPair(scope, "SigmoidCrossEntropyWithLogits", labels, "logits", logits)) {
    return Output();
  }
  Scope s = scope.NewSubScope("sigmoid_cross_entropy_loss");
  return ops::Mean(s, ops::SigmoidCrossEntropyWithLogits(s, logits, labels));
}

}  // namespace ckflow::losses
